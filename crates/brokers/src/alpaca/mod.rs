//! The Alpaca adapter (issue 23): Alpaca's Trading API v2 behind [`crate::ExecutionBroker`].
//! [`wire`] is Alpaca's JSON; [`stream`] the trade-updates WebSocket, mapped to broker reports
//! and gap-filled from REST after every reconnect. Work in progress: see the note for
//! what is built.

pub mod stream;
pub mod wire;
