//! Halt, resume and health tell one story: the trading state `/api/health` and
//! the risk manager's row report is the engine's, at once; resume leaves the halted strategies
//! stopped and one audited action restarts exactly those (remembered across a restart); every
//! health component has a measured latency and a last healthy time.

use crate::helpers::*;
use serde_json::{json, Value};
use std::time::Duration;

fn risk_manager(rows: &Value) -> Value {
    rows.as_array().unwrap().iter().find(|r| r["name"] == "risk_manager").unwrap().clone()
}

fn status_of(watchlist: &Value, symbol: &str) -> String {
    let row = watchlist.as_array().unwrap().iter().find(|r| r["symbol"] == symbol).unwrap();
    row["strategy_status"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn health_reports_the_halt_at_once_and_resume_at_once() {
    // Probes every minute: what the health endpoints show of the halt cannot come from a probe.
    let app = spawn_app_with(|c| c.health_probe_interval = Duration::from_secs(60)).await;
    assert_eq!(app.get("/api/health").await.data()["trading_state"], "ACTIVE");

    app.post("/api/risk/emergency-halt", ADMIN_TOKEN, json!({"reason": "runaway"})).await.assert_ok(200);
    let health = app.get("/api/health").await;
    assert_eq!(health.data()["trading_state"], "HALTED", "{}", health.body);
    assert_eq!(health.data()["status"], "HEALTHY", "a halt is deliberate, not a fault: {}", health.body);
    let rows = app.get("/api/health/components").await;
    assert_eq!(risk_manager(rows.data())["detail"]["trading_state"], "HALTED", "{}", rows.body);

    app.post("/api/risk/resume", ADMIN_TOKEN, json!({"reason": "fixed"})).await.assert_ok(200);
    assert_eq!(app.get("/api/health").await.data()["trading_state"], "ACTIVE");
    let rows = app.get("/api/health/components").await;
    assert_eq!(risk_manager(rows.data())["detail"]["trading_state"], "ACTIVE");
}

#[tokio::test]
async fn resume_leaves_halted_strategies_stopped_and_one_action_restarts_exactly_those() {
    let app = spawn_app().await;
    let symbols: Vec<String> = app.market_symbols(4).await.into_iter().map(|(s, _)| s).collect();
    for s in &symbols {
        app.post("/api/radar/watch", ADMIN_TOKEN, json!({"symbol": s})).await.assert_ok(200);
    }
    // Stopped by hand before the halt: not the halt's to restart.
    let done = json!({"symbol": symbols[3], "reason": "done for today"});
    app.post("/api/watchlist/stop", ADMIN_TOKEN, done).await.assert_ok(200);

    app.post("/api/risk/emergency-halt", ADMIN_TOKEN, json!({"reason": "runaway"})).await.assert_ok(200);
    let mut halted: Vec<String> = symbols[..3].to_vec();
    halted.sort();
    assert_eq!(app.get("/api/risk/state").await.data()["stopped_by_halt"], json!(halted));
    // Not while halted; refused and audited; nothing changes.
    let early = app.post("/api/risk/resume-strategies", ADMIN_TOKEN, json!({"reason": "go"})).await;
    early.assert_error(409, "EMERGENCY_HALT_ACTIVE");

    // Remembered across a restart of the service.
    let app = app.restart().await;
    assert_eq!(app.get("/api/risk/state").await.data()["stopped_by_halt"], json!(halted));

    let resumed = app.post("/api/risk/resume", ADMIN_TOKEN, json!({"reason": "fixed"})).await;
    assert_eq!(resumed.assert_ok(200)["trading_state"], "ACTIVE");
    let watchlist = app.get("/api/watchlist").await;
    for s in &symbols {
        assert_eq!(status_of(watchlist.data(), s), "Closed", "resume leaves {s} stopped");
    }
    assert_eq!(app.get("/api/risk/state").await.data()["stopped_by_halt"], json!(halted));

    // Since the halt: one restarted by hand, one blocked.
    let by_hand = &halted[0];
    app.post("/api/watchlist/restart", ADMIN_TOKEN, json!({"symbol": by_hand})).await.assert_ok(200);
    let blocked = &halted[1];
    let block = json!({"symbol": blocked, "reason": "news", "block_scope": "TODAY"});
    app.post("/api/radar/block", ADMIN_TOKEN, block).await.assert_ok(200);
    assert_eq!(app.get("/api/risk/state").await.data()["stopped_by_halt"], json!([blocked, halted[2]]));

    let reply = app.post("/api/risk/resume-strategies", ADMIN_TOKEN, json!({"reason": "all clear"})).await;
    let data = reply.assert_ok(200).clone();
    assert_eq!(
        data["restarted"],
        json!([{"symbol": halted[2], "strategy_status": "Active", "polling_status": "POLLING"}]),
        "{data}"
    );
    assert_eq!(data["skipped"].as_array().unwrap().len(), 1, "{data}");
    assert_eq!(data["skipped"][0]["symbol"], json!(blocked));
    assert!(data["skipped"][0]["reason"].as_str().unwrap().contains("blocked"), "{data}");

    let watchlist = app.get("/api/watchlist").await;
    assert_eq!(status_of(watchlist.data(), &halted[2]), "Active");
    assert_eq!(status_of(watchlist.data(), by_hand), "Active");
    assert_eq!(status_of(watchlist.data(), blocked), "Closed");
    assert_eq!(status_of(watchlist.data(), &symbols[3]), "Closed", "stopped by hand before the halt: left alone");
    assert_eq!(app.get("/api/risk/state").await.data()["stopped_by_halt"], json!([]));
    // Done: repeating it restarts nothing.
    let again = app.post("/api/risk/resume-strategies", ADMIN_TOKEN, json!({"reason": "again"})).await;
    assert_eq!(again.assert_ok(200).clone(), json!({"restarted": [], "skipped": []}));

    let audit = app.get("/api/audit?action=risk.resume_strategies").await;
    let outcomes: Vec<&str> = audit.data().as_array().unwrap().iter().map(|r| r["outcome"].as_str().unwrap()).collect();
    assert_eq!(outcomes, vec!["OK", "OK", "EMERGENCY_HALT_ACTIVE"], "{}", audit.body);
    assert_eq!(audit.data()[1]["request"]["reason"], "all clear");
    // A viewer may not.
    let viewer = app.token("watcher", "viewer").await;
    app.post("/api/risk/resume-strategies", &viewer, json!({"reason": "x"})).await.assert_error(403, "FORBIDDEN");
}

#[tokio::test]
async fn every_component_has_a_measured_latency_and_a_last_ok_time() {
    let app = spawn_app_with(|c| c.health_probe_interval = Duration::from_millis(100)).await;
    // The first probe runs before the API listens: it says why the API has no latency yet.
    let mut rows = Value::Null;
    for _ in 0..100 {
        rows = app.get("/api/health/components").await.data().clone();
        if rows.as_array().unwrap().iter().all(|r| r["latency_ms"].is_number()) {
            break;
        }
        let api = rows.as_array().unwrap().iter().find(|r| r["name"] == "api").unwrap();
        if api["latency_ms"].is_null() {
            assert!(api["unprobed_reason"].as_str().is_some_and(|r| !r.is_empty()), "{api}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for row in rows.as_array().unwrap() {
        let name = row["name"].as_str().unwrap();
        assert_eq!(row["status"], "HEALTHY", "{row}");
        // Rounded to the microsecond: the in-process cache's probe (a lock) may take less.
        let in_process = name == "cache" && row["detail"]["backend"] == "memory";
        let latency = row["latency_ms"].as_f64().unwrap_or(-1.0);
        assert!(
            (latency > 0.0 || in_process && latency == 0.0) && latency < 2000.0,
            "{name} has a measured latency: {row}"
        );
        assert!(row["last_ok_at"].as_str().is_some_and(|t| t.ends_with('Z')), "{name} has a last ok time: {row}");
        assert_eq!(row["unprobed_reason"], Value::Null, "{row}");
    }
}
