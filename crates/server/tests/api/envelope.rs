//! The envelope everywhere: success, unknown routes, wrong methods, bad bodies, panics.

use crate::helpers::*;
use reqwest::Method;
use serde_json::json;

#[tokio::test]
async fn health_is_public_and_enveloped() {
    let app = spawn_app().await;
    let reply = app.call(Method::GET, "/api/health", None, None).await;
    let data = reply.assert_ok(200);
    assert_eq!(data["mode"], "PAPER");
    assert_eq!(data["status"], "HEALTHY");
    for key in ["api", "data_broker", "execution_broker", "risk_manager", "cache", "database"] {
        assert!(data["components"][key].is_string(), "component {key} missing: {data}");
    }
}

#[tokio::test]
async fn unknown_route_is_not_found_envelope() {
    let app = spawn_app().await;
    app.get("/api/does/not/exist").await.assert_error(404, "NOT_FOUND");
    app.call(Method::GET, "/api/nothing", None, None).await.assert_error(404, "NOT_FOUND");
}

#[tokio::test]
async fn wrong_method_is_method_not_allowed_envelope() {
    let app = spawn_app().await;
    app.call(Method::DELETE, "/api/health", Some(ADMIN_TOKEN), None).await.assert_error(405, "METHOD_NOT_ALLOWED");
    app.call(Method::POST, "/api/settings", Some(ADMIN_TOKEN), Some(json!({})))
        .await
        .assert_error(405, "METHOD_NOT_ALLOWED");
}

#[tokio::test]
async fn request_id_is_echoed_or_generated() {
    let app = spawn_app().await;
    let reply = app.raw(app.client.get(app.url("/api/health")).header("x-request-id", "trace-abc-123")).await;
    assert_eq!(reply.body["meta"]["request_id"], "trace-abc-123");
    let reply = app.raw(app.client.get(app.url("/api/health")).header("x-request-id", "bad id with spaces")).await;
    let id = reply.body["meta"]["request_id"].as_str().unwrap();
    assert_eq!(id.len(), 36, "a fresh UUID replaces an unusable id: {id}");
    let other = app.get("/api/health").await;
    assert_ne!(other.body["meta"]["request_id"], reply.body["meta"]["request_id"]);
}

#[tokio::test]
async fn oversized_body_is_payload_too_large() {
    let app = spawn_app().await;
    let big = "x".repeat(70 * 1024);
    let reply = app.put_settings(ADMIN_TOKEN, json!({"analytics": {"note": big}})).await;
    reply.assert_error(413, "PAYLOAD_TOO_LARGE");
    assert_eq!(reply.body["error"]["detail"]["limit_bytes"], 65536);
}

#[tokio::test]
async fn malformed_json_is_validation_error() {
    let app = spawn_app().await;
    let req =
        app.client.put(app.url("/api/settings")).bearer_auth(ADMIN_TOKEN).header("content-type", "application/json");
    let reply = app.raw(req.body("{\"risk_controls\": {")).await;
    reply.assert_error(400, "VALIDATION_ERROR");
    assert_eq!(reply.body["error"]["detail"]["field"], "body");
}

#[tokio::test]
async fn panicking_handler_is_internal_error_without_internals() {
    let (db, url) = TestDb::new().await;
    let extra = axum::Router::new().route(
        "/api/test/panic",
        axum::routing::get(|| async {
            panic!("secret internal detail");
            #[allow(unreachable_code)]
            ()
        }),
    );
    let mut config = test_config(url);
    config.health_probe_interval = std::time::Duration::from_millis(100);
    let app = start(config, std::sync::Arc::new(db), extra).await;
    let reply = app.get("/api/test/panic").await;
    reply.assert_error(500, "INTERNAL_ERROR");
    assert!(!reply.body.to_string().contains("secret"), "internals leaked: {}", reply.body);
    // The service keeps serving, and the api component reports the recent server error.
    for _ in 0..50 {
        if app.get("/api/health").await.data()["components"]["api"] == "DEGRADED" {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("the api component never reported the server error");
}

#[tokio::test]
async fn unknown_docs_path_is_not_found_envelope() {
    let app = spawn_app().await;
    app.call(Method::GET, "/api/docs/nope", None, None).await.assert_error(404, "NOT_FOUND");
}

#[tokio::test]
async fn bodies_must_be_sent_as_json() {
    let app = spawn_app().await;
    let body = r#"{"analytics": {"min_sample_size": 33}}"#;
    for content_type in
        [None, Some("text/plain"), Some("application/x-www-form-urlencoded"), Some("multipart/form-data")]
    {
        let mut req = app.client.put(app.url("/api/settings")).bearer_auth(ADMIN_TOKEN).body(body);
        if let Some(ct) = content_type {
            req = req.header("content-type", ct);
        }
        let reply = app.raw(req).await;
        reply.assert_error(400, "VALIDATION_ERROR");
        assert_eq!(reply.body["error"]["detail"]["field"], "content-type");
    }
    assert_eq!(app.settings_version().await, 1);
    let ok = app
        .client
        .put(app.url("/api/settings"))
        .bearer_auth(ADMIN_TOKEN)
        .header("content-type", "application/json; charset=utf-8")
        .body(body);
    app.raw(ok).await.assert_ok(200);
}

#[tokio::test]
async fn metrics_count_requests_per_route() {
    let app = spawn_app().await;
    for _ in 0..3 {
        app.get("/api/settings").await.assert_ok(200);
    }
    app.get("/api/missing").await;
    let text = app.client.get(app.url("/metrics")).send().await.unwrap().text().await.unwrap();
    assert!(
        text.contains(r#"tradeops_http_requests_total{method="GET",route="/api/settings",status="200"} 3"#),
        "{text}"
    );
    assert!(text.contains(r#"route="unmatched",status="404""#), "{text}");
    assert!(
        text.contains(r#"tradeops_http_request_duration_seconds_count{method="GET",route="/api/settings"} 3"#),
        "{text}"
    );
}
