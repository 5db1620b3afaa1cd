//! Benchmark of the pre-trade risk gate: time per check of an approved buy that passes
//! every rule (the slowest path), with 20 recent orders in the duplicate window.
//! `cargo run --release -p tradeops-core --example risk_bench`
// A benchmark measures wall time; only logic must read time through the injected clock.
#![allow(clippy::disallowed_methods)]

use rust_decimal::Decimal;
use std::hint::black_box;
use std::time::Instant;
use tradeops_core::market::Side;
use tradeops_core::orders::{ClientOrderId, OrderType};
use tradeops_core::risk::{check, OrderIntent, RecentOrder, RiskSnapshot, TradingState, Verdict};
use tradeops_core::settings::RiskControls;
use tradeops_core::time::parse_ts;
use tradeops_core::Symbol;

fn main() {
    let limits = RiskControls::default();
    let now = parse_ts("2026-11-20T15:00:00Z").expect("valid");
    let symbol = Symbol::parse("ABCD").expect("valid");
    let id = ClientOrderId::parse("bench-1").expect("valid");
    let recent: Vec<RecentOrder> = (0..20)
        .map(|i| RecentOrder {
            client_order_id: ClientOrderId::parse(&format!("r-{i}")).expect("valid"),
            symbol: Symbol::parse(&format!("S{i}")).expect("valid"),
            side: Side::Buy,
            quantity: 100,
            submitted_at: now - chrono::Duration::seconds(i),
        })
        .collect();
    let order = OrderIntent {
        client_order_id: &id,
        symbol: &symbol,
        side: Side::Buy,
        order_type: OrderType::Limit,
        quantity: 100,
        limit_price: Some(Decimal::new(502, 2)),
        stop_price: None,
    };
    let snapshot = RiskSnapshot {
        trading_state: TradingState::Active,
        limits: &limits,
        blocked: false,
        last_price: Some(Decimal::new(500, 2)),
        market_fill: None,
        position: 100,
        open_buy_quantity: 0,
        open_sell_quantity: 0,
        open_positions: 2,
        trades_today: 5,
        daily_pnl: Decimal::new(-12_345, 2),
        buying_power: Decimal::new(5_000_000, 2),
        client_order_id_used: false,
        recent_orders: &recent,
    };
    assert_eq!(check(&order, &snapshot, now), Verdict::Approved);
    let mut per_check = Vec::new();
    for _ in 0..7 {
        let n = 1_000_000;
        let started = Instant::now();
        for _ in 0..n {
            black_box(check(black_box(&order), black_box(&snapshot), now));
        }
        per_check.push(started.elapsed().as_nanos() as f64 / n as f64);
    }
    per_check.sort_by(|a, b| a.total_cmp(b));
    println!(
        "risk gate: median {:.0} ns per check (approved limit buy, all rules evaluated, 7 runs of 1M)",
        per_check[3]
    );
}
