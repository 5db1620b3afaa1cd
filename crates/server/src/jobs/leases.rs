//! A worker's hold on the jobs it runs: the **claim** of a queued job (atomic: one worker
//! only), its **lease** (an expiry read from the injected clock, moved at every progress write
//! and by a heartbeat, [`Leases::keep_alive`]), and the **recovery** of a job whose lease was
//! left to expire — a crashed or stalled worker — by kind ([`recovery`]): a download resumes, a
//! run starts again.

use std::sync::Arc;
use tradeops_core::Clock;
use tradeops_store::{JobKind, JobRepository, Lease, Recovery, StoreError};

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
    pub(super) repo: Arc<dyn JobRepository>,
    pub(super) clock: Arc<dyn Clock>,
    pub(super) owner: String,
    pub(super) lease: chrono::Duration,
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
    /// worker when `orphans` (no other worker can be alive: see [`crate::jobs::Pool::run`]) — as the kind
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

/// The generic job operations on a real database.
#[cfg(test)]
mod tests;
