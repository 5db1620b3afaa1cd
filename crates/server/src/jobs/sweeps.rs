//! Parameter sweeps (`POST /api/backtests/sweeps`, issue 26.1): one strategy's parameters tried
//! over a grid (or a reproducible random sample of it) on one symbol and range, each
//! combination a backtest on the same engine as live. The combinations are split into parts of
//! about [`PART_WORK`] bar steps ([`part_size`]), each a durable job of kind [`JobKind::Sweep`]
//! — claimed, leased and taken back like a backtest, so the parts run in parallel on every
//! process that runs jobs (`jobs.backtest_parallel` at a time each). A part reads the bars once
//! and runs its combinations on the process's sweep threads (`jobs.backtest_parallel` of them,
//! shared by its parts; a combination at a time as a thread comes free), storing their
//! metrics. A sweep's status, progress and result table are read from its parts: ranked by the
//! objective, combinations that break the constraint listed after the others.

use crate::domain::{DomainError, DomainResult};
use crate::jobs::run::{self, history_of, Prepared, RunRequest, StoredRun};
use crate::jobs::{CancelError, Halt, Jobs, Leases};
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::sync::Arc;
use tradeops_core::analytics::{Recommendation, ScopeType};
use tradeops_core::backtest::{self, fills::FillModel, BacktestSpec};
use tradeops_core::market::Timeframe;
use tradeops_core::time::to_epoch_ms;
use tradeops_core::{Symbol, Timestamp};
use tradeops_store::{JobKind, JobStatus, SweepPart, SweepRecord, SweepRepository};

/// About how many bar steps a part runs (a part is what one worker takes at a time): a small
/// sweep is one part — its cost (its lease, reading the sweep and the bars, storing its results)
/// paid once — and a large one spreads over every worker.
pub const PART_WORK: f64 = 2_000_000.0;
/// Fewest combinations of a part (to keep a few cores busy), and most.
const MIN_PART: usize = 4;
const MAX_PART: usize = 500;
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
    /// Also split the range into in-sample / out-of-sample windows: every combination runs on
    /// each window's two parts, and the report shows how each window's in-sample best did out
    /// of sample (issue 26.3).
    #[schema(nullable = false)]
    pub walk_forward: Option<WalkForward>,
}

/// Walk-forward windows over a sweep's range, counted in trading days of the market calendar.
/// Rolling (the default): windows of equal length, each starting where the previous one's
/// out-of-sample part starts, so the out-of-sample parts follow one another to the range's end.
/// Anchored: every in-sample part starts at the range's start and grows by one out-of-sample
/// part per window.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct WalkForward {
    /// How many windows (2 to 20).
    #[schema(minimum = 2, maximum = 20)]
    pub windows: u32,
    /// The in-sample share of a window (of the first window when anchored): 0.5 to 0.95,
    /// default 0.7.
    #[schema(nullable = false, minimum = 0.5, maximum = 0.95)]
    pub in_sample_fraction: Option<f64>,
    /// In-sample parts all start at the range's start (default false: rolling).
    #[schema(nullable = false)]
    pub anchored: Option<bool>,
}

/// The most windows a walk-forward has.
pub const MAX_WINDOWS: u32 = 20;
/// The most combination × window pairs a walk-forward sweep may have (each runs twice).
pub const MAX_WINDOW_RUNS: usize = 20_000;

/// One walk-forward window, in epoch milliseconds: in sample `[start, split)`, out of sample
/// `[split, end)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
struct Window {
    start: i64,
    split: i64,
    end: i64,
}

/// The windows of `walk_forward` over `[start, end)`: boundaries at New York midnight of
/// trading days (the first at `start`, the last at `end`), so a day's bars are never split.
fn windows_of(
    calendar: tradeops_core::calendar::MarketCalendar,
    start: Timestamp,
    end: Timestamp,
    walk_forward: &WalkForward,
) -> DomainResult<Vec<Window>> {
    let n = walk_forward.windows;
    if !(2..=MAX_WINDOWS).contains(&n) {
        return Err(DomainError::validation("walk_forward.windows", format!("must be from 2 to {MAX_WINDOWS}")));
    }
    let fraction = walk_forward.in_sample_fraction.unwrap_or(0.7);
    if !(0.5..=0.95).contains(&fraction) {
        return Err(DomainError::validation("walk_forward.in_sample_fraction", "must be from 0.5 to 0.95"));
    }
    let mut day = tradeops_core::calendar::NyDay::default();
    let (first, last) = (day.date_of(start), day.date_of(end - chrono::Duration::milliseconds(1)));
    let days: Vec<chrono::NaiveDate> =
        first.iter_days().take_while(|d| *d <= last).filter(|d| calendar.is_trading_day(*d)).collect();
    let (total, n, out) = (days.len() as f64, n as usize, 1.0 - fraction);
    let anchored = walk_forward.anchored.unwrap_or(false);
    // Out-of-sample days per window: the in-sample part and n out-of-sample parts span the
    // range with in/(in + out) = fraction (rolling: every window; anchored: the first). Both
    // come to the same step, total × out / (1 + (n − 1) × out); they differ in where each
    // window's in-sample part starts.
    let step = total * out / (1.0 + (n - 1) as f64 * out);
    let step = step.floor() as usize;
    let in_sample = days.len().saturating_sub(n * step);
    if step == 0 || in_sample == 0 {
        return Err(DomainError::validation(
            "walk_forward.windows",
            format!("the range has {} trading days: too few for {n} windows", days.len()),
        ));
    }
    let at = |index: usize| -> i64 {
        match index {
            0 => to_epoch_ms(&start),
            i if i >= days.len() => to_epoch_ms(&end),
            i => to_epoch_ms(&tradeops_core::calendar::ny_instant(days[i], (0, 0))),
        }
    };
    Ok((0..n)
        .map(|i| Window {
            start: at(if anchored { 0 } else { i * step }),
            split: at(in_sample + i * step),
            end: at(in_sample + (i + 1) * step),
        })
        .collect())
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
    run: StoredRun,
    grid: Map<String, Value>,
    sample: Option<u32>,
    seed: u64,
    objective: Objective,
    constraint: Constraint,
    /// Combinations the strategy refused (skipped).
    skipped: usize,
    /// The parameters the strategy trades with now (its defaults under the operator's settings),
    /// run with the grid (added when not in it) so the report says where they rank.
    #[serde(default)]
    baseline: Option<BTreeMap<String, f64>>,
    #[serde(default)]
    walk_forward: Option<WalkForward>,
    #[serde(default)]
    windows: Vec<Window>,
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
    let base = |parameters: Option<Map<String, Value>>| RunRequest {
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
    let mut run = run::validate(jobs, &base(None)).await?;
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
    let skipped = combos.len() - valid.len();
    // The strategy's parameters now: run too, so the report can say where they rank.
    let baseline = backtest::validate_parameters(&req.strategy_id, timeframe, &Map::new(), &settings).ok();
    if let Some(b) = &baseline {
        if !valid.contains(b) {
            valid.push(b.clone());
        }
    }
    let windows = match &req.walk_forward {
        None => Vec::new(),
        Some(wf) => {
            let calendar = tradeops_core::calendar::MarketCalendar::new(settings.runtime.market_calendar);
            let windows = windows_of(calendar, req.start, req.end, wf)?;
            if valid.len() * windows.len() > MAX_WINDOW_RUNS {
                return Err(DomainError::validation(
                    "walk_forward.windows",
                    format!(
                        "{} combinations × {} windows: at most {MAX_WINDOW_RUNS} (fewer windows, or draw a sample)",
                        valid.len(),
                        windows.len()
                    ),
                ));
            }
            windows
        }
    };
    run.parameters = valid[0].clone();
    let stored = StoredSweep {
        run,
        grid: req.grid.clone(),
        sample: req.sample,
        seed: req.seed.unwrap_or_default(),
        objective: req.objective.unwrap_or_default(),
        constraint: req.constraint.clone().unwrap_or_default(),
        skipped,
        baseline,
        walk_forward: req.walk_forward.clone(),
        windows,
    };
    let part_size = part_size(timeframe, req.start, req.end, !stored.windows.is_empty());
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
        .chunks(part_size)
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

/// Combinations a part of a sweep over `start..end` takes: about [`PART_WORK`] bar steps, the
/// bars estimated from the range (five trading days a week; 960 minute bars a day, the
/// extended session's), a walk-forward's windows counted as two more runs of the range.
fn part_size(timeframe: Timeframe, start: Timestamp, end: Timestamp, walk_forward: bool) -> usize {
    let days = (end - start).num_seconds().max(0) as f64 / 86_400.0;
    let per_day = match timeframe {
        Timeframe::Day => 1.0,
        Timeframe::Minute => 960.0,
    };
    let bars = (days * 5.0 / 7.0 * per_day).max(1.0);
    let runs = if walk_forward { 3.0 } else { 1.0 };
    ((PART_WORK / (bars * runs)) as usize).clamp(MIN_PART, MAX_PART)
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
        "initial_cash": backtest::dollars(stored.run.initial_cash),
        "commission_rate": tradeops_core::market::decimal_to_f64(stored.run.commission_rate),
        "slippage_bps": tradeops_core::market::decimal_to_f64(stored.run.slippage_bps),
        "fill": stored.run.fill,
        "settings": stored.run.settings,
        "walk_forward": stored.walk_forward,
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
        let baseline = stored.baseline.as_ref().map(|b| json!(b));
        for row in &mut rows {
            row["meets_constraint"] = json!(meets(&stored.constraint, row));
            row["baseline"] = json!(baseline.as_ref() == Some(&row["parameters"]));
        }
        let order = rank(&rows, Some, &stored.constraint, stored.objective);
        let in_grid = stored.baseline.as_ref().is_some_and(|b| in_grid(&stored.grid, b));
        body["baseline"] = match (&baseline, order.iter().position(|&i| rows[i]["baseline"] == true)) {
            (Some(parameters), Some(rank)) => json!({"parameters": parameters, "rank": rank + 1, "in_grid": in_grid}),
            _ => Value::Null,
        };
        if !stored.windows.is_empty() {
            body["walk_forward"] = walk_forward_report(&stored, &rows, status == JobStatus::Completed);
        }
        let mut ranked: Vec<Value> = Vec::with_capacity(rows.len());
        for i in order {
            let mut row = std::mem::take(&mut rows[i]);
            if let Some(row) = row.as_object_mut() {
                // The windows' figures are in `walk_forward`, by window.
                row.remove("windows");
            }
            ranked.push(row);
        }
        let best = ranked
            .first()
            .filter(|r| r["meets_constraint"] == true && score(r, stored.objective) > f64::NEG_INFINITY)
            .cloned();
        body["best"] = best.unwrap_or(Value::Null);
        body["results"] = Value::Array(ranked);
    }
    Ok(body)
}

/// A run's objective as a number to rank by; unknown (null: no trades, say) ranks last — but
/// a profit factor left undefined because no trade lost while the run made money is
/// unbounded, and ranks first.
fn score(metrics: &Value, objective: Objective) -> f64 {
    let value = &metrics[objective.key()];
    let known = value.as_f64().or_else(|| value.as_str().and_then(|s| s.parse().ok()));
    match known {
        Some(v) => v,
        None if objective == Objective::ProfitFactor
            && metrics["trade_count"].as_u64().unwrap_or(0) > 0
            && metrics["total_return"].as_f64().unwrap_or(0.0) > 0.0 =>
        {
            f64::INFINITY
        }
        None => f64::NEG_INFINITY,
    }
}

/// Whether a run's metrics keep within the constraint.
fn meets(constraint: &Constraint, metrics: &Value) -> bool {
    constraint.max_drawdown.is_none_or(|d| metrics["max_drawdown"].as_f64().unwrap_or(0.0) <= d)
        && constraint.min_trades.is_none_or(|n| metrics["trade_count"].as_u64().unwrap_or(0) >= n)
}

/// The indices of `rows` ranked by the objective of the metrics `of` picks (highest first):
/// those keeping the constraint first, rows without metrics left out; ties keep grid order.
fn rank<'a>(
    rows: &'a [Value],
    of: impl Fn(&'a Value) -> Option<&'a Value>,
    constraint: &Constraint,
    objective: Objective,
) -> Vec<usize> {
    let mut keyed: Vec<(usize, bool, f64)> = rows
        .iter()
        .enumerate()
        .filter_map(|(i, row)| {
            of(row).filter(|m| m.is_object()).map(|m| (i, meets(constraint, m), score(m, objective)))
        })
        .collect();
    keyed.sort_by(|a, b| b.1.cmp(&a.1).then(b.2.total_cmp(&a.2)));
    keyed.into_iter().map(|(i, _, _)| i).collect()
}

/// Whether `parameters` is a point of the grid (each gridded parameter's value on its axis).
fn in_grid(grid: &Map<String, Value>, parameters: &BTreeMap<String, f64>) -> bool {
    grid.iter().all(|(name, spec)| {
        let value = parameters.get(name).copied().unwrap_or(f64::NAN);
        axis(name, spec).is_ok_and(|values| values.iter().any(|v| (v - value).abs() < 1e-9))
    })
}

/// The walk-forward report (issue 26.3): per window, the in-sample best (ranked as the table
/// is), how it did out of sample and the rank it would have had there, beside the baseline
/// (the strategy's current parameters); then the whole: the out-of-sample parts chained (what
/// re-optimising every window would have earned), the walk-forward efficiency (out-of-sample
/// over in-sample objective) and in how many windows the in-sample best beat the baseline out
/// of sample, with the sign test's confidence. `complete`: every part has run (before, the
/// figures cover the combinations run so far).
fn walk_forward_report(stored: &StoredSweep, rows: &[Value], complete: bool) -> Value {
    let baseline = rows.iter().position(|r| r["baseline"] == true);
    let mut windows = Vec::with_capacity(stored.windows.len());
    let (mut in_scores, mut out_scores) = (Vec::new(), Vec::new());
    let (mut in_rates, mut out_rates) = (Vec::new(), Vec::new());
    let (mut chained, mut baseline_chained) = (1.0_f64, 1.0_f64);
    let (mut beat, mut compared) = (0u64, 0u64);
    let mut chosen: BTreeMap<String, (usize, Value)> = BTreeMap::new();
    for (n, w) in stored.windows.iter().enumerate() {
        let part = |row: &'_ Value, which: &str| -> Option<Value> {
            row["windows"].get(n).map(|p| p[which].clone()).filter(Value::is_object)
        };
        let in_rank =
            rank(rows, |r| r["windows"].get(n).map(|p| &p["in_sample"]), &stored.constraint, stored.objective);
        let out_rank =
            rank(rows, |r| r["windows"].get(n).map(|p| &p["out_of_sample"]), &stored.constraint, stored.objective);
        let best = in_rank.first().copied().filter(|&i| {
            part(&rows[i], "in_sample")
                .is_some_and(|m| meets(&stored.constraint, &m) && score(&m, stored.objective) > f64::NEG_INFINITY)
        });
        let baseline_out = baseline.and_then(|b| part(&rows[b], "out_of_sample"));
        let mut entry = json!({
            "window": n + 1,
            "in_sample": {"start": ms_ts(w.start), "end": ms_ts(w.split)},
            "out_of_sample": {"start": ms_ts(w.split), "end": ms_ts(w.end)},
            "best": null,
            "baseline": baseline.map(|b| json!({
                "in_sample": part(&rows[b], "in_sample"),
                "out_of_sample": baseline_out,
            })),
            "beat_baseline": null,
        });
        if let Some(b) = best {
            let (is, oos) = (part(&rows[b], "in_sample"), part(&rows[b], "out_of_sample"));
            let out_position = out_rank.iter().position(|&i| i == b).map(|p| p + 1);
            // A return is over its part's length: the efficiency compares returns per day.
            let per_day = |value: f64, from: i64, to: i64| {
                if stored.objective == Objective::TotalReturn {
                    value / ((to - from) as f64 / 86_400_000.0).max(1e-9)
                } else {
                    value
                }
            };
            if let Some(is) = &is {
                in_scores.push(score(is, stored.objective));
                in_rates.push(per_day(score(is, stored.objective), w.start, w.split));
            }
            if let Some(oos) = &oos {
                out_scores.push(score(oos, stored.objective));
                out_rates.push(per_day(score(oos, stored.objective), w.split, w.end));
                chained *= 1.0 + oos["total_return"].as_f64().unwrap_or(0.0);
                // The baseline's chain covers the same windows as the bests'.
                if let Some(b_out) = &baseline_out {
                    baseline_chained *= 1.0 + b_out["total_return"].as_f64().unwrap_or(0.0);
                }
            }
            // The sign test leaves out ties: windows whose best is the baseline itself, or
            // either side unknown.
            if let (Some(oos), Some(b_out), false) = (&oos, &baseline_out, Some(b) == baseline) {
                let (mine, theirs) = (score(oos, stored.objective), score(b_out, stored.objective));
                // An unbounded profit factor (no losing trade) counts; only unknown figures do not.
                let known = |x: f64| x > f64::NEG_INFINITY;
                if known(mine) && known(theirs) && mine != theirs {
                    compared += 1;
                    beat += u64::from(mine > theirs);
                    entry["beat_baseline"] = json!(mine > theirs);
                }
            }
            let parameters = rows[b]["parameters"].clone();
            chosen.entry(parameters.to_string()).or_insert((0, parameters.clone())).0 += 1;
            entry["best"] = json!({
                "parameters": parameters,
                "in_sample": is,
                "out_of_sample": oos,
                "out_of_sample_rank": out_position,
                "ranked_out_of_sample": out_rank.len(),
            });
        }
        windows.push(entry);
    }
    let finite_mean = |v: &[f64]| -> Option<f64> {
        let finite: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
        (!finite.is_empty()).then(|| finite.iter().sum::<f64>() / finite.len() as f64)
    };
    let (in_mean, out_mean) = (finite_mean(&in_scores), finite_mean(&out_scores));
    // Final equity is not a rate: the ratio of two means of it says nothing. Returns compare
    // per day (an in-sample part is longer than its out-of-sample part).
    let efficiency = match (finite_mean(&in_rates), finite_mean(&out_rates)) {
        (Some(i), Some(o)) if i > 0.0 && stored.objective != Objective::FinalEquity => Some(o / i),
        _ => None,
    };
    let most = chosen.into_values().max_by_key(|(count, _)| *count);
    let wf =
        stored.walk_forward.clone().unwrap_or(WalkForward { windows: 0, in_sample_fraction: None, anchored: None });
    json!({
        "windows": stored.windows.len(),
        "in_sample_fraction": wf.in_sample_fraction.unwrap_or(0.7),
        "anchored": wf.anchored.unwrap_or(false),
        "complete": complete,
        "objective": stored.objective,
        "in_sample_objective_mean": in_mean,
        "out_of_sample_objective_mean": out_mean,
        "efficiency": efficiency,
        "out_of_sample_return": (!out_scores.is_empty()).then_some(chained - 1.0),
        "baseline_out_of_sample_return": baseline.map(|_| baseline_chained - 1.0),
        "beat_baseline": {
            "windows": beat,
            "of": compared,
            "confidence": tradeops_core::analytics::sign_test_confidence(beat, compared),
        },
        "most_chosen": most.map(|(count, parameters)| json!({"parameters": parameters, "windows": count})),
        "by_window": windows,
    })
}

/// Recommendations citing walk-forward sweeps (issue 26.4): per strategy, its latest
/// completed walk-forward sweep (of the newest 200 sweeps) says in how many windows
/// re-optimising beat the current parameters out of sample, with the sign test's confidence
/// (1 − its two-sided p-value, as the trade groups' `confidence_score` is 1 − a p-value), and
/// names the latest window's in-sample best. Advice only at `confidence_level`; none from a
/// walk-forward with fewer than two windows compared.
pub async fn recommendations(jobs: &Jobs, confidence_level: f64) -> DomainResult<Vec<Recommendation>> {
    let repo: &dyn SweepRepository = &jobs.db;
    let mut seen = std::collections::BTreeSet::new();
    let mut out = Vec::new();
    for sweep in repo.sweeps(200).await? {
        if seen.contains(&sweep.strategy_id) {
            continue;
        }
        let Ok(stored) = serde_json::from_str::<StoredSweep>(&sweep.request) else { continue };
        if stored.windows.is_empty() {
            continue;
        }
        let known = jobs.walk_forward_findings.lock().unwrap_or_else(|e| e.into_inner()).get(&sweep.sweep_id).cloned();
        let body = match known {
            Some(body) => body,
            None => {
                let body = match view(jobs, &sweep, true).await {
                    Ok(body) => body,
                    Err(e) => {
                        // One sweep unreadable does not hide the others' findings.
                        tracing::warn!(sweep = %sweep.sweep_id, error = %e, "a walk-forward sweep could not be read");
                        continue;
                    }
                };
                if body["status"] != "COMPLETED" {
                    continue;
                }
                // What the finding reads, without the results table.
                let keep = ["status", "objective", "timeframe", "initial_cash", "baseline", "walk_forward"];
                let slim: Map<String, Value> = keep.iter().map(|k| (k.to_string(), body[*k].clone())).collect();
                let slim = Value::Object(slim);
                let mut findings = jobs.walk_forward_findings.lock().unwrap_or_else(|e| e.into_inner());
                if findings.len() >= 1_000 {
                    findings.clear();
                }
                findings.insert(sweep.sweep_id.clone(), slim.clone());
                slim
            }
        };
        seen.insert(sweep.strategy_id.clone());
        if let Some(row) = walk_forward_recommendation(&sweep, &body, confidence_level) {
            out.push(row);
        }
    }
    Ok(out)
}

/// The recommendation a completed walk-forward sweep's view supports, if any.
fn walk_forward_recommendation(sweep: &SweepRecord, body: &Value, confidence_level: f64) -> Option<Recommendation> {
    let wf = &body["walk_forward"];
    let (beat, of) = (wf["beat_baseline"]["windows"].as_u64()?, wf["beat_baseline"]["of"].as_u64()?);
    let baseline = body["baseline"]["parameters"].as_object()?;
    if of < 2 {
        return None;
    }
    let confidence = tradeops_core::analytics::sign_test_confidence(beat, of);
    let latest = wf["by_window"].as_array()?.iter().rev().find_map(|w| w["best"]["parameters"].as_object())?;
    let pnls: Vec<f64> = wf["by_window"]
        .as_array()?
        .iter()
        .filter_map(|w| w["best"]["out_of_sample"]["final_equity"].as_f64())
        .map(|equity| equity - body["initial_cash"].as_f64().unwrap_or(0.0))
        .collect();
    let average = pnls.iter().sum::<f64>() / pnls.len().max(1) as f64;
    let words = |parameters: &Map<String, Value>| -> String {
        parameters
            .iter()
            .map(|(name, value)| format!("{name} {}", value.as_f64().map_or(value.to_string(), |v| format!("{v}"))))
            .collect::<Vec<_>>()
            .join(" / ")
    };
    let (latest, current) = (words(latest), words(baseline));
    let advice = if confidence < confidence_level {
        format!("the difference is not yet significant (confidence {confidence:.2})")
    } else if latest == current {
        "your current parameters are already the latest window's in-sample best".to_string()
    } else if beat * 2 > of {
        format!("consider trading {latest}")
    } else {
        "keep your current parameters: re-optimising did worse out of sample".to_string()
    };
    let objective = body["objective"].as_str().unwrap_or("the objective").replace('_', " ");
    let text = format!(
        "Walk-forward of {} on {} {} ({} windows, ranked by {objective}, sweep {}): re-optimising beat your current \
         {current} out of sample in {beat} of {of} windows; the latest window's in-sample best is {latest}; {advice}.",
        sweep.strategy_id,
        sweep.symbol,
        body["timeframe"].as_str().unwrap_or(""),
        wf["windows"],
        sweep.sweep_id,
    );
    Some(Recommendation {
        recommendation_id: format!("STRATEGY:{}:walk_forward", sweep.strategy_id),
        scope_type: ScopeType::Strategy,
        scope_value: sweep.strategy_id.clone(),
        recommendation_text: text,
        confidence_score: confidence,
        sample_size: of,
        win_rate: beat as f64 / of as f64,
        baseline_win_rate: 0.5,
        win_rate_interval: tradeops_core::analytics::wilson_interval(beat, of, confidence_level),
        average_net_pnl: (average * 100.0).round() / 100.0,
        sweep_id: Some(sweep.sweep_id.clone()),
    })
}

/// An epoch-milliseconds instant as the API writes instants.
fn ms_ts(ms: i64) -> String {
    tradeops_core::time::format_ts(&tradeops_core::time::from_epoch_ms(ms))
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

    #[test]
    fn a_part_is_about_two_million_bar_steps() {
        let ts = |t: &str| tradeops_core::time::parse_ts(t).unwrap();
        // backtesting.py's GOOG: 8.5 years of daily bars, any grid in one part (at most 500).
        assert_eq!(part_size(Timeframe::Day, ts("2004-08-19T00:00:00Z"), ts("2013-03-02T00:00:00Z"), false), 500);
        // A year of minute bars: about 250,000 bars, 7 combinations a part; a walk-forward's
        // windows run the range twice more.
        let year = (ts("2025-11-01T00:00:00Z"), ts("2026-11-01T00:00:00Z"));
        assert_eq!(part_size(Timeframe::Minute, year.0, year.1, false), 7);
        assert_eq!(part_size(Timeframe::Minute, year.0, year.1, true), 4, "never fewer than four");
        assert_eq!(part_size(Timeframe::Minute, year.0, ts("2026-01-01T00:00:00Z"), true), 15);
    }

    #[test]
    fn walk_forward_windows_split_trading_days() {
        use tradeops_core::calendar::{ny_instant, MarketCalendar};
        use tradeops_core::settings::MarketCalendarKind;
        let day = |d: &str| chrono::NaiveDate::parse_from_str(d, "%Y-%m-%d").unwrap();
        let at = |d: &str| to_epoch_ms(&ny_instant(day(d), (0, 0)));
        // 100 days, every one a trading day: out-of-sample parts of floor(100 × 0.25 / 1.75) =
        // 14 days, the in-sample part 100 − 4 × 14 = 44.
        let (start, end) = (ny_instant(day("2026-01-01"), (0, 0)), ny_instant(day("2026-04-11"), (0, 0)));
        let always = MarketCalendar::new(MarketCalendarKind::AlwaysOpen);
        let rolling = WalkForward { windows: 4, in_sample_fraction: Some(0.75), anchored: None };
        let w = windows_of(always, start, end, &rolling).unwrap();
        assert_eq!(w[0], Window { start: at("2026-01-01"), split: at("2026-02-14"), end: at("2026-02-28") });
        assert_eq!(w[1], Window { start: at("2026-01-15"), split: at("2026-02-28"), end: at("2026-03-14") });
        assert_eq!(w[3].end, to_epoch_ms(&end), "the last window ends with the range");
        let anchored = WalkForward { anchored: Some(true), ..rolling.clone() };
        let a = windows_of(always, start, end, &anchored).unwrap();
        assert!(a.iter().all(|w| w.start == to_epoch_ms(&start)));
        assert_eq!(a.iter().map(|w| w.split).collect::<Vec<_>>(), w.iter().map(|w| w.split).collect::<Vec<_>>());
        // On the NYSE calendar weekends and holidays are not days of a window; boundaries fall
        // on trading days.
        let nyse = MarketCalendar::new(MarketCalendarKind::Nyse);
        let n = windows_of(nyse, start, end, &rolling).unwrap();
        let mut ny = tradeops_core::calendar::NyDay::default();
        for w in &n[1..] {
            let date = ny.date_of(tradeops_core::time::from_epoch_ms(w.start));
            assert!(nyse.is_trading_day(date), "{date}");
        }
        let refused = |wf: WalkForward| match windows_of(nyse, start, end, &wf) {
            Err(DomainError::Validation(errors)) => errors[0].field.clone(),
            other => panic!("expected a refusal, got {other:?}"),
        };
        assert_eq!(refused(WalkForward { windows: 1, ..rolling.clone() }), "walk_forward.windows");
        let short = ny_instant(day("2026-01-20"), (0, 0));
        let few = WalkForward { windows: 20, in_sample_fraction: Some(0.95), anchored: None };
        assert!(
            matches!(windows_of(nyse, start, short, &few), Err(DomainError::Validation(e)) if e[0].field == "walk_forward.windows")
        );
        assert_eq!(
            refused(WalkForward { in_sample_fraction: Some(0.3), ..rolling }),
            "walk_forward.in_sample_fraction"
        );
    }

    #[test]
    fn a_walk_forward_recommends_only_what_its_windows_support() {
        let sweep = SweepRecord {
            sweep_id: "sw-1".into(),
            strategy_id: "sma_cross".into(),
            symbol: "GOOG".into(),
            request: String::new(),
            combinations: 10,
            requested_by: "admin".into(),
            created_at: 0,
        };
        let body = |beat: u64, of: u64| {
            json!({
                "objective": "sharpe_ratio", "timeframe": "1d", "initial_cash": 100000.0,
                "baseline": {"parameters": {"fast": 10.0, "slow": 20.0}},
                "walk_forward": {
                    "windows": of,
                    "beat_baseline": {"windows": beat, "of": of},
                    "by_window": [
                        {"best": {"parameters": {"fast": 5.0, "slow": 40.0}, "out_of_sample": {"final_equity": 101000.0}}},
                        {"best": {"parameters": {"fast": 15.0, "slow": 40.0}, "out_of_sample": {"final_equity": 99000.0}}},
                        {"best": null}
                    ]
                }
            })
        };
        let nine = walk_forward_recommendation(&sweep, &body(9, 10), 0.95).unwrap();
        assert!((nine.confidence_score - tradeops_core::analytics::sign_test_confidence(9, 10)).abs() < 1e-12);
        assert!(nine.recommendation_text.contains("in 9 of 10 windows"), "{}", nine.recommendation_text);
        assert!(nine.recommendation_text.contains("consider trading fast 15 / slow 40"), "the latest window's best");
        assert_eq!((nine.sample_size, nine.average_net_pnl, nine.sweep_id.as_deref()), (10, 0.0, Some("sw-1")));
        let one = walk_forward_recommendation(&sweep, &body(1, 10), 0.95).unwrap();
        assert!(one.recommendation_text.contains("keep your current parameters"), "{}", one.recommendation_text);
        let even = walk_forward_recommendation(&sweep, &body(3, 5), 0.95).unwrap();
        assert!(even.recommendation_text.contains("not yet significant"), "{}", even.recommendation_text);
        assert!(walk_forward_recommendation(&sweep, &body(1, 1), 0.95).is_none(), "one window compared says nothing");
        let mut current = body(9, 10);
        current["walk_forward"]["by_window"][1]["best"]["parameters"] = json!({"fast": 10.0, "slow": 20.0});
        let kept = walk_forward_recommendation(&sweep, &current, 0.95).unwrap();
        assert!(
            kept.recommendation_text.contains("already the latest window's in-sample best"),
            "{}",
            kept.recommendation_text
        );
    }

    #[test]
    fn an_unbounded_profit_factor_ranks_first_and_no_trades_last() {
        let rows = [
            json!({"profit_factor": 2.5, "trade_count": 10, "total_return": 0.1}),
            json!({"profit_factor": null, "trade_count": 0, "total_return": 0.0}),
            json!({"profit_factor": null, "trade_count": 3, "total_return": 0.05}),
            json!({"profit_factor": 0.5, "trade_count": 8, "total_return": -0.1}),
        ];
        assert_eq!(rank(&rows, Some, &Constraint::default(), Objective::ProfitFactor), [2, 0, 3, 1]);
        // Under the constraint, breakers after the rest, each group by the objective.
        let five = Constraint { min_trades: Some(5), ..Constraint::default() };
        assert_eq!(rank(&rows, Some, &five, Objective::ProfitFactor), [0, 3, 2, 1]);
    }
}
