//! Trading halts through the real service (CONTRACT §11): Alpaca is the market-data source — its
//! stock stream's `statuses` channel, spoken by the stand-in of `alpaca_data` — and the paper
//! broker executes. A halt on the stream reaches the quote, the position row and the event
//! stream; market and stop orders and closes are refused `SYMBOL_HALTED` (audited, nothing sent),
//! a limit order waits unfilled at the venue; the emergency halt's exit is still sent and waits
//! for the reopen; the reopen trades again.

use crate::alpaca_data::{service_clock, start_service, wait_until, wall_now, StandIn};
use crate::events::Sse;
use crate::helpers::*;
use serde_json::{json, Value};
use std::time::Duration;

#[tokio::test]
async fn a_halt_on_the_stream_refuses_market_orders_and_closes_until_the_reopen() {
    let alpaca = StandIn::start_on(service_clock()).await;
    alpaca.add_mover("HLTD", 1000, 1200, 5_000_000);
    let app = start_service(&alpaca).await;
    // Once the service has loaded Alpaca's universe, HLTD is a symbol of the market.
    let buy = || async {
        app.post("/api/orders", ADMIN_TOKEN, json!({"symbol": "HLTD", "side": "BUY", "quantity": 10})).await.status
    };
    let placed = wait_until("a buy of HLTD", Duration::from_secs(20), buy, |status| *status != 404).await;
    assert_eq!(placed, 201);
    let position = || async {
        let rows = app.get("/api/positions").await;
        rows.data().as_array().unwrap().iter().find(|r| r["symbol"] == "HLTD").cloned().unwrap_or(Value::Null)
    };
    wait_until("10 HLTD held", Duration::from_secs(10), position, |p| p["quantity"] == 10).await;
    // Held, so followed: the stream carries its status messages.
    wait_until(
        "HLTD's statuses subscribed",
        Duration::from_secs(10),
        || async { alpaca.received() },
        |r| {
            r.iter().any(|m| {
                m["action"] == "subscribe" && m["statuses"].as_array().is_some_and(|s| s.contains(&json!("HLTD")))
            })
        },
    )
    .await;
    let quote = || async { app.get("/api/market/quote?symbol=HLTD").await.data().clone() };
    assert_eq!(quote().await["trading_status"], "TRADING");
    assert_eq!(quote().await["halt"], Value::Null);
    let mut events = Sse::open(&app, "?kinds=symbol.status", None).await;

    // A LULD pause.
    let since = wall_now();
    alpaca.send(json!([{"T": "s", "S": "HLTD", "sc": "H", "sm": "Trading Halt", "rc": "LUDP",
        "rm": "Volatility Trading Pause", "t": since, "z": "C"}]));
    let since = tradeops_core::time::format_ts(&since);
    let halted = wait_until("HLTD halted", Duration::from_secs(10), quote, |q| q["trading_status"] == "HALTED").await;
    assert_eq!(halted["halt"], json!({"reason_code": "LUDP", "reason": "Volatility Trading Pause", "since": since}));
    let event = events.next_of("symbol.status").await;
    assert_eq!(
        event,
        json!({"symbol": "HLTD", "trading_status": "HALTED",
            "halt": {"reason_code": "LUDP", "reason": "Volatility Trading Pause", "since": since}})
    );
    wait_until("the position row says halted", Duration::from_secs(10), position, |p| p["halted"] == true).await;

    // Market and stop orders and closes are refused, naming the halt; nothing reaches the broker.
    let orders_before = app.get("/api/orders").await.data().as_array().unwrap().len();
    let detail = json!({"symbol": "HLTD", "reason_code": "LUDP", "reason": "Volatility Trading Pause", "since": since});
    for body in [
        json!({"symbol": "HLTD", "side": "BUY", "quantity": 5}),
        json!({"symbol": "HLTD", "side": "SELL", "quantity": 5, "order_type": "STOP", "stop_price": 11.0}),
    ] {
        let refused = app.post("/api/orders", ADMIN_TOKEN, body.clone()).await;
        refused.assert_error(409, "SYMBOL_HALTED");
        assert_eq!(refused.body["error"]["detail"], detail, "{body}");
        let preview = app.post("/api/orders/preview", ADMIN_TOKEN, body).await;
        preview.assert_error(409, "SYMBOL_HALTED");
    }
    let close = app.post("/api/positions/close", ADMIN_TOKEN, json!({"symbol": "HLTD"})).await;
    close.assert_error(409, "SYMBOL_HALTED");
    assert_eq!(app.get("/api/orders").await.data().as_array().unwrap().len(), orders_before, "nothing placed");
    let audit = app.get("/api/audit?outcome=SYMBOL_HALTED").await;
    assert!(audit.data().as_array().unwrap().len() >= 2, "the refusals are audited: {}", audit.body);

    // A limit order is accepted and waits at the venue, unfilled through the halt.
    let limit = app
        .post(
            "/api/orders",
            ADMIN_TOKEN,
            json!({"symbol": "HLTD", "side": "SELL", "quantity": 4, "order_type": "LIMIT", "limit_price": 11.5}),
        )
        .await;
    let id = limit.assert_ok(201)["client_order_id"].as_str().unwrap().to_string();
    app.wait_for_order(&id, "ACCEPTED").await;
    tokio::time::sleep(Duration::from_millis(1500)).await; // the engine steps every second
    assert_eq!(app.get(&format!("/api/orders/{id}")).await.data()["status"], "ACCEPTED", "no fill in a halt");

    // A quotation resumption is still a halt; the trading resumption ends it.
    alpaca.send(json!([{"T": "s", "S": "HLTD", "sc": "Q", "sm": "Quotation Resumption", "rc": "LUDP",
        "rm": "Volatility Trading Pause", "t": wall_now(), "z": "C"}]));
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(quote().await["trading_status"], "HALTED");
    alpaca.send(json!([{"T": "s", "S": "HLTD", "sc": "T", "sm": "Trading Resumption", "rc": "", "rm": "",
        "t": wall_now(), "z": "C"}]));
    wait_until("HLTD trades again", Duration::from_secs(10), quote, |q| q["trading_status"] == "TRADING").await;
    let event = events.next_of("symbol.status").await;
    assert_eq!(event, json!({"symbol": "HLTD", "trading_status": "TRADING", "halt": null}));
    // The waiting limit fills at the reopen (the quote's bid, 11.99, is above its 11.50), and the rest closes.
    app.wait_for_order(&id, "FILLED").await;

    // A news halt, then the emergency halt: its exit is still sent, and waits at the venue.
    alpaca.send(json!([{"T": "s", "S": "HLTD", "sc": "H", "sm": "Trading Halt", "rc": "T1",
        "rm": "Halt News Pending", "t": wall_now(), "z": "C"}]));
    wait_until("the position row says halted", Duration::from_secs(10), position, |p| p["halted"] == true).await;
    let halt = app.post("/api/risk/emergency-halt", ADMIN_TOKEN, json!({"reason": "news halt drill"})).await;
    assert_eq!(halt.assert_ok(200)["liquidation_requested"], true, "{}", halt.body);
    let exit = || async {
        let rows = app.get("/api/orders?symbol=HLTD").await;
        rows.data().as_array().unwrap().iter().find(|o| o["side"] == "SELL" && o["quantity"] == 6).cloned()
    };
    let sent = wait_until("the halt's exit is at the venue", Duration::from_secs(10), exit, |o| {
        o.as_ref().is_some_and(|o| o["status"] == "ACCEPTED")
    })
    .await
    .unwrap();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let id = sent["client_order_id"].as_str().unwrap();
    assert_eq!(app.get(&format!("/api/orders/{id}")).await.data()["status"], "ACCEPTED", "waiting for the reopen");
    assert_eq!(position().await["quantity"], 6);
    alpaca.send(json!([{"T": "s", "S": "HLTD", "sc": "T", "sm": "Trading Resumption", "rc": "", "rm": "",
        "t": wall_now(), "z": "C"}]));
    app.wait_for_order(id, "FILLED").await;
    wait_until("flat", Duration::from_secs(10), position, |p| p.is_null() || p["quantity"] == 0).await;
}

/// A symbol the service does not follow (not held, not watched, no order) but an operator looks
/// at — its quote, its chart — is streamed too, statuses included: its halt reads on the quote
/// as it does for a followed symbol (CONTRACT §11).
#[tokio::test]
async fn a_symbol_only_looked_at_has_its_halts_streamed_too() {
    let alpaca = StandIn::start_on(service_clock()).await;
    alpaca.add_mover("LOOK", 1000, 1200, 5_000_000);
    let app = start_service(&alpaca).await;
    let quote = || async { app.get("/api/market/quote?symbol=LOOK").await };
    // Once Alpaca's universe is loaded, LOOK has a quote; asking for it is looking at it.
    wait_until("LOOK's quote", Duration::from_secs(20), quote, |q| q.status == 200).await;
    let subscribed = |r: &Vec<Value>| {
        r.iter()
            .any(|m| m["action"] == "subscribe" && m["statuses"].as_array().is_some_and(|s| s.contains(&json!("LOOK"))))
    };
    wait_until("LOOK's statuses subscribed", Duration::from_secs(10), || async { alpaca.received() }, subscribed).await;
    assert!(app.get("/api/watchlist").await.data().as_array().unwrap().is_empty(), "not followed by the engine");
    alpaca.send(json!([{"T": "s", "S": "LOOK", "sc": "H", "sm": "Trading Halt", "rc": "T1",
        "rm": "Halt News Pending", "t": wall_now(), "z": "C"}]));
    let halted = wait_until("LOOK halted on its quote", Duration::from_secs(10), quote, |q| {
        q.status == 200 && q.data()["trading_status"] == "HALTED"
    })
    .await;
    assert_eq!(halted.data()["halt"]["reason_code"], "T1", "{}", halted.body);
    // Still subscribed a few engine steps later (the feed renews the subscription every second).
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert!(
        !alpaca.received().iter().any(|m| m["action"] == "unsubscribe"),
        "a symbol looked at stays streamed for a while: {:?}",
        alpaca.received()
    );
    assert_eq!(quote().await.data()["trading_status"], "HALTED");
}

/// One halt state (CONTRACT §11): the moment the quote reads a halt, an order is refused; the
/// moment it reads trading again, an order is accepted — for a symbol the engine does not
/// follow yet (only looked at) and for one it holds — with no engine step in between to wait
/// for. Each order goes in right after the quote that shows the change.
#[tokio::test]
async fn the_quote_and_the_order_gate_read_one_halt_state() {
    let alpaca = StandIn::start_on(service_clock()).await;
    alpaca.add_mover("ONE", 1000, 1200, 5_000_000);
    let app = start_service(&alpaca).await;
    let quote = || async { app.get("/api/market/quote?symbol=ONE").await };
    wait_until("ONE's quote", Duration::from_secs(20), quote, |q| q.status == 200).await;
    let subscribed = |r: &Vec<Value>| {
        r.iter()
            .any(|m| m["action"] == "subscribe" && m["statuses"].as_array().is_some_and(|s| s.contains(&json!("ONE"))))
    };
    wait_until("ONE's statuses subscribed", Duration::from_secs(10), || async { alpaca.received() }, subscribed).await;
    let reads = |wanted: &'static str| move |q: &Reply| q.status == 200 && q.data()["trading_status"] == wanted;
    for (round, quantity) in [("only looked at", 5), ("held", 6)] {
        // Different sizes: the same order twice within 10 s is refused as a duplicate.
        let buy = json!({"symbol": "ONE", "side": "BUY", "quantity": quantity});
        let preview = json!({"symbol": "ONE", "side": "BUY", "quantity": quantity, "order_type": "MARKET"});
        alpaca.send(json!([{"T": "s", "S": "ONE", "sc": "H", "sm": "Trading Halt", "rc": "LUDP",
            "rm": "Volatility Trading Pause", "t": wall_now(), "z": "C"}]));
        wait_until("ONE halted on its quote", Duration::from_secs(10), quote, reads("HALTED")).await;
        app.post("/api/orders/preview", ADMIN_TOKEN, preview.clone()).await.assert_error(409, "SYMBOL_HALTED");
        app.post("/api/orders", ADMIN_TOKEN, buy.clone()).await.assert_error(409, "SYMBOL_HALTED");

        alpaca.send(json!([{"T": "s", "S": "ONE", "sc": "T", "sm": "Trading Resumption", "rc": "", "rm": "",
            "t": wall_now(), "z": "C"}]));
        wait_until("ONE trades on its quote", Duration::from_secs(10), quote, reads("TRADING")).await;
        app.post("/api/orders/preview", ADMIN_TOKEN, preview.clone()).await.assert_ok(200);
        let placed = app.post("/api/orders", ADMIN_TOKEN, buy.clone()).await;
        assert_eq!(placed.status, 201, "{round}: the quote reads TRADING, so the order goes: {}", placed.body);
        let id = placed.data()["client_order_id"].as_str().unwrap().to_string();
        app.wait_for_order(&id, "FILLED").await;
    }
}
