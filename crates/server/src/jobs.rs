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
