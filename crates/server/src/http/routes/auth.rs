//! Token management (admin) and `GET /api/auth/me`.

use crate::domain::actions::{TOKEN_CREATE, TOKEN_REVOKE};
use crate::http::auth::Caller;
use crate::http::envelope::{ApiResponse, SuccessBody};
use crate::http::error::ApiResult;
use crate::http::extract::Path;
use crate::http::guard::{Sensitive, Target};
use crate::http::state::AppState;
use axum::extract::State;
use axum::routing::{delete, get};
use axum::Router;
use serde::{Deserialize, Serialize};
use tradeops_core::time::{format_ts, from_epoch_ms};
use tradeops_core::Role;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/api/auth/tokens", get(list_tokens).post(create_token))
        .route("/api/auth/tokens/{name}", delete(revoke_token))
        .route("/api/auth/me", get(me))
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateToken {
    #[schema(pattern = "^[A-Za-z0-9_.-]{1,64}$")]
    pub name: String,
    pub role: Role,
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct CreatedToken {
    pub name: String,
    pub role: Role,
    pub created_at: String,
    /// The secret: shown this once, stored only as a hash.
    pub token: String,
}

/// Creates a named token with a role; the secret is in this response only.
#[utoipa::path(post, path = "/api/auth/tokens", tag = "auth", security(("bearer" = [])), request_body = CreateToken,
    responses((status = 201, description = "Created", body = inline(SuccessBody<CreatedToken>)),
              (status = 400, description = "VALIDATION_ERROR (bad or taken name, unknown role)", body = crate::http::envelope::ErrorBody),
              (status = 403, description = "FORBIDDEN (not admin)", body = crate::http::envelope::ErrorBody)))]
pub async fn create_token(State(state): State<AppState>, guard: Sensitive) -> ApiResult<ApiResponse<CreatedToken>> {
    guard
        .run(TOKEN_CREATE, Target::BodyField("name"), |caller, req: CreateToken| async move {
            let now = state.clock.now();
            let secret =
                state.tokens.create_named(&req.name, req.role, &caller.principal.name, now.timestamp_millis()).await?;
            Ok(ApiResponse::created(CreatedToken {
                name: req.name,
                role: req.role,
                created_at: format_ts(&now),
                token: secret,
            }))
        })
        .await
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct TokenRow {
    pub name: String,
    pub role: String,
    pub created_at: String,
    pub created_by: String,
    pub last_used_at: Option<String>,
}

/// Active tokens (never the secrets).
#[utoipa::path(get, path = "/api/auth/tokens", tag = "auth", security(("bearer" = [])),
    responses((status = 200, description = "Tokens", body = inline(SuccessBody<Vec<TokenRow>>)),
              (status = 403, description = "FORBIDDEN (not admin)", body = crate::http::envelope::ErrorBody)))]
pub async fn list_tokens(
    State(state): State<AppState>,
    Caller(caller): Caller,
) -> ApiResult<ApiResponse<Vec<TokenRow>>> {
    caller.require(Role::Admin)?;
    let rows = state
        .tokens
        .list()
        .await?
        .into_iter()
        .map(|t| TokenRow {
            name: t.name,
            role: t.role,
            created_at: format_ts(&from_epoch_ms(t.created_at)),
            created_by: t.created_by,
            last_used_at: t.last_used_at.map(|ms| format_ts(&from_epoch_ms(ms))),
        })
        .collect();
    Ok(ApiResponse::list(rows))
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct RevokedToken {
    pub name: String,
    pub revoked: bool,
    pub revoked_at: String,
}

/// Revokes a token at once: its next request is `UNAUTHORIZED`.
///
/// The last active admin token cannot be revoked (create another admin token first):
/// otherwise nobody could manage tokens or guarded settings without shell access to the
/// database.
#[utoipa::path(delete, path = "/api/auth/tokens/{name}", tag = "auth", security(("bearer" = [])),
    params(("name" = String, Path, description = "Token name", pattern = "^[A-Za-z0-9_.-]{1,64}$")),
    responses((status = 200, description = "Revoked", body = inline(SuccessBody<RevokedToken>)),
              (status = 404, description = "NOT_FOUND", body = crate::http::envelope::ErrorBody),
              (status = 409, description = "SETTINGS_UPDATE_BLOCKED with `detail.guard` = `last_admin_token` and \
`detail.reason`: the token is the last active admin token. The contract has no generic conflict code; this is a \
guarded change of the service's configuration that the current state forbids, which is what this code means \
(CONTRACT §2). Audited; nothing changes.", body = crate::http::envelope::ErrorBody)))]
pub async fn revoke_token(
    State(state): State<AppState>,
    Path(name): Path<String>,
    guard: Sensitive,
) -> ApiResult<ApiResponse<RevokedToken>> {
    guard
        .run_bodyless(TOKEN_REVOKE, Target::Value(name.clone()), |_caller| async move {
            let now = state.clock.now();
            state.tokens.revoke_named(&name, now.timestamp_millis()).await?;
            Ok(ApiResponse::ok(RevokedToken { name, revoked: true, revoked_at: format_ts(&now) }))
        })
        .await
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct Me {
    pub name: String,
    pub role: Role,
    pub auth_enabled: bool,
}

/// The caller's token name and role (`local`/admin when authentication is disabled).
#[utoipa::path(get, path = "/api/auth/me", tag = "auth", security(("bearer" = [])),
    responses((status = 200, description = "Caller", body = inline(SuccessBody<Me>)),
              (status = 401, description = "UNAUTHORIZED", body = crate::http::envelope::ErrorBody)))]
pub async fn me(State(state): State<AppState>, Caller(caller): Caller) -> ApiResponse<Me> {
    ApiResponse::ok(Me { name: caller.name, role: caller.role, auth_enabled: state.config.auth.enabled })
}
