//! The database handle: one sqlx `Any` pool over SQLite or PostgreSQL.
//!
//! The `Any` driver carries bool/int/float/text/bytes only, so timestamps are stored as epoch
//! milliseconds, money as decimal text and flags as 0/1. Queries use `$1` placeholders, which
//! both backends accept. DDL differs only in identity columns, hence two migration folders.

use sqlx::any::{install_default_drivers, AnyPoolOptions};
use sqlx::migrate::Migrator;
use sqlx::{AnyPool, Connection, Executor};
use std::time::{Duration, Instant};

/// How long a pooled connection may sit idle and still be handed out without a ping.
const IDLE_BEFORE_PING: Duration = Duration::from_secs(1);

static SQLITE_MIGRATIONS: Migrator = sqlx::migrate!("./migrations/sqlite");
static POSTGRES_MIGRATIONS: Migrator = sqlx::migrate!("./migrations/postgres");

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("database error: {0}")]
    Db(#[from] sqlx::Error),
    #[error("migration failed: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    #[error("unsupported database URL {0:?}: use sqlite://… or postgres://…")]
    UnsupportedUrl(String),
    #[error("stored data is corrupt: {0}")]
    Corrupt(String),
    #[error("{0}")]
    Conflict(String),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

impl Backend {
    pub fn from_url(url: &str) -> Result<Backend, StoreError> {
        if url.starts_with("sqlite:") {
            Ok(Backend::Sqlite)
        } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            Ok(Backend::Postgres)
        } else {
            Err(StoreError::UnsupportedUrl(url.to_string()))
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Backend::Sqlite => "sqlite",
            Backend::Postgres => "postgresql",
        }
    }
}

/// A connected, migrated database. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Database {
    pub(crate) pool: AnyPool,
    backend: Backend,
}

impl Database {
    /// Connects (creating a SQLite file and its folder when missing) without migrating.
    pub async fn connect(url: &str) -> Result<Database, StoreError> {
        install_default_drivers();
        let backend = Backend::from_url(url)?;
        // A connection is pinged before use only when it sat idle for a while: one that
        // answered a query a moment ago is known to be alive, and pinging it anyway doubled the
        // round trips of every request under load (the pool's default pings on every acquire).
        let mut options = AnyPoolOptions::new()
            .acquire_timeout(Duration::from_secs(5))
            .test_before_acquire(false)
            .before_acquire(|conn, meta| {
                Box::pin(async move {
                    if meta.idle_for > IDLE_BEFORE_PING {
                        conn.ping().await?;
                    }
                    Ok(true)
                })
            });
        let url = match backend {
            Backend::Sqlite => {
                ensure_sqlite_folder(url);
                options = options.max_connections(8).after_connect(|conn, _| {
                    Box::pin(async move {
                        conn.execute("PRAGMA journal_mode = WAL; PRAGMA busy_timeout = 5000; PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON;")
                            .await?;
                        Ok(())
                    })
                });
                if url.contains('?') || url.contains(":memory:") {
                    url.to_string()
                } else {
                    format!("{url}?mode=rwc")
                }
            }
            Backend::Postgres => {
                options = options.max_connections(16);
                url.to_string()
            }
        };
        let pool = options.connect(&url).await?;
        Ok(Database { pool, backend })
    }

    /// Connects and applies every embedded migration not yet applied.
    pub async fn open(url: &str) -> Result<Database, StoreError> {
        let db = Database::connect(url).await?;
        db.migrate().await?;
        Ok(db)
    }

    pub async fn migrate(&self) -> Result<(), StoreError> {
        let migrator = match self.backend {
            Backend::Sqlite => &SQLITE_MIGRATIONS,
            Backend::Postgres => &POSTGRES_MIGRATIONS,
        };
        migrator.run(&self.pool).await?;
        Ok(())
    }

    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// A round trip to the database; returns how long it took.
    pub async fn ping(&self) -> Result<Duration, StoreError> {
        let started = Instant::now();
        sqlx::query("SELECT 1").execute(&self.pool).await?;
        Ok(started.elapsed())
    }

    /// Runs one statement outside any repository (administration: creating test databases).
    pub async fn execute_raw(&self, sql: &str) -> Result<(), StoreError> {
        sqlx::raw_sql(sqlx::AssertSqlSafe(sql.to_string())).execute(&self.pool).await?;
        Ok(())
    }

    /// Waits for in-flight queries and closes every connection.
    pub async fn close(&self) {
        self.pool.close().await;
    }
}

fn ensure_sqlite_folder(url: &str) {
    let path = url.trim_start_matches("sqlite://").trim_start_matches("sqlite:");
    let path = path.split('?').next().unwrap_or(path);
    if path.is_empty() || path.contains(":memory:") {
        return;
    }
    if let Some(parent) = std::path::Path::new(path).parent() {
        if !parent.as_os_str().is_empty() {
            let _ = std::fs::create_dir_all(parent);
        }
    }
}
