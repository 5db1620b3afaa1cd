//! What an execution broker reports about orders: the events the engine applies to its orders.

use crate::orders::{ClientOrderId, Execution, OrderEvent};
use crate::time::Timestamp;

/// One report from the execution broker.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BrokerReport {
    Accepted { client_order_id: ClientOrderId, broker_order_id: std::sync::Arc<str>, at: Timestamp },
    Filled { client_order_id: ClientOrderId, execution: Execution },
    Canceled { client_order_id: ClientOrderId, at: Timestamp },
    CancelRejected { client_order_id: ClientOrderId, reason: String, at: Timestamp },
    Rejected { client_order_id: ClientOrderId, reason: String, at: Timestamp },
    Expired { client_order_id: ClientOrderId, at: Timestamp },
}

impl BrokerReport {
    pub fn client_order_id(&self) -> &ClientOrderId {
        match self {
            BrokerReport::Accepted { client_order_id, .. }
            | BrokerReport::Filled { client_order_id, .. }
            | BrokerReport::Canceled { client_order_id, .. }
            | BrokerReport::CancelRejected { client_order_id, .. }
            | BrokerReport::Rejected { client_order_id, .. }
            | BrokerReport::Expired { client_order_id, .. } => client_order_id,
        }
    }

    pub fn at(&self) -> Timestamp {
        match self {
            BrokerReport::Filled { execution, .. } => execution.timestamp,
            BrokerReport::Accepted { at, .. }
            | BrokerReport::Canceled { at, .. }
            | BrokerReport::CancelRejected { at, .. }
            | BrokerReport::Rejected { at, .. }
            | BrokerReport::Expired { at, .. } => *at,
        }
    }

    /// The order event this report means.
    pub fn order_event(&self) -> OrderEvent {
        match self {
            BrokerReport::Accepted { broker_order_id, .. } => {
                OrderEvent::Accepted { broker_order_id: broker_order_id.clone() }
            }
            BrokerReport::Filled { execution, .. } => OrderEvent::Filled(execution.clone()),
            BrokerReport::Canceled { .. } => OrderEvent::Canceled,
            BrokerReport::CancelRejected { .. } => OrderEvent::CancelRejected,
            BrokerReport::Rejected { reason, .. } => OrderEvent::Rejected { reason: reason.clone() },
            BrokerReport::Expired { .. } => OrderEvent::Expired,
        }
    }
}

/// An order the broker is still working, as it reports its open orders.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BrokerOpenOrder {
    pub client_order_id: ClientOrderId,
    /// A cancel of it is on its way (requested and not yet answered).
    pub cancel_pending: bool,
}

/// What the broker knows of one client order id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BrokerLookup {
    /// Never received: an order written ahead and lost before it was sent.
    Unknown,
    /// Still working.
    Open(BrokerOpenOrder),
    /// It left the broker's book (filled, cancelled, expired or rejected).
    Closed,
}
