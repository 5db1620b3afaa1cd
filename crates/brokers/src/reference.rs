//! Imported reference data (float and sector) laid over a market source: [`ReferenceData`], the
//! book the service keeps current from the `instrument_reference` table, and [`WithReference`],
//! any [`MarketData`] whose instruments and backtest history carry the imported values where
//! there are some (the rule of [`tradeops_core::reference`]: imported first, field by field).
//! The simulated live feed's radar reads the same book ([`crate::simulated::live::LiveMarket`]).

use crate::market::{ClosedBar, Instrument, MarketData, MarketDataError, Snapshot};
use async_trait::async_trait;
use chrono::NaiveDate;
use rust_decimal::Decimal;
use std::sync::{Arc, RwLock};
use tradeops_core::backtest::History;
use tradeops_core::calendar::{MarketCalendar, NyDates};
use tradeops_core::market::{Bar, Timeframe};
use tradeops_core::reference::ReferenceBook;
use tradeops_core::{Symbol, Timestamp};

/// The current imported reference data, shared by every reader and replaced whole.
#[derive(Debug, Default)]
pub struct ReferenceData {
    book: RwLock<Arc<ReferenceBook>>,
}

impl ReferenceData {
    pub fn new(book: ReferenceBook) -> ReferenceData {
        ReferenceData { book: RwLock::new(Arc::new(book)) }
    }

    /// The book as it is now (cheap: readers hold it while they scan).
    pub fn current(&self) -> Arc<ReferenceBook> {
        self.book.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    pub fn replace(&self, book: ReferenceBook) {
        *self.book.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(book);
    }

    /// `instrument` with the imported values laid over its own.
    pub fn apply(&self, mut instrument: Instrument) -> Instrument {
        let book = self.current();
        instrument.float = book.float(&instrument.symbol, instrument.float);
        instrument.sector = book.sector(&instrument.symbol, instrument.sector.as_deref()).map(str::to_string);
        instrument
    }

    /// `history` of `symbol` whose float and sector are the imported ones where imported.
    pub fn history(&self, symbol: &Symbol, history: Box<dyn History + Send>) -> Box<dyn History + Send> {
        let book = self.current();
        let float = book.float(symbol, history.float());
        let sector = book.sector(symbol, history.sector().as_deref()).map(str::to_string);
        with_float_and_sector(history, float, sector)
    }
}

/// `history` with the given float and sector instead of its own.
pub(crate) fn with_float_and_sector(
    history: Box<dyn History + Send>,
    float: Option<u64>,
    sector: Option<String>,
) -> Box<dyn History + Send> {
    Box::new(ReferencedHistory { inner: history, float, sector })
}

/// A history whose float and sector are given; the rest is the inner history's.
struct ReferencedHistory {
    inner: Box<dyn History + Send>,
    float: Option<u64>,
    sector: Option<String>,
}

impl History for ReferencedHistory {
    fn prev_close(&mut self, date: NaiveDate) -> Option<Decimal> {
        self.inner.prev_close(date)
    }

    fn expected_volume(&mut self, date: NaiveDate) -> &[f64] {
        self.inner.expected_volume(date)
    }

    fn relative_volume(&mut self, date: NaiveDate, minute_of_day: u32, volume: u64) -> Option<f64> {
        self.inner.relative_volume(date, minute_of_day, volume)
    }

    fn float(&self) -> Option<u64> {
        self.float
    }

    fn sector(&self) -> Option<String> {
        self.sector.clone()
    }

    fn ny_dates(&self) -> Option<NyDates> {
        self.inner.ny_dates()
    }
}

/// A market source whose instruments and histories carry the imported reference data.
pub struct WithReference {
    inner: Arc<dyn MarketData>,
    reference: Arc<ReferenceData>,
}

impl WithReference {
    pub fn new(inner: Arc<dyn MarketData>, reference: Arc<ReferenceData>) -> WithReference {
        WithReference { inner, reference }
    }
}

#[async_trait]
impl MarketData for WithReference {
    fn name(&self) -> &'static str {
        self.inner.name()
    }

    fn instrument(&self, symbol: &Symbol) -> Option<Instrument> {
        self.inner.instrument(symbol).map(|i| self.reference.apply(i))
    }

    async fn bars(
        &self,
        symbol: &Symbol,
        timeframe: Timeframe,
        start: Timestamp,
        end: Timestamp,
    ) -> Result<Vec<Bar>, MarketDataError> {
        self.inner.bars(symbol, timeframe, start, end).await
    }

    async fn ping(&self, now: Timestamp) -> Result<(), MarketDataError> {
        self.inner.ping(now).await
    }

    async fn snapshot(&self, symbol: &Symbol) -> Option<Snapshot> {
        self.inner.snapshot(symbol).await
    }

    async fn last_closed_bar(&self, symbol: &Symbol) -> Option<ClosedBar> {
        self.inner.last_closed_bar(symbol).await
    }

    fn history(&self, symbol: &Symbol, calendar: MarketCalendar) -> Option<Box<dyn History + Send>> {
        self.inner.history(symbol, calendar).map(|h| self.reference.history(symbol, h))
    }

    fn last_price(&self, symbol: &Symbol) -> Option<tradeops_core::market::Price> {
        self.inner.last_price(symbol)
    }

    fn connection(&self) -> Option<crate::execution::VenueConnection> {
        self.inner.connection()
    }

    fn halt(&self, symbol: &Symbol) -> Option<tradeops_core::market::SymbolHalt> {
        self.inner.halt(symbol)
    }

    fn show(&self, symbol: &Symbol) {
        self.inner.show(symbol)
    }

    fn halt_windows(
        &self,
        symbol: &Symbol,
        start: Timestamp,
        end: Timestamp,
    ) -> Vec<tradeops_core::market::HaltWindow> {
        self.inner.halt_windows(symbol, start, end)
    }

    fn calendar_check(&self) -> Option<crate::market::CalendarCheck> {
        self.inner.calendar_check()
    }
}

// The test lays the book over a SimulatedMarket, whose history is built with this module's
// with_float_and_sector: in a file of its own, so that the test, not the reference layer,
// imports the simulated market.
#[cfg(test)]
mod tests;
