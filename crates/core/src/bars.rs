//! Minute bars built from trade prints on exact minute boundaries, and what a trading day's
//! bars add up to ([`SessionRunning`], [`day_gain`]): the one definition of VWAP, high of day and
//! gain that the momentum strategy decides on and a trade's deep dive shows as its market at
//! entry, so the two never disagree.

use crate::market::{Bar, Price, Trade};
use crate::time::Timestamp;
use chrono::{DurationRound, TimeDelta};
use rust_decimal::Decimal;

/// What a symbol's bars of one day add up to so far, bar by bar. VWAP and the high of day are
/// the regular session's (bars ending at or after the 09:30 open: pre-market prints, thin and
/// far from the session's prices, would drag the VWAP); the volume is the whole day's, as
/// relative volume counts it.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct SessionRunning {
    /// Σ (high + low + close) × volume over the session's bars, in ticks (three times the
    /// typical price: exact, and no division per bar), and their Σ volume.
    pv3: i128,
    session_volume: u64,
    /// Every bar of the day.
    volume: u64,
    high: Option<Price>,
}

impl SessionRunning {
    /// Adds a bar; `in_session`: it ends at or after the regular open.
    pub fn add(&mut self, bar: &Bar, in_session: bool) {
        self.volume = self.volume.saturating_add(bar.volume);
        if in_session {
            let hlc = i128::from(bar.high.0) + i128::from(bar.low.0) + i128::from(bar.close.0);
            self.pv3 += hlc * i128::from(bar.volume);
            self.session_volume = self.session_volume.saturating_add(bar.volume);
            self.high = Some(self.high.map_or(bar.high, |h| h.max(bar.high)));
        }
    }

    /// The session's VWAP, Σ((h + l + c) × v) / (3 × Σ v), exact; `None` before the open.
    pub fn vwap(&self) -> Option<Decimal> {
        let sum = Decimal::try_from_i128_with_scale(self.pv3, Price::SCALE.ilog10()).ok()?;
        (self.session_volume > 0).then(|| sum / (Decimal::from(self.session_volume) * Decimal::from(3)))
    }

    /// The session's high so far.
    pub fn high(&self) -> Option<Price> {
        self.high
    }

    /// Shares traded so far this day, pre-market included.
    pub fn volume(&self) -> u64 {
        self.volume
    }
}

/// The gain of `price` on the day versus the previous close, a fraction (0.12 = +12%); `None`
/// without a previous close.
pub fn day_gain(prev_close: Decimal, price: Decimal) -> Option<Decimal> {
    (prev_close > Decimal::ZERO).then(|| (price - prev_close) / prev_close)
}

/// The start of the minute containing `at`.
pub fn minute_floor(at: Timestamp) -> Timestamp {
    at.duration_trunc(TimeDelta::minutes(1)).unwrap_or(at)
}

/// Folds trades into the bar of their minute; the bar is complete when its minute ends.
#[derive(Clone, Debug, Default)]
pub struct MinuteBarBuilder {
    current: Option<Bar>,
}

impl MinuteBarBuilder {
    /// The bar being built, if a trade of it came in.
    pub fn in_progress(&self) -> Option<&Bar> {
        self.current.as_ref()
    }

    /// Adds a trade. A trade of a later minute first completes the bar in progress, which is
    /// returned (a feed that closes bars with [`MinuteBarBuilder::close`] never sees this).
    pub fn on_trade(&mut self, trade: &Trade) -> Option<Bar> {
        let start = minute_floor(trade.at);
        let completed = match &self.current {
            Some(bar) if bar.start < start => self.current.take(),
            _ => None,
        };
        match &mut self.current {
            Some(bar) => {
                bar.high = bar.high.max(trade.price);
                bar.low = bar.low.min(trade.price);
                bar.close = trade.price;
                bar.volume += trade.size;
            }
            None => {
                let p = trade.price;
                self.current = Some(Bar { start, open: p, high: p, low: p, close: p, volume: trade.size });
            }
        }
        completed
    }

    /// At `boundary`, completes the bar in progress if its minute has ended.
    pub fn close(&mut self, boundary: Timestamp) -> Option<Bar> {
        match &self.current {
            Some(bar) if bar.start + TimeDelta::minutes(1) <= boundary => self.current.take(),
            _ => None,
        }
    }

    /// The bar in progress.
    pub fn current(&self) -> Option<&Bar> {
        self.current.as_ref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::market::Price;
    use crate::time::parse_ts;

    fn trade(at: &str, cents: i64, size: u64) -> Trade {
        Trade { at: parse_ts(at).unwrap(), price: Price::from_cents(cents), size }
    }

    #[test]
    fn bars_close_on_exact_minute_boundaries() {
        let mut b = MinuteBarBuilder::default();
        assert_eq!(b.on_trade(&trade("2026-11-20T14:30:00.000Z", 1000, 100)), None);
        b.on_trade(&trade("2026-11-20T14:30:15Z", 1010, 50));
        b.on_trade(&trade("2026-11-20T14:30:30Z", 995, 25));
        b.on_trade(&trade("2026-11-20T14:30:59.999Z", 1005, 25));
        assert_eq!(b.close(parse_ts("2026-11-20T14:30:59.999Z").unwrap()), None, "not before the boundary");
        let bar = b.close(parse_ts("2026-11-20T14:31:00Z").unwrap()).unwrap();
        assert_eq!(bar.start, parse_ts("2026-11-20T14:30:00Z").unwrap());
        assert_eq!(
            (bar.open, bar.high, bar.low, bar.close),
            (Price(100_000), Price(101_000), Price(99_500), Price(100_500))
        );
        assert_eq!(bar.volume, 200);
        assert!(b.current().is_none());
    }

    #[test]
    fn a_later_trade_completes_the_previous_bar() {
        let mut b = MinuteBarBuilder::default();
        b.on_trade(&trade("2026-11-20T14:30:10Z", 1000, 1));
        let done = b.on_trade(&trade("2026-11-20T14:32:00Z", 1100, 1)).unwrap();
        assert_eq!(done.start, parse_ts("2026-11-20T14:30:00Z").unwrap());
        assert_eq!(b.current().unwrap().start, parse_ts("2026-11-20T14:32:00Z").unwrap());
    }
}
