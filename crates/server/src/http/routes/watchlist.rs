//! `GET /api/watchlist`.

use crate::domain::trading::TradingService;
use crate::http::auth::Caller;
use crate::http::envelope::{ApiResponse, SuccessBody};
use crate::http::error::{ApiError, ApiResult};
use crate::http::extract::Query;
use crate::http::guard::{Action, Sensitive, Target};
use crate::http::state::AppState;
use crate::http::string_schemas::{WATCHLIST_SORTS, WATCHLIST_STATUSES};
use axum::extract::State;
use axum::routing::{get, post};
use axum::Router;
use serde::{Deserialize, Serialize};
use tradeops_core::engine::StrategyStatus;
use tradeops_core::time::{format_ts, from_epoch_ms};
use tradeops_core::Role;
use tradeops_core::Symbol;

pub const WATCHLIST_STOP: Action = Action { name: "watchlist.stop", role: Role::Operator };
pub const WATCHLIST_RESTART: Action = Action { name: "watchlist.restart", role: Role::Operator };

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/api/watchlist", get(list))
        .route("/api/watchlist/stop", post(stop))
        .route("/api/watchlist/restart", post(restart))
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct StopRequest {
    pub symbol: Symbol,
    #[schema(value_type = crate::http::string_schemas::ReasonText)]
    pub reason: String,
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct StopResult {
    pub symbol: String,
    pub previous_status: StrategyStatus,
    pub new_status: StrategyStatus,
}

/// Stops the symbol's strategy: `Closed` (polling `STOPPED`), working entry orders cancelled;
/// an open position stays (`Halted`).
#[utoipa::path(post, path = "/api/watchlist/stop", tag = "watchlist", security(("bearer" = [])), request_body = StopRequest,
    responses((status = 200, description = "Stopped", body = inline(SuccessBody<StopResult>)),
              (status = 404, description = "NOT_FOUND (not on the watchlist)", body = crate::http::envelope::ErrorBody)))]
pub async fn stop(State(state): State<AppState>, guard: Sensitive) -> ApiResult<ApiResponse<StopResult>> {
    guard
        .run(WATCHLIST_STOP, Target::BodyField("symbol"), |_caller, req: StopRequest| async move {
            super::radar::require_reason(&req.reason)?;
            let stopped = TradingService::new(state.engine()).stop_watch(req.symbol, req.reason).await?;
            Ok(ApiResponse::ok(StopResult {
                symbol: stopped.symbol.to_string(),
                previous_status: stopped.previous.unwrap_or(stopped.status),
                new_status: stopped.status,
            }))
        })
        .await
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RestartRequest {
    pub symbol: Symbol,
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct RestartResult {
    pub symbol: String,
    pub strategy_status: StrategyStatus,
    pub polling_status: &'static str,
}

/// `Closed` → `Active`, polling again. `EMERGENCY_HALT_ACTIVE` while halted; `RISK_BLOCKED`
/// (`SYMBOL_BLOCKED`) for a blocked symbol.
#[utoipa::path(post, path = "/api/watchlist/restart", tag = "watchlist", security(("bearer" = [])), request_body = RestartRequest,
    responses((status = 200, description = "Restarted", body = inline(SuccessBody<RestartResult>)),
              (status = 404, description = "NOT_FOUND (not on the watchlist)", body = crate::http::envelope::ErrorBody),
              (status = 409, description = "EMERGENCY_HALT_ACTIVE", body = crate::http::envelope::ErrorBody),
              (status = 422, description = "RISK_BLOCKED", body = crate::http::envelope::ErrorBody)))]
pub async fn restart(State(state): State<AppState>, guard: Sensitive) -> ApiResult<ApiResponse<RestartResult>> {
    guard
        .run(WATCHLIST_RESTART, Target::BodyField("symbol"), |_caller, req: RestartRequest| async move {
            let restarted = TradingService::new(state.engine()).restart(req.symbol).await?;
            Ok(ApiResponse::ok(RestartResult {
                symbol: restarted.symbol.to_string(),
                strategy_status: restarted.status,
                polling_status: polling_status(restarted.status),
            }))
        })
        .await
}

/// A strategy's `polling_status`: `STOPPED` once stopped, else `POLLING`.
pub fn polling_status(status: StrategyStatus) -> &'static str {
    if matches!(status, StrategyStatus::Closed | StrategyStatus::Halted) {
        "STOPPED"
    } else {
        "POLLING"
    }
}

#[derive(Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
pub struct WatchlistQuery {
    /// Only rows with this `strategy_status` (`Active`, `Buy`, `Hold`, `Sell`, `Closed`, `Halted`).
    #[param(value_type = Option<crate::http::string_schemas::WatchlistStatus>)]
    pub status: Option<String>,
    /// `time_added_desc` (default), `time_added_asc`, `symbol_asc`, `symbol_desc`, `price_desc`, `price_asc`.
    #[param(value_type = Option<crate::http::string_schemas::WatchlistSort>)]
    pub sort: Option<String>,
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct WatchlistRow {
    pub symbol: String,
    /// Last trade price; `null` when the market has none.
    pub current_price: Option<f64>,
    pub time_added: String,
    pub time_closed: Option<String>,
    pub time_completed: Option<String>,
    pub strategy_status: String,
    pub strategy_id: String,
    pub strategy_version: String,
    pub polling_status: String,
    /// `MANUAL`, `RADAR` or `API`.
    pub source: String,
    /// Why the row was closed, when it was.
    pub reason: Option<String>,
}

/// Watchlist rows with the strategy and polling status of each.
#[utoipa::path(get, path = "/api/watchlist", tag = "watchlist", security(("bearer" = [])), params(WatchlistQuery),
    responses((status = 200, description = "Watchlist rows", body = inline(SuccessBody<Vec<WatchlistRow>>)),
              (status = 400, description = "VALIDATION_ERROR (status, sort)", body = crate::http::envelope::ErrorBody)))]
pub async fn list(
    State(state): State<AppState>,
    _caller: Caller,
    Query(q): Query<WatchlistQuery>,
) -> ApiResult<ApiResponse<Vec<WatchlistRow>>> {
    if let Some(status) = &q.status {
        if !WATCHLIST_STATUSES.contains(&status.as_str()) {
            return Err(ApiError::validation("status", format!("must be one of {}", WATCHLIST_STATUSES.join(", "))));
        }
    }
    let sort = q.sort.as_deref().unwrap_or("time_added_desc");
    if !WATCHLIST_SORTS.contains(&sort) {
        return Err(ApiError::validation("sort", format!("must be one of {}", WATCHLIST_SORTS.join(", "))));
    }
    let mut rows: Vec<(i64, WatchlistRow)> = state
        .watchlist
        .rows()
        .await?
        .into_iter()
        .filter(|r| q.status.as_ref().is_none_or(|s| &r.strategy_status == s))
        .map(|r| {
            let price = Symbol::parse(&r.symbol).ok().and_then(|s| state.market.last_price(&s)).map(|p| p.to_f64());
            (
                r.time_added,
                WatchlistRow {
                    current_price: price,
                    time_added: format_ts(&from_epoch_ms(r.time_added)),
                    time_closed: r.time_closed.map(|t| format_ts(&from_epoch_ms(t))),
                    time_completed: r.time_completed.map(|t| format_ts(&from_epoch_ms(t))),
                    symbol: r.symbol,
                    strategy_status: r.strategy_status,
                    strategy_id: r.strategy_id,
                    strategy_version: r.strategy_version,
                    polling_status: r.polling_status,
                    source: r.source,
                    reason: r.reason,
                },
            )
        })
        .collect();
    let price = |r: &WatchlistRow| r.current_price.unwrap_or(f64::NEG_INFINITY);
    match sort {
        "time_added_asc" => rows.sort_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.symbol.cmp(&b.1.symbol))),
        "symbol_asc" => rows.sort_by(|a, b| a.1.symbol.cmp(&b.1.symbol)),
        "symbol_desc" => rows.sort_by(|a, b| b.1.symbol.cmp(&a.1.symbol)),
        "price_desc" => rows.sort_by(|a, b| price(&b.1).total_cmp(&price(&a.1))),
        "price_asc" => rows.sort_by(|a, b| price(&a.1).total_cmp(&price(&b.1))),
        _ => rows.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.symbol.cmp(&b.1.symbol))),
    }
    Ok(ApiResponse::list(rows.into_iter().map(|(_, r)| r).collect()))
}
