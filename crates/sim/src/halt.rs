//! Trading halts on the simulated market: the Limit Up–Limit Down price bands of a Tier 2 stock
//! and the 5-minute volatility pauses (`LUDP`) they lead to, and the news halts (`T1`) of some
//! runner days. The day walk ([`DayGenerator`](crate::day::DayGenerator)) meets them minute by
//! minute; [`halt_windows`](crate::day::halt_windows) lists a day's halts for backtests and
//! replays.
//!
//! The rules follow the LULD Plan as amended (docs/plans/alpaca-protection-and-halts.md §9):
//! the reference price is the mean of the preceding 5 minutes' closes (the session's open, or a
//! reopening price, when no minute of the session traded in those 5); the band is 10 % for a
//! previous close above $3.00, 20 % from $0.75 to $3.00, and the lesser of $0.15 or 75 % below;
//! it doubles from 9:30 to 9:45 for every stock, but from 15:35 to 16:00 only for stocks whose
//! previous close is at or below $3.00. Older summaries (and the first brief for this model)
//! double it "in the first 15 and last 25 minutes" for everything; Amendment 18 (2019) keeps a
//! Tier 2 stock above $3.00 at 10 % near the close, and so does this model. Bands are not
//! republished only on 1 % moves of the reference as the Plan's SIPs do: at minute granularity
//! every minute has its own band.

use crate::profile::REGULAR_MINUTES;
use tradeops_core::market::Price;

/// Minutes a volatility pause lasts: no bars for the 5 minutes after the minute that closed at
/// its band; the sixth is the reopening bar.
pub const PAUSE_MINUTES: u32 = 5;

/// No volatility pause starts in the session's last ten minutes (from 15:50): Nasdaq does not
/// reopen such a pause but settles it in the closing cross, so the simulated market keeps the
/// band (no trade outside it) without declaring a pause, and every pause reopens by 15:55.
pub const NO_PAUSE_BEFORE_CLOSE: u32 = 10;

/// The band's half-width in dollars around `reference`, for a stock whose previous close was
/// `prev_close`, in regular-session minute `session_minute` (0 is 9:30–9:31).
pub fn band_width(reference: f64, prev_close: f64, session_minute: u32) -> f64 {
    let opening = session_minute < 15;
    // Amendment 18: near the close only stocks at or below $3.00 keep the doubled band.
    let closing = session_minute >= REGULAR_MINUTES - 25 && prev_close <= 3.0;
    let factor = if opening || closing { 2.0 } else { 1.0 };
    if prev_close > 3.0 {
        reference * 0.10 * factor
    } else if prev_close >= 0.75 {
        reference * 0.20 * factor
    } else {
        (0.15 * factor).min(0.75 * factor * reference)
    }
}

/// The prices a minute may trade at: `[lower, upper]`, on the tick grid (a cent from $1, a
/// hundredth of a cent below), never under one tick.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Band {
    pub lower: Price,
    pub upper: Price,
}

impl Band {
    /// The band of `session_minute` around `reference` (see [`band_width`]), rounded inwards so
    /// that a price on the grid inside it is inside the exact band.
    pub fn around(reference: f64, prev_close: f64, session_minute: u32) -> Band {
        Band::with_width(reference, band_width(reference, prev_close, session_minute))
    }

    /// `reference` ± `width`, rounded inwards.
    pub fn with_width(reference: f64, width: f64) -> Band {
        let upper = to_tick(reference + width, false);
        let lower = to_tick(reference - width, true);
        Band { lower: lower.min(upper), upper }
    }

    pub fn contains(&self, price: Price) -> bool {
        self.lower <= price && price <= self.upper
    }

    /// `price` moved inside the band.
    pub fn clip(&self, price: Price) -> Price {
        price.clamp(self.lower, self.upper)
    }
}

/// `value` on the tick grid, rounded up or down (with a hair of tolerance for values that are
/// on the grid but for floating-point error).
fn to_tick(value: f64, up: bool) -> Price {
    let per_dollar = if value >= 1.0 { 100 } else { Price::SCALE };
    let x = value * per_dollar as f64;
    let n = if up { (x - 1e-7).ceil() } else { (x + 1e-7).floor() };
    Price((n as i64 * (Price::SCALE / per_dollar)).max(1))
}

/// The reference price: the mean of the closes of the session's minutes that traded in the 5
/// minutes before the current one.
#[derive(Clone, Debug, Default)]
pub(crate) struct ReferencePrice {
    /// (minute index, close) of the last five traded minutes of the session, a ring.
    closes: [Option<(u32, f64)>; 5],
    next: usize,
}

impl ReferencePrice {
    pub(crate) fn push(&mut self, minute: u32, close: Price) {
        self.closes[self.next] = Some((minute, close.to_f64()));
        self.next = (self.next + 1) % self.closes.len();
    }

    /// The reference for `minute`; `open` (the session's open or a reopening price) when none of
    /// the 5 minutes before traded.
    pub(crate) fn at(&self, minute: u32, open: Price) -> f64 {
        let (mut sum, mut n) = (0.0, 0);
        for (at, close) in self.closes.iter().flatten() {
            if *at < minute && at + 5 >= minute {
                sum += close;
                n += 1;
            }
        }
        if n == 0 {
            open.to_f64()
        } else {
            sum / n as f64
        }
    }
}

/// A news halt (`T1`) planned for a runner day: from the start of `minute` (an index from the
/// day's midnight, in the regular session) for `minutes` minutes; the walk's log price jumps by
/// `gap` while it lasts, so the reopening bar opens away from the last trade.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct NewsHalt {
    pub minute: u32,
    pub minutes: u32,
    pub gap: f64,
}

/// One halt of a day (core's type: stored with downloaded days, met by replays).
pub use tradeops_core::market::HaltWindow;

#[cfg(test)]
mod tests;
