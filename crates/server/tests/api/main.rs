//! Black-box API tests: each starts the real application on port 0 with a fresh database.
//! Backends: SQLite by default; PostgreSQL when `TRADEOPS_TEST_DATABASE_URL` is set and Redis
//! when `TRADEOPS_TEST_REDIS_URL` is set (`.ci/run` sets both).

mod helpers;

mod alpaca;
mod alpaca_data;
mod alpaca_desk;
mod audit;
mod auth;
mod backtests;
mod brokers;
mod browser;
mod cli;
mod cluster;
mod console;
mod crash;
mod data;
mod deploy;
mod envelope;
mod events;
mod flood;
mod halt_resume;
mod halts;
mod health;
mod hostile;
mod jobs;
mod notifications;
mod notify_cluster;
mod openapi;
mod outage;
mod parity;
mod partitions;
mod preview;
mod protection;
mod proxy;
mod radar;
mod reference;
mod sessions;
mod settings;
mod strategies;
mod trades;
mod trading;
mod validation;
mod venues;
