//! Authentication (CONTRACT §6): bearer tokens stored only as SHA-256 hashes, three roles, a
//! bootstrap admin token, a per-token rate limit, and a per-address one for callers without a
//! valid token. Active tokens are held in memory so a request costs one hash and one map
//! lookup, whether the token is known or not (a flood of bad tokens never reaches the
//! database); revoking removes the token from memory after the database, so a revoked token is
//! refused at once.
//!
//! Tokens written elsewhere (the `tradeops token` CLI, another node) reach memory through the
//! token version the store bumps with every token write: the service polls it every
//! [`TOKEN_POLL_EVERY`] ([`TokenRegistry::refresh`], one single-row read) and reloads the
//! active tokens when it moved; on PostgreSQL the write's notification (LISTEN/NOTIFY) triggers
//! the same refresh at once, and the poll remains for notifications a lost connection missed.
//! While the database is unavailable the poll fails and the tokens already in memory keep
//! working.

use crate::client_limit::ClientAddr;
use crate::error::{ApiError, ApiResult, ErrorCode};
use crate::state::AppState;
use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use rand::RngCore;
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::sync::{Mutex, RwLock};
use std::time::Duration;
use tradeops_core::Role;
use tradeops_store::{Revocation, TokenRecord, TokenRepository};

/// How often the service looks for token writes made elsewhere: a token created or revoked by
/// the CLI takes effect within this (plus one reload).
pub const TOKEN_POLL_EVERY: Duration = Duration::from_millis(250);

/// The guard named by a refused revoke of the last active admin token.
pub const LAST_ADMIN_GUARD: &str = "last_admin_token";

/// Who is calling.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Principal {
    /// Token name, or `local` when authentication is disabled.
    pub name: String,
    pub role: Role,
}

impl Principal {
    pub fn require(&self, role: Role) -> ApiResult<()> {
        if self.role.allows(role) {
            Ok(())
        } else {
            Err(ApiError::new(
                ErrorCode::Forbidden,
                format!("This action needs the {role} role; token {:?} has {}", self.name, self.role),
            )
            .with_detail(serde_json::json!({"required_role": role, "role": self.role})))
        }
    }
}

/// A new random token: `tro_` and 64 hex digits (256 bits).
pub fn generate_token() -> String {
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    format!("tro_{}", hex::encode(bytes))
}

pub fn hash_token(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

/// Active tokens by hash, with the usage not yet written to the database.
pub struct TokenRegistry {
    repo: Arc<dyn TokenRepository>,
    by_hash: RwLock<HashMap<String, Principal>>,
    last_used: Mutex<HashMap<String, i64>>,
    /// Serialises create, revoke and reload so memory always ends as the database does.
    writes: tokio::sync::Mutex<()>,
    /// The token version (see the store's `token_changes`) the map was loaded at.
    version: AtomicI64,
}

impl TokenRegistry {
    pub async fn load(repo: Arc<dyn TokenRepository>) -> ApiResult<TokenRegistry> {
        let registry = TokenRegistry {
            repo,
            by_hash: RwLock::default(),
            last_used: Mutex::default(),
            writes: Default::default(),
            version: AtomicI64::new(i64::MIN),
        };
        registry.reload().await?;
        Ok(registry)
    }

    /// Reloads the active tokens when the stored token version moved since the last load:
    /// one single-row read otherwise. True when it reloaded. An error (the database is
    /// unavailable) leaves the tokens in memory as they were.
    pub async fn refresh(&self) -> ApiResult<bool> {
        if self.repo.token_version().await? == self.version.load(Ordering::Acquire) {
            return Ok(false);
        }
        self.reload().await?;
        Ok(true)
    }

    async fn reload(&self) -> ApiResult<()> {
        let _write = self.writes.lock().await;
        // The version first: a write landing between the two reads moves it past what is
        // recorded here, so the next refresh loads again.
        let version = self.repo.token_version().await?;
        let mut map = HashMap::new();
        for t in self.repo.active_tokens().await? {
            let role = t.role.parse::<Role>().map_err(ApiError::internal)?;
            map.insert(t.token_hash, Principal { name: t.name, role });
        }
        *self.by_hash.write().unwrap_or_else(|e| e.into_inner()) = map;
        self.version.store(version, Ordering::Release);
        Ok(())
    }

    pub fn is_empty(&self) -> bool {
        self.by_hash.read().unwrap_or_else(|e| e.into_inner()).is_empty()
    }

    pub fn resolve(&self, token: &str, now_ms: i64) -> Option<Principal> {
        let principal = self.by_hash.read().unwrap_or_else(|e| e.into_inner()).get(&hash_token(token)).cloned()?;
        let mut last_used = self.last_used.lock().unwrap_or_else(|e| e.into_inner());
        match last_used.get_mut(&principal.name) {
            Some(at) => *at = now_ms,
            None => {
                last_used.insert(principal.name.clone(), now_ms);
            }
        }
        Some(principal)
    }

    /// Stores a token under `name`; returns an error naming the clash when the name is taken.
    pub async fn create(&self, name: &str, role: Role, secret: &str, created_by: &str, now_ms: i64) -> ApiResult<()> {
        let _write = self.writes.lock().await;
        let record = token_record(name, role, secret, created_by, now_ms);
        self.repo.insert_token(&record).await.map_err(name_clash)?;
        self.by_hash
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(record.token_hash, Principal { name: name.to_string(), role });
        Ok(())
    }

    /// Makes `secret` the one active token named `name`, revoking the one it replaces in the
    /// same transaction (so replacing the only admin token never leaves none).
    pub async fn replace(&self, name: &str, role: Role, secret: &str, created_by: &str, now_ms: i64) -> ApiResult<()> {
        let _write = self.writes.lock().await;
        let record = token_record(name, role, secret, created_by, now_ms);
        self.repo.replace_token(&record).await.map_err(name_clash)?;
        let mut by_hash = self.by_hash.write().unwrap_or_else(|e| e.into_inner());
        by_hash.retain(|_, p| p.name != name);
        by_hash.insert(record.token_hash, Principal { name: name.to_string(), role });
        Ok(())
    }

    /// Revokes the token named `name`; false when no active token has that name. The last
    /// active admin token is not revoked: `SETTINGS_UPDATE_BLOCKED` (guard
    /// [`LAST_ADMIN_GUARD`]), since nobody could then manage tokens without shell access.
    pub async fn revoke(&self, name: &str, now_ms: i64) -> ApiResult<bool> {
        let _write = self.writes.lock().await;
        match self.repo.revoke_token(name, now_ms).await? {
            Revocation::Revoked => {}
            Revocation::NotFound => return Ok(false),
            Revocation::LastAdmin => {
                let reason = format!(
                    "{name:?} is the last active admin token: create another admin token before revoking it, \
                     or nobody could manage tokens or guarded settings"
                );
                return Err(ApiError::new(ErrorCode::SettingsUpdateBlocked, reason.clone())
                    .with_detail(serde_json::json!({"guard": LAST_ADMIN_GUARD, "reason": reason, "name": name})));
            }
        }
        self.by_hash.write().unwrap_or_else(|e| e.into_inner()).retain(|_, p| p.name != name);
        Ok(true)
    }

    pub async fn list(&self) -> ApiResult<Vec<TokenRecord>> {
        self.flush_usage().await;
        Ok(self.repo.active_tokens().await?)
    }

    /// Writes pending last-used times; called periodically and at shutdown.
    pub async fn flush_usage(&self) {
        let pending: Vec<(String, i64)> = self.last_used.lock().unwrap_or_else(|e| e.into_inner()).drain().collect();
        if pending.is_empty() {
            return;
        }
        if let Err(e) = self.repo.touch_tokens(&pending).await {
            tracing::warn!(error = %e, "could not record token usage");
        }
    }
}

/// A store error as the API says it: a clash with an active token's name or secret is a
/// `VALIDATION_ERROR` of `name`.
fn name_clash(e: tradeops_store::StoreError) -> ApiError {
    match e {
        tradeops_store::StoreError::Conflict(reason) => ApiError::validation("name", reason),
        e => e.into(),
    }
}

fn token_record(name: &str, role: Role, secret: &str, created_by: &str, now_ms: i64) -> TokenRecord {
    TokenRecord {
        name: name.to_string(),
        role: role.as_str().to_string(),
        token_hash: hash_token(secret),
        created_at: now_ms,
        created_by: created_by.to_string(),
        last_used_at: None,
        revoked_at: None,
    }
}

/// Identifies the caller: `local` admin when auth is off, else the bearer token's principal.
/// A caller without a valid token spends from its client address's budget
/// ([`crate::client_limit`]) and is refused from memory: `RATE_LIMITED` once the budget is
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_random_and_hashed() {
        let (a, b) = (generate_token(), generate_token());
        assert_ne!(a, b);
        assert!(a.starts_with("tro_") && a.len() == 68);
        assert!(a[4..].bytes().all(|b| b.is_ascii_hexdigit()), "{a}");
        // Stored hashes are SHA-256 hex of the whole token (what `token create` writes).
        assert_eq!(hash_token("tro_x"), "ea3d38061ca444be736427231fd50043f628d2ba1bf19b0cfe194191cd7d5c67");
    }

    async fn sqlite() -> (tempfile::TempDir, tradeops_store::Database) {
        let dir = tempfile::tempdir().unwrap();
        let db = tradeops_store::Database::open(&format!("sqlite://{}/t.db", dir.path().display())).await.unwrap();
        (dir, db)
    }

    /// A token written by another process (here: another registry, as the CLI does) is picked
    /// up by the next refresh, and a revoke too; no change costs one read and no reload.
    #[tokio::test]
    async fn refresh_picks_up_tokens_written_elsewhere() {
        let (_dir, db) = sqlite().await;
        let service = TokenRegistry::load(Arc::new(db.clone())).await.unwrap();
        let cli = TokenRegistry::load(Arc::new(db.clone())).await.unwrap();
        cli.create("root", Role::Admin, "tro_root", "cli", 1).await.unwrap();
        cli.create("bot", Role::Viewer, "tro_bot", "cli", 2).await.unwrap();
        assert_eq!(service.resolve("tro_bot", 3), None, "not loaded yet");
        assert!(service.refresh().await.unwrap());
        assert_eq!(service.resolve("tro_bot", 3).map(|p| p.role), Some(Role::Viewer));
        assert!(!service.refresh().await.unwrap(), "nothing changed: no reload");
        assert!(cli.revoke("bot", 4).await.unwrap());
        assert!(service.refresh().await.unwrap());
        assert_eq!(service.resolve("tro_bot", 5), None);
        assert!(service.resolve("tro_root", 5).is_some());
    }

    /// While the database cannot be read, refreshing fails and the known tokens keep working.
    #[tokio::test]
    async fn known_tokens_survive_a_database_outage() {
        let (_dir, db) = sqlite().await;
        let service = TokenRegistry::load(Arc::new(db.clone())).await.unwrap();
        service.create("root", Role::Admin, "tro_root", "test", 1).await.unwrap();
        db.close().await;
        assert!(service.refresh().await.is_err());
        assert_eq!(service.resolve("tro_root", 2).map(|p| p.name), Some("root".to_string()));
        assert_eq!(service.resolve("tro_unknown", 2), None);
    }
}
