//! Imported reference data (float, sector): `PUT /api/market/reference` (CSV or JSON),
//! `GET /api/market/reference/{symbol}`, `tradeops reference import`, and what radar rows show
//! with and without it — on a simulated market that, like a real feed, knows no float or sector.

use crate::helpers::*;
use reqwest::Method;
use serde_json::{json, Value};
use tradeops_core::Clock;

/// Filters wide open, except the float ceiling given.
fn open_filters(max_float: u64) -> Value {
    json!({"momentum_radar": {"min_percentage_gain": -100, "min_relative_volume": 0, "max_float": max_float,
        "min_volume": 0, "min_price": 0.01, "max_price": 100000}})
}

async fn put_reference(app: &TestApp, token: &str, content_type: &str, query: &str, body: String) -> Reply {
    let req = app
        .client
        .put(app.url(&format!("/api/market/reference{query}")))
        .bearer_auth(token)
        .header("content-type", content_type)
        .body(body);
    app.raw(req).await
}

/// Moves the market to the next minute boundary and returns that scan's rows.
async fn next_scan(app: &TestApp) -> Vec<Value> {
    let boundary = tradeops_core::bars::minute_floor(app.market.now() + chrono::Duration::minutes(1));
    app.market.set(boundary);
    app.wait_for_scan(&tradeops_core::time::format_ts(&boundary)).await.data().as_array().unwrap().clone()
}

fn row<'a>(rows: &'a [Value], symbol: &str) -> &'a Value {
    rows.iter().find(|r| r["symbol"] == symbol).unwrap_or_else(|| panic!("{symbol} not in the scan"))
}

async fn without_reference_data() -> TestApp {
    spawn_app_with(|c| c.sim.reference_data = false).await
}

/// Without reference data rows say `null`; imported values show from the next scan on, and the
/// symbol's reference and a stored scan carry them too.
#[tokio::test]
async fn radar_rows_carry_imported_float_and_sector_and_null_without() {
    let app = without_reference_data().await;
    app.put_settings(ADMIN_TOKEN, open_filters(tradeops_core::radar::NO_FLOAT_CEILING)).await.assert_ok(200);
    let rows = next_scan(&app).await;
    assert!(rows.len() > 2);
    assert!(rows.iter().all(|r| r["float"].is_null() && r["sector"].is_null()), "{:?}", rows[0]);
    let (a, b) = (rows[0]["symbol"].as_str().unwrap().to_string(), rows[1]["symbol"].as_str().unwrap().to_string());

    let csv = format!("symbol,float,sector\n{a},4200000,Technology\n{},,Energy\n", b.to_lowercase());
    let done = put_reference(&app, ADMIN_TOKEN, "text/csv", "", csv).await;
    assert_eq!(done.assert_ok(200)["imported"], 2, "{}", done.body);
    assert_eq!((&done.data()["mode"], &done.data()["total"]), (&json!("replace"), &json!(2)));
    let rows = next_scan(&app).await;
    assert_eq!((&row(&rows, &a)["float"], &row(&rows, &a)["sector"]), (&json!(4_200_000), &json!("Technology")));
    assert_eq!((&row(&rows, &b)["float"], &row(&rows, &b)["sector"]), (&Value::Null, &json!("Energy")));
    let other = rows.iter().find(|r| r["symbol"] != a && r["symbol"] != b).unwrap();
    assert!(other["float"].is_null() && other["sector"].is_null(), "{other}");

    let got = app.get(&format!("/api/market/reference/{}", a.to_lowercase())).await;
    let data = got.assert_ok(200);
    assert_eq!(
        (&data["symbol"], &data["float"], &data["sector"], &data["listed"]),
        (&json!(a), &json!(4_200_000), &json!("Technology"), &json!(true))
    );
    assert_eq!(data["imported"]["float"], 4_200_000);
    let plain = app.get(&format!("/api/market/reference/{}", other["symbol"].as_str().unwrap())).await;
    assert!(plain.assert_ok(200)["imported"].is_null() && plain.data()["float"].is_null());
    app.get("/api/market/reference/NOSUCH").await.assert_error(404, "NOT_FOUND");
    app.get("/api/market/reference/not%20ok").await.assert_error(400, "VALIDATION_ERROR");

    // JSON rows, merged: the other imported symbol stays.
    let body = json!({"rows": [{"symbol": a, "float": 1000, "sector": null}]});
    let merged = app.call(Method::PUT, "/api/market/reference?mode=merge", Some(ADMIN_TOKEN), Some(body)).await;
    assert_eq!((&merged.assert_ok(200)["imported"], &merged.data()["total"]), (&json!(1), &json!(2)));
    let data = app.get(&format!("/api/market/reference/{a}")).await.data().clone();
    assert_eq!((&data["float"], &data["sector"]), (&json!(1000), &Value::Null));
    let audit = app.get("/api/audit?action=market.reference_import").await;
    assert_eq!(audit_rows(&audit.body).len(), 2, "{}", audit.body);
}

/// A float ceiling exists to find low floats: an unknown float does not pass it, unless it is
/// the "no ceiling" maximum; a known (imported) float under it passes.
#[tokio::test]
async fn an_unknown_float_fails_a_float_ceiling() {
    let app = without_reference_data().await;
    app.put_settings(ADMIN_TOKEN, open_filters(tradeops_core::radar::NO_FLOAT_CEILING)).await.assert_ok(200);
    let all = next_scan(&app).await;
    let (a, b) = (all[0]["symbol"].as_str().unwrap().to_string(), all[1]["symbol"].as_str().unwrap().to_string());
    let csv = format!("symbol,float\n{a},5000000\n{b},90000000\n");
    put_reference(&app, ADMIN_TOKEN, "text/csv", "", csv).await.assert_ok(200);
    app.put_settings(ADMIN_TOKEN, open_filters(20_000_000)).await.assert_ok(200);
    let rows = next_scan(&app).await;
    let symbols: Vec<&str> = rows.iter().map(|r| r["symbol"].as_str().unwrap()).collect();
    assert_eq!(symbols, vec![a.as_str()], "only the known float under the ceiling passes");
}

/// Refusals name the line and field, and a refused file changes nothing; only an admin imports.
#[tokio::test]
async fn refused_imports_name_line_and_field_and_change_nothing() {
    let app = spawn_app().await;
    let symbol = app.market_symbols(1).await[0].0.clone();
    let before = app.get(&format!("/api/market/reference/{symbol}")).await.data().clone();
    assert!(before["float"].is_u64() && before["imported"].is_null(), "the simulated market's own: {before}");
    put_reference(&app, ADMIN_TOKEN, "text/csv", "", format!("symbol,float,sector\n{symbol},777,Utilities\n"))
        .await
        .assert_ok(200);

    let cases = [
        (format!("symbol,float,sector\n{symbol},1,A\nBAD SYM,5,Tech\n"), 3, "symbol"),
        (format!("symbol,float,sector\n{symbol},-5,Tech\n"), 2, "float"),
        (format!("symbol,float,sector\n{symbol},1.5,Tech\n"), 2, "float"),
        (format!("symbol,float,sector\nAAA,1,\n{symbol},2,\naaa,3,\n"), 4, "symbol"),
        ("symbol,float,size\nAAA,1,2\n".to_string(), 1, "header"),
    ];
    for (csv, line, field) in cases {
        let refused = put_reference(&app, ADMIN_TOKEN, "text/csv", "", csv.clone()).await;
        refused.assert_error(400, "VALIDATION_ERROR");
        let detail = &refused.body["error"]["detail"];
        assert_eq!((&detail["line"], &detail["field"]), (&json!(line), &json!(field)), "{csv:?}: {}", refused.body);
    }
    let body = json!({"rows": [{"symbol": symbol, "float": 1}, {"symbol": "OK", "float": "many"}]});
    let refused = app.call(Method::PUT, "/api/market/reference", Some(ADMIN_TOKEN), Some(body)).await;
    refused.assert_error(400, "VALIDATION_ERROR");
    assert_eq!(
        (&refused.body["error"]["detail"]["line"], &refused.body["error"]["detail"]["field"]),
        (&json!(2), &json!("float"))
    );
    put_reference(&app, ADMIN_TOKEN, "text/plain", "", "symbol,float\nA,1\n".into())
        .await
        .assert_error(400, "VALIDATION_ERROR");
    put_reference(&app, ADMIN_TOKEN, "text/csv", "?mode=all", "symbol,float\nA,1\n".into())
        .await
        .assert_error(400, "VALIDATION_ERROR");
    let operator = app.token("ops", "operator").await;
    put_reference(&app, &operator, "text/csv", "", "symbol,float\nA,1\n".into()).await.assert_error(403, "FORBIDDEN");

    let after = app.get(&format!("/api/market/reference/{symbol}")).await.data().clone();
    assert_eq!((&after["float"], &after["sector"]), (&json!(777), &json!("Utilities")), "nothing changed: {after}");
    assert_eq!(app.get("/api/market/reference/AAA").await.status, 404, "no row of a refused file was stored");
    let audit = app.get("/api/audit?action=market.reference_import").await;
    let outcomes: Vec<&str> = audit.data().as_array().unwrap().iter().map(|r| r["outcome"].as_str().unwrap()).collect();
    assert!(
        outcomes.contains(&"VALIDATION_ERROR") && outcomes.contains(&"FORBIDDEN") && outcomes.contains(&"OK"),
        "{outcomes:?}"
    );
}

/// `tradeops reference import FILE` stores through the same service: a bad file names its line
/// and stores nothing; a good one is what the API then serves.
#[tokio::test]
async fn the_cli_imports_reference_data() {
    let app = spawn_app().await;
    let symbol = app.market_symbols(1).await[0].0.clone();
    let dir = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_tradeops"))
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("TRADEOPS_DATABASE_URL", &app.config.database_url)
            .current_dir(dir.path())
            .args(args)
            .output()
            .unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    std::fs::write(dir.path().join("bad.csv"), format!("symbol,float,sector\n{symbol},12,Tech\n{symbol}X,-1,Tech\n"))
        .unwrap();
    let (ok, _, err) = run(&["reference", "import", "bad.csv"]);
    assert!(!ok && err.contains("Line 3, float"), "{err}");
    assert!(app.get(&format!("/api/market/reference/{symbol}")).await.data()["imported"].is_null());

    std::fs::write(dir.path().join("ref.csv"), format!("symbol,float,sector\n{symbol},12345,Tech\n")).unwrap();
    let (ok, out, err) = run(&["reference", "import", "ref.csv"]);
    assert!(ok && out.contains("1 symbols imported"), "{out}{err}");
    let data = app.get(&format!("/api/market/reference/{symbol}")).await.data().clone();
    assert_eq!((&data["imported"]["float"], &data["imported"]["sector"]), (&json!(12345), &json!("Tech")), "{data}");
    let audit = app.get("/api/audit?action=market.reference_import").await;
    assert_eq!(audit.data()[0]["actor"], "cli");
}
