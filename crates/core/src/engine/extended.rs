//! The extended sessions (CONTRACT §12): from 04:00 to 09:30 and from 16:00 to 20:00 New York a
//! venue works only `LIMIT` `DAY` orders marked extended-hours and triggers no stop. So an exit
//! there — a close, a strategy's exit, the emergency halt's — goes out as a marketable limit
//! under the last trade ([`Engine::exit_shape`]), and one that does not fill is cancelled and
//! sent again at a fresh price every [`REPRICE_EVERY_SECONDS`] while the market falls away from
//! it ([`Engine::reprice_exits`]), until it fills.
//!
//! No venue triggers a resting stop there either, so the engine holds every position's stop
//! (its strategy's, or its bracket's; `protection` reads `ENGINE`) and fires it as such an exit
//! when the last trade crosses it ([`Engine::check_engine_stop`]); the exit frees the shares a
//! protective order resting at the broker for the next open holds first (CONTRACT §11).

use super::{Effect, Engine};
use crate::calendar::SessionPhase;
use crate::market::Side;
use crate::orders::{ClientOrderId, Order, OrderStatus, OrderType, TimeInForce};
use crate::symbol::Symbol;
use crate::time::Timestamp;
use rust_decimal::Decimal;
use std::sync::Arc;

/// How long an extended-hours exit works at one price before it is re-priced.
pub const REPRICE_EVERY_SECONDS: i64 = 5;

/// The rule of the exit an engine-held stop sends: trades name it as a stop-out.
pub const ENGINE_STOP_RULE: &str = "STOP_LOSS";

impl Engine {
    /// Trades as if every moment were in the regular session: for a backtest on daily bars,
    /// whose bar stands for a whole day (its orders fill at an open or a close by its fill
    /// model, whatever the instant the bar is seen at).
    pub fn without_session_rules(&mut self) {
        self.session_rules = false;
    }

    /// The session at `now` as the engine trades by it: the calendar's, or `REGULAR` all day
    /// without session rules.
    pub(crate) fn session_at(&self, now: Timestamp) -> SessionPhase {
        if self.session_rules {
            self.calendar().phase(now)
        } else {
            SessionPhase::Regular
        }
    }

    /// A change of session since the last event changes what protects every position (the
    /// broker's stop triggers only in the regular session): each held position is published
    /// again, so its row's `protection` changes at 09:30 and 16:00 as it does.
    pub(super) fn note_session(&mut self, now: Timestamp, fx: &mut Vec<Effect>) {
        let session = self.session_at(now);
        let previous = self.session_seen.replace(session);
        if previous.is_none_or(|p| p == session) {
            return;
        }
        let held: Vec<Symbol> = self.positions.values().filter(|p| !p.is_flat()).map(|p| p.symbol.clone()).collect();
        for symbol in held {
            let status = self.position_status(&symbol);
            fx.push(Effect::PositionUpdated { position: self.positions[&symbol].clone(), status });
        }
    }

    /// How an exit of `symbol` goes out at `now`: a market order in the regular session (and
    /// whenever the venue is closed: it waits there for the open); in the pre-market and the
    /// after-hours a limit `risk_controls.extended_hours_exit_slippage_pct` under the bid (the
    /// last trade where no quote is known), marked extended-hours. `(kind, limit,
    /// extended_hours)`.
    pub(crate) fn exit_shape(&self, symbol: &Symbol, now: Timestamp) -> (OrderType, Option<Decimal>, bool) {
        let market = self.market.get(symbol);
        let last = market.map(|m| m.last).unwrap_or_default();
        if last <= Decimal::ZERO || !self.session_at(now).is_extended() {
            return (OrderType::Market, None, false);
        }
        let reference = market.and_then(|m| m.bid).unwrap_or(last);
        let slippage = self.settings.risk_controls.extended_hours_exit_slippage_pct;
        (OrderType::Limit, Some(super::protection::offset_price(reference, slippage, Side::Sell)), true)
    }

    /// Asks the cancel of every extended-hours exit that has worked at its price for
    /// [`REPRICE_EVERY_SECONDS`] while the market moved under it (its limit is above the price
    /// an exit would be sent at now); once the cancel is confirmed, what it did not fill goes out
    /// again at the price of then ([`Engine::resend_repriced`]; the emergency halt's exits are
    /// sent again by the halt itself).
    pub(super) fn reprice_exits(&mut self, now: Timestamp, fx: &mut Vec<Effect>) {
        if !self.session_at(now).is_extended() {
            return;
        }
        let every = chrono::Duration::seconds(REPRICE_EVERY_SECONDS);
        let stale: Vec<ClientOrderId> = self
            .orders
            .values()
            .filter(|o| {
                o.extended_hours
                    && o.side == Side::Sell
                    && !o.is_protective()
                    && matches!(o.status, OrderStatus::Accepted | OrderStatus::PartiallyFilled)
                    && now - o.updated_at >= every
                    && !self.repricing.contains(&o.client_order_id)
                    && !self.is_held_exit(&o.client_order_id)
                    && matches!((self.exit_shape(&o.symbol, now).1, o.limit_price), (Some(fresh), Some(limit)) if fresh < limit)
            })
            .map(|o| o.client_order_id.clone())
            .collect();
        for id in stale {
            if self.request_cancel(&id, now, fx) {
                self.repricing.insert(id);
            }
        }
    }

    /// An exit cancelled to be re-priced has ended (`status`): what it did not fill, up to the
    /// shares still held and not otherwise being sold, goes out again as [`Engine::exit_shape`]
    /// says now, with the same reason and strategy, as the same exit of its strategy's slot.
    /// Nothing while halted: the halt sends its own exits again.
    pub(super) fn resend_repriced(
        &mut self,
        id: &ClientOrderId,
        status: OrderStatus,
        now: Timestamp,
        fx: &mut Vec<Effect>,
    ) {
        if !self.repricing.remove(id) || status != OrderStatus::Canceled {
            return;
        }
        if self.trading_state == crate::risk::TradingState::Halted {
            return;
        }
        let Some(old) = self.orders.get(id).cloned() else { return };
        let symbol = old.symbol.clone();
        let held = self.positions.get(&symbol).map(|p| p.quantity).unwrap_or(0);
        let quantity = old.remaining().min(held.saturating_sub(self.exits_working(&symbol)));
        if quantity == 0 {
            return;
        }
        let new_id = self.next_client_order_id(&symbol, now);
        let (kind, limit, extended) = self.exit_shape(&symbol, now);
        let mut order =
            Order::new(new_id.clone(), symbol.clone(), Side::Sell, kind, TimeInForce::Day, quantity, limit, None, now);
        order.reason = old.reason.clone();
        order.strategy_id = old.strategy_id.clone();
        order.extended_hours = extended;
        let order = Arc::new(order);
        self.orders.insert(new_id.clone(), order.clone());
        if let Some(slot) = self.slots.get_mut(&symbol) {
            slot.exit_orders.insert(new_id);
        }
        self.send_exit(order, now, fx);
        let position =
            self.positions.get(&symbol).cloned().unwrap_or_else(|| crate::positions::Position::new(symbol.clone()));
        let next = self.status_after_fill(&symbol, &position);
        self.set_status(&symbol, next, None, fx);
    }

    /// Outside the regular session, sells what `symbol`'s position holds beyond the shares
    /// already being sold once the last trade is at or under its stop (its strategy's, or its
    /// bracket's), as [`Engine::exit_shape`] says: the stop the venue would not trigger there.
    /// The exit is the strategy's (its slot's exit, its id) when one manages the position;
    /// its reason is `STOP_LOSS: sentence`. Outside the risk gate: it only reduces risk.
    pub(super) fn check_engine_stop(&mut self, symbol: &Symbol, now: Timestamp, fx: &mut Vec<Effect>) {
        let held = self.positions.get(symbol).map(|p| p.quantity).unwrap_or(0);
        if held == 0 || !self.session_at(now).is_extended() {
            return;
        }
        let Some(levels) = self.position_levels(symbol) else { return };
        let last = self.market.get(symbol).map(|m| m.last).unwrap_or_default();
        if last <= Decimal::ZERO || last > levels.stop_loss {
            return;
        }
        let quantity = held.saturating_sub(self.exits_working(symbol));
        if quantity == 0 {
            return;
        }
        let strategy = self.slots.get(symbol).and_then(|s| s.strategy.as_ref()).map(|s| s.id());
        let strategy = strategy.map(|id| self.strategy_id(id));
        let id = self.next_client_order_id(symbol, now);
        let (kind, limit, extended) = self.exit_shape(symbol, now);
        let mut order =
            Order::new(id.clone(), symbol.clone(), Side::Sell, kind, TimeInForce::Day, quantity, limit, None, now);
        order.reason = Some(Arc::from(format!(
            "{ENGINE_STOP_RULE}: the last trade {} crossed the stop at {} the engine holds outside the regular session",
            last.normalize(),
            levels.stop_loss.normalize()
        )));
        order.strategy_id = strategy;
        order.extended_hours = extended;
        let order = Arc::new(order);
        self.orders.insert(id.clone(), order.clone());
        if let Some(slot) = self.slots.get_mut(symbol) {
            slot.exit_orders.insert(id);
        }
        self.send_exit(order, now, fx);
        if self.slots.get(symbol).is_some_and(|s| s.strategy.is_some()) {
            self.set_status(symbol, super::StrategyStatus::Sell, None, fx);
        }
    }
}
