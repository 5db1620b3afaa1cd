//! The tradeops service: HTTP API (axum), authentication, audit, settings, health, metrics and
//! the CLI's commands. `main.rs` only parses arguments and calls into here, so tests build the
//! same application.

pub mod account_feed;
pub mod app;
pub mod audit_outbox;
pub mod auth;
pub mod backtests;
pub mod budget;
pub mod cli;
pub mod client_limit;
pub mod clock;
pub mod config;
pub mod console;
pub mod deadline;
pub mod domain;
pub mod downloads;
pub mod envelope;
pub mod error;
pub mod events;
pub mod extract;
pub mod fields;
pub mod guard;
pub mod health;
pub mod housekeeping;
pub mod http;
pub mod jobs;
pub mod metrics;
pub mod openapi;
pub mod order_pages;
pub mod radar;
pub mod refusals;
pub mod routes;
pub mod settings_service;
pub mod state;
pub mod telemetry;
pub mod trades;
pub mod trading;
pub mod watchlist;

pub use app::Application;
pub use config::Config;
