//! Benchmark of the live market: radar scan time over the whole universe, the feed's
//! work per minute, and resident memory with the universe live.
//! `cargo run --release --example radar_bench -- [symbols] [minutes]`
// A benchmark measures wall time; only logic must read time through the injected clock.
#![allow(clippy::disallowed_methods)]

use chrono::Duration;
use std::sync::Arc;
use std::time::Instant;
use tradeops_brokers::simulated::live::LiveMarket;
use tradeops_brokers::simulated::SimulatedMarket;
use tradeops_core::calendar::MarketCalendar;
use tradeops_core::settings::{MarketCalendarKind, MomentumRadarSettings};
use tradeops_core::time::parse_ts;

fn rss_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("VmRSS:")).map(|l| l.to_string()))
        .and_then(|l| l.split_whitespace().nth(1).and_then(|kb| kb.parse::<f64>().ok()))
        .map(|kb| kb / 1024.0)
        .unwrap_or(f64::NAN)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn main() {
    let args: Vec<usize> = std::env::args().skip(1).filter_map(|a| a.parse().ok()).collect();
    let symbols = args.first().copied().unwrap_or(10_000);
    let minutes = args.get(1).copied().unwrap_or(30);
    let before = rss_mib();
    let sim = SimulatedMarket::new(20261121, symbols);
    let live = LiveMarket::new(sim.universe.clone(), 1.0, std::sync::Arc::new(tradeops_server::clock::SystemClock));
    let calendar = MarketCalendar::new(MarketCalendarKind::Nyse);
    let filters = MomentumRadarSettings::default();
    let start = parse_ts("2026-11-20T15:00:00Z").expect("valid");
    let began = Instant::now();
    live.advance_to(start, calendar, &filters);
    let warm = began.elapsed();
    let (mut scans, mut minute_work) = (Vec::new(), Vec::new());
    for m in 1..=minutes as i64 {
        let t = Instant::now();
        let out = live.advance_to(start + Duration::minutes(m) + Duration::seconds(45), calendar, &filters);
        minute_work.push(t.elapsed().as_secs_f64() * 1e3);
        scans.extend(out.iter().map(|s| s.scan_micros as f64 / 1e3));
    }
    let live = Arc::new(live);
    println!("symbols: {symbols}");
    println!("warm-up to 10:00 New York (fast-forward of 600 minutes): {:.0} ms", warm.as_secs_f64() * 1e3);
    println!("radar scan: median {:.3} ms over {} scans", median(scans.clone()), scans.len());
    println!("feed work per market minute (4 steps, bars, scan): median {:.3} ms", median(minute_work));
    println!("resident memory: {:.1} MiB (process before the market: {:.1} MiB)", rss_mib(), before);
    drop(live);
}
