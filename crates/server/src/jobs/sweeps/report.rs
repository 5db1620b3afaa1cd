//! A sweep as the API shows it, read from its parts ([`view`], a [`SweepReport`]): status and
//! progress, and with the results every combination ranked by the objective ([`rank`],
//! [`score`], [`meets`]), the baseline's place and, for a walk-forward sweep, the report by
//! window ([`WalkForwardReport`]). Plain types: the HTTP layer writes them as JSON.

use super::grid::in_grid;
use super::part::{CombinationResult, Metrics, WindowRuns};
use super::{Constraint, Objective, StoredSweep, WalkForward};
use crate::domain::{DomainError, DomainResult};
use crate::jobs::Jobs;
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use tradeops_core::backtest::{self, fills::FillModel};
use tradeops_core::market::Timeframe;
use tradeops_core::time::from_epoch_ms;
use tradeops_core::Timestamp;
use tradeops_store::{JobStatus, SweepPart, SweepRecord, SweepRepository};

/// A sweep: its request, its status and progress read from its parts, and — when asked for —
/// its results.
#[derive(Clone, Debug)]
pub struct SweepReport {
    pub sweep_id: String,
    pub status: JobStatus,
    /// 0..1, to four decimals: the parts' progress weighted by their combinations.
    pub progress: f64,
    pub strategy_id: String,
    pub symbol: String,
    pub timeframe: Timeframe,
    pub start: Timestamp,
    pub end: Timestamp,
    /// The grid as asked.
    pub grid: Map<String, Value>,
    /// Dollars.
    pub initial_cash: f64,
    pub commission_rate: f64,
    pub slippage_bps: f64,
    pub fill: FillModel,
    pub settings: Option<Map<String, Value>>,
    /// The walk-forward as asked.
    pub walk_forward: Option<WalkForward>,
    pub sample: Option<u32>,
    pub seed: u64,
    pub objective: Objective,
    pub constraint: Constraint,
    pub combinations: i64,
    pub completed: usize,
    pub skipped: usize,
    pub parts: usize,
    /// The first failed part's reason.
    pub error: Option<String>,
    pub requested_by: String,
    pub created_at: Timestamp,
    /// When its first part began running (`None`: none has yet).
    pub started_at: Option<Timestamp>,
    /// When its last part ended, once every part has (`None` before).
    pub finished_at: Option<Timestamp>,
    /// Read only when asked for (not in a list of sweeps).
    pub results: Option<SweepResults>,
}

/// Every completed combination ranked, and what the ranking says.
#[derive(Clone, Debug)]
pub struct SweepResults {
    /// Where the strategy's current parameters rank (`None`: not run, or not completed yet).
    pub baseline: Option<BaselineRank>,
    /// For a walk-forward sweep, the report by window.
    pub walk_forward: Option<WalkForwardReport>,
    /// The first ranked combination that meets the constraint and has the objective defined.
    pub best: Option<RankedCombination>,
    /// Ranked by the objective, highest first, those breaking the constraint after the others.
    pub ranked: Vec<RankedCombination>,
}

/// The baseline's place in the ranking.
#[derive(Clone, Debug, PartialEq)]
pub struct BaselineRank {
    pub parameters: BTreeMap<String, f64>,
    /// 1 is first.
    pub rank: usize,
    /// Whether the parameters are a point of the grid (else run beside it).
    pub in_grid: bool,
}

/// One combination's metrics over the whole range, as ranked.
#[derive(Clone, Debug, PartialEq)]
pub struct RankedCombination {
    pub metrics: Metrics,
    pub parameters: BTreeMap<String, f64>,
    pub meets_constraint: bool,
    /// Whether these are the strategy's current parameters.
    pub baseline: bool,
}

/// How re-optimising in every window did out of sample.
#[derive(Clone, Debug, PartialEq)]
pub struct WalkForwardReport {
    pub windows: usize,
    pub in_sample_fraction: f64,
    pub anchored: bool,
    /// Every part has run (before, the figures cover the combinations run so far).
    pub complete: bool,
    pub objective: Objective,
    pub in_sample_objective_mean: Option<f64>,
    pub out_of_sample_objective_mean: Option<f64>,
    /// Out-of-sample over in-sample objective (returns per day); `None` for final equity.
    pub efficiency: Option<f64>,
    /// The out-of-sample parts of the windows' bests chained.
    pub out_of_sample_return: Option<f64>,
    /// The baseline's out-of-sample parts over the same windows chained.
    pub baseline_out_of_sample_return: Option<f64>,
    pub beat_baseline: BeatBaseline,
    /// The parameters most often best in sample, and in how many windows.
    pub most_chosen: Option<MostChosen>,
    pub by_window: Vec<WindowReport>,
}

/// In how many windows the in-sample best beat the baseline out of sample, of how many
/// compared (ties and unknown figures left out), with the sign test's confidence.
#[derive(Clone, Debug, PartialEq)]
pub struct BeatBaseline {
    pub windows: u64,
    pub of: u64,
    pub confidence: f64,
}

#[derive(Clone, Debug, PartialEq)]
pub struct MostChosen {
    pub parameters: BTreeMap<String, f64>,
    pub windows: usize,
}

/// A span of a window: `[start, end)`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Span {
    pub start: Timestamp,
    pub end: Timestamp,
}

/// One walk-forward window.
#[derive(Clone, Debug, PartialEq)]
pub struct WindowReport {
    /// 1 is first.
    pub window: usize,
    pub in_sample: Span,
    pub out_of_sample: Span,
    /// The in-sample best (`None`: none meets the constraint with the objective defined).
    pub best: Option<WindowBest>,
    /// The baseline's runs over the window (`None`: the baseline was not run).
    pub baseline: Option<WindowRuns>,
    /// Whether the best beat the baseline out of sample (`None`: not compared).
    pub beat_baseline: Option<bool>,
}

/// A window's in-sample best and how it did out of sample.
#[derive(Clone, Debug, PartialEq)]
pub struct WindowBest {
    pub parameters: BTreeMap<String, f64>,
    pub in_sample: Option<Metrics>,
    pub out_of_sample: Option<Metrics>,
    /// Its rank among the combinations out of sample.
    pub out_of_sample_rank: Option<usize>,
    /// How many combinations were ranked out of sample.
    pub ranked_out_of_sample: usize,
}

/// A stored combination with what the view adds to it.
struct Row {
    result: CombinationResult,
    meets_constraint: bool,
    baseline: bool,
}

/// A sweep as the API shows it: the request, status and progress read from its parts, and —
/// with `results` — every combination's metrics ranked by the objective (those breaking the
/// constraint after the others, `meets_constraint` false), the best one, and `skipped`.
pub async fn view(jobs: &Jobs, sweep: &SweepRecord, results: bool) -> DomainResult<SweepReport> {
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
    let sizes: Vec<usize> = parts
        .iter()
        .map(|p| serde_json::from_str::<Vec<BTreeMap<String, f64>>>(&p.combos).map(|c| c.len()).unwrap_or(0))
        .collect();
    let completed: usize =
        parts.iter().zip(&sizes).filter(|(p, _)| p.status == JobStatus::Completed).map(|(_, n)| n).sum();
    let total = sweep.combinations.max(1) as f64;
    let progress = parts.iter().zip(&sizes).map(|(p, n)| p.progress * *n as f64).sum::<f64>() / total;
    let error = parts.iter().find_map(|p| p.error.clone());
    let started_at = parts.iter().filter_map(|p| p.started_at).min().map(from_epoch_ms);
    let finished_at = if statuses.iter().all(|s| s.is_final()) {
        parts.iter().filter_map(|p| p.finished_at).max().map(from_epoch_ms)
    } else {
        None
    };
    let results = results.then(|| results_of(&stored, &parts, status == JobStatus::Completed));
    Ok(SweepReport {
        sweep_id: sweep.sweep_id.clone(),
        status,
        progress: (progress * 1e4).round() / 1e4,
        strategy_id: sweep.strategy_id.clone(),
        symbol: sweep.symbol.clone(),
        timeframe: stored.run.timeframe,
        start: stored.run.start,
        end: stored.run.end,
        grid: stored.grid.clone(),
        initial_cash: backtest::dollars(stored.run.initial_cash),
        commission_rate: tradeops_core::market::decimal_to_f64(stored.run.commission_rate),
        slippage_bps: tradeops_core::market::decimal_to_f64(stored.run.slippage_bps),
        fill: stored.run.fill,
        settings: stored.run.settings.clone(),
        walk_forward: stored.walk_forward.clone(),
        sample: stored.sample,
        seed: stored.seed,
        objective: stored.objective,
        constraint: stored.constraint.clone(),
        combinations: sweep.combinations,
        completed,
        skipped: stored.skipped,
        parts: parts.len(),
        error,
        requested_by: sweep.requested_by.clone(),
        created_at: from_epoch_ms(sweep.created_at),
        started_at,
        finished_at,
        results,
    })
}

/// The completed combinations of `parts` ranked; `complete`: every part has run.
fn results_of(stored: &StoredSweep, parts: &[SweepPart], complete: bool) -> SweepResults {
    let rows: Vec<Row> = parts
        .iter()
        .filter_map(|p| p.results.as_deref())
        .filter_map(|r| serde_json::from_str::<Vec<CombinationResult>>(r).ok())
        .flatten()
        .map(|result| Row {
            meets_constraint: meets(&stored.constraint, &result.metrics),
            baseline: stored.baseline.as_ref() == Some(&result.parameters),
            result,
        })
        .collect();
    let order = rank(&rows, |r| Some(&r.result.metrics), &stored.constraint, stored.objective);
    let in_grid = stored.baseline.as_ref().is_some_and(|b| in_grid(&stored.grid, b));
    let baseline = match (&stored.baseline, order.iter().position(|&i| rows[i].baseline)) {
        (Some(parameters), Some(rank)) => {
            Some(BaselineRank { parameters: parameters.clone(), rank: rank + 1, in_grid })
        }
        _ => None,
    };
    let walk_forward = (!stored.windows.is_empty()).then(|| walk_forward_report(stored, &rows, complete));
    // The windows' figures are in `walk_forward`, by window.
    let ranked: Vec<RankedCombination> = order
        .into_iter()
        .map(|i| RankedCombination {
            metrics: rows[i].result.metrics.clone(),
            parameters: rows[i].result.parameters.clone(),
            meets_constraint: rows[i].meets_constraint,
            baseline: rows[i].baseline,
        })
        .collect();
    let best = ranked
        .first()
        .filter(|r| r.meets_constraint && score(&r.metrics, stored.objective) > f64::NEG_INFINITY)
        .cloned();
    SweepResults { baseline, walk_forward, best, ranked }
}

/// What ranking reads of a run's figures.
pub(super) trait Figures {
    /// The objective's figure; `None` when the run leaves it undefined.
    fn figure(&self, objective: Objective) -> Option<f64>;
    fn total_return(&self) -> Option<f64>;
    fn max_drawdown(&self) -> Option<f64>;
    fn trade_count(&self) -> Option<u64>;
}

impl Figures for Metrics {
    fn figure(&self, objective: Objective) -> Option<f64> {
        match objective {
            Objective::SharpeRatio => self.sharpe_ratio,
            Objective::TotalReturn => Some(self.total_return),
            Objective::ProfitFactor => self.profit_factor,
            Objective::WinRate => self.win_rate,
            Objective::Expectancy => self.expectancy,
            Objective::FinalEquity => Some(self.final_equity),
        }
    }

    fn total_return(&self) -> Option<f64> {
        Some(self.total_return)
    }

    fn max_drawdown(&self) -> Option<f64> {
        Some(self.max_drawdown)
    }

    fn trade_count(&self) -> Option<u64> {
        Some(self.trade_count)
    }
}

/// A run's objective as a number to rank by; unknown (no trades, say) ranks last — but a
/// profit factor left undefined because no trade lost while the run made money is unbounded,
/// and ranks first.
pub(super) fn score(metrics: &impl Figures, objective: Objective) -> f64 {
    match metrics.figure(objective) {
        Some(v) => v,
        None if objective == Objective::ProfitFactor
            && metrics.trade_count().unwrap_or(0) > 0
            && metrics.total_return().unwrap_or(0.0) > 0.0 =>
        {
            f64::INFINITY
        }
        None => f64::NEG_INFINITY,
    }
}

/// Whether a run's metrics keep within the constraint.
pub(super) fn meets(constraint: &Constraint, metrics: &impl Figures) -> bool {
    constraint.max_drawdown.is_none_or(|d| metrics.max_drawdown().unwrap_or(0.0) <= d)
        && constraint.min_trades.is_none_or(|n| metrics.trade_count().unwrap_or(0) >= n)
}

/// The indices of `rows` ranked by the objective of the metrics `of` picks (highest first):
/// those keeping the constraint first, rows without metrics left out; ties keep grid order.
pub(super) fn rank<'a, R, M: Figures + 'a>(
    rows: &'a [R],
    of: impl Fn(&'a R) -> Option<&'a M>,
    constraint: &Constraint,
    objective: Objective,
) -> Vec<usize> {
    let mut keyed: Vec<(usize, bool, f64)> = rows
        .iter()
        .enumerate()
        .filter_map(|(i, row)| of(row).map(|m| (i, meets(constraint, m), score(m, objective))))
        .collect();
    keyed.sort_by(|a, b| b.1.cmp(&a.1).then(b.2.total_cmp(&a.2)));
    keyed.into_iter().map(|(i, _, _)| i).collect()
}

/// A row's runs over window `n`.
fn window_of(row: &Row, n: usize) -> Option<&WindowRuns> {
    row.result.windows.get(n)
}

/// The walk-forward report: per window, the in-sample best (ranked as the table is), how it
/// did out of sample and the rank it would have had there, beside the baseline (the strategy's
/// current parameters); then the whole: the out-of-sample parts chained (what re-optimising
/// every window would have earned), the walk-forward efficiency (out-of-sample over in-sample
/// objective) and in how many windows the in-sample best beat the baseline out of sample, with
/// the sign test's confidence. `complete`: every part has run (before, the figures cover the
/// combinations run so far).
fn walk_forward_report(stored: &StoredSweep, rows: &[Row], complete: bool) -> WalkForwardReport {
    let baseline = rows.iter().position(|r| r.baseline);
    let mut windows = Vec::with_capacity(stored.windows.len());
    let (mut in_scores, mut out_scores) = (Vec::new(), Vec::new());
    let (mut in_rates, mut out_rates) = (Vec::new(), Vec::new());
    let (mut chained, mut baseline_chained) = (1.0_f64, 1.0_f64);
    let (mut beat, mut compared) = (0u64, 0u64);
    // Keyed by the parameters' JSON text: ties go to the last in that order.
    let mut chosen: BTreeMap<String, (usize, BTreeMap<String, f64>)> = BTreeMap::new();
    for (n, w) in stored.windows.iter().enumerate() {
        let in_sample = |row: &Row| window_of(row, n).and_then(|p| p.in_sample.clone());
        let out_of_sample = |row: &Row| window_of(row, n).and_then(|p| p.out_of_sample.clone());
        let in_rank =
            rank(rows, |r| window_of(r, n).and_then(|p| p.in_sample.as_ref()), &stored.constraint, stored.objective);
        let out_rank = rank(
            rows,
            |r| window_of(r, n).and_then(|p| p.out_of_sample.as_ref()),
            &stored.constraint,
            stored.objective,
        );
        let best = in_rank.first().copied().filter(|&i| {
            in_sample(&rows[i])
                .is_some_and(|m| meets(&stored.constraint, &m) && score(&m, stored.objective) > f64::NEG_INFINITY)
        });
        let baseline_out = baseline.and_then(|b| out_of_sample(&rows[b]));
        let mut entry = WindowReport {
            window: n + 1,
            in_sample: Span { start: from_epoch_ms(w.start), end: from_epoch_ms(w.split) },
            out_of_sample: Span { start: from_epoch_ms(w.split), end: from_epoch_ms(w.end) },
            best: None,
            baseline: baseline
                .map(|b| WindowRuns { in_sample: in_sample(&rows[b]), out_of_sample: baseline_out.clone() }),
            beat_baseline: None,
        };
        if let Some(b) = best {
            let (is, oos) = (in_sample(&rows[b]), out_of_sample(&rows[b]));
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
                chained *= 1.0 + oos.total_return;
                // The baseline's chain covers the same windows as the bests'.
                if let Some(b_out) = &baseline_out {
                    baseline_chained *= 1.0 + b_out.total_return;
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
                    entry.beat_baseline = Some(mine > theirs);
                }
            }
            let parameters = rows[b].result.parameters.clone();
            let key = serde_json::to_string(&parameters).unwrap_or_default();
            chosen.entry(key).or_insert((0, parameters.clone())).0 += 1;
            entry.best = Some(WindowBest {
                parameters,
                in_sample: is,
                out_of_sample: oos,
                out_of_sample_rank: out_position,
                ranked_out_of_sample: out_rank.len(),
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
    WalkForwardReport {
        windows: stored.windows.len(),
        in_sample_fraction: wf.in_sample_fraction.unwrap_or(0.7),
        anchored: wf.anchored.unwrap_or(false),
        complete,
        objective: stored.objective,
        in_sample_objective_mean: in_mean,
        out_of_sample_objective_mean: out_mean,
        efficiency,
        out_of_sample_return: (!out_scores.is_empty()).then_some(chained - 1.0),
        baseline_out_of_sample_return: baseline.map(|_| baseline_chained - 1.0),
        beat_baseline: BeatBaseline {
            windows: beat,
            of: compared,
            confidence: tradeops_core::analytics::sign_test_confidence(beat, compared),
        },
        most_chosen: most.map(|(windows, parameters)| MostChosen { parameters, windows }),
        by_window: windows,
    }
}
