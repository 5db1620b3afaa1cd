//! Parameter sweeps (`POST /api/backtests/sweeps`, issue 26.1): one strategy's parameters tried
//! over a grid (or a reproducible random sample of it) on one symbol and range, each
//! combination a backtest on the same engine as live. The combinations are split into parts of
//! at most [`PART_SIZE`], each a durable job of kind [`JobKind::Sweep`] — claimed, leased and
//! taken back like a backtest, so the parts run in parallel on every process that runs jobs
//! (`jobs.backtest_parallel` at a time each, one core apiece). A part reads the bars once and
//! runs its combinations one after another, storing their metrics. A sweep's status, progress
//! and result table are read from its parts: ranked by the objective, combinations that break
//! the constraint listed after the others.

use crate::domain::{DomainError, DomainResult};
use crate::jobs::backtests::{history_of, prepare, validate, BacktestRequest, Prepared, Stored};
use crate::jobs::{CancelError, Halt, Jobs, Leases};
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use tradeops_core::backtest::{self, fills::FillModel, BacktestSpec};
use tradeops_core::market::Timeframe;
use tradeops_core::time::to_epoch_ms;
use tradeops_core::{Symbol, Timestamp};
use tradeops_store::{JobKind, JobStatus, SweepPart, SweepRecord, SweepRepository};

/// Combinations a part runs (a part is what one worker takes at a time).
pub const PART_SIZE: usize = 25;
/// The most combinations one sweep may try.
pub const MAX_COMBINATIONS: usize = 10_000;
/// The most values one parameter's axis may have.
pub const MAX_AXIS_VALUES: usize = 1_000;

/// `POST /api/backtests/sweeps`: a backtest's fields, with a grid of parameters instead of one
/// set, what to rank by and what a combination must not break.
#[derive(Clone, Debug, Deserialize, Serialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SweepRequest {
    /// A strategy of `GET /api/strategies`.
    pub strategy_id: String,
    pub symbol: Symbol,
    /// RFC 3339: bars starting at or after it.
    #[serde(with = "tradeops_core::time::serde_ts")]
    #[schema(value_type = String, format = DateTime)]
    pub start: Timestamp,
    /// RFC 3339: bars starting before it.
    #[serde(with = "tradeops_core::time::serde_ts")]
    #[schema(value_type = String, format = DateTime)]
    pub end: Timestamp,
    /// `1m` (default) or `1d`.
    #[schema(nullable = false)]
    pub timeframe: Option<Timeframe>,
    /// Per parameter, the values to try: a range `{"from": 5, "to": 50, "step": 5}` (both ends
    /// included) or a list `[5, 10, 20]`; at most 1,000 values each and 10,000 combinations in
    /// all. Parameters left out keep their defaults. Combinations the strategy refuses (for
    /// `sma_cross`, `fast` not below `slow`) are skipped and counted.
    #[schema(value_type = Object)]
    pub grid: Map<String, Value>,
    /// Try only this many combinations, drawn at random from the grid (reproducibly, by `seed`).
    #[schema(nullable = false, minimum = 1, maximum = 10000)]
    pub sample: Option<u32>,
    /// The random sample's seed (default 0).
    #[schema(nullable = false)]
    pub seed: Option<u64>,
    /// What ranks the combinations, highest first (default `sharpe_ratio`).
    #[schema(nullable = false)]
    pub objective: Option<Objective>,
    /// What a combination must not break to be ranked with the others.
    #[schema(nullable = false)]
    pub constraint: Option<Constraint>,
    /// Dollars (default 100,000).
    #[schema(value_type = Option<f64>, nullable = false, minimum = 1, maximum = 1000000000000.0)]
    #[serde(default, with = "rust_decimal::serde::float_option")]
    pub initial_cash: Option<Decimal>,
    /// Fraction of traded value charged on every fill (default 0).
    #[schema(value_type = Option<f64>, nullable = false, minimum = 0, maximum = 0.1)]
    #[serde(default, with = "rust_decimal::serde::float_option")]
    pub commission_rate: Option<Decimal>,
    /// Basis points every fill moves against the order (default 0).
    #[schema(value_type = Option<f64>, nullable = false, minimum = 0, maximum = 1000)]
    #[serde(default, with = "rust_decimal::serde::float_option")]
    pub slippage_bps: Option<Decimal>,
    /// `NEXT_OPEN` (default) or `CLOSE`.
    #[schema(nullable = false)]
    pub fill: Option<FillModel>,
    /// Overrides of the effective settings for these runs only, as for a backtest.
    #[schema(value_type = Option<Object>, nullable = false)]
    pub settings: Option<Map<String, Value>>,
}

/// The metric a sweep ranks by, highest first.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Objective {
    #[default]
    SharpeRatio,
    TotalReturn,
    ProfitFactor,
    WinRate,
    Expectancy,
    FinalEquity,
}

impl Objective {
    fn key(self) -> &'static str {
        match self {
            Objective::SharpeRatio => "sharpe_ratio",
            Objective::TotalReturn => "total_return",
            Objective::ProfitFactor => "profit_factor",
            Objective::WinRate => "win_rate",
            Objective::Expectancy => "expectancy",
            Objective::FinalEquity => "final_equity",
        }
    }
}

/// Limits a ranked combination keeps.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Constraint {
    /// The deepest drawdown allowed, a fraction (0.25: 25 %).
    #[schema(nullable = false, minimum = 0, maximum = 1)]
    pub max_drawdown: Option<f64>,
    /// The fewest trades a combination must make.
    #[schema(nullable = false, minimum = 0, maximum = 1000000)]
    pub min_trades: Option<u64>,
}

/// What a sweep stores as its request: the validated backtest (of its first combination) and
/// the sweep's own fields.
#[derive(Clone, Debug, Deserialize, Serialize)]
struct StoredSweep {
    run: Stored,
    grid: Map<String, Value>,
    sample: Option<u32>,
    seed: u64,
    objective: Objective,
    constraint: Constraint,
    /// Combinations the strategy refused (skipped).
    skipped: usize,
}

/// One parameter's values, checked.
fn axis(name: &str, spec: &Value) -> DomainResult<Vec<f64>> {
    let field = format!("grid.{name}");
    let refuse = |why: &str| DomainError::validation(field.clone(), why.to_string());
    let values: Vec<f64> = match spec {
        Value::Array(items) => {
            let values: Option<Vec<f64>> = items.iter().map(Value::as_f64).collect();
            values.ok_or_else(|| refuse("must be a list of numbers or {\"from\", \"to\", \"step\"}"))?
        }
        Value::Object(range) => {
            let get = |k: &str| range.get(k).and_then(Value::as_f64);
            let unknown = range.keys().any(|k| !["from", "to", "step"].contains(&k.as_str()));
            let (Some(from), Some(to), Some(step), false) = (get("from"), get("to"), get("step"), unknown) else {
                return Err(refuse("a range needs from, to and step (numbers), and nothing else"));
            };
            if step <= 0.0 || !step.is_finite() || !from.is_finite() || !to.is_finite() || to < from {
                return Err(refuse("a range needs a positive step and to not below from"));
            }
            let count = ((to - from) / step + 1e-9).floor() + 1.0;
            if count > MAX_AXIS_VALUES as f64 {
                return Err(refuse("at most 1,000 values"));
            }
            // Values as decimal steps from `from`, rounded off float noise.
            (0..count as usize).map(|i| ((from + step * i as f64) * 1e9).round() / 1e9).collect()
        }
        _ => return Err(refuse("must be a list of numbers or {\"from\", \"to\", \"step\"}")),
    };
    if values.is_empty() || values.len() > MAX_AXIS_VALUES || values.iter().any(|v| !v.is_finite()) {
        return Err(refuse("must have 1 to 1,000 finite values"));
    }
    Ok(values)
}

/// Every combination of the grid (the first axis varying slowest), or `sample` of them drawn
/// by `seed` without repeats, in grid order.
fn combinations(grid: &Map<String, Value>, sample: Option<u32>, seed: u64) -> DomainResult<Vec<Map<String, Value>>> {
    if grid.is_empty() {
        return Err(DomainError::validation("grid", "must name at least one parameter"));
    }
    let axes: Vec<(String, Vec<f64>)> =
        grid.iter().map(|(name, spec)| Ok((name.clone(), axis(name, spec)?))).collect::<DomainResult<_>>()?;
    let total = axes.iter().try_fold(1usize, |n, (_, values)| n.checked_mul(values.len())).unwrap_or(usize::MAX);
    let wanted = match sample {
        Some(0) => return Err(DomainError::validation("sample", "must be from 1 to 10,000")),
        Some(n) => (n as usize).min(total),
        None => total,
    };
    if wanted > MAX_COMBINATIONS {
        return Err(DomainError::validation(
            "grid",
            format!("has {total} combinations; at most {MAX_COMBINATIONS} (or draw a sample)"),
        ));
    }
    let indices: Vec<usize> = if wanted == total {
        (0..total).collect()
    } else {
        // Floyd's algorithm on a seeded generator: `wanted` distinct indices, reproducibly.
        let mut state = seed;
        let mut chosen = std::collections::BTreeSet::new();
        for j in (total - wanted)..total {
            let t = (splitmix64(&mut state) % (j as u64 + 1)) as usize;
            if !chosen.insert(t) {
                chosen.insert(j);
            }
        }
        chosen.into_iter().collect()
    };
    Ok(indices
        .into_iter()
        .map(|mut index| {
            let mut combo = Map::new();
            for (name, values) in axes.iter().rev() {
                combo.insert(name.clone(), json!(values[index % values.len()]));
                index /= values.len();
            }
            // In the grid's own order of parameters.
            axes.iter().map(|(name, _)| (name.clone(), combo[name].clone())).collect()
        })
        .collect())
}

/// SplitMix64: the sample's generator (fixed here, so a seed draws the same sample in every
/// version).
fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Validates a sweep and queues its parts.
pub async fn enqueue(jobs: &Jobs, req: SweepRequest, actor: &str) -> DomainResult<SweepRecord> {
    let combos = combinations(&req.grid, req.sample, req.seed.unwrap_or_default())?;
    let timeframe = req.timeframe.unwrap_or(Timeframe::Minute);
    let base = |parameters: Option<Map<String, Value>>| BacktestRequest {
        strategy_id: req.strategy_id.clone(),
        symbol: req.symbol.clone(),
        start: req.start,
        end: req.end,
        timeframe: Some(timeframe),
        parameters,
        initial_cash: req.initial_cash,
        commission_rate: req.commission_rate,
        slippage_bps: req.slippage_bps,
        fill: req.fill,
        settings: req.settings.clone(),
    };
    // Everything but the parameters, checked once (the first combination's parameters aside).
    let mut run = validate(jobs, &base(None)).await?;
    let settings = tradeops_core::Settings::from_json(&run.effective_settings).map_err(DomainError::Validation)?;
    let mut valid: Vec<BTreeMap<String, f64>> = Vec::with_capacity(combos.len());
    let mut first_refusal = None;
    for combo in &combos {
        match backtest::validate_parameters(&req.strategy_id, timeframe, combo, &settings) {
            Ok(parameters) => valid.push(parameters),
            Err(errors) => {
                first_refusal.get_or_insert(errors);
            }
        }
    }
    if valid.is_empty() {
        let errors = first_refusal.unwrap_or_default();
        return Err(DomainError::Validation(
            errors
                .into_iter()
                .map(|mut e| {
                    e.field = format!("grid.{}", e.field.trim_start_matches("parameters."));
                    e.reason = format!("{} (in every combination)", e.reason);
                    e
                })
                .collect(),
        ));
    }
    if let Some(constraint) = &req.constraint {
        if constraint.max_drawdown.is_some_and(|d| !(0.0..=1.0).contains(&d)) {
            return Err(DomainError::validation("constraint.max_drawdown", "must be a fraction from 0 to 1"));
        }
    }
    run.parameters = valid[0].clone();
    let skipped = combos.len() - valid.len();
    let stored = StoredSweep {
        run,
        grid: req.grid.clone(),
        sample: req.sample,
        seed: req.seed.unwrap_or_default(),
        objective: req.objective.unwrap_or_default(),
        constraint: req.constraint.clone().unwrap_or_default(),
        skipped,
    };
    let now = to_epoch_ms(&jobs.clock.now());
    let sweep_id = format!("sw-{}", uuid::Uuid::new_v4().simple());
    let record = SweepRecord {
        sweep_id: sweep_id.clone(),
        strategy_id: req.strategy_id.clone(),
        symbol: req.symbol.to_string(),
        request: serde_json::to_string(&stored).map_err(DomainError::internal)?,
        combinations: valid.len() as i64,
        requested_by: actor.to_string(),
        created_at: now,
    };
    let parts: Vec<SweepPart> = valid
        .chunks(PART_SIZE)
        .enumerate()
        .map(|(n, chunk)| SweepPart {
            part_id: format!("{sweep_id}-{n:04}"),
            sweep_id: sweep_id.clone(),
            status: JobStatus::Queued,
            progress: 0.0,
            combos: serde_json::to_string(chunk).unwrap_or_default(),
            results: None,
            error: None,
            created_at: now,
            started_at: None,
            finished_at: None,
        })
        .collect();
    let repo: &dyn SweepRepository = &jobs.db;
    repo.insert_sweep(&record, &parts).await?;
    jobs.announce(JobKind::Sweep).await;
    Ok(record)
}

/// Cancels every part of a sweep not ended yet: queued ones at once, running ones at their
/// next progress point. Refused when every part had ended.
pub async fn cancel(jobs: &Jobs, id: &str) -> DomainResult<()> {
    let repo: &dyn SweepRepository = &jobs.db;
    repo.sweep(id).await?.ok_or_else(|| DomainError::NotFound(format!("No sweep {id:?}")))?;
    let parts = repo.sweep_parts(id, false).await?;
    let mut canceled = 0;
    let mut last_final = JobStatus::Completed;
    for part in &parts {
        match crate::jobs::cancel(&jobs.db, jobs.clock.as_ref(), JobKind::Sweep, &part.part_id).await {
            Ok(()) => canceled += 1,
            Err(CancelError::Final(status)) => last_final = status,
            Err(e) => return Err(e.refusal("sweep", id)),
        }
    }
    if canceled == 0 {
        return Err(CancelError::Final(last_final).refusal("sweep", id));
    }
    Ok(())
}

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
    let Prepared { settings, symbol, bars, calendar } =
        prepare(jobs, &stored.run, &format!("sweep {}", sweep.sweep_id)).await?;
    let histories: Vec<_> =
        combos.iter().map(|_| history_of(jobs, &symbol, calendar, &bars, stored.run.timeframe)).collect();
    let run = stored.run;
    let (progress_tx, mut progress_rx) = tokio::sync::watch::channel(0usize);
    let total = combos.len();
    let task = tokio::task::spawn_blocking(move || {
        let mut rows = Vec::with_capacity(combos.len());
        for (done, (parameters, mut history)) in combos.into_iter().zip(histories).enumerate() {
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
            let output = backtest::run(&spec, &settings, &bars, history.as_mut(), &mut |_| {})
                .map_err(|e| format!("{parameters:?}: {e}"))?;
            let m = &output.metrics;
            rows.push(json!({
                "parameters": parameters,
                "total_return": m.total_return,
                "sharpe_ratio": m.sharpe_ratio,
                "max_drawdown": m.max_drawdown,
                "win_rate": m.win_rate,
                "profit_factor": m.profit_factor,
                "win_loss_ratio": m.win_loss_ratio,
                "trade_count": m.trade_count,
                "expectancy": m.expectancy.map(backtest::dollars),
                "final_equity": backtest::dollars(output.final_equity),
            }));
            // Every 10 % of the part (a progress write per combination would cost more than
            // a daily-bar run takes).
            if (done + 1) * 10 / total > done * 10 / total {
                progress_tx.send_replace(done + 1);
            }
        }
        Ok::<_, String>(rows)
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
                        Ok(false) => return Err(Halt::Lost),
                    }
                }
            }
        }
    };
    Ok(Value::Array(rows))
}

/// A sweep as the API shows it: the request, status and progress read from its parts, and —
/// with `results` — every combination's metrics ranked by the objective (those breaking the
/// constraint after the others, `meets_constraint` false), the best one, and `skipped`.
pub async fn view(jobs: &Jobs, sweep: &SweepRecord, results: bool) -> DomainResult<Value> {
    let repo: &dyn SweepRepository = &jobs.db;
    let parts = repo.sweep_parts(&sweep.sweep_id, results).await?;
    let stored: StoredSweep = serde_json::from_str(&sweep.request).map_err(DomainError::internal)?;
    let statuses: Vec<JobStatus> = parts.iter().map(|p| p.status).collect();
    let status = if statuses.contains(&JobStatus::Failed) {
        JobStatus::Failed
    } else if statuses.iter().all(|s| *s == JobStatus::Completed) {
        JobStatus::Completed
    } else if statuses.contains(&JobStatus::Canceled) && statuses.iter().all(|s| s.is_final()) {
        JobStatus::Canceled
    } else if statuses.iter().all(|s| *s == JobStatus::Queued) {
        JobStatus::Queued
    } else {
        JobStatus::Running
    };
    let sizes: Vec<usize> =
        parts.iter().map(|p| serde_json::from_str::<Vec<Value>>(&p.combos).map(|c| c.len()).unwrap_or(0)).collect();
    let completed: usize =
        parts.iter().zip(&sizes).filter(|(p, _)| p.status == JobStatus::Completed).map(|(_, n)| n).sum();
    let total = sweep.combinations.max(1) as f64;
    let progress = parts.iter().zip(&sizes).map(|(p, n)| p.progress * *n as f64).sum::<f64>() / total;
    let error = parts.iter().find_map(|p| p.error.clone());
    let mut body = json!({
        "sweep_id": sweep.sweep_id,
        "status": status,
        "progress": (progress * 1e4).round() / 1e4,
        "strategy_id": sweep.strategy_id,
        "symbol": sweep.symbol,
        "timeframe": stored.run.timeframe.as_str(),
        "start": tradeops_core::time::format_ts(&stored.run.start),
        "end": tradeops_core::time::format_ts(&stored.run.end),
        "grid": stored.grid,
        "sample": stored.sample,
        "seed": stored.seed,
        "objective": stored.objective,
        "constraint": stored.constraint,
        "combinations": sweep.combinations,
        "completed": completed,
        "skipped": stored.skipped,
        "parts": parts.len(),
        "error": error,
        "requested_by": sweep.requested_by,
        "created_at": tradeops_core::time::format_ts(&tradeops_core::time::from_epoch_ms(sweep.created_at)),
    });
    if results {
        let mut rows: Vec<Value> = parts
            .iter()
            .filter_map(|p| p.results.as_deref())
            .filter_map(|r| serde_json::from_str::<Vec<Value>>(r).ok())
            .flatten()
            .collect();
        let key = stored.objective.key();
        for row in &mut rows {
            let meets = stored.constraint.max_drawdown.is_none_or(|d| row["max_drawdown"].as_f64().unwrap_or(0.0) <= d)
                && stored.constraint.min_trades.is_none_or(|n| row["trade_count"].as_u64().unwrap_or(0) >= n);
            row["meets_constraint"] = json!(meets);
        }
        let score = |row: &Value| -> f64 {
            let value = &row[key];
            value.as_f64().or_else(|| value.as_str().and_then(|s| s.parse().ok())).unwrap_or(f64::NEG_INFINITY)
        };
        // Stable: ties keep grid order.
        rows.sort_by(|a, b| {
            let (ma, mb) = (a["meets_constraint"] == true, b["meets_constraint"] == true);
            mb.cmp(&ma).then(score(b).partial_cmp(&score(a)).unwrap_or(std::cmp::Ordering::Equal))
        });
        let best = rows.first().filter(|r| r["meets_constraint"] == true && score(r).is_finite()).cloned();
        body["best"] = best.unwrap_or(Value::Null);
        body["results"] = Value::Array(rows);
    }
    Ok(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grid(value: Value) -> Map<String, Value> {
        value.as_object().unwrap().clone()
    }

    #[test]
    fn a_grid_expands_to_every_combination_in_order() {
        let combos =
            combinations(&grid(json!({"fast": {"from": 5, "to": 15, "step": 5}, "slow": [20, 40]})), None, 0).unwrap();
        let pairs: Vec<(f64, f64)> =
            combos.iter().map(|c| (c["fast"].as_f64().unwrap(), c["slow"].as_f64().unwrap())).collect();
        assert_eq!(pairs, [(5.0, 20.0), (5.0, 40.0), (10.0, 20.0), (10.0, 40.0), (15.0, 20.0), (15.0, 40.0)]);
        // backtesting.py's grid: fast 5..50 step 5 × slow 10..100 step 10.
        let goog = combinations(
            &grid(json!({"fast": {"from": 5, "to": 50, "step": 5}, "slow": {"from": 10, "to": 100, "step": 10}})),
            None,
            0,
        )
        .unwrap();
        assert_eq!(goog.len(), 100);
        assert_eq!(goog[99]["fast"], 50.0);
        assert_eq!(goog[99]["slow"], 100.0);
        // Float steps land on their decimals.
        let fine = combinations(&grid(json!({"x": {"from": 0.1, "to": 0.3, "step": 0.1}})), None, 0).unwrap();
        assert_eq!(fine.iter().map(|c| c["x"].as_f64().unwrap()).collect::<Vec<_>>(), [0.1, 0.2, 0.3]);
    }

    #[test]
    fn a_sample_is_distinct_reproducible_and_in_grid_order() {
        let g = grid(json!({"a": {"from": 1, "to": 30, "step": 1}, "b": {"from": 1, "to": 30, "step": 1}}));
        let one = combinations(&g, Some(50), 7).unwrap();
        assert_eq!(one.len(), 50);
        assert_eq!(one, combinations(&g, Some(50), 7).unwrap(), "the same seed draws the same sample");
        assert_ne!(one, combinations(&g, Some(50), 8).unwrap());
        let keys: Vec<(i64, i64)> =
            one.iter().map(|c| (c["a"].as_f64().unwrap() as i64, c["b"].as_f64().unwrap() as i64)).collect();
        let mut sorted = keys.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(keys, sorted, "distinct, in grid order");
        assert_eq!(combinations(&g, Some(5000), 7).unwrap().len(), 900, "a sample larger than the grid is the grid");
    }

    #[test]
    fn bad_grids_are_refused_naming_the_field() {
        let refused = |g: Value, sample: Option<u32>| match combinations(&grid(g), sample, 0) {
            Err(DomainError::Validation(errors)) => errors[0].field.clone(),
            other => panic!("expected a refusal, got {other:?}"),
        };
        assert_eq!(refused(json!({}), None), "grid");
        assert_eq!(refused(json!({"fast": {"from": 5, "to": 1, "step": 1}}), None), "grid.fast");
        assert_eq!(refused(json!({"fast": {"from": 1, "to": 5, "step": 0}}), None), "grid.fast");
        assert_eq!(refused(json!({"fast": {"from": 1, "to": 5}}), None), "grid.fast");
        assert_eq!(refused(json!({"fast": "5"}), None), "grid.fast");
        assert_eq!(refused(json!({"fast": []}), None), "grid.fast");
        assert_eq!(refused(json!({"fast": {"from": 0, "to": 100000, "step": 1}}), None), "grid.fast");
        let big = json!({"a": {"from": 1, "to": 200, "step": 1}, "b": {"from": 1, "to": 200, "step": 1}});
        assert_eq!(refused(big.clone(), None), "grid");
        assert_eq!(combinations(&grid(big), Some(100), 1).unwrap().len(), 100, "a sample of a large grid is fine");
        assert_eq!(refused(json!({"a": [1]}), Some(0)), "sample");
    }
}
