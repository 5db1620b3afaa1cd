//! Health probes: latency, last_ok_at, and the cache going away and coming back.

use crate::helpers::*;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::copy_bidirectional;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

#[tokio::test]
async fn components_report_measured_probes() {
    // The service clock is driven: probes stamp their last success with it, and uptime is read
    // on it.
    let clock = tradeops_core::ManualClock::new(tradeops_core::time::parse_ts("2026-11-25T15:00:00Z").unwrap());
    let app = spawn_app_with_clock(clock.clone(), |_| {}).await;
    clock.advance(chrono::Duration::seconds(90));
    let probed_at = "2026-11-25T15:01:30.000Z";
    wait_for(&app, "database", |c| c["last_ok_at"] == probed_at).await;
    wait_for(&app, "cache", |c| c["last_ok_at"] == probed_at).await;
    let reply = app.get("/api/health/components").await;
    let rows = reply.assert_ok(200).as_array().unwrap().clone();
    let names: Vec<_> = rows.iter().map(|r| r["name"].as_str().unwrap()).collect();
    let postgres = std::env::var("TRADEOPS_TEST_DATABASE_URL").is_ok_and(|u| !u.is_empty());
    let mut expected = vec!["api", "data_broker", "execution_broker", "risk_manager", "cache", "database"];
    if postgres {
        expected.push("cluster"); // CONTRACT §10: on PostgreSQL only
    }
    assert_eq!(names, expected);
    let by = |n: &str| rows.iter().find(|r| r["name"] == n).unwrap().clone();
    if postgres {
        // This service holds the engine's term: it is the leader, and a member of kind serve.
        let cluster = wait_for(&app, "cluster", |c| {
            c["status"] == "HEALTHY"
                && c["detail"]["members"].as_array().is_some_and(|m| m.iter().any(|m| m["kind"] == "serve"))
        })
        .await;
        let detail = &cluster["detail"];
        assert_eq!(detail["role"], "leader");
        assert_eq!(detail["leader"], detail["node"]);
        assert!(detail["epoch"].as_i64().unwrap() >= 1, "{detail}");
        assert!(detail["last_heartbeat"].is_string(), "the term was taken with a renewal time: {detail}");
        let me = detail["members"].as_array().unwrap().iter().find(|m| m["node"] == detail["node"]).cloned();
        assert_eq!(me.expect("this service is a member")["kind"], "serve");
    }
    let db = by("database");
    assert_eq!(db["status"], "HEALTHY");
    // A real round trip: more than nothing, less than the probe's 2 s bound.
    let latency = db["latency_ms"].as_f64().unwrap();
    assert!(latency > 0.0 && latency < 2000.0, "{latency}");
    assert_eq!(db["last_ok_at"], probed_at);
    let backend =
        if std::env::var("TRADEOPS_TEST_DATABASE_URL").is_ok_and(|u| !u.is_empty()) { "postgresql" } else { "sqlite" };
    assert_eq!(db["detail"]["backend"], backend);
    let cache = by("cache");
    assert_eq!(cache["status"], "HEALTHY");
    let latency = cache["latency_ms"].as_f64().unwrap();
    assert!((0.0..2000.0).contains(&latency), "{latency}");
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
    assert_eq!(by("api")["detail"]["uptime_seconds"], 90, "uptime on the service clock");
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
