//! Durable data downloads.

use crate::helpers::*;
use serde_json::{json, Value};
use tradeops_store::DataRepository;

async fn wait_done(app: &TestApp, id: &str) -> Value {
    for _ in 0..300 {
        let job = app.get(&format!("/api/data/downloads/{id}")).await.data().clone();
        if job["status"] == "COMPLETED" || job["status"] == "FAILED" {
            return job;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    panic!("download {id} never finished");
}

/// Any listed symbol will do.
async fn a_symbol(app: &TestApp) -> String {
    app.market_symbols(1).await.remove(0).0
}

#[tokio::test]
async fn a_download_runs_to_completion_and_stores_the_markets_bars() {
    let app = spawn_app().await;
    let symbol = a_symbol(&app).await;
    let body = json!({"symbol": symbol, "start": "2026-11-18T00:00:00-05:00", "end": "2026-11-20T05:00:00Z"});
    let queued = app.post("/api/data/download", ADMIN_TOKEN, body).await;
    let data = queued.assert_ok(202).clone();
    assert_eq!(data["status"], "QUEUED");
    let id = data["request_id"].as_str().unwrap().to_string();
    let done = wait_done(&app, &id).await;
    assert_eq!(done["status"], "COMPLETED", "{done}");
    assert_eq!(done["progress"], 1.0);
    assert_eq!(done["bars"], 2 * 1440, "two New York days of minute bars");
    assert_eq!(done["start"], "2026-11-18T05:00:00.000Z", "normalised to UTC");
    let finished = tradeops_core::time::parse_ts(done["finished_at"].as_str().unwrap()).unwrap();
    assert!(finished >= tradeops_core::time::parse_ts(done["created_at"].as_str().unwrap()).unwrap());

    let db = tradeops_store::Database::open(&app.config.database_url).await.unwrap();
    let sym = tradeops_core::Symbol::parse(&symbol).unwrap();
    let stored = db.bars(&sym, "1m", 0, i64::MAX).await.unwrap();
    db.close().await;
    let market =
        tradeops_brokers::simulated::SimulatedMarket::new(app.config.sim.seed, app.config.sim.symbols as usize);
    let start = tradeops_core::time::parse_ts("2026-11-18T05:00:00Z").unwrap();
    let end = tradeops_core::time::parse_ts("2026-11-20T05:00:00Z").unwrap();
    let expected = market.bars_sync(&sym, tradeops_core::market::Timeframe::Minute, start, end).unwrap();
    assert_eq!(stored, expected, "the database holds exactly the market's bars");

    let list = app.get("/api/data/downloads").await;
    assert_eq!(list.data()[0], done, "the list shows the job as it ended");
}

#[tokio::test]
async fn a_download_never_returns_bars_after_the_markets_present() {
    let app = spawn_app().await;
    let symbol = a_symbol(&app).await;
    // The market's present is 10:01 New York (finding a symbol took a scan); the range reaches
    // into the evening (within the day of slack the range check allows), where the simulated
    // market could generate bars.
    let now = tradeops_core::Clock::now(&app.market);
    assert_eq!(now, tradeops_core::time::parse_ts("2026-11-20T15:01:00Z").unwrap());
    for (timeframe, expected) in [("1m", 1440 + 10 * 60 + 1), ("1d", 1)] {
        let body = json!({"symbol": symbol, "start": "2026-11-19T00:00:00-05:00", "end": "2026-11-20T23:00:00-05:00",
                          "timeframe": timeframe});
        let id = app.post("/api/data/download", ADMIN_TOKEN, body).await.assert_ok(202)["request_id"]
            .as_str()
            .unwrap()
            .to_string();
        let done = wait_done(&app, &id).await;
        assert_eq!(done["status"], "COMPLETED", "{done}");
        let db = tradeops_store::Database::open(&app.config.database_url).await.unwrap();
        let sym = tradeops_core::Symbol::parse(&symbol).unwrap();
        let stored = db.bars(&sym, timeframe, 0, i64::MAX).await.unwrap();
        db.close().await;
        let span = if timeframe == "1m" { chrono::Duration::minutes(1) } else { chrono::Duration::days(1) };
        assert!(stored.iter().all(|b| b.start + span <= now), "{timeframe}: a bar ends after the present");
        // Thursday's whole day, and Friday up to 10:01 (minute bars) or nothing of it (its daily
        // bar has not closed).
        assert_eq!(done["bars"], expected, "{timeframe}: {done}");
        assert_eq!(stored.len() as u64, done["bars"].as_u64().unwrap());
    }
}

#[tokio::test]
async fn several_downloads_run_side_by_side() {
    let app = spawn_app().await;
    let symbols = app.market_symbols(3).await;
    let mut ids = Vec::new();
    for (s, _) in &symbols {
        let body =
            json!({"symbol": s, "start": "2026-01-01T00:00:00Z", "end": "2026-11-01T00:00:00Z", "timeframe": "1d"});
        ids.push(
            app.post("/api/data/download", ADMIN_TOKEN, body).await.assert_ok(202)["request_id"]
                .as_str()
                .unwrap()
                .to_string(),
        );
    }
    for id in ids {
        let done = wait_done(&app, &id).await;
        assert_eq!(done["status"], "COMPLETED");
        assert!(done["bars"].as_i64().unwrap() >= 300, "{done}");
    }
}

#[tokio::test]
async fn bad_downloads_are_refused() {
    let app = spawn_app().await;
    let symbol = a_symbol(&app).await;
    for (body, field) in [
        (json!({"symbol": symbol, "start": "yesterday", "end": "2026-11-20T00:00:00Z"}), "start"),
        (json!({"symbol": symbol, "start": "2026-11-20T00:00:00Z", "end": "2026-11-19T00:00:00Z"}), "end"),
        (json!({"symbol": symbol, "start": "2026-11-20T00:00:00Z", "end": "2027-01-01T00:00:00Z"}), "end"),
        (json!({"symbol": symbol, "start": "2020-01-01T00:00:00Z", "end": "2026-11-01T00:00:00Z"}), "end"),
        (
            json!({"symbol": symbol, "start": "2026-11-18T00:00:00Z", "end": "2026-11-19T00:00:00Z", "timeframe": "5m"}),
            "timeframe",
        ),
        (json!({"start": "2026-11-18T00:00:00Z", "end": "2026-11-19T00:00:00Z"}), "symbol"),
    ] {
        let reply = app.post("/api/data/download", ADMIN_TOKEN, body.clone()).await;
        reply.assert_error(400, "VALIDATION_ERROR");
        assert_eq!(reply.body["error"]["detail"]["field"], field, "{body}");
    }
    let unknown = json!({"symbol": "ZZZZZZ", "start": "2026-11-18T00:00:00Z", "end": "2026-11-19T00:00:00Z"});
    app.post("/api/data/download", ADMIN_TOKEN, unknown).await.assert_error(404, "NOT_FOUND");
    let viewer = app.token("v", "viewer").await;
    let ok = json!({"symbol": symbol, "start": "2026-11-18T00:00:00Z", "end": "2026-11-19T00:00:00Z"});
    app.post("/api/data/download", &viewer, ok).await.assert_error(403, "FORBIDDEN");
    app.get_as("/api/data/downloads", &viewer).await.assert_ok(200);
    assert_eq!(app.get("/api/data/downloads").await.body["meta"]["count"], 0, "refusals queue nothing");
    app.get("/api/data/downloads/nope").await.assert_error(404, "NOT_FOUND");
}

#[tokio::test]
async fn a_job_interrupted_by_a_crash_resumes_and_never_stays_running() {
    let app = spawn_app().await;
    let symbol = a_symbol(&app).await;
    let mut app = app;
    app.stop().await;
    // What a crash mid-job leaves behind: a RUNNING job, part-way; and one of a symbol the
    // market no longer lists, which cannot resume.
    let db = tradeops_store::Database::open(&app.config.database_url).await.unwrap();
    let job = tradeops_store::JobRecord {
        request_id: "dl-crashed".into(),
        symbol: symbol.clone(),
        timeframe: "1m".into(),
        start: tradeops_core::time::to_epoch_ms(&tradeops_core::time::parse_ts("2026-11-18T05:00:00Z").unwrap()),
        end: tradeops_core::time::to_epoch_ms(&tradeops_core::time::parse_ts("2026-11-19T05:00:00Z").unwrap()),
        status: "RUNNING".into(),
        progress: 0.4,
        bars: 576,
        error: None,
        requested_by: "admin".into(),
        created_at: 0,
        started_at: Some(0),
        finished_at: None,
    };
    db.insert_job(&job).await.unwrap();
    let delisted = tradeops_store::JobRecord { request_id: "dl-delisted".into(), symbol: "ZZZZZZ".into(), ..job };
    db.insert_job(&delisted).await.unwrap();
    db.close().await;
    let app = app.restart().await;
    let done = wait_done(&app, "dl-crashed").await;
    assert_eq!((done["status"].as_str(), done["bars"].as_i64()), (Some("COMPLETED"), Some(1440)));
    let failed = wait_done(&app, "dl-delisted").await;
    assert_eq!(failed["status"], "FAILED", "{failed}");
    assert!(failed["error"].as_str().unwrap().contains("ZZZZZZ"), "the error names the cause: {failed}");
    assert!(failed["finished_at"].is_string());
}

const CSV: &str =
    "Date,Open,High,Low,Close,Volume\n2026-11-17,10,11,9.5,10.5,1000\n2026-11-18,10.5,12,10.25,11.75,2500\n";

async fn stored(app: &TestApp, symbol: &str) -> usize {
    let db = tradeops_store::Database::open(&app.config.database_url).await.unwrap();
    let n = db.bars(&tradeops_core::Symbol::parse(symbol).unwrap(), "1d", 0, i64::MAX).await.unwrap().len();
    db.close().await;
    n
}

#[tokio::test]
async fn csv_import_stores_all_or_nothing() {
    let app = spawn_app().await;
    let post = |body: String, content_type: &str, query: &str| {
        app.client
            .post(app.url(&format!("/api/data/import{query}")))
            .bearer_auth(ADMIN_TOKEN)
            .header("content-type", content_type)
            .body(body)
    };
    let ok = app.raw(post(CSV.into(), "text/csv", "?symbol=real&timeframe=1d")).await;
    assert_eq!(ok.assert_ok(200)["bars"], 2);
    assert_eq!(ok.data()["symbol"], "REAL");
    assert_eq!(stored(&app, "REAL").await, 2);

    let bad = format!("{CSV}2026-11-19,11,10,12,11,100\n");
    let refused = app.raw(post(bad, "text/csv", "?symbol=other")).await;
    refused.assert_error(400, "VALIDATION_ERROR");
    assert_eq!(refused.body["error"]["detail"]["line"], 4);
    assert_eq!(stored(&app, "OTHER").await, 0, "nothing of a bad file is stored");

    app.raw(post(CSV.into(), "application/json", "?symbol=other")).await.assert_error(400, "VALIDATION_ERROR");
    app.raw(post(CSV.into(), "text/csv", "?symbol=not%20ok")).await.assert_error(400, "VALIDATION_ERROR");
    app.raw(post(CSV.into(), "text/csv", "")).await.assert_error(400, "VALIDATION_ERROR");
    let audit = app.get("/api/audit?action=data.import").await;
    assert_eq!(audit.data()[0]["request"]["content_type"], "text/csv", "the audit keeps the size, not the file");

    // A file far past the 64 KiB limit of other request bodies: 3,000 days of bars, with the
    // quoted header a spreadsheet writes.
    let mut big = String::from("\"Date\",\"Open\",\"High\",\"Low\",\"Close\",\"Volume\"\n");
    let first = chrono::NaiveDate::from_ymd_opt(2010, 1, 4).unwrap();
    for i in 0..3_000 {
        big.push_str(&format!("{},10.00,11.00,9.50,10.50,{}\n", first + chrono::Duration::days(i), 1_000 + i));
    }
    assert!(big.len() > 100 * 1024);
    let ok = app.raw(post(big, "text/csv", "?symbol=LONG&timeframe=1d")).await;
    assert_eq!(ok.assert_ok(200)["bars"], 3_000);
    assert_eq!(stored(&app, "LONG").await, 3_000);
}
