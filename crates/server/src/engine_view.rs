//! The engine's state as the read endpoints, the health probes and the `account.updated` event
//! see it: [`EngineView`] (with its [`PositionView`]s), a plain value the engine runner publishes
//! after every batch. A leaf: it names no other module of the service, so the event bus and the
//! health monitor can carry it without depending on the engine.

use rust_decimal::Decimal;
use tradeops_core::engine::{Halt, Protection, StrategyStatus};
use tradeops_core::positions::{AlertLevel, Position};
use tradeops_core::risk::TradingState;
use tradeops_core::strategy::Levels;

/// A position as the read endpoints show it.
#[derive(Clone, Debug, PartialEq)]
pub struct PositionView {
    pub position: Position,
    pub mark: Decimal,
    pub status: StrategyStatus,
    pub alert_level: AlertLevel,
    /// The stop and target its strategy manages it with (none when no strategy does).
    pub levels: Option<Levels>,
    /// Its symbol's trading is halted (CONTRACT §11): a close waits for the reopen.
    pub halted: bool,
    /// What protects it: protective orders at the broker, the engine, or nothing (§11).
    pub protection: Protection,
}

impl PositionView {
    /// What the position stands to lose from its mark: down to its stop (nothing when the stop
    /// is at or above the mark), or its whole market value when no stop protects it.
    pub fn open_risk(&self) -> Decimal {
        let shares = Decimal::from(self.position.quantity);
        match self.levels {
            Some(levels) => shares * (self.mark - levels.stop_loss).max(Decimal::ZERO),
            None => shares * self.mark,
        }
    }
}

/// The engine's state after the last batch.
#[derive(Clone, Debug, PartialEq)]
pub struct EngineView {
    pub trading_state: TradingState,
    pub halt: Option<Halt>,
    /// Watched symbols whose strategy the emergency halt stopped, not yet restarted.
    pub halt_stopped: Vec<tradeops_core::Symbol>,
    pub positions: Vec<PositionView>,
    pub cash: Decimal,
    pub equity: Decimal,
    /// Cash minus what working buy orders reserve.
    pub buying_power: Decimal,
    pub realized_today: Decimal,
    pub unrealized: Decimal,
    pub daily_pnl: Decimal,
    pub drawdown: Decimal,
    pub start_equity: Decimal,
    pub trades_today: u32,
    /// The session's date and, by symbol, realized P&L (net of fees) and entries.
    pub session: Option<chrono::NaiveDate>,
    pub by_symbol: Vec<(tradeops_core::Symbol, Decimal, u32)>,
    pub open_orders: usize,
    /// Orders the execution broker is still working.
    pub broker_open_orders: usize,
    /// Whether the trading state (the halt latch, cash, day counters) as shown is stored; false
    /// while the database is unavailable, until it is back.
    pub state_persisted: bool,
    /// Orders, positions and violations held in memory during a database outage.
    pub unsaved_writes: usize,
    /// `OK`, `PENDING`, `MISMATCH` or `FAILED`.
    pub reconciliation_status: &'static str,
    pub reconciliation_detail: String,
    /// Why the execution broker's last call failed as unavailable, while it has not answered
    /// since (new operator orders are refused meanwhile).
    pub venue_unavailable: Option<String>,
    /// The symbols the engine follows: watched with a strategy, held, or with working orders
    /// (what a streaming market-data source subscribes to).
    pub followed: Vec<tradeops_core::Symbol>,
    /// The execution broker's name (`paper`, `alpaca`).
    pub broker: &'static str,
    /// A real broker's own account figures as last read, with the engine's cash then (`None`
    /// for the paper broker, whose account is the engine's books).
    pub venue_account: Option<(tradeops_brokers::VenueAccount, Decimal)>,
}

impl EngineView {
    /// The open risk of every open position (see [`PositionView::open_risk`]).
    pub fn open_risk(&self) -> Decimal {
        self.positions.iter().map(PositionView::open_risk).sum()
    }

    /// Cash, equity, buying power and the day's P&L as the account screen shows them. Cash,
    /// equity and P&L are the engine's books, which follow every fill at once and whose cash is
    /// the broker's (reconciled). The buying power of a broker that keeps an account is its own
    /// (its margin rules), as last read, moved by the cash spent or received since; else the
    /// engine's.
    pub fn account_figures(&self) -> (Decimal, Decimal, Decimal, Decimal) {
        let buying_power = match &self.venue_account {
            Some((a, cash_then)) => (a.buying_power + (self.cash - cash_then)).max(Decimal::ZERO),
            None => self.buying_power,
        };
        (self.cash, self.equity, buying_power, self.equity - self.start_equity)
    }
}

impl Default for EngineView {
    fn default() -> Self {
        EngineView {
            trading_state: TradingState::Active,
            halt: None,
            halt_stopped: Vec::new(),
            positions: Vec::new(),
            cash: Decimal::ZERO,
            equity: Decimal::ZERO,
            buying_power: Decimal::ZERO,
            realized_today: Decimal::ZERO,
            unrealized: Decimal::ZERO,
            daily_pnl: Decimal::ZERO,
            drawdown: Decimal::ZERO,
            start_equity: Decimal::ZERO,
            trades_today: 0,
            session: None,
            by_symbol: Vec::new(),
            open_orders: 0,
            broker_open_orders: 0,
            state_persisted: true,
            unsaved_writes: 0,
            reconciliation_status: "PENDING",
            reconciliation_detail: "the engine is starting".into(),
            venue_unavailable: None,
            followed: Vec::new(),
            broker: "paper",
            venue_account: None,
        }
    }
}
