//! Pure trading domain for tradeops: identifiers, time, trading mode, roles and the runtime
//! settings model with its validation. Nothing here performs I/O or reads the wall clock; the
//! compiler keeps it that way because this crate depends on no runtime, database or HTTP crate.

pub mod analytics;
pub mod backtest;
pub mod bars;
pub mod broker;
pub mod calendar;
pub mod clock;
pub mod csv_bars;
pub mod engine;
pub mod market;
pub mod metrics;
pub mod mode;
pub mod orders;
pub mod positions;
pub mod radar;
pub mod reconcile;
pub mod reference;
pub mod risk;
pub mod role;
pub mod settings;
pub mod strategy;
pub mod symbol;
pub mod time;
pub mod trades;

pub use clock::{Clock, ManualClock};
pub use mode::TradingMode;
pub use role::Role;
pub use settings::{FieldError, Settings, SettingsPatchOutcome};
pub use symbol::Symbol;
pub use time::Timestamp;
