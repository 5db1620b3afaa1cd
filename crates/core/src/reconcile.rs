//! Reconciliation of the engine's book with the execution broker's open orders: the pure
//! comparison (what disagrees, and what to do about it). The runner asks the broker, carries
//! out the corrections and shows the result as `reconciliation_status`.

use crate::broker::BrokerOpenOrder;
use crate::orders::{ClientOrderId, Order, OrderStatus};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// One disagreement between the engine and the broker.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Discrepancy {
    /// Working at the broker although the engine holds it ended (`CANCELED`, `FILLED`, …):
    /// cancel it at the broker.
    LiveButEnded { client_order_id: ClientOrderId, status: OrderStatus },
    /// Working at the broker while the engine waits for its cancel (`PENDING_CANCEL`), and no
    /// cancel is on its way: send the cancel again.
    CancelNotSent { client_order_id: ClientOrderId },
    /// Working at the broker and unknown to the engine.
    Unknown { client_order_id: ClientOrderId },
    /// Working in the engine's book (acknowledged) and not at the broker.
    Missing { client_order_id: ClientOrderId, status: OrderStatus },
}

impl Discrepancy {
    pub fn client_order_id(&self) -> &ClientOrderId {
        match self {
            Discrepancy::LiveButEnded { client_order_id, .. }
            | Discrepancy::CancelNotSent { client_order_id }
            | Discrepancy::Unknown { client_order_id }
            | Discrepancy::Missing { client_order_id, .. } => client_order_id,
        }
    }

    /// The disagreement and its correction, in words.
    pub fn describe(&self) -> String {
        match self {
            Discrepancy::LiveButEnded { client_order_id, status } => {
                format!("order {client_order_id} is {status} here but still working at the broker: cancelling it there")
            }
            Discrepancy::CancelNotSent { client_order_id } => format!(
                "order {client_order_id} is PENDING_CANCEL here but working at the broker with no cancel on its way: \
                 cancel sent again"
            ),
            Discrepancy::Unknown { client_order_id } => {
                format!("order {client_order_id} is working at the broker but unknown here")
            }
            Discrepancy::Missing { client_order_id, status } => {
                format!("order {client_order_id} is {status} here but the broker is not working it")
            }
        }
    }
}

/// Compares the engine's orders with the broker's open orders. An order the broker has not
/// acknowledged yet is in flight: it is compared only when the broker lists it.
pub fn compare(ours: &BTreeMap<ClientOrderId, Arc<Order>>, broker: &[BrokerOpenOrder]) -> Vec<Discrepancy> {
    let mut out = Vec::new();
    let at_broker: BTreeSet<&ClientOrderId> = broker.iter().map(|b| &b.client_order_id).collect();
    for open in broker {
        let id = &open.client_order_id;
        match ours.get(id).map(|o| o.status) {
            None => out.push(Discrepancy::Unknown { client_order_id: id.clone() }),
            Some(status) if status.is_final() => {
                out.push(Discrepancy::LiveButEnded { client_order_id: id.clone(), status })
            }
            Some(OrderStatus::PendingCancel) if !open.cancel_pending => {
                out.push(Discrepancy::CancelNotSent { client_order_id: id.clone() })
            }
            Some(_) => {}
        }
    }
    for (id, order) in ours {
        let acknowledged = order.broker_order_id.is_some();
        if acknowledged && !order.status.is_final() && !at_broker.contains(id) {
            out.push(Discrepancy::Missing { client_order_id: id.clone(), status: order.status });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::market::Side;
    use crate::orders::{OrderEvent, OrderType, TimeInForce};
    use crate::symbol::Symbol;
    use crate::time::parse_ts;

    fn order(id: &str, events: &[OrderEvent]) -> (ClientOrderId, Arc<Order>) {
        let at = parse_ts("2026-11-20T15:00:00Z").unwrap();
        let cid = ClientOrderId::parse(id).unwrap();
        let mut o = Order::new(
            cid.clone(),
            Symbol::parse("ABC").unwrap(),
            Side::Buy,
            OrderType::Limit,
            TimeInForce::Gtc,
            10,
            Some(rust_decimal::Decimal::ONE),
            None,
            at,
        );
        for e in events {
            o.apply(e.clone(), at).unwrap();
        }
        (cid, Arc::new(o))
    }

    fn open(id: &str, cancel_pending: bool) -> BrokerOpenOrder {
        BrokerOpenOrder { client_order_id: ClientOrderId::parse(id).unwrap(), cancel_pending }
    }

    fn accepted() -> OrderEvent {
        OrderEvent::Accepted { broker_order_id: "B-1".into() }
    }

    #[test]
    fn agreeing_books_have_no_discrepancy() {
        let ours = BTreeMap::from([
            order("working", &[accepted()]),
            order("cancelling", &[accepted(), OrderEvent::CancelRequested]),
            order("in-flight", &[]),
            order("done", &[accepted(), OrderEvent::Canceled]),
        ]);
        let broker = [open("working", false), open("cancelling", true), open("in-flight", false)];
        assert_eq!(compare(&ours, &broker), vec![]);
    }

    #[test]
    fn a_live_broker_order_we_cancel_or_cancelled_is_a_mismatch() {
        let ours = BTreeMap::from([
            order("cancelled", &[accepted(), OrderEvent::CancelRequested, OrderEvent::Canceled]),
            order("lost-cancel", &[accepted(), OrderEvent::CancelRequested]),
            order("gone", &[accepted()]),
        ]);
        let broker = [open("cancelled", false), open("lost-cancel", false), open("stranger", false)];
        let found = compare(&ours, &broker);
        let id = |s: &str| ClientOrderId::parse(s).unwrap();
        assert_eq!(
            found,
            vec![
                Discrepancy::LiveButEnded { client_order_id: id("cancelled"), status: OrderStatus::Canceled },
                Discrepancy::CancelNotSent { client_order_id: id("lost-cancel") },
                Discrepancy::Unknown { client_order_id: id("stranger") },
                Discrepancy::Missing { client_order_id: id("gone"), status: OrderStatus::Accepted },
            ]
        );
        assert!(found[0].describe().contains("CANCELED here but still working at the broker"));
    }
}
