//! The composed run requests read as the derived structs they replace did: every refusal names
//! its field by its path, an unknown field is refused listing the request's fields, and each
//! field list is exactly the shared fields and the request's own.

use super::*;
use crate::http::extract::parse_json;
use serde_json::json;

/// `(detail.field, detail.reason)` of the refusal of `body` as a `T`.
fn refusal<T: serde::de::DeserializeOwned + std::fmt::Debug>(body: Value) -> (String, String) {
    let e = parse_json::<T>(body.to_string().as_bytes()).unwrap_err();
    (e.detail["field"].as_str().unwrap().to_string(), e.detail["reason"].as_str().unwrap().to_string())
}

fn backtest() -> Value {
    json!({"strategy_id": "sma_cross", "symbol": "ABCD", "start": "2026-01-05T14:30:00Z",
           "end": "2026-01-06T21:00:00Z", "parameters": {"fast": 5}, "initial_cash": 5000, "kind": "single"})
}

fn sweep() -> Value {
    json!({"strategy_id": "sma_cross", "symbol": "ABCD", "start": "2026-01-05T14:30:00Z",
           "end": "2026-01-06T21:00:00Z", "grid": {"fast": [5, 10]}, "sample": 1,
           "walk_forward": {"windows": 2}})
}

fn with(mut body: Value, field: &str, value: Option<Value>) -> Value {
    match value {
        Some(value) => body[field] = value,
        None => drop(body.as_object_mut().unwrap().remove(field)),
    }
    body
}

/// The fields `RunFields` takes, as its own refusal of an unknown field lists them.
fn shared_fields() -> Vec<String> {
    let e = serde_json::from_value::<RunFields>(json!({"unknown": 1})).unwrap_err();
    tradeops_core::settings::expected_names(&e.to_string())
}

#[test]
fn each_request_lists_the_shared_fields_and_its_own() {
    let own = |fields: &[&str], own: &[&str]| {
        let mut listed: Vec<String> = fields.iter().map(|f| f.to_string()).collect();
        let mut expected: Vec<String> = shared_fields().into_iter().chain(own.iter().map(|f| f.to_string())).collect();
        listed.sort();
        expected.sort();
        assert_eq!(listed, expected);
    };
    own(BACKTEST_FIELDS, &["kind", "parameters"]);
    own(SWEEP_FIELDS, &["grid", "sample", "seed", "objective", "constraint", "walk_forward"]);
}

#[test]
fn a_composed_request_reads_its_shared_and_its_own_fields() {
    let req: BacktestRequest = parse_json(backtest().to_string().as_bytes()).unwrap();
    assert_eq!(
        (req.kind, req.run.symbol.as_str(), req.run.initial_cash),
        (Some(SingleKind::Single), "ABCD", Some(5000.into()))
    );
    let run = RunRequest::from(req);
    assert_eq!(run.parameters, Some(json!({"fast": 5}).as_object().unwrap().clone()));
    let req: SweepRequest = parse_json(sweep().to_string().as_bytes()).unwrap();
    assert_eq!((req.sample, req.grid.len(), req.walk_forward.map(|w| w.windows)), (Some(1), 1, Some(2)));
    assert_eq!(req.run.strategy_id, "sma_cross");
}

#[test]
fn a_refused_field_is_named_by_its_path_whichever_part_holds_it() {
    for (field, bad) in
        [("symbol", json!(5)), ("start", json!("monday")), ("kind", json!("many")), ("parameters", json!(1))]
    {
        assert_eq!(refusal::<BacktestRequest>(with(backtest(), field, Some(bad))).0, field);
    }
    for (field, bad) in [("end", json!(5)), ("initial_cash", json!("lots")), ("grid", json!(5)), ("sample", json!(-1))]
    {
        assert_eq!(refusal::<SweepRequest>(with(sweep(), field, Some(bad))).0, field);
    }
    assert_eq!(
        refusal::<SweepRequest>(with(sweep(), "walk_forward", Some(json!({"windows": "two"})))).0,
        "walk_forward.windows"
    );
    assert_eq!(
        refusal::<BacktestRequest>(with(backtest(), "symbol", None)),
        ("symbol".into(), format!("is required: {}", "a symbol of 1 to 10 characters of A-Z, 0-9, '.' and '-'"))
    );
    assert_eq!(refusal::<SweepRequest>(with(sweep(), "grid", None)).0, "grid");
    assert_eq!(refusal::<SweepRequest>(with(sweep(), "start", None)).0, "start");
}

#[test]
fn an_unknown_field_is_refused_listing_every_field_of_the_request() {
    let (field, reason) = refusal::<BacktestRequest>(with(backtest(), "bogus", Some(json!(1))));
    assert_eq!(field, "bogus");
    assert_eq!(reason, format!("is not a field of this request; its fields are {}", BACKTEST_FIELDS.join(", ")));
    let (field, reason) = refusal::<SweepRequest>(with(sweep(), "parameters", Some(json!({}))));
    assert_eq!(field, "parameters", "a sweep takes a grid, not one set of parameters");
    assert_eq!(reason, format!("is not a field of this request; its fields are {}", SWEEP_FIELDS.join(", ")));
}
