//! `GET /api/health` (public) and `GET /api/health/components`.

use crate::auth::Caller;
use crate::envelope::ApiResponse;
use crate::error::ApiResult;
use crate::health::{ComponentHealth, HealthMonitor, HealthStatus};
use crate::state::AppState;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use axum::Router;
use serde::Serialize;
use std::collections::BTreeMap;
use tradeops_core::TradingMode;

pub fn router() -> Router<AppState> {
    Router::new().route("/api/health", get(health)).route("/api/health/components", get(components))
}

/// Platform health: the worst status of the enabled components, and each component's status.
#[derive(Serialize, utoipa::ToSchema)]
pub struct PlatformHealth {
    pub status: HealthStatus,
    pub mode: TradingMode,
    pub components: BTreeMap<&'static str, HealthStatus>,
}

/// Overall and per-component status.
///
/// Public (no token), for load balancers and the console's sign-in page. `status` says
/// `HEALTHY`, `DEGRADED` or `DOWN`; the HTTP status is 200, or 503 (same body) while `DOWN`, so
/// a load balancer takes the instance out.
#[utoipa::path(get, path = "/api/health", tag = "health",
    responses((status = 200, description = "Platform health: HEALTHY or DEGRADED", body = inline(crate::envelope::SuccessBody<PlatformHealth>)),
              (status = 503, description = "Platform health: DOWN (same body)", body = inline(crate::envelope::SuccessBody<PlatformHealth>))))]
pub async fn health(State(state): State<AppState>) -> ApiResponse<PlatformHealth> {
    let statuses = state.health.statuses();
    let status = HealthMonitor::overall(statuses.iter().map(|(_, s)| *s));
    let http = if status == HealthStatus::Down { StatusCode::SERVICE_UNAVAILABLE } else { StatusCode::OK };
    ApiResponse::ok(PlatformHealth { status, mode: state.settings.mode(), components: statuses.into_iter().collect() })
        .with_status(http)
}

/// Every component with its latency, last healthy time and detail.
#[utoipa::path(get, path = "/api/health/components", tag = "health", security(("bearer" = [])),
    responses((status = 200, description = "Component rows", body = inline(crate::envelope::SuccessBody<Vec<ComponentHealth>>)),
              (status = 401, description = "UNAUTHORIZED", body = crate::envelope::ErrorBody)))]
pub async fn components(
    State(state): State<AppState>,
    _caller: Caller,
) -> ApiResult<ApiResponse<Vec<ComponentHealth>>> {
    Ok(ApiResponse::list(state.health.snapshot()))
}
