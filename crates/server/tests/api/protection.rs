//! Protection at the broker (CONTRACT §11) through the real server, on the paper broker over a
//! market-data stand-in whose prices the test moves: a bracket's stop rests at the broker from
//! the entry's fill, an exit first frees the shares it holds, a trade through the stop sells the
//! position into a `STOP_LOSS` trade, and after a restart the stop is taken back, not placed
//! twice.

use crate::alpaca_data::{service_clock, wait_until, wall_now, StandIn};
use crate::helpers::*;
use serde_json::{json, Value};
use std::time::Duration;

/// `symbol`'s position row, or null when there is none; an answer that is not the list (a
/// refusal on a loaded machine) is neither, so a wait on the row goes on.
async fn position(app: &TestApp, symbol: &str) -> Value {
    let rows = app.get("/api/positions").await;
    match rows.data().as_array() {
        Some(rows) => rows.iter().find(|r| r["symbol"] == symbol).cloned().unwrap_or(Value::Null),
        None => json!({"unanswered": rows.body}),
    }
}

/// Orders of `symbol`, newest first.
async fn orders(app: &TestApp, symbol: &str) -> Vec<Value> {
    let listed = app.get(&format!("/api/orders?symbol={symbol}")).await;
    listed.data().as_array().unwrap_or_else(|| panic!("orders of {symbol}: {}", listed.body)).clone()
}

/// A stand-in trading `symbol` at $12.00 (bid 11.99, ask 12.01) and a service on it, with the
/// symbol tradable (its snapshot read).
async fn trading(symbol: &str) -> (StandIn, TestApp) {
    trading_on(symbol, service_clock()).await
}

/// [`trading`] with the market's clock (the service's and the stand-in's) `clock`.
async fn trading_on(symbol: &str, clock: std::sync::Arc<dyn tradeops_core::Clock>) -> (StandIn, TestApp) {
    let alpaca = StandIn::start_on(clock.clone()).await;
    alpaca.add_mover(symbol, 1000, 1200, 5_000_000);
    let (db, url) = TestDb::new().await;
    let mut config = test_config(url);
    crate::alpaca_data::alpaca_config(&mut config, &alpaca);
    // These tests poll the books while orders work: the request budget is not what they test.
    config.auth.rate_limit_per_second = 1_000_000;
    config.auth.rate_limit_burst = 1_000_000;
    let app = start_on_own_market_clock(config, std::sync::Arc::new(db), clock).await;
    let quote = || async { app.get(&format!("/api/market/quote?symbol={symbol}")).await.status };
    wait_until("the symbol is quoted", Duration::from_secs(20), quote, |s| *s == 200).await;
    (alpaca, app)
}

/// A trade at `price` with the quote a cent either side, on the stream.
fn trade_at(alpaca: &StandIn, symbol: &str, price: f64) {
    trade_at_time(alpaca, symbol, price, wall_now());
}

/// [`trade_at`], stamped `now`.
fn trade_at_time(alpaca: &StandIn, symbol: &str, price: f64, now: tradeops_core::Timestamp) {
    alpaca.send(json!([
        {"T": "q", "S": symbol, "bx": "V", "bp": price - 0.01, "bs": 500, "ax": "V", "ap": price + 0.01, "as": 500, "t": now},
        {"T": "t", "S": symbol, "i": 9, "x": "V", "p": price, "s": 100, "t": now, "c": ["@"], "z": "C"},
    ]));
}

fn bracket(symbol: &str, quantity: u64) -> Value {
    json!({"symbol": symbol, "side": "BUY", "quantity": quantity,
        "stop_loss": {"stop_price": 11.50}, "take_profit": {"limit_price": 13.00}})
}

/// Buys 10 with a bracket and waits until its stop rests at the broker; returns the position row.
async fn protected(app: &TestApp, symbol: &str) -> Value {
    let placed = app.post("/api/orders", ADMIN_TOKEN, bracket(symbol, 10)).await;
    let entry = placed.assert_ok(201).clone();
    assert_eq!(entry["stop_loss"], json!({"stop_price": 11.5, "limit_price": null}), "{entry}");
    assert_eq!(entry["take_profit"], json!({"limit_price": 13.0}));
    let row = || async { position(app, symbol).await };
    wait_until("the position protected at the broker", Duration::from_secs(20), row, |p| p["protection"] == "BROKER")
        .await
}

#[tokio::test]
async fn a_bracket_rests_its_stop_at_the_broker_and_a_trade_through_it_is_a_stop_loss_trade() {
    let (alpaca, app) = trading("BRKT").await;

    // Legs refused on their face or against the price, naming the field; nothing is placed.
    for (body, field) in [
        (
            json!({"symbol": "BRKT", "side": "BUY", "quantity": 10, "stop_loss": {"stop_price": 12.50}}),
            "stop_loss.stop_price",
        ),
        (
            json!({"symbol": "BRKT", "side": "BUY", "quantity": 10, "stop_loss": {"stop_price": 11.505}}),
            "stop_loss.stop_price",
        ),
        (
            json!({"symbol": "BRKT", "side": "BUY", "quantity": 10, "stop_loss": {"stop_price": 11.50},
                "take_profit": {"limit_price": 11.90}}),
            "take_profit.limit_price",
        ),
        (
            json!({"symbol": "BRKT", "side": "BUY", "quantity": 10, "take_profit": {"limit_price": 13.0}}),
            "take_profit.limit_price",
        ),
        (json!({"symbol": "BRKT", "side": "SELL", "quantity": 10, "stop_loss": {"stop_price": 11.50}}), "stop_loss"),
    ] {
        let refused = app.post("/api/orders", ADMIN_TOKEN, body.clone()).await;
        refused.assert_error(400, "VALIDATION_ERROR");
        assert_eq!(refused.body["error"]["detail"]["field"], field, "{body}: {}", refused.body);
    }
    assert!(orders(&app, "BRKT").await.is_empty(), "a refused order sends nothing");

    // The preview measures the legs from the reference price (the last trade, 12.00).
    let preview = app.post("/api/orders/preview", ADMIN_TOKEN, bracket("BRKT", 10)).await;
    let preview = preview.assert_ok(200).clone();
    assert_eq!((preview["risk_to_stop"].as_f64(), preview["reward_to_target"].as_f64()), (Some(5.0), Some(10.0)));

    let row = protected(&app, "BRKT").await;
    assert_eq!((row["stop_loss"].as_f64(), row["target"].as_f64()), (Some(11.5), Some(13.0)), "{row}");
    let stop_id = row["protective_order_id"].as_str().expect("the stop's client order id").to_string();
    let stop = app.get(&format!("/api/orders/{stop_id}")).await.data().clone();
    assert_eq!(
        (&stop["side"], &stop["order_type"], &stop["time_in_force"], &stop["quantity"], &stop["status"]),
        (&json!("SELL"), &json!("STOP"), &json!("GTC"), &json!(10), &json!("ACCEPTED")),
        "{stop}"
    );
    assert_eq!((stop["stop_price"].as_f64(), stop["take_profit"]["limit_price"].as_f64()), (Some(11.5), Some(13.0)));
    // The health row is probed on its own schedule: it says so at its next probe.
    let execution = || async {
        let components = app.get("/api/health/components").await;
        let rows = components.data().as_array().cloned().unwrap_or_default();
        rows.into_iter().find(|r| r["name"] == "execution_broker").unwrap_or(Value::Null)
    };
    wait_until("the health row counts no unprotected position", Duration::from_secs(10), execution, |row| {
        row["detail"]["positions_not_protected_at_broker"] == 0
    })
    .await;

    // The price falls through the stop: the broker's stop sells, with no order of ours.
    trade_at(&alpaca, "BRKT", 11.40);
    let flat = || async { position(&app, "BRKT").await };
    wait_until("the stop sold the position", Duration::from_secs(20), flat, |p| p.is_null()).await;
    let stop = app.wait_for_order(&stop_id, "FILLED").await;
    assert_eq!(stop["filled_quantity"], 10);
    assert_eq!(orders(&app, "BRKT").await.len(), 2, "the entry and its stop, nothing else");
    let trades = app.get("/api/trades?symbol=BRKT").await;
    let trade_id = trades.data()[0]["trade_id"].as_str().expect("a trade").to_string();
    let trade = app.get(&format!("/api/trades/{trade_id}")).await.data().clone();
    assert_eq!(trade["outcomes"]["exit_reason"], "STOP_LOSS", "{trade}");
}

#[tokio::test]
async fn a_close_frees_the_shares_the_stop_holds_and_a_partial_close_protects_the_rest() {
    let (_alpaca, app) = trading("FREE").await;
    let first = protected(&app, "FREE").await;
    let first_stop = first["protective_order_id"].as_str().unwrap().to_string();

    // A partial close: the stop is cancelled to free the shares, 4 are sold, 6 protected again.
    let close = app.post("/api/positions/close", ADMIN_TOKEN, json!({"symbol": "FREE", "quantity": 4})).await;
    let close_id = close.assert_ok(200)["close_order_client_order_id"].as_str().unwrap().to_string();
    app.wait_for_order(&close_id, "FILLED").await;
    app.wait_for_order(&first_stop, "CANCELED").await;
    let row = || async { position(&app, "FREE").await };
    let rest = wait_until("6 protected again", Duration::from_secs(20), row, |p| {
        p["quantity"] == 6 && p["protection"] == "BROKER" && p["protective_order_id"] != json!(first_stop)
    })
    .await;
    let second_stop = rest["protective_order_id"].as_str().unwrap().to_string();
    assert_eq!(app.get(&format!("/api/orders/{second_stop}")).await.data()["quantity"], 6);

    // The rest closed: sold, never refused for shares held, and nothing protects a flat position.
    let close = app.post("/api/positions/close", ADMIN_TOKEN, json!({"symbol": "FREE"})).await;
    let close_id = close.assert_ok(200)["close_order_client_order_id"].as_str().unwrap().to_string();
    app.wait_for_order(&close_id, "FILLED").await;
    app.wait_for_order(&second_stop, "CANCELED").await;
    wait_until("flat", Duration::from_secs(20), row, |p| p.is_null()).await;
    let listed = orders(&app, "FREE").await;
    assert!(listed.iter().all(|o| o["status"] != "REJECTED"), "no exit refused for shares held: {listed:?}");
    assert!(
        listed.iter().all(|o| o["status"] != "ACCEPTED" && o["status"] != "NEW"),
        "nothing left working: {listed:?}"
    );
}

#[tokio::test]
async fn after_a_restart_the_resting_stop_is_taken_back_not_placed_again_and_fills_once() {
    let (alpaca, app) = trading("KEEP").await;
    let row = protected(&app, "KEEP").await;
    let stop_id = row["protective_order_id"].as_str().unwrap().to_string();

    let mut app = app;
    app.stop().await;
    let app = start_on_own_market_clock(app.config.clone(), app.db.clone(), app.clock.clone()).await;
    let again = || async { position(&app, "KEEP").await };
    let row =
        wait_until("protected after the restart", Duration::from_secs(20), again, |p| p["protection"] == "BROKER")
            .await;
    assert_eq!(row["protective_order_id"], json!(stop_id), "the same stop, not a second one");
    assert_eq!(orders(&app, "KEEP").await.len(), 2, "the entry and its one stop");

    trade_at(&alpaca, "KEEP", 11.30);
    wait_until("the stop sold the position", Duration::from_secs(20), again, |p| p.is_null()).await;
    let stop = app.wait_for_order(&stop_id, "FILLED").await;
    assert_eq!(stop["executions"].as_array().unwrap().len(), 1, "filled once: {stop}");
    let trades = app.get("/api/trades?symbol=KEEP").await;
    assert_eq!(trades.data().as_array().unwrap().len(), 1, "one round trip: {}", trades.body);
}

/// Benchmark, not a test (`bench/protection_latency.sh` runs it and prints the figures): from an
/// entry's fill to its stop resting at the broker, as a client of the event stream sees it —
/// the entry's `order.updated` reading `FILLED` to the protective order's reading `ACCEPTED` —
/// over `TRADEOPS_BENCH_TRIALS` bracket buys (default 50), each closed before the next.
#[tokio::test]
#[ignore = "a benchmark: bench/protection_latency.sh"]
async fn bench_fill_to_stop_resting_on_the_paper_broker() {
    let (_alpaca, app) = trading("BNCH").await;
    let waits = fill_to_resting(&app, "BNCH", 11.50, 13.00).await;
    report("paper broker", waits);
}

/// The fill-to-resting waits of bracket buys of `symbol` on `app` with a stop at `stop` and a
/// target at `target` (see the benchmarks).
pub(crate) async fn fill_to_resting(app: &TestApp, symbol: &str, stop: f64, target: f64) -> Vec<Duration> {
    let trials: usize = std::env::var("TRADEOPS_BENCH_TRIALS").ok().and_then(|t| t.parse().ok()).unwrap_or(50);
    let limits = json!({"risk_controls": {"max_trades_per_day": 10000, "duplicate_order_window_seconds": 0}});
    app.put_settings(ADMIN_TOKEN, limits).await.assert_ok(200);
    let mut events = crate::events::Sse::open(app, "?kinds=order.updated", None).await;
    let mut waits = Vec::new();
    for trial in 0..trials {
        let body = json!({"symbol": symbol, "side": "BUY", "quantity": 10 + trial as u64 % 7,
            "stop_loss": {"stop_price": stop}, "take_profit": {"limit_price": target}});
        let placed = app.post("/api/orders", ADMIN_TOKEN, body).await;
        let entry = placed.assert_ok(201)["client_order_id"].as_str().unwrap().to_string();
        let mut filled_at = None;
        let rested_at = loop {
            let (_, _, event) = events.next().await;
            let order = &event["data"];
            let now = tokio::time::Instant::now();
            if order["client_order_id"] == entry.as_str() && order["status"] == "FILLED" {
                filled_at = Some(now);
            } else if order["reason"].as_str().is_some_and(|r| r.starts_with("PROTECTIVE_STOP"))
                && order["status"] == "ACCEPTED"
                && filled_at.is_some()
            {
                break now;
            }
        };
        waits.push(rested_at - filled_at.expect("filled first"));
        app.post("/api/positions/close", ADMIN_TOKEN, json!({"symbol": symbol})).await.assert_ok(200);
        let row = || async { position(app, symbol).await };
        wait_until("flat", Duration::from_secs(20), row, |p| p.is_null()).await;
        // The venue's record settles (a remote venue's cancel and fill reports) before the next.
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    waits
}

/// Prints the median and 99th percentile of `waits` in milliseconds.
pub(crate) fn report(venue: &str, waits: Vec<Duration>) {
    report_as("fill to stop resting at the broker", venue, waits);
}

/// Prints the median and 99th percentile of `waits` (of `what`) in milliseconds.
pub(crate) fn report_as(what: &str, venue: &str, mut waits: Vec<Duration>) {
    waits.sort();
    let at = |q: f64| waits[((waits.len() as f64 - 1.0) * q).round() as usize].as_secs_f64() * 1000.0;
    println!(
        "{what}, {venue}: {} trials, p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
        waits.len(),
        at(0.5),
        at(0.99),
        at(1.0)
    );
}

/// The market clock after the close: real time moved to 17:00 New York of the latest NYSE
/// trading day (its after-hours, whatever day the test runs on).
fn after_hours_clock() -> std::sync::Arc<dyn tradeops_core::Clock> {
    static CLOCK: std::sync::OnceLock<std::sync::Arc<tradeops_server::clock::ScaledClock>> = std::sync::OnceLock::new();
    CLOCK
        .get_or_init(|| {
            crate::alpaca_data::clock_in_latest_session(|day| day.regular_close + chrono::Duration::minutes(60))
        })
        .clone()
}

/// An extended-hours limit buy of `quantity` at $12.05 with a stop at $11.50.
fn after_hours_buy(symbol: &str, quantity: u64) -> Value {
    json!({"symbol": symbol, "side": "BUY", "quantity": quantity, "order_type": "LIMIT",
        "limit_price": 12.05, "extended_hours": true, "stop_loss": {"stop_price": 11.50}})
}

/// After the close (CONTRACT §12) on the paper broker: a position bought with a stop reads
/// `ENGINE` while its stop rests at the broker for the next open; a trade through the stop is
/// not elected by the broker, but the engine frees the shares and sells them as an
/// extended-hours limit under the last trade, and the trade is a `STOP_LOSS`.
#[tokio::test]
async fn after_the_close_the_engine_fires_the_stop_as_an_extended_hours_limit() {
    let clock = after_hours_clock();
    let (alpaca, app) = trading_on("AHRS", clock.clone()).await;
    assert_eq!(app.get("/api/market/session").await.data()["session"], "AFTER_HOURS");
    app.post("/api/orders", ADMIN_TOKEN, after_hours_buy("AHRS", 10)).await.assert_ok(201);
    let row = || async { position(&app, "AHRS").await };
    wait_until("held, its stop resting for the open", Duration::from_secs(20), row, |p| {
        p["quantity"] == 10 && p["protection"] == "ENGINE" && p["protective_order_id"].is_string()
    })
    .await;
    trade_at_time(&alpaca, "AHRS", 11.40, clock.now());
    wait_until("flat after the stop", Duration::from_secs(20), row, |p| p.is_null()).await;
    let exit = orders(&app, "AHRS").await.into_iter().find(|o| o["side"] == "SELL" && o["status"] == "FILLED");
    let exit = exit.expect("a filled exit");
    assert_eq!((exit["order_type"].as_str(), exit["extended_hours"].as_bool()), (Some("LIMIT"), Some(true)), "{exit}");
    assert!(exit["reason"].as_str().is_some_and(|r| r.starts_with("STOP_LOSS")), "{exit}");
    let stop = orders(&app, "AHRS")
        .await
        .into_iter()
        .find(|o| o["reason"].as_str().is_some_and(|r| r.starts_with("PROTECTIVE_STOP")));
    assert_eq!(stop.expect("the broker's copy")["status"], "CANCELED", "freed before the exit");
    let trades = app.get("/api/trades?symbol=AHRS").await;
    assert_eq!(trades.data()[0]["exit_reason"], "STOP_LOSS", "{}", trades.body);
}

/// Benchmark, not a test (`bench/protection_latency.sh`): from the trade that crosses a stop
/// the engine holds after the close to the exit acknowledged by the paper broker — the broker's
/// copy of the stop cancelled first (its cancel latency, 50 ms) and the exit acknowledged (its
/// ack latency, 50 ms) — as a client of the event stream sees the exit's `ACCEPTED`, over
/// `TRADEOPS_BENCH_TRIALS` positions (default 50).
#[tokio::test]
#[ignore = "a benchmark: bench/protection_latency.sh"]
async fn bench_engine_stop_to_exit_acknowledged_on_the_paper_broker() {
    let clock = after_hours_clock();
    let (alpaca, app) = trading_on("BNAH", clock.clone()).await;
    let waits = engine_stop_to_acknowledged(&app, &alpaca, "BNAH", &clock, Duration::ZERO, |_| {}, |_| {}).await;
    report_as("trade through an engine-held stop to the exit acknowledged", "paper broker", waits);
}

/// The same at the Alpaca stand-in keeping Alpaca's sessions (its prices the market-data
/// stand-in's, its fills the test's trades at the venue): the stop's cancel and the exit's
/// `new` are the venue's answers over HTTP and its trade-updates stream.
#[tokio::test]
#[ignore = "a benchmark: bench/protection_latency.sh"]
async fn bench_engine_stop_to_exit_acknowledged_on_the_alpaca_stand_in() {
    let clock = after_hours_clock();
    let market = StandIn::start_on(clock.clone()).await;
    market.add_mover("BNAV", 1000, 1200, 5_000_000);
    let venue = crate::alpaca::StandIn::start_on(rust_decimal::Decimal::from(100_000), clock.clone()).await;
    venue.keep_sessions();
    venue.forward_reference_to(&market.url);
    let (db, url) = TestDb::new().await;
    let mut config = test_config(url);
    crate::alpaca_data::alpaca_config(&mut config, &market);
    venue.configure(&mut config);
    config.auth.rate_limit_per_second = 1_000_000;
    config.auth.rate_limit_burst = 1_000_000;
    let app = start_on_own_market_clock(config, std::sync::Arc::new(db), clock.clone()).await;
    let quote = || async { app.get("/api/market/quote?symbol=BNAV").await.status };
    wait_until("the symbol is quoted", Duration::from_secs(20), quote, |s| *s == 200).await;
    // The venue fills a limit by a trade at its price: the entry at 12.00, the exit at its own.
    let fill_entry = |_: &str| venue.trade("BNAV", rust_decimal::Decimal::new(1200, 2));
    let fill_exit = |id: &str| {
        let limit = venue.order(id)["limit_price"].as_str().unwrap_or("0").parse().unwrap();
        venue.trade("BNAV", limit);
    };
    // A trial makes about seven Trading API requests: paced inside Alpaca's 200 a minute, so
    // that no trial waits for the request budget.
    let pace = Duration::from_millis(2500);
    let waits = engine_stop_to_acknowledged(&app, &market, "BNAV", &clock, pace, fill_entry, fill_exit).await;
    report_as("trade through an engine-held stop to the exit acknowledged", "Alpaca stand-in", waits);
}

/// Over `TRADEOPS_BENCH_TRIALS` positions bought after the close (`fill_entry` fills the entry
/// where the venue needs a trade, given its client order id), the time from the market-data
/// trade through the stop to the engine's exit reading `ACCEPTED` on the event stream, each
/// exit then filled (`fill_exit`) and the position flat `pace` before the next.
async fn engine_stop_to_acknowledged(
    app: &TestApp,
    data: &StandIn,
    symbol: &str,
    clock: &std::sync::Arc<dyn tradeops_core::Clock>,
    pace: Duration,
    fill_entry: impl Fn(&str),
    fill_exit: impl Fn(&str),
) -> Vec<Duration> {
    let trials: usize = std::env::var("TRADEOPS_BENCH_TRIALS").ok().and_then(|t| t.parse().ok()).unwrap_or(50);
    let limits = json!({"risk_controls": {"max_trades_per_day": 10000, "duplicate_order_window_seconds": 0}});
    app.put_settings(ADMIN_TOKEN, limits).await.assert_ok(200);
    let mut events = crate::events::Sse::open(app, "?kinds=order.updated", None).await;
    let mut waits = Vec::new();
    for trial in 0..trials {
        trade_at_time(data, symbol, 12.00, clock.now());
        let quantity = 10 + trial as u64 % 7;
        let placed = app.post("/api/orders", ADMIN_TOKEN, after_hours_buy(symbol, quantity)).await;
        fill_entry(placed.assert_ok(201)["client_order_id"].as_str().unwrap());
        let row = || async { position(app, symbol).await };
        wait_until("held, its stop resting for the open", Duration::from_secs(20), row, |p| {
            p["quantity"] == quantity && p["protection"] == "ENGINE" && p["protective_order_id"].is_string()
        })
        .await;
        let crossed = tokio::time::Instant::now();
        trade_at_time(data, symbol, 11.40, clock.now());
        let (acknowledged, exit) = loop {
            let (_, _, event) = events.next().await;
            let order = &event["data"];
            if order["reason"].as_str().is_some_and(|r| r.starts_with("STOP_LOSS")) && order["status"] == "ACCEPTED" {
                break (tokio::time::Instant::now(), order["client_order_id"].as_str().unwrap().to_string());
            }
        };
        waits.push(acknowledged - crossed);
        fill_exit(&exit);
        wait_until("flat", Duration::from_secs(20), row, |p| p.is_null()).await;
        tokio::time::sleep(pace).await;
    }
    waits
}
