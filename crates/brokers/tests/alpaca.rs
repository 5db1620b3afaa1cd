//! The Alpaca adapter against stand-ins for Alpaca started in the test (an axum app speaking its
//! REST wire format, a WebSocket server speaking its trading stream), injecting faults: one
//! module per part of the adapter, each in `tests/alpaca/`.

#[path = "alpaca/data.rs"]
mod data;
#[path = "alpaca/execution.rs"]
mod execution;
#[path = "alpaca/halts.rs"]
mod halts;
#[path = "alpaca/protection.rs"]
mod protection;
#[path = "alpaca/rest.rs"]
mod rest;
#[path = "alpaca/stream.rs"]
mod stream;
