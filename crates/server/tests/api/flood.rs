//! A flood of refused requests cannot fill the disk or starve the operator: refusals
//! before identification are one audit row per source and minute with a count, callers without a
//! valid token have a per-address budget, and old audit rows are pruned. The service clock is a
//! manual one, so minutes and budgets move only when the test says.

use crate::helpers::*;
use reqwest::Method;
use serde_json::{json, Value};
use tradeops_core::ManualClock;

/// Mid-minute, so a burst stays within one minute.
const T0: &str = "2026-11-20T15:00:30Z";

fn clock_at(ts: &str) -> ManualClock {
    ManualClock::new(tradeops_core::time::parse_ts(ts).unwrap())
}

/// `POST /api/risk/emergency-halt` with no token, or with `token`.
async fn halt(app: &TestApp, token: Option<&str>) -> Reply {
    app.call(Method::POST, "/api/risk/emergency-halt", token, Some(json!({"reason": "flood"}))).await
}

async fn audit_rows(app: &TestApp, query: &str) -> Vec<Value> {
    app.get(&format!("/api/audit?{query}")).await.assert_ok(200).as_array().unwrap().clone()
}

#[tokio::test]
async fn a_burst_of_refused_halts_is_one_audit_row_per_minute_with_its_count() {
    let clock = clock_at(T0);
    let app = spawn_app_with_clock(clock.clone(), |_| {}).await;
    for n in 0..20 {
        let token = (n % 2 == 0).then_some("tro_not_a_token");
        halt(&app, token).await.assert_error(401, "UNAUTHORIZED");
    }
    for _ in 0..5 {
        halt(&app, Some("tro_not_a_token")).await.assert_error(429, "RATE_LIMITED");
    }
    assert_eq!(app.get("/api/risk/state").await.data()["trading_state"], "ACTIVE", "a refused halt changes nothing");

    let rows = audit_rows(&app, "outcome=UNAUTHORIZED").await;
    assert_eq!(rows.len(), 1, "{rows:#?}");
    let row = &rows[0];
    assert_eq!(row["actor"], "anonymous");
    assert!(row["role"].is_null());
    assert_eq!(row["action"], "risk.emergency_halt");
    assert_eq!(row["target"], "127.0.0.1");
    // Market time, as every audit row (the test's market clock), with the wall time beside it.
    assert_eq!(row["timestamp"], "2026-11-20T15:00:00.000Z");
    assert_eq!(row["wall_time"], "2026-11-20T15:00:30.000Z");
    assert_eq!(
        row["request"],
        json!({"source": "127.0.0.1", "count": 20, "first": "2026-11-20T15:00:30.000Z", "last": "2026-11-20T15:00:30.000Z"})
    );
    let limited = audit_rows(&app, "outcome=RATE_LIMITED").await;
    assert_eq!(limited.len(), 1, "{limited:#?}");
    assert_eq!(limited[0]["request"]["count"], 5);

    // The next minute is a row of its own (and has refilled the address's budget).
    clock.advance(chrono::Duration::seconds(60));
    for _ in 0..3 {
        halt(&app, None).await.assert_error(401, "UNAUTHORIZED");
    }
    let rows = audit_rows(&app, "outcome=UNAUTHORIZED").await;
    let counts: Vec<_> = rows.iter().map(|r| r["request"]["count"].as_u64().unwrap()).collect();
    assert_eq!(counts, vec![3, 20]);
    assert_eq!(rows[0]["request"]["first"], "2026-11-20T15:01:30.000Z");
}

#[tokio::test]
async fn past_its_address_budget_a_flood_gets_429_while_the_admin_still_halts() {
    let clock = clock_at(T0);
    let app = spawn_app_with_clock(clock.clone(), |c| {
        c.auth.anonymous_rate_limit_per_second = 1;
        c.auth.anonymous_rate_limit_burst = 5;
    })
    .await;
    for _ in 0..5 {
        halt(&app, None).await.assert_error(401, "UNAUTHORIZED");
    }
    let reply = halt(&app, Some("tro_guessing")).await;
    reply.assert_error(429, "RATE_LIMITED");
    assert_eq!(reply.headers.get("retry-after").unwrap(), "1");
    assert_eq!(reply.body["error"]["detail"]["retry_after_seconds"], 1);
    // X-Forwarded-For is a claim of the client's, not trusted unless configured.
    let spoofed = app
        .raw(
            app.client.post(app.url("/api/risk/emergency-halt")).header("x-forwarded-for", "10.9.9.9").json(&json!({})),
        )
        .await;
    spoofed.assert_error(429, "RATE_LIMITED");

    // The address's flood does not touch a valid token's own budget.
    let halted = halt(&app, Some(ADMIN_TOKEN)).await;
    assert_eq!(halted.assert_ok(200)["halted"], true);
    // A second later the address has one request again.
    clock.advance(chrono::Duration::seconds(1));
    halt(&app, None).await.assert_error(401, "UNAUTHORIZED");
    halt(&app, None).await.assert_error(429, "RATE_LIMITED");

    let rows = audit_rows(&app, "action=risk.emergency_halt").await;
    let summary: Vec<_> = rows
        .iter()
        .map(|r| (r["actor"].as_str().unwrap(), r["outcome"].as_str().unwrap(), r["request"]["count"].as_u64()))
        .collect();
    assert_eq!(
        summary,
        vec![("admin", "OK", None), ("anonymous", "RATE_LIMITED", Some(3)), ("anonymous", "UNAUTHORIZED", Some(6))]
    );
}

#[tokio::test]
async fn refusal_counts_reach_the_audit_log_at_shutdown() {
    let app = spawn_app_with_clock(clock_at(T0), |_| {}).await;
    for _ in 0..7 {
        halt(&app, Some("tro_not_a_token")).await.assert_error(401, "UNAUTHORIZED");
    }
    // Stopped before anything read the audit log, inside the same minute.
    let app = app.restart().await;
    let rows = audit_rows(&app, "outcome=UNAUTHORIZED").await;
    assert_eq!(rows.len(), 1, "{rows:#?}");
    assert_eq!(rows[0]["request"]["count"], 7);
}

#[tokio::test]
async fn audit_rows_older_than_the_retention_are_pruned() {
    let clock = clock_at(T0);
    let app = spawn_app_with_clock(clock.clone(), |c| c.audit.retention_days = 30).await;
    app.put_settings(ADMIN_TOKEN, json!({"analytics": {"min_sample_size": 21}})).await.assert_ok(200);
    halt(&app, None).await.assert_error(401, "UNAUTHORIZED");
    assert_eq!(audit_rows(&app, "").await.len(), 2);

    clock.advance(chrono::Duration::days(31));
    app.put_settings(ADMIN_TOKEN, json!({"analytics": {"min_sample_size": 22}})).await.assert_ok(200);
    // The hourly prune is overdue on the service clock; housekeeping runs it within a round.
    let mut rows = Vec::new();
    for _ in 0..100 {
        rows = audit_rows(&app, "").await;
        if rows.len() == 1 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(rows.len(), 1, "{rows:#?}");
    assert_eq!(rows[0]["request"], json!({"analytics": {"min_sample_size": 22}}));
}
