//! Durable data downloads (`POST /api/data/download`): jobs are rows that go `QUEUED →
//! RUNNING` (with `progress`) `→ COMPLETED` or `FAILED`. A worker runs up to
//! [`PARALLEL_JOBS`] side by side, a day of bars at a time, storing each day before reporting
//! progress. A job a crash left `RUNNING` is resumed at the next start (storing bars is
//! idempotent), so no job stays `RUNNING`.

use crate::error::{ApiError, ApiResult};
use crate::state::AppState;
use chrono::Duration;
use tokio::sync::Notify;
use tradeops_core::market::Timeframe;
use tradeops_core::time::{from_epoch_ms, to_epoch_ms};
use tradeops_core::{Symbol, Timestamp};
use tradeops_store::{DataRepository, JobRecord};

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
    let job = new_job(state, &symbol, timeframe, (start, end), "QUEUED", actor);
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
    status: &str,
    actor: &str,
) -> JobRecord {
    JobRecord {
        request_id: format!("dl-{}", uuid::Uuid::new_v4().simple()),
        symbol: symbol.to_string(),
        timeframe: timeframe.as_str().into(),
        start: to_epoch_ms(&start),
        end: to_epoch_ms(&end),
        status: status.into(),
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
/// `RUNNING` from the start so the worker leaves it alone, and its outcome is returned.
pub async fn download_now(
    state: &AppState,
    symbol: &Symbol,
    timeframe: Timeframe,
    start: Timestamp,
    end: Timestamp,
    actor: &str,
) -> Result<JobRecord, String> {
    let job = new_job(state, symbol, timeframe, (start, end), "RUNNING", actor);
    let repo: &dyn DataRepository = &state.db;
    repo.insert_job(&job).await.map_err(|e| e.to_string())?;
    let id = job.request_id.clone();
    run_job(state, job).await;
    let done = repo.job(&id).await.map_err(|e| e.to_string())?.ok_or("the download job vanished")?;
    match done.status.as_str() {
        "COMPLETED" => Ok(done),
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

fn publish(state: &AppState, job: &JobRecord) {
    state.events.publish(crate::events::Event::DownloadUpdated(job.clone()));
}

/// The worker: resumes interrupted jobs, then runs queued ones as they come.
pub async fn run_worker(state: AppState) {
    let repo: &dyn DataRepository = &state.db;
    match repo.jobs_in("RUNNING").await {
        Ok(interrupted) => {
            for mut job in interrupted {
                tracing::warn!(request_id = %job.request_id, "resuming a download interrupted by a restart");
                job.status = "QUEUED".into();
                if let Err(e) = repo.update_job(&job).await {
                    tracing::error!(error = %e, "could not requeue an interrupted download");
                }
            }
        }
        Err(e) => tracing::error!(error = %e, "could not look for interrupted downloads"),
    }
    crate::jobs::Pool {
        name: "downloads",
        parallel: PARALLEL_JOBS,
        wake: |state| &state.downloads.wake,
        id: |job: &JobRecord| job.request_id.clone(),
        queued: |state| Box::pin(async move { Ok(state.db.jobs_in("QUEUED").await?) }),
        run: |state, job| Box::pin(async move { run_job(&state, job).await }),
    }
    .run(state)
    .await
}

async fn run_job(state: &AppState, mut job: JobRecord) {
    let repo: &dyn DataRepository = &state.db;
    job.status = "RUNNING".into();
    job.started_at = Some(to_epoch_ms(&state.clock.now()));
    job.progress = 0.0;
    job.bars = 0;
    if repo.update_job(&job).await.is_err() {
        return;
    }
    publish(state, &job);
    let outcome = fetch(state, &mut job).await;
    job.finished_at = Some(to_epoch_ms(&state.clock.now()));
    match outcome {
        Ok(()) => {
            job.status = "COMPLETED".into();
            job.progress = 1.0;
        }
        Err(reason) => {
            tracing::warn!(request_id = %job.request_id, %reason, "download failed");
            job.status = "FAILED".into();
            job.error = Some(reason);
        }
    }
    if crate::jobs::persist("download outcome", &job.request_id, || repo.update_job(&job)).await {
        publish(state, &job);
    }
}

/// Fetches and stores the range a day at a time, reporting progress after each stored day.
/// Only bars that have closed by the market's present are stored: a range reaching past it
/// (the simulated market could generate those days) ends at the present, as
/// `GET /api/market/bars` does, and the job records its range as ending there — so a backtest
/// never counts the rest of that day, or later days, as downloaded.
async fn fetch(state: &AppState, job: &mut JobRecord) -> Result<(), String> {
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
        let bars = crate::market::closed_bars(bars, timeframe, state.market_clock.now());
        repo.save_bars(&symbol, timeframe.as_str(), &bars, state.market.name()).await.map_err(|e| e.to_string())?;
        job.bars += bars.len() as i64;
        job.progress = ((to - start).num_milliseconds() as f64 / total).min(1.0);
        repo.update_job(job).await.map_err(|e| e.to_string())?;
        publish(state, job);
        from = to;
    }
    job.end = job.end.min(present);
    Ok(())
}
