//! A sweep's grid — each parameter's axis of values ([`axis`]), its combinations or a seeded
//! sample of them ([`combinations`]), whether a set of parameters is a point of it
//! ([`in_grid`]) — and the walk-forward windows over its range ([`windows_of`]).

use super::{WalkForward, MAX_AXIS_VALUES, MAX_COMBINATIONS, MAX_WINDOWS};
use crate::domain::{DomainError, DomainResult};
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use tradeops_core::time::to_epoch_ms;
use tradeops_core::Timestamp;

/// One walk-forward window, in epoch milliseconds: in sample `[start, split)`, out of sample
/// `[split, end)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
pub(super) struct Window {
    pub(super) start: i64,
    pub(super) split: i64,
    pub(super) end: i64,
}

/// The windows of `walk_forward` over `[start, end)`: boundaries at New York midnight of
/// trading days (the first at `start`, the last at `end`), so a day's bars are never split.
pub(super) fn windows_of(
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

/// One parameter's values, checked.
pub(super) fn axis(name: &str, spec: &Value) -> DomainResult<Vec<f64>> {
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
pub(super) fn combinations(
    grid: &Map<String, Value>,
    sample: Option<u32>,
    seed: u64,
) -> DomainResult<Vec<Map<String, Value>>> {
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

/// Whether `parameters` is a point of the grid (each gridded parameter's value on its axis).
pub(super) fn in_grid(grid: &Map<String, Value>, parameters: &BTreeMap<String, f64>) -> bool {
    grid.iter().all(|(name, spec)| {
        let value = parameters.get(name).copied().unwrap_or(f64::NAN);
        axis(name, spec).is_ok_and(|values| values.iter().any(|v| (v - value).abs() < 1e-9))
    })
}
