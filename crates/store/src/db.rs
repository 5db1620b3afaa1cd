//! The database handle: one sqlx `Any` pool over SQLite or PostgreSQL.
//!
//! The `Any` driver carries bool/int/float/text/bytes only, so timestamps are stored as epoch
//! milliseconds, money as decimal text and flags as 0/1. Queries use `$1` placeholders, which
//! both backends accept. DDL differs only in identity columns, hence two migration folders.
//!
//! Outages fail fast: an error that says the database cannot be reached or cannot write (a
//! refused or dropped connection, PostgreSQL shutting down, a full disk, a SQLite I/O error) is
//! [`StoreError::Unavailable`]; a connection is waited for at most [`ACQUIRE_TIMEOUT`]; and
//! once [`Database::probe`] (run every [`PROBE_EVERY`] by the server) finds the database
//! unreachable, every operation is refused at once until a probe reaches it again.

use sqlx::any::{install_default_drivers, AnyPoolOptions};
use sqlx::migrate::Migrator;
use sqlx::{AnyConnection, AnyPool, Connection, Executor};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The longest an operation waits for a connection (a refused connection is retried until
/// then): a request that needs the database is answered within a second even as it goes down.
pub const ACQUIRE_TIMEOUT: Duration = Duration::from_millis(700);
/// How often the server probes the database, and the longest a probe waits.
pub const PROBE_EVERY: Duration = Duration::from_millis(250);
pub const PROBE_TIMEOUT: Duration = Duration::from_millis(500);

static SQLITE_MIGRATIONS: Migrator = sqlx::migrate!("./migrations/sqlite");
static POSTGRES_MIGRATIONS: Migrator = sqlx::migrate!("./migrations/postgres");

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The database cannot be reached or cannot write (see the module doc): retry later.
    #[error("the database is unavailable: {0}")]
    Unavailable(String),
    #[error("database error: {0}")]
    Db(sqlx::Error),
    #[error("migration failed: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    #[error("unsupported database URL {0:?}: use sqlite://… or postgres://…")]
    UnsupportedUrl(String),
    #[error("stored data is corrupt: {0}")]
    Corrupt(String),
    #[error("{0}")]
    Conflict(String),
}

impl StoreError {
    pub fn is_unavailable(&self) -> bool {
        matches!(self, StoreError::Unavailable(_))
    }
}

impl From<sqlx::Error> for StoreError {
    fn from(e: sqlx::Error) -> Self {
        if is_outage(&e) {
            StoreError::Unavailable(e.to_string())
        } else {
            StoreError::Db(e)
        }
    }
}

/// Whether an error says the database cannot be reached or cannot write, rather than that a
/// statement was wrong: connection and I/O failures, PostgreSQL's connection exceptions (class
/// 08), shutdown (57P01–57P03), insufficient resources (53: disk full, out of memory, too many
/// connections) and system errors (58); SQLite's I/O error, full disk, unopenable file, read-only
/// database and locked-out writer.
fn is_outage(e: &sqlx::Error) -> bool {
    match e {
        sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::Protocol(_)
        | sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::WorkerCrashed => true,
        sqlx::Error::Database(db) => db.code().is_some_and(|code| outage_code(&code)),
        _ => false,
    }
}

fn outage_code(code: &str) -> bool {
    // A PostgreSQL SQLSTATE is always five characters (often all digits: 08006); SQLite's
    // extended result codes are decimal numbers below 10,000.
    if code.len() == 5 {
        return code.starts_with("08")
            || code.starts_with("53")
            || code.starts_with("58")
            || matches!(code, "57P01" | "57P02" | "57P03");
    }
    // Primary result codes: SQLITE_BUSY 5, SQLITE_READONLY 8, SQLITE_IOERR 10, SQLITE_FULL 13,
    // SQLITE_CANTOPEN 14.
    code.parse::<i32>().is_ok_and(|sqlite| matches!(sqlite & 0xff, 5 | 8 | 10 | 13 | 14))
}

#[cfg(test)]
mod outage_tests {
    use super::outage_code;

    #[test]
    fn postgres_and_sqlite_codes_that_mean_an_outage() {
        for code in ["08006", "08001", "53100", "53300", "58030", "57P01", "57P03"] {
            assert!(outage_code(code), "PostgreSQL {code}");
        }
        for code in ["42501", "23505", "42P01", "40001", "22003"] {
            assert!(!outage_code(code), "PostgreSQL {code} is the statement's fault");
        }
        // SQLITE_FULL, SQLITE_IOERR_WRITE (778), SQLITE_BUSY, SQLITE_CANTOPEN, SQLITE_READONLY.
        for code in ["13", "778", "5", "14", "8"] {
            assert!(outage_code(code), "SQLite {code}");
        }
        // SQLITE_CONSTRAINT_UNIQUE (2067), SQLITE_ERROR, SQLITE_CONSTRAINT_FOREIGNKEY (787).
        for code in ["2067", "1", "787"] {
            assert!(!outage_code(code), "SQLite {code} is the statement's fault");
        }
    }
}

/// What the last probe found, and the probe's own connection: probes never wait behind a
/// busy pool, so a saturated pool is not mistaken for an outage.
#[derive(Debug)]
struct Availability {
    down: AtomicBool,
    /// Writes fail although the database answers (a full disk, a read-only file): set by
    /// [`Database::writes_failed`], cleared when the probe's own write succeeds again.
    writes_failing: AtomicBool,
    /// Why the last probe failed.
    reason: Mutex<String>,
    url: String,
    connection: tokio::sync::Mutex<Option<AnyConnection>>,
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
    pool: AnyPool,
    backend: Backend,
    availability: Arc<Availability>,
}

impl Database {
    /// Connects (creating a SQLite file and its folder when missing) without migrating.
    pub async fn connect(url: &str) -> Result<Database, StoreError> {
        install_default_drivers();
        let backend = Backend::from_url(url)?;
        let mut options = AnyPoolOptions::new().acquire_timeout(ACQUIRE_TIMEOUT);
        let url = match backend {
            Backend::Sqlite => {
                ensure_sqlite_folder(url);
                options = options
                    .max_connections(8)
                    .after_connect(|conn, _| {
                        Box::pin(async move {
                            conn.execute("PRAGMA journal_mode = WAL; PRAGMA busy_timeout = 5000; PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON;")
                                .await?;
                            Ok(())
                        })
                    })
                    .after_release(|conn, _| {
                        // A write that failed on I/O (a full disk) can leave SQLite inside a
                        // transaction the driver believes ended (SQLite rolls back on its own,
                        // the driver's ROLLBACK then fails and its nesting count drifts). Such a
                        // connection would run later writes inside that transaction, never
                        // committed, and hold the write lock. A `BEGIN` succeeds only outside
                        // a transaction: otherwise the connection is closed (which rolls back).
                        Box::pin(async move {
                            if conn.execute("BEGIN").await.is_err() {
                                tracing::warn!("a SQLite connection left inside a transaction is closed");
                                return Ok(false);
                            }
                            Ok(conn.execute("ROLLBACK").await.is_ok())
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
        let availability = Availability {
            down: AtomicBool::new(false),
            writes_failing: AtomicBool::new(false),
            reason: Mutex::new(String::new()),
            url,
            connection: tokio::sync::Mutex::new(None),
        };
        Ok(Database { pool, backend, availability: Arc::new(availability) })
    }

    /// The pool, or [`StoreError::Unavailable`] at once while the last probe found the
    /// database unreachable.
    pub(crate) fn pool(&self) -> Result<&AnyPool, StoreError> {
        if self.availability.down.load(Ordering::Acquire) {
            let reason = self.availability.reason.lock().unwrap_or_else(|e| e.into_inner()).clone();
            return Err(StoreError::Unavailable(reason));
        }
        Ok(&self.pool)
    }

    /// Whether the last probe reached the database.
    pub fn is_available(&self) -> bool {
        !self.availability.down.load(Ordering::Acquire)
    }

    /// Whether writes can be expected to succeed: the database is reachable and no write has
    /// failed for want of space or I/O since the probe's last successful write.
    pub fn is_writable(&self) -> bool {
        self.is_available() && !self.availability.writes_failing.load(Ordering::Acquire)
    }

    /// Records a failed write: when it says the database cannot write ([`StoreError::Unavailable`]),
    /// writes are expected to fail ([`Database::is_writable`] is false) until the probe's own
    /// write succeeds again.
    pub fn writes_failed(&self, e: &StoreError) {
        if e.is_unavailable() && !self.availability.writes_failing.swap(true, Ordering::AcqRel) {
            tracing::error!(backend = self.backend.name(), error = %e, "writes to the database fail");
        }
    }

    /// Probes the database (a round trip, bounded by [`PROBE_TIMEOUT`]) and records the
    /// result: while it fails, every operation is refused at once. While writes are failing it
    /// also tries a write of its own, and says the database is unavailable until one succeeds
    /// (reads go on meanwhile). Returns the round trip.
    pub async fn probe(&self) -> Result<Duration, StoreError> {
        let result = match tokio::time::timeout(PROBE_TIMEOUT, self.probe_round_trip()).await {
            Ok(r) => r,
            Err(_) => Err(StoreError::Unavailable(format!("no answer within {PROBE_TIMEOUT:?}"))),
        };
        if result.is_ok() && self.availability.writes_failing.load(Ordering::Acquire) {
            let written = match tokio::time::timeout(PROBE_TIMEOUT, self.probe_write()).await {
                Ok(r) => r,
                Err(_) => Err(StoreError::Unavailable(format!("no write within {PROBE_TIMEOUT:?}"))),
            };
            match written {
                Ok(()) => {
                    self.availability.writes_failing.store(false, Ordering::Release);
                    tracing::warn!(backend = self.backend.name(), "writes to the database succeed again");
                }
                Err(e) => return Err(StoreError::Unavailable(format!("writes fail: {e}"))),
            }
        }
        match &result {
            Ok(_) => {
                if self.availability.down.swap(false, Ordering::AcqRel) {
                    tracing::warn!(backend = self.backend.name(), "the database is reachable again");
                }
            }
            Err(e) => {
                *self.availability.reason.lock().unwrap_or_else(|p| p.into_inner()) = e.to_string();
                if !self.availability.down.swap(true, Ordering::AcqRel) {
                    tracing::error!(backend = self.backend.name(), error = %e, "the database is unavailable");
                }
            }
        }
        result
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
        self.pool()?;
        self.round_trip().await
    }

    /// A round trip on the probe's own connection, opened again after a failure.
    async fn probe_round_trip(&self) -> Result<Duration, StoreError> {
        let started = Instant::now();
        let mut slot = self.availability.connection.lock().await;
        if slot.is_none() {
            *slot = Some(AnyConnection::connect(&self.availability.url).await?);
        }
        let Some(connection) = slot.as_mut() else { unreachable!("connected above") };
        if let Err(e) = sqlx::query("SELECT 1").execute(&mut *connection).await {
            *slot = None;
            return Err(e.into());
        }
        Ok(started.elapsed())
    }

    /// A write on the probe's own connection (one row of `health_probe`).
    async fn probe_write(&self) -> Result<(), StoreError> {
        let mut slot = self.availability.connection.lock().await;
        let Some(connection) = slot.as_mut() else {
            return Err(StoreError::Unavailable("the probe is not connected".into()));
        };
        sqlx::query(
            "INSERT INTO health_probe (id, probed_at) VALUES (1, 0) \
             ON CONFLICT (id) DO UPDATE SET probed_at = health_probe.probed_at + 1",
        )
        .execute(&mut *connection)
        .await?;
        Ok(())
    }

    async fn round_trip(&self) -> Result<Duration, StoreError> {
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
