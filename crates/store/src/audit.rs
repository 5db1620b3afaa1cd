//! The audit log: one row per sensitive action or refused attempt, newest first. Refusals
//! before identification are stored as one row per source and minute whose count is brought up
//! to date in place ([`AuditRepository::update_audit_request`]); rows older than the retention
//! are pruned in batches ([`AuditRepository::prune_audit`]).

use crate::db::{Database, StoreError};
use async_trait::async_trait;
use sqlx::Row;

/// A row to append.
#[derive(Clone, Debug, PartialEq)]
pub struct AuditEntry {
    /// Market time, epoch ms: the clock of the orders and executions (the simulated market's in
    /// DEMO).
    pub ts: i64,
    /// Wall time, epoch ms, when it was written (retention ages rows by it).
    pub wall_ts: i64,
    pub actor: String,
    pub role: Option<String>,
    pub action: String,
    pub target: String,
    /// The request body as JSON text.
    pub request: String,
    /// `OK` or the error code.
    pub outcome: String,
    pub mode: String,
    pub request_id: String,
}

/// A stored row.
#[derive(Clone, Debug, PartialEq)]
pub struct AuditRecord {
    pub audit_id: i64,
    pub entry: AuditEntry,
}

/// Narrowing of `GET /api/audit`.
#[derive(Clone, Debug, Default)]
pub struct AuditFilter {
    pub action: Option<String>,
    pub actor: Option<String>,
    pub outcome: Option<String>,
    /// Only rows about this target (a symbol, an order id, a setting).
    pub target: Option<String>,
    /// Only rows listed after this one (the cursor: the id of the previous page's last row) —
    /// older by timestamp, or as old and of a lower id.
    pub before_id: Option<i64>,
    pub limit: u32,
}

#[async_trait]
pub trait AuditRepository: Send + Sync {
    async fn append_audit(&self, entry: &AuditEntry) -> Result<i64, StoreError>;
    async fn list_audit(&self, filter: &AuditFilter) -> Result<Vec<AuditRecord>, StoreError>;
    /// Replaces the `request` of one row: an aggregate row's count grows while its minute lasts.
    async fn update_audit_request(&self, audit_id: i64, request: &str) -> Result<(), StoreError>;
    /// Deletes the rows written (wall time) before `before_wall_ts`; returns how many.
    async fn prune_audit(&self, before_wall_ts: i64) -> Result<u64, StoreError>;
    /// Whether a row equal to `entry` is stored (a write that timed out may have landed).
    async fn has_audit_row(&self, _entry: &AuditEntry) -> Result<bool, StoreError> {
        Ok(false)
    }
    /// Writes rows an implementation holds back (during an outage); nothing by default.
    async fn flush_held(&self) {}
    /// Rows held back, not yet written (0 by default).
    fn held_rows(&self) -> usize {
        0
    }
}

/// Rows deleted per statement while pruning, so one prune never holds a long write
/// transaction (nor grows SQLite's WAL by the whole backlog at once).
const PRUNE_BATCH: i64 = 5_000;

impl Database {
    /// Runs `delete` (`$1`: the cut-off, `$2`: the batch size; a `DELETE … WHERE id IN (SELECT …
    /// LIMIT $2)`, as both backends accept and neither accepts `DELETE … LIMIT`) until a batch
    /// deletes fewer than [`PRUNE_BATCH`] rows; how many it deleted.
    pub(crate) async fn delete_in_batches(&self, delete: &'static str, before: i64) -> Result<u64, StoreError> {
        let mut deleted = 0;
        loop {
            let batch = sqlx::query(delete).bind(before).bind(PRUNE_BATCH).execute(self.pool()?).await?.rows_affected();
            deleted += batch;
            if batch < PRUNE_BATCH as u64 {
                return Ok(deleted);
            }
        }
    }
}

#[async_trait]
impl AuditRepository for Database {
    async fn has_audit_row(&self, e: &AuditEntry) -> Result<bool, StoreError> {
        let row = sqlx::query(
            "SELECT audit_id FROM audit_log WHERE request_id = $1 AND action = $2 AND wall_ts = $3 AND actor = $4 \
             AND target = $5 AND outcome = $6 LIMIT 1",
        )
        .bind(&e.request_id)
        .bind(&e.action)
        .bind(e.wall_ts)
        .bind(&e.actor)
        .bind(&e.target)
        .bind(&e.outcome)
        .fetch_optional(self.pool()?)
        .await?;
        Ok(row.is_some())
    }

    async fn append_audit(&self, e: &AuditEntry) -> Result<i64, StoreError> {
        let row = sqlx::query(
            "INSERT INTO audit_log (ts, actor, role, action, target, request, outcome, mode, request_id, wall_ts) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) RETURNING audit_id",
        )
        .bind(e.ts)
        .bind(&e.actor)
        .bind(&e.role)
        .bind(&e.action)
        .bind(&e.target)
        .bind(&e.request)
        .bind(&e.outcome)
        .bind(&e.mode)
        .bind(&e.request_id)
        .bind(e.wall_ts)
        .fetch_one(self.pool()?)
        .await?;
        Ok(row.try_get("audit_id")?)
    }

    async fn update_audit_request(&self, audit_id: i64, request: &str) -> Result<(), StoreError> {
        sqlx::query("UPDATE audit_log SET request = $1 WHERE audit_id = $2")
            .bind(request)
            .bind(audit_id)
            .execute(self.pool()?)
            .await?;
        Ok(())
    }

    async fn prune_audit(&self, before_wall_ts: i64) -> Result<u64, StoreError> {
        self.delete_in_batches(
            "DELETE FROM audit_log WHERE audit_id IN \
             (SELECT audit_id FROM audit_log WHERE wall_ts < $1 ORDER BY audit_id LIMIT $2)",
            before_wall_ts,
        )
        .await
    }

    async fn list_audit(&self, f: &AuditFilter) -> Result<Vec<AuditRecord>, StoreError> {
        // Optional filters are written as `($n IS NULL OR col = $n)` so the SQL stays static
        // and runs unchanged on both backends. Newest first by timestamp, then id: a row
        // written late (held in the outbox, an aggregated refusal) takes its place in time. The
        // cursor is the id of the last row listed; the page after it starts below that row's
        // (timestamp, id).
        let rows = sqlx::query(
            "SELECT audit_id, ts, wall_ts, actor, role, action, target, request, outcome, mode, request_id \
             FROM audit_log \
             WHERE ($1 IS NULL OR action = $1) AND ($2 IS NULL OR actor = $2) \
               AND ($3 IS NULL OR outcome = $3) \
               AND ($4 IS NULL OR (ts, audit_id) < ((SELECT c.ts FROM audit_log c WHERE c.audit_id = $4), $4)) \
               AND ($6 IS NULL OR target = $6) \
             ORDER BY ts DESC, audit_id DESC LIMIT $5",
        )
        .bind(&f.action)
        .bind(&f.actor)
        .bind(&f.outcome)
        .bind(f.before_id)
        .bind(i64::from(f.limit))
        .bind(&f.target)
        .fetch_all(self.pool()?)
        .await?;
        rows.iter()
            .map(|row| {
                Ok(AuditRecord {
                    audit_id: row.try_get("audit_id")?,
                    entry: AuditEntry {
                        ts: row.try_get("ts")?,
                        wall_ts: row.try_get::<Option<i64>, _>("wall_ts")?.unwrap_or(row.try_get("ts")?),
                        actor: row.try_get("actor")?,
                        role: row.try_get("role")?,
                        action: row.try_get("action")?,
                        target: row.try_get("target")?,
                        request: row.try_get("request")?,
                        outcome: row.try_get("outcome")?,
                        mode: row.try_get("mode")?,
                        request_id: row.try_get("request_id")?,
                    },
                })
            })
            .collect::<Result<_, sqlx::Error>>()
            .map_err(StoreError::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_databases::{databases, drop_postgres};

    fn entry(ts: i64, action: &str) -> AuditEntry {
        AuditEntry {
            ts,
            wall_ts: ts,
            actor: "ops".into(),
            role: Some("operator".into()),
            action: action.into(),
            target: "AAPL".into(),
            request: "{}".into(),
            outcome: "OK".into(),
            mode: "PAPER".into(),
            request_id: format!("r-{ts}-{action}"),
        }
    }

    /// Rows written late with earlier stamps (held in the outbox, aggregated refusals) are listed
    /// in their place in time, and a page's cursor continues below its last row.
    #[tokio::test]
    async fn the_audit_log_is_listed_newest_first_by_timestamp_and_pages_follow_it() {
        for (db, _dir, admin) in databases().await {
            // Written in this order; stamped 18, 30, 29 (late), 18 (late), 31.
            for (ts, action) in [(18, "a"), (30, "b"), (29, "c"), (18, "d"), (31, "e")] {
                db.append_audit(&entry(ts, action)).await.unwrap();
            }
            let list = |before_id, limit| AuditFilter { before_id, limit, ..AuditFilter::default() };
            let actions = |rows: &[AuditRecord]| rows.iter().map(|r| r.entry.action.clone()).collect::<Vec<_>>();
            let all = db.list_audit(&list(None, 10)).await.unwrap();
            assert_eq!(actions(&all), ["e", "b", "c", "d", "a"], "{:?}", db.backend());
            let first = db.list_audit(&list(None, 2)).await.unwrap();
            assert_eq!(actions(&first), ["e", "b"]);
            let second = db.list_audit(&list(Some(first[1].audit_id), 2)).await.unwrap();
            assert_eq!(actions(&second), ["c", "d"]);
            let third = db.list_audit(&list(Some(second[1].audit_id), 2)).await.unwrap();
            assert_eq!(actions(&third), ["a"], "rows of one stamp continue by id");
            db.close().await;
            drop_postgres(admin).await;
        }
    }
}
