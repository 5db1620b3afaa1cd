//! API tokens: only the SHA-256 of a token is stored; names are unique among active tokens.

use crate::db::{Database, StoreError};
use async_trait::async_trait;
use sqlx::Row;

#[derive(Clone, Debug, PartialEq)]
pub struct TokenRecord {
    pub name: String,
    pub role: String,
    pub token_hash: String,
    pub created_at: i64,
    pub created_by: String,
    pub last_used_at: Option<i64>,
}

#[async_trait]
pub trait TokenRepository: Send + Sync {
    /// Stores a new active token; a clash with an active token's name is `Conflict`.
    async fn insert_token(&self, token: &TokenRecord) -> Result<(), StoreError>;
    /// Every active (not revoked) token.
    async fn active_tokens(&self) -> Result<Vec<TokenRecord>, StoreError>;
    /// Revokes the active token with this name; false when there is none.
    async fn revoke_token(&self, name: &str, at: i64) -> Result<bool, StoreError>;
    /// Records when tokens were last used.
    async fn touch_tokens(&self, used: &[(String, i64)]) -> Result<(), StoreError>;
}

fn record(row: &sqlx::any::AnyRow) -> Result<TokenRecord, sqlx::Error> {
    Ok(TokenRecord {
        name: row.try_get("name")?,
        role: row.try_get("role")?,
        token_hash: row.try_get("token_hash")?,
        created_at: row.try_get("created_at")?,
        created_by: row.try_get("created_by")?,
        last_used_at: row.try_get("last_used_at")?,
    })
}

#[async_trait]
impl TokenRepository for Database {
    async fn insert_token(&self, t: &TokenRecord) -> Result<(), StoreError> {
        // One statement: the unique index on active names decides clashes atomically (a
        // read-then-write transaction would race other writers on SQLite).
        let result = sqlx::query(
            "INSERT INTO api_tokens (name, role, token_hash, created_at, created_by) VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(&t.name)
        .bind(&t.role)
        .bind(&t.token_hash)
        .bind(t.created_at)
        .bind(&t.created_by)
        .execute(self.pool()?)
        .await;
        match result {
            Ok(_) => Ok(()),
            Err(sqlx::Error::Database(e)) if e.is_unique_violation() => {
                let on_hash = e.constraint() == Some("api_tokens_active_hash") || e.message().contains("token_hash");
                Err(StoreError::Conflict(if on_hash {
                    "an active token already has this secret".to_string()
                } else {
                    format!("a token named {:?} already exists", t.name)
                }))
            }
            Err(e) => Err(e.into()),
        }
    }

    async fn active_tokens(&self) -> Result<Vec<TokenRecord>, StoreError> {
        let rows = sqlx::query(
            "SELECT name, role, token_hash, created_at, created_by, last_used_at FROM api_tokens \
             WHERE revoked_at IS NULL ORDER BY name",
        )
        .fetch_all(self.pool()?)
        .await?;
        Ok(rows.iter().map(record).collect::<Result<_, _>>()?)
    }

    async fn revoke_token(&self, name: &str, at: i64) -> Result<bool, StoreError> {
        let done = sqlx::query("UPDATE api_tokens SET revoked_at = $1 WHERE name = $2 AND revoked_at IS NULL")
            .bind(at)
            .bind(name)
            .execute(self.pool()?)
            .await?;
        Ok(done.rows_affected() > 0)
    }

    async fn touch_tokens(&self, used: &[(String, i64)]) -> Result<(), StoreError> {
        let mut tx = self.pool()?.begin().await?;
        for (name, at) in used {
            sqlx::query("UPDATE api_tokens SET last_used_at = $1 WHERE name = $2 AND revoked_at IS NULL")
                .bind(*at)
                .bind(name)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(())
    }
}
