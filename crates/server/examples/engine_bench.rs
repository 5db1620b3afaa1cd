//! Benchmark of the trading engine: market events per second through
//! `Engine::handle` with 50 watched symbols running `momentum_breakout`, no I/O.
//! `cargo run --release --example engine_bench -- [symbols] [runs]`
// A benchmark measures wall time; only logic must read time through the injected clock.
#![allow(clippy::disallowed_methods)]

use chrono::NaiveDate;
use rust_decimal::Decimal;
use std::time::Instant;
use tradeops_core::engine::{Command, Engine, Event};
use tradeops_core::settings::Settings;
use tradeops_core::strategy;
use tradeops_sim::{day_kind, DayGenerator, DayKind, Universe};

fn main() {
    let args: Vec<usize> = std::env::args().skip(1).filter_map(|a| a.parse().ok()).collect();
    let watched = args.first().copied().unwrap_or(50);
    let runs = args.get(1).copied().unwrap_or(5);
    let date = NaiveDate::from_ymd_opt(2026, 11, 20).expect("valid");
    let universe = Universe::generate(20261121, 2000);
    // Runners first, so the strategy has setups to act on.
    let mut chosen: Vec<_> =
        universe.symbols.iter().filter(|p| day_kind(&universe, p, date) == DayKind::Runner).collect();
    chosen.extend(universe.symbols.iter().filter(|p| day_kind(&universe, p, date) != DayKind::Runner));
    chosen.truncate(watched);
    let days: Vec<_> = chosen
        .iter()
        .map(|p| {
            let generator = DayGenerator::for_symbol(&universe, p, date);
            let prev = Decimal::try_from(generator.plan().prev_close).unwrap_or_default().round_dp(4);
            (p.symbol.clone(), prev, DayGenerator::for_symbol(&universe, p, date).remaining_bars())
        })
        .collect();
    let minutes = days[0].2.len();
    let mut rates = Vec::new();
    let mut decisions = 0;
    for _ in 0..runs {
        let mut settings = Settings::default();
        settings.risk_controls.open_position_limit = 50;
        settings.risk_controls.max_trades_per_day = 10_000;
        let mut engine = Engine::new(settings, Decimal::new(1_000_000, 0), strategy::make);
        for (symbol, _, _) in &days {
            engine.handle(
                Event::Command(Command::Watch { symbol: symbol.clone(), source: "API".into() }),
                days[0].2[0].start,
            );
        }
        let mut events = 0u64;
        decisions = 0;
        let started = Instant::now();
        for m in 0..minutes {
            for (symbol, prev, bars) in &days {
                let bar = bars[m];
                let now = bar.start + chrono::Duration::minutes(1);
                let fx = engine.handle(
                    Event::Bar { symbol: symbol.clone(), bar, prev_close: *prev, relative_volume: Some(6.0) },
                    now,
                );
                decisions += fx.iter().filter(|f| matches!(f, tradeops_core::engine::Effect::Decision { .. })).count();
                events += 1;
            }
        }
        rates.push(events as f64 / started.elapsed().as_secs_f64());
    }
    rates.sort_by(|a, b| a.total_cmp(b));
    println!(
        "engine: median {:.2} million market events/s ({watched} watched symbols x {minutes} minute bars, {decisions} strategy decisions per run, {runs} runs)",
        rates[runs / 2] / 1e6
    );
}
