//! The radar's results: the latest scan in memory and in the cache store (where every replica
//! reads it), every scan's rows in the database, and the allocator's auto-watch.

use crate::market::live::RadarScan;
use serde::{Deserialize, Serialize};
use std::sync::{Arc, RwLock};
use std::time::Duration;
use tradeops_core::radar::RadarRow;
use tradeops_core::time::to_epoch_ms;
use tradeops_store::{Cache, MarketRepository, RadarRowRecord};

/// Cache key of the latest scan.
pub const LATEST_KEY: &str = "radar:latest";

/// The latest scan as served.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct RadarSnapshot {
    /// When the scan was made (a minute boundary of market time).
    #[serde(with = "tradeops_core::time::serde_ts_opt")]
    pub captured_at: Option<tradeops_core::Timestamp>,
    pub rows: Vec<RadarRow>,
    pub scanned: usize,
    pub scan_micros: u64,
    /// Real milliseconds from the minute boundary to the scan being published.
    pub latency_ms: Option<f64>,
}

pub struct RadarService {
    latest: RwLock<Arc<RadarSnapshot>>,
    cache: Arc<dyn Cache>,
    repo: Arc<dyn MarketRepository>,
}

impl RadarService {
    pub fn new(cache: Arc<dyn Cache>, repo: Arc<dyn MarketRepository>) -> RadarService {
        RadarService { latest: RwLock::default(), cache, repo }
    }

    /// Publishes a scan: memory, cache (the latest only) and database.
    pub async fn publish(&self, scan: RadarScan, latency: Option<Duration>, latest: bool) {
        let snapshot = Arc::new(RadarSnapshot {
            captured_at: Some(scan.captured_at),
            rows: scan.rows,
            scanned: scan.scanned,
            scan_micros: scan.scan_micros,
            latency_ms: latency.map(|d| (d.as_secs_f64() * 1e6).round() / 1e3),
        });
        let records: Vec<RadarRowRecord> = snapshot.rows.iter().map(record).collect();
        if latest {
            *self.latest.write().unwrap_or_else(|e| e.into_inner()) = snapshot.clone();
            let json = serde_json::to_string(&*snapshot).expect("snapshots serialise");
            if let Err(e) = self.cache.set(LATEST_KEY, &json, Some(Duration::from_secs(600))).await {
                tracing::debug!(error = %e, "radar snapshot not cached");
            }
        }
        if !records.is_empty() {
            if let Err(e) = self.repo.insert_radar_rows(&records).await {
                tracing::warn!(error = %e, "radar rows not stored");
            }
        }
    }

    /// The latest scan: from the cache store, or this process's copy when the cache misses.
    pub async fn latest(&self) -> Arc<RadarSnapshot> {
        if let Ok(Some(json)) = self.cache.get(LATEST_KEY).await {
            if let Ok(snapshot) = serde_json::from_str::<RadarSnapshot>(&json) {
                return Arc::new(snapshot);
            }
        }
        self.latest.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// This process's latest scan (for health).
    pub fn local(&self) -> Arc<RadarSnapshot> {
        self.latest.read().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

fn record(row: &RadarRow) -> RadarRowRecord {
    RadarRowRecord {
        captured_at: to_epoch_ms(&row.captured_at),
        rank: row.rank.into(),
        symbol: row.symbol.to_string(),
        price: row.price.to_decimal().to_string(),
        percentage_gain: row.percentage_gain,
        change_1m: row.change_1m,
        change_5m: row.change_5m,
        volume: row.volume as i64,
        average_volume: row.average_volume as i64,
        relative_volume: row.relative_volume,
        float_shares: row.float as i64,
        sector: row.sector.clone(),
    }
}
