//! Long-only positions with average-cost accounting.
//!
//! A [`Position`] holds the shares of one symbol and the exact cost of those shares. Buys add
//! `price × quantity` to the cost basis; a sell removes the proportional share of it
//! (`cost_basis × q / quantity`, rounded to 10 decimal places) and realizes the difference to its
//! proceeds. The sell that closes the position removes whatever cost is left, so the rounding of
//! partial sells never leaks into a finished trade: over a full round trip the realized P&L is
//! exactly `Σ sell proceeds − Σ buy costs`.
//!
//! Everything is `Decimal` (fills priced with a [`crate::market::Price`] convert through
//! `Price::to_decimal`). Percentages for alerts are compared in `Decimal` too, so a loss exactly at
//! a threshold is at it, not a float ulp away from it.

use rust_decimal::prelude::{FromPrimitive, ToPrimitive};
use rust_decimal::{Decimal, RoundingStrategy};
use serde::Serialize;

use crate::market::Side;
use crate::settings::RiskControls;
use crate::symbol::Symbol;
use crate::time::Timestamp;

/// Decimal places kept on the cost removed by a partial sell.
const COST_REMOVAL_DP: u32 = 10;
/// Decimal places of [`Position::average_entry_price`].
const AVERAGE_PRICE_DP: u32 = 4;

/// Alert level of a position (CONTRACT: `NONE`, `WARNING`, `CRITICAL`). Ordered by severity.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum AlertLevel {
    None,
    Warning,
    Critical,
}

/// One fill applied to a position.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PositionFill {
    pub side: Side,
    pub quantity: u64,
    /// Price per share, dollars.
    #[serde(with = "rust_decimal::serde::float")]
    pub price: Decimal,
    /// Fee of this fill, dollars (kept apart from the realized P&L, which is gross of fees).
    #[serde(with = "rust_decimal::serde::float")]
    pub fee: Decimal,
    #[serde(with = "crate::time::serde_ts")]
    pub at: Timestamp,
}

/// Why a fill was refused. A refused fill leaves the position untouched.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum PositionError {
    #[error("sell of {requested} shares exceeds the open position of {held}")]
    Oversell { requested: u64, held: u64 },
    #[error("fill quantity must be positive")]
    ZeroQuantity,
    #[error("fill price must be positive")]
    NonPositivePrice,
}

/// An open (or flat) position in one symbol, average-cost accounting. Long only: the quantity is
/// never negative.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Position {
    pub symbol: Symbol,
    pub quantity: u64,
    /// Total cost of the shares held (sum of price × quantity of the buys still held). Exact.
    #[serde(with = "rust_decimal::serde::float")]
    pub cost_basis: Decimal,
    /// Realized P&L of sells, gross of fees, since the position was opened (flat → this trade's result).
    #[serde(with = "rust_decimal::serde::float")]
    pub realized_pnl: Decimal,
    /// Fees of the fills since the position was opened.
    #[serde(with = "rust_decimal::serde::float")]
    pub fees: Decimal,
    #[serde(with = "crate::time::serde_ts_opt")]
    pub opened_at: Option<Timestamp>,
    #[serde(with = "crate::time::serde_ts_opt")]
    pub updated_at: Option<Timestamp>,
}

impl Position {
    /// A flat position with no history.
    pub fn new(symbol: Symbol) -> Position {
        Position {
            symbol,
            quantity: 0,
            cost_basis: Decimal::ZERO,
            realized_pnl: Decimal::ZERO,
            fees: Decimal::ZERO,
            opened_at: None,
            updated_at: None,
        }
    }

    pub fn is_flat(&self) -> bool {
        self.quantity == 0
    }

    /// Average entry price: cost_basis / quantity, rounded to 4 decimal places (None when flat).
    pub fn average_entry_price(&self) -> Option<Decimal> {
        if self.is_flat() {
            return None;
        }
        let average = self.cost_basis / Decimal::from(self.quantity);
        Some(average.round_dp_with_strategy(AVERAGE_PRICE_DP, RoundingStrategy::MidpointAwayFromZero))
    }

    /// Applies a fill; returns the realized P&L of this fill (zero for buys).
    ///
    /// Buy: quantity += q, cost_basis += price × q; the first buy from flat starts a new trade
    /// (realized_pnl and fees reset, opened_at set).
    /// Sell: realized = price × q − cost removed, where cost removed = cost_basis × q / quantity
    /// rounded to 10 decimal places (half away from zero), except that the sell closing the
    /// position removes the whole remaining cost_basis.
    /// In both cases fees += fee and updated_at = fill.at. A flat position keeps the finished
    /// trade's realized_pnl and fees until the next buy.
    pub fn apply(&mut self, fill: &PositionFill) -> Result<Decimal, PositionError> {
        if fill.quantity == 0 {
            return Err(PositionError::ZeroQuantity);
        }
        if fill.price <= Decimal::ZERO {
            return Err(PositionError::NonPositivePrice);
        }
        let quantity = Decimal::from(fill.quantity);
        let realized = match fill.side {
            Side::Buy => {
                if self.is_flat() {
                    self.cost_basis = Decimal::ZERO;
                    self.realized_pnl = Decimal::ZERO;
                    self.fees = Decimal::ZERO;
                    self.opened_at = Some(fill.at);
                }
                self.quantity += fill.quantity;
                self.cost_basis += fill.price * quantity;
                Decimal::ZERO
            }
            Side::Sell => {
                if fill.quantity > self.quantity {
                    return Err(PositionError::Oversell { requested: fill.quantity, held: self.quantity });
                }
                let cost_removed = if fill.quantity == self.quantity {
                    self.cost_basis
                } else {
                    let proportional = (self.cost_basis * quantity / Decimal::from(self.quantity))
                        .round_dp_with_strategy(COST_REMOVAL_DP, RoundingStrategy::MidpointAwayFromZero);
                    // Rounding up can only overshoot when the basis is below 1e-10; never go negative.
                    proportional.min(self.cost_basis)
                };
                let realized = fill.price * quantity - cost_removed;
                self.quantity -= fill.quantity;
                self.cost_basis -= cost_removed;
                self.realized_pnl += realized;
                realized
            }
        };
        self.fees += fill.fee;
        self.updated_at = Some(fill.at);
        Ok(realized)
    }

    /// Mark-to-market unrealized P&L: mark × quantity − cost_basis (zero when flat).
    pub fn unrealized_pnl(&self, mark: Decimal) -> Decimal {
        if self.is_flat() {
            return Decimal::ZERO;
        }
        mark * Decimal::from(self.quantity) - self.cost_basis
    }

    /// Unrealized P&L as a percentage of cost basis (None when flat, or in the degenerate case of
    /// an open position whose cost basis is zero).
    pub fn unrealized_pct(&self, mark: Decimal) -> Option<f64> {
        if self.is_flat() || self.cost_basis.is_zero() {
            return None;
        }
        (self.unrealized_pnl(mark) * Decimal::ONE_HUNDRED / self.cost_basis).to_f64()
    }

    /// `NONE`; `WARNING` when the unrealized loss reaches `alert_warning_loss_pct` of cost;
    /// `CRITICAL` when it reaches `alert_critical_loss_pct`. Flat, break-even and winning
    /// positions are `NONE`. The comparison is exact (`loss × 100 ≥ pct × cost` in `Decimal`).
    pub fn alert_level(&self, mark: Decimal, limits: &RiskControls) -> AlertLevel {
        if self.is_flat() {
            return AlertLevel::None;
        }
        let loss = -self.unrealized_pnl(mark);
        if loss <= Decimal::ZERO {
            return AlertLevel::None;
        }
        let scaled_loss = loss * Decimal::ONE_HUNDRED;
        let reaches = |pct: f64| match Decimal::from_f64(pct) {
            Some(pct) => scaled_loss >= pct * self.cost_basis,
            None => false, // NaN or out of range: settings validation never lets this through.
        };
        if reaches(limits.alert_critical_loss_pct) {
            AlertLevel::Critical
        } else if reaches(limits.alert_warning_loss_pct) {
            AlertLevel::Warning
        } else {
            AlertLevel::None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::from_epoch_ms;
    use proptest::prelude::*;
    use std::str::FromStr;

    fn dec(text: &str) -> Decimal {
        Decimal::from_str(text).expect("test decimal")
    }

    fn at(n: i64) -> Timestamp {
        from_epoch_ms(1_795_000_000_000 + n * 1_000)
    }

    fn fill(side: Side, quantity: u64, price: &str, fee: &str, n: i64) -> PositionFill {
        PositionFill { side, quantity, price: dec(price), fee: dec(fee), at: at(n) }
    }

    fn buy(quantity: u64, price: &str) -> PositionFill {
        fill(Side::Buy, quantity, price, "0", 0)
    }

    fn sell(quantity: u64, price: &str) -> PositionFill {
        fill(Side::Sell, quantity, price, "0", 0)
    }

    fn position() -> Position {
        Position::new(Symbol::parse("ABCD").expect("test symbol"))
    }

    fn limits(warning: f64, critical: f64) -> RiskControls {
        RiskControls { alert_warning_loss_pct: warning, alert_critical_loss_pct: critical, ..RiskControls::default() }
    }

    #[test]
    fn new_position_is_flat() {
        let p = position();
        assert!(p.is_flat());
        assert_eq!(p.average_entry_price(), None);
        assert_eq!(p.unrealized_pnl(dec("12.34")), Decimal::ZERO);
        assert_eq!(p.unrealized_pct(dec("12.34")), None);
        assert_eq!(p.alert_level(dec("0.01"), &RiskControls::default()), AlertLevel::None);
        assert_eq!((p.opened_at, p.updated_at), (None, None));
    }

    #[test]
    fn hand_computed_round_trip() {
        let mut p = position();
        assert_eq!(p.apply(&fill(Side::Buy, 100, "10.00", "1.00", 1)), Ok(Decimal::ZERO));
        assert_eq!(p.apply(&fill(Side::Buy, 50, "10.30", "0.50", 2)), Ok(Decimal::ZERO));
        assert_eq!(p.quantity, 150);
        assert_eq!(p.cost_basis, dec("1515.00"));
        assert_eq!(p.average_entry_price(), Some(dec("10.1000")));
        assert_eq!(p.opened_at, Some(at(1)));

        // 630 proceeds − 1515 × 60 / 150 = 606.0000000000 cost removed.
        assert_eq!(p.apply(&fill(Side::Sell, 60, "10.50", "0.60", 3)), Ok(dec("24.00")));
        assert_eq!((p.quantity, p.cost_basis, p.realized_pnl), (90, dec("909"), dec("24")));
        assert_eq!(p.average_entry_price(), Some(dec("10.1000")));

        // Closing: 891 proceeds − the whole remaining 909 of cost.
        assert_eq!(p.apply(&fill(Side::Sell, 90, "9.90", "0.90", 4)), Ok(dec("-18.00")));
        assert!(p.is_flat());
        assert_eq!(p.cost_basis, Decimal::ZERO);
        assert_eq!(p.realized_pnl, dec("6.00"));
        assert_eq!(p.realized_pnl, (dec("630") + dec("891")) - (dec("1000") + dec("515")));
        assert_eq!(p.fees, dec("3.00"));
        assert_eq!(p.opened_at, Some(at(1)));
        assert_eq!(p.updated_at, Some(at(4)));
        assert_eq!(p.average_entry_price(), None);
    }

    #[test]
    fn repeating_average_rounds_partials_at_ten_places_and_closes_exactly() {
        let mut p = position();
        p.apply(&buy(1, "10")).unwrap();
        p.apply(&buy(2, "10.01")).unwrap();
        assert_eq!(p.cost_basis, dec("30.02"));
        // 30.02 / 3 = 10.00666…
        assert_eq!(p.average_entry_price(), Some(dec("10.0067")));

        // Removed 10.0066666667 (10.00666666666… rounded at 10 dp).
        let first = p.apply(&sell(1, "10.02")).unwrap();
        assert_eq!(first, dec("0.0133333333"));
        assert_eq!(first.scale(), 10);
        assert_eq!(p.cost_basis, dec("20.0133333333"));

        // 20.0133333333 / 2 = 10.00666666665: a midpoint, rounded away from zero to 10.0066666667.
        let second = p.apply(&sell(1, "10.05")).unwrap();
        assert_eq!(second, dec("0.0433333333"));
        assert_eq!(p.cost_basis, dec("10.0066666666"));

        // The close takes the whole rest, absorbing the rounding of both partials.
        let last = p.apply(&sell(1, "10.00")).unwrap();
        assert_eq!(last, dec("-0.0066666666"));
        assert!(p.is_flat());
        assert_eq!(p.cost_basis, Decimal::ZERO);
        assert_eq!(first + second + last, dec("0.05"));
        assert_eq!(p.realized_pnl, (dec("10.02") + dec("10.05") + dec("10.00")) - dec("30.02"));
    }

    #[test]
    fn refused_fills_leave_the_position_unchanged() {
        let mut p = position();
        p.apply(&fill(Side::Buy, 10, "25.50", "0.10", 1)).unwrap();
        p.apply(&fill(Side::Sell, 3, "26", "0.10", 2)).unwrap();
        let before = p.clone();

        let refused = [
            (fill(Side::Sell, 8, "26", "0.10", 9), PositionError::Oversell { requested: 8, held: 7 }),
            (fill(Side::Sell, 0, "26", "0.10", 9), PositionError::ZeroQuantity),
            (fill(Side::Buy, 0, "26", "0.10", 9), PositionError::ZeroQuantity),
            (fill(Side::Buy, 1, "0", "0.10", 9), PositionError::NonPositivePrice),
            (fill(Side::Sell, 1, "0", "0.10", 9), PositionError::NonPositivePrice),
            (fill(Side::Buy, 1, "-1.25", "0.10", 9), PositionError::NonPositivePrice),
            (fill(Side::Sell, 1, "-0.01", "0.10", 9), PositionError::NonPositivePrice),
        ];
        for (f, expected) in refused {
            assert_eq!(p.apply(&f), Err(expected), "{f:?}");
            assert_eq!(p, before, "{f:?} changed the position");
        }

        let mut flat = position();
        assert_eq!(flat.apply(&sell(1, "10")), Err(PositionError::Oversell { requested: 1, held: 0 }));
        assert_eq!(flat, position());
    }

    #[test]
    fn error_messages() {
        assert_eq!(
            PositionError::Oversell { requested: 8, held: 7 }.to_string(),
            "sell of 8 shares exceeds the open position of 7"
        );
        assert_eq!(PositionError::ZeroQuantity.to_string(), "fill quantity must be positive");
        assert_eq!(PositionError::NonPositivePrice.to_string(), "fill price must be positive");
    }

    #[test]
    fn unrealized_pnl_and_pct() {
        let mut p = position();
        p.apply(&buy(100, "10.00")).unwrap();
        p.apply(&buy(50, "10.30")).unwrap();
        assert_eq!(p.unrealized_pnl(dec("10.50")), dec("60"));
        assert_eq!(p.unrealized_pnl(dec("9.898")), dec("-30.3"));
        assert_eq!(p.unrealized_pct(dec("9.898")), Some(-2.0));
        let small = p.unrealized_pct(dec("10.101")).expect("open"); // 0.15 / 1515
        assert!((small - 0.15 / 15.15).abs() < 1e-15, "{small}");
        assert_eq!(p.unrealized_pct(dec("10.10")), Some(0.0));
    }

    #[test]
    fn alert_levels_at_the_thresholds() {
        let defaults = RiskControls::default();
        assert_eq!((defaults.alert_warning_loss_pct, defaults.alert_critical_loss_pct), (2.0, 5.0));
        let mut p = position();
        p.apply(&buy(100, "10.00")).unwrap(); // cost 1000
        let cases = [
            ("12.00", AlertLevel::None),    // gain
            ("10.00", AlertLevel::None),    // break-even
            ("9.81", AlertLevel::None),     // −1.9 %
            ("9.80", AlertLevel::Warning),  // −2 % exactly
            ("9.70", AlertLevel::Warning),  // −3 %
            ("9.51", AlertLevel::Warning),  // −4.9 %
            ("9.50", AlertLevel::Critical), // −5 % exactly
            ("8.00", AlertLevel::Critical), // −20 %
            ("0.01", AlertLevel::Critical),
        ];
        for (mark, expected) in cases {
            assert_eq!(p.alert_level(dec(mark), &defaults), expected, "mark {mark}");
        }
    }

    #[test]
    fn alert_thresholds_that_are_not_whole_percent_are_exact() {
        let mut p = position();
        p.apply(&buy(100, "10.00")).unwrap();
        p.apply(&buy(50, "10.30")).unwrap(); // cost 1515: 2 % = 30.30, 0.1 % = 1.515, 4.4 % = 66.66
        let l = limits(0.1, 4.4);
        assert_eq!(p.alert_level(dec("10.09"), &l), AlertLevel::None); // loss 1.5 = 0.099 %
        assert_eq!(p.alert_level(dec("10.0899"), &l), AlertLevel::Warning); // loss 1.515 = 0.1 %
        assert_eq!(p.alert_level(dec("9.6556"), &l), AlertLevel::Critical); // loss 66.66 = 4.4 %
        assert_eq!(p.alert_level(dec("9.65561"), &l), AlertLevel::Warning); // loss 66.6585
        assert_eq!(p.alert_level(dec("9.898"), &limits(2.0, 4.4)), AlertLevel::Warning); // loss 30.30 = 2 %
                                                                                         // loss 30.285 = 1.999 %
        assert_eq!(p.alert_level(dec("9.8981"), &limits(2.0, 4.4)), AlertLevel::None);
    }

    #[test]
    fn a_new_trade_after_flat_resets_realized_fees_and_opened_at() {
        let mut p = position();
        p.apply(&fill(Side::Buy, 10, "10", "1.00", 1)).unwrap();
        p.apply(&fill(Side::Sell, 10, "11", "1.00", 2)).unwrap();
        assert!(p.is_flat());
        // The finished trade's totals stay visible while flat.
        assert_eq!((p.realized_pnl, p.fees), (dec("10"), dec("2.00")));
        assert_eq!((p.opened_at, p.updated_at), (Some(at(1)), Some(at(2))));

        p.apply(&fill(Side::Buy, 5, "20", "0.50", 3)).unwrap();
        assert_eq!(p.quantity, 5);
        assert_eq!(p.cost_basis, dec("100"));
        assert_eq!((p.realized_pnl, p.fees), (Decimal::ZERO, dec("0.50")));
        assert_eq!((p.opened_at, p.updated_at), (Some(at(3)), Some(at(3))));

        // Adding to an open position does not reset anything.
        p.apply(&fill(Side::Sell, 2, "21", "0.25", 4)).unwrap();
        p.apply(&fill(Side::Buy, 1, "19", "0.25", 5)).unwrap();
        assert_eq!((p.realized_pnl, p.fees), (dec("2"), dec("1.00")));
        assert_eq!((p.opened_at, p.updated_at), (Some(at(3)), Some(at(5))));
    }

    #[test]
    fn serializes_for_the_contract() {
        for (level, text) in [
            (AlertLevel::None, "\"NONE\""),
            (AlertLevel::Warning, "\"WARNING\""),
            (AlertLevel::Critical, "\"CRITICAL\""),
        ] {
            assert_eq!(serde_json::to_string(&level).unwrap(), text);
        }
        assert!(AlertLevel::None < AlertLevel::Warning && AlertLevel::Warning < AlertLevel::Critical);

        let mut p = position();
        p.apply(&fill(Side::Buy, 100, "10.00", "1.00", 1)).unwrap();
        let json = serde_json::to_value(&p).unwrap();
        assert_eq!(json["symbol"], "ABCD");
        assert_eq!(json["quantity"], 100);
        assert_eq!(json["cost_basis"], 1000.0);
        assert_eq!(json["opened_at"], crate::time::format_ts(&at(1)));
        assert_eq!(serde_json::to_value(position()).unwrap()["opened_at"], serde_json::Value::Null);
    }

    /// One step of a generated trading sequence.
    #[derive(Clone, Debug)]
    enum Op {
        Buy {
            quantity: u64,
            cents: i64,
            fee_cents: i64,
        },
        /// Sells `quantity` when that much is held; otherwise checks the refusal, then sells what is held.
        Sell {
            quantity: u64,
            cents: i64,
            fee_cents: i64,
        },
        Close {
            cents: i64,
            fee_cents: i64,
        },
    }

    fn op() -> impl Strategy<Value = Op> {
        let quantity = 1u64..=5000;
        let cents = 1i64..=100_000;
        let fee_cents = 0i64..=2_000;
        prop_oneof![
            3 => (quantity.clone(), cents.clone(), fee_cents.clone())
                .prop_map(|(quantity, cents, fee_cents)| Op::Buy { quantity, cents, fee_cents }),
            3 => (quantity, cents.clone(), fee_cents.clone())
                .prop_map(|(quantity, cents, fee_cents)| Op::Sell { quantity, cents, fee_cents }),
            1 => (cents, fee_cents).prop_map(|(cents, fee_cents)| Op::Close { cents, fee_cents }),
        ]
    }

    fn cents(c: i64) -> Decimal {
        Decimal::new(c, 2)
    }

    /// What one round trip has done so far, tracked independently of `Position`.
    #[derive(Default)]
    struct Trip {
        proceeds: Decimal,
        costs: Decimal,
        fees: Decimal,
        realized: Decimal,
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        #[test]
        fn accounting_invariants(ops in prop::collection::vec(op(), 1..80), mark_cents in 1i64..=100_000) {
            let mark = cents(mark_cents);
            let tolerance = Decimal::new(1, 8);
            let mut p = position();
            let (mut bought, mut sold) = (0u64, 0u64);
            let mut trip = Trip::default();

            for (i, op) in ops.into_iter().enumerate() {
                let n = i as i64;
                let fill = match op {
                    Op::Buy { quantity, cents: c, fee_cents } => PositionFill {
                        side: Side::Buy, quantity, price: cents(c), fee: cents(fee_cents), at: at(n),
                    },
                    Op::Sell { quantity, cents: c, fee_cents } => {
                        let f = PositionFill { side: Side::Sell, quantity, price: cents(c), fee: cents(fee_cents), at: at(n) };
                        if quantity <= p.quantity {
                            f
                        } else {
                            let before = p.clone();
                            prop_assert_eq!(p.apply(&f), Err(PositionError::Oversell { requested: quantity, held: p.quantity }));
                            prop_assert_eq!(&p, &before);
                            if p.is_flat() {
                                continue;
                            }
                            PositionFill { quantity: p.quantity, ..f }
                        }
                    }
                    Op::Close { cents: c, fee_cents } => {
                        if p.is_flat() {
                            continue;
                        }
                        PositionFill { side: Side::Sell, quantity: p.quantity, price: cents(c), fee: cents(fee_cents), at: at(n) }
                    }
                };

                let was_flat = p.is_flat();
                let realized = p.apply(&fill).expect("valid fill");
                let value = fill.price * Decimal::from(fill.quantity);
                match fill.side {
                    Side::Buy => {
                        if was_flat {
                            trip = Trip::default();
                            prop_assert_eq!(p.opened_at, Some(fill.at));
                        }
                        prop_assert_eq!(realized, Decimal::ZERO);
                        bought += fill.quantity;
                        trip.costs += value;
                    }
                    Side::Sell => {
                        sold += fill.quantity;
                        trip.proceeds += value;
                    }
                }
                trip.fees += fill.fee;
                trip.realized += realized;

                prop_assert_eq!(p.quantity, bought - sold);
                prop_assert!(p.cost_basis >= Decimal::ZERO, "negative cost basis {}", p.cost_basis);
                prop_assert!(p.cost_basis.scale() <= 10, "cost basis {} beyond 10 dp", p.cost_basis);
                prop_assert_eq!(p.realized_pnl, trip.realized);
                prop_assert_eq!(p.fees, trip.fees);
                prop_assert_eq!(p.updated_at, Some(fill.at));

                if p.is_flat() {
                    prop_assert_eq!(p.cost_basis, Decimal::ZERO);
                    prop_assert_eq!(p.realized_pnl, trip.proceeds - trip.costs);
                    prop_assert_eq!(p.unrealized_pnl(mark), Decimal::ZERO);
                } else {
                    prop_assert!(p.cost_basis > Decimal::ZERO);
                    let expected = trip.proceeds + mark * Decimal::from(p.quantity) - trip.costs;
                    let actual = p.realized_pnl + p.unrealized_pnl(mark);
                    prop_assert!((actual - expected).abs() <= tolerance, "{} vs {}", actual, expected);
                    let average = p.average_entry_price().expect("open");
                    prop_assert!(average >= cents(1) && average <= cents(100_000), "average {}", average);
                }
            }
        }

        #[test]
        fn alert_level_never_eases_as_the_mark_falls(
            quantity in 1u64..=5000,
            cost_cents in 1i64..=100_000,
            a in 1i64..=100_000,
            b in 1i64..=100_000,
            warning_bp in 1u32..=5_000,
            extra_bp in 1u32..=5_000,
        ) {
            let mut p = position();
            p.apply(&PositionFill { side: Side::Buy, quantity, price: cents(cost_cents), fee: Decimal::ZERO, at: at(0) })
                .expect("valid buy");
            let l = limits(f64::from(warning_bp) / 100.0, f64::from(warning_bp + extra_bp) / 100.0);
            let (high, low) = (cents(a.max(b)), cents(a.min(b)));
            prop_assert!(p.alert_level(high, &l) <= p.alert_level(low, &l));
            if high >= cents(cost_cents) {
                prop_assert_eq!(p.alert_level(high, &l), AlertLevel::None);
            }
        }
    }
}
