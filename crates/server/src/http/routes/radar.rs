//! The momentum radar: `GET /api/radar/momentum`, `POST /api/radar/watch`, `/block`,
//! `/unblock`, and `GET /api/radar/blocks`.

use crate::domain::trading::TradingService;
use crate::domain::watchlist::{engine_block_result, BlockResult, BlockScope, WatchResult, WatchSource};
use crate::http::auth::Caller;
use crate::http::envelope::{ApiResponse, SuccessBody};
use crate::http::error::{ApiError, ApiResult};
use crate::http::extract::Query;
use crate::http::guard::{Action, Sensitive, Target};
use crate::http::state::AppState;
use axum::extract::State;
use axum::routing::{get, post};
use axum::Router;
use serde::{Deserialize, Serialize};
use tradeops_core::radar::RadarRow;
use tradeops_core::time::format_ts;
use tradeops_core::{Role, Symbol};

pub const RADAR_WATCH: Action = Action { name: "radar.watch", role: Role::Operator };
pub const RADAR_BLOCK: Action = Action { name: "radar.block", role: Role::Operator };
pub const RADAR_UNBLOCK: Action = Action { name: "radar.unblock", role: Role::Operator };

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/api/radar/momentum", get(momentum))
        .route("/api/radar/watch", post(watch))
        .route("/api/radar/block", post(block))
        .route("/api/radar/unblock", post(unblock))
        .route("/api/radar/blocks", get(blocks))
}

#[derive(Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
pub struct MomentumQuery {
    /// Rows to return, 1..=200 (default 25).
    #[param(minimum = 1, maximum = 200)]
    pub top_n: Option<u32>,
}

/// The latest radar scan (made on the last minute boundary), ranked by `percentage_gain`, after
/// the `momentum_radar` filters. Empty until the first scan. Each row carries the market session
/// of the scan and the day's pre-market figures: `gap_pct`, `premarket_volume`, `premarket_high`
/// (CONTRACT §12); the NYSE calendar's pre-market and after-hours are scanned too.
#[utoipa::path(get, path = "/api/radar/momentum", tag = "radar", security(("bearer" = [])), params(MomentumQuery),
    responses((status = 200, description = "Ranked radar rows", body = inline(SuccessBody<Vec<RadarRow>>)),
              (status = 400, description = "VALIDATION_ERROR (top_n)", body = crate::http::envelope::ErrorBody)))]
pub async fn momentum(
    State(state): State<AppState>,
    _caller: Caller,
    Query(q): Query<MomentumQuery>,
) -> ApiResult<ApiResponse<Vec<RadarRow>>> {
    let top_n = match q.top_n.unwrap_or(25) {
        n @ 1..=200 => n as usize,
        _ => return Err(crate::http::fields::refuse("top_n")),
    };
    let latest = state.radar.latest().await;
    Ok(ApiResponse::list(latest.rows.iter().take(top_n).cloned().collect()))
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct WatchRequest {
    pub symbol: Symbol,
    /// `MANUAL` (default), `RADAR` or `API`.
    #[schema(nullable = false)]
    pub source: Option<WatchSource>,
}

/// Puts a symbol on the watchlist (`Active`, `POLLING`) for the allocator's strategy. Already
/// watched: 200 with `ALREADY_WATCHING`. Blocked: `RISK_BLOCKED` (`SYMBOL_BLOCKED`); a full active
/// watchlist: `RISK_BLOCKED` (`ACTIVE_WATCHLIST_LIMIT`); both also leave a violation row.
#[utoipa::path(post, path = "/api/radar/watch", tag = "radar", security(("bearer" = [])), request_body = WatchRequest,
    responses((status = 200, description = "Watching", body = inline(SuccessBody<WatchResult>)),
              (status = 404, description = "NOT_FOUND (not a symbol of the market)", body = crate::http::envelope::ErrorBody),
              (status = 409, description = "EMERGENCY_HALT_ACTIVE (watching starts a strategy)", body = crate::http::envelope::ErrorBody),
              (status = 422, description = "RISK_BLOCKED", body = crate::http::envelope::ErrorBody)))]
pub async fn watch(State(state): State<AppState>, guard: Sensitive) -> ApiResult<ApiResponse<WatchResult>> {
    guard
        .run(RADAR_WATCH, Target::BodyField("symbol"), |_caller, req: WatchRequest| async move {
            known(&state, &req.symbol)?;
            let source = req.source.unwrap_or(WatchSource::Manual);
            let watched = TradingService::new(state.engine()).watch(req.symbol, source).await?;
            Ok(ApiResponse::ok(WatchResult {
                symbol: watched.symbol,
                watchlist_status: if watched.already { "ALREADY_WATCHING" } else { "WATCHING" },
                time_added: format_ts(&watched.time_added),
            }))
        })
        .await
}

/// `NOT_FOUND` for a symbol the data broker does not list.
fn known(state: &AppState, symbol: &Symbol) -> ApiResult<()> {
    match state.market.instrument(symbol) {
        Some(_) => Ok(()),
        None => Err(ApiError::not_found(format!("{symbol} is not a symbol of the {} market", state.market.name()))
            .with_detail(serde_json::json!({"symbol": symbol}))),
    }
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BlockRequest {
    pub symbol: Symbol,
    /// `TODAY` (default: until the end of the trading day) or `PERMANENT`.
    #[schema(nullable = false)]
    pub block_scope: Option<BlockScope>,
    #[schema(value_type = crate::http::string_schemas::ReasonText)]
    pub reason: String,
}

pub fn require_reason(reason: &str) -> ApiResult<()> {
    // At most 500 characters as sent, and not only white space.
    if reason.chars().count() <= 500 && !reason.trim().is_empty() {
        Ok(())
    } else {
        Err(crate::http::fields::refuse("reason"))
    }
}

/// Blocks a symbol: it cannot be watched, and any strategy on it stops (an open position is
/// kept). A new block replaces an active one.
#[utoipa::path(post, path = "/api/radar/block", tag = "radar", security(("bearer" = [])), request_body = BlockRequest,
    responses((status = 200, description = "Blocked", body = inline(SuccessBody<BlockResult>)),
              (status = 404, description = "NOT_FOUND (not a symbol of the market)", body = crate::http::envelope::ErrorBody)))]
pub async fn block(State(state): State<AppState>, guard: Sensitive) -> ApiResult<ApiResponse<BlockResult>> {
    guard
        .run(RADAR_BLOCK, Target::BodyField("symbol"), |caller, req: BlockRequest| async move {
            require_reason(&req.reason)?;
            known(&state, &req.symbol)?;
            let scope = req.block_scope.unwrap_or(BlockScope::Today);
            let reason = req.reason.trim().to_string();
            let (symbol, block) =
                TradingService::new(state.engine()).block(req.symbol, scope, reason, caller.principal.name).await?;
            Ok(ApiResponse::ok(engine_block_result(&symbol, &block)))
        })
        .await
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UnblockRequest {
    pub symbol: Symbol,
    #[schema(value_type = crate::http::string_schemas::ReasonText)]
    pub reason: String,
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct UnblockResult {
    #[schema(value_type = String)]
    pub symbol: Symbol,
    pub unblocked: bool,
    pub lifted_at: String,
}

/// Lifts a symbol's active block; `NOT_FOUND` when it is not blocked.
#[utoipa::path(post, path = "/api/radar/unblock", tag = "radar", security(("bearer" = [])), request_body = UnblockRequest,
    responses((status = 200, description = "Unblocked", body = inline(SuccessBody<UnblockResult>)),
              (status = 404, description = "NOT_FOUND (not blocked)", body = crate::http::envelope::ErrorBody)))]
pub async fn unblock(State(state): State<AppState>, guard: Sensitive) -> ApiResult<ApiResponse<UnblockResult>> {
    guard
        .run(RADAR_UNBLOCK, Target::BodyField("symbol"), |caller, req: UnblockRequest| async move {
            require_reason(&req.reason)?;
            let reason = req.reason.trim().to_string();
            TradingService::new(state.engine()).unblock(req.symbol.clone(), reason, caller.principal.name).await?;
            let lifted_at = format_ts(&state.market_clock.now());
            Ok(ApiResponse::ok(UnblockResult { symbol: req.symbol, unblocked: true, lifted_at }))
        })
        .await
}

/// Active blocks (also listed in the risk state's `blocked_symbols`).
#[utoipa::path(get, path = "/api/radar/blocks", tag = "radar", security(("bearer" = [])),
    responses((status = 200, description = "Active blocks", body = inline(SuccessBody<Vec<BlockResult>>))))]
pub async fn blocks(State(state): State<AppState>, _caller: Caller) -> ApiResult<ApiResponse<Vec<BlockResult>>> {
    Ok(ApiResponse::list(state.watchlist.blocks().await?))
}
