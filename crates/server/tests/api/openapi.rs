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
            "GET /api/backtests/sweeps",
            "GET /api/backtests/sweeps/{sweep_id}",
            "GET /api/backtests/{backtest_id}",
            "GET /api/dashboard/summary",
            "GET /api/data/downloads",
            "GET /api/data/downloads/{request_id}",
            "GET /api/events",
            "GET /api/health",
            "GET /api/health/components",
            "GET /api/market/bars",
            "GET /api/market/quote",
            "GET /api/market/reference/{symbol}",
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
            "POST /api/backtests",
            "POST /api/backtests/run",
            "POST /api/backtests/sweeps",
            "POST /api/backtests/sweeps/{sweep_id}/cancel",
            "POST /api/backtests/{backtest_id}/cancel",
            "POST /api/data/download",
            "POST /api/data/downloads/{request_id}/cancel",
            "POST /api/data/import",
            "POST /api/emergency/liquidate",
            "POST /api/orders",
            "POST /api/orders/cancel",
            "POST /api/orders/preview",
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
            "PUT /api/market/reference",
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

/// What generated clients rely on: every status an operation can answer is
/// declared with the error envelope, the validators' constraints are in the schemas, optional
/// request fields are left out rather than `null`, and `audit[].request` is any JSON.
#[tokio::test]
async fn openapi_declares_every_refusal_and_constraint() {
    let app = spawn_app().await;
    let spec: serde_json::Value =
        app.client.get(app.url("/api/openapi.json")).send().await.unwrap().json().await.unwrap();
    for (path, item) in spec["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            let responses = op["responses"].as_object().unwrap();
            let declared = |status: &str| responses.contains_key(status);
            let secured = op["security"].as_array().is_some_and(|s| !s.is_empty());
            let input = op["parameters"].as_array().is_some_and(|p| !p.is_empty()) || op.get("requestBody").is_some();
            let mut expected = vec!["429", "500", "503"];
            if secured {
                expected.push("401");
            }
            if method != "get" {
                expected.extend(["400", "403", "413", "428"]);
            }
            if input {
                expected.push("400");
            }
            for status in expected {
                assert!(declared(status), "{method} {path} does not declare {status}");
            }
            for (status, response) in responses {
                if status.starts_with('4') {
                    let text = response.to_string();
                    assert!(
                        text.contains("ErrorBody") || text.contains("#/components/responses/"),
                        "{method} {path} {status}"
                    );
                }
            }
            for parameter in op["parameters"].as_array().into_iter().flatten() {
                assert!(!parameter["schema"].to_string().contains("\"null\""), "{method} {path}: {parameter}");
            }
        }
    }
    let schemas = &spec["components"]["schemas"];
    let order = &schemas["CreateOrder"]["properties"];
    assert_eq!(
        (order["quantity"]["minimum"].as_i64(), order["quantity"]["maximum"].as_i64()),
        (Some(1), Some(10_000_000))
    );
    assert_eq!(order["limit_price"]["minimum"], 0.0001, "the smallest tick: a smaller price rounds to zero");
    assert!(!order.to_string().contains("null"), "optional request fields are left out, never null: {order}");
    assert_eq!(schemas["Symbol"]["pattern"], "^[A-Za-z0-9.-]{1,10}$");
    assert_eq!(schemas["ClientOrderId"]["pattern"], "^[A-Za-z0-9_.:-]{1,64}$");
    assert_eq!(
        (schemas["ReasonText"]["minLength"].as_i64(), schemas["ReasonText"]["maxLength"].as_i64()),
        (Some(1), Some(500))
    );
    assert_eq!(schemas["CreateToken"]["properties"]["name"]["pattern"], "^[A-Za-z0-9_.-]{1,64}$");
    assert_eq!(schemas["WatchlistSort"]["enum"].as_array().map(Vec::len), Some(6));
    let limit = spec["paths"]["/api/orders"]["get"]["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "limit")
        .unwrap();
    assert_eq!((limit["schema"]["minimum"].as_i64(), limit["schema"]["maximum"].as_i64()), (Some(1), Some(1000)));
    let top_n = &spec["paths"]["/api/radar/momentum"]["get"]["parameters"][0]["schema"];
    assert_eq!((top_n["minimum"].as_i64(), top_n["maximum"].as_i64()), (Some(1), Some(200)));
    let audit = &spec["paths"]["/api/audit"]["get"]["responses"]["200"]["content"]["application/json"]["schema"];
    let request = &audit["properties"]["data"]["items"]["properties"]["request"];
    assert!(request.get("type").is_none() && request.get("$ref").is_none(), "any JSON: {request}");
    assert_ne!(spec["paths"]["/api/settings"]["put"]["requestBody"]["required"], true, "an empty body changes nothing");
}
