//! The dispatch loop shared by the durable job workers (downloads, backtests): each pass reads
//! the queue, starts what fits under the parallel limit (a job already running is not started
//! twice), and waits for a wake-up or half a second.

use crate::state::AppState;
use futures::future::BoxFuture;
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use tokio::sync::Notify;

/// How a worker reads its queue and runs one job.
pub struct Pool<J> {
    pub name: &'static str,
    pub parallel: usize,
    pub wake: fn(&AppState) -> &Notify,
    pub id: fn(&J) -> String,
    /// Queued jobs, oldest first.
    pub queued: for<'a> fn(&'a AppState) -> BoxFuture<'a, anyhow::Result<Vec<J>>>,
    pub run: fn(AppState, J) -> BoxFuture<'static, ()>,
}

impl<J: Send + 'static> Pool<J> {
    /// Runs forever.
    pub async fn run(self, state: AppState) {
        let running: Arc<Mutex<BTreeSet<String>>> = Arc::default();
        loop {
            let queued = (self.queued)(&state).await.unwrap_or_else(|e| {
                tracing::error!(error = %e, worker = self.name, "could not read the job queue");
                Vec::new()
            });
            for job in queued {
                let id = (self.id)(&job);
                let mut active = running.lock().unwrap_or_else(|e| e.into_inner());
                if active.len() >= self.parallel || active.contains(&id) {
                    continue;
                }
                active.insert(id.clone());
                let (state, running, run, wake) = (state.clone(), running.clone(), self.run, self.wake);
                tokio::spawn(async move {
                    run(state.clone(), job).await;
                    running.lock().unwrap_or_else(|e| e.into_inner()).remove(&id);
                    wake(&state).notify_one();
                });
            }
            tokio::select! {
                _ = (self.wake)(&state).notified() => {}
                _ = tokio::time::sleep(std::time::Duration::from_millis(500)) => {}
            }
        }
    }
}

/// Writes a job's outcome, retrying for about a minute: on SQLite a write waits at most the busy
/// timeout (5 s) for another writer's lock, and a job's result must not be lost to a long write
/// elsewhere (a large download, say). True once written; false when every attempt failed, in
/// which case the job stays RUNNING in the database and runs again after a restart.
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
            Err(e) => tracing::error!(error = %e, id, "{what} not persisted; the job runs again after a restart"),
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
