//! Backtest runs: the request as given, status and progress, and the result once completed (JSON
//! text: what `GET /api/backtests/{id}` returns is stored, so a restart changes nothing of it).

use crate::db::{Database, StoreError};
use crate::jobs::{JobStatus, Lease};
use async_trait::async_trait;
use sqlx::any::AnyRow;
use sqlx::Row;

#[derive(Clone, Debug, PartialEq)]
pub struct BacktestRecord {
    pub backtest_id: String,
    pub strategy_id: String,
    pub symbol: String,
    pub status: JobStatus,
    pub progress: f64,
    /// The normalised request (JSON).
    pub request: String,
    /// The result (JSON), once `COMPLETED`.
    pub result: Option<String>,
    pub error: Option<String>,
    pub requested_by: String,
    pub created_at: i64,
    pub started_at: Option<i64>,
    pub finished_at: Option<i64>,
}

#[async_trait]
pub trait BacktestRepository: Send + Sync {
    async fn insert_backtest(&self, run: &BacktestRecord) -> Result<(), StoreError>;
    /// Saves status, progress, result, error and times, whoever holds the run.
    async fn update_backtest(&self, run: &BacktestRecord) -> Result<(), StoreError>;
    /// Saves status, progress, result, error and times and moves the lease, only while the
    /// run is `RUNNING` under `lease.owner`; false when they no longer hold it.
    async fn update_leased_backtest(&self, run: &BacktestRecord, lease: &Lease) -> Result<bool, StoreError>;
    async fn backtest(&self, id: &str) -> Result<Option<BacktestRecord>, StoreError>;
    /// Runs newest first, with their results.
    async fn backtests(&self, limit: u32) -> Result<Vec<BacktestRecord>, StoreError>;
    /// Runs in a status, oldest first, without their results.
    async fn backtests_in(&self, status: JobStatus) -> Result<Vec<BacktestRecord>, StoreError>;
}

const LIST_COLUMNS: &str = "backtest_id, strategy_id, symbol, status, progress, request, error, requested_by, \
    created_at, started_at, finished_at";

fn record(r: &AnyRow, with_result: bool) -> Result<BacktestRecord, sqlx::Error> {
    Ok(BacktestRecord {
        backtest_id: r.try_get("backtest_id")?,
        strategy_id: r.try_get("strategy_id")?,
        symbol: r.try_get("symbol")?,
        status: JobStatus::from_row(r, "status")?,
        progress: r.try_get("progress")?,
        request: r.try_get("request")?,
        result: if with_result { r.try_get("result")? } else { None },
        error: r.try_get("error")?,
        requested_by: r.try_get("requested_by")?,
        created_at: r.try_get("created_at")?,
        started_at: r.try_get("started_at")?,
        finished_at: r.try_get("finished_at")?,
    })
}

#[async_trait]
impl BacktestRepository for Database {
    async fn insert_backtest(&self, b: &BacktestRecord) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO backtests (backtest_id, strategy_id, symbol, status, progress, request, result, error, \
             requested_by, created_at, started_at, finished_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)",
        )
        .bind(&b.backtest_id)
        .bind(&b.strategy_id)
        .bind(&b.symbol)
        .bind(b.status.as_str())
        .bind(b.progress)
        .bind(&b.request)
        .bind(&b.result)
        .bind(&b.error)
        .bind(&b.requested_by)
        .bind(b.created_at)
        .bind(b.started_at)
        .bind(b.finished_at)
        .execute(self.pool()?)
        .await?;
        Ok(())
    }

    async fn update_backtest(&self, b: &BacktestRecord) -> Result<(), StoreError> {
        sqlx::query(
            "UPDATE backtests SET status = $1, progress = $2, result = $3, error = $4, started_at = $5, \
             finished_at = $6 WHERE backtest_id = $7",
        )
        .bind(b.status.as_str())
        .bind(b.progress)
        .bind(&b.result)
        .bind(&b.error)
        .bind(b.started_at)
        .bind(b.finished_at)
        .bind(&b.backtest_id)
        .execute(self.pool()?)
        .await?;
        Ok(())
    }

    async fn update_leased_backtest(&self, b: &BacktestRecord, lease: &Lease) -> Result<bool, StoreError> {
        let done = sqlx::query(
            "UPDATE backtests SET status = $1, progress = $2, result = $3, error = $4, started_at = $5, \
             finished_at = $6, lease_expires_at = $7 WHERE backtest_id = $8 AND status = 'RUNNING' AND lease_owner = $9",
        )
        .bind(b.status.as_str())
        .bind(b.progress)
        .bind(&b.result)
        .bind(&b.error)
        .bind(b.started_at)
        .bind(b.finished_at)
        .bind(lease.expires_at)
        .bind(&b.backtest_id)
        .bind(&lease.owner)
        .execute(self.pool()?)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn backtest(&self, id: &str) -> Result<Option<BacktestRecord>, StoreError> {
        let row = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {LIST_COLUMNS}, result FROM backtests WHERE backtest_id = $1"
        )))
        .bind(id)
        .fetch_optional(self.pool()?)
        .await?;
        Ok(row.as_ref().map(|r| record(r, true)).transpose()?)
    }

    async fn backtests(&self, limit: u32) -> Result<Vec<BacktestRecord>, StoreError> {
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {LIST_COLUMNS}, result FROM backtests ORDER BY created_at DESC, backtest_id DESC LIMIT $1"
        )))
        .bind(i64::from(limit))
        .fetch_all(self.pool()?)
        .await?;
        Ok(rows.iter().map(|r| record(r, true)).collect::<Result<_, _>>()?)
    }

    async fn backtests_in(&self, status: JobStatus) -> Result<Vec<BacktestRecord>, StoreError> {
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {LIST_COLUMNS} FROM backtests WHERE status = $1 ORDER BY created_at, backtest_id"
        )))
        .bind(status.as_str())
        .fetch_all(self.pool()?)
        .await?;
        Ok(rows.iter().map(|r| record(r, false)).collect::<Result<_, _>>()?)
    }
}
