//! Historical bars and download jobs (their leases and cancel are [`crate::jobs`]'s).

use crate::db::{Database, StoreError};
use crate::jobs::{JobStatus, Lease};
use async_trait::async_trait;
use sqlx::any::AnyRow;
use sqlx::Row;
use tradeops_core::market::{Bar, HaltWindow, Price};
use tradeops_core::time::{from_epoch_ms, to_epoch_ms};
use tradeops_core::Symbol;

/// A download job as stored.
#[derive(Clone, Debug, PartialEq)]
pub struct JobRecord {
    pub request_id: String,
    pub symbol: String,
    /// `1m` or `1d`.
    pub timeframe: String,
    pub start: i64,
    pub end: i64,
    pub status: JobStatus,
    pub progress: f64,
    pub bars: i64,
    pub error: Option<String>,
    pub requested_by: String,
    pub created_at: i64,
    pub started_at: Option<i64>,
    pub finished_at: Option<i64>,
}

#[async_trait]
pub trait DataRepository: Send + Sync {
    /// Stores bars (a bar already stored for the same symbol, timeframe and start is replaced),
    /// all in one transaction.
    async fn save_bars(&self, symbol: &Symbol, timeframe: &str, bars: &[Bar], source: &str) -> Result<(), StoreError>;
    /// Stores halts of `symbol` (one already stored with the same start is replaced), in one
    /// transaction.
    async fn save_halts(&self, symbol: &Symbol, halts: &[HaltWindow], source: &str) -> Result<(), StoreError>;
    /// The stored halts of `symbol` that overlap `[start, end)`, oldest first.
    async fn halts(&self, symbol: &Symbol, start: i64, end: i64) -> Result<Vec<HaltWindow>, StoreError>;
    /// Bars with `start` in `[start, end)`, oldest first.
    async fn bars(&self, symbol: &Symbol, timeframe: &str, start: i64, end: i64) -> Result<Vec<Bar>, StoreError>;
    /// Whether any bar has `start` in `[start, end)`.
    async fn has_bars(&self, symbol: &Symbol, timeframe: &str, start: i64, end: i64) -> Result<bool, StoreError>;
    /// The symbols with a bar of `timeframe` starting in `[start, end)`, alphabetically.
    async fn bar_symbols(&self, timeframe: &str, start: i64, end: i64) -> Result<Vec<String>, StoreError>;
    async fn insert_job(&self, job: &JobRecord) -> Result<(), StoreError>;
    /// Inserts a job already `RUNNING` under `lease` (a download run at once, not queued).
    async fn insert_leased_job(&self, job: &JobRecord, lease: &Lease) -> Result<(), StoreError>;
    /// Saves status, progress, bars, error and times and moves the lease, only while the job
    /// is `RUNNING` under `lease.owner`; false when they no longer hold it.
    async fn update_leased_job(&self, job: &JobRecord, lease: &Lease) -> Result<bool, StoreError>;
    async fn job(&self, request_id: &str) -> Result<Option<JobRecord>, StoreError>;
    /// Jobs newest first.
    async fn jobs(&self, limit: u32) -> Result<Vec<JobRecord>, StoreError>;
    /// Jobs in a status, oldest first.
    async fn jobs_in(&self, status: JobStatus) -> Result<Vec<JobRecord>, StoreError>;
    /// The `[start, end)` ranges of the completed downloads of a symbol and timeframe that
    /// overlap `[start, end)`: what the data broker was asked for, bars or not.
    async fn downloaded_ranges(
        &self,
        symbol: &Symbol,
        timeframe: &str,
        start: i64,
        end: i64,
    ) -> Result<Vec<(i64, i64)>, StoreError>;
}

fn job_row(r: &AnyRow) -> Result<JobRecord, sqlx::Error> {
    Ok(JobRecord {
        request_id: r.try_get("request_id")?,
        symbol: r.try_get("symbol")?,
        timeframe: r.try_get("timeframe")?,
        start: r.try_get("start")?,
        end: r.try_get("finish")?,
        status: JobStatus::from_row(r, "status")?,
        progress: r.try_get("progress")?,
        bars: r.try_get("bars")?,
        error: r.try_get("error")?,
        requested_by: r.try_get("requested_by")?,
        created_at: r.try_get("created_at")?,
        started_at: r.try_get("started_at")?,
        finished_at: r.try_get("finished_at")?,
    })
}

async fn insert_job(db: &Database, j: &JobRecord, lease: Option<&Lease>) -> Result<(), StoreError> {
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "INSERT INTO download_jobs ({JOB_COLUMNS}, lease_owner, lease_expires_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)"
    )))
    .bind(&j.request_id)
    .bind(&j.symbol)
    .bind(&j.timeframe)
    .bind(j.start)
    .bind(j.end)
    .bind(j.status.as_str())
    .bind(j.progress)
    .bind(j.bars)
    .bind(&j.error)
    .bind(&j.requested_by)
    .bind(j.created_at)
    .bind(j.started_at)
    .bind(j.finished_at)
    .bind(lease.map(|l| l.owner.clone()))
    .bind(lease.and_then(|l| l.expires_at))
    .execute(db.pool()?)
    .await?;
    Ok(())
}

const JOB_COLUMNS: &str = "request_id, symbol, timeframe, start, finish, status, progress, bars, error, requested_by, \
    created_at, started_at, finished_at";

#[async_trait]
impl DataRepository for Database {
    async fn save_bars(&self, symbol: &Symbol, timeframe: &str, bars: &[Bar], source: &str) -> Result<(), StoreError> {
        let mut tx = self.begin().await?;
        for b in bars {
            sqlx::query(
                "INSERT INTO bars (symbol, timeframe, start, open, high, low, close, volume, source) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT (symbol, timeframe, start) DO UPDATE SET \
                 open = $4, high = $5, low = $6, close = $7, volume = $8, source = $9",
            )
            .bind(symbol.as_str())
            .bind(timeframe)
            .bind(to_epoch_ms(&b.start))
            .bind(b.open.0)
            .bind(b.high.0)
            .bind(b.low.0)
            .bind(b.close.0)
            .bind(b.volume as i64)
            .bind(source)
            .execute(&mut *tx)
            .await?;
        }
        if !bars.is_empty() {
            // A new version of the series, with its bars: every node's cached reads of it end.
            sqlx::query(
                "INSERT INTO bar_series (symbol, timeframe, version) VALUES ($1, $2, 1) \
                 ON CONFLICT (symbol, timeframe) DO UPDATE SET version = bar_series.version + 1",
            )
            .bind(symbol.as_str())
            .bind(timeframe)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    async fn save_halts(&self, symbol: &Symbol, halts: &[HaltWindow], source: &str) -> Result<(), StoreError> {
        let mut tx = self.begin().await?;
        for h in halts {
            sqlx::query(
                "INSERT INTO halts (symbol, start, finish, reason_code, reason, source) VALUES ($1, $2, $3, $4, $5, $6) \
                 ON CONFLICT (symbol, start) DO UPDATE SET finish = $3, reason_code = $4, reason = $5, source = $6",
            )
            .bind(symbol.as_str())
            .bind(to_epoch_ms(&h.start))
            .bind(to_epoch_ms(&h.end))
            .bind(&*h.halt.reason_code)
            .bind(&*h.halt.reason)
            .bind(source)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    async fn halts(&self, symbol: &Symbol, start: i64, end: i64) -> Result<Vec<HaltWindow>, StoreError> {
        let rows = sqlx::query(
            "SELECT start, finish, reason_code, reason FROM halts WHERE symbol = $1 AND finish > $2 AND start < $3 \
             ORDER BY start",
        )
        .bind(symbol.as_str())
        .bind(start)
        .bind(end)
        .fetch_all(self.pool()?)
        .await?;
        rows.iter()
            .map(|r| {
                let start = from_epoch_ms(r.try_get("start")?);
                let (code, reason): (String, String) = (r.try_get("reason_code")?, r.try_get("reason")?);
                Ok(HaltWindow {
                    start,
                    end: from_epoch_ms(r.try_get("finish")?),
                    halt: tradeops_core::market::SymbolHalt::new(&code, &reason, start),
                })
            })
            .collect::<Result<_, sqlx::Error>>()
            .map_err(StoreError::from)
    }

    async fn bars(&self, symbol: &Symbol, timeframe: &str, start: i64, end: i64) -> Result<Vec<Bar>, StoreError> {
        // The series' version first, then its bars (see `bars_cache`): a cached read at this
        // version is what the rows below would give.
        let version: i64 = sqlx::query_scalar("SELECT version FROM bar_series WHERE symbol = $1 AND timeframe = $2")
            .bind(symbol.as_str())
            .bind(timeframe)
            .fetch_optional(self.pool()?)
            .await?
            .unwrap_or(0);
        if let Some(bars) = self.bars_cache.get(symbol.as_str(), timeframe, start, end, version) {
            return Ok(bars.to_vec());
        }
        let rows = sqlx::query(
            "SELECT start, open, high, low, close, volume FROM bars WHERE symbol = $1 AND timeframe = $2 \
             AND start >= $3 AND start < $4 ORDER BY start",
        )
        .bind(symbol.as_str())
        .bind(timeframe)
        .bind(start)
        .bind(end)
        .fetch_all(self.pool()?)
        .await?;
        rows.iter()
            .map(|r| {
                Ok(Bar {
                    start: from_epoch_ms(r.try_get("start")?),
                    open: Price(r.try_get("open")?),
                    high: Price(r.try_get("high")?),
                    low: Price(r.try_get("low")?),
                    close: Price(r.try_get("close")?),
                    volume: r.try_get::<i64, _>("volume")? as u64,
                })
            })
            .collect::<Result<Vec<Bar>, sqlx::Error>>()
            .map_err(StoreError::from)
            .inspect(|bars| self.bars_cache.put(symbol.as_str(), timeframe, start, end, version, bars))
    }

    async fn has_bars(&self, symbol: &Symbol, timeframe: &str, start: i64, end: i64) -> Result<bool, StoreError> {
        let row = sqlx::query(
            "SELECT start FROM bars WHERE symbol = $1 AND timeframe = $2 AND start >= $3 AND start < $4 LIMIT 1",
        )
        .bind(symbol.as_str())
        .bind(timeframe)
        .bind(start)
        .bind(end)
        .fetch_optional(self.pool()?)
        .await?;
        Ok(row.is_some())
    }

    async fn bar_symbols(&self, timeframe: &str, start: i64, end: i64) -> Result<Vec<String>, StoreError> {
        let rows = sqlx::query(
            "SELECT DISTINCT symbol FROM bars WHERE timeframe = $1 AND start >= $2 AND start < $3 ORDER BY symbol",
        )
        .bind(timeframe)
        .bind(start)
        .bind(end)
        .fetch_all(self.pool()?)
        .await?;
        rows.iter().map(|r| r.try_get("symbol")).collect::<Result<_, sqlx::Error>>().map_err(StoreError::from)
    }

    async fn insert_job(&self, j: &JobRecord) -> Result<(), StoreError> {
        insert_job(self, j, None).await
    }

    async fn insert_leased_job(&self, j: &JobRecord, lease: &Lease) -> Result<(), StoreError> {
        insert_job(self, j, Some(lease)).await
    }

    async fn update_leased_job(&self, j: &JobRecord, lease: &Lease) -> Result<bool, StoreError> {
        let done = sqlx::query(
            "UPDATE download_jobs SET status = $1, progress = $2, bars = $3, error = $4, started_at = $5, \
             finished_at = $6, lease_expires_at = $7 WHERE request_id = $8 AND status = 'RUNNING' AND lease_owner = $9",
        )
        .bind(j.status.as_str())
        .bind(j.progress)
        .bind(j.bars)
        .bind(&j.error)
        .bind(j.started_at)
        .bind(j.finished_at)
        .bind(lease.expires_at)
        .bind(&j.request_id)
        .bind(&lease.owner)
        .execute(self.pool()?)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn job(&self, id: &str) -> Result<Option<JobRecord>, StoreError> {
        let row =
            sqlx::query(sqlx::AssertSqlSafe(format!("SELECT {JOB_COLUMNS} FROM download_jobs WHERE request_id = $1")))
                .bind(id)
                .fetch_optional(self.pool()?)
                .await?;
        Ok(row.as_ref().map(job_row).transpose()?)
    }

    async fn jobs(&self, limit: u32) -> Result<Vec<JobRecord>, StoreError> {
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {JOB_COLUMNS} FROM download_jobs ORDER BY created_at DESC, request_id DESC LIMIT $1"
        )))
        .bind(i64::from(limit))
        .fetch_all(self.pool()?)
        .await?;
        Ok(rows.iter().map(job_row).collect::<Result<_, _>>()?)
    }

    async fn jobs_in(&self, status: JobStatus) -> Result<Vec<JobRecord>, StoreError> {
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {JOB_COLUMNS} FROM download_jobs WHERE status = $1 ORDER BY created_at, request_id"
        )))
        .bind(status.as_str())
        .fetch_all(self.pool()?)
        .await?;
        Ok(rows.iter().map(job_row).collect::<Result<_, _>>()?)
    }

    async fn downloaded_ranges(
        &self,
        symbol: &Symbol,
        timeframe: &str,
        start: i64,
        end: i64,
    ) -> Result<Vec<(i64, i64)>, StoreError> {
        let rows = sqlx::query(
            "SELECT start, finish FROM download_jobs WHERE symbol = $1 AND timeframe = $2 \
             AND status = 'COMPLETED' AND start < $4 AND finish > $3 ORDER BY start",
        )
        .bind(symbol.as_str())
        .bind(timeframe)
        .bind(start)
        .bind(end)
        .fetch_all(self.pool()?)
        .await?;
        Ok(rows.iter().map(|r| Ok((r.try_get("start")?, r.try_get("finish")?))).collect::<Result<_, sqlx::Error>>()?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_databases::{databases, drop_postgres};
    use tradeops_core::market::SymbolHalt;

    /// Halts stored with a download come back by the range they overlap, oldest first; storing
    /// one again (a second download of the day) replaces it rather than doubling it.
    #[tokio::test]
    async fn halts_are_stored_and_read_by_the_range_they_overlap() {
        for (db, _dir, admin) in databases().await {
            let symbol = Symbol::parse("ABCD").unwrap();
            let window = |start: i64, end: i64, halt: fn(tradeops_core::Timestamp) -> SymbolHalt| HaltWindow {
                start: from_epoch_ms(start),
                end: from_epoch_ms(end),
                halt: halt(from_epoch_ms(start)),
            };
            let pause = window(60_000, 360_000, SymbolHalt::luld_pause);
            let news = window(900_000, 2_700_000, SymbolHalt::news_pending);
            db.save_halts(&symbol, &[news.clone(), pause.clone()], "simulated").await.unwrap();
            db.save_halts(&symbol, std::slice::from_ref(&pause), "simulated").await.unwrap();
            assert_eq!(db.halts(&symbol, 0, 3_000_000).await.unwrap(), vec![pause.clone(), news.clone()]);
            assert_eq!(db.halts(&symbol, 300_000, 900_000).await.unwrap(), vec![pause], "overlapping the start");
            assert_eq!(db.halts(&symbol, 360_000, 900_000).await.unwrap(), vec![], "ended, not begun");
            assert_eq!(db.halts(&Symbol::parse("WXYZ").unwrap(), 0, 3_000_000).await.unwrap(), vec![]);
            db.close().await;
            drop_postgres(admin).await;
        }
    }

    /// Bars read again come from memory only while no node wrote the series since: a write
    /// through another handle of the same database (another node) is in this node's next read,
    /// as are its own writes; another series' write leaves the read cached.
    #[tokio::test]
    async fn a_read_again_sees_bars_another_node_wrote_since() {
        for (db, _dir, admin) in databases().await {
            let other = Database::open(db.url()).await.unwrap();
            let (abcd, wxyz) = (Symbol::parse("ABCD").unwrap(), Symbol::parse("WXYZ").unwrap());
            let bar = |minute: i64, close: i64| {
                let p = Price(close);
                Bar { start: from_epoch_ms(minute * 60_000), open: p, high: p, low: p, close: p, volume: 10 }
            };
            let closes = |bars: Vec<Bar>| bars.iter().map(|b| b.close.0).collect::<Vec<_>>();
            db.save_bars(&abcd, "1m", &[bar(0, 100), bar(1, 101)], "import").await.unwrap();
            assert_eq!(closes(db.bars(&abcd, "1m", 0, 600_000).await.unwrap()), vec![100, 101]);
            assert_eq!(closes(db.bars(&abcd, "1m", 0, 600_000).await.unwrap()), vec![100, 101], "read again");
            other.save_bars(&abcd, "1m", &[bar(1, 111), bar(2, 102)], "import").await.unwrap();
            assert_eq!(
                closes(db.bars(&abcd, "1m", 0, 600_000).await.unwrap()),
                vec![100, 111, 102],
                "the other node's"
            );
            db.save_bars(&abcd, "1m", &[bar(0, 90)], "import").await.unwrap();
            assert_eq!(closes(db.bars(&abcd, "1m", 0, 600_000).await.unwrap()), vec![90, 111, 102], "its own");
            other.save_bars(&wxyz, "1m", &[bar(0, 5)], "import").await.unwrap();
            other.save_bars(&abcd, "1d", &[bar(0, 7)], "import").await.unwrap();
            assert_eq!(closes(db.bars(&abcd, "1m", 0, 600_000).await.unwrap()), vec![90, 111, 102]);
            assert_eq!(closes(db.bars(&abcd, "1m", 60_000, 120_000).await.unwrap()), vec![111], "another range");
            other.close().await;
            db.close().await;
            drop_postgres(admin).await;
        }
    }
}
