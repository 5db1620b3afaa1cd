//! The Alpaca adapter (issue 23): Alpaca's Trading API v2 behind [`crate::ExecutionBroker`].
//! [`wire`] is Alpaca's JSON; [`rest`] is its Trading REST API (orders, account, positions).
//! Work in progress: see the note for what is built.

pub mod rest;
pub mod wire;
