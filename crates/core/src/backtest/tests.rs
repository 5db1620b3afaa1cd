use super::*;
use crate::market::{Price, Side};
use crate::orders::OrderStatus;
use crate::trades::Label;
use chrono::TimeZone;

fn d(text: &str) -> Decimal {
    text.parse().unwrap()
}

fn px(text: &str) -> Price {
    Price::from_decimal(d(text)).unwrap()
}

/// One-minute bars from 10:00 New York on 2026-03-02, each `(open, close)`.
fn bars(series: &[(&str, &str)]) -> Vec<Bar> {
    let start = chrono::Utc.with_ymd_and_hms(2026, 3, 2, 15, 0, 0).unwrap();
    series
        .iter()
        .enumerate()
        .map(|(i, (o, c))| {
            let (o, c) = (px(o), px(c));
            Bar {
                start: start + chrono::Duration::minutes(i as i64),
                open: o,
                high: o.max(c),
                low: o.min(c),
                close: c,
                volume: 1_000,
            }
        })
        .collect()
}

/// fast 2 / slow 3: the averages cross above on bar 4 (close 12) and below on bar 6 (close 11).
const SERIES: [(&str, &str); 9] = [
    ("12", "12"),
    ("12", "11"),
    ("11", "10"),
    ("10", "10.5"),
    ("10.5", "12"),
    ("12.2", "12.5"),
    ("12.5", "11"),
    ("10.8", "9"),
    ("9", "8"),
];

fn spec(fill: FillModel) -> BacktestSpec {
    BacktestSpec {
        strategy_id: "sma_cross".into(),
        symbol: Symbol::parse("ABC").unwrap(),
        timeframe: Timeframe::Minute,
        start: chrono::Utc.with_ymd_and_hms(2026, 3, 2, 0, 0, 0).unwrap(),
        parameters: [("fast".to_string(), 2.0), ("slow".to_string(), 3.0)].into(),
        initial_cash: d("10000"),
        commission_rate: Decimal::ZERO,
        slippage_bps: Decimal::ZERO,
        fill,
    }
}

fn settings() -> Settings {
    let mut s = Settings::default();
    s.risk_controls.max_daily_loss = d("1000000");
    // Sized at the known fill price with no margin, as backtesting.py sizes.
    s.risk_controls.market_buy_buffer_pct = 0.0;
    s
}

fn run_on(spec: &BacktestSpec, bars: &[Bar]) -> BacktestOutput {
    let mut history = BarHistory::new(bars, spec.timeframe);
    run(spec, &settings(), bars, &mut history, &mut |_| {}).expect("runs")
}

/// Worked by hand: buy decided on bar 4's close, sized at its fill price, bar 5's open 12.20:
/// floor(10000 / 12.20) = 819 shares (9,991.80); sell decided on bar 6's close, filled at bar
/// 7's open 10.80 (8,845.20). Cash ends at 8,853.40.
#[test]
fn sma_cross_trades_at_the_next_open_as_worked_by_hand() {
    let bars = bars(&SERIES);
    let out = run_on(&spec(FillModel::NextOpen), &bars);
    assert_eq!(out.trades.len(), 1, "{:?}", out.trades);
    let t = &out.trades[0];
    assert_eq!((t.entry_time, t.exit_time), (bars[5].start, bars[7].start));
    assert_eq!((t.quantity, t.entry_price, t.exit_price), (819, d("12.2"), d("10.8")));
    assert_eq!((t.gross_pnl, t.net_pnl, t.fees), (d("-1146.6"), d("-1146.6"), Decimal::ZERO));
    assert_eq!(t.winner_loser_label, Label::Loser);
    assert_eq!(t.strategy_id.as_deref(), Some("sma_cross"));
    assert_eq!(t.detail.outcomes.exit_reason, "SMA_CROSS_BELOW");
    assert_eq!(t.detail.outcomes.hold_seconds, 120);
    let rules: Vec<&str> = t.detail.explanations.iter().map(|e| e.rule.as_str()).collect();
    assert_eq!(rules, ["SMA_CROSS_ABOVE", "SMA_CROSS_BELOW"]);
    assert_eq!(out.final_equity, d("8853.4"));
    assert_eq!(out.metrics.total_return, -0.11466);
    // Peak 8.20 + 819 × 12.50 = 10,245.70 after bar 5; trough 8,853.40.
    let expected_dd = 1392.3 / 10245.7;
    assert!((out.metrics.max_drawdown - expected_dd).abs() < 1e-12, "{}", out.metrics.max_drawdown);
    assert_eq!((out.metrics.trade_count, out.metrics.win_rate), (1, Some(0.0)));
    assert_eq!(out.equity_curve.len(), bars.len());
    assert_eq!(out.equity_curve[5].equity, d("10245.7"));
    assert_eq!((out.orders, out.bars), (2, 9));
    // The log keeps each order as it ended, in the order submitted.
    let logged: Vec<_> = out.order_log.iter().map(|o| (o.side, o.status, o.executions.len(), o.quantity)).collect();
    assert_eq!(logged, [(Side::Buy, OrderStatus::Filled, 1, 819), (Side::Sell, OrderStatus::Filled, 1, 819)]);
    // MFE: the best high while open was 12.50 (bar 5) over 12.20; MAE: the low 10.80 at the exit.
    let o = &t.detail.outcomes;
    assert!((o.mfe.unwrap() - 0.3 / 12.2).abs() < 1e-12 && (o.mae.unwrap() - 1.4 / 12.2).abs() < 1e-12, "{o:?}");
}

/// `CLOSE` fills on the decision bar's close; commission and slippage are charged on each fill.
#[test]
fn close_fills_with_commission_and_slippage() {
    let bars = bars(&SERIES);
    let mut s = spec(FillModel::Close);
    s.commission_rate = d("0.001");
    s.slippage_bps = d("10");
    let out = run_on(&s, &bars);
    let t = &out.trades[0];
    // Buy floor(10000 / 12.012) = 832 at 12 × 1.001 = 12.012; sell at 11 × 0.999 = 10.989.
    assert_eq!((t.entry_time, t.exit_time), (bars[5].start, bars[7].start));
    assert_eq!((t.entry_price, t.exit_price), (d("12.012"), d("10.989")));
    let fees = d("0.001") * (d("12.012") + d("10.989")) * d("832");
    assert_eq!(t.quantity, 832);
    assert_eq!(t.fees, fees);
    assert_eq!(t.net_pnl, d("832") * (d("10.989") - d("12.012")) - fees);
    assert_eq!(out.final_equity, d("10000") + t.net_pnl);
}

/// A position still open after the last bar is sold at its close.
#[test]
fn an_open_position_is_closed_at_the_last_close() {
    let bars = bars(&SERIES[..6]);
    let out = run_on(&spec(FillModel::NextOpen), &bars);
    assert_eq!(out.trades.len(), 1);
    let t = &out.trades[0];
    assert_eq!((t.exit_price, t.net_pnl), (d("12.5"), d("245.7")));
    assert_eq!(t.detail.outcomes.exit_reason, "END_OF_DATA");
    assert_eq!(t.winner_loser_label, Label::Winner);
    assert_eq!(out.final_equity, d("10245.7"));
    assert_eq!(out.equity_curve.last().unwrap().equity, d("10245.7"));
}

/// The same request on the same bars gives the same result, bit for bit.
#[test]
fn runs_are_deterministic() {
    let bars = bars(&SERIES);
    let a = run_on(&spec(FillModel::NextOpen), &bars);
    let b = run_on(&spec(FillModel::NextOpen), &bars);
    assert_eq!(a, b);
}

/// The operator's risk gate applies: an entry no share of which fits `max_order_value` is
/// refused and counted by rule.
#[test]
fn the_risk_gate_refuses_in_backtests_too() {
    let bars = bars(&SERIES);
    let mut history = BarHistory::new(&bars, Timeframe::Minute);
    let mut s = settings();
    s.risk_controls.max_order_value = d("10");
    let out = run(&spec(FillModel::NextOpen), &s, &bars, &mut history, &mut |_| {}).unwrap();
    assert!(out.trades.is_empty());
    assert_eq!(out.refusals, [("MAX_ORDER_VALUE".to_string(), 1)].into(), "{:?}", out.refusals);
    assert_eq!(out.final_equity, d("10000"));
    assert_eq!(out.metrics.sharpe_ratio, None, "no variance: undefined, not zero");
}

/// An all-in entry over a limit is sized down to what the gate allows, not refused; the
/// order's reason says by which rule. Under the default 3 % market buy buffer it keeps that
/// margin of its buying power.
#[test]
fn entries_are_sized_down_to_the_risk_limits() {
    let bars = bars(&SERIES);
    let mut s = settings();
    s.risk_controls.max_order_value = d("1000");
    let out = run(&spec(FillModel::NextOpen), &s, &bars, &mut BarHistory::new(&bars, Timeframe::Minute), &mut |_| {})
        .unwrap();
    assert!(out.refusals.is_empty(), "{:?}", out.refusals);
    assert_eq!(out.trades.len(), 1);
    assert_eq!(out.trades[0].quantity, 81, "floor(1000 / 12.20)");
    let reason = out.order_log[0].reason.as_deref().unwrap();
    assert!(reason.ends_with("Capped at 81 shares by MAX_ORDER_VALUE (limit 1000)."), "{reason}");
    let mut s = settings();
    s.risk_controls.max_position_size = 500;
    let out = run(&spec(FillModel::NextOpen), &s, &bars, &mut BarHistory::new(&bars, Timeframe::Minute), &mut |_| {})
        .unwrap();
    assert_eq!(out.trades[0].quantity, 500);
    assert!(out.order_log[0].reason.as_deref().unwrap().contains("by MAX_POSITION_SIZE (limit 500 shares)"));
    let mut s = settings();
    s.risk_controls.market_buy_buffer_pct = 3.0;
    let out = run(&spec(FillModel::NextOpen), &s, &bars, &mut BarHistory::new(&bars, Timeframe::Minute), &mut |_| {})
        .unwrap();
    assert_eq!(out.trades[0].quantity, 795, "floor(10000 / (12.20 × 1.03))");
    assert_eq!(
        out.order_log[0].reason.as_deref().unwrap(),
        "SMA_CROSS_ABOVE: SMA(2) 11.25 crossed above SMA(3) 10.8333 at 12; buying with all buying power: 795 shares at \
         12.2 (+3% for the fill) with $10000 of buying power."
    );
}

#[test]
fn no_bars_is_an_error_and_progress_reaches_one() {
    let mut history = BarHistory::new(&[], Timeframe::Minute);
    let err = run(&spec(FillModel::NextOpen), &settings(), &[], &mut history, &mut |_| {}).unwrap_err();
    assert!(matches!(err, BacktestError::NoData { .. }));
    let bars = bars(&SERIES);
    let mut seen = Vec::new();
    let mut history = BarHistory::new(&bars, Timeframe::Minute);
    run(&spec(FillModel::NextOpen), &settings(), &bars, &mut history, &mut |p| seen.push(p)).unwrap();
    assert_eq!(seen.last(), Some(&1.0));
    assert!(seen.windows(2).all(|w| w[0] <= w[1]));
}

#[test]
fn parameters_are_checked_against_the_catalog() {
    let s = Settings::default();
    let params = |v: serde_json::Value| v.as_object().unwrap().clone();
    let ok = validate_parameters("sma_cross", Timeframe::Day, &params(serde_json::json!({"fast": 5})), &s).unwrap();
    assert_eq!(ok, [("fast".to_string(), 5.0), ("slow".to_string(), 20.0)].into());
    let fields = |r: Result<_, Vec<FieldError>>| r.unwrap_err().into_iter().map(|e| e.field).collect::<Vec<_>>();
    let bad = serde_json::json!({"fast": 2.5, "slow": "x", "nope": 1});
    assert_eq!(
        fields(validate_parameters("sma_cross", Timeframe::Minute, &params(bad), &s)),
        ["parameters.nope", "parameters.fast", "parameters.slow"]
    );
    let crossed = serde_json::json!({"fast": 30, "slow": 20});
    assert_eq!(fields(validate_parameters("sma_cross", Timeframe::Minute, &params(crossed), &s)), ["parameters.fast"]);
    assert_eq!(
        fields(validate_parameters("momentum_breakout", Timeframe::Day, &params(serde_json::json!({})), &s)),
        ["timeframe"]
    );
    assert_eq!(
        fields(validate_parameters("nope", Timeframe::Minute, &params(serde_json::json!({})), &s)),
        ["strategy_id"]
    );
}

#[test]
fn bar_history_measures_previous_close_and_relative_volume() {
    let day = |date: u32, hour: u32, volume: u64, close: &str| Bar {
        start: chrono::Utc.with_ymd_and_hms(2026, 3, date, hour, 0, 0).unwrap(),
        open: px(close),
        high: px(close),
        low: px(close),
        close: px(close),
        volume,
    };
    // 15:00Z is 10:00 New York, 21:00Z is 16:00 (after the close: not the day's close).
    let bars = [day(2, 15, 100, "10"), day(2, 21, 50, "11"), day(3, 15, 300, "12"), day(4, 15, 10, "13")];
    let mut h = BarHistory::new(&bars, Timeframe::Minute);
    let march = |d| NaiveDate::from_ymd_opt(2026, 3, d).unwrap();
    assert_eq!(h.prev_close(march(3)), Some(d("10")));
    assert_eq!(h.prev_close(march(2)), None);
    assert_eq!(h.relative_volume(march(2), 600, 100), None, "no earlier day");
    assert_eq!(h.relative_volume(march(3), 601, 300), Some(3.0), "100 by 10:01 the day before");
    assert_eq!(h.relative_volume(march(3), 599, 300), None, "nothing by 09:59 the day before");
    // March 4: by 10:01, (100 + 300) / 2 expected; by the day's end (and past it), (150 + 300) / 2.
    assert_eq!(h.relative_volume(march(4), 601, 100), Some(0.5));
    assert_eq!(h.expected_volume(march(4)).len(), 1440);
    assert_eq!(h.relative_volume(march(4), 5000, 450), Some(2.0));
    assert_eq!(h.relative_volume(march(3), 601, 300), Some(3.0), "an earlier date asked again");
    // Dates not in the data: after it, the last close and the last (up to 10) dates' volume;
    // then back to an earlier date (the cursor moves back).
    assert_eq!(h.prev_close(march(10)), Some(d("13")));
    assert_eq!(h.relative_volume(march(10), 5000, 460), Some(3.0), "(150 + 300 + 10) / 3 by the day's end");
    assert_eq!(h.prev_close(march(1)), None);
    assert_eq!(h.prev_close(march(3)), Some(d("10")));
    let mut daily = BarHistory::new(&bars, Timeframe::Day);
    assert_eq!(daily.expected_volume(march(4)), [(150.0 + 300.0) / 2.0], "daily bars: the day's volume");
    // Bars out of time order make the same history (a date's close is its last bar given
    // before 16:00, as in order).
    let mixed = [bars[2], bars[0], bars[3], bars[1]];
    let mut m = BarHistory::new(&mixed, Timeframe::Minute);
    for date in (1..=11).map(march) {
        assert_eq!(m.prev_close(date), h.prev_close(date), "{date}");
        assert_eq!(m.expected_volume(date), h.expected_volume(date), "{date}");
    }
}

#[test]
fn the_curve_keeps_the_last_point_of_each_run() {
    let kept: Vec<usize> = (1..=4).map(|k| curve_index(k, 10, 4)).collect();
    assert_eq!(kept, [2, 4, 7, 9]);
    assert_eq!(curve_index(5, 10, 4), usize::MAX);
    assert_eq!((1..=10).map(|k| curve_index(k, 10, 10)).collect::<Vec<_>>(), (0..10).collect::<Vec<_>>());
}

proptest::proptest! {
    /// `seek` finds what a binary search over the whole slice finds, wherever its hint points:
    /// the trades' features and excursions rest on it.
    #[test]
    fn seek_agrees_with_a_binary_search(n in 0usize..300, lo in 0usize..300, hint in 0usize..400, cut in 0i64..320) {
        let series: Vec<(&str, &str)> = vec![("10", "10"); n];
        let bars = bars(&series);
        let lo = lo.min(n);
        let start = chrono::Utc.with_ymd_and_hms(2026, 3, 2, 15, 0, 0).unwrap() + chrono::Duration::minutes(cut);
        let holds = |b: &Bar| b.start < start;
        proptest::prop_assert_eq!(seek(&bars, lo, hint, holds), lo + bars[lo..].partition_point(holds));
    }
}

/// backtesting.py's bundled GOOG daily bars (2,148 bars, 2004-08-19 → 2013-03-01; public
/// prices, kept as a fixture), as `POST /api/data/import` reads them.
const GOOG_CSV: &str = include_str!("goog_daily.csv");

/// Parity with backtesting.py 0.6.6: its `SmaCross` example — SMA(10) / SMA(20) of
/// closes, long only, all in, no commission, 100,000 of cash — on its GOOG bars, with the desk's
/// limits lifted and no market buy buffer, trades as it does: 47 trades, each buy taking
/// floor(cash / next open) shares, and 771,184.06 at the end (the last trade, still open at the
/// end, sold at the last close). `bench/backtesting_py_parity.sh` compares every trade through
/// the API against backtesting.py itself.
#[test]
fn sma_cross_on_goog_matches_backtesting_py() {
    let bars = crate::csv_bars::parse_bars_csv(GOOG_CSV, Timeframe::Day).unwrap();
    assert_eq!(bars.len(), 2148);
    let spec = BacktestSpec {
        strategy_id: "sma_cross".into(),
        symbol: Symbol::parse("GOOG").unwrap(),
        timeframe: Timeframe::Day,
        start: bars[0].start,
        parameters: [("fast".to_string(), 10.0), ("slow".to_string(), 20.0)].into(),
        initial_cash: d("100000"),
        commission_rate: Decimal::ZERO,
        slippage_bps: Decimal::ZERO,
        fill: FillModel::NextOpen,
    };
    let mut s = Settings::default();
    let k = &mut s.risk_controls;
    (k.max_daily_loss, k.max_order_value, k.max_position_size) = (d("1000000000"), d("1000000000"), 10_000_000);
    k.market_buy_buffer_pct = 0.0;
    let out = run(&spec, &s, &bars, &mut BarHistory::new(&bars, Timeframe::Day), &mut |_| {}).unwrap();
    assert!(out.refusals.is_empty(), "{:?}", out.refusals);
    assert_eq!(out.trades.len(), 47);
    // backtesting.py's first two trades and its last (bars counted from 0).
    let at = |bar: usize| bars[bar].start.date_naive();
    let row =
        |t: &Trade| (t.entry_time.date_naive(), t.exit_time.date_naive(), t.quantity, t.entry_price, t.exit_price);
    assert_eq!(row(&out.trades[0]), (at(75), at(85), 558, d("179.13"), d("182")));
    assert_eq!(row(&out.trades[1]), (at(88), at(110), 542, d("187.45"), d("179.27")));
    assert_eq!(row(&out.trades[46]), (at(2087), at(2147), 956, d("702.24"), d("806.19")));
    assert_eq!(out.final_equity, d("771184.06"));
}

/// `run_metrics` reports exactly `run`'s figures — metrics, final equity, bar and order counts,
/// refusals — whatever the fill model, costs, risk refusals and timeframe, with a history shared
/// from run to run as a sweep's part shares it.
#[test]
fn run_metrics_reports_the_figures_of_run() {
    let minute = bars(&SERIES);
    let goog = crate::csv_bars::parse_bars_csv(GOOG_CSV, Timeframe::Day).unwrap();
    let costly = BacktestSpec { commission_rate: d("0.001"), slippage_bps: d("5"), ..spec(FillModel::Close) };
    let mut refusing = settings();
    refusing.risk_controls.max_order_value = d("10");
    let daily = |fast: f64, slow: f64| BacktestSpec {
        symbol: Symbol::parse("GOOG").unwrap(),
        timeframe: Timeframe::Day,
        start: goog[0].start,
        parameters: [("fast".to_string(), fast), ("slow".to_string(), slow)].into(),
        initial_cash: d("100000"),
        ..spec(FillModel::NextOpen)
    };
    let cases = [
        (spec(FillModel::NextOpen), settings(), &minute),
        (costly, settings(), &minute),
        (spec(FillModel::NextOpen), refusing, &minute),
        (daily(10.0, 20.0), settings(), &goog),
        (daily(5.0, 60.0), settings(), &goog),
    ];
    for (spec, settings, bars) in cases {
        let mut history = BarHistory::new(bars, spec.timeframe);
        let full = run(&spec, &settings, bars, &mut history, &mut |_| {}).unwrap();
        let figures = run_metrics(&spec, &settings, bars, &mut history, &mut |_| {}).unwrap();
        assert!(!full.order_log.is_empty() || !full.refusals.is_empty());
        let expected = BacktestMetrics {
            metrics: full.metrics,
            final_equity: full.final_equity,
            bars: full.bars,
            orders: full.orders,
            refusals: full.refusals,
        };
        assert_eq!(format!("{figures:?}"), format!("{expected:?}"));
        assert_eq!(figures, expected);
    }
}

/// `momentum_breakout` in a backtest (CONTRACT §11): its entry's fill rests its stop at the bar
/// broker with a take-profit at the target for half the position and alone for the rest; the
/// take-profit fills at the target on the bar that reaches it — the scale-out, no market sell of
/// the strategy's — the rest's stop moves to breakeven, and fills there when the price comes back.
#[test]
fn momentum_breakout_scales_out_at_its_target_resting_at_the_bar_broker() {
    let minute_bar = |at: chrono::DateTime<chrono::Utc>, (o, h, l, c, v): (&str, &str, &str, &str, u64)| Bar {
        start: at,
        open: px(o),
        high: px(h),
        low: px(l),
        close: px(c),
        volume: v,
    };
    // The previous day closed at 4.50 on little volume (relative volume ≫ 2 today).
    let mut all = vec![minute_bar(
        chrono::Utc.with_ymd_and_hms(2026, 2, 27, 14, 30, 0).unwrap(),
        ("4.5", "4.5", "4.5", "4.5", 10_000),
    )];
    let open = chrono::Utc.with_ymd_and_hms(2026, 3, 2, 14, 30, 0).unwrap(); // 09:30 New York
    let rows = [
        ("5.00", "5.15", "5.00", "5.14", 200_000),
        ("5.14", "5.30", "5.12", "5.28", 250_000),
        ("5.28", "5.45", "5.26", "5.43", 300_000),
        ("5.43", "5.60", "5.41", "5.58", 350_000),
        ("5.55", "5.55", "5.46", "5.48", 150_000),
        ("5.48", "5.50", "5.40", "5.47", 100_000), // the entry: a buy stop 5.51 (limit 5.57), stop 5.39, target 5.75
        ("5.52", "5.70", "5.50", "5.68", 300_000), // filled at the open 5.52
        ("5.68", "5.80", "5.60", "5.78", 300_000), // through the 5.75 target
        ("5.70", "5.71", "5.50", "5.55", 200_000), // back through the 5.52 breakeven stop
        ("5.55", "5.56", "5.54", "5.55", 100_000),
    ];
    all.extend(rows.iter().enumerate().map(|(i, row)| minute_bar(open + chrono::Duration::minutes(i as i64), *row)));
    let spec = BacktestSpec {
        strategy_id: "momentum_breakout".into(),
        parameters: Default::default(),
        start: open - chrono::Duration::hours(1),
        ..spec(FillModel::NextOpen)
    };
    let out = run_on(&spec, &all);
    let filled: Vec<(Side, u64, Decimal, Option<Decimal>)> = out
        .order_log
        .iter()
        .filter(|o| o.filled_quantity > 0)
        .map(|o| (o.side, o.filled_quantity, o.average_fill_price().unwrap(), o.legs.and_then(|l| l.take_profit)))
        .collect();
    let bought = filled[0].1;
    let half = bought / 2;
    assert_eq!(
        filled,
        vec![
            (Side::Buy, bought, d("5.52"), None),
            (Side::Sell, half, d("5.75"), Some(d("5.75"))),
            (Side::Sell, bought - half, d("5.52"), None),
        ],
        "{:#?}",
        out.order_log
    );
    assert!(out.order_log.iter().all(|o| o.side == Side::Buy || o.is_protective()), "no market sell of the strategy's");
    assert_eq!(out.trades.len(), 1);
    let trade = &out.trades[0];
    assert_eq!(trade.detail.outcomes.exit_reason, "STOP_LOSS", "the breakeven stop sold last");
    assert_eq!(trade.net_pnl, Decimal::from(half) * d("0.23"));
}
