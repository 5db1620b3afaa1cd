//! The simulated market behind [`MarketData`]: reference data and history generated from
//! (seed, symbol, date) by `tradeops-sim`, and snapshots from its live feed ([`live`]), which the
//! service steps by the market clock. Its days meet trading halts (LULD volatility pauses, news
//! halts): history has no bars while one lasts, and the feed prints nothing and reports it.

pub mod live;

use crate::market::{ClosedBar, Instrument, MarketData, MarketDataError, Snapshot};
use async_trait::async_trait;
use chrono::Duration;
use live::LiveMarket;
use std::sync::Arc;
use tradeops_core::market::HaltWindow;
use tradeops_core::market::{Bar, SymbolHalt, Timeframe};
use tradeops_core::{Symbol, Timestamp};
use tradeops_sim::day::daily_bar;
use tradeops_sim::profile::DayClock;
use tradeops_sim::{DayGenerator, Universe};

/// The simulated market: every day a pure function of (seed, symbol, date). Its snapshots are
/// its live feed's, when it has one ([`SimulatedMarket::with_live`]).
pub struct SimulatedMarket {
    pub universe: Arc<Universe>,
    live: Option<Arc<LiveMarket>>,
    /// Whether it gives its universe's float and sector (see [`SimulatedMarket::without_reference_data`]).
    reference_data: bool,
}

impl SimulatedMarket {
    pub fn new(seed: u64, symbols: usize) -> SimulatedMarket {
        SimulatedMarket { universe: Arc::new(Universe::generate(seed, symbols)), live: None, reference_data: true }
    }

    /// The same market without float and sector (`None`), as a real feed: what operators see
    /// before they import reference data. Its live feed should be built the same way
    /// ([`LiveMarket::without_reference_data`]).
    pub fn without_reference_data(self) -> SimulatedMarket {
        SimulatedMarket { reference_data: false, ..self }
    }

    /// The same market, whose snapshots and last closed bars are read from `live` (a feed of
    /// this market's universe).
    pub fn with_live(self, live: Arc<LiveMarket>) -> SimulatedMarket {
        SimulatedMarket { live: Some(live), ..self }
    }

    /// The same bars synchronously (history generation is pure CPU work).
    pub fn bars_sync(
        &self,
        symbol: &Symbol,
        timeframe: Timeframe,
        start: Timestamp,
        end: Timestamp,
    ) -> Result<Vec<Bar>, MarketDataError> {
        let p = self.universe.get(symbol).ok_or_else(|| MarketDataError::UnknownSymbol(symbol.clone()))?;
        let calendar_date = |t: Timestamp| t.with_timezone(&chrono_tz::America::New_York).date_naive();
        let mut bars = Vec::new();
        let mut date = calendar_date(start);
        while DayClock::for_date(date).start < end {
            match timeframe {
                Timeframe::Minute => {
                    let mut generator = DayGenerator::for_symbol(&self.universe, p, date);
                    while let Some(bar) = generator.next_bar() {
                        if bar.start >= end {
                            break;
                        }
                        if bar.start >= start {
                            bars.push(bar);
                        }
                    }
                }
                Timeframe::Day => {
                    let bar = daily_bar(&self.universe, p, date);
                    if bar.start >= start && bar.start < end {
                        bars.push(bar);
                    }
                }
            }
            date += Duration::days(1);
        }
        Ok(bars)
    }
}

#[async_trait]
impl MarketData for SimulatedMarket {
    fn name(&self) -> &'static str {
        "simulated"
    }

    fn instrument(&self, symbol: &Symbol) -> Option<Instrument> {
        self.universe.get(symbol).map(|p| Instrument {
            symbol: p.symbol.clone(),
            sector: self.reference_data.then(|| p.sector.to_string()),
            float: self.reference_data.then_some(p.float),
            average_volume: p.avg_volume,
        })
    }

    async fn bars(
        &self,
        symbol: &Symbol,
        timeframe: Timeframe,
        start: Timestamp,
        end: Timestamp,
    ) -> Result<Vec<Bar>, MarketDataError> {
        self.bars_sync(symbol, timeframe, start, end)
    }

    async fn ping(&self, now: Timestamp) -> Result<(), MarketDataError> {
        let profile = self
            .universe
            .symbols
            .first()
            .ok_or_else(|| MarketDataError::Unavailable("the simulated universe has no symbol".into()))?;
        self.bars_sync(&profile.symbol, Timeframe::Minute, now - Duration::minutes(1), now).map(|_| ())
    }

    async fn snapshot(&self, symbol: &Symbol) -> Option<Snapshot> {
        self.live.as_ref()?.snapshot(symbol)
    }

    async fn last_closed_bar(&self, symbol: &Symbol) -> Option<ClosedBar> {
        self.live.as_ref()?.last_closed_bar(symbol)
    }

    fn last_price(&self, symbol: &Symbol) -> Option<tradeops_core::market::Price> {
        self.live.as_ref()?.last_price(symbol)
    }

    /// The live feed's halt of `symbol` (none without a feed): its simulated LULD pauses and
    /// news halts.
    fn halt(&self, symbol: &Symbol) -> Option<SymbolHalt> {
        self.live.as_ref()?.halt(symbol)
    }

    /// The simulated days' halts, as the walk generates them (the same as the live feed's).
    fn halt_windows(&self, symbol: &Symbol, start: Timestamp, end: Timestamp) -> Vec<HaltWindow> {
        let Some(p) = self.universe.get(symbol) else { return Vec::new() };
        let mut windows = Vec::new();
        let mut date = start.with_timezone(&chrono_tz::America::New_York).date_naive();
        while DayClock::for_date(date).start < end {
            let day = tradeops_sim::halt_windows(&self.universe, p, date);
            windows.extend(day.into_iter().filter(|w| w.end > start && w.start < end));
            date = date.succ_opt().expect("a next date");
        }
        windows
    }

    fn history(
        &self,
        symbol: &Symbol,
        calendar: tradeops_core::calendar::MarketCalendar,
    ) -> Option<Box<dyn tradeops_core::backtest::History + Send>> {
        let profile = self.universe.get(symbol)?.clone();
        let history = Box::new(tradeops_sim::history::SimHistory::new(self.universe.clone(), profile, calendar));
        if self.reference_data {
            Some(history)
        } else {
            Some(crate::reference::with_float_and_sector(history, None, None))
        }
    }
}
