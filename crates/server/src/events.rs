//! The event bus behind `GET /api/events` (CONTRACT §7): every event gets a monotonic id, is
//! kept in a bounded buffer for `Last-Event-ID` resume, and is broadcast to subscribers. Sending
//! never waits: a subscriber that falls behind the broadcast channel is dropped, so a slow
//! client can never slow the engine.
//!
//! An event's `timestamp` is market time, the clock of the orders and executions it reports (the
//! simulated market's in DEMO, where it runs faster than real time), so the console's header can
//! show the market's time from any event; `wall_time` (beyond the contract) keeps the wall time
//! it was published at.

use serde::Serialize;
use serde_json::Value;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use tokio::sync::broadcast;
use tradeops_core::time::format_ts;
use tradeops_core::{Clock, TradingMode};

/// Event kinds (CONTRACT §7).
pub const KINDS: &[&str] = &[
    "order.updated",
    "execution.created",
    "position.updated",
    "radar.updated",
    "watchlist.updated",
    "risk.state_changed",
    "risk.violation",
    "settings.updated",
    "download.updated",
    "backtest.updated",
    "health.changed",
    "account.updated",
];

/// Events kept for resume.
pub const BUFFER: usize = 10_000;

/// One published event: `data` of the SSE message is this, serialised.
#[derive(Clone, Debug, Serialize)]
pub struct StoredEvent {
    #[serde(skip)]
    pub id: u64,
    pub kind: &'static str,
    /// Market time.
    pub timestamp: String,
    pub mode: TradingMode,
    pub data: Value,
    /// Wall time.
    pub wall_time: String,
}

pub struct EventBus {
    tx: broadcast::Sender<Arc<StoredEvent>>,
    inner: Mutex<(u64, VecDeque<Arc<StoredEvent>>)>,
    market_clock: Arc<dyn Clock>,
    clock: Arc<dyn Clock>,
}

impl EventBus {
    /// Events stamped with `market_clock` (market time) and `clock` (wall time).
    pub fn new(market_clock: Arc<dyn Clock>, clock: Arc<dyn Clock>) -> EventBus {
        let (tx, _) = broadcast::channel(1024);
        EventBus { tx, inner: Mutex::new((0, VecDeque::with_capacity(1024))), market_clock, clock }
    }

    /// Publishes an event of `kind` (one of [`KINDS`]).
    pub fn publish(&self, kind: &'static str, mode: TradingMode, data: Value) {
        debug_assert!(KINDS.contains(&kind), "unknown event kind {kind}");
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        inner.0 += 1;
        let event = Arc::new(StoredEvent {
            id: inner.0,
            kind,
            timestamp: format_ts(&self.market_clock.now()),
            mode,
            data,
            wall_time: format_ts(&self.clock.now()),
        });
        if inner.1.len() == BUFFER {
            inner.1.pop_front();
        }
        inner.1.push_back(event.clone());
        // Sent while holding the lock, so ids reach subscribers in order.
        let _ = self.tx.send(event);
    }

    /// Subscribes, returning the buffered events after `after` (resume) first. Taken under the
    /// lock, so nothing is missed or repeated between the replay and the live stream.
    pub fn subscribe(&self, after: Option<u64>) -> (Vec<Arc<StoredEvent>>, broadcast::Receiver<Arc<StoredEvent>>) {
        let inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let replay = match after {
            Some(id) => inner.1.iter().filter(|e| e.id > id).cloned().collect(),
            None => Vec::new(),
        };
        (replay, self.tx.subscribe())
    }
}
