//! `GET/PUT /api/settings` and `GET /api/settings/history`.

use crate::events::{Event, SettingsChange};
use crate::http::auth::Caller;
use crate::http::envelope::{ApiResponse, SuccessBody};
use crate::http::error::ApiResult;
use crate::http::extract::Query;
use crate::http::guard::{Action, Sensitive, Target};
use crate::http::routes::{list_limit, page, parse_cursor};
use crate::http::state::AppState;
use axum::extract::State;
use axum::routing::get;
use axum::Router;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::Value;
use std::sync::Arc;
use tradeops_core::time::{format_ts, from_epoch_ms};
use tradeops_core::{Role, Settings};

pub const SETTINGS_UPDATE: Action = Action { name: "settings.update", role: Role::Operator };

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/api/settings", get(get_settings).put(put_settings))
        .route("/api/settings/history", get(history))
}

/// The effective settings in their five groups.
#[utoipa::path(get, path = "/api/settings", tag = "settings", security(("bearer" = [])),
    responses((status = 200, description = "Effective settings", body = inline(SuccessBody<Settings>)),
              (status = 401, description = "UNAUTHORIZED", body = crate::http::envelope::ErrorBody)))]
pub async fn get_settings(State(state): State<AppState>, _caller: Caller) -> ApiResult<ApiResponse<Arc<RawValue>>> {
    Ok(ApiResponse::ok(state.settings.current_json()))
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct SettingsUpdated {
    /// Dotted paths whose value changed (empty when nothing changed).
    pub updated: Vec<String>,
    pub effective_settings: Settings,
    /// The settings version now in effect.
    pub version: i64,
}

/// Partial update: a body with any of the groups, each holding the fields to change.
/// Unknown groups or fields and invalid values are `VALIDATION_ERROR` naming the field; guarded
/// changes (switching to LIVE, changing a broker, raising a risk limit while LIVE) need an admin
/// token and `X-Confirm-Live: true`, else `SETTINGS_UPDATE_BLOCKED` with `detail.guard`.
/// Every change is a new persisted version, audited, and in effect without a restart.
#[utoipa::path(put, path = "/api/settings", tag = "settings", security(("bearer" = [])),
    request_body(content = Object, description = "A partial settings object (`{}` changes nothing), e.g. {\"risk_controls\": {\"max_daily_loss\": 750}}"),
    responses((status = 200, description = "Applied", body = inline(SuccessBody<SettingsUpdated>)),
              (status = 400, description = "VALIDATION_ERROR", body = crate::http::envelope::ErrorBody),
              (status = 403, description = "FORBIDDEN (viewer)", body = crate::http::envelope::ErrorBody),
              (status = 409, description = "SETTINGS_UPDATE_BLOCKED", body = crate::http::envelope::ErrorBody),
              (status = 428, description = "CONFIRMATION_REQUIRED (LIVE without X-Confirm-Live)", body = crate::http::envelope::ErrorBody)))]
pub async fn put_settings(State(state): State<AppState>, guard: Sensitive) -> ApiResult<ApiResponse<SettingsUpdated>> {
    guard
        .run(SETTINGS_UPDATE, Target::Fixed("settings"), |caller, patch: Value| async move {
            let view = state.engine().view();
            let exposure = (view.positions.len(), view.open_orders);
            let change = state.settings.update(&patch, &caller.principal, caller.confirmed_live, exposure).await?;
            if !change.updated.is_empty() {
                let event = SettingsChange {
                    version: change.version,
                    updated: change.updated.clone(),
                    actor: caller.principal.name.clone(),
                };
                state.events.publish(Event::SettingsUpdated(event));
            }
            Ok(ApiResponse::ok(SettingsUpdated {
                updated: change.updated,
                effective_settings: (*change.settings).clone(),
                version: change.version,
            }))
        })
        .await
}

#[derive(Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
pub struct HistoryQuery {
    /// Page size, 1..=1000 (default 100).
    #[param(minimum = 1, maximum = 1000)]
    pub limit: Option<u32>,
    /// `next_cursor` of the previous page.
    #[param(value_type = Option<crate::http::string_schemas::IdCursor>)]
    pub cursor: Option<String>,
}

/// One persisted settings version.
#[derive(Serialize, utoipa::ToSchema)]
pub struct SettingsVersionRow {
    pub version: i64,
    /// Dotted paths this version changed.
    pub updated: Vec<String>,
    pub actor: String,
    pub created_at: String,
    #[schema(value_type = Object)]
    pub settings: Value,
}

/// Settings versions, newest first.
#[utoipa::path(get, path = "/api/settings/history", tag = "settings", security(("bearer" = [])), params(HistoryQuery),
    responses((status = 200, description = "Versions", body = inline(SuccessBody<Vec<SettingsVersionRow>>))))]
pub async fn history(
    State(state): State<AppState>,
    _caller: Caller,
    Query(q): Query<HistoryQuery>,
) -> ApiResult<ApiResponse<Vec<SettingsVersionRow>>> {
    let limit = list_limit(q.limit)?;
    let before = parse_cursor(q.cursor.as_deref())?;
    let (rows, next) = page(state.settings.history(before, limit + 1).await?, limit, |v| v.version);
    let rows = rows
        .into_iter()
        .map(|v| SettingsVersionRow {
            version: v.version,
            updated: serde_json::from_str(&v.updated).unwrap_or_default(),
            actor: v.actor,
            created_at: format_ts(&from_epoch_ms(v.created_at)),
            settings: serde_json::from_str(&v.settings).unwrap_or(Value::Null),
        })
        .collect();
    Ok(ApiResponse::page(rows, next))
}
