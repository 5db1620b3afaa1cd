//! The market-data seam (the `data_broker` component): the [`MarketData`] trait every source
//! implements — reference data, history, and the live snapshot the engine runner marks positions
//! and matches orders with — its error type, and the bar arithmetic every source shares.

use async_trait::async_trait;
use chrono::{Duration, NaiveDate};
use tradeops_core::market::{Bar, HaltWindow, Price, Quote, SymbolHalt, Timeframe};
use tradeops_core::{Symbol, Timestamp};

/// A remote source's sessions (Alpaca's `GET /v2/calendar`) against core's NYSE calendar over
/// some days, and its clock against ours.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CalendarCheck {
    /// Service clock.
    pub checked_at: Timestamp,
    pub from: NaiveDate,
    pub to: NaiveDate,
    /// One line per date the two disagree on (empty: they agree).
    pub mismatches: Vec<String>,
    /// Alpaca's clock (`GET /v2/clock`) minus the service's, in milliseconds (the request's
    /// round trip included): the market clock is the wall clock, and this says how far it is
    /// from Alpaca's.
    pub clock_skew_ms: i64,
}

/// Reference data of one tradable symbol. A source that does not know a symbol's sector or
/// float says `None` (a real feed has neither); imported reference data lays its values over
/// these ([`crate::reference::WithReference`]).
#[derive(Clone, Debug, PartialEq)]
pub struct Instrument {
    pub symbol: Symbol,
    pub sector: Option<String>,
    /// Shares in the float.
    pub float: Option<u64>,
    pub average_volume: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum MarketDataError {
    #[error("unknown symbol {0}")]
    UnknownSymbol(Symbol),
    #[error("market data unavailable: {0}")]
    Unavailable(String),
}

/// What a source knows of one symbol now.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Snapshot {
    /// The previous regular session's close.
    pub prev_close: Price,
    /// The last trade.
    pub last: Price,
    /// The current quote.
    pub quote: Quote,
}

/// The last completed minute bar of a symbol, with its time-of-day relative volume as of that
/// bar (the volume of the bar in progress left out).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ClosedBar {
    pub bar: Bar,
    pub relative_volume: Option<f64>,
}

/// A source of market data: reference data, history, and live snapshots. Object-safe: the
/// service holds an `Arc<dyn MarketData>`.
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
    /// Previous close, last trade and quote of `symbol` now; `None` when the source has none
    /// (an unknown symbol, or no live data yet).
    /// An operator looks at `symbol` (its quote, its chart): a source that streams only some
    /// symbols streams this one too for a while, so its quote is live and its trading status
    /// known (CONTRACT §11: halts of every symbol the service follows, charted included).
    /// Nothing for a source that knows every symbol's state.
    fn show(&self, _symbol: &Symbol) {}
    async fn snapshot(&self, symbol: &Symbol) -> Option<Snapshot>;
    /// The last completed minute bar of `symbol` and its relative volume; `None` before one.
    async fn last_closed_bar(&self, symbol: &Symbol) -> Option<ClosedBar>;
    /// The last trade of `symbol` as the source holds it now, without a round trip (tables
    /// show it beside each row); `None` when it holds none.
    fn last_price(&self, _symbol: &Symbol) -> Option<Price> {
        None
    }

    /// Why `symbol` cannot trade now, as the source last heard (CONTRACT §11); `None` while it
    /// trades, or when the source has not heard of a halt (one that began while a remote feed
    /// was disconnected, until its next status message; a halt known before a disconnect is kept
    /// until a resumption arrives). Without a round trip: the engine asks it for every symbol it
    /// follows at every market step.
    fn halt(&self, _symbol: &Symbol) -> Option<SymbolHalt> {
        None
    }

    /// The halts of `symbol` that overlap `[start, end)`, where the source knows them: stored
    /// with downloaded minute bars, so a replay of those days meets the same halts. Empty for a
    /// source that cannot say (Alpaca has no history of halts; a day's bars do not tell a halt
    /// from a quiet minute).
    fn halt_windows(&self, _symbol: &Symbol, _start: Timestamp, _end: Timestamp) -> Vec<HaltWindow> {
        Vec::new()
    }

    /// A remote source's latest check of its calendar and clock against core's (health shows
    /// it); `None` for a source that keeps core's calendar (the simulated market).
    fn calendar_check(&self) -> Option<CalendarCheck> {
        None
    }

    /// A remote source's live connection (its stream), for health; `None` for an in-process
    /// source.
    fn connection(&self) -> Option<crate::execution::VenueConnection> {
        None
    }

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
