//! The trading service: one typed method per operator command of the engine (orders, positions,
//! the watchlist and blocks, the emergency halt and resume), each answering with a typed result
//! or a [`DomainError`]. It sends through the [`EngineHandle`], whose runner is the only writer
//! of trading state, and turns the engine's untyped [`Reply`] into the result the command
//! promises; the HTTP routes shape those results into responses.

use crate::domain::watchlist::{BlockScope, WatchSource};
use crate::domain::{DomainError, DomainResult};
use crate::engine::{EngineGone, EngineHandle};
use tradeops_core::engine::{Block, Command, ManualOrder, OrderPreview, Reply, StrategyStatus};
use tradeops_core::orders::{ClientOrderId, Order, OrderStatus};
use tradeops_core::risk::TradingState;
use tradeops_core::{Symbol, Timestamp};

/// An order the engine accepted for cancelling, and the status it is in now.
#[derive(Clone, Debug, PartialEq)]
pub struct Cancelled {
    pub client_order_id: ClientOrderId,
    pub status: OrderStatus,
}

/// The closing order a position close placed.
#[derive(Clone, Debug, PartialEq)]
pub struct Closing {
    pub symbol: Symbol,
    pub client_order_id: ClientOrderId,
    pub status: OrderStatus,
}

/// A symbol's strategy after a halt, stop or restart (`previous` when the engine names it).
#[derive(Clone, Debug, PartialEq)]
pub struct StrategyChange {
    pub symbol: Symbol,
    pub previous: Option<StrategyStatus>,
    pub status: StrategyStatus,
}

/// A watch request's outcome: `already` when the symbol was watched before.
#[derive(Clone, Debug, PartialEq)]
pub struct Watched {
    pub symbol: Symbol,
    pub already: bool,
    pub time_added: Timestamp,
}

/// The emergency halt as latched.
#[derive(Clone, Debug, PartialEq)]
pub struct Halted {
    pub liquidation_requested: bool,
    pub timestamp: Timestamp,
}

/// The strategies the halt stopped: restarted (with their new status) and skipped (why).
#[derive(Clone, Debug, PartialEq)]
pub struct StrategiesResumed {
    pub restarted: Vec<(Symbol, StrategyStatus)>,
    pub skipped: Vec<(Symbol, String)>,
}

/// Operator commands to the engine, typed.
pub struct TradingService<'a> {
    engine: &'a EngineHandle,
}

impl From<EngineGone> for DomainError {
    fn from(_: EngineGone) -> Self {
        DomainError::EngineStopped
    }
}

/// The engine answered a command with a reply of another command: a bug.
fn unexpected(reply: Reply) -> DomainError {
    DomainError::internal(format!("unexpected engine reply {reply:?}"))
}

impl<'a> TradingService<'a> {
    pub fn new(engine: &'a EngineHandle) -> Self {
        TradingService { engine }
    }

    async fn command(&self, command: Command) -> DomainResult<Reply> {
        Ok(self.engine.send(command).await??)
    }

    /// Places a manual order; the order as the engine recorded it.
    pub async fn place_order(&self, order: ManualOrder) -> DomainResult<Box<Order>> {
        match self.command(Command::PlaceOrder(order)).await? {
            Reply::Order(order) => Ok(order),
            other => Err(unexpected(other)),
        }
    }

    /// What the risk gate would answer to `order` sent now, without placing it: the same gate,
    /// snapshot and refusals as [`TradingService::place_order`], and nothing written. A closed
    /// market, an unknown symbol or an unsound order is refused as the order would be.
    pub async fn preview_order(&self, order: ManualOrder) -> DomainResult<OrderPreview> {
        Ok(self.engine.preview(order).await??)
    }

    pub async fn cancel_order(&self, client_order_id: ClientOrderId) -> DomainResult<Cancelled> {
        match self.command(Command::CancelOrder { client_order_id }).await? {
            Reply::Cancel { client_order_id, status } => Ok(Cancelled { client_order_id, status }),
            other => Err(unexpected(other)),
        }
    }

    /// Sells `quantity` of the position at market (default: all of it).
    pub async fn close_position(&self, symbol: Symbol, quantity: Option<u64>) -> DomainResult<Closing> {
        match self.command(Command::ClosePosition { symbol, quantity }).await? {
            Reply::Close { symbol, client_order_id, status } => Ok(Closing { symbol, client_order_id, status }),
            other => Err(unexpected(other)),
        }
    }

    /// The strategy stops managing the position; its working orders are cancelled.
    pub async fn halt_position(&self, symbol: Symbol, reason: String) -> DomainResult<StrategyChange> {
        self.strategy_change(Command::HaltPosition { symbol, reason }).await
    }

    /// Puts the symbol on the watchlist and starts its strategy.
    pub async fn watch(&self, symbol: Symbol, source: WatchSource) -> DomainResult<Watched> {
        match self.command(Command::Watch { symbol, source: source.as_str().to_string() }).await? {
            Reply::Watch { symbol, already, time_added } => Ok(Watched { symbol, already, time_added }),
            other => Err(unexpected(other)),
        }
    }

    pub async fn stop_watch(&self, symbol: Symbol, reason: String) -> DomainResult<StrategyChange> {
        self.strategy_change(Command::StopWatch { symbol, reason }).await
    }

    /// A closed strategy becomes active again.
    pub async fn restart(&self, symbol: Symbol) -> DomainResult<StrategyChange> {
        self.strategy_change(Command::Restart { symbol }).await
    }

    async fn strategy_change(&self, command: Command) -> DomainResult<StrategyChange> {
        match self.command(command).await? {
            Reply::Status { symbol, previous, status } => Ok(StrategyChange { symbol, previous, status }),
            other => Err(unexpected(other)),
        }
    }

    /// Blocks the symbol (replacing an active block); the block as placed.
    pub async fn block(
        &self,
        symbol: Symbol,
        scope: BlockScope,
        reason: String,
        actor: String,
    ) -> DomainResult<(Symbol, Block)> {
        let command = Command::Block { symbol, scope: scope.as_str().to_string(), reason, actor };
        match self.command(command).await? {
            Reply::Blocked { symbol, block } => Ok((symbol, block)),
            other => Err(unexpected(other)),
        }
    }

    pub async fn unblock(&self, symbol: Symbol, reason: String, actor: String) -> DomainResult<()> {
        self.command(Command::Unblock { symbol, reason, actor }).await?;
        Ok(())
    }

    /// Emergency Liquidate & Halt.
    pub async fn emergency_halt(&self, reason: String, actor: String) -> DomainResult<Halted> {
        match self.command(Command::EmergencyHalt { reason, actor }).await? {
            Reply::Halted { liquidation_requested, timestamp } => Ok(Halted { liquidation_requested, timestamp }),
            other => Err(unexpected(other)),
        }
    }

    /// Ends the emergency halt; the trading state after it.
    pub async fn resume(&self, reason: String, actor: String) -> DomainResult<TradingState> {
        match self.command(Command::Resume { reason, actor }).await? {
            Reply::Resumed { state } => Ok(state),
            other => Err(unexpected(other)),
        }
    }

    /// Restarts exactly the strategies the emergency halt stopped.
    pub async fn resume_strategies(&self) -> DomainResult<StrategiesResumed> {
        match self.command(Command::RestartHaltStopped).await? {
            Reply::HaltStoppedRestarted { restarted, skipped } => Ok(StrategiesResumed { restarted, skipped }),
            other => Err(unexpected(other)),
        }
    }
}
