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
