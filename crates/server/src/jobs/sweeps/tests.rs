//! The grid, the parts' size, the walk-forward windows, the ranking and the recommendations of
//! sweeps, without a database.

use super::advice::walk_forward_recommendation;
use super::grid::{combinations, windows_of, Window};
use super::report::rank;
use super::*;
use serde_json::json;

/// The ranking of rows written as JSON, as the report's rows were before they had a type.
impl super::report::Figures for Value {
    fn figure(&self, objective: Objective) -> Option<f64> {
        self[objective.key()].as_f64()
    }

    fn total_return(&self) -> Option<f64> {
        self["total_return"].as_f64()
    }

    fn max_drawdown(&self) -> Option<f64> {
        self["max_drawdown"].as_f64()
    }

    fn trade_count(&self) -> Option<u64> {
        self["trade_count"].as_u64()
    }
}

/// A finding written as the JSON of a sweep's view (what of it a recommendation reads).
impl From<&Value> for WalkForwardFinding {
    fn from(body: &Value) -> WalkForwardFinding {
        let wf = &body["walk_forward"];
        let parameters = |v: &Value| -> Option<BTreeMap<String, f64>> { serde_json::from_value(v.clone()).ok() };
        WalkForwardFinding {
            objective: serde_json::from_value(body["objective"].clone()).unwrap(),
            timeframe: serde_json::from_value(body["timeframe"].clone()).unwrap(),
            initial_cash: body["initial_cash"].as_f64().unwrap_or(0.0),
            baseline: parameters(&body["baseline"]["parameters"]),
            windows: wf["windows"].as_u64().unwrap_or(0) as usize,
            beat: wf["beat_baseline"]["windows"].as_u64().unwrap_or(0),
            of: wf["beat_baseline"]["of"].as_u64().unwrap_or(0),
            bests: wf["by_window"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|w| {
                    parameters(&w["best"]["parameters"]).map(|parameters| WindowFinding {
                        parameters,
                        out_of_sample_final_equity: w["best"]["out_of_sample"]["final_equity"].as_f64(),
                    })
                })
                .collect(),
        }
    }
}

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
    assert_eq!(refused(WalkForward { in_sample_fraction: Some(0.3), ..rolling }), "walk_forward.in_sample_fraction");
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
