//! Writes the runner holds in memory while the database cannot take them (an outage, a full
//! disk): the engine's book stays the truth meanwhile, and these are stored — orders,
//! positions and the engine state as the newest version of each, the rest in the order they
//! happened — as soon as the database can write again.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use tradeops_core::engine::StrategyStatus;
use tradeops_core::orders::{ClientOrderId, Order};
use tradeops_core::positions::Position;
use tradeops_core::time::to_epoch_ms;
use tradeops_core::{Symbol, Timestamp};
use tradeops_store::{BlockRecord, Database, MarketRepository, StoreError, ViolationRecord, WatchRecord};

/// Writes of the watchlist, blocks and violations held, at most (the oldest are kept; the rest
/// are counted in the log).
const MAX_HELD_WRITES: usize = 10_000;

#[derive(Default)]
pub(super) struct Unsaved {
    pub orders: BTreeMap<ClientOrderId, Arc<Order>>,
    pub positions: BTreeMap<Symbol, Position>,
    /// The engine state record (trading state and halt latch, cash, day counters).
    pub state: bool,
    /// The unsaved state is an emergency halt's latch (`HALTED`): stored nowhere yet, so the
    /// next leader knows nothing of it unless this engine hands it over.
    pub halt: bool,
    /// Other writes, in order.
    pub writes: VecDeque<HeldWrite>,
    /// Writes not kept past [`MAX_HELD_WRITES`].
    pub dropped: usize,
    /// A write failed since the last complete save (logged once the database is back).
    pub outage: bool,
}

impl Unsaved {
    pub fn is_empty(&self) -> bool {
        self.orders.is_empty() && self.positions.is_empty() && !self.state && self.writes.is_empty()
    }

    /// Orders, positions and other writes held.
    pub fn len(&self) -> usize {
        self.orders.len() + self.positions.len() + self.writes.len()
    }

    pub fn hold(&mut self, write: HeldWrite) {
        self.outage = true;
        if self.writes.len() < MAX_HELD_WRITES {
            self.writes.push_back(write);
        } else {
            self.dropped += 1;
        }
    }
}

/// One write of the watchlist, blocks or violations.
#[derive(Clone, Debug)]
pub(super) enum HeldWrite {
    /// A symbol watched with a strategy (its whole row).
    WatchStarted(WatchRecord),
    /// A watched symbol's strategy status changed.
    WatchStatus {
        symbol: Symbol,
        status: StrategyStatus,
        reason: Option<String>,
        at: Timestamp,
    },
    /// A block placed (replacing any block of the symbol).
    Block {
        record: BlockRecord,
        at: Timestamp,
    },
    Unblock {
        symbol: Symbol,
        reason: String,
        actor: String,
        at: Timestamp,
    },
    Violation(ViolationRecord),
}

impl HeldWrite {
    pub async fn write(&self, db: &Database) -> Result<(), StoreError> {
        let market: &dyn MarketRepository = db;
        match self {
            HeldWrite::WatchStarted(row) => market.put_watch_row(row).await,
            HeldWrite::WatchStatus { symbol, status, reason, at } => {
                let existing = market.watch_row(symbol.as_str()).await?;
                market.put_watch_row(&watch_row(existing, symbol, *status, reason.clone(), *at)).await
            }
            HeldWrite::Block { record, at } => {
                market.replace_block(record, to_epoch_ms(at), "replaced by a new block").await.map(|_| ())
            }
            HeldWrite::Unblock { symbol, reason, actor, at } => {
                market.lift_blocks(symbol.as_str(), to_epoch_ms(at), actor, reason).await.map(|_| ())
            }
            HeldWrite::Violation(record) => market.insert_violation(record).await.map(|_| ()),
        }
    }
}

/// The watchlist row after a status change (a row is made for a symbol never watched: a
/// manual position).
fn watch_row(
    existing: Option<WatchRecord>,
    symbol: &Symbol,
    status: StrategyStatus,
    reason: Option<String>,
    now: Timestamp,
) -> WatchRecord {
    let mut row = existing.unwrap_or_else(|| WatchRecord {
        symbol: symbol.to_string(),
        source: "API".into(),
        strategy_id: "manual".into(),
        strategy_version: "-".into(),
        strategy_status: status.as_str().into(),
        polling_status: "STOPPED".into(),
        time_added: to_epoch_ms(&now),
        time_closed: None,
        time_completed: None,
        reason: None,
    });
    let stopped = matches!(status, StrategyStatus::Closed | StrategyStatus::Halted);
    row.strategy_status = status.as_str().into();
    row.polling_status = if stopped { "STOPPED".into() } else { "POLLING".into() };
    if stopped && row.time_closed.is_none() {
        row.time_closed = Some(to_epoch_ms(&now));
    }
    if !stopped {
        row.time_closed = None;
    }
    if reason.is_some() {
        row.reason = reason;
    }
    row
}
