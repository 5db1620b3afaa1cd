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
//!
//! No false outages: a database that answers is never declared unreachable. The probe runs on a
//! connection of its own (never queued behind the pool's waiters, so a busy pool is not an
//! outage), and one failed or slow probe only makes the database suspect
//! ([`ProbeReport::failures`]): it is unreachable after [`PROBE_FAILURES_BEFORE_DOWN`] probes
//! in a row failed, the next one taken [`PROBE_CONFIRM_AFTER`] after a failure, so a database
//! that really stopped is still refused within a second.
//!
//! SQLite's write-ahead log is kept bounded: the automatic checkpoint every
//! [`WAL_AUTOCHECKPOINT_PAGES`] pages cannot reset the log while readers keep using it, so under
//! sustained writes from the pool's connections it grows without end; the service therefore also
//! calls [`Database::checkpoint_wal`] periodically (past [`WAL_TRUNCATE_ABOVE_FRAMES`] a
//! `TRUNCATE` checkpoint waits for readers and empties the file), and `journal_size_limit` cuts
//! the file back after every reset.

use sqlx::any::{install_default_drivers, AnyPoolOptions};
use sqlx::migrate::Migrator;
use sqlx::Row;
use sqlx::{AnyConnection, AnyPool, Connection};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;

/// The longest an operation waits for a connection (a refused connection is retried until
/// then): a request that needs the database is answered within a second even as it goes down.
pub const ACQUIRE_TIMEOUT: Duration = Duration::from_millis(700);
/// How often the server probes the database, and the longest a probe waits.
pub const PROBE_EVERY: Duration = Duration::from_millis(250);
pub const PROBE_TIMEOUT: Duration = Duration::from_millis(500);
/// Probes in a row that must fail (an error or no answer within [`PROBE_TIMEOUT`]) before the
/// database is unreachable: one alone (a round trip slow on a loaded machine, a connection
/// dropped once) is not an outage.
pub const PROBE_FAILURES_BEFORE_DOWN: u32 = 2;
/// How soon after a failed probe the next one runs (instead of [`PROBE_EVERY`]): a stopped
/// database is confirmed, and refused, well within a second.
pub const PROBE_CONFIRM_AFTER: Duration = Duration::from_millis(100);
/// How long a pooled connection may sit idle and still be handed out without a ping.
const IDLE_BEFORE_PING: Duration = Duration::from_secs(1);

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
    /// The database cannot be reached or cannot write (see the module doc): retry later.
    #[error("the database is unavailable: {0}")]
    Unavailable(String),
    /// The database did not answer within the caller's bound: unavailable too, but the write
    /// may still land.
    #[error("no answer from the database within {0:?}")]
    TimedOut(std::time::Duration),
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
    /// Another service holds the database (a SQLite file: see [`crate::InstanceLock`]).
    #[error("{0}")]
    InUse(String),
    /// A write of an engine whose term is over (a newer engine took over: see
    /// [`Database::fenced`]): nothing was written, and nothing of that engine ever will be.
    #[error("engine term {epoch} is over: a newer engine took over, and this one writes nothing more")]
    Fenced { epoch: i64 },
}

impl StoreError {
    pub fn is_unavailable(&self) -> bool {
        matches!(self, StoreError::Unavailable(_) | StoreError::TimedOut(_))
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
    /// A write went unanswered within its bound: the next probe writes too, and its write
    /// decides (a slow write on a loaded machine is not an outage).
    writes_suspect: AtomicBool,
    /// Why the last probe failed.
    reason: Mutex<String>,
    /// Probes in a row that failed (an error or no answer): the database is down once there
    /// are [`PROBE_FAILURES_BEFORE_DOWN`].
    failures: std::sync::atomic::AtomicU32,
    /// The last successful probe's round trip, in microseconds (0: none yet).
    round_trip_micros: std::sync::atomic::AtomicU64,
    /// Probe writes in a row that went unanswered within [`PROBE_TIMEOUT`]: writes fail once
    /// there are [`PROBE_FAILURES_BEFORE_DOWN`] (one slow write is suspect, as one slow round
    /// trip is).
    write_timeouts: std::sync::atomic::AtomicU32,
    url: String,
    connection: tokio::sync::Mutex<Option<ProbeConnection>>,
}

/// The probe's connection, with the runtime whose I/O driver reads its socket. A connection
/// opened on another runtime (the first health round, on the service's) would answer the
/// prober's thread only while that runtime polls its driver: a runtime busy or blocked for a
/// second would make a database that answers look down. [`Database::probe`] opens its own.
#[derive(Debug)]
struct ProbeConnection {
    runtime: tokio::runtime::Id,
    connection: AnyConnection,
}

/// What the database probes found ([`Database::probe_report`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProbeReport {
    /// Whether operations are let through: false once [`PROBE_FAILURES_BEFORE_DOWN`] probes in a
    /// row failed, until one succeeds.
    pub available: bool,
    /// Probes in a row that failed (0: the last one succeeded). Fewer than
    /// [`PROBE_FAILURES_BEFORE_DOWN`] while available: the database is suspect, not down.
    pub failures: u32,
    /// The last successful probe's round trip (`None`: none succeeded yet).
    pub round_trip: Option<Duration>,
    /// Why the last probe failed, while `failures` > 0.
    pub error: Option<String>,
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

/// The engine's term as stored: its epoch, who holds it (`None`: released), and how many times
/// it was renewed (a holder that lives moves it on; one that stopped leaves it still).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EngineLease {
    pub epoch: i64,
    pub node_id: Option<String>,
    pub renew_seq: i64,
    /// The holder's last renewal (its wall clock, epoch ms).
    pub renewed_at: Option<i64>,
    /// Where the holder answers requests (`http://host:port`), once it listens.
    pub advertise_url: Option<String>,
}

/// A connected, migrated database. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Database {
    pool: AnyPool,
    backend: Backend,
    availability: Arc<Availability>,
    /// The engine epoch every transaction of this handle checks first (see
    /// [`Database::fenced`]); `None`: unfenced.
    fence: Option<i64>,
    /// The bars last read, served while their series' version holds.
    pub(crate) bars_cache: Arc<crate::bars_cache::BarsCache>,
}

/// How long the first connection to a SQLite file may take at start: creating the file and
/// switching it to WAL can outlast a request's [`ACQUIRE_TIMEOUT`] on a loaded machine, and a
/// service must not fail to start for that.
const SQLITE_OPEN_PATIENCE: Duration = Duration::from_secs(10);

/// The pool of a SQLite file, its first connection tried again while it times out, for up to
/// [`SQLITE_OPEN_PATIENCE`].
async fn open_sqlite(options: AnyPoolOptions, url: &str) -> Result<AnyPool, sqlx::Error> {
    let deadline = Instant::now() + SQLITE_OPEN_PATIENCE;
    loop {
        match options.clone().connect(url).await {
            Err(sqlx::Error::PoolTimedOut) if Instant::now() < deadline => {
                tracing::warn!("the SQLite file did not open within the acquire bound: trying again");
            }
            other => return other,
        }
    }
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
            .acquire_timeout(ACQUIRE_TIMEOUT)
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
        let pool = match backend {
            Backend::Sqlite => open_sqlite(options, &url).await?,
            Backend::Postgres => options.connect(&url).await?,
        };
        let availability = Availability {
            down: AtomicBool::new(false),
            writes_failing: AtomicBool::new(false),
            writes_suspect: AtomicBool::new(false),
            failures: std::sync::atomic::AtomicU32::new(0),
            round_trip_micros: std::sync::atomic::AtomicU64::new(0),
            reason: Mutex::new(String::new()),
            write_timeouts: std::sync::atomic::AtomicU32::new(0),
            url,
            connection: tokio::sync::Mutex::new(None),
        };
        Ok(Database {
            pool,
            backend,
            availability: Arc::new(availability),
            fence: None,
            bars_cache: Default::default(),
        })
    }

    /// The same database, fenced to the engine term `epoch`: every transaction this
    /// handle begins first checks that `epoch` is still the current one and, once a newer
    /// engine has taken over ([`Database::take_engine_epoch`]), is refused with
    /// [`StoreError::Fenced`] before it writes anything. On PostgreSQL the check holds the
    /// term's row `FOR SHARE` to the commit, so a takeover waits for a write in flight and every
    /// later one is refused; on SQLite (one service per file) a takeover is a write, which a
    /// transaction that read the old term cannot write after. The engine writes trading state
    /// through such a handle only; what else the service writes (settings, audit, jobs) is not
    /// the engine's.
    pub fn fenced(&self, epoch: i64) -> Database {
        Database { fence: Some(epoch), ..self.clone() }
    }

    /// The engine term this handle is fenced to.
    pub fn fence(&self) -> Option<i64> {
        self.fence
    }

    /// Starts a new engine term: moves the epoch on (refusing every write of the engine whose
    /// term it was from now on) and records who took it. Returns the new epoch. On PostgreSQL it
    /// waits for a fenced write in flight to finish first.
    pub async fn take_engine_epoch(&self, node_id: &str, now_ms: i64) -> Result<i64, StoreError> {
        let mut tx = self.unfenced().begin().await?;
        let row = sqlx::query(
            "UPDATE engine_leases SET epoch = epoch + 1, node_id = $1, acquired_at = $2, advertise_url = NULL WHERE id = 1 RETURNING epoch",
        )
        .bind(node_id)
        .bind(now_ms)
        .fetch_one(&mut *tx)
        .await?;
        let epoch = row.try_get("epoch")?;
        move_fence(&mut tx, epoch).await?;
        tx.commit().await?;
        Ok(epoch)
    }

    /// The current engine term: its epoch, and who took it.
    pub async fn engine_epoch(&self) -> Result<(i64, Option<String>), StoreError> {
        let lease = self.engine_lease().await?;
        Ok((lease.epoch, lease.node_id))
    }

    /// The current engine term with its renewals (see [`EngineLease`]).
    pub async fn engine_lease(&self) -> Result<EngineLease, StoreError> {
        let row =
            sqlx::query("SELECT epoch, node_id, renew_seq, renewed_at, advertise_url FROM engine_leases WHERE id = 1")
                .fetch_one(self.pool()?)
                .await?;
        Ok(EngineLease {
            epoch: row.try_get("epoch")?,
            node_id: row.try_get("node_id")?,
            renew_seq: row.try_get("renew_seq")?,
            renewed_at: row.try_get("renewed_at")?,
            advertise_url: row.try_get("advertise_url")?,
        })
    }

    /// Takes the next term for `node_id` if the current one is still the term `observed` was
    /// read of, renewed no further (`epoch` and `renew_seq` unchanged): one of several services
    /// taking over at once wins, and a renewal that commits after the taker last read the row
    /// makes the take fail — so the holder's last successful renewal is always one the taker
    /// saw, which is what the holder's window is counted from (`cluster::Term`). Its epoch, or
    /// `None` when the term moved on meanwhile.
    pub async fn take_engine_term_after(
        &self,
        observed: &EngineLease,
        node_id: &str,
        now_ms: i64,
    ) -> Result<Option<i64>, StoreError> {
        let mut tx = self.unfenced().begin().await?;
        let row = sqlx::query(
            "UPDATE engine_leases SET epoch = epoch + 1, node_id = $1, acquired_at = $2, renew_seq = renew_seq + 1, \
             renewed_at = $2, advertise_url = NULL WHERE id = 1 AND epoch = $3 AND renew_seq = $4 RETURNING epoch",
        )
        .bind(node_id)
        .bind(now_ms)
        .bind(observed.epoch)
        .bind(observed.renew_seq)
        .fetch_optional(&mut *tx)
        .await?;
        let Some(row) = row else { return Ok(None) };
        let epoch = row.try_get("epoch")?;
        move_fence(&mut tx, epoch).await?;
        tx.commit().await?;
        Ok(Some(epoch))
    }

    /// Renews term `epoch` held by `node_id`: whether it still is theirs. It updates the lease's
    /// row only, never the fence's (`engine_fence`), so it does not wait for the engine's
    /// writes in flight, which hold the fence `FOR SHARE`: a renewal is as slow as the
    /// database, not as the slowest write of the engine it vouches for. A takeover holds the
    /// lease's row while it waits for those writes, so a renewal racing it waits, then finds
    /// the term moved on.
    pub async fn renew_engine_term(&self, epoch: i64, node_id: &str, now_ms: i64) -> Result<bool, StoreError> {
        let done = sqlx::query(
            "UPDATE engine_leases SET renew_seq = renew_seq + 1, renewed_at = $3 WHERE id = 1 AND epoch = $1 AND node_id = $2",
        )
        .bind(epoch)
        .bind(node_id)
        .bind(now_ms)
        .execute(self.pool()?)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Records where the holder of term `epoch` answers requests (other services forward to it).
    pub async fn advertise_engine(&self, epoch: i64, node_id: &str, url: &str) -> Result<bool, StoreError> {
        let done =
            sqlx::query("UPDATE engine_leases SET advertise_url = $3 WHERE id = 1 AND epoch = $1 AND node_id = $2")
                .bind(epoch)
                .bind(node_id)
                .bind(url)
                .execute(self.pool()?)
                .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Gives term `epoch` up (a service stopping): another may take the next one at once. Its
    /// engine must have stopped writing.
    pub async fn release_engine_term(&self, epoch: i64, node_id: &str) -> Result<(), StoreError> {
        sqlx::query("UPDATE engine_leases SET node_id = NULL, advertise_url = NULL WHERE id = 1 AND epoch = $1 AND node_id = $2")
            .bind(epoch)
            .bind(node_id)
            .execute(self.pool()?)
            .await?;
        Ok(())
    }

    /// Starts a transaction that a cancelled caller cannot leave half begun. sqlx 0.9 counts a
    /// transaction as open only once PostgreSQL has answered its `BEGIN`: a caller dropped while
    /// waiting for that answer (a write past its bound, a request past its deadline) hands the
    /// connection back to the pool inside a transaction nobody commits, and whatever runs on it
    /// next is silently lost when the connection closes. Begun in its own task, a transaction
    /// always finishes beginning; if its caller is gone, it is dropped there and rolled back.
    ///
    /// A fenced handle's transaction begins with its term's check (see [`Database::fenced`]),
    /// in the same task.
    pub(crate) async fn begin(&self) -> Result<sqlx::Transaction<'static, sqlx::Any>, StoreError> {
        let pool = self.pool()?.clone();
        // PostgreSQL: the fence's row held `FOR SHARE` to the commit (a takeover's UPDATE waits
        // for it; renewals write the lease's row and do not). SQLite: a write of the row, so the
        // transaction takes the write lock at once (waiting as for any write) and its check
        // cannot go stale; a read first would make the transaction's first write fail "database
        // is locked" whenever another connection wrote meanwhile.
        let guard = self.fence.map(|epoch| (self.backend, epoch));
        let begin = async move {
            let mut tx = pool.begin().await?;
            if let Some((backend, epoch)) = guard {
                let current = match backend {
                    Backend::Postgres => {
                        sqlx::query("SELECT epoch FROM engine_fence WHERE id = 1 AND epoch = $1 FOR SHARE")
                            .bind(epoch)
                            .fetch_optional(&mut *tx)
                            .await?
                            .is_some()
                    }
                    Backend::Sqlite => {
                        sqlx::query("UPDATE engine_fence SET epoch = epoch WHERE id = 1 AND epoch = $1")
                            .bind(epoch)
                            .execute(&mut *tx)
                            .await?
                            .rows_affected()
                            == 1
                    }
                };
                if !current {
                    return Err(StoreError::Fenced { epoch });
                }
            }
            Ok(tx)
        };
        match tokio::spawn(begin).await {
            Ok(begun) => begun,
            Err(e) => Err(StoreError::Unavailable(format!("beginning a transaction failed: {e}"))),
        }
    }

    /// This handle without its fence (a takeover is not a write of any term's engine).
    fn unfenced(&self) -> Database {
        Database { fence: None, ..self.clone() }
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
    /// write succeeds again. A write that went unanswered within its bound
    /// ([`StoreError::TimedOut`]) is not enough: a database that answers slowly under load still
    /// takes writes. It makes writes suspect, and the next probe's own write (bounded by
    /// [`PROBE_TIMEOUT`], on its own connection) decides: it succeeds, or it is refused, or
    /// [`PROBE_FAILURES_BEFORE_DOWN`] of them in a row go unanswered; a database that stopped answering is
    /// refused by the probes' failures in a row meanwhile, as any outage.
    pub fn writes_failed(&self, e: &StoreError) {
        let a = &self.availability;
        if matches!(e, StoreError::TimedOut(_)) {
            if !a.writes_suspect.swap(true, Ordering::AcqRel) {
                tracing::warn!(backend = self.backend.name(), error = %e, "a write went unanswered: the next probe writes too");
            }
        } else if e.is_unavailable() && !a.writes_failing.swap(true, Ordering::AcqRel) {
            tracing::error!(backend = self.backend.name(), error = %e, "writes to the database fail");
        }
    }

    /// Probes the database (a round trip on the probe's own connection, bounded by
    /// [`PROBE_TIMEOUT`]) and records the result: after [`PROBE_FAILURES_BEFORE_DOWN`] failures
    /// in a row every operation is refused at once, until a probe succeeds. While writes are
    /// failing it also tries a write of its own, and says the database is unavailable until one
    /// succeeds (reads go on meanwhile). Returns the round trip.
    ///
    /// One task (the server's prober, on a thread of its own) calls this, and
    /// [`Database::probe_report`] is how others read it; a call from another runtime opens the
    /// probe's connection again on that runtime ([`ProbeConnection`]).
    pub async fn probe(&self) -> Result<Duration, StoreError> {
        let result = match tokio::time::timeout(PROBE_TIMEOUT, self.probe_round_trip()).await {
            Ok(r) => r,
            Err(_) => Err(self.probe_timed_out().await),
        };
        self.record_probe(&result);
        let a = &self.availability;
        let failing = a.writes_failing.load(Ordering::Acquire);
        if result.is_ok() && (failing || a.writes_suspect.load(Ordering::Acquire)) {
            let written = match tokio::time::timeout(PROBE_TIMEOUT, self.probe_write()).await {
                Ok(r) => r,
                Err(_) => Err(self.probe_timed_out().await),
            };
            // Unanswered probe writes in a row (0: this one was answered).
            let timeouts = match &written {
                Err(StoreError::TimedOut(_)) => a.write_timeouts.fetch_add(1, Ordering::AcqRel).saturating_add(1),
                _ => {
                    a.write_timeouts.store(0, Ordering::Release);
                    0
                }
            };
            match written {
                Ok(()) => {
                    a.writes_suspect.store(false, Ordering::Release);
                    a.writes_failing.store(false, Ordering::Release);
                    if failing {
                        tracing::warn!(backend = self.backend.name(), "writes to the database succeed again");
                    }
                }
                // A slow write on a loaded machine: the next probe writes again and decides.
                Err(e) if timeouts > 0 && !failing && timeouts < PROBE_FAILURES_BEFORE_DOWN => {
                    tracing::warn!(backend = self.backend.name(), error = %e, "the probe's write went unanswered; the next one decides");
                }
                Err(e) => {
                    a.writes_suspect.store(false, Ordering::Release);
                    if !a.writes_failing.swap(true, Ordering::AcqRel) {
                        tracing::error!(backend = self.backend.name(), error = %e, "writes to the database fail");
                    }
                    return Err(StoreError::Unavailable(format!("writes fail: {e}")));
                }
            }
        }
        result
    }

    /// Records a probe's result: a success makes the database available at once; a failure
    /// makes it unavailable only as the [`PROBE_FAILURES_BEFORE_DOWN`]th in a row.
    fn record_probe(&self, result: &Result<Duration, StoreError>) {
        match result {
            Ok(latency) => {
                let micros = u64::try_from(latency.as_micros()).unwrap_or(u64::MAX).max(1);
                self.availability.round_trip_micros.store(micros, Ordering::Release);
                self.availability.failures.store(0, Ordering::Release);
                if self.availability.down.swap(false, Ordering::AcqRel) {
                    tracing::warn!(backend = self.backend.name(), "the database is reachable again");
                }
            }
            Err(e) => {
                *self.availability.reason.lock().unwrap_or_else(|p| p.into_inner()) = e.to_string();
                let failures = self.availability.failures.fetch_add(1, Ordering::AcqRel).saturating_add(1);
                if failures < PROBE_FAILURES_BEFORE_DOWN {
                    tracing::warn!(backend = self.backend.name(), error = %e, "a database probe failed; the next one decides");
                } else if !self.availability.down.swap(true, Ordering::AcqRel) {
                    tracing::error!(backend = self.backend.name(), error = %e, failures, "the database is unavailable");
                }
            }
        }
    }

    /// What the probes found so far (see [`ProbeReport`]), without probing.
    pub fn probe_report(&self) -> ProbeReport {
        let a = &self.availability;
        let failures = a.failures.load(Ordering::Acquire);
        let micros = a.round_trip_micros.load(Ordering::Acquire);
        ProbeReport {
            available: !a.down.load(Ordering::Acquire),
            failures,
            round_trip: (micros > 0).then(|| Duration::from_micros(micros)),
            error: (failures > 0).then(|| a.reason.lock().unwrap_or_else(|p| p.into_inner()).clone()),
        }
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
        migrator.run(self.pool()?).await?;
        Ok(())
    }

    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// The URL connected to (for connections of their own: the probe, a listener).
    pub(crate) fn url(&self) -> &str {
        &self.availability.url
    }

    /// A round trip on the probe's own connection, opened (again) on the calling runtime after
    /// a failure or when the connection belongs to another runtime ([`ProbeConnection`]).
    async fn probe_round_trip(&self) -> Result<Duration, StoreError> {
        let started = Instant::now();
        let runtime = tokio::runtime::Handle::current().id();
        let mut slot = self.availability.connection.lock().await;
        if slot.as_ref().is_none_or(|probe| probe.runtime != runtime) {
            *slot = None;
            let connection = AnyConnection::connect(&self.availability.url).await?;
            *slot = Some(ProbeConnection { runtime, connection });
        }
        let Some(probe) = slot.as_mut() else { unreachable!("connected above") };
        if let Err(e) = sqlx::query("SELECT 1").execute(&mut probe.connection).await {
            *slot = None;
            return Err(e.into());
        }
        Ok(started.elapsed())
    }

    /// A write on the probe's own connection (one row of `health_probe`).
    async fn probe_write(&self) -> Result<(), StoreError> {
        let mut slot = self.availability.connection.lock().await;
        let Some(probe) = slot.as_mut() else {
            return Err(StoreError::Unavailable("the probe is not connected".into()));
        };
        sqlx::query(
            "INSERT INTO health_probe (id, probed_at) VALUES (1, 0) \
             ON CONFLICT (id) DO UPDATE SET probed_at = health_probe.probed_at + 1",
        )
        .execute(&mut probe.connection)
        .await?;
        Ok(())
    }

    /// A probe's query not answered within [`PROBE_TIMEOUT`]: its connection is closed, so the
    /// next probe does not wait behind the answer still owed on it.
    async fn probe_timed_out(&self) -> StoreError {
        *self.availability.connection.lock().await = None;
        StoreError::TimedOut(PROBE_TIMEOUT)
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
        let row = sqlx::query(sqlx::AssertSqlSafe(sql)).fetch_one(self.pool()?).await?;
        // Columns: busy (1 when blocked), frames in the log, frames checkpointed.
        let busy: i64 = sqlx::Row::try_get(&row, 0)?;
        let frames: i64 = sqlx::Row::try_get(&row, 1)?;
        Ok((busy != 0, frames))
    }

    /// Runs one statement outside any repository (administration: creating test databases).
    pub async fn execute_raw(&self, sql: &str) -> Result<(), StoreError> {
        sqlx::raw_sql(sqlx::AssertSqlSafe(sql.to_string())).execute(self.pool()?).await?;
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

/// Moves the engine's fence to `epoch` inside the transaction taking that term: it waits for
/// the writes in flight of the term before (they hold the fence's row `FOR SHARE` on
/// PostgreSQL), and every write of that term begun after it commits is refused.
async fn move_fence(tx: &mut sqlx::Transaction<'static, sqlx::Any>, epoch: i64) -> Result<(), StoreError> {
    sqlx::query("UPDATE engine_fence SET epoch = $1 WHERE id = 1").bind(epoch).execute(&mut **tx).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{AuditEntry, AuditFilter, AuditRepository};

    /// One failed probe (an error or no answer: a round trip slow on a loaded machine) leaves a
    /// database that answers available, suspect only; the second in a row refuses every
    /// operation; a probe that succeeds lets them through again at once.
    #[tokio::test]
    async fn the_database_is_unavailable_only_after_probes_fail_in_a_row() {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(&format!("sqlite://{}/probe.db", dir.path().display())).await.unwrap();
        db.probe().await.unwrap();
        assert!(db.probe_report().round_trip.is_some(), "the round trip is kept");
        for failure in [StoreError::TimedOut(PROBE_TIMEOUT), StoreError::Unavailable("connection refused".into())] {
            db.record_probe(&Err(failure));
            let report = db.probe_report();
            assert!(report.available && db.is_available(), "one failure is not an outage: {report:?}");
            assert_eq!(report.failures, 1);
            assert!(db.engine_lease().await.is_ok(), "operations go on while the database is suspect");
            for _ in 1..PROBE_FAILURES_BEFORE_DOWN {
                db.record_probe(&Err(StoreError::Unavailable("connection refused".into())));
            }
            assert!(!db.is_available(), "{PROBE_FAILURES_BEFORE_DOWN} failures in a row are");
            assert!(db.engine_lease().await.is_err_and(|e| e.is_unavailable()), "refused at once");
            db.probe().await.unwrap();
            let report = db.probe_report();
            assert!(report.available && report.failures == 0 && report.error.is_none(), "{report:?}");
        }
        // Failures apart are never in a row.
        for _ in 0..5 {
            db.record_probe(&Err(StoreError::TimedOut(PROBE_TIMEOUT)));
            db.record_probe(&Ok(Duration::from_millis(1)));
        }
        assert!(db.is_available());
    }

    /// A write unanswered within its bound (a loaded machine) leaves a database that answers
    /// writable: the next probe writes too and, its write taken, nothing was ever refused. A
    /// write the database refuses (a full disk) makes it unwritable until a probe's write
    /// succeeds; so does a slow write the probe's own write then confirms.
    #[tokio::test]
    async fn a_slow_write_is_confirmed_by_the_probe_before_writes_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(&format!("sqlite://{}/writes.db", dir.path().display())).await.unwrap();
        db.writes_failed(&StoreError::TimedOut(Duration::from_millis(300)));
        assert!(db.is_writable(), "one slow write is not an outage");
        db.probe().await.unwrap();
        assert!(
            db.is_writable() && !db.availability.writes_suspect.load(Ordering::Acquire),
            "the probe's write decided"
        );

        db.writes_failed(&StoreError::Unavailable("database or disk is full".into()));
        assert!(!db.is_writable(), "a write the database refused is");
        db.probe().await.unwrap();
        assert!(db.is_writable(), "until the probe's own write succeeds");

        // The database stops taking writes: the probe's write confirms the slow one.
        db.writes_failed(&StoreError::TimedOut(Duration::from_millis(300)));
        sqlx::query("PRAGMA query_only = ON")
            .execute(&mut db.availability.connection.lock().await.as_mut().unwrap().connection)
            .await
            .unwrap();
        assert!(db.probe().await.is_err_and(|e| e.is_unavailable()));
        assert!(!db.is_writable(), "the probe's write failed too");
    }

    /// An audit row of a refused halt, about 1 KB.
    fn refusal(ts: i64, request: &str) -> AuditEntry {
        AuditEntry {
            ts,
            wall_ts: ts,
            actor: "anonymous".into(),
            role: None,
            action: "risk.emergency_halt".into(),
            target: String::new(),
            request: request.to_string(),
            outcome: "UNAUTHORIZED".into(),
            mode: "PAPER".into(),
            request_id: format!("r{ts}"),
        }
    }

    fn wal_bytes(path: &std::path::Path) -> u64 {
        std::fs::metadata(path).expect("the write-ahead log exists while writers run").len()
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
                        let entry = refusal((round * 10_000 + writer * 1_000 + n) as i64, &request);
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
        assert!(largest > 0, "the log grew under the writers");
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
            db.append_audit(&refusal(n, &request)).await.unwrap();
        }
        let long = wal_bytes(&wal);
        assert!(long > WAL_TRUNCATE_ABOVE_FRAMES as u64 * 4096, "the reader kept the log growing: {long} bytes");
        reader.rollback().await.unwrap();
        assert!(db.checkpoint_wal().await.unwrap());
        assert_eq!(wal_bytes(&wal), 0, "a TRUNCATE checkpoint empties the file");
    }

    /// The prober runs on a thread of its own so that a busy service cannot make the database
    /// look down; the first probe may come from the service's runtime (the first health round).
    /// Its connection must not stay bound to that runtime: while that runtime is blocked, the
    /// prober's round trips on it were never read and the database was declared down although
    /// it answered. Runs on PostgreSQL (SQLite's connections run on threads of their own).
    #[tokio::test]
    async fn the_probe_answers_while_the_runtime_that_probed_first_is_blocked() {
        let Some((db, _dir, admin)) = crate::test_databases::postgres().await else { return };
        db.probe().await.expect("the first probe, on the test's runtime");
        let prober = db.clone();
        // Joining blocks the test runtime's only thread, as a service's blocked runtime would be.
        let (first, second) = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            runtime.block_on(async { (prober.probe().await, prober.probe().await) })
        })
        .join()
        .unwrap();
        crate::test_databases::drop_postgres(admin).await;
        assert!(first.is_ok() && second.is_ok(), "the prober's own probes: {first:?}, {second:?}");
        assert!(db.is_available());
    }

    /// A write cut short by its caller's bound while PostgreSQL was answering its `BEGIN` must
    /// not leave its connection inside a transaction: the autocommit writes that reuse that
    /// connection afterwards (an audit row, say) would never be committed. Runs on PostgreSQL
    /// (`TRADEOPS_TEST_DATABASE_URL`); elsewhere it says it skipped.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_transaction_abandoned_while_beginning_loses_no_later_write() {
        let Some(admin_url) = std::env::var("TRADEOPS_TEST_DATABASE_URL").ok().filter(|u| !u.is_empty()) else {
            assert!(
                std::env::var("TRADEOPS_REQUIRE_SERVICES").is_err(),
                "TRADEOPS_REQUIRE_SERVICES=1 but TRADEOPS_TEST_DATABASE_URL is not set"
            );
            eprintln!("skipped: needs PostgreSQL (set TRADEOPS_TEST_DATABASE_URL)");
            return;
        };
        let name = format!("tradeops_begin_{}", std::process::id());
        let admin = Database::connect(&admin_url).await.unwrap();
        admin.execute_raw(&format!("DROP DATABASE IF EXISTS {name}")).await.unwrap();
        admin.execute_raw(&format!("CREATE DATABASE {name}")).await.unwrap();
        let (base, query) = admin_url.split_once('?').map(|(b, q)| (b, Some(q))).unwrap_or((&admin_url, None));
        let url = format!(
            "{}/{name}{}",
            &base[..base.rfind('/').unwrap()],
            query.map(|q| format!("?{q}")).unwrap_or_default()
        );
        let db = Database::open(&url).await.unwrap();
        db.append_audit(&refusal(0, "{}")).await.unwrap();
        // Transactions whose callers give up after one poll: `BEGIN` is sent, its answer not yet
        // read (a write past its bound, a request past its deadline, at the worst moment).
        for _ in 0..20 {
            tokio::select! {
                biased;
                _ = db.begin() => {}
                _ = std::future::ready(()) => {}
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
        const ROWS: i64 = 200;
        for n in 1..ROWS {
            db.append_audit(&refusal(n, "{}")).await.unwrap();
        }
        db.close().await;
        let reopened = Database::open(&url).await.unwrap();
        let stored = reopened.list_audit(&AuditFilter { limit: 1000, ..Default::default() }).await.unwrap();
        reopened.close().await;
        admin.execute_raw(&format!("DROP DATABASE IF EXISTS {name}")).await.unwrap();
        admin.close().await;
        assert_eq!(stored.len() as i64, ROWS, "audit rows written after the abandoned transactions were lost");
    }
}
