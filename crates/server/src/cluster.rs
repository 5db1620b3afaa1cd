//! The engine's term among several services on one database: [`Election`]. One
//! service at a time runs the trading engine — the holder of the current term in the
//! `engine_leases` row. It renews the term every [`RENEW_EVERY`] while it lives; a service
//! waiting to run the engine takes the next term when the current one is released (its holder
//! stopped gracefully) or when it has watched it go unrenewed for [`LEASE`] (its holder died, or
//! is paused). Staleness is judged on the waiting service's own monotonic clock, never by
//! comparing clocks across machines.
//!
//! On SQLite (one service per file: its instance lock) there is nobody to wait for: the term is
//! taken at once and nothing renews it.
//!
//! On PostgreSQL the holder also holds an advisory lock on a connection of its own
//! ([`LeaderLock`]). A holder that dies (`kill -9`) loses its session and the lock with it at
//! once, so a waiting service that finds the lock free and the term unrenewed for two periods
//! takes over then, without waiting out the lease; a holder only paused keeps its lock, and is
//! taken over after the lease.
//!
//! Safety does not rest on the lease: every write of trading state is fenced to its term
//! (`Database::fenced`), so a holder that was only paused and comes back writes nothing once
//! another took over, and its engine stops (it also checks the term every second). The lease only
//! decides who may start.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Mutex;
use tradeops_core::Clock;
use tradeops_store::{Backend, Database, LeaderLock, StoreError};

/// How often the holder renews its term, and a waiting service looks at it.
pub const RENEW_EVERY: Duration = Duration::from_millis(250);

/// How long a term may go unrenewed, as a waiting service watches it, before it is taken over.
pub const LEASE: Duration = Duration::from_secs(3);

/// How often a process of the cluster records that it lives (`cluster_members`).
pub const HEARTBEAT_EVERY: Duration = Duration::from_secs(1);
/// A member whose heartbeat is older than this is shown stale (the `cluster` health component
/// is `DEGRADED` while one is).
pub const MEMBER_STALE_AFTER: Duration = Duration::from_secs(5);
/// A member whose heartbeat is older than this is forgotten.
pub const MEMBER_FORGOTTEN_AFTER: Duration = Duration::from_secs(60);

/// Records every [`HEARTBEAT_EVERY`] that this process (`node`, a `serve` or a `worker`) lives,
/// on PostgreSQL (returns at once on SQLite: one process, nothing to list). A heartbeat the
/// database cannot take is tried again at the next period.
pub async fn heartbeat(db: Database, node: String, kind: &'static str, clock: Arc<dyn Clock>) {
    if db.backend() == Backend::Sqlite {
        return;
    }
    let started = clock.now().timestamp_millis();
    let forget = MEMBER_FORGOTTEN_AFTER.as_millis() as i64;
    loop {
        let now = clock.now().timestamp_millis();
        if let Err(e) = db.heartbeat_member(&node, kind, started, now, now - forget).await {
            tracing::debug!(error = %e, "the cluster heartbeat was not recorded; tried again");
        }
        tokio::time::sleep(HEARTBEAT_EVERY).await;
    }
}

/// Removes this process from the members (it stops).
pub async fn leave(db: &Database, node: &str) {
    if db.backend() == Backend::Postgres {
        if let Err(e) = db.leave_cluster(node).await {
            tracing::debug!(error = %e, "not removed from the cluster's members: forgotten after a minute");
        }
    }
}

/// This service's part in the election of the engine's term.
#[derive(Clone)]
pub struct Election {
    db: Database,
    node_id: String,
    clock: Arc<dyn Clock>,
    lease: Duration,
    renew_every: Duration,
    /// The advisory lock's connection (PostgreSQL): held by the holder, tried by a waiter.
    lock: Arc<Mutex<Option<LeaderLock>>>,
}

impl Election {
    /// On `db` (unfenced), as `node_id`.
    pub fn new(db: Database, node_id: String, clock: Arc<dyn Clock>) -> Election {
        let lock = Arc::new(Mutex::new(LeaderLock::for_database(&db)));
        Election { db, node_id, clock, lease: LEASE, renew_every: RENEW_EVERY, lock }
    }

    /// The same with another lease and renewal period (tests).
    pub fn with_timing(self, lease: Duration, renew_every: Duration) -> Election {
        Election { lease, renew_every, ..self }
    }

    pub fn node_id(&self) -> &str {
        &self.node_id
    }

    /// Waits until this service holds the engine's term, and returns its epoch: at once on
    /// SQLite, and when nobody holds it (a new database, or its holder released it), else once the holder's
    /// renewals have stopped for the lease's length. A database that cannot be read is waited
    /// for, and what was watched before it went away does not count.
    pub async fn acquire(&self) -> Result<i64, StoreError> {
        if self.db.backend() == Backend::Sqlite {
            return self.db.take_engine_epoch(&self.node_id, self.clock.now().timestamp_millis()).await;
        }
        // The term last seen, its renewals then, and since when it has not moved.
        let mut watched: Option<(i64, i64, tokio::time::Instant)> = None;
        let mut told = false;
        let mut lock = self.lock.lock().await;
        loop {
            match self.db.engine_lease().await {
                Ok(lease) => {
                    let unchanged = watched.filter(|(epoch, seq, _)| *epoch == lease.epoch && *seq == lease.renew_seq);
                    let quiet = unchanged.map(|(_, _, since)| since.elapsed());
                    // The holder's lock free while its renewals stand still: its session is gone.
                    let mut free = false;
                    if let Some(lock) = lock.as_mut() {
                        if lease.node_id.is_some() && quiet.is_some() {
                            free = lock.try_take().await.unwrap_or(false);
                        } else {
                            lock.release().await;
                        }
                    }
                    let stale =
                        quiet.is_some_and(|quiet| quiet >= self.lease || (free && quiet >= 2 * self.renew_every));
                    if lease.node_id.is_none() || stale {
                        let now = self.clock.now().timestamp_millis();
                        if let Some(epoch) = self.db.take_engine_term_after(lease.epoch, &self.node_id, now).await? {
                            if stale {
                                tracing::warn!(
                                    epoch,
                                    previous = lease.node_id.as_deref().unwrap_or("-"),
                                    "the engine's term went unrenewed for {:?}{}: taken over",
                                    quiet.unwrap_or_default(),
                                    if free { " and its holder's session is gone" } else { "" }
                                );
                            }
                            if let Some(lock) = lock.as_mut() {
                                let _ = lock.try_take().await;
                            }
                            return Ok(epoch);
                        }
                        if let Some(lock) = lock.as_mut() {
                            lock.release().await;
                        }
                        watched = None;
                    } else if unchanged.is_none() {
                        if !told {
                            tracing::info!(
                                holder = lease.node_id.as_deref().unwrap_or("-"),
                                epoch = lease.epoch,
                                "another service runs the trading engine: waiting to take its term over"
                            );
                            told = true;
                        }
                        watched = Some((lease.epoch, lease.renew_seq, tokio::time::Instant::now()));
                    }
                }
                Err(e) if e.is_unavailable() => watched = None,
                Err(e) => return Err(e),
            }
            tokio::time::sleep(self.renew_every).await;
        }
    }

    /// Renews term `epoch` until it is no longer this service's (another took it over); returns
    /// then (at once on SQLite, where nobody waits to take it over). A renewal the database cannot take is tried again at the next period: the term
    /// may be taken over meanwhile, which the fenced writes and the engine's own check see.
    pub async fn hold(&self, epoch: i64) {
        if self.db.backend() == Backend::Sqlite {
            return;
        }
        let mut failing = false;
        loop {
            tokio::time::sleep(self.renew_every).await;
            let now = self.clock.now().timestamp_millis();
            match self.db.renew_engine_term(epoch, &self.node_id, now).await {
                Ok(true) => {
                    self.keep_lock().await;
                    if std::mem::take(&mut failing) {
                        tracing::info!(epoch, "the engine's term is renewed again");
                    }
                }
                Ok(false) => {
                    tracing::error!(epoch, "this service's term as the engine's holder was taken over");
                    return;
                }
                Err(e) => {
                    if !std::mem::replace(&mut failing, true) {
                        tracing::warn!(epoch, error = %e, "the engine's term cannot be renewed: tried again every {:?}", self.renew_every);
                    }
                }
            }
        }
    }

    /// Keeps the holder's advisory lock: takes it when it is not held (it was still held by a
    /// predecessor that was paused, or its connection failed and was dropped with it).
    async fn keep_lock(&self) {
        let mut lock = self.lock.lock().await;
        if let Some(lock) = lock.as_mut() {
            if !lock.still_held().await {
                let _ = lock.try_take().await;
            }
        }
    }

    /// Whether this service holds the advisory lock (PostgreSQL; health and tests).
    pub async fn holds_lock(&self) -> bool {
        self.lock.lock().await.as_ref().is_some_and(LeaderLock::held)
    }

    /// Gives term `epoch` up (the service stops, its engine stopped): a waiting service takes
    /// the next one at once.
    pub async fn release(&self, epoch: i64) {
        if let Err(e) = self.db.release_engine_term(epoch, &self.node_id).await {
            tracing::warn!(epoch, error = %e, "the engine's term could not be released: another service takes it after the lease");
        }
        if let Some(lock) = self.lock.lock().await.as_mut() {
            lock.release().await;
        }
    }
}
