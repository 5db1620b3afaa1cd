//! The simulated US-equity market (DESIGN.md, "The simulated market"): a universe of
//! listed-looking symbols and, for every (seed, symbol, date), one deterministic trading day of
//! minute bars with volatility clustering, a U-shaped volume profile, and about thirty
//! news-driven runners per day, most of them low-float names the default momentum radar shows
//! from the open to the afternoon (at least ten by 10:00 New York on the default seed). The live feed and history run the same per-minute generator,
//! so they agree bit for bit, trading halts included (LULD volatility pauses and news halts,
//! [`halt`]). Pure: no I/O, no wall clock, no unseeded randomness.

pub mod day;
pub mod halt;
pub mod history;
pub mod profile;
pub mod quote;
pub mod rng;
pub mod universe;

pub use day::{daily_bar, daily_volume, day_kind, day_plan, halt_windows, DayGenerator, DayKind, DayPlan, Minute};
pub use halt::HaltWindow;
pub use universe::{SymbolProfile, Universe};
