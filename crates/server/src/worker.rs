//! `tradeops worker`: a process that runs downloads and backtests only — no HTTP
//! listener, no engine, no feed. Any number of them share the service's PostgreSQL database:
//! each claims queued jobs with `FOR UPDATE SKIP LOCKED` (never one another worker is taking),
//! holds each under a lease it renews, and is woken by `NOTIFY` when a service queues one. A
//! worker killed mid-job leaves the job `RUNNING` under a lease nobody renews; once it expires
//! another worker takes it back (a download resumes, a backtest runs again from the start) and
//! the killed worker's late writes, conditional on holding the lease, land nowhere: a job is
//! never lost and never completed twice. Stopped with SIGTERM, a worker hands its jobs back at
//! once.
//!
//! The worker builds what jobs need the way `serve` does ([`crate::app`]): the settings
//! (followed as the service changes them), the imported reference data, the market-data adapter
//! (Alpaca's REST history without its stream, or the simulated market of the same seed) and the
//! market clock. SQLite is refused: there one service owns the database file and runs its jobs
//! itself.

use crate::app::brokers::alpaca_market_data;
use crate::app::{host_and_process, job_limits, keep_reference_loaded, market_clock};
use crate::config::{redact, Config};
use crate::domain::reference::ReferenceService;
use crate::domain::settings::SettingsService;
use crate::events::EventBus;
use crate::jobs::{JobContext, Jobs};
use anyhow::Context;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tradeops_brokers::reference::{ReferenceData, WithReference};
use tradeops_brokers::simulated::SimulatedMarket;
use tradeops_brokers::MarketData;
use tradeops_core::calendar::MarketCalendar;
use tradeops_core::settings::MarketDataBrokerKind;
use tradeops_core::Clock;
use tradeops_store::{Backend, Database};

/// How often a worker looks for settings changed by the service.
pub const SETTINGS_RELOAD_EVERY: Duration = Duration::from_secs(1);

/// A built worker, ready to run.
pub struct Worker {
    jobs: Jobs,
    settings: Arc<SettingsService>,
    reference: Arc<ReferenceService>,
    node: String,
}

impl Worker {
    pub async fn build(config: Config, clock: Arc<dyn Clock>) -> anyhow::Result<Worker> {
        if Backend::from_url(&config.database_url).map_err(|e| anyhow::anyhow!("{e}"))? == Backend::Sqlite {
            anyhow::bail!(
                "tradeops worker needs PostgreSQL (database.url is {}): on SQLite the service runs its jobs itself \
                 (docs/operating.md, Cluster)",
                redact(&config.database_url)
            );
        }
        let db = Database::open(&config.database_url)
            .await
            .with_context(|| format!("opening the database {}", redact(&config.database_url)))?;
        let settings = SettingsService::load(Arc::new(db.clone()), clock.clone(), config.auth.enabled)
            .await
            .map_err(|e| anyhow::anyhow!("loading settings: {e}"))?;
        let mode = settings.mode();
        let calendar = MarketCalendar::new(settings.current().runtime.market_calendar);
        let resume_at = {
            let repo: &dyn tradeops_store::TradingRepository = &db;
            repo.latest_market_time().await?.map(tradeops_core::time::from_epoch_ms)
        };
        let market_clock = market_clock(&config, mode, calendar, resume_at, &clock);
        let reference_data = Arc::new(ReferenceData::default());
        let reference = Arc::new(ReferenceService::new(Arc::new(db.clone()), reference_data.clone()));
        reference.reload().await.map_err(|e| anyhow::anyhow!("loading the imported reference data: {e}"))?;
        let source: Arc<dyn MarketData> = match config.brokers.market_data() {
            MarketDataBrokerKind::Simulated => {
                let simulated = SimulatedMarket::new(config.sim.seed, config.sim.symbols as usize);
                Arc::new(if config.sim.reference_data { simulated } else { simulated.without_reference_data() })
            }
            MarketDataBrokerKind::Alpaca => {
                alpaca_market_data(&config.alpaca, mode, reference_data.clone(), clock.clone(), false)?
            }
        };
        let market: Arc<dyn MarketData> = Arc::new(WithReference::new(source, reference_data.clone()));
        let settings = Arc::new(settings);
        // Its job updates are announced to the engine's leader, who publishes them.
        let events = Arc::new(EventBus::new(market_clock.clone(), clock.clone(), settings.subscribe()));
        let node = format!("{}:worker", host_and_process());
        let jobs = Jobs::new(JobContext {
            db,
            events,
            market,
            reference: reference_data,
            settings: settings.subscribe(),
            clock,
            market_clock,
            limits: job_limits(&config),
            worker: crate::jobs::worker_name(&node),
            downloads: Default::default(),
            backtests: Default::default(),
            sweeps: Default::default(),
            desk: crate::app::desk_source(&config),
            sweep_threads: Default::default(),
            walk_forward_findings: Default::default(),
        });
        Ok(Worker { jobs, settings, reference, node })
    }

    /// Runs jobs until `shutdown` resolves, then stops claiming, hands the jobs it was running
    /// back to the queue and closes the database.
    pub async fn run_until_stopped(self, shutdown: impl Future<Output = ()> + Send + 'static) -> anyhow::Result<()> {
        let Worker { jobs, settings, reference, node } = self;
        let mut tasks = crate::jobs::spawn_workers(&jobs);
        tasks.push(tokio::spawn(keep_reference_loaded(reference)));
        tasks.push(tokio::spawn(crate::cluster::heartbeat(
            jobs.db.clone(),
            node.clone(),
            "worker",
            None,
            jobs.clock.clone(),
        )));
        tasks.push(tokio::spawn(async move {
            let mut tick = tokio::time::interval(SETTINGS_RELOAD_EVERY);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                if let Err(e) = settings.reload_if_newer().await {
                    tracing::debug!(error = %e, "settings not reloaded; those in effect stay");
                }
            }
        }));
        tasks.push(tokio::spawn(announce_job_updates(jobs.clone())));
        tracing::info!(node, lease_owner = %jobs.worker, limits = ?jobs.limits, "worker started");
        // Tests and scripts wait for this line, as they wait for the service's "listening on".
        println!("worker {} started", jobs.worker);
        shutdown.await;
        tracing::info!("worker stopping: handing its jobs back");
        for task in &tasks {
            task.abort();
        }
        for task in tasks {
            let _ = task.await;
        }
        jobs.release_held().await;
        crate::cluster::leave(&jobs.db, &node).await;
        jobs.db.close().await;
        tracing::info!("stopped");
        Ok(())
    }
}

/// Announces every change of a job this worker runs on the database, for the engine's leader
/// to publish on its event stream (the worker serves no stream of its own).
async fn announce_job_updates(jobs: Jobs) {
    use crate::events::Event;
    use tokio::sync::broadcast::error::RecvError;
    let (_, mut live) = jobs.events.subscribe(None);
    loop {
        let event = match live.recv().await {
            Ok(event) => event,
            Err(RecvError::Lagged(_)) => continue,
            Err(RecvError::Closed) => return,
        };
        let (kind, id) = match &event.event {
            Event::BacktestUpdated(run) => (tradeops_store::JobKind::Backtest, run.backtest_id.as_str()),
            Event::DownloadUpdated(job) => (tradeops_store::JobKind::Download, job.request_id.as_str()),
            _ => continue,
        };
        if let Err(e) = jobs.db.announce_job_update(kind, id).await {
            tracing::debug!(error = %e, id, "a job's change was not announced: the services read it from its row");
        }
    }
}
