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
//! A position a strategy manages is protected the same way with the strategy's stop and, where
//! the strategy has one, its target. A venue's one-cancels-other pair sells one quantity for
//! both legs, while a target may take only part of the position (`momentum_breakout` scales out
//! a fraction), so such a position rests as two protective orders: a stop one-cancels-other
//! with a take-profit at the target for the shares the strategy sells there
//! ([`Strategy::target_quantity`](crate::strategy::Strategy::target_quantity)), and a stop alone
//! for the rest. The take-profit filling is the strategy's scale-out
//! ([`Strategy::on_target_filled`](crate::strategy::Strategy::on_target_filled)); the strategy
//! does not sell at the target itself while it rests (`StrategyContext::target_at_broker`).
//! A stop elected elects both stops at the same level: the whole position exits. Every other
//! exit frees the shares of both orders first, and is sent once both have ended.
//!
//! The broker's copy follows the strategy: when it moves its stop (`momentum_breakout`'s
//! breakeven after the scale-out) the protective orders are replaced. With
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
    price.round_dp_with_strategy(venue_places(price), RoundingStrategy::ToZero)
}

/// `price` as a venue takes a sell limit (CONTRACT §11, as [`venue_stop`]), rounded up: a
/// take-profit never sells below the strategy's target.
fn venue_target(price: Decimal) -> Decimal {
    price.round_dp_with_strategy(venue_places(price), RoundingStrategy::AwayFromZero)
}

/// `price` moved `pct` percent in the direction that makes an order of `side` marketable (a
/// buy over it, a sell under it), in the venue's ticks, rounded that way too: an
/// extended-hours limit that crosses the spread (CONTRACT §12). Never under one tick.
pub(crate) fn offset_price(price: Decimal, pct: f64, side: Side) -> Decimal {
    let pct = Decimal::try_from(pct).unwrap_or_default() / Decimal::ONE_HUNDRED;
    let (moved, rounding) = match side {
        Side::Buy => (price * (Decimal::ONE + pct), RoundingStrategy::AwayFromZero),
        Side::Sell => (price * (Decimal::ONE - pct), RoundingStrategy::ToZero),
    };
    let places = venue_places(moved);
    moved.round_dp_with_strategy(places, rounding).max(Decimal::new(1, places))
}

/// The decimal places of a venue's tick at `price`: cents from $1, hundredths of a cent below.
fn venue_places(price: Decimal) -> u32 {
    if price >= Decimal::ONE {
        2
    } else {
        4
    }
}

/// What protects a position now (position rows' `protection`, CONTRACT §11).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ProtectionKind {
    /// Protective orders rest at the broker whose stops together cover the whole quantity.
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

/// A position's protection: its kind and the protective order resting at the broker, if any
/// (of two, the stop for the shares not sold at the target: the one that stays to the end).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Protection {
    pub kind: ProtectionKind,
    pub order_id: Option<ClientOrderId>,
}

/// A protective order a position should have at the broker: its legs and quantity.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Wanted {
    legs: ExitLegs,
    quantity: u64,
}

/// The reason of a protective order, `PROTECTIVE_STOP: sentence` (trades name the exit by the leg
/// that filled).
fn protective_reason(legs: &ExitLegs, quantity: u64, symbol: &Symbol) -> String {
    let mut text = format!("PROTECTIVE_STOP: a stop at {}", legs.stop_price.normalize());
    if let Some(limit) = legs.stop_limit_price {
        text.push_str(&format!(" (limit {})", limit.normalize()));
    }
    let verb = match legs.take_profit {
        Some(target) => {
            text.push_str(&format!(" and a take-profit at {}", target.normalize()));
            "protect"
        }
        None => "protects",
    };
    text.push_str(&format!(" {verb} {quantity} {symbol} at the broker"));
    text
}

impl Engine {
    /// The protective orders of `symbol` still working at the broker (being cancelled
    /// included): one, or a strategy's two (see the module's doc).
    pub fn protective_orders<'a>(&'a self, symbol: &'a Symbol) -> impl Iterator<Item = &'a Arc<Order>> + 'a {
        self.orders.values().filter(move |o| &o.symbol == symbol && !o.status.is_final() && o.is_protective())
    }

    /// Whether a take-profit rests at the broker for `symbol` (being placed, or cancelled, included):
    /// its strategy leaves the target to it.
    pub(super) fn target_at_broker(&self, symbol: &Symbol) -> bool {
        self.protective_orders(symbol).any(|o| o.legs.is_some_and(|l| l.take_profit.is_some()))
    }

    /// Whether `id` is an exit written ahead and held back until the shares it sells are freed:
    /// never sent by a lookup or a resend before then.
    pub fn is_held_exit(&self, id: &ClientOrderId) -> bool {
        self.freeing.values().any(|exits| exits.contains(id))
    }

    /// What protects `symbol`'s position now (CONTRACT §11, §12): as of the last event handled.
    pub fn protection(&self, symbol: &Symbol) -> Protection {
        let held = self.positions.get(symbol).map(|p| p.quantity).unwrap_or(0);
        if held == 0 {
            return Protection::default();
        }
        let (resting, shown) = self.resting_protection(symbol, held);
        // A venue triggers a resting stop only in the regular session (CONTRACT §12): outside
        // it the engine holds the stop ([`Engine::check_engine_stop`]), whether or not the
        // broker's copy rests for the next open.
        let triggers = self.session_at(self.now).is_regular();
        // A bracket's levels are the broker's to watch: without its stop resting there for the
        // whole position (rejected, expired, being replaced), nothing sells at them in the
        // regular session.
        let kind = if resting && triggers {
            ProtectionKind::Broker
        } else if self.strategy_levels(symbol).is_some() || (!triggers && self.position_levels(symbol).is_some()) {
            ProtectionKind::Engine
        } else {
            ProtectionKind::None
        };
        Protection { kind, order_id: shown.map(|o| o.client_order_id.clone()) }
    }

    /// Whether protective orders rest at the broker (acknowledged, not being cancelled) for all
    /// `held` shares of `symbol`, whatever the session, and the one shown as the position's.
    fn resting_protection<'a>(&'a self, symbol: &'a Symbol, held: u64) -> (bool, Option<&'a Arc<Order>>) {
        // Resting means acknowledged: an order still on its way protects nothing yet. Of two,
        // the id shown is the stop's for the rest (a take-profit's is shown when it is alone).
        let (mut resting, mut shown) = (0, None::<&Arc<Order>>);
        for o in self.protective_orders(symbol) {
            if o.broker_order_id.is_some() && o.status != OrderStatus::PendingCancel {
                resting += o.remaining();
            }
            let target = |o: &Order| o.legs.is_some_and(|l| l.take_profit.is_some());
            if shown.is_none_or(|s| target(s) && !target(o)) {
                shown = Some(o);
            }
        }
        (shown.is_some() && resting >= held, shown)
    }

    /// The protective orders `symbol`'s position of `quantity` shares should have at the
    /// broker: while a strategy manages it, its stop with a take-profit at its target for the
    /// shares it sells there, and its stop alone for the rest (either left out when it would
    /// cover nothing); else its bracket's legs for all of it. `None` without levels.
    fn wanted_protection(&self, symbol: &Symbol, quantity: u64) -> Option<Vec<Wanted>> {
        let Some(levels) = self.strategy_levels(symbol) else {
            return self.brackets.get(symbol).map(|&legs| vec![Wanted { legs, quantity }]);
        };
        let stop = ExitLegs { stop_price: venue_stop(levels.stop_loss), stop_limit_price: None, take_profit: None };
        let strategy = self.slots.get(symbol).and_then(|s| s.strategy.as_ref());
        let at_target = match (levels.target, strategy) {
            (Some(_), Some(s)) => s.target_quantity(quantity, &self.settings.strategy_allocator).min(quantity),
            _ => 0,
        };
        let mut wanted = Vec::with_capacity(2);
        if let (Some(target), true) = (levels.target, at_target > 0) {
            let legs = ExitLegs { take_profit: Some(venue_target(target)), ..stop };
            wanted.push(Wanted { legs, quantity: at_target });
        }
        if at_target < quantity || wanted.is_empty() {
            wanted.push(Wanted { legs: stop, quantity: quantity - at_target });
        }
        Some(wanted)
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
        let protective: Vec<ClientOrderId> =
            self.protective_orders(&order.symbol).map(|o| o.client_order_id.clone()).collect();
        if protective.is_empty() {
            fx.push(Effect::Submit(order));
            return;
        }
        self.freeing.entry(order.symbol.clone()).or_default().push(order.client_order_id.clone());
        fx.push(Effect::OrderUpdated(order));
        // Both of a strategy's orders hold shares: the exit goes once both have ended.
        for id in &protective {
            self.request_cancel(id, now, fx);
        }
    }

    /// After an event of `order`: an entry with legs that ended filled (wholly or in part)
    /// gets its protective orders; a protective order that ended frees the exits waiting for
    /// it (once the symbol's other one has ended too) and protects what is left, and one whose
    /// take-profit filled tells the strategy it took its profit, the stop for the rest following
    /// it; a position gone flat drops its bracket.
    pub(super) fn after_order_event(&mut self, order: &Order, ended: bool, now: Timestamp, fx: &mut Vec<Effect>) {
        let symbol = &order.symbol;
        if self.positions.get(symbol).is_none_or(|p| p.is_flat()) {
            self.brackets.remove(symbol);
            // Nothing left to protect: a protective order still resting would sell shares that
            // are gone (a short on a margin account).
            let resting: Vec<ClientOrderId> = self
                .protective_orders(symbol)
                .filter(|o| o.status.is_cancellable())
                .map(|o| o.client_order_id.clone())
                .collect();
            for id in &resting {
                self.request_cancel(id, now, fx);
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
            if self.target_filled(order) && !self.freeing.contains_key(symbol) {
                // The stop for the rest follows the strategy's new stop (breakeven).
                self.protect(symbol, now, fx);
            }
            self.release_exits(symbol, now, fx);
        } else if order.side == Side::Sell && order.status != OrderStatus::Filled {
            // An exit that ended unfilled (cancelled, expired, rejected) sells nothing: what
            // it was to sell is protected again.
            self.protect(symbol, now, fx);
        }
    }

    /// A protective order that ended having sold at its take-profit, of a position a strategy
    /// manages: the strategy learns it took its profit there (CONTRACT §11). Whether it did.
    fn target_filled(&mut self, order: &Order) -> bool {
        let Some(price) = order.average_fill_price() else { return false };
        if order.legs.is_none_or(|l| l.take_profit.is_none()) || order.protective_leg(price) != "TAKE_PROFIT" {
            return false;
        }
        if self.strategy_levels(&order.symbol).is_none() {
            return false;
        }
        let Some(strategy) = self.slots.get_mut(&order.symbol).and_then(|s| s.strategy.as_mut()) else {
            return false;
        };
        strategy.on_target_filled(order.filled_quantity, price);
        true
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

    /// Makes the protective orders of `symbol` cover what is held and not being sold, at the
    /// levels in force: places them, or replaces them when any is of another size or other
    /// levels (cancels every one, then places the new ones when the cancels are confirmed).
    /// Nothing while `HALTED` (the halt sells everything) or without levels to protect with.
    fn protect(&mut self, symbol: &Symbol, now: Timestamp, fx: &mut Vec<Effect>) {
        if self.trading_state == TradingState::Halted {
            return;
        }
        let quantity = self.not_being_sold(symbol);
        let Some(wanted) = self.wanted_protection(symbol, quantity) else { return };
        let current: Vec<(ClientOrderId, Wanted, bool)> = self
            .protective_orders(symbol)
            .filter_map(|o| {
                let legs = o.legs?;
                Some((o.client_order_id.clone(), Wanted { legs, quantity: o.remaining() }, o.status.is_cancellable()))
            })
            .collect();
        if !current.is_empty() {
            let kept = current.len() == wanted.len() && current.iter().all(|(_, c, _)| wanted.contains(c));
            let cancellable: Vec<&ClientOrderId> = current.iter().filter(|c| c.2).map(|c| &c.0).collect();
            if !kept && !cancellable.is_empty() {
                self.freeing.entry(symbol.clone()).or_default();
                for id in cancellable {
                    self.request_cancel(id, now, fx);
                }
            }
            return;
        }
        for Wanted { legs, quantity } in wanted {
            if quantity > 0 {
                self.place_protective(symbol, legs, quantity, now, fx);
            }
        }
    }

    /// Places one protective order of `symbol`: a GTC sell stop (stop-limit) at `legs`, with
    /// its take-profit when it has one, for `quantity` shares.
    fn place_protective(
        &mut self,
        symbol: &Symbol,
        legs: ExitLegs,
        quantity: u64,
        now: Timestamp,
        fx: &mut Vec<Effect>,
    ) {
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

    /// After a bar a strategy decided on: the protective orders resting for its position follow
    /// the strategy's levels (replaced when it moved its stop or target without an exit, e.g. a
    /// trailing stop). Nothing is placed here: a position is first protected when its entry
    /// fills (and one whose protective order an operator cancelled is not protected again).
    pub(super) fn follow_levels(&mut self, symbol: &Symbol, now: Timestamp, fx: &mut Vec<Effect>) {
        let current: Vec<Option<ExitLegs>> =
            self.protective_orders(symbol).filter(|o| o.status.is_cancellable()).map(|o| o.legs).collect();
        if current.is_empty() {
            return;
        }
        let quantity = self.not_being_sold(symbol);
        let Some(wanted) = self.wanted_protection(symbol, quantity) else { return };
        if current.iter().any(|legs| !wanted.iter().any(|w| Some(w.legs) == *legs)) {
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
            // Resting counts in any session: outside the regular one the broker's copy waits
            // for the open while the engine holds the stop (CONTRACT §12).
            let held = self.positions.get(&symbol).map(|p| p.quantity).unwrap_or(0);
            let settled = self.strategy_levels(&symbol).is_none()
                || (held > 0 && self.resting_protection(&symbol, held).0)
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
            client_order_id: self.protection(symbol).order_id,
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

    /// A protective order of `symbol` ended: once none is left working, the exits held for
    /// them go out, each reduced to what is still held (withdrawn when nothing is), then what is
    /// left is protected again.
    fn release_exits(&mut self, symbol: &Symbol, now: Timestamp, fx: &mut Vec<Effect>) {
        if !self.freeing.contains_key(symbol) || self.protective_orders(symbol).next().is_some() {
            // The other of a strategy's two still holds its shares: its end releases them.
            return;
        }
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

    /// Rebuilds what is being freed and the brackets after a restart: the protective orders
    /// still working name their symbol's bracket (of a strategy's two, the stop's for the rest)
    /// and the levels its strategy manages the position at; an exit never acknowledged in a
    /// symbol whose protective orders still work waits for them (their cancels are sent again
    /// by reconciliation while pending, or here when not).
    pub fn restore_protection(&mut self, now: Timestamp) -> Vec<Effect> {
        let mut fx = Vec::new();
        let protective: Vec<Arc<Order>> =
            self.orders.values().filter(|o| o.is_protective() && !o.status.is_final()).cloned().collect();
        let symbols: std::collections::BTreeSet<Symbol> = protective.iter().map(|p| p.symbol.clone()).collect();
        for symbol in symbols {
            let of: Vec<&Arc<Order>> = protective.iter().filter(|p| p.symbol == symbol).collect();
            let target = of.iter().find_map(|p| p.legs.and_then(|l| l.take_profit));
            let stop = of.iter().find(|p| p.legs.is_some_and(|l| l.take_profit.is_none())).or(of.first());
            if let Some(legs) = stop.and_then(|p| p.legs) {
                self.brackets.insert(symbol.clone(), legs);
                // A strategy handed the position again manages it at the levels resting at the
                // broker (not at default ones it would move the broker's copy to): a take-profit
                // still resting is a target not yet taken.
                let held = self.positions.get(&symbol).is_some_and(|p| !p.is_flat());
                if let Some(s) = self.slots.get_mut(&symbol).and_then(|s| s.strategy.as_mut()).filter(|_| held) {
                    s.adopt_levels(legs.stop_price, target);
                }
            }
            let held: Vec<ClientOrderId> = self
                .open_orders_of(&symbol)
                .filter(|o| {
                    o.side == Side::Sell
                        && !o.is_protective()
                        && o.status == OrderStatus::New
                        && o.broker_order_id.is_none()
                })
                .map(|o| o.client_order_id.clone())
                .collect();
            if !held.is_empty() {
                self.freeing.entry(symbol.clone()).or_default().extend(held);
                for p in &of {
                    self.request_cancel(&p.client_order_id, now, &mut fx);
                }
            } else if of.iter().any(|p| p.status == OrderStatus::PendingCancel) {
                // Being cancelled (a resize in flight, most likely): what is left once they end
                // is protected again rather than left bare.
                self.freeing.entry(symbol.clone()).or_default();
            }
        }
        fx
    }
}

#[cfg(test)]
mod tests;
