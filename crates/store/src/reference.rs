//! Imported reference data of symbols (`instrument_reference`): float and sector as an
//! operator gave them, written by one import at a time in one transaction.

use crate::db::{Database, StoreError};
use async_trait::async_trait;
use sqlx::any::AnyRow;
use sqlx::Row;

/// One symbol's imported reference data.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReferenceRecord {
    pub symbol: String,
    /// `None`: not given by the import.
    pub float_shares: Option<i64>,
    /// `None`: not given by the import.
    pub sector: Option<String>,
    /// Epoch ms.
    pub imported_at: i64,
}

#[async_trait]
pub trait ReferenceRepository: Send + Sync {
    /// Writes the rows of one import in one transaction: each replaces the stored row of its
    /// symbol; with `replace_all`, every stored row not in `rows` is deleted first, so the table
    /// holds exactly the import. Nothing is written when any statement fails.
    async fn import_reference(&self, rows: &[ReferenceRecord], replace_all: bool) -> Result<(), StoreError>;
    async fn reference(&self, symbol: &str) -> Result<Option<ReferenceRecord>, StoreError>;
    /// Every row, by symbol.
    async fn all_reference(&self) -> Result<Vec<ReferenceRecord>, StoreError>;
}

fn record(r: &AnyRow) -> Result<ReferenceRecord, sqlx::Error> {
    Ok(ReferenceRecord {
        symbol: r.try_get("symbol")?,
        float_shares: r.try_get("float_shares")?,
        sector: r.try_get("sector")?,
        imported_at: r.try_get("imported_at")?,
    })
}

#[async_trait]
impl ReferenceRepository for Database {
    async fn import_reference(&self, rows: &[ReferenceRecord], replace_all: bool) -> Result<(), StoreError> {
        let mut tx = self.begin().await?;
        if replace_all {
            sqlx::query("DELETE FROM instrument_reference").execute(&mut *tx).await?;
        }
        for r in rows {
            sqlx::query(
                "INSERT INTO instrument_reference (symbol, float_shares, sector, imported_at) VALUES ($1, $2, $3, $4) \
                 ON CONFLICT (symbol) DO UPDATE SET float_shares = $2, sector = $3, imported_at = $4",
            )
            .bind(&r.symbol)
            .bind(r.float_shares)
            .bind(&r.sector)
            .bind(r.imported_at)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    async fn reference(&self, symbol: &str) -> Result<Option<ReferenceRecord>, StoreError> {
        let row =
            sqlx::query("SELECT symbol, float_shares, sector, imported_at FROM instrument_reference WHERE symbol = $1")
                .bind(symbol)
                .fetch_optional(self.pool()?)
                .await?;
        Ok(row.as_ref().map(record).transpose()?)
    }

    async fn all_reference(&self) -> Result<Vec<ReferenceRecord>, StoreError> {
        let rows =
            sqlx::query("SELECT symbol, float_shares, sector, imported_at FROM instrument_reference ORDER BY symbol")
                .fetch_all(self.pool()?)
                .await?;
        Ok(rows.iter().map(record).collect::<Result<_, _>>()?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(symbol: &str, float: Option<i64>, sector: Option<&str>, at: i64) -> ReferenceRecord {
        ReferenceRecord { symbol: symbol.into(), float_shares: float, sector: sector.map(Into::into), imported_at: at }
    }

    /// A merge keeps rows the import does not name; a replacement keeps only the import's.
    #[tokio::test]
    async fn imports_merge_or_replace_in_one_write() {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(&format!("sqlite://{}/t.db", dir.path().display())).await.unwrap();
        db.import_reference(&[rec("AAA", Some(5), None, 1), rec("BBB", None, Some("Energy"), 1)], true).await.unwrap();
        db.import_reference(&[rec("AAA", Some(6), Some("Tech"), 2)], false).await.unwrap();
        assert_eq!(
            db.all_reference().await.unwrap(),
            vec![rec("AAA", Some(6), Some("Tech"), 2), rec("BBB", None, Some("Energy"), 1)]
        );
        db.import_reference(&[rec("CCC", None, None, 3)], true).await.unwrap();
        assert_eq!(db.all_reference().await.unwrap(), vec![rec("CCC", None, None, 3)]);
        assert_eq!(db.reference("CCC").await.unwrap(), Some(rec("CCC", None, None, 3)));
        assert_eq!(db.reference("AAA").await.unwrap(), None);
        db.close().await;
    }
}
