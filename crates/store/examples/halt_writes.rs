//! The emergency halt's writes on SQLite, as the runner makes them for 100 positions and 500
//! working orders: the halt's 100 exits written ahead (one transaction), then the batch (the 500
//! cancels as `PENDING_CANCEL`, the 100 exits, the engine state) in one transaction.
//! `cargo run --release -p tradeops-store --example halt_writes -- [runs]`
// A benchmark measures wall time; only logic must read time through the injected clock.
#![allow(clippy::disallowed_methods)]

use rust_decimal::Decimal;
use std::time::Instant;
use tradeops_core::market::Side;
use tradeops_core::orders::{ClientOrderId, Order, OrderEvent, OrderType, TimeInForce};
use tradeops_core::time::parse_ts;
use tradeops_core::Symbol;
use tradeops_store::{Database, EngineStateRecord, TradingRepository};

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let runs: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(11);
    let now = parse_ts("2026-11-20T15:00:00Z").expect("valid");
    let (mut ahead, mut batch) = (Vec::new(), Vec::new());
    for run in 0..runs {
        let dir = tempfile_dir();
        let db = Database::open(&format!("sqlite://{dir}/bench.db")).await.expect("opens");
        let working: Vec<Order> = (0..500)
            .map(|i| {
                let id = ClientOrderId::parse(&format!("o-{run}-{i}")).expect("valid");
                let symbol = Symbol::parse(&format!("O{i:03}")).expect("valid");
                let mut o = Order::new(
                    id,
                    symbol,
                    Side::Buy,
                    OrderType::Limit,
                    TimeInForce::Day,
                    10,
                    Some(Decimal::new(400, 2)),
                    None,
                    now,
                );
                o.apply(OrderEvent::Accepted { broker_order_id: format!("b-{i}").into() }, now).expect("ack");
                o
            })
            .collect();
        db.save_orders(&working, "PAPER", "2026-11-20").await.expect("saved");
        let exits: Vec<Order> = (0..100)
            .map(|i| {
                let id = ClientOrderId::parse(&format!("x-{run}-{i}")).expect("valid");
                let symbol = Symbol::parse(&format!("P{i:03}")).expect("valid");
                Order::new(id, symbol, Side::Sell, OrderType::Market, TimeInForce::Day, 100, None, None, now)
            })
            .collect();
        let cancels: Vec<Order> = working
            .into_iter()
            .map(|mut o| {
                o.apply(OrderEvent::CancelRequested, now).expect("cancel");
                o
            })
            .collect();
        let mut all = cancels;
        all.extend(exits.iter().cloned());
        let state = EngineStateRecord {
            state: "HALTED".into(),
            halted_at: Some(1),
            halt_reason: Some("benchmark".into()),
            halt_actor: Some("admin".into()),
            halt_stopped: Vec::new(),
            trading_date: Some("2026-11-20".into()),
            trades_today: 100,
            realized_today: Decimal::ZERO,
            start_equity: Decimal::from(100_000),
            peak_equity: Decimal::from(100_000),
            cash: Decimal::from(50_000),
            updated_at: 1,
            order_sequence: 600,
        };
        let started = Instant::now();
        db.save_orders(&exits, "PAPER", "2026-11-20").await.expect("written ahead");
        let written = started.elapsed();
        db.save_batch(&all, &[], &state, "PAPER", "2026-11-20").await.expect("saved");
        let saved = started.elapsed() - written;
        ahead.push(written.as_secs_f64() * 1000.0);
        batch.push(saved.as_secs_f64() * 1000.0);
        db.close().await;
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(|a, b| a.partial_cmp(b).expect("finite"));
        v[v.len() / 2]
    };
    println!(
        "halt writes on SQLite, median of {runs}: write-ahead of 100 exits {:.2} ms, batch of 600 orders {:.2} ms",
        median(&mut ahead),
        median(&mut batch)
    );
}

fn tempfile_dir() -> String {
    let dir = std::env::temp_dir().join(format!("halt-writes-{}-{}", std::process::id(), rand_suffix()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir.display().to_string()
}

fn rand_suffix() -> u128 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("after 1970").as_nanos()
}
