//! The trading engine (DESIGN.md "One engine, two clocks"): a synchronous state machine.
//!
//! `Engine::handle(event, now) -> Vec<Effect>` is the only place trading state changes. Live,
//! a runner feeds it market bars, broker reports, timers and operator commands (with a reply),
//! and carries out the effects — persisting before sending (write-ahead), then submitting or
//! cancelling at the broker and publishing events. In a backtest the same engine is fed stored
//! bars and a simulated broker. No wall clock, no randomness, ordered maps only: the same
//! events give the same effects, bit for bit.

mod adopt;
mod commands;
mod extended;
mod preview;
mod protection;
mod reports;
mod restore;
mod strategies;

use crate::broker::BrokerReport;
use crate::calendar::{MarketCalendar, NyDate};
use crate::market::{ticks_fit_dollars, ticks_to_dollars, whole_ticks, Bar, Side, SymbolHalt};
use crate::orders::{ClientOrderId, Order, OrderType, TimeInForce};
use crate::positions::Position;
use crate::risk::{RecentOrder, Refusal, RiskRule, RiskSnapshot, TradingState, ViolationDetail};
use crate::settings::Settings;
use crate::strategy::{Levels, Strategy};
use crate::symbol::Symbol;
use crate::time::Timestamp;
use chrono::NaiveDate;
use rust_decimal::Decimal;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;

pub use adopt::EARLIER_TERM_REASON;
pub use commands::{is_liquidation, Command, CommandError, HaltProgress, ManualOrder, Reply, LIQUIDATION_REASON};
pub use preview::OrderPreview;
pub use protection::{Protection, ProtectionKind};
pub use restore::{Restored, SavedState, Watched};

/// A watched symbol's strategy status (CONTRACT §3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum StrategyStatus {
    /// Watching for an entry.
    Active,
    /// Entry order working.
    Buy,
    /// In a position the strategy manages.
    Hold,
    /// Exit order working.
    Sell,
    /// Stopped, or finished for the day.
    Closed,
    /// Position left to manual management.
    Halted,
}

impl StrategyStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            StrategyStatus::Active => "Active",
            StrategyStatus::Buy => "Buy",
            StrategyStatus::Hold => "Hold",
            StrategyStatus::Sell => "Sell",
            StrategyStatus::Closed => "Closed",
            StrategyStatus::Halted => "Halted",
        }
    }
}

/// One symbol the engine trades or watches.
pub struct Slot {
    pub status: StrategyStatus,
    /// When the symbol was last put on the watchlist (`None`: traded by hand, never watched).
    pub added_at: Option<Timestamp>,
    pub strategy: Option<Box<dyn Strategy>>,
    pub entry_order: Option<ClientOrderId>,
    pub exit_orders: BTreeSet<ClientOrderId>,
}

/// What the engine knows of a symbol's market.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct SymbolMarket {
    pub last: Decimal,
    pub prev_close: Decimal,
    pub relative_volume: Option<f64>,
    /// The price a market order sent now fills at, when the venue states it: a backtest's fill
    /// model, given with each bar ([`Engine::bar_into`]). Live it is unknown (`None`) and the last trade, with
    /// `risk_controls.market_buy_buffer_pct`, stands for it.
    pub fill: Option<crate::market::Price>,
    /// The quote's bid at the last mark, where the source gave one.
    pub bid: Option<Decimal>,
}

/// The daily-loss check of a bar when one position is open and the bar is of its symbol: all
/// else stands as the last full check saw it, so the check reduces to comparing the position's
/// value, `quantity × close` in ticks (1/10,000 dollar), with two thresholds.
#[derive(Clone, Debug, PartialEq)]
struct QuickCheck {
    symbol: Symbol,
    quantity: u64,
    /// Equity without the position: cash.
    base: Decimal,
    /// A value above this (ticks) makes a new peak equity.
    peak_above: i128,
    /// At or below this (ticks) the daily loss limit is reached.
    loss_at: i128,
    /// The value at the last bar checked this way (`None`: none since the full check).
    value: Option<i128>,
    /// `loss_at` on a new day, when nothing is realized yet (`None` past what ticks hold): a
    /// day roll with the book as last checked takes the new day's thresholds from here.
    fresh_loss_at: Option<i128>,
}

/// When a backtest's bar is seen, as its run has it at hand: the instant in seconds since the
/// epoch and its New York date (from the history's [`crate::calendar::NyDates`]).
#[derive(Clone, Copy, Debug)]
pub struct BarTime<'a> {
    pub seconds: i64,
    pub date: &'a NyDate,
}

/// The emergency halt latch.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Halt {
    #[serde(with = "crate::time::serde_ts")]
    pub at: Timestamp,
    pub reason: String,
    pub actor: String,
}

/// A block of a symbol (CONTRACT §4 `radar/block`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Block {
    /// `TODAY` or `PERMANENT`.
    pub scope: String,
    pub reason: String,
    pub actor: String,
    pub effective_from: Timestamp,
    /// `None` for `PERMANENT`.
    pub expires_at: Option<Timestamp>,
}

/// Counters of the trading day.
#[derive(Clone, Debug, PartialEq)]
pub struct DayStats {
    pub date: Option<NaiveDate>,
    pub trades_today: u32,
    pub realized_today: Decimal,
    pub start_equity: Decimal,
    pub peak_equity: Decimal,
    /// Realized P&L (net of fees) and entries today, by symbol.
    pub by_symbol: BTreeMap<Symbol, (Decimal, u32)>,
}

/// Inputs of the engine.
pub enum Event {
    /// A completed 1-minute bar, with what the radar measured.
    Bar {
        symbol: Symbol,
        bar: Bar,
        prev_close: Decimal,
        relative_volume: Option<f64>,
    },
    /// The latest trade price (marks positions), and the quote's bid where the source has one
    /// (what an exit outside the regular session is limited under, CONTRACT §12).
    Mark {
        symbol: Symbol,
        price: Decimal,
        bid: Option<Decimal>,
    },
    Broker(BrokerReport),
    /// The market-data source's word on whether `symbol` trades (`halt` `None`) or is halted
    /// (CONTRACT §11). Sent when it changes; the same state again changes nothing.
    Status {
        symbol: Symbol,
        halt: Option<SymbolHalt>,
    },
    Command(Command),
    /// The session clock: checks the day roll.
    Tick,
}

/// What the runner must do, in order.
#[derive(Clone, Debug, PartialEq)]
pub enum Effect {
    /// Trading state changed: persist before anything else of the same batch.
    TradingStateChanged {
        state: TradingState,
        halt: Option<Halt>,
    },
    /// A new order: persist (status NEW), then send to the broker. Shared with the engine's
    /// book (an order is not copied for each effect about it).
    Submit(Arc<Order>),
    /// Ask the broker to cancel.
    Cancel(ClientOrderId),
    /// A symbol was put on the watchlist: a new row (`source` `MANUAL`, `RADAR` or `API`).
    WatchStarted {
        symbol: Symbol,
        source: String,
        strategy_id: String,
        strategy_version: String,
        at: Timestamp,
    },
    /// A block was placed (replacing an active one).
    BlockPlaced {
        symbol: Symbol,
        block: Block,
    },
    /// The active block was lifted.
    BlockLifted {
        symbol: Symbol,
        reason: String,
        actor: String,
    },
    /// Persist and publish the order's new state (with its executions): the book's order, shared
    /// (the engine copies it on its next change only while an effect still holds it).
    OrderUpdated(Arc<Order>),
    PositionUpdated {
        position: Position,
        status: StrategyStatus,
    },
    WatchUpdated {
        symbol: Symbol,
        status: StrategyStatus,
        reason: Option<String>,
    },
    /// A `RISK_BLOCKED` refusal: a violation row.
    Violation {
        rule: RiskRule,
        symbol: Symbol,
        client_order_id: Option<ClientOrderId>,
        detail: ViolationDetail,
    },
    /// A strategy decision with its rule and explanation.
    Decision {
        symbol: Symbol,
        rule: &'static str,
        text: String,
    },
    DayRolled {
        date: NaiveDate,
    },
    /// The set of strategies the emergency halt stopped changed (now `symbols`): persist it
    /// with the trading state.
    HaltStoppedChanged {
        symbols: Vec<Symbol>,
    },
    /// A symbol's trading was halted (`halt`) or resumed (`None`): publish `symbol.status`.
    SymbolStatus {
        symbol: Symbol,
        halt: Option<SymbolHalt>,
    },
    /// Something that should not happen did (an unknown or impossible broker report): log it
    /// and show it in reconciliation.
    Anomaly(String),
    /// Reconciliation took the broker's figure for the engine's cash (`what`, in words): persist
    /// the engine state.
    CashAdopted {
        cash: Decimal,
        what: String,
    },
    Reply(Result<Reply, CommandError>),
}

/// The engine's state is its own: it changes only through [`Engine::handle`] (and the other
/// entry points below), is rebuilt at a restart by [`Engine::restore`], and is read through
/// accessors.
pub struct Engine {
    settings: Settings,
    trading_state: TradingState,
    halt: Option<Halt>,
    /// Watched symbols whose running strategy the emergency halt stopped. Resume leaves them
    /// stopped (CONTRACT §4); `Command::RestartHaltStopped` restarts exactly these. A symbol
    /// restarted or stopped by hand since leaves the set.
    halt_stopped: BTreeSet<Symbol>,
    /// Symbols whose emergency exit the broker rejected: not sent again before the time given
    /// (the doubling wait after the given number of rejections in a row), so a venue refusing an
    /// exit is asked again every few seconds rather than in a hot loop.
    exit_backoff: BTreeMap<Symbol, (Timestamp, u32)>,
    orders: BTreeMap<ClientOrderId, Arc<Order>>,
    positions: BTreeMap<Symbol, Position>,
    slots: BTreeMap<Symbol, Slot>,
    /// Active blocks (an expired `TODAY` block stops counting at its `expires_at`).
    blocks: BTreeMap<Symbol, Block>,
    market: BTreeMap<Symbol, SymbolMarket>,
    /// The symbols the market-data source says cannot trade now (CONTRACT §11): no market or
    /// stop order, close or strategy entry goes into one; the emergency halt's exits still do.
    halts: BTreeMap<Symbol, SymbolHalt>,
    /// The exit legs protecting positions bought with them (CONTRACT §11), while held.
    brackets: BTreeMap<Symbol, crate::orders::ExitLegs>,
    /// Symbols whose protective order the engine is cancelling to free its shares: the exits
    /// written ahead and held back until the cancel is confirmed. When it is, what is left of
    /// the position is protected again (also with no exit waiting: a protective order replaced
    /// by one of the position's new size). A protective order an operator cancels is not
    /// replaced: it has no entry here.
    freeing: BTreeMap<Symbol, Vec<ClientOrderId>>,
    /// Extended-hours exits being cancelled to go out again at a fresh price (CONTRACT §12,
    /// [`Engine::reprice_exits`]).
    repricing: BTreeSet<ClientOrderId>,
    /// When the last event was handled: what the session-dependent views (a position's
    /// protection) are answered as of.
    now: Timestamp,
    /// The extended sessions' rules apply (CONTRACT §12): on by default; off for a backtest on
    /// daily bars ([`Engine::without_session_rules`]).
    session_rules: bool,
    /// The session of the last event handled ([`Engine::note_session`]).
    session_seen: Option<crate::calendar::SessionPhase>,
    /// Strategy positions whose protective order was placed and is not yet resting at the
    /// broker, with when `risk_controls.require_broker_stop` sells them if it still is not.
    stop_deadlines: BTreeMap<Symbol, Timestamp>,
    day: DayStats,
    cash: Decimal,
    recent: VecDeque<RecentOrder>,
    sequence: u64,
    /// The New York date of the events, its bounds and regular session: worked out as a date
    /// begins (or given by a backtest's bar, [`BarTime`]), not per event.
    today: Option<NyDate>,
    /// Seconds since the epoch of the events' instants (the UTC date's arithmetic once a day).
    epoch: crate::time::EpochSeconds,
    /// Whether the daily loss limit must be checked on the next bar whatever its symbol: set by
    /// every event but a bar (fills, commands and marks move cash, positions and limits), cleared
    /// by a check. A bar only moves its own symbol's mark, so a bar of a symbol with no open
    /// position cannot change the check's outcome and skips it.
    check_due: bool,
    /// Open positions at the last daily-loss check; valid while `check_due` is false (only
    /// reports change positions, and they set it).
    open_at_check: usize,
    /// Equity at the last daily-loss check.
    checked_equity: Decimal,
    /// The last full check's figures for the bars of the one open position, if there is exactly
    /// one (see [`QuickCheck`]); valid while `check_due` is false.
    quick: Option<QuickCheck>,
    /// Counts the daily-loss checks and the events that may have moved equity (see
    /// [`Engine::equity_version`]).
    equity_version: u64,
    /// Strategy factory by id.
    make_strategy: fn(&str) -> Option<Box<dyn Strategy>>,
    /// Where an order's id and reason are written before they are shared (no new buffer for
    /// each).
    scratch: String,
    /// Each strategy id as shared text, made once (an order carries its strategy's id).
    strategy_ids: Vec<Arc<str>>,
}

/// The price a position of `symbol` is valued at: the last price, else its average entry.
fn mark_of(
    market: &BTreeMap<Symbol, SymbolMarket>,
    positions: &BTreeMap<Symbol, Position>,
    symbol: &Symbol,
) -> Decimal {
    match market.get(symbol) {
        Some(m) if m.last > Decimal::ZERO => m.last,
        _ => positions.get(symbol).and_then(|p| p.average_entry_price()).unwrap_or_default(),
    }
}

/// [`Engine::is_working`] from the orders alone (so it can be asked while a slot is borrowed).
fn is_working_in(orders: &BTreeMap<ClientOrderId, Arc<Order>>, id: &ClientOrderId) -> bool {
    orders.get(id).is_some_and(|o| !o.status.is_final())
}

/// [`Engine::buying_power`] from the fields it reads (so it can be taken while a slot is
/// borrowed). Inline for the common case of a bar, no order at all.
#[inline]
fn buying_power_of(
    orders: &BTreeMap<ClientOrderId, Arc<Order>>,
    cash: Decimal,
    market: &BTreeMap<Symbol, SymbolMarket>,
    positions: &BTreeMap<Symbol, Position>,
) -> Decimal {
    if orders.is_empty() {
        return if cash.is_sign_negative() { Decimal::ZERO } else { cash };
    }
    reserved_buying_power(orders, cash, market, positions)
}

/// [`buying_power_of`] with orders in the book.
fn reserved_buying_power(
    orders: &BTreeMap<ClientOrderId, Arc<Order>>,
    cash: Decimal,
    market: &BTreeMap<Symbol, SymbolMarket>,
    positions: &BTreeMap<Symbol, Position>,
) -> Decimal {
    let available = if cash.is_sign_negative() { Decimal::ZERO } else { cash };
    let mut working_buys = orders.values().filter(|o| !o.status.is_final() && o.side == Side::Buy).peekable();
    if working_buys.peek().is_none() {
        return available;
    }
    let reserved: Decimal = working_buys
        .map(|o| {
            Decimal::from(o.remaining())
                * o.limit_price.or(o.stop_price).unwrap_or_else(|| mark_of(market, positions, &o.symbol))
        })
        .sum();
    (cash - reserved).max(Decimal::ZERO)
}

impl Engine {
    pub fn new(settings: Settings, cash: Decimal, make_strategy: fn(&str) -> Option<Box<dyn Strategy>>) -> Engine {
        Engine {
            settings,
            trading_state: TradingState::Active,
            halt: None,
            halt_stopped: BTreeSet::new(),
            exit_backoff: BTreeMap::new(),
            orders: BTreeMap::new(),
            positions: BTreeMap::new(),
            slots: BTreeMap::new(),
            blocks: BTreeMap::new(),
            market: BTreeMap::new(),
            halts: BTreeMap::new(),
            brackets: BTreeMap::new(),
            freeing: BTreeMap::new(),
            repricing: BTreeSet::new(),
            now: Timestamp::default(),
            session_rules: true,
            session_seen: None,
            stop_deadlines: BTreeMap::new(),
            day: DayStats {
                date: None,
                trades_today: 0,
                realized_today: Decimal::ZERO,
                start_equity: cash,
                peak_equity: cash,
                by_symbol: BTreeMap::new(),
            },
            cash,
            recent: VecDeque::new(),
            sequence: 0,
            today: None,
            epoch: Default::default(),
            check_due: true,
            open_at_check: 0,
            checked_equity: cash,
            quick: None,
            equity_version: 0,
            make_strategy,
            scratch: String::new(),
            strategy_ids: Vec::new(),
        }
    }

    /// The settings the engine trades under.
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    pub fn trading_state(&self) -> TradingState {
        self.trading_state
    }

    /// The emergency halt latch, while `HALTED`.
    pub fn halt(&self) -> Option<&Halt> {
        self.halt.as_ref()
    }

    /// The symbols of a radar scan (ranked, best first) the allocator auto-watches (the desk
    /// replay shares this with the live feed): the top `auto_watch_top_n` not stopped by the last halt —
    /// only the operator restarts those —, none when auto-watch is off. The engine still refuses
    /// what the watchlist limit or a block forbids.
    pub fn auto_watch_picks(&self, ranked: &[Symbol]) -> Vec<Symbol> {
        auto_watch_picks(ranked, &self.settings.strategy_allocator, |s| self.halt_stopped.contains(s))
    }

    /// Watched symbols whose running strategy the emergency halt stopped.
    pub fn halt_stopped(&self) -> &BTreeSet<Symbol> {
        &self.halt_stopped
    }

    /// The order book: every order not final, and the final ones still kept in memory.
    pub fn orders(&self) -> &BTreeMap<ClientOrderId, Arc<Order>> {
        &self.orders
    }

    pub fn order(&self, id: &ClientOrderId) -> Option<&Arc<Order>> {
        self.orders.get(id)
    }

    /// Positions by symbol (a closed position stays, flat).
    pub fn positions(&self) -> &BTreeMap<Symbol, Position> {
        &self.positions
    }

    /// The symbols traded or watched, with their strategies and working orders.
    pub fn slots(&self) -> &BTreeMap<Symbol, Slot> {
        &self.slots
    }

    /// The active blocks by symbol.
    pub fn blocks(&self) -> &BTreeMap<Symbol, Block> {
        &self.blocks
    }

    /// What the engine knows of each symbol's market.
    pub fn market(&self) -> &BTreeMap<Symbol, SymbolMarket> {
        &self.market
    }

    /// The symbols whose trading is halted now, with why and since when.
    pub fn halts(&self) -> &BTreeMap<Symbol, SymbolHalt> {
        &self.halts
    }

    /// Why `symbol` cannot trade now, if it cannot.
    pub fn halt_of(&self, symbol: &Symbol) -> Option<&SymbolHalt> {
        if self.halts.is_empty() {
            None
        } else {
            self.halts.get(symbol)
        }
    }

    /// The counters of the trading day.
    pub fn day(&self) -> &DayStats {
        &self.day
    }

    pub fn cash(&self) -> Decimal {
        self.cash
    }

    /// The order counter: the N of the last generated client order id
    /// (`to-SYMBOL-YYYYMMDDHHMMSS-N`), persisted with the trading state.
    pub fn order_sequence(&self) -> u64 {
        self.sequence
    }

    /// Runs `strategy` on `symbol` in place of the one the allocator made (a backtest's strategy
    /// with its parameters); nothing when the symbol has no slot.
    pub(crate) fn replace_strategy(&mut self, symbol: &Symbol, strategy: Option<Box<dyn Strategy>>) {
        if let Some(slot) = self.slots.get_mut(symbol) {
            slot.strategy = strategy;
        }
    }

    pub fn calendar(&self) -> MarketCalendar {
        MarketCalendar::new(self.settings.runtime.market_calendar)
    }

    /// The one entry point.
    pub fn handle(&mut self, event: Event, now: Timestamp) -> Vec<Effect> {
        let mut fx = Vec::new();
        self.handle_into(event, now, &mut fx);
        fx
    }

    /// [`Engine::handle`], appending the effects to `fx`: for a runner that reuses one buffer
    /// (a backtest handles several events per order, and a new vector for each would be a
    /// good part of an order's cost).
    pub fn handle_into(&mut self, event: Event, now: Timestamp, fx: &mut Vec<Effect>) {
        self.now = now;
        self.note_session(now, fx);
        match event {
            Event::Bar { symbol, bar, prev_close, relative_volume } => {
                self.bar_into(&symbol, &bar, prev_close, relative_volume, None, now, None, fx);
            }
            Event::Mark { symbol, price, bid } => {
                self.begin(now, fx);
                let market = self.market.entry(symbol.clone()).or_default();
                market.last = price;
                market.bid = bid.filter(|b| *b > Decimal::ZERO);
                self.check_daily_loss(fx);
                self.check_broker_stops(now, None, fx);
                self.check_engine_stop(&symbol, now, fx);
            }
            Event::Broker(report) => {
                self.begin(now, fx);
                self.on_report(report, now, fx);
            }
            Event::Status { symbol, halt } => {
                self.begin(now, fx);
                let changed = match &halt {
                    Some(halt) => self.halts.insert(symbol.clone(), halt.clone()).as_ref() != Some(halt),
                    None => self.halts.remove(&symbol).is_some(),
                };
                if changed {
                    fx.push(Effect::SymbolStatus { symbol, halt });
                }
            }
            Event::Command(command) => {
                self.begin(now, fx);
                let reply = self.on_command(command, now, fx);
                fx.push(Effect::Reply(reply));
            }
            Event::Tick => {
                self.begin(now, fx);
                self.check_broker_stops(now, None, fx);
                self.reprice_exits(now, fx);
            }
        }
    }

    /// What every event but a bar starts with: the day roll, and the next bar's daily-loss check
    /// made in full (the event may have changed the book).
    fn begin(&mut self, now: Timestamp, fx: &mut Vec<Effect>) {
        let seconds = self.epoch.of(&now);
        let (date, _) = self.locate(seconds, None);
        self.roll_day(date, fx);
        self.check_due = true;
        self.equity_version += 1;
    }

    /// [`Engine::handle_into`] of an [`Event::Bar`], from its parts: a backtest calls it for every
    /// bar, without building the event and matching it again. `fill`: the price a market order
    /// sent on this bar fills at, where the venue states it (a backtest's fill model: the next
    /// bar's open under `NEXT_OPEN`), so entries are sized and checked at it; `None` live, where
    /// the last trade and `risk_controls.market_buy_buffer_pct` stand for it. `time`: `now` as
    /// a backtest already knows it; `None` live, where the engine works it out.
    #[allow(clippy::too_many_arguments)]
    pub fn bar_into(
        &mut self,
        symbol: &Symbol,
        bar: &Bar,
        prev_close: Decimal,
        relative_volume: Option<f64>,
        fill: Option<crate::market::Price>,
        now: Timestamp,
        time: Option<BarTime<'_>>,
        fx: &mut Vec<Effect>,
    ) {
        let (seconds, hint) = match time {
            Some(t) => (t.seconds, Some(t.date)),
            None => (self.epoch.of(&now), None),
        };
        let (date, session) = self.locate(seconds, hint);
        self.roll_day(date, fx);
        // Unnormalised: exact, and cheaper than `Price::to_decimal` on every bar.
        let last = bar.close.as_decimal();
        let m = match self.market.get_mut(symbol) {
            Some(m) => m,
            None => self.market.entry(symbol.clone()).or_default(),
        };
        m.last = last;
        m.prev_close = prev_close;
        m.relative_volume = relative_volume;
        m.fill = fill;
        let market = *m;
        self.on_bar(symbol, bar, market, now, seconds, session, fx);
        self.check_broker_stops(now, None, fx);
        if self.check_due {
            self.check_daily_loss(fx);
        } else if self.quick.as_ref().is_some_and(|q| q.symbol == *symbol) {
            self.quick_check(bar.close.0, fx);
        } else if self.open_at_check > 0 && self.positions.get(symbol).is_some_and(|p| !p.is_flat()) {
            self.check_daily_loss(fx);
        }
    }

    /// The New York date the next events fall on, where the caller knows it (a backtest's bar
    /// and the broker's reports at its open): they find it without working it out. An event
    /// outside it is located as before.
    #[inline]
    pub fn enter_date(&mut self, date: &NyDate) {
        self.today = Some(*date);
    }

    /// The New York date of the instant `seconds` and its regular session (open and close in
    /// seconds): the current date's, else `hint`'s where it holds the instant, else worked out
    /// (once a date, live).
    #[inline]
    fn locate(&mut self, seconds: i64, hint: Option<&NyDate>) -> (NaiveDate, (i64, i64)) {
        let today = match &self.today {
            Some(today) if today.contains(seconds) => today,
            _ => self.today.insert(match hint {
                Some(date) if date.contains(seconds) => *date,
                _ => NyDate::containing(seconds),
            }),
        };
        (today.date, (today.session_open, today.session_close))
    }

    fn roll_day(&mut self, date: NaiveDate, fx: &mut Vec<Effect>) {
        if self.day.date == Some(date) {
            return;
        }
        // The book as the last daily-loss check saw it (only bars since): the new day's
        // thresholds can be set without a full check (see `roll_check`).
        let book_as_checked = !self.check_due;
        self.check_due = true;
        let first = self.day.date.is_none();
        // With the book as checked and one position open, equity is the last check's: cash and
        // the position's value at the last bar, in ticks (as `current_equity` reads it).
        let equity = match &self.quick {
            Some(QuickCheck { base, value: Some(value), .. }) if book_as_checked => {
                ticks_to_dollars(*value).map(|value| *base + value)
            }
            _ => None,
        };
        let equity = equity.unwrap_or_else(|| self.equity());
        self.day = DayStats {
            date: Some(date),
            trades_today: 0,
            realized_today: Decimal::ZERO,
            start_equity: equity,
            peak_equity: equity,
            by_symbol: BTreeMap::new(),
        };
        self.recent.clear();
        if first {
            return;
        }
        for slot in self.slots.values_mut() {
            if let Some(s) = slot.strategy.as_mut() {
                s.reset_day();
            }
        }
        // The daily loss limit resets with the day; an emergency halt never does.
        if self.trading_state == TradingState::Reducing {
            self.trading_state = TradingState::Active;
            fx.push(Effect::TradingStateChanged { state: self.trading_state, halt: None });
        }
        fx.push(Effect::DayRolled { date });
        if book_as_checked && self.roll_check() {
            self.check_due = false;
        }
    }

    /// The daily-loss check's figures for a new day whose book is the one the last check saw
    /// (bars alone since), without the check: what [`Engine::check_daily_loss`] would find.
    /// Nothing is realized yet and the peak is the day's start equity, so with one position
    /// open the peak is its value at the last bar and the limit sits at its cost less the
    /// limit; with none, equity is cash and the limit cannot be reached (it is positive).
    /// Whether it could: otherwise the full check runs at the bar's end as before. Every daily
    /// bar rolls the day, so a daily-bar backtest (and a sweep's every combination) takes this
    /// path once per bar.
    fn roll_check(&mut self) -> bool {
        let active = self.trading_state == TradingState::Active;
        match self.quick.as_mut() {
            None => {
                self.open_at_check == 0
                    && self.day.start_equity == self.checked_equity
                    && (!active || self.settings.risk_controls.max_daily_loss > Decimal::ZERO)
            }
            Some(q) => {
                let (Some(value), Some(fresh)) = (q.value, q.fresh_loss_at) else { return false };
                let loss_at = if active { fresh } else { i128::MIN };
                // Reached as the day begins (its realized P&L no longer offsets the position's
                // loss): the full check acts on it now, whichever symbol's bar rolled the day.
                if value <= loss_at {
                    return false;
                }
                q.peak_above = value;
                q.loss_at = loss_at;
                self.equity_version += 1;
                true
            }
        }
    }

    /// Drops a final order from memory. Backtests do so as each order ends, so the scans of
    /// working orders stay short over millions of bars; live keeps final orders for the day, to
    /// accept a late report about one (the database keeps them all).
    pub fn forget_final_order(&mut self, id: &ClientOrderId) {
        if self.orders.get(id).is_some_and(|o| o.status.is_final()) {
            self.orders.remove(id);
        }
    }

    /// Cash plus positions at their last prices.
    pub fn equity(&self) -> Decimal {
        let mut equity = self.cash;
        for p in self.positions.values().filter(|p| !p.is_flat()) {
            equity += self.mark(&p.symbol) * Decimal::from(p.quantity);
        }
        equity
    }

    /// Changes whenever equity may have moved: while it stays the same (bars of symbols without
    /// a position), so does [`Engine::current_equity`].
    pub fn equity_version(&self) -> u64 {
        self.equity_version
    }

    /// [`Engine::equity`], without recomputing it when the last event was a bar that left the
    /// book as the last daily-loss check saw it.
    pub fn current_equity(&self) -> Decimal {
        match &self.quick {
            _ if self.check_due => self.equity(),
            Some(QuickCheck { base, value: Some(value), .. }) => {
                ticks_to_dollars(*value).map_or_else(|| self.equity(), |value| *base + value)
            }
            _ => self.checked_equity,
        }
    }

    /// [`Engine::current_equity`] as cash and the one open position's value in ticks, when the
    /// last event was a bar of that position and the book stands as the last full check saw it:
    /// the sum is left to whoever needs it (a backtest's curve compares the value with integers).
    pub fn current_equity_split(&self) -> Option<(Decimal, i128)> {
        match &self.quick {
            Some(QuickCheck { base, value: Some(value), .. }) if !self.check_due && ticks_fit_dollars(*value) => {
                Some((*base, *value))
            }
            _ => None,
        }
    }

    fn mark(&self, symbol: &Symbol) -> Decimal {
        mark_of(&self.market, &self.positions, symbol)
    }

    pub fn unrealized_pnl(&self) -> Decimal {
        self.positions.values().filter(|p| !p.is_flat()).map(|p| p.unrealized_pnl(self.mark(&p.symbol))).sum()
    }

    /// Realized today plus unrealized now.
    pub fn daily_pnl(&self) -> Decimal {
        self.day.realized_today + self.unrealized_pnl()
    }

    /// Peak-to-current equity drop today, in dollars (positive).
    pub fn drawdown(&self) -> Decimal {
        (self.day.peak_equity - self.equity()).max(Decimal::ZERO)
    }

    fn check_daily_loss(&mut self, fx: &mut Vec<Effect>) {
        // One pass over the open positions for both equity and unrealized P&L.
        let (mut value, mut unrealized, mut open) = (Decimal::ZERO, Decimal::ZERO, 0);
        for p in self.positions.values().filter(|p| !p.is_flat()) {
            open += 1;
            // The position's value once: unrealized is value − cost basis (`Position::unrealized_pnl`).
            let position_value = self.mark(&p.symbol) * Decimal::from(p.quantity);
            value += position_value;
            unrealized += position_value - p.cost_basis;
        }
        let equity = self.cash + value;
        self.checked_equity = equity;
        self.open_at_check = open;
        self.check_due = false;
        self.equity_version += 1;
        if equity > self.day.peak_equity {
            self.day.peak_equity = equity;
        }
        let daily_pnl = self.day.realized_today + unrealized;
        if self.trading_state == TradingState::Active && -daily_pnl >= self.settings.risk_controls.max_daily_loss {
            self.trading_state = TradingState::Reducing;
            fx.push(Effect::TradingStateChanged { state: self.trading_state, halt: None });
        }
        self.quick = self.quick_check_figures();
    }

    /// The figures of a [`QuickCheck`], when exactly one position is open and marked at a
    /// positive price.
    fn quick_check_figures(&self) -> Option<QuickCheck> {
        let mut open = self.positions.values().filter(|p| !p.is_flat());
        let (p, None) = (open.next()?, open.next()) else { return None };
        if self.market.get(&p.symbol).is_none_or(|m| m.last <= Decimal::ZERO) {
            return None;
        }
        // Value in ticks strictly above `peak - cash` sets a new peak; at or below
        // `cost - realized - limit` the loss limit is reached (whole ticks: floor either side).
        let limit = self.settings.risk_controls.max_daily_loss;
        let loss_at = if self.trading_state == TradingState::Active {
            whole_ticks(p.cost_basis - self.day.realized_today - limit, false)?
        } else {
            i128::MIN
        };
        let fresh_loss_at = whole_ticks(p.cost_basis - limit, false);
        Some(QuickCheck {
            symbol: p.symbol.clone(),
            quantity: p.quantity,
            base: self.cash,
            peak_above: whole_ticks(self.day.peak_equity - self.cash, false)?,
            loss_at,
            value: None,
            fresh_loss_at,
        })
    }

    /// [`Engine::check_daily_loss`] for a bar of the one open position closing at `close` ticks:
    /// integer comparisons against the last full check's thresholds; a new peak is written as
    /// the full check would write it, and reaching the limit runs the full check.
    fn quick_check(&mut self, close: i64, fx: &mut Vec<Effect>) {
        let Some(q) = self.quick.as_mut() else { return };
        let value = i128::from(q.quantity) * i128::from(close);
        if close <= 0 || value <= q.loss_at || !ticks_fit_dollars(value) {
            self.check_daily_loss(fx);
            return;
        }
        q.value = Some(value);
        self.equity_version += 1;
        if value > q.peak_above {
            q.peak_above = value;
            self.day.peak_equity = q.base + ticks_to_dollars(value).expect("checked to fit above");
        }
    }

    /// Whether order `id` is known and not final.
    fn is_working(&self, id: &ClientOrderId) -> bool {
        is_working_in(&self.orders, id)
    }

    fn open_orders_of<'a>(&'a self, symbol: &'a Symbol) -> impl Iterator<Item = &'a Order> + 'a {
        self.orders.values().map(Arc::as_ref).filter(move |o| &o.symbol == symbol && !o.status.is_final())
    }

    /// Shares being bought or sold by working orders: a protective order is not a sale in
    /// progress (it only holds the shares at the broker, and is cancelled for any exit).
    fn open_quantity(&self, symbol: &Symbol, side: Side) -> u64 {
        self.open_orders_of(symbol).filter(|o| o.side == side && !o.is_protective()).map(|o| o.remaining()).sum()
    }

    /// The risk gate's view for an order in `symbol`.
    /// Cash not reserved by working buy orders (at their limit, stop or the mark).
    pub fn buying_power(&self) -> Decimal {
        buying_power_of(&self.orders, self.cash, &self.market, &self.positions)
    }

    fn snapshot<'a>(
        &'a self,
        symbol: &Symbol,
        id: &ClientOrderId,
        recent: &'a [RecentOrder],
        now: Timestamp,
    ) -> RiskSnapshot<'a> {
        // Symbols held or being bought, each once (counted in place: few orders work at once).
        let held = |s: &Symbol| self.positions.get(s).is_some_and(|p| !p.is_flat());
        let buying = || self.orders.values().filter(|o| !o.status.is_final() && o.side == Side::Buy);
        let only_bought = buying()
            .enumerate()
            .filter(|(i, o)| !held(&o.symbol) && !buying().take(*i).any(|earlier| earlier.symbol == o.symbol))
            .count();
        let open_positions = (self.positions.values().filter(|p| !p.is_flat()).count() + only_bought) as u32;
        RiskSnapshot {
            trading_state: self.trading_state,
            limits: &self.settings.risk_controls,
            blocked: self.is_blocked(symbol, now),
            last_price: self.market.get(symbol).map(|m| m.last).filter(|p| *p > Decimal::ZERO),
            market_fill: self.market.get(symbol).and_then(|m| m.fill).map(crate::market::Price::to_decimal),
            position: self.positions.get(symbol).map(|p| p.quantity).unwrap_or(0),
            open_buy_quantity: self.open_quantity(symbol, Side::Buy),
            open_sell_quantity: self.open_quantity(symbol, Side::Sell),
            open_positions,
            trades_today: self.day.trades_today,
            daily_pnl: self.daily_pnl(),
            buying_power: self.buying_power(),
            client_order_id_used: self.orders.contains_key(id),
            recent_orders: recent,
        }
    }

    fn next_client_order_id(&mut self, symbol: &Symbol, now: Timestamp) -> ClientOrderId {
        loop {
            self.sequence += 1;
            // `to-SYMBOL-YYYYMMDDHHMMSS-N` (UTC), written where reasons are, then shared.
            let id = &mut self.scratch;
            id.clear();
            id.push_str("to-");
            id.push_str(symbol.as_str());
            id.push('-');
            crate::time::push_compact_utc(id, &now, None);
            id.push('-');
            crate::time::push_digits(id, self.sequence, 1);
            let id = ClientOrderId::generated(id);
            // A restarted engine holds the day's orders but counts from 1 again, and a simulated
            // market resumes at the second it stopped in: an id already in use is skipped.
            if !self.orders.contains_key(&id) {
                return id;
            }
        }
    }

    /// `id` as shared text, made once per strategy.
    fn strategy_id(&mut self, id: &'static str) -> Arc<str> {
        match self.strategy_ids.iter().find(|known| ***known == *id) {
            Some(known) => known.clone(),
            None => {
                let shared: Arc<str> = Arc::from(id);
                self.strategy_ids.push(shared.clone());
                shared
            }
        }
    }

    /// Builds, checks and (when approved) submits an order.
    #[allow(clippy::too_many_arguments)]
    fn place(
        &mut self,
        id: Option<ClientOrderId>,
        symbol: &Symbol,
        side: Side,
        order_type: OrderType,
        tif: TimeInForce,
        quantity: u64,
        limit_price: Option<Decimal>,
        stop_price: Option<Decimal>,
        reason: Option<Arc<str>>,
        strategy_id: Option<Arc<str>>,
        stop_loss: Option<Decimal>,
        legs: Option<crate::orders::ExitLegs>,
        extended_hours: bool,
        now: Timestamp,
        fx: &mut Vec<Effect>,
    ) -> Result<ClientOrderId, Refusal> {
        let id = match id {
            Some(id) => id,
            None => self.next_client_order_id(symbol, now),
        };
        let intent = crate::risk::OrderIntent {
            client_order_id: &id,
            symbol,
            side,
            order_type,
            quantity,
            limit_price,
            stop_price,
        };
        // The recent orders as one slice, read in place.
        self.recent.make_contiguous();
        match crate::risk::check(&intent, &self.snapshot(symbol, &id, self.recent.as_slices().0, now), now) {
            crate::risk::Verdict::Approved => {}
            crate::risk::Verdict::Refused(refusal) => {
                if let Refusal::Risk(r) = &refusal {
                    fx.push(Effect::Violation {
                        rule: r.rule,
                        symbol: symbol.clone(),
                        client_order_id: Some(id.clone()),
                        detail: ViolationDetail::of(r),
                    });
                }
                return Err(refusal);
            }
        }
        let mut order =
            Order::new(id.clone(), symbol.clone(), side, order_type, tif, quantity, limit_price, stop_price, now);
        order.reason = reason;
        order.strategy_id = strategy_id;
        order.stop_loss = stop_loss;
        order.legs = legs;
        order.extended_hours = extended_hours;
        if side == Side::Buy {
            self.day.trades_today += 1;
            self.day.by_symbol.entry(symbol.clone()).or_default().1 += 1;
        }
        self.recent.push_back(RecentOrder {
            client_order_id: id.clone(),
            symbol: symbol.clone(),
            side,
            quantity,
            submitted_at: now,
        });
        let window = chrono::Duration::seconds(self.settings.risk_controls.duplicate_order_window_seconds.into());
        while self.recent.front().is_some_and(|r| now - r.submitted_at >= window) {
            self.recent.pop_front();
        }
        let order = Arc::new(order);
        self.orders.insert(id.clone(), order.clone());
        match side {
            Side::Buy => fx.push(Effect::Submit(order)),
            Side::Sell => self.send_exit(order, now, fx),
        }
        Ok(id)
    }

    /// A DAY sell through the risk gate (closes and strategy exits), at market in the regular
    /// session, else an extended-hours marketable limit ([`Engine::exit_shape`]).
    fn sell_at_market(
        &mut self,
        symbol: &Symbol,
        quantity: u64,
        reason: Option<Arc<str>>,
        strategy_id: Option<Arc<str>>,
        now: Timestamp,
        fx: &mut Vec<Effect>,
    ) -> Result<ClientOrderId, Refusal> {
        let (kind, limit, extended) = self.exit_shape(symbol, now);
        let tif = TimeInForce::Day;
        self.place(
            None,
            symbol,
            Side::Sell,
            kind,
            tif,
            quantity,
            limit,
            None,
            reason,
            strategy_id,
            None,
            None,
            extended,
            now,
            fx,
        )
    }

    /// Requests the cancel of an open order (no-op for final or already pending ones).
    fn request_cancel(&mut self, id: &ClientOrderId, now: Timestamp, fx: &mut Vec<Effect>) -> bool {
        if self.is_held_exit(id) {
            // Never sent: taken back here, nothing asked of the broker (CONTRACT §11).
            return self.withdraw_held(
                id,
                "withdrawn before it was sent: cancelled while it waited for the shares",
                now,
                fx,
            );
        }
        let Some(order) = self.orders.get_mut(id) else { return false };
        if !order.status.is_cancellable() {
            return false;
        }
        if Arc::make_mut(order).apply(crate::orders::OrderEvent::CancelRequested, now).is_ok() {
            fx.push(Effect::Cancel(id.clone()));
            fx.push(Effect::OrderUpdated(order.clone()));
            return true;
        }
        false
    }

    pub(super) fn set_status(
        &mut self,
        symbol: &Symbol,
        status: StrategyStatus,
        reason: Option<String>,
        fx: &mut Vec<Effect>,
    ) {
        if let Some(slot) = self.slots.get_mut(symbol) {
            if slot.status != status {
                slot.status = status;
                fx.push(Effect::WatchUpdated { symbol: symbol.clone(), status, reason });
            }
        }
    }

    /// Whether `symbol` is blocked at `now`.
    pub fn is_blocked(&self, symbol: &Symbol, now: Timestamp) -> bool {
        self.blocks.get(symbol).is_some_and(|b| b.effective_from <= now && b.expires_at.is_none_or(|end| now < end))
    }

    /// Symbols with a running strategy that is not `Closed`: what counts against
    /// `active_watchlist_limit`.
    pub fn active_watchlist(&self) -> usize {
        self.slots.values().filter(|s| s.strategy.is_some() && s.status != StrategyStatus::Closed).count()
    }

    /// The status shown on a position row: the watch status, or `Halted` when no strategy
    /// manages it.
    pub fn position_status(&self, symbol: &Symbol) -> StrategyStatus {
        self.slots.get(symbol).map(|s| s.status).unwrap_or(StrategyStatus::Halted)
    }

    /// The stop and target `symbol`'s position is managed with by its strategy, while a
    /// strategy manages it (`Buy`, `Hold` or `Sell`).
    fn strategy_levels(&self, symbol: &Symbol) -> Option<Levels> {
        let slot = self.slots.get(symbol)?;
        if !matches!(slot.status, StrategyStatus::Buy | StrategyStatus::Hold | StrategyStatus::Sell) {
            return None;
        }
        slot.strategy.as_ref()?.levels()
    }
}

#[cfg(test)]
mod tests;

/// [`Engine::auto_watch_picks`] from the allocator's settings and what the last halt stopped
/// (the live feed reads both from the published view).
pub fn auto_watch_picks(
    ranked: &[Symbol],
    allocator: &crate::settings::StrategyAllocatorSettings,
    halt_stopped: impl Fn(&Symbol) -> bool,
) -> Vec<Symbol> {
    if !allocator.auto_watch {
        return Vec::new();
    }
    ranked.iter().filter(|s| !halt_stopped(s)).take(allocator.auto_watch_top_n as usize).cloned().collect()
}
