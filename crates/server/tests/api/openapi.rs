//! The OpenAPI document is generated from the code, reviewed as a snapshot, and covers every
//! route; the docs page works offline.

use crate::helpers::*;
use reqwest::Method;

#[tokio::test]
async fn openapi_document_matches_snapshot() {
    let app = spawn_app().await;
    let spec: serde_json::Value =
        app.client.get(app.url("/api/openapi.json")).send().await.unwrap().json().await.unwrap();
    insta::assert_json_snapshot!("openapi", spec);
}

#[tokio::test]
async fn openapi_lists_every_api_route() {
    let app = spawn_app().await;
    let spec: serde_json::Value =
        app.client.get(app.url("/api/openapi.json")).send().await.unwrap().json().await.unwrap();
    let mut paths: Vec<String> = spec["paths"]
        .as_object()
        .unwrap()
        .iter()
        .flat_map(|(p, ops)| ops.as_object().unwrap().keys().map(move |m| format!("{} {p}", m.to_uppercase())))
        .collect();
    paths.sort();
    assert_eq!(
        paths,
        vec![
            "DELETE /api/auth/tokens/{name}",
            "GET /api/account/performance",
            "GET /api/account/summary",
            "GET /api/audit",
            "GET /api/auth/me",
            "GET /api/auth/tokens",
            "GET /api/backtests",
            "GET /api/backtests/{backtest_id}",
            "GET /api/dashboard/summary",
            "GET /api/data/downloads",
            "GET /api/data/downloads/{request_id}",
            "GET /api/events",
            "GET /api/health",
            "GET /api/health/components",
            "GET /api/market/bars",
            "GET /api/orders",
            "GET /api/orders/{client_order_id}",
            "GET /api/positions",
            "GET /api/radar/blocks",
            "GET /api/radar/momentum",
            "GET /api/risk/state",
            "GET /api/risk/violations",
            "GET /api/settings",
            "GET /api/settings/history",
            "GET /api/strategies",
            "GET /api/trades",
            "GET /api/trades/recommendations",
            "GET /api/trades/{trade_id}",
            "GET /api/version",
            "GET /api/watchlist",
            "POST /api/auth/tokens",
            "POST /api/backtests/run",
            "POST /api/data/download",
            "POST /api/data/import",
            "POST /api/emergency/liquidate",
            "POST /api/orders",
            "POST /api/orders/cancel",
            "POST /api/positions/close",
            "POST /api/positions/halt",
            "POST /api/radar/block",
            "POST /api/radar/unblock",
            "POST /api/radar/watch",
            "POST /api/risk/emergency-halt",
            "POST /api/risk/resume",
            "POST /api/risk/resume-strategies",
            "POST /api/watchlist/restart",
            "POST /api/watchlist/stop",
            "PUT /api/settings",
        ]
    );
}

#[tokio::test]
async fn docs_page_is_served_without_external_assets() {
    let app = spawn_app().await;
    let html = app.client.get(app.url("/api/docs/")).send().await.unwrap();
    assert_eq!(html.status(), 200);
    let text = html.text().await.unwrap();
    assert!(text.contains("swagger-ui"), "{text}");
    assert!(!text.contains("https://"), "docs page must not load assets from the internet");
    let js = app.client.get(app.url("/api/docs/swagger-ui-bundle.js")).send().await.unwrap();
    assert_eq!(js.status(), 200);
}

#[tokio::test]
async fn version_names_service_and_contract() {
    let app = spawn_app().await;
    let reply = app.call(Method::GET, "/api/version", Some(ADMIN_TOKEN), None).await;
    let data = reply.assert_ok(200);
    assert_eq!(data["service"], "tradeops");
    assert_eq!(data["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(data["api_version"], "1.0.0");
}
