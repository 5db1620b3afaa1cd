//! API tokens (CONTRACT §6), the domain side: who a caller is ([`Principal`]), bearer tokens
//! stored only as SHA-256 hashes, and the [`TokenRegistry`] of active tokens with the token
//! actions the API and the CLI share (create under a checked name, revoke). Active tokens are
//! held in memory so resolving one costs one hash and one map lookup, whether the token is known
//! or not (a flood of bad tokens never reaches the database); revoking removes the token from
//! memory after the database, so a revoked token is refused at once.
//!
//! Tokens written elsewhere (the `tradeops token` CLI, another node) reach memory through the
//! token version the store bumps with every token write: the service polls it every
//! [`TOKEN_POLL_EVERY`] ([`TokenRegistry::refresh`], one single-row read) and reloads the
//! active tokens when it moved; on PostgreSQL the write's notification (LISTEN/NOTIFY) triggers
//! the same refresh at once, and the poll remains for notifications a lost connection missed.
//! While the database is unavailable the poll fails and the tokens already in memory keep
//! working.

use crate::domain::{DomainError, DomainResult, GuardSubject};
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
    pub fn require(&self, role: Role) -> DomainResult<()> {
        if self.role.allows(role) {
            Ok(())
        } else {
            Err(DomainError::Forbidden { name: self.name.clone(), role: self.role, required: role })
        }
    }
}

/// What a token name may be, in the operator's words (the `name` field's refusal).
pub const TOKEN_NAME_RULE: &str = "1 to 64 characters of A-Z, a-z, 0-9, '_', '.' and '-'";

/// Token names: 1–64 of `A-Za-z0-9 _ . -`.
pub fn validate_token_name(name: &str) -> DomainResult<()> {
    let ok =
        !name.is_empty() && name.len() <= 64 && name.chars().all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c));
    if ok {
        Ok(())
    } else {
        Err(DomainError::validation("name", format!("must be {TOKEN_NAME_RULE}")))
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
    pub async fn load(repo: Arc<dyn TokenRepository>) -> DomainResult<TokenRegistry> {
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
    pub async fn refresh(&self) -> DomainResult<bool> {
        if self.repo.token_version().await? == self.version.load(Ordering::Acquire) {
            return Ok(false);
        }
        self.reload().await?;
        Ok(true)
    }

    async fn reload(&self) -> DomainResult<()> {
        let _write = self.writes.lock().await;
        // The version first: a write landing between the two reads moves it past what is
        // recorded here, so the next refresh loads again.
        let version = self.repo.token_version().await?;
        let mut map = HashMap::new();
        for t in self.repo.active_tokens().await? {
            let role = t.role.parse::<Role>().map_err(DomainError::internal)?;
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
    pub async fn create(
        &self,
        name: &str,
        role: Role,
        secret: &str,
        created_by: &str,
        now_ms: i64,
    ) -> DomainResult<()> {
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
    pub async fn replace(
        &self,
        name: &str,
        role: Role,
        secret: &str,
        created_by: &str,
        now_ms: i64,
    ) -> DomainResult<()> {
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
    pub async fn revoke(&self, name: &str, now_ms: i64) -> DomainResult<bool> {
        let _write = self.writes.lock().await;
        match self.repo.revoke_token(name, now_ms).await? {
            Revocation::Revoked => {}
            Revocation::NotFound => return Ok(false),
            Revocation::LastAdmin => {
                let reason = format!(
                    "{name:?} is the last active admin token: create another admin token before revoking it, \
                     or nobody could manage tokens or guarded settings"
                );
                return Err(DomainError::GuardRefused {
                    guard: LAST_ADMIN_GUARD,
                    reason,
                    subject: GuardSubject::Token(name.to_string()),
                });
            }
        }
        self.by_hash.write().unwrap_or_else(|e| e.into_inner()).retain(|_, p| p.name != name);
        Ok(true)
    }

    /// Creates a token named `name` (checked first) with a new secret, returned to be shown
    /// once: the token action of `POST /api/auth/tokens` and `tradeops token create`.
    pub async fn create_named(&self, name: &str, role: Role, created_by: &str, now_ms: i64) -> DomainResult<String> {
        validate_token_name(name)?;
        let secret = generate_token();
        self.create(name, role, &secret, created_by, now_ms).await?;
        Ok(secret)
    }

    /// Revokes the active token named `name` (checked first); `NOT_FOUND` when there is none:
    /// the token action of `DELETE /api/auth/tokens/{name}` and `tradeops token revoke`.
    pub async fn revoke_named(&self, name: &str, now_ms: i64) -> DomainResult<()> {
        validate_token_name(name)?;
        if !self.revoke(name, now_ms).await? {
            return Err(DomainError::NotFound(format!("No active token named {name:?}")));
        }
        Ok(())
    }

    pub async fn list(&self) -> DomainResult<Vec<TokenRecord>> {
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

/// A store error as the token actions say it: a clash with an active token's name or secret is
/// a refusal of `name`.
fn name_clash(e: tradeops_store::StoreError) -> DomainError {
    match e {
        tradeops_store::StoreError::Conflict(reason) => DomainError::validation("name", reason),
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

    /// The token actions the API and the CLI share: a name is checked before anything is
    /// stored, a revoke of an unknown name is `NOT_FOUND`, and the last admin token stays.
    #[tokio::test]
    async fn token_actions_check_names_and_keep_the_last_admin() {
        let (_dir, db) = sqlite().await;
        let tokens = TokenRegistry::load(Arc::new(db.clone())).await.unwrap();
        let refused = tokens.create_named("no spaces", Role::Admin, "test", 1).await.unwrap_err();
        assert_eq!(refused, DomainError::validation("name", format!("must be {TOKEN_NAME_RULE}")));
        assert!(tokens.is_empty(), "a refused name stores nothing");
        let secret = tokens.create_named("root", Role::Admin, "test", 1).await.unwrap();
        assert_eq!(tokens.resolve(&secret, 2).map(|p| p.name), Some("root".to_string()));
        assert_eq!(
            tokens.revoke_named("nobody", 3).await.unwrap_err(),
            DomainError::NotFound("No active token named \"nobody\"".into())
        );
        match tokens.revoke_named("root", 3).await.unwrap_err() {
            DomainError::GuardRefused { guard, subject, .. } => {
                assert_eq!((guard, subject), (LAST_ADMIN_GUARD, GuardSubject::Token("root".into())));
            }
            other => panic!("expected the last admin guard, got {other:?}"),
        }
        assert!(tokens.resolve(&secret, 4).is_some(), "the last admin token stays active");
    }
}
