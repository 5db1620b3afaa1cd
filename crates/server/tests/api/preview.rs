//! `POST /api/orders/preview`, the order ticket's risk preview: the risk gate's verdict on an
//! order, from the same gate an order meets, with nothing written — no order, no violation row,
//! no audit row.

use crate::helpers::*;
use serde_json::{json, Value};

/// Orders, violations and audit rows: what a preview must leave as it found them.
async fn written(app: &TestApp) -> (Value, Value, Value) {
    (
        app.get("/api/orders").await.data().clone(),
        app.get("/api/risk/violations").await.data().clone(),
        app.get("/api/audit").await.data().clone(),
    )
}

#[tokio::test]
async fn preview_answers_as_an_order_would_and_writes_nothing() {
    let app = spawn_app().await;
    let (symbol, price) = app.market_symbols(1).await.remove(0);
    let qty = (50.0 / price).floor().max(1.0) as u64;
    let order = json!({"symbol": symbol, "side": "BUY", "quantity": qty, "reason": "preview test"});

    // Approved, with the order's cost and the buying power it leaves.
    let before = written(&app).await;
    let preview = app.post("/api/orders/preview", ADMIN_TOKEN, order.clone()).await;
    let data = preview.assert_ok(200).clone();
    assert_eq!(data["approved"], true, "{data}");
    assert_eq!(data["verdict"], Value::Null);
    let cost = data["estimated_cost"].as_f64().unwrap();
    assert!((cost - qty as f64 * data["reference_price"].as_f64().unwrap()).abs() < 0.01, "{data}");
    assert!(data["buying_power_after"].as_f64().unwrap() < data["buying_power"].as_f64().unwrap() - cost + 0.01);
    assert_eq!(written(&app).await, before, "an approved preview wrote nothing");
    // … and the order it previewed passes.
    app.post("/api/orders", ADMIN_TOKEN, order.clone()).await.assert_ok(201);

    // The same order again: a duplicate for both, naming the same earlier order.
    let before = written(&app).await;
    let preview = app.post("/api/orders/preview", ADMIN_TOKEN, order.clone()).await;
    let dup = preview.assert_ok(200)["verdict"].clone();
    assert_eq!(written(&app).await, before, "a refused preview wrote nothing");
    let refused = app.post("/api/orders", ADMIN_TOKEN, order.clone()).await;
    refused.assert_error(409, "DUPLICATE_ORDER_BLOCKED");
    assert_eq!(dup["code"], "DUPLICATE_ORDER_BLOCKED");
    assert_eq!(dup["existing_client_order_id"], refused.body["error"]["detail"]["existing_client_order_id"]);

    // Refused by a risk rule: the same rule, limit, current value and message as the order's
    // RISK_BLOCKED; only the order leaves a violation row (and an audit row).
    app.put_settings(ADMIN_TOKEN, json!({"risk_controls": {"max_order_value": 100}})).await.assert_ok(200);
    let big = json!({"symbol": symbol, "side": "BUY", "quantity": 1000});
    let before = written(&app).await;
    let preview = app.post("/api/orders/preview", ADMIN_TOKEN, big.clone()).await;
    let data = preview.assert_ok(200).clone();
    assert_eq!(written(&app).await, before, "a refused preview wrote nothing");
    assert_eq!(data["approved"], false);
    let verdict = &data["verdict"];
    let refused = app.post("/api/orders", ADMIN_TOKEN, big).await;
    refused.assert_error(422, "RISK_BLOCKED");
    let detail = &refused.body["error"]["detail"];
    assert_eq!(verdict["code"], "RISK_BLOCKED");
    assert_eq!(verdict["rule"], "MAX_ORDER_VALUE");
    assert_eq!(verdict["rule"], detail["rule"]);
    assert_eq!(verdict["limit"], detail["limit"]);
    assert_eq!(verdict["current"], detail["current"]);
    assert_eq!(verdict["message"], refused.body["error"]["message"]);
    let violations = app.get("/api/risk/violations").await;
    assert_eq!(violations.data().as_array().unwrap().len(), before.1.as_array().unwrap().len() + 1);
}

#[tokio::test]
async fn preview_refuses_what_an_order_refuses_on_its_face() {
    let app = spawn_app().await;
    let (symbol, _) = app.market_symbols(1).await.remove(0);
    for (body, status, code) in [
        (json!({"symbol": symbol, "side": "BUY", "quantity": 0}), 400, "VALIDATION_ERROR"),
        (json!({"symbol": symbol, "side": "BUY", "quantity": 1, "order_type": "LIMIT"}), 400, "VALIDATION_ERROR"),
        (json!({"symbol": symbol, "side": "SELL", "quantity": 1}), 400, "VALIDATION_ERROR"),
        (json!({"symbol": symbol, "side": "BUY", "quantity": 1, "colour": "red"}), 400, "VALIDATION_ERROR"),
        (json!({"symbol": "ZZZZZ", "side": "BUY", "quantity": 1}), 404, "NOT_FOUND"),
    ] {
        let order = app.post("/api/orders", ADMIN_TOKEN, body.clone()).await;
        order.assert_error(status, code);
        let preview = app.post("/api/orders/preview", ADMIN_TOKEN, body.clone()).await;
        preview.assert_error(status, code);
        assert_eq!(preview.body["error"]["message"], order.body["error"]["message"], "{body}");
    }
    let viewer = app.token("preview-viewer", "viewer").await;
    let body = json!({"symbol": symbol, "side": "BUY", "quantity": 1});
    app.post("/api/orders/preview", &viewer, body).await.assert_error(403, "FORBIDDEN");
}
