//! The Alpaca adapter (issue 23): Alpaca's Trading API v2 behind [`crate::ExecutionBroker`].
//! [`wire`] is Alpaca's JSON. Work in progress: see the note for what is built.

pub mod wire;
