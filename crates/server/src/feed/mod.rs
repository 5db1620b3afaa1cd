//! The live market feeds: what drives the engine and the radar by market time, whichever
//! source it is — the simulated market's feed loop ([`simulated`]) or Alpaca's ([`alpaca`]) —
//! and what both publish: radar scans (the radar's latest result, its event, and the
//! allocator's automatic watches) and the symbols the console's charts follow. A feed is given
//! exactly what it uses ([`FeedDeps`]), nothing of the HTTP layer.

use crate::domain::radar::RadarService;
use crate::domain::settings::SettingsService;
use crate::domain::watchlist::WatchlistService;
use crate::engine::EngineHandle;
use crate::events::EventBus;
use std::sync::Arc;
use std::time::Duration;
use tradeops_brokers::MarketData;
use tradeops_core::Clock;

pub mod alpaca;
pub mod simulated;

/// What a live feed reads and drives.
#[derive(Clone)]
pub struct FeedDeps {
    /// The radar's filters and the allocator's settings, as in effect.
    pub settings: Arc<SettingsService>,
    pub events: Arc<EventBus>,
    /// Where scans are published (the radar's latest, its history).
    pub radar: Arc<RadarService>,
    /// The watchlist's rows, whose symbols the charts follow.
    pub watchlist: WatchlistService,
    /// The engine: stepped by the feed, and the allocator's watches sent to it.
    pub engine: EngineHandle,
    /// The `data_broker`, whose closed bars the charts are sent.
    pub market: Arc<dyn MarketData>,
    /// Market time, which the feed follows.
    pub market_clock: Arc<dyn Clock>,
}

/// Publishes one radar scan (`latest`: the newest of a batch, which the radar serves and the
/// event stream announces) and lets the allocator auto-watch its top rows. The engine refuses
/// what the limit or a block forbids (no violation rows for these automatic attempts), and the
/// allocator leaves alone what the last halt stopped: only the operator restarts those.
pub async fn publish_scan(
    state: &FeedDeps,
    mut scan: tradeops_brokers::simulated::live::RadarScan,
    latency: Option<Duration>,
    latest: bool,
) {
    let settings = state.settings.current();
    if latest {
        // The HALTED badge of each row: the source's word now (CONTRACT §11).
        for row in &mut scan.rows {
            row.halted = state.market.halt(&row.symbol).is_some();
        }
    }
    let top: Vec<_> = scan.rows.iter().map(|r| r.symbol.clone()).collect();
    if latest {
        let top = scan.rows.iter().take(25).cloned().collect();
        let summary = crate::events::RadarSummary { captured_at: scan.captured_at, rows: scan.rows.len(), top };
        state.events.publish(crate::events::Event::RadarUpdated(summary));
    }
    state.radar.publish(scan, latency, latest).await;
    if latest {
        let halt_stopped = state.engine.view().halt_stopped.clone();
        let picks =
            tradeops_core::engine::auto_watch_picks(&top, &settings.strategy_allocator, |s| halt_stopped.contains(s));
        for symbol in &picks {
            let watch = tradeops_core::engine::Command::Watch { symbol: symbol.clone(), source: "RADAR".into() };
            if let Ok(Ok(tradeops_core::engine::Reply::Watch { already: false, .. })) = state.engine.send(watch).await {
                tracing::info!(%symbol, "allocator watched a radar symbol");
            }
        }
    }
}

/// The symbols the console's charts show, whose closed bars `bars.closed` carries: held,
/// watched, and the radar's first `radar_rows`.
pub async fn chart_symbols(state: &FeedDeps, radar_rows: usize) -> std::collections::BTreeSet<tradeops_core::Symbol> {
    let view = state.engine.view();
    let mut symbols: std::collections::BTreeSet<_> =
        view.positions.iter().filter(|p| !p.position.is_flat()).map(|p| p.position.symbol.clone()).collect();
    symbols.extend(view.followed.iter().cloned());
    if let Ok(rows) = state.watchlist.rows().await {
        symbols.extend(rows.iter().filter_map(|r| tradeops_core::Symbol::parse(&r.symbol).ok()));
    }
    let radar = state.radar.local();
    symbols.extend(radar.rows.iter().take(radar_rows).map(|r| r.symbol.clone()));
    symbols
}
