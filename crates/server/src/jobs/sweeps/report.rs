//! A sweep as the API shows it, read from its parts ([`view`]): status and progress, and with
//! the results every combination ranked by the objective ([`rank`], [`score`], [`meets`]), the
//! baseline's place and, for a walk-forward sweep, the report by window.

use super::grid::in_grid;
use super::{Constraint, Objective, StoredSweep, WalkForward};
use crate::domain::{DomainError, DomainResult};
use crate::jobs::Jobs;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use tradeops_core::backtest;
use tradeops_store::{JobStatus, SweepRecord, SweepRepository};

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
pub(super) fn score(metrics: &Value, objective: Objective) -> f64 {
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
pub(super) fn meets(constraint: &Constraint, metrics: &Value) -> bool {
    constraint.max_drawdown.is_none_or(|d| metrics["max_drawdown"].as_f64().unwrap_or(0.0) <= d)
        && constraint.min_trades.is_none_or(|n| metrics["trade_count"].as_u64().unwrap_or(0) >= n)
}

/// The indices of `rows` ranked by the objective of the metrics `of` picks (highest first):
/// those keeping the constraint first, rows without metrics left out; ties keep grid order.
pub(super) fn rank<'a>(
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

/// The walk-forward report: per window, the in-sample best (ranked as the table
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

/// An epoch-milliseconds instant as the API writes instants.
fn ms_ts(ms: i64) -> String {
    tradeops_core::time::format_ts(&tradeops_core::time::from_epoch_ms(ms))
}
