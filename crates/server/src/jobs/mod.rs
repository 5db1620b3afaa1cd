//! The durable jobs (downloads, backtests) and what they share, the job kind being
//! [`JobKind`]: the dispatch [`Pool`] (each pass takes back the running jobs whose lease
//! expired, reads the queue and starts what fits under the parallel limit), the atomic
//! **claim** of a queued job by one worker, its **lease** (an expiry read from the injected
//! clock, moved at every progress write and by a heartbeat; a lease left to expire — a crashed
//! or stalled worker — lets another worker take the job back), **cancel** (a queued job at
//! once, a running one at its next progress point), and **recovery** per kind: a download taken
//! back resumes, a backtest runs again from the start. The kinds themselves live in
//! [`crate::jobs::downloads`] and [`crate::jobs::backtests`] (desk replays in
//! [`crate::jobs::desk`], both run by [`crate::jobs::backtest_worker`]; parameter sweeps in
//! [`crate::jobs::sweeps`]; what every run shares in [`crate::jobs::run`]); what they run on is
//! [`Jobs`], built by the composition root and handed to the workers and the routes, so nothing
//! here knows HTTP.

pub mod backtest_worker;
pub mod backtests;
pub mod desk;
pub mod downloads;
pub mod run;
pub mod sweeps;

use crate::domain::{DomainError, GuardSubject};
use crate::events::EventBus;
use futures::future::BoxFuture;
use std::collections::BTreeSet;
use std::ops::Deref;
use std::sync::{Arc, Mutex};
use tokio::sync::{watch, Notify};
use tradeops_brokers::MarketData;
use tradeops_core::{Clock, Settings};
use tradeops_store::{Cancel, Database, JobKind, JobRepository, JobStatus, Lease, Recovery, StoreError};

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
    pub walk_forward_findings: std::sync::Mutex<std::collections::HashMap<String, serde_json::Value>>,
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

/// How long a claim or a renewal holds a job, unless configured (`jobs.lease_seconds`).
pub const LEASE: chrono::Duration = chrono::Duration::seconds(30);

/// A lease owner's name: `node` and a start of its own (a process restarted under the same
/// name is another owner).
pub fn worker_name(node: &str) -> String {
    format!("{node}/{}", &uuid::Uuid::new_v4().simple().to_string()[..8])
}

/// How a kind's job taken back from a worker that stopped renewing its lease goes on.
pub fn recovery(kind: JobKind) -> Recovery {
    match kind {
        // Storing bars is idempotent: the job continues.
        JobKind::Download => Recovery::Resume,
        // Runs are deterministic: it runs again from the start.
        JobKind::Backtest | JobKind::Sweep => Recovery::Rerun,
    }
}

/// One worker's leases: its name, and the clock their expiries are read from.
#[derive(Clone)]
pub struct Leases {
    repo: Arc<dyn JobRepository>,
    clock: Arc<dyn Clock>,
    owner: String,
    lease: chrono::Duration,
}

impl Leases {
    /// A worker with a name of its own, whose leases hold for `lease`.
    pub fn new(repo: Arc<dyn JobRepository>, clock: Arc<dyn Clock>, lease: chrono::Duration) -> Leases {
        Leases { repo, clock, owner: worker_name("worker"), lease }
    }

    /// This worker's name, as the jobs it holds record it (`lease_owner`).
    pub fn owner(&self) -> &str {
        &self.owner
    }

    /// A lease held from now for the lease's length: what every write of a running job carries.
    pub fn lease(&self) -> Lease {
        let until = self.clock.now() + self.lease;
        Lease { owner: self.owner.clone(), expires_at: Some(until.timestamp_millis()) }
    }

    /// The lease a job's final write leaves: its owner, no expiry.
    pub fn released(&self) -> Lease {
        Lease { owner: self.owner.clone(), expires_at: None }
    }

    /// Takes a queued job; false when another worker took it first (or it is no longer queued).
    pub async fn claim(&self, kind: JobKind, id: &str) -> Result<bool, StoreError> {
        self.repo.claim_job(kind, id, &self.lease()).await
    }

    /// Takes the oldest queued job of `kind`, skipping those other workers are taking: its id,
    /// or `None` when none is queued.
    pub async fn claim_next(&self, kind: JobKind) -> Result<Option<String>, StoreError> {
        self.repo.claim_next(kind, &self.lease()).await
    }

    /// Moves the lease of a job this worker runs; false when it lost the job.
    pub async fn renew(&self, kind: JobKind, id: &str) -> Result<bool, StoreError> {
        self.repo.renew_lease(kind, id, &self.lease()).await
    }

    /// Requeues the running jobs of a kind whose lease expired — every running job of another
    /// worker when `orphans` (no other worker can be alive: see [`Pool::run`]) — as the kind
    /// recovers; their ids. This worker's own jobs are never taken back: it renews them itself,
    /// and one whose outcome is still being written (the database was away longer than a lease)
    /// keeps it.
    pub async fn recover(&self, kind: JobKind, orphans: bool) -> Result<Vec<String>, StoreError> {
        let now = if orphans { i64::MAX } else { self.clock.now().timestamp_millis() };
        self.repo.requeue_expired(kind, now, recovery(kind), &self.owner).await
    }

    /// Renews the lease of job `id` every third of the lease until the returned guard is dropped:
    /// a job between progress points (a long day of bars, a long stretch of a run) stays held.
    pub fn keep_alive(&self, kind: JobKind, id: &str) -> KeepAlive {
        let (leases, id) = (self.clone(), id.to_string());
        KeepAlive(tokio::spawn(async move {
            let heartbeat = (leases.lease / 3).to_std().unwrap_or(std::time::Duration::from_secs(1));
            let mut every = tokio::time::interval(heartbeat);
            every.tick().await;
            loop {
                every.tick().await;
                match leases.renew(kind, &id).await {
                    Ok(true) => {}
                    // Canceled or taken back: the job stops at its next progress write.
                    Ok(false) => return,
                    Err(e) => tracing::warn!(error = %e, job = kind.name(), id, "could not renew a job's lease"),
                }
            }
        }))
    }
}

/// Stops the heartbeat of [`Leases::keep_alive`] when dropped.
pub struct KeepAlive(tokio::task::JoinHandle<()>);

impl Drop for KeepAlive {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Why a running job stopped before its end.
#[derive(Debug, PartialEq)]
pub enum Halt {
    /// It failed: the reason its row records.
    Failed(String),
    /// Its worker no longer holds it (canceled, or taken back after its lease expired): it
    /// stops without writing anything more.
    Lost,
}

impl From<String> for Halt {
    fn from(reason: String) -> Halt {
        Halt::Failed(reason)
    }
}

impl From<&str> for Halt {
    fn from(reason: &str) -> Halt {
        Halt::Failed(reason.to_string())
    }
}

/// Why a cancel was refused.
#[derive(Debug)]
pub enum CancelError {
    NotFound,
    /// The job had already ended (`COMPLETED`, `FAILED` or `CANCELED`): nothing changed.
    Final(JobStatus),
    Store(StoreError),
}

/// The guard a cancel of a job that already ended names (`detail.guard`).
pub const JOB_FINAL_GUARD: &str = "job_final";

impl CancelError {
    /// The refusal as the domain states it, `what` naming the job (`download`, `backtest`):
    /// not found, or a guard refusal ([`JOB_FINAL_GUARD`]) for a job that already ended.
    pub fn refusal(self, what: &str, id: &str) -> DomainError {
        match self {
            CancelError::NotFound => DomainError::NotFound(format!("No {what} {id:?}")),
            CancelError::Final(status) => DomainError::GuardRefused {
                guard: JOB_FINAL_GUARD,
                reason: format!("the {what} {id:?} is already {status}: only a queued or running job can be canceled"),
                subject: GuardSubject::Job { status },
            },
            CancelError::Store(e) => e.into(),
        }
    }
}

/// Cancels a queued job at once; a running one is `CANCELED` now and its worker stops at its
/// next progress point (its writes, conditional on holding the job, no longer land).
pub async fn cancel(repo: &dyn JobRepository, clock: &dyn Clock, kind: JobKind, id: &str) -> Result<(), CancelError> {
    match repo.cancel_job(kind, id, clock.now().timestamp_millis()).await.map_err(CancelError::Store)? {
        Cancel::Canceled(was) => {
            tracing::info!(job = kind.name(), id, %was, "job canceled");
            Ok(())
        }
        Cancel::Final(status) => Err(CancelError::Final(status)),
        Cancel::NotFound => Err(CancelError::NotFound),
    }
}

/// How a worker claims jobs of its kind and runs each one it claimed.
pub struct Pool<J> {
    pub kind: JobKind,
    pub parallel: usize,
    pub wake: fn(&Jobs) -> &Notify,
    /// The job a claim returned the id of (`None`: it vanished).
    pub load: for<'a> fn(&'a Jobs, &'a str) -> BoxFuture<'a, anyhow::Result<Option<J>>>,
    pub run: fn(Jobs, Leases, J) -> BoxFuture<'static, ()>,
}

impl<J: Send + 'static> Pool<J> {
    /// Runs forever: each pass takes back jobs whose worker stopped renewing them, then claims
    /// the oldest queued jobs (never one another worker is taking) while fewer than `parallel`
    /// run here.
    pub async fn run(self, jobs: Jobs) {
        let leases = jobs.leases();
        let running: Arc<Mutex<BTreeSet<String>>> = Arc::default();
        let name = self.kind.name();
        // On SQLite this is the only service on its database file, so a job still RUNNING when
        // it starts was left by its own previous run (a crash): taken back at once rather than
        // when its lease runs out. On PostgreSQL other workers may be alive: leases decide.
        let mut orphans = jobs.db.backend() == tradeops_store::Backend::Sqlite;
        loop {
            let recovered = leases.recover(self.kind, std::mem::take(&mut orphans)).await;
            match recovered {
                Ok(ids) => {
                    for id in ids {
                        let how = match recovery(self.kind) {
                            Recovery::Resume => "resuming",
                            Recovery::Rerun => "running again from the start",
                        };
                        tracing::warn!(
                            job = name,
                            id,
                            "{how} a job whose worker stopped (a restart, or its lease expired)"
                        );
                    }
                }
                Err(e) => tracing::error!(error = %e, job = name, "could not look for interrupted jobs"),
            }
            while running.lock().unwrap_or_else(|e| e.into_inner()).len() < self.parallel {
                let id = match leases.claim_next(self.kind).await {
                    Ok(Some(id)) => id,
                    Ok(None) => break,
                    Err(e) => {
                        tracing::error!(error = %e, job = name, "could not claim a queued job");
                        break;
                    }
                };
                let job = match (self.load)(&jobs, &id).await {
                    Ok(Some(job)) => job,
                    // Claimed but unreadable: it stays RUNNING under a lease nobody renews, and
                    // is taken back (by this worker too) once the lease expires.
                    Ok(None) => continue,
                    Err(e) => {
                        tracing::error!(error = %e, job = name, id, "could not read a claimed job: taken back after its lease");
                        break;
                    }
                };
                tracing::info!(job = name, id, worker = leases.owner(), "job claimed");
                running.lock().unwrap_or_else(|e| e.into_inner()).insert(id.clone());
                let (jobs, leases, running, run, wake) =
                    (jobs.clone(), leases.clone(), running.clone(), self.run, self.wake);
                tokio::spawn(async move {
                    run(jobs.clone(), leases, job).await;
                    running.lock().unwrap_or_else(|e| e.into_inner()).remove(&id);
                    wake(&jobs).notify_one();
                });
            }
            tokio::select! {
                _ = (self.wake)(&jobs).notified() => {}
                _ = tokio::time::sleep(std::time::Duration::from_millis(500)) => {}
            }
        }
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

/// Writes a job's outcome, retrying for about a minute: on SQLite a write waits at most the busy
/// timeout (5 s) for another writer's lock, and a job's result must not be lost to a long write
/// elsewhere (a large download, say). True once written; false when every attempt failed, in
/// which case the job stays RUNNING in the database until its lease expires and a worker takes
/// it back.
pub async fn persist<F, Fut, E>(what: &str, id: &str, mut write: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<(), E>>,
    E: std::fmt::Display,
{
    const ATTEMPTS: u32 = 8;
    let mut delay = std::time::Duration::from_millis(200);
    for attempt in 1..=ATTEMPTS {
        match write().await {
            Ok(()) => return true,
            Err(e) if attempt < ATTEMPTS => {
                tracing::warn!(error = %e, id, attempt, "{what} not persisted yet; retrying");
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(std::time::Duration::from_secs(5));
            }
            Err(e) => {
                tracing::error!(error = %e, id, "{what} not persisted; the job runs again once its lease expires")
            }
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::persist;
    use std::cell::Cell;

    #[tokio::test(start_paused = true)]
    async fn an_outcome_write_is_retried_until_it_lands() {
        let calls = Cell::new(0);
        let ok = persist("outcome", "job-1", || {
            calls.set(calls.get() + 1);
            let n = calls.get();
            async move {
                if n < 3 {
                    Err("database is locked")
                } else {
                    Ok(())
                }
            }
        })
        .await;
        assert!(ok);
        assert_eq!(calls.get(), 3);
    }

    #[tokio::test(start_paused = true)]
    async fn a_write_that_never_lands_is_reported() {
        let calls = Cell::new(0);
        let ok = persist("outcome", "job-2", || {
            calls.set(calls.get() + 1);
            async { Err::<(), _>("database is locked") }
        })
        .await;
        assert!(!ok);
        assert_eq!(calls.get(), 8);
    }
}

/// The generic job operations on a real database: SQLite, or PostgreSQL when
/// `TRADEOPS_TEST_DATABASE_URL` is set (a fresh database each test), with a [`ManualClock`]
/// driving the leases.
#[cfg(test)]
mod lease_tests {
    use super::*;
    use tradeops_core::time::parse_ts;
    use tradeops_core::ManualClock;
    use tradeops_store::{BacktestRecord, BacktestRepository, DataRepository, Database, JobRecord};

    /// A database that lives as long as the value (the SQLite folder is deleted after).
    struct TestDb(Database, #[allow(dead_code)] Option<tempfile::TempDir>);

    async fn database() -> TestDb {
        match std::env::var("TRADEOPS_TEST_DATABASE_URL") {
            Ok(admin) if !admin.is_empty() => {
                let name = format!("tradeops_jobs_{}", uuid::Uuid::new_v4().simple());
                let db = Database::connect(&admin).await.expect("PostgreSQL reachable");
                db.execute_raw(&format!("CREATE DATABASE {name}")).await.expect("create test database");
                db.close().await;
                let (base, query) = admin.split_once('?').map(|(b, q)| (b, Some(q))).unwrap_or((&admin, None));
                let url = format!(
                    "{}/{name}{}",
                    &base[..base.rfind('/').unwrap()],
                    query.map(|q| format!("?{q}")).unwrap_or_default()
                );
                TestDb(Database::open(&url).await.unwrap(), None)
            }
            _ => {
                let dir = tempfile::tempdir().unwrap();
                let db = Database::open(&format!("sqlite://{}/t.db", dir.path().display())).await.unwrap();
                TestDb(db, Some(dir))
            }
        }
    }

    fn clock() -> ManualClock {
        ManualClock::new(parse_ts("2026-11-20T15:00:00Z").unwrap())
    }

    fn worker(db: &Database, clock: &ManualClock) -> Leases {
        Leases::new(Arc::new(db.clone()), Arc::new(clock.clone()), super::LEASE)
    }

    fn download(id: &str, status: JobStatus) -> JobRecord {
        JobRecord {
            request_id: id.into(),
            symbol: "ABC".into(),
            timeframe: "1m".into(),
            start: 0,
            end: 86_400_000,
            status,
            progress: 0.4,
            bars: 576,
            error: None,
            requested_by: "admin".into(),
            created_at: 1,
            started_at: None,
            finished_at: None,
        }
    }

    fn backtest(id: &str, status: JobStatus) -> BacktestRecord {
        BacktestRecord {
            backtest_id: id.into(),
            strategy_id: "sma_cross".into(),
            symbol: "ABC".into(),
            status,
            progress: 0.4,
            request: "{}".into(),
            result: None,
            error: None,
            requested_by: "admin".into(),
            created_at: 1,
            started_at: None,
            finished_at: None,
        }
    }

    async fn status(db: &Database, id: &str) -> JobRecord {
        DataRepository::job(db, id).await.unwrap().unwrap()
    }

    #[tokio::test]
    async fn a_queued_job_is_claimed_by_exactly_one_of_two_workers() {
        let TestDb(db, _dir) = database().await;
        let clock = clock();
        let (a, b) = (worker(&db, &clock), worker(&db, &clock));
        for n in 0..5 {
            let id = format!("dl-{n}");
            db.insert_job(&download(&id, JobStatus::Queued)).await.unwrap();
            let (took_a, took_b) = tokio::join!(a.claim(JobKind::Download, &id), b.claim(JobKind::Download, &id));
            assert!(took_a.unwrap() ^ took_b.unwrap(), "one claimant and only one takes {id}");
            assert_eq!(status(&db, &id).await.status, JobStatus::Running);
        }
        db.close().await;
    }

    /// Workers claim the oldest queued jobs, each a different one, even when they claim at the
    /// same moment (on PostgreSQL a row being taken is skipped, not waited for); with nothing
    /// queued a claim takes nothing. A worker that stops hands its running jobs back: queued
    /// again at once (a backtest with its progress reset), and not another worker's.
    #[tokio::test]
    async fn workers_claim_the_oldest_queued_jobs_each_a_different_one() {
        let TestDb(db, _dir) = database().await;
        let clock = clock();
        let workers: Vec<Leases> = (0..4).map(|_| worker(&db, &clock)).collect();
        for n in 0..6 {
            let mut job = download(&format!("dl-{n}"), JobStatus::Queued);
            job.created_at = 10 - n; // dl-5 is the oldest
            db.insert_job(&job).await.unwrap();
        }
        let claims = futures::future::join_all(workers.iter().map(|w| w.claim_next(JobKind::Download))).await;
        let mut taken: Vec<String> = claims.into_iter().map(|c| c.unwrap().expect("a queued job for each")).collect();
        taken.sort();
        assert_eq!(taken, ["dl-2", "dl-3", "dl-4", "dl-5"], "the four oldest, one each");
        for id in &taken {
            assert_eq!(status(&db, id).await.status, JobStatus::Running);
        }
        assert_eq!(workers[0].claim_next(JobKind::Download).await.unwrap().as_deref(), Some("dl-1"));
        assert_eq!(workers[0].claim_next(JobKind::Download).await.unwrap().as_deref(), Some("dl-0"));
        assert_eq!(workers[1].claim_next(JobKind::Download).await.unwrap(), None, "nothing left queued");
        assert_eq!(workers[1].claim_next(JobKind::Backtest).await.unwrap(), None);

        db.insert_backtest(&backtest("bt-1", JobStatus::Queued)).await.unwrap();
        assert_eq!(workers[0].claim_next(JobKind::Backtest).await.unwrap().as_deref(), Some("bt-1"));
        let mut released = db.release_jobs(JobKind::Download, workers[0].owner(), Recovery::Resume).await.unwrap();
        released.sort();
        let mine: Vec<&str> = ["dl-0", "dl-1"].into_iter().filter(|id| released.contains(&id.to_string())).collect();
        assert_eq!(mine.len(), 2, "both of its downloads: {released:?}");
        assert_eq!(released.len(), 3, "its own only (one of the first four was its): {released:?}");
        assert_eq!(status(&db, "dl-0").await.status, JobStatus::Queued);
        assert_eq!(status(&db, "dl-0").await.progress, 0.4, "a download resumes");
        assert_eq!(db.release_jobs(JobKind::Backtest, workers[0].owner(), Recovery::Rerun).await.unwrap(), ["bt-1"]);
        let run = BacktestRepository::backtest(&db, "bt-1").await.unwrap().unwrap();
        assert_eq!((run.status, run.progress), (JobStatus::Queued, 0.0), "a backtest runs again");
        let others = taken.iter().filter(|id| !released.contains(id)).count();
        assert_eq!(others, 3, "the other workers' jobs stay theirs");
        db.close().await;
    }

    /// A worker never takes back its own job, even past the lease (its outcome write may be
    /// retrying through a long database outage, with the heartbeat failing too); another worker
    /// does. At the start of a single-process service (`orphans`), every running job of another
    /// owner is taken back at once, whatever its lease.
    #[tokio::test]
    async fn a_worker_keeps_its_own_job_past_the_lease_and_orphans_are_swept_at_start() {
        let TestDb(db, _dir) = database().await;
        let clock = clock();
        let (a, b) = (worker(&db, &clock), worker(&db, &clock));
        db.insert_job(&download("dl-mine", JobStatus::Queued)).await.unwrap();
        assert!(a.claim(JobKind::Download, "dl-mine").await.unwrap());
        clock.advance(chrono::Duration::seconds(45));
        assert!(a.recover(JobKind::Download, false).await.unwrap().is_empty(), "its own job, past the lease");
        let mut job = status(&db, "dl-mine").await;
        job.status = JobStatus::Completed;
        assert!(db.update_leased_job(&job, &a.released()).await.unwrap(), "so its outcome still lands");

        db.insert_job(&download("dl-left", JobStatus::Queued)).await.unwrap();
        assert!(a.claim(JobKind::Download, "dl-left").await.unwrap());
        assert!(b.recover(JobKind::Download, false).await.unwrap().is_empty(), "the lease still runs");
        assert_eq!(b.recover(JobKind::Download, true).await.unwrap(), vec!["dl-left".to_string()], "swept at start");
        assert_eq!(status(&db, "dl-left").await.status, JobStatus::Queued);
        db.close().await;
    }

    #[tokio::test]
    async fn a_lease_left_to_expire_lets_another_worker_take_the_job() {
        let TestDb(db, _dir) = database().await;
        let clock = clock();
        let (a, b) = (worker(&db, &clock), worker(&db, &clock));
        db.insert_job(&download("dl-1", JobStatus::Queued)).await.unwrap();
        assert!(a.claim(JobKind::Download, "dl-1").await.unwrap());
        clock.advance(chrono::Duration::seconds(20));
        assert!(a.renew(JobKind::Download, "dl-1").await.unwrap(), "the holder renews its lease");
        clock.advance(chrono::Duration::seconds(25));
        assert!(b.recover(JobKind::Download, false).await.unwrap().is_empty(), "renewed 25 s ago: still held");
        assert!(!b.claim(JobKind::Download, "dl-1").await.unwrap());
        clock.advance(chrono::Duration::seconds(10));
        assert_eq!(
            b.recover(JobKind::Download, false).await.unwrap(),
            vec!["dl-1".to_string()],
            "35 s without renewal"
        );
        assert!(b.claim(JobKind::Download, "dl-1").await.unwrap(), "the second worker takes the job");
        assert!(!a.renew(JobKind::Download, "dl-1").await.unwrap(), "the first lost it");
        let mut job = status(&db, "dl-1").await;
        job.progress = 0.9;
        assert!(!db.update_leased_job(&job, &a.lease()).await.unwrap(), "a write of the first no longer lands");
        assert!(db.update_leased_job(&job, &b.lease()).await.unwrap());
        db.close().await;
    }

    #[tokio::test]
    async fn a_queued_job_is_canceled_at_once_and_never_claimed() {
        let TestDb(db, _dir) = database().await;
        let clock = clock();
        let a = worker(&db, &clock);
        db.insert_job(&download("dl-1", JobStatus::Queued)).await.unwrap();
        cancel(&db, &clock, JobKind::Download, "dl-1").await.unwrap();
        let job = status(&db, "dl-1").await;
        assert_eq!(job.status, JobStatus::Canceled);
        assert_eq!(job.finished_at, Some(clock.now().timestamp_millis()));
        assert!(!a.claim(JobKind::Download, "dl-1").await.unwrap());
        let again = cancel(&db, &clock, JobKind::Download, "dl-1").await;
        assert!(matches!(again, Err(CancelError::Final(JobStatus::Canceled))), "{again:?}");
        assert!(matches!(cancel(&db, &clock, JobKind::Download, "dl-none").await, Err(CancelError::NotFound)));
        db.close().await;
    }

    #[tokio::test]
    async fn a_running_job_is_canceled_and_its_worker_stops_at_its_next_write() {
        let TestDb(db, _dir) = database().await;
        let clock = clock();
        let a = worker(&db, &clock);
        db.insert_backtest(&backtest("bt-1", JobStatus::Queued)).await.unwrap();
        assert!(a.claim(JobKind::Backtest, "bt-1").await.unwrap());
        cancel(&db, &clock, JobKind::Backtest, "bt-1").await.unwrap();
        let mut run = db.backtest("bt-1").await.unwrap().unwrap();
        assert_eq!(run.status, JobStatus::Canceled);
        run.status = JobStatus::Completed;
        run.result = Some("{}".into());
        assert!(!db.update_leased_backtest(&run, &a.released()).await.unwrap(), "the outcome is not written");
        assert!(!a.renew(JobKind::Backtest, "bt-1").await.unwrap());
        let run = db.backtest("bt-1").await.unwrap().unwrap();
        assert_eq!((run.status, run.result), (JobStatus::Canceled, None));
        clock.advance(chrono::Duration::minutes(5));
        assert!(a.recover(JobKind::Backtest, false).await.unwrap().is_empty(), "a canceled job is never taken back");
        let done = backtest("bt-2", JobStatus::Completed);
        db.insert_backtest(&done).await.unwrap();
        let refused = cancel(&db, &clock, JobKind::Backtest, "bt-2").await;
        assert!(matches!(refused, Err(CancelError::Final(JobStatus::Completed))), "{refused:?}");
        assert_eq!(db.backtest("bt-2").await.unwrap().unwrap(), done, "nothing changes");
        db.close().await;
    }

    /// A crash leaves jobs RUNNING without a live lease: a download resumes with its progress,
    /// a backtest runs again from the start; a held or final job is left alone.
    #[tokio::test]
    async fn jobs_of_a_stopped_worker_resume_or_rerun_by_kind() {
        let TestDb(db, _dir) = database().await;
        let clock = clock();
        let (a, b) = (worker(&db, &clock), worker(&db, &clock));
        db.insert_job(&download("dl-crashed", JobStatus::Running)).await.unwrap();
        db.insert_job(&download("dl-done", JobStatus::Completed)).await.unwrap();
        db.insert_job(&download("dl-held", JobStatus::Queued)).await.unwrap();
        assert!(a.claim(JobKind::Download, "dl-held").await.unwrap());
        db.insert_backtest(&backtest("bt-crashed", JobStatus::Running)).await.unwrap();
        assert_eq!(b.recover(JobKind::Download, false).await.unwrap(), vec!["dl-crashed".to_string()]);
        let resumed = status(&db, "dl-crashed").await;
        assert_eq!((resumed.status, resumed.progress, resumed.bars), (JobStatus::Queued, 0.4, 576));
        assert_eq!(status(&db, "dl-held").await.status, JobStatus::Running);
        assert_eq!(status(&db, "dl-done").await.status, JobStatus::Completed);
        assert_eq!(b.recover(JobKind::Backtest, false).await.unwrap(), vec!["bt-crashed".to_string()]);
        let rerun = db.backtest("bt-crashed").await.unwrap().unwrap();
        assert_eq!((rerun.status, rerun.progress), (JobStatus::Queued, 0.0));
        db.close().await;
    }

    #[test]
    fn statuses_are_their_contract_names() {
        for status in JobStatus::ALL {
            assert_eq!(serde_json::to_value(status).unwrap(), status.as_str());
            assert_eq!(JobStatus::parse(status.as_str()), Some(status));
        }
        assert_eq!(JobStatus::parse("running"), None);
        assert!(JobStatus::Canceled.is_final() && !JobStatus::Running.is_final());
    }
}
