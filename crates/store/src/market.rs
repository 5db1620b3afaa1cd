//! Radar history, the watchlist, symbol blocks and risk violations.

use crate::db::{Database, StoreError};
use async_trait::async_trait;
use sqlx::any::AnyRow;
use sqlx::Row;

/// One stored radar row.
#[derive(Clone, Debug, PartialEq)]
pub struct RadarRowRecord {
    pub captured_at: i64,
    pub rank: i64,
    pub symbol: String,
    /// Decimal text.
    pub price: String,
    pub percentage_gain: f64,
    pub change_1m: Option<f64>,
    pub change_5m: Option<f64>,
    pub volume: i64,
    pub average_volume: i64,
    pub relative_volume: Option<f64>,
    /// `None`: unknown.
    pub float_shares: Option<i64>,
    /// `None`: unknown.
    pub sector: Option<String>,
}

/// A watchlist row.
#[derive(Clone, Debug, PartialEq)]
pub struct WatchRecord {
    pub symbol: String,
    pub source: String,
    pub strategy_id: String,
    pub strategy_version: String,
    pub strategy_status: String,
    pub polling_status: String,
    pub time_added: i64,
    pub time_closed: Option<i64>,
    pub time_completed: Option<i64>,
    pub reason: Option<String>,
}

/// A block of a symbol; active while not lifted and not expired.
#[derive(Clone, Debug, PartialEq)]
pub struct BlockRecord {
    pub block_id: i64,
    pub symbol: String,
    pub block_scope: String,
    pub reason: String,
    pub actor: String,
    pub effective_from: i64,
    pub expires_at: Option<i64>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct ViolationRecord {
    pub violation_id: i64,
    pub ts: i64,
    pub rule: String,
    pub symbol: Option<String>,
    pub client_order_id: Option<String>,
    /// JSON text.
    pub detail: String,
}

#[async_trait]
pub trait MarketRepository: Send + Sync {
    /// Stores the rows of one scan (one `captured_at`, ranked from 1) unless a scan captured then
    /// is already stored: then nothing is written, the stored scan stays the one operators saw,
    /// and `false` is returned. A restart scans again the minute it stopped in.
    async fn insert_radar_scan(&self, rows: &[RadarRowRecord]) -> Result<bool, StoreError>;
    /// Rows of the newest scan at or before `at` (all rows of that scan, by rank).
    async fn radar_scan_at(&self, at: i64) -> Result<Vec<RadarRowRecord>, StoreError>;

    async fn watch_row(&self, symbol: &str) -> Result<Option<WatchRecord>, StoreError>;
    /// Inserts or replaces the row of `record.symbol`.
    async fn put_watch_row(&self, record: &WatchRecord) -> Result<(), StoreError>;
    async fn watch_rows(&self) -> Result<Vec<WatchRecord>, StoreError>;
    /// Rows whose strategy status is not `Closed`.
    async fn count_active_watch_rows(&self) -> Result<i64, StoreError>;

    /// The active block of `symbol` at `now`.
    async fn active_block(&self, symbol: &str, now: i64) -> Result<Option<BlockRecord>, StoreError>;
    async fn active_blocks(&self, now: i64) -> Result<Vec<BlockRecord>, StoreError>;
    async fn insert_block(&self, block: &BlockRecord) -> Result<i64, StoreError>;
    /// Places `block` at `now`, lifting the symbol's active blocks first (by the block's actor,
    /// for `lift_reason`), in one transaction: the symbol is never left with both, nor with
    /// none. Returns the new block's id.
    async fn replace_block(&self, block: &BlockRecord, now: i64, lift_reason: &str) -> Result<i64, StoreError>;
    /// Lifts the active blocks of `symbol`; returns how many.
    async fn lift_blocks(&self, symbol: &str, now: i64, by: &str, reason: &str) -> Result<u64, StoreError>;

    async fn insert_violation(&self, v: &ViolationRecord) -> Result<i64, StoreError>;
    async fn violations(&self, limit: u32) -> Result<Vec<ViolationRecord>, StoreError>;
}

fn radar_row(r: &AnyRow) -> Result<RadarRowRecord, sqlx::Error> {
    Ok(RadarRowRecord {
        captured_at: r.try_get("captured_at")?,
        rank: r.try_get::<i64, _>("rank")?,
        symbol: r.try_get("symbol")?,
        price: r.try_get("price")?,
        percentage_gain: r.try_get("percentage_gain")?,
        change_1m: r.try_get("change_1m")?,
        change_5m: r.try_get("change_5m")?,
        volume: r.try_get("volume")?,
        average_volume: r.try_get("average_volume")?,
        relative_volume: r.try_get("relative_volume")?,
        float_shares: r.try_get("float_shares")?,
        sector: r.try_get("sector")?,
    })
}

fn watch_row(r: &AnyRow) -> Result<WatchRecord, sqlx::Error> {
    Ok(WatchRecord {
        symbol: r.try_get("symbol")?,
        source: r.try_get("source")?,
        strategy_id: r.try_get("strategy_id")?,
        strategy_version: r.try_get("strategy_version")?,
        strategy_status: r.try_get("strategy_status")?,
        polling_status: r.try_get("polling_status")?,
        time_added: r.try_get("time_added")?,
        time_closed: r.try_get("time_closed")?,
        time_completed: r.try_get("time_completed")?,
        reason: r.try_get("reason")?,
    })
}

fn block_row(r: &AnyRow) -> Result<BlockRecord, sqlx::Error> {
    Ok(BlockRecord {
        block_id: r.try_get("block_id")?,
        symbol: r.try_get("symbol")?,
        block_scope: r.try_get("block_scope")?,
        reason: r.try_get("reason")?,
        actor: r.try_get("actor")?,
        effective_from: r.try_get("effective_from")?,
        expires_at: r.try_get("expires_at")?,
    })
}

const WATCH_COLUMNS: &str = "symbol, source, strategy_id, strategy_version, strategy_status, polling_status, \
     time_added, time_closed, time_completed, reason";
const BLOCK_COLUMNS: &str = "block_id, symbol, block_scope, reason, actor, effective_from, expires_at";
const ACTIVE_BLOCK: &str = "lifted_at IS NULL AND effective_from <= $1 AND (expires_at IS NULL OR expires_at > $1)";

#[async_trait]
impl MarketRepository for Database {
    async fn insert_radar_scan(&self, rows: &[RadarRowRecord]) -> Result<bool, StoreError> {
        let mut tx = self.begin().await?;
        for (i, r) in rows.iter().enumerate() {
            // The first row claims the capture: a stored scan of that time holds the same key
            // (captured_at, its top rank), so nothing is inserted and the transaction is dropped.
            // A concurrent writer of the same capture waits on that key, then finds it taken.
            let claim = if i == 0 { " ON CONFLICT (captured_at, rank) DO NOTHING" } else { "" };
            let inserted = sqlx::query(sqlx::AssertSqlSafe(format!(
                "INSERT INTO radar_rows (captured_at, rank, symbol, price, percentage_gain, change_1m, change_5m, volume, \
                 average_volume, relative_volume, float_shares, sector) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12){claim}"
            )))
            .bind(r.captured_at)
            .bind(r.rank)
            .bind(&r.symbol)
            .bind(&r.price)
            .bind(r.percentage_gain)
            .bind(r.change_1m)
            .bind(r.change_5m)
            .bind(r.volume)
            .bind(r.average_volume)
            .bind(r.relative_volume)
            .bind(r.float_shares)
            .bind(&r.sector)
            .execute(&mut *tx)
            .await?;
            if inserted.rows_affected() == 0 {
                return Ok(false);
            }
        }
        tx.commit().await?;
        Ok(!rows.is_empty())
    }

    async fn radar_scan_at(&self, at: i64) -> Result<Vec<RadarRowRecord>, StoreError> {
        let rows = sqlx::query(
            "SELECT * FROM radar_rows WHERE captured_at = (SELECT MAX(captured_at) FROM radar_rows WHERE captured_at <= $1) \
             ORDER BY rank",
        )
        .bind(at)
        .fetch_all(self.pool()?)
        .await?;
        Ok(rows.iter().map(radar_row).collect::<Result<_, _>>()?)
    }

    async fn watch_row(&self, symbol: &str) -> Result<Option<WatchRecord>, StoreError> {
        let row = sqlx::query(sqlx::AssertSqlSafe(format!("SELECT {WATCH_COLUMNS} FROM watchlist WHERE symbol = $1")))
            .bind(symbol)
            .fetch_optional(self.pool()?)
            .await?;
        Ok(row.as_ref().map(watch_row).transpose()?)
    }

    async fn put_watch_row(&self, w: &WatchRecord) -> Result<(), StoreError> {
        // In a transaction of its own, as every write of trading state: a fenced handle checks
        // its engine's term there (`Database::fenced`).
        let mut tx = self.begin().await?;
        sqlx::query(
            "INSERT INTO watchlist (symbol, source, strategy_id, strategy_version, strategy_status, polling_status, \
             time_added, time_closed, time_completed, reason) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) \
             ON CONFLICT (symbol) DO UPDATE SET source = $2, strategy_id = $3, strategy_version = $4, strategy_status = $5, \
             polling_status = $6, time_added = $7, time_closed = $8, time_completed = $9, reason = $10",
        )
        .bind(&w.symbol)
        .bind(&w.source)
        .bind(&w.strategy_id)
        .bind(&w.strategy_version)
        .bind(&w.strategy_status)
        .bind(&w.polling_status)
        .bind(w.time_added)
        .bind(w.time_closed)
        .bind(w.time_completed)
        .bind(&w.reason)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    async fn watch_rows(&self) -> Result<Vec<WatchRecord>, StoreError> {
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {WATCH_COLUMNS} FROM watchlist ORDER BY time_added DESC, symbol"
        )))
        .fetch_all(self.pool()?)
        .await?;
        Ok(rows.iter().map(watch_row).collect::<Result<_, _>>()?)
    }

    async fn count_active_watch_rows(&self) -> Result<i64, StoreError> {
        let row = sqlx::query("SELECT COUNT(*) AS n FROM watchlist WHERE strategy_status <> 'Closed'")
            .fetch_one(self.pool()?)
            .await?;
        Ok(row.try_get("n")?)
    }

    async fn active_block(&self, symbol: &str, now: i64) -> Result<Option<BlockRecord>, StoreError> {
        let row = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {BLOCK_COLUMNS} FROM symbol_blocks WHERE {ACTIVE_BLOCK} AND symbol = $2 ORDER BY block_id DESC LIMIT 1"
        )))
        .bind(now)
        .bind(symbol)
        .fetch_optional(self.pool()?)
        .await?;
        Ok(row.as_ref().map(block_row).transpose()?)
    }

    async fn active_blocks(&self, now: i64) -> Result<Vec<BlockRecord>, StoreError> {
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {BLOCK_COLUMNS} FROM symbol_blocks WHERE {ACTIVE_BLOCK} ORDER BY symbol, block_id"
        )))
        .bind(now)
        .fetch_all(self.pool()?)
        .await?;
        Ok(rows.iter().map(block_row).collect::<Result<_, _>>()?)
    }

    async fn insert_block(&self, b: &BlockRecord) -> Result<i64, StoreError> {
        let mut tx = self.begin().await?;
        let id = insert_block_in(&mut tx, b).await?;
        tx.commit().await?;
        Ok(id)
    }

    async fn replace_block(&self, b: &BlockRecord, now: i64, lift_reason: &str) -> Result<i64, StoreError> {
        let mut tx = self.begin().await?;
        lift_blocks_in(&mut tx, &b.symbol, now, &b.actor, lift_reason).await?;
        let id = insert_block_in(&mut tx, b).await?;
        tx.commit().await?;
        Ok(id)
    }

    async fn lift_blocks(&self, symbol: &str, now: i64, by: &str, reason: &str) -> Result<u64, StoreError> {
        let mut tx = self.begin().await?;
        let lifted = lift_blocks_in(&mut tx, symbol, now, by, reason).await?;
        tx.commit().await?;
        Ok(lifted)
    }

    async fn insert_violation(&self, v: &ViolationRecord) -> Result<i64, StoreError> {
        let mut tx = self.begin().await?;
        let row = sqlx::query(
            "INSERT INTO risk_violations (ts, rule, symbol, client_order_id, detail) VALUES ($1, $2, $3, $4, $5) RETURNING violation_id",
        )
        .bind(v.ts)
        .bind(&v.rule)
        .bind(&v.symbol)
        .bind(&v.client_order_id)
        .bind(&v.detail)
        .fetch_one(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(row.try_get("violation_id")?)
    }

    async fn violations(&self, limit: u32) -> Result<Vec<ViolationRecord>, StoreError> {
        let rows = sqlx::query(
            "SELECT violation_id, ts, rule, symbol, client_order_id, detail FROM risk_violations ORDER BY violation_id DESC LIMIT $1",
        )
        .bind(i64::from(limit))
        .fetch_all(self.pool()?)
        .await?;
        rows.iter()
            .map(|r| {
                Ok(ViolationRecord {
                    violation_id: r.try_get("violation_id")?,
                    ts: r.try_get("ts")?,
                    rule: r.try_get("rule")?,
                    symbol: r.try_get("symbol")?,
                    client_order_id: r.try_get("client_order_id")?,
                    detail: r.try_get("detail")?,
                })
            })
            .collect::<Result<_, sqlx::Error>>()
            .map_err(StoreError::from)
    }
}

/// Stores a new block in `tx`; its id.
async fn insert_block_in(tx: &mut sqlx::Transaction<'static, sqlx::Any>, b: &BlockRecord) -> Result<i64, StoreError> {
    let row = sqlx::query(
        "INSERT INTO symbol_blocks (symbol, block_scope, reason, actor, effective_from, expires_at) \
         VALUES ($1, $2, $3, $4, $5, $6) RETURNING block_id",
    )
    .bind(&b.symbol)
    .bind(&b.block_scope)
    .bind(&b.reason)
    .bind(&b.actor)
    .bind(b.effective_from)
    .bind(b.expires_at)
    .fetch_one(&mut **tx)
    .await?;
    Ok(row.try_get("block_id")?)
}

/// Lifts `symbol`'s blocks active at `now` in `tx`; how many.
async fn lift_blocks_in(
    tx: &mut sqlx::Transaction<'static, sqlx::Any>,
    symbol: &str,
    now: i64,
    by: &str,
    reason: &str,
) -> Result<u64, StoreError> {
    let done = sqlx::query(sqlx::AssertSqlSafe(format!(
        "UPDATE symbol_blocks SET lifted_at = $1, lifted_by = $2, lift_reason = $3 WHERE {ACTIVE_BLOCK} AND symbol = $4"
    )))
    .bind(now)
    .bind(by)
    .bind(reason)
    .bind(symbol)
    .execute(&mut **tx)
    .await?;
    Ok(done.rows_affected())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(captured_at: i64, rank: i64, symbol: &str) -> RadarRowRecord {
        RadarRowRecord {
            captured_at,
            rank,
            symbol: symbol.into(),
            price: "4.5".into(),
            percentage_gain: 12.5,
            change_1m: Some(0.5),
            change_5m: None,
            volume: 1_000_000,
            average_volume: 100_000,
            relative_volume: Some(10.0),
            float_shares: Some(5_000_000),
            sector: Some("Technology".into()),
        }
    }

    /// A restart scans the minute it stopped in again: storing a capture a second time (even
    /// ranked differently) writes nothing and is no error, and the first scan stays as stored.
    #[tokio::test]
    async fn a_capture_already_stored_is_kept_not_stored_again() {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(&format!("sqlite://{}/t.db", dir.path().display())).await.unwrap();
        let unknown = RadarRowRecord { float_shares: None, sector: None, ..row(60_000, 2, "XYZ") };
        let seen = vec![row(60_000, 1, "ABC"), unknown];
        assert!(db.insert_radar_scan(&seen).await.unwrap());
        let rescan = vec![row(60_000, 1, "XYZ"), row(60_000, 2, "ABC"), row(60_000, 3, "NEW")];
        assert!(!db.insert_radar_scan(&rescan).await.unwrap(), "the capture is already stored");
        assert_eq!(db.radar_scan_at(60_000).await.unwrap(), seen);
        let next = vec![row(120_000, 1, "XYZ")];
        assert!(db.insert_radar_scan(&next).await.unwrap(), "the next minute is stored");
        assert_eq!(db.radar_scan_at(120_000).await.unwrap(), next);
        db.close().await;
    }
}
