//! The `data_broker` component: market data behind the [`MarketData`] trait, and the live feed
//! of the simulated market that drives minute bars and the radar.

pub mod live;

use async_trait::async_trait;
use chrono::Duration;
use std::sync::Arc;
use tradeops_core::market::{Bar, Timeframe};
use tradeops_core::{Symbol, Timestamp};
use tradeops_sim::day::daily_bar;
use tradeops_sim::profile::DayClock;
use tradeops_sim::{DayGenerator, Universe};

/// Reference data of one tradable symbol.
#[derive(Clone, Debug, PartialEq)]
pub struct Instrument {
    pub symbol: Symbol,
    pub sector: &'static str,
    pub float: u64,
    pub average_volume: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum MarketDataError {
    #[error("unknown symbol {0}")]
    UnknownSymbol(Symbol),
    #[error("market data unavailable: {0}")]
    Unavailable(String),
}

/// A source of market data: reference data and history. (Live data is the feed's job.)
#[async_trait]
pub trait MarketData: Send + Sync {
    /// Adapter name as configured (`simulated`).
    fn name(&self) -> &'static str;
    fn instrument(&self, symbol: &Symbol) -> Option<Instrument>;
    /// Bars whose start is in `[start, end)`, oldest first.
    async fn bars(
        &self,
        symbol: &Symbol,
        timeframe: Timeframe,
        start: Timestamp,
        end: Timestamp,
    ) -> Result<Vec<Bar>, MarketDataError>;
    /// A round trip to the adapter for the health probe: the latest minute bar of one of its
    /// symbols as of `now` (the request a strategy's data goes through). The caller times it.
    async fn ping(&self, now: Timestamp) -> Result<(), MarketDataError>;
    /// What a backtest of `symbol` knows besides its bars (previous close, relative volume,
    /// float, sector) as this market gives them live; `None` when the market cannot say, and the
    /// backtest measures them from the bars.
    fn history(
        &self,
        _symbol: &Symbol,
        _calendar: tradeops_core::calendar::MarketCalendar,
    ) -> Option<Box<dyn tradeops_core::backtest::History + Send>> {
        None
    }
}

/// The simulated market: every day a pure function of (seed, symbol, date).
pub struct SimulatedMarket {
    pub universe: Arc<Universe>,
}

impl SimulatedMarket {
    pub fn new(seed: u64, symbols: usize) -> SimulatedMarket {
        SimulatedMarket { universe: Arc::new(Universe::generate(seed, symbols)) }
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
            sector: p.sector,
            float: p.float,
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

    fn history(
        &self,
        symbol: &Symbol,
        calendar: tradeops_core::calendar::MarketCalendar,
    ) -> Option<Box<dyn tradeops_core::backtest::History + Send>> {
        let profile = self.universe.get(symbol)?.clone();
        Some(Box::new(tradeops_sim::history::SimHistory::new(self.universe.clone(), profile, calendar)))
    }
}

/// The length of one bar of `timeframe`.
pub fn bar_span(timeframe: Timeframe) -> Duration {
    match timeframe {
        Timeframe::Minute => Duration::minutes(1),
        Timeframe::Day => Duration::days(1),
    }
}

/// Keeps the bars that have closed by `now` (their end at or before it): the simulated market
/// can generate any day, but what it serves — charts, downloads, backtests — never reaches past
/// the market's present.
pub fn closed_bars(bars: Vec<Bar>, timeframe: Timeframe, now: Timestamp) -> Vec<Bar> {
    let span = bar_span(timeframe);
    bars.into_iter().filter(|b| b.start + span <= now).collect()
}

/// Refuses an order-generating action while the session calendar says the market is closed:
/// `MARKET_CLOSED` with `detail.next_open`.
pub fn ensure_market_open(
    calendar: tradeops_core::calendar::MarketCalendar,
    now: Timestamp,
) -> crate::error::ApiResult<()> {
    if calendar.is_open(now) {
        return Ok(());
    }
    let next_open = tradeops_core::time::format_ts(&calendar.next_open(now));
    Err(crate::error::ApiError::new(
        crate::error::ErrorCode::MarketClosed,
        format!("The market is closed ({:?} calendar); it next opens at {next_open}", calendar.kind()),
    )
    .with_detail(serde_json::json!({"next_open": next_open, "phase": calendar.phase(now)})))
}

#[cfg(test)]
mod session_tests {
    use super::*;
    use tradeops_core::calendar::MarketCalendar;
    use tradeops_core::settings::MarketCalendarKind;
    use tradeops_core::time::parse_ts;

    #[test]
    fn closed_market_refuses_with_next_open() {
        let nyse = MarketCalendar::new(MarketCalendarKind::Nyse);
        // Saturday 2026-11-21: next open is Monday 04:00 New York (pre-market).
        let err = ensure_market_open(nyse, parse_ts("2026-11-21T15:00:00Z").unwrap()).unwrap_err();
        assert_eq!(err.code, crate::error::ErrorCode::MarketClosed);
        assert_eq!(err.detail["next_open"], "2026-11-23T09:00:00.000Z");
        assert!(ensure_market_open(nyse, parse_ts("2026-11-20T15:00:00Z").unwrap()).is_ok());
        let always = MarketCalendar::new(MarketCalendarKind::AlwaysOpen);
        assert!(ensure_market_open(always, parse_ts("2026-11-21T15:00:00Z").unwrap()).is_ok());
    }
}
