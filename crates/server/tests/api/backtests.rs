//! Backtests through the API: the golden run, determinism, validation, missing data downloaded
//! first, and a run interrupted by a restart.

use crate::helpers::*;
use serde_json::{json, Value};

const GOLDEN_CSV: &str = include_str!("fixtures/golden_daily.csv");

pub(crate) async fn wait_done(app: &TestApp, id: &str) -> Value {
    for _ in 0..600 {
        let run = app.get(&format!("/api/backtests/{id}")).await.data().clone();
        if run["status"] == "COMPLETED" || run["status"] == "FAILED" {
            return run;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    panic!("backtest {id} never finished: {}", app.get(&format!("/api/backtests/{id}")).await.body);
}

/// Imports daily bars of `symbol` from `csv`, which holds `bars` of them.
async fn import_daily(app: &TestApp, symbol: &str, csv: &'static str, bars: u64) {
    let req = app
        .client
        .post(app.url(&format!("/api/data/import?symbol={symbol}&timeframe=1d")))
        .bearer_auth(ADMIN_TOKEN)
        .header("content-type", "text/csv")
        .body(csv);
    assert_eq!(app.raw(req).await.assert_ok(200)["bars"], bars);
}

pub(crate) async fn import_golden(app: &TestApp) {
    import_daily(app, "GOLDN", GOLDEN_CSV, 80).await;
}

/// The golden request: sma_cross 5/10 on 80 fixed daily bars, with commission and slippage,
/// under risk limits wide enough for an all-in strategy.
pub(crate) fn golden_request() -> Value {
    json!({
        "strategy_id": "sma_cross", "symbol": "GOLDN", "timeframe": "1d",
        "start": "2026-01-01T00:00:00Z", "end": "2026-05-01T00:00:00Z",
        "parameters": {"fast": 5, "slow": 10},
        "initial_cash": 10000, "commission_rate": 0.001, "slippage_bps": 5,
        "settings": {"risk_controls": {"max_daily_loss": 100000, "max_position_size": 100000, "max_order_value": 1000000}}
    })
}

async fn run(app: &TestApp, body: Value) -> Value {
    let queued = app.post("/api/backtests/run", ADMIN_TOKEN, body).await;
    let data = queued.assert_ok(202).clone();
    assert_eq!(data["status"], "QUEUED");
    wait_done(app, data["backtest_id"].as_str().unwrap()).await
}

/// The result without what differs between runs (ids, times).
fn stable(mut run: Value) -> Value {
    for key in ["backtest_id", "created_at", "started_at", "finished_at", "requested_by"] {
        run.as_object_mut().unwrap().remove(key);
    }
    run
}

#[tokio::test]
async fn the_golden_backtest_gives_the_recorded_result_every_time() {
    let app = spawn_app().await;
    import_golden(&app).await;
    let first = run(&app, golden_request()).await;
    assert_eq!(first["status"], "COMPLETED", "{first}");
    assert_eq!(first["progress"], 1.0);
    for key in [
        "total_return",
        "sharpe_ratio",
        "max_drawdown",
        "win_loss_ratio",
        "win_rate",
        "profit_factor",
        "trades",
        "trade_count",
        "equity_curve",
    ] {
        assert!(first.get(key).is_some_and(|v| !v.is_null()), "{key} in {first}");
    }
    let trades = first["trades"].as_array().unwrap();
    assert!(trades.len() >= 3, "the fixture crosses several times: {trades:?}");
    assert_eq!(first["trade_count"], trades.len());
    for key in
        ["trade_id", "symbol", "strategy_id", "entry_time", "exit_time", "gross_pnl", "net_pnl", "winner_loser_label"]
    {
        assert!(trades[0].get(key).is_some(), "{key}");
    }
    assert_eq!(first["equity_curve"].as_array().unwrap().len(), 80);
    // Metrics agree with the trades and the curve.
    let last = first["equity_curve"].as_array().unwrap().last().unwrap()["equity"].as_f64().unwrap();
    assert!((first["total_return"].as_f64().unwrap() - (last - 10000.0) / 10000.0).abs() < 1e-9);
    let net: f64 = trades.iter().map(|t| t["net_pnl"].as_f64().unwrap()).sum();
    assert!((net - (last - 10000.0)).abs() < 1e-6, "all P&L is in closed trades: {net} vs {last}");

    insta::assert_json_snapshot!("golden_backtest", stable(first.clone()));

    let second = run(&app, golden_request()).await;
    assert_eq!(stable(second), stable(first), "the same request twice gives the same result");

    let list = app.get("/api/backtests").await;
    assert_eq!(list.body["meta"]["count"], 2);
    assert!(list.data()[0]["total_return"].is_number() && list.data()[0].get("equity_curve").is_none());
    let audit = app.get("/api/audit?action=backtest.run").await;
    assert_eq!(audit.body["meta"]["count"], 2);
}

#[tokio::test]
async fn bad_runs_are_refused_and_nothing_is_queued() {
    let app = spawn_app().await;
    import_golden(&app).await;
    let with = |patch: Value| {
        let mut body = golden_request();
        for (k, v) in patch.as_object().unwrap() {
            body[k] = v.clone();
        }
        body
    };
    let field = |reply: &Reply| reply.body["error"]["detail"]["field"].as_str().unwrap_or("").to_string();
    for (patch, expected) in [
        (json!({"strategy_id": "nope"}), "strategy_id"),
        (json!({"parameters": {"fast": 20, "slow": 10}}), "parameters.fast"),
        (json!({"parameters": {"fast": 2.5}}), "parameters.fast"),
        (json!({"parameters": {"speed": 1}}), "parameters.speed"),
        (json!({"strategy_id": "momentum_breakout"}), "timeframe"),
        (json!({"end": "2025-01-01T00:00:00Z"}), "end"),
        (json!({"start": "2026-11-02T00:00:00Z", "end": "2026-12-01T00:00:00Z"}), "end"),
        (json!({"initial_cash": 0}), "initial_cash"),
        (json!({"commission_rate": -0.1}), "commission_rate"),
        (json!({"slippage_bps": 5000}), "slippage_bps"),
        (json!({"settings": {"risk_controls": {"max_daily_loss": -1}}}), "settings.risk_controls.max_daily_loss"),
    ] {
        let reply = app.post("/api/backtests/run", ADMIN_TOKEN, with(patch.clone())).await;
        reply.assert_error(400, "VALIDATION_ERROR");
        assert_eq!(field(&reply), expected, "{patch}: {}", reply.body);
    }
    app.post("/api/backtests/run", ADMIN_TOKEN, with(json!({"fill": "LATER"})))
        .await
        .assert_error(400, "VALIDATION_ERROR");
    app.post("/api/backtests/run", ADMIN_TOKEN, with(json!({"symbol": "NODATA"}))).await.assert_error(404, "NOT_FOUND");
    let viewer = app.token("v", "viewer").await;
    app.post("/api/backtests/run", &viewer, golden_request()).await.assert_error(403, "FORBIDDEN");
    assert_eq!(app.get("/api/backtests").await.body["meta"]["count"], 0, "nothing queued");
    app.get("/api/backtests/bt-nope").await.assert_error(404, "NOT_FOUND");
}

/// A symbol of the simulated market with no stored bars is downloaded first; the run trades
/// the simulated day like the live engine would.
#[tokio::test]
async fn missing_bars_are_downloaded_before_the_run() {
    let app = spawn_app().await;
    let (symbol, _) = app.market_symbols(1).await.remove(0);
    let body = json!({
        "strategy_id": "sma_cross", "symbol": symbol, "start": "2026-11-18T14:30:00Z", "end": "2026-11-18T21:00:00Z",
        "settings": {"risk_controls": {"max_daily_loss": 100000, "max_position_size": 1000000, "max_order_value": 1000000}}
    });
    let done = run(&app, body).await;
    assert_eq!(done["status"], "COMPLETED", "{done}");
    assert_eq!(done["bars"], 390, "the regular session's minute bars");
    assert_eq!(done["fill"], "NEXT_OPEN");
    assert_eq!(done["initial_cash"], 100000.0);
    let downloads = app.get("/api/data/downloads").await;
    assert_eq!(downloads.data()[0]["status"], "COMPLETED");
    assert_eq!(downloads.data()[0]["symbol"], symbol);
    assert_eq!(done["effective_settings"]["risk_controls"]["max_daily_loss"], 100000.0);
}

/// A range stored only in part is completed before the run: the days with no bars are
/// downloaded as one job, and a second run over the same range downloads nothing.
#[tokio::test]
async fn a_range_stored_in_part_is_completed_before_the_run() {
    let app = spawn_app().await;
    let (symbol, _) = app.market_symbols(1).await.remove(0);
    // Tuesday the 17th (New York) is stored; Wednesday the 18th is not.
    let day = json!({"symbol": symbol, "start": "2026-11-17T05:00:00Z", "end": "2026-11-18T05:00:00Z"});
    let id = app.post("/api/data/download", ADMIN_TOKEN, day).await.assert_ok(202)["request_id"].clone();
    let mut download = serde_json::Value::Null;
    for _ in 0..300 {
        download = app.get(&format!("/api/data/downloads/{}", id.as_str().unwrap())).await.data().clone();
        if download["status"] == "COMPLETED" {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(download["status"], "COMPLETED", "{download}");
    let body = json!({
        "strategy_id": "sma_cross", "symbol": symbol, "start": "2026-11-17T14:30:00Z", "end": "2026-11-18T21:00:00Z",
        "settings": {"risk_controls": {"max_daily_loss": 100000, "max_position_size": 1000000, "max_order_value": 1000000}}
    });
    let done = run(&app, body.clone()).await;
    assert_eq!(done["status"], "COMPLETED", "{done}");
    // The symbol is the radar's first, a runner: the simulated market may halt it, and a halted
    // minute has no bar.
    let sim = SimDays::new();
    let halted: i64 = ["2026-11-17", "2026-11-18"]
        .iter()
        .flat_map(|day| sim.halts(&symbol, day.parse().unwrap()))
        .map(|h| (h.end - h.start).num_minutes())
        .sum();
    assert_eq!(
        done["bars"],
        1830 - halted,
        "every minute from 09:30 on the 17th to 16:00 on the 18th but the halted ones, not the 17th alone"
    );
    let downloads = app.get("/api/data/downloads").await;
    assert_eq!(downloads.body["meta"]["count"], 2, "{}", downloads.body);
    let filled = &downloads.data()[0];
    assert_eq!(filled["status"], "COMPLETED");
    assert_eq!(
        (filled["start"].as_str(), filled["end"].as_str()),
        (Some("2026-11-18T05:00:00.000Z"), Some("2026-11-18T21:00:00.000Z"))
    );
    let again = run(&app, body).await;
    assert_eq!(stable(again), stable(done));
    assert_eq!(app.get("/api/data/downloads").await.body["meta"]["count"], 2, "nothing left to download");
}

/// A run a crash left RUNNING is run again at the next start and completes.
#[tokio::test]
async fn a_run_interrupted_by_a_restart_completes_after_it() {
    let app = spawn_app().await;
    import_golden(&app).await;
    let first = run(&app, golden_request()).await;
    let id = first["backtest_id"].as_str().unwrap().to_string();
    let db = tradeops_store::Database::open(&app.config.database_url).await.unwrap();
    use tradeops_store::BacktestRepository;
    let mut record = db.backtest(&id).await.unwrap().unwrap();
    record.status = "RUNNING".into();
    record.progress = 0.4;
    record.result = None;
    db.update_backtest(&record).await.unwrap();
    db.close().await;
    let app = app.restart().await;
    let again = wait_done(&app, &id).await;
    assert_eq!(again["status"], "COMPLETED");
    assert_eq!(stable(again), stable(first));
}

/// backtesting.py's bundled GOOG daily bars (public prices; the core crate's fixture), imported
/// as the file ships: pandas' unnamed index column is the date.
const GOOG_CSV: &str = include_str!("../../../core/src/backtest/goog_daily.csv");

async fn import_goog(app: &TestApp) {
    import_daily(app, "GOOG", GOOG_CSV, 2148).await;
}

fn goog_request(settings: Value) -> Value {
    json!({
        "strategy_id": "sma_cross", "symbol": "GOOG", "timeframe": "1d",
        "start": "2004-08-19T00:00:00Z", "end": "2013-03-02T00:00:00Z",
        "parameters": {"fast": 10, "slow": 20}, "initial_cash": 100000, "settings": settings
    })
}

/// Parity with backtesting.py 0.6.6's SmaCross on its GOOG bars, with the desk's limits lifted
/// and no market buy buffer, through the API: 47 trades, the first sized floor(100,000 / 179.13)
/// at the next open, and 771,184.06 at the end (every trade is compared by
/// `bench/backtesting_py_parity.sh`).
#[tokio::test]
async fn sma_cross_on_goog_matches_backtesting_py_through_the_api() {
    let app = spawn_app().await;
    import_goog(&app).await;
    let lifted = json!({"risk_controls": {
        "max_daily_loss": 1000000000, "max_order_value": 1000000000, "max_position_size": 10000000,
        "market_buy_buffer_pct": 0
    }});
    let done = run(&app, goog_request(lifted)).await;
    assert_eq!(done["status"], "COMPLETED", "{done}");
    assert_eq!(done["trade_count"], 47);
    assert_eq!(done["final_equity"], 771184.06);
    assert_eq!(done["market_buy_buffer_pct"], 0.0);
    assert_eq!(done["refusals"], json!({}));
    let first = &done["trades"][0];
    assert_eq!((first["quantity"].as_u64(), first["entry_price"].as_f64()), (Some(558), Some(179.13)));
    assert_eq!(app.get("/api/data/downloads").await.body["meta"]["count"], 0, "imported bars only");
}

/// Under the default limits an all-in run trades within them (each entry capped at the 25,000
/// maximum order value, the reason saying so); a run whose every entry the gate refuses says
/// why, by rule, and its undefined metrics are null.
#[tokio::test]
async fn all_in_runs_trade_within_the_limits_and_refusals_are_counted_by_rule() {
    let app = spawn_app().await;
    import_goog(&app).await;
    let defaults = run(&app, goog_request(json!({"risk_controls": {"max_daily_loss": 1000000}}))).await;
    assert_eq!(defaults["status"], "COMPLETED", "{defaults}");
    assert_eq!(defaults["trade_count"], 47, "sized down, not refused: {}", defaults["refusals"]);
    assert_eq!(defaults["refusals"], json!({}));
    assert_eq!(defaults["market_buy_buffer_pct"], 3.0);
    let first = &defaults["trades"][0];
    assert_eq!(first["quantity"], 139, "floor(25,000 / 179.13)");

    let refused = run(&app, goog_request(json!({"risk_controls": {"max_order_value": 100}}))).await;
    assert_eq!(refused["status"], "COMPLETED", "{refused}");
    assert_eq!(refused["trade_count"], 0);
    assert_eq!(refused["refusals"], json!({"MAX_ORDER_VALUE": 47}), "no share of GOOG costs under 100");
    for undefined in ["sharpe_ratio", "win_loss_ratio", "win_rate", "profit_factor"] {
        assert!(refused[undefined].is_null(), "{undefined}: {}", refused[undefined]);
    }
    assert_eq!(refused["total_return"], 0.0);
    let listed = app.get("/api/backtests").await;
    assert_eq!(listed.data()[0]["refusals"], json!({"MAX_ORDER_VALUE": 47}), "list rows show them too");
}

/// A sweep of the golden request's parameters: combinations ranked highest objective first,
/// those the strategy refuses skipped, each the same run as `POST /api/backtests/run` gives.
async fn wait_sweep(app: &TestApp, id: &str) -> Value {
    for _ in 0..1500 {
        let sweep = app.get(&format!("/api/backtests/sweeps/{id}")).await.data().clone();
        if ["COMPLETED", "FAILED", "CANCELED"].contains(&sweep["status"].as_str().unwrap()) {
            return sweep;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    panic!("sweep {id} never finished");
}

pub(crate) fn sweep_request(grid: Value) -> Value {
    let mut body = golden_request();
    let body = body.as_object_mut().unwrap();
    body.remove("parameters");
    body.insert("grid".into(), grid);
    Value::Object(body.clone())
}

#[tokio::test]
async fn a_sweep_ranks_every_combination_as_its_own_backtest_would() {
    let app = spawn_app().await;
    import_golden(&app).await;
    // fast 5, 10, 15 × slow 10, 20: (10, 10) and (15, 10) are refused by sma_cross (fast < slow).
    let grid = json!({"fast": {"from": 5, "to": 15, "step": 5}, "slow": [10, 20]});
    let queued = app.post("/api/backtests/sweeps", ADMIN_TOKEN, sweep_request(grid.clone())).await;
    let accepted = queued.assert_ok(202).clone();
    assert_eq!(accepted["combinations"], 4);
    let sweep = wait_sweep(&app, accepted["sweep_id"].as_str().unwrap()).await;
    assert_eq!(sweep["status"], "COMPLETED", "{sweep}");
    assert_eq!(
        (sweep["completed"].clone(), sweep["skipped"].clone(), sweep["progress"].clone()),
        (json!(4), json!(2), json!(1.0))
    );
    assert_eq!(sweep["objective"], "sharpe_ratio");
    // The service's own time for the sweep: queued, first part running, last part ended.
    let at = |key: &str| tradeops_core::time::parse_ts(sweep[key].as_str().unwrap_or_default()).ok();
    let (created, started, finished) = (at("created_at"), at("started_at"), at("finished_at"));
    assert!(created.is_some() && started.is_some() && finished.is_some(), "{sweep}");
    assert!(created <= started && started <= finished, "{sweep}");
    let results = sweep["results"].as_array().unwrap();
    assert_eq!(results.len(), 4);
    let sharpe: Vec<f64> = results.iter().map(|r| r["sharpe_ratio"].as_f64().unwrap_or(f64::NEG_INFINITY)).collect();
    assert!(sharpe.windows(2).all(|w| w[0] >= w[1]), "ranked highest first: {sharpe:?}");
    assert_eq!(sweep["best"], results[0]);
    // The strategy's current parameters (10 / 20) are a point of the grid: ranked with it.
    let baseline = results.iter().position(|r| r["baseline"] == true).expect("the baseline's row") + 1;
    assert_eq!(
        sweep["baseline"],
        json!({"parameters": {"fast": 10.0, "slow": 20.0}, "rank": baseline, "in_grid": true})
    );
    // Each combination is the backtest the same request runs alone.
    for row in results {
        let mut single = golden_request();
        single["parameters"] = row["parameters"].clone();
        let alone = run(&app, single).await;
        for key in ["total_return", "sharpe_ratio", "max_drawdown", "trade_count", "profit_factor", "final_equity"] {
            assert_eq!(row[key], alone[key], "{key} of {}", row["parameters"]);
        }
    }
    // A constraint nothing meets: listed, unranked, no best.
    let mut strict = sweep_request(grid);
    strict["constraint"] = json!({"max_drawdown": 0.0});
    strict["objective"] = json!("total_return");
    let id = app.post("/api/backtests/sweeps", ADMIN_TOKEN, strict).await.assert_ok(202)["sweep_id"].clone();
    let strict = wait_sweep(&app, id.as_str().unwrap()).await;
    assert_eq!(strict["best"], Value::Null, "{strict}");
    assert!(strict["results"].as_array().unwrap().iter().all(|r| r["meets_constraint"] == false));
    let listed = app.get("/api/backtests/sweeps").await;
    assert_eq!(listed.body["meta"]["count"], 2);
    assert!(listed.data()[0].get("results").is_none(), "the list leaves results out");
    let audit = app.get("/api/audit?action=backtest.sweep").await;
    assert_eq!(audit.body["meta"]["count"], 2);
}

#[tokio::test]
async fn bad_sweeps_are_refused_and_nothing_is_queued() {
    trait Refused {
        fn assert_validation(&self, field: &str);
    }
    impl Refused for Reply {
        fn assert_validation(&self, field: &str) {
            self.assert_error(400, "VALIDATION_ERROR");
            assert_eq!(self.body["error"]["detail"]["field"], field, "{}", self.body);
        }
    }
    let app = spawn_app().await;
    import_golden(&app).await;
    let refused = |grid: Value| sweep_request(grid);
    app.post("/api/backtests/sweeps", ADMIN_TOKEN, refused(json!({"fast": {"from": 9, "to": 1, "step": 1}})))
        .await
        .assert_validation("grid.fast");
    app.post("/api/backtests/sweeps", ADMIN_TOKEN, refused(json!({}))).await.assert_validation("grid");
    // Every combination refused by the strategy.
    app.post("/api/backtests/sweeps", ADMIN_TOKEN, refused(json!({"fast": [30], "slow": [10, 20]})))
        .await
        .assert_error(400, "VALIDATION_ERROR");
    let mut big =
        refused(json!({"fast": {"from": 1, "to": 200, "step": 1}, "slow": {"from": 1, "to": 200, "step": 1}}));
    app.post("/api/backtests/sweeps", ADMIN_TOKEN, big.clone()).await.assert_validation("grid");
    big["sample"] = json!(0);
    app.post("/api/backtests/sweeps", ADMIN_TOKEN, big).await.assert_error(400, "VALIDATION_ERROR");
    assert_eq!(app.get("/api/backtests/sweeps").await.body["meta"]["count"], 0);
    app.get("/api/backtests/sweeps/sw-nope").await.assert_error(404, "NOT_FOUND");
}

/// A sweep canceled while queued (this service runs no jobs): every part `CANCELED`, and a
/// second cancel is refused, changing nothing.
#[tokio::test]
async fn a_queued_sweep_is_canceled_whole() {
    let app = spawn_app_with(|config| config.jobs.run = false).await;
    let (symbol, _) = app.market_symbols(1).await.remove(0);
    let grid = json!({"fast": {"from": 2, "to": 9, "step": 1}, "slow": {"from": 10, "to": 20, "step": 1}});
    let mut body = sweep_request(grid);
    body["symbol"] = json!(symbol);
    body["timeframe"] = json!("1m");
    let id = app.post("/api/backtests/sweeps", ADMIN_TOKEN, body).await.assert_ok(202)["sweep_id"].clone();
    let id = id.as_str().unwrap();
    let queued = app.get(&format!("/api/backtests/sweeps/{id}")).await.data().clone();
    assert_eq!(
        (queued["status"].clone(), queued["combinations"].clone(), queued["parts"].clone()),
        (json!("QUEUED"), json!(89), json!(4)),
        "88 of the grid and the strategy's current 10 / 20, over about 82,000 minute bars: 24 a part"
    );
    let canceled = app.post(&format!("/api/backtests/sweeps/{id}/cancel"), ADMIN_TOKEN, json!({})).await;
    assert_eq!(canceled.assert_ok(200)["status"], "CANCELED");
    app.post(&format!("/api/backtests/sweeps/{id}/cancel"), ADMIN_TOKEN, json!({}))
        .await
        .assert_error(409, "SETTINGS_UPDATE_BLOCKED");
}

/// Walk-forward: the range split into rolling windows at trading-day boundaries;
/// each window's in-sample best is the combination a backtest of the in-sample range ranks
/// first, and its out-of-sample figures are a backtest of the out-of-sample range; the whole
/// chains the out-of-sample parts and counts the windows the best beat the current parameters.
#[tokio::test]
async fn a_walk_forward_shows_each_windows_in_sample_best_out_of_sample() {
    // Some thirty single runs check it.
    let app = spawn_app_with(|config| {
        config.auth.rate_limit_per_second = 1_000_000;
        config.auth.rate_limit_burst = 1_000_000;
    })
    .await;
    import_goog(&app).await;
    let lifted = json!({"risk_controls": {
        "max_daily_loss": 1000000000, "max_order_value": 1000000000, "max_position_size": 10000000,
        "market_buy_buffer_pct": 0
    }});
    let mut body = goog_request(lifted.clone());
    body.as_object_mut().unwrap().remove("parameters");
    body["grid"] = json!({"fast": [5, 20, 30], "slow": [50, 100]});
    body["objective"] = json!("total_return");
    body["walk_forward"] = json!({"windows": 8, "in_sample_fraction": 0.6});
    let accepted = app.post("/api/backtests/sweeps", ADMIN_TOKEN, body.clone()).await.assert_ok(202).clone();
    assert_eq!(accepted["combinations"], 7, "the grid's 6 and the current 10 / 20 beside them");
    let sweep = wait_sweep(&app, accepted["sweep_id"].as_str().unwrap()).await;
    assert_eq!(sweep["status"], "COMPLETED", "{sweep}");
    let wf = &sweep["walk_forward"];
    assert_eq!((wf["windows"].clone(), wf["complete"].clone()), (json!(8), json!(true)), "{wf}");
    let windows = wf["by_window"].as_array().unwrap();
    assert_eq!(windows.len(), 8);
    // Rolling: the out-of-sample parts follow one another from the first split to the end.
    assert_eq!(windows[0]["in_sample"]["start"], "2004-08-19T00:00:00.000Z", "the range's start");
    assert_eq!(windows[0]["in_sample"]["start"], sweep["start"]);
    assert_eq!(windows[7]["out_of_sample"]["end"], sweep["end"]);
    for pair in windows.windows(2) {
        assert_eq!(pair[0]["out_of_sample"]["end"], pair[1]["out_of_sample"]["start"]);
        assert!(pair[0]["in_sample"]["start"].as_str() < pair[1]["in_sample"]["start"].as_str());
    }
    let range = |w: &Value, part: &str, parameters: &Value| {
        let mut single = goog_request(lifted.clone());
        single["start"] = w[part]["start"].clone();
        single["end"] = w[part]["end"].clone();
        single["parameters"] = parameters.clone();
        single
    };
    let (mut chained, mut beat, mut compared) = (1.0, 0, 0);
    for w in windows {
        assert_eq!(w["in_sample"]["end"], w["out_of_sample"]["start"]);
        let best = &w["best"];
        // The in-sample best is the combination whose in-sample backtest returned most.
        let mut returns = Vec::new();
        for row in sweep["results"].as_array().unwrap() {
            let alone = run(&app, range(w, "in_sample", &row["parameters"])).await;
            returns.push((alone["total_return"].as_f64().unwrap(), row["parameters"].clone()));
        }
        let top = returns.iter().map(|(r, _)| *r).fold(f64::NEG_INFINITY, f64::max);
        let tops: Vec<_> = returns.iter().filter(|(r, _)| *r == top).map(|(_, p)| p.clone()).collect();
        assert!(
            tops.contains(&best["parameters"]),
            "window {}: {} not among {tops:?}",
            w["window"],
            best["parameters"]
        );
        assert_eq!(best["in_sample"]["total_return"].as_f64(), Some(top));
        // Its out-of-sample figures are the out-of-sample range's backtest.
        let out = run(&app, range(w, "out_of_sample", &best["parameters"])).await;
        for key in ["total_return", "trade_count", "final_equity", "max_drawdown"] {
            assert_eq!(best["out_of_sample"][key], out[key], "window {} {key}", w["window"]);
        }
        chained *= 1.0 + out["total_return"].as_f64().unwrap();
        let rank = best["out_of_sample_rank"].as_u64().unwrap();
        assert!((1..=7).contains(&rank) && best["ranked_out_of_sample"] == 7, "{best}");
        if let Some(won) = w["beat_baseline"].as_bool() {
            compared += 1;
            beat += u64::from(won);
            let base = run(&app, range(w, "out_of_sample", &json!({"fast": 10, "slow": 20}))).await;
            assert_eq!(w["baseline"]["out_of_sample"]["total_return"], base["total_return"]);
            assert_eq!(won, out["total_return"].as_f64() > base["total_return"].as_f64());
        }
    }
    assert!((wf["out_of_sample_return"].as_f64().unwrap() - (chained - 1.0)).abs() < 1e-9, "{wf}");
    assert_eq!(
        (wf["beat_baseline"]["windows"].clone(), wf["beat_baseline"]["of"].clone()),
        (json!(beat), json!(compared))
    );
    // The results table still ranks the whole range; the windows' figures are only in the report.
    assert!(sweep["results"][0].get("windows").is_none());
    assert_eq!(sweep["baseline"]["in_grid"], false);
    let confidence = wf["beat_baseline"]["confidence"].as_f64().unwrap();

    // Recommendations cite it: re-optimising against the current 10 / 20, in how
    // many windows, with the sign test's confidence.
    let recommendations = app.get("/api/trades/recommendations?scope_type=STRATEGY&scope_value=sma_cross").await;
    let cited: Vec<&Value> =
        recommendations.data().as_array().unwrap().iter().filter(|r| r["sweep_id"] == sweep["sweep_id"]).collect();
    assert_eq!(cited.len(), 1, "{}", recommendations.body);
    let row = cited[0];
    assert_eq!(row["recommendation_id"], "STRATEGY:sma_cross:walk_forward");
    assert_eq!(
        (row["sample_size"].as_u64(), row["win_rate"].as_f64()),
        (Some(compared), Some(beat as f64 / compared as f64))
    );
    let text = row["recommendation_text"].as_str().unwrap();
    assert!(text.contains(&format!("in {beat} of {compared} windows")), "{text}");
    assert!(text.contains("fast 10 / slow 20"), "{text}");
    assert_eq!(row["confidence_score"].as_f64(), Some(confidence));

    // Too many windows for the range, or a fraction out of bounds: refused, nothing queued.
    let before = app.get("/api/backtests/sweeps").await.body["meta"]["count"].clone();
    let mut short = body.clone();
    short["end"] = json!("2004-08-27T00:00:00Z");
    short["walk_forward"] = json!({"windows": 20});
    let reply = app.post("/api/backtests/sweeps", ADMIN_TOKEN, short).await;
    reply.assert_error(400, "VALIDATION_ERROR");
    assert_eq!(reply.body["error"]["detail"]["field"], "walk_forward.windows", "{}", reply.body);
    let mut fraction = body.clone();
    fraction["walk_forward"] = json!({"windows": 3, "in_sample_fraction": 0.2});
    let reply = app.post("/api/backtests/sweeps", ADMIN_TOKEN, fraction).await;
    assert_eq!(reply.body["error"]["detail"]["field"], "walk_forward.in_sample_fraction", "{}", reply.body);
    assert_eq!(app.get("/api/backtests/sweeps").await.body["meta"]["count"], before);
}

/// The whole-desk replay: a simulated morning replayed through the radar, the
/// allocator's auto-watch, the strategies, the risk gate and the paper broker — the live runner
/// on a manual clock. The allocator watches radar symbols, the strategies trade them, and the
/// result reads like live analytics; the same request replays to the same trades.
#[tokio::test]
async fn a_desk_replay_trades_a_simulated_day_through_the_live_runner_the_same_way_twice() {
    // It polls two replays to their end, then reads the live desk.
    let app = spawn_app_with(|config| {
        config.auth.rate_limit_per_second = 1_000_000;
        config.auth.rate_limit_burst = 1_000_000;
    })
    .await;
    let body = json!({
        "kind": "desk", "start": "2026-11-19T14:30:00Z", "end": "2026-11-19T17:30:00Z", "initial_cash": 100000,
        "settings": {"strategy_allocator": {"auto_watch": true, "auto_watch_top_n": 5}}
    });
    let replay = |body: Value| async {
        let queued = app.post("/api/backtests", ADMIN_TOKEN, body).await;
        let id = queued.assert_ok(202)["backtest_id"].as_str().unwrap().to_string();
        wait_done(&app, &id).await
    };
    let first = replay(body.clone()).await;
    assert_eq!(first["status"], "COMPLETED", "{first}");
    assert_eq!((first["kind"].clone(), first["symbol"].clone()), (json!("desk"), json!("*")));
    // A backtest row in every field the schema requires: the allocator's strategy, its version
    // and parameters, minute bars, the paper broker's fills.
    assert_eq!(
        (first["strategy_id"].clone(), first["timeframe"].clone(), first["fill"].clone()),
        (json!("momentum_breakout"), json!("1m"), json!("PAPER"))
    );
    assert!(
        first["strategy_version"].as_str().is_some_and(|v| !v.is_empty()) && first["parameters"].is_object(),
        "{first}"
    );
    assert_eq!(first["steps"], 719, "three hours of 15-second prints after the start's");
    let watched = first["watched"].as_array().unwrap();
    assert!(!watched.is_empty() && watched.iter().all(|w| w["source"] == "RADAR"), "{watched:?}");
    let trades = first["trades"].as_array().unwrap();
    assert!(!trades.is_empty(), "the strategies traded the radar's symbols: {}", first["by_symbol"]);
    assert_eq!(first["trade_count"], trades.len());
    for t in trades {
        assert!(watched.iter().any(|w| w["symbol"] == t["symbol"]), "{} was not watched", t["symbol"]);
        assert_eq!(t["mode"], "PAPER");
        // The deep dive of live analytics: the features the entry decided on, outcomes, reasons.
        assert!(t["detail"]["features"]["relative_volume"].is_number(), "{}", t["detail"]);
        assert_eq!(t["detail"]["outcomes"]["exit_reason"], t["exit_reason"]);
        assert!(!t["detail"]["explanations"].as_array().unwrap().is_empty());
        assert!(
            t["entry_time"].as_str() >= Some("2026-11-19T14:30") && t["exit_time"].as_str() < Some("2026-11-19T17:30")
        );
    }
    let by_symbol: f64 = first["by_symbol"].as_array().unwrap().iter().map(|s| s["net_pnl"].as_f64().unwrap()).sum();
    let net: f64 = trades.iter().map(|t| t["net_pnl"].as_f64().unwrap()).sum();
    assert!((by_symbol - net).abs() < 0.005, "per-symbol P&L adds up to the trades'");
    // Deterministic: the same request, the same trades and curve.
    let second = replay(body.clone()).await;
    assert_eq!(second["trades"], first["trades"]);
    assert_eq!(second["equity_curve"], first["equity_curve"]);
    assert_eq!(second["violations"], first["violations"]);
    // The live desk was not touched: its settings (auto-watch off), watchlist, trades and orders.
    assert_eq!(app.get("/api/settings").await.data()["strategy_allocator"]["auto_watch"], false);
    let watchlist = app.get("/api/watchlist").await;
    assert_eq!(watchlist.body["meta"]["count"], 0, "{}", watchlist.body);
    assert_eq!(app.get("/api/trades").await.body["meta"]["count"], 0);
    assert_eq!(app.get("/api/orders").await.data().as_array().map(Vec::len), Some(0));

    // Refused, nothing queued: a range ending in the future, backwards, or longer than 5 days.
    let before = app.get("/api/backtests").await.body["meta"]["count"].clone();
    for (start, end, field) in [
        ("2026-11-20T14:30:00Z", "2026-11-20T17:30:00Z", "end"),
        ("2026-11-19T17:30:00Z", "2026-11-19T14:30:00Z", "end"),
        ("2026-11-01T00:00:00Z", "2026-11-19T00:00:00Z", "end"),
    ] {
        let reply = app.post("/api/backtests", ADMIN_TOKEN, json!({"kind": "desk", "start": start, "end": end})).await;
        reply.assert_error(400, "VALIDATION_ERROR");
        assert_eq!(reply.body["error"]["detail"]["field"], field, "{}", reply.body);
    }
    let calendar = json!({"kind": "desk", "start": "2026-11-19T14:30:00Z", "end": "2026-11-19T15:30:00Z",
                          "settings": {"runtime": {"market_calendar": "NYSE"}}});
    let reply = app.post("/api/backtests/run", ADMIN_TOKEN, calendar).await;
    reply.assert_error(400, "VALIDATION_ERROR");
    assert_eq!(reply.body["error"]["detail"]["field"], "settings.runtime", "{}", reply.body);
    assert_eq!(app.get("/api/backtests").await.body["meta"]["count"], before);
}

/// A replay of downloaded days (`source: "downloaded"`): the stored minute bars of
/// every symbol, printed as the simulated market prints its own, with the previous closes and
/// average volumes the stored daily bars give. Downloaded from the simulated market, a day
/// replays to the very trades, watchlist and violations the simulated replay of that day makes;
/// a symbol or range with nothing stored is refused, nothing queued.
#[tokio::test]
async fn a_replay_of_downloaded_days_trades_as_the_simulated_replay_of_the_same_days() {
    const SYMBOLS: usize = 30;
    let app = spawn_app_with(|config| {
        config.auth.rate_limit_per_second = 1_000_000;
        config.auth.rate_limit_burst = 1_000_000;
        config.sim.symbols = SYMBOLS as u32;
        // The stored days know no float or sector; neither does this universe.
        config.sim.reference_data = false;
    })
    .await;
    let universe = tradeops_brokers::simulated::SimulatedMarket::new(app.config.sim.seed, SYMBOLS).universe;
    let mut downloads = Vec::new();
    for p in &universe.symbols {
        for (timeframe, start, end) in [
            ("1m", "2026-11-19T05:00:00Z", "2026-11-20T05:00:00Z"),
            ("1d", "2026-10-10T04:00:00Z", "2026-11-19T05:00:00Z"),
        ] {
            let body = json!({"symbol": p.symbol.as_str(), "timeframe": timeframe, "start": start, "end": end});
            let queued = app.post("/api/data/download", ADMIN_TOKEN, body).await;
            downloads.push(queued.assert_ok(202)["request_id"].as_str().unwrap().to_string());
        }
    }
    for id in downloads {
        let mut job = Value::Null;
        for _ in 0..3000 {
            job = app.get(&format!("/api/data/downloads/{id}")).await.data().clone();
            if job["status"] != "QUEUED" && job["status"] != "RUNNING" {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        assert_eq!(job["status"], "COMPLETED", "{job}");
    }

    let desk = json!({"strategy_allocator": {"auto_watch": true, "auto_watch_top_n": 3},
        "momentum_radar": {"min_percentage_gain": -100, "min_relative_volume": 0, "max_float": 100000000000u64,
                           "min_volume": 0, "min_price": 0.01, "max_price": 100000}});
    let replay = |source: &'static str| {
        let desk = desk.clone();
        let app = &app;
        async move {
            let body = json!({"kind": "desk", "source": source, "start": "2026-11-19T14:30:00Z",
                              "end": "2026-11-19T17:30:00Z", "settings": desk});
            let queued = app.post("/api/backtests", ADMIN_TOKEN, body).await;
            let id = queued.assert_ok(202)["backtest_id"].as_str().unwrap().to_string();
            let done = wait_done(app, &id).await;
            assert_eq!(done["status"], "COMPLETED", "{done}");
            done
        }
    };
    let simulated = replay("simulated").await;
    let downloaded = replay("downloaded").await;
    assert_eq!(downloaded["source"], "downloaded");
    let mut symbols: Vec<&str> = universe.symbols.iter().map(|p| p.symbol.as_str()).collect();
    symbols.sort_unstable();
    assert_eq!(downloaded["symbols"], json!(symbols), "every symbol with stored minute bars");
    let trades = simulated["trades"].as_array().unwrap();
    assert!(!trades.is_empty(), "the simulated day trades: {}", simulated["watched"]);
    // The same trades (their deep dives aside: the simulated market also knows each symbol's
    // history beyond what was downloaded), watchlist, violations and curve.
    let rows = |run: &Value| -> Vec<Value> {
        run["trades"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| {
                let mut t = t.clone();
                t.as_object_mut().unwrap().retain(|k, _| k != "detail" && k != "trade_id");
                t
            })
            .collect()
    };
    assert_eq!(rows(&downloaded), rows(&simulated));
    assert_eq!(downloaded["watched"], simulated["watched"]);
    assert_eq!(downloaded["violations"], simulated["violations"]);
    assert_eq!(downloaded["equity_curve"], simulated["equity_curve"]);
    assert_eq!(downloaded["final_equity"], simulated["final_equity"]);

    // Nothing stored in the range, a symbol with nothing stored, symbols on a simulated replay,
    // an unknown source: refused, nothing queued.
    let before = app.get("/api/backtests").await.body["meta"]["count"].clone();
    let base =
        json!({"kind": "desk", "source": "downloaded", "start": "2026-11-18T14:30:00Z", "end": "2026-11-18T17:30:00Z"});
    app.post("/api/backtests", ADMIN_TOKEN, base.clone()).await.assert_error(404, "NOT_FOUND");
    let mut unknown = base.clone();
    unknown["start"] = json!("2026-11-19T14:30:00Z");
    unknown["end"] = json!("2026-11-19T17:30:00Z");
    unknown["symbols"] = json!([symbols[0], "ZZZZ"]);
    app.post("/api/backtests", ADMIN_TOKEN, unknown.clone()).await.assert_error(404, "NOT_FOUND");
    for (patch, field) in [
        (json!({"source": "simulated", "symbols": [symbols[0]]}), "symbols"),
        (json!({"symbols": [symbols[0], symbols[0]]}), "symbols[1]"),
        (json!({"symbols": []}), "symbols"),
        (json!({"source": "alpaca"}), "source"),
    ] {
        let mut body = unknown.clone();
        for (k, v) in patch.as_object().unwrap() {
            body[k] = v.clone();
        }
        let reply = app.post("/api/backtests", ADMIN_TOKEN, body).await;
        reply.assert_error(400, "VALIDATION_ERROR");
        assert_eq!(reply.body["error"]["detail"]["field"], field, "{}", reply.body);
    }
    assert_eq!(app.get("/api/backtests").await.body["meta"]["count"], before);
}
