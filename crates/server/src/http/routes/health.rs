//! `GET /api/health` (public) and `GET /api/health/components`.

use crate::events::HealthStatus;
use crate::health::{ComponentHealth, HealthMonitor};
use crate::http::auth::Caller;
use crate::http::envelope::ApiResponse;
use crate::http::error::ApiResult;
use crate::http::state::AppState;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use axum::Router;
use serde::Serialize;
use std::collections::BTreeMap;
use tradeops_core::risk::TradingState;
use tradeops_core::TradingMode;

pub fn router() -> Router<AppState> {
    Router::new().route("/api/health", get(health)).route("/api/health/components", get(components))
}

/// Platform health: the worst status of the enabled components, and each component's status.
#[derive(Serialize, utoipa::ToSchema)]
pub struct PlatformHealth {
    pub status: HealthStatus,
    pub mode: TradingMode,
    /// `ACTIVE`, `REDUCING` or `HALTED`, as the risk manager holds it now (`null` only while
    /// the engine starts). A halt is a deliberate state, not a fault: it leaves `status` as is.
    pub trading_state: Option<TradingState>,
    pub components: BTreeMap<&'static str, HealthStatus>,
}

/// Overall and per-component status.
///
/// Public (no token), for load balancers and the console's sign-in page. `status` says
/// `HEALTHY`, `DEGRADED` or `DOWN`; the HTTP status is 200, or 503 (same body) while `DOWN`, so
/// a load balancer takes the instance out.
#[utoipa::path(get, path = "/api/health", tag = "health",
    responses((status = 200, description = "Platform health: HEALTHY or DEGRADED", body = inline(crate::http::envelope::SuccessBody<PlatformHealth>)),
              (status = 503, description = "Platform health: DOWN (same body)", body = inline(crate::http::envelope::SuccessBody<PlatformHealth>))))]
pub async fn health(State(state): State<AppState>) -> ApiResponse<PlatformHealth> {
    let statuses = state.health.statuses();
    let status = HealthMonitor::overall(statuses.iter().map(|(_, s)| *s));
    let http = if status == HealthStatus::Down { StatusCode::SERVICE_UNAVAILABLE } else { StatusCode::OK };
    ApiResponse::ok(PlatformHealth {
        status,
        mode: state.settings.mode(),
        trading_state: crate::health::trading_state(&state.engine),
        components: statuses.into_iter().collect(),
    })
    .with_status(http)
}

/// Every component with its probe's latency (or why it has none), last healthy time and
/// detail; the risk manager's detail is read at request time.
#[utoipa::path(get, path = "/api/health/components", tag = "health", security(("bearer" = [])),
    responses((status = 200, description = "Component rows", body = inline(crate::http::envelope::SuccessBody<Vec<ComponentHealth>>)),
              (status = 401, description = "UNAUTHORIZED", body = crate::http::envelope::ErrorBody)))]
pub async fn components(
    State(state): State<AppState>,
    _caller: Caller,
) -> ApiResult<ApiResponse<Vec<ComponentHealth>>> {
    let mut rows = state.health.snapshot();
    // The risk manager's state as it is now, not as of the last probe: a halt shows at once.
    if let Some(risk) = rows.iter_mut().find(|r| r.name == "risk_manager") {
        risk.detail = crate::health::risk_manager_detail(&state.settings, &state.engine).await;
    }
    Ok(ApiResponse::list(rows))
}
