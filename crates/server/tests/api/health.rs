//! Health probes: latency, last_ok_at, and the cache going away and coming back.

use crate::helpers::*;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::copy_bidirectional;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

#[tokio::test]
async fn components_report_measured_probes() {
    let app = spawn_app().await;
    let reply = app.get("/api/health/components").await;
    let rows = reply.assert_ok(200).as_array().unwrap().clone();
    let names: Vec<_> = rows.iter().map(|r| r["name"].as_str().unwrap()).collect();
    assert_eq!(names, vec!["api", "data_broker", "execution_broker", "risk_manager", "cache", "database"]);
    let by = |n: &str| rows.iter().find(|r| r["name"] == n).unwrap().clone();
    let db = by("database");
    assert_eq!(db["status"], "HEALTHY");
    assert!(db["latency_ms"].as_f64().unwrap() >= 0.0);
    assert!(db["last_ok_at"].as_str().unwrap().ends_with('Z'));
    let backend =
        if std::env::var("TRADEOPS_TEST_DATABASE_URL").is_ok_and(|u| !u.is_empty()) { "postgresql" } else { "sqlite" };
    assert_eq!(db["detail"]["backend"], backend);
    let cache = by("cache");
    assert_eq!(cache["status"], "HEALTHY");
    assert!(cache["latency_ms"].is_number());
    assert_eq!(cache["detail"]["backend"], if app.config.redis_url.is_some() { "redis" } else { "memory" });
    assert_eq!(by("risk_manager")["detail"]["limits"]["max_daily_loss"], 500.0);
    assert_eq!(by("data_broker")["detail"]["adapter"], "simulated");
    let execution = by("execution_broker");
    assert_eq!(
        (execution["status"].as_str(), execution["detail"]["adapter"].as_str()),
        (Some("HEALTHY"), Some("paper"))
    );
    assert_eq!(execution["detail"]["reconciliation_status"], "OK");
    assert_eq!(by("risk_manager")["detail"]["trading_state"], "ACTIVE");
    assert!(by("api")["detail"]["uptime_seconds"].is_number());
}

#[tokio::test]
async fn risk_manager_reports_settings_changes() {
    let app = spawn_app_with(|c| c.health_probe_interval = Duration::from_millis(100)).await;
    app.put_settings(ADMIN_TOKEN, serde_json::json!({"risk_controls": {"max_daily_loss": 321}})).await.assert_ok(200);
    let risk = wait_for(&app, "risk_manager", |c| c["detail"]["limits"]["max_daily_loss"] == 321.0).await;
    assert_eq!(risk["detail"]["settings_version"], 2);
}

/// A TCP proxy to Redis that can be cut and restored.
struct Proxy {
    url: String,
    up: watch::Sender<bool>,
}

async fn proxy_to(target: String) -> Proxy {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("redis://{}", listener.local_addr().unwrap());
    let (up, up_rx) = watch::channel(true);
    tokio::spawn(async move {
        loop {
            let Ok((mut client, _)) = listener.accept().await else { return };
            if !*up_rx.borrow() {
                continue; // dropped: connection refused in effect
            }
            let mut rx = up_rx.clone();
            let target = target.clone();
            tokio::spawn(async move {
                let Ok(mut server) = TcpStream::connect(target).await else { return };
                tokio::select! {
                    _ = copy_bidirectional(&mut client, &mut server) => {}
                    _ = rx.wait_for(|up| !*up) => {}
                }
            });
        }
    });
    Proxy { url, up }
}

async fn wait_for(app: &TestApp, component: &str, pred: impl Fn(&serde_json::Value) -> bool) -> serde_json::Value {
    for _ in 0..100 {
        let rows = app.get("/api/health/components").await;
        let row = rows.data().as_array().unwrap().iter().find(|r| r["name"] == component).unwrap().clone();
        if pred(&row) {
            return row;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{component} never reached the expected state");
}

#[tokio::test]
async fn redis_outage_degrades_and_recovers() {
    let Some(redis) = std::env::var("TRADEOPS_TEST_REDIS_URL").ok().filter(|u| !u.is_empty()) else {
        return skip("redis_outage_degrades_and_recovers", "set TRADEOPS_TEST_REDIS_URL to run it", REQUIRE_SERVICES);
    };
    let target = redis.trim_start_matches("redis://").trim_end_matches('/').to_string();
    let proxy = Arc::new(proxy_to(target).await);
    let url = proxy.url.clone();
    let app = spawn_app_with(|c| {
        c.redis_url = Some(url);
        c.health_probe_interval = Duration::from_millis(100);
    })
    .await;
    assert_eq!(wait_for(&app, "cache", |c| c["status"] == "HEALTHY").await["detail"]["backend"], "redis");

    proxy.up.send_replace(false);
    let down = wait_for(&app, "cache", |c| c["status"] == "DEGRADED").await;
    assert!(down["detail"]["error"].is_string());
    assert!(down["last_ok_at"].is_string(), "last_ok_at keeps the last healthy time");
    let health = app.get("/api/health").await;
    assert_eq!(health.data()["status"], "DEGRADED");
    // the service keeps working without its cache
    app.get("/api/settings").await.assert_ok(200);
    app.put_settings(ADMIN_TOKEN, serde_json::json!({"analytics": {"min_sample_size": 42}})).await.assert_ok(200);

    proxy.up.send_replace(true);
    wait_for(&app, "cache", |c| c["status"] == "HEALTHY").await;
    assert_eq!(app.get("/api/health").await.data()["status"], "HEALTHY");
}
