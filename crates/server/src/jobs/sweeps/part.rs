//! A sweep's part, a job of kind [`JobKind::Sweep`]: its worker ([`run_worker`]), and its run —
//! the bars made sure of and read once, then its combinations run on the process's sweep
//! threads (`jobs.backtest_parallel` of them, shared by its parts; a combination at a time as a
//! thread comes free), each over the whole range and each walk-forward window's two parts; the
//! metrics of every combination stored as the part's results ([`CombinationResult`], JSON text
//! with these field names: what the report reads back).

use super::grid::Window;
use super::StoredSweep;
use crate::jobs::run::{self, history_of, Prepared, StoredRun};
use crate::jobs::{Halt, Jobs, Leases};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Arc;
use tradeops_core::backtest::{self, BacktestSpec, BarHistory, History};
use tradeops_core::time::to_epoch_ms;
use tradeops_core::Symbol;
use tradeops_store::{JobKind, JobStatus, SweepPart, SweepRepository};

/// How often a running part's progress is written, at most: an operator watching a long part
/// sees it move; a part done sooner is written once, at its end.
const PROGRESS_EVERY: std::time::Duration = std::time::Duration::from_millis(250);

/// The worker: takes back parts whose worker stopped, then runs queued ones as they come.
pub async fn run_worker(jobs: Jobs) {
    crate::jobs::Pool {
        kind: JobKind::Sweep,
        parallel: jobs.limits.backtest_parallel,
        wake: |jobs| &jobs.sweeps,
        load: |jobs, id| Box::pin(async move { Ok(SweepRepository::sweep_part(&jobs.db, id).await?) }),
        run: |jobs, leases, part| Box::pin(async move { execute(&jobs, &leases, part).await }),
    }
    .run(jobs)
    .await
}

/// Runs a part `leases` holds to its end, unless it loses the part on the way.
async fn execute(jobs: &Jobs, leases: &Leases, mut part: SweepPart) {
    let repo: &dyn SweepRepository = &jobs.db;
    let began = tokio::time::Instant::now();
    part.status = JobStatus::Running;
    part.started_at = Some(to_epoch_ms(&jobs.clock.now()));
    if !repo.update_leased_part(&part, &leases.lease()).await.unwrap_or(false) {
        return;
    }
    let marked_running = began.elapsed();
    let _heartbeat = leases.keep_alive(JobKind::Sweep, &part.part_id);
    let outcome = compute(jobs, leases, &mut part).await;
    part.finished_at = Some(to_epoch_ms(&jobs.clock.now()));
    match outcome {
        Ok(results) => {
            part.status = JobStatus::Completed;
            part.progress = 1.0;
            part.results = Some(serde_json::to_string(&results).unwrap_or_default());
        }
        Err(Halt::Failed(reason)) => {
            tracing::warn!(part = %part.part_id, %reason, "sweep part failed");
            part.status = JobStatus::Failed;
            part.error = Some(reason);
        }
        Err(Halt::Lost) => return,
    }
    let released = leases.released();
    let write = || async { repo.update_leased_part(&part, &released).await.map(|_| ()) };
    let computed = began.elapsed();
    crate::jobs::persist("sweep part outcome", &part.part_id, write).await;
    tracing::debug!(
        part = %part.part_id,
        mark_running_ms = marked_running.as_secs_f64() * 1e3,
        store_results_ms = (began.elapsed() - computed).as_secs_f64() * 1e3,
        "sweep part ended"
    );
}

async fn compute(jobs: &Jobs, leases: &Leases, part: &mut SweepPart) -> Result<Vec<CombinationResult>, Halt> {
    let repo: &dyn SweepRepository = &jobs.db;
    let began = tokio::time::Instant::now();
    let sweep = repo
        .sweep(&part.sweep_id)
        .await
        .map_err(|e| e.to_string())?
        .ok_or_else(|| format!("the sweep {} vanished", part.sweep_id))?;
    let stored: StoredSweep = serde_json::from_str(&sweep.request).map_err(|e| format!("unreadable sweep: {e}"))?;
    let combos: Vec<BTreeMap<String, f64>> =
        serde_json::from_str(&part.combos).map_err(|e| format!("unreadable combinations: {e}"))?;
    let read_sweep = began.elapsed();
    let bars = run::ensure_bars(jobs, &stored.run, &format!("sweep {}", sweep.sweep_id)).await?;
    let read_bars = began.elapsed();
    let Prepared { settings, symbol, bars, calendar } = run::prepare(&stored.run, bars)?;
    // The part's combinations run on the sweep threads (rayon's pool), taken one at a time as
    // threads come free (runs differ in cost: a fast pair trades more), each thread with a
    // history of its own that its runs share (a history answers the same for a date whoever
    // asks; what it keeps is a cache), so its cost — for minute bars, a pass over every bar —
    // is paid once a thread, not once a run.
    let pool = jobs
        .sweep_threads
        .get_or_init(|| {
            let threads = jobs.limits.backtest_parallel.max(1);
            Arc::new(rayon::ThreadPoolBuilder::new().num_threads(threads).build().expect("threads for sweeps"))
        })
        .clone();
    let threads = pool.current_num_threads().clamp(1, combos.len().max(1));
    let for_histories = jobs.clone();
    let (run, windows) = (stored.run, stored.windows);
    let (progress_tx, mut progress_rx) = tokio::sync::watch::channel(0usize);
    let total = combos.len();
    // Set when the part is canceled or taken over: its threads stop at their next combination.
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stopped = stop.clone();
    let timeframe = run.timeframe;
    let task = tokio::task::spawn_blocking(move || {
        use rayon::prelude::*;
        // Each thread's history is built on it as it takes its first combination, not on the
        // service's runtime (for minute bars a pass over every bar); the bars' own history is
        // built once and its facts shared by every thread's.
        let bar_history = std::sync::OnceLock::new();
        let histories: Vec<std::sync::Mutex<Option<Box<dyn History + Send>>>> =
            (0..threads).map(|_| std::sync::Mutex::new(None)).collect();
        let done = std::sync::atomic::AtomicUsize::new(0);
        pool.install(|| {
            combos
                .par_iter()
                .map(|parameters| {
                    if stopped.load(std::sync::atomic::Ordering::Relaxed) {
                        return Err("stopped".to_string());
                    }
                    // This thread's history (never contended: a thread runs one run at a time).
                    let slot = rayon::current_thread_index().unwrap_or(0) % histories.len();
                    let mut history = histories[slot].lock().unwrap_or_else(|e| e.into_inner());
                    let history = history.get_or_insert_with(|| {
                        let of_bars = || bar_history.get_or_init(|| BarHistory::new(&bars, timeframe)).clone();
                        history_of(&for_histories, &symbol, calendar, of_bars)
                    });
                    let row = combination(&run, &symbol, &settings, &bars, &windows, history.as_mut(), parameters)?;
                    // Every 10 % of the part (a progress write per combination would cost more
                    // than a daily-bar run takes).
                    let n = done.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
                    if n * 10 / total > (n - 1) * 10 / total {
                        progress_tx.send_replace(n);
                    }
                    Ok(row)
                })
                .collect::<Result<Vec<CombinationResult>, String>>()
        })
        .map(|rows| (rows, began.elapsed()))
    });
    tokio::pin!(task);
    let mut last_written = tokio::time::Instant::now();
    let (rows, computed) = loop {
        tokio::select! {
            done = &mut task => break done.map_err(|e| format!("the sweep part panicked: {e}"))??,
            changed = progress_rx.changed() => {
                // At most every PROGRESS_EVERY: a daily-bar part is done in tens of
                // milliseconds, and its ten progress writes were as many database writes
                // beside its compute; the heartbeat keeps the lease meanwhile.
                let done = changed.is_ok().then(|| *progress_rx.borrow_and_update());
                if let Some(done) = done.filter(|_| last_written.elapsed() >= PROGRESS_EVERY) {
                    last_written = tokio::time::Instant::now();
                    part.progress = (done as f64 / total.max(1) as f64).min(0.99);
                    match repo.update_leased_part(part, &leases.lease()).await {
                        Ok(true) | Err(_) => {}
                        Ok(false) => {
                            stop.store(true, std::sync::atomic::Ordering::Relaxed);
                            return Err(Halt::Lost);
                        }
                    }
                }
            }
        }
    };
    // Where a part's time goes, for whoever tunes workers (`TRADEOPS_LOG=tradeops_server::jobs=debug`).
    tracing::debug!(
        part = %part.part_id,
        combinations = total,
        read_sweep_ms = read_sweep.as_secs_f64() * 1e3,
        read_bars_ms = (read_bars - read_sweep).as_secs_f64() * 1e3,
        combinations_ms = (computed - read_bars).as_secs_f64() * 1e3,
        "sweep part computed"
    );
    Ok(rows)
}

/// One combination's row: its run over the whole range, and over each window's two parts.
fn combination(
    run: &StoredRun,
    symbol: &Symbol,
    settings: &tradeops_core::Settings,
    bars: &[tradeops_core::market::Bar],
    windows: &[Window],
    history: &mut dyn tradeops_core::backtest::History,
    parameters: &BTreeMap<String, f64>,
) -> Result<CombinationResult, String> {
    let spec = BacktestSpec {
        strategy_id: run.strategy_id.clone(),
        symbol: symbol.clone(),
        timeframe: run.timeframe,
        start: run.start,
        parameters: parameters.clone(),
        initial_cash: run.initial_cash,
        commission_rate: run.commission_rate,
        slippage_bps: run.slippage_bps,
        fill: run.fill,
    };
    let failed = |e: backtest::BacktestError| format!("{parameters:?}: {e}");
    let output = backtest::run_metrics(&spec, settings, bars, history, &mut |_| {}).map_err(failed)?;
    let mut row =
        CombinationResult { metrics: metrics_of(&output), parameters: parameters.clone(), windows: Vec::new() };
    if !windows.is_empty() {
        // Each window's two parts, run afresh (indicators warm up inside each).
        let mut part = |from: i64, to: i64| -> Result<Option<Metrics>, String> {
            let from_ts = tradeops_core::time::from_epoch_ms(from);
            let lo = if from_ts <= run.start { 0 } else { bars.partition_point(|b| b.start < from_ts) };
            let hi = bars.partition_point(|b| to_epoch_ms(&b.start) < to).max(lo);
            let spec = BacktestSpec { start: from_ts.max(run.start), ..spec.clone() };
            match backtest::run_metrics(&spec, settings, &bars[lo..hi], history, &mut |_| {}) {
                Ok(output) => Ok(Some(metrics_of(&output))),
                Err(backtest::BacktestError::NoData { .. }) => Ok(None),
                Err(e) => Err(failed(e)),
            }
        };
        let mut parts = Vec::with_capacity(windows.len());
        for w in windows {
            parts.push(WindowRuns { in_sample: part(w.start, w.split)?, out_of_sample: part(w.split, w.end)? });
        }
        row.windows = parts;
    }
    Ok(row)
}

/// The metrics a sweep keeps of a run (of a whole range or of a window's part).
fn metrics_of(output: &backtest::BacktestMetrics) -> Metrics {
    let m = &output.metrics;
    Metrics {
        total_return: m.total_return,
        sharpe_ratio: m.sharpe_ratio,
        max_drawdown: m.max_drawdown,
        win_rate: m.win_rate,
        profit_factor: m.profit_factor,
        win_loss_ratio: m.win_loss_ratio,
        trade_count: m.trade_count,
        expectancy: m.expectancy.map(backtest::dollars),
        final_equity: backtest::dollars(output.final_equity),
    }
}

/// The metrics a sweep keeps of a run (of a whole range or of a window's part): ratios as
/// fractions, amounts in dollars; `None` where the run leaves a figure undefined (no trades,
/// no losing trade, too few days for a Sharpe ratio). Stored in this field order, read back by
/// name.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Metrics {
    pub total_return: f64,
    pub sharpe_ratio: Option<f64>,
    pub max_drawdown: f64,
    pub win_rate: Option<f64>,
    pub profit_factor: Option<f64>,
    pub win_loss_ratio: Option<f64>,
    pub trade_count: u64,
    pub expectancy: Option<f64>,
    pub final_equity: f64,
}

/// One combination's results, as a part stores them: its metrics over the whole range (their
/// fields at the top level, beside `parameters`) and, for a walk-forward sweep, over each
/// window's two parts (`windows`, left out otherwise).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CombinationResult {
    #[serde(flatten)]
    pub metrics: Metrics,
    pub parameters: BTreeMap<String, f64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub windows: Vec<WindowRuns>,
}

/// A combination's runs over one walk-forward window: each part `None` when it has no bar.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WindowRuns {
    pub in_sample: Option<Metrics>,
    pub out_of_sample: Option<Metrics>,
}
