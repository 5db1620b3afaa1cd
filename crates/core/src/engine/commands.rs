//! Operator commands: each answers with a [`Reply`] or a [`CommandError`] naming the contract's
//! error, and a refused command changes nothing (except the violation row of a risk refusal).

use super::{Effect, Engine, Halt, Slot, StrategyStatus};
use crate::market::Side;
use crate::orders::{ClientOrderId, Order, OrderStatus, OrderType, TimeInForce};
use crate::risk::{Refusal, RiskFigure, RiskRefusal, RiskRule, TradingState, ViolationDetail};
use crate::settings::Settings;
use crate::symbol::Symbol;
use crate::time::Timestamp;
use rust_decimal::Decimal;

/// A manual order (`POST /api/orders`).
#[derive(Clone, Debug, PartialEq)]
pub struct ManualOrder {
    pub client_order_id: Option<ClientOrderId>,
    pub symbol: Symbol,
    pub side: Side,
    pub quantity: u64,
    pub order_type: OrderType,
    pub limit_price: Option<Decimal>,
    pub stop_price: Option<Decimal>,
    pub time_in_force: TimeInForce,
    pub reason: Option<String>,
    /// Exit legs to rest at the broker once a `BUY` fills (CONTRACT §11).
    pub legs: Option<crate::orders::ExitLegs>,
    /// Work the order in the extended sessions too (CONTRACT §12): a `LIMIT` `DAY` order only.
    pub extended_hours: bool,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Command {
    PlaceOrder(ManualOrder),
    CancelOrder {
        client_order_id: ClientOrderId,
    },
    /// Market sell of `quantity` (default: the whole position).
    ClosePosition {
        symbol: Symbol,
        quantity: Option<u64>,
    },
    /// The strategy stops managing the position; its working orders are cancelled.
    HaltPosition {
        symbol: Symbol,
        reason: String,
    },
    /// Put the symbol on the watchlist and start its strategy. `source` is `MANUAL`, `RADAR`
    /// (the allocator: its refusals leave no violation row) or `API`.
    Watch {
        symbol: Symbol,
        source: String,
    },
    /// Stop the symbol's strategy (`Closed`; `Halted` when a position stays open).
    StopWatch {
        symbol: Symbol,
        reason: String,
    },
    /// `Closed` → `Active`.
    Restart {
        symbol: Symbol,
    },
    /// `scope` `TODAY` (until the end of the trading day) or `PERMANENT`.
    Block {
        symbol: Symbol,
        scope: String,
        reason: String,
        actor: String,
    },
    Unblock {
        symbol: Symbol,
        reason: String,
        actor: String,
    },
    EmergencyHalt {
        reason: String,
        actor: String,
    },
    Resume {
        reason: String,
        actor: String,
    },
    /// Restart exactly the strategies the emergency halt stopped ([`Engine::halt_stopped`]);
    /// refused while `HALTED`. A symbol that cannot be restarted is skipped with the reason.
    RestartHaltStopped,
    UpdateSettings(Box<Settings>),
}

/// A successful command's answer.
#[derive(Clone, Debug, PartialEq)]
pub enum Reply {
    Order(Box<Order>),
    Cancel {
        client_order_id: ClientOrderId,
        status: OrderStatus,
    },
    Close {
        symbol: Symbol,
        client_order_id: ClientOrderId,
        status: OrderStatus,
    },
    Status {
        symbol: Symbol,
        previous: Option<StrategyStatus>,
        status: StrategyStatus,
    },
    Halted {
        liquidation_requested: bool,
        timestamp: Timestamp,
    },
    /// `already` when the symbol was watched before; `time_added` when it was put on the list.
    Watch {
        symbol: Symbol,
        already: bool,
        time_added: Timestamp,
    },
    Blocked {
        symbol: Symbol,
        block: super::Block,
    },
    Resumed {
        state: TradingState,
    },
    /// The strategies the halt stopped: restarted (with their new status) and skipped (why).
    HaltStoppedRestarted {
        restarted: Vec<(Symbol, StrategyStatus)>,
        skipped: Vec<(Symbol, String)>,
    },
    Done,
}

/// Why a command was refused, by contract error code.
#[derive(Clone, Debug, PartialEq)]
pub enum CommandError {
    /// `EMERGENCY_HALT_ACTIVE`
    Halted,
    /// `RISK_BLOCKED`
    Risk(Box<RiskRefusal>),
    /// `DUPLICATE_ORDER_BLOCKED`
    Duplicate { existing: ClientOrderId, message: String },
    /// `VALIDATION_ERROR`
    Invalid { field: &'static str, reason: String },
    /// `NOT_FOUND`
    NotFound(String),
    /// `POSITION_NOT_FOUND`
    PositionNotFound(Symbol),
    /// `ORDER_NOT_CANCELLABLE`
    NotCancellable { status: OrderStatus },
    /// `MARKET_CLOSED`
    MarketClosed { next_open: Timestamp },
    /// `OUTSIDE_REGULAR_SESSION`: outside 09:30–16:00 only a `LIMIT` `DAY` order marked
    /// `extended_hours` trades (CONTRACT §12); `regular_open` is the next regular session's open.
    OutsideRegularSession { session: crate::calendar::SessionPhase, regular_open: Timestamp },
    /// `SYMBOL_HALTED`: a market or stop order, or a close, in a symbol whose trading is halted
    /// (it would fill at the reopen's price, whatever the gap).
    SymbolHalted { symbol: Symbol, halt: crate::market::SymbolHalt },
    /// The change could not be stored, so it was not made (an order not written ahead is not
    /// sent): `SERVICE_UNAVAILABLE` when the database is unavailable, else `INTERNAL_ERROR`. Set
    /// by the live runner, never by the engine.
    NotPersisted { reason: String, unavailable: bool },
    /// The engine's term is over (a newer engine took its database over: fencing, CONTRACT §10):
    /// nothing of the command was stored or sent, and this engine takes no more
    /// (`SERVICE_UNAVAILABLE`). Set by the live runner, never by the engine.
    EngineStopped,
    /// The execution broker cannot be reached, so a new order is not placed (`BROKER_UNAVAILABLE`,
    /// 503 with `Retry-After`): `retry_after` is the venue's own wait when it gave one;
    /// `client_order_id` the order written ahead whose submit found the venue unreachable (it is
    /// looked up, never sent again, and marked `REJECTED` unless the venue had received it),
    /// `None` when nothing was written. Set by the live runner, never by the engine.
    BrokerUnavailable {
        reason: String,
        retry_after: Option<std::time::Duration>,
        client_order_id: Option<ClientOrderId>,
    },
}

/// `VALIDATION_ERROR` naming `extended_hours` for an order marked so that is not a `LIMIT`
/// `DAY` order: no venue works another kind outside the regular session (CONTRACT §12).
pub(super) fn check_extended_hours(order: &ManualOrder) -> Result<(), CommandError> {
    if order.extended_hours && (order.order_type != OrderType::Limit || order.time_in_force != TimeInForce::Day) {
        return Err(CommandError::Invalid {
            field: "extended_hours",
            reason: "needs order_type LIMIT and time_in_force DAY: the only order a venue works outside 09:30-16:00"
                .into(),
        });
    }
    Ok(())
}

impl From<Refusal> for CommandError {
    fn from(r: Refusal) -> Self {
        match r {
            Refusal::Halted => CommandError::Halted,
            Refusal::Risk(r) => CommandError::Risk(r),
            Refusal::Duplicate { existing, message } => CommandError::Duplicate { existing, message },
            Refusal::Invalid { field, reason } => CommandError::Invalid { field, reason },
        }
    }
}

impl Engine {
    pub(super) fn on_command(
        &mut self,
        command: Command,
        now: Timestamp,
        fx: &mut Vec<Effect>,
    ) -> Result<Reply, CommandError> {
        match command {
            Command::PlaceOrder(m) => {
                check_extended_hours(&m)?;
                self.ensure_open(now)?;
                self.ensure_session(m.order_type, m.extended_hours, now)?;
                self.ensure_trades(&m.symbol, m.order_type)?;
                self.check_legs(&m, None)?;
                let id = self.place(
                    m.client_order_id,
                    &m.symbol,
                    m.side,
                    m.order_type,
                    m.time_in_force,
                    m.quantity,
                    m.limit_price,
                    m.stop_price,
                    m.reason.map(Into::into),
                    None,
                    None,
                    m.legs,
                    m.extended_hours,
                    now,
                    fx,
                )?;
                if m.side == Side::Buy && !self.slots.contains_key(&m.symbol) {
                    // A manual buy of an unwatched symbol is managed by hand.
                    self.slots.insert(m.symbol.clone(), Slot::manual());
                }
                Ok(Reply::Order(Box::new(Order::clone(&self.orders[&id]))))
            }
            Command::CancelOrder { client_order_id } => {
                let status = self
                    .orders
                    .get(&client_order_id)
                    .map(|o| o.status)
                    .ok_or_else(|| CommandError::NotFound(format!("No order {client_order_id}")))?;
                if status == OrderStatus::PendingCancel {
                    // The cancel may have been lost (a restart, a broker that never answered): it
                    // is sent again, and the answer stays the contract's ORDER_NOT_CANCELLABLE
                    // for an order already PENDING_CANCEL (CONTRACT §2). A second cancel of a
                    // cancelled order is refused by the broker, which the engine ignores.
                    fx.push(Effect::Cancel(client_order_id.clone()));
                    return Err(CommandError::NotCancellable { status });
                }
                if !status.is_cancellable() {
                    return Err(CommandError::NotCancellable { status });
                }
                self.request_cancel(&client_order_id, now, fx);
                Ok(Reply::Cancel { status: self.orders[&client_order_id].status, client_order_id })
            }
            Command::ClosePosition { symbol, quantity } => {
                if quantity == Some(0) {
                    // Malformed on its face, whether or not the position exists.
                    return Err(CommandError::Invalid { field: "quantity", reason: "must be at least 1".into() });
                }
                let held = self.positions.get(&symbol).map(|p| p.quantity).unwrap_or(0);
                if held == 0 {
                    return Err(CommandError::PositionNotFound(symbol));
                }
                let quantity = quantity.unwrap_or(held);
                if quantity == 0 || quantity > held {
                    return Err(CommandError::Invalid {
                        field: "quantity",
                        reason: format!("must be between 1 and {held}"),
                    });
                }
                self.ensure_open(now)?;
                self.ensure_trades(&symbol, OrderType::Market)?;
                let reason = Some(format!("manual close of {quantity} {symbol}"));
                let id = self.sell_at_market(&symbol, quantity, reason.map(Into::into), None, now, fx)?;
                if let Some(slot) = self.slots.get_mut(&symbol) {
                    slot.exit_orders.insert(id.clone());
                }
                Ok(Reply::Close { symbol, status: self.orders[&id].status, client_order_id: id })
            }
            Command::HaltPosition { symbol, reason } => {
                if self.positions.get(&symbol).is_none_or(|p| p.is_flat()) {
                    return Err(CommandError::PositionNotFound(symbol));
                }
                self.stop_strategy(&symbol, StrategyStatus::Halted, Some(reason), now, fx);
                Ok(Reply::Status { previous: None, status: StrategyStatus::Halted, symbol })
            }
            Command::Watch { symbol, source } => {
                if self.trading_state == TradingState::Halted {
                    return Err(CommandError::Halted);
                }
                if let Some(slot) =
                    self.slots.get(&symbol).filter(|s| s.status != StrategyStatus::Closed && s.strategy.is_some())
                {
                    return Ok(Reply::Watch { time_added: slot.added_at.unwrap_or(now), already: true, symbol });
                }
                let record = source != "RADAR";
                if let Some(block) = self.blocks.get(&symbol).filter(|_| self.is_blocked(&symbol, now)) {
                    let current = RiskFigure::Block { block_scope: block.scope.clone(), reason: block.reason.clone() };
                    let refusal = RiskRefusal {
                        rule: RiskRule::SymbolBlocked,
                        limit: RiskFigure::None,
                        current,
                        message: format!("{symbol} is blocked: {}", block.reason),
                    };
                    return Err(self.refuse(refusal, &symbol, record, fx));
                }
                let limit = self.settings.risk_controls.active_watchlist_limit;
                let active = self.active_watchlist();
                if active >= limit as usize {
                    let refusal = RiskRefusal {
                        rule: RiskRule::ActiveWatchlistLimit,
                        limit: RiskFigure::Count(limit.into()),
                        current: RiskFigure::Count(active as u64),
                        message: format!("The active watchlist is full ({active} of {limit})"),
                    };
                    return Err(self.refuse(refusal, &symbol, record, fx));
                }
                let strategy_id = self.settings.strategy_allocator.default_strategy_id.clone();
                self.start_strategy(&symbol, fx)?;
                // Watched again by hand: no longer the halt's to restart.
                self.forget_halt_stopped(&symbol, fx);
                let version = self.slots[&symbol].strategy.as_ref().map(|s| s.version()).unwrap_or("-").to_string();
                if let Some(slot) = self.slots.get_mut(&symbol) {
                    slot.added_at = Some(now);
                }
                fx.push(Effect::WatchStarted {
                    symbol: symbol.clone(),
                    source,
                    strategy_id,
                    strategy_version: version,
                    at: now,
                });
                Ok(Reply::Watch { symbol, already: false, time_added: now })
            }
            Command::StopWatch { symbol, reason } => {
                let previous = self
                    .slots
                    .get(&symbol)
                    .map(|s| s.status)
                    .ok_or_else(|| CommandError::NotFound(format!("{symbol} is not on the watchlist")))?;
                let held = self.positions.get(&symbol).is_some_and(|p| !p.is_flat());
                let status = if held { StrategyStatus::Halted } else { StrategyStatus::Closed };
                if previous != StrategyStatus::Closed {
                    self.stop_strategy(&symbol, status, Some(reason), now, fx);
                }
                // The operator stopped it on purpose: restarting what the halt stopped leaves it.
                self.forget_halt_stopped(&symbol, fx);
                let now_status = self.slots.get(&symbol).map(|s| s.status).unwrap_or(status);
                Ok(Reply::Status { symbol, previous: Some(previous), status: now_status })
            }
            Command::Restart { symbol } => {
                let reply = self.restart(&symbol, now, fx)?;
                self.forget_halt_stopped(&symbol, fx);
                Ok(reply)
            }
            Command::RestartHaltStopped => {
                if self.trading_state == TradingState::Halted {
                    return Err(CommandError::Halted);
                }
                let mut restarted = Vec::new();
                let mut skipped = Vec::new();
                for symbol in std::mem::take(&mut self.halt_stopped) {
                    match self.restart(&symbol, now, fx) {
                        Ok(Reply::Status { previous: Some(previous), status, .. }) if previous == status => {
                            let why = format!("already running ({}): restarted since the halt", status.as_str());
                            skipped.push((symbol, why));
                        }
                        Ok(Reply::Status { status, .. }) => restarted.push((symbol, status)),
                        Ok(_) => restarted.push((symbol, StrategyStatus::Active)),
                        Err(CommandError::NotFound(_)) => {
                            skipped.push((symbol, "no longer on the watchlist".into()));
                        }
                        Err(CommandError::Risk(r)) => skipped.push((symbol, r.message)),
                        Err(CommandError::Invalid { field, reason }) => {
                            skipped.push((symbol, format!("its strategy cannot start: {field} {reason}")))
                        }
                        Err(e) => skipped.push((symbol, format!("it cannot be restarted: {e:?}"))),
                    }
                }
                if !restarted.is_empty() || !skipped.is_empty() {
                    fx.push(Effect::HaltStoppedChanged { symbols: Vec::new() });
                }
                Ok(Reply::HaltStoppedRestarted { restarted, skipped })
            }
            Command::Block { symbol, scope, reason, actor } => {
                let expires_at = match scope.as_str() {
                    "PERMANENT" => None,
                    _ => Some(self.calendar().end_of_trading_day(now)),
                };
                let block = super::Block { scope, reason: reason.clone(), actor, effective_from: now, expires_at };
                self.blocks.insert(symbol.clone(), block.clone());
                fx.push(Effect::BlockPlaced { symbol: symbol.clone(), block: block.clone() });
                if self.slots.get(&symbol).is_some_and(|s| s.status != StrategyStatus::Closed) {
                    let held = self.positions.get(&symbol).is_some_and(|p| !p.is_flat());
                    let status = if held { StrategyStatus::Halted } else { StrategyStatus::Closed };
                    self.stop_strategy(&symbol, status, Some(format!("blocked: {reason}")), now, fx);
                }
                Ok(Reply::Blocked { symbol, block })
            }
            Command::Unblock { symbol, reason, actor } => {
                if !self.is_blocked(&symbol, now) {
                    return Err(CommandError::NotFound(format!("{symbol} is not blocked")));
                }
                self.blocks.remove(&symbol);
                fx.push(Effect::BlockLifted { symbol, reason, actor });
                Ok(Reply::Done)
            }
            Command::EmergencyHalt { reason, actor } => Ok(self.emergency_halt(reason, actor, now, fx)),
            Command::Resume { .. } => {
                if self.trading_state != TradingState::Halted {
                    return Ok(Reply::Resumed { state: self.trading_state });
                }
                self.trading_state = TradingState::Active;
                self.exit_backoff.clear();
                self.halt = None;
                fx.push(Effect::TradingStateChanged { state: TradingState::Active, halt: None });
                self.check_daily_loss(fx);
                Ok(Reply::Resumed { state: self.trading_state })
            }
            Command::UpdateSettings(settings) => {
                self.settings = *settings;
                Ok(Reply::Done)
            }
        }
    }

    /// A risk refusal of a command, recorded as a violation row when `record`.
    fn refuse(&self, refusal: RiskRefusal, symbol: &Symbol, record: bool, fx: &mut Vec<Effect>) -> CommandError {
        if record {
            fx.push(Effect::Violation {
                rule: refusal.rule,
                symbol: symbol.clone(),
                client_order_id: None,
                detail: ViolationDetail::of(&refusal),
            });
        }
        CommandError::Risk(Box::new(refusal))
    }

    /// A manual order's exit legs against its side and reference price (CONTRACT §11): legs
    /// protect a `BUY`; the stop is below the reference price (a stop-limit's limit at or
    /// below its stop) and the take-profit above it; without a price to check them by, only
    /// what needs none. `mark`: the last trade a preview was given.
    pub(super) fn check_legs(&self, m: &ManualOrder, mark: Option<Decimal>) -> Result<(), CommandError> {
        let Some(legs) = m.legs else { return Ok(()) };
        let invalid = |field: &'static str, reason: String| Err(CommandError::Invalid { field, reason });
        if m.side != Side::Buy {
            return invalid("stop_loss", "exit legs protect a BUY; a SELL takes none".into());
        }
        let market = self.market.get(&m.symbol);
        let last = mark.or(market.map(|s| s.last));
        let fill = market.and_then(|s| s.fill).map(crate::market::Price::to_decimal);
        let reference = crate::risk::reference_price(m.limit_price, m.stop_price, fill, last);
        if legs.stop_limit_price.is_some_and(|l| l > legs.stop_price) {
            return invalid(
                "stop_loss.limit_price",
                format!("must be at or below the stop price {} (a sell stop-limit)", legs.stop_price.normalize()),
            );
        }
        let Some(reference) = reference else { return Ok(()) };
        if legs.stop_price >= reference {
            return invalid(
                "stop_loss.stop_price",
                format!("must be below the entry's reference price {}", reference.normalize()),
            );
        }
        if let Some(target) = legs.take_profit.filter(|t| *t <= reference) {
            return invalid(
                "take_profit.limit_price",
                format!(
                    "must be above the entry's reference price {} (got {})",
                    reference.normalize(),
                    target.normalize()
                ),
            );
        }
        Ok(())
    }

    pub(super) fn ensure_open(&self, now: Timestamp) -> Result<(), CommandError> {
        let calendar = self.calendar();
        if calendar.is_open(now) {
            Ok(())
        } else {
            Err(CommandError::MarketClosed { next_open: calendar.next_open(now) })
        }
    }

    /// `OUTSIDE_REGULAR_SESSION` for an order of `kind` the venue would not work now: outside the
    /// regular session only an extended-hours limit trades (CONTRACT §12). The calendar's
    /// `ALWAYS_OPEN` is regular all day.
    pub(super) fn ensure_session(
        &self,
        kind: OrderType,
        extended_hours: bool,
        now: Timestamp,
    ) -> Result<(), CommandError> {
        let calendar = self.calendar();
        let session = calendar.phase(now);
        if session.is_extended() && !(kind == OrderType::Limit && extended_hours) {
            return Err(CommandError::OutsideRegularSession { session, regular_open: calendar.next_regular_open(now) });
        }
        Ok(())
    }

    /// `SYMBOL_HALTED` for an order of `kind` that would execute into a halt: a market or stop
    /// order (a stop is elected by the reopening print). A limit order waits at the venue with
    /// its price, so it is accepted.
    pub(super) fn ensure_trades(&self, symbol: &Symbol, kind: OrderType) -> Result<(), CommandError> {
        match self.halt_of(symbol) {
            Some(halt) if matches!(kind, OrderType::Market | OrderType::Stop) => {
                Err(CommandError::SymbolHalted { symbol: symbol.clone(), halt: halt.clone() })
            }
            _ => Ok(()),
        }
    }

    fn start_strategy(&mut self, symbol: &Symbol, fx: &mut Vec<Effect>) -> Result<Reply, CommandError> {
        let id = self.settings.strategy_allocator.default_strategy_id.clone();
        let strategy = (self.make_strategy)(&id)
            .ok_or_else(|| CommandError::Invalid { field: "strategy_id", reason: format!("unknown strategy {id}") })?;
        let held = self.positions.get(symbol).is_some_and(|p| !p.is_flat());
        let previous = self.slots.get(symbol).map(|s| s.status);
        let slot = self.slots.entry(symbol.clone()).or_insert_with(Slot::manual);
        slot.strategy = Some(strategy);
        let status = if held { StrategyStatus::Hold } else { StrategyStatus::Active };
        if let (true, Some(s), Some(p)) = (held, slot.strategy.as_mut(), self.positions.get(symbol)) {
            s.on_entry_filled(p.quantity, p.average_entry_price().unwrap_or_default());
        }
        slot.status = status;
        fx.push(Effect::WatchUpdated { symbol: symbol.clone(), status, reason: None });
        Ok(Reply::Status { symbol: symbol.clone(), previous, status })
    }

    /// Stops the strategy on `symbol`: its working orders are cancelled; the position stays.
    /// `Closed`/`Halted` → a fresh strategy instance (`Active`, or managing a held position).
    /// `EMERGENCY_HALT_ACTIVE` while halted, `RISK_BLOCKED` for a blocked symbol, `NOT_FOUND`
    /// off the watchlist; a strategy already running is left as it is.
    fn restart(&mut self, symbol: &Symbol, now: Timestamp, fx: &mut Vec<Effect>) -> Result<Reply, CommandError> {
        let previous = self
            .slots
            .get(symbol)
            .map(|s| s.status)
            .ok_or_else(|| CommandError::NotFound(format!("{symbol} is not on the watchlist")))?;
        if self.trading_state == TradingState::Halted {
            return Err(CommandError::Halted);
        }
        if self.is_blocked(symbol, now) {
            return Err(CommandError::Risk(Box::new(RiskRefusal {
                rule: RiskRule::SymbolBlocked,
                limit: RiskFigure::None,
                current: RiskFigure::Symbol(symbol.clone()),
                message: format!("{symbol} is blocked"),
            })));
        }
        if previous != StrategyStatus::Closed && previous != StrategyStatus::Halted {
            return Ok(Reply::Status { symbol: symbol.clone(), previous: Some(previous), status: previous });
        }
        self.start_strategy(symbol, fx).map(|r| match r {
            Reply::Status { symbol, status, .. } => Reply::Status { symbol, previous: Some(previous), status },
            other => other,
        })
    }

    /// Takes `symbol` off the strategies the halt stopped (restarted or stopped by hand since).
    fn forget_halt_stopped(&mut self, symbol: &Symbol, fx: &mut Vec<Effect>) {
        if self.halt_stopped.remove(symbol) {
            fx.push(Effect::HaltStoppedChanged { symbols: self.halt_stopped.iter().cloned().collect() });
        }
    }

    pub(super) fn stop_strategy(
        &mut self,
        symbol: &Symbol,
        status: StrategyStatus,
        reason: Option<String>,
        now: Timestamp,
        fx: &mut Vec<Effect>,
    ) {
        let working: Vec<ClientOrderId> = match self.slots.get_mut(symbol) {
            Some(slot) => {
                slot.strategy = None;
                let mut ids: Vec<ClientOrderId> = slot.entry_order.take().into_iter().collect();
                ids.extend(std::mem::take(&mut slot.exit_orders));
                ids
            }
            None => {
                self.slots.insert(symbol.clone(), Slot::manual());
                Vec::new()
            }
        };
        for id in working {
            self.request_cancel(&id, now, fx);
        }
        self.set_status(symbol, status, reason, fx);
    }

    /// Latch HALTED first, stop every strategy, cancel every open order, then exit every
    /// position (market sells for what is not already being sold). Repeating it re-requests the
    /// exits still missing and sends again every cancel not yet answered.
    fn emergency_halt(&mut self, reason: String, actor: String, now: Timestamp, fx: &mut Vec<Effect>) -> Reply {
        if self.trading_state != TradingState::Halted {
            self.trading_state = TradingState::Halted;
            self.halt = Some(Halt { at: now, reason, actor });
            fx.push(Effect::TradingStateChanged { state: TradingState::Halted, halt: self.halt.clone() });
        }
        let liquidation_requested = self.halt_everything(false, now, fx);
        Reply::Halted { liquidation_requested, timestamp: self.halt.as_ref().map(|h| h.at).unwrap_or(now) }
    }

    /// Stops every strategy, cancels every order that is not one of the halt's own exits — a
    /// cancel already requested is sent again, since its answer may have been lost — and
    /// submits market exits for every share not already being sold. Returns whether any
    /// position is open. `again`: a standing halt applied again (see below).
    fn halt_everything(&mut self, again: bool, now: Timestamp, fx: &mut Vec<Effect>) -> bool {
        let symbols: Vec<Symbol> = self.slots.keys().cloned().collect();
        let mut newly_stopped = false;
        for symbol in &symbols {
            let held = self.positions.get(symbol).is_some_and(|p| !p.is_flat());
            let slot = &self.slots[symbol];
            // Applied again, a slot already stopped (Closed, or Halted: left to the operator)
            // is left alone, so a complete halt applied again changes nothing; a slot still
            // shown as trading (its stop lost in a crash) is stopped.
            let stopped = slot.status == StrategyStatus::Closed || (again && slot.status == StrategyStatus::Halted);
            // A strategy was trading the symbol (or was, before a crash lost its instance): the
            // halt stops it and remembers it, for the one action that restarts them after resume.
            let running = slot.strategy.is_some()
                || matches!(
                    slot.status,
                    StrategyStatus::Active | StrategyStatus::Buy | StrategyStatus::Hold | StrategyStatus::Sell
                );
            if slot.strategy.is_some() || !stopped {
                let status = if held { StrategyStatus::Halted } else { StrategyStatus::Closed };
                self.stop_strategy(symbol, status, Some("emergency halt".into()), now, fx);
            }
            if running && self.halt_stopped.insert(symbol.clone()) {
                newly_stopped = true;
            }
        }
        if newly_stopped {
            fx.push(Effect::HaltStoppedChanged { symbols: self.halt_stopped.iter().cloned().collect() });
        }
        let open: Vec<(ClientOrderId, OrderStatus)> = self
            .orders
            .values()
            .filter(|o| !o.status.is_final() && !is_liquidation(o))
            .map(|o| (o.client_order_id.clone(), o.status))
            .collect();
        for (id, status) in &open {
            if *status == OrderStatus::PendingCancel {
                fx.push(Effect::Cancel(id.clone()));
            } else {
                self.request_cancel(id, now, fx);
            }
        }
        self.submit_liquidation(now, fx)
    }

    /// Applies a standing halt again (after a restart, or when a check finds it incomplete):
    /// every strategy stopped, every order that is not one of the halt's own exits cancelled —
    /// a cancel already requested is sent again, since its answer may have been lost — and
    /// market exits for every share not already being sold. Returns what is still open:
    /// orders that are not the halt's exits, and positions (nothing when the halt is complete).
    /// Does nothing unless `HALTED`.
    pub fn reassert_halt(&mut self, now: Timestamp) -> (Vec<Effect>, HaltProgress) {
        let mut fx = Vec::new();
        if self.trading_state != TradingState::Halted {
            return (fx, HaltProgress::default());
        }
        self.halt_everything(true, now, &mut fx);
        (fx, self.halt_progress())
    }

    /// Notes on an operator's order, written ahead and not acknowledged, that placing it was
    /// answered `BROKER_UNAVAILABLE` (`note` becomes its `reject_reason` while it is looked up):
    /// stored with the order, so that even after a restart it is looked up and never sent
    /// again. Nothing for an order in any other state.
    pub fn note_unanswered(&mut self, id: &ClientOrderId, note: &str) -> Vec<Effect> {
        let Some(order) = self.orders.get_mut(id) else { return Vec::new() };
        if order.status != OrderStatus::New || order.broker_order_id.is_some() {
            return Vec::new();
        }
        std::sync::Arc::make_mut(order).reject_reason = Some(note.to_string());
        vec![Effect::OrderUpdated(order.clone())]
    }

    /// Takes back an order that was never sent (the live runner could not write it ahead) as
    /// if it had not been placed: it leaves the book, the duplicate window and the day's trade
    /// count, so a refusal changes nothing and the client may retry with the same id. Only an
    /// order still `NEW` with no broker id and no fill; returns whether it was taken back.
    pub fn withdraw_unsent(&mut self, id: &ClientOrderId) -> bool {
        let unsent = self
            .orders
            .get(id)
            .is_some_and(|o| o.status == OrderStatus::New && o.broker_order_id.is_none() && o.filled_quantity == 0);
        if !unsent {
            return false;
        }
        let Some(order) = self.orders.remove(id) else { return false };
        self.recent.retain(|r| &r.client_order_id != id);
        if order.side == Side::Buy {
            self.day.trades_today = self.day.trades_today.saturating_sub(1);
            if let Some((_, count)) = self.day.by_symbol.get_mut(&order.symbol) {
                *count = count.saturating_sub(1);
            }
        }
        for slot in self.slots.values_mut() {
            if slot.entry_order.as_ref() == Some(id) {
                slot.entry_order = None;
            }
            slot.exit_orders.remove(id);
        }
        true
    }

    /// What a halt still has to do: orders other than its own exits, and open positions.
    pub fn halt_progress(&self) -> HaltProgress {
        HaltProgress {
            open_orders: self.orders.values().filter(|o| !o.status.is_final() && !is_liquidation(o)).count(),
            open_positions: self.positions.values().filter(|p| !p.is_flat()).count(),
        }
    }

    /// Submits market sells for every share not already being sold by a liquidation order.
    /// Returns whether any position is open.
    pub(super) fn submit_liquidation(&mut self, now: Timestamp, fx: &mut Vec<Effect>) -> bool {
        self.submit_exits(LIQUIDATION_REASON, now, fx)
    }

    /// Whether the emergency exit of `symbol` waits after the broker rejected it.
    fn exit_waits(&self, symbol: &Symbol, reason: &str, now: Timestamp) -> bool {
        reason == LIQUIDATION_REASON && self.exit_backoff.get(symbol).is_some_and(|(not_before, _)| now < *not_before)
    }

    /// Sells every share of every open position not already being sold, at market with `reason`,
    /// outside the risk gate (closing only reduces risk): a backtest's close after its last bar,
    /// once its working orders are cancelled.
    pub fn close_out(&mut self, reason: &str, now: Timestamp) -> Vec<Effect> {
        let mut fx = Vec::new();
        self.submit_exits(reason, now, &mut fx);
        fx
    }

    /// The shares of `symbol` exits are selling: what working sells other than protective orders
    /// (which protect the position, not exit it) have left to fill, written-ahead ones included.
    pub(super) fn exits_working(&self, symbol: &Symbol) -> u64 {
        self.orders
            .values()
            .filter(|o| &o.symbol == symbol && o.side == Side::Sell && !o.status.is_final() && !o.is_protective())
            .map(|o| o.remaining())
            .sum()
    }

    fn submit_exits(&mut self, reason: &str, now: Timestamp, fx: &mut Vec<Effect>) -> bool {
        let positions: Vec<(Symbol, u64)> =
            self.positions.values().filter(|p| !p.is_flat()).map(|p| (p.symbol.clone(), p.quantity)).collect();
        for (symbol, held) in &positions {
            let missing = held.saturating_sub(self.exits_working(symbol));
            if missing == 0 || self.exit_waits(symbol, reason, now) {
                continue;
            }
            let id = self.next_client_order_id(symbol, now);
            let (kind, limit, extended) = self.exit_shape(symbol, now);
            let mut order =
                Order::new(id.clone(), symbol.clone(), Side::Sell, kind, TimeInForce::Day, missing, limit, None, now);
            order.reason = Some(reason.into());
            order.extended_hours = extended;
            let order = std::sync::Arc::new(order);
            self.orders.insert(id, order.clone());
            self.send_exit(order, now, fx);
        }
        !positions.is_empty()
    }
}

/// Reason on the kill switch's own exit orders.
pub const LIQUIDATION_REASON: &str = "emergency liquidation";

/// What a standing halt has not finished (see [`Engine::reassert_halt`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HaltProgress {
    /// Open orders that are not the halt's own exits (each is being cancelled).
    pub open_orders: usize,
    pub open_positions: usize,
}

impl HaltProgress {
    pub fn is_complete(self) -> bool {
        self.open_orders == 0 && self.open_positions == 0
    }
}

/// Whether an order is one of the emergency halt's own exits.
pub fn is_liquidation(order: &Order) -> bool {
    order.reason.as_deref() == Some(LIQUIDATION_REASON)
}

impl Slot {
    /// A symbol traded by hand: no strategy.
    pub(super) fn manual() -> Slot {
        Slot {
            status: StrategyStatus::Halted,
            added_at: None,
            strategy: None,
            entry_order: None,
            exit_orders: Default::default(),
        }
    }
}
