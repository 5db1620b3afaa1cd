//! The data service: durable downloads (`POST /api/data/download`), jobs of kind
//! [`JobKind::Download`] that go `QUEUED → RUNNING` (with `progress`) `→ COMPLETED` or `FAILED`,
//! or `CANCELED`; and the CSV import of bars ([`import_bars`], the API's and the CLI's). A
//! worker runs up to [`PARALLEL_JOBS`] side by side, a day of bars at a time, storing each day
//! before reporting progress. A job whose worker stopped (a crash: its lease expires) is resumed
//! (storing bars is idempotent), so no job stays `RUNNING`.

use crate::http::error::{ApiError, ApiResult};
use crate::http::state::AppState;
use crate::jobs::{CancelError, Halt, Leases};
use chrono::Duration;
use std::sync::Arc;
use tokio::sync::Notify;
use tradeops_core::market::Timeframe;
use tradeops_core::time::{from_epoch_ms, to_epoch_ms};
use tradeops_core::{Symbol, Timestamp};
use tradeops_store::{DataRepository, JobKind, JobRecord, JobStatus};

/// Jobs running at once.
pub const PARALLEL_JOBS: usize = 4;
/// Longest range of one job.
pub const MAX_MINUTE_DAYS: i64 = 366;
pub const MAX_DAILY_DAYS: i64 = 366 * 20;

/// Wakes the worker when a job is queued.
#[derive(Default)]
pub struct DownloadQueue {
    pub wake: Notify,
}

/// Validates and queues a download.
pub async fn enqueue(
    state: &AppState,
    symbol: Symbol,
    timeframe: Timeframe,
    start: Timestamp,
    end: Timestamp,
    actor: &str,
) -> ApiResult<JobRecord> {
    // The request's own faults before what only a lookup can tell.
    check_range(state, timeframe, start, end, "download")?;
    if state.market.instrument(&symbol).is_none() {
        return Err(ApiError::not_found(format!("{symbol} is not a symbol of the {} market", state.market.name())));
    }
    let job = new_job(state, &symbol, timeframe, (start, end), JobStatus::Queued, actor);
    let repo: &dyn DataRepository = &state.db;
    repo.insert_job(&job).await?;
    publish(state, &job);
    state.downloads.wake.notify_one();
    Ok(job)
}

/// The range rules downloads and backtests share: `end` after `start`, not in the future (a day
/// of slack for time zones), and at most [`MAX_MINUTE_DAYS`] of minute bars or
/// [`MAX_DAILY_DAYS`] of daily ones. `what` names the request in the message.
pub fn check_range(
    state: &AppState,
    timeframe: Timeframe,
    start: Timestamp,
    end: Timestamp,
    what: &str,
) -> ApiResult<()> {
    if start >= end {
        return Err(ApiError::validation("end", "must be after start"));
    }
    if end > state.market_clock.now() + Duration::days(1) {
        return Err(ApiError::validation("end", "must not be in the future"));
    }
    let max_days = if timeframe == Timeframe::Minute { MAX_MINUTE_DAYS } else { MAX_DAILY_DAYS };
    if end - start > Duration::days(max_days) {
        return Err(ApiError::validation(
            "end",
            format!("a {} {what} spans at most {max_days} days", timeframe.as_str()),
        ));
    }
    Ok(())
}

fn new_job(
    state: &AppState,
    symbol: &Symbol,
    timeframe: Timeframe,
    (start, end): (Timestamp, Timestamp),
    status: JobStatus,
    actor: &str,
) -> JobRecord {
    JobRecord {
        request_id: format!("dl-{}", uuid::Uuid::new_v4().simple()),
        symbol: symbol.to_string(),
        timeframe: timeframe.as_str().into(),
        start: to_epoch_ms(&start),
        end: to_epoch_ms(&end),
        status,
        progress: 0.0,
        bars: 0,
        error: None,
        requested_by: actor.to_string(),
        created_at: to_epoch_ms(&state.clock.now()),
        started_at: None,
        finished_at: None,
    }
}

/// Downloads a range now (a backtest's missing bars): the job is recorded like any other, as
/// `RUNNING` under a lease of its own from the start so the worker leaves it alone, and its
/// outcome is returned.
pub async fn download_now(
    state: &AppState,
    symbol: &Symbol,
    timeframe: Timeframe,
    start: Timestamp,
    end: Timestamp,
    actor: &str,
) -> Result<JobRecord, String> {
    let job = new_job(state, symbol, timeframe, (start, end), JobStatus::Running, actor);
    let repo: &dyn DataRepository = &state.db;
    let leases = Leases::new(Arc::new(state.db.clone()), state.clock.clone());
    repo.insert_leased_job(&job, &leases.lease()).await.map_err(|e| e.to_string())?;
    let id = job.request_id.clone();
    run_job(state, &leases, job).await;
    let done = repo.job(&id).await.map_err(|e| e.to_string())?.ok_or("the download job vanished")?;
    match done.status {
        JobStatus::Completed => Ok(done),
        JobStatus::Canceled => Err("the download was canceled".into()),
        _ => Err(done.error.unwrap_or_else(|| "the download failed".into())),
    }
}

/// The `download.updated` event and the list row share this shape.
pub fn job_json(j: &JobRecord) -> serde_json::Value {
    let ts = |ms: i64| tradeops_core::time::format_ts(&from_epoch_ms(ms));
    serde_json::json!({
        "request_id": j.request_id, "symbol": j.symbol, "timeframe": j.timeframe,
        "start": ts(j.start), "end": ts(j.end), "status": j.status, "progress": j.progress, "bars": j.bars,
        "created_at": ts(j.created_at), "finished_at": j.finished_at.map(ts), "error": j.error,
    })
}

/// Cancels a download (see [`crate::jobs::cancel`]) and announces it; the job as it is now.
pub async fn cancel(state: &AppState, id: &str) -> Result<JobRecord, CancelError> {
    crate::jobs::cancel(&state.db, state.clock.as_ref(), JobKind::Download, id).await?;
    let repo: &dyn DataRepository = &state.db;
    let job = repo.job(id).await.map_err(CancelError::Store)?.ok_or(CancelError::NotFound)?;
    publish(state, &job);
    Ok(job)
}

fn publish(state: &AppState, job: &JobRecord) {
    state.events.publish(crate::events::Event::DownloadUpdated(job.clone()));
}

/// The worker: takes back jobs whose worker stopped, then runs queued ones as they come.
pub async fn run_worker(state: AppState) {
    crate::jobs::Pool {
        kind: JobKind::Download,
        parallel: PARALLEL_JOBS,
        wake: |state| &state.downloads.wake,
        id: |job: &JobRecord| job.request_id.clone(),
        queued: |state| Box::pin(async move { Ok(state.db.jobs_in(JobStatus::Queued).await?) }),
        run: |state, leases, job| Box::pin(async move { run_job(&state, &leases, job).await }),
    }
    .run(state)
    .await
}

/// Runs a job `leases` holds to its end, unless it loses the job on the way (then it stops
/// without writing).
async fn run_job(state: &AppState, leases: &Leases, mut job: JobRecord) {
    let repo: &dyn DataRepository = &state.db;
    job.status = JobStatus::Running;
    job.started_at = Some(to_epoch_ms(&state.clock.now()));
    job.progress = 0.0;
    job.bars = 0;
    if !repo.update_leased_job(&job, &leases.lease()).await.unwrap_or(false) {
        return;
    }
    publish(state, &job);
    let heartbeat = leases.keep_alive(JobKind::Download, &job.request_id);
    let outcome = fetch(state, leases, &mut job).await;
    drop(heartbeat);
    job.finished_at = Some(to_epoch_ms(&state.clock.now()));
    match outcome {
        Ok(()) => {
            job.status = JobStatus::Completed;
            job.progress = 1.0;
        }
        Err(Halt::Failed(reason)) => {
            tracing::warn!(request_id = %job.request_id, %reason, "download failed");
            job.status = JobStatus::Failed;
            job.error = Some(reason);
        }
        Err(Halt::Lost) => {
            tracing::info!(request_id = %job.request_id, "download stopped: canceled or taken over");
            return;
        }
    }
    let held = std::sync::atomic::AtomicBool::new(true);
    let released = leases.released();
    let write = || async {
        held.store(repo.update_leased_job(&job, &released).await?, std::sync::atomic::Ordering::Relaxed);
        Ok::<(), tradeops_store::StoreError>(())
    };
    if crate::jobs::persist("download outcome", &job.request_id, write).await
        && held.load(std::sync::atomic::Ordering::Relaxed)
    {
        publish(state, &job);
    }
}

/// Fetches and stores the range a day at a time, reporting progress after each stored day.
/// Only bars that have closed by the market's present are stored: a range reaching past it
/// (the simulated market could generate those days) ends at the present, as
/// `GET /api/market/bars` does, and the job records its range as ending there — so a backtest
/// never counts the rest of that day, or later days, as downloaded.
async fn fetch(state: &AppState, leases: &Leases, job: &mut JobRecord) -> Result<(), Halt> {
    let repo: &dyn DataRepository = &state.db;
    let present = to_epoch_ms(&state.market_clock.now());
    let symbol = Symbol::parse(&job.symbol).map_err(|e| format!("bad symbol: {e}"))?;
    let timeframe = Timeframe::parse(&job.timeframe).ok_or("bad timeframe")?;
    let (start, end) = (from_epoch_ms(job.start), from_epoch_ms(job.end));
    let step = if timeframe == Timeframe::Minute { Duration::days(1) } else { Duration::days(366) };
    let total = (end - start).num_milliseconds().max(1) as f64;
    let mut from = start;
    while from < end {
        let to = (from + step).min(end);
        let bars = state.market.bars(&symbol, timeframe, from, to).await.map_err(|e| e.to_string())?;
        let bars = tradeops_brokers::market::closed_bars(bars, timeframe, state.market_clock.now());
        repo.save_bars(&symbol, timeframe.as_str(), &bars, state.market.name()).await.map_err(|e| e.to_string())?;
        job.bars += bars.len() as i64;
        job.progress = ((to - start).num_milliseconds() as f64 / total).min(1.0);
        if !repo.update_leased_job(job, &leases.lease()).await.map_err(|e| e.to_string())? {
            return Err(Halt::Lost);
        }
        publish(state, job);
        from = to;
    }
    job.end = job.end.min(present);
    Ok(())
}

/// Parses the whole file, then stores it in one transaction: all of it or nothing.
pub async fn import_bars(
    repo: &dyn DataRepository,
    symbol: &Symbol,
    timeframe: Timeframe,
    body: &[u8],
) -> ApiResult<usize> {
    let text = std::str::from_utf8(body).map_err(|_| ApiError::validation("body", "the file is not UTF-8 text"))?;
    let bars = tradeops_core::csv_bars::parse_bars_csv(text, timeframe).map_err(|e| {
        ApiError::validation("body", e.to_string())
            .with_detail(serde_json::json!({"field": "body", "line": e.line, "reason": e.reason}))
    })?;
    repo.save_bars(symbol, timeframe.as_str(), &bars, "csv").await?;
    Ok(bars.len())
}
