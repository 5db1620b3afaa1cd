//! Shared application state: cheap to clone, every swappable component behind a trait.

use crate::budget::RateLimiter;
use crate::config::Config;
use crate::domain::radar::RadarService;
use crate::domain::settings::SettingsService;
use crate::domain::tokens::TokenRegistry;
use crate::domain::watchlist::WatchlistService;
use crate::health::HealthMonitor;
use crate::metrics::Metrics;
use std::ops::Deref;
use std::sync::Arc;
use tradeops_brokers::simulated::live::LiveMarket;
use tradeops_brokers::MarketData;
use tradeops_core::Clock;
use tradeops_store::{AuditRepository, Cache, Database};

#[derive(Clone)]
pub struct AppState(Arc<Inner>);

pub struct Inner {
    pub config: Config,
    pub clock: Arc<dyn Clock>,
    pub db: Database,
    pub cache: Arc<dyn Cache>,
    /// The audit log as actions write it: rows that find the database unavailable are held
    /// and written once it is back ([`crate::audit_outbox`]).
    pub audit: Arc<dyn AuditRepository>,
    /// The audit log itself, for the aggregated refusals, which keep their own counts and write
    /// them again until stored ([`crate::refusals`]).
    pub audit_store: Arc<dyn AuditRepository>,
    pub tokens: TokenRegistry,
    pub rate_limiter: RateLimiter,
    /// The budget of callers without a valid token, per client address.
    pub client_limiter: crate::http::client_limit::ClientLimiter,
    /// Refusals before identification, counted per source and minute.
    pub refusals: Arc<crate::refusals::RefusalLog>,
    pub settings: Arc<SettingsService>,
    pub health: HealthMonitor,
    pub metrics: Arc<Metrics>,
    /// The `data_broker` adapter (the engine runner is given the same one).
    pub market: Arc<dyn MarketData>,
    /// The `execution_broker` adapter's name; the broker itself belongs to the engine runner.
    pub execution_broker: &'static str,
    /// The simulated market's live feed, which the service steps (with `simulated` market data).
    pub live: Option<Arc<LiveMarket>>,
    /// Market time: the wall clock in PAPER, faster in DEMO.
    pub market_clock: Arc<dyn Clock>,
    pub radar: Arc<RadarService>,
    /// Imported float and sector: `PUT /api/market/reference` and the periodic reload.
    pub reference: Arc<crate::domain::reference::ReferenceService>,
    pub watchlist: WatchlistService,
    pub events: Arc<crate::events::EventBus>,
    /// Downloads and backtests: the routes enqueue, cancel and list through it.
    pub jobs: crate::jobs::Jobs,
    pub trade_cache: crate::domain::trades::TradeCache,
    pub order_pages: crate::http::order_pages::OrderPages,
    /// The trading engine, restored before the service is built: the one way into it.
    pub engine: crate::engine::EngineHandle,
    /// Notifications to the operator's phone and team chat (CONTRACT §13).
    pub notifier: Arc<crate::notify::Notifier>,
}

impl AppState {
    pub fn new(inner: Inner) -> Self {
        AppState(Arc::new(inner))
    }

    /// The trading engine's handle: the one way into it.
    pub fn engine(&self) -> &crate::engine::EngineHandle {
        &self.engine
    }
}

impl Deref for AppState {
    type Target = Inner;

    fn deref(&self) -> &Inner {
        &self.0
    }
}
