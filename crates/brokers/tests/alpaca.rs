//! The Alpaca adapter against stand-ins for Alpaca (axum apps on 127.0.0.1 speaking its wire
//! format and injecting faults): one module per part of the adapter, each in `tests/alpaca/`.

#[path = "alpaca/rest.rs"]
mod rest;
