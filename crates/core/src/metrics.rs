//! Backtest performance metrics (CONTRACT §4 `GET /api/backtests/{id}`), defined once here and
//! in `docs/research.md` (Metrics). The conventions follow `research/domain.md` §4 and say which of the
//! libraries' differing choices we make:
//!
//! - **total_return** = `(E_end − E_0) / E_0` (fraction).
//! - **sharpe_ratio** = `mean(r) / std(r, ddof = 1) × √252` over **daily** returns `r`, risk-free
//!   0, where a day's equity is the last point of that New York date and the first return is
//!   measured from the initial equity (so a losing first day counts). `None` with fewer than two
//!   daily returns or when every return is equal (the ratio is undefined).
//! - **max_drawdown** = `max_t (1 − E_t / max_{s≤t} E_s)` over every point of the curve (marked to
//!   market each bar, not only at closed trades), with the initial equity as the first peak;
//!   a positive fraction.
//! - **win_rate** = trades with P&L > 0 / all trades (a break-even trade is not a win).
//! - **win_loss_ratio** = average winning P&L / |average losing P&L| (the payoff ratio, a ratio
//!   of averages, not of counts); `None` without both a win and a loss.
//! - **profit_factor** = gross profit / |gross loss| in dollars; `None` without a loss.
//! - **expectancy** = mean trade P&L in dollars.
//!
//! Dollar sums stay exact (`Decimal`); ratios are `f64`.

use crate::market::{ticks_to_dollars, whole_ticks};
use crate::time::Timestamp;
use chrono::NaiveDate;
use rust_decimal::prelude::ToPrimitive;
use rust_decimal::Decimal;
use serde::Serialize;

/// Trading days per year for annualising daily figures.
pub const TRADING_DAYS_PER_YEAR: f64 = 252.0;

/// One point of an equity curve: account value marked to market at `timestamp`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct EquityPoint {
    #[cfg_attr(feature = "openapi", schema(value_type = String, format = DateTime))]
    pub timestamp: Timestamp,
    /// Dollars.
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub equity: Decimal,
}

/// The metrics of one run; see the module documentation for each definition.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Metrics {
    pub total_return: f64,
    pub sharpe_ratio: Option<f64>,
    pub max_drawdown: f64,
    pub win_loss_ratio: Option<f64>,
    pub win_rate: Option<f64>,
    pub profit_factor: Option<f64>,
    pub trade_count: u64,
    /// Sum of winning trades' P&L, dollars.
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub gross_profit: Decimal,
    /// Sum of losing trades' P&L, dollars (zero or negative).
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub gross_loss: Decimal,
    /// Mean trade P&L, dollars; `None` without trades.
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>))]
    pub expectancy: Option<Decimal>,
    /// Daily returns the Sharpe ratio was computed from (a Sharpe over a handful of days says
    /// little; show it beside this).
    pub days: u32,
}

/// `a` against `b`, exactly: the integers compared directly when both have the same scale (as
/// the equity of one run mostly has), else `Decimal`'s own comparison.
#[inline]
fn cmp_money(a: &Decimal, b: &Decimal) -> std::cmp::Ordering {
    if a.scale() == b.scale() {
        a.mantissa().cmp(&b.mantissa())
    } else {
        a.cmp(b)
    }
}

/// `base` plus `value` ticks (within what a `Decimal` holds, as [`CurveStats::push_split_on`]
/// asks).
fn split_sum(base: Decimal, value: i128) -> Decimal {
    base + ticks_to_dollars(value).expect("a split point's value fits a Decimal")
}

/// `numerator / denominator` as a ratio: the `Decimal` quotient converted to `f64`, exactly as
/// `(numerator / denominator).to_f64()` gives it. A backtest takes one a day (its daily return)
/// and one a drawdown, for every combination of a sweep; [`Quotient::of`] finds the same
/// quotient in 64- and 128-bit integers, without `Decimal`'s general division.
fn ratio(numerator: Decimal, denominator: Decimal) -> Option<f64> {
    if denominator.is_zero() {
        return None;
    }
    match Quotient::of(&numerator, &denominator) {
        Some(q) => Some(q.to_f64()),
        None => (numerator / denominator).to_f64(),
    }
}

/// 10^k for k ≤ 28.
const POW10: [u128; 29] = {
    let mut table = [1u128; 29];
    let mut k = 1;
    while k < 29 {
        table[k] = table[k - 1] * 10;
        k += 1;
    }
    table
};

/// `q % p` for `p` ≤ 10^8 in 64-bit arithmetic (`u128 % u128` is a call to a software
/// division): `q = hi × 2^64 + lo`, so `q % p = (hi % p × (2^64 % p) + lo % p) % p`, whose
/// product stays below 10^16.
#[inline]
fn low_remainder(q: u128, p: u64) -> u64 {
    let (hi, lo) = ((q >> 64) as u64, q as u64);
    let two_64 = (u64::MAX % p + 1) % p;
    ((hi % p) * two_64 % p + lo % p) % p
}

/// 10^k for k ≤ 28 as `u128 as f64` converts it.
const POW10_F64: [f64; 29] = {
    let mut table = [0.0; 29];
    let mut k = 0;
    while k < 29 {
        table[k] = POW10[k] as f64;
        k += 1;
    }
    table
};

/// `10f64.powi(k)` for k ≤ 28, worked out at run time by the same `powi` that `Decimal::to_f64`
/// calls (not folded at compile time, which may round differently): the same bits, looked up
/// rather than multiplied out for every return of every combination.
static POWI10: std::sync::LazyLock<[f64; 29]> = std::sync::LazyLock::new(|| {
    let mut table = [0.0; 29];
    for (k, power) in table.iter_mut().enumerate() {
        *power = 10f64.powi(std::hint::black_box(k as i32));
    }
    table
});

/// A quotient below 1 in magnitude as `Decimal` division gives it: `±mantissa / 10^scale`.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Quotient {
    mantissa: u128,
    scale: u32,
    negative: bool,
}

impl Quotient {
    /// `Decimal` division's result, digit for digit and scale for scale, for a quotient whose
    /// magnitude is below 1, of mantissas within 63 bits and a dividend's scale at least the
    /// divisor's (a return, a drawdown); `None` otherwise, or when the quotient ends within 28
    /// decimals (left to `Decimal`, whose scale then depends on where it found the end). The
    /// rules are `rust_decimal`'s, property-tested against it:
    /// - the quotient starts at scale `s0` = the dividend's scale − the divisor's and takes
    ///   decimals while a remainder is left, up to 28 (it takes them 9 at a time, which changes
    ///   nothing here: a quotient that ends at all is `None`);
    /// - at 28 the last digit is rounded half to even on the remainder;
    /// - trailing zeros are then dropped as its `unscale` drops them (8 at a time while the low
    ///   32 bits are zero, then 4, 2 and 1 once each).
    fn of(numerator: &Decimal, denominator: &Decimal) -> Option<Quotient> {
        const MAX_SCALE: u32 = 28;
        let (sn, sd) = (numerator.scale(), denominator.scale());
        if sn < sd || numerator.is_zero() {
            return None;
        }
        let a = u64::try_from(numerator.mantissa().unsigned_abs()).ok()?;
        let b = u64::try_from(denominator.mantissa().unsigned_abs()).ok()?;
        let mut scale = sn - sd;
        let (mut q, mut r) = ((a / b) as u128, a % b);
        if r == 0 || q >= POW10[scale as usize] {
            return None;
        }
        // Up to 19 decimals at a time: `r < b` times 10^19 stays within 128 bits, and its
        // quotient by `b` (below 10^19) within 64, so each step is one 128-by-64-bit division
        // (two steps for 28 decimals, where 64-bit steps of 9 took four).
        let wide = b as u128;
        while r != 0 && scale < MAX_SCALE {
            let k = (MAX_SCALE - scale).min(19);
            let power = POW10[k as usize];
            let scaled = r as u128 * power;
            let digits = scaled / wide;
            q = q * power + digits;
            r = (scaled - digits * wide) as u64;
            scale += k;
        }
        if r == 0 {
            return None;
        }
        if 2 * r > b || (2 * r == b && q & 1 == 1) {
            q += 1;
        }
        if q == 0 {
            // Rounded to zero: `Decimal`'s zero has a sign of its own.
            return None;
        }
        while q as u32 == 0 && scale >= 8 && low_remainder(q, 100_000_000) == 0 {
            q /= 100_000_000;
            scale -= 8;
        }
        for (digits, low_bits, power) in [(4, 0xF, 10_000), (2, 0x3, 100), (1, 0x1, 10)] {
            if q & low_bits == 0 && scale >= digits && low_remainder(q, power) == 0 {
                q /= power as u128;
                scale -= digits;
            }
        }
        let negative = numerator.is_sign_negative() != denominator.is_sign_negative();
        Some(Quotient { mantissa: q, scale, negative })
    }

    /// As `Decimal::to_f64` converts it: with no integral part, the fraction's mantissa over
    /// `10^scale` in `f64`, rounded back at `scale` decimals (`rust_decimal`'s own steps).
    fn to_f64(self) -> f64 {
        let value = self.mantissa as f64 / POW10_F64[self.scale as usize];
        let round_to = POWI10[self.scale as usize];
        let rounded = (value * round_to).round() / round_to;
        if self.negative {
            -rounded
        } else {
            rounded
        }
    }

    #[cfg(test)]
    fn to_decimal(self) -> Decimal {
        let q = self.mantissa as i128;
        Decimal::from_i128_with_scale(if self.negative { -q } else { q }, self.scale)
    }
}

/// Computes every metric from the initial equity, the marked-to-market curve (in time order) and
/// the P&L of each completed trade (net of fees, dollars).
pub fn compute(initial_equity: Decimal, curve: &[EquityPoint], trade_pnl: &[Decimal]) -> Metrics {
    let mut stats = CurveStats::new(initial_equity);
    for point in curve {
        stats.push(point.timestamp, point.equity);
    }
    stats.finish(trade_pnl)
}

/// The curve's metrics accumulated point by point, without keeping the curve: O(1) work per
/// point (comparisons; one division per drawdown episode; a time-zone conversion per date).
#[derive(Clone, Debug)]
pub struct CurveStats {
    initial: Decimal,
    last: Decimal,
    peak: Decimal,
    /// The lowest equity since `peak` was set.
    trough: Decimal,
    max_drawdown: f64,
    day: crate::calendar::NyDay,
    /// Closing equity of each New York date so far (the last one stale while `split` holds it).
    closes: Vec<(NaiveDate, Decimal)>,
    /// The last point when it came as a base and a value in ticks ([`CurveStats::push_split_on`])
    /// and has not been added up yet: `last` and the last close are stale meanwhile.
    split: Option<(Decimal, i128)>,
    /// For `split`'s base: the values in ticks strictly above which a point makes a new peak and
    /// strictly below which a new trough, so most points compare two integers.
    bounds: Option<SplitBounds>,
}

#[derive(Clone, Copy, Debug)]
struct SplitBounds {
    base: Decimal,
    peak_above: i128,
    trough_below: i128,
}

impl CurveStats {
    pub fn new(initial_equity: Decimal) -> CurveStats {
        CurveStats::with_dates(initial_equity, 0)
    }

    /// [`CurveStats::new`] with room for the closes of `dates` New York dates: a run knows
    /// about how many its bars span, and the closes then grow without being copied (a daily-bar
    /// run adds one a bar).
    pub fn with_dates(initial_equity: Decimal, dates: usize) -> CurveStats {
        CurveStats {
            initial: initial_equity,
            last: initial_equity,
            peak: initial_equity,
            trough: initial_equity,
            max_drawdown: 0.0,
            day: Default::default(),
            closes: Vec::with_capacity(dates),
            split: None,
            bounds: None,
        }
    }

    pub fn push(&mut self, at: Timestamp, equity: Decimal) {
        let date = self.day.date_of(at);
        self.push_on(date, equity);
    }

    /// [`CurveStats::push`] of a point on New York date `date`.
    pub fn push_on(&mut self, date: NaiveDate, equity: Decimal) {
        // A split point of an earlier date closes that date.
        self.settle();
        self.last = equity;
        if cmp_money(&equity, &self.peak).is_gt() {
            self.close_episode();
            self.peak = equity;
            self.trough = equity;
            self.bounds = None;
        } else if cmp_money(&equity, &self.trough).is_lt() {
            self.trough = equity;
            self.bounds = None;
        }
        match self.closes.last_mut() {
            Some((last, close)) if *last == date => *close = equity,
            _ => self.closes.push((date, equity)),
        }
    }

    /// [`CurveStats::push_on`] of `base + value` ticks (1/10,000 dollar), `value` within what a
    /// `Decimal` holds: a backtest's equity while one position is open is its cash and the
    /// position's value in ticks, and most bars neither make a new peak nor a new trough. Those
    /// compare the value with two integers and add nothing up until the point is read; the
    /// metrics are exactly those of pushing each sum.
    pub fn push_split_on(&mut self, date: NaiveDate, base: Decimal, value: i128) {
        let bounds = match self.bounds {
            Some(b) if b.base == base => b,
            _ => match self.split_bounds(base) {
                Some(b) => b,
                None => return self.push_on(date, split_sum(base, value)),
            },
        };
        if value > bounds.peak_above || value < bounds.trough_below {
            return self.push_on(date, split_sum(base, value));
        }
        if self.closes.last().is_none_or(|(last, _)| *last != date) {
            self.settle();
            self.closes.push((date, self.last));
        }
        self.split = Some((base, value));
    }

    /// The bounds of [`SplitBounds`] for `base` (`None` past what ticks hold).
    fn split_bounds(&mut self, base: Decimal) -> Option<SplitBounds> {
        // value > (peak − base) × 10,000 ⟺ value > floor(that), for an integer value; and
        // value < (trough − base) × 10,000 ⟺ value < ceil(that).
        let peak_above = whole_ticks(self.peak - base, false)?;
        let trough_below = whole_ticks(self.trough - base, true)?;
        let bounds = SplitBounds { base, peak_above, trough_below };
        self.bounds = Some(bounds);
        Some(bounds)
    }

    /// Adds up a split last point into `last` and the last close.
    fn settle(&mut self) {
        if let Some((base, value)) = self.split.take() {
            self.last = split_sum(base, value);
            if let Some((_, close)) = self.closes.last_mut() {
                *close = self.last;
            }
        }
    }

    /// The last point's equity.
    pub fn last(&mut self) -> Decimal {
        self.settle();
        self.last
    }

    /// A point on `date` at the same equity as the last one.
    pub fn repeat_on(&mut self, date: NaiveDate) {
        if self.closes.last().is_none_or(|(last, _)| *last != date) {
            self.settle();
            self.closes.push((date, self.last));
        }
    }

    /// Replaces the last point's equity (a backtest's close-out after its last bar).
    pub fn amend_last(&mut self, equity: Decimal) {
        self.split = None;
        self.last = equity;
        if equity < self.trough {
            self.trough = equity;
            self.bounds = None;
        }
        if let Some((_, close)) = self.closes.last_mut() {
            *close = equity;
        }
    }

    fn close_episode(&mut self) {
        if self.peak > Decimal::ZERO && self.trough < self.peak {
            let drawdown = ratio(self.peak - self.trough, self.peak).unwrap_or(0.0);
            self.max_drawdown = self.max_drawdown.max(drawdown);
        }
    }

    /// Returns from one New York date's closing equity to the next, the first from the initial
    /// equity.
    pub fn daily_returns(&mut self) -> Vec<f64> {
        self.settle();
        let mut previous = self.initial;
        self.closes
            .iter()
            .map(|(_, equity)| {
                // A flat day (no position, or an unchanged mark) is a return of exactly 0, as the
                // division would give, without it.
                let r = if *equity == previous { 0.0 } else { ratio(*equity - previous, previous).unwrap_or(0.0) };
                previous = *equity;
                r
            })
            .collect()
    }

    /// Every metric, with the P&L of each completed trade.
    pub fn finish(mut self, trade_pnl: &[Decimal]) -> Metrics {
        self.settle();
        self.close_episode();
        let total_return = ratio(self.last - self.initial, self.initial).unwrap_or(0.0);
        let returns = self.daily_returns();
        let sharpe_ratio = sharpe(&returns);
        let wins: Vec<Decimal> = trade_pnl.iter().copied().filter(|p| *p > Decimal::ZERO).collect();
        let losses: Vec<Decimal> = trade_pnl.iter().copied().filter(|p| *p < Decimal::ZERO).collect();
        let gross_profit: Decimal = wins.iter().sum();
        let gross_loss: Decimal = losses.iter().sum();
        let count = |n: usize| Decimal::from(n as u64);
        let win_loss_ratio = if wins.is_empty() || losses.is_empty() {
            None
        } else {
            ratio(gross_profit / count(wins.len()), -gross_loss / count(losses.len()))
        };
        let trades = trade_pnl.len();
        Metrics {
            total_return,
            sharpe_ratio,
            max_drawdown: self.max_drawdown,
            win_loss_ratio,
            win_rate: (trades > 0).then(|| wins.len() as f64 / trades as f64),
            profit_factor: ratio(gross_profit, -gross_loss),
            trade_count: trades as u64,
            gross_profit,
            gross_loss,
            expectancy: (trades > 0).then(|| trade_pnl.iter().sum::<Decimal>() / count(trades)),
            days: returns.len() as u32,
        }
    }
}

/// Returns from one New York date's closing equity to the next, the first from the initial
/// equity.
pub fn daily_returns(initial_equity: Decimal, curve: &[EquityPoint]) -> Vec<f64> {
    let mut stats = CurveStats::new(initial_equity);
    for point in curve {
        stats.push(point.timestamp, point.equity);
    }
    stats.daily_returns()
}

/// Annualised Sharpe ratio of daily returns, risk-free 0, sample standard deviation.
pub fn sharpe(returns: &[f64]) -> Option<f64> {
    if returns.len() < 2 {
        return None;
    }
    let n = returns.len() as f64;
    let mean = returns.iter().sum::<f64>() / n;
    let variance = returns.iter().map(|r| (r - mean).powi(2)).sum::<f64>() / (n - 1.0);
    let std = variance.sqrt();
    (std > 1e-12).then(|| mean / std * TRADING_DAYS_PER_YEAR.sqrt())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dec(s: &str) -> Decimal {
        s.parse().unwrap()
    }

    fn at(s: &str, equity: &str) -> EquityPoint {
        EquityPoint { timestamp: s.parse().unwrap(), equity: dec(equity) }
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    proptest::proptest! {
        /// The ratios are `Decimal`'s division converted, to the bit and to the scale: returns
        /// and drawdowns of equities of every size and scale (cents, ticks, an average price's
        /// 28 digits), mantissas past 32 and 64 bits, ties rounded half to even.
        #[test]
        fn ratios_divide_as_decimal_does(
            a in proptest::prop_oneof![0i128..1_000, 0i128..10_000_000_000, 0i128..(1i128 << 63), 0i128..(1i128 << 95)],
            b in proptest::prop_oneof![1i128..1_000, 1i128..10_000_000_000, 1i128..(1i128 << 63), 1i128..(1i128 << 95)],
            sa in 0u32..29, sb in 0u32..29, negative in proptest::bool::ANY, tie in proptest::bool::ANY,
        ) {
            // A tie at the 28th decimal: b = 2 × a × 10^k with a remainder of exactly half.
            let (a, b) = if tie && b < (1i128 << 60) { (b * 2 + 1, b * 4) } else { (a, b) };
            let n = Decimal::from_i128_with_scale(if negative { -a } else { a }, sa);
            let d = Decimal::from_i128_with_scale(b, sb);
            if let Some(fast) = Quotient::of(&n, &d) {
                let slow = n / d;
                proptest::prop_assert_eq!(fast.to_decimal().serialize(), slow.serialize(), "{} / {}: {:?} vs {}", n, d, fast, slow);
                proptest::prop_assert_eq!(Some(fast.to_f64().to_bits()), slow.to_f64().map(f64::to_bits), "{} / {}", n, d);
            }
        }
    }

    proptest::proptest! {
        /// The trailing zeros' test divides as `u128` does, for quotients of every width.
        #[test]
        fn low_remainders_are_u128_remainders(q in proptest::prop_oneof![0u128..1_000_000, 0u128..(1u128 << 64), 0u128..POW10[28]], k in 0usize..4) {
            let p = [10u64, 100, 10_000, 100_000_000][k];
            proptest::prop_assert_eq!(u128::from(low_remainder(q, p)), q % u128::from(p));
        }
    }

    /// At every scale the table serves, a quotient converts to the bits `Decimal::to_f64` gives
    /// the same value (which calls `powi` itself): a wrong power would round elsewhere.
    #[test]
    fn quotients_of_every_scale_convert_as_decimal_does() {
        for scale in 1..29u32 {
            let below_one = POW10[scale as usize];
            for mantissa in [1u128, 7, 123_456_789, below_one - 1].into_iter().filter(|m| *m < below_one) {
                let q = Quotient { mantissa, scale, negative: false };
                let slow = Decimal::from_i128_with_scale(mantissa as i128, scale).to_f64();
                assert_eq!(Some(q.to_f64().to_bits()), slow.map(f64::to_bits), "{mantissa} / 10^{scale}");
            }
        }
    }

    /// The integer path takes the ratios a backtest's curve gives (below 1, not ending within 28
    /// decimals), and leaves the rest to `Decimal`.
    #[test]
    fn ratios_of_curves_take_the_integer_path() {
        let path = |n: &str, d: &str| Quotient::of(&dec(n), &dec(d)).map(Quotient::to_decimal);
        assert_eq!(path("-1234.5678", "101234.5678"), Some(dec("-1234.5678") / dec("101234.5678")));
        assert_eq!(path("20.00", "771184.06"), Some(dec("20.00") / dec("771184.06")));
        assert_eq!(path("1", "2"), None, "ends within 28 decimals");
        assert_eq!(path("3", "2"), None, "1 or more");
        assert_eq!(path("1", "3.00"), None, "the divisor's scale above the dividend's");
        assert_eq!(ratio(dec("1"), dec("3")), (dec("1") / dec("3")).to_f64(), "as Decimal converts it (not 1.0 / 3.0)");
    }

    proptest::proptest! {
        /// The peak and trough comparisons order money exactly as `Decimal` does, whatever the
        /// scales and signs.
        #[test]
        fn money_compares_as_decimal(a in -10_000_000_000i64..10_000_000_000, b in -10_000_000_000i64..10_000_000_000, sa in 0u32..9, sb in 0u32..9, same in proptest::bool::ANY) {
            let x = Decimal::new(a, sa);
            let y = if same { Decimal::new(b, sa) } else { Decimal::new(b, sb) };
            proptest::prop_assert_eq!(cmp_money(&x, &y), x.cmp(&y));
            proptest::prop_assert_eq!(cmp_money(&x, &x), std::cmp::Ordering::Equal);
        }

        /// Points pushed as a base and a value in ticks give exactly the metrics, closes and last
        /// point of pushing their sums, whatever the bases, dates and order of the two kinds.
        #[test]
        fn split_points_are_their_sums(points in proptest::collection::vec((0u32..4, -1i64..2, -120i64..120, proptest::bool::ANY, 0u32..3), 1..60)) {
            let start = NaiveDate::from_ymd_opt(2026, 3, 2).unwrap();
            let (mut split, mut summed) = (CurveStats::new(dec("90000")), CurveStats::new(dec("90000")));
            let mut day = 0;
            for (base_choice, base_cents, value, as_split, next_day) in points {
                day += u64::from(next_day == 0);
                let date = start + chrono::Days::new(day);
                // A few bases, some at more than four decimals (fees), so bounds round both ways.
                let base = Decimal::new(9_000_000 + base_cents, 2) + Decimal::new(i64::from(base_choice), 7);
                let sum = base + Decimal::new(value, 4);
                summed.push_on(date, sum);
                if as_split {
                    split.push_split_on(date, base, value.into());
                } else {
                    split.push_on(date, sum);
                }
            }
            proptest::prop_assert_eq!(split.last(), summed.last());
            proptest::prop_assert_eq!(split.daily_returns(), summed.daily_returns());
            proptest::prop_assert_eq!(split.finish(&[]), summed.finish(&[]));
        }
    }

    /// Three days, +10%, −10%, +10%, from 100. By hand: total (108.9 − 100)/100 = 0.089; returns
    /// 0.1, −0.1, 0.1 have mean 1/30 and sample variance ((1/15)² + (2/15)² + (1/15)²)/2 = 1/75,
    /// so Sharpe = (1/30)/√(1/75) × √252 = √75/30 × √252 = 4.582575695; the drawdown 110 → 99 is
    /// 0.1 at day close, but the intraday low of 88 on day two makes it 0.2.
    #[test]
    fn equity_metrics_match_hand_computation() {
        let curve = [
            at("2026-11-16T15:00:00Z", "104"),
            at("2026-11-16T21:00:00Z", "110"),
            at("2026-11-17T16:00:00Z", "88"),
            at("2026-11-17T21:00:00Z", "99"),
            at("2026-11-18T21:00:00Z", "108.9"),
        ];
        let m = compute(dec("100"), &curve, &[]);
        assert!(close(m.total_return, 0.089), "{}", m.total_return);
        assert_eq!(daily_returns(dec("100"), &curve).len(), 3);
        assert!(close(m.sharpe_ratio.unwrap(), 4.582575695), "{:?}", m.sharpe_ratio);
        assert!(close(m.max_drawdown, 0.2), "{}", m.max_drawdown);
        assert_eq!(m.days, 3);
        assert_eq!(m.trade_count, 0);
        assert_eq!((m.win_rate, m.win_loss_ratio, m.profit_factor, m.expectancy), (None, None, None, None));
    }

    /// A loss on the first day counts against the initial equity (a curve that only ever rises
    /// after its first point still has a drawdown and a negative first return).
    #[test]
    fn the_first_day_is_measured_from_the_initial_equity() {
        let curve = [at("2026-11-16T21:00:00Z", "95"), at("2026-11-17T21:00:00Z", "99.75")];
        let returns = daily_returns(dec("100"), &curve);
        assert!(close(returns[0], -0.05) && close(returns[1], 0.05), "{returns:?}");
        let m = compute(dec("100"), &curve, &[]);
        assert!(close(m.max_drawdown, 0.05));
        // mean 0, so Sharpe 0 exactly.
        assert!(close(m.sharpe_ratio.unwrap(), 0.0));
        // One day, or no variation: undefined, not infinite.
        assert_eq!(sharpe(&[0.01]), None);
        assert_eq!(sharpe(&[0.01, 0.01, 0.01]), None);
    }

    /// Days are New York dates (EST, UTC−5, in November): 23:00 and 04:59 UTC the next morning
    /// are both the 16th in New York; 05:00 UTC on the 17th is midnight, the 17th.
    #[test]
    fn days_are_new_york_dates() {
        let curve =
            [at("2026-11-16T23:00:00Z", "101"), at("2026-11-17T04:59:00Z", "102"), at("2026-11-17T05:00:00Z", "103")];
        let returns = daily_returns(dec("100"), &curve);
        assert_eq!(returns.len(), 2);
        assert!(close(returns[0], 0.02) && close(returns[1], 1.0 / 102.0), "{returns:?}");
    }

    /// P&L +100, −50, +200, 0, −30, +60. By hand: 3 wins of 6 trades (the break-even one is not a
    /// win) → 0.5; average win 360/3 = 120, average loss 80/2 = 40 → 3.0; profit factor 360/80 =
    /// 4.5; expectancy 280/6 = 46.67 (exact to the cent once rounded).
    #[test]
    fn trade_metrics_match_hand_computation() {
        let pnl: Vec<Decimal> = ["100", "-50", "200", "0", "-30", "60"].iter().map(|s| dec(s)).collect();
        let m = compute(dec("1000"), &[], &pnl);
        assert_eq!(m.trade_count, 6);
        assert!(close(m.win_rate.unwrap(), 0.5));
        assert!(close(m.win_loss_ratio.unwrap(), 3.0));
        assert!(close(m.profit_factor.unwrap(), 4.5));
        assert_eq!(m.gross_profit, dec("360"));
        assert_eq!(m.gross_loss, dec("-80"));
        assert_eq!(m.expectancy.unwrap().round_dp(2), dec("46.67"));
        assert_eq!(m.total_return, 0.0);
        assert_eq!(m.sharpe_ratio, None);
    }

    /// Only winners: win rate 1, but no loss to divide by, so the payoff ratio and the profit
    /// factor are undefined (null), never infinite or a made-up cap.
    #[test]
    fn ratios_without_a_loss_are_undefined() {
        let m = compute(dec("1000"), &[], &[dec("10"), dec("20")]);
        assert_eq!(m.win_rate, Some(1.0));
        assert_eq!((m.win_loss_ratio, m.profit_factor), (None, None));
        let m = compute(dec("1000"), &[], &[dec("-10")]);
        assert_eq!(m.win_rate, Some(0.0));
        assert_eq!(m.profit_factor, Some(0.0));
        assert_eq!(m.win_loss_ratio, None);
    }
}
