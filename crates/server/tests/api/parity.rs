//! Live/backtest parity (issue 5 §4): the live engine trading a simulated day (09:25 to the
//! 16:00 close) minute by minute through the real feed, runner and paper broker, places the same
//! strategy orders — same minute, side, type, quantity and reasons — as a backtest of the same
//! symbol and day with the same settings.

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
fn backtest_orders(app: &TestApp, symbol: &Symbol) -> Vec<tradeops_core::orders::Order> {
    let market = tradeops_server::market::SimulatedMarket::new(app.config.sim.seed, app.config.sim.symbols as usize);
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
    let out = backtest::run(&spec, &settings(), &bars, &mut history, &mut |_| {}).unwrap();
    // The backtest's own close after its last bar is not a strategy decision.
    out.order_log.into_iter().filter(|o| o.strategy_id.is_some()).map(std::sync::Arc::unwrap_or_clone).collect()
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
    // The runner of the day whose backtest places the most strategy orders (here an entry, a
    // scale-out, a stop-out and a second entry): the most there is to agree on.
    let market = tradeops_server::market::SimulatedMarket::new(app.config.sim.seed, app.config.sim.symbols as usize);
    let date = chrono::NaiveDate::from_ymd_opt(2026, 11, 20).unwrap();
    let runners: Vec<Symbol> = market
        .universe
        .symbols
        .iter()
        .filter(|p| tradeops_sim::day_kind(&market.universe, p, date) == tradeops_sim::DayKind::Runner)
        .map(|p| p.symbol.clone())
        .collect();
    let (symbol, expected) = runners
        .iter()
        .map(|s| (s.clone(), backtest_orders(&app, s)))
        .max_by_key(|(s, orders)| (orders.len(), std::cmp::Reverse(s.clone())))
        .expect("a runner");
    assert!(
        expected.iter().any(|o| o.side == tradeops_core::market::Side::Sell),
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
}
