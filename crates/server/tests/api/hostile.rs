//! Hostile input: always a 4xx envelope, never a 5xx, and nothing changes.

use crate::helpers::*;
use reqwest::Method;

#[tokio::test]
async fn hostile_bodies_are_refused_and_change_nothing() {
    let app = spawn_app().await;
    let before = app.get("/api/settings").await.data().clone();
    let tokens = || async {
        app.get("/api/auth/tokens")
            .await
            .data()
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].to_string())
            .collect::<Vec<_>>()
    };
    let tokens_before = tokens().await;
    let deep = "[".repeat(10_000) + &"]".repeat(10_000);
    let bodies: Vec<(&str, &str, String)> = vec![
        ("PUT", "/api/settings", "null".into()),
        ("PUT", "/api/settings", "\"just a string\"".into()),
        ("PUT", "/api/settings", "42".into()),
        ("PUT", "/api/settings", deep.clone()),
        ("PUT", "/api/settings", r#"{"risk_controls": {"max_daily_loss": 1e400}}"#.into()),
        ("PUT", "/api/settings", r#"{"risk_controls": {"max_daily_loss": null}}"#.into()),
        ("PUT", "/api/settings", r#"{"risk_controls": {"max_daily_loss": [500]}}"#.into()),
        ("PUT", "/api/settings", r#"{"risk_controls": {"max_trades_per_day": 99999999999999999999}}"#.into()),
        ("PUT", "/api/settings", r#"{"momentum_radar": {"universe": ["ÄPFEL"]}}"#.into()),
        ("PUT", "/api/settings", r#"{"momentum_radar": {"universe": ["😀"]}}"#.into()),
        ("PUT", "/api/settings", r#"{"runtime": {"trading_mode": "LIVE\u0000"}}"#.into()),
        ("PUT", "/api/settings", r#"{"runtime": {"trading_mode": "ＰＡＰＥＲ"}}"#.into()),
        ("PUT", "/api/settings", "{\"risk_controls\": {\"max_daily_loss\": 1}".into()),
        ("PUT", "/api/settings", "\u{feff}{}garbage".into()),
        ("PUT", "/api/settings", String::from_utf8_lossy(&[0xff, 0xfe, 0x00]).into_owned()),
        ("POST", "/api/auth/tokens", r#"{"name": "日本語", "role": "viewer"}"#.into()),
        ("POST", "/api/auth/tokens", r#"{"name": "x", "role": "viewer", "admin": true}"#.into()),
        ("POST", "/api/auth/tokens", r#"{"name": 7, "role": "viewer"}"#.into()),
        ("POST", "/api/auth/tokens", r#"{"name": "x"}"#.into()),
        ("POST", "/api/auth/tokens", format!(r#"{{"name": "{}", "role": "viewer"}}"#, "n".repeat(65))),
        ("POST", "/api/auth/tokens", "x".repeat(64 * 1024 + 1)),
    ];
    for (method, path, body) in bodies {
        let method: Method = method.parse().unwrap();
        let reply = app
            .raw(
                app.client
                    .request(method.clone(), app.url(path))
                    .bearer_auth(ADMIN_TOKEN)
                    .header("content-type", "application/json")
                    .body(body.clone()),
            )
            .await;
        let status = reply.status.as_u16();
        assert!((400..500).contains(&status), "{method} {path} {:.80} → {status} {}", body, reply.body);
        assert_eq!(reply.body["ok"], false);
        assert!(matches!(reply.code(), "VALIDATION_ERROR" | "PAYLOAD_TOO_LARGE"), "{:.80} → {}", body, reply.body);
        assert_meta(&reply.body, &reply.headers);
    }
    assert_eq!(app.get("/api/settings").await.data(), &before);
    assert_eq!(app.settings_version().await, 1);
    assert_eq!(tokens().await, tokens_before);
}

#[tokio::test]
async fn hostile_paths_headers_and_queries_are_4xx() {
    let app = spawn_app().await;
    for path in [
        "/api/auth/tokens/%00",
        "/api/audit?limit=-1",
        "/api/audit?limit=1e3",
        "/api/audit?cursor=%F0%9F%98%80",
        "/api/audit?limit=1&limit=2",
        "/api/settings/history?limit=99999999999999999999",
    ] {
        let method = if path.starts_with("/api/auth/tokens/") { Method::DELETE } else { Method::GET };
        let reply = app.call(method, path, Some(ADMIN_TOKEN), None).await;
        let status = reply.status.as_u16();
        assert!((400..500).contains(&status), "{path} → {status} {}", reply.body);
        assert_meta(&reply.body, &reply.headers);
    }
    // the refused revoke of a NUL name is audited, its target made printable
    let audit = app.get("/api/audit?action=token.revoke").await;
    assert_eq!(audit.data()[0]["outcome"], "VALIDATION_ERROR");
    assert_eq!(audit.data()[0]["target"], "\u{fffd}");
    let reply =
        app.raw(app.client.get(app.url("/api/settings")).header("authorization", "Bearer \u{00e9}t\u{00e9}")).await;
    reply.assert_error(401, "UNAUTHORIZED");
    let reply = app
        .raw(app.client.get(app.url("/api/settings")).header("authorization", format!("Bearer {}", "a".repeat(8000))))
        .await;
    reply.assert_error(401, "UNAUTHORIZED");
}
