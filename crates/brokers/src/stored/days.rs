//! The stored days themselves: [`StoredDays`], the minute and daily bars of a set of symbols by
//! New York date, and [`StoredDay`], what the live feed starts a symbol's day from. The feed
//! ([`crate::simulated::live::LiveMarket::over_stored`]) prints them and [`super::StoredMarket`]
//! serves their bars over that feed, so they sit below both, knowing neither.

use chrono::NaiveDate;
use std::collections::{BTreeMap, HashMap};
use tradeops_core::market::{Bar, HaltWindow, Price, Timeframe};
use tradeops_core::{Symbol, Timestamp};

/// One symbol's stored days.
#[derive(Clone, Debug)]
struct StoredSymbol {
    symbol: Symbol,
    /// Minute bars of each New York date, oldest first.
    minutes: BTreeMap<NaiveDate, Vec<Bar>>,
    /// Each date's close and volume: its daily bar's, else its minute bars' (the last close,
    /// the summed volume).
    days: BTreeMap<NaiveDate, (Price, u64)>,
    /// The halts stored with its days, by the New York date of their start.
    halts: BTreeMap<NaiveDate, Vec<HaltWindow>>,
}

/// What a day of the feed starts from for one symbol.
#[derive(Clone, Debug)]
pub struct StoredDay {
    /// The day's minute bars, oldest first (gaps are minutes with no trade, or halted).
    pub bars: Vec<Bar>,
    /// The day's halts, as stored with its bars (where the source knew them), oldest first.
    pub halts: Vec<HaltWindow>,
    /// The close of the latest earlier stored day (the calendar's previous trading day when
    /// stored); the day's first open when no earlier day is stored.
    pub prev_close: Option<Price>,
    /// The average volume of the stored days among the `AVERAGE_VOLUME_DAYS` trading days
    /// before; 0 when none is stored.
    pub average_volume: u64,
}

/// The stored bars of the symbols a replay trades.
#[derive(Clone, Debug, Default)]
pub struct StoredDays {
    symbols: Vec<StoredSymbol>,
    by_symbol: HashMap<Symbol, usize>,
}

/// The New York date of a market time.
fn ny_date(at: Timestamp) -> NaiveDate {
    at.with_timezone(&chrono_tz::America::New_York).date_naive()
}

impl StoredDays {
    /// Adds `symbol`'s stored bars: its minute bars (any order) and its daily bars (each
    /// dated by the New York date of its start). Adding a symbol twice merges its bars.
    pub fn add(&mut self, symbol: Symbol, minute: Vec<Bar>, daily: Vec<Bar>) {
        let index = *self.by_symbol.entry(symbol.clone()).or_insert_with(|| {
            self.symbols.push(StoredSymbol {
                symbol: symbol.clone(),
                minutes: BTreeMap::new(),
                days: BTreeMap::new(),
                halts: BTreeMap::new(),
            });
            self.symbols.len() - 1
        });
        let s = &mut self.symbols[index];
        for bar in minute {
            s.minutes.entry(ny_date(bar.start)).or_default().push(bar);
        }
        for bars in s.minutes.values_mut() {
            bars.sort_by_key(|b| b.start);
            bars.dedup_by_key(|b| b.start);
        }
        for (date, bars) in &s.minutes {
            if let Some(last) = bars.last() {
                s.days.entry(*date).or_insert((last.close, bars.iter().map(|b| b.volume).sum()));
            }
        }
        // A daily bar says the day's close and volume better than partial minutes do.
        for bar in daily {
            s.days.insert(ny_date(bar.start), (bar.close, bar.volume));
        }
    }

    /// Adds halts of `symbol` (one already added): what its stored days meet.
    pub fn add_halts(&mut self, symbol: &Symbol, halts: Vec<HaltWindow>) {
        let Some(index) = self.index(symbol) else { return };
        let s = &mut self.symbols[index];
        for window in halts {
            let day = s.halts.entry(ny_date(window.start)).or_default();
            if !day.contains(&window) {
                day.push(window);
            }
        }
        for day in s.halts.values_mut() {
            day.sort_by_key(|w| w.start);
        }
    }

    pub fn len(&self) -> usize {
        self.symbols.len()
    }

    pub fn is_empty(&self) -> bool {
        self.symbols.is_empty()
    }

    /// The index of `symbol` (what [`StoredDays::day`] takes).
    pub fn index(&self, symbol: &Symbol) -> Option<usize> {
        self.by_symbol.get(symbol).copied()
    }

    pub fn symbol(&self, index: usize) -> &Symbol {
        &self.symbols[index].symbol
    }

    /// Symbol `index`'s `date` as the feed starts it: `previous_days` are the calendar's trading
    /// days before it, latest first (the radar's average volume spans them).
    pub fn day(&self, index: usize, date: NaiveDate, previous_days: &[NaiveDate]) -> StoredDay {
        let s = &self.symbols[index];
        let bars = s.minutes.get(&date).cloned().unwrap_or_default();
        let prev_close = previous_days
            .first()
            .and_then(|d| s.days.get(d))
            .or_else(|| s.days.range(..date).next_back().map(|(_, day)| day))
            .map(|(close, _)| *close)
            .or_else(|| bars.first().map(|b| b.open));
        let volumes: Vec<u64> = previous_days.iter().filter_map(|d| s.days.get(d).map(|(_, v)| *v)).collect();
        let average_volume = if volumes.is_empty() { 0 } else { volumes.iter().sum::<u64>() / volumes.len() as u64 };
        let halts = s.halts.get(&date).cloned().unwrap_or_default();
        StoredDay { bars, halts, prev_close, average_volume }
    }

    /// Stored bars of `symbol` whose start is in `[start, end)`: its minute bars, or its days
    /// (a daily bar per stored date, from its close and volume, open-high-low from its minutes
    /// where stored, else its close).
    pub fn bars(&self, symbol: &Symbol, timeframe: Timeframe, start: Timestamp, end: Timestamp) -> Vec<Bar> {
        let Some(s) = self.index(symbol).map(|i| &self.symbols[i]) else { return Vec::new() };
        match timeframe {
            Timeframe::Minute => s
                .minutes
                .range(ny_date(start)..=ny_date(end))
                .flat_map(|(_, bars)| bars.iter())
                .filter(|b| b.start >= start && b.start < end)
                .copied()
                .collect(),
            Timeframe::Day => s
                .days
                .range(ny_date(start)..=ny_date(end))
                .filter_map(|(date, (close, volume))| {
                    let minutes = s.minutes.get(date).filter(|b| !b.is_empty());
                    let at = match minutes {
                        Some(bars) => bars[0].start,
                        None => date
                            .and_hms_opt(0, 0, 0)?
                            .and_local_timezone(chrono_tz::America::New_York)
                            .earliest()?
                            .with_timezone(&chrono::Utc),
                    };
                    let (open, high, low) = minutes.map_or((*close, *close, *close), |bars| {
                        let high = bars.iter().map(|b| b.high).max().unwrap_or(*close);
                        let low = bars.iter().map(|b| b.low).min().unwrap_or(*close);
                        (bars[0].open, high, low)
                    });
                    Some(Bar { start: at, open, high, low, close: *close, volume: *volume })
                })
                .filter(|b| b.start >= start && b.start < end)
                .collect(),
        }
    }
}
