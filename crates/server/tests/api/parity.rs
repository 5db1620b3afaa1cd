//! Live/backtest parity: the live engine trading a simulated day (09:25 to the
//! 16:00 close) minute by minute through the real feed, runner and paper broker, places the same
//! strategy orders — same minute, side, type, quantity and reasons — as a backtest of the same
//! symbol and day with the same settings. Both trades' deep dives show the market the strategy
//! decided on: the gain, relative volume and VWAP its entry reason quotes.

use crate::helpers::*;
use serde_json::json;
use std::sync::Arc;
use tradeops_core::backtest::{self, fills::FillModel, BacktestSpec};
use tradeops_core::calendar::MarketCalendar;
use tradeops_core::market::Timeframe;
use tradeops_core::time::{format_ts, parse_ts};
use tradeops_core::{Settings, Symbol};
use tradeops_sim::history::SimHistory;

const WATCH_AT: &str = "2026-11-20T14:25:00Z"; // 09:25 New York
const UNTIL: &str = "2026-11-20T21:00:00Z"; // 16:00 New York

/// A strategy order as comparable between the two: when it was decided and what it asked. An
/// entry's reason is compared whole; an exit's by its rule, since its sentence quotes the entry's
/// fill price, which the two fill models set differently (paper: the ask plus slippage; the
/// backtest: the stop or the open).
fn key(o: &tradeops_core::orders::Order) -> String {
    let reason = o.reason.as_deref().unwrap_or("");
    let reason = match o.side {
        tradeops_core::market::Side::Buy => reason,
        tradeops_core::market::Side::Sell => reason.split(": ").next().unwrap_or(""),
    };
    format!(
        "{} {} {} {} stop {:?} limit {:?} — {reason}",
        format_ts(&o.created_at),
        o.side.as_str(),
        o.quantity,
        o.order_type.as_str(),
        o.stop_price.map(|p| p.normalize().to_string()),
        o.limit_price.map(|p| p.normalize().to_string()),
    )
}

fn settings() -> Settings {
    let mut s = Settings::default();
    s.strategy_allocator.auto_watch = false;
    s
}

/// The backtest of `symbol` over the day, through `tradeops_core::backtest::run` on the
/// simulated market's bars (what `POST /api/backtests/run` does).
fn backtest_day(app: &TestApp, symbol: &Symbol) -> backtest::BacktestOutput {
    let market =
        tradeops_brokers::simulated::SimulatedMarket::new(app.config.sim.seed, app.config.sim.symbols as usize);
    let (start, end) = (parse_ts(WATCH_AT).unwrap(), parse_ts(UNTIL).unwrap());
    // From the day's start: the pre-market counts toward relative volume, as live.
    let day_start = parse_ts("2026-11-20T05:00:00Z").unwrap();
    let bars = market.bars_sync(symbol, Timeframe::Minute, day_start, end).unwrap();
    let profile = market.universe.get(symbol).unwrap().clone();
    let calendar = MarketCalendar::new(settings().runtime.market_calendar);
    let mut history = SimHistory::new(market.universe.clone(), profile, calendar);
    let spec = BacktestSpec {
        strategy_id: "momentum_breakout".into(),
        symbol: symbol.clone(),
        timeframe: Timeframe::Minute,
        start,
        parameters: Default::default(),
        initial_cash: app.config.paper.initial_cash,
        commission_rate: Default::default(),
        slippage_bps: Default::default(),
        fill: FillModel::NextOpen,
    };
    // The backtest's own close after its last bar is not a strategy decision.
    backtest::run(&spec, &settings(), &bars, &mut history, &mut |_| {}).unwrap()
}

/// The number after `before` in `text`, up to `after`.
fn quoted(text: &str, before: &str, after: &str) -> f64 {
    let rest = &text[text.find(before).unwrap_or_else(|| panic!("{before:?} in {text:?}")) + before.len()..];
    rest[..rest.find(after).unwrap()].parse().unwrap_or_else(|e| panic!("{before:?} in {text:?}: {e}"))
}

/// A strategy entry's features at entry (`price`, `percentage_gain`, `relative_volume`,
/// `distance_from_vwap_pct`) are the numbers its reason quotes, within their rounding: "Up
/// 21.6% on 3.4x relative volume … above VWAP 5.37; …".
#[track_caller]
fn assert_features_match_reason(features: &serde_json::Value, reason: &str) {
    let number = |key: &str| features[key].as_f64().unwrap_or_else(|| panic!("{key} in {features}"));
    let (gain, rvol, vwap) =
        (quoted(reason, "Up ", "% on "), quoted(reason, "% on ", "x relative"), quoted(reason, "above VWAP ", "; "));
    assert!((number("percentage_gain") - gain).abs() <= 0.05 + 1e-9, "gain: {features} vs {reason}");
    assert!((number("relative_volume") - rvol).abs() <= 0.05 + 1e-9, "relative volume: {features} vs {reason}");
    // The VWAP is quoted to the cent: the distance from it within that rounding.
    let price = number("price");
    let (low, high) = ((price / (vwap + 0.005) - 1.0) * 100.0, (price / (vwap - 0.005) - 1.0) * 100.0);
    let distance = number("distance_from_vwap_pct");
    assert!((low - 1e-9..=high + 1e-9).contains(&distance), "VWAP distance {distance} not in {low}..{high}: {reason}");
}

#[tokio::test]
async fn a_simulated_day_traded_live_matches_its_backtest() {
    let (db, url) = TestDb::new().await;
    let mut config = test_config(url);
    // The walk polls the feed's health every step: more than a console would.
    config.auth.rate_limit_per_second = 10_000;
    config.auth.rate_limit_burst = 10_000;
    // The feed's market time is read from the health probe: probe often, so each step is seen
    // as soon as it is processed.
    config.health_probe_interval = std::time::Duration::from_millis(2);
    let clock = tradeops_core::ManualClock::new(parse_ts(WATCH_AT).unwrap());
    let app = start_at(config, Arc::new(db), axum::Router::new(), clock).await;
    // The runner of the day whose backtest fills the most strategy orders (then places the
    // most): the most there is to agree on. Not one whose stop moved to breakeven is hit: that stop is the entry's fill
    // price, which the two fill models set differently (see `key`), so the minute it is touched
    // may differ too. The scale-out is the take-profit resting at the broker (CONTRACT §11), and
    // the stop rests there too, so it is hit when a sell fills after the take-profit's: the
    // strategy's own or a protective order.
    let market =
        tradeops_brokers::simulated::SimulatedMarket::new(app.config.sim.seed, app.config.sim.symbols as usize);
    let date = chrono::NaiveDate::from_ymd_opt(2026, 11, 20).unwrap();
    let runners: Vec<Symbol> = market
        .universe
        .symbols
        .iter()
        .filter(|p| tradeops_sim::day_kind(&market.universe, p, date) == tradeops_sim::DayKind::Runner)
        .map(|p| p.symbol.clone())
        .collect();
    let took_profit = |o: &tradeops_core::orders::Order| {
        o.legs.is_some_and(|l| l.take_profit.is_some())
            && o.average_fill_price().is_some_and(|p| o.protective_leg(p) == "TAKE_PROFIT")
    };
    let breakeven_stop_hit = |log: &[Arc<tradeops_core::orders::Order>]| {
        let filled_sells: Vec<&tradeops_core::orders::Order> = log
            .iter()
            .filter(|o| o.side == tradeops_core::market::Side::Sell && o.filled_quantity > 0)
            .map(|o| o.as_ref())
            .collect();
        filled_sells.windows(2).any(|w| took_profit(w[0]))
    };
    let (symbol, expected) = runners
        .iter()
        .map(|s| (s.clone(), backtest_day(&app, s).order_log))
        .filter(|(_, log)| !breakeven_stop_hit(log))
        .map(|(s, log)| {
            let strategy: Vec<_> =
                log.into_iter().filter(|o| o.strategy_id.is_some()).map(Arc::unwrap_or_clone).collect();
            (s, strategy)
        })
        .max_by_key(|(s, orders)| {
            let filled = orders.iter().filter(|o| o.filled_quantity > 0).count();
            (filled, orders.len(), std::cmp::Reverse(s.clone()))
        })
        .expect("a runner");
    assert!(
        expected.iter().any(|o| o.side == tradeops_core::market::Side::Buy && o.filled_quantity > 0),
        "a runner the strategy trades: {expected:?}"
    );

    app.put_settings(ADMIN_TOKEN, json!({"strategy_allocator": {"auto_watch": false}})).await.assert_ok(200);
    app.post("/api/radar/watch", ADMIN_TOKEN, json!({"symbol": symbol.as_str()})).await.assert_ok(200);
    // Step by step (four a minute, as the live feed), each processed before the next.
    let (mut at, until) = (parse_ts(WATCH_AT).unwrap(), parse_ts(UNTIL).unwrap());
    while at < until {
        at += chrono::Duration::seconds(15);
        app.market.set(at);
        app.wait_for_feed(&format_ts(&at)).await;
    }
    // The engine acts on the last steps after the feed processed them: read its orders once
    // it has placed as many as the backtest (or after 5 s, whatever it placed).
    let backtest: Vec<String> = expected.iter().map(key).collect();
    let db = tradeops_store::Database::open(&app.config.database_url).await.unwrap();
    use tradeops_store::TradingRepository;
    let mut live: Vec<String> = Vec::new();
    for _ in 0..100 {
        live = db
            .all_orders()
            .await
            .unwrap()
            .into_iter()
            .map(|(o, _)| o)
            .filter(|o| o.symbol == symbol && o.strategy_id.is_some())
            .map(|o| key(&o))
            .collect();
        if live.len() >= backtest.len() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    db.close().await;
    assert_eq!(live, backtest, "live and backtest strategy orders of {symbol}");

    // Each strategy trade's deep dive, live and in the backtest, shows the market its entry
    // decided on.
    let trades = app.get(&format!("/api/trades?symbol={symbol}")).await.assert_ok(200).clone();
    let trades = trades.as_array().unwrap();
    assert!(!trades.is_empty(), "the day's trades of {symbol}");
    for row in trades {
        let dive = app.get(&format!("/api/trades/{}", row["trade_id"].as_str().unwrap())).await;
        let dive = dive.assert_ok(200);
        let entry = &dive["explanations"][0];
        assert_eq!(entry["rule"], "FIRST_PULLBACK_BREAKOUT", "{dive}");
        assert_features_match_reason(&dive["features"], entry["text"].as_str().unwrap());
    }
    let tested = backtest_day(&app, &symbol);
    assert_eq!(tested.trades.len(), trades.len());
    for trade in &tested.trades {
        let features = serde_json::to_value(trade.detail.features.as_ref().expect("features")).unwrap();
        assert_features_match_reason(&features, &trade.detail.explanations[0].text);
    }
}

/// A stretch of live PAPER trading on the simulated market — the radar, the
/// allocator's auto-watch, the strategies, the risk gate and the paper broker, the market clock
/// stepped 15 s at a time as the live feed steps — and its desk replay (`POST
/// /api/backtests` with `kind: "desk"`) give identical trades and the same watchlist.
#[tokio::test]
async fn a_live_paper_stretch_and_its_desk_replay_trade_identically() {
    const FROM: &str = "2026-11-19T14:30:00Z"; // 09:30 New York
    const TO: &str = "2026-11-19T17:30:00Z";
    let (db, url) = TestDb::new().await;
    let mut config = test_config(url);
    config.auth.rate_limit_per_second = 10_000;
    config.auth.rate_limit_burst = 10_000;
    config.health_probe_interval = std::time::Duration::from_millis(2);
    let clock = tradeops_core::ManualClock::new(parse_ts(FROM).unwrap());
    let app = start_at(config, Arc::new(db), axum::Router::new(), clock).await;
    let desk = json!({"strategy_allocator": {"auto_watch": true, "auto_watch_top_n": 5}});
    app.put_settings(ADMIN_TOKEN, desk.clone()).await.assert_ok(200);
    // Each step handed on whole (market step, scans, the allocator's watches) before the next.
    // The steps after FROM and before TO: the replay's.
    let (mut at, until) = (parse_ts(FROM).unwrap(), parse_ts(TO).unwrap());
    while at + chrono::Duration::seconds(15) < until {
        at += chrono::Duration::seconds(15);
        app.market.set(at);
        let stamp = format_ts(&at);
        let mut handed_on = false;
        for _ in 0..2000 {
            let health = app.get("/api/health/components").await;
            let feed = health.data().as_array().unwrap().iter().find(|c| c["name"] == "data_broker").cloned();
            if feed.is_some_and(|f| f["detail"]["handled_through"] == stamp.as_str()) {
                handed_on = true;
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(2)).await;
        }
        assert!(handed_on, "the feed never handed on {stamp}");
        // The feed hands the step to the engine without waiting for it: a preview is answered
        // by the engine after what was queued before it, so the step is carried out (its orders,
        // their stops) before the clock moves on, however slow the machine. Otherwise a step
        // the engine takes longer than the feed's patience for would meet the next step's prints.
        // (Any symbol: the engine answers it, a symbol of the market or not, and changes nothing.)
        let barrier = json!({"symbol": "AAPL", "side": "BUY", "quantity": 1});
        let _ = app.post("/api/orders/preview", ADMIN_TOKEN, barrier).await;
    }
    // The reports due before TO (a last ack), delivered by the engine's tick as the replay
    // delivers them at its end; the feed's next print (TO) is not reached.
    app.market.set(until - chrono::Duration::milliseconds(1));
    // Every order acknowledged (its ack was due 50 ms after a step, before TO).
    for _ in 0..250 {
        let orders = app.get("/api/orders").await;
        if orders.data().as_array().unwrap().iter().all(|o| o["status"] != "NEW") {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let comparable = |t: &serde_json::Value| {
        json!([
            t["trade_id"],
            t["symbol"],
            t["strategy_id"],
            t["entry_time"],
            t["exit_time"],
            t["quantity"],
            t["entry_price"],
            t["exit_price"],
            t["gross_pnl"],
            t["net_pnl"],
            t["exit_reason"]
        ])
    };
    let live_trades = || async {
        let mut rows: Vec<serde_json::Value> =
            app.get("/api/trades").await.data().as_array().unwrap().iter().map(comparable).collect();
        rows.sort_by_key(|t| t[0].as_str().unwrap().to_string());
        rows
    };
    let live = live_trades().await;
    assert!(!live.is_empty(), "the live desk traded");
    let watchlist: Vec<(String, String)> = app
        .get("/api/watchlist")
        .await
        .data()
        .as_array()
        .unwrap()
        .iter()
        .map(|w| (w["symbol"].as_str().unwrap().to_string(), w["source"].as_str().unwrap().to_string()))
        .collect();

    // The market clock at TO, so the replay's range is not in the future (the live trades were read).
    app.market.set(until);
    let body = json!({"kind": "desk", "start": FROM, "end": TO, "initial_cash": app.config.paper.initial_cash, "settings": desk});
    let queued = app.post("/api/backtests", ADMIN_TOKEN, body).await;
    let id = queued.assert_ok(202)["backtest_id"].as_str().unwrap().to_string();
    let replay = crate::backtests::wait_done(&app, &id).await;
    assert_eq!(replay["status"], "COMPLETED", "{replay}");
    let mut replayed: Vec<serde_json::Value> = replay["trades"].as_array().unwrap().iter().map(comparable).collect();
    replayed.sort_by_key(|t| t[0].as_str().unwrap().to_string());
    assert_eq!(replayed, live, "the replay's trades are the live desk's");
    let mut watched: Vec<(String, String)> = replay["watched"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| (w["symbol"].as_str().unwrap().to_string(), w["source"].as_str().unwrap().to_string()))
        .collect();
    let mut expected = watchlist;
    watched.sort();
    expected.sort();
    assert_eq!(watched, expected, "the allocator watched the same symbols");
}
