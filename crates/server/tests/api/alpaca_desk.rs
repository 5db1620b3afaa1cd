//! End to end, the whole desk on Alpaca. ONE service started with both
//! `execution = alpaca` and `market_data = alpaca` (mode `PAPER`), as
//! `TRADEOPS_EXECUTION_BROKER=alpaca TRADEOPS_MARKET_DATA=alpaca TRADEOPS_ALPACA_TRADING_URL=…`
//! would start it, against the two stand-ins of this binary:
//! - the Trading API ([`crate::alpaca::StandIn`]): orders, positions, cash, the trade-updates
//!   `/stream` — and, on the same host, the reference routes the data adapter reads there
//!   (assets, clock, calendar), forwarded to the data stand-in;
//! - the Market Data API ([`crate::alpaca_data::StandIn`]): snapshots, bars, the data stream.
//!
//! Everything is asserted through the console's HTTP reads (header, radar, watchlist, orders,
//! positions, risk state, `/api/events`) and against the stand-ins' own books. Every clock
//! (service, market, both stand-ins) is one manual clock inside a NYSE session of the latest
//! trading day, so that the test moves the market minute by minute without waiting for real
//! minutes: each minute's bar is pushed into the data stream inside the feed's settle window
//! and taken by the engine once the clock passes it. Every wait is bounded (15 s).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::Duration as Minutes;
use rust_decimal::Decimal;
use serde_json::{json, Value};
use tokio::time::Instant;
use tradeops_core::calendar::MarketCalendar;
use tradeops_core::settings::{MarketCalendarKind, MarketDataBrokerKind};
use tradeops_core::time::format_ts;
use tradeops_core::{Clock, ManualClock, Timestamp, TradingMode};
use tradeops_server::config::AlpacaFeed;

use crate::alpaca::{self as trading, assert_books_agree, cents, cents_of, wait_for_execution, wait_for_reconciled};
use crate::alpaca_data::{self as data, flat_bar, ny_date, ny_midnight, previous_weekday, wait_until};
use crate::helpers::{start_with_clock, test_config, TestApp, TestDb, ADMIN_TOKEN};

const LIMIT: Duration = Duration::from_secs(15);
/// The symbol the desk trades: closed yesterday at $5.00, up 24 % today.
const SYMBOL: &str = "DESK";
/// The stand-in's cash, unlike the service's configured starting cash: the header must show
/// the broker's.
const CASH: &str = "87654.32";

/// 11:00 New York of the latest NYSE trading day (90 minutes into the session, inside
/// momentum_breakout's entry window), whatever the hour the test runs.
fn session_start() -> Timestamp {
    let real = tradeops_server::clock::SystemClock.now();
    let nyse = MarketCalendar::new(MarketCalendarKind::Nyse);
    let today = nyse.date_of(real);
    let day = if nyse.is_trading_day(today) { today } else { nyse.previous_trading_day(today) };
    nyse.trading_day(day).expect("a trading day has a session").regular_open + Minutes::minutes(90)
}

/// The events of `GET /api/events` as they arrive: (kind, data).
type Seen = Arc<Mutex<Vec<(String, Value)>>>;

/// Opens `/api/events` and collects every event into the returned list in the background.
async fn collect_events(app: &TestApp) -> Seen {
    let mut resp = app.client.get(app.url("/api/events")).bearer_auth(ADMIN_TOKEN).send().await.unwrap();
    assert_eq!(resp.status(), 200, "the console's event stream opens");
    let seen: Seen = Arc::default();
    let into = seen.clone();
    tokio::spawn(async move {
        let mut buf = String::new();
        while let Ok(Some(chunk)) = resp.chunk().await {
            buf.push_str(&String::from_utf8_lossy(&chunk));
            while let Some(end) = buf.find("\n\n") {
                let block: String = buf.drain(..end + 2).collect();
                let (mut kind, mut body) = (None, String::new());
                for line in block.lines() {
                    if let Some(v) = line.strip_prefix("event:") {
                        kind = Some(v.trim().to_string());
                    } else if let Some(v) = line.strip_prefix("data:") {
                        body.push_str(v.trim());
                    }
                }
                if let (Some(kind), Ok(envelope)) = (kind, serde_json::from_str::<Value>(&body)) {
                    into.lock().unwrap().push((kind, envelope["data"].clone()));
                }
            }
        }
    });
    seen
}

/// Waits until an event of `kind` satisfying `check` has arrived; returns its data.
async fn wait_for_event(seen: &Seen, what: &str, kind: &str, check: impl Fn(&Value) -> bool) -> Value {
    let found = wait_until(
        what,
        LIMIT,
        || async { seen.lock().unwrap().iter().filter(|(k, _)| k == kind).map(|(_, d)| d.clone()).collect::<Vec<_>>() },
        |events| events.iter().any(&check),
    )
    .await;
    found.into_iter().find(|d| check(d)).unwrap()
}

/// A price the adapter sent (a string, as Alpaca takes it, or a number), in cents.
fn price(v: &Value) -> Option<i64> {
    let text = v.as_str().map(str::to_string).or_else(|| v.as_f64().map(|f| f.to_string()))?;
    text.parse::<Decimal>().ok().map(cents_of)
}

async fn watchlist_price(app: &TestApp) -> Option<Value> {
    let rows = app.get("/api/watchlist").await;
    rows.data().as_array()?.iter().find(|r| r["symbol"] == SYMBOL).map(|r| r["current_price"].clone())
}

async fn position(app: &TestApp) -> Option<Value> {
    let rows = app.get("/api/positions").await;
    rows.assert_ok(200).as_array().unwrap().iter().find(|p| p["symbol"] == SYMBOL).cloned()
}

/// One closed minute bar `(open, high, low, close)` in cents of the minute starting at
/// `minute`, as Alpaca's stream delivers it just after the minute ends; the engine takes it
/// at the next tick past the feed's 2 s settle time, which `bars.closed` then shows.
///
/// The feed's tick must have seen the minute running (the clock at `minute` + 3 s) before.
async fn close_minute(
    app: &TestApp,
    stand_in: &data::StandIn,
    clock: &ManualClock,
    seen: &Seen,
    minute: Timestamp,
    ohlc: (i64, i64, i64, i64),
) {
    let (o, h, l, c) = ohlc;
    let money = |cents: i64| cents as f64 / 100.0;
    // Inside the settle window: no tick takes a bar now.
    clock.set(minute + Minutes::seconds(61));
    let traded = minute + Minutes::seconds(59);
    stand_in.send(json!([
        {"T": "b", "S": SYMBOL, "o": money(o), "h": money(h), "l": money(l), "c": money(c), "v": 100_000, "t": minute,
            "n": 40, "vw": money(c)},
        {"T": "q", "S": SYMBOL, "bx": "V", "bp": money(c - 1), "bs": 3, "ax": "V", "ap": money(c + 1), "as": 4, "t": traded},
        {"T": "t", "S": SYMBOL, "i": minute.timestamp(), "x": "V", "p": money(c), "s": 100, "t": traded, "c": ["@"], "z": "C"},
    ]));
    // The trade follows the bar in the frame: once the trade is the price, the bar is held.
    wait_until(
        &format!("the streamed trade of {minute} is {SYMBOL}'s price"),
        LIMIT,
        || watchlist_price(app),
        |p| *p == Some(json!(money(c))),
    )
    .await;
    clock.set(minute + Minutes::seconds(63));
    let at = format_ts(&minute);
    wait_for_event(seen, &format!("bars.closed with {SYMBOL}'s bar of {at}"), "bars.closed", |d| {
        d["bars"].as_array().is_some_and(|bars| bars.iter().any(|b| b["symbol"] == SYMBOL && b["timestamp"] == at))
    })
    .await;
}

#[tokio::test]
async fn alpaca_desk_the_console_shows_the_account_radar_a_watched_strategy_trading_and_a_halt() {
    let started = Instant::now();
    let start = session_start();
    let clock = ManualClock::new(start);
    let shared: Arc<dyn Clock> = Arc::new(clock.clone());

    // The Market Data API: four movers (+40 %, +24 %, +10 %, -25 %); the desk's symbol has a
    // month of daily bars (an ordinary day trades 100,000 shares).
    let market = data::StandIn::start_on(shared.clone()).await;
    for (symbol, prev, last, volume) in [
        ("MOVA", 500, 700, 3_000_000),
        (SYMBOL, 500, 620, 2_000_000),
        ("MOVB", 500, 550, 1_000_000),
        ("MOVC", 400, 300, 500_000),
    ] {
        market.add_mover(symbol, prev, last, volume);
    }
    let mut day = ny_date(start);
    let mut daily = Vec::new();
    for _ in 0..20 {
        day = previous_weekday(day);
        daily.push((ny_midnight(day), flat_bar(ny_midnight(day), 500, 100_000)));
    }
    daily.reverse();
    market.add_bars("1Day", SYMBOL, daily);

    // The Trading API, with the reference routes of the same host.
    let cash: Decimal = CASH.parse().unwrap();
    let broker = trading::StandIn::start_on(cash, shared.clone()).await;
    broker.forward_reference_to(&market.url);

    let (db, url) = TestDb::new().await;
    let mut config = test_config(url);
    config.mode = Some(TradingMode::Paper);
    broker.configure(&mut config);
    config.brokers.market_data = Some(MarketDataBrokerKind::Alpaca);
    config.alpaca.data_url = market.url.clone();
    config.alpaca.data_stream_url = Some(market.stream_url.clone());
    config.alpaca.feed = AlpacaFeed::Iex;
    // The service's clock is the manual one: the request budget would not refill.
    config.auth.rate_limit_per_second = 1_000_000;
    config.auth.rate_limit_burst = 1_000_000;
    assert_ne!(config.paper.initial_cash, cash, "the broker's cash differs from the configured start");
    let app = start_with_clock(config, Arc::new(db), axum::Router::new(), clock.clone(), shared.clone()).await;
    let seen = collect_events(&app).await;

    // Both adapters are Alpaca, both streams connected.
    let execution = wait_for_execution(&app, "the order-update stream to connect", |c| {
        c["status"] == "HEALTHY" && c["detail"]["stream"]["connected"] == true
    })
    .await;
    assert_eq!(execution["detail"]["broker"], "alpaca", "{execution}");
    let feed = wait_until(
        "data_broker on Alpaca, its stream connected",
        LIMIT,
        || data::data_broker(&app),
        |c| c["detail"]["broker"] == "alpaca" && c["detail"]["stream"]["connected"] == true,
    )
    .await;
    assert_eq!(feed["detail"]["adapter"], "alpaca", "{feed}");
    wait_until(
        "the assets read through the trading host",
        LIMIT,
        || async { market.requests_to("/v2/assets") },
        |r| !r.is_empty(),
    )
    .await;
    assert!(broker.calls("GET", "/v2/assets") >= 1, "the data adapter reads the assets from the trading host");

    // The header: the broker's account.
    let account = wait_until(
        "the account summary shows the broker's cash",
        LIMIT,
        || async { app.get("/api/account/summary").await.data().clone() },
        |a| a["cash"].as_f64().is_some_and(|c| cents(c) == cents_of(cash)),
    )
    .await;
    assert_eq!(account["broker_name"], "alpaca", "{account}");

    // The radar: the data stand-in's movers ranked by gain, with the filters opened, as the
    // scan of the next minute finds them.
    app.put_settings(ADMIN_TOKEN, data::open_filters()).await.assert_ok(200);
    let minute = tradeops_core::bars::minute_floor(clock.now()) + Minutes::minutes(1);
    clock.set(minute + Minutes::seconds(3));
    let radar = wait_until(
        "the radar ranks the four movers",
        LIMIT,
        || async { app.get("/api/radar/momentum?top_n=200").await.data().clone() },
        |rows| rows.as_array().is_some_and(|r| r.len() == 4),
    )
    .await;
    let ranked: Vec<(&str, f64, f64)> = radar
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["symbol"].as_str().unwrap(), r["price"].as_f64().unwrap(), r["percentage_gain"].as_f64().unwrap()))
        .collect();
    assert_eq!(
        ranked,
        vec![("MOVA", 7.0, 40.0), (SYMBOL, 6.2, 24.0), ("MOVB", 5.5, 10.0), ("MOVC", 3.0, -25.0)],
        "ranked by gain from the stand-in's snapshots: {radar}"
    );

    // Watched: the strategy runs on it, and the data stream is subscribed to it.
    let watch = app.post("/api/radar/watch", ADMIN_TOKEN, json!({"symbol": SYMBOL})).await;
    assert_eq!(watch.assert_ok(200)["watchlist_status"], "WATCHING", "{}", watch.body);
    wait_until(
        &format!("the data stream subscribed to {SYMBOL}"),
        LIMIT,
        || async { market.received() },
        |r| {
            r.iter()
                .any(|m| m["action"] == "subscribe" && m["trades"] == json!([SYMBOL]) && m["bars"] == json!([SYMBOL]))
        },
    )
    .await;
    let row = app.get("/api/watchlist").await;
    let row = row.data().as_array().unwrap().iter().find(|r| r["symbol"] == SYMBOL).cloned().expect("watched");
    assert_eq!(
        (row["strategy_status"].as_str(), row["polling_status"].as_str()),
        (Some("Active"), Some("POLLING")),
        "{row}"
    );
    assert_eq!(row["strategy_id"], "momentum_breakout", "{row}");
    assert!(broker.open_orders().is_empty());

    // Six minute bars: an impulse leg from 6.00 to 6.26 (+4.3 %), then two lower highs holding
    // above VWAP. On the sixth the strategy buys the break of 6.23: a stop-limit at 6.24
    // (limit 6.30), stop loss 6.18, 50 $ risked = 833 shares.
    let first = minute + Minutes::minutes(1);
    clock.set(first + Minutes::seconds(3));
    tokio::time::sleep(Duration::from_millis(1500)).await; // one feed tick sees the minute running
    let bars = [
        (600, 604, 600, 603),
        (603, 610, 602, 609),
        (609, 618, 608, 617),
        (617, 626, 616, 625),
        (625, 625, 619, 621),
        (621, 623, 619, 622),
    ];
    for (i, ohlc) in bars.into_iter().enumerate() {
        close_minute(&app, &market, &clock, &seen, first + Minutes::minutes(i as i64), ohlc).await;
        if i < bars.len() - 1 {
            assert!(broker.open_orders().is_empty(), "no entry before the pattern is complete (bar {})", i + 1);
        }
    }
    let at_venue = wait_until(
        "the strategy's entry at the trading stand-in",
        LIMIT,
        || async { broker.open_orders() },
        |o| o.len() == 1,
    )
    .await;
    let id = at_venue[0].clone();
    let sent = broker.order(&id);
    assert_eq!(
        (sent["symbol"].as_str(), sent["side"].as_str(), sent["type"].as_str(), sent["qty"].as_str()),
        (Some(SYMBOL), Some("buy"), Some("stop_limit"), Some("833")),
        "{sent}"
    );
    assert_eq!((price(&sent["stop_price"]), price(&sent["limit_price"])), (Some(624), Some(630)), "{sent}");
    let order = wait_until(
        "the entry ACCEPTED in /api/orders",
        LIMIT,
        || async { app.get(&format!("/api/orders/{id}")).await.data().clone() },
        |o| o["status"] == "ACCEPTED",
    )
    .await;
    assert_eq!(order["strategy_id"], "momentum_breakout", "{order}");
    assert_eq!(order["broker_name"], "alpaca", "{order}");

    // The stop triggers; the stand-in fills it at its price for the symbol.
    let fill_price = Decimal::new(625, 2);
    broker.set_price(SYMBOL, fill_price);
    broker.fill(&id, 833, fill_price, true);
    let order = wait_until(
        "the entry FILLED in /api/orders",
        LIMIT,
        || async { app.get(&format!("/api/orders/{id}")).await.data().clone() },
        |o| o["status"] == "FILLED",
    )
    .await;
    assert_eq!(order["filled_quantity"], 833, "{order}");
    let held = wait_until(
        &format!("a {SYMBOL} position in /api/positions"),
        LIMIT,
        || position(&app),
        |p| p.as_ref().is_some_and(|p| p["quantity"] == 833),
    )
    .await
    .unwrap();
    assert_eq!(
        cents(held["average_entry_price"].as_f64().unwrap()),
        cents_of(fill_price),
        "at the stand-in's fill price: {held}"
    );
    assert_eq!(held["strategy_status"], "Hold", "the strategy manages it: {held}");
    // The position carries the stop and target its strategy manages it with: at the fill, the
    // ones its entry stated; the account's open risk is the loss down to that stop.
    let reason = order["reason"].as_str().unwrap_or_default().to_string();
    let stated = |words: &str| -> f64 {
        let after = reason.split(words).nth(1).unwrap_or_else(|| panic!("{words:?} in the entry's reason {reason:?}"));
        let number: String = after.chars().take_while(|c| c.is_ascii_digit() || *c == '.').collect();
        number.parse().unwrap_or_else(|_| panic!("a price after {words:?} in {reason:?}"))
    };
    let (stop, target) = (held["stop_loss"].as_f64().expect("stop_loss"), held["target"].as_f64().expect("target"));
    assert_eq!((stop, target), (stated("with a stop at "), stated("target ")), "{held} vs {reason:?}");
    assert!(stop < 6.25 && target > 6.25, "the stop below the fill, the target above it: {held}");
    let summary = app.get("/api/account/summary").await.data().clone();
    let mark = held["market_price"].as_f64().unwrap();
    assert_eq!(
        cents(summary["open_risk"].as_f64().unwrap()),
        cents(833.0 * (mark - stop).max(0.0)),
        "{summary} {held}"
    );
    assert_eq!(broker.cash(), cash - Decimal::from(833) * fill_price);
    assert_books_agree(&app, &broker).await;
    // The same through the console's event stream.
    let updated = wait_for_event(&seen, "order.updated FILLED", "order.updated", |d| {
        d["client_order_id"] == id.as_str() && d["status"] == "FILLED"
    })
    .await;
    assert_eq!(updated["broker_name"], "alpaca", "{updated}");
    let execution =
        wait_for_event(&seen, "execution.created", "execution.created", |d| d["client_order_id"] == id.as_str()).await;
    assert_eq!((execution["quantity"].as_i64(), execution["side"].as_str()), (Some(833), Some("BUY")), "{execution}");
    assert_eq!(cents(execution["price"].as_f64().unwrap()), cents_of(fill_price), "{execution}");

    // The strategy's stop and target rest at the broker (CONTRACT §11): its scale-out half (416
    // of 833) under an `oco` of the take-profit at the target and the stop, the rest (417) under
    // the stop alone.
    // Open: the oco's take-profit, its stop leg (held under it), and the rest's stop.
    wait_until(
        "the strategy's two protective orders resting at the trading stand-in",
        LIMIT,
        || async { broker.open_orders() },
        |o| o.len() == 3,
    )
    .await;
    let sells: Vec<Value> = broker.orders().into_iter().filter(|o| o["side"] == "sell").collect();
    let oco = sells.iter().find(|o| o["order_class"] == "oco" && o["type"] == "limit");
    let oco = oco.unwrap_or_else(|| panic!("an oco: {sells:?}"));
    let rest = sells.iter().find(|o| o["order_class"] != "oco").unwrap_or_else(|| panic!("a stop: {sells:?}"));
    assert_eq!((oco["type"].as_str(), oco["qty"].as_str()), (Some("limit"), Some("416")), "{oco}");
    assert_eq!(price(&oco["limit_price"]), Some(cents(target)), "the take-profit at the target: {oco}");
    let leg = broker.leg_of(oco["client_order_id"].as_str().unwrap());
    assert_eq!(price(&leg["stop_price"]), Some(cents(stop)), "the oco's stop leg at the stop: {leg}");
    assert_eq!((rest["type"].as_str(), rest["qty"].as_str()), (Some("stop"), Some("417")), "{rest}");
    assert_eq!(price(&rest["stop_price"]), Some(cents(stop)), "{rest}");
    let rest_id = rest["client_order_id"].as_str().unwrap().to_string();
    let row = wait_until(
        "the position protected at the broker",
        LIMIT,
        || position(&app),
        |p| p.as_ref().is_some_and(|p| p["protection"] == "BROKER"),
    )
    .await
    .unwrap();
    assert_eq!(row["protective_order_id"], json!(rest_id), "the stop for the rest is named: {row}");

    // A trade at the target: the take-profit fills at the stand-in — the scale-out, with no
    // order of the strategy's own — and the rest's stop follows the strategy to breakeven (the
    // entry's fill price).
    let target_price = Decimal::new(cents(target), 2);
    broker.trade(SYMBOL, target_price);
    let scaled = wait_until(
        "the rest protected at breakeven",
        LIMIT,
        || position(&app),
        |p| {
            p.as_ref().is_some_and(|p| {
                p["quantity"] == 417 && p["protection"] == "BROKER" && p["protective_order_id"] != json!(rest_id)
            })
        },
    )
    .await
    .unwrap();
    assert_eq!((scaled["stop_loss"].as_f64(), &scaled["target"]), (Some(6.25), &Value::Null), "{scaled}");
    let breakeven_id = scaled["protective_order_id"].as_str().unwrap().to_string();
    let breakeven = broker.order(&breakeven_id);
    assert_eq!((breakeven["type"].as_str(), breakeven["qty"].as_str()), (Some("stop"), Some("417")), "{breakeven}");
    assert_eq!(price(&breakeven["stop_price"]), Some(625), "{breakeven}");
    assert_eq!(broker.order(&rest_id)["status"], "canceled", "the rest's first stop gave way");
    assert_eq!(broker.open_orders(), vec![breakeven_id.clone()], "nothing else rests");
    let scale_out = app.get(&format!("/api/orders/{}", oco["client_order_id"].as_str().unwrap())).await;
    assert_eq!(scale_out.data()["status"], "FILLED", "{}", scale_out.body);

    // The emergency halt: cancelled and flattened at the broker; the service is flat.
    let reply = app.post("/api/risk/emergency-halt", ADMIN_TOKEN, json!({"reason": "Alpaca desk proof"})).await;
    let halted = reply.assert_ok(200);
    assert_eq!(
        (halted["halted"].as_bool(), halted["liquidation_requested"].as_bool()),
        (Some(true), Some(true)),
        "{halted}"
    );
    wait_until(
        "no open order and no position at the trading stand-in",
        LIMIT,
        || async { (broker.open_orders(), broker.positions()) },
        |(orders, positions)| orders.is_empty() && positions.is_empty(),
    )
    .await;
    let exit =
        wait_until("the service flat", LIMIT, || position(&app), |p| p.as_ref().is_none_or(|p| p["quantity"] == 0))
            .await;
    let reconciled = wait_for_reconciled(&app).await;
    assert_eq!(reconciled["detail"]["broker"], "alpaca", "{reconciled}");
    let risk = app.get("/api/risk/state").await;
    let risk = risk.assert_ok(200);
    assert_eq!(
        (risk["trading_state"].as_str(), risk["reconciliation_status"].as_str()),
        (Some("HALTED"), Some("OK")),
        "{risk}"
    );
    let rows = app.get("/api/watchlist").await;
    let row = rows.data().as_array().unwrap().iter().find(|r| r["symbol"] == SYMBOL).cloned().expect("watched");
    assert_eq!(
        (row["polling_status"].as_str(), row["reason"].as_str()),
        (Some("STOPPED"), Some("emergency halt")),
        "the strategy stopped: {row}"
    );
    assert_books_agree(&app, &broker).await;
    assert_eq!(
        broker.cash(),
        cash + Decimal::from(833) * (target_price - fill_price),
        "bought at the fill price, sold at the target (the take-profit, then the halt's exit at the last trade): \
         {exit:?}"
    );
    assert_eq!(
        broker.calls("POST", "/v2/orders"),
        5,
        "the entry, the strategy's two protective orders, the rest's breakeven stop, and the halt's exit reached \
         the broker"
    );
    let sells: Vec<Value> = broker.orders().into_iter().filter(|o| o["side"] == "sell").collect();
    let of = |o: &Value| {
        (
            o["type"].as_str().map(str::to_string),
            o["qty"].as_str().map(str::to_string),
            o["status"].as_str().map(str::to_string),
        )
    };
    let s = |v: &str| Some(v.to_string());
    assert_eq!(
        sells.iter().map(of).collect::<Vec<_>>(),
        vec![
            (s("limit"), s("416"), s("filled")),
            (s("stop"), s("416"), s("canceled")),
            (s("stop"), s("417"), s("canceled")),
            (s("stop"), s("417"), s("canceled")),
            (s("market"), s("417"), s("filled"))
        ],
        "the take-profit sold the scale-out (its stop leg cancelled with it); the rest's stop, moved to breakeven, \
         protected the rest at the broker until the halt freed its shares; the halt's exit sold the rest at \
         market: {sells:?}"
    );
    eprintln!("alpaca_desk: the whole desk in {:?}", started.elapsed());
}
