//! The simulated market's [`History`] for backtests: the previous close and time-of-day
//! relative volume exactly as the live feed gives them to the engine (the previous trading
//! day's close; volume so far over the 10-day average volume × the expected cumulative fraction
//! of a day's volume by that minute), so a backtest of a simulated day sees what live trading
//! saw.

use crate::day::{close_of, daily_volume};
use crate::profile::{expected_cum_fraction, DayClock};
use crate::universe::{SymbolProfile, Universe};
use chrono::NaiveDate;
use rust_decimal::Decimal;
use std::sync::Arc;
use tradeops_core::backtest::History;
use tradeops_core::calendar::MarketCalendar;
use tradeops_core::market::Price;

/// Days in the average volume (as the radar's `average_volume`).
pub const AVERAGE_VOLUME_DAYS: usize = 10;

pub struct SimHistory {
    universe: Arc<Universe>,
    profile: SymbolProfile,
    calendar: MarketCalendar,
    /// The date, its clock and average volume last asked for.
    day: Option<(NaiveDate, DayClock, u64)>,
}

impl SimHistory {
    pub fn new(universe: Arc<Universe>, profile: SymbolProfile, calendar: MarketCalendar) -> SimHistory {
        SimHistory { universe, profile, calendar, day: None }
    }

    fn day(&mut self, date: NaiveDate) -> (DayClock, u64) {
        if let Some((d, clock, average)) = self.day {
            if d == date {
                return (clock, average);
            }
        }
        let previous: Vec<NaiveDate> =
            std::iter::successors(Some(date), |d| Some(self.calendar.previous_trading_day(*d)))
                .skip(1)
                .take(AVERAGE_VOLUME_DAYS)
                .collect();
        let average = previous.iter().map(|d| daily_volume(&self.universe, &self.profile, *d)).sum::<u64>()
            / previous.len().max(1) as u64;
        let clock = DayClock::for_date(date);
        self.day = Some((date, clock, average));
        (clock, average)
    }
}

impl History for SimHistory {
    fn prev_close(&mut self, date: NaiveDate) -> Option<Decimal> {
        let previous = self.calendar.previous_trading_day(date);
        Some(Price::from_f64_tick(close_of(&self.universe, &self.profile, previous)).to_decimal())
    }

    fn relative_volume(&mut self, date: NaiveDate, minute_of_day: u32, volume: u64) -> Option<f64> {
        let (clock, average) = self.day(date);
        let expected = average as f64 * expected_cum_fraction(&clock, minute_of_day.min(clock.minutes));
        (expected >= 1.0).then(|| volume as f64 / expected)
    }

    fn float(&self) -> Option<u64> {
        Some(self.profile.float)
    }

    fn sector(&self) -> Option<String> {
        Some(self.profile.sector.to_string())
    }
}
