//! Backtests: `POST /api/backtests/run`, `GET /api/backtests`, `GET /api/backtests/{backtest_id}`
//! (CONTRACT §4), and `POST /api/backtests/{backtest_id}/cancel`. Runs are durable jobs of [`crate::jobs::backtests`].

use crate::http::auth::Caller;
use crate::http::envelope::{ApiResponse, SuccessBody};
use crate::http::error::{ApiError, ApiResult};
use crate::http::extract::{Path, Query};
use crate::http::guard::{Action, Sensitive, Target};
use crate::http::routes::list_limit;
use crate::http::state::AppState;
use crate::jobs::backtests::{run_json, BacktestRequest};
use axum::extract::State;
use axum::routing::{get, post};
use axum::Router;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tradeops_core::Role;
use tradeops_store::{BacktestRepository, JobStatus};

pub const BACKTEST_RUN: Action = Action { name: "backtest.run", role: Role::Operator };
pub const BACKTEST_CANCEL: Action = Action { name: "backtest.cancel", role: Role::Operator };

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/api/backtests/run", post(run))
        .route("/api/backtests", get(list))
        .route("/api/backtests/{backtest_id}", get(one))
        .route("/api/backtests/{backtest_id}/cancel", post(cancel))
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct BacktestAccepted {
    pub backtest_id: String,
    #[schema(value_type = String)]
    pub status: JobStatus,
}

/// Queues a backtest of a strategy on one symbol: the live engine, strategies and risk gate on
/// stored bars, with the simulated fill model. Trading days of the range with no stored bar that
/// no completed download already asked for are downloaded from the data broker first (one job,
/// listed in `GET /api/data/downloads`). The range follows the download rules: `end` after
/// `start`, not in the future, at most 366 days of `1m` bars or 20 years of `1d`. Follow it with
/// `GET /api/backtests/{backtest_id}` or `backtest.updated` events.
#[utoipa::path(post, path = "/api/backtests/run", tag = "backtests", security(("bearer" = [])),
    request_body = BacktestRequest,
    responses((status = 202, description = "Queued", body = inline(SuccessBody<BacktestAccepted>)),
              (status = 400, description = "VALIDATION_ERROR (fields named in detail)", body = crate::http::envelope::ErrorBody),
              (status = 404, description = "NOT_FOUND (no such symbol nor stored bars)", body = crate::http::envelope::ErrorBody)))]
pub async fn run(State(state): State<AppState>, guard: Sensitive) -> ApiResult<ApiResponse<BacktestAccepted>> {
    guard
        .run(BACKTEST_RUN, Target::BodyField("symbol"), |caller, req: BacktestRequest| async move {
            let record = crate::jobs::backtests::enqueue(&state, req, &caller.principal.name).await?;
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
    responses((status = 200, description = "Runs", body = inline(SuccessBody<Vec<crate::jobs::backtests::BacktestRun>>))))]
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
    responses((status = 200, description = "Run", body = inline(SuccessBody<crate::jobs::backtests::BacktestRun>)),
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
    responses((status = 200, description = "Canceled", body = inline(SuccessBody<crate::jobs::backtests::BacktestRun>)),
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
        .run(BACKTEST_CANCEL, Target::Value(id.clone()), |_caller, _: Value| async move {
            let run = crate::jobs::backtests::cancel(&state, &id)
                .await
                .map_err(|e| crate::http::routes::data::cancel_refusal("backtest", &id, e))?;
            Ok(ApiResponse::ok(run_json(&run, true)))
        })
        .await
}
