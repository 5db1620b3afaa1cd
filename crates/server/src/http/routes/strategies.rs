//! `GET /api/strategies`: the built-in strategies, their versions and parameters (CONTRACT §4).

use crate::http::auth::Caller;
use crate::http::envelope::{ApiResponse, SuccessBody};
use crate::http::error::ApiResult;
use crate::http::state::AppState;
use axum::extract::State;
use axum::routing::get;
use axum::Router;
use tradeops_core::strategy::{catalog, StrategyInfo};

pub fn router() -> Router<AppState> {
    Router::new().route("/api/strategies", get(list))
}

/// Every built-in strategy: id, version, whether it may trade live, the bar timeframes it runs
/// on and its parameters (kind, range and the default a run uses when it gives none —
/// `momentum_breakout`'s follow the effective `strategy_allocator` settings).
#[utoipa::path(get, path = "/api/strategies", tag = "strategies", security(("bearer" = [])),
    responses((status = 200, description = "Strategies", body = inline(SuccessBody<Vec<StrategyInfo>>))))]
pub async fn list(State(state): State<AppState>, _caller: Caller) -> ApiResult<ApiResponse<Vec<StrategyInfo>>> {
    Ok(ApiResponse::list(catalog(&state.settings.current().strategy_allocator)))
}
