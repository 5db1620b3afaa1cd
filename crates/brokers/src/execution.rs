//! The execution seam: the [`ExecutionBroker`] trait every venue implements (the in-process
//! paper broker, the backtests' bar broker, and next a real broker's adapter), the
//! [`BrokerError`] a venue's calls can fail with, and the [`MarketUpdate`] that in-process venues
//! match against. Orders go in by client order id (the exactly-once key); what happens to them
//! comes back as [`BrokerReport`]s, polled or answered to market updates. `now` is always the
//! market time the caller passes in: an in-process venue reads no clock.

use async_trait::async_trait;
use std::time::Duration;
use tradeops_core::broker::{BrokerLookup, BrokerOpenOrder, BrokerReport};
use tradeops_core::market::{Bar, Price, Quote};
use tradeops_core::orders::{ClientOrderId, Order};
use tradeops_core::symbol::Symbol;
use tradeops_core::time::Timestamp;

/// One market update for a symbol: the latest trade price, the current quote, and, at a minute
/// boundary, the completed bar.
#[derive(Clone, Copy, Debug)]
pub struct MarketUpdate<'a> {
    pub symbol: &'a Symbol,
    pub at: Timestamp,
    pub last: Price,
    pub quote: Quote,
    pub bar: Option<&'a Bar>,
    /// The symbol's trading is halted (CONTRACT §11): nothing fills until it reopens, and orders
    /// wait at the venue.
    pub halted: bool,
    /// The market's session at `at` (CONTRACT §12): outside the regular session only orders
    /// marked extended-hours fill and no stop triggers; while closed nothing does.
    pub session: tradeops_core::calendar::SessionPhase,
}

/// A remote venue's event connection (its order-update stream) as health shows it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct VenueConnection {
    /// Connected, authorized, listening and caught up.
    pub connected: bool,
    /// The latest event's time as the venue stamped it.
    pub last_event_at: Option<Timestamp>,
    /// The latest failure, kept after a recovery so health can say what happened.
    pub last_error: Option<String>,
    /// Successful connections so far (1 + reconnects).
    pub connections: u64,
}

/// A venue's own account figures (a real broker keeps them; the service reconciles its cash
/// with them and shows them on the account screen).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VenueAccount {
    pub cash: rust_decimal::Decimal,
    pub equity: rust_decimal::Decimal,
    pub buying_power: rust_decimal::Decimal,
    /// Equity at the previous session's close (day P&L = `equity - last_equity`), when given.
    pub last_equity: Option<rust_decimal::Decimal>,
    /// The venue refuses new orders on the account.
    pub trading_blocked: bool,
}

/// One position a venue holds: signed shares (negative: short) and its average entry price.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VenuePosition {
    pub symbol: Symbol,
    pub quantity: i64,
    pub average_price: rust_decimal::Decimal,
}

/// Why a venue did not take a call.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BrokerError {
    /// The venue refused the request for good (a malformed order, buying power, a symbol it
    /// does not trade): sending it again changes nothing.
    #[error("rejected by the broker: {reason}")]
    Rejected { reason: String, kind: Rejection },
    /// The venue could not be reached or did not answer (a timeout, a connection error, a 5xx, a
    /// 429): whether the request landed is unknown, so it is looked up by client order id before
    /// it is sent again, not before `retry_after` when the venue said so.
    #[error("the broker is unavailable: {reason}")]
    Unavailable { reason: String, retry_after: Option<Duration> },
    /// The venue does not know this client order id.
    #[error("the broker does not know order {0}")]
    UnknownOrder(ClientOrderId),
    /// The venue already has an order with this client order id (a submit whose reply was lost
    /// and was sent again): it is working there, and its reports follow. Never a rejection.
    #[error("the broker already has order {0}")]
    AlreadyReceived(ClientOrderId),
}

/// What kind of refusal a [`BrokerError::Rejected`] is, as far as the venue said: what the
/// service answers the operator (`RISK_BLOCKED` with the venue's figures, `VALIDATION_ERROR`
/// naming the field, `ORDER_NOT_CANCELLABLE`) rests on it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Rejection {
    /// The account cannot pay for the order: the venue's buying power (`available`) against
    /// the order's cost (`required`), in dollars, when it gave them.
    BuyingPower { available: Option<rust_decimal::Decimal>, required: Option<rust_decimal::Decimal> },
    /// The account does not hold the shares the order sells (held, or held for other orders):
    /// the shares available and those asked for, when the venue gave them.
    SharesAvailable { available: Option<rust_decimal::Decimal>, requested: Option<rust_decimal::Decimal> },
    /// The venue will not take a field of the request: our API's name of the field, when known.
    Invalid { field: Option<&'static str> },
    /// A cancel of an order that can no longer be cancelled (`filled`: it filled).
    NotCancellable { filled: bool },
    /// Any other refusal.
    #[default]
    Other,
}

impl BrokerError {
    /// A refusal of no particular [`Rejection`] kind.
    pub fn rejected(reason: impl Into<String>) -> Self {
        BrokerError::Rejected { reason: reason.into(), kind: Rejection::Other }
    }

    /// Whether the same request may succeed later (only [`BrokerError::Unavailable`]).
    pub fn is_retryable(&self) -> bool {
        matches!(self, BrokerError::Unavailable { .. })
    }
}

/// An execution venue. Object-safe: the engine runner holds an `Arc<dyn ExecutionBroker>`.
///
/// The runner bounds every call (a call not answered in time counts as
/// [`BrokerError::Unavailable`]), so an adapter's futures must be cancel-safe: a `poll` dropped
/// while waiting loses no report, a `submit` dropped in flight is found by `lookup` later.
///
/// `submit` and `cancel` only send; their outcome (`Accepted`, `Filled`, `Canceled`,
/// `CancelRejected`, `Rejected`, `Expired`) arrives later as reports from [`poll`],
/// [`on_market`] or [`expire_day_orders`]. A real venue delivers its order-update stream through
/// `poll` and keeps the defaults of the in-process hooks.
///
/// [`poll`]: ExecutionBroker::poll
/// [`on_market`]: ExecutionBroker::on_market
/// [`expire_day_orders`]: ExecutionBroker::expire_day_orders
#[async_trait]
pub trait ExecutionBroker: Send + Sync {
    /// The adapter's name as configured (`paper`, `backtest`).
    fn name(&self) -> &'static str;

    /// Sends a new order (status NEW, as the engine built it and wrote it ahead).
    async fn submit(&self, order: &Order, now: Timestamp) -> Result<(), BrokerError>;

    /// Requests a cancel; its answer (`Canceled` or `CancelRejected`) is a later report.
    async fn cancel(&self, id: &ClientOrderId, now: Timestamp) -> Result<(), BrokerError>;

    /// What the venue knows of one client order id: asked before any order is sent again.
    async fn lookup(&self, id: &ClientOrderId) -> Result<BrokerLookup, BrokerError>;

    /// Every order the venue is still working, with whether a cancel of it is on its way,
    /// sorted by client order id.
    async fn open_orders(&self) -> Result<Vec<BrokerOpenOrder>, BrokerError>;

    /// The reports due at or before `now` (acknowledgements, cancels, fills), oldest first.
    async fn poll(&self, now: Timestamp) -> Vec<BrokerReport>;

    /// When the next report this broker delivers by itself is due (a paper ack or cancel), if
    /// it knows: a replay on a manual clock delivers each at its own time. A remote
    /// venue does not know (its reports come when they come).
    fn next_due(&self) -> Option<Timestamp> {
        None
    }

    /// Matches working orders against a market update (in-process venues): the reports that
    /// came due by then, then fills. A real venue matches on its own and answers nothing here.
    async fn on_market(&self, _update: &MarketUpdate<'_>) -> Vec<BrokerReport> {
        Vec::new()
    }

    /// The trading session ended at `now`: working DAY orders expire (in-process venues). A real
    /// venue expires them itself and reports it through `poll`.
    async fn expire_day_orders(&self, _now: Timestamp) -> Vec<BrokerReport> {
        Vec::new()
    }

    /// The venue's account figures; `None` for a venue that keeps no account of its own (the
    /// in-process paper broker: the engine's books are the account).
    async fn account(&self) -> Result<Option<VenueAccount>, BrokerError> {
        Ok(None)
    }

    /// Every position the venue holds, sorted by symbol; `None` for a venue that keeps none of
    /// its own.
    async fn positions(&self) -> Result<Option<Vec<VenuePosition>>, BrokerError> {
        Ok(None)
    }

    /// A working order the venue holds that the engine did not place (found by
    /// reconciliation), as an order of ours to adopt: its side, type, quantities and prices as
    /// the venue has them, status and broker order id included. `None` when the venue cannot
    /// describe it (or has no such order).
    async fn foreign_order(&self, _id: &ClientOrderId) -> Result<Option<Order>, BrokerError> {
        Ok(None)
    }

    /// An order the engine placed and has no record of — an earlier term sent it and could not
    /// write it (its database link was cut while it still reached the venue) — as it was sent:
    /// status `NEW`, nothing filled, the venue's order id, whatever the venue's status now. The
    /// venue's reports of it then record its fills (executions, the position, a trade) once,
    /// as any order's. `None` when the venue has no such order or cannot describe it; a venue
    /// whose orders live only in this process (paper) has none.
    async fn sent_order(&self, _id: &ClientOrderId) -> Result<Option<Order>, BrokerError> {
        Ok(None)
    }

    /// Notified when reports are waiting for [`ExecutionBroker::poll`] (a remote venue's
    /// stream), so they are applied at once rather than at the next polling tick; `None` for a
    /// venue polled on the runner's tick.
    fn reports_waiting(&self) -> Option<std::sync::Arc<tokio::sync::Notify>> {
        None
    }

    /// The venue's event connection, for health; `None` for an in-process venue (always
    /// connected).
    fn connection(&self) -> Option<VenueConnection> {
        None
    }

    /// Rebuilds the venue's book at start from the orders the engine still holds open. Returns
    /// the client ids the venue may never have received (orders never acknowledged), which the
    /// caller looks up before deciding whether to send them. A real venue keeps its own book:
    /// by default nothing is rebuilt, and the orders never acknowledged are returned.
    async fn restore(&self, orders: &[Order], _now: Timestamp) -> Vec<ClientOrderId> {
        orders.iter().filter(|o| o.broker_order_id.is_none()).map(|o| o.client_order_id.clone()).collect()
    }

    /// Tells an in-process venue the shares its account holds at a start (the engine's
    /// positions), so it refuses a sell of shares it does not hold or holds for other orders,
    /// as a real venue does. A real venue keeps its own positions: nothing to do.
    async fn open_account(&self, _positions: &[(Symbol, u64)]) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_unavailable_is_retryable() {
        let id = ClientOrderId::parse("abc-1").expect("valid");
        assert!(BrokerError::Unavailable { reason: "timeout".into(), retry_after: None }.is_retryable());
        assert!(!BrokerError::rejected("no buying power").is_retryable());
        assert!(!BrokerError::UnknownOrder(id).is_retryable());
    }
}
