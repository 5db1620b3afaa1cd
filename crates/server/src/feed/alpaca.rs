//! The live feed when Alpaca is the market-data source (issue 23): the counterpart of the
//! simulated market's feed loop in [`crate::app`], driven by the wall clock (a real market's
//! time). Two tasks:
//! - [`run_marks`] every second subscribes Alpaca's stream to the symbols the engine follows
//!   and steps the engine (marks, and at each minute boundary the closed bar strategies read);
//! - [`run_scans`] once a minute scans the radar over the whole universe from batched
//!   snapshots and publishes it exactly as the simulated radar's scans are published.
//!
//! Neither stops on a failure: an unreachable Alpaca is retried at the next tick, and health's
//! `data_broker` component says what failed.

use crate::http::state::AppState;
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;
use tradeops_brokers::alpaca::market::AlpacaMarketData;
use tradeops_core::bars::minute_floor;
use tradeops_core::Symbol;

/// How long after a minute boundary the minute's bar is taken as closed: Alpaca's stream sends
/// a minute bar shortly after the minute ends.
const BAR_SETTLE: chrono::Duration = chrono::Duration::seconds(2);

/// Steps the engine every second by the market clock, the minute's bar once per minute, and
/// keeps the stream subscribed to what the engine follows.
pub async fn run_marks(state: AppState, alpaca: Arc<AlpacaMarketData>) {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut subscribed: BTreeSet<Symbol> = BTreeSet::new();
    let mut last_bar_minute = None;
    loop {
        tick.tick().await;
        let followed: BTreeSet<Symbol> = state.engine().view().followed.iter().cloned().collect();
        if followed != subscribed {
            tracing::info!(symbols = followed.len(), "Alpaca stream subscribed to the symbols the engine follows");
            alpaca.set_watched(followed.iter().cloned());
            subscribed = followed;
        }
        let now = state.market_clock.now();
        let minute = minute_floor(now - BAR_SETTLE);
        let bar_closed = last_bar_minute.is_some_and(|last| minute > last);
        if last_bar_minute.is_none() || bar_closed {
            last_bar_minute = Some(minute);
        }
        if state.engine().market_step(now, bar_closed).await.is_err() {
            return; // the engine has stopped: the service is shutting down
        }
    }
}

/// Scans the radar once a minute (and at start), loading Alpaca's universe first and again
/// when a load failed.
pub async fn run_scans(state: AppState, alpaca: Arc<AlpacaMarketData>) {
    let mut last_scan_minute = None;
    loop {
        if alpaca.universe().is_empty() {
            if let Err(e) = alpaca.load_universe().await {
                tracing::warn!(error = %e, "Alpaca universe not loaded; retrying in 10 s");
                tokio::time::sleep(Duration::from_secs(10)).await;
                continue;
            }
        }
        let now = state.market_clock.now();
        let minute = minute_floor(now - BAR_SETTLE);
        if last_scan_minute != Some(minute) {
            let settings = state.settings.current();
            let started = tokio::time::Instant::now();
            match alpaca.scan(now, &settings.momentum_radar).await {
                Ok(scan) => {
                    last_scan_minute = Some(minute);
                    super::publish_scan(&state, scan, Some(started.elapsed()), true).await;
                }
                Err(e) => {
                    tracing::warn!(error = %e, "radar scan over Alpaca failed; retried in 5 s");
                    tokio::time::sleep(Duration::from_secs(5)).await;
                }
            }
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}
