//! Benchmark of the live market's catch-up after a jump of the market clock (a DEMO service
//! whose machine slept): how long one `LiveMarket::advance_to` over the jump takes, alone and
//! with a reader, and the longest a reader of the market (`LiveMarket::quote`, as a request
//! handler reads it) waits meanwhile; beside it, the longest read of the same reader with
//! nothing holding the market (the machine's own scheduling), and the slowest single step.
//! Each run starts a fresh market at Thursday 17:00 New York and jumps `hours` from there (14
//! by default: to Friday 07:00, across the day roll). Figures: docs/PERFORMANCE.md.
//! `cargo run --release -p tradeops-brokers --example catch_up_bench -- [symbols] [runs] [hours]`
// A benchmark measures wall time; only logic must read time through the injected clock.
#![allow(clippy::disallowed_methods)]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tradeops_brokers::simulated::live::LiveMarket;
use tradeops_brokers::simulated::SimulatedMarket;
use tradeops_core::calendar::MarketCalendar;
use tradeops_core::settings::{MarketCalendarKind, MomentumRadarSettings};
use tradeops_core::time::parse_ts;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// One jump with a reader reading a quote in a loop (`read`), or without: the catch-up's time,
/// the reader's longest read, and its reads.
fn run(sim: &SimulatedMarket, hours: i64, read: bool) -> (Duration, Duration, u64, usize) {
    let start = parse_ts("2026-11-19T22:00:00Z").expect("valid");
    let clock = Arc::new(tradeops_core::ManualClock::new(start));
    let live = Arc::new(LiveMarket::new(sim.universe.clone(), 1.0, clock));
    let calendar = MarketCalendar::new(MarketCalendarKind::Nyse);
    let filters = MomentumRadarSettings::default();
    live.advance_to(start, calendar, &filters);
    let symbol = sim.universe.symbols[0].symbol.clone();
    let done = Arc::new(AtomicBool::new(!read));
    let reader = {
        let (live, done) = (live.clone(), done.clone());
        std::thread::spawn(move || {
            let (mut longest, mut reads) = (Duration::ZERO, 0u64);
            while !done.load(Ordering::Relaxed) {
                let t = Instant::now();
                std::hint::black_box(live.quote(&symbol));
                longest = longest.max(t.elapsed());
                reads += 1;
            }
            (longest, reads)
        })
    };
    // The reader is reading before the jump begins.
    std::thread::sleep(Duration::from_millis(5));
    let began = Instant::now();
    let scans = live.advance_to(start + chrono::Duration::hours(hours), calendar, &filters);
    let took = began.elapsed();
    done.store(true, Ordering::Relaxed);
    let (longest, reads) = reader.join().expect("reader");
    (took, longest, reads, scans.len())
}

/// The reader alone for `span`: its longest read where nothing holds the market (the machine's
/// own scheduling: what a wait above cannot be told from).
fn reader_alone(sim: &SimulatedMarket, span: Duration) -> Duration {
    let start = parse_ts("2026-11-19T22:00:00Z").expect("valid");
    let live = LiveMarket::new(sim.universe.clone(), 1.0, Arc::new(tradeops_core::ManualClock::new(start)));
    live.advance_to(start, MarketCalendar::new(MarketCalendarKind::Nyse), &MomentumRadarSettings::default());
    let symbol = sim.universe.symbols[0].symbol.clone();
    let (began, mut longest) = (Instant::now(), Duration::ZERO);
    while began.elapsed() < span {
        let t = Instant::now();
        std::hint::black_box(live.quote(&symbol));
        longest = longest.max(t.elapsed());
    }
    longest
}

/// The same jump one step a call: the slowest step, its market time and its time.
fn slowest_step(sim: &SimulatedMarket, hours: i64) -> (String, Duration) {
    let start = parse_ts("2026-11-19T22:00:00Z").expect("valid");
    let clock = Arc::new(tradeops_core::ManualClock::new(start));
    let live = LiveMarket::new(sim.universe.clone(), 1.0, clock);
    let calendar = MarketCalendar::new(MarketCalendarKind::Nyse);
    let filters = MomentumRadarSettings::default();
    live.advance_to(start, calendar, &filters);
    let mut slowest = (String::new(), Duration::ZERO);
    while let Some(step) = live.next_step().filter(|s| *s <= start + chrono::Duration::hours(hours)) {
        let t = Instant::now();
        live.advance_to(step, calendar, &filters);
        if t.elapsed() > slowest.1 {
            slowest = (step.to_rfc3339(), t.elapsed());
        }
    }
    slowest
}

fn main() {
    let args: Vec<i64> = std::env::args().skip(1).filter_map(|a| a.parse().ok()).collect();
    let symbols = args.first().copied().unwrap_or(500) as usize;
    let runs = args.get(1).copied().unwrap_or(5).max(1) as usize;
    let hours = args.get(2).copied().unwrap_or(14);
    let sim = SimulatedMarket::new(20261121, symbols);
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let (mut alone, mut took, mut longest, mut floor) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for i in 0..runs {
        let (a, ..) = run(&sim, hours, false);
        let (t, w, reads, scans) = run(&sim, hours, true);
        let f = reader_alone(&sim, t);
        println!(
            "run {}: catch-up of {hours} h {:.0} ms alone, {:.0} ms with the reader ({scans} scans); the reader's longest \
             read {:.3} ms over {reads} reads ({:.3} ms alone for as long)",
            i + 1,
            ms(a),
            ms(t),
            ms(w),
            ms(f)
        );
        alone.push(ms(a));
        took.push(ms(t));
        longest.push(ms(w));
        floor.push(ms(f));
    }
    let (at, step) = slowest_step(&sim, hours);
    println!("slowest single step of the jump, one step a call: {at}, {:.3} ms", ms(step));
    println!(
        "{symbols} symbols, {hours} h jump, medians of {runs}: catch-up {:.0} ms alone, {:.0} ms with the reader; \
         the reader's longest read {:.3} ms (runs {:.3}–{:.3}), {:.3} ms with no catch-up",
        median(alone),
        median(took),
        median(longest.clone()),
        longest.iter().copied().fold(f64::INFINITY, f64::min),
        longest.iter().copied().fold(0.0, f64::max),
        median(floor)
    );
}
