//! The order ticket's risk preview (`POST /api/orders/preview`): what the risk gate would answer
//! to a manual order sent now, from the same snapshot and the same [`crate::risk::check`] a real
//! order meets in [`Engine::place`], without placing it. Nothing changes: no order, no violation
//! row, no count of trades.

use super::{CommandError, Engine, ManualOrder};
use crate::market::Side;
use crate::orders::{ClientOrderId, OrderType};
use crate::risk::{reference_price, OrderIntent, Refusal, Verdict};
use crate::time::Timestamp;
use rust_decimal::Decimal;
use std::borrow::Cow;

/// The id a preview without a `client_order_id` is checked under: valid, and never generated for
/// a real order (those start with `to-`), so it is never "already used".
const PREVIEW_ID: &str = "preview";

/// What a manual order would meet if it were sent now.
#[derive(Clone, Debug, PartialEq)]
pub struct OrderPreview {
    /// `Ok` when the gate approves; else its refusal (a risk rule, the halt or a duplicate).
    pub verdict: Result<(), Refusal>,
    /// What the order is valued at: its limit, else its stop, else the last trade.
    pub reference_price: Option<Decimal>,
    /// Quantity × reference price (`None` without a price).
    pub estimated_cost: Option<Decimal>,
    /// Buying power now, after what working buy orders reserve.
    pub buying_power: Decimal,
    /// Buying power once this order is working: a buy reserves its cost (a market buy with the
    /// market buy buffer, as the gate values it); a sell adds its proceeds.
    pub buying_power_after: Decimal,
    /// What the order loses if its stop leg fills: quantity × (reference − stop), to the cent.
    pub risk_to_stop: Option<Decimal>,
    /// What it gains if its take-profit leg fills: quantity × (target − reference), to the cent.
    pub reward_to_target: Option<Decimal>,
}

impl Engine {
    /// The gate's verdict on `order` sent at `now`, with the symbol's last trade `mark` (the
    /// runner marks the symbol the same way before a real order). Refused like a real order
    /// when the market is closed or the order is unsound on its face (`VALIDATION_ERROR`);
    /// every other refusal is the preview's answer.
    pub fn preview(
        &self,
        order: &ManualOrder,
        mark: Option<Decimal>,
        now: Timestamp,
    ) -> Result<OrderPreview, CommandError> {
        super::commands::check_extended_hours(order)?;
        self.ensure_open(now)?;
        self.ensure_session(order.order_type, order.extended_hours, now)?;
        self.ensure_trades(&order.symbol, order.order_type)?;
        self.check_legs(order, mark.filter(|p| *p > Decimal::ZERO))?;
        let id = order.client_order_id.clone().unwrap_or_else(|| ClientOrderId::generated(PREVIEW_ID));
        let intent = OrderIntent {
            client_order_id: &id,
            symbol: &order.symbol,
            side: order.side,
            order_type: order.order_type,
            quantity: order.quantity,
            limit_price: order.limit_price,
            stop_price: order.stop_price,
        };
        // `place` reads the recent orders as one slice after making them contiguous; here they
        // are joined only when the ring buffer wraps.
        let recent: Cow<'_, [_]> = match self.recent.as_slices() {
            (front, []) => Cow::Borrowed(front),
            (front, back) => Cow::Owned(front.iter().chain(back).cloned().collect()),
        };
        let mut snapshot = self.snapshot(&order.symbol, &id, &recent, now);
        if let Some(last) = mark.filter(|p| *p > Decimal::ZERO) {
            snapshot.last_price = Some(last);
        }
        let verdict = match crate::risk::check(&intent, &snapshot, now) {
            Verdict::Approved => Ok(()),
            Verdict::Refused(Refusal::Invalid { field, reason }) => {
                return Err(CommandError::Invalid { field, reason });
            }
            Verdict::Refused(refusal) => Err(refusal),
        };
        let reference = reference_price(order.limit_price, order.stop_price, snapshot.market_fill, snapshot.last_price);
        let cost = reference.map(|p| p * Decimal::from(order.quantity));
        let buying_power = snapshot.buying_power;
        let buying_power_after = match (order.side, cost) {
            (_, None) => buying_power,
            (Side::Buy, Some(cost)) if order.order_type == OrderType::Market => {
                buying_power - cost * snapshot.limits.market_buy_factor()
            }
            (Side::Buy, Some(cost)) => buying_power - cost,
            (Side::Sell, Some(cost)) => buying_power + cost,
        };
        let shares = Decimal::from(order.quantity);
        let legs = order.legs.filter(|_| order.side == Side::Buy);
        let risk_to_stop = legs.zip(reference).map(|(l, r)| (shares * (r - l.stop_price)).round_dp(2));
        let reward_to_target =
            legs.and_then(|l| l.take_profit).zip(reference).map(|(t, r)| (shares * (t - r)).round_dp(2));
        Ok(OrderPreview {
            risk_to_stop,
            reward_to_target,
            verdict,
            reference_price: reference,
            estimated_cost: cost.map(|c| c.round_dp(2)),
            buying_power: buying_power.round_dp(2),
            buying_power_after: buying_power_after.round_dp(2),
        })
    }
}
