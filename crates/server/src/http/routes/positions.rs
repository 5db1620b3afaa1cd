//! Positions: `GET /api/positions`, `POST /api/positions/close`, `POST /api/positions/halt`.

use crate::domain::trading::TradingService;
use crate::http::auth::Caller;
use crate::http::envelope::{ApiResponse, SuccessBody};
use crate::http::error::ApiResult;
use crate::http::guard::{Action, Sensitive, Target};
use crate::http::routes::orders::MAX_ORDER_QUANTITY;
use crate::http::state::AppState;
use axum::extract::State;
use axum::routing::{get, post};
use axum::Router;
use rust_decimal::prelude::ToPrimitive;
use serde::{Deserialize, Serialize};
use tradeops_core::engine::{ProtectionKind, StrategyStatus};
use tradeops_core::orders::OrderStatus;
use tradeops_core::positions::AlertLevel;
use tradeops_core::time::format_ts;
use tradeops_core::{Role, Symbol};

pub const POSITION_CLOSE: Action = Action { name: "position.close", role: Role::Operator };
pub const POSITION_HALT: Action = Action { name: "position.halt", role: Role::Operator };

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/api/positions", get(list))
        .route("/api/positions/close", post(close))
        .route("/api/positions/halt", post(halt))
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct PositionRow {
    pub symbol: String,
    pub market_price: f64,
    pub average_entry_price: Option<f64>,
    pub quantity: u64,
    pub unrealized_pnl: f64,
    /// Realized since the position opened.
    pub realized_pnl: f64,
    pub strategy_status: StrategyStatus,
    pub opened_at: Option<String>,
    pub alert_level: AlertLevel,
    /// The stop in force: its strategy's, else the stop leg it was bought with (CONTRACT §11);
    /// null when neither protects it.
    pub stop_loss: Option<f64>,
    /// The target in force: its strategy's (null once it has taken profit), else its
    /// take-profit leg.
    pub target: Option<f64>,
    /// `BROKER`: protective orders whose stops together cover the whole quantity rest at the
    /// broker; `ENGINE`: the engine watches the stop; `NONE`: nothing protects it.
    pub protection: ProtectionKind,
    /// The `client_order_id` of the protective order at the broker, or null. A strategy with a
    /// target rests two (its stop one-cancels-other with a take-profit for the shares it sells
    /// at the target, and its stop alone for the rest): this is the stop for the rest, or the
    /// take-profit's order when it is the only one.
    pub protective_order_id: Option<String>,
    /// Its symbol's trading is halted (CONTRACT §11): a close is refused `SYMBOL_HALTED` until
    /// the reopen, and an emergency halt's exit waits at the venue.
    pub halted: bool,
}

/// Open positions, marked to the last trade.
#[utoipa::path(get, path = "/api/positions", tag = "positions", security(("bearer" = [])),
    responses((status = 200, description = "Open positions", body = inline(SuccessBody<Vec<PositionRow>>))))]
pub async fn list(State(state): State<AppState>, _caller: Caller) -> ApiResult<ApiResponse<Vec<PositionRow>>> {
    let view = state.engine().view();
    let rows = view
        .positions
        .iter()
        .map(|p| PositionRow {
            symbol: p.position.symbol.to_string(),
            market_price: p.mark.to_f64().unwrap_or(0.0),
            average_entry_price: p.position.average_entry_price().and_then(|d| d.to_f64()),
            quantity: p.position.quantity,
            unrealized_pnl: p.position.unrealized_pnl(p.mark).round_dp(2).to_f64().unwrap_or(0.0),
            realized_pnl: p.position.realized_pnl.round_dp(2).to_f64().unwrap_or(0.0),
            strategy_status: p.status,
            opened_at: p.position.opened_at.as_ref().map(format_ts),
            alert_level: p.alert_level,
            stop_loss: p.levels.and_then(|l| l.stop_loss.to_f64()),
            target: p.levels.and_then(|l| l.target).and_then(|t| t.to_f64()),
            halted: p.halted,
            protection: p.protection.kind,
            protective_order_id: p.protection.order_id.as_ref().map(ToString::to_string),
        })
        .collect();
    Ok(ApiResponse::list(rows))
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ClosePosition {
    pub symbol: Symbol,
    /// 1..=open quantity; default the whole position.
    #[schema(nullable = false, minimum = 1, maximum = 10000000)]
    #[serde(default, deserialize_with = "crate::http::fields::whole_number::option::deserialize")]
    pub quantity: Option<u64>,
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct CloseResult {
    pub symbol: String,
    pub close_order_client_order_id: String,
    pub status: OrderStatus,
}

/// Sells all or part of a position at market. Allowed while `HALTED` and `REDUCING`.
#[utoipa::path(post, path = "/api/positions/close", tag = "positions", security(("bearer" = [])), request_body = ClosePosition,
    responses((status = 200, description = "Close order submitted", body = inline(SuccessBody<CloseResult>)),
              (status = 404, description = "POSITION_NOT_FOUND", body = crate::http::envelope::ErrorBody),
              (status = 409, description = "MARKET_CLOSED, SYMBOL_HALTED (its symbol is halted: the close waits for the reopen), DUPLICATE_ORDER_BLOCKED", body = crate::http::envelope::ErrorBody)))]
pub async fn close(State(state): State<AppState>, guard: Sensitive) -> ApiResult<ApiResponse<CloseResult>> {
    guard
        .run(POSITION_CLOSE, Target::BodyField("symbol"), |_caller, req: ClosePosition| async move {
            // Malformed on its face whether or not the position exists.
            if req.quantity.is_some_and(|q| q == 0 || q > MAX_ORDER_QUANTITY) {
                return Err(crate::http::fields::refuse("quantity"));
            }
            let closing = TradingService::new(state.engine()).close_position(req.symbol, req.quantity).await?;
            Ok(ApiResponse::ok(CloseResult {
                symbol: closing.symbol.to_string(),
                close_order_client_order_id: closing.client_order_id.to_string(),
                status: closing.status,
            }))
        })
        .await
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct HaltPosition {
    pub symbol: Symbol,
    #[schema(value_type = crate::http::string_schemas::ReasonText)]
    pub reason: String,
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct HaltResult {
    pub symbol: String,
    pub strategy_status: StrategyStatus,
}

/// The strategy stops managing the position (`Halted`); its working orders are cancelled and
/// the position stays open.
#[utoipa::path(post, path = "/api/positions/halt", tag = "positions", security(("bearer" = [])), request_body = HaltPosition,
    responses((status = 200, description = "Halted", body = inline(SuccessBody<HaltResult>)),
              (status = 404, description = "POSITION_NOT_FOUND", body = crate::http::envelope::ErrorBody)))]
pub async fn halt(State(state): State<AppState>, guard: Sensitive) -> ApiResult<ApiResponse<HaltResult>> {
    guard
        .run(POSITION_HALT, Target::BodyField("symbol"), |_caller, req: HaltPosition| async move {
            super::radar::require_reason(&req.reason)?;
            let halted = TradingService::new(state.engine()).halt_position(req.symbol, req.reason).await?;
            Ok(ApiResponse::ok(HaltResult { symbol: halted.symbol.to_string(), strategy_status: halted.status }))
        })
        .await
}
