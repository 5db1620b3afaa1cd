//! Downloaded (or imported) trading days as a market: [`StoredDays`] (module `days`) holds the
//! stored minute and daily bars of a set of symbols, the live feed ([`LiveMarket::over_stored`])
//! prints them as it prints the simulated market's generated days, and [`StoredMarket`] answers
//! what the engine asks a data broker (instruments, snapshots, the last closed bar, bars) from
//! them. What a whole-desk replay of downloaded days trades on. Pure: the caller
//! reads the bars from the store.
//!
//! [`LiveMarket::over_stored`]: crate::simulated::live::LiveMarket::over_stored

use crate::market::{ClosedBar, Instrument, MarketData, MarketDataError, Snapshot};
use crate::simulated::live::LiveMarket;
use async_trait::async_trait;
use std::sync::Arc;
use tradeops_core::market::{Bar, Price, SymbolHalt, Timeframe};
use tradeops_core::{Symbol, Timestamp};

pub(crate) mod days;
pub use days::{StoredDay, StoredDays};

/// The data broker of a replay of stored days: instruments are the stored symbols (float and
/// sector unknown but as imported reference data says, laid over by
/// [`crate::reference::WithReference`]; typical volume the feed's average for the day),
/// snapshots and closed bars are the feed's, bars the stored ones.
pub struct StoredMarket {
    days: Arc<StoredDays>,
    live: Arc<LiveMarket>,
}

impl StoredMarket {
    pub fn new(days: Arc<StoredDays>, live: Arc<LiveMarket>) -> StoredMarket {
        StoredMarket { days, live }
    }
}

#[async_trait]
impl MarketData for StoredMarket {
    fn name(&self) -> &'static str {
        "stored"
    }

    fn instrument(&self, symbol: &Symbol) -> Option<Instrument> {
        self.days.index(symbol)?;
        let average_volume = self.live.average_volume(symbol).unwrap_or(0);
        Some(Instrument { symbol: symbol.clone(), sector: None, float: None, average_volume })
    }

    async fn bars(
        &self,
        symbol: &Symbol,
        timeframe: Timeframe,
        start: Timestamp,
        end: Timestamp,
    ) -> Result<Vec<Bar>, MarketDataError> {
        if self.days.index(symbol).is_none() {
            return Err(MarketDataError::UnknownSymbol(symbol.clone()));
        }
        Ok(self.days.bars(symbol, timeframe, start, end))
    }

    async fn ping(&self, _now: Timestamp) -> Result<(), MarketDataError> {
        Ok(())
    }

    async fn snapshot(&self, symbol: &Symbol) -> Option<Snapshot> {
        self.live.snapshot(symbol)
    }

    async fn last_closed_bar(&self, symbol: &Symbol) -> Option<ClosedBar> {
        self.live.last_closed_bar(symbol)
    }

    fn last_price(&self, symbol: &Symbol) -> Option<Price> {
        self.live.last_price(symbol)
    }

    /// The feed's halt of `symbol`: the halts stored with its days (downloads from the simulated
    /// market store them; Alpaca has no history of halts, and a gap in minute bars does not say
    /// whether it was a halt or a quiet minute).
    fn halt(&self, symbol: &Symbol) -> Option<SymbolHalt> {
        self.live.halt(symbol)
    }
}

#[cfg(test)]
mod tests;
