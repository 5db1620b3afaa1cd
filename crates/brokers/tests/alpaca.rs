//! Integration tests of the Alpaca adapter against stand-ins of Alpaca started in the test,
//! one module per part (in `tests/alpaca/`).

#[path = "alpaca/stream.rs"]
mod stream;
