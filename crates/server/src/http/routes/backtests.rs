//! Backtests: `POST /api/backtests/run`, `GET /api/backtests`, `GET /api/backtests/{backtest_id}`
//! (CONTRACT §4), `POST /api/backtests` (the same runs, and whole-desk replays: `kind: "desk"`)
//! and `POST /api/backtests/{backtest_id}/cancel`. Runs are durable jobs of
//! [`crate::jobs::backtests`]; their JSON shape ([`run_json`], the rows, the detail and the
//! `backtest.updated` event) is written here. Parameter sweeps, under `/api/backtests/sweeps`,
//! are [`crate::http::routes::sweeps`]'.

use crate::http::auth::Caller;
use crate::http::envelope::{ApiResponse, SuccessBody};
use crate::http::error::{ApiError, ApiResult};
use crate::http::extract::{parse_json, Path, Query};
use crate::http::guard::{Action, Sensitive, Target};
use crate::http::routes::list_limit;
use crate::http::runs::{BacktestRequest, DeskRequest};
use crate::http::state::AppState;
use axum::extract::State;
use axum::routing::{get, post};
use axum::Router;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use tradeops_core::time::{format_ts, from_epoch_ms};
use tradeops_core::Role;
use tradeops_store::{BacktestRecord, BacktestRepository, JobStatus};

pub const BACKTEST_RUN: Action = Action { name: "backtest.run", role: Role::Operator };
pub const BACKTEST_CANCEL: Action = Action { name: "backtest.cancel", role: Role::Operator };

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/api/backtests/run", post(run))
        .route("/api/backtests", get(list).post(create))
        .route("/api/backtests/{backtest_id}", get(one))
        .route("/api/backtests/{backtest_id}/cancel", post(cancel))
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct BacktestAccepted {
    pub backtest_id: String,
    #[schema(value_type = String)]
    pub status: JobStatus,
}

/// What `POST /api/backtests` and `POST /api/backtests/run` take: a run of one strategy on one
/// symbol (`kind` absent or `single`), or a whole-desk replay (`kind: "desk"`).
#[derive(Serialize, utoipa::ToSchema)]
#[serde(untagged)]
#[allow(dead_code)]
pub enum RunBody {
    Single(BacktestRequest),
    Desk(DeskRequest),
}

/// Queues a backtest (CONTRACT §4: `strategy_id`, `symbol`, `start`, `end`), or with
/// `kind: "desk"` a whole-desk replay; the same as `POST /api/backtests`.
#[utoipa::path(post, path = "/api/backtests/run", tag = "backtests", security(("bearer" = [])),
    request_body = RunBody,
    responses((status = 202, description = "Queued", body = inline(SuccessBody<BacktestAccepted>)),
              (status = 400, description = "VALIDATION_ERROR (fields named in detail)", body = crate::http::envelope::ErrorBody),
              (status = 404, description = "NOT_FOUND (no such symbol nor stored bars)", body = crate::http::envelope::ErrorBody)))]
pub async fn run(state: State<AppState>, guard: Sensitive) -> ApiResult<ApiResponse<BacktestAccepted>> {
    create(state, guard).await
}

/// Queues a backtest.
///
/// **A run of one strategy on one symbol** (`kind` absent or `single`): the live engine,
/// strategies and risk gate on stored bars, with the simulated fill model. Trading days of the
/// range with no stored bar that no completed download already asked for are downloaded from the
/// data broker first (one job, listed in `GET /api/data/downloads`). The range follows the
/// download rules: `end` after `start`, not in the future, at most 366 days of `1m` bars or 20
/// years of `1d`.
///
/// **A whole-desk replay** (`kind: "desk"`): trading days replayed through the
/// radar, the allocator's auto-watch, every strategy, the risk gate and the paper broker's fill
/// model — the live engine runner on a manual clock, over a database of its own, from a flat
/// book at `initial_cash`, under the operator's settings with `settings` overrides. `source`
/// says whose prints: the simulated market's (`simulated`, where it is the data broker) or the
/// stored minute bars of downloaded (or imported) days (`downloaded`). Its row has symbol `*`;
/// its result has the shape of live analytics: `trades` (rows as `GET /api/trades`, each with
/// its deep dive), `violations`, `watched` (the watchlist the allocator built), `by_symbol`,
/// the `equity_curve` and its metrics.
///
/// Follow either with `GET /api/backtests/{backtest_id}` or `backtest.updated` events.
#[utoipa::path(post, path = "/api/backtests", tag = "backtests", security(("bearer" = [])),
    request_body = RunBody,
    responses((status = 202, description = "Queued", body = inline(SuccessBody<BacktestAccepted>)),
              (status = 400, description = "VALIDATION_ERROR (fields named in detail)", body = crate::http::envelope::ErrorBody),
              (status = 404, description = "NOT_FOUND (no such symbol nor stored bars)", body = crate::http::envelope::ErrorBody)))]
pub async fn create(State(state): State<AppState>, guard: Sensitive) -> ApiResult<ApiResponse<BacktestAccepted>> {
    guard
        .run(BACKTEST_RUN, Target::BodyField("symbol"), |caller, body: Value| async move {
            // The kind decides the shape; each shape's own rules name a faulty field.
            let bytes = serde_json::to_vec(&body).map_err(ApiError::internal)?;
            let actor = &caller.principal.name;
            let record = if body.get("kind").and_then(Value::as_str) == Some("desk") {
                crate::jobs::desk::enqueue(&state.jobs, parse_json::<DeskRequest>(&bytes)?.into(), actor).await?
            } else {
                crate::jobs::backtests::enqueue(&state.jobs, parse_json::<BacktestRequest>(&bytes)?.into(), actor)
                    .await?
            };
            Ok(ApiResponse::accepted(BacktestAccepted { backtest_id: record.backtest_id, status: record.status }))
        })
        .await
}

#[derive(Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
pub struct BacktestQuery {
    #[param(minimum = 1, maximum = 1000)]
    pub limit: Option<u32>,
}

/// Runs, newest first: the request fields, `status`, `progress` and the headline metrics (null
/// until `COMPLETED`).
#[utoipa::path(get, path = "/api/backtests", tag = "backtests", security(("bearer" = [])), params(BacktestQuery),
    responses((status = 200, description = "Runs", body = inline(SuccessBody<Vec<BacktestRun>>))))]
pub async fn list(
    State(state): State<AppState>,
    _caller: Caller,
    Query(q): Query<BacktestQuery>,
) -> ApiResult<ApiResponse<Vec<Value>>> {
    let repo: &dyn BacktestRepository = &state.db;
    let runs = repo.backtests(list_limit(q.limit)?).await?;
    Ok(ApiResponse::list(runs.iter().map(|r| run_json(r, false)).collect()))
}

/// One run: `backtest_id`, `status`, `progress`, the request fields (with the settings it
/// traded under), and once `COMPLETED` every metric (`total_return`, `sharpe_ratio`,
/// `max_drawdown`, `win_loss_ratio`, `win_rate`, `profit_factor`, `trade_count`, …; null where
/// undefined), `refusals` (orders the risk gate refused, by rule), `trades` (rows as
/// `GET /api/trades`) and `equity_curve` (`timestamp`, `equity`; at most 2,000 points).
#[utoipa::path(get, path = "/api/backtests/{backtest_id}", tag = "backtests", security(("bearer" = [])),
    params(("backtest_id" = String, Path, description = "Run id")),
    responses((status = 200, description = "Run", body = inline(SuccessBody<BacktestRun>)),
              (status = 404, description = "NOT_FOUND", body = crate::http::envelope::ErrorBody)))]
pub async fn one(
    State(state): State<AppState>,
    _caller: Caller,
    Path(id): Path<String>,
) -> ApiResult<ApiResponse<Value>> {
    let repo: &dyn BacktestRepository = &state.db;
    let run = repo.backtest(&id).await?.ok_or_else(|| ApiError::not_found(format!("No backtest {id:?}")))?;
    Ok(ApiResponse::ok(run_json(&run, true)))
}

/// Cancels a run: a queued one at once, a running one at its next progress point (nothing of
/// its result is kept). Answers the run as `GET /api/backtests/{backtest_id}` does, `CANCELED`,
/// and announces it (`backtest.updated`).
#[utoipa::path(post, path = "/api/backtests/{backtest_id}/cancel", tag = "backtests", security(("bearer" = [])),
    params(("backtest_id" = String, Path, description = "Run id")),
    responses((status = 200, description = "Canceled", body = inline(SuccessBody<BacktestRun>)),
              (status = 404, description = "NOT_FOUND", body = crate::http::envelope::ErrorBody),
              (status = 409, description = "SETTINGS_UPDATE_BLOCKED with `detail.guard` = `job_final`, `detail.status` \
and `detail.reason`: the run already ended (`COMPLETED`, `FAILED` or `CANCELED`). Audited; nothing changes.",
               body = crate::http::envelope::ErrorBody)))]
pub async fn cancel(
    State(state): State<AppState>,
    Path(id): Path<String>,
    guard: Sensitive,
) -> ApiResult<ApiResponse<Value>> {
    guard
        .run_bodyless(BACKTEST_CANCEL, Target::Value(id.clone()), |_caller| async move {
            let run = crate::jobs::backtests::cancel(&state.jobs, &id).await?;
            Ok(ApiResponse::ok(run_json(&run, true)))
        })
        .await
}

/// A backtest run, as `GET /api/backtests/{backtest_id}` returns it; the rows of
/// `GET /api/backtests` leave out `effective_settings`, `trades`, `equity_curve` and the result's
/// other details (the shape `run_json` writes). Metrics are null until `COMPLETED`, and also
/// after it where they are undefined: `sharpe_ratio` with fewer than two daily returns or none
/// varying, `win_loss_ratio` without both a win and a loss, `win_rate` and `expectancy` without
/// trades, `profit_factor` without a loss.
#[derive(utoipa::ToSchema)]
#[allow(dead_code)]
pub struct BacktestRun {
    pub backtest_id: String,
    /// `QUEUED`, `RUNNING`, `COMPLETED`, `FAILED` or `CANCELED`.
    pub status: String,
    /// 0..1.
    pub progress: f64,
    pub strategy_id: String,
    pub strategy_version: String,
    pub symbol: String,
    pub start: String,
    pub end: String,
    /// `1m` or `1d`.
    pub timeframe: String,
    /// Every strategy parameter, defaults filled in.
    #[schema(value_type = Object)]
    pub parameters: Value,
    pub initial_cash: f64,
    pub commission_rate: f64,
    pub slippage_bps: f64,
    /// `NEXT_OPEN` or `CLOSE`; `PAPER` for a whole-desk replay (the paper broker's fills).
    pub fill: String,
    /// `desk` for a whole-desk replay (`kind: "desk"`, symbol `*`); absent for a run
    /// of one strategy on one symbol.
    #[schema(nullable = false)]
    pub kind: Option<String>,
    /// A whole-desk replay's prints: `simulated` or `downloaded`.
    #[schema(nullable = false)]
    pub source: Option<String>,
    /// A replay of downloaded days: the symbols it replayed.
    #[schema(nullable = false)]
    pub symbols: Option<Vec<String>>,
    /// The request's settings overrides, as sent.
    #[schema(value_type = Option<Object>)]
    pub settings: Option<Value>,
    /// The settings the run traded under (the run's detail only).
    #[schema(value_type = Option<Object>)]
    pub effective_settings: Option<Value>,
    /// `risk_controls.market_buy_buffer_pct` the run traded under: market entries are valued
    /// this much above their fill price for buying power (0 buys as many shares as cash takes at
    /// the fill price, as backtesting.py does).
    pub market_buy_buffer_pct: f64,
    pub requested_by: String,
    pub created_at: String,
    pub started_at: Option<String>,
    pub finished_at: Option<String>,
    /// Why a `FAILED` run failed.
    pub error: Option<String>,
    /// Fraction (0.12 = +12 %).
    pub total_return: Option<f64>,
    /// Annualised, risk-free 0, from daily equity returns; null when undefined (fewer than two
    /// daily returns, or no variance: a run that never traded).
    pub sharpe_ratio: Option<f64>,
    /// Fraction, positive.
    pub max_drawdown: Option<f64>,
    /// Average win / average loss; null without both.
    pub win_loss_ratio: Option<f64>,
    /// Null without trades.
    pub win_rate: Option<f64>,
    /// Gross profit / gross loss; null without a loss.
    pub profit_factor: Option<f64>,
    pub trade_count: Option<u64>,
    /// Orders the risk gate refused, by rule (`MAX_ORDER_VALUE`, `BUYING_POWER`, …): why a run
    /// that traded nothing did not. Empty when none was refused; null until `COMPLETED`.
    pub refusals: Option<std::collections::BTreeMap<String, u64>>,
    /// Mean trade P&L, dollars; null without trades (detail only).
    pub expectancy: Option<f64>,
    pub gross_profit: Option<f64>,
    pub gross_loss: Option<f64>,
    /// Daily returns the Sharpe ratio was computed from.
    pub sharpe_days: Option<u32>,
    pub final_equity: Option<f64>,
    pub bars: Option<u64>,
    pub orders: Option<u64>,
    /// Rows as `GET /api/trades` (detail only; null until `COMPLETED`).
    #[schema(value_type = Option<Vec<Object>>)]
    pub trades: Option<Vec<Value>>,
    /// `timestamp`, `equity`; at most 2,000 points (detail only; null until `COMPLETED`).
    #[schema(value_type = Option<Vec<Object>>)]
    pub equity_curve: Option<Vec<Value>>,
}

/// What list rows show of a result (null until `COMPLETED`).
const METRICS: [&str; 8] = [
    "total_return",
    "sharpe_ratio",
    "max_drawdown",
    "win_loss_ratio",
    "win_rate",
    "profit_factor",
    "trade_count",
    "refusals",
];

/// The market buy buffer a run traded under: its effective settings' (runs stored before the
/// setting existed traded under the constant 3 % it replaced).
fn market_buy_buffer_pct(effective_settings: Option<&Value>) -> f64 {
    effective_settings
        .and_then(|s| s["risk_controls"]["market_buy_buffer_pct"].as_f64())
        .unwrap_or(tradeops_core::settings::RiskControls::default().market_buy_buffer_pct)
}

/// `GET /api/backtests/{id}` (with the result) and the list row and event (without).
pub fn run_json(r: &BacktestRecord, with_result: bool) -> Value {
    let ts = |ms: i64| format_ts(&from_epoch_ms(ms));
    let mut out = json!({
        "backtest_id": r.backtest_id, "status": r.status, "progress": r.progress,
    });
    let fields = out.as_object_mut().expect("an object");
    if let Ok(Value::Object(request)) = serde_json::from_str::<Value>(&r.request) {
        fields.insert("market_buy_buffer_pct".into(), json!(market_buy_buffer_pct(request.get("effective_settings"))));
        for (k, v) in request {
            if k == "effective_settings" && !with_result {
                continue;
            }
            let v = match k.as_str() {
                "initial_cash" | "commission_rate" | "slippage_bps" => {
                    v.as_str().and_then(|s| s.parse::<f64>().ok()).map(Value::from).unwrap_or(v)
                }
                _ => v,
            };
            fields.insert(k, v);
        }
    }
    fields.insert("requested_by".into(), json!(r.requested_by));
    fields.insert("created_at".into(), json!(ts(r.created_at)));
    fields.insert("started_at".into(), json!(r.started_at.map(ts)));
    fields.insert("finished_at".into(), json!(r.finished_at.map(ts)));
    fields.insert("error".into(), json!(r.error));
    let result = r.result.as_deref().and_then(|text| serde_json::from_str::<Value>(text).ok());
    match result {
        Some(Value::Object(result)) => {
            for (k, v) in result {
                if with_result || METRICS.contains(&k.as_str()) {
                    fields.insert(k, v);
                }
            }
        }
        _ => {
            for k in METRICS {
                fields.insert(k.into(), Value::Null);
            }
            if with_result {
                fields.insert("trades".into(), Value::Null);
                fields.insert("equity_curve".into(), Value::Null);
            }
        }
    }
    out
}
