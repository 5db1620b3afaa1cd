//! Protection at the broker (CONTRACT §11): a position bought with exit legs gets a protective
//! order resting at the broker the moment its entry fills — a GTC sell stop (stop-limit) for the
//! whole position, one-cancels-other with a take-profit limit when it has one — so the position
//! is protected while tradeops, its machine or its network is down.
//!
//! A venue holds the shares of a resting sell for it (Alpaca refuses another sell of them,
//! "insufficient qty available", 40310000), so any other exit of the position — a manual or
//! partial close, a strategy's exit, the emergency halt's — first frees them: the exit is
//! written ahead but held back (`Engine::freeing`), the protective order is cancelled, and only when
//! the broker has confirmed the cancel is the exit sent, with what is left of the position
//! protected again by a new protective order for the rest. Had the protective order filled in
//! the meantime, the held exit is reduced to what is still held, or withdrawn.
//!
//! A position a strategy manages is protected the same way with the strategy's stop, and the
//! broker's copy follows the strategy: when it moves its stop (`momentum_breakout`'s breakeven
//! after the scale-out) the protective order is replaced. With
//! `risk_controls.require_broker_stop`, a strategy position whose stop is not resting at the
//! broker [`BROKER_STOP_DEADLINE_SECONDS`] after it was placed (or that the broker refused) is
//! sold, and a `BROKER_STOP_MISSING` violation says why.

use super::{Effect, Engine};
use crate::market::Side;
use crate::orders::{ClientOrderId, ExitLegs, Order, OrderEvent, OrderStatus, TimeInForce};
use crate::risk::{RiskFigure, RiskRule, TradingState, ViolationDetail};
use crate::strategy::Levels;
use crate::symbol::Symbol;
use crate::time::Timestamp;
use rust_decimal::{Decimal, RoundingStrategy};
use serde::Serialize;
use std::sync::Arc;

/// How long a strategy position's protective order may take to rest at the broker (placed and
/// acknowledged) before `risk_controls.require_broker_stop` sells the position.
pub const BROKER_STOP_DEADLINE_SECONDS: i64 = 5;

/// The reason of the exit `risk_controls.require_broker_stop` sends (`RULE: sentence`).
const BROKER_STOP_MISSING: &str = "BROKER_STOP_MISSING";

/// `price` as a venue takes a sell stop: whole cents from $1, hundredths of a cent below
/// (CONTRACT §11), rounded down — a stop never tighter than the strategy's level, so it is
/// never elected above it. A strategy's breakeven stop is its entry's fill price, which a venue
/// may have filled at a fraction of a cent.
fn venue_stop(price: Decimal) -> Decimal {
    let places = if price >= Decimal::ONE { 2 } else { 4 };
    price.round_dp_with_strategy(places, RoundingStrategy::ToZero)
}

/// What protects a position now (position rows' `protection`, CONTRACT §11).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ProtectionKind {
    /// A protective order for the whole quantity rests at the broker.
    Broker,
    /// The engine watches a stop level (a strategy's, or a bracket's whose order is not resting
    /// at the broker for the whole quantity right now).
    Engine,
    /// Nothing protects it.
    #[default]
    None,
}

impl ProtectionKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ProtectionKind::Broker => "BROKER",
            ProtectionKind::Engine => "ENGINE",
            ProtectionKind::None => "NONE",
        }
    }
}

/// A position's protection: its kind and the protective order resting at the broker, if any.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Protection {
    pub kind: ProtectionKind,
    pub order_id: Option<ClientOrderId>,
}

/// The reason of a protective order, `PROTECTIVE_STOP: sentence` (trades name the exit by the leg
/// that filled).
fn protective_reason(legs: &ExitLegs, quantity: u64, symbol: &Symbol) -> String {
    let mut text = format!("PROTECTIVE_STOP: a stop at {}", legs.stop_price.normalize());
    if let Some(limit) = legs.stop_limit_price {
        text.push_str(&format!(" (limit {})", limit.normalize()));
    }
    if let Some(target) = legs.take_profit {
        text.push_str(&format!(" and a take-profit at {}", target.normalize()));
    }
    text.push_str(&format!(" protect {quantity} {symbol} at the broker"));
    text
}

impl Engine {
    /// The protective order of `symbol` still working at the broker (being cancelled included).
    pub fn protective_order(&self, symbol: &Symbol) -> Option<&Arc<Order>> {
        self.orders.values().find(|o| &o.symbol == symbol && !o.status.is_final() && o.is_protective())
    }

    /// Whether `id` is an exit written ahead and held back until the shares it sells are freed:
    /// never sent by a lookup or a resend before then.
    pub fn is_held_exit(&self, id: &ClientOrderId) -> bool {
        self.freeing.values().any(|exits| exits.contains(id))
    }

    /// What protects `symbol`'s position now (CONTRACT §11).
    pub fn protection(&self, symbol: &Symbol) -> Protection {
        let held = self.positions.get(symbol).map(|p| p.quantity).unwrap_or(0);
        if held == 0 {
            return Protection::default();
        }
        let protective = self.protective_order(symbol);
        // Resting means acknowledged: an order still on its way protects nothing yet.
        let resting = protective.is_some_and(|o| {
            o.broker_order_id.is_some() && o.status != OrderStatus::PendingCancel && o.remaining() >= held
        });
        // A bracket's levels are the broker's to watch: without its stop resting there for the
        // whole position (rejected, expired, being replaced), nothing sells at them.
        let kind = if resting {
            ProtectionKind::Broker
        } else if self.strategy_levels(symbol).is_some() {
            ProtectionKind::Engine
        } else {
            ProtectionKind::None
        };
        Protection { kind, order_id: protective.map(|o| o.client_order_id.clone()) }
    }

    /// The legs `symbol`'s position is protected with at the broker: its strategy's stop while a
    /// strategy manages it, else its bracket's. A strategy's stop goes alone: its target takes
    /// part of the position (`momentum_breakout` scales out a fraction), while a venue's
    /// one-cancels-other pair sells one quantity for both legs, and a separate sell of the
    /// fraction would be refused for shares the stop holds; the target stays the engine's to
    /// watch.
    fn protective_legs(&self, symbol: &Symbol) -> Option<ExitLegs> {
        match self.strategy_levels(symbol) {
            Some(levels) => {
                Some(ExitLegs { stop_price: venue_stop(levels.stop_loss), stop_limit_price: None, take_profit: None })
            }
            None => self.brackets.get(symbol).copied(),
        }
    }

    /// The levels in force for `symbol`'s position: its strategy's while one manages it, else
    /// its bracket's.
    pub fn position_levels(&self, symbol: &Symbol) -> Option<Levels> {
        self.strategy_levels(symbol)
            .or_else(|| self.brackets.get(symbol).map(|l| Levels { stop_loss: l.stop_price, target: l.take_profit }))
    }

    /// Places `order`, an exit of a position, at the broker; when a protective order holds the
    /// position's shares there, the exit waits (written ahead, not sent) for its cancel.
    pub(super) fn send_exit(&mut self, order: Arc<Order>, now: Timestamp, fx: &mut Vec<Effect>) {
        let Some(protective) = self.protective_order(&order.symbol).map(|o| o.client_order_id.clone()) else {
            fx.push(Effect::Submit(order));
            return;
        };
        self.freeing.entry(order.symbol.clone()).or_default().push(order.client_order_id.clone());
        fx.push(Effect::OrderUpdated(order));
        self.request_cancel(&protective, now, fx);
    }

    /// After an event of `order`: an entry with legs that ended filled (wholly or in part)
    /// gets its protective order; a protective order that ended frees the exits waiting for it
    /// and protects what is left; a position gone flat drops its bracket.
    pub(super) fn after_order_event(&mut self, order: &Order, ended: bool, now: Timestamp, fx: &mut Vec<Effect>) {
        let symbol = &order.symbol;
        if self.positions.get(symbol).is_none_or(|p| p.is_flat()) {
            self.brackets.remove(symbol);
            // Nothing left to protect: a protective order still resting would sell shares that
            // are gone (a short on a margin account).
            let resting = self.protective_order(symbol).filter(|o| o.status.is_cancellable());
            if let Some(id) = resting.map(|o| o.client_order_id.clone()) {
                self.request_cancel(&id, now, fx);
            }
        }
        if !ended {
            let refused = order.is_protective() && order.status != OrderStatus::PendingCancel;
            if refused && self.freeing.contains_key(symbol) {
                // The broker refused to cancel it (it works on): the shares stay held, so the
                // exits waiting for them are withdrawn, said so, rather than wait for ever.
                let why = "withdrawn before it was sent: the broker refused to cancel the protective order holding \
                           the shares";
                self.withdraw_held_exits(symbol, why, now, fx);
            }
            return;
        }
        if order.side == Side::Buy && order.filled_quantity > 0 {
            if let Some(legs) = order.legs {
                self.brackets.insert(symbol.clone(), legs);
            }
            // A bought position, or one that grew: its protective order covers all of it.
            self.protect(symbol, now, fx);
        } else if order.is_protective() {
            self.release_exits(symbol, now, fx);
        } else if order.side == Side::Sell && order.status != OrderStatus::Filled {
            // An exit that ended unfilled (cancelled, expired, rejected) sells nothing: what
            // it was to sell is protected again.
            self.protect(symbol, now, fx);
        }
    }

    /// Withdraws the exits of `symbol` held for its protective order's cancel (`CANCELED`, with
    /// `why`): they were never sent, so nothing is asked of the broker.
    fn withdraw_held_exits(&mut self, symbol: &Symbol, why: &str, now: Timestamp, fx: &mut Vec<Effect>) {
        let Some(exits) = self.freeing.remove(symbol) else { return };
        for id in &exits {
            self.withdraw_held(id, why, now, fx);
        }
    }

    /// Takes back one exit held for a protective order's cancel (an operator's or a stop's
    /// cancel of it, a refused protective cancel, its trading day over): it was never sent, so
    /// it ends `CANCELED` here and no cancel goes to the broker (which does not know it).
    /// Returns whether it was a held exit.
    pub(super) fn withdraw_held(
        &mut self,
        id: &ClientOrderId,
        why: &str,
        now: Timestamp,
        fx: &mut Vec<Effect>,
    ) -> bool {
        let mut held = false;
        for exits in self.freeing.values_mut() {
            let before = exits.len();
            exits.retain(|e| e != id);
            held |= exits.len() != before;
        }
        let Some(order) = self.orders.get_mut(id).filter(|o| o.status == OrderStatus::New) else { return held };
        let order = Arc::make_mut(order);
        order.reject_reason = Some(why.to_string());
        if order.apply(OrderEvent::Canceled, now).is_err() {
            return held;
        }
        // It placed nothing: the same exit again is no duplicate of it.
        self.recent.retain(|r| &r.client_order_id != id);
        let order = self.orders[id].clone();
        fx.push(Effect::OrderUpdated(order.clone()));
        self.order_finished(&order.symbol, id, OrderStatus::Canceled, now, fx);
        true
    }

    /// The shares of `symbol` held and not being sold by an exit (working or held back): what a
    /// protective order covers.
    fn not_being_sold(&self, symbol: &Symbol) -> u64 {
        let held = self.positions.get(symbol).map(|p| p.quantity).unwrap_or(0);
        let selling: u64 = self
            .open_orders_of(symbol)
            .filter(|o| o.side == Side::Sell && !o.is_protective())
            .map(|o| o.remaining())
            .sum();
        held.saturating_sub(selling)
    }

    /// Makes the protective order of `symbol` cover what is held and not being sold, at the
    /// levels in force: places one, or replaces one of another size or other levels (cancel,
    /// then a new one when the cancel is confirmed). Nothing while `HALTED` (the halt sells
    /// everything) or without levels to protect with.
    fn protect(&mut self, symbol: &Symbol, now: Timestamp, fx: &mut Vec<Effect>) {
        let Some(legs) = self.protective_legs(symbol) else { return };
        if self.trading_state == TradingState::Halted {
            return;
        }
        let quantity = self.not_being_sold(symbol);
        if let Some(current) = self.protective_order(symbol) {
            let moved = current.legs != Some(legs);
            if (moved || current.remaining() != quantity) && current.status.is_cancellable() {
                let id = current.client_order_id.clone();
                self.freeing.entry(symbol.clone()).or_default();
                self.request_cancel(&id, now, fx);
            }
            return;
        }
        if quantity == 0 {
            return;
        }
        let id = self.next_client_order_id(symbol, now);
        let mut order = Order::new(
            id.clone(),
            symbol.clone(),
            Side::Sell,
            legs.stop_type(),
            TimeInForce::Gtc,
            quantity,
            legs.stop_limit_price,
            Some(legs.stop_price),
            now,
        );
        order.legs = Some(legs);
        order.reason = Some(protective_reason(&legs, quantity, symbol).into());
        let order = Arc::new(order);
        self.orders.insert(id, order.clone());
        fx.push(Effect::Submit(order));
        if self.strategy_levels(symbol).is_some() {
            // Resting at the broker is awaited from the first placing: a replacement does not
            // restart the wait of one never acknowledged.
            self.stop_deadlines
                .entry(symbol.clone())
                .or_insert(now + chrono::Duration::seconds(BROKER_STOP_DEADLINE_SECONDS));
        }
    }

    /// After a bar a strategy decided on: the protective order resting for its position follows
    /// the strategy's levels (replaced when it moved its stop without an exit, e.g. a trailing
    /// stop). Nothing is placed here: a position is first protected when its entry fills.
    pub(super) fn follow_levels(&mut self, symbol: &Symbol, now: Timestamp, fx: &mut Vec<Effect>) {
        let Some(current) = self.protective_order(symbol) else { return };
        if current.legs != self.protective_legs(symbol) && current.status.is_cancellable() {
            self.protect(symbol, now, fx);
        }
    }

    /// `risk_controls.require_broker_stop`: a strategy position whose stop is not resting at the
    /// broker by its deadline is sold at market, with a `BROKER_STOP_MISSING` violation saying
    /// why (CONTRACT §11). `refused`: the broker refused the stop, so nothing is waited for.
    pub(super) fn check_broker_stops(&mut self, now: Timestamp, refused: Option<&Symbol>, fx: &mut Vec<Effect>) {
        if self.stop_deadlines.is_empty() {
            return;
        }
        let symbols: Vec<Symbol> = self.stop_deadlines.keys().cloned().collect();
        for symbol in symbols {
            // Nothing of a strategy's left to protect (flat, or its strategy stopped), the stop
            // resting, or the halt selling everything: nothing more to wait for.
            let settled = self.strategy_levels(&symbol).is_none()
                || self.protection(&symbol).kind == ProtectionKind::Broker
                || self.trading_state == TradingState::Halted;
            let due = self.stop_deadlines[&symbol];
            if !settled && now < due && refused != Some(&symbol) {
                continue;
            }
            self.stop_deadlines.remove(&symbol);
            if !settled && self.settings.risk_controls.require_broker_stop {
                self.sell_unprotected(&symbol, refused == Some(&symbol), now, fx);
            }
        }
    }

    /// Sells the whole strategy position of `symbol` at market, its stop not resting at the
    /// broker: the strategy's working orders are withdrawn first, and the violation row names
    /// the rule and the stop that is missing.
    fn sell_unprotected(&mut self, symbol: &Symbol, refused: bool, now: Timestamp, fx: &mut Vec<Effect>) {
        let held = self.positions.get(symbol).map(|p| p.quantity).unwrap_or(0);
        let quantity = self.not_being_sold(symbol);
        if quantity == 0 {
            return;
        }
        let stop = self.strategy_levels(symbol).map(|l| venue_stop(l.stop_loss)).unwrap_or_default();
        let why = if refused {
            "the broker refused it".to_string()
        } else {
            format!("it was not resting at the broker within {BROKER_STOP_DEADLINE_SECONDS} s")
        };
        let message = format!(
            "The stop at {} protecting {held} {symbol} could not be placed at the broker ({why}); \
             risk_controls.require_broker_stop sells the position at market",
            stop.normalize()
        );
        fx.push(Effect::Violation {
            rule: RiskRule::BrokerStopMissing,
            symbol: symbol.clone(),
            client_order_id: self.protective_order(symbol).map(|o| o.client_order_id.clone()),
            detail: ViolationDetail::Refused {
                limit: RiskFigure::Money(stop),
                current: RiskFigure::Shares(held),
                message: message.clone(),
            },
        });
        let entry = self.slots.get(symbol).and_then(|s| s.entry_order.clone());
        if let Some(id) = entry {
            self.request_cancel(&id, now, fx);
        }
        let reason: Arc<str> = Arc::from(format!("{BROKER_STOP_MISSING}: {message}."));
        let strategy = self.slots.get(symbol).and_then(|s| s.strategy.as_ref()).map(|s| s.id());
        let strategy = strategy.map(|id| self.strategy_id(id));
        if let Ok(id) = self.sell_at_market(symbol, quantity, Some(reason), strategy, now, fx) {
            if let Some(slot) = self.slots.get_mut(symbol) {
                slot.exit_orders.insert(id);
            }
            self.set_status(symbol, super::StrategyStatus::Sell, None, fx);
        }
    }

    /// The protective order of `symbol` ended: the exits held for it go out, each reduced to
    /// what is still held (withdrawn when nothing is), then what is left is protected again.
    fn release_exits(&mut self, symbol: &Symbol, now: Timestamp, fx: &mut Vec<Effect>) {
        let Some(exits) = self.freeing.remove(symbol) else { return };
        let mut left = self.positions.get(symbol).map(|p| p.quantity).unwrap_or(0);
        // Exits already at the broker sell first.
        let sent: u64 = self
            .open_orders_of(symbol)
            .filter(|o| o.side == Side::Sell && !o.is_protective() && !exits.contains(&o.client_order_id))
            .map(|o| o.remaining())
            .sum();
        left = left.saturating_sub(sent);
        let calendar = self.calendar();
        for id in &exits {
            let Some(order) = self.orders.get(id) else { continue };
            if order.status != OrderStatus::New || order.broker_order_id.is_some() {
                continue;
            }
            if order.time_in_force == TimeInForce::Day && calendar.end_of_trading_day(order.created_at) <= now {
                // Held past its trading day (a restart on a later day): a DAY order never
                // sent is not sent on another day.
                self.withdraw_held(id, "never sent: its trading day ended while it waited for the shares", now, fx);
                continue;
            }
            if left == 0 {
                // Sold by the protective order meanwhile: nothing left for this exit to sell.
                self.withdraw_held(id, "withdrawn before it was sent: the protective order sold the shares", now, fx);
                continue;
            }
            let Some(order) = self.orders.get_mut(id) else { continue };
            let order = Arc::make_mut(order);
            if order.quantity > left {
                order.quantity = left;
            }
            left -= order.quantity;
            fx.push(Effect::Submit(self.orders[id].clone()));
        }
        // The status follows by itself: an exit sent still works, one withdrawn ended.
        if left > 0 {
            self.protect(symbol, now, fx);
        }
    }

    /// Rebuilds what is being freed and the brackets after a restart: a protective order still
    /// working names its symbol's bracket; an exit never acknowledged in a symbol whose
    /// protective order still works waits for it (its cancel is sent again by reconciliation
    /// while it is pending, or here when it is not).
    pub fn restore_protection(&mut self, now: Timestamp) -> Vec<Effect> {
        let mut fx = Vec::new();
        let protective: Vec<Arc<Order>> =
            self.orders.values().filter(|o| o.is_protective() && !o.status.is_final()).cloned().collect();
        for p in protective {
            if let Some(legs) = p.legs {
                self.brackets.insert(p.symbol.clone(), legs);
                // A strategy handed the position again manages it at the stop resting at the
                // broker (not at a default one it would move the broker's copy to).
                let held = self.positions.get(&p.symbol).is_some_and(|p| !p.is_flat());
                if let Some(s) = self.slots.get_mut(&p.symbol).and_then(|s| s.strategy.as_mut()).filter(|_| held) {
                    s.adopt_stop(legs.stop_price);
                }
            }
            let held: Vec<ClientOrderId> = self
                .open_orders_of(&p.symbol)
                .filter(|o| {
                    o.side == Side::Sell
                        && !o.is_protective()
                        && o.status == OrderStatus::New
                        && o.broker_order_id.is_none()
                })
                .map(|o| o.client_order_id.clone())
                .collect();
            if !held.is_empty() {
                self.freeing.entry(p.symbol.clone()).or_default().extend(held);
                self.request_cancel(&p.client_order_id, now, &mut fx);
            } else if p.status == OrderStatus::PendingCancel {
                // Being cancelled at the stop (a resize in flight, most likely): what is left
                // once it ends is protected again rather than left bare.
                self.freeing.entry(p.symbol.clone()).or_default();
            }
        }
        fx
    }
}

#[cfg(test)]
mod tests;
