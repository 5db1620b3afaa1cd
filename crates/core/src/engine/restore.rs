//! The engine rebuilt at a restart from what was persisted: [`Engine::restore`] takes the saved
//! trading state, the positions, the orders still open, the active blocks and the watchlist rows
//! ([`Restored`]), sets them in place, gives each strategy that was running a fresh instance, and
//! re-attaches the working entry and exit orders to their symbols' slots. The runner reads the
//! rows from the database; this module knows nothing of where they come from.

use super::{Block, Command, Engine, Event, Halt, Slot, StrategyStatus};
use crate::market::Side;
use crate::orders::Order;
use crate::positions::Position;
use crate::risk::TradingState;
use crate::settings::Settings;
use crate::strategy::Strategy;
use crate::symbol::Symbol;
use crate::time::Timestamp;
use chrono::NaiveDate;
use rust_decimal::Decimal;
use std::collections::BTreeSet;
use std::sync::Arc;

/// What the engine had persisted at its last stop, to start again from.
#[derive(Default)]
pub struct Restored {
    /// The trading state and the day's counters (`None`: never saved, a first start).
    pub state: Option<SavedState>,
    pub positions: Vec<Position>,
    /// The orders that were not final.
    pub open_orders: Vec<Order>,
    /// The active blocks, by symbol.
    pub blocks: Vec<(Symbol, Block)>,
    /// The watchlist rows.
    pub watched: Vec<Watched>,
}

/// The engine's trading state and day counters as persisted.
#[derive(Clone, Debug, PartialEq)]
pub struct SavedState {
    pub cash: Decimal,
    pub trading_state: TradingState,
    pub halt: Option<Halt>,
    /// The strategies the emergency halt stopped (see [`Engine::halt_stopped`]).
    pub halt_stopped: BTreeSet<Symbol>,
    pub trading_date: Option<NaiveDate>,
    pub trades_today: u32,
    pub realized_today: Decimal,
    pub start_equity: Decimal,
    pub peak_equity: Decimal,
    /// The order counter ([`Engine::order_sequence`]): a restored engine counts on from it.
    pub order_sequence: u64,
}

/// A watchlist row: a symbol, its strategy status and when it was put on the list.
#[derive(Clone, Debug, PartialEq)]
pub struct Watched {
    pub symbol: Symbol,
    pub status: StrategyStatus,
    pub added_at: Timestamp,
}

impl Engine {
    /// The engine as it was persisted, at `now`: [`Engine::new`] with `initial_cash`, then the
    /// saved state, positions, open orders and blocks set in place; each watched symbol gets its
    /// slot with its saved status, and one whose strategy was running (`Active`, `Buy`, `Hold`,
    /// `Sell`) gets a fresh strategy instance through [`Command::Restart`] unless trading is
    /// `HALTED` or the symbol is blocked (its effects are not carried out: they restate what is
    /// persisted). Then each open order is attached to its symbol's slot — a strategy's buy as
    /// the entry order, a sell as an exit order — and a restarted strategy's status is the one
    /// its position and working orders make (`Buy`, `Sell`, `Hold` or `Active`).
    pub fn restore(
        settings: Settings,
        initial_cash: Decimal,
        make_strategy: fn(&str) -> Option<Box<dyn Strategy>>,
        restored: Restored,
        now: Timestamp,
    ) -> Engine {
        let mut engine = Engine::new(settings, initial_cash, make_strategy);
        let Restored { state, positions, open_orders, blocks, watched } = restored;
        if let Some(s) = state {
            engine.cash = s.cash;
            engine.trading_state = s.trading_state;
            engine.halt = s.halt;
            engine.halt_stopped = s.halt_stopped;
            engine.day.date = s.trading_date;
            engine.day.trades_today = s.trades_today;
            engine.day.realized_today = s.realized_today;
            engine.day.start_equity = s.start_equity;
            engine.day.peak_equity = s.peak_equity;
            engine.sequence = s.order_sequence;
        }
        for p in positions {
            engine.positions.insert(p.symbol.clone(), p);
        }
        let open_orders: Vec<Arc<Order>> = open_orders.into_iter().map(Arc::new).collect();
        for o in &open_orders {
            engine.orders.insert(o.client_order_id.clone(), o.clone());
        }
        for (symbol, block) in blocks {
            engine.blocks.insert(symbol, block);
        }
        let mut running = Vec::new();
        for Watched { symbol, status, added_at } in watched {
            let was_running = matches!(
                status,
                StrategyStatus::Active | StrategyStatus::Buy | StrategyStatus::Hold | StrategyStatus::Sell
            );
            if was_running && engine.trading_state != TradingState::Halted {
                // A fresh strategy instance takes over (a held position is handed to it): the
                // slot starts from `Closed`, so the restart starts one rather than finding the
                // saved status "already running" with no strategy behind it.
                engine.slots.insert(
                    symbol.clone(),
                    Slot { status: StrategyStatus::Closed, added_at: Some(added_at), ..Slot::manual() },
                );
                engine.handle(Event::Command(Command::Restart { symbol: symbol.clone() }), now);
                if engine.slots.get(&symbol).is_some_and(|s| s.strategy.is_none()) {
                    // Refused (a block): the row keeps the status it was saved with.
                    if let Some(slot) = engine.slots.get_mut(&symbol) {
                        slot.status = status;
                    }
                } else {
                    running.push(symbol);
                }
            } else {
                engine.slots.insert(symbol.clone(), Slot { status, added_at: Some(added_at), ..Slot::manual() });
            }
        }
        for o in &open_orders {
            if o.side == Side::Buy {
                if let Some(slot) = engine.slots.get_mut(&o.symbol) {
                    if o.strategy_id.is_some() {
                        slot.entry_order = Some(o.client_order_id.clone());
                    }
                }
            } else if o.is_protective() {
                // Protection at the broker, not an exit in progress (see `restore_protection`).
            } else if let Some(slot) = engine.slots.get_mut(&o.symbol) {
                slot.exit_orders.insert(o.client_order_id.clone());
            }
        }
        // A restarted strategy's status as its working orders and position make it (buying,
        // selling, holding or waiting), as after any fill.
        for symbol in running {
            let flat = Position::new(symbol.clone());
            let status = engine.status_after_fill(&symbol, engine.positions.get(&symbol).unwrap_or(&flat));
            if let Some(slot) = engine.slots.get_mut(&symbol) {
                slot.status = status;
            }
        }
        engine
    }
}
