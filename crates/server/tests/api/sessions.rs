//! The whole trading day (CONTRACT §12) through the API: the session and its changes, the
//! account's session, with the service's market clock moved through 04:00, 09:30, 16:00 and
//! 20:00 New York on the NYSE calendar.

use crate::events::Sse;
use crate::helpers::*;
use serde_json::{json, Value};
use std::sync::Arc;

fn ts(text: &str) -> tradeops_core::Timestamp {
    tradeops_core::time::parse_ts(text).unwrap()
}

/// A service whose market clock starts at `at` (on the simulated market).
async fn spawn_at(at: &str) -> TestApp {
    let (db, url) = TestDb::new().await;
    start_at(test_config(url), Arc::new(db), axum::Router::new(), tradeops_core::ManualClock::new(ts(at))).await
}

/// The session now, and that the account summary says the same.
async fn session(app: &TestApp) -> Value {
    let now = app.get("/api/market/session").await.assert_ok(200).clone();
    let account = app.get("/api/account/summary").await;
    assert_eq!(account.assert_ok(200)["session"], now["session"], "the account's session: {}", account.body);
    now
}

#[tokio::test]
async fn the_session_and_its_changes_follow_the_nyse_day() {
    // Monday 2026-11-23, 03:59 New York (EST, UTC−5).
    let app = spawn_at("2026-11-23T08:59:00Z").await;
    // The simulated market's default calendar, ALWAYS_OPEN, is regular all day.
    let always = session(&app).await;
    assert_eq!((always["session"].as_str(), always["next_session"].as_str()), (Some("REGULAR"), Some("REGULAR")));
    assert_eq!(always["next_session_at"], "2026-11-24T05:00:00.000Z", "the next New York midnight");

    let mut sse = Sse::open(&app, "?kinds=market.session", None).await;
    app.put_settings(ADMIN_TOKEN, json!({"runtime": {"market_calendar": "NYSE"}})).await.assert_ok(200);
    let closed = sse.next_of("market.session").await;
    let expected = json!({
        "session": "CLOSED", "trading_day": "2026-11-23",
        "pre_market_open_at": "2026-11-23T09:00:00.000Z", "regular_open_at": "2026-11-23T14:30:00.000Z",
        "regular_close_at": "2026-11-23T21:00:00.000Z", "after_hours_close_at": "2026-11-24T01:00:00.000Z",
        "next_session": "PRE_MARKET", "next_session_at": "2026-11-23T09:00:00.000Z",
    });
    assert_eq!(closed, expected);
    assert_eq!(session(&app).await, expected, "the endpoint says what the event said");

    let day = [
        ("2026-11-23T09:00:00Z", "PRE_MARKET", "REGULAR", "2026-11-23T14:30:00.000Z"),
        ("2026-11-23T14:30:00Z", "REGULAR", "AFTER_HOURS", "2026-11-23T21:00:00.000Z"),
        ("2026-11-23T21:00:00Z", "AFTER_HOURS", "CLOSED", "2026-11-24T01:00:00.000Z"),
        ("2026-11-24T01:00:00Z", "CLOSED", "PRE_MARKET", "2026-11-24T09:00:00.000Z"),
    ];
    for (at, now, next, next_at) in day {
        app.market.set(ts(at));
        let event = sse.next_of("market.session").await;
        assert_eq!(
            (event["session"].as_str(), event["next_session"].as_str(), event["next_session_at"].as_str()),
            (Some(now), Some(next), Some(next_at)),
            "at {at}: {event}"
        );
        assert_eq!(event["trading_day"], "2026-11-23", "20:00 New York is still Monday: {event}");
        assert_eq!(session(&app).await, event, "at {at}");
    }
}

/// `price` × `factor`, to the cent, as a JSON number.
fn price_at(price: f64, factor: f64) -> f64 {
    (price * factor * 100.0).round() / 100.0
}

/// A service at 07:00 New York on a Monday, on the NYSE calendar, and two symbols with their
/// last prices.
async fn pre_market() -> (TestApp, Vec<(String, f64)>) {
    let app = spawn_at("2026-11-23T12:00:00Z").await;
    let symbols = app.market_symbols(2).await;
    app.put_settings(ADMIN_TOKEN, json!({"runtime": {"market_calendar": "NYSE"}})).await.assert_ok(200);
    assert_eq!(session(&app).await["session"], "PRE_MARKET");
    (app, symbols)
}

#[tokio::test]
async fn outside_the_regular_session_only_extended_hours_limits_are_taken_and_nothing_else_is_sent() {
    let (app, symbols) = pre_market().await;
    let (symbol, price) = symbols[0].clone();
    let limit = price_at(price, 1.02);
    let refused = [
        json!({"symbol": symbol, "side": "BUY", "quantity": 10}),
        json!({"symbol": symbol, "side": "BUY", "quantity": 10, "order_type": "LIMIT", "limit_price": limit}),
        json!({"symbol": symbol, "side": "BUY", "quantity": 10, "order_type": "STOP", "stop_price": limit}),
    ];
    for body in refused {
        for path in ["/api/orders", "/api/orders/preview"] {
            let reply = app.post(path, ADMIN_TOKEN, body.clone()).await;
            reply.assert_error(409, "OUTSIDE_REGULAR_SESSION");
            assert_eq!(
                reply.body["error"]["detail"],
                json!({"session": "PRE_MARKET", "regular_open_at": "2026-11-23T14:30:00.000Z",
                       "allowed": {"order_type": "LIMIT", "time_in_force": "DAY", "extended_hours": true}}),
                "{path} {body}"
            );
        }
    }
    // Marked extended-hours, an order must be a LIMIT DAY order, in any session.
    for body in [
        json!({"symbol": symbol, "side": "BUY", "quantity": 10, "extended_hours": true}),
        json!({"symbol": symbol, "side": "BUY", "quantity": 10, "order_type": "LIMIT", "limit_price": limit,
               "time_in_force": "GTC", "extended_hours": true}),
    ] {
        let reply = app.post("/api/orders", ADMIN_TOKEN, body).await;
        reply.assert_error(400, "VALIDATION_ERROR");
        assert_eq!(reply.body["error"]["detail"]["field"], "extended_hours", "{}", reply.body);
    }
    let orders = app.get("/api/orders").await;
    assert_eq!(
        orders.assert_ok(200).as_array().map(Vec::len),
        Some(0),
        "a refused order leaves nothing: {}",
        orders.body
    );

    // An extended-hours limit is taken, and the paper broker fills it in the pre-market.
    let body = json!({"symbol": symbol, "side": "BUY", "quantity": 10, "order_type": "LIMIT", "limit_price": limit,
                      "extended_hours": true});
    let preview = app.post("/api/orders/preview", ADMIN_TOKEN, body.clone()).await;
    assert_eq!(preview.assert_ok(200)["approved"], true, "{}", preview.body);
    let placed = app.post("/api/orders", ADMIN_TOKEN, body).await;
    let id = placed.assert_ok(201)["client_order_id"].as_str().unwrap().to_string();
    assert_eq!(placed.data()["extended_hours"], true);
    let filled = app.wait_for_order(&id, "FILLED").await;
    assert_eq!(filled["extended_hours"], true);
    let listed = app.get("/api/orders").await;
    assert_eq!(listed.data()[0]["extended_hours"], true, "the order row says so: {}", listed.body);
}

#[tokio::test]
async fn a_close_and_the_emergency_halt_in_the_pre_market_go_out_as_extended_hours_limits_and_flatten() {
    let (app, symbols) = pre_market().await;
    for (symbol, price) in &symbols {
        let body = json!({"symbol": symbol, "side": "BUY", "quantity": 20, "order_type": "LIMIT",
                          "limit_price": price_at(*price, 1.03), "extended_hours": true});
        let placed = app.post("/api/orders", ADMIN_TOKEN, body).await;
        app.wait_for_order(placed.assert_ok(201)["client_order_id"].as_str().unwrap(), "FILLED").await;
    }
    // A partial close: an extended-hours limit under the last trade (by the 1% slippage).
    let (symbol, _) = &symbols[0];
    let close = app.post("/api/positions/close", ADMIN_TOKEN, json!({"symbol": symbol, "quantity": 5})).await;
    let id = close.assert_ok(200)["close_order_client_order_id"].as_str().unwrap().to_string();
    let exit = app.get(&format!("/api/orders/{id}")).await.data().clone();
    assert_eq!((exit["order_type"].as_str(), exit["extended_hours"].as_bool()), (Some("LIMIT"), Some(true)), "{exit}");
    assert_eq!(exit["time_in_force"], "DAY");
    let quote = app.get(&format!("/api/market/quote?symbol={symbol}")).await.data().clone();
    let last = quote["last"].as_f64().unwrap();
    let limit = exit["limit_price"].as_f64().unwrap();
    assert!(limit < last && limit >= last * 0.98, "a marketable limit about 1% under {last}: {limit}");
    app.wait_for_order(&id, "FILLED").await;

    // The emergency halt at 07:00 flattens as surely as at 11:00.
    app.post("/api/risk/emergency-halt", ADMIN_TOKEN, json!({"reason": "pre-market drill"})).await.assert_ok(200);
    let mut flat = false;
    for _ in 0..150 {
        app.market.advance(chrono::Duration::milliseconds(200));
        let positions = app.get("/api/positions").await;
        if positions.data().as_array().unwrap().iter().all(|p| p["quantity"] == 0) {
            flat = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(30)).await;
    }
    assert!(flat, "flat after the halt: {}", app.get("/api/positions").await.body);
    let orders = app.get("/api/orders?limit=100").await;
    let exits: Vec<&Value> =
        orders.data().as_array().unwrap().iter().filter(|o| o["reason"] == "emergency liquidation").collect();
    assert_eq!(exits.len(), 2, "one exit a symbol: {}", orders.body);
    assert!(
        exits.iter().all(|o| o["order_type"] == "LIMIT" && o["extended_hours"] == true && o["status"] == "FILLED"),
        "{exits:?}"
    );
}
