//! Authentication at the HTTP edge (CONTRACT §6): reads the bearer token of a request and
//! resolves it through the [`TokenRegistry`](crate::domain::tokens::TokenRegistry), applies the
//! per-token rate limit and the per-address one for callers without a valid token, and provides
//! the [`Caller`] extractor. Who a caller is and the tokens themselves are the domain's
//! ([`crate::domain::tokens`]).

use crate::domain::tokens::Principal;
use crate::http::client_limit::ClientAddr;
use crate::http::error::{ApiError, ApiResult, ErrorCode};
use crate::http::state::AppState;
use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use tradeops_core::Role;

/// Identifies the caller: `local` admin when auth is off, else the bearer token's principal.
/// A caller without a valid token spends from its client address's budget
/// ([`crate::http::client_limit`]) and is refused from memory: `RATE_LIMITED` once the budget is
/// spent, else `UNAUTHORIZED`. The only work before that is reading the header and, for a
/// token, one SHA-256 and a map lookup; it must come first, or a flood from an operator's own
/// address would refuse the operator's valid token too.
pub fn identify(state: &AppState, parts: &Parts) -> ApiResult<Principal> {
    if !state.config.auth.enabled {
        return Ok(Principal { name: "local".into(), role: Role::Admin });
    }
    let header = parts.headers.get(axum::http::header::AUTHORIZATION).and_then(|v| v.to_str().ok());
    let token = header
        .and_then(|h| h.split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, token)| token.trim());
    let now_ms = state.clock.now().timestamp_millis();
    let refusal = match token {
        None => ApiError::new(ErrorCode::Unauthorized, "Missing bearer token (Authorization: Bearer <token>)"),
        Some(token) => match state.tokens.resolve(token, now_ms) {
            Some(principal) => return Ok(principal),
            None => ApiError::new(ErrorCode::Unauthorized, "Invalid or revoked token"),
        },
    };
    let client = ClientAddr::of_request(parts, state.config.auth.trust_forwarded_for);
    state.client_limiter.check(client, now_ms).map_err(rate_limited)?;
    Err(refusal)
}

/// Spends one request of `key`'s rate budget.
pub fn spend(state: &AppState, key: &str) -> ApiResult<()> {
    state.rate_limiter.check(key, state.clock.now().timestamp_millis()).map_err(rate_limited)
}

fn rate_limited(retry_after: u64) -> ApiError {
    ApiError::new(ErrorCode::RateLimited, "Too many requests; slow down")
        .with_detail(serde_json::json!({"retry_after_seconds": retry_after}))
        .with_retry_after(retry_after)
}

/// Identifies the caller and spends one request of its budget.
pub fn authenticate(state: &AppState, parts: &Parts) -> ApiResult<Principal> {
    let principal = identify(state, parts)?;
    spend(state, &principal.name)?;
    Ok(principal)
}

/// An authenticated caller of any role; handlers needing more call [`Principal::require`].
pub struct Caller(pub Principal);

impl FromRequestParts<AppState> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        authenticate(state, parts).map(Caller)
    }
}
