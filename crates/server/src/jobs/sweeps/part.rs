//! A sweep's part, a job of kind [`JobKind::Sweep`]: its worker ([`run_worker`]), and its run —
//! the bars made sure of and read once, then its combinations run on the process's sweep
//! threads (`jobs.backtest_parallel` of them, shared by its parts; a combination at a time as a
//! thread comes free), each over the whole range and each walk-forward window's two parts; the
//! metrics of every combination stored as the part's results.

use super::grid::Window;
use super::StoredSweep;
use crate::jobs::run::{self, history_of, Prepared, StoredRun};
use crate::jobs::{Halt, Jobs, Leases};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::sync::Arc;
use tradeops_core::backtest::{self, BacktestSpec};
use tradeops_core::time::to_epoch_ms;
use tradeops_core::Symbol;
use tradeops_store::{JobKind, JobStatus, SweepPart, SweepRepository};

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
    part.status = JobStatus::Running;
    part.started_at = Some(to_epoch_ms(&jobs.clock.now()));
    if !repo.update_leased_part(&part, &leases.lease()).await.unwrap_or(false) {
        return;
    }
    let _heartbeat = leases.keep_alive(JobKind::Sweep, &part.part_id);
    let outcome = compute(jobs, leases, &mut part).await;
    part.finished_at = Some(to_epoch_ms(&jobs.clock.now()));
    match outcome {
        Ok(results) => {
            part.status = JobStatus::Completed;
            part.progress = 1.0;
            part.results = Some(results.to_string());
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
    crate::jobs::persist("sweep part outcome", &part.part_id, write).await;
}

async fn compute(jobs: &Jobs, leases: &Leases, part: &mut SweepPart) -> Result<Value, Halt> {
    let repo: &dyn SweepRepository = &jobs.db;
    let sweep = repo
        .sweep(&part.sweep_id)
        .await
        .map_err(|e| e.to_string())?
        .ok_or_else(|| format!("the sweep {} vanished", part.sweep_id))?;
    let stored: StoredSweep = serde_json::from_str(&sweep.request).map_err(|e| format!("unreadable sweep: {e}"))?;
    let combos: Vec<BTreeMap<String, f64>> =
        serde_json::from_str(&part.combos).map_err(|e| format!("unreadable combinations: {e}"))?;
    let bars = run::ensure_bars(jobs, &stored.run, &format!("sweep {}", sweep.sweep_id)).await?;
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
        // Built here, not on the service's runtime: for minute bars a pass over every bar.
        let histories: Vec<std::sync::Mutex<_>> = (0..threads)
            .map(|_| std::sync::Mutex::new(history_of(&for_histories, &symbol, calendar, &bars, timeframe)))
            .collect();
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
                    let row = combination(&run, &symbol, &settings, &bars, &windows, history.as_mut(), parameters)?;
                    // Every 10 % of the part (a progress write per combination would cost more
                    // than a daily-bar run takes).
                    let n = done.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
                    if n * 10 / total > (n - 1) * 10 / total {
                        progress_tx.send_replace(n);
                    }
                    Ok(row)
                })
                .collect::<Result<Vec<Value>, String>>()
        })
    });
    tokio::pin!(task);
    let rows = loop {
        tokio::select! {
            done = &mut task => break done.map_err(|e| format!("the sweep part panicked: {e}"))??,
            changed = progress_rx.changed() => {
                if changed.is_ok() {
                    part.progress = (*progress_rx.borrow_and_update() as f64 / total.max(1) as f64).min(0.99);
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
    Ok(Value::Array(rows))
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
) -> Result<Value, String> {
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
    let mut row = metrics_of(&output);
    row.insert("parameters".into(), json!(parameters));
    if !windows.is_empty() {
        // Each window's two parts, run afresh (indicators warm up inside each).
        let mut part = |from: i64, to: i64| -> Result<Value, String> {
            let from_ts = tradeops_core::time::from_epoch_ms(from);
            let lo = if from_ts <= run.start { 0 } else { bars.partition_point(|b| b.start < from_ts) };
            let hi = bars.partition_point(|b| to_epoch_ms(&b.start) < to).max(lo);
            let spec = BacktestSpec { start: from_ts.max(run.start), ..spec.clone() };
            match backtest::run_metrics(&spec, settings, &bars[lo..hi], history, &mut |_| {}) {
                Ok(output) => Ok(Value::Object(metrics_of(&output))),
                Err(backtest::BacktestError::NoData { .. }) => Ok(Value::Null),
                Err(e) => Err(failed(e)),
            }
        };
        let mut parts = Vec::with_capacity(windows.len());
        for w in windows {
            parts.push(json!({"in_sample": part(w.start, w.split)?, "out_of_sample": part(w.split, w.end)?}));
        }
        row.insert("windows".into(), Value::Array(parts));
    }
    Ok(Value::Object(row))
}

/// The metrics a sweep keeps of a run (of a whole range or of a window's part).
fn metrics_of(output: &backtest::BacktestMetrics) -> Map<String, Value> {
    let m = &output.metrics;
    let mut row = Map::new();
    row.insert("total_return".into(), json!(m.total_return));
    row.insert("sharpe_ratio".into(), json!(m.sharpe_ratio));
    row.insert("max_drawdown".into(), json!(m.max_drawdown));
    row.insert("win_rate".into(), json!(m.win_rate));
    row.insert("profit_factor".into(), json!(m.profit_factor));
    row.insert("win_loss_ratio".into(), json!(m.win_loss_ratio));
    row.insert("trade_count".into(), json!(m.trade_count));
    row.insert("expectancy".into(), json!(m.expectancy.map(backtest::dollars)));
    row.insert("final_equity".into(), json!(backtest::dollars(output.final_equity)));
    row
}
