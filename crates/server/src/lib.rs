//! The tradeops service, in layers (docs/ARCHITECTURE.md):
//! - [`http`]: the HTTP edge — routes, extractors, authentication, the error envelope, OpenAPI
//!   and the console's files; the only module that knows axum and status codes.
//! - [`domain`]: the services the routes and the CLI share — trading, watchlist and radar,
//!   settings, tokens, trade analytics — with typed commands, results and errors.
//! - [`engine`]: the engine runner, the single writer of trading state, and its handle;
//!   [`engine_view`]: the picture of its state it publishes.
//! - [`jobs`]: durable downloads and backtests on one generic job module.
//! - [`events`], [`health`], [`metrics`], [`audit_outbox`], [`housekeeping`], [`account_feed`]:
//!   what operators are told and what keeps the service tidy.
//! - [`app`] builds all of it from the [`config`]; [`worker`] builds a process that runs jobs
//!   only; [`cli`] runs the commands. `main.rs` only
//!   parses arguments and calls into here, so tests build the same application.

pub mod account_feed;
pub mod app;
pub mod audit_outbox;
pub mod bars_feed;
pub mod budget;
pub mod cli;
pub mod clock;
pub mod cluster;
pub mod config;
pub mod domain;
pub mod engine;
pub mod engine_view;
pub mod events;
pub mod feed;
pub mod health;
pub mod housekeeping;
pub mod http;
pub mod jobs;
pub mod market_session;
pub mod metrics;
pub mod notify;
pub mod refusals;
pub mod serve;
pub mod telemetry;
pub mod worker;

pub use app::Application;
pub use config::Config;
