//! The cluster's liveness hint for the engine's term: [`LeaderLock`], a PostgreSQL
//! session-level advisory lock held on a connection of its own by the service that holds the
//! term. When that service dies (`kill -9`, a lost machine whose socket is reset) PostgreSQL ends
//! its session and frees the lock at once, so a waiting service learns of the death without
//! waiting out the lease; a service that is only paused (SIGSTOP) keeps its session and its
//! lock, and is taken over after a longer wait. Safety never rests on the lock — a lock freed
//! because a proxy cut the connection does not prove the holder stopped: the holder stops
//! sending when its renewals stop (the server's `cluster::Term`), and every trading write is
//! fenced to its term (`Database::fenced`).

use serde::Serialize;
use sqlx::{AnyConnection, Connection, Row};

use crate::db::{Backend, Database, StoreError};

/// The advisory lock's key: "tradeops" in ASCII.
const KEY: i64 = 0x7472_6164_656f_7073;

/// A connection of its own that may hold the engine's advisory lock. PostgreSQL only: on
/// SQLite there is one service per file and nothing to learn.
pub struct LeaderLock {
    url: String,
    connection: Option<AnyConnection>,
    held: bool,
}

impl LeaderLock {
    /// For `db`'s database; `None` on SQLite. Connects on first use.
    pub fn for_database(db: &Database) -> Option<LeaderLock> {
        (db.backend() == Backend::Postgres).then(|| LeaderLock {
            url: db.url().to_string(),
            connection: None,
            held: false,
        })
    }

    /// Whether this connection holds the lock now (as far as it knows: a connection that failed
    /// is counted as not holding it, since its session, and the lock, are gone).
    pub fn held(&self) -> bool {
        self.held
    }

    /// Takes the lock if it is free (or already ours): whether it is held now. A connection that
    /// fails is dropped, with the lock it held, and opened again at the next call.
    pub async fn try_take(&mut self) -> Result<bool, StoreError> {
        if self.held {
            return Ok(true);
        }
        if self.connection.is_none() {
            self.connection = Some(AnyConnection::connect(&self.url).await?);
        }
        let Some(connection) = self.connection.as_mut() else { unreachable!("connected above") };
        match sqlx::query("SELECT pg_try_advisory_lock($1) AS taken").bind(KEY).fetch_one(&mut *connection).await {
            Ok(row) => {
                self.held = row.try_get::<bool, _>("taken")?;
                Ok(self.held)
            }
            Err(e) => {
                self.lost();
                Err(e.into())
            }
        }
    }

    /// Checks that the connection (and with it the lock) is still alive: false once it failed.
    pub async fn still_held(&mut self) -> bool {
        if !self.held {
            return false;
        }
        let Some(connection) = self.connection.as_mut() else { return false };
        if sqlx::query("SELECT 1").execute(&mut *connection).await.is_err() {
            self.lost();
            return false;
        }
        true
    }

    /// Frees the lock (a waiting service that found it free but did not take the term over).
    pub async fn release(&mut self) {
        if !self.held {
            return;
        }
        self.held = false;
        let Some(connection) = self.connection.as_mut() else { return };
        if sqlx::query("SELECT pg_advisory_unlock($1)").bind(KEY).execute(&mut *connection).await.is_err() {
            // The session is gone, and the lock with it.
            self.connection = None;
        }
    }

    /// Drops the connection, and the lock with it (a check that did not answer in time: its
    /// session's state is unknown, so it is not used again).
    pub fn drop_connection(&mut self) {
        self.lost();
    }

    fn lost(&mut self) {
        self.connection = None;
        self.held = false;
    }
}

/// A process of the cluster as its heartbeats record it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Member {
    pub node_id: String,
    /// `serve` or `worker`.
    pub kind: String,
    pub started_at: i64,
    pub heartbeat_at: i64,
    /// Where a `serve` process answers the other nodes (`None`: a worker).
    pub advertise_url: Option<String>,
}

impl Database {
    /// Records that `node_id` (a process of `kind`, started at `started_at`, answering the
    /// other nodes at `advertise_url`) lives at `now_ms`, and removes members whose last
    /// heartbeat is older than `forget_before_ms`.
    pub async fn heartbeat_member(
        &self,
        node_id: &str,
        kind: &str,
        advertise_url: Option<&str>,
        started_at: i64,
        now_ms: i64,
        forget_before_ms: i64,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO cluster_members (node_id, kind, started_at, heartbeat_at, advertise_url) \
             VALUES ($1, $2, $3, $4, $5) \
             ON CONFLICT (node_id) DO UPDATE SET heartbeat_at = excluded.heartbeat_at, \
             advertise_url = excluded.advertise_url",
        )
        .bind(node_id)
        .bind(kind)
        .bind(started_at)
        .bind(now_ms)
        .bind(advertise_url)
        .execute(self.pool()?)
        .await?;
        sqlx::query("DELETE FROM cluster_members WHERE heartbeat_at < $1")
            .bind(forget_before_ms)
            .execute(self.pool()?)
            .await?;
        Ok(())
    }

    /// The members, by kind and name.
    pub async fn cluster_members(&self) -> Result<Vec<Member>, StoreError> {
        let rows = sqlx::query(
            "SELECT node_id, kind, started_at, heartbeat_at, advertise_url FROM cluster_members ORDER BY kind, node_id",
        )
        .fetch_all(self.pool()?)
        .await?;
        rows.iter()
            .map(|row| {
                Ok(Member {
                    node_id: row.try_get("node_id")?,
                    kind: row.try_get("kind")?,
                    started_at: row.try_get("started_at")?,
                    heartbeat_at: row.try_get("heartbeat_at")?,
                    advertise_url: row.try_get("advertise_url")?,
                })
            })
            .collect()
    }

    /// Removes `node_id` (a process stopping).
    pub async fn leave_cluster(&self, node_id: &str) -> Result<(), StoreError> {
        sqlx::query("DELETE FROM cluster_members WHERE node_id = $1").bind(node_id).execute(self.pool()?).await?;
        Ok(())
    }
}

/// An emergency halt a node accepted while it did not run the engine, not yet applied.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HaltRequest {
    pub request_id: i64,
    pub reason: String,
    pub actor: String,
    /// The node that accepted it, and the request's id there.
    pub node_id: String,
    pub request_ref: String,
    pub requested_at: i64,
}

impl Database {
    /// Stores an emergency halt to be applied by the engine's leader; its id.
    pub async fn request_halt(
        &self,
        reason: &str,
        actor: &str,
        node_id: &str,
        request_ref: &str,
        now_ms: i64,
    ) -> Result<i64, StoreError> {
        let row = sqlx::query(
            "INSERT INTO halt_requests (reason, actor, node_id, request_ref, requested_at) VALUES ($1, $2, $3, $4, $5) \
             RETURNING request_id",
        )
        .bind(reason)
        .bind(actor)
        .bind(node_id)
        .bind(request_ref)
        .bind(now_ms)
        .fetch_one(self.pool()?)
        .await?;
        Ok(row.try_get("request_id")?)
    }

    /// The halt requests not applied yet, oldest first.
    pub async fn pending_halts(&self) -> Result<Vec<HaltRequest>, StoreError> {
        let rows = sqlx::query(
            "SELECT request_id, reason, actor, node_id, request_ref, requested_at FROM halt_requests \
             WHERE applied_at IS NULL ORDER BY request_id",
        )
        .fetch_all(self.pool()?)
        .await?;
        rows.iter()
            .map(|row| {
                Ok(HaltRequest {
                    request_id: row.try_get("request_id")?,
                    reason: row.try_get("reason")?,
                    actor: row.try_get("actor")?,
                    node_id: row.try_get("node_id")?,
                    request_ref: row.try_get("request_ref")?,
                    requested_at: row.try_get("requested_at")?,
                })
            })
            .collect()
    }

    /// Marks the halt requests up to `last` (inclusive) applied by the engine of `epoch`. In the
    /// transaction of a handle fenced to that term ([`Database::fenced`]): an engine whose term
    /// is over cannot mark a halt applied that it may not have applied, so the next leader
    /// still finds it pending.
    pub async fn mark_halts_applied(&self, last: i64, epoch: i64, now_ms: i64) -> Result<(), StoreError> {
        let mut tx = self.begin().await?;
        sqlx::query(
            "UPDATE halt_requests SET applied_epoch = $1, applied_at = $2 WHERE request_id <= $3 AND applied_at IS NULL",
        )
        .bind(epoch)
        .bind(now_ms)
        .bind(last)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    /// Marks halt request `id` applied: the node that accepted it saw the leader apply it.
    pub async fn mark_halt_applied(&self, id: i64, now_ms: i64) -> Result<(), StoreError> {
        sqlx::query("UPDATE halt_requests SET applied_at = $1 WHERE request_id = $2 AND applied_at IS NULL")
            .bind(now_ms)
            .bind(id)
            .execute(self.pool()?)
            .await?;
        Ok(())
    }
}

impl Database {
    /// Stores published events (id, kind, wire text, wall ms); an id already stored is kept.
    pub async fn append_events(&self, events: &[(i64, &str, &str, i64)]) -> Result<(), StoreError> {
        if events.is_empty() {
            return Ok(());
        }
        let mut tx = self.begin().await?;
        for (id, kind, wire, at) in events {
            sqlx::query(
                "INSERT INTO cluster_events (event_id, kind, wire, published_at) VALUES ($1, $2, $3, $4) \
                 ON CONFLICT (event_id) DO NOTHING",
            )
            .bind(*id)
            .bind(*kind)
            .bind(*wire)
            .bind(*at)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// The newest `limit` stored events, oldest first: (id, kind, wire text).
    pub async fn recent_events(&self, limit: i64) -> Result<Vec<(i64, String, String)>, StoreError> {
        let rows = sqlx::query(
            "SELECT event_id, kind, wire FROM (SELECT event_id, kind, wire FROM cluster_events \
             ORDER BY event_id DESC LIMIT $1) AS newest ORDER BY event_id",
        )
        .bind(limit)
        .fetch_all(self.pool()?)
        .await?;
        rows.iter().map(|r| Ok((r.try_get("event_id")?, r.try_get("kind")?, r.try_get("wire")?))).collect()
    }

    /// Deletes the events published before `before_ms`; how many.
    pub async fn prune_events(&self, before_ms: i64) -> Result<u64, StoreError> {
        let done = sqlx::query("DELETE FROM cluster_events WHERE published_at < $1")
            .bind(before_ms)
            .execute(self.pool()?)
            .await?;
        Ok(done.rows_affected())
    }
}

impl Database {
    /// The cluster's shared secret: `candidate` when no node made one yet, else the one made.
    pub async fn cluster_secret(&self, candidate: &str) -> Result<String, StoreError> {
        sqlx::query("INSERT INTO cluster_secret (id, secret) VALUES (1, $1) ON CONFLICT (id) DO NOTHING")
            .bind(candidate)
            .execute(self.pool()?)
            .await?;
        let row = sqlx::query("SELECT secret FROM cluster_secret WHERE id = 1").fetch_one(self.pool()?).await?;
        Ok(row.try_get("secret")?)
    }
}
