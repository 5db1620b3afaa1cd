//! Adoption (CONTRACT §10): what reconciliation finds at the broker that tradeops did not
//! place becomes the engine's own, so it counts against every risk limit from then on — an
//! order working at the broker ("adopted from broker", no strategy), a position held there
//! (managed by hand: strategy status `Halted`), and the broker's cash.

use super::{Effect, Engine, StrategyStatus};
use crate::orders::{Order, OrderStatus};
use crate::positions::Position;
use crate::symbol::Symbol;
use crate::time::Timestamp;
use rust_decimal::Decimal;
use std::sync::Arc;

/// The reason an adopted order carries.
pub const ADOPTED_REASON: &str = "adopted from broker";

/// The reason an order an earlier term sent and could not write carries, once recorded from
/// the broker ([`Engine::adopt_sent_order`]).
pub const EARLIER_TERM_REASON: &str = "sent by an earlier term, recorded from the broker";

impl Engine {
    /// Adopts a working broker order the engine does not know: it joins the book as the broker
    /// has it (status, fills so far, broker order id), with reason [`ADOPTED_REASON`] and no
    /// strategy. An id the engine already knows changes nothing.
    pub fn adopt_order(&mut self, mut order: Order) -> Vec<Effect> {
        if self.orders.contains_key(&order.client_order_id) || order.status.is_final() {
            return Vec::new();
        }
        order.reason = Some(ADOPTED_REASON.into());
        order.strategy_id = None;
        let order = Arc::new(order);
        self.orders.insert(order.client_order_id.clone(), order.clone());
        vec![Effect::OrderUpdated(order)]
    }

    /// Records an order this engine's earlier term sent and could not write (its database link
    /// was cut while it still reached the broker: only the emergency halt's exits are sent
    /// unwritten): it joins the book as it was sent — status `NEW`, nothing filled, the broker's
    /// order id — with reason [`EARLIER_TERM_REASON`] and no strategy, so the broker's reports
    /// of it that follow record its fills (executions, the position, a trade) once, as any
    /// order's. An id the engine knows, or an order not described as sent, changes nothing.
    pub fn adopt_sent_order(&mut self, mut order: Order) -> Vec<Effect> {
        if self.orders.contains_key(&order.client_order_id) || order.status != OrderStatus::New {
            return Vec::new();
        }
        order.reason = Some(EARLIER_TERM_REASON.into());
        order.strategy_id = None;
        let order = Arc::new(order);
        self.orders.insert(order.client_order_id.clone(), order.clone());
        vec![Effect::OrderUpdated(order)]
    }

    /// Takes the broker's holding of `symbol` for the engine's: `quantity` shares at
    /// `average_price` (what the position's cost and P&L are measured from from now on). The
    /// symbol's strategy, if any, is stopped as `Halted`: the operator manages the position.
    /// A holding equal to the engine's changes nothing.
    pub fn adopt_position(
        &mut self,
        symbol: &Symbol,
        quantity: u64,
        average_price: Decimal,
        now: Timestamp,
    ) -> Vec<Effect> {
        let held = self.positions.get(symbol).map(|p| p.quantity).unwrap_or(0);
        if held == quantity {
            return Vec::new();
        }
        let mut fx = Vec::new();
        // The shares' value at cost joins the day's reference equity (no gain of the day); their
        // unrealized P&L from the average price counts from now on, as any position's does.
        let added = (Decimal::from(quantity) - Decimal::from(held)) * average_price;
        self.day.start_equity += added;
        self.day.peak_equity += added;
        let position = self.positions.entry(symbol.clone()).or_insert_with(|| Position::new(symbol.clone()));
        position.quantity = quantity;
        position.cost_basis = average_price * Decimal::from(quantity);
        position.opened_at = if quantity > 0 { position.opened_at.or(Some(now)) } else { None };
        position.updated_at = Some(now);
        let position = position.clone();
        let reason = format!("{quantity} shares adopted from the broker: managed by hand");
        if self.slots.get(symbol).is_some_and(|s| s.strategy.is_some() && s.status != StrategyStatus::Closed) {
            self.stop_strategy(symbol, StrategyStatus::Halted, Some(reason), now, &mut fx);
        } else {
            self.set_status(symbol, StrategyStatus::Halted, Some(reason), &mut fx);
        }
        fx.push(Effect::PositionUpdated { status: self.position_status(symbol), position });
        fx
    }

    /// Takes the broker's cash for the engine's (the broker is the truth of the account's cash:
    /// its fees and transfers reach no fill).
    pub fn adopt_cash(&mut self, cash: Decimal) -> Vec<Effect> {
        if self.cash == cash {
            return Vec::new();
        }
        let what =
            format!("cash {} here, {} at the broker: took the broker's", self.cash.round_dp(2), cash.round_dp(2));
        self.cash = cash;
        vec![Effect::CashAdopted { cash, what }]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::market::Side;
    use crate::orders::{ClientOrderId, OrderStatus, OrderType, TimeInForce};
    use crate::settings::Settings;

    fn engine() -> Engine {
        Engine::new(Settings::default(), Decimal::from(100_000), |_| None)
    }

    fn now() -> Timestamp {
        crate::time::parse_ts("2026-11-25T15:00:00Z").unwrap()
    }

    #[test]
    fn a_foreign_order_joins_the_book_once_without_a_strategy() {
        let mut e = engine();
        let id = ClientOrderId::parse("web-1").unwrap();
        let symbol = Symbol::parse("ABCD").unwrap();
        let mut order = Order::new(
            id.clone(),
            symbol,
            Side::Buy,
            OrderType::Limit,
            TimeInForce::Gtc,
            10,
            Some(Decimal::from(5)),
            None,
            now(),
        );
        order.status = OrderStatus::Accepted;
        order.strategy_id = Some("x".into());
        let fx = e.adopt_order(order.clone());
        let Some(Effect::OrderUpdated(adopted)) = fx.first() else { panic!("{fx:?}") };
        assert_eq!(adopted.reason.as_deref(), Some(ADOPTED_REASON));
        assert_eq!(adopted.strategy_id, None);
        assert!(e.order(&id).is_some());
        assert!(e.adopt_order(order).is_empty(), "adopted once");
    }

    #[test]
    fn a_position_at_the_broker_is_taken_as_halted_and_cash_as_the_brokers() {
        let mut e = engine();
        let symbol = Symbol::parse("WXYZ").unwrap();
        let fx = e.adopt_position(&symbol, 40, Decimal::new(1250, 2), now());
        let position = e.positions().get(&symbol).expect("adopted");
        assert_eq!((position.quantity, position.cost_basis), (40, Decimal::from(500)));
        assert!(fx.iter().any(|f| matches!(f, Effect::PositionUpdated { status: StrategyStatus::Halted, .. })));
        assert!(e.adopt_position(&symbol, 40, Decimal::new(1250, 2), now()).is_empty());
        let fx = e.adopt_cash(Decimal::new(9_950_012, 2));
        assert!(matches!(&fx[..], [Effect::CashAdopted { .. }]), "{fx:?}");
        assert_eq!(e.cash(), Decimal::new(9_950_012, 2));
    }
}
