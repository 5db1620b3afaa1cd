//! The OpenAPI document is generated from the code, reviewed as a snapshot, and covers every
//! route; the docs page works offline.

use crate::helpers::*;
use reqwest::Method;
use serde_json::{json, Value};

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
            "GET /api/market/session",
            "GET /api/notifications/channels",
            "GET /api/notifications/deliveries",
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
            "POST /api/notifications/test",
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
    // A write takes a JSON body, `{}` at least (an empty body is not JSON, and refused).
    assert_eq!(spec["paths"]["/api/settings"]["put"]["requestBody"]["required"], true, "`{{}}` changes nothing");
}

/// The rules the request types check that JSON Schema can state are in the served document, and
/// the server refuses what breaks each of them (VALIDATION_ERROR, CONTRACT §2): a client that
/// builds a schema-valid request is refused only for the rules docs/api.md lists as beyond it.
#[tokio::test]
async fn openapi_states_the_rules_the_server_checks() {
    // About a hundred refusals in a row: the token's request budget is not what is tested.
    let app = spawn_app_with(|c| {
        c.auth.rate_limit_per_second = 1_000_000;
        c.auth.rate_limit_burst = 1_000_000;
    })
    .await;
    let spec: Value = app.client.get(app.url("/api/openapi.json")).send().await.unwrap().json().await.unwrap();
    let schemas = &spec["components"]["schemas"];
    let symbol = app.market_symbols(1).await.remove(0).0;
    // The field among those refused (the settings report every problem at once).
    let refused = |reply: Reply, field: &str| {
        reply.assert_error(400, "VALIDATION_ERROR");
        let detail = &reply.body["error"]["detail"];
        let fields: Vec<&Value> =
            detail["errors"].as_array().map(|e| e.iter().map(|e| &e["field"]).collect()).unwrap_or_default();
        assert!(detail["field"] == field || fields.iter().any(|f| *f == field), "{field}: {}", reply.body);
    };

    // PUT /api/settings: the groups and their fields, never null; every bound the document states
    // is the validator's.
    let body = &spec["paths"]["/api/settings"]["put"]["requestBody"]["content"]["application/json"]["schema"];
    assert_eq!(body["$ref"], "#/components/schemas/SettingsPatch");
    let patch = &schemas["SettingsPatch"];
    assert_eq!(patch["additionalProperties"], false);
    let mut bounds = 0;
    for (group, reference) in patch["properties"].as_object().unwrap() {
        assert!(!reference.to_string().contains("null"), "{group}: {reference}");
        let name = reference["$ref"].as_str().unwrap().rsplit('/').next().unwrap();
        for (field, schema) in schemas[name]["properties"].as_object().unwrap() {
            let path = format!("{group}.{field}");
            let above = schema["maximum"].as_f64().map(|max| max * 2.0 + 1.0);
            let below = schema["minimum"]
                .as_f64()
                .map(|min| min - 1.0)
                .or(schema["exclusiveMinimum"].as_f64())
                .filter(|v| !(schema["type"] == "integer" && *v < 0.0));
            for (value, over) in [(above, true), (below, false)].into_iter().filter_map(|(v, o)| Some((v?, o))) {
                // min_price has no bound of its own above: max_price (at most 1,000,000) must be
                // above it, and that is the field refused.
                let named = if path == "momentum_radar.min_price" && over { "momentum_radar.max_price" } else { &path };
                refused(app.put_settings(ADMIN_TOKEN, json!({group: {field: value}})).await, named);
                bounds += 1;
            }
            if schema["multipleOf"] == 0.01 {
                refused(app.put_settings(ADMIN_TOKEN, json!({group: {field: 10.005}})).await, &path);
            }
        }
        app.put_settings(ADMIN_TOKEN, json!({group: null})).await.assert_error(400, "VALIDATION_ERROR");
    }
    assert!(bounds > 40, "the settings' bounds are stated: {bounds}");
    assert_eq!(schemas["MomentumRadarSettings"]["properties"]["universe"]["uniqueItems"], true);
    refused(
        app.put_settings(ADMIN_TOKEN, json!({"momentum_radar": {"universe": [symbol, symbol]}})).await,
        "momentum_radar.universe",
    );
    let strategies = &schemas["StrategyAllocatorSettings"]["properties"]["default_strategy_id"]["enum"];
    assert_eq!(strategies, &json!(["momentum_breakout"]));
    let other = json!({"strategy_allocator": {"default_strategy_id": "sma_cross"}});
    refused(app.put_settings(ADMIN_TOKEN, other).await, "strategy_allocator.default_strategy_id");

    // A run's settings overrides are the same object.
    for name in ["BacktestRequest", "DeskRequest", "SweepRequest"] {
        assert_eq!(schemas[name]["properties"]["settings"]["$ref"], "#/components/schemas/SettingsPatch", "{name}");
    }

    // A sweep's grid names a parameter.
    assert_eq!(schemas["SweepRequest"]["properties"]["grid"]["minProperties"], 1);
    let sweep = json!({"strategy_id": "sma_cross", "symbol": symbol, "start": "2026-11-02T00:00:00Z",
        "end": "2026-11-10T00:00:00Z", "grid": {}});
    refused(app.post("/api/backtests/sweeps", ADMIN_TOKEN, sweep).await, "grid");

    // A desk replay's symbols are for downloaded days only.
    let desk = &schemas["DeskRequest"]["anyOf"];
    assert_eq!(desk[0], json!({"not": {"required": ["symbols"]}}));
    assert_eq!(desk[1]["properties"]["source"]["const"], "downloaded");
    let replay = json!({"kind": "desk", "source": "simulated", "symbols": [symbol],
        "start": "2026-11-19T15:00:00Z", "end": "2026-11-19T16:00:00Z"});
    refused(app.post("/api/backtests", ADMIN_TOKEN, replay).await, "symbols");

    // An order's tick rule, its prices by order type, and its exit legs on a BUY.
    let order = &schemas["CreateOrder"];
    assert_eq!(order["properties"]["stop_price"]["anyOf"][1], json!({"minimum": 1, "multipleOf": 0.01}));
    assert_eq!(order["allOf"][0], json!({"dependentRequired": {"take_profit": ["stop_loss"]}}));
    assert_eq!(order["allOf"].as_array().map(Vec::len), Some(4));
    let base = json!({"symbol": symbol, "side": "BUY", "quantity": 1});
    let with = |extra: Value| {
        let mut body = base.clone();
        body.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        body
    };
    for (extra, field) in [
        (json!({"order_type": "STOP", "stop_price": 1.005}), "stop_price"),
        (json!({"order_type": "LIMIT", "limit_price": 0.00005}), "limit_price"),
        (json!({"order_type": "LIMIT"}), "limit_price"),
        (json!({"stop_price": 5.0}), "stop_price"),
        (json!({"side": "SELL", "stop_loss": {"stop_price": 5.0}}), "stop_loss"),
        (json!({"take_profit": {"limit_price": 5.0}}), "take_profit.limit_price"),
    ] {
        refused(app.post("/api/orders/preview", ADMIN_TOKEN, with(extra)).await, field);
    }
}
