//! Orders and their state machine (CONTRACT §3, research/domain.md §1.10).
//!
//! ```text
//! NEW ──ack──▶ ACCEPTED ──fill──▶ PARTIALLY_FILLED ──fill──▶ FILLED
//!  │              │  ▲                 │
//!  │           cancel│cancel rejected  cancel
//!  │              ▼  │                 ▼
//!  │          PENDING_CANCEL ──canceled──▶ CANCELED ──late fill──▶ CANCELED | FILLED
//!  ├──reject──▶ REJECTED
//!  └──(any open)──expire──▶ EXPIRED ──late fill──▶ EXPIRED | FILLED
//! ```
//! A fill may race a cancel: fills are accepted in `PENDING_CANCEL` and, late, after
//! `CANCELED` or `EXPIRED` (the shares were bought; the books must say so). A refused event leaves
//! the order exactly as it was.

use crate::market::Side;
use crate::symbol::Symbol;
use crate::time::Timestamp;
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::sync::Arc;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum OrderType {
    Market,
    Limit,
    Stop,
    StopLimit,
}

impl OrderType {
    pub fn as_str(self) -> &'static str {
        match self {
            OrderType::Market => "MARKET",
            OrderType::Limit => "LIMIT",
            OrderType::Stop => "STOP",
            OrderType::StopLimit => "STOP_LIMIT",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum TimeInForce {
    Day,
    Gtc,
    Ioc,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum OrderStatus {
    New,
    Accepted,
    PartiallyFilled,
    Filled,
    PendingCancel,
    Canceled,
    Rejected,
    Expired,
}

impl OrderStatus {
    /// No further change expected (late fills aside).
    pub fn is_final(self) -> bool {
        matches!(self, OrderStatus::Filled | OrderStatus::Canceled | OrderStatus::Rejected | OrderStatus::Expired)
    }

    /// `POST /api/orders/cancel` may cancel it.
    pub fn is_cancellable(self) -> bool {
        matches!(self, OrderStatus::New | OrderStatus::Accepted | OrderStatus::PartiallyFilled)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            OrderStatus::New => "NEW",
            OrderStatus::Accepted => "ACCEPTED",
            OrderStatus::PartiallyFilled => "PARTIALLY_FILLED",
            OrderStatus::Filled => "FILLED",
            OrderStatus::PendingCancel => "PENDING_CANCEL",
            OrderStatus::Canceled => "CANCELED",
            OrderStatus::Rejected => "REJECTED",
            OrderStatus::Expired => "EXPIRED",
        }
    }
}

impl fmt::Display for OrderStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The client's id of an order: 1–64 characters of `A-Z a-z 0-9 _ - . :`.
// Shared, not copied: an id is cloned into every map, report and effect about its order.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "openapi", schema(value_type = String, pattern = "^[A-Za-z0-9_.:-]{1,64}$"))]
pub struct ClientOrderId(std::sync::Arc<str>);

impl ClientOrderId {
    pub fn parse(raw: &str) -> Result<ClientOrderId, String> {
        if Self::is_valid(raw) {
            Ok(ClientOrderId(raw.into()))
        } else {
            Err("must be 1 to 64 characters of A-Z, a-z, 0-9, _ - . :".into())
        }
    }

    fn is_valid(raw: &str) -> bool {
        !raw.is_empty() && raw.len() <= 64 && raw.bytes().all(|c| c.is_ascii_alphanumeric() || b"_-.:".contains(&c))
    }

    /// An id the engine generated, valid by construction (checked in debug builds, not
    /// re-checked in release).
    pub(crate) fn generated(id: &str) -> ClientOrderId {
        debug_assert!(Self::is_valid(id), "generated id {id} is valid");
        ClientOrderId(id.into())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether the engine generated this id (`to-SYMBOL-YYYYMMDDHHMMSS-N`): an order of ours
    /// even where the database has no record of it (an earlier term sent it and could not
    /// write it).
    pub fn is_engines(&self) -> bool {
        self.0.starts_with("to-")
    }
}

impl fmt::Display for ClientOrderId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for ClientOrderId {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        ClientOrderId::parse(&String::deserialize(d)?).map_err(serde::de::Error::custom)
    }
}

/// The exits that protect a position at the broker (CONTRACT §11): a stop (a stop-limit when
/// `stop_limit_price` is set) and an optional take-profit, one-cancels-other.
///
/// On a `BUY` entry they are what the operator asked for: the engine places them at the broker
/// the moment the entry fills. On a `SELL` they make the order itself the protective order (see
/// [`Order::is_protective`]): a `STOP`/`STOP_LIMIT` sell at `stop_price`, GTC, and, when
/// `take_profit` is set, a limit sell at it that cancels the stop when it fills (and the other
/// way round): one order here, an `oco` order at Alpaca.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExitLegs {
    pub stop_price: Decimal,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_limit_price: Option<Decimal>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub take_profit: Option<Decimal>,
}

impl ExitLegs {
    /// The order type of the stop leg.
    pub fn stop_type(&self) -> OrderType {
        if self.stop_limit_price.is_some() {
            OrderType::StopLimit
        } else {
            OrderType::Stop
        }
    }
}

/// One fill of an order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Execution {
    pub execution_id: Arc<str>,
    #[serde(with = "crate::time::serde_ts")]
    pub timestamp: Timestamp,
    pub quantity: u64,
    #[serde(with = "rust_decimal::serde::float")]
    pub price: Decimal,
    #[serde(with = "rust_decimal::serde::float")]
    pub fee: Decimal,
}

/// What can happen to an order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OrderEvent {
    /// The broker acknowledged it.
    Accepted {
        broker_order_id: Arc<str>,
    },
    Filled(Execution),
    /// We asked the broker to cancel.
    CancelRequested,
    Canceled,
    /// The broker refused our cancel (it stays working).
    CancelRejected,
    Rejected {
        reason: String,
    },
    Expired,
}

impl OrderEvent {
    fn name(&self) -> &'static str {
        match self {
            OrderEvent::Accepted { .. } => "accepted",
            OrderEvent::Filled(_) => "fill",
            OrderEvent::CancelRequested => "cancel request",
            OrderEvent::Canceled => "canceled",
            OrderEvent::CancelRejected => "cancel rejected",
            OrderEvent::Rejected { .. } => "rejected",
            OrderEvent::Expired => "expired",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum OrderError {
    #[error("an order in {from} cannot take a {event}")]
    IllegalTransition { from: OrderStatus, event: &'static str },
    #[error("execution {0} was already applied")]
    DuplicateExecution(String),
    #[error("fill of {fill} would exceed the order: {filled} of {quantity} already filled")]
    Overfill { fill: u64, filled: u64, quantity: u64 },
    #[error("a fill needs a positive quantity and price")]
    InvalidFill,
}

/// An order and everything that happened to it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Order {
    pub client_order_id: ClientOrderId,
    pub broker_order_id: Option<Arc<str>>,
    pub symbol: Symbol,
    pub side: Side,
    pub order_type: OrderType,
    pub time_in_force: TimeInForce,
    pub quantity: u64,
    pub limit_price: Option<Decimal>,
    pub stop_price: Option<Decimal>,
    pub status: OrderStatus,
    pub filled_quantity: u64,
    /// Σ quantity × price of the executions: the exact base of the average fill price.
    pub filled_notional: Decimal,
    pub fees: Decimal,
    pub executions: Vec<Execution>,
    /// Why it was placed (strategy rule or operator's words).
    pub reason: Option<Arc<str>>,
    pub strategy_id: Option<Arc<str>>,
    /// The protective stop the strategy planned for an entry (what one R of risk is measured
    /// from); not an order at the broker.
    pub stop_loss: Option<Decimal>,
    /// The exits at the broker: on a `BUY`, the legs to place when it fills; on a `SELL`, the
    /// protective order's own levels (see [`ExitLegs`]).
    pub legs: Option<ExitLegs>,
    /// Marked for the extended sessions (CONTRACT §12): a `LIMIT` `DAY` order the venue works
    /// from 04:00 to 20:00 New York, not only in the regular session.
    pub extended_hours: bool,
    pub reject_reason: Option<String>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

impl Order {
    /// A new order, not yet sent.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        client_order_id: ClientOrderId,
        symbol: Symbol,
        side: Side,
        order_type: OrderType,
        time_in_force: TimeInForce,
        quantity: u64,
        limit_price: Option<Decimal>,
        stop_price: Option<Decimal>,
        at: Timestamp,
    ) -> Order {
        Order {
            client_order_id,
            broker_order_id: None,
            symbol,
            side,
            order_type,
            time_in_force,
            quantity,
            limit_price,
            stop_price,
            status: OrderStatus::New,
            filled_quantity: 0,
            filled_notional: Decimal::ZERO,
            fees: Decimal::ZERO,
            executions: Vec::new(),
            stop_loss: None,
            legs: None,
            extended_hours: false,
            reason: None,
            strategy_id: None,
            reject_reason: None,
            created_at: at,
            updated_at: at,
        }
    }

    /// A protective order: a sell carrying its own exit levels, resting at the broker to protect
    /// a position (CONTRACT §11). It holds the position's shares there, so any other exit first
    /// frees them, and it is not an exit in progress (the position is still held, protected).
    pub fn is_protective(&self) -> bool {
        self.side == Side::Sell && self.legs.is_some()
    }

    /// Which leg of a protective order an execution at `price` filled: `TAKE_PROFIT` at or
    /// above the target, else `STOP_LOSS`.
    pub fn protective_leg(&self, price: Decimal) -> &'static str {
        match self.legs.and_then(|l| l.take_profit) {
            Some(target) if price >= target => "TAKE_PROFIT",
            _ => "STOP_LOSS",
        }
    }

    pub fn remaining(&self) -> u64 {
        self.quantity - self.filled_quantity
    }

    /// Average fill price, to 4 decimal places; `None` before the first fill.
    pub fn average_fill_price(&self) -> Option<Decimal> {
        (self.filled_quantity > 0).then(|| (self.filled_notional / Decimal::from(self.filled_quantity)).round_dp(4))
    }

    /// The status a working order has given its fills and acknowledgement.
    fn working_status(&self, filled: u64) -> OrderStatus {
        if filled > 0 {
            OrderStatus::PartiallyFilled
        } else if self.broker_order_id.is_some() {
            OrderStatus::Accepted
        } else {
            OrderStatus::New
        }
    }

    /// Applies an event. On error nothing changes.
    pub fn apply(&mut self, event: OrderEvent, at: Timestamp) -> Result<OrderStatus, OrderError> {
        use OrderStatus::*;
        let from = self.status;
        let illegal = || OrderError::IllegalTransition { from, event: event.name() };
        let next = match &event {
            OrderEvent::Accepted { .. } => match from {
                New => Accepted,
                // The ack of an order we already asked to cancel.
                PendingCancel if self.broker_order_id.is_none() => PendingCancel,
                _ => return Err(illegal()),
            },
            OrderEvent::Filled(exec) => {
                if exec.quantity == 0 || exec.price <= Decimal::ZERO {
                    return Err(OrderError::InvalidFill);
                }
                if self.executions.iter().any(|e| e.execution_id == exec.execution_id) {
                    return Err(OrderError::DuplicateExecution(exec.execution_id.to_string()));
                }
                if matches!(from, Filled | Rejected) || exec.quantity > self.remaining() {
                    return Err(OrderError::Overfill {
                        fill: exec.quantity,
                        filled: self.filled_quantity,
                        quantity: self.quantity,
                    });
                }
                let filled = self.filled_quantity + exec.quantity;
                match from {
                    _ if filled == self.quantity => Filled,
                    New | Accepted | PartiallyFilled => PartiallyFilled,
                    other => other, // PendingCancel, and late fills after Canceled/Expired
                }
            }
            OrderEvent::CancelRequested => match from {
                New | Accepted | PartiallyFilled => PendingCancel,
                _ => return Err(illegal()),
            },
            OrderEvent::Canceled => match from {
                New | Accepted | PartiallyFilled | PendingCancel => Canceled,
                _ => return Err(illegal()),
            },
            OrderEvent::CancelRejected => match from {
                PendingCancel => self.working_status(self.filled_quantity),
                _ => return Err(illegal()),
            },
            OrderEvent::Rejected { .. } => match from {
                New | Accepted | PendingCancel if self.filled_quantity == 0 => Rejected,
                _ => return Err(illegal()),
            },
            OrderEvent::Expired => match from {
                New | Accepted | PartiallyFilled | PendingCancel => Expired,
                _ => return Err(illegal()),
            },
        };
        match event {
            OrderEvent::Accepted { broker_order_id } => self.broker_order_id = Some(broker_order_id),
            OrderEvent::Filled(exec) => {
                self.filled_quantity += exec.quantity;
                self.filled_notional += exec.price * Decimal::from(exec.quantity);
                self.fees += exec.fee;
                // Most orders fill once: room for that one, not the four a first push reserves
                // (a backtest's order log keeps every order).
                if self.executions.is_empty() {
                    self.executions.reserve_exact(1);
                }
                self.executions.push(exec);
            }
            OrderEvent::Rejected { reason } => self.reject_reason = Some(reason),
            _ => {}
        }
        self.status = next;
        self.updated_at = at;
        Ok(next)
    }
}

#[cfg(test)]
mod tests;
