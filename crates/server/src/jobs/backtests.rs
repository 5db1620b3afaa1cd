//! Durable backtest runs (`POST /api/backtests/run`), jobs of kind [`JobKind::Backtest`]: a
//! row `QUEUED → RUNNING` (with `progress`) `→ COMPLETED` (with the result) or `FAILED`, or
//! `CANCELED`. This module owns the single run — queueing it ([`enqueue`], from the fields every
//! run is asked with, [`RunRequest`]), cancelling a backtest row ([`cancel`]), the run itself ([`compute`]) and its
//! result ([`BacktestResult`]): bars come from the database (the trading days missing from
//! it downloaded first, [`run::ensure_bars`]) and go through `tradeops_core::backtest::run` — the
//! live engine with a manual clock. What every run shares (the rules of its fields, queueing and
//! following a row, preparing its bars) is [`crate::jobs::run`]'s; desk replays
//! ([`crate::jobs::desk`]) are backtest rows too; the worker that runs both kinds is
//! [`crate::jobs::backtest_worker`].

use crate::domain::{DomainError, DomainResult};
use crate::jobs::results::BacktestResult;
use crate::jobs::run::{self, publish, Prepared, RunRequest, StoredRun};
use crate::jobs::{CancelError, Halt, Jobs, Leases};
use tradeops_core::backtest::{self, BacktestSpec, BarHistory};
use tradeops_store::{BacktestRecord, BacktestRepository, JobKind};

/// Validates and queues a run.
pub async fn enqueue(jobs: &Jobs, req: RunRequest, actor: &str) -> DomainResult<BacktestRecord> {
    let stored = run::validate(jobs, &req).await?;
    let request = serde_json::to_string(&stored).map_err(DomainError::internal)?;
    run::queue(jobs, &stored.strategy_id, &stored.symbol, request, actor).await
}

/// Cancels a run (see [`crate::jobs::cancel`]) and announces it; the run as it is now.
pub async fn cancel(jobs: &Jobs, id: &str) -> DomainResult<BacktestRecord> {
    let refused = |e: CancelError| e.refusal("backtest", id);
    crate::jobs::cancel(&jobs.db, jobs.clock.as_ref(), JobKind::Backtest, id).await.map_err(refused)?;
    let repo: &dyn BacktestRepository = &jobs.db;
    let run = repo.backtest(id).await?.ok_or(CancelError::NotFound).map_err(refused)?;
    publish(jobs, &run);
    Ok(run)
}

/// Runs a single run (a desk replay is [`crate::jobs::desk::compute`]'s): its result, or why it
/// stopped.
pub(crate) async fn compute(jobs: &Jobs, leases: &Leases, run: &mut BacktestRecord) -> Result<BacktestResult, Halt> {
    let stored: StoredRun = serde_json::from_str(&run.request).map_err(|e| format!("unreadable request: {e}"))?;
    let bars = run::ensure_bars(jobs, &stored, &format!("backtest {}", run.backtest_id)).await?;
    let Prepared { settings, symbol, bars, calendar } = run::prepare(&stored, bars)?;
    let history = run::history_of(jobs, &symbol, calendar, || BarHistory::new(&bars, stored.timeframe));
    let spec = BacktestSpec {
        strategy_id: stored.strategy_id.clone(),
        symbol,
        timeframe: stored.timeframe,
        start: stored.start,
        parameters: stored.parameters.clone(),
        initial_cash: stored.initial_cash,
        commission_rate: stored.commission_rate,
        slippage_bps: stored.slippage_bps,
        fill: stored.fill,
    };
    let (progress_tx, progress_rx) = tokio::sync::watch::channel(0.0_f64);
    let task = tokio::task::spawn_blocking(move || {
        let mut history = history;
        backtest::run(&spec, &settings, &bars, history.as_mut(), &mut |p| {
            progress_tx.send_if_modified(|old| {
                // Every 5%: enough for a progress bar, few writes.
                let changed = p >= *old + 0.05 || (p >= 1.0 && *old < 1.0);
                if changed {
                    *old = p;
                }
                changed
            });
        })
    });
    let output = run::follow(jobs, leases, run, task, progress_rx).await?;
    Ok(BacktestResult::from(&output))
}
