//! Backtest benchmarks, end to end through `tradeops_core::backtest::run` with the
//! bars already in memory:
//!
//! - `sma`: `sma_cross` (10/20) over N one-minute bars of one simulated symbol (default
//!   1,000,000), as bars per second;
//! - `momentum`: `momentum_breakout` over one year of minute bars (252 trading days × 24 h) for
//!   50 simulated symbols — one run per symbol, as the API runs them — as total seconds, on
//!   `threads` threads (default 1; the service runs 2 backtests at once).
//!
//! `cargo run --release -p tradeops-sim --example backtest_bench -- sma [bars] [runs] [csv]`
//! `cargo run --release -p tradeops-sim --example backtest_bench -- momentum [symbols] [runs] [threads] [dir]`
//! `cargo run --release -p tradeops-sim --example backtest_bench -- goog [repeats]` (the GOOG
//! sweep grid in process, one thread)
//! `cargo run --release -p tradeops-sim --example backtest_bench -- scaling [bars] [runs] [max threads]`
//! (a sweep of 8 `sma_cross` combinations over `bars` minute bars on 1..=max threads)
//!
//! With a `csv` path, `sma` also writes its bars there (for `bench/backtesting_py.py`). With a
//! `dir`, `momentum` also writes each symbol's bars to `dir/<SYMBOL>.csv`, with the previous
//! close and relative volume the run feeds the engine on each bar (for
//! `bench/backtesting_py_momentum.py`).
// A benchmark measures wall time; only logic must read time through the injected clock.
#![allow(clippy::disallowed_methods)]

use chrono::NaiveDate;
use rust_decimal::Decimal;
use std::io::Write;
use std::sync::Arc;
use std::time::Instant;
use tradeops_core::backtest::{self, fills::FillModel, BacktestSpec, History};
use tradeops_core::calendar::{MarketCalendar, NyDay};
use tradeops_core::market::{Bar, Timeframe};
use tradeops_core::settings::{MarketCalendarKind, Settings};
use tradeops_sim::history::SimHistory;
use tradeops_sim::{DayGenerator, SymbolProfile, Universe};

/// The service's allocator (`crates/server/src/main.rs`): backtests run inside the service, so
/// the benchmark measures them as it runs them.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn bars_of(universe: &Universe, p: &SymbolProfile, from: NaiveDate, days: usize, weekdays_only: bool) -> Vec<Bar> {
    let mut bars = Vec::with_capacity(days * 1440);
    let mut date = from;
    let mut taken = 0;
    while taken < days {
        use chrono::Datelike;
        if !weekdays_only || date.weekday().num_days_from_monday() < 5 {
            bars.extend(DayGenerator::for_symbol(universe, p, date).remaining_bars());
            taken += 1;
        }
        date = date.succ_opt().expect("valid");
    }
    bars
}

fn settings() -> Settings {
    let mut s = Settings::default();
    s.risk_controls.max_daily_loss = Decimal::new(1_000_000_000, 0);
    s.risk_controls.max_position_size = 100_000_000;
    s.risk_controls.max_order_value = Decimal::new(1_000_000_000, 0);
    s.risk_controls.max_trades_per_day = 1_000_000;
    s
}

/// Writes `bars` to `path` with, per bar, the previous close and relative volume
/// `backtest::run` gives the engine with it (empty when unknown; the run uses a previous close
/// of 0 then): the previous close of the bar's New York date, and the relative volume by the
/// end of its minute with the date's volume so far.
fn write_momentum_csv(path: &std::path::Path, bars: &[Bar], history: &mut dyn History) -> std::io::Result<()> {
    let mut out = std::io::BufWriter::new(std::fs::File::create(path)?);
    writeln!(out, "timestamp,open,high,low,close,volume,prev_close,relative_volume")?;
    let mut day = NyDay::default();
    let (mut date, mut prev_close, mut volume) = (None, None, 0u64);
    for b in bars {
        let (today, minute) = day.locate(b.start);
        if date != Some(today) {
            date = Some(today);
            prev_close = history.prev_close(today);
            volume = 0;
        }
        volume += b.volume;
        let ts = tradeops_core::time::format_ts(&b.start);
        let prev = prev_close.map(|p| p.to_string()).unwrap_or_default();
        let rvol = history.relative_volume(today, minute + 1, volume).map(|r| r.to_string()).unwrap_or_default();
        writeln!(out, "{ts},{},{},{},{},{},{prev},{rvol}", b.open, b.high, b.low, b.close, b.volume)?;
    }
    out.flush()
}

/// A `sma_cross` run of `symbol`'s `bars` from their first, 100,000 dollars, no costs, filled
/// at the next open: the spec every `sma_cross` measure here runs.
fn sma_spec(symbol: &tradeops_core::Symbol, timeframe: Timeframe, bars: &[Bar], fast: f64, slow: f64) -> BacktestSpec {
    BacktestSpec {
        strategy_id: "sma_cross".into(),
        symbol: symbol.clone(),
        timeframe,
        start: bars[0].start,
        parameters: [("fast".to_string(), fast), ("slow".to_string(), slow)].into(),
        initial_cash: Decimal::new(100_000, 0),
        commission_rate: Decimal::ZERO,
        slippage_bps: Decimal::ZERO,
        fill: FillModel::NextOpen,
    }
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let kind = args.first().map(String::as_str).unwrap_or("sma");
    let n: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(if kind == "sma" { 1_000_000 } else { 50 });
    let runs: usize = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(5);
    let universe = Arc::new(Universe::generate(20261121, 500));
    let start = NaiveDate::from_ymd_opt(2024, 1, 1).expect("valid");
    let calendar = MarketCalendar::new(MarketCalendarKind::AlwaysOpen);
    match kind {
        "sma" => {
            let p = &universe.symbols[0];
            let mut bars = bars_of(&universe, p, start, n.div_ceil(1440), false);
            bars.truncate(n);
            if let Some(path) = args.get(3) {
                let mut out = std::io::BufWriter::new(std::fs::File::create(path).expect("csv"));
                writeln!(out, "timestamp,open,high,low,close,volume").expect("write");
                for b in &bars {
                    let ts = tradeops_core::time::format_ts(&b.start);
                    writeln!(out, "{ts},{},{},{},{},{}", b.open, b.high, b.low, b.close, b.volume).expect("write");
                }
            }
            // `SMA_WINDOWS=2000,4000` (windows that never cross over these bars) times the bar
            // path alone: the same run without a single order.
            let (fast, slow) = std::env::var("SMA_WINDOWS")
                .ok()
                .and_then(|w| {
                    let (f, s) = w.split_once(',')?;
                    Some((f.trim().parse::<f64>().ok()?, s.trim().parse::<f64>().ok()?))
                })
                .unwrap_or((10.0, 20.0));
            let spec = sma_spec(&p.symbol, Timeframe::Minute, &bars, fast, slow);
            let settings = settings();
            let mut rates = Vec::new();
            let mut last = None;
            for _ in 0..runs {
                let mut history = SimHistory::new(universe.clone(), p.clone(), calendar);
                let started = Instant::now();
                let out = backtest::run(&spec, &settings, &bars, &mut history, &mut |_| {}).expect("runs");
                let seconds = started.elapsed().as_secs_f64();
                rates.push(bars.len() as f64 / seconds);
                last = Some((out, seconds));
            }
            let (out, seconds) = last.expect("at least one run");
            println!(
                "sma_cross {fast}/{slow}: {} bars, {} trades, {} refusals, total_return {:.6}, last run {:.3} s; median {:.2} M bars/s over {runs} runs (best {:.2})",
                bars.len(),
                out.trades.len(),
                out.refusals.values().sum::<u64>(),
                out.metrics.total_return,
                seconds,
                median(rates.clone()) / 1e6,
                rates.iter().copied().fold(0.0, f64::max) / 1e6
            );
        }
        "goog" => {
            // The sweep of bench/sweep_vs_optimize.sh without the service: fast 5..50 step 5 ×
            // slow 10..100 step 10 (fast below slow) on backtesting.py's GOOG daily bars, on
            // THREADS threads (`goog RUNS THREADS`, default 1) as a sweep's part runs them: a
            // history a thread that its runs share, each combination taken by the next thread to
            // come free, each combination's figures alone as a sweep keeps them (`run_metrics`);
            // `n` repeats, median ms.
            let csv = include_str!("../../core/src/backtest/goog_daily.csv");
            let bars = tradeops_core::csv_bars::parse_bars_csv(csv, Timeframe::Day).expect("GOOG bars");
            let mut s = settings();
            s.risk_controls.market_buy_buffer_pct = 0.0;
            let symbol = tradeops_core::Symbol::parse("GOOG").expect("symbol");
            let threads: usize = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(1).max(1);
            let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().expect("pool");
            let combos: Vec<(u32, u32)> = (5..=50)
                .step_by(5)
                .flat_map(|fast| (10..=100).step_by(10).filter(move |slow| fast < *slow).map(move |slow| (fast, slow)))
                .collect();
            let mut times = Vec::new();
            let mut best = (0, 0, Decimal::ZERO);
            for _ in 0..n.max(1) {
                let started = Instant::now();
                // As a sweep's part: the bars' history built once, a clone of it a thread.
                let history = backtest::BarHistory::new(&bars, Timeframe::Day);
                let histories: Vec<std::sync::Mutex<_>> =
                    (0..threads).map(|_| std::sync::Mutex::new(history.clone())).collect();
                let equities: Vec<Decimal> = pool.install(|| {
                    use rayon::prelude::*;
                    combos
                        .par_iter()
                        .map(|(fast, slow)| {
                            let slot = rayon::current_thread_index().unwrap_or(0) % histories.len();
                            let mut history = histories[slot].lock().expect("a thread's own history");
                            let spec = sma_spec(&symbol, Timeframe::Day, &bars, *fast as f64, *slow as f64);
                            backtest::run_metrics(&spec, &s, &bars, &mut *history, &mut |_| {})
                                .expect("runs")
                                .final_equity
                        })
                        .collect()
                });
                times.push(started.elapsed().as_secs_f64() * 1e3);
                for (&(fast, slow), equity) in combos.iter().zip(equities) {
                    if equity > best.2 {
                        best = (fast, slow, equity);
                    }
                }
            }
            let ms = median(times.clone());
            println!(
                "GOOG sweep, 75 combinations of {} daily bars, {threads} thread(s): median {ms:.1} ms of {times:.1?}; best fast {} slow {}: {}; {:.0} combinations a second a thread",
                bars.len(),
                best.0,
                best.1,
                best.2.round_dp(2),
                combos.len() as f64 / (ms / 1e3) / threads as f64
            );
        }
        "scaling" => {
            // A sweep over one million minute bars, its combinations
            // run on 1, 2, … threads as a sweep's part runs them (each thread with its own
            // history over the bars, built in the timed stretch, taking the next combination as
            // it comes free; each combination's figures alone as a sweep keeps them:
            // `run_metrics`), as combinations (and bars) per second.
            let p = &universe.symbols[0];
            let mut bars = bars_of(&universe, p, start, n.div_ceil(1440), false);
            bars.truncate(n);
            let combos: Vec<(f64, f64)> = [
                (5.0, 20.0),
                (10.0, 20.0),
                (10.0, 40.0),
                (20.0, 60.0),
                (5.0, 60.0),
                (15.0, 30.0),
                (30.0, 90.0),
                (20.0, 100.0),
            ]
            .into_iter()
            .collect();
            let settings = settings();
            let max_threads: usize = args.get(3).and_then(|a| a.parse().ok()).unwrap_or(2);
            let mut single = None;
            for threads in 1..=max_threads {
                let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().expect("pool");
                let mut times = Vec::new();
                for _ in 0..runs {
                    let started = Instant::now();
                    // As a sweep's part runs them: the bars' history built once, a clone of it
                    // a thread, and each combination taken by the next thread to come free.
                    let history = backtest::BarHistory::new(&bars, Timeframe::Minute);
                    let histories: Vec<std::sync::Mutex<_>> =
                        (0..threads).map(|_| std::sync::Mutex::new(history.clone())).collect();
                    let trades: usize = pool.install(|| {
                        use rayon::prelude::*;
                        combos
                            .par_iter()
                            .map(|(fast, slow)| {
                                let slot = rayon::current_thread_index().unwrap_or(0) % histories.len();
                                let mut history = histories[slot].lock().expect("a thread's own history");
                                let spec = sma_spec(&p.symbol, Timeframe::Minute, &bars, *fast, *slow);
                                backtest::run_metrics(&spec, &settings, &bars, &mut *history, &mut |_| {})
                                    .expect("runs")
                                    .metrics
                                    .trade_count as usize
                            })
                            .sum()
                    });
                    times.push(started.elapsed().as_secs_f64());
                    std::hint::black_box(trades);
                }
                let seconds = median(times.clone());
                let rate = combos.len() as f64 / seconds;
                let speedup = single.map_or(1.0, |one: f64| rate / one);
                single.get_or_insert(rate);
                println!(
                    "{threads} thread(s): {} combinations × {} minute bars in {seconds:.2} s (median of {runs}): {rate:.2} combinations/s, {:.1} M bars/s, {speedup:.2}× one thread",
                    combos.len(),
                    bars.len(),
                    rate * bars.len() as f64 / 1e6
                );
            }
        }
        "momentum" => {
            // Runner-prone names first: the strategy trades runners.
            let chosen: Vec<&SymbolProfile> = universe.symbols.iter().take(n).collect();
            let loaded: Vec<(SymbolProfile, Vec<Bar>)> =
                chosen.iter().map(|p| ((*p).clone(), bars_of(&universe, p, start, 252, true))).collect();
            let total_bars: usize = loaded.iter().map(|(_, b)| b.len()).sum();
            let settings = settings();
            let threads: usize = args.get(3).and_then(|a| a.parse().ok()).unwrap_or(1).max(1);
            if let Some(dir) = args.get(4).map(std::path::Path::new) {
                std::fs::create_dir_all(dir).expect("csv directory");
                for (p, bars) in &loaded {
                    let mut history = SimHistory::new(universe.clone(), p.clone(), calendar);
                    let path = dir.join(format!("{}.csv", p.symbol));
                    write_momentum_csv(&path, bars, &mut history).expect("write csv");
                }
            }
            let mut times = Vec::new();
            let mut trades = 0;
            let run_one = |(p, bars): &(SymbolProfile, Vec<Bar>)| {
                let spec = BacktestSpec {
                    strategy_id: "momentum_breakout".into(),
                    symbol: p.symbol.clone(),
                    timeframe: Timeframe::Minute,
                    start: bars[0].start,
                    parameters: Default::default(),
                    initial_cash: Decimal::new(100_000, 0),
                    commission_rate: Decimal::ZERO,
                    slippage_bps: Decimal::ZERO,
                    fill: FillModel::NextOpen,
                };
                let mut history = SimHistory::new(universe.clone(), p.clone(), calendar);
                backtest::run(&spec, &settings, bars, &mut history, &mut |_| {}).expect("runs").trades.len()
            };
            for _ in 0..runs {
                // Each thread takes the next symbol not yet taken, as the service's job pool does.
                let next = std::sync::atomic::AtomicUsize::new(0);
                let started = Instant::now();
                trades = std::thread::scope(|scope| {
                    let workers: Vec<_> = (0..threads)
                        .map(|_| {
                            scope.spawn(|| {
                                let mut trades = 0;
                                loop {
                                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                                    let Some(job) = loaded.get(i) else { return trades };
                                    trades += run_one(job);
                                }
                            })
                        })
                        .collect();
                    workers.into_iter().map(|w| w.join().expect("worker")).sum::<usize>()
                });
                times.push(started.elapsed().as_secs_f64());
            }
            println!(
                "momentum_breakout: {n} symbols × 252 days = {total_bars} bars, {trades} trades, {threads} thread(s); median {:.3} s over {runs} runs ({:.2} M bars/s)",
                median(times.clone()),
                total_bars as f64 / median(times) / 1e6
            );
        }
        other => eprintln!("unknown benchmark {other}: sma or momentum"),
    }
}
