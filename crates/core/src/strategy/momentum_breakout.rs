//! The default live strategy: a transparent, deterministic first-pullback breakout on completed
//! 1-minute bars (research notes, domain §2.3 "Proposed default").
//!
//! Per day it keeps the session VWAP (from the regular open), the high of day, the last
//! [`PATTERN_BARS`] bars and its trade state. It buys the break of a pullback after an impulse
//! leg in a stock that is up at least 10% on at least 2x relative volume, trading above VWAP,
//! in the first 150 minutes of the session:
//!
//! - **Setup** (bar just completed, flat, nothing working, full 6-bar window, no cooldown):
//!   within the last 6 bars an impulse leg runs up at least 3% from its low to its high, then
//!   1–3 consecutive bars each make a lower high than the bar before. The pullback low stays
//!   above VWAP and gives back at most half of the leg; the close is above VWAP.
//! - **Order**: a buy stop-limit at the last bar's high + $0.01, limit + min(1%, $0.10);
//!   protective stop at the pullback low − $0.01; target at `reward_multiple` × risk above the
//!   trigger. Shares = floor(min(risk $ / risk per share, max position $ / limit)). The trade is
//!   skipped when the risk per share exceeds max($0.50, 5% of price) or no share fits.
//! - **Working entry**: cancelled when a bar closes below VWAP (`SETUP_FAILED`) or after two
//!   bars without a fill (`ENTRY_EXPIRED`).
//! - **Position**, first matching rule: stop touched (`STOP_LOSS`), flatten window
//!   (`FLATTEN_BEFORE_CLOSE`), target reached (`SCALE_OUT_TARGET`: sell a fraction, stop to
//!   breakeven), close below VWAP (`LOST_VWAP`). While a take-profit at the target rests at the
//!   broker for the fraction (`StrategyContext::target_at_broker`, CONTRACT §11) the strategy
//!   leaves the scale-out to it: its fill ([`Strategy::on_target_filled`]) moves the stop to
//!   breakeven, and the bar it filled in is judged by the stop in force as that bar began.
//! - **Governor**: no new entry within [`REENTRY_COOLDOWN_MINUTES`] of an exit.
//!
//! Every decision carries a sentence with the numbers it used. No clock, no randomness, no I/O:
//! the same bars and contexts always give the same decisions.

use super::{Decision, Levels, Strategy, StrategyContext};
use crate::bars::{day_gain, SessionRunning};
use crate::market::Bar;
use crate::settings::StrategyAllocatorSettings;
use rust_decimal::prelude::{FromPrimitive, ToPrimitive};
use rust_decimal::{Decimal, RoundingStrategy};
use std::collections::VecDeque;

/// Bars the impulse-and-pullback pattern is looked for in; the setup needs all of them.
pub const PATTERN_BARS: usize = 6;
/// Longest pullback (consecutive lower highs) that still counts as a first pullback.
pub const MAX_PULLBACK_BARS: usize = 3;
/// Entries are considered from the open up to this many minutes after it (inclusive).
pub const ENTRY_WINDOW_END_MINUTES: i64 = 150;
/// Minimum relative volume for an entry.
pub const MIN_RELATIVE_VOLUME: f64 = 2.0;
/// Bars a working entry may wait for its fill before it is cancelled.
pub const ENTRY_VALID_BARS: u32 = 2;
/// Minutes after an exit before a new entry on the same symbol.
pub const REENTRY_COOLDOWN_MINUTES: i64 = 10;

/// 0.10: minimum gain on the day.
fn min_day_gain() -> Decimal {
    Decimal::new(10, 2)
}

/// 0.03: minimum run-up of the impulse leg, as a fraction of its low.
fn min_run_up() -> Decimal {
    Decimal::new(3, 2)
}

/// 0.5: maximum share of the run-up the pullback may give back.
fn max_retrace() -> Decimal {
    Decimal::new(5, 1)
}

fn cent() -> Decimal {
    Decimal::new(1, 2)
}

fn round_cent(value: Decimal) -> Decimal {
    value.round_dp_with_strategy(2, RoundingStrategy::MidpointAwayFromZero)
}

/// Largest acceptable risk per share at `price`: max($0.50, 5% of price).
fn max_risk_per_share(price: Decimal) -> Decimal {
    Decimal::new(50, 2).max(price * Decimal::new(5, 2))
}

/// A price for a sentence: cents at or above $1 (and for whole-cent amounts), else 4 decimals.
fn px(value: Decimal) -> String {
    if value.abs() >= Decimal::ONE || value.round_dp(2) == value {
        format!("{:.2}", round_cent(value))
    } else {
        format!("{:.4}", value.round_dp_with_strategy(4, RoundingStrategy::MidpointAwayFromZero))
    }
}

/// A percentage with one decimal from a fraction (0.216 → "21.6").
fn pct(fraction: Decimal) -> String {
    format!(
        "{:.1}",
        (fraction * Decimal::ONE_HUNDRED).round_dp_with_strategy(1, RoundingStrategy::MidpointAwayFromZero)
    )
}

fn shares(n: u64) -> String {
    if n == 1 {
        "1 share".to_string()
    } else {
        format!("{n} shares")
    }
}

/// The entry the strategy sent (or last sent): levels it manages the position with.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Plan {
    stop_price: Decimal,
    stop_loss: Decimal,
    target: Decimal,
}

/// A position the strategy manages.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Holding {
    /// Average fill price of the entry.
    entry_price: Decimal,
    /// Shares reported filled by `on_entry_filled` (for the average price only).
    filled: u64,
    /// The stop at entry (R = entry − initial stop).
    initial_stop: Decimal,
    /// The current stop: the initial stop, then the entry price after the scale-out.
    stop: Decimal,
    target: Decimal,
    scaled_out: bool,
    /// The stop before the broker's take-profit filled, for the bar it filled in: that bar's
    /// low may have come before the fill, so it is judged by the stop in force as it began
    /// (from the fill on, the breakeven stop rests at the broker).
    stop_before_target_fill: Option<Decimal>,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Phase {
    Flat,
    /// An entry was sent; `bars_waited` bars completed since without a fill.
    EntryWorking {
        plan: Plan,
        bars_waited: u32,
    },
    InPosition(Holding),
}

/// Exit orders sent and possibly not yet filled, so that a later exit never sells shares an
/// earlier one is already selling.
#[derive(Clone, Copy, Debug, PartialEq)]
struct PendingExit {
    /// `ctx.position` when the exits were sent.
    position_when_sent: u64,
    /// Shares those exits sell in total.
    quantity: u64,
}

impl PendingExit {
    fn unfilled(&self, position: u64) -> u64 {
        self.quantity.saturating_sub(self.position_when_sent.saturating_sub(position))
    }
}

/// A recognised impulse-and-pullback.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Pattern {
    leg_low: Decimal,
    leg_high: Decimal,
    pullback_bars: usize,
    pullback_low: Decimal,
}

/// The first-pullback breakout strategy for one symbol.
#[derive(Clone, Debug, PartialEq)]
pub struct MomentumBreakout {
    /// VWAP and high of day from the regular open (the deep dive's market at entry reads the
    /// same values).
    session: SessionRunning,
    bars: VecDeque<Bar>,
    phase: Phase,
    /// The last entry planned today: levels for a fill that arrives after a cancel was sent.
    last_plan: Option<Plan>,
    pending_exit: Option<PendingExit>,
    /// Minute (since the open) of the last exit sent while in position.
    last_exit_minute: Option<i64>,
    /// No entry before this minute (since the open).
    cooldown_until: Option<i64>,
}

impl Default for MomentumBreakout {
    fn default() -> Self {
        Self::new()
    }
}

impl MomentumBreakout {
    pub const ID: &'static str = "momentum_breakout";
    pub const VERSION: &'static str = "1.0.0";

    pub fn new() -> Self {
        Self {
            session: SessionRunning::default(),
            bars: VecDeque::with_capacity(PATTERN_BARS),
            phase: Phase::Flat,
            last_plan: None,
            pending_exit: None,
            last_exit_minute: None,
            cooldown_until: None,
        }
    }

    fn observe(&mut self, bar: &Bar, ctx: &StrategyContext) {
        self.session.add(bar, ctx.minutes_since_open >= 0);
        if self.bars.len() == PATTERN_BARS {
            self.bars.pop_front();
        }
        self.bars.push_back(*bar);
    }

    /// The impulse leg and pullback ending at the last bar, if the window holds one.
    fn pattern(&self) -> Option<Pattern> {
        if self.bars.len() < PATTERN_BARS {
            return None;
        }
        let bars: Vec<&Bar> = self.bars.iter().collect();
        let n = bars.len();
        let pullback_bars = (1..n).rev().take_while(|&i| bars[i].high < bars[i - 1].high).count();
        if pullback_bars == 0 || pullback_bars > MAX_PULLBACK_BARS || pullback_bars >= n {
            return None;
        }
        let (impulse, pullback) = bars.split_at(n - pullback_bars);
        let peak = impulse.last()?;
        // The pullback has to follow the leg's high.
        if impulse.iter().any(|b| b.high > peak.high) {
            return None;
        }
        let leg_low = impulse.iter().map(|b| b.low).min()?.to_decimal();
        let leg_high = peak.high.to_decimal();
        let pullback_low = pullback.iter().map(|b| b.low).min()?.to_decimal();
        Some(Pattern { leg_low, leg_high, pullback_bars, pullback_low })
    }

    fn cooling_down(&self, minute: i64) -> bool {
        self.cooldown_until.is_some_and(|until| minute < until)
    }

    /// The entry decision for the bar just completed, if every condition holds.
    fn entry(&mut self, bar: &Bar, ctx: &StrategyContext, params: &StrategyAllocatorSettings) -> Option<Decision> {
        if ctx.position > 0 || ctx.order_working || self.cooling_down(ctx.minutes_since_open) {
            return None;
        }
        if !(0..=ENTRY_WINDOW_END_MINUTES).contains(&ctx.minutes_since_open) {
            return None;
        }
        let close = bar.close.to_decimal();
        if ctx.prev_close <= Decimal::ZERO {
            return None;
        }
        // gain = (close − prev) / prev < 10%, as a product (exact, and no division on every bar
        // of the entry window); the gain itself only for the explanation.
        if close - ctx.prev_close < ctx.prev_close * min_day_gain() {
            return None;
        }
        let rvol = ctx.relative_volume.filter(|r| r.is_finite() && *r >= MIN_RELATIVE_VOLUME)?;
        let vwap = self.session.vwap()?;
        if close <= vwap {
            return None;
        }
        let p = self.pattern()?;
        let run_up = p.leg_high - p.leg_low;
        if p.leg_low <= Decimal::ZERO || run_up < p.leg_low * min_run_up() {
            return None;
        }
        if p.pullback_low <= vwap || p.leg_high - p.pullback_low > run_up * max_retrace() {
            return None;
        }

        let stop_price = bar.high.to_decimal() + cent();
        let limit_price = round_cent(stop_price + (stop_price * cent()).min(Decimal::new(10, 2)));
        let stop_loss = p.pullback_low - cent();
        let risk = stop_price - stop_loss;
        if risk <= Decimal::ZERO || risk > max_risk_per_share(stop_price) {
            return None;
        }
        let reward = Decimal::from_f64(params.reward_multiple).filter(|r| *r > Decimal::ZERO)?;
        let target = round_cent(stop_price + reward * risk);
        let by_risk = params.risk_per_trade / risk;
        let by_value = params.max_position_value / limit_price;
        let quantity = by_risk.min(by_value).floor().to_u64().unwrap_or(0);
        if quantity == 0 {
            return None;
        }

        let plan = Plan { stop_price, stop_loss, target };
        self.phase = Phase::EntryWorking { plan, bars_waited: 0 };
        self.last_plan = Some(plan);
        let gain = day_gain(ctx.prev_close, close)?;
        let hod = self.session.high().map(|h| format!(", high of day {}", px(h.to_decimal()))).unwrap_or_default();
        let text = format!(
            "Up {}% on {:.1}x relative volume after a {}% run-up from {} to {}{hod}, pulled back {} bar{} to {} \
             above VWAP {}; buying the break of {} (limit {}) with a stop at {} (risk {}/share), target {} \
             ({}R), {}.",
            pct(gain),
            rvol,
            pct(run_up / p.leg_low),
            px(p.leg_low),
            px(p.leg_high),
            p.pullback_bars,
            if p.pullback_bars == 1 { "" } else { "s" },
            px(p.pullback_low),
            px(vwap),
            px(stop_price),
            px(limit_price),
            px(stop_loss),
            px(risk),
            px(target),
            reward.normalize(),
            shares(quantity),
        );
        Some(Decision::Enter {
            quantity,
            stop_price,
            limit_price,
            stop_loss,
            target,
            rule: "FIRST_PULLBACK_BREAKOUT",
            text,
        })
    }

    /// Manages a working entry; returns the cancel, if any.
    fn manage_entry(&mut self, bar: &Bar, plan: Plan, bars_waited: u32) -> Option<Decision> {
        let bars_waited = bars_waited + 1;
        let close = bar.close.to_decimal();
        if let Some(vwap) = self.session.vwap().filter(|v| close < *v) {
            self.phase = Phase::Flat;
            let text = format!(
                "Close {} fell below VWAP {} before the buy stop at {} filled; cancelling the entry.",
                px(close),
                px(vwap),
                px(plan.stop_price)
            );
            return Some(Decision::CancelEntry { rule: "SETUP_FAILED", text });
        }
        if bars_waited >= ENTRY_VALID_BARS {
            self.phase = Phase::Flat;
            let text = format!(
                "The buy stop at {} did not fill within {bars_waited} bars (last high {}); cancelling the entry.",
                px(plan.stop_price),
                px(bar.high.to_decimal())
            );
            return Some(Decision::CancelEntry { rule: "ENTRY_EXPIRED", text });
        }
        self.phase = Phase::EntryWorking { plan, bars_waited };
        None
    }

    /// Manages the position (`ctx.position > 0`); the first matching rule wins.
    fn manage_position(
        &mut self,
        bar: &Bar,
        ctx: &StrategyContext,
        params: &StrategyAllocatorSettings,
        mut h: Holding,
    ) -> Vec<Decision> {
        let stop = h.stop_before_target_fill.take().unwrap_or(h.stop);
        self.phase = Phase::InPosition(h);
        let unfilled = self.pending_exit.map_or(0, |p| p.unfilled(ctx.position));
        let sellable = ctx.position.saturating_sub(unfilled);
        if sellable == 0 {
            return Vec::new();
        }
        let (low, high, close) = (bar.low.to_decimal(), bar.high.to_decimal(), bar.close.to_decimal());
        let minute = ctx.minutes_since_open;
        let entry = px(h.entry_price);
        let held = shares(sellable);

        let mut exit: Option<(u64, &'static str, String)> = None;
        if low <= stop {
            let which = if h.scaled_out && stop == h.stop {
                format!("the breakeven stop at {} (the entry price)", px(stop))
            } else {
                format!("the stop at {}", px(stop))
            };
            let text = format!(
                "Bar low {} touched {which}; selling all {held} entered at {entry} (initial risk {}/share).",
                px(low),
                px(h.entry_price - h.initial_stop)
            );
            exit = Some((sellable, "STOP_LOSS", text));
        } else if ctx.flatten_minutes_before_close > 0
            && ctx.minutes_to_close <= i64::from(ctx.flatten_minutes_before_close)
        {
            let text = format!(
                "{} minutes to the close, inside the {}-minute flatten window; selling all {held} at market \
                 (entry {entry}, last close {}).",
                ctx.minutes_to_close,
                ctx.flatten_minutes_before_close,
                px(close)
            );
            exit = Some((sellable, "FLATTEN_BEFORE_CLOSE", text));
        } else if let Some(quantity) = (!h.scaled_out && !ctx.target_at_broker && high >= h.target)
            .then(|| scale_out_quantity(ctx.position, params.scale_out_fraction).min(sellable))
            .filter(|q| *q > 0)
        {
            let r = h.entry_price - h.initial_stop;
            let multiple = if r > Decimal::ZERO {
                format!(" ({}R above the entry {entry})", ((h.target - h.entry_price) / r).round_dp(1).normalize())
            } else {
                format!(" (entry {entry})")
            };
            let text = format!(
                "Bar high {} reached the target {}{multiple}; selling {} of {} and moving the stop from {} to \
                 breakeven {entry}.",
                px(high),
                px(h.target),
                quantity,
                shares(ctx.position),
                px(h.stop)
            );
            h.scaled_out = true;
            h.stop = h.entry_price;
            self.phase = Phase::InPosition(h);
            exit = Some((quantity, "SCALE_OUT_TARGET", text));
        } else if let Some(vwap) = self.session.vwap().filter(|v| close < *v) {
            let text =
                format!("Close {} fell below VWAP {}; selling all {held} entered at {entry}.", px(close), px(vwap));
            exit = Some((sellable, "LOST_VWAP", text));
        }

        let Some((quantity, rule, text)) = exit else { return Vec::new() };
        let mut decisions = Vec::with_capacity(2);
        if quantity == sellable && ctx.order_working && self.pending_exit.is_none() {
            // The only order that can still be working is the rest of a partly filled entry.
            let text =
                format!("Cancelling the rest of the entry order at {} before selling everything.", px(h.entry_price));
            decisions.push(Decision::CancelEntry { rule, text });
        }
        self.pending_exit = Some(PendingExit { position_when_sent: ctx.position, quantity: unfilled + quantity });
        self.last_exit_minute = Some(minute);
        decisions.push(Decision::Exit { quantity, rule, text });
        decisions
    }
}

/// floor(position × fraction), at least 1 when more than one share is held; 0 disables.
fn scale_out_quantity(position: u64, fraction: f64) -> u64 {
    let Some(fraction) = Decimal::from_f64(fraction).filter(|f| *f > Decimal::ZERO) else { return 0 };
    let quantity = (Decimal::from(position) * fraction).floor().to_u64().unwrap_or(0).min(position);
    if position > 1 {
        quantity.max(1)
    } else {
        quantity
    }
}

impl Strategy for MomentumBreakout {
    fn id(&self) -> &'static str {
        Self::ID
    }

    fn version(&self) -> &'static str {
        Self::VERSION
    }

    fn on_bar(&mut self, bar: &Bar, ctx: &StrategyContext, params: &StrategyAllocatorSettings) -> Vec<Decision> {
        self.observe(bar, ctx);
        if !ctx.order_working {
            self.pending_exit = None;
        }
        match self.phase {
            Phase::InPosition(h) if ctx.position > 0 => return self.manage_position(bar, ctx, params, h),
            Phase::InPosition(_) => {
                // Flat again: the cooldown runs from the last exit sent (or from now).
                let exited = self.last_exit_minute.unwrap_or(ctx.minutes_since_open);
                self.cooldown_until = Some(exited + REENTRY_COOLDOWN_MINUTES);
                self.phase = Phase::Flat;
                self.pending_exit = None;
            }
            Phase::EntryWorking { plan, .. } if ctx.position > 0 => {
                // Filled without a fill report reaching the strategy: manage with the plan.
                let h = holding_from_plan(plan, plan.stop_price, ctx.position);
                self.phase = Phase::InPosition(h);
                return self.manage_position(bar, ctx, params, h);
            }
            Phase::EntryWorking { plan, bars_waited } if ctx.order_working => {
                return self.manage_entry(bar, plan, bars_waited).into_iter().collect();
            }
            Phase::EntryWorking { .. } => {
                // The entry ended without a fill (rejected, cancelled or expired).
                self.phase = Phase::Flat;
            }
            Phase::Flat => {}
        }
        // No decision, no allocation (most bars).
        match self.entry(bar, ctx, params) {
            Some(decision) => vec![decision],
            None => Vec::new(),
        }
    }

    fn on_entry_filled(&mut self, quantity: u64, price: Decimal) {
        if quantity == 0 {
            return;
        }
        match self.phase {
            Phase::InPosition(mut h) => {
                // Another partial fill: average the entry price.
                let total = h.filled + quantity;
                h.entry_price =
                    (h.entry_price * Decimal::from(h.filled) + price * Decimal::from(quantity)) / Decimal::from(total);
                if h.scaled_out {
                    h.stop = h.entry_price;
                }
                h.filled = total;
                self.phase = Phase::InPosition(h);
            }
            Phase::EntryWorking { plan, .. } => {
                self.phase = Phase::InPosition(holding_from_plan(plan, price, quantity))
            }
            Phase::Flat => {
                // A fill racing a cancel uses the last plan; an adopted position gets the widest
                // stop the strategy accepts and a 2R target.
                let plan = self.last_plan.unwrap_or_else(|| {
                    let risk = max_risk_per_share(price);
                    Plan {
                        stop_price: price,
                        stop_loss: round_cent(price - risk).max(cent()),
                        target: round_cent(price + risk * Decimal::TWO),
                    }
                });
                self.phase = Phase::InPosition(holding_from_plan(plan, price, quantity));
            }
        }
        self.pending_exit = None;
    }

    fn reset_day(&mut self) {
        *self = Self::new();
    }

    /// The current stop (the initial one, the entry price once scaled out) and, until the
    /// scale-out, the target.
    fn levels(&self) -> Option<Levels> {
        match self.phase {
            Phase::InPosition(h) => Some(Levels { stop_loss: h.stop, target: (!h.scaled_out).then_some(h.target) }),
            Phase::Flat | Phase::EntryWorking { .. } => None,
        }
    }

    /// `scale_out_fraction` of the position ([`scale_out_quantity`]).
    fn target_quantity(&self, held: u64, params: &StrategyAllocatorSettings) -> u64 {
        scale_out_quantity(held, params.scale_out_fraction)
    }

    /// The broker's take-profit made the scale-out: the stop moves to breakeven, and the target
    /// is not sold again.
    fn on_target_filled(&mut self, quantity: u64, _price: Decimal) {
        let Phase::InPosition(mut h) = self.phase else { return };
        if quantity == 0 || h.scaled_out {
            return;
        }
        h.scaled_out = true;
        h.stop_before_target_fill = Some(h.stop);
        h.stop = h.entry_price;
        self.phase = Phase::InPosition(h);
    }

    /// A take-profit still resting (`target`) says the scale-out has not happened: the stop is
    /// the initial one and the target the one resting. Without one, a stop at the entry (as a
    /// venue takes it: rounded down to its tick) or above is the breakeven stop of a position
    /// already scaled out; one below it is the initial stop, with the adopted position's 2R
    /// target from it.
    fn adopt_levels(&mut self, stop: Decimal, target: Option<Decimal>) {
        let Phase::InPosition(mut h) = self.phase else { return };
        h.stop = stop;
        let places = if h.entry_price >= Decimal::ONE { 2 } else { 4 };
        if let Some(target) = target {
            h.initial_stop = stop;
            h.scaled_out = false;
            h.target = target;
        } else if stop >= h.entry_price.round_dp_with_strategy(places, RoundingStrategy::ToZero) {
            h.scaled_out = true;
        } else {
            h.initial_stop = stop;
            h.scaled_out = false;
            h.target = round_cent(h.entry_price + (h.entry_price - stop) * Decimal::TWO);
        }
        self.phase = Phase::InPosition(h);
    }
}

fn holding_from_plan(plan: Plan, price: Decimal, quantity: u64) -> Holding {
    Holding {
        entry_price: price,
        filled: quantity,
        initial_stop: plan.stop_loss,
        stop: plan.stop_loss,
        target: plan.target,
        scaled_out: false,
        stop_before_target_fill: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::market::Price;
    use crate::time::Timestamp;
    use chrono::{Duration, TimeZone, Utc};

    type Ohlcv = (f64, f64, f64, f64, u64);

    fn d(value: &str) -> Decimal {
        value.parse().unwrap()
    }

    fn open() -> Timestamp {
        Utc.with_ymd_and_hms(2026, 3, 2, 14, 30, 0).unwrap()
    }

    /// Bars one minute apart, the first starting `first_minute` minutes after the regular open.
    fn bars_from(first_minute: i64, rows: &[Ohlcv]) -> Vec<(i64, Bar)> {
        rows.iter()
            .enumerate()
            .map(|(i, &(o, h, l, c, v))| {
                let minute = first_minute + i as i64;
                let bar = Bar {
                    start: open() + Duration::minutes(minute),
                    open: Price::from_f64_tick(o),
                    high: Price::from_f64_tick(h),
                    low: Price::from_f64_tick(l),
                    close: Price::from_f64_tick(c),
                    volume: v,
                };
                assert!(bar.is_consistent(), "test bar {i} is inconsistent: {rows:?}");
                (minute, bar)
            })
            .collect()
    }

    fn bars(rows: &[Ohlcv]) -> Vec<(i64, Bar)> {
        bars_from(0, rows)
    }

    /// Up 20%+ on 5x relative volume, flat, nothing working, far from the close.
    fn ctx(minute: i64) -> StrategyContext {
        StrategyContext {
            prev_close: d("4.50"),
            relative_volume: Some(5.0),
            position: 0,
            order_working: false,
            minutes_since_open: minute,
            minutes_to_close: 390 - minute,
            flatten_minutes_before_close: 5,
            buying_power: Decimal::new(100_000, 0),
            target_at_broker: false,
        }
    }

    fn params() -> StrategyAllocatorSettings {
        StrategyAllocatorSettings {
            risk_per_trade: d("50"),
            max_position_value: d("10000"),
            reward_multiple: 2.0,
            scale_out_fraction: 0.5,
            ..StrategyAllocatorSettings::default()
        }
    }

    /// 5.00 → 5.60 over 4 green bars on volume, then 2 lower-high bars down to 5.40.
    /// VWAP after bar 6 = 21,742,000 / 4,050,000 = 5.3684.
    const SQUEEZE: [Ohlcv; 4] = [
        (5.00, 5.15, 5.00, 5.14, 200_000),
        (5.14, 5.30, 5.12, 5.28, 250_000),
        (5.28, 5.45, 5.26, 5.43, 300_000),
        (5.43, 5.60, 5.41, 5.58, 350_000),
    ];
    const PULLBACK: [Ohlcv; 2] = [(5.55, 5.55, 5.46, 5.48, 150_000), (5.48, 5.50, 5.40, 5.47, 100_000)];

    fn runner() -> Vec<Ohlcv> {
        SQUEEZE.iter().chain(PULLBACK.iter()).copied().collect()
    }

    /// Feeds bars with a context built per minute; returns every decision with its minute.
    fn feed(
        s: &mut MomentumBreakout,
        bars: &[(i64, Bar)],
        mut make: impl FnMut(i64) -> StrategyContext,
    ) -> Vec<(i64, Decision)> {
        let p = params();
        bars.iter()
            .flat_map(|(minute, bar)| s.on_bar(bar, &make(*minute), &p).into_iter().map(|d| (*minute, d)))
            .collect()
    }

    fn enters(decisions: &[(i64, Decision)]) -> Vec<&Decision> {
        decisions.iter().map(|(_, d)| d).filter(|d| matches!(d, Decision::Enter { .. })).collect()
    }

    /// A strategy that has just sent the runner's entry (after bar 6, minute 5).
    fn entered() -> MomentumBreakout {
        let mut s = MomentumBreakout::new();
        let decisions = feed(&mut s, &bars(&runner()), ctx);
        assert_eq!(enters(&decisions).len(), 1, "{decisions:?}");
        s
    }

    /// The runner's entry filled at its trigger, 416 shares (stop 5.39, target 5.75).
    fn holding() -> MomentumBreakout {
        let mut s = entered();
        s.on_entry_filled(416, d("5.51"));
        s
    }

    fn in_position(position: u64) -> impl FnMut(i64) -> StrategyContext {
        move |minute| StrategyContext { position, ..ctx(minute) }
    }

    fn exit_of(decision: &Decision) -> (u64, &'static str, &str) {
        match decision {
            Decision::Exit { quantity, rule, text } => (*quantity, rule, text),
            other => panic!("expected an exit, got {other:?}"),
        }
    }

    fn assert_sentence(decision: &Decision, numbers: &[&str]) {
        let text = decision.text();
        assert!(!text.trim().is_empty());
        assert!(text.ends_with('.'), "not a sentence: {text}");
        assert!(text.chars().next().is_some_and(|c| c.is_uppercase() || c.is_ascii_digit()), "{text}");
        for n in numbers {
            assert!(text.contains(n), "{text:?} lacks {n}");
        }
    }

    fn no_entry_with(rows: &[Ohlcv], make: impl FnMut(i64) -> StrategyContext) {
        let mut s = MomentumBreakout::new();
        let decisions = feed(&mut s, &bars(rows), make);
        assert!(decisions.is_empty(), "{decisions:?}");
    }

    #[test]
    fn identity() {
        let s = MomentumBreakout::default();
        assert_eq!(s.id(), "momentum_breakout");
        assert_eq!(s.version(), "1.0.0");
        assert_eq!(s, MomentumBreakout::new());
    }

    #[test]
    fn vwap_is_volume_weighted_typical_price_from_the_open() {
        let mut s = MomentumBreakout::new();
        let pre = bars_from(-2, &[(9.0, 9.0, 9.0, 9.0, 1_000_000)]);
        feed(&mut s, &pre, ctx);
        assert_eq!(s.session.vwap(), None, "pre-market bars do not count");
        feed(&mut s, &bars(&runner()), ctx);
        assert_eq!(s.session.vwap().unwrap(), d("21742000") / d("4050000"));
        assert_eq!(s.session.high().map(Price::to_decimal), Some(d("5.60")));
    }

    #[test]
    fn runner_pulling_back_two_bars_enters_once_with_hand_computed_levels() {
        let mut s = MomentumBreakout::new();
        let decisions = feed(&mut s, &bars(&runner()), ctx);
        // Bar 5 is only the 5th bar of the day: the 6-bar pattern window is not full yet.
        assert_eq!(decisions.len(), 1, "{decisions:?}");
        let (minute, decision) = &decisions[0];
        assert_eq!(*minute, 5, "after the second pullback bar");
        // stop = 5.50 + 0.01; limit = 5.51 + min(0.0551, 0.10) = 5.5651 → 5.57;
        // stop_loss = 5.40 - 0.01; risk = 0.12 ≤ max(0.50, 0.2755); target = 5.51 + 2 × 0.12;
        // quantity = floor(min(50 / 0.12 = 416.7, 10000 / 5.57 = 1795.3)) = 416.
        let Decision::Enter { quantity, stop_price, limit_price, stop_loss, target, rule, .. } = decision else {
            panic!("expected an entry, got {decision:?}")
        };
        assert_eq!(*stop_price, d("5.51"));
        assert_eq!(*limit_price, d("5.57"));
        assert_eq!(*stop_loss, d("5.39"));
        assert_eq!(*target, d("5.75"));
        assert_eq!(*quantity, 416);
        assert_eq!(*rule, "FIRST_PULLBACK_BREAKOUT");
        // Gain 5.47 / 4.50 - 1 = 21.6%; run-up 0.60 / 5.00 = 12.0%; VWAP 5.3684.
        assert_sentence(
            decision,
            &[
                "21.6%", "5.0x", "12.0%", "5.00", "5.60", "2 bars", "5.40", "5.37", "5.51", "5.57", "5.39", "0.12",
                "5.75", "416",
            ],
        );

        // With the order working, the next lower-high bar sends nothing new.
        let more = bars_from(6, &[(5.47, 5.49, 5.42, 5.45, 80_000)]);
        let after = feed(&mut s, &more, |m| StrategyContext { order_working: true, ..ctx(m) });
        assert!(enters(&after).is_empty(), "{after:?}");
    }

    #[test]
    fn a_one_bar_pullback_triggers_once_the_window_is_full() {
        let mut rows = vec![(4.98, 5.00, 4.97, 5.00, 100_000)];
        rows.extend(SQUEEZE);
        rows.push(PULLBACK[0]);
        let mut s = MomentumBreakout::new();
        let decisions = feed(&mut s, &bars(&rows), ctx);
        assert_eq!(decisions.len(), 1, "{decisions:?}");
        let Decision::Enter { stop_price, stop_loss, .. } = &decisions[0].1 else { panic!("{decisions:?}") };
        assert_eq!((*stop_price, *stop_loss), (d("5.56"), d("5.45")));
        assert_sentence(&decisions[0].1, &["1 bar to 5.46", "5.56", "5.45"]);
    }

    #[test]
    fn no_entry_when_the_day_gain_is_below_ten_percent() {
        // 5.47 / 5.00 = +9.4%.
        no_entry_with(&runner(), |m| StrategyContext { prev_close: d("5.00"), ..ctx(m) });
        // +10.0% exactly qualifies: 5.47 / 4.97 = 1.1006.
        let mut s = MomentumBreakout::new();
        let ok = feed(&mut s, &bars(&runner()), |m| StrategyContext { prev_close: d("4.97"), ..ctx(m) });
        assert_eq!(enters(&ok).len(), 1);
    }

    #[test]
    fn no_entry_on_low_or_unknown_relative_volume() {
        no_entry_with(&runner(), |m| StrategyContext { relative_volume: Some(1.9), ..ctx(m) });
        no_entry_with(&runner(), |m| StrategyContext { relative_volume: None, ..ctx(m) });
        let mut s = MomentumBreakout::new();
        let ok = feed(&mut s, &bars(&runner()), |m| StrategyContext { relative_volume: Some(2.0), ..ctx(m) });
        assert_eq!(enters(&ok).len(), 1);
    }

    #[test]
    fn no_entry_when_the_pullback_dips_below_vwap() {
        // Heavy volume at the top lifts VWAP to 49,115,500 / 9,000,000 = 5.4573: the pullback
        // low 5.40 is under it while the close 5.47 is still above.
        let mut rows = runner();
        rows[3].4 = 2_000_000;
        let mut s = MomentumBreakout::new();
        feed(&mut s, &bars(&rows), ctx);
        let vwap = s.session.vwap().unwrap();
        assert!(d("5.40") < vwap && vwap < d("5.47"), "{vwap}");
        no_entry_with(&rows, ctx);
    }

    #[test]
    fn no_entry_when_the_pullback_gives_back_more_than_half() {
        // Leg 5.00 → 5.60 (0.60); low 5.28 gives back 0.32 > 0.30. Heavy early volume keeps
        // VWAP (5.21) under the pullback so only the retrace fails.
        let mut rows = runner();
        rows[0].4 = 2_000_000;
        rows[5].2 = 5.28;
        let mut s = MomentumBreakout::new();
        feed(&mut s, &bars(&rows), ctx);
        assert!(s.session.vwap().unwrap() < d("5.28"));
        no_entry_with(&rows, ctx);
        // Giving back exactly half (low 5.30) still qualifies.
        rows[5].2 = 5.30;
        let mut s = MomentumBreakout::new();
        assert_eq!(enters(&feed(&mut s, &bars(&rows), ctx)).len(), 1);
    }

    #[test]
    fn no_entry_outside_the_time_window() {
        // The setup completes at minute 151: too late.
        no_entry_with(&runner(), |m| ctx(m + 146));
        // At minute 150 it still counts.
        let mut s = MomentumBreakout::new();
        let decisions = feed(&mut s, &bars_from(145, &runner()), ctx);
        assert_eq!(enters(&decisions).len(), 1);
        // Before the open there is no VWAP and no entry.
        no_entry_with(&runner(), |m| ctx(m - 20));
    }

    #[test]
    fn no_entry_when_the_risk_per_share_is_too_large() {
        // Leg 5.00 → 6.40, pullback to 5.75 (retrace 0.65 ≤ 0.70), above VWAP 5.52.
        // Risk = 6.26 - 5.74 = 0.52 > max(0.50, 5% × 6.26 = 0.313).
        let mut rows: Vec<Ohlcv> = vec![
            (5.00, 5.30, 5.00, 5.28, 1_500_000),
            (5.28, 5.65, 5.25, 5.62, 250_000),
            (5.62, 6.00, 5.60, 5.97, 300_000),
            (5.97, 6.40, 5.95, 6.35, 350_000),
            (6.30, 6.30, 5.95, 6.00, 150_000),
            (6.00, 6.25, 5.75, 6.10, 100_000),
        ];
        no_entry_with(&rows, ctx);
        // Control: a pullback low of 5.80 risks 6.26 - 5.79 = 0.47 and enters.
        rows[5].2 = 5.80;
        let mut s = MomentumBreakout::new();
        let decisions = feed(&mut s, &bars(&rows), ctx);
        let [Decision::Enter { stop_price, stop_loss, .. }] = enters(&decisions)[..] else { panic!("{decisions:?}") };
        assert_eq!(*stop_price - *stop_loss, d("0.47"));
    }

    #[test]
    fn quantity_is_capped_by_position_value_and_zero_skips() {
        let mut s = MomentumBreakout::new();
        let p = StrategyAllocatorSettings { max_position_value: d("1000"), ..params() };
        let decisions: Vec<Decision> = bars(&runner()).iter().flat_map(|(m, b)| s.on_bar(b, &ctx(*m), &p)).collect();
        // floor(min(416.7, 1000 / 5.57 = 179.5)) = 179.
        assert!(matches!(decisions[..], [Decision::Enter { quantity: 179, .. }]), "{decisions:?}");

        let mut s = MomentumBreakout::new();
        let p = StrategyAllocatorSettings { risk_per_trade: d("0.10"), ..params() };
        let decisions: Vec<Decision> = bars(&runner()).iter().flat_map(|(m, b)| s.on_bar(b, &ctx(*m), &p)).collect();
        assert!(decisions.is_empty(), "{decisions:?}");
    }

    #[test]
    fn never_enters_while_holding_or_with_an_order_working() {
        no_entry_with(&runner(), |m| StrategyContext { order_working: true, ..ctx(m) });
        no_entry_with(&runner(), |m| StrategyContext { position: 100, ..ctx(m) });
    }

    #[test]
    fn stop_touch_exits_everything() {
        let mut s = holding();
        let bar = bars_from(6, &[(5.52, 5.53, 5.39, 5.42, 120_000)]);
        let decisions = feed(&mut s, &bar, in_position(416));
        assert_eq!(decisions.len(), 1, "{decisions:?}");
        let (quantity, rule, _) = exit_of(&decisions[0].1);
        assert_eq!((quantity, rule), (416, "STOP_LOSS"));
        assert_sentence(&decisions[0].1, &["5.39", "416", "5.51", "0.12"]);
    }

    #[test]
    fn target_scales_out_half_then_the_breakeven_stop_exits_the_rest() {
        assert_eq!(entered().levels(), None, "no levels before the entry fills");
        let mut s = holding();
        assert_eq!(s.levels(), Some(Levels { stop_loss: d("5.39"), target: Some(d("5.75")) }), "the plan, once held");
        let up = bars_from(6, &[(5.52, 5.76, 5.50, 5.74, 300_000)]);
        let decisions = feed(&mut s, &up, in_position(416));
        assert_eq!(decisions.len(), 1, "{decisions:?}");
        let (quantity, rule, _) = exit_of(&decisions[0].1);
        assert_eq!((quantity, rule), (208, "SCALE_OUT_TARGET"));
        assert_sentence(&decisions[0].1, &["5.76", "5.75", "2R", "5.51", "208", "416", "5.39"]);
        let breakeven = Some(Levels { stop_loss: d("5.51"), target: None });
        assert_eq!(s.levels(), breakeven, "scaled out: the stop at the entry, no target left");

        // Still above the old stop and the target again: nothing until the entry price.
        let hold = bars_from(7, &[(5.74, 5.80, 5.60, 5.70, 100_000)]);
        assert!(feed(&mut s, &hold, in_position(208)).is_empty());

        let back = bars_from(8, &[(5.70, 5.72, 5.51, 5.55, 100_000)]);
        let decisions = feed(&mut s, &back, in_position(208));
        assert_eq!(decisions.len(), 1, "{decisions:?}");
        let (quantity, rule, _) = exit_of(&decisions[0].1);
        assert_eq!((quantity, rule), (208, "STOP_LOSS"));
        assert_sentence(&decisions[0].1, &["5.51", "breakeven", "208"]);
    }

    #[test]
    fn a_close_below_vwap_exits_everything() {
        let mut s = holding();
        // 10M shares around 5.50 lift VWAP to 186,642,000 / 34,050,000 = 5.4814; close 5.46.
        let bar = bars_from(6, &[(5.55, 5.58, 5.45, 5.46, 10_000_000)]);
        let decisions = feed(&mut s, &bar, in_position(416));
        assert_eq!(decisions.len(), 1, "{decisions:?}");
        let (quantity, rule, _) = exit_of(&decisions[0].1);
        assert_eq!((quantity, rule), (416, "LOST_VWAP"));
        assert_sentence(&decisions[0].1, &["5.46", "5.48", "416", "5.51"]);
    }

    #[test]
    fn the_flatten_window_exits_everything() {
        let calm = [(5.52, 5.56, 5.48, 5.54, 100_000)];
        let mut s = holding();
        let decisions =
            feed(&mut s, &bars_from(6, &calm), |m| StrategyContext { minutes_to_close: 5, ..in_position(416)(m) });
        assert_eq!(decisions.len(), 1, "{decisions:?}");
        let (quantity, rule, _) = exit_of(&decisions[0].1);
        assert_eq!((quantity, rule), (416, "FLATTEN_BEFORE_CLOSE"));
        assert_sentence(&decisions[0].1, &["5 minutes", "416", "5.51", "5.54"]);

        // 0 disables the window; outside it nothing happens either.
        let mut s = holding();
        let off = |m| StrategyContext { minutes_to_close: 1, flatten_minutes_before_close: 0, ..in_position(416)(m) };
        assert!(feed(&mut s, &bars_from(6, &calm), off).is_empty());
        let mut s = holding();
        assert!(feed(&mut s, &bars_from(6, &calm), |m| StrategyContext { minutes_to_close: 6, ..in_position(416)(m) })
            .is_empty());
    }

    #[test]
    fn the_stop_wins_over_the_flatten_window() {
        let mut s = holding();
        let bar = bars_from(6, &[(5.52, 5.53, 5.30, 5.35, 100_000)]);
        let decisions = feed(&mut s, &bar, |m| StrategyContext { minutes_to_close: 2, ..in_position(416)(m) });
        assert_eq!(decisions.len(), 1, "one exit, not a stop and a flatten");
        assert_eq!(decisions[0].1.rule(), "STOP_LOSS");
    }

    #[test]
    fn an_unfilled_entry_expires_after_two_bars() {
        let mut s = entered();
        let working = |m| StrategyContext { order_working: true, ..ctx(m) };
        let quiet = bars_from(6, &[(5.47, 5.49, 5.42, 5.45, 80_000), (5.45, 5.48, 5.41, 5.44, 80_000)]);
        let decisions = feed(&mut s, &quiet, working);
        assert_eq!(decisions.len(), 1, "{decisions:?}");
        let (minute, decision) = &decisions[0];
        assert_eq!(*minute, 7, "on the second bar after the entry");
        assert!(matches!(decision, Decision::CancelEntry { rule: "ENTRY_EXPIRED", .. }), "{decision:?}");
        assert_sentence(decision, &["5.51", "2 bars", "5.48"]);
    }

    #[test]
    fn a_close_below_vwap_cancels_the_working_entry() {
        let mut s = entered();
        let bar = bars_from(6, &[(5.45, 5.46, 5.30, 5.33, 100_000)]);
        let decisions = feed(&mut s, &bar, |m| StrategyContext { order_working: true, ..ctx(m) });
        assert_eq!(decisions.len(), 1, "{decisions:?}");
        assert!(matches!(decisions[0].1, Decision::CancelEntry { rule: "SETUP_FAILED", .. }), "{decisions:?}");
        assert_sentence(&decisions[0].1, &["5.33", "5.37", "5.51"]);
    }

    #[test]
    fn never_exits_without_shares_and_never_oversells() {
        // Entry filled per the strategy but the engine reports no shares: nothing to sell.
        let mut s = holding();
        let crash = bars_from(6, &[(5.40, 5.40, 5.00, 5.01, 100_000)]);
        let decisions = feed(&mut s, &crash, ctx);
        assert!(decisions.iter().all(|(_, d)| !matches!(d, Decision::Exit { .. })), "{decisions:?}");

        // The scale-out is still working when the stop is touched: only the rest is sold.
        let mut s = holding();
        feed(&mut s, &bars_from(6, &[(5.52, 5.76, 5.50, 5.74, 300_000)]), in_position(416));
        let working = |m| StrategyContext { order_working: true, ..in_position(416)(m) };
        let decisions = feed(&mut s, &bars_from(7, &[(5.70, 5.71, 5.45, 5.50, 100_000)]), working);
        let exits: Vec<_> = decisions.iter().map(|(_, d)| exit_of(d)).map(|(q, r, _)| (q, r)).collect();
        assert_eq!(exits, vec![(208, "STOP_LOSS")]);
        // Both exits still working: nothing more to sell.
        let decisions = feed(&mut s, &bars_from(8, &[(5.50, 5.50, 5.40, 5.42, 100_000)]), working);
        assert!(decisions.is_empty(), "{decisions:?}");
    }

    #[test]
    fn no_reentry_within_ten_minutes_of_an_exit_and_reset_day_forgets() {
        let mut s = holding();
        // Stopped out at minute 6, flat from minute 7.
        feed(&mut s, &bars_from(6, &[(5.52, 5.53, 5.39, 5.42, 120_000)]), in_position(416));
        // The same setup again completes at minute 12: 6 minutes after the exit.
        let again = feed(&mut s, &bars_from(7, &runner()), ctx);
        assert!(enters(&again).is_empty(), "{again:?}");
        // And again at minute 18: 12 minutes after the exit.
        // And again from minute 13: the cooldown ends at minute 16 and the first pullback bar of
        // this copy (minute 17, window full with the previous copy's last bar) triggers.
        let later = feed(&mut s, &bars_from(13, &runner()), ctx);
        let first = later.iter().find(|(_, d)| matches!(d, Decision::Enter { .. }));
        assert_eq!(first.map(|(m, _)| *m), Some(17), "{later:?}");

        s.reset_day();
        assert_eq!(s, MomentumBreakout::new());
        assert_eq!(enters(&feed(&mut s, &bars(&runner()), ctx)).len(), 1);
    }

    #[test]
    fn a_rejected_entry_returns_to_flat() {
        let mut s = entered();
        // The order is gone (risk gate) and nothing is held: the strategy is flat again and a
        // third lower high re-arms the setup at its own trigger.
        let bar = bars_from(6, &[(5.47, 5.48, 5.42, 5.45, 80_000)]);
        let decisions = feed(&mut s, &bar, ctx);
        let [Decision::Enter { stop_price, .. }] = enters(&decisions)[..] else { panic!("{decisions:?}") };
        assert_eq!(*stop_price, d("5.49"));
    }

    /// Runs a whole day through a tiny engine: entries fill when a bar trades through the
    /// trigger (at the trigger), exits fill at once.
    fn simulate(rows: &[Ohlcv]) -> Vec<(i64, Decision)> {
        let mut s = MomentumBreakout::new();
        let p = params();
        let (mut position, mut working, mut trigger) = (0u64, false, None::<(u64, Decimal)>);
        let mut out = Vec::new();
        for (minute, bar) in bars(rows) {
            if let Some((quantity, stop)) = trigger.filter(|(_, stop)| bar.high.to_decimal() >= *stop) {
                s.on_entry_filled(quantity, stop);
                position += quantity;
                working = false;
                trigger = None;
            }
            let c = StrategyContext { position, order_working: working, ..ctx(minute) };
            for decision in s.on_bar(&bar, &c, &p) {
                match &decision {
                    Decision::Enter { quantity, stop_price, .. } => {
                        working = true;
                        trigger = Some((*quantity, *stop_price));
                    }
                    Decision::Exit { quantity, .. } => position -= quantity,
                    Decision::Buy { .. } => unreachable!("momentum_breakout enters with stop-limits"),
                    Decision::CancelEntry { .. } => {
                        working = false;
                        trigger = None;
                    }
                }
                out.push((minute, decision));
            }
        }
        out
    }

    #[test]
    fn the_same_bars_give_the_same_decisions() {
        let mut day = runner();
        day.extend([
            (5.50, 5.60, 5.49, 5.58, 200_000),
            (5.58, 5.80, 5.55, 5.78, 300_000),
            (5.78, 5.79, 5.60, 5.62, 150_000),
            (5.62, 5.63, 5.45, 5.50, 150_000),
        ]);
        let first = simulate(&day);
        assert_eq!(first, simulate(&day));
        let rules: Vec<(i64, &str)> = first.iter().map(|(m, d)| (*m, d.rule())).collect();
        assert_eq!(rules, vec![(5, "FIRST_PULLBACK_BREAKOUT"), (7, "SCALE_OUT_TARGET"), (9, "STOP_LOSS")]);
        for (_, decision) in &first {
            assert_sentence(decision, &[]);
        }
    }

    #[test]
    fn an_adopted_position_is_managed_with_the_widest_accepted_stop() {
        let mut s = MomentumBreakout::new();
        s.on_entry_filled(100, d("8.00"));
        // Stop 8.00 - max(0.50, 0.40) = 7.50.
        let decisions = feed(&mut s, &bars(&[(7.80, 7.90, 7.50, 7.60, 10_000)]), in_position(100));
        let (quantity, rule, text) = exit_of(&decisions[0].1);
        assert_eq!((quantity, rule), (100, "STOP_LOSS"));
        assert!(text.contains("7.50"), "{text}");
    }

    #[test]
    fn scale_out_quantity_rules() {
        assert_eq!(scale_out_quantity(416, 0.5), 208);
        assert_eq!(scale_out_quantity(3, 0.1), 1, "at least one when more than one is held");
        assert_eq!(scale_out_quantity(1, 0.5), 0, "a single share is not split");
        assert_eq!(scale_out_quantity(100, 0.0), 0, "0 disables the scale-out");
        assert_eq!(scale_out_quantity(100, 1.0), 100);
    }

    /// A restarted instance handed a held position manages it at the levels resting at the
    /// broker: a take-profit still resting means not scaled out yet (its target kept); a stop
    /// alone below the entry is the initial stop (2R target from it), at the entry (to the
    /// venue's cent) it is the breakeven stop of a position already scaled out.
    #[test]
    fn a_restarted_instance_adopts_the_levels_resting_at_the_broker() {
        let mut s = MomentumBreakout::new();
        s.on_entry_filled(416, d("5.5127"));
        s.adopt_levels(d("5.39"), None);
        assert_eq!(s.levels(), Some(Levels { stop_loss: d("5.39"), target: Some(d("5.76")) }));
        s.adopt_levels(d("5.51"), None);
        assert_eq!(s.levels(), Some(Levels { stop_loss: d("5.51"), target: None }));
        s.adopt_levels(d("5.39"), Some(d("5.75")));
        assert_eq!(s.levels(), Some(Levels { stop_loss: d("5.39"), target: Some(d("5.75")) }), "the resting target");
        let mut flat = MomentumBreakout::new();
        flat.adopt_levels(d("5.39"), None);
        assert_eq!(flat.levels(), None, "nothing held, nothing adopted");
    }

    /// With its target resting at the broker the strategy leaves the scale-out to it: a bar
    /// through the target sells nothing; the take-profit's fill moves the stop to breakeven and
    /// the target is never sold again.
    #[test]
    fn a_target_resting_at_the_broker_makes_the_scale_out_there_once() {
        let mut s = holding();
        assert_eq!(s.target_quantity(416, &params()), 208);
        let resting = |m| StrategyContext { target_at_broker: true, ..in_position(416)(m) };
        let up = bars_from(6, &[(5.52, 5.76, 5.50, 5.74, 300_000)]);
        assert!(feed(&mut s, &up, resting).is_empty(), "the broker's limit sells at the target");
        assert_eq!(s.levels(), Some(Levels { stop_loss: d("5.39"), target: Some(d("5.75")) }));
        s.on_target_filled(208, d("5.75"));
        assert_eq!(s.levels(), Some(Levels { stop_loss: d("5.51"), target: None }), "breakeven, no target left");
        // The bar the take-profit filled in dipped below the entry: before the fill, maybe.
        let filled_in = bars_from(7, &[(5.52, 5.80, 5.45, 5.78, 100_000)]);
        assert!(feed(&mut s, &filled_in, in_position(208)).is_empty(), "judged by the stop in force as it began");
        let again = bars_from(8, &[(5.74, 5.90, 5.60, 5.85, 100_000)]);
        assert!(feed(&mut s, &again, in_position(208)).is_empty(), "no second scale-out");
        let back = bars_from(9, &[(5.70, 5.72, 5.51, 5.55, 100_000)]);
        let decisions = feed(&mut s, &back, in_position(208));
        assert_eq!(exit_of(&decisions[0].1).0, 208, "the rest at breakeven: {decisions:?}");
    }
}
