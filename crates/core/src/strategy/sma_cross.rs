//! `sma_cross`: the reference strategy for validating the engine against other backtesters
//! (CONTRACT §4). Long only: when the `fast`-bar simple moving average of closes crosses above the
//! `slow` one it buys with all buying power in whole shares at market; when it crosses below it
//! sells everything at market. "All" is sized by the engine at the order's fill price (a
//! backtest's next open; live, the last trade plus `risk_controls.market_buy_buffer_pct`): as
//! many whole shares as buying power takes, within the risk gate's limits — backtesting.py's
//! floor(cash / fill price) when the limits are lifted and the buffer is 0.
//!
//! A cross is backtesting.py's `crossover(fast, slow)`: on the previous bar fast was strictly
//! below slow and on this bar it is strictly above (and the reverse for a cross below), so the
//! first signal needs `slow + 1` closes. The averages are compared exactly, in integer ticks.
//! They run across days (the strategy is meant for daily as well as minute bars), so a new day
//! forgets nothing.

use super::{Decision, Strategy, StrategyContext};
use crate::market::{Bar, Price};
use crate::settings::StrategyAllocatorSettings;
use crate::time::push_digits;
use rust_decimal::Decimal;
use std::cmp::Ordering;

pub const ID: &str = "sma_cross";
/// 1.1: all-in buys are sized at the fill price by the engine (1.0 sized them at the close).
pub const VERSION: &str = "1.1.0";
/// backtesting.py's `SmaCross` example uses 10 and 20.
pub const DEFAULT_FAST: u32 = 10;
pub const DEFAULT_SLOW: u32 = 20;
/// Longest average accepted.
pub const MAX_WINDOW: u32 = 10_000;

#[derive(Debug, Clone)]
pub struct SmaCross {
    fast: usize,
    slow: usize,
    /// The last `slow` closes, ticks: a ring, `closes[next]` the next to overwrite (the close
    /// `slow` back once full) and `closes[fast_out]` the close `fast` back.
    closes: Vec<i64>,
    next: usize,
    fast_out: usize,
    /// Closes pushed so far.
    seen: usize,
    fast_sum: i128,
    slow_sum: i128,
    /// fast vs slow on the previous bar, once both averages exist.
    previous: Option<Ordering>,
    /// `SMA(fast) ` and `SMA(slow) `, the averages' names in a decision's sentence (written once).
    names: (String, String),
}

impl Default for SmaCross {
    fn default() -> Self {
        SmaCross::new(DEFAULT_FAST, DEFAULT_SLOW).expect("defaults are valid")
    }
}

impl SmaCross {
    /// `1 ≤ fast < slow ≤ MAX_WINDOW`, else the reason.
    pub fn new(fast: u32, slow: u32) -> Result<SmaCross, String> {
        if fast == 0 || slow > MAX_WINDOW || fast >= slow {
            return Err(format!("needs 1 ≤ fast < slow ≤ {MAX_WINDOW}, got fast {fast}, slow {slow}"));
        }
        Ok(SmaCross {
            fast: fast as usize,
            slow: slow as usize,
            closes: vec![0; slow as usize],
            next: 0,
            fast_out: slow as usize - fast as usize,
            seen: 0,
            fast_sum: 0,
            slow_sum: 0,
            previous: None,
            names: (format!("SMA({fast}) "), format!("SMA({slow}) ")),
        })
    }

    /// Adds a close; returns fast vs slow once `slow` closes are known.
    fn push(&mut self, close: i64) -> Option<Ordering> {
        let (fast, slow) = (self.fast, self.slow);
        // The close leaving the slow window (the one `slow` back) sits in the slot overwritten;
        // the one leaving the fast window is `fast` back.
        if self.seen >= slow {
            self.slow_sum -= i128::from(self.closes[self.next]);
        }
        if self.seen >= fast {
            self.fast_sum -= i128::from(self.closes[self.fast_out]);
        }
        self.closes[self.next] = close;
        self.fast_sum += i128::from(close);
        self.slow_sum += i128::from(close);
        self.seen += 1;
        let step = |i: usize| if i + 1 == slow { 0 } else { i + 1 };
        (self.next, self.fast_out) = (step(self.next), step(self.fast_out));
        // fast_sum / fast vs slow_sum / slow, without division.
        (self.seen >= slow).then(|| (self.fast_sum * slow as i128).cmp(&(self.slow_sum * fast as i128)))
    }

    /// `SMA(10) 2.1 crossed above SMA(20) 2.05 at 2.11; `: the start of a decision's sentence,
    /// written piece by piece (there is one per order of a backtest, and `format!` would be most
    /// of the decision's cost).
    fn cross(&self, direction: &str, close: Price) -> String {
        let (fast, slow) = self.averages();
        let mut text = String::with_capacity(128);
        text.push_str(&self.names.0);
        fast.push_to(&mut text);
        text.push_str(" crossed ");
        text.push_str(direction);
        text.push(' ');
        text.push_str(&self.names.1);
        slow.push_to(&mut text);
        text.push_str(" at ");
        close.push_to(&mut text);
        text.push_str("; ");
        text
    }

    /// The two averages for a sentence, to the tick (half to even, as `Decimal::round_dp`).
    fn averages(&self) -> (Price, Price) {
        let avg = |sum: i128, n: usize| {
            // Divided in 64 bits where the sum fits (always, but for prices past $92 billion a
            // share): a 128-bit division is a call of its own.
            let (q, r, n) = match i64::try_from(sum) {
                Ok(sum) => {
                    let n = n as i64;
                    (i128::from(sum.div_euclid(n)), i128::from(sum.rem_euclid(n)), i128::from(n))
                }
                Err(_) => {
                    let n = n as i128;
                    (sum.div_euclid(n), sum.rem_euclid(n), n)
                }
            };
            let up = match (2 * r).cmp(&n) {
                Ordering::Greater => true,
                Ordering::Equal => q % 2 != 0,
                Ordering::Less => false,
            };
            Price(i64::try_from(q + i128::from(up)).expect("an average of tick prices is a tick price"))
        };
        (avg(self.fast_sum, self.fast), avg(self.slow_sum, self.slow))
    }
}

impl Strategy for SmaCross {
    fn id(&self) -> &'static str {
        ID
    }

    fn version(&self) -> &'static str {
        VERSION
    }

    fn on_bar(&mut self, bar: &Bar, ctx: &StrategyContext, _: &StrategyAllocatorSettings) -> Vec<Decision> {
        let now = self.push(bar.close.0);
        let previous = std::mem::replace(&mut self.previous, now);
        let (Some(before), Some(now)) = (previous, now) else { return Vec::new() };
        if ctx.order_working {
            return Vec::new();
        }
        match (before, now) {
            (Ordering::Less, Ordering::Greater) if ctx.position == 0 => {
                let mut text = self.cross("above", bar.close);
                text.push_str("buying with all buying power:");
                vec![Decision::Buy { quantity: None, rule: "SMA_CROSS_ABOVE", text }]
            }
            (Ordering::Greater, Ordering::Less) if ctx.position > 0 => {
                let mut text = self.cross("below", bar.close);
                text.push_str("selling all ");
                push_digits(&mut text, ctx.position, 1);
                text.push_str(" shares.");
                vec![Decision::Exit { quantity: ctx.position, rule: "SMA_CROSS_BELOW", text }]
            }
            _ => Vec::new(),
        }
    }

    fn on_entry_filled(&mut self, _: u64, _: Decimal) {}

    fn reset_day(&mut self) {}
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::market::Price;
    use chrono::{Duration, TimeZone, Utc};

    fn ctx(position: u64) -> StrategyContext {
        StrategyContext {
            prev_close: Decimal::ONE,
            relative_volume: None,
            position,
            order_working: false,
            minutes_since_open: 0,
            minutes_to_close: 390,
            flatten_minutes_before_close: 0,
            buying_power: Decimal::new(1_000, 0),
            target_at_broker: false,
        }
    }

    fn bar(i: usize, close: f64) -> Bar {
        let p = Price::from_f64_tick(close);
        let start = Utc.with_ymd_and_hms(2026, 1, 5, 0, 0, 0).unwrap() + Duration::days(i as i64);
        Bar { start, open: p, high: p, low: p, close: p, volume: 1 }
    }

    /// Runs closes through SMA(2)/SMA(3), feeding back a position that fills at once; returns
    /// (bar index, decision) pairs.
    fn run(closes: &[f64]) -> Vec<(usize, Decision)> {
        let mut s = SmaCross::new(2, 3).unwrap();
        let mut position = 0;
        let mut out = Vec::new();
        for (i, &c) in closes.iter().enumerate() {
            for d in s.on_bar(&bar(i, c), &ctx(position), &StrategyAllocatorSettings::default()) {
                match &d {
                    // The engine sizes an all-in buy; 100 shares stand for it here.
                    Decision::Buy { quantity, .. } => position = quantity.unwrap_or(100),
                    Decision::Exit { .. } => position = 0,
                    _ => {}
                }
                out.push((i, d));
            }
        }
        out
    }

    /// By hand, SMA(2) vs SMA(3) of 10, 9, 8, 9, 11, 12, 10, 8:
    /// bar 2: 8.5 < 9; bar 3: 8.5 < 8.667; bar 4: 10 > 9.333 → cross above, buy all in; bar 5: 11.5 > 10.667; bar 6: 11 = 11 (equal is not a cross); bar 7: 9 < 10 → the
    /// relation went Greater → Equal → Less, and only Greater → Less on consecutive bars counts,
    /// so no sell at 7. Append 7: bar 8: 7.5 < 8.333 (Less → Less) — still no sell.
    #[test]
    fn crosses_are_strict_on_consecutive_bars() {
        let out = run(&[10.0, 9.0, 8.0, 9.0, 11.0, 12.0, 10.0, 8.0, 7.0]);
        assert_eq!(out.len(), 1, "{out:?}");
        let (i, d) = &out[0];
        assert_eq!(*i, 4);
        assert!(matches!(d, Decision::Buy { quantity: None, rule: "SMA_CROSS_ABOVE", .. }), "{d:?}");
    }

    /// 10, 9, 8, 9, 11, 12, 9: bar 6 has SMA(2) 10.5 < SMA(3) 10.667 after 11.5 > 10.667 → sell
    /// all (100 here); then 12: bar 7 10.5 < 11 (Less → Less) → nothing; 13: bar 8 12.5 > 11.333 →
    /// buy all in again (the engine sizes it at the fill price).
    #[test]
    fn buys_on_a_cross_above_and_sells_everything_on_a_cross_below() {
        let out = run(&[10.0, 9.0, 8.0, 9.0, 11.0, 12.0, 9.0, 12.0, 13.0]);
        let rules: Vec<(usize, &str)> = out.iter().map(|(i, d)| (*i, d.rule())).collect();
        assert_eq!(rules, vec![(4, "SMA_CROSS_ABOVE"), (6, "SMA_CROSS_BELOW"), (8, "SMA_CROSS_ABOVE")]);
        assert!(matches!(out[1].1, Decision::Exit { quantity: 100, .. }));
        assert!(matches!(out[2].1, Decision::Buy { quantity: None, .. }));
        let sentences: Vec<&str> = out.iter().map(|(_, d)| d.text()).collect();
        assert_eq!(
            sentences,
            [
                "SMA(2) 10 crossed above SMA(3) 9.3333 at 11; buying with all buying power:",
                "SMA(2) 10.5 crossed below SMA(3) 10.6667 at 9; selling all 100 shares.",
                "SMA(2) 12.5 crossed above SMA(3) 11.3333 at 13; buying with all buying power:",
            ]
        );
    }

    #[test]
    fn no_signal_while_an_order_works() {
        let mut s = SmaCross::new(2, 3).unwrap();
        let params = StrategyAllocatorSettings::default();
        for (i, c) in [10.0, 9.0, 8.0, 9.0].into_iter().enumerate() {
            assert!(s.on_bar(&bar(i, c), &ctx(0), &params).is_empty());
        }
        let working = StrategyContext { order_working: true, ..ctx(0) };
        assert!(s.on_bar(&bar(4, 11.0), &working, &params).is_empty());
    }

    proptest::proptest! {
        /// The averages a sentence quotes are the exact averages rounded to the tick, half to
        /// even, as `Decimal` rounds them: for sums that fit 64 bits and for those that do not
        /// (closes near `i64::MAX` ticks).
        #[test]
        fn sentence_averages_round_as_decimal(
            closes in proptest::collection::vec(proptest::prop_oneof![1i64..100_000_000, i64::MAX / 4..i64::MAX], 3..40),
            fast in 1u32..5,
        ) {
            let mut s = SmaCross::new(fast, fast + 2).unwrap();
            for &c in &closes {
                s.push(c);
            }
            let exact = |n: usize| {
                let window = &closes[closes.len().saturating_sub(n)..];
                let sum: i128 = window.iter().map(|&c| i128::from(c)).sum();
                (Decimal::from_i128_with_scale(sum, 4) / Decimal::from(n as u64)).round_dp(4).normalize().to_string()
            };
            let (f, sl) = s.averages();
            proptest::prop_assert_eq!((f.to_string(), sl.to_string()), (exact(fast as usize), exact(fast as usize + 2)));
        }
    }

    #[test]
    fn windows_are_validated() {
        assert!(SmaCross::new(0, 3).is_err());
        assert!(SmaCross::new(3, 3).is_err());
        assert!(SmaCross::new(5, 3).is_err());
        assert!(SmaCross::new(1, MAX_WINDOW + 1).is_err());
        assert!(SmaCross::new(1, 2).is_ok());
    }
}
