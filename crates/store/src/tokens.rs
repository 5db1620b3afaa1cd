//! API tokens: only the SHA-256 of a token is stored; names are unique among active tokens.
//!
//! Every token write (create, revoke, replace) runs in one transaction that first bumps the
//! single row of `token_changes`: a running service polls that version ([`TokenRepository::token_version`])
//! and reloads its tokens when it moves, so writes made elsewhere (the CLI, another node) take
//! effect without a restart; and since the bump locks that row until the write commits, token
//! writes are serialised on both backends, which is what lets a revoke check "another admin
//! stays active" and revoke in one step without a race. On PostgreSQL the write also notifies
//! [`TOKEN_CHANNEL`] (delivered on commit), so a service listening there
//! ([`TokenChangeListener`]) reloads at once instead of at its next poll.

use crate::db::{Backend, Database, StoreError};
use async_trait::async_trait;
use sqlx::postgres::PgListener;
use sqlx::Row;
use std::time::Duration;

/// PostgreSQL: the channel every token write notifies when it commits.
pub const TOKEN_CHANNEL: &str = "tradeops_token_changes";
/// The longest [`TokenChangeListener::next`] waits for its connection.
pub const LISTEN_CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// The role whose last active token may not be revoked.
pub const ADMIN_ROLE: &str = "admin";

#[derive(Clone, Debug, PartialEq)]
pub struct TokenRecord {
    pub name: String,
    pub role: String,
    pub token_hash: String,
    pub created_at: i64,
    pub created_by: String,
    pub last_used_at: Option<i64>,
    /// When it was revoked; `None` while active.
    pub revoked_at: Option<i64>,
}

/// What a revoke did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Revocation {
    Revoked,
    /// No active token has that name.
    NotFound,
    /// It is the last active admin token: revoking it would lock every operator out.
    LastAdmin,
}

#[async_trait]
pub trait TokenRepository: Send + Sync {
    /// Stores a new active token; a clash with an active token's name is `Conflict`.
    async fn insert_token(&self, token: &TokenRecord) -> Result<(), StoreError>;
    /// Every active (not revoked) token, by name.
    async fn active_tokens(&self) -> Result<Vec<TokenRecord>, StoreError>;
    /// Every token ever stored, revoked ones included, by name then creation.
    async fn all_tokens(&self) -> Result<Vec<TokenRecord>, StoreError>;
    /// Revokes the active token with this name, unless it is the last active admin token.
    async fn revoke_token(&self, name: &str, at: i64) -> Result<Revocation, StoreError>;
    /// Revokes any active token of `token.name` and stores `token` in its place, in one
    /// transaction (the configured admin token is re-armed this way: never zero admins between).
    async fn replace_token(&self, token: &TokenRecord) -> Result<(), StoreError>;
    /// The version of the token table: it moves with every create, revoke and replace.
    async fn token_version(&self) -> Result<i64, StoreError>;
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
        revoked_at: row.try_get("revoked_at")?,
    })
}

const COLUMNS: &str = "name, role, token_hash, created_at, created_by, last_used_at, revoked_at";

type Tx<'a> = sqlx::Transaction<'a, sqlx::Any>;

/// Bumps the token version; the first statement of every token write, so it also takes the
/// lock that serialises them (a row lock on PostgreSQL, the write lock on SQLite). On
/// PostgreSQL it also notifies [`TOKEN_CHANNEL`], which listeners receive once (and only if) the
/// transaction commits.
async fn bump_version(tx: &mut Tx<'_>, backend: Backend) -> Result<(), StoreError> {
    sqlx::query("UPDATE token_changes SET version = version + 1 WHERE id = 1").execute(&mut **tx).await?;
    if backend == Backend::Postgres {
        let notify = format!("NOTIFY {TOKEN_CHANNEL}");
        sqlx::raw_sql(sqlx::AssertSqlSafe(notify)).execute(&mut **tx).await?;
    }
    Ok(())
}

async fn insert(tx: &mut Tx<'_>, t: &TokenRecord) -> Result<(), StoreError> {
    let result = sqlx::query(
        "INSERT INTO api_tokens (name, role, token_hash, created_at, created_by) VALUES ($1, $2, $3, $4, $5)",
    )
    .bind(&t.name)
    .bind(&t.role)
    .bind(&t.token_hash)
    .bind(t.created_at)
    .bind(&t.created_by)
    .execute(&mut **tx)
    .await;
    match result {
        Ok(_) => Ok(()),
        // The unique indexes on active names and hashes decide clashes.
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

#[async_trait]
impl TokenRepository for Database {
    async fn insert_token(&self, t: &TokenRecord) -> Result<(), StoreError> {
        let mut tx = self.begin().await?;
        bump_version(&mut tx, self.backend()).await?;
        insert(&mut tx, t).await?;
        tx.commit().await?;
        Ok(())
    }

    async fn active_tokens(&self) -> Result<Vec<TokenRecord>, StoreError> {
        let sql = format!("SELECT {COLUMNS} FROM api_tokens WHERE revoked_at IS NULL ORDER BY name");
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql)).fetch_all(self.pool()?).await?;
        Ok(rows.iter().map(record).collect::<Result<_, _>>()?)
    }

    async fn all_tokens(&self) -> Result<Vec<TokenRecord>, StoreError> {
        let sql = format!("SELECT {COLUMNS} FROM api_tokens ORDER BY name, created_at, token_id");
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql)).fetch_all(self.pool()?).await?;
        Ok(rows.iter().map(record).collect::<Result<_, _>>()?)
    }

    async fn revoke_token(&self, name: &str, at: i64) -> Result<Revocation, StoreError> {
        let mut tx = self.begin().await?;
        // Locked first: a concurrent revoke waits here, then sees this one's result (each
        // statement of PostgreSQL's READ COMMITTED reads what committed before it).
        bump_version(&mut tx, self.backend()).await?;
        let done = sqlx::query(
            "UPDATE api_tokens SET revoked_at = $1 WHERE name = $2 AND revoked_at IS NULL \
             AND (role <> $3 OR EXISTS (SELECT 1 FROM api_tokens other \
                  WHERE other.role = $3 AND other.revoked_at IS NULL AND other.name <> $4))",
        )
        .bind(at)
        .bind(name)
        .bind(ADMIN_ROLE)
        .bind(name)
        .execute(&mut *tx)
        .await?;
        if done.rows_affected() > 0 {
            tx.commit().await?;
            return Ok(Revocation::Revoked);
        }
        let active = sqlx::query("SELECT role FROM api_tokens WHERE name = $1 AND revoked_at IS NULL")
            .bind(name)
            .fetch_optional(&mut *tx)
            .await?;
        tx.rollback().await?;
        Ok(match active {
            Some(_) => Revocation::LastAdmin,
            None => Revocation::NotFound,
        })
    }

    async fn replace_token(&self, t: &TokenRecord) -> Result<(), StoreError> {
        let mut tx = self.begin().await?;
        bump_version(&mut tx, self.backend()).await?;
        sqlx::query("UPDATE api_tokens SET revoked_at = $1 WHERE name = $2 AND revoked_at IS NULL")
            .bind(t.created_at)
            .bind(&t.name)
            .execute(&mut *tx)
            .await?;
        insert(&mut tx, t).await?;
        tx.commit().await?;
        Ok(())
    }

    async fn token_version(&self) -> Result<i64, StoreError> {
        let row = sqlx::query("SELECT version FROM token_changes WHERE id = 1").fetch_optional(self.pool()?).await?;
        Ok(match row {
            Some(row) => row.try_get("version")?,
            None => 0,
        })
    }

    async fn touch_tokens(&self, used: &[(String, i64)]) -> Result<(), StoreError> {
        let mut tx = self.begin().await?;
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

/// Changes announced by any connection to the same PostgreSQL database on one channel (LISTEN),
/// on a connection of its own: token changes ([`TOKEN_CHANNEL`]), queued jobs
/// (`crate::jobs::JOB_CHANNEL`).
pub struct ChangeListener {
    url: String,
    channel: &'static str,
    listener: Option<PgListener>,
}

/// The listener of token changes.
pub type TokenChangeListener = ChangeListener;

impl ChangeListener {
    /// On `db`'s database, for `channel`: PostgreSQL only.
    pub(crate) fn on(db: &Database, channel: &'static str) -> Option<ChangeListener> {
        (db.backend() == Backend::Postgres).then(|| ChangeListener {
            url: db.url().to_string(),
            channel,
            listener: None,
        })
    }

    /// Waits for the next announcement and returns its payload (`None`: the listener just
    /// (re)connected or lost its connection, so announcements may have been missed). `Err`: it
    /// could not connect; call again later.
    pub async fn next_notice(&mut self) -> Result<Option<String>, StoreError> {
        let Some(listener) = self.listener.as_mut() else {
            self.next().await?;
            return Ok(None);
        };
        match listener.try_recv().await {
            Ok(Some(notice)) => Ok(Some(notice.payload().to_string())),
            Ok(None) => {
                self.listener = None;
                Ok(None)
            }
            Err(e) => {
                self.listener = None;
                Err(e.into())
            }
        }
    }

    /// Waits for the next announcement, connecting first when not connected (bounded by
    /// [`LISTEN_CONNECT_TIMEOUT`]). `Ok(true)`: something changed. `Ok(false)`: the listener just
    /// (re)connected or lost its connection, so changes may have gone unannounced. `Err`: it
    /// could not connect; call again later.
    pub async fn next(&mut self) -> Result<bool, StoreError> {
        let Some(listener) = self.listener.as_mut() else {
            let connect = async {
                let mut listener = PgListener::connect(&self.url).await?;
                listener.eager_reconnect(false);
                listener.listen(self.channel).await?;
                Ok::<_, sqlx::Error>(listener)
            };
            let listener = tokio::time::timeout(LISTEN_CONNECT_TIMEOUT, connect)
                .await
                .map_err(|_| StoreError::TimedOut(LISTEN_CONNECT_TIMEOUT))??;
            self.listener = Some(listener);
            return Ok(false);
        };
        match listener.try_recv().await {
            Ok(Some(_)) => Ok(true),
            Ok(None) => {
                self.listener = None;
                Ok(false)
            }
            Err(e) => {
                self.listener = None;
                Err(e.into())
            }
        }
    }
}

impl Database {
    /// A listener for token changes: PostgreSQL only (SQLite has no notifications; the service
    /// polls [`TokenRepository::token_version`] there, and on PostgreSQL as well, for changes
    /// a lost connection missed).
    pub fn token_change_listener(&self) -> Option<TokenChangeListener> {
        ChangeListener::on(self, TOKEN_CHANNEL)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn token(name: &str, role: &str, at: i64) -> TokenRecord {
        TokenRecord {
            name: name.into(),
            role: role.into(),
            token_hash: format!("hash-of-{name}-{at}"),
            created_at: at,
            created_by: "test".into(),
            last_used_at: None,
            revoked_at: None,
        }
    }

    async fn sqlite() -> (tempfile::TempDir, Database) {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(&format!("sqlite://{}/t.db", dir.path().display())).await.unwrap();
        (dir, db)
    }

    #[tokio::test]
    async fn every_token_write_moves_the_version_and_a_refused_one_does_not() {
        let (_dir, db) = sqlite().await;
        let v0 = db.token_version().await.unwrap();
        db.insert_token(&token("a", "admin", 1)).await.unwrap();
        let v1 = db.token_version().await.unwrap();
        assert!(v1 > v0);
        assert!(matches!(db.insert_token(&token("a", "viewer", 2)).await, Err(StoreError::Conflict(_))));
        assert_eq!(db.token_version().await.unwrap(), v1, "a refused create changes nothing");
        db.insert_token(&token("v", "viewer", 3)).await.unwrap();
        let v2 = db.token_version().await.unwrap();
        assert!(v2 > v1);
        assert_eq!(db.revoke_token("v", 4).await.unwrap(), Revocation::Revoked);
        let v3 = db.token_version().await.unwrap();
        assert!(v3 > v2);
        assert_eq!(db.revoke_token("v", 5).await.unwrap(), Revocation::NotFound);
        assert_eq!(db.revoke_token("a", 5).await.unwrap(), Revocation::LastAdmin);
        assert_eq!(db.token_version().await.unwrap(), v3, "refused revokes change nothing");
        db.replace_token(&token("a", "admin", 6)).await.unwrap();
        assert!(db.token_version().await.unwrap() > v3);
    }

    #[tokio::test]
    async fn the_last_active_admin_token_cannot_be_revoked() {
        let (_dir, db) = sqlite().await;
        db.insert_token(&token("root", "admin", 1)).await.unwrap();
        db.insert_token(&token("second", "admin", 2)).await.unwrap();
        db.insert_token(&token("ops", "operator", 3)).await.unwrap();
        assert_eq!(db.revoke_token("root", 10).await.unwrap(), Revocation::Revoked);
        assert_eq!(db.revoke_token("second", 11).await.unwrap(), Revocation::LastAdmin);
        assert_eq!(db.revoke_token("ops", 12).await.unwrap(), Revocation::Revoked, "other roles are not guarded");
        let active: Vec<_> = db.active_tokens().await.unwrap().into_iter().map(|t| t.name).collect();
        assert_eq!(active, vec!["second"]);
        let all = db.all_tokens().await.unwrap();
        assert_eq!(all.len(), 3);
        assert_eq!(all.iter().find(|t| t.name == "root").unwrap().revoked_at, Some(10));
    }

    #[tokio::test]
    async fn replacing_keeps_exactly_one_active_token_of_the_name() {
        let (_dir, db) = sqlite().await;
        db.insert_token(&token("admin", "admin", 1)).await.unwrap();
        db.replace_token(&token("admin", "admin", 2)).await.unwrap();
        let active = db.active_tokens().await.unwrap();
        assert_eq!(active.len(), 1);
        assert_eq!(active[0].created_at, 2);
    }
}
