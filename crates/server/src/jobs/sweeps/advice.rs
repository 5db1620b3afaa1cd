//! Recommendations citing walk-forward sweeps: what a completed walk-forward's report says of
//! re-optimising a strategy's parameters ([`WalkForwardFinding`]), as the trade analytics'
//! [`Recommendation`] rows.

use super::report::SweepReport;
use super::{Objective, StoredSweep};
use crate::domain::DomainResult;
use crate::jobs::Jobs;
use std::collections::BTreeMap;
use tradeops_core::analytics::{Recommendation, ScopeType};
use tradeops_core::market::Timeframe;
use tradeops_store::{JobStatus, SweepRecord, SweepRepository};

/// What a recommendation reads of a completed walk-forward sweep's report: kept once read, as a
/// completed sweep never changes.
#[derive(Clone, Debug, PartialEq)]
pub struct WalkForwardFinding {
    pub objective: Objective,
    pub timeframe: Timeframe,
    /// Dollars.
    pub initial_cash: f64,
    /// The strategy's parameters when the sweep was asked, when they were ranked.
    pub baseline: Option<BTreeMap<String, f64>>,
    pub windows: usize,
    /// In how many windows the in-sample best beat the baseline out of sample ...
    pub beat: u64,
    /// ... of how many compared.
    pub of: u64,
    /// Per window, its in-sample best, if any.
    pub bests: Vec<Option<WindowFinding>>,
}

/// A window's in-sample best, as a finding reads it.
#[derive(Clone, Debug, PartialEq)]
pub struct WindowFinding {
    pub parameters: BTreeMap<String, f64>,
    /// Its final equity out of sample (dollars), when that part ran.
    pub out_of_sample_final_equity: Option<f64>,
}

impl WalkForwardFinding {
    /// The finding of a sweep viewed with its results; `None` without a walk-forward report.
    fn of(report: &SweepReport) -> Option<WalkForwardFinding> {
        let results = report.results.as_ref()?;
        let wf = results.walk_forward.as_ref()?;
        Some(WalkForwardFinding {
            objective: report.objective,
            timeframe: report.timeframe,
            initial_cash: report.initial_cash,
            baseline: results.baseline.as_ref().map(|b| b.parameters.clone()),
            windows: wf.windows,
            beat: wf.beat_baseline.windows,
            of: wf.beat_baseline.of,
            bests: wf
                .by_window
                .iter()
                .map(|w| {
                    w.best.as_ref().map(|b| WindowFinding {
                        parameters: b.parameters.clone(),
                        out_of_sample_final_equity: b.out_of_sample.as_ref().map(|m| m.final_equity),
                    })
                })
                .collect(),
        })
    }
}

/// Recommendations citing walk-forward sweeps: per strategy, its latest
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
        let finding = match known {
            Some(finding) => finding,
            None => {
                let report = match super::view(jobs, &sweep, true).await {
                    Ok(report) => report,
                    Err(e) => {
                        // One sweep unreadable does not hide the others' findings.
                        tracing::warn!(sweep = %sweep.sweep_id, error = %e, "a walk-forward sweep could not be read");
                        continue;
                    }
                };
                if report.status != JobStatus::Completed {
                    continue;
                }
                // What the recommendation reads, without the results table.
                let Some(finding) = WalkForwardFinding::of(&report) else { continue };
                let mut findings = jobs.walk_forward_findings.lock().unwrap_or_else(|e| e.into_inner());
                if findings.len() >= 1_000 {
                    findings.clear();
                }
                findings.insert(sweep.sweep_id.clone(), finding.clone());
                finding
            }
        };
        seen.insert(sweep.strategy_id.clone());
        if let Some(row) = walk_forward_recommendation(&sweep, finding, confidence_level) {
            out.push(row);
        }
    }
    Ok(out)
}

/// The recommendation a completed walk-forward sweep's finding supports, if any.
pub(super) fn walk_forward_recommendation(
    sweep: &SweepRecord,
    finding: impl Into<WalkForwardFinding>,
    confidence_level: f64,
) -> Option<Recommendation> {
    let finding: WalkForwardFinding = finding.into();
    let (beat, of) = (finding.beat, finding.of);
    let baseline = finding.baseline.as_ref()?;
    if of < 2 {
        return None;
    }
    let confidence = tradeops_core::analytics::sign_test_confidence(beat, of);
    let latest = finding.bests.iter().rev().find_map(|w| w.as_ref().map(|b| &b.parameters))?;
    let pnls: Vec<f64> = finding
        .bests
        .iter()
        .filter_map(|w| w.as_ref()?.out_of_sample_final_equity)
        .map(|equity| equity - finding.initial_cash)
        .collect();
    let average = pnls.iter().sum::<f64>() / pnls.len().max(1) as f64;
    let words = |parameters: &BTreeMap<String, f64>| -> String {
        parameters.iter().map(|(name, value)| format!("{name} {value}")).collect::<Vec<_>>().join(" / ")
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
    let objective = finding.objective.key().replace('_', " ");
    let text = format!(
        "Walk-forward of {} on {} {} ({} windows, ranked by {objective}, sweep {}): re-optimising beat your current \
         {current} out of sample in {beat} of {of} windows; the latest window's in-sample best is {latest}; {advice}.",
        sweep.strategy_id,
        sweep.symbol,
        finding.timeframe.as_str(),
        finding.windows,
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
