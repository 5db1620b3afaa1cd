//! The Alpaca adapter (issue 23): Alpaca's Trading API v2 behind [`crate::ExecutionBroker`].
//! [`wire`] is Alpaca's JSON; [`rest`] its Trading REST API (orders with the exactly-once
//! submit, account, positions); [`stream`] the trade-updates WebSocket, mapped to broker reports
//! and gap-filled from REST after every reconnect; [`execution`] assembles them into an
//! [`crate::ExecutionBroker`]. Not yet selectable in the service's configuration (`alpaca` is
//! refused at start); see the note.

pub mod execution;
pub mod rest;
pub mod stream;
pub mod wire;
