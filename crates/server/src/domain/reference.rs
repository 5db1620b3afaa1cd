//! Imported reference data — float and sector per symbol — shared by `PUT /api/market/reference`,
//! `GET /api/market/reference/{symbol}` and `tradeops reference import`: reading a file (CSV with
//! the header `symbol,float,sector`, or JSON rows), storing it in one transaction (a refused file
//! changes nothing), and keeping the book every reader lays over the market source current
//! ([`ReferenceData`]: radar scans, instruments, trade features, backtest history).
//!
//! Imported values win field by field; an empty cell leaves the market source's value (none on
//! a real feed: unknown, `null`). A running service reloads the table every
//! [`RELOAD_EVERY`], so an import by the CLI or another node reaches it without a restart.

use crate::domain::{DomainError, DomainResult};
use serde::Serialize;
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;
use tradeops_brokers::reference::ReferenceData;
use tradeops_brokers::MarketData;
use tradeops_core::reference::{entry, parse_reference_csv, Reference, ReferenceBook, ReferenceEntry, ReferenceError};
use tradeops_core::time::{format_ts, from_epoch_ms};
use tradeops_core::{Symbol, Timestamp};
use tradeops_store::{ReferenceRecord, ReferenceRepository};

/// How often a running service reloads the imported reference data from the database.
pub const RELOAD_EVERY: Duration = Duration::from_secs(30);

/// Whether an import replaces every stored row or only the rows of its symbols.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Deserialize, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum ImportMode {
    /// The table holds exactly the import afterwards (the default).
    #[default]
    Replace,
    /// The import's rows replace those of the same symbols; the others stay.
    Merge,
}

/// What an import did.
#[derive(Clone, Debug, Serialize, utoipa::ToSchema)]
pub struct ImportOutcome {
    /// Rows stored.
    pub imported: usize,
    pub mode: ImportMode,
    /// Symbols with imported reference data afterwards.
    pub total: usize,
    pub imported_at: String,
}

/// Imported values of one symbol, as stored.
#[derive(Clone, Debug, Serialize, utoipa::ToSchema)]
pub struct ImportedReference {
    pub float: Option<u64>,
    pub sector: Option<String>,
    pub imported_at: String,
}

/// The reference data of one symbol as the service uses it.
#[derive(Clone, Debug, Serialize, utoipa::ToSchema)]
pub struct SymbolReference {
    #[schema(value_type = String)]
    pub symbol: Symbol,
    /// The float in use: imported, else the market source's; `null` when neither knows it.
    pub float: Option<u64>,
    /// The sector in use: imported, else the market source's; `null` when neither knows it.
    pub sector: Option<String>,
    /// Whether the market data source lists the symbol.
    pub listed: bool,
    /// The imported row; `null` when none was imported.
    pub imported: Option<ImportedReference>,
}

pub struct ReferenceService {
    repo: Arc<dyn ReferenceRepository>,
    data: Arc<ReferenceData>,
}

impl From<ReferenceError> for DomainError {
    fn from(e: ReferenceError) -> Self {
        DomainError::BadRow { line: e.line, field: e.field, reason: e.reason }
    }
}

/// The rows of a CSV file (UTF-8).
pub fn parse_csv(body: &[u8]) -> DomainResult<Vec<ReferenceEntry>> {
    let text = std::str::from_utf8(body).map_err(|_| DomainError::validation("body", "the file is not UTF-8 text"))?;
    Ok(parse_reference_csv(text)?)
}

/// JSON rows: an array of `{symbol, float, sector}` (`float` and `sector` optional or `null`).
/// A refusal names the row's position from 1 as its `line`.
pub fn parse_json(body: &Value) -> DomainResult<Vec<ReferenceEntry>> {
    let rows = body.as_array().ok_or_else(|| DomainError::validation("body", "must be an array of rows"))?;
    let mut seen = std::collections::BTreeMap::new();
    let mut out = Vec::with_capacity(rows.len());
    for (i, row) in rows.iter().enumerate() {
        let line = i + 1;
        let bad = |field: &str, reason: &str| DomainError::BadRow { line, field: field.into(), reason: reason.into() };
        let object = row.as_object().ok_or_else(|| bad("row", "must be an object"))?;
        if let Some(other) = object.keys().find(|k| !["symbol", "float", "sector"].contains(&k.as_str())) {
            return Err(bad(other, "unknown field; a row has symbol, float and sector"));
        }
        let symbol = object.get("symbol").and_then(Value::as_str).ok_or_else(|| bad("symbol", "is required (text)"))?;
        let float = match object.get("float") {
            None | Some(Value::Null) => None,
            Some(v) => Some(v.as_u64().ok_or_else(|| bad("float", "must be a non-negative whole number of shares"))?),
        };
        let sector = match object.get("sector") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(s.as_str()),
            Some(_) => return Err(bad("sector", "must be text or null")),
        };
        let e = entry(line, symbol, float.map(|f| f.to_string()).as_deref(), sector)?;
        if let Some(first) = seen.insert(e.symbol.clone(), line) {
            return Err(bad("symbol", &format!("{} is already row {first}", e.symbol)));
        }
        out.push(e);
    }
    Ok(out)
}

fn book_of(records: &[ReferenceRecord]) -> ReferenceBook {
    ReferenceBook::new(records.iter().filter_map(|r| {
        Some(ReferenceEntry {
            symbol: Symbol::parse(&r.symbol).ok()?,
            reference: Reference {
                float: r.float_shares.and_then(|f| u64::try_from(f).ok()),
                sector: r.sector.clone(),
            },
        })
    }))
}

impl ReferenceService {
    /// `data` is the book the market source and the radar read.
    pub fn new(repo: Arc<dyn ReferenceRepository>, data: Arc<ReferenceData>) -> ReferenceService {
        ReferenceService { repo, data }
    }

    /// Loads the stored rows into the book; the number of symbols.
    pub async fn reload(&self) -> DomainResult<usize> {
        let records = self.repo.all_reference().await?;
        let book = book_of(&records);
        let count = book.len();
        self.data.replace(book);
        Ok(count)
    }

    /// Stores `rows` in one transaction (nothing when it fails), then makes them the book.
    pub async fn import(
        &self,
        rows: Vec<ReferenceEntry>,
        mode: ImportMode,
        now: Timestamp,
    ) -> DomainResult<ImportOutcome> {
        let at = now.timestamp_millis();
        // Floats are at most `MAX_FLOAT` (checked as read): they fit the column.
        let records: Vec<ReferenceRecord> = rows
            .into_iter()
            .map(|e| ReferenceRecord {
                symbol: e.symbol.to_string(),
                float_shares: e.reference.float.map(|f| i64::try_from(f).unwrap_or(i64::MAX)),
                sector: e.reference.sector,
                imported_at: at,
            })
            .collect();
        self.repo.import_reference(&records, mode == ImportMode::Replace).await?;
        let total = self.reload().await?;
        Ok(ImportOutcome { imported: records.len(), mode, total, imported_at: format_ts(&from_epoch_ms(at)) })
    }

    /// The reference data of `symbol` in use, and what was imported for it; `NOT_FOUND` when
    /// the market does not list it and nothing was imported for it.
    pub async fn lookup(&self, symbol: &Symbol, market: &dyn MarketData) -> DomainResult<SymbolReference> {
        let stored = self.repo.reference(symbol.as_str()).await?;
        let instrument = market.instrument(symbol);
        if instrument.is_none() && stored.is_none() {
            return Err(DomainError::NotFound(format!(
                "{symbol} is not a symbol of the {} market and has no imported reference data",
                market.name()
            )));
        }
        let imported = stored.map(|r| ImportedReference {
            float: r.float_shares.and_then(|f| u64::try_from(f).ok()),
            sector: r.sector,
            imported_at: format_ts(&from_epoch_ms(r.imported_at)),
        });
        // The market source's instrument already carries the imported values (it reads the
        // book); a symbol only imported has the imported ones.
        let (float, sector) = match &instrument {
            Some(i) => (i.float, i.sector.clone()),
            None => imported.as_ref().map(|i| (i.float, i.sector.clone())).unwrap_or_default(),
        };
        Ok(SymbolReference { symbol: symbol.clone(), float, sector, listed: instrument.is_some(), imported })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// JSON rows are checked like CSV rows; a refusal names the row (from 1) and the field.
    #[test]
    fn json_rows_name_the_row_and_field_they_are_refused_for() {
        let rows = parse_json(&json!([{"symbol": "abcd", "float": 5, "sector": "Tech"}, {"symbol": "EF"}])).unwrap();
        assert_eq!(rows[0].reference.float, Some(5));
        assert_eq!(rows[1].reference, Reference::default());
        let cases = [
            (json!([{"symbol": "A"}, {"symbol": "B", "float": -1}]), 2, "float"),
            (json!([{"symbol": "A", "float": 1.5}]), 1, "float"),
            (json!([{"symbol": "A", "sector": 3}]), 1, "sector"),
            (json!([{"float": 3}]), 1, "symbol"),
            (json!([{"symbol": "A B"}]), 1, "symbol"),
            (json!([{"symbol": "A", "price": 1}]), 1, "price"),
            (json!([{"symbol": "A"}, {"symbol": "a"}]), 2, "symbol"),
            (json!(["A"]), 1, "row"),
        ];
        for (body, line, field) in cases {
            match parse_json(&body) {
                Err(DomainError::BadRow { line: l, field: f, .. }) => {
                    assert_eq!((l, f.as_str()), (line, field), "{body}")
                }
                other => panic!("{body}: {other:?}"),
            }
        }
        assert!(matches!(parse_json(&json!({"symbol": "A"})), Err(DomainError::Validation(_))));
    }
}
