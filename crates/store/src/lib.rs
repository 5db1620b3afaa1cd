//! Storage for tradeops: repositories over SQLite (the embedded default) or PostgreSQL through
//! one SQL layer, migrations embedded and applied at start, and the cache store (in-process or
//! Redis). This crate and the server are the only places that do I/O.

pub mod audit;
pub mod backtests;
mod bars_cache;
pub mod cache;
pub mod cluster;
pub mod data;
mod db;
#[cfg(test)]
mod fence_tests;
pub mod instance;
pub mod jobs;
pub mod market;
pub mod notifications;
pub mod reference;
pub mod settings;
pub mod sweeps;
#[cfg(test)]
mod test_databases;
pub mod tokens;
pub mod trading;

pub use audit::{AuditEntry, AuditFilter, AuditRecord, AuditRepository};
pub use backtests::{BacktestRecord, BacktestRepository};
pub use cache::{Cache, CacheError, MemoryCache, RedisCache};
pub use cluster::{HaltRequest, LeaderLock, Member};
pub use data::{DataRepository, JobRecord};
pub use db::{
    Backend, Database, EngineLease, ProbeReport, StoreError, PROBE_CONFIRM_AFTER, PROBE_EVERY,
    PROBE_FAILURES_BEFORE_DOWN,
};
pub use instance::InstanceLock;
pub use jobs::{Cancel, JobKind, JobRepository, JobStatus, Lease, Recovery, JOB_CHANNEL};
pub use market::{BlockRecord, MarketRepository, RadarRowRecord, ViolationRecord, WatchRecord};
pub use notifications::{DeliveryCounts, DeliveryRecord, NewDelivery};
pub use reference::{ReferenceRecord, ReferenceRepository};
pub use settings::{SettingsRepository, SettingsVersion};
pub use sweeps::{SweepPart, SweepRecord, SweepRepository};
pub use tokens::{ChangeListener, Revocation, TokenChangeListener, TokenRecord, TokenRepository};
pub use trading::{EngineStateRecord, OrderFilter, TradingRepository};
