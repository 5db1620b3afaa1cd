//! Market data types shared by the simulator, the data broker, the radar and the engine.
//!
//! Prices are fixed-point integers of 1/10,000 of a dollar: exact (no binary float drift),
//! cheap enough to generate millions of bars per second, and convertible to
//! `rust_decimal::Decimal` without loss.

use crate::time::Timestamp;
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize, Serializer};
use std::fmt;
use std::sync::Arc;

/// A price in 1/10,000 dollar.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Price(pub i64);

impl Price {
    pub const SCALE: i64 = 10_000;

    /// Rounds a float to the exchange tick: cents at or above $1, 1/10,000 below (Reg NMS).
    pub fn from_f64_tick(value: f64) -> Price {
        if value >= 1.0 {
            Price(((value * 100.0).round() as i64) * 100)
        } else {
            Price((value * Self::SCALE as f64).round().max(1.0) as i64)
        }
    }

    pub fn from_cents(cents: i64) -> Price {
        Price(cents * 100)
    }

    pub fn to_f64(self) -> f64 {
        self.0 as f64 / Self::SCALE as f64
    }

    pub fn to_decimal(self) -> Decimal {
        Decimal::new(self.0, 4).normalize()
    }

    /// The price as a `Decimal` of scale 4, not normalised (12.5000): exact, and built in place
    /// (the engine marks every bar's close).
    #[inline]
    pub fn as_decimal(self) -> Decimal {
        let ticks = self.0.unsigned_abs();
        Decimal::from_parts(ticks as u32, (ticks >> 32) as u32, 0, self.0 < 0, 4)
    }

    /// Appends the price as it displays (decision sentences quote prices on every order of a
    /// backtest, where the format machinery would be most of their cost).
    pub fn push_to(self, out: &mut String) {
        out.push_str(self.text(&mut [0; 24]));
    }

    /// The price's decimal text (no trailing zeros), written from the end of `buf`.
    fn text(self, buf: &mut [u8; 24]) -> &str {
        let ticks = self.0.unsigned_abs();
        let (whole, mut fraction) = (ticks / Self::SCALE as u64, ticks % Self::SCALE as u64);
        let mut at = buf.len();
        if fraction != 0 {
            let mut digits = 4;
            while fraction % 10 == 0 {
                fraction /= 10;
                digits -= 1;
            }
            at = crate::time::write_digits(buf, at, fraction, digits) - 1;
            buf[at] = b'.';
        }
        at = crate::time::write_digits(buf, at, whole, 1);
        if self.0 < 0 {
            at -= 1;
            buf[at] = b'-';
        }
        std::str::from_utf8(&buf[at..]).expect("ASCII digits")
    }

    /// The price as a decimal if it has at most 4 decimal places.
    pub fn from_decimal(value: Decimal) -> Option<Price> {
        let scaled = value.checked_mul(Decimal::from(Self::SCALE))?;
        (scaled.fract().is_zero()).then(|| i64::try_from(scaled).ok().map(Price)).flatten()
    }
}

/// As [`Price::to_decimal`] displays (no trailing zeros), from the integer.
impl fmt::Display for Price {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.text(&mut [0; 24]))
    }
}

/// Serialised as a JSON number with at most 4 decimals.
impl Serialize for Price {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(self.to_f64())
    }
}

/// Read from a JSON number, rounded to 1/10,000.
impl<'de> Deserialize<'de> for Price {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Price, D::Error> {
        let value = f64::deserialize(d)?;
        if !value.is_finite() || value.abs() > 9e14 {
            return Err(serde::de::Error::custom("price out of range"));
        }
        Ok(Price((value * Self::SCALE as f64).round() as i64))
    }
}

/// Order or fill side. Long-only trading: a `SELL` reduces a position.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "UPPERCASE")]
pub enum Side {
    Buy,
    Sell,
}

impl Side {
    pub fn as_str(self) -> &'static str {
        match self {
            Side::Buy => "BUY",
            Side::Sell => "SELL",
        }
    }
}

/// Bar length.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum Timeframe {
    #[serde(rename = "1m")]
    Minute,
    #[serde(rename = "1d")]
    Day,
}

impl Timeframe {
    pub fn as_str(self) -> &'static str {
        match self {
            Timeframe::Minute => "1m",
            Timeframe::Day => "1d",
        }
    }

    pub fn parse(text: &str) -> Option<Timeframe> {
        match text {
            "1m" => Some(Timeframe::Minute),
            "1d" => Some(Timeframe::Day),
            _ => None,
        }
    }
}

/// One OHLCV bar. `start` is the bar's first instant (minute bars: an exact minute boundary;
/// daily bars: 00:00 America/New_York of the date).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Bar {
    #[serde(with = "crate::time::serde_ts")]
    pub start: Timestamp,
    pub open: Price,
    pub high: Price,
    pub low: Price,
    pub close: Price,
    pub volume: u64,
}

impl Bar {
    /// High is the highest and low the lowest of the four prices, all positive.
    pub fn is_consistent(&self) -> bool {
        self.low.0 > 0
            && self.low <= self.open
            && self.low <= self.close
            && self.high >= self.open
            && self.high >= self.close
            && self.low <= self.high
    }
}

/// The best bid and offer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Quote {
    pub bid: Price,
    pub ask: Price,
    pub bid_size: u64,
    pub ask_size: u64,
}

/// The venue's reason code of a Limit Up-Limit Down volatility pause (UTP `LUDP`; CTS says `M`).
pub const LULD_PAUSE: &str = "LUDP";
/// The venue's reason code of a news halt (UTP `T1`, "halt news pending").
pub const NEWS_PENDING: &str = "T1";

/// Why, and since when, a symbol cannot trade (CONTRACT §11): a LULD pause or a regulatory halt,
/// as the market-data source reports it. A symbol with none trades.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct SymbolHalt {
    /// The venue's code: [`LULD_PAUSE`], [`NEWS_PENDING`], or another the feed relays as sent.
    pub reason_code: Arc<str>,
    /// The code in words, as the venue gives it.
    pub reason: Arc<str>,
    #[serde(with = "crate::time::serde_ts")]
    pub since: Timestamp,
}

impl SymbolHalt {
    pub fn new(reason_code: &str, reason: &str, since: Timestamp) -> SymbolHalt {
        SymbolHalt { reason_code: reason_code.into(), reason: reason.into(), since }
    }

    /// A LULD volatility pause starting at `since`.
    pub fn luld_pause(since: Timestamp) -> SymbolHalt {
        SymbolHalt::new(LULD_PAUSE, "Volatility Trading Pause", since)
    }

    /// A news halt starting at `since`.
    pub fn news_pending(since: Timestamp) -> SymbolHalt {
        SymbolHalt::new(NEWS_PENDING, "Halt News Pending", since)
    }
}

/// One halt of a symbol's day: no trades from `start` until `end`, where the reopening bar starts.
/// What a replay of stored days meets where the source knew the halts (the simulated market).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HaltWindow {
    pub start: Timestamp,
    pub end: Timestamp,
    /// The halt as a source reports it (`since` is `start`).
    pub halt: SymbolHalt,
}

impl HaltWindow {
    /// Whether the minute starting `at` is inside the halt.
    pub fn covers(&self, at: Timestamp) -> bool {
        self.start <= at && at < self.end
    }
}

/// One trade print.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Trade {
    pub at: Timestamp,
    pub price: Price,
    pub size: u64,
}

/// Whether an amount in ticks (1/10,000 dollar) is within what a `Decimal` holds (a 96-bit
/// mantissa).
pub fn ticks_fit_dollars(ticks: i128) -> bool {
    ticks.unsigned_abs() < 1 << 96
}

/// Dollars of an amount in ticks (`None` beyond what a `Decimal` holds).
pub fn ticks_to_dollars(ticks: i128) -> Option<Decimal> {
    Decimal::try_from_i128_with_scale(ticks, 4).ok()
}

/// Whole ticks of `dollars`, rounded down, or up when `up` (`None` beyond an `i128`): the
/// integer bounds a value in ticks is compared with.
pub fn whole_ticks(dollars: Decimal, up: bool) -> Option<i128> {
    // Integer arithmetic where the `Decimal` product below is exact (a mantissa below 2^64 times
    // 10^4 fits its 96 bits, and a scale up to 24 plus 4 needs no rescaling): the same floor or
    // ceiling of `mantissa × 10^4 / 10^scale`, without `Decimal`'s multiply, floor and
    // conversion (a daily-bar run asks twice per bar).
    let (mantissa, scale) = (dollars.mantissa(), dollars.scale());
    if mantissa.unsigned_abs() < 1 << 64 && scale <= 24 {
        let ticks = mantissa * i128::from(Price::SCALE);
        if scale == 0 {
            return Some(ticks);
        }
        // Most amounts fit 64 bits, whose division is one instruction (128 bits' is a call).
        if let (Ok(ticks), Some(unit)) = (i64::try_from(ticks), 10i64.checked_pow(scale)) {
            let floor = ticks.div_euclid(unit);
            return Some(i128::from(if up && floor * unit != ticks { floor + 1 } else { floor }));
        }
        let unit = 10i128.pow(scale);
        let floor = ticks.div_euclid(unit);
        return Some(if up && floor * unit != ticks { floor + 1 } else { floor });
    }
    whole_ticks_of_decimal(dollars, up)
}

/// [`whole_ticks`] by `Decimal` arithmetic.
fn whole_ticks_of_decimal(dollars: Decimal, up: bool) -> Option<i128> {
    let ticks = dollars.checked_mul(Decimal::from(Price::SCALE))?;
    rust_decimal::prelude::ToPrimitive::to_i128(&if up { ticks.ceil() } else { ticks.floor() })
}

/// `d` as `f64`: the value `Decimal::to_f64` gives, bit for bit, without its 128-bit division
/// when the mantissa is below 2^48 (every price and position value of a run): then `to_f64`
/// rounds to the same `mantissa / 10^scale`, which one division of two exactly represented
/// numbers gives correctly rounded. Trades convert several amounts each.
pub fn decimal_to_f64(d: Decimal) -> f64 {
    const POW10: [f64; 23] = [
        1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19,
        1e20, 1e21, 1e22,
    ];
    let (mantissa, scale) = (d.mantissa(), d.scale() as usize);
    match POW10.get(scale) {
        Some(unit) if mantissa.unsigned_abs() < 1 << 48 => mantissa as f64 / unit,
        _ => rust_decimal::prelude::ToPrimitive::to_f64(&d).unwrap_or(0.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// Whole ticks by integers are those of `Decimal` arithmetic, for every mantissa and scale.
        #[test]
        fn whole_ticks_match_decimal_arithmetic(
            lo in proptest::prelude::any::<u32>(),
            mid in proptest::prelude::any::<u32>(),
            hi in proptest::prelude::any::<u32>(),
            small in proptest::prelude::any::<i64>(),
            negative in proptest::prelude::any::<bool>(),
            scale in 0u32..=28,
            use_small in proptest::prelude::any::<bool>(),
        ) {
            let d = if use_small {
                Decimal::new(small, scale)
            } else {
                Decimal::from_parts(lo, mid, hi, negative, scale)
            };
            for up in [false, true] {
                proptest::prop_assert_eq!(whole_ticks(d, up), whole_ticks_of_decimal(d, up), "{} {}", d, up);
            }
        }
    }

    #[test]
    fn whole_ticks_round_down_or_up() {
        let cases = [
            ("0", 0, 0),
            ("1.23456", 12345, 12346),
            ("-1.23456", -12346, -12345),
            ("-0.00001", -1, 0),
            ("0.00001", 0, 1),
            ("12.5", 125_000, 125_000),
            ("-7", -70_000, -70_000),
            ("0.0000000000000000000000000001", 0, 1),
            ("-0.0000000000000000000000000001", -1, 0),
            ("18446744073709551615.5", 184_467_440_737_095_516_155_000, 184_467_440_737_095_516_155_000),
        ];
        for (text, down, up) in cases {
            let d: Decimal = text.parse().expect("decimal");
            assert_eq!(whole_ticks(d, false), Some(down), "{text}");
            assert_eq!(whole_ticks(d, true), Some(up), "{text}");
            assert_eq!(whole_ticks_of_decimal(d, false), Some(down), "{text}");
            assert_eq!(whole_ticks_of_decimal(d, true), Some(up), "{text}");
        }
        // Beyond what the product holds: none, either way.
        assert_eq!(whole_ticks(Decimal::MAX, false), None);
        assert_eq!(whole_ticks_of_decimal(Decimal::MAX, false), None);
    }

    proptest::proptest! {
        /// A price displays exactly as its decimal does.
        #[test]
        fn prices_display_as_their_decimal(ticks in proptest::prelude::any::<i64>()) {
            let p = Price(ticks);
            proptest::prop_assert_eq!(p.to_string(), p.to_decimal().to_string());
            let mut pushed = String::from("at ");
            p.push_to(&mut pushed);
            proptest::prop_assert_eq!(pushed, format!("at {}", p.to_decimal()));
        }

        /// Money converts to `f64` exactly as `rust_decimal` converts it.
        #[test]
        fn decimal_to_f64_is_to_f64_bit_for_bit(mantissa in -(1i64 << 50)..(1i64 << 50), scale in 0u32..=28) {
            let d = Decimal::new(mantissa, scale);
            let expected = rust_decimal::prelude::ToPrimitive::to_f64(&d).unwrap();
            proptest::prop_assert_eq!(decimal_to_f64(d).to_bits(), expected.to_bits(), "{}", d);
        }

        /// A close marks at its exact decimal.
        #[test]
        fn as_decimal_is_the_price(ticks in proptest::num::i64::ANY) {
            let (built, expected) = (Price(ticks).as_decimal(), Decimal::new(ticks, 4));
            proptest::prop_assert_eq!((built.mantissa(), built.scale()), (expected.mantissa(), expected.scale()));
        }
    }

    #[test]
    fn prices_display_without_trailing_zeros() {
        let shown: Vec<String> = [0, 1, 10, 12_500, 123_450, 10_000, -5_000].map(|t| Price(t).to_string()).into();
        assert_eq!(shown, ["0", "0.0001", "0.001", "1.25", "12.345", "1", "-0.5"]);
    }

    #[test]
    fn ticks_are_cents_above_a_dollar_and_exact() {
        assert_eq!(Price::from_f64_tick(12.3456), Price(123_500));
        assert_eq!(Price::from_f64_tick(0.12345), Price(1_235));
        assert_eq!(Price::from_f64_tick(0.00001), Price(1), "never zero");
        assert_eq!(Price(123_500).to_decimal().to_string(), "12.35");
        assert_eq!(Price::from_decimal(Decimal::new(1235, 2)), Some(Price(123_500)));
        assert_eq!(Price::from_decimal(Decimal::new(123_451, 5)), None);
        assert_eq!(serde_json::to_string(&Price(123_500)).unwrap(), "12.35");
        assert_eq!(serde_json::from_str::<Price>("12.35").unwrap(), Price(123_500));
        assert_eq!(serde_json::from_str::<Price>("0.1235").unwrap(), Price(1_235));
    }
}
