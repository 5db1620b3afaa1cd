//! `GET /api/version`.

use crate::http::auth::Caller;
use crate::http::envelope::{ApiResponse, SuccessBody};
use crate::http::state::AppState;
use axum::routing::get;
use axum::Router;
use serde::Serialize;

/// Version of the API contract this service implements (the OpenAPI `info.version`).
pub const API_CONTRACT_VERSION: &str = "1.0.0";

pub fn router() -> Router<AppState> {
    Router::new().route("/api/version", get(version))
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct Version {
    pub service: &'static str,
    /// The service's own version.
    pub version: &'static str,
    /// The API contract version.
    pub api_version: &'static str,
}

/// Service and API contract versions.
#[utoipa::path(get, path = "/api/version", tag = "system", security(("bearer" = [])),
    responses((status = 200, description = "Versions", body = inline(SuccessBody<Version>))))]
pub async fn version(_caller: Caller) -> ApiResponse<Version> {
    ApiResponse::ok(Version {
        service: "tradeops",
        version: env!("CARGO_PKG_VERSION"),
        api_version: API_CONTRACT_VERSION,
    })
}
