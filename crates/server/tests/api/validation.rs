//! Every refusal of a malformed request names the offending field by its path, in the
//! operator's words: every write endpoint × (missing field, wrong type, null, out
//! of range, unknown field), and the query parameters of every endpoint that takes them.

use crate::helpers::*;
use reqwest::Method;
use serde_json::{json, Value};

/// Words of a parser, never an operator's.
const INTERNALS: &[&str] = &[
    "expected",
    "u64",
    "u32",
    "i64",
    "f64",
    "Decimal",
    "line 1",
    "column",
    "serde",
    "invalid type",
    "invalid value",
    "variant",
    "`",
    "malformed",
];

/// A write endpoint: a body valid on its face, its required fields, and values out of range.
struct Endpoint {
    method: Method,
    path: &'static str,
    valid: Value,
    required: &'static [&'static str],
    out_of_range: Vec<(&'static str, Value)>,
}

fn endpoints() -> Vec<Endpoint> {
    let post = Method::POST;
    let reason_cases = || vec![("reason", json!("")), ("reason", json!("x".repeat(501)))];
    vec![
        Endpoint {
            method: post.clone(),
            path: "/api/orders",
            valid: json!({"symbol": "ABCD", "side": "BUY", "quantity": 10, "order_type": "LIMIT",
                "limit_price": 5.0, "time_in_force": "DAY", "client_order_id": "v-1", "reason": "test"}),
            required: &["symbol", "side", "quantity"],
            out_of_range: vec![
                ("quantity", json!(0)),
                ("quantity", json!(-1)),
                ("quantity", json!(1.5)),
                ("quantity", json!(10_000_001)),
                ("side", json!("HOLD")),
                ("order_type", json!("LIMITED")),
                ("time_in_force", json!("FOREVER")),
                ("limit_price", json!(-1)),
                ("limit_price", json!(1.234)),
                ("symbol", json!("TOOLONGSYMBOL")),
                ("symbol", json!("A B")),
                ("client_order_id", json!("bad id!")),
            ],
        },
        Endpoint {
            method: post.clone(),
            path: "/api/orders/cancel",
            valid: json!({"client_order_id": "v-1"}),
            required: &["client_order_id"],
            out_of_range: vec![("client_order_id", json!("")), ("client_order_id", json!("x".repeat(65)))],
        },
        Endpoint {
            method: post.clone(),
            path: "/api/positions/close",
            valid: json!({"symbol": "ABCD", "quantity": 5}),
            required: &["symbol"],
            // No position is open: the face of the request is judged first.
            out_of_range: vec![("quantity", json!(0)), ("quantity", json!(-3)), ("symbol", json!(""))],
        },
        Endpoint {
            method: post.clone(),
            path: "/api/positions/halt",
            valid: json!({"symbol": "ABCD", "reason": "test"}),
            required: &["symbol", "reason"],
            out_of_range: reason_cases(),
        },
        Endpoint {
            method: post.clone(),
            path: "/api/radar/watch",
            valid: json!({"symbol": "ABCD", "source": "MANUAL"}),
            required: &["symbol"],
            out_of_range: vec![("source", json!("ELSEWHERE")), ("symbol", json!("bad!"))],
        },
        Endpoint {
            method: post.clone(),
            path: "/api/radar/block",
            valid: json!({"symbol": "ABCD", "reason": "test", "block_scope": "TODAY"}),
            required: &["symbol", "reason"],
            out_of_range: [vec![("block_scope", json!("FOREVER"))], reason_cases()].concat(),
        },
        Endpoint {
            method: post.clone(),
            path: "/api/radar/unblock",
            valid: json!({"symbol": "ABCD", "reason": "test"}),
            required: &["symbol", "reason"],
            out_of_range: reason_cases(),
        },
        Endpoint {
            method: post.clone(),
            path: "/api/watchlist/stop",
            valid: json!({"symbol": "ABCD", "reason": "test"}),
            required: &["symbol", "reason"],
            out_of_range: reason_cases(),
        },
        Endpoint {
            method: post.clone(),
            path: "/api/watchlist/restart",
            valid: json!({"symbol": "ABCD"}),
            required: &["symbol"],
            out_of_range: vec![("symbol", json!("TOOLONGSYMBOL"))],
        },
        Endpoint {
            method: post.clone(),
            path: "/api/risk/emergency-halt",
            valid: json!({"reason": "test"}),
            required: &["reason"],
            out_of_range: reason_cases(),
        },
        Endpoint {
            method: post.clone(),
            path: "/api/emergency/liquidate",
            valid: json!({"reason": "test"}),
            required: &["reason"],
            out_of_range: reason_cases(),
        },
        Endpoint {
            method: post.clone(),
            path: "/api/risk/resume",
            valid: json!({"reason": "test"}),
            required: &["reason"],
            out_of_range: reason_cases(),
        },
        Endpoint {
            method: post.clone(),
            path: "/api/auth/tokens",
            valid: json!({"name": "validation-test", "role": "viewer"}),
            required: &["name", "role"],
            out_of_range: vec![("role", json!("root")), ("name", json!("bad name!")), ("name", json!(""))],
        },
        Endpoint {
            method: post.clone(),
            path: "/api/data/download",
            valid: json!({"symbol": "ABCD", "start": "2026-11-16T14:30:00Z", "end": "2026-11-17T21:00:00Z",
                "timeframe": "1m"}),
            required: &["symbol", "start", "end"],
            out_of_range: vec![
                ("timeframe", json!("5m")),
                ("start", json!("yesterday")),
                ("end", json!("2026-11-17")),
                // Before `start`: refused for the range although the symbol is unknown too.
                ("end", json!("2026-11-01T00:00:00Z")),
            ],
        },
        Endpoint {
            method: post.clone(),
            path: "/api/backtests/run",
            valid: json!({"strategy_id": "sma_cross", "symbol": "ABCD", "start": "2026-10-01T00:00:00Z",
                "end": "2026-11-01T00:00:00Z", "timeframe": "1d", "parameters": {"fast": 5, "slow": 10},
                "initial_cash": 10000, "commission_rate": 0, "slippage_bps": 0, "fill": "NEXT_OPEN",
                "settings": {"risk_controls": {"max_daily_loss": 1000}}}),
            required: &["strategy_id", "symbol", "start", "end"],
            out_of_range: vec![
                ("initial_cash", json!(0)),
                ("commission_rate", json!(0.5)),
                ("slippage_bps", json!(-1)),
                ("fill", json!("OPEN")),
                ("timeframe", json!("1w")),
            ],
        },
    ]
}

/// A JSON value of another type than `value`'s.
fn wrong_type(value: &Value) -> Value {
    match value {
        Value::String(_) => json!(7),
        Value::Number(_) => json!("seven"),
        Value::Object(_) => json!([1]),
        _ => json!({"x": 1}),
    }
}

#[track_caller]
fn assert_names(reply: &Reply, field: &str, what: &str) {
    assert_eq!(reply.status.as_u16(), 400, "{what}: {}", reply.body);
    assert_eq!(reply.code(), "VALIDATION_ERROR", "{what}: {}", reply.body);
    assert_eq!(reply.body["error"]["detail"]["field"], field, "{what}: {}", reply.body);
    let reason = reply.body["error"]["detail"]["reason"].as_str().unwrap_or_default();
    let message = reply.body["error"]["message"].as_str().unwrap_or_default();
    assert!(!reason.is_empty(), "{what}: {}", reply.body);
    for text in [reason, message] {
        for word in INTERNALS {
            assert!(!text.contains(word), "{what}: {text:?} leaks {word:?}");
        }
    }
}

fn with(body: &Value, field: &str, value: Option<Value>) -> Value {
    let mut body = body.clone();
    let members = body.as_object_mut().expect("an object");
    match value {
        Some(v) => members.insert(field.to_string(), v),
        None => members.remove(field),
    };
    body
}

async fn lift_rate_limit() -> TestApp {
    spawn_app_with(|c| {
        c.auth.rate_limit_per_second = 100_000;
        c.auth.rate_limit_burst = 100_000;
    })
    .await
}

#[tokio::test]
async fn every_write_endpoint_names_the_refused_field() {
    let app = lift_rate_limit().await;
    let orders_before = app.get("/api/orders").await.data().as_array().map(Vec::len);
    for e in endpoints() {
        let send = |body: Value| app.call(e.method.clone(), e.path, Some(ADMIN_TOKEN), Some(body));
        for field in e.required {
            let reply = send(with(&e.valid, field, None)).await;
            assert_names(&reply, field, &format!("{} without {field}", e.path));
            assert!(reply.body["error"]["detail"]["reason"].as_str().unwrap().starts_with("is required"));
        }
        let fields: Vec<String> = e.valid.as_object().unwrap().keys().cloned().collect();
        for field in &fields {
            let bad = wrong_type(&e.valid[field.as_str()]);
            let reply = send(with(&e.valid, field, Some(bad.clone()))).await;
            assert_names(&reply, field, &format!("{} with {field}: {bad}", e.path));
            let reply = send(with(&e.valid, field, Some(Value::Null))).await;
            assert_names(&reply, field, &format!("{} with {field}: null", e.path));
        }
        for (field, value) in &e.out_of_range {
            let reply = send(with(&e.valid, field, Some(value.clone()))).await;
            assert_names(&reply, field, &format!("{} with {field}: {value}", e.path));
        }
        let reply = send(with(&e.valid, "bogus_field", Some(json!(1)))).await;
        assert_names(&reply, "bogus_field", &format!("{} with an unknown field", e.path));
        let reason = reply.body["error"]["detail"]["reason"].as_str().unwrap();
        assert!(fields.iter().all(|f| reason.contains(f.as_str())), "the fields are listed: {reason}");
    }
    // Refused writes change nothing.
    assert_eq!(app.get("/api/orders").await.data().as_array().map(Vec::len), orders_before);
    assert_eq!(app.get("/api/risk/state").await.data()["trading_state"], "ACTIVE");
    let tokens = app.get("/api/auth/tokens").await;
    assert!(tokens.data().as_array().unwrap().iter().all(|t| t["name"] != "validation-test"));
}

#[tokio::test]
async fn enumerations_list_their_values_whatever_was_sent() {
    let app = spawn_app().await;
    let order = json!({"symbol": "ABCD", "side": "BUY", "quantity": 10});
    let cases = [
        ("/api/orders", with(&order, "side", Some(json!(5))), "side", "BUY, SELL"),
        ("/api/orders", with(&order, "order_type", Some(Value::Null)), "order_type", "MARKET, LIMIT, STOP, STOP_LIMIT"),
        ("/api/orders", with(&order, "time_in_force", Some(json!("NEVER"))), "time_in_force", "DAY, GTC, IOC"),
        ("/api/auth/tokens", json!({"name": "x", "role": 3}), "role", "viewer, operator, admin"),
        (
            "/api/radar/block",
            json!({"symbol": "ABCD", "reason": "r", "block_scope": 1}),
            "block_scope",
            "TODAY, PERMANENT",
        ),
    ];
    for (path, body, field, values) in cases {
        let reply = app.post(path, ADMIN_TOKEN, body).await;
        assert_names(&reply, field, path);
        let reason = reply.body["error"]["detail"]["reason"].as_str().unwrap();
        assert!(reason.contains(values), "{path} {field}: {reason}");
    }
    let reply = app.post("/api/orders", ADMIN_TOKEN, with(&order, "quantity", Some(json!("ten")))).await;
    assert_eq!(reply.body["error"]["message"], "quantity must be a whole number of shares from 1 to 10,000,000");
}

#[tokio::test]
async fn only_a_body_that_is_not_json_is_refused_as_the_body() {
    let app = spawn_app().await;
    let raw = |body: &'static str| {
        app.client
            .post(app.url("/api/radar/watch"))
            .bearer_auth(ADMIN_TOKEN)
            .header("content-type", "application/json")
            .body(body)
    };
    for body in ["{\"symbol\": ", "not json", "{\"symbol\": \"ABCD\"} trailing", "[\"ABCD\"]", "\"ABCD\""] {
        let reply = app.raw(raw(body)).await;
        assert_names(&reply, "body", body);
    }
    // Nested settings name their path.
    let settings = [
        (json!({"risk_controls": {"max_daily_loss": "lots"}}), "risk_controls.max_daily_loss", "must be a number"),
        (json!({"risk_controls": {"max_daily_loss": null}}), "risk_controls.max_daily_loss", "must be a number"),
        (json!({"risk_controls": {"max_trades_per_day": 2.5}}), "risk_controls.max_trades_per_day", "whole number"),
        (json!({"risk_controls": {"max_daily_loss": -5}}), "risk_controls.max_daily_loss", ""),
        (json!({"runtime": {"trading_mode": 3}}), "runtime.trading_mode", "PAPER, LIVE, DEMO"),
        (json!({"momentum_radar": {"enabled": "yes"}}), "momentum_radar.enabled", "true or false"),
        (json!({"momentum_radar": {"min_prise": 1}}), "momentum_radar.min_prise", "min_price"),
        (json!({"risk": {}}), "risk", "risk_controls"),
        (json!({"risk_controls": null}), "risk_controls", ""),
    ];
    for (body, field, says) in settings {
        let reply = app.put_settings(ADMIN_TOKEN, body.clone()).await;
        assert_names(&reply, field, &body.to_string());
        let reason = reply.body["error"]["detail"]["reason"].as_str().unwrap();
        assert!(reason.contains(says), "{body}: {reason}");
    }
    let reply = app
        .post(
            "/api/backtests/run",
            ADMIN_TOKEN,
            json!({"strategy_id": "sma_cross", "symbol": "ABCD", "start": "2026-10-01T00:00:00Z",
                "end": "2026-11-01T00:00:00Z", "settings": {"risk_controls": {"max_daily_loss": "lots"}}}),
        )
        .await;
    assert_names(&reply, "settings.risk_controls.max_daily_loss", "backtest settings");
}

#[tokio::test]
async fn query_parameters_are_named_on_every_endpoint() {
    let app = lift_rate_limit().await;
    let cases = [
        ("/api/orders?limit=abc", "limit"),
        ("/api/orders?limit=0", "limit"),
        ("/api/orders?limit=-1", "limit"),
        ("/api/orders?status=DONE", "status"),
        ("/api/orders?date=2026-13-01", "date"),
        ("/api/orders?cursor=zzz", "cursor"),
        ("/api/orders?symbol=bad!", "symbol"),
        ("/api/orders?bogus=1", "bogus"),
        ("/api/radar/momentum?top_n=abc", "top_n"),
        ("/api/radar/momentum?top_n=201", "top_n"),
        ("/api/market/bars", "symbol"),
        ("/api/market/bars?symbol=bad!", "symbol"),
        ("/api/market/bars?symbol=ABCD&start=yesterday", "start"),
        ("/api/market/bars?symbol=ABCD&timeframe=5m", "timeframe"),
        ("/api/data/downloads?limit=x", "limit"),
        ("/api/data/downloads?limit=1001", "limit"),
        ("/api/backtests?limit=1.5", "limit"),
        ("/api/audit?limit=0", "limit"),
        ("/api/audit?cursor=x", "cursor"),
        ("/api/settings/history?cursor=x", "cursor"),
        ("/api/risk/violations?limit=2000", "limit"),
        ("/api/trades?date=yesterday", "date"),
        ("/api/trades/recommendations?scope_type=COLOUR", "scope_type"),
        ("/api/account/performance?session_id=2026-02-30", "session_id"),
        ("/api/watchlist?sort=random", "sort"),
        ("/api/watchlist?status=Sleeping", "status"),
    ];
    for (path, field) in cases {
        let reply = app.get(path).await;
        assert_names(&reply, field, path);
    }
    let reply = app.get("/api/orders?status=DONE").await;
    assert!(reply.body["error"]["detail"]["reason"].as_str().unwrap().contains("FILLED, PENDING_CANCEL"));
    // The CSV import's parameters, before its body is looked at.
    for (query, field) in [("", "symbol"), ("?symbol=ABCD&timeframe=5m", "timeframe"), ("?symbol=A&x=1", "x")] {
        let req = app
            .client
            .post(app.url(&format!("/api/data/import{query}")))
            .bearer_auth(ADMIN_TOKEN)
            .header("content-type", "text/csv")
            .body("date,open,high,low,close,volume\n");
        let reply = app.raw(req).await;
        assert_names(&reply, field, query);
    }
}

/// The served schema and the validators agree at the edges a generated client meets: a whole
/// number sent as `5.0` is an integer (as JSON Schema counts it), and `reason` is at most 500
/// characters as sent (its `maxLength`), not after trimming.
#[tokio::test]
async fn validators_agree_with_the_schema_at_its_edges() {
    let app = spawn_app().await;
    let reply = app.post("/api/positions/close", ADMIN_TOKEN, json!({"symbol": "ABCD", "quantity": 5.0})).await;
    reply.assert_error(404, "POSITION_NOT_FOUND");
    let padded = format!("{}{}", " ".repeat(10), "x".repeat(495));
    let reply = app.post("/api/radar/unblock", ADMIN_TOKEN, json!({"symbol": "ABCD", "reason": padded})).await;
    assert_names(&reply, "reason", "a reason of 505 characters as sent");
}
