//! The momentum radar: `GET /api/radar/momentum`, `POST /api/radar/watch`, `/block`,
//! `/unblock`, and `GET /api/radar/blocks`.

use crate::auth::Caller;
use crate::envelope::{ApiResponse, SuccessBody};
use crate::error::{ApiError, ApiResult};
use crate::extract::Query;
use crate::guard::{Action, Sensitive, Target};
use crate::state::AppState;
use crate::watchlist::{BlockResult, BlockScope, WatchResult, WatchSource};
use axum::extract::State;
use axum::routing::{get, post};
use axum::Router;
use serde::{Deserialize, Serialize};
use tradeops_core::calendar::MarketCalendar;
use tradeops_core::engine::{Command, CommandError};
use tradeops_core::radar::RadarRow;
use tradeops_core::risk::TradingState;
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
    pub top_n: Option<u32>,
}

/// The latest radar scan (made on the last minute boundary), ranked by `percentage_gain`, after
/// the `momentum_radar` filters. Empty until the first scan.
#[utoipa::path(get, path = "/api/radar/momentum", tag = "radar", security(("bearer" = [])), params(MomentumQuery),
    responses((status = 200, description = "Ranked radar rows", body = inline(SuccessBody<Vec<RadarRow>>)),
              (status = 400, description = "VALIDATION_ERROR (top_n)", body = crate::envelope::ErrorBody)))]
pub async fn momentum(
    State(state): State<AppState>,
    _caller: Caller,
    Query(q): Query<MomentumQuery>,
) -> ApiResult<ApiResponse<Vec<RadarRow>>> {
    let top_n = match q.top_n.unwrap_or(25) {
        n @ 1..=200 => n as usize,
        _ => return Err(ApiError::validation("top_n", "must be between 1 and 200")),
    };
    let latest = state.radar.latest().await;
    Ok(ApiResponse::list(latest.rows.iter().take(top_n).cloned().collect()))
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct WatchRequest {
    #[schema(value_type = String)]
    pub symbol: Symbol,
    /// `MANUAL` (default), `RADAR` or `API`.
    pub source: Option<WatchSource>,
}

/// Puts a symbol on the watchlist (`Active`, `POLLING`) for the allocator's strategy. Already
/// watched: 200 with `ALREADY_WATCHING`. Blocked: `RISK_BLOCKED` (`SYMBOL_BLOCKED`); a full active
/// watchlist: `RISK_BLOCKED` (`ACTIVE_WATCHLIST_LIMIT`); both also leave a violation row.
#[utoipa::path(post, path = "/api/radar/watch", tag = "radar", security(("bearer" = [])), request_body = WatchRequest,
    responses((status = 200, description = "Watching", body = inline(SuccessBody<WatchResult>)),
              (status = 404, description = "NOT_FOUND (not a symbol of the market)", body = crate::envelope::ErrorBody),
              (status = 422, description = "RISK_BLOCKED", body = crate::envelope::ErrorBody)))]
pub async fn watch(State(state): State<AppState>, guard: Sensitive) -> ApiResult<ApiResponse<WatchResult>> {
    guard
        .run(RADAR_WATCH, Target::BodyField("symbol"), |_caller, req: WatchRequest| async move {
            if state.engine().view().trading_state == TradingState::Halted {
                return Err(CommandError::Halted.into());
            }
            let settings = state.settings.current();
            let result =
                state.watchlist.watch(&req.symbol, req.source.unwrap_or(WatchSource::Manual), &settings).await?;
            if result.watchlist_status == "WATCHING" {
                state.engine().command(Command::Watch { symbol: req.symbol.clone() }).await?;
            }
            Ok(ApiResponse::ok(result))
        })
        .await
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BlockRequest {
    #[schema(value_type = String)]
    pub symbol: Symbol,
    /// `TODAY` (default: until the end of the trading day) or `PERMANENT`.
    pub block_scope: Option<BlockScope>,
    pub reason: String,
}

pub fn require_reason(reason: &str) -> ApiResult<()> {
    let len = reason.trim().chars().count();
    if (1..=500).contains(&len) {
        Ok(())
    } else {
        Err(ApiError::validation("reason", "must be 1 to 500 characters"))
    }
}

/// Blocks a symbol: it cannot be watched, and any strategy on it stops (an open position is
/// kept). A new block replaces an active one.
#[utoipa::path(post, path = "/api/radar/block", tag = "radar", security(("bearer" = [])), request_body = BlockRequest,
    responses((status = 200, description = "Blocked", body = inline(SuccessBody<BlockResult>)),
              (status = 404, description = "NOT_FOUND (not a symbol of the market)", body = crate::envelope::ErrorBody)))]
pub async fn block(State(state): State<AppState>, guard: Sensitive) -> ApiResult<ApiResponse<BlockResult>> {
    guard
        .run(RADAR_BLOCK, Target::BodyField("symbol"), |caller, req: BlockRequest| async move {
            require_reason(&req.reason)?;
            let calendar = MarketCalendar::new(state.settings.current().runtime.market_calendar);
            let scope = req.block_scope.unwrap_or(BlockScope::Today);
            let result =
                state.watchlist.block(&req.symbol, scope, req.reason.trim(), &caller.principal.name, calendar).await?;
            let block = Command::Block { symbol: req.symbol.clone(), reason: req.reason.trim().to_string() };
            state.engine().command(block).await?;
            Ok(ApiResponse::ok(result))
        })
        .await
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UnblockRequest {
    #[schema(value_type = String)]
    pub symbol: Symbol,
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
              (status = 404, description = "NOT_FOUND (not blocked)", body = crate::envelope::ErrorBody)))]
pub async fn unblock(State(state): State<AppState>, guard: Sensitive) -> ApiResult<ApiResponse<UnblockResult>> {
    guard
        .run(RADAR_UNBLOCK, Target::BodyField("symbol"), |caller, req: UnblockRequest| async move {
            require_reason(&req.reason)?;
            let lifted_at = state.watchlist.unblock(&req.symbol, req.reason.trim(), &caller.principal.name).await?;
            state.engine().command(Command::Unblock { symbol: req.symbol.clone() }).await?;
            state.engine().command(Command::Unblock { symbol: req.symbol.clone() }).await?;
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
