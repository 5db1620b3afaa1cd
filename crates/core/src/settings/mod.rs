//! Runtime settings (seed §4.8, CONTRACT §4): five groups, their defaults, partial updates with
//! a precise path for every refused field, validation that lists every problem, and the guards
//! a change needs. Pure: persistence and the watch channel live in the server.

use crate::mode::TradingMode;
use crate::symbol::Symbol;
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

mod validate;
pub use validate::{expected_names, FieldError};

/// Effective settings. Groups use `#[serde(default)]` so settings persisted by an older version
/// gain new fields with their defaults when read back.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields, default)]
pub struct Settings {
    pub runtime: RuntimeSettings,
    pub momentum_radar: MomentumRadarSettings,
    pub strategy_allocator: StrategyAllocatorSettings,
    pub risk_controls: RiskControls,
    pub analytics: AnalyticsSettings,
}

/// Which market data adapter feeds the engine.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum MarketDataBrokerKind {
    /// The deterministic simulated US-equity market.
    #[default]
    Simulated,
    /// Alpaca's Market Data API v2 (stocks): its assets, calendar, clock, snapshots and bars.
    Alpaca,
}

/// Which execution adapter receives orders.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum ExecutionBrokerKind {
    /// The in-process paper matching engine.
    #[default]
    Paper,
    /// Alpaca's Trading API v2: its paper endpoint in `PAPER`, its live endpoint in `LIVE`.
    Alpaca,
}

impl ExecutionBrokerKind {
    /// Whether real orders can be routed through this adapter (required for `LIVE`).
    pub fn is_live_capable(self) -> bool {
        match self {
            ExecutionBrokerKind::Paper => false,
            ExecutionBrokerKind::Alpaca => true,
        }
    }
}

/// Which session calendar decides when order-generating actions are allowed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum MarketCalendarKind {
    /// Trade whenever the service runs (the simulated market's default).
    #[default]
    AlwaysOpen,
    /// NYSE regular hours, early closes and holidays, America/New_York.
    Nyse,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields, default)]
pub struct RuntimeSettings {
    pub trading_mode: TradingMode,
    pub market_data_broker: MarketDataBrokerKind,
    pub execution_broker: ExecutionBrokerKind,
    pub market_calendar: MarketCalendarKind,
    /// Minutes before the close at which strategies flatten their positions; 0 disables.
    #[cfg_attr(feature = "openapi", schema(minimum = 0, maximum = 390))]
    pub flatten_minutes_before_close: u32,
}

impl Default for RuntimeSettings {
    fn default() -> Self {
        Self {
            trading_mode: TradingMode::Paper,
            market_data_broker: MarketDataBrokerKind::Simulated,
            execution_broker: ExecutionBrokerKind::Paper,
            market_calendar: MarketCalendarKind::AlwaysOpen,
            flatten_minutes_before_close: 5,
        }
    }
}

/// The largest `momentum_radar.max_float` accepted: a ceiling set there is no ceiling, and a
/// symbol whose float is unknown passes it. A bound of the setting (CONTRACT §4), so defined
/// with it; the radar's filter reads it as `crate::radar::NO_FLOAT_CEILING`.
pub const NO_FLOAT_CEILING: u64 = 100_000_000_000;

/// Filters of the momentum radar (research/domain.md §2).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields, default)]
pub struct MomentumRadarSettings {
    pub enabled: bool,
    /// Scan on exact minute boundaries (CONTRACT §8).
    pub scan_on_minute_boundary: bool,
    #[serde(with = "rust_decimal::serde::float")]
    #[cfg_attr(feature = "openapi", schema(value_type = f64, exclusive_minimum = 0, maximum = 1000000, multiple_of = 0.0001))]
    pub min_price: Decimal,
    #[serde(with = "rust_decimal::serde::float")]
    #[cfg_attr(feature = "openapi", schema(value_type = f64, exclusive_minimum = 0, maximum = 1000000, multiple_of = 0.0001))]
    pub max_price: Decimal,
    /// Minimum gain versus the previous close, in percent.
    #[cfg_attr(feature = "openapi", schema(minimum = -100, maximum = 10000))]
    pub min_percentage_gain: f64,
    /// Minimum time-of-day adjusted relative volume.
    #[cfg_attr(feature = "openapi", schema(minimum = 0, maximum = 1000))]
    pub min_relative_volume: f64,
    /// Maximum float, in shares. A symbol whose float is unknown (not imported, and the market
    /// source has none) does not pass it, unless it is at its maximum, 100000000000: no ceiling.
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 100000000000.0))]
    pub max_float: u64,
    /// Minimum shares traded today.
    #[cfg_attr(feature = "openapi", schema(minimum = 0, maximum = 100000000000.0))]
    pub min_volume: u64,
    /// Symbols the radar may show; empty means the data broker's whole universe.
    #[cfg_attr(feature = "openapi", schema(max_items = 20000))]
    pub universe: Vec<Symbol>,
}

impl Default for MomentumRadarSettings {
    fn default() -> Self {
        Self {
            enabled: true,
            scan_on_minute_boundary: true,
            min_price: Decimal::new(100, 2),
            max_price: Decimal::new(2000, 2),
            min_percentage_gain: 10.0,
            min_relative_volume: 5.0,
            max_float: 20_000_000,
            min_volume: 100_000,
            universe: Vec::new(),
        }
    }
}

/// Strategies that may trade the live watchlist.
pub const LIVE_STRATEGIES: &[&str] = &["momentum_breakout"];

/// Which strategy trades watched symbols, auto-watching, and position sizing.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields, default)]
pub struct StrategyAllocatorSettings {
    /// Strategy assigned to newly watched symbols.
    pub default_strategy_id: String,
    /// Watch the top radar symbols automatically (`source: RADAR`).
    pub auto_watch: bool,
    /// How many of the top radar symbols auto-watching considers on each scan.
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 200))]
    pub auto_watch_top_n: u32,
    /// Dollars risked per trade: shares = risk_per_trade / (entry - stop).
    #[serde(with = "rust_decimal::serde::float")]
    #[cfg_attr(feature = "openapi", schema(value_type = f64, exclusive_minimum = 0, maximum = 1000000000, multiple_of = 0.01))]
    pub risk_per_trade: Decimal,
    /// Cap on one position's entry value, in dollars.
    #[serde(with = "rust_decimal::serde::float")]
    #[cfg_attr(feature = "openapi", schema(value_type = f64, exclusive_minimum = 0, maximum = 1000000000, multiple_of = 0.01))]
    pub max_position_value: Decimal,
    /// Reward/risk multiple at which part of the position is sold.
    #[cfg_attr(feature = "openapi", schema(minimum = 0.5, maximum = 20))]
    pub reward_multiple: f64,
    /// Fraction of the position sold at the reward multiple (0..=1).
    #[cfg_attr(feature = "openapi", schema(minimum = 0, maximum = 1))]
    pub scale_out_fraction: f64,
    /// Strategies may enter in the pre-market and the after-hours (CONTRACT §12), with
    /// extended-hours marketable limits and their stop held by the engine until 09:30.
    pub trade_extended_hours: bool,
}

impl Default for StrategyAllocatorSettings {
    fn default() -> Self {
        Self {
            default_strategy_id: "momentum_breakout".into(),
            auto_watch: false,
            auto_watch_top_n: 3,
            risk_per_trade: Decimal::new(50, 0),
            max_position_value: Decimal::new(10_000, 0),
            reward_multiple: 2.0,
            scale_out_fraction: 0.5,
            trade_extended_hours: false,
        }
    }
}

/// Pre-trade risk limits (CONTRACT §5, defaults §8).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields, default)]
pub struct RiskControls {
    /// Realised plus unrealised loss today, in dollars, at which trading turns `REDUCING`.
    #[serde(with = "rust_decimal::serde::float")]
    #[cfg_attr(feature = "openapi", schema(value_type = f64, exclusive_minimum = 0, maximum = 1000000000, multiple_of = 0.01))]
    pub max_daily_loss: Decimal,
    /// Maximum shares in one position.
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 10000000))]
    pub max_position_size: u64,
    /// Maximum orders that open or add to a position per trading day.
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 100000))]
    pub max_trades_per_day: u32,
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 500))]
    pub active_watchlist_limit: u32,
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 500))]
    pub open_position_limit: u32,
    /// Same symbol+side+quantity inside this window is `DUPLICATE_ORDER_BLOCKED`.
    #[cfg_attr(feature = "openapi", schema(minimum = 0, maximum = 86400))]
    pub duplicate_order_window_seconds: u32,
    /// Maximum value of one order, in dollars.
    #[serde(with = "rust_decimal::serde::float")]
    #[cfg_attr(feature = "openapi", schema(value_type = f64, exclusive_minimum = 0, maximum = 1000000000, multiple_of = 0.01))]
    pub max_order_value: Decimal,
    /// Maximum distance of a limit price from the last trade, in percent.
    #[cfg_attr(feature = "openapi", schema(minimum = 0.01, maximum = 100))]
    pub price_collar_pct: f64,
    /// How much above its reference price a market buy is valued for buying power, in percent:
    /// live, the fill price is not known when the order leaves (the reference is the last
    /// trade), so brokers hold a margin; a backtest knows its fill price and a run can set 0.
    #[cfg_attr(feature = "openapi", schema(minimum = 0, maximum = 50))]
    pub market_buy_buffer_pct: f64,
    /// Unrealised loss, in percent of cost, at which a position's alert level is `WARNING`.
    #[cfg_attr(feature = "openapi", schema(minimum = 0.01, maximum = 100))]
    pub alert_warning_loss_pct: f64,
    /// Unrealised loss, in percent of cost, at which a position's alert level is `CRITICAL`.
    #[cfg_attr(feature = "openapi", schema(minimum = 0.01, maximum = 100))]
    pub alert_critical_loss_pct: f64,
    /// The order ticket's default stop distance below the entry's reference price, in percent:
    /// the stop leg a bracket order is prefilled with (CONTRACT §11).
    #[cfg_attr(feature = "openapi", schema(minimum = 0.1, maximum = 50))]
    pub default_stop_distance_pct: f64,
    /// A strategy position whose stop is not resting at the broker within a few seconds of its
    /// entry's fill (or that the broker refused) is sold at market, with a
    /// `BROKER_STOP_MISSING` violation (CONTRACT §11). On by default.
    pub require_broker_stop: bool,
    /// How far under the last trade an exit outside the regular session is limited, in
    /// percent: such an exit is an extended-hours marketable limit (CONTRACT §12), re-priced
    /// while it does not fill.
    #[cfg_attr(feature = "openapi", schema(minimum = 0, maximum = 20))]
    pub extended_hours_exit_slippage_pct: f64,
    /// The order ticket's extended-hours limit: this many percent above the ask for a buy
    /// (under the bid for a sell), when the session is not regular.
    #[cfg_attr(feature = "openapi", schema(minimum = 0, maximum = 20))]
    pub extended_hours_entry_offset_pct: f64,
}

impl Default for RiskControls {
    fn default() -> Self {
        Self {
            max_daily_loss: Decimal::new(500, 0),
            max_position_size: 2000,
            max_trades_per_day: 20,
            active_watchlist_limit: 10,
            open_position_limit: 3,
            duplicate_order_window_seconds: 10,
            max_order_value: Decimal::new(25_000, 0),
            price_collar_pct: 5.0,
            market_buy_buffer_pct: 3.0,
            alert_warning_loss_pct: 2.0,
            alert_critical_loss_pct: 5.0,
            default_stop_distance_pct: 3.0,
            require_broker_stop: true,
            extended_hours_exit_slippage_pct: 1.0,
            extended_hours_entry_offset_pct: 0.5,
        }
    }
}

/// Thresholds of trade analytics and recommendations.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields, default)]
pub struct AnalyticsSettings {
    /// |net P&L| below this many dollars labels a trade `BREAKEVEN`.
    #[serde(with = "rust_decimal::serde::float")]
    #[cfg_attr(feature = "openapi", schema(value_type = f64, minimum = 0, maximum = 1000000, multiple_of = 0.01))]
    pub breakeven_threshold: Decimal,
    /// Groups with fewer completed trades produce no recommendation.
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 1000000))]
    pub min_sample_size: u32,
    /// Confidence level of the intervals behind `confidence_score`.
    #[cfg_attr(feature = "openapi", schema(minimum = 0.5, maximum = 0.999))]
    pub confidence_level: f64,
}

impl Default for AnalyticsSettings {
    fn default() -> Self {
        Self { breakeven_threshold: Decimal::new(100, 2), min_sample_size: 20, confidence_level: 0.95 }
    }
}

/// Why the value at `path` (dotted) of a patched document is not of its field's type, in words:
/// the field's current value says what kind it is; an enumeration lists its values, asked of
/// serde with a value it cannot accept.
fn type_reason(current: &Value, merged: &Value, path: &str) -> String {
    let pointer = format!("/{}", path.replace('.', "/"));
    match current.pointer(&pointer) {
        Some(Value::Bool(_)) => "must be true or false".into(),
        Some(Value::Number(n)) if n.is_f64() => "must be a number".into(),
        Some(Value::Number(_)) => "must be a whole number".into(),
        Some(Value::Array(_)) => "must be a list of symbols".into(),
        Some(Value::String(_)) => {
            let mut probe = merged.clone();
            if let Some(slot) = probe.pointer_mut(&pointer) {
                *slot = Value::String(String::new());
            }
            match serde_json::from_value::<Settings>(probe) {
                Err(e) if e.to_string().starts_with("unknown variant") => {
                    format!("must be one of {}", expected_names(&e.to_string()).join(", "))
                }
                _ => "must be text".into(),
            }
        }
        _ => "has the wrong type".into(),
    }
}

/// A guard a settings change needs before it may apply (CONTRACT §4 `PUT /api/settings`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SettingsGuard {
    /// `runtime.trading_mode` becomes `LIVE`.
    SwitchToLive,
    /// A broker adapter changes.
    BrokerChange(&'static str),
    /// A risk limit becomes looser while trading `LIVE`.
    RiskLimitRaisedWhileLive(Vec<&'static str>),
}

/// What a valid patch would do.
#[derive(Clone, Debug, PartialEq)]
pub struct SettingsPatchOutcome {
    pub settings: Settings,
    /// Dotted paths whose value changed, in document order.
    pub updated: Vec<String>,
}

impl Settings {
    /// The settings as a JSON document (for persistence and the API).
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).expect("settings always serialise")
    }

    /// Reads persisted settings; fields added since they were written take their defaults.
    pub fn from_json(value: &Value) -> Result<Settings, Vec<FieldError>> {
        let settings: Settings = serde_path_to_error::deserialize(value)
            .map_err(|e| vec![FieldError::new(e.path().to_string(), e.inner().to_string())])?;
        settings.validate()?;
        Ok(settings)
    }

    /// Applies a partial update (`{group: {field: value}}`). Every unknown group or field, wrong
    /// type and out-of-range value is reported with its dotted path; nothing applies unless all
    /// of it is valid.
    pub fn apply_patch(&self, patch: &Value) -> Result<SettingsPatchOutcome, Vec<FieldError>> {
        let Some(groups) = patch.as_object() else {
            return Err(vec![FieldError::new("", "must be a JSON object of settings groups")]);
        };
        let current = self.to_json();
        let mut merged = current.clone();
        let mut errors = Vec::new();
        for (group, fields) in groups {
            let Some(target) = merged.get_mut(group).and_then(Value::as_object_mut) else {
                let groups: Vec<&str> =
                    current.as_object().into_iter().flat_map(|g| g.keys()).map(String::as_str).collect();
                errors.push(FieldError::new(
                    group.as_str(),
                    format!("is not a settings group; the groups are {}", groups.join(", ")),
                ));
                continue;
            };
            let Some(fields) = fields.as_object() else {
                errors.push(FieldError::new(group.as_str(), "must be an object of fields to change"));
                continue;
            };
            for (field, value) in fields {
                match target.get_mut(field) {
                    Some(slot) => *slot = value.clone(),
                    None => {
                        let known: Vec<&str> = target.keys().map(String::as_str).collect();
                        errors.push(FieldError::new(
                            format!("{group}.{field}"),
                            format!("is not a field of {group}; its fields are {}", known.join(", ")),
                        ))
                    }
                }
            }
        }
        if !errors.is_empty() {
            return Err(errors);
        }
        let settings: Settings = serde_path_to_error::deserialize(&merged).map_err(|e| {
            let path = e.path().to_string();
            vec![FieldError::new(path.clone(), type_reason(&current, &merged, &path))]
        })?;
        settings.validate()?;
        let updated = changed_paths(&current, &settings.to_json());
        Ok(SettingsPatchOutcome { settings, updated })
    }

    /// Guards that moving from `self` to `next` needs.
    pub fn guards_for(&self, next: &Settings) -> Vec<SettingsGuard> {
        let mut guards = Vec::new();
        if next.runtime.trading_mode == TradingMode::Live && self.runtime.trading_mode != TradingMode::Live {
            guards.push(SettingsGuard::SwitchToLive);
        }
        if next.runtime.market_data_broker != self.runtime.market_data_broker {
            guards.push(SettingsGuard::BrokerChange("runtime.market_data_broker"));
        }
        if next.runtime.execution_broker != self.runtime.execution_broker {
            guards.push(SettingsGuard::BrokerChange("runtime.execution_broker"));
        }
        if self.runtime.trading_mode == TradingMode::Live || next.runtime.trading_mode == TradingMode::Live {
            let raised = self.risk_controls.loosened_by(&next.risk_controls);
            if !raised.is_empty() {
                guards.push(SettingsGuard::RiskLimitRaisedWhileLive(raised));
            }
        }
        guards
    }
}

impl RiskControls {
    /// What a market buy is valued at per dollar of its reference price: 1 +
    /// `market_buy_buffer_pct` / 100, exact to the 1/10,000 of a percent.
    pub fn market_buy_factor(&self) -> Decimal {
        // In integers (asked for every buy the gate checks): 10^-4 percent is 10^-6 of a dollar.
        let millionths = (self.market_buy_buffer_pct * 10_000.0).round();
        let millionths = if millionths.is_finite() { millionths.clamp(0.0, 1e12) as i64 } else { 0 };
        Decimal::new(1_000_000 + millionths, 6)
    }

    /// Dotted paths of the limits that `next` makes looser than `self`.
    pub fn loosened_by(&self, next: &RiskControls) -> Vec<&'static str> {
        let mut raised = Vec::new();
        let mut check = |looser: bool, path: &'static str| {
            if looser {
                raised.push(path);
            }
        };
        check(next.max_daily_loss > self.max_daily_loss, "risk_controls.max_daily_loss");
        check(next.max_position_size > self.max_position_size, "risk_controls.max_position_size");
        check(next.max_trades_per_day > self.max_trades_per_day, "risk_controls.max_trades_per_day");
        check(next.active_watchlist_limit > self.active_watchlist_limit, "risk_controls.active_watchlist_limit");
        check(next.open_position_limit > self.open_position_limit, "risk_controls.open_position_limit");
        check(next.max_order_value > self.max_order_value, "risk_controls.max_order_value");
        check(next.price_collar_pct > self.price_collar_pct, "risk_controls.price_collar_pct");
        check(next.market_buy_buffer_pct < self.market_buy_buffer_pct, "risk_controls.market_buy_buffer_pct");
        check(
            next.duplicate_order_window_seconds < self.duplicate_order_window_seconds,
            "risk_controls.duplicate_order_window_seconds",
        );
        raised
    }
}

/// Leaf paths (`group.field`) whose values differ between two settings documents.
fn changed_paths(before: &Value, after: &Value) -> Vec<String> {
    let empty = Map::new();
    let mut paths = Vec::new();
    for (group, fields) in after.as_object().unwrap_or(&empty) {
        let old = before.get(group).and_then(Value::as_object).unwrap_or(&empty);
        for (field, value) in fields.as_object().unwrap_or(&empty) {
            if old.get(field) != Some(value) {
                paths.push(format!("{group}.{field}"));
            }
        }
    }
    paths
}

#[cfg(test)]
mod tests;
