//! The simulated market's [`History`] for backtests: the previous close and time-of-day
//! relative volume exactly as the live feed gives them to the engine (the previous trading
//! day's close; volume so far over the 10-day average volume × the expected cumulative fraction
//! of a day's volume by that minute), so a backtest of a simulated day sees what live trading
//! saw. [`SimHistory::halts`] gives the trading halts of a day, for a backtest to meet them as
//! live trading does.

use crate::day::{close_of, daily_volume, halt_windows};
use crate::halt::HaltWindow;
use crate::profile::{expected_cum_fraction, DayClock};
use crate::universe::{SymbolProfile, Universe};
use chrono::NaiveDate;
use rust_decimal::Decimal;
use std::collections::BTreeMap;
use std::sync::Arc;
use tradeops_core::backtest::History;
use tradeops_core::calendar::MarketCalendar;
use tradeops_core::market::Price;
use tradeops_core::radar::AVERAGE_VOLUME_DAYS;

pub struct SimHistory {
    universe: Arc<Universe>,
    profile: SymbolProfile,
    calendar: MarketCalendar,
    /// The date last asked for, and the volume expected by each minute of it (the average
    /// volume × its clock's fractions; the last entry for every minute past the day's end).
    day: Option<(NaiveDate, Vec<f64>)>,
    /// The expected cumulative fraction of the day's volume by each minute, per distinct day
    /// clock (a run meets two or three: standard time, daylight time, the changeover days),
    /// computed once rather than once per bar.
    fractions: Vec<(DayClock, Vec<f64>)>,
    /// The previous close last asked for, by date (a run asks again for each trade of the day).
    prev_close: Option<(NaiveDate, Decimal)>,
    /// Each trading day's volume, once computed (every date's average reads the ten before it).
    volumes: BTreeMap<NaiveDate, u64>,
}

impl SimHistory {
    pub fn new(universe: Arc<Universe>, profile: SymbolProfile, calendar: MarketCalendar) -> SimHistory {
        let (day, prev_close, volumes) = (None, None, BTreeMap::new());
        SimHistory { universe, profile, calendar, day, fractions: Vec::new(), prev_close, volumes }
    }

    /// The symbol's halts on `date`, in order: the volatility pauses and news halts its minute
    /// bars skip (no bar from a window's start to its end, where the reopening bar starts, gapped
    /// and carrying the halted minutes' volume). Pure and deterministic: the same windows the live
    /// feed's [`DayGenerator::halt`](crate::DayGenerator::halt) reports minute by minute. Walks
    /// the day (about as costly as generating its bars).
    pub fn halts(&self, date: NaiveDate) -> Vec<HaltWindow> {
        halt_windows(&self.universe, &self.profile, date)
    }

    fn day_volume(&mut self, date: NaiveDate) -> (DayClock, u64) {
        let previous: Vec<NaiveDate> =
            std::iter::successors(Some(date), |d| Some(self.calendar.previous_trading_day(*d)))
                .skip(1)
                .take(AVERAGE_VOLUME_DAYS)
                .collect();
        let (universe, profile) = (&self.universe, &self.profile);
        let mut total = 0;
        for d in &previous {
            total += *self.volumes.entry(*d).or_insert_with(|| daily_volume(universe, profile, *d));
        }
        (DayClock::for_date(date), total / previous.len().max(1) as u64)
    }
}

impl History for SimHistory {
    fn prev_close(&mut self, date: NaiveDate) -> Option<Decimal> {
        if let Some((d, close)) = self.prev_close {
            if d == date {
                return Some(close);
            }
        }
        let previous = self.calendar.previous_trading_day(date);
        let close = Price::from_f64_tick(close_of(&self.universe, &self.profile, previous)).to_decimal();
        self.prev_close = Some((date, close));
        Some(close)
    }

    /// The average volume × the day clock's expected fraction by each minute (the last entry for
    /// every minute past the day's end).
    fn expected_volume(&mut self, date: NaiveDate) -> &[f64] {
        if self.day.as_ref().is_none_or(|(d, _)| *d != date) {
            let (clock, average) = self.day_volume(date);
            let same = |c: &DayClock| (c.minutes, c.pre_open, c.open, c.close, c.after_close);
            let index = match self.fractions.iter().position(|(c, _)| same(c) == same(&clock)) {
                Some(i) => i,
                None => {
                    let table = (0..=clock.minutes).map(|m| expected_cum_fraction(&clock, m)).collect();
                    self.fractions.push((clock, table));
                    self.fractions.len() - 1
                }
            };
            // Reuses the previous day's table (no allocation per day).
            let mut volumes = self.day.take().map(|(_, v)| v).unwrap_or_default();
            volumes.clear();
            volumes.extend(self.fractions[index].1.iter().map(|f| average as f64 * f));
            self.day = Some((date, volumes));
        }
        &self.day.as_ref().expect("set above").1
    }

    fn float(&self) -> Option<u64> {
        Some(self.profile.float)
    }

    fn sector(&self) -> Option<String> {
        Some(self.profile.sector.to_string())
    }

    /// The simulated market's history is generated, not made from bars: a run over its bars
    /// works out their dates itself.
    fn ny_dates(&self) -> Option<tradeops_core::calendar::NyDates> {
        None
    }
}
