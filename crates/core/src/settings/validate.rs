//! Semantic validation of settings: every problem is reported at once, each with its dotted
//! field path and the reason in words.

use super::{Settings, LIVE_STRATEGIES, NO_FLOAT_CEILING};
use rust_decimal::Decimal;
use serde::Serialize;
use std::collections::BTreeSet;

/// One refused field: `field` is a dotted path (`risk_controls.max_daily_loss`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct FieldError {
    pub field: String,
    pub reason: String,
}

impl FieldError {
    pub fn new(field: impl Into<String>, reason: impl Into<String>) -> Self {
        Self { field: field.into(), reason: reason.into() }
    }
}

/// The backquoted names serde lists after "expected" in a message (``unknown variant `x`,
/// expected one of `A`, `B` ``, ``unknown field `y`, expected `a` or `b` ``).
pub fn expected_names(message: &str) -> Vec<String> {
    let Some((_, list)) = message.split_once("expected") else { return Vec::new() };
    list.split('`').skip(1).step_by(2).map(str::to_string).collect()
}

#[derive(Default)]
struct Problems(Vec<FieldError>);

impl Problems {
    fn require(&mut self, ok: bool, field: &str, reason: impl Into<String>) {
        if !ok {
            self.0.push(FieldError::new(field, reason));
        }
    }

    fn range_f64(&mut self, value: f64, min: f64, max: f64, field: &str) {
        self.require(
            value.is_finite() && value >= min && value <= max,
            field,
            format!("must be between {min} and {max}"),
        );
    }

    fn range_u64(&mut self, value: u64, min: u64, max: u64, field: &str) {
        self.require(value >= min && value <= max, field, format!("must be between {min} and {max}"));
    }

    /// A positive dollar amount with at most cents.
    fn money(&mut self, value: Decimal, max: Decimal, field: &str, allow_zero: bool) {
        let low_ok = if allow_zero { value >= Decimal::ZERO } else { value > Decimal::ZERO };
        let sign = if allow_zero { "zero or more" } else { "greater than zero" };
        self.require(low_ok && value <= max, field, format!("must be {sign} and at most {max}"));
        self.require(value.normalize().scale() <= 2, field, "must not have fractions of a cent");
    }
}

impl Settings {
    /// Checks every range and relation between fields; returns all problems.
    pub fn validate(&self) -> Result<(), Vec<FieldError>> {
        let mut p = Problems::default();
        let billion = Decimal::new(1_000_000_000, 0);

        let r = &self.momentum_radar;
        p.require(r.min_price > Decimal::ZERO, "momentum_radar.min_price", "must be greater than zero");
        p.require(r.min_price.normalize().scale() <= 4, "momentum_radar.min_price", "at most 4 decimal places");
        p.require(r.max_price.normalize().scale() <= 4, "momentum_radar.max_price", "at most 4 decimal places");
        p.require(
            r.max_price > r.min_price && r.max_price <= Decimal::new(1_000_000, 0),
            "momentum_radar.max_price",
            "must be greater than min_price and at most 1000000",
        );
        p.range_f64(r.min_percentage_gain, -100.0, 10_000.0, "momentum_radar.min_percentage_gain");
        p.range_f64(r.min_relative_volume, 0.0, 1_000.0, "momentum_radar.min_relative_volume");
        p.range_u64(r.max_float, 1, NO_FLOAT_CEILING, "momentum_radar.max_float");
        p.range_u64(r.min_volume, 0, 100_000_000_000, "momentum_radar.min_volume");
        p.require(r.universe.len() <= 20_000, "momentum_radar.universe", "at most 20000 symbols");
        let distinct: BTreeSet<_> = r.universe.iter().collect();
        p.require(distinct.len() == r.universe.len(), "momentum_radar.universe", "symbols must not repeat");

        let a = &self.strategy_allocator;
        p.require(
            LIVE_STRATEGIES.contains(&a.default_strategy_id.as_str()),
            "strategy_allocator.default_strategy_id",
            format!("must be one of {}", LIVE_STRATEGIES.join(", ")),
        );
        p.range_u64(a.auto_watch_top_n.into(), 1, 200, "strategy_allocator.auto_watch_top_n");
        p.money(a.risk_per_trade, billion, "strategy_allocator.risk_per_trade", false);
        p.money(a.max_position_value, billion, "strategy_allocator.max_position_value", false);
        p.range_f64(a.reward_multiple, 0.5, 20.0, "strategy_allocator.reward_multiple");
        p.range_f64(a.scale_out_fraction, 0.0, 1.0, "strategy_allocator.scale_out_fraction");

        let k = &self.risk_controls;
        p.money(k.max_daily_loss, billion, "risk_controls.max_daily_loss", false);
        p.range_u64(k.max_position_size, 1, 10_000_000, "risk_controls.max_position_size");
        p.range_u64(k.max_trades_per_day.into(), 1, 100_000, "risk_controls.max_trades_per_day");
        p.range_u64(k.active_watchlist_limit.into(), 1, 500, "risk_controls.active_watchlist_limit");
        p.range_u64(k.open_position_limit.into(), 1, 500, "risk_controls.open_position_limit");
        p.range_u64(k.duplicate_order_window_seconds.into(), 0, 86_400, "risk_controls.duplicate_order_window_seconds");
        p.money(k.max_order_value, billion, "risk_controls.max_order_value", false);
        p.range_f64(k.price_collar_pct, 0.01, 100.0, "risk_controls.price_collar_pct");
        p.range_f64(k.market_buy_buffer_pct, 0.0, 50.0, "risk_controls.market_buy_buffer_pct");
        p.range_f64(k.default_stop_distance_pct, 0.1, 50.0, "risk_controls.default_stop_distance_pct");
        p.range_f64(k.extended_hours_exit_slippage_pct, 0.0, 20.0, "risk_controls.extended_hours_exit_slippage_pct");
        p.range_f64(k.extended_hours_entry_offset_pct, 0.0, 20.0, "risk_controls.extended_hours_entry_offset_pct");
        p.range_f64(k.alert_warning_loss_pct, 0.01, 100.0, "risk_controls.alert_warning_loss_pct");
        p.range_f64(k.alert_critical_loss_pct, 0.01, 100.0, "risk_controls.alert_critical_loss_pct");
        p.require(
            k.alert_critical_loss_pct > k.alert_warning_loss_pct,
            "risk_controls.alert_critical_loss_pct",
            "must be greater than alert_warning_loss_pct",
        );

        let n = &self.analytics;
        p.money(n.breakeven_threshold, Decimal::new(1_000_000, 0), "analytics.breakeven_threshold", true);
        p.range_u64(n.min_sample_size.into(), 1, 1_000_000, "analytics.min_sample_size");
        p.range_f64(n.confidence_level, 0.5, 0.999, "analytics.confidence_level");

        p.range_u64(self.runtime.flatten_minutes_before_close.into(), 0, 390, "runtime.flatten_minutes_before_close");

        if p.0.is_empty() {
            Ok(())
        } else {
            Err(p.0)
        }
    }
}
