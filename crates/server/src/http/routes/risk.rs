//! Risk: `GET /api/risk/state`, `GET /api/risk/violations`, `POST /api/risk/emergency-halt`
//! (and the deprecated `POST /api/emergency/liquidate`), `POST /api/risk/resume`, and
//! `POST /api/risk/resume-strategies` (restart the strategies the halt stopped).

use crate::domain::trading::TradingService;
use crate::domain::watchlist::BlockResult;
use crate::http::auth::Caller;
use crate::http::envelope::{ApiResponse, SuccessBody};
use crate::http::error::ApiResult;
use crate::http::extract::Query;
use crate::http::guard::{Action, Sensitive, Target};
use crate::http::routes::list_limit;
use crate::http::routes::watchlist::polling_status;
use crate::http::state::AppState;
use axum::extract::State;
use axum::http::{header::HeaderName, HeaderValue};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use rust_decimal::prelude::ToPrimitive;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tradeops_core::engine::StrategyStatus;
use tradeops_core::risk::TradingState;
use tradeops_core::time::{format_ts, from_epoch_ms};
use tradeops_core::Role;
use tradeops_store::MarketRepository;

pub use crate::domain::actions::EMERGENCY_HALT;
pub const RESUME: Action = Action { name: "risk.resume", role: Role::Operator };
pub const RESUME_STRATEGIES: Action = Action { name: "risk.resume_strategies", role: Role::Operator };

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/api/risk/state", get(state))
        .route("/api/risk/violations", get(violations))
        .route("/api/risk/emergency-halt", post(emergency_halt))
        .route("/api/emergency/liquidate", post(emergency_liquidate))
        .route("/api/risk/resume", post(resume))
        .route("/api/risk/resume-strategies", post(resume_strategies))
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct RiskState {
    pub trading_state: TradingState,
    pub max_daily_loss: f64,
    /// Today's loss (realized plus unrealized), 0 when up.
    pub current_daily_loss: f64,
    pub max_position_size: u64,
    pub max_trades_per_day: u32,
    pub trades_today: u32,
    pub active_watchlist_limit: u32,
    pub open_position_limit: u32,
    pub open_positions: usize,
    pub blocked_symbols: Vec<BlockResult>,
    /// Peak-to-current equity today, dollars.
    pub drawdown: f64,
    pub reconciliation_status: &'static str,
    pub reconciliation_detail: String,
    /// Whether the trading state shown (the halt latch, cash, day counters) is stored; false
    /// while the database is unavailable, until it is back.
    pub state_persisted: bool,
    /// Orders, positions and other changes held in memory while the database is unavailable.
    pub unsaved_writes: usize,
    pub halted_at: Option<String>,
    pub halt_reason: Option<String>,
    pub halted_by: Option<String>,
    /// Watched symbols whose strategy the emergency halt stopped and nobody has restarted
    /// since: what `POST /api/risk/resume-strategies` restarts once trading is resumed.
    pub stopped_by_halt: Vec<String>,
}

/// Trading state, limits and their usage, blocks, drawdown and reconciliation.
#[utoipa::path(get, path = "/api/risk/state", tag = "risk", security(("bearer" = [])),
    responses((status = 200, description = "Risk state", body = inline(SuccessBody<RiskState>))))]
pub async fn state(State(state): State<AppState>, _caller: Caller) -> ApiResult<ApiResponse<RiskState>> {
    let view = state.engine().view();
    let limits = state.settings.current().risk_controls.clone();
    let f = |d: rust_decimal::Decimal| d.round_dp(2).to_f64().unwrap_or(0.0);
    Ok(ApiResponse::ok(RiskState {
        trading_state: view.trading_state,
        max_daily_loss: f(limits.max_daily_loss),
        current_daily_loss: f((-view.daily_pnl).max(rust_decimal::Decimal::ZERO)),
        max_position_size: limits.max_position_size,
        max_trades_per_day: limits.max_trades_per_day,
        trades_today: view.trades_today,
        active_watchlist_limit: limits.active_watchlist_limit,
        open_position_limit: limits.open_position_limit,
        open_positions: view.positions.len(),
        blocked_symbols: state.watchlist.blocks().await?,
        drawdown: f(view.drawdown),
        reconciliation_status: view.reconciliation_status,
        reconciliation_detail: view.reconciliation_detail.clone(),
        state_persisted: view.state_persisted,
        unsaved_writes: view.unsaved_writes,
        halted_at: view.halt.as_ref().map(|h| format_ts(&h.at)),
        halt_reason: view.halt.as_ref().map(|h| h.reason.clone()),
        halted_by: view.halt.as_ref().map(|h| h.actor.clone()),
        stopped_by_halt: view.halt_stopped.iter().map(|s| s.to_string()).collect(),
    }))
}

#[derive(Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
pub struct ViolationQuery {
    #[param(minimum = 1, maximum = 1000)]
    pub limit: Option<u32>,
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct ViolationRow {
    pub rule: String,
    pub symbol: Option<String>,
    pub client_order_id: Option<String>,
    #[schema(value_type = Object)]
    pub detail: Value,
    pub timestamp: String,
}

/// Risk refusals, newest first.
#[utoipa::path(get, path = "/api/risk/violations", tag = "risk", security(("bearer" = [])), params(ViolationQuery),
    responses((status = 200, description = "Violations", body = inline(SuccessBody<Vec<ViolationRow>>))))]
pub async fn violations(
    State(state): State<AppState>,
    _caller: Caller,
    Query(q): Query<ViolationQuery>,
) -> ApiResult<ApiResponse<Vec<ViolationRow>>> {
    let repo: &dyn MarketRepository = &state.db;
    let rows = repo
        .violations(list_limit(q.limit)?)
        .await?
        .into_iter()
        .map(|v| ViolationRow {
            rule: v.rule,
            symbol: v.symbol,
            client_order_id: v.client_order_id,
            detail: serde_json::from_str(&v.detail).unwrap_or(Value::Null),
            timestamp: format_ts(&from_epoch_ms(v.ts)),
        })
        .collect();
    Ok(ApiResponse::list(rows))
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ReasonBody {
    #[schema(value_type = crate::http::string_schemas::ReasonText)]
    pub reason: String,
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct HaltResult {
    pub halted: bool,
    /// Whether any position was open (exits were submitted).
    pub liquidation_requested: bool,
    pub timestamp: String,
    /// Whether the halt is durable: `HALTED` stored in the database, or (through a node that
    /// does not lead) the halt stored for the leader to apply. The halt acts at once in memory
    /// (strategies stopped, orders cancelled, exits sent) even while the database is
    /// unavailable; `false` says it is not stored yet: it is stored as soon as the database is
    /// back, and a node whose term ends meanwhile hands it to the next leader.
    pub persisted: bool,
    /// Where the halt is kept when not in the leader's own stored state: the cluster node that
    /// stored it as a halt request for whoever leads next (the follower it was sent to, or the
    /// peer a leader cut from the database handed it to). `null`: stored by the leader itself,
    /// or (`persisted: false`) held in the leader's memory only.
    pub kept_by: Option<String>,
}

async fn halt_now(state: AppState, guard: Sensitive) -> ApiResult<ApiResponse<HaltResult>> {
    guard
        .run(EMERGENCY_HALT, Target::Fixed("trading"), |caller, req: ReasonBody| async move {
            super::radar::require_reason(&req.reason)?;
            let halted = TradingService::new(state.engine()).emergency_halt(req.reason, caller.principal.name).await?;
            Ok(ApiResponse::ok(HaltResult {
                halted: true,
                liquidation_requested: halted.liquidation_requested,
                timestamp: format_ts(&halted.timestamp),
                persisted: state.engine().view().state_persisted,
                kept_by: None,
            }))
        })
        .await
}

/// Emergency Liquidate & Halt: persist `HALTED`, stop every strategy, cancel every open order,
/// submit market exits for every position. Answered once `HALTED` is stored, the exits written
/// ahead and every cancel and exit handed to the broker; the orders' new states are stored and
/// published (`order.updated`) right after. Safe to repeat (re-requests missing exits); survives
/// a restart; only `POST /api/risk/resume` ends it.
#[utoipa::path(post, path = "/api/risk/emergency-halt", tag = "risk", security(("bearer" = [])), request_body = ReasonBody,
    responses((status = 200, description = "Halted", body = inline(SuccessBody<HaltResult>))))]
pub async fn emergency_halt(State(state): State<AppState>, guard: Sensitive) -> ApiResult<ApiResponse<HaltResult>> {
    halt_now(state, guard).await
}

/// Deprecated alias of `POST /api/risk/emergency-halt` (header `Deprecation: true`).
#[utoipa::path(post, path = "/api/emergency/liquidate", tag = "risk", security(("bearer" = [])), request_body = ReasonBody,
    responses((status = 200, description = "Halted", body = inline(SuccessBody<HaltResult>))))]
pub async fn emergency_liquidate(State(state): State<AppState>, guard: Sensitive) -> Response {
    let mut response = halt_now(state, guard).await.into_response();
    response.headers_mut().insert(HeaderName::from_static("deprecation"), HeaderValue::from_static("true"));
    response
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct ResumeResult {
    pub trading_state: TradingState,
}

/// Ends an emergency halt (never automatic). The strategies the halt stopped stay stopped: risk
/// state `stopped_by_halt` lists them, and `POST /api/risk/resume-strategies` restarts them.
#[utoipa::path(post, path = "/api/risk/resume", tag = "risk", security(("bearer" = [])), request_body = ReasonBody,
    responses((status = 200, description = "Resumed", body = inline(SuccessBody<ResumeResult>))))]
pub async fn resume(State(state): State<AppState>, guard: Sensitive) -> ApiResult<ApiResponse<ResumeResult>> {
    guard
        .run(RESUME, Target::Fixed("trading"), |caller, req: ReasonBody| async move {
            super::radar::require_reason(&req.reason)?;
            let trading_state = TradingService::new(state.engine()).resume(req.reason, caller.principal.name).await?;
            Ok(ApiResponse::ok(ResumeResult { trading_state }))
        })
        .await
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct RestartedStrategy {
    pub symbol: String,
    pub strategy_status: StrategyStatus,
    pub polling_status: &'static str,
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct SkippedStrategy {
    pub symbol: String,
    /// Why it was not restarted (blocked since, restarted by hand since, …).
    pub reason: String,
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct ResumeStrategiesResult {
    /// The strategies restarted, with their new status.
    pub restarted: Vec<RestartedStrategy>,
    /// The strategies the halt stopped that were not restarted, each with the reason.
    pub skipped: Vec<SkippedStrategy>,
}

/// Restarts exactly the strategies the emergency halt stopped (listed in risk state
/// `stopped_by_halt`), once trading is resumed; `POST /api/risk/resume` itself leaves them
/// stopped. A symbol that cannot be restarted (blocked since, no longer on the watchlist) is
/// skipped and reported with the reason; one restarted by hand since is reported as skipped.
/// The list is then empty: repeating the call restarts nothing. `EMERGENCY_HALT_ACTIVE` while
/// still halted. Audited; `X-Confirm-Live: true` while LIVE.
#[utoipa::path(post, path = "/api/risk/resume-strategies", tag = "risk", security(("bearer" = [])), request_body = ReasonBody,
    responses((status = 200, description = "Restarted and skipped strategies", body = inline(SuccessBody<ResumeStrategiesResult>)),
              (status = 400, description = "VALIDATION_ERROR (reason)", body = crate::http::envelope::ErrorBody),
              (status = 409, description = "EMERGENCY_HALT_ACTIVE: resume trading first", body = crate::http::envelope::ErrorBody),
              (status = 428, description = "CONFIRMATION_REQUIRED (LIVE without X-Confirm-Live)", body = crate::http::envelope::ErrorBody)))]
pub async fn resume_strategies(
    State(state): State<AppState>,
    guard: Sensitive,
) -> ApiResult<ApiResponse<ResumeStrategiesResult>> {
    guard
        .run(RESUME_STRATEGIES, Target::Fixed("strategies"), |_caller, req: ReasonBody| async move {
            super::radar::require_reason(&req.reason)?;
            let resumed = TradingService::new(state.engine()).resume_strategies().await?;
            Ok(ApiResponse::ok(ResumeStrategiesResult {
                restarted: resumed
                    .restarted
                    .into_iter()
                    .map(|(symbol, status)| RestartedStrategy {
                        symbol: symbol.to_string(),
                        strategy_status: status,
                        polling_status: polling_status(status),
                    })
                    .collect(),
                skipped: resumed
                    .skipped
                    .into_iter()
                    .map(|(symbol, reason)| SkippedStrategy { symbol: symbol.to_string(), reason })
                    .collect(),
            }))
        })
        .await
}
