//! The dispatch of a job kind ([`Pool`]): each pass takes back the running jobs whose lease
//! expired, reads the queue and starts what fits under the parallel limit; and the retried
//! write of a job's outcome ([`persist`]).

use crate::jobs::{recovery, Jobs, Leases};
use futures::future::BoxFuture;
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use tokio::sync::Notify;
use tradeops_store::{JobKind, Recovery};

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

/// Writes a job's outcome, retrying for about a minute (see [`retry`]). True once written;
/// false when every attempt failed, in which case the job stays RUNNING in the database until
/// its lease expires and a worker takes it back.
pub async fn persist<F, Fut, E>(what: &str, id: &str, write: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<(), E>>,
    E: std::fmt::Display,
{
    match retry(what, id, write).await {
        Ok(()) => true,
        Err(e) => {
            tracing::error!(error = %e, id, "{what} not persisted; the job runs again once its lease expires");
            false
        }
    }
}

/// Runs an idempotent write of a job until it lands, for about a minute: on SQLite a write
/// waits at most the busy timeout (5 s) for another writer's lock, and a job's work or result
/// must not be lost to a long write elsewhere (a large download, say). The last error when
/// every attempt failed.
pub async fn retry<T, F, Fut, E>(what: &str, id: &str, mut write: F) -> Result<T, E>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, E>>,
    E: std::fmt::Display,
{
    const ATTEMPTS: u32 = 8;
    let mut delay = std::time::Duration::from_millis(200);
    let mut attempt = 1;
    loop {
        match write().await {
            Ok(done) => return Ok(done),
            Err(e) if attempt < ATTEMPTS => {
                tracing::warn!(error = %e, id, attempt, "{what} not persisted yet; retrying");
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(std::time::Duration::from_secs(5));
                attempt += 1;
            }
            Err(e) => return Err(e),
        }
    }
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
