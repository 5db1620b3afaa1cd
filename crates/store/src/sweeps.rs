//! Parameter sweeps: the sweep as requested, and its parts — durable jobs of kind
//! [`crate::jobs::JobKind::Sweep`], each a share of the combinations, with their results once completed (JSON
//! text). A sweep's status, progress and results are read from its parts.

use crate::db::{Database, StoreError};
use crate::jobs::{JobStatus, Lease};
use async_trait::async_trait;
use sqlx::any::AnyRow;
use sqlx::Row;

#[derive(Clone, Debug, PartialEq)]
pub struct SweepRecord {
    pub sweep_id: String,
    pub strategy_id: String,
    pub symbol: String,
    /// The normalised request (JSON).
    pub request: String,
    pub combinations: i64,
    pub requested_by: String,
    pub created_at: i64,
}

#[derive(Clone, Debug, PartialEq)]
pub struct SweepPart {
    pub part_id: String,
    pub sweep_id: String,
    pub status: JobStatus,
    pub progress: f64,
    /// The combinations it runs (JSON: an array of parameter objects).
    pub combos: String,
    /// Their metrics, in the same order (JSON), once `COMPLETED`.
    pub results: Option<String>,
    pub error: Option<String>,
    pub created_at: i64,
    pub started_at: Option<i64>,
    pub finished_at: Option<i64>,
}

#[async_trait]
pub trait SweepRepository: Send + Sync {
    /// Stores a sweep and its parts (queued) at once.
    async fn insert_sweep(&self, sweep: &SweepRecord, parts: &[SweepPart]) -> Result<(), StoreError>;
    async fn sweep(&self, id: &str) -> Result<Option<SweepRecord>, StoreError>;
    /// Sweeps, newest first.
    async fn sweeps(&self, limit: u32) -> Result<Vec<SweepRecord>, StoreError>;
    /// The parts of a sweep, oldest first, with their results when `with_results` (a list
    /// needs their status and progress only).
    async fn sweep_parts(&self, sweep_id: &str, with_results: bool) -> Result<Vec<SweepPart>, StoreError>;
    async fn sweep_part(&self, part_id: &str) -> Result<Option<SweepPart>, StoreError>;
    /// Saves status, progress, results, error and times and moves the lease, only while the part
    /// is `RUNNING` under `lease.owner`; false when they no longer hold it.
    async fn update_leased_part(&self, part: &SweepPart, lease: &Lease) -> Result<bool, StoreError>;
}

const PART_COLUMNS: &str =
    "part_id, sweep_id, status, progress, combos, results, error, created_at, started_at, finished_at";
const SWEEP_COLUMNS: &str = "sweep_id, strategy_id, symbol, request, combinations, requested_by, created_at";

fn part(r: &AnyRow) -> Result<SweepPart, sqlx::Error> {
    Ok(SweepPart {
        part_id: r.try_get("part_id")?,
        sweep_id: r.try_get("sweep_id")?,
        status: JobStatus::from_row(r, "status")?,
        progress: r.try_get("progress")?,
        combos: r.try_get("combos")?,
        results: r.try_get("results")?,
        error: r.try_get("error")?,
        created_at: r.try_get("created_at")?,
        started_at: r.try_get("started_at")?,
        finished_at: r.try_get("finished_at")?,
    })
}

fn sweep(r: &AnyRow) -> Result<SweepRecord, sqlx::Error> {
    Ok(SweepRecord {
        sweep_id: r.try_get("sweep_id")?,
        strategy_id: r.try_get("strategy_id")?,
        symbol: r.try_get("symbol")?,
        request: r.try_get("request")?,
        combinations: r.try_get("combinations")?,
        requested_by: r.try_get("requested_by")?,
        created_at: r.try_get("created_at")?,
    })
}

#[async_trait]
impl SweepRepository for Database {
    async fn insert_sweep(&self, s: &SweepRecord, parts: &[SweepPart]) -> Result<(), StoreError> {
        let mut tx = self.begin().await?;
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "INSERT INTO sweeps ({SWEEP_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7)"
        )))
        .bind(&s.sweep_id)
        .bind(&s.strategy_id)
        .bind(&s.symbol)
        .bind(&s.request)
        .bind(s.combinations)
        .bind(&s.requested_by)
        .bind(s.created_at)
        .execute(&mut *tx)
        .await?;
        for p in parts {
            sqlx::query(sqlx::AssertSqlSafe(format!(
                "INSERT INTO sweep_parts ({PART_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)"
            )))
            .bind(&p.part_id)
            .bind(&p.sweep_id)
            .bind(p.status.as_str())
            .bind(p.progress)
            .bind(&p.combos)
            .bind(&p.results)
            .bind(&p.error)
            .bind(p.created_at)
            .bind(p.started_at)
            .bind(p.finished_at)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    async fn sweep(&self, id: &str) -> Result<Option<SweepRecord>, StoreError> {
        let row = sqlx::query(sqlx::AssertSqlSafe(format!("SELECT {SWEEP_COLUMNS} FROM sweeps WHERE sweep_id = $1")))
            .bind(id)
            .fetch_optional(self.pool()?)
            .await?;
        Ok(row.as_ref().map(sweep).transpose()?)
    }

    async fn sweeps(&self, limit: u32) -> Result<Vec<SweepRecord>, StoreError> {
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {SWEEP_COLUMNS} FROM sweeps ORDER BY created_at DESC, sweep_id DESC LIMIT $1"
        )))
        .bind(i64::from(limit))
        .fetch_all(self.pool()?)
        .await?;
        Ok(rows.iter().map(sweep).collect::<Result<_, _>>()?)
    }

    async fn sweep_parts(&self, sweep_id: &str, with_results: bool) -> Result<Vec<SweepPart>, StoreError> {
        let columns = if with_results {
            PART_COLUMNS.to_string()
        } else {
            PART_COLUMNS.replace("results", "CAST(NULL AS TEXT) AS results")
        };
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {columns} FROM sweep_parts WHERE sweep_id = $1 ORDER BY created_at, part_id"
        )))
        .bind(sweep_id)
        .fetch_all(self.pool()?)
        .await?;
        Ok(rows.iter().map(part).collect::<Result<_, _>>()?)
    }

    async fn sweep_part(&self, part_id: &str) -> Result<Option<SweepPart>, StoreError> {
        let row =
            sqlx::query(sqlx::AssertSqlSafe(format!("SELECT {PART_COLUMNS} FROM sweep_parts WHERE part_id = $1")))
                .bind(part_id)
                .fetch_optional(self.pool()?)
                .await?;
        Ok(row.as_ref().map(part).transpose()?)
    }

    async fn update_leased_part(&self, p: &SweepPart, lease: &Lease) -> Result<bool, StoreError> {
        let done = sqlx::query(
            "UPDATE sweep_parts SET status = $1, progress = $2, results = $3, error = $4, started_at = $5, \
             finished_at = $6, lease_expires_at = $7 WHERE part_id = $8 AND status = 'RUNNING' AND lease_owner = $9",
        )
        .bind(p.status.as_str())
        .bind(p.progress)
        .bind(&p.results)
        .bind(&p.error)
        .bind(p.started_at)
        .bind(p.finished_at)
        .bind(lease.expires_at)
        .bind(&p.part_id)
        .bind(&lease.owner)
        .execute(self.pool()?)
        .await?;
        Ok(done.rows_affected() == 1)
    }
}
