//! Completed bars reach the symbol's strategy; its decisions become orders through the risk gate,
//! entries first sized within the gate's size rules (the decision's sentence says when a rule
//! capped one).

use super::{Effect, Engine, StrategyStatus, SymbolMarket};
use crate::market::{Bar, Price, Side};
use crate::orders::{OrderType, TimeInForce};
use crate::risk::{BuyRoom, RiskRule, TradingState};
use crate::strategy::{Decision, StrategyContext};
use crate::symbol::Symbol;
use crate::time::push_digits;
use crate::time::Timestamp;
use rust_decimal::Decimal;
use std::fmt::Write as _;
use std::sync::Arc;

impl Engine {
    /// `seconds`: `now` in seconds since the epoch; `open` and `close`: its New York date's regular
    /// session (see [`crate::calendar::NyDate`]); `market`:
    /// what the engine knows of the symbol's market with this bar. One lookup of the slot and
    /// one of the position per bar.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn on_bar(
        &mut self,
        symbol: &Symbol,
        bar: &Bar,
        market: SymbolMarket,
        now: Timestamp,
        seconds: i64,
        (open, close): (i64, i64),
        fx: &mut Vec<Effect>,
    ) {
        if self.trading_state == TradingState::Halted {
            return;
        }
        // A halted symbol's strategy waits for the reopen (CONTRACT §11): no entry into a halt,
        // and no market exit that would fill at the reopen's price, whatever the gap. It still
        // sees the bar that completes as the halt begins (the prints before it): a halt prints
        // no bars after that one, and a backtest of the same bars sees it too, so the
        // strategy's day (VWAP, high of day, its window, a cooldown) stays the one a backtest
        // keeps. Only a withdrawal of its working entry is carried out.
        let halted = self.halt_of(symbol).is_some();
        let position = self.positions.get(symbol).map(|p| p.quantity).unwrap_or(0);
        // Looked for only while something is held (most bars hold nothing).
        let target_at_broker = position > 0 && self.target_at_broker(symbol);
        let Some(slot) = self.slots.get_mut(symbol) else { return };
        if slot.strategy.is_none() || matches!(slot.status, StrategyStatus::Closed | StrategyStatus::Halted) {
            return;
        }
        let is_working = |id: &crate::orders::ClientOrderId| super::is_working_in(&self.orders, id);
        let working = slot.entry_order.as_ref().is_some_and(is_working) || slot.exit_orders.iter().any(is_working);
        // Strategies time their day by the exchange's regular session whatever the trading
        // calendar, so `ALWAYS_OPEN` still has a 09:30 open.
        // Whole minutes, truncated toward zero (as `Duration::num_minutes`), in integer seconds.
        let (since_open, to_close) = ((seconds - open) / 60, (close - seconds) / 60);
        let ctx = StrategyContext {
            prev_close: market.prev_close,
            relative_volume: market.relative_volume,
            position,
            order_working: working,
            minutes_since_open: since_open,
            minutes_to_close: to_close,
            flatten_minutes_before_close: self.settings.runtime.flatten_minutes_before_close,
            buying_power: super::buying_power_of(&self.orders, self.cash, &self.market, &self.positions),
            target_at_broker,
        };
        let params = &self.settings.strategy_allocator;
        let strategy = slot.strategy.as_mut().expect("checked above");
        let mut decisions = strategy.on_bar(bar, &ctx, params);
        if halted {
            decisions.retain(|d| matches!(d, Decision::CancelEntry { .. }));
        }
        let strategy_id = strategy.id();
        for decision in decisions {
            self.act(symbol, strategy_id, decision, now, fx);
        }
        if ctx.position > 0 {
            // The broker's copy of the stop follows the strategy (CONTRACT §11).
            self.follow_levels(symbol, now, fx);
        }
    }

    fn act(
        &mut self,
        symbol: &Symbol,
        strategy_id: &'static str,
        mut decision: Decision,
        now: Timestamp,
        fx: &mut Vec<Effect>,
    ) {
        let rule = decision.rule();
        let entry = matches!(decision, Decision::Enter { .. } | Decision::Buy { .. });
        // Outside the regular session a strategy enters only where the operator allowed it
        // (`strategy_allocator.trade_extended_hours`, CONTRACT §12). Looked up for entries
        // only: the calendar is not read on a bar that decides nothing.
        let extended_session = entry && self.session_at(now).is_extended();
        if extended_session && !self.settings.strategy_allocator.trade_extended_hours {
            return;
        }
        // Entries are sized within the gate's size rules; the decision says how.
        let quantity = match &decision {
            Decision::Enter { quantity, limit_price, stop_price, .. } => {
                self.size_entry(symbol, OrderType::StopLimit, Some(*limit_price), Some(*stop_price), Some(*quantity))
            }
            Decision::Buy { quantity, .. } => self.size_entry(symbol, OrderType::Market, None, None, *quantity),
            _ => None,
        };
        if let Some((_, sentence)) = &quantity {
            if let Decision::Enter { text, .. } | Decision::Buy { text, .. } = &mut decision {
                text.push_str(sentence);
            }
        }
        let quantity = quantity.map(|(q, _)| q);
        // The order's reason, `RULE: sentence`, written once into the shared text.
        let reason = {
            let (text, scratch) = (decision.text(), &mut self.scratch);
            scratch.clear();
            scratch.extend([rule, ": ", text]);
            Some(Arc::from(scratch.as_str()))
        };
        fx.push(Effect::Decision { symbol: symbol.clone(), rule, text: decision.take_text() });
        let strategy = Some(self.strategy_id(strategy_id));
        match decision {
            Decision::Enter { quantity: wanted, stop_price, limit_price, stop_loss, .. } => {
                let quantity = quantity.unwrap_or(wanted);
                // Outside the regular session no venue triggers a stop (CONTRACT §12): the
                // engine holds the breakout's trigger, and once the last trade is through it
                // the entry is an extended-hours limit at the stop-limit's limit.
                let (kind, stop, extended) = if extended_session {
                    let last = self.market.get(symbol).map(|m| m.last).unwrap_or_default();
                    if last < stop_price {
                        return;
                    }
                    (OrderType::Limit, None, true)
                } else {
                    (OrderType::StopLimit, Some(stop_price), false)
                };
                let placed = self.place(
                    None,
                    symbol,
                    Side::Buy,
                    kind,
                    TimeInForce::Day,
                    quantity,
                    Some(limit_price),
                    stop,
                    reason,
                    strategy,
                    Some(stop_loss),
                    None,
                    extended,
                    now,
                    fx,
                );
                if let Ok(id) = placed {
                    if let Some(slot) = self.slots.get_mut(symbol) {
                        slot.entry_order = Some(id);
                    }
                    self.set_status(symbol, StrategyStatus::Buy, None, fx);
                }
            }
            Decision::Buy { quantity: wanted, .. } => {
                let quantity = quantity.or(wanted).unwrap_or(1);
                // Outside the regular session a market buy is an extended-hours limit over the
                // last trade by the ticket's offset (CONTRACT §12).
                let (kind, limit) = if extended_session {
                    let last = self.market.get(symbol).map(|m| m.last).unwrap_or_default();
                    let offset = self.settings.risk_controls.extended_hours_entry_offset_pct;
                    (OrderType::Limit, Some(super::protection::offset_price(last, offset, Side::Buy)))
                } else {
                    (OrderType::Market, None)
                };
                let placed = self.place(
                    None,
                    symbol,
                    Side::Buy,
                    kind,
                    TimeInForce::Day,
                    quantity,
                    limit,
                    None,
                    reason,
                    strategy,
                    None,
                    None,
                    extended_session,
                    now,
                    fx,
                );
                if let Ok(id) = placed {
                    if let Some(slot) = self.slots.get_mut(symbol) {
                        slot.entry_order = Some(id);
                    }
                    self.set_status(symbol, StrategyStatus::Buy, None, fx);
                }
            }
            Decision::Exit { quantity, .. } => {
                let placed = self.sell_at_market(symbol, quantity, reason, strategy, now, fx);
                if let Ok(id) = placed {
                    if let Some(slot) = self.slots.get_mut(symbol) {
                        slot.exit_orders.insert(id);
                    }
                    self.set_status(symbol, StrategyStatus::Sell, None, fx);
                }
            }
            Decision::CancelEntry { .. } => {
                if let Some(id) = self.slots.get(symbol).and_then(|s| s.entry_order.clone()) {
                    self.request_cancel(&id, now, fx);
                }
            }
        }
    }
}

/// Appends `value` as `Decimal` displays it (its scale kept: 1000.50), digit by digit where its
/// mantissa fits 64 bits: an entry's sentence quotes prices and dollars on every entry of a
/// backtest, where the format machinery would be much of the entry's cost.
fn push_decimal(text: &mut String, value: Decimal) {
    let scale = value.scale();
    match u64::try_from(value.mantissa()) {
        Ok(mantissa) if scale <= 19 && !value.is_sign_negative() => {
            let mut buf = [0u8; 48];
            let mut at = buf.len();
            let unit = 10u64.pow(scale);
            if scale > 0 {
                at = crate::time::write_digits(&mut buf, at, mantissa % unit, scale as usize) - 1;
                buf[at] = b'.';
            }
            at = crate::time::write_digits(&mut buf, at, mantissa / unit, 1);
            crate::time::push_ascii(text, &buf[at..]);
        }
        _ => {
            let _ = write!(text, "{value}");
        }
    }
}

/// Dollars and limits to the cent, as a sentence quotes them (`1000`, `8853.4`).
fn push_amount(text: &mut String, value: Decimal) {
    push_decimal(text, value.round_dp(2).normalize());
}

impl Engine {
    /// Sizes an entry of `wanted` shares (`None`: all the buying power) within the risk gate's
    /// size rules — `MAX_ORDER_VALUE`, `MAX_POSITION_SIZE`, `BUYING_POWER` — at the price the
    /// gate values it at (a market buy at its fill price where known, else the last trade plus
    /// `market_buy_buffer_pct`): the largest quantity the gate allows, and the sentence the
    /// decision records about it. When nothing fits, the quantity asked for (one share all in)
    /// goes to the gate, which refuses it naming the rule (a violation, counted by a backtest).
    /// `None` when there is no price to size at (the gate then refuses the order as it is).
    fn size_entry(
        &mut self,
        symbol: &Symbol,
        kind: OrderType,
        limit: Option<Decimal>,
        stop: Option<Decimal>,
        wanted: Option<u64>,
    ) -> Option<(u64, String)> {
        let market = self.market.get(symbol);
        let reference = crate::risk::reference_price(
            limit,
            stop,
            market.and_then(|m| m.fill).map(Price::to_decimal),
            market.map(|m| m.last),
        )?;
        let held = self.positions.get(symbol).map_or(0, |p| p.quantity) + self.open_quantity(symbol, Side::Buy);
        let buying_power = self.buying_power();
        let limits = &self.settings.risk_controls;
        let room = BuyRoom::new(limits, kind, reference, held, buying_power);
        let (size, bound) = room.size(wanted);
        let mut text = String::new();
        let quantity = match (size, wanted) {
            (0, Some(w)) => w,
            (0, None) => {
                text.push_str(" No whole share at ");
                push_decimal(&mut text, reference.normalize());
                text.push_str(" fits the risk limits.");
                1
            }
            (size, _) => size,
        };
        if size == 0 {
            return Some((quantity, text));
        }
        if wanted.is_none() {
            text.push(' ');
            push_digits(&mut text, size, 1);
            text.push_str(" shares at ");
            push_decimal(&mut text, reference.normalize());
            let buffer = limits.market_buy_buffer_pct;
            if kind == OrderType::Market && buffer > 0.0 {
                text.push_str(" (+");
                if buffer.fract() == 0.0 && buffer < 1e15 {
                    push_digits(&mut text, buffer as u64, 1);
                } else {
                    let _ = write!(text, "{buffer}");
                }
                text.push_str("% for the fill)");
            }
            text.push_str(" with $");
            push_amount(&mut text, buying_power);
            text.push_str(" of buying power.");
        }
        if let Some((rule, _)) = bound {
            match wanted {
                Some(w) => {
                    text.push_str(" Sized down from ");
                    push_digits(&mut text, w, 1);
                    text.push_str(" to ");
                }
                None => text.push_str(" Capped at "),
            }
            push_digits(&mut text, size, 1);
            text.push_str(" shares by ");
            text.push_str(rule.as_str());
            text.push_str(" (limit ");
            match rule {
                RiskRule::MaxOrderValue => push_amount(&mut text, limits.max_order_value),
                RiskRule::MaxPositionSize => {
                    push_digits(&mut text, limits.max_position_size, 1);
                    text.push_str(" shares");
                }
                _ => {
                    text.push('$');
                    push_amount(&mut text, buying_power);
                }
            }
            text.push_str(").");
        }
        Some((quantity, text))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// Dollars are written as `Decimal` displays them, scale kept.
        #[test]
        fn dollars_display_as_decimal(mantissa in proptest::prelude::any::<i64>(), scale in 0u32..28) {
            let value = Decimal::new(mantissa, scale);
            let mut text = String::from("$");
            push_decimal(&mut text, value);
            proptest::prop_assert_eq!(text, format!("${value}"));
        }
    }
}
