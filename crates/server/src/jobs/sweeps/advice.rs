//! Recommendations citing walk-forward sweeps: what a completed walk-forward's report says of
//! re-optimising a strategy's parameters, as the trade analytics' [`Recommendation`] rows.

use super::StoredSweep;
use crate::domain::DomainResult;
use crate::jobs::Jobs;
use serde_json::{Map, Value};
use tradeops_core::analytics::{Recommendation, ScopeType};
use tradeops_store::{SweepRecord, SweepRepository};

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
        let body = match known {
            Some(body) => body,
            None => {
                let body = match super::view(jobs, &sweep, true).await {
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
pub(super) fn walk_forward_recommendation(
    sweep: &SweepRecord,
    body: &Value,
    confidence_level: f64,
) -> Option<Recommendation> {
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
