//! The trading engine through the API: orders on the paper broker, positions, risk refusals,
//! the emergency halt — with the simulated market on a manual clock.

use crate::helpers::*;
use serde_json::{json, Value};

async fn buy(app: &TestApp, symbol: &str, qty: u64) -> crate::helpers::Reply {
    app.post("/api/orders", ADMIN_TOKEN, json!({"symbol": symbol, "side": "BUY", "quantity": qty})).await
}

/// Waits (briefly) until the first position has `quantity` shares: the engine's view follows the
/// database commit by a moment.
async fn wait_position(app: &TestApp, quantity: u64) -> Value {
    for _ in 0..100 {
        let positions = app.get("/api/positions").await;
        if positions.data()[0]["quantity"] == quantity {
            return positions.data()[0].clone();
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    panic!("no position of {quantity}: {}", app.get("/api/positions").await.body);
}

fn id(reply: &crate::helpers::Reply) -> String {
    reply.data()["client_order_id"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn a_market_buy_fills_on_the_paper_broker_into_a_position() {
    let app = spawn_app().await;
    let (symbol, _) = app.market_symbols(1).await.remove(0);
    let placed = buy(&app, &symbol, 100).await;
    let data = placed.assert_ok(201).clone();
    assert_eq!(
        (data["status"].as_str(), data["side"].as_str(), data["order_type"].as_str()),
        (Some("NEW"), Some("BUY"), Some("MARKET"))
    );
    assert_eq!(data["time_in_force"], "DAY");
    let filled = app.wait_for_order(&id(&placed), "FILLED").await;
    assert_eq!(filled["filled_quantity"], 100);
    let executions = filled["executions"].as_array().unwrap();
    assert_eq!(executions.iter().map(|e| e["quantity"].as_u64().unwrap()).sum::<u64>(), 100);
    let avg = filled["average_fill_price"].as_f64().unwrap();
    assert!(avg > 0.0 && filled["broker_order_id"].is_string());

    let p = &wait_position(&app, 100).await;
    assert_eq!((p["symbol"].as_str(), p["quantity"].as_u64()), (Some(symbol.as_str()), Some(100)));
    assert_eq!(p["average_entry_price"].as_f64(), Some(avg));
    assert_eq!(p["strategy_status"], "Halted", "a manual buy of an unwatched symbol is managed by hand");
    assert_eq!(p["alert_level"], "NONE");

    let account = app.get("/api/account/summary").await;
    let cash = account.data()["cash"].as_f64().unwrap();
    assert!((cash - (100_000.0 - avg * 100.0)).abs() < 0.01, "cash {cash}");
    assert_eq!(account.data()["broker_name"], "paper");
    let listed = app.get("/api/orders").await;
    assert_eq!(listed.data()[0]["status"], "FILLED");
    let dashboard = app.get("/api/dashboard/summary").await;
    let equity = dashboard.data()["equity"].as_f64().unwrap();
    let unrealized = dashboard.data()["unrealized_pnl"].as_f64().unwrap();
    assert!((equity - (cash + 100.0 * (avg + unrealized / 100.0))).abs() < 0.02, "{}", dashboard.body);
    assert_eq!(dashboard.data()["system_health"], "HEALTHY");
    app.get("/api/account/performance?date=2026-13-01").await.assert_error(400, "VALIDATION_ERROR");
    assert_eq!(app.get("/api/account/performance?session_id=2026-11-19").await.body["meta"]["count"], 0);
    let perf = app.get("/api/account/performance").await;
    assert_eq!(perf.data()[0]["trades"], 1);

    // everything survives a restart
    let app = app.restart().await;
    assert_eq!(app.get("/api/positions").await.data()[0]["quantity"], 100);
    assert_eq!(app.get(&format!("/api/orders/{}", id(&placed))).await.data()["status"], "FILLED");
    assert!((app.get("/api/account/summary").await.data()["cash"].as_f64().unwrap() - cash).abs() < 1e-9);
}

#[tokio::test]
async fn closing_and_its_refusals() {
    let app = spawn_app().await;
    let (symbol, _) = app.market_symbols(1).await.remove(0);
    let placed = buy(&app, &symbol, 100).await;
    app.wait_for_order(&id(&placed), "FILLED").await;
    app.post("/api/positions/close", ADMIN_TOKEN, json!({"symbol": symbol, "quantity": 101}))
        .await
        .assert_error(400, "VALIDATION_ERROR");
    app.post("/api/positions/close", ADMIN_TOKEN, json!({"symbol": "ZZZZ"}))
        .await
        .assert_error(404, "POSITION_NOT_FOUND");
    let close = app.post("/api/positions/close", ADMIN_TOKEN, json!({"symbol": symbol, "quantity": 40})).await;
    let close_id = close.assert_ok(200)["close_order_client_order_id"].as_str().unwrap().to_string();
    app.wait_for_order(&close_id, "FILLED").await;
    wait_position(&app, 60).await;
    let halted = app.post("/api/positions/halt", ADMIN_TOKEN, json!({"symbol": symbol, "reason": "manual"})).await;
    assert_eq!(halted.assert_ok(200)["strategy_status"], "Halted");
    let viewer = app.token("v", "viewer").await;
    app.post("/api/positions/close", &viewer, json!({"symbol": symbol})).await.assert_error(403, "FORBIDDEN");
}

#[tokio::test]
async fn a_cancel_can_be_asked_again_until_the_order_ends() {
    let app = spawn_app().await;
    let (symbol, price) = app.market_symbols(1).await.remove(0);
    let limit = ((price * 0.97) * 100.0).floor() / 100.0;
    let placed = app
        .post(
            "/api/orders",
            ADMIN_TOKEN,
            json!({"symbol": symbol, "side": "BUY", "quantity": 10, "order_type": "LIMIT", "limit_price": limit}),
        )
        .await;
    let order_id = id(&placed);
    app.wait_for_order(&order_id, "ACCEPTED").await;
    let cancel = app.post("/api/orders/cancel", ADMIN_TOKEN, json!({"client_order_id": order_id})).await;
    assert_eq!(cancel.assert_ok(200)["status"], "PENDING_CANCEL");
    // Asking again while PENDING_CANCEL re-sends the cancel (its answer may have been lost),
    // answered as CONTRACT §2 says of an order already PENDING_CANCEL, and audited.
    let again = app.post("/api/orders/cancel", ADMIN_TOKEN, json!({"client_order_id": order_id})).await;
    again.assert_error(409, "ORDER_NOT_CANCELLABLE");
    assert_eq!(again.body["error"]["detail"]["status"], "PENDING_CANCEL");
    assert_eq!(again.body["error"]["detail"]["cancel_sent_again"], true);
    let audited = app.get("/api/audit?action=order.cancel").await;
    let rows: Vec<_> = audited.data().as_array().unwrap().iter().filter(|r| r["target"] == order_id.as_str()).collect();
    let outcomes: Vec<_> = rows.iter().map(|r| r["outcome"].as_str().unwrap()).collect();
    assert_eq!(outcomes, ["ORDER_NOT_CANCELLABLE", "OK"], "both requests audited, newest first: {}", audited.body);
    app.wait_for_order(&order_id, "CANCELED").await;
    let ended = app.post("/api/orders/cancel", ADMIN_TOKEN, json!({"client_order_id": order_id})).await;
    ended.assert_error(409, "ORDER_NOT_CANCELLABLE");
    assert_eq!(ended.body["error"]["detail"]["status"], "CANCELED");
    let executions = app.get(&format!("/api/orders/{order_id}")).await;
    assert_eq!(executions.data()["filled_quantity"], 0, "{}", executions.body);
    app.post("/api/orders/cancel", ADMIN_TOKEN, json!({"client_order_id": "nope"}))
        .await
        .assert_error(404, "NOT_FOUND");
    app.get("/api/orders/nope").await.assert_error(404, "NOT_FOUND");
}

#[tokio::test]
async fn risk_duplicate_and_validation_refusals() {
    let app = spawn_app().await;
    let (symbol, price) = app.market_symbols(1).await.remove(0);
    app.put_settings(ADMIN_TOKEN, json!({"risk_controls": {"max_order_value": 100}})).await.assert_ok(200);
    let big = buy(&app, &symbol, 1000).await;
    big.assert_error(422, "RISK_BLOCKED");
    let detail = &big.body["error"]["detail"];
    assert_eq!(detail["rule"], "MAX_ORDER_VALUE");
    assert_eq!(detail["limit"], 100.0);
    assert!(detail["current"].as_f64().unwrap() > 100.0);
    let violations = app.get("/api/risk/violations").await;
    assert_eq!(violations.data()[0]["rule"], "MAX_ORDER_VALUE");
    assert_eq!(violations.data()[0]["symbol"], symbol);
    app.put_settings(ADMIN_TOKEN, json!({"risk_controls": {"max_order_value": 25000}})).await.assert_ok(200);

    let qty = (50.0 / price).floor().max(1.0) as u64;
    let first = buy(&app, &symbol, qty).await;
    first.assert_ok(201);
    let dup = buy(&app, &symbol, qty).await;
    dup.assert_error(409, "DUPLICATE_ORDER_BLOCKED");
    assert_eq!(dup.body["error"]["detail"]["existing_client_order_id"], id(&first));
    let reuse = json!({"symbol": symbol, "side": "BUY", "quantity": qty + 1, "client_order_id": "mine-1"});
    app.post("/api/orders", ADMIN_TOKEN, reuse.clone()).await.assert_ok(201);
    let mut again = reuse.clone();
    again["quantity"] = json!(qty + 2);
    app.post("/api/orders", ADMIN_TOKEN, again).await.assert_error(409, "DUPLICATE_ORDER_BLOCKED");

    for (body, field) in [
        (json!({"symbol": symbol, "side": "BUY", "quantity": 0}), "quantity"),
        (json!({"symbol": symbol, "side": "HOLD", "quantity": 1}), "side"),
        (json!({"symbol": symbol, "side": "BUY", "quantity": 1, "order_type": "LIMIT"}), "limit_price"),
        (
            json!({"symbol": symbol, "side": "BUY", "quantity": 1, "order_type": "LIMIT", "limit_price": 10.001}),
            "limit_price",
        ),
        (json!({"symbol": symbol, "side": "SELL", "quantity": 1}), "quantity"),
        (json!({"side": "BUY", "quantity": 1}), "symbol"),
    ] {
        let reply = app.post("/api/orders", ADMIN_TOKEN, body.clone()).await;
        reply.assert_error(400, "VALIDATION_ERROR");
        assert_eq!(reply.body["error"]["detail"]["field"], field, "{body}");
    }
    app.post("/api/orders", ADMIN_TOKEN, json!({"symbol": "ZZZZZZ", "side": "BUY", "quantity": 1}))
        .await
        .assert_error(404, "NOT_FOUND");
}

#[tokio::test]
async fn orders_list_filters_and_pages() {
    let app = spawn_app().await;
    let symbols = app.market_symbols(3).await;
    for (s, _) in &symbols {
        buy(&app, s, 1).await.assert_ok(201);
    }
    let page = app.get("/api/orders?limit=2").await;
    assert_eq!(page.body["meta"]["count"], 2);
    let cursor = page.body["meta"]["next_cursor"].as_str().unwrap().to_string();
    let rest = app.get(&format!("/api/orders?limit=2&cursor={cursor}")).await;
    assert_eq!(rest.body["meta"]["count"], 1);
    assert!(rest.body["meta"]["next_cursor"].is_null());
    let one = app.get(&format!("/api/orders?symbol={}", symbols[1].0.to_lowercase())).await;
    assert_eq!(one.body["meta"]["count"], 1);
    assert_eq!(app.get("/api/orders?date=2026-11-19").await.body["meta"]["count"], 0);
    app.get("/api/orders?date=20261120").await.assert_error(400, "VALIDATION_ERROR");
    app.get("/api/orders?status=DONE").await.assert_error(400, "VALIDATION_ERROR");
    app.get("/api/orders?cursor=zzz").await.assert_error(400, "VALIDATION_ERROR");
}

/// The order list is served from a page kept while no order changed: each change — a new order,
/// its fill — shows in the very next list, never a page read before it.
#[tokio::test]
async fn the_order_list_shows_each_change_at_once() {
    let app = spawn_app().await;
    let (symbol, _) = app.market_symbols(1).await.remove(0);
    assert_eq!(app.get("/api/orders").await.body["meta"]["count"], 0);
    let placed = buy(&app, &symbol, 10).await;
    placed.assert_ok(201);
    let listed = app.get("/api/orders").await;
    assert_eq!(listed.body["meta"]["count"], 1, "{}", listed.body);
    assert_eq!(listed.data()[0]["client_order_id"], id(&placed).as_str());
    app.wait_for_order(&id(&placed), "FILLED").await;
    let listed = app.get("/api/orders").await;
    assert_eq!(
        (listed.data()[0]["status"].as_str(), listed.data()[0]["filled_quantity"].as_u64()),
        (Some("FILLED"), Some(10))
    );
}

#[tokio::test]
async fn order_generating_actions_wait_for_the_open() {
    let app = spawn_app().await;
    let (symbol, _) = app.market_symbols(1).await.remove(0);
    app.put_settings(ADMIN_TOKEN, json!({"runtime": {"market_calendar": "NYSE"}})).await.assert_ok(200);
    app.market.set(tradeops_core::time::parse_ts("2026-11-21T15:00:00Z").unwrap()); // Saturday
    let closed = buy(&app, &symbol, 1).await;
    closed.assert_error(409, "MARKET_CLOSED");
    assert_eq!(closed.body["error"]["detail"]["next_open"], "2026-11-23T09:00:00.000Z");
}

#[tokio::test]
async fn emergency_halt_flattens_latches_and_survives_a_restart() {
    let app = spawn_app().await;
    let symbols = app.market_symbols(2).await;
    let placed = buy(&app, &symbols[0].0, 50).await;
    app.wait_for_order(&id(&placed), "FILLED").await;
    app.post("/api/radar/watch", ADMIN_TOKEN, json!({"symbol": symbols[1].0})).await.assert_ok(200);

    let halt = app.post("/api/risk/emergency-halt", ADMIN_TOKEN, json!({"reason": "runaway strategy"})).await;
    let data = halt.assert_ok(200).clone();
    assert_eq!((data["halted"].as_bool(), data["liquidation_requested"].as_bool()), (Some(true), Some(true)));
    let state = app.get("/api/risk/state").await;
    assert_eq!(state.data()["trading_state"], "HALTED");
    assert_eq!(state.data()["halt_reason"], "runaway strategy");
    assert_eq!(state.data()["halted_by"], "admin");
    buy(&app, &symbols[1].0, 1).await.assert_error(409, "EMERGENCY_HALT_ACTIVE");
    app.post("/api/radar/watch", ADMIN_TOKEN, json!({"symbol": symbols[0].0}))
        .await
        .assert_error(409, "EMERGENCY_HALT_ACTIVE");
    app.post("/api/watchlist/restart", ADMIN_TOKEN, json!({"symbol": symbols[1].0}))
        .await
        .assert_error(409, "EMERGENCY_HALT_ACTIVE");
    let watch = app.get("/api/watchlist").await;
    assert_eq!(watch.data()[0]["strategy_status"], "Closed", "strategies stopped");

    // the exit fills: flat
    for _ in 0..100 {
        app.market.advance(chrono::Duration::milliseconds(500));
        if app.get("/api/positions").await.body["meta"]["count"] == 0 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(30)).await;
    }
    assert_eq!(app.get("/api/positions").await.body["meta"]["count"], 0, "flat after the halt");

    // the deprecated alias answers the same, marked deprecated
    let alias = app.post("/api/emergency/liquidate", ADMIN_TOKEN, json!({"reason": "again"})).await;
    assert_eq!(alias.assert_ok(200)["liquidation_requested"], false);
    assert_eq!(alias.headers.get("deprecation").unwrap(), "true");

    let app = app.restart().await;
    assert_eq!(
        app.get("/api/risk/state").await.data()["trading_state"],
        "HALTED",
        "a halted service comes back halted"
    );
    let resumed = app.post("/api/risk/resume", ADMIN_TOKEN, json!({"reason": "fixed"})).await;
    assert_eq!(resumed.assert_ok(200)["trading_state"], "ACTIVE");
    let audit = app.get("/api/audit?action=risk.emergency_halt").await;
    assert_eq!(audit.body["meta"]["count"], 2);
}

/// `Halted` is a position left to manual management (CONTRACT §3): once the emergency halt's
/// exit has filled on the paper broker the watched symbol is flat with nothing working, and its
/// watchlist row reads `Closed`.
#[tokio::test]
async fn a_watched_position_the_halt_flattened_reads_closed_on_the_watchlist() {
    let app = spawn_app().await;
    let (symbol, _) = app.market_symbols(1).await.remove(0);
    app.post("/api/radar/watch", ADMIN_TOKEN, json!({"symbol": symbol})).await.assert_ok(200);
    let placed = buy(&app, &symbol, 50).await;
    app.wait_for_order(&id(&placed), "FILLED").await;
    wait_position(&app, 50).await;

    app.post("/api/risk/emergency-halt", ADMIN_TOKEN, json!({"reason": "runaway"})).await.assert_ok(200);
    for _ in 0..100 {
        app.market.advance(chrono::Duration::milliseconds(500));
        if app.get("/api/positions").await.body["meta"]["count"] == 0 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(30)).await;
    }
    assert_eq!(app.get("/api/positions").await.body["meta"]["count"], 0, "the halt's exit filled");
    let filled = app.get(&format!("/api/orders?symbol={symbol}&status=FILLED")).await;
    let sells = filled.data().as_array().unwrap().iter().filter(|o| o["side"] == "SELL").count();
    assert_eq!(sells, 1, "flattened by the halt's exit: {}", filled.body);

    let watchlist = app.get("/api/watchlist").await;
    let row = watchlist.data().as_array().unwrap().iter().find(|r| r["symbol"] == symbol.as_str()).unwrap().clone();
    assert_eq!(row["strategy_status"], "Closed", "nothing left to manage: {row}");
    let closed = app.get("/api/watchlist?status=Closed").await;
    assert_eq!(closed.body["meta"]["count"], 1, "{}", closed.body);
}

#[tokio::test]
async fn watchlist_stop_and_restart() {
    let app = spawn_app().await;
    let (symbol, _) = app.market_symbols(1).await.remove(0);
    app.post("/api/radar/watch", ADMIN_TOKEN, json!({"symbol": symbol})).await.assert_ok(200);
    let stopped = app.post("/api/watchlist/stop", ADMIN_TOKEN, json!({"symbol": symbol, "reason": "enough"})).await;
    let data = stopped.assert_ok(200).clone();
    assert_eq!((data["previous_status"].as_str(), data["new_status"].as_str()), (Some("Active"), Some("Closed")));
    assert_eq!(app.get("/api/watchlist").await.data()[0]["polling_status"], "STOPPED");
    let restarted = app.post("/api/watchlist/restart", ADMIN_TOKEN, json!({"symbol": symbol})).await;
    assert_eq!(restarted.assert_ok(200)["strategy_status"], "Active");
    assert_eq!(restarted.data()["polling_status"], "POLLING");
    assert_eq!(app.get("/api/watchlist").await.data()[0]["strategy_status"], "Active");
    app.post("/api/radar/block", ADMIN_TOKEN, json!({"symbol": symbol, "reason": "news"})).await.assert_ok(200);
    let blocked = app.post("/api/watchlist/restart", ADMIN_TOKEN, json!({"symbol": symbol})).await;
    blocked.assert_error(422, "RISK_BLOCKED");
    assert_eq!(blocked.body["error"]["detail"]["rule"], "SYMBOL_BLOCKED");
    app.post("/api/watchlist/stop", ADMIN_TOKEN, json!({"symbol": "ZZZZ", "reason": "x"}))
        .await
        .assert_error(404, "NOT_FOUND");
}

#[tokio::test]
async fn day_orders_expire_when_the_session_ends() {
    let app = spawn_app().await;
    let (symbol, price) = app.market_symbols(1).await.remove(0);
    // Bids at half the price, far below where the simulated market trades within a day, so what
    // ends the orders is the session, never a fill (at 97% of the price the GTC order was once
    // seen FILLED after the jump to the next day, on a loaded machine). The collar is widened
    // to let them in.
    let collar = json!({"risk_controls": {"price_collar_pct": 60}});
    app.put_settings(ADMIN_TOKEN, collar).await.assert_ok(200);
    let limit = ((price * 0.5) * 100.0).floor() / 100.0;
    let body = |tif: &str| json!({"symbol": symbol, "side": "BUY", "quantity": 5, "order_type": "LIMIT", "limit_price": limit, "time_in_force": tif});
    let day = app.post("/api/orders", ADMIN_TOKEN, body("DAY")).await;
    app.wait_for_order(&id(&day), "ACCEPTED").await;
    let mut gtc_body = body("GTC");
    gtc_body["quantity"] = json!(6);
    let gtc = app.post("/api/orders", ADMIN_TOKEN, gtc_body).await;
    app.wait_for_order(&id(&gtc), "ACCEPTED").await;
    // ALWAYS_OPEN: the session ends at midnight New York
    app.market.set(tradeops_core::time::parse_ts("2026-11-21T05:00:01Z").unwrap());
    app.wait_for_order(&id(&day), "EXPIRED").await;
    assert_eq!(app.get(&format!("/api/orders/{}", id(&gtc))).await.data()["status"], "ACCEPTED");
}

#[tokio::test]
async fn guarded_settings_changes_wait_until_flat() {
    let app = spawn_app().await;
    let (symbol, _) = app.market_symbols(1).await.remove(0);
    let placed = buy(&app, &symbol, 10).await;
    app.wait_for_order(&id(&placed), "FILLED").await;
    let live = json!({"runtime": {"trading_mode": "LIVE"}});
    let reply = app.put_settings_confirmed(ADMIN_TOKEN, &live).await;
    reply.assert_error(409, "SETTINGS_UPDATE_BLOCKED");
    assert_eq!(reply.body["error"]["detail"]["guard"], "no_open_exposure");
}

/// An order written ahead that the broker never received is looked up after a restart: sent
/// then while trading is `ACTIVE`, marked as never sent (`REJECTED`) once a halt is cancelling
/// it — a halted service never sends it at all.
#[tokio::test]
async fn orders_written_ahead_but_never_sent_are_sent_or_refused_after_a_restart() {
    // The broker takes a market minute to acknowledge: a restart inside it loses the submit.
    let app = spawn_app_with(|c| c.paper.ack_latency_ms = 60_000).await;
    let (symbol, price) = app.market_symbols(1).await.remove(0);
    let limit = ((price * 0.97) * 100.0).floor() / 100.0;
    let order = json!({"symbol": symbol, "side": "BUY", "quantity": 10, "order_type": "LIMIT",
        "limit_price": limit, "time_in_force": "GTC"});
    let active = id(&app.post("/api/orders", ADMIN_TOKEN, order.clone()).await);
    let mut now_or_never = order.clone();
    now_or_never["time_in_force"] = json!("IOC");
    now_or_never["quantity"] = json!(11); // not a duplicate of the first
    let ioc = id(&app.post("/api/orders", ADMIN_TOKEN, now_or_never).await);
    let app = app.restart().await;
    let late = app.get(&format!("/api/orders/{ioc}")).await;
    assert_eq!(late.data()["status"], "REJECTED", "an IOC is not sent after a restart: {}", late.body);
    assert!(late.data()["reject_reason"].as_str().unwrap().contains("immediate-or-cancel"), "{}", late.body);
    app.market.advance(chrono::Duration::seconds(60));
    let sent = app.wait_for_order(&active, "ACCEPTED").await;
    assert_eq!(sent["reject_reason"], Value::Null, "{sent}");

    let halted = id(&app.post("/api/orders", ADMIN_TOKEN, order).await);
    app.post("/api/risk/emergency-halt", ADMIN_TOKEN, json!({"reason": "test"})).await.assert_ok(200);
    // The halt answers once its cancels are with the broker; the orders' new states are stored
    // right after.
    app.wait_for_order(&halted, "PENDING_CANCEL").await;
    let app = app.restart().await;
    let never = app.wait_for_order(&halted, "REJECTED").await;
    app.market.advance(chrono::Duration::seconds(60));
    let why = never["reject_reason"].as_str().unwrap_or_default();
    assert!(why.contains("never sent") && why.contains("HALTED"), "{never}");
    assert_eq!(never["filled_quantity"], 0);
    app.wait_for_order(&active, "CANCELED").await;
}

/// A symbol whose watch ended reads `Closed`; bought by hand, its position row reads `Halted`
/// (managed by hand, CONTRACT §4 `POST /api/orders`), never `Closed` while shares are held.
#[tokio::test]
async fn a_manual_buy_of_a_symbol_whose_watch_ended_reads_halted() {
    let app = spawn_app().await;
    let (symbol, _) = app.market_symbols(1).await.remove(0);
    app.post("/api/radar/watch", ADMIN_TOKEN, json!({"symbol": symbol})).await.assert_ok(200);
    app.post("/api/watchlist/stop", ADMIN_TOKEN, json!({"symbol": symbol, "reason": "done"})).await.assert_ok(200);
    let placed = buy(&app, &symbol, 100).await;
    app.wait_for_order(&id(&placed), "FILLED").await;
    let row = wait_position(&app, 100).await;
    assert_eq!(row["strategy_status"], "Halted", "{row}");
    let watch = app.get("/api/watchlist").await;
    let watched = watch.data().as_array().unwrap().iter().find(|w| w["symbol"] == symbol.as_str()).cloned();
    assert_eq!(watched.expect("its watchlist row")["strategy_status"], "Halted");
}
