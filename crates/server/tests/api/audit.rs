//! The audit log records every sensitive action and every refused attempt.

use crate::helpers::*;
use reqwest::Method;
use serde_json::json;

#[tokio::test]
async fn refused_attempts_are_audited_with_actor_and_outcome() {
    let app = spawn_app().await;
    let viewer = app.token("watcher", "viewer").await;
    app.call(Method::PUT, "/api/settings", None, Some(json!({"analytics": {"min_sample_size": 5}})))
        .await
        .assert_error(401, "UNAUTHORIZED");
    app.put_settings(&viewer, json!({"analytics": {"min_sample_size": 5}})).await.assert_error(403, "FORBIDDEN");
    app.put_settings(ADMIN_TOKEN, json!({"analytics": {"min_sample_size": "five"}}))
        .await
        .assert_error(400, "VALIDATION_ERROR");
    let ok = app.put_settings(ADMIN_TOKEN, json!({"analytics": {"min_sample_size": 5}})).await;
    let request_id = ok.body["meta"]["request_id"].clone();

    let reply = app.get("/api/audit?action=settings.update").await;
    let rows = reply.assert_ok(200).as_array().unwrap().clone();
    let summary: Vec<_> = rows.iter().map(|r| (r["actor"].as_str().unwrap(), r["outcome"].as_str().unwrap())).collect();
    assert_eq!(
        summary,
        vec![("admin", "OK"), ("admin", "VALIDATION_ERROR"), ("watcher", "FORBIDDEN"), ("anonymous", "UNAUTHORIZED")]
    );
    let newest = &rows[0];
    assert_eq!(newest["request_id"], request_id);
    assert_eq!(newest["role"], "admin");
    assert_eq!(newest["target"], "settings");
    assert_eq!(newest["mode"], "PAPER");
    assert_eq!(newest["request"], json!({"analytics": {"min_sample_size": 5}}));
    assert!(rows[3]["role"].is_null());
}

#[tokio::test]
async fn token_actions_are_audited_without_secrets() {
    let app = spawn_app().await;
    let secret = app.token("desk", "operator").await;
    app.call(Method::DELETE, "/api/auth/tokens/desk", Some(ADMIN_TOKEN), None).await.assert_ok(200);
    app.call(Method::DELETE, "/api/auth/tokens/ghost", Some(ADMIN_TOKEN), None).await.assert_error(404, "NOT_FOUND");
    let reply = app.get("/api/audit").await;
    let rows = audit_rows(&reply.body);
    assert_eq!(rows, vec!["token.revoke ghost NOT_FOUND", "token.revoke desk OK", "token.create desk OK"]);
    assert!(!reply.body.to_string().contains(&secret));
}

#[tokio::test]
async fn audit_pages_and_filters() {
    let app = spawn_app().await;
    for n in 21..26 {
        app.put_settings(ADMIN_TOKEN, json!({"analytics": {"min_sample_size": n}})).await.assert_ok(200);
    }
    app.put_settings(ADMIN_TOKEN, json!({"analytics": {"min_sample_size": -1}})).await;
    let first = app.get("/api/audit?limit=4").await;
    assert_eq!(first.body["meta"]["count"], 4);
    let cursor = first.body["meta"]["next_cursor"].as_str().unwrap().to_string();
    let second = app.get(&format!("/api/audit?limit=4&cursor={cursor}")).await;
    assert_eq!(second.body["meta"]["count"], 2);
    assert!(second.body["meta"]["next_cursor"].is_null());
    let ids: Vec<i64> = first
        .data()
        .as_array()
        .unwrap()
        .iter()
        .chain(second.data().as_array().unwrap())
        .map(|r| r["audit_id"].as_i64().unwrap())
        .collect();
    let mut sorted = ids.clone();
    sorted.sort_by(|a, b| b.cmp(a));
    assert_eq!(ids, sorted, "newest first, no overlap");
    assert_eq!(ids.len(), 6);

    let refused = app.get("/api/audit?outcome=VALIDATION_ERROR").await;
    assert_eq!(refused.body["meta"]["count"], 1);
    app.get("/api/audit?limit=5000").await.assert_error(400, "VALIDATION_ERROR");
    app.get("/api/audit?limit=ten").await.assert_error(400, "VALIDATION_ERROR");
    app.get("/api/audit?colour=blue").await.assert_error(400, "VALIDATION_ERROR");
}

/// Rows written late with earlier stamps (the outbox writing what it held through an outage, an
/// aggregated refusal stamped at its first refusal) are listed in their place in time, not in
/// the order they were written, and the cursor pages through that same order.
#[tokio::test]
async fn the_audit_list_is_newest_first_by_timestamp_and_its_pages_follow_it() {
    use tradeops_store::{AuditEntry, AuditRepository};
    let app = spawn_app().await;
    let db = tradeops_store::Database::open(&app.config.database_url).await.unwrap();
    let at = |second: i64| tradeops_core::time::parse_ts(&format!("2026-11-20T14:39:{second:02}Z")).unwrap();
    // Written in this order; stamped 18, 30, 29 (late), 18 (late), 31.
    for (second, action) in [(18, "a"), (30, "b"), (29, "c"), (18, "d"), (31, "e")] {
        let ts = tradeops_core::time::to_epoch_ms(&at(second));
        let entry = AuditEntry {
            ts,
            wall_ts: ts,
            actor: "late-writer".into(),
            role: Some("operator".into()),
            action: action.into(),
            target: "AAPL".into(),
            request: "{}".into(),
            outcome: "OK".into(),
            mode: "PAPER".into(),
            request_id: format!("req-{action}"),
        };
        db.append_audit(&entry).await.unwrap();
    }
    db.close().await;

    let actions = |reply: &Reply| -> Vec<String> {
        reply.data().as_array().unwrap().iter().map(|r| r["action"].as_str().unwrap().to_string()).collect()
    };
    let all = app.get("/api/audit?actor=late-writer").await;
    assert_eq!(actions(&all), ["e", "b", "c", "d", "a"], "{}", all.body);
    let stamps: Vec<&str> = all.data().as_array().unwrap().iter().map(|r| r["timestamp"].as_str().unwrap()).collect();
    let mut sorted = stamps.clone();
    sorted.sort_by(|a, b| b.cmp(a));
    assert_eq!(stamps, sorted, "newest first by timestamp");

    let mut paged = Vec::new();
    let mut path = "/api/audit?actor=late-writer&limit=2".to_string();
    loop {
        let page = app.get(&path).await;
        paged.extend(actions(&page));
        match page.body["meta"]["next_cursor"].as_str() {
            Some(cursor) => path = format!("/api/audit?actor=late-writer&limit=2&cursor={cursor}"),
            None => break,
        }
    }
    assert_eq!(paged, ["e", "b", "c", "d", "a"], "pages of two: the same order, no row twice or missed");
}
