//! Benchmark of history generation: minute bars generated per second, one core.
//! `cargo run --release -p tradeops-sim --example sim_bench [symbols] [days] [runs]`
//! Prints the median of the runs.
// A benchmark measures wall time; only logic must read time through the injected clock.
#![allow(clippy::disallowed_methods)]

use chrono::{Duration, NaiveDate};
use std::time::Instant;
use tradeops_sim::{DayGenerator, Universe};

fn main() {
    let args: Vec<usize> = std::env::args().skip(1).filter_map(|a| a.parse().ok()).collect();
    let symbols = args.first().copied().unwrap_or(500);
    let days = args.get(1).copied().unwrap_or(20);
    let runs = args.get(2).copied().unwrap_or(5);
    let universe = Universe::generate(20261121, symbols);
    let start = NaiveDate::from_ymd_opt(2026, 10, 1).expect("valid date");
    let mut rates = Vec::new();
    for _ in 0..runs {
        let began = Instant::now();
        let mut bars = 0u64;
        let mut checksum = 0i64;
        for d in 0..days {
            let date = start + Duration::days(d as i64);
            for p in &universe.symbols {
                let mut generator = DayGenerator::for_symbol(&universe, p, date);
                while let Some(bar) = generator.next_bar() {
                    bars += 1;
                    checksum = checksum.wrapping_add(bar.close.0);
                }
            }
        }
        let secs = began.elapsed().as_secs_f64();
        rates.push(bars as f64 / secs);
        eprintln!("{bars} bars in {secs:.3} s (checksum {checksum})");
    }
    rates.sort_by(|a, b| a.total_cmp(b));
    println!(
        "history generation: median {:.2} million minute bars/s ({symbols} symbols x {days} days, {runs} runs)",
        rates[runs / 2] / 1e6
    );
}
