//! The worker of backtest rows (jobs of kind [`JobKind::Backtest`]): up to
//! `jobs.backtest_parallel` (2) at once on the blocking pool, each row run by its kind — a single
//! run ([`crate::jobs::backtests`]) or a desk replay ([`crate::jobs::desk`]) — and its outcome
//! written under its lease. A run whose worker stopped (a crash: its lease expires) is run again
//! from the start (runs are deterministic), so none stays `RUNNING`. It sits above both kinds,
//! which share the row machinery of [`crate::jobs::run`] and never name the worker.

use crate::jobs::{backtests, desk, run, Halt, Jobs, Leases};
use tradeops_core::time::to_epoch_ms;
use tradeops_store::{BacktestRecord, BacktestRepository, JobKind, JobStatus};

/// The worker: takes back runs whose worker stopped, then runs queued ones as they come.
pub async fn run_worker(jobs: Jobs) {
    crate::jobs::Pool {
        kind: JobKind::Backtest,
        parallel: jobs.limits.backtest_parallel,
        wake: |jobs| &jobs.backtests,
        load: |jobs, id| Box::pin(async move { Ok(BacktestRepository::backtest(&jobs.db, id).await?) }),
        run: |jobs, leases, run| Box::pin(async move { execute(&jobs, &leases, run).await }),
    }
    .run(jobs)
    .await
}

/// Runs a run `leases` holds to its end, unless it loses the run on the way (then it stops
/// without writing).
async fn execute(jobs: &Jobs, leases: &Leases, mut run: BacktestRecord) {
    let repo: &dyn BacktestRepository = &jobs.db;
    run.status = JobStatus::Running;
    run.progress = 0.0;
    run.started_at = Some(to_epoch_ms(&jobs.clock.now()));
    if !repo.update_leased_backtest(&run, &leases.lease()).await.unwrap_or(false) {
        return;
    }
    run::publish(jobs, &run);
    // Held until the outcome is written: its write may retry for longer than a lease.
    let _heartbeat = leases.keep_alive(JobKind::Backtest, &run.backtest_id);
    let outcome = if desk::is_desk(&run.request) {
        desk::compute(jobs, leases, &mut run).await.and_then(|result| stored(&result))
    } else {
        backtests::compute(jobs, leases, &mut run).await.and_then(|result| stored(&result))
    };
    run.finished_at = Some(to_epoch_ms(&jobs.clock.now()));
    match outcome {
        Ok(result) => {
            run.status = JobStatus::Completed;
            run.progress = 1.0;
            run.result = Some(result);
        }
        Err(Halt::Failed(reason)) => {
            tracing::warn!(backtest_id = %run.backtest_id, %reason, "backtest failed");
            run.status = JobStatus::Failed;
            run.error = Some(reason);
        }
        Err(Halt::Lost) => {
            tracing::info!(backtest_id = %run.backtest_id, "backtest stopped: canceled or taken over");
            return;
        }
    }
    // Announce only what is stored: a console must never show COMPLETED for a run the
    // database still calls RUNNING.
    let held = std::sync::atomic::AtomicBool::new(true);
    let released = leases.released();
    let write = || async {
        held.store(repo.update_leased_backtest(&run, &released).await?, std::sync::atomic::Ordering::Relaxed);
        Ok::<(), tradeops_store::StoreError>(())
    };
    if crate::jobs::persist("backtest outcome", &run.backtest_id, write).await
        && held.load(std::sync::atomic::Ordering::Relaxed)
    {
        run::publish(jobs, &run);
    }
}

/// A result as its row's `result` stores it.
fn stored(result: &impl serde::Serialize) -> Result<String, Halt> {
    serde_json::to_string(result).map_err(|e| Halt::Failed(format!("unwritable result: {e}")))
}
