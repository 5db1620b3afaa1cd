//! The radar's results: the latest scan in memory and in the cache store (where every replica
//! reads it), every scan's rows in the database — each capture stored once, as first made — and
//! the allocator's auto-watch. The database keeps the columns of seed §2.4; a row's session and
//! pre-market columns (CONTRACT §12) are the live scan's, and a stored scan served again after a
//! restart takes them from a rescan of its minute ([`RadarService::resume`]).

use serde::{Deserialize, Serialize};
use std::sync::{Arc, RwLock};
use std::time::Duration;
use tradeops_brokers::simulated::live::RadarScan;
use tradeops_core::calendar::SessionPhase;
use tradeops_core::market::Price;
use tradeops_core::radar::RadarRow;
use tradeops_core::time::{from_epoch_ms, to_epoch_ms};
use tradeops_core::Symbol;
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
    /// The tape the scan read (Alpaca's `iex` or `sip`); `None` on the simulated market.
    #[serde(default)]
    pub feed: Option<String>,
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
    ///
    /// The database write goes through the unfenced handle, on purpose: a radar scan is not
    /// trading state. It records what the market looked like at a minute, a capture is stored
    /// once (a second write of the same minute keeps the first), no order, position or risk
    /// decision is restored from it, and the engine never reads it back. An engine whose term
    /// is over storing its last scan changes nothing the new leader acts on.
    pub async fn publish(&self, scan: RadarScan, latency: Option<Duration>, latest: bool) {
        let records: Vec<RadarRowRecord> = scan.rows.iter().map(record).collect();
        if latest {
            self.serve(&scan, latency).await;
        }
        if !records.is_empty() {
            match self.repo.insert_radar_scan(&records).await {
                Ok(true) => {}
                Ok(false) => {
                    tracing::debug!(captured_at = %scan.captured_at, "radar scan already stored; kept as it was")
                }
                Err(e) => tracing::warn!(error = %e, "radar rows not stored"),
            }
        }
    }

    /// The symbols of the scan stored for the minute `at` — a restart within the minute the
    /// service stopped in finds the scan operators saw — in rank order; empty when none is (or it
    /// cannot be read).
    pub async fn stored_symbols(&self, at: tradeops_core::Timestamp) -> Vec<Symbol> {
        self.stored(at).await.map(|rows| rows.into_iter().map(|r| r.symbol).collect()).unwrap_or_default()
    }

    /// The scan stored for the minute `at`, its rows as stored (their session and pre-market
    /// columns not kept: unknown); `None` when none is, or it cannot be read.
    async fn stored(&self, at: tradeops_core::Timestamp) -> Option<Vec<RadarRow>> {
        let at = to_epoch_ms(&at);
        match self.repo.radar_scan_at(at).await {
            Ok(rows) => rows.iter().filter(|r| r.captured_at == at).map(radar_row).collect::<Option<Vec<_>>>(),
            Err(e) => {
                tracing::warn!(error = %e, "stored radar scan not read");
                None
            }
        }
        .filter(|rows| !rows.is_empty())
    }

    /// Publishes the scan a start makes of the current minute. When that minute's scan is
    /// already stored — a restart within the minute the service stopped in — operators saw the
    /// stored one: it is served again as it was (not this rescan, which settings changed since
    /// may have altered), and nothing is written. The database does not keep a row's session and
    /// pre-market columns: they are the rescan's row of the same symbol (the same market at the
    /// same minute; the feed rescans the stored symbols for this, [`RadarService::stored_symbols`]),
    /// the session alone where it has none.
    pub async fn resume(&self, scan: RadarScan) {
        match self.stored(scan.captured_at).await {
            Some(mut rows) => {
                for row in &mut rows {
                    let fresh = scan.rows.iter().find(|r| r.symbol == row.symbol);
                    row.session = scan.session;
                    if let Some(fresh) = fresh {
                        row.gap_pct = fresh.gap_pct;
                        row.premarket_volume = fresh.premarket_volume;
                        row.premarket_high = fresh.premarket_high;
                    }
                }
                self.serve(&RadarScan { rows, ..scan }, None).await
            }
            None => self.publish(scan, None, true).await,
        }
    }

    /// Makes `scan` the latest: this process's copy and the cache store's.
    async fn serve(&self, scan: &RadarScan, latency: Option<Duration>) {
        let snapshot = Arc::new(RadarSnapshot {
            captured_at: Some(scan.captured_at),
            rows: scan.rows.clone(),
            scanned: scan.scanned,
            scan_micros: scan.scan_micros,
            latency_ms: latency.map(|d| (d.as_secs_f64() * 1e6).round() / 1e3),
            feed: scan.feed.map(str::to_string),
        });
        *self.latest.write().unwrap_or_else(|e| e.into_inner()) = snapshot.clone();
        let json = serde_json::to_string(&*snapshot).expect("snapshots serialise");
        if let Err(e) = self.cache.set(LATEST_KEY, &json, Some(Duration::from_secs(600))).await {
            tracing::debug!(error = %e, "radar snapshot not cached");
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

/// A stored row as served (its session and pre-market columns unknown: not stored, see
/// [`RadarService::resume`]); `None` when it is not one this service could have stored.
fn radar_row(r: &RadarRowRecord) -> Option<RadarRow> {
    Some(RadarRow {
        rank: u32::try_from(r.rank).ok()?,
        symbol: Symbol::parse(&r.symbol).ok()?,
        price: Price::from_decimal(r.price.parse().ok()?)?,
        percentage_gain: r.percentage_gain,
        change_1m: r.change_1m,
        change_5m: r.change_5m,
        volume: u64::try_from(r.volume).ok()?,
        average_volume: u64::try_from(r.average_volume).ok()?,
        relative_volume: r.relative_volume,
        float: r.float_shares.map(u64::try_from).transpose().ok()?,
        sector: r.sector.clone(),
        captured_at: from_epoch_ms(r.captured_at),
        // The history keeps what the scan measured; whether a symbol was halted then is not kept.
        halted: false,
        // Not stored: the rescan's (`resume`).
        session: SessionPhase::Closed,
        gap_pct: None,
        premarket_volume: 0,
        premarket_high: None,
    })
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
        float_shares: row.float.map(|f| i64::try_from(f).unwrap_or(i64::MAX)),
        sector: row.sector.clone(),
    }
}
