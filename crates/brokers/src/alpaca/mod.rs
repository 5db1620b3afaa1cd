//! The Alpaca adapter: Alpaca's Trading API v2 behind [`crate::ExecutionBroker`].
//! [`wire`] is Alpaca's JSON; [`rest`] its Trading REST API (orders with the exactly-once
//! submit, account, positions); [`stream`] the trade-updates WebSocket, mapped to broker reports
//! and gap-filled from REST after every reconnect; [`execution`] assembles them into an
//! [`crate::ExecutionBroker`]. The market side: [`data_wire`] is the Market Data API's JSON,
//! [`data`] its REST client (reference data, snapshots, bars), [`data_stream`] the stock
//! stream, [`halts`] the halted symbols it hears of, and [`market`] assembles them into a [`crate::MarketData`] with a radar scan of the
//! whole universe. [`budget`] paces each REST client below Alpaca's request limit. The service
//! builds them when `[brokers]` chooses `alpaca`.

pub mod budget;
pub mod data;
pub mod data_stream;
pub mod data_wire;
pub mod execution;
pub mod halts;
pub mod market;
pub mod rest;
pub mod stream;
pub mod wire;
