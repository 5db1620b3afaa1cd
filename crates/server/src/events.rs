//! The event bus behind `GET /api/events` (CONTRACT §7) and the typed events it carries: every
//! [`Event`] published gets a monotonic id, is kept in a bounded buffer for `Last-Event-ID`
//! resume, and is broadcast to subscribers. Events carry domain data, never JSON: the HTTP edge
//! (`routes::events`) serialises each one once, on first delivery, and caches the text in its
//! [`StoredEvent`]. Sending never waits: a subscriber that falls behind the broadcast channel is
//! dropped, so a slow client can never slow the engine.
//!
//! An event's `timestamp` is market time, the clock of the orders and executions it reports (the
//! simulated market's in DEMO, where it runs faster than real time), so the console's header can
//! show the market's time from any event; `wall_time` (beyond the contract) keeps the wall time
//! it was published at.
//!
//! The data events carry lives here or below (the engine's view is the leaf
//! [`crate::engine_view`], [`HealthStatus`] is defined here), so the publishers — the engine
//! runner, the health monitor, the account feed — depend on the bus and never the reverse.

use crate::engine_view::EngineView;
use serde::Serialize;
use serde_json::Value;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex, OnceLock};
use tokio::sync::{broadcast, watch};
use tradeops_core::engine::{Block, Halt, StrategyStatus};
use tradeops_core::market::Side;
use tradeops_core::orders::{ClientOrderId, Execution, Order};
use tradeops_core::positions::Position;
use tradeops_core::radar::RadarRow;
use tradeops_core::risk::{RiskRule, TradingState};
use tradeops_core::strategy::Levels;
use tradeops_core::time::format_ts;
use tradeops_core::{Clock, Settings, Symbol, Timestamp, TradingMode};
use tradeops_store::{BacktestRecord, JobRecord};

/// One event of the stream (CONTRACT §7, plus `account.updated`), with its data.
#[derive(Clone, Debug)]
pub enum Event {
    /// An order changed (or was sent); `mode` is the trading mode it was stored under, `broker`
    /// the execution broker it went to.
    OrderUpdated {
        order: Arc<Order>,
        mode: TradingMode,
        broker: &'static str,
    },
    /// A fill of an order, published right after that order's update.
    ExecutionCreated {
        client_order_id: ClientOrderId,
        symbol: Symbol,
        side: Side,
        execution: Execution,
    },
    PositionUpdated {
        position: Position,
        status: StrategyStatus,
        /// The stop and target its strategy manages it with (none when no strategy does).
        levels: Option<Levels>,
        /// Its symbol's trading is halted (CONTRACT §11).
        halted: bool,
        /// What protects it (CONTRACT §11).
        protection: tradeops_core::engine::Protection,
    },
    RadarUpdated(RadarSummary),
    WatchlistUpdated(WatchlistChange),
    RiskStateChanged(RiskChange),
    RiskViolation(Violation),
    SettingsUpdated(SettingsChange),
    DownloadUpdated(JobRecord),
    BacktestUpdated(BacktestRecord),
    HealthChanged(HealthChange),
    AccountUpdated(AccountUpdate),
    /// A market minute closed: the bar of each symbol the console may be charting.
    BarsClosed(BarsClosed),
    /// A symbol the engine follows was halted (`halt`) or resumed trading (`None`), CONTRACT §11.
    SymbolStatus {
        symbol: Symbol,
        halt: Option<tradeops_core::market::SymbolHalt>,
    },
    /// The market entered another session, or another day (CONTRACT §12).
    MarketSession(tradeops_core::calendar::SessionView),
    /// An event of an earlier engine term of the cluster, of this kind, read back from the
    /// database (PostgreSQL) with its wire text, so a stream resumes across a failover.
    Earlier(&'static str),
}

/// Every [`Event::kind`], in the order of CONTRACT §7.
pub const KINDS: &[&str] = &[
    Event::ORDER_UPDATED,
    Event::EXECUTION_CREATED,
    Event::POSITION_UPDATED,
    Event::RADAR_UPDATED,
    Event::WATCHLIST_UPDATED,
    Event::RISK_STATE_CHANGED,
    Event::RISK_VIOLATION,
    Event::SETTINGS_UPDATED,
    Event::DOWNLOAD_UPDATED,
    Event::BACKTEST_UPDATED,
    Event::HEALTH_CHANGED,
    Event::ACCOUNT_UPDATED,
    Event::BARS_CLOSED,
    Event::SYMBOL_STATUS,
    Event::MARKET_SESSION,
];

impl Event {
    const ORDER_UPDATED: &'static str = "order.updated";
    const EXECUTION_CREATED: &'static str = "execution.created";
    const POSITION_UPDATED: &'static str = "position.updated";
    const RADAR_UPDATED: &'static str = "radar.updated";
    const WATCHLIST_UPDATED: &'static str = "watchlist.updated";
    const RISK_STATE_CHANGED: &'static str = "risk.state_changed";
    const RISK_VIOLATION: &'static str = "risk.violation";
    const SETTINGS_UPDATED: &'static str = "settings.updated";
    const DOWNLOAD_UPDATED: &'static str = "download.updated";
    const BACKTEST_UPDATED: &'static str = "backtest.updated";
    const HEALTH_CHANGED: &'static str = "health.changed";
    const ACCOUNT_UPDATED: &'static str = "account.updated";
    const BARS_CLOSED: &'static str = "bars.closed";
    const SYMBOL_STATUS: &'static str = "symbol.status";
    const MARKET_SESSION: &'static str = "market.session";

    /// The kind's wire name (the SSE `event` field, and what `?kinds=` filters on).
    pub fn kind(&self) -> &'static str {
        match self {
            Event::OrderUpdated { .. } => Event::ORDER_UPDATED,
            Event::ExecutionCreated { .. } => Event::EXECUTION_CREATED,
            Event::PositionUpdated { .. } => Event::POSITION_UPDATED,
            Event::RadarUpdated(_) => Event::RADAR_UPDATED,
            Event::WatchlistUpdated(_) => Event::WATCHLIST_UPDATED,
            Event::RiskStateChanged(_) => Event::RISK_STATE_CHANGED,
            Event::RiskViolation(_) => Event::RISK_VIOLATION,
            Event::SettingsUpdated(_) => Event::SETTINGS_UPDATED,
            Event::DownloadUpdated(_) => Event::DOWNLOAD_UPDATED,
            Event::BacktestUpdated(_) => Event::BACKTEST_UPDATED,
            Event::HealthChanged(_) => Event::HEALTH_CHANGED,
            Event::AccountUpdated(_) => Event::ACCOUNT_UPDATED,
            Event::BarsClosed(_) => Event::BARS_CLOSED,
            Event::SymbolStatus { .. } => Event::SYMBOL_STATUS,
            Event::MarketSession(_) => Event::MARKET_SESSION,
            Event::Earlier(kind) => kind,
        }
    }
}

/// The radar's latest scan, in short: when, how many rows, the first 25.
#[derive(Clone, Debug)]
pub struct RadarSummary {
    pub captured_at: Timestamp,
    pub rows: usize,
    pub top: Vec<RadarRow>,
}

/// A change of the watchlist.
#[derive(Clone, Debug)]
pub enum WatchlistChange {
    /// A watched symbol's strategy status changed.
    Status { symbol: Symbol, status: StrategyStatus, reason: Option<String> },
    /// A symbol is watched (its strategy `Active`) from `at`.
    Started { symbol: Symbol, source: String, at: Timestamp },
}

/// A change of the risk state: each is a `risk.state_changed` event of its own shape.
#[derive(Clone, Debug)]
pub enum RiskChange {
    /// The trading state changed (with the halt latch, while halted).
    TradingState {
        state: TradingState,
        halt: Option<Halt>,
    },
    /// What is still open while halted changed.
    Liquidation {
        open_positions: usize,
        open_orders: usize,
    },
    Blocked {
        symbol: Symbol,
        block: Block,
    },
    Unblocked {
        symbol: Symbol,
        reason: String,
        actor: String,
    },
    /// The strategies the emergency halt stopped (not yet restarted) are now `symbols`.
    StoppedByHalt {
        symbols: Vec<Symbol>,
    },
}

/// A `RISK_BLOCKED` refusal.
#[derive(Clone, Debug)]
pub struct Violation {
    pub rule: RiskRule,
    pub symbol: Symbol,
    pub client_order_id: Option<ClientOrderId>,
    pub detail: tradeops_core::risk::ViolationDetail,
    pub at: Timestamp,
}

/// A settings update that changed something.
#[derive(Clone, Debug)]
pub struct SettingsChange {
    pub version: i64,
    /// Dotted paths that changed.
    pub updated: Vec<String>,
    pub actor: String,
}

// A health component's status, worst last (CONTRACT §3); no doc comment: it would change the
// OpenAPI document.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "UPPERCASE")]
pub enum HealthStatus {
    Disabled,
    Healthy,
    Degraded,
    Down,
}

/// A health component's status changed.
#[derive(Clone, Debug)]
pub struct HealthChange {
    pub component: &'static str,
    pub from: HealthStatus,
    pub to: HealthStatus,
    pub detail: Value,
}

/// What the console's header shows changed: the account (as the engine's view has it), the
/// trading state, the market time and the trading date.
#[derive(Clone, Debug)]
pub struct AccountUpdate {
    pub view: Arc<EngineView>,
    pub market_time: Timestamp,
    pub trading_date: Option<chrono::NaiveDate>,
    /// The market's session at `market_time` (CONTRACT §12).
    pub session: tradeops_core::calendar::SessionPhase,
}

/// The one-minute bars that just closed (`bars.closed`, beyond CONTRACT §7): one event per
/// market minute for the symbols watched, held or near the top of the radar, so the console's
/// charts grow live without a request per chart.
#[derive(Clone, Debug)]
pub struct BarsClosed {
    pub bars: Vec<(Symbol, tradeops_core::market::Bar)>,
}

/// Events kept for resume.
pub const BUFFER: usize = 10_000;

/// One published event, as stamped by the bus.
#[derive(Debug)]
pub struct StoredEvent {
    pub id: u64,
    /// Market time, formatted.
    pub timestamp: String,
    pub mode: TradingMode,
    pub event: Event,
    /// Wall time, formatted.
    pub wall_time: String,
    /// The event's wire text, made once by the HTTP edge and shared by every subscriber.
    pub wire: OnceLock<Arc<str>>,
}

impl StoredEvent {
    pub fn kind(&self) -> &'static str {
        self.event.kind()
    }
}

pub struct EventBus {
    tx: broadcast::Sender<Arc<StoredEvent>>,
    inner: Mutex<(u64, VecDeque<Arc<StoredEvent>>)>,
    market_clock: Arc<dyn Clock>,
    clock: Arc<dyn Clock>,
    /// The settings in effect: an event is stamped with the trading mode current when published.
    settings: watch::Receiver<Arc<Settings>>,
}

impl EventBus {
    /// Events stamped with `market_clock` (market time), `clock` (wall time) and the trading
    /// mode of the `settings` in effect.
    pub fn new(
        market_clock: Arc<dyn Clock>,
        clock: Arc<dyn Clock>,
        settings: watch::Receiver<Arc<Settings>>,
    ) -> EventBus {
        let (tx, _) = broadcast::channel(1024);
        EventBus { tx, inner: Mutex::new((0, VecDeque::with_capacity(1024))), market_clock, clock, settings }
    }

    /// Publishes `event`, stamped with the market and wall times and the trading mode now.
    pub fn publish(&self, event: Event) {
        let mode = self.settings.borrow().runtime.trading_mode;
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        inner.0 += 1;
        let event = Arc::new(StoredEvent {
            id: inner.0,
            timestamp: format_ts(&self.market_clock.now()),
            mode,
            event,
            wall_time: format_ts(&self.clock.now()),
            wire: OnceLock::new(),
        });
        if inner.1.len() == BUFFER {
            inner.1.pop_front();
        }
        inner.1.push_back(event.clone());
        // Sent while holding the lock, so ids reach subscribers in order.
        let _ = self.tx.send(event);
    }

    /// Numbers the events from now on after `last` at least. A new engine term numbers from
    /// `epoch << 32`: ids grow across restarts and failovers, and never repeat, so a
    /// `Last-Event-ID` from an earlier term resumes (on any node) after what it saw.
    pub fn continue_after(&self, last: u64) {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        inner.0 = inner.0.max(last);
    }

    /// Puts events of an earlier engine term (id, kind, wire text; oldest first) in the resume
    /// buffer, and numbers on after them. Called before this bus publishes anything.
    pub fn preload(&self, earlier: Vec<(u64, &'static str, String)>) {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let published = std::mem::take(&mut inner.1);
        for (id, kind, wire) in earlier {
            inner.0 = inner.0.max(id);
            let event = StoredEvent {
                id,
                timestamp: String::new(),
                mode: TradingMode::Paper,
                event: Event::Earlier(kind),
                wall_time: String::new(),
                wire: OnceLock::from(Arc::<str>::from(wire)),
            };
            if inner.1.len() == BUFFER {
                inner.1.pop_front();
            }
            inner.1.push_back(Arc::new(event));
        }
        for event in published {
            if inner.1.len() == BUFFER {
                inner.1.pop_front();
            }
            inner.1.push_back(event);
        }
    }

    /// The id of the last event published.
    pub fn last_id(&self) -> u64 {
        self.inner.lock().unwrap_or_else(|e| e.into_inner()).0
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

#[cfg(test)]
mod tests {
    use super::*;
    use tradeops_core::time::parse_ts;
    use tradeops_core::ManualClock;

    fn bus() -> EventBus {
        let clock: Arc<dyn Clock> = Arc::new(ManualClock::new(parse_ts("2026-11-26T15:00:00Z").unwrap()));
        let (_, settings) = watch::channel(Arc::new(Settings::default()));
        EventBus::new(clock.clone(), clock, settings)
    }

    fn health() -> Event {
        Event::HealthChanged(HealthChange {
            component: "cache",
            from: HealthStatus::Healthy,
            to: HealthStatus::Degraded,
            detail: Value::Null,
        })
    }

    /// A new engine term numbers its events after every id of the terms before (restarts and
    /// failovers never reuse one), and a `Last-Event-ID` of an earlier term resumes with the
    /// earlier term's later events (read back from the database), then this term's.
    #[test]
    fn ids_grow_across_terms_and_a_resume_spans_them() {
        let bus = bus();
        bus.preload(vec![
            ((4 << 32) + 7, Event::ORDER_UPDATED, "{\"kind\":\"order.updated\",\"n\":7}".into()),
            ((4 << 32) + 8, Event::ORDER_UPDATED, "{\"kind\":\"order.updated\",\"n\":8}".into()),
        ]);
        bus.continue_after(5 << 32);
        bus.publish(health());
        let (replay, _) = bus.subscribe(Some((4 << 32) + 7));
        let ids: Vec<u64> = replay.iter().map(|e| e.id).collect();
        assert_eq!(ids, [(4 << 32) + 8, (5 << 32) + 1], "the earlier term's later event, then this term's");
        assert_eq!(replay[0].kind(), Event::ORDER_UPDATED);
        assert_eq!(replay[0].wire.get().map(|w| w.as_ref()), Some("{\"kind\":\"order.updated\",\"n\":8}"));
        bus.continue_after(3 << 32);
        bus.publish(health());
        let (replay, _) = bus.subscribe(Some(5 << 32));
        assert_eq!(replay.iter().map(|e| e.id).collect::<Vec<_>>(), [(5 << 32) + 1, (5 << 32) + 2], "never back");
    }
}
