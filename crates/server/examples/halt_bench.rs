//! Benchmark of the Emergency Liquidate & Halt: with 100 open positions and 500 open
//! orders on the paper broker, the time from the halt command until every cancel and every exit
//! has been handed to the broker. Engine and broker only (persistence excluded).
//! `cargo run --release --example halt_bench -- [runs]`
// A benchmark measures wall time; only logic must read time through the injected clock.
#![allow(clippy::disallowed_methods)]

use rust_decimal::Decimal;
use std::time::Instant;
use tradeops_brokers::paper::{PaperBroker, PaperConfig};
use tradeops_core::engine::{Command, Effect, Engine, Event, Restored};
use tradeops_core::market::Side;
use tradeops_core::orders::{ClientOrderId, Order, OrderEvent, OrderType, TimeInForce};
use tradeops_core::positions::{Position, PositionFill};
use tradeops_core::settings::Settings;
use tradeops_core::time::parse_ts;
use tradeops_core::{strategy, Symbol};

fn main() {
    let runs: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(21);
    let now = parse_ts("2026-11-20T15:00:00Z").expect("valid");
    let mut timings = Vec::new();
    let (mut cancels, mut exits) = (0, 0);
    for _ in 0..runs {
        let mut broker = PaperBroker::new(PaperConfig::default());
        let (mut positions, mut open_orders) = (Vec::new(), Vec::new());
        for i in 0..100 {
            let symbol = Symbol::parse(&format!("P{i:03}")).expect("valid");
            let mut p = Position::new(symbol.clone());
            p.apply(&PositionFill {
                side: Side::Buy,
                quantity: 100,
                price: Decimal::new(500, 2),
                fee: Decimal::ZERO,
                at: now,
            })
            .expect("a buy applies");
            positions.push(p);
        }
        for i in 0..500 {
            let id = ClientOrderId::parse(&format!("o-{i}")).expect("valid");
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
            broker.submit(&o, now);
            o.apply(OrderEvent::Accepted { broker_order_id: format!("b-{i}").into() }, now).expect("ack applies");
            open_orders.push(o);
        }
        let restored = Restored { positions, open_orders, ..Restored::default() };
        let mut engine =
            Engine::restore(Settings::default(), Decimal::new(10_000_000, 0), strategy::make, restored, now);
        broker.advance(now + chrono::Duration::seconds(1));
        let started = Instant::now();
        let fx = engine
            .handle(Event::Command(Command::EmergencyHalt { reason: "bench".into(), actor: "bench".into() }), now);
        (cancels, exits) = (0, 0);
        for effect in &fx {
            match effect {
                Effect::Cancel(id) => {
                    broker.cancel(id, now);
                    cancels += 1;
                }
                Effect::Submit(order) => {
                    broker.submit(order, now);
                    exits += 1;
                }
                _ => {}
            }
        }
        timings.push(started.elapsed().as_secs_f64() * 1e3);
    }
    timings.sort_by(|a, b| a.total_cmp(b));
    println!(
        "emergency halt: median {:.2} ms until {cancels} cancels and {exits} exits were handed to the paper broker (100 positions, 500 open orders, {runs} runs)",
        timings[runs / 2]
    );
}
