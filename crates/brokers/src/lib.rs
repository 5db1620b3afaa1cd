//! The broker seam of tradeops: the traits the engine runner trades and marks through
//! — [`ExecutionBroker`] for orders, [`MarketData`] for reference data, history and live
//! snapshots — and their in-process implementations: the [`paper`] broker, the backtests' bar
//! broker ([`backtest`]) and the [`simulated`] market with its live feed. A real venue's adapters
//! (Alpaca's) implement the same traits in a module beside these. [`reference`] lays
//! imported float and sector over any source's.

pub mod alpaca;
pub mod backtest;
pub mod execution;
pub mod market;
pub mod paper;
pub mod reference;
pub mod simulated;
pub mod stored;

pub use execution::{
    BrokerError, ExecutionBroker, MarketUpdate, Rejection, VenueAccount, VenueConnection, VenuePosition,
};
pub use market::{ClosedBar, Instrument, MarketData, MarketDataError, Snapshot};
