//! `GET /api/audit` (operator+): who did what, refusals included, newest first. Refusals before
//! identification are one row per source and minute with a count (`crate::refusals`).

use crate::http::auth::Caller;
use crate::http::envelope::{ApiResponse, SuccessBody};
use crate::http::error::ApiResult;
use crate::http::extract::Query;
use crate::http::routes::{list_limit, page, parse_cursor};
use crate::http::state::AppState;
use axum::extract::State;
use axum::routing::get;
use axum::Router;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tradeops_core::time::{format_ts, from_epoch_ms};
use tradeops_core::Role;
use tradeops_store::AuditFilter;

pub fn router() -> Router<AppState> {
    Router::new().route("/api/audit", get(list_audit))
}

#[derive(Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
pub struct AuditQuery {
    /// Only this action (`settings.update`, `token.create`, …).
    pub action: Option<String>,
    /// Only this actor (token name, `local` or `anonymous`).
    pub actor: Option<String>,
    /// Only this outcome (`OK` or an error code).
    pub outcome: Option<String>,
    /// Page size, 1..=1000 (default 100).
    #[param(minimum = 1, maximum = 1000)]
    pub limit: Option<u32>,
    /// `next_cursor` of the previous page.
    #[param(value_type = Option<crate::http::string_schemas::IdCursor>)]
    pub cursor: Option<String>,
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct AuditRow {
    pub audit_id: i64,
    /// Market time, the clock of orders and executions (in DEMO the simulated market's, which
    /// runs faster than the wall clock).
    pub timestamp: String,
    /// Wall time when the row was written (beyond the contract; equal to `timestamp` in PAPER
    /// and LIVE up to the instant each clock was read).
    pub wall_time: String,
    pub actor: String,
    pub role: Option<String>,
    pub action: String,
    pub target: String,
    /// The request body as sent (JSON, or a string when it was not JSON); for an aggregate
    /// row of refusals, `{"source", "count", "first", "last"}`.
    pub request: Value,
    /// `OK` or the error code of the refusal.
    pub outcome: String,
    pub mode: String,
    pub request_id: String,
}

/// Audit rows, newest first, paginated.
///
/// One row per sensitive action of an identified caller. Refusals before identification (no or an invalid token, a spent rate budget) are one row per
/// source, action, outcome and minute: `actor` `anonymous` (or the token over its budget),
/// `target` the client address, `request` `{"source", "count", "first", "last"}`, `timestamp`
/// and `request_id` of the first refusal; the row appears at the first refusal and its count is
/// current whenever this list is read. Rows older than `audit.retention_days` are deleted.
#[utoipa::path(get, path = "/api/audit", tag = "audit", security(("bearer" = [])), params(AuditQuery),
    responses((status = 200, description = "Audit rows", body = inline(SuccessBody<Vec<AuditRow>>)),
              (status = 403, description = "FORBIDDEN (viewer)", body = crate::http::envelope::ErrorBody)))]
pub async fn list_audit(
    State(state): State<AppState>,
    Caller(caller): Caller,
    Query(q): Query<AuditQuery>,
) -> ApiResult<ApiResponse<Vec<AuditRow>>> {
    caller.require(Role::Operator)?;
    let limit = list_limit(q.limit)?;
    // Aggregated refusals show their count as of now.
    state.refusals.flush(state.audit_store.as_ref(), state.clock.now().timestamp_millis(), false).await;
    let filter = AuditFilter {
        action: q.action,
        actor: q.actor,
        outcome: q.outcome,
        target: None,
        before_id: parse_cursor(q.cursor.as_deref())?,
        limit: limit + 1,
    };
    let (records, next) = page(state.audit.list_audit(&filter).await?, limit, |r| r.audit_id);
    let rows = records
        .into_iter()
        .map(|r| AuditRow {
            audit_id: r.audit_id,
            timestamp: format_ts(&from_epoch_ms(r.entry.ts)),
            wall_time: format_ts(&from_epoch_ms(r.entry.wall_ts)),
            actor: r.entry.actor,
            role: r.entry.role,
            action: r.entry.action,
            target: r.entry.target,
            request: serde_json::from_str(&r.entry.request).unwrap_or(Value::String(r.entry.request)),
            outcome: r.entry.outcome,
            mode: r.entry.mode,
            request_id: r.entry.request_id,
        })
        .collect();
    Ok(ApiResponse::page(rows, next))
}
