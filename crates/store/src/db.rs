//! The database handle: one sqlx `Any` pool over SQLite or PostgreSQL.
//!
//! The `Any` driver carries bool/int/float/text/bytes only, so timestamps are stored as epoch
//! milliseconds, money as decimal text and flags as 0/1. Queries use `$1` placeholders, which
//! both backends accept. DDL differs only in identity columns, hence two migration folders.
//!
//! SQLite's write-ahead log is kept bounded: the automatic checkpoint every
//! [`WAL_AUTOCHECKPOINT_PAGES`] pages cannot reset the log while readers keep using it, so under
//! sustained writes from the pool's connections it grows without end; the service therefore also
//! calls [`Database::checkpoint_wal`] periodically (past [`WAL_TRUNCATE_ABOVE_FRAMES`] a
//! `TRUNCATE` checkpoint waits for readers and empties the file), and `journal_size_limit` cuts
//! the file back after every reset.

use sqlx::any::{install_default_drivers, AnyPoolOptions};
use sqlx::migrate::Migrator;
use sqlx::AnyPool;
use std::time::{Duration, Instant};

static SQLITE_MIGRATIONS: Migrator = sqlx::migrate!("./migrations/sqlite");
static POSTGRES_MIGRATIONS: Migrator = sqlx::migrate!("./migrations/postgres");

/// SQLite's automatic (passive) checkpoint threshold, in pages of 4 KiB: SQLite's own default,
/// set explicitly so no connection runs with it off.
pub const WAL_AUTOCHECKPOINT_PAGES: u32 = 1000;
/// Bytes the WAL file is cut back to after a checkpoint resets it (SQLite otherwise keeps the
/// file at its largest size ever).
pub const WAL_SIZE_LIMIT_BYTES: u64 = 16 * 1024 * 1024;
/// Frames (pages) in the WAL past which [`Database::checkpoint_wal`] truncates it (8 MiB): below
/// it the WAL is being reset by the automatic checkpoints and a passive checkpoint suffices.
pub const WAL_TRUNCATE_ABOVE_FRAMES: i64 = 2048;

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
        let mut options = AnyPoolOptions::new().acquire_timeout(Duration::from_secs(5));
        let url = match backend {
            Backend::Sqlite => {
                ensure_sqlite_folder(url);
                options = options.max_connections(8).after_connect(|conn, _| {
                    Box::pin(async move {
                        let pragmas = format!(
                            "PRAGMA journal_mode = WAL; PRAGMA busy_timeout = 5000; PRAGMA synchronous = NORMAL; \
                             PRAGMA foreign_keys = ON; PRAGMA wal_autocheckpoint = {WAL_AUTOCHECKPOINT_PAGES}; \
                             PRAGMA journal_size_limit = {WAL_SIZE_LIMIT_BYTES};"
                        );
                        sqlx::raw_sql(sqlx::AssertSqlSafe(pragmas)).execute(&mut *conn).await?;
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

    /// Copies SQLite's write-ahead log into the database file without blocking writers (a
    /// passive checkpoint); when the log has grown past [`WAL_TRUNCATE_ABOVE_FRAMES`] (readers
    /// kept the automatic checkpoints from resetting it), checkpoints again in `TRUNCATE` mode,
    /// which blocks writers while it waits (up to the busy timeout) for readers, then empties
    /// the file. Truncating only then keeps a checkpoint's pause (and its fsync) away from
    /// writers on a quiet log. Returns false when something kept it from completing (the next
    /// call tries again). PostgreSQL manages its own log: always true there.
    pub async fn checkpoint_wal(&self) -> Result<bool, StoreError> {
        if self.backend != Backend::Sqlite {
            return Ok(true);
        }
        let (busy, frames) = self.sqlite_checkpoint("PASSIVE").await?;
        if frames < WAL_TRUNCATE_ABOVE_FRAMES {
            return Ok(!busy);
        }
        let (busy, _) = self.sqlite_checkpoint("TRUNCATE").await?;
        Ok(!busy)
    }

    /// `PRAGMA wal_checkpoint(MODE)`: whether it was blocked, and the frames in the log.
    async fn sqlite_checkpoint(&self, mode: &'static str) -> Result<(bool, i64), StoreError> {
        let sql = format!("PRAGMA wal_checkpoint({mode})");
        let row = sqlx::query(sqlx::AssertSqlSafe(sql)).fetch_one(&self.pool).await?;
        // Columns: busy (1 when blocked), frames in the log, frames checkpointed.
        let busy: i64 = sqlx::Row::try_get(&row, 0)?;
        let frames: i64 = sqlx::Row::try_get(&row, 1)?;
        Ok((busy != 0, frames))
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{AuditEntry, AuditFilter, AuditRepository};

    fn wal_bytes(path: &std::path::Path) -> u64 {
        std::fs::metadata(path).map(|m| m.len()).unwrap_or(0)
    }

    /// Eight writers and a reader at once never leave the log without a reader, so SQLite's
    /// automatic checkpoint cannot reset it and the file only grows; the periodic checkpoint
    /// (what the service runs every few seconds) keeps it bounded whatever the volume.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn periodic_checkpoints_keep_the_wal_bounded_under_sustained_writes() {
        const ROUNDS: usize = 30;
        const ROWS_PER_WRITER: usize = 40;
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(&format!("sqlite://{}/t.db", dir.path().display())).await.unwrap();
        let wal = dir.path().join("t.db-wal");
        let request = serde_json::json!({"note": "x".repeat(1000)}).to_string();
        let mut largest = 0;
        for round in 0..ROUNDS {
            let mut tasks = tokio::task::JoinSet::new();
            for writer in 0..8 {
                let (db, request) = (db.clone(), request.clone());
                tasks.spawn(async move {
                    for n in 0..ROWS_PER_WRITER {
                        let entry = AuditEntry {
                            ts: (round * 10_000 + writer * 1_000 + n) as i64,
                            actor: "anonymous".into(),
                            role: None,
                            action: "risk.emergency_halt".into(),
                            target: String::new(),
                            request: request.clone(),
                            outcome: "UNAUTHORIZED".into(),
                            mode: "PAPER".into(),
                            request_id: format!("r{round}-{writer}-{n}"),
                        };
                        db.append_audit(&entry).await.unwrap();
                    }
                });
            }
            let reader = db.clone();
            tasks.spawn(async move {
                for _ in 0..ROWS_PER_WRITER {
                    reader.list_audit(&AuditFilter { limit: 5, ..Default::default() }).await.unwrap();
                }
            });
            while let Some(done) = tasks.join_next().await {
                done.unwrap();
            }
            largest = largest.max(wal_bytes(&wal));
            db.checkpoint_wal().await.unwrap();
        }
        let written = ROUNDS * 8 * ROWS_PER_WRITER;
        assert!(
            largest < WAL_SIZE_LIMIT_BYTES,
            "the WAL reached {largest} bytes over {written} rows (bound {WAL_SIZE_LIMIT_BYTES})"
        );
        assert!(db.checkpoint_wal().await.unwrap(), "nothing else uses the database now");
    }

    /// A reader holding its snapshot keeps every checkpoint from resetting the log; once the log
    /// is past the threshold, the next periodic checkpoint empties the file.
    #[tokio::test]
    async fn a_log_left_long_by_a_reader_is_truncated() {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(&format!("sqlite://{}/t.db", dir.path().display())).await.unwrap();
        let wal = dir.path().join("t.db-wal");
        let mut reader = db.pool.begin().await.unwrap();
        sqlx::query("SELECT COUNT(*) FROM audit_log").fetch_one(&mut *reader).await.unwrap();
        let request = serde_json::json!({"note": "x".repeat(1000)}).to_string();
        for n in 0..1_000 {
            let entry = AuditEntry {
                ts: n,
                actor: "anonymous".into(),
                role: None,
                action: "risk.emergency_halt".into(),
                target: String::new(),
                request: request.clone(),
                outcome: "UNAUTHORIZED".into(),
                mode: "PAPER".into(),
                request_id: format!("r{n}"),
            };
            db.append_audit(&entry).await.unwrap();
        }
        let long = wal_bytes(&wal);
        assert!(long > WAL_TRUNCATE_ABOVE_FRAMES as u64 * 4096, "the reader kept the log growing: {long} bytes");
        reader.rollback().await.unwrap();
        assert!(db.checkpoint_wal().await.unwrap());
        assert_eq!(wal_bytes(&wal), 0, "a TRUNCATE checkpoint empties the file");
    }
}
