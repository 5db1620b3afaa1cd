//! The envelope everywhere: success, unknown routes, wrong methods, bad bodies, panics.

use crate::helpers::*;
use reqwest::Method;
use serde_json::{json, Value};

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

/// The JSON writes of the served OpenAPI document, as `(method, path)` with each path
/// parameter filled with `none` (no such id), and whether the request body is required.
async fn json_writes(app: &TestApp) -> Vec<(Method, String, bool)> {
    let spec: Value = app.client.get(app.url("/api/openapi.json")).send().await.unwrap().json().await.unwrap();
    let mut writes = Vec::new();
    for (path, ops) in spec["paths"].as_object().expect("paths") {
        for (method, op) in ops.as_object().expect("operations") {
            if op["requestBody"]["content"].get("application/json").is_none() {
                continue;
            }
            let path: String =
                path.split('/').map(|s| if s.starts_with('{') { "none" } else { s }).collect::<Vec<_>>().join("/");
            let method: Method = method.to_uppercase().parse().unwrap();
            writes.push((method, path, op["requestBody"]["required"] == true));
        }
    }
    assert!(writes.len() >= 20, "the document lists the JSON writes: {writes:?}");
    assert!(writes.iter().any(|(m, p, _)| *m == Method::PUT && p == "/api/settings"), "{writes:?}");
    writes
}

/// What a refused write must leave as it was: the settings and their version, the tokens, the
/// trading state and every list an action of the document adds to.
async fn desk_state(app: &TestApp) -> Value {
    let data = |reply: Reply| reply.assert_ok(200).clone();
    let names = data(app.get("/api/auth/tokens").await)
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].clone())
        .collect::<Vec<_>>();
    let risk = data(app.get("/api/risk/state").await);
    json!({
        "settings": data(app.get("/api/settings").await),
        "settings_version": app.settings_version().await,
        "tokens": names,
        "trading_state": risk["trading_state"],
        "blocked_symbols": risk["blocked_symbols"],
        "blocks": data(app.get("/api/radar/blocks").await),
        "watchlist": data(app.get("/api/watchlist").await),
        "positions": data(app.get("/api/positions").await),
        "orders": data(app.get("/api/orders").await),
        "backtests": data(app.get("/api/backtests").await),
        "sweeps": data(app.get("/api/backtests/sweeps").await),
        "downloads": data(app.get("/api/data/downloads").await),
    })
}

/// A service whose admin may send the many requests of one of these tests at once.
async fn unthrottled_app() -> TestApp {
    spawn_app_with(|c| {
        c.auth.rate_limit_per_second = 1_000_000;
        c.auth.rate_limit_burst = 1_000_000;
    })
    .await
}

/// A body is JSON text (RFC 8259): only space, tab, line feed and carriage return may surround
/// its value. A form feed, a vertical tab, a byte-order mark with nothing after it, or text
/// that is not JSON is refused on every JSON write with the contract's `VALIDATION_ERROR`
/// naming `body` (CONTRACT §2), and nothing changes.
#[tokio::test]
async fn a_body_that_is_not_json_text_is_refused_naming_body_on_every_json_write() {
    let app = unthrottled_app().await;
    let before = desk_state(&app).await;
    let bodies: [&[u8]; 8] = [b"\x0c", b"\x0b", b"abc", b"{", b"\xEF\xBB\xBF", b"\r\n", b" \x0c\t", b"\x0c{}"];
    for (method, path, _) in json_writes(&app).await {
        for body in bodies {
            let req = app
                .client
                .request(method.clone(), app.url(&path))
                .bearer_auth(ADMIN_TOKEN)
                .header("content-type", "application/json")
                .body(body.to_vec());
            let reply = app.raw(req).await;
            assert_eq!(
                (reply.status.as_u16(), reply.code(), reply.body["error"]["detail"]["field"].as_str()),
                (400, "VALIDATION_ERROR", Some("body")),
                "{method} {path} {body:?} → {}",
                reply.body
            );
            assert_meta(&reply.body, &reply.headers);
        }
    }
    assert_eq!(desk_state(&app).await, before);
    // The reported request: a form feed is not a settings change of no groups.
    let req = app
        .client
        .put(app.url("/api/settings"))
        .bearer_auth(ADMIN_TOKEN)
        .header("content-type", "application/json")
        .body("\x0c");
    let reply = app.raw(req).await;
    reply.assert_error(400, "VALIDATION_ERROR");
    assert!(
        reply.body["error"]["detail"]["reason"].as_str().unwrap().starts_with("holds no JSON value"),
        "{}",
        reply.body
    );
    assert_eq!(app.settings_version().await, 1);
}

/// No body at all is refused naming `body` on every write that takes one (`{}` is the body of
/// a request of no fields), `PUT /api/settings` included; the actions that take no body (the
/// cancels and the token revoke, answered here `NOT_FOUND` for ids that do not exist) are
/// served without one. Nothing changes.
#[tokio::test]
async fn no_body_is_refused_naming_body_where_the_action_takes_one() {
    let app = unthrottled_app().await;
    let before = desk_state(&app).await;
    for (method, path, required) in json_writes(&app).await {
        assert!(required, "{method} {path}: the served document says its body is required");
        for content_type in [Some("application/json"), None] {
            let mut req = app.client.request(method.clone(), app.url(&path)).bearer_auth(ADMIN_TOKEN);
            if let Some(ct) = content_type {
                req = req.header("content-type", ct);
            }
            let reply = app.raw(req).await;
            let what = format!("{method} {path} without a body ({content_type:?}) → {}", reply.body);
            reply.assert_error(400, "VALIDATION_ERROR");
            let field = reply.body["error"]["detail"]["field"].as_str().unwrap_or_default().to_string();
            if content_type.is_none() && field == "content-type" {
                // A file taken as CSV or JSON says which content types it takes.
                assert_eq!(path, "/api/market/reference", "{what}");
            } else {
                assert_eq!(field, "body", "{what}");
            }
        }
    }
    for (method, path) in [
        (Method::DELETE, "/api/auth/tokens/none"),
        (Method::POST, "/api/backtests/none/cancel"),
        (Method::POST, "/api/backtests/sweeps/none/cancel"),
        (Method::POST, "/api/data/downloads/none/cancel"),
    ] {
        let reply = app.raw(app.client.request(method.clone(), app.url(path)).bearer_auth(ADMIN_TOKEN)).await;
        assert_eq!(reply.status.as_u16(), 404, "{method} {path} without a body → {}", reply.body);
        assert_eq!(reply.code(), "NOT_FOUND", "{method} {path} → {}", reply.body);
    }
    assert_eq!(desk_state(&app).await, before);
}
