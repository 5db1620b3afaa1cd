//! The durable jobs (downloads, backtests, sweeps) and what they share, the job kind being
//! [`JobKind`]: the dispatch [`Pool`] (each pass takes back the running jobs whose lease
//! expired, reads the queue and starts what fits under the parallel limit; `pool`), the atomic
//! **claim** of a queued job by one worker, its **lease** and the **recovery** per kind of a job
//! whose lease was left to expire — a download taken back resumes, a backtest runs again from
//! the start ([`Leases`]; `leases`), and **cancel** — a queued job at once, a running one at its
//! next progress point ([`cancel`], [`Halt`]; `halt`). This module holds what they all run on,
//! [`Jobs`], built by the composition root and handed to the workers and the routes, and starts
//! the workers. The kinds themselves live in [`crate::jobs::downloads`] and
//! [`crate::jobs::backtests`] (desk replays in [`crate::jobs::desk`], both run by
//! [`crate::jobs::backtest_worker`]; parameter sweeps in [`crate::jobs::sweeps`]; what every run
//! shares in [`crate::jobs::run`], the typed results a backtest row stores in
//! [`crate::jobs::results`]); nothing here knows HTTP.

pub mod backtest_worker;
pub mod backtests;
pub mod desk;
pub mod downloads;
mod halt;
mod leases;
mod pool;
pub mod results;
pub mod run;
pub mod sweeps;

pub use halt::{cancel, CancelError, Halt, JOB_FINAL_GUARD};
pub use leases::{recovery, worker_name, KeepAlive, Leases, LEASE};
pub use pool::{persist, retry, Pool};

use crate::events::EventBus;
use std::ops::Deref;
use std::sync::Arc;
use tokio::sync::{watch, Notify};
use tradeops_brokers::MarketData;
use tradeops_core::{Clock, Settings};
use tradeops_store::{Database, JobKind, JobRepository};

/// What downloads and backtests run on, passed explicitly: cheap to clone (one `Arc`).
#[derive(Clone)]
pub struct Jobs(Arc<JobContext>);

/// The dependencies of the jobs.
pub struct JobContext {
    /// Where jobs, bars and runs are stored.
    pub db: Database,
    /// Where `download.updated` and `backtest.updated` are published.
    pub events: Arc<EventBus>,
    /// The `data_broker` adapter bars are downloaded from (its instruments and history carry
    /// the imported reference data).
    pub market: Arc<dyn MarketData>,
    /// Imported float and sector, for a backtest whose history comes from its bars alone.
    pub reference: Arc<tradeops_brokers::reference::ReferenceData>,
    /// The settings in effect: a backtest trades under them (overrides applied).
    pub settings: watch::Receiver<Arc<Settings>>,
    /// Wall time: job timestamps and leases.
    pub clock: Arc<dyn Clock>,
    /// Market time: the present a range may not pass and bars must have closed by.
    pub market_clock: Arc<dyn Clock>,
    /// How long a lease holds and how many jobs of each kind this process runs at once.
    pub limits: JobLimits,
    /// The name this process's leases carry (`lease_owner`): its node and a start of its own.
    pub worker: String,
    /// Wakes the download worker when a job is queued.
    pub downloads: Notify,
    /// Wakes the backtest worker when a run is queued.
    pub backtests: Notify,
    /// Wakes the sweep worker when a sweep's parts are queued.
    pub sweeps: Notify,
    /// What desk replays run on (the simulated market they regenerate, when it is the data
    /// broker).
    pub desk: desk::DeskSource,
    /// The threads sweeps' combinations run on: `backtest_parallel` of them, built at first use
    /// and shared by every part this process runs, so sweeps take no more cores than the
    /// operator gave backtests.
    pub sweep_threads: std::sync::OnceLock<Arc<rayon::ThreadPool>>,
    /// What the recommendations read of each completed walk-forward sweep (which never
    /// changes), kept once read.
    pub walk_forward_findings: std::sync::Mutex<std::collections::HashMap<String, sweeps::WalkForwardFinding>>,
}

/// A process's part of the job work (`[jobs]` in the configuration).
#[derive(Clone, Copy, Debug)]
pub struct JobLimits {
    /// How long a claim or a renewal holds a job; renewed every third of it.
    pub lease: chrono::Duration,
    pub backtest_parallel: usize,
    pub download_parallel: usize,
}

impl Default for JobLimits {
    fn default() -> JobLimits {
        JobLimits { lease: LEASE, backtest_parallel: 2, download_parallel: 4 }
    }
}

impl Jobs {
    pub fn new(context: JobContext) -> Jobs {
        Jobs(Arc::new(context))
    }

    /// This process's leases, for its workers and for a download run at once.
    pub fn leases(&self) -> Leases {
        Leases {
            repo: Arc::new(self.db.clone()),
            clock: self.clock.clone(),
            owner: self.worker.clone(),
            lease: self.limits.lease,
        }
    }

    /// Hands the jobs this process runs back to the queue (it is stopping, its workers
    /// stopped): another worker takes them at once instead of after their leases. A download
    /// resumes, a backtest runs again.
    pub async fn release_held(&self) {
        for kind in JobKind::ALL {
            match self.db.release_jobs(kind, &self.worker, recovery(kind)).await {
                Ok(ids) if !ids.is_empty() => {
                    tracing::info!(job = kind.name(), ?ids, "jobs handed back to the queue for another worker")
                }
                Ok(_) => {}
                Err(e) => {
                    tracing::warn!(error = %e, job = kind.name(), "jobs not handed back: taken back after their leases")
                }
            }
        }
    }

    /// Tells the workers a job was queued: this process's at once, other processes' through the
    /// database (PostgreSQL; they also poll).
    pub async fn announce(&self, kind: JobKind) {
        match kind {
            JobKind::Download => self.downloads.notify_one(),
            JobKind::Backtest => self.backtests.notify_one(),
            JobKind::Sweep => self.sweeps.notify_one(),
        }
        if let Err(e) = self.db.announce_jobs().await {
            tracing::warn!(error = %e, "could not announce a queued job to other processes: they find it at their next poll");
        }
    }

    /// The settings in effect now.
    pub fn current_settings(&self) -> Arc<Settings> {
        self.settings.borrow().clone()
    }
}

impl Deref for Jobs {
    type Target = JobContext;

    fn deref(&self) -> &JobContext {
        &self.0
    }
}

/// This process's job workers: downloads, backtests, and the listener that wakes them when
/// another process queues a job.
pub fn spawn_workers(jobs: &Jobs) -> Vec<tokio::task::JoinHandle<()>> {
    vec![
        tokio::spawn(downloads::run_worker(jobs.clone())),
        tokio::spawn(backtest_worker::run_worker(jobs.clone())),
        tokio::spawn(sweeps::run_worker(jobs.clone())),
        tokio::spawn(listen_for_jobs(jobs.clone())),
    ]
}

/// Publishes, on this process's event stream, each change of a job a `tradeops worker` process
/// runs (workers announce them on the database, PostgreSQL; returns at once on SQLite): the job
/// as stored now, so the console follows a backtest whoever runs it.
pub async fn relay_worker_updates(jobs: Jobs) {
    let Some(mut listener) = jobs.db.job_update_listener() else { return };
    loop {
        match listener.next_notice().await {
            Ok(Some(notice)) => {
                let Some((kind, id)) = notice.split_once(':') else { continue };
                let event = match kind {
                    "backtest" => tradeops_store::BacktestRepository::backtest(&jobs.db, id)
                        .await
                        .ok()
                        .flatten()
                        .map(crate::events::Event::BacktestUpdated),
                    "download" => tradeops_store::DataRepository::job(&jobs.db, id)
                        .await
                        .ok()
                        .flatten()
                        .map(crate::events::Event::DownloadUpdated),
                    _ => None,
                };
                if let Some(event) = event {
                    jobs.events.publish(event);
                }
            }
            Ok(None) => {}
            Err(e) => {
                tracing::debug!(error = %e, "cannot listen for the workers' job updates: retried");
                tokio::time::sleep(std::time::Duration::from_secs(1)).await;
            }
        }
    }
}

/// Wakes this process's workers whenever another process announces a queued job (PostgreSQL;
/// returns at once on SQLite). A lost connection wakes them too, since announcements may have
/// been missed meanwhile; the workers poll every half second anyway.
pub async fn listen_for_jobs(jobs: Jobs) {
    let Some(mut listener) = jobs.db.job_listener() else { return };
    loop {
        match listener.next().await {
            Ok(_) => {
                jobs.downloads.notify_one();
                jobs.backtests.notify_one();
                jobs.sweeps.notify_one();
            }
            Err(e) => {
                tracing::debug!(error = %e, "cannot listen for queued jobs: polling meanwhile");
                tokio::time::sleep(std::time::Duration::from_secs(1)).await;
            }
        }
    }
}
