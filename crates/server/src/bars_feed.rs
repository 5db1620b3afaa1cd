//! `bars.closed`: once a market minute closes, the bar of each symbol the console may chart —
//! held, watched, or among the radar's first [`RADAR_SYMBOLS`] — in one event, so every open
//! chart grows from the stream without a request of its own.

use crate::events::{BarsClosed, Event, EventBus};
use std::collections::BTreeSet;
use tradeops_brokers::MarketData;
use tradeops_core::Symbol;

/// How many of the radar's rows, from the top, have their bars published.
pub const RADAR_SYMBOLS: usize = 50;

/// Publishes the last closed minute bar of each of `symbols` that has one (none: no event).
pub async fn publish_closed_bars(market: &dyn MarketData, events: &EventBus, symbols: BTreeSet<Symbol>) {
    let mut bars = Vec::with_capacity(symbols.len());
    for symbol in symbols {
        if let Some(closed) = market.last_closed_bar(&symbol).await {
            bars.push((symbol, closed.bar));
        }
    }
    if !bars.is_empty() {
        events.publish(Event::BarsClosed(BarsClosed { bars }));
    }
}
