//! Parameter sweeps (`POST /api/backtests/sweeps`): one strategy's parameters tried over a
//! grid (or a reproducible random sample of it) on one symbol and range, each combination a
//! backtest on the same engine as live. The combinations are split into parts of about
//! [`PART_WORK`] bar steps ([`part_size`]), each a durable job of kind [`JobKind::Sweep`] —
//! claimed, leased and taken back like a backtest, so the parts run in parallel on every
//! process that runs jobs (`jobs.backtest_parallel` at a time each). This module owns the
//! request, its validation and queueing, and cancel; the grid and the walk-forward windows are
//! `grid`'s, a part's run `part`'s ([`run_worker`]), the report read from the parts `report`'s
//! ([`view`]: ranked by the objective, combinations that break the constraint listed after the
//! others) and the recommendations citing walk-forward sweeps `advice`'s ([`recommendations`]).

mod advice;
mod grid;
mod part;
mod report;
#[cfg(test)]
mod tests;

pub use advice::{recommendations, WalkForwardFinding, WindowFinding};
pub use part::{run_worker, CombinationResult, Metrics, WindowRuns};
pub use report::{
    view, BaselineRank, BeatBaseline, MostChosen, RankedCombination, Span, SweepReport, SweepResults,
    WalkForwardReport, WindowBest, WindowReport,
};

use crate::domain::{DomainError, DomainResult};
use crate::jobs::run::{self, RunRequest, StoredRun};
use crate::jobs::{CancelError, Jobs};
use grid::{combinations, windows_of, Window};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use tradeops_core::backtest;
use tradeops_core::market::Timeframe;
use tradeops_core::time::to_epoch_ms;
use tradeops_core::Timestamp;
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

/// A sweep as asked (`POST /api/backtests/sweeps` reads it at the HTTP edge): the fields of
/// every run of it (`run`; its `parameters` are the grid's, one set a combination), the grid of
/// parameters, what to rank by and what a combination must not break.
#[derive(Clone, Debug)]
pub struct SweepSpec {
    pub run: RunRequest,
    /// Per parameter, a range `{"from", "to", "step"}` or a list of values (the grid module's rules).
    pub grid: Map<String, Value>,
    /// Only this many combinations, drawn at random from the grid by `seed` (default 0).
    pub sample: Option<u32>,
    pub seed: Option<u64>,
    pub objective: Option<Objective>,
    pub constraint: Option<Constraint>,
    pub walk_forward: Option<WalkForward>,
}

/// Walk-forward windows over a sweep's range, counted in trading days of the market calendar.
/// Rolling (the default): windows of equal length, each starting where the previous one's
/// out-of-sample part starts, so the out-of-sample parts follow one another to the range's end.
/// Anchored: every in-sample part starts at the range's start and grows by one out-of-sample
/// part per window.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct WalkForward {
    /// How many windows (2 to 20).
    pub windows: u32,
    /// The in-sample share of a window (of the first window when anchored): 0.5 to 0.95,
    /// default 0.7.
    pub in_sample_fraction: Option<f64>,
    /// In-sample parts all start at the range's start (default false: rolling).
    pub anchored: Option<bool>,
}

/// The most windows a walk-forward has.
pub const MAX_WINDOWS: u32 = 20;
/// The most combination × window pairs a walk-forward sweep may have (each runs twice).
pub const MAX_WINDOW_RUNS: usize = 20_000;

/// The metric a sweep ranks by, highest first.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
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
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Constraint {
    /// The deepest drawdown allowed, a fraction (0.25: 25 %).
    pub max_drawdown: Option<f64>,
    /// The fewest trades a combination must make.
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

/// Validates a sweep and queues its parts.
pub async fn enqueue(jobs: &Jobs, req: SweepSpec, actor: &str) -> DomainResult<SweepRecord> {
    let combos = combinations(&req.grid, req.sample, req.seed.unwrap_or_default())?;
    let timeframe = req.run.timeframe.unwrap_or(Timeframe::Minute);
    let base = |parameters: Option<Map<String, Value>>| RunRequest {
        timeframe: Some(timeframe),
        parameters,
        ..req.run.clone()
    };
    // Everything but the parameters, checked once (the first combination's parameters aside).
    let mut run = run::validate(jobs, &base(None)).await?;
    let settings = tradeops_core::Settings::from_json(&run.effective_settings).map_err(DomainError::Validation)?;
    let mut valid: Vec<BTreeMap<String, f64>> = Vec::with_capacity(combos.len());
    let mut first_refusal = None;
    for combo in &combos {
        match backtest::validate_parameters(&req.run.strategy_id, timeframe, combo, &settings) {
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
    let baseline = backtest::validate_parameters(&req.run.strategy_id, timeframe, &Map::new(), &settings).ok();
    if let Some(b) = &baseline {
        if !valid.contains(b) {
            valid.push(b.clone());
        }
    }
    let windows = match &req.walk_forward {
        None => Vec::new(),
        Some(wf) => {
            let calendar = tradeops_core::calendar::MarketCalendar::new(settings.runtime.market_calendar);
            let windows = windows_of(calendar, req.run.start, req.run.end, wf)?;
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
    let part_size = part_size(timeframe, req.run.start, req.run.end, !stored.windows.is_empty());
    let now = to_epoch_ms(&jobs.clock.now());
    let sweep_id = format!("sw-{}", uuid::Uuid::new_v4().simple());
    let record = SweepRecord {
        sweep_id: sweep_id.clone(),
        strategy_id: req.run.strategy_id.clone(),
        symbol: req.run.symbol.to_string(),
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
