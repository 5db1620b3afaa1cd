//! The live side of the trading engine: [`EngineHandle`] sends commands to the runner (the only
//! writer of trading state) and waits for the reply; [`EngineView`] is the consistent picture
//! the read endpoints serve, published after every batch of events.

mod held;
mod runner;

pub use runner::spawn_engine;
use runner::Input;

use rust_decimal::Decimal;
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot, watch};
use tradeops_core::engine::{Command, CommandError, Halt, Reply, StrategyStatus};
use tradeops_core::positions::{AlertLevel, Position};
use tradeops_core::risk::TradingState;

/// Sends commands to the engine runner.
#[derive(Clone)]
pub struct EngineHandle {
    tx: mpsc::Sender<Input>,
    view: watch::Receiver<Arc<EngineView>>,
}

/// The engine runner stopped (shutting down).
#[derive(Debug)]
pub struct EngineGone;

impl EngineHandle {
    pub async fn send(&self, command: Command) -> Result<Result<Reply, CommandError>, EngineGone> {
        let (reply, answer) = oneshot::channel();
        self.tx.send(Input::Command(command, reply)).await.map_err(|_| EngineGone)?;
        answer.await.map_err(|_| EngineGone)
    }

    /// A round trip through the runner to the execution broker: how long a command waits to be
    /// taken up and answered, and the broker's count of working orders.
    pub async fn probe(&self) -> Result<(std::time::Duration, usize), EngineGone> {
        let started = tokio::time::Instant::now();
        let (reply, answer) = oneshot::channel();
        self.tx.send(Input::Probe(reply)).await.map_err(|_| EngineGone)?;
        let open = answer.await.map_err(|_| EngineGone)?;
        Ok((started.elapsed(), open))
    }

    pub fn view(&self) -> Arc<EngineView> {
        self.view.borrow().clone()
    }

    pub fn subscribe(&self) -> watch::Receiver<Arc<EngineView>> {
        self.view.clone()
    }

    /// The market feed stepped to `at` (`bar_closed`: a minute just completed). Waits for room
    /// in the runner's queue, not for the step to be handled.
    pub async fn market_step(&self, at: tradeops_core::Timestamp, bar_closed: bool) -> Result<(), EngineGone> {
        self.tx.send(Input::MarketStep { at, bar_closed }).await.map_err(|_| EngineGone)
    }
}

/// A position as the read endpoints show it.
#[derive(Clone, Debug, PartialEq)]
pub struct PositionView {
    pub position: Position,
    pub mark: Decimal,
    pub status: StrategyStatus,
    pub alert_level: AlertLevel,
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
        }
    }
}
