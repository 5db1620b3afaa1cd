//! The data service: durable downloads (`POST /api/data/download`), jobs of kind
//! [`JobKind::Download`] that go `QUEUED → RUNNING` (with `progress`) `→ COMPLETED` or `FAILED`,
//! or `CANCELED`; and the CSV import of bars ([`import_bars`], the API's and the CLI's). A
//! worker runs up to `jobs.download_parallel` (4) side by side, a day of bars at a time, storing each day
//! before reporting progress. A job whose worker stopped (a crash: its lease expires) is resumed
//! (storing bars is idempotent), so no job stays `RUNNING`.

use crate::domain::{DomainError, DomainResult};
use crate::jobs::{CancelError, Halt, Jobs, Leases};
use chrono::Duration;
use tradeops_core::csv_bars::CsvError;
use tradeops_core::market::Timeframe;
use tradeops_core::time::{from_epoch_ms, to_epoch_ms};
use tradeops_core::{Symbol, Timestamp};
use tradeops_store::{DataRepository, JobKind, JobRecord, JobStatus};

/// Longest range of one job.
pub const MAX_MINUTE_DAYS: i64 = 366;
pub const MAX_DAILY_DAYS: i64 = 366 * 20;

/// Validates and queues a download.
pub async fn enqueue(
    jobs: &Jobs,
    symbol: Symbol,
    timeframe: Timeframe,
    start: Timestamp,
    end: Timestamp,
    actor: &str,
) -> DomainResult<JobRecord> {
    // The request's own faults before what only a lookup can tell.
    check_range(jobs.market_clock.now(), timeframe, start, end, "download")?;
    if jobs.market.instrument(&symbol).is_none() {
        return Err(DomainError::NotFound(format!("{symbol} is not a symbol of the {} market", jobs.market.name())));
    }
    let job = new_job(jobs, &symbol, timeframe, (start, end), JobStatus::Queued, actor);
    let repo: &dyn DataRepository = &jobs.db;
    repo.insert_job(&job).await?;
    publish(jobs, &job);
    jobs.announce(JobKind::Download).await;
    Ok(job)
}

/// The range rules downloads and backtests share: `end` after `start`, not in the future (a day
/// of slack for time zones), and at most [`MAX_MINUTE_DAYS`] of minute bars or
/// [`MAX_DAILY_DAYS`] of daily ones. `present` is the market's time now; `what` names the
/// request in the message.
pub fn check_range(
    present: Timestamp,
    timeframe: Timeframe,
    start: Timestamp,
    end: Timestamp,
    what: &str,
) -> DomainResult<()> {
    if start >= end {
        return Err(DomainError::validation("end", "must be after start"));
    }
    if end > present + Duration::days(1) {
        return Err(DomainError::validation("end", "must not be in the future"));
    }
    let max_days = if timeframe == Timeframe::Minute { MAX_MINUTE_DAYS } else { MAX_DAILY_DAYS };
    if end - start > Duration::days(max_days) {
        return Err(DomainError::validation(
            "end",
            format!("a {} {what} spans at most {max_days} days", timeframe.as_str()),
        ));
    }
    Ok(())
}

fn new_job(
    jobs: &Jobs,
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
        created_at: to_epoch_ms(&jobs.clock.now()),
        started_at: None,
        finished_at: None,
    }
}

/// Downloads a range now (a backtest's missing bars): the job is recorded like any other, as
/// `RUNNING` under a lease of its own from the start so the worker leaves it alone, and its
/// outcome is returned.
pub async fn download_now(
    jobs: &Jobs,
    symbol: &Symbol,
    timeframe: Timeframe,
    start: Timestamp,
    end: Timestamp,
    actor: &str,
) -> Result<JobRecord, String> {
    let job = new_job(jobs, symbol, timeframe, (start, end), JobStatus::Running, actor);
    let repo: &dyn DataRepository = &jobs.db;
    let leases = jobs.leases();
    repo.insert_leased_job(&job, &leases.lease()).await.map_err(|e| e.to_string())?;
    let id = job.request_id.clone();
    run_job(jobs, &leases, job).await;
    let done = repo.job(&id).await.map_err(|e| e.to_string())?.ok_or("the download job vanished")?;
    match done.status {
        JobStatus::Completed => Ok(done),
        JobStatus::Canceled => Err("the download was canceled".into()),
        _ => Err(done.error.unwrap_or_else(|| "the download failed".into())),
    }
}

/// Cancels a download (see [`crate::jobs::cancel`]) and announces it; the job as it is now.
pub async fn cancel(jobs: &Jobs, id: &str) -> DomainResult<JobRecord> {
    let refused = |e: CancelError| e.refusal("download", id);
    crate::jobs::cancel(&jobs.db, jobs.clock.as_ref(), JobKind::Download, id).await.map_err(refused)?;
    let repo: &dyn DataRepository = &jobs.db;
    let job = repo.job(id).await?.ok_or(CancelError::NotFound).map_err(refused)?;
    publish(jobs, &job);
    Ok(job)
}

fn publish(jobs: &Jobs, job: &JobRecord) {
    jobs.events.publish(crate::events::Event::DownloadUpdated(job.clone()));
}

/// The worker: takes back jobs whose worker stopped, then runs queued ones as they come.
pub async fn run_worker(jobs: Jobs) {
    crate::jobs::Pool {
        kind: JobKind::Download,
        parallel: jobs.limits.download_parallel,
        wake: |jobs| &jobs.downloads,
        load: |jobs, id| Box::pin(async move { Ok(DataRepository::job(&jobs.db, id).await?) }),
        run: |jobs, leases, job| Box::pin(async move { run_job(&jobs, &leases, job).await }),
    }
    .run(jobs)
    .await
}

/// Runs a job `leases` holds to its end, unless it loses the job on the way (then it stops
/// without writing).
async fn run_job(jobs: &Jobs, leases: &Leases, mut job: JobRecord) {
    let repo: &dyn DataRepository = &jobs.db;
    job.status = JobStatus::Running;
    job.started_at = Some(to_epoch_ms(&jobs.clock.now()));
    job.progress = 0.0;
    job.bars = 0;
    if !repo.update_leased_job(&job, &leases.lease()).await.unwrap_or(false) {
        return;
    }
    publish(jobs, &job);
    // Held until the outcome is written: its write may retry for longer than a lease.
    let _heartbeat = leases.keep_alive(JobKind::Download, &job.request_id);
    let outcome = fetch(jobs, leases, &mut job).await;
    job.finished_at = Some(to_epoch_ms(&jobs.clock.now()));
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
        publish(jobs, &job);
    }
}

/// Calendar days of minute bars fetched per step from a remote source (Alpaca): at most five
/// trading days of 960 bars (04:00–20:00 New York), within one 10,000-bar page, where a step per
/// day would spend seven requests of the request budget the radar and the engine share (a year
/// of minute bars: 53 requests instead of 366).
pub const REMOTE_MINUTE_STEP_DAYS: i64 = 7;

/// Fetches and stores the range a day at a time (a week at a time from a remote source, see
/// [`REMOTE_MINUTE_STEP_DAYS`]), reporting progress after each stored step.
/// Only bars that have closed by the market's present are stored: a range reaching past it
/// (the simulated market could generate those days) ends at the present, as
/// `GET /api/market/bars` does, and the job records its range as ending there — so a backtest
/// never counts the rest of that day, or later days, as downloaded.
async fn fetch(jobs: &Jobs, leases: &Leases, job: &mut JobRecord) -> Result<(), Halt> {
    let repo: &dyn DataRepository = &jobs.db;
    let present = to_epoch_ms(&jobs.market_clock.now());
    let symbol = Symbol::parse(&job.symbol).map_err(|e| format!("bad symbol: {e}"))?;
    let timeframe = Timeframe::parse(&job.timeframe).ok_or("bad timeframe")?;
    let (start, end) = (from_epoch_ms(job.start), from_epoch_ms(job.end));
    let step = match timeframe {
        Timeframe::Minute if jobs.market.name() == "simulated" => Duration::days(1),
        Timeframe::Minute => Duration::days(REMOTE_MINUTE_STEP_DAYS),
        Timeframe::Day => Duration::days(366),
    };
    let total = (end - start).num_milliseconds().max(1) as f64;
    let mut from = start;
    while from < end {
        let to = (from + step).min(end);
        let bars = jobs.market.bars(&symbol, timeframe, from, to).await.map_err(|e| e.to_string())?;
        let bars = tradeops_brokers::market::closed_bars(bars, timeframe, jobs.market_clock.now());
        // The step's writes are upserts, retried as a job's outcome is: a database busy for a
        // moment (another writer's long transaction on SQLite) does not fail the download.
        let id = job.request_id.clone();
        let save = || repo.save_bars(&symbol, timeframe.as_str(), &bars, jobs.market.name());
        crate::jobs::retry("downloaded bars", &id, save).await.map_err(|e| e.to_string())?;
        if timeframe == Timeframe::Minute {
            // The step's halts, where the source knows them (the simulated market): a replay of
            // these days meets them as a replay of the source does. Only those begun by the present.
            let halts: Vec<_> = jobs
                .market
                .halt_windows(&symbol, from, to)
                .into_iter()
                .filter(|h| h.start <= jobs.market_clock.now())
                .collect();
            if !halts.is_empty() {
                let save = || repo.save_halts(&symbol, &halts, jobs.market.name());
                crate::jobs::retry("downloaded halts", &id, save).await.map_err(|e| e.to_string())?;
            }
        }
        job.bars += bars.len() as i64;
        job.progress = ((to - start).num_milliseconds() as f64 / total).min(1.0);
        let current: &JobRecord = job;
        let progress = || {
            let lease = leases.lease();
            async move { repo.update_leased_job(current, &lease).await }
        };
        if !crate::jobs::retry("download progress", &id, progress).await.map_err(|e| e.to_string())? {
            return Err(Halt::Lost);
        }
        publish(jobs, job);
        from = to;
    }
    job.end = job.end.min(present);
    Ok(())
}

/// Why an import stored nothing.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    /// The file is not text, or the database refused it.
    #[error("{0}")]
    Refused(DomainError),
    /// A row of the file is malformed: its line and what is wrong with it.
    #[error("{0}")]
    BadRow(CsvError),
}

/// Parses the whole file, then stores it in one transaction: all of it or nothing.
pub async fn import_bars(
    repo: &dyn DataRepository,
    symbol: &Symbol,
    timeframe: Timeframe,
    body: &[u8],
) -> Result<usize, ImportError> {
    let text = std::str::from_utf8(body)
        .map_err(|_| ImportError::Refused(DomainError::validation("body", "the file is not UTF-8 text")))?;
    let bars = tradeops_core::csv_bars::parse_bars_csv(text, timeframe).map_err(ImportError::BadRow)?;
    repo.save_bars(symbol, timeframe.as_str(), &bars, "csv").await.map_err(|e| ImportError::Refused(e.into()))?;
    Ok(bars.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tradeops_core::time::parse_ts;

    fn refusal(start: &str, end: &str, timeframe: Timeframe) -> Option<String> {
        let present = parse_ts("2026-11-20T15:00:00Z").unwrap();
        check_range(present, timeframe, parse_ts(start).unwrap(), parse_ts(end).unwrap(), "download")
            .err()
            .map(|e| e.to_string())
    }

    #[test]
    fn a_range_is_refused_in_the_operator_s_words() {
        let minute = Timeframe::Minute;
        assert_eq!(refusal("2026-11-02T00:00:00Z", "2026-11-03T00:00:00Z", minute), None);
        assert_eq!(
            refusal("2026-11-03T00:00:00Z", "2026-11-03T00:00:00Z", minute).as_deref(),
            Some("end must be after start")
        );
        assert_eq!(refusal("2026-11-03T00:00:00Z", "2026-11-21T14:00:00Z", minute), None, "a day of slack");
        assert_eq!(
            refusal("2026-11-03T00:00:00Z", "2026-11-21T16:00:00Z", minute).as_deref(),
            Some("end must not be in the future")
        );
        assert_eq!(
            refusal("2025-01-01T00:00:00Z", "2026-11-01T00:00:00Z", minute).as_deref(),
            Some("Invalid value for end: a 1m download spans at most 366 days")
        );
        assert_eq!(refusal("2025-01-01T00:00:00Z", "2026-11-01T00:00:00Z", Timeframe::Day), None);
    }
}
