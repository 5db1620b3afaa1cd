//! The simulated market's live feed: the market brought to the market clock's time before the
//! service answers ([`warm_up`]), then stepped by it ([`run`]) — every 15 market seconds a
//! print the engine marks and matches against, each minute a radar scan published (and the
//! allocator's watches) and the closed bars the console's charts show.

use super::FeedDeps;
use crate::domain::radar::RadarService;
use crate::domain::settings::SettingsService;
use std::sync::Arc;
use std::time::Duration;
use tradeops_brokers::simulated::live::LiveMarket;
use tradeops_core::calendar::MarketCalendar;
use tradeops_core::settings::MomentumRadarSettings;
use tradeops_core::Clock;

/// Brings the live market to the market clock's time before the service answers, and publishes
/// the scan made there (the stored one when that minute was scanned before a restart), so the
/// first radar request already has data. When it was, the scan made there is of the stored
/// symbols whatever the filters: their rows' session and pre-market columns, which the database
/// does not keep, are served from it (CONTRACT §12).
pub async fn warm_up(
    market_clock: &dyn Clock,
    settings: &SettingsService,
    radar: &RadarService,
    live: Arc<LiveMarket>,
) -> anyhow::Result<()> {
    let now = market_clock.now();
    let settings = settings.current();
    let calendar = MarketCalendar::new(settings.runtime.market_calendar);
    let mut filters = settings.momentum_radar.clone();
    let at = last_scan_at(now, &filters);
    let stored = radar.stored_symbols(at).await;
    if !stored.is_empty() {
        filters = only(stored, filters);
    }
    let scans = tokio::task::spawn_blocking(move || live.advance_to(now, calendar, &filters)).await?;
    if let Some(scan) = scans.into_iter().last() {
        radar.resume(scan).await;
    }
    Ok(())
}

/// When the warm-up's last scan is captured: the minute boundary of `now`, or its last 15-second
/// step when the radar scans at every step.
fn last_scan_at(now: tradeops_core::Timestamp, filters: &MomentumRadarSettings) -> tradeops_core::Timestamp {
    let minute = tradeops_core::bars::minute_floor(now);
    if filters.scan_on_minute_boundary {
        return minute;
    }
    let step = tradeops_brokers::simulated::live::STEP_SECONDS;
    minute + chrono::Duration::seconds((now - minute).num_seconds() / step * step)
}

/// Filters that `symbols`, and only they, pass.
fn only(symbols: Vec<tradeops_core::Symbol>, filters: MomentumRadarSettings) -> MomentumRadarSettings {
    MomentumRadarSettings {
        min_price: rust_decimal::Decimal::ZERO,
        max_price: rust_decimal::Decimal::MAX,
        min_percentage_gain: f64::NEG_INFINITY,
        min_relative_volume: f64::NEG_INFINITY,
        max_float: u64::MAX,
        min_volume: 0,
        universe: symbols,
        ..filters
    }
}

/// Drives the live feed by the market clock: processes due steps, publishes radar scans (and
/// lets the allocator auto-watch), then sleeps until the next step.
pub async fn run(state: FeedDeps, live: Arc<LiveMarket>) {
    loop {
        let now = state.market_clock.now();
        let settings = state.settings.current();
        let calendar = MarketCalendar::new(settings.runtime.market_calendar);
        let (feed, filters) = (live.clone(), settings.momentum_radar.clone());
        let before = live.next_step();
        // The broker's reports due before the next print are delivered first (a live day's acks
        // meet the prints a replay's do). An engine that cannot answer within 5 s (its database
        // slow to write, say) does not stall the feed: the print goes on without it. (One
        // second was too short for a debug build on a loaded machine: the parity test then saw
        // an ack land at the next print.)
        if let Some(next) = before.filter(|next| *next <= now) {
            let _ = tokio::time::timeout(Duration::from_secs(5), state.engine.deliver_due(next)).await;
        }
        let scans = match tokio::task::spawn_blocking(move || feed.advance_to(now, calendar, &filters)).await {
            Ok(scans) => scans,
            Err(e) => {
                tracing::error!(error = %e, "market feed step failed");
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        let after = live.next_step();
        let mut closed_minute = false;
        if let (Some(before), Some(after)) = (before, after) {
            if after > before {
                // A minute closed if a minute boundary lies in the steps just processed.
                let boundary = tradeops_core::bars::minute_floor(before + chrono::Duration::seconds(59));
                let bar_closed = boundary >= before && boundary < after;
                closed_minute = bar_closed;
                let _ = state.engine.market_step(now, bar_closed).await;
            }
        }
        let count = scans.len();
        for (i, scan) in scans.into_iter().enumerate() {
            let last = i + 1 == count;
            let behind = (state.market_clock.now() - scan.captured_at).to_std().unwrap_or_default();
            let latency = last.then(|| behind.div_f64(live.speed));
            super::publish_scan(&state, scan, latency, last).await;
        }
        if closed_minute {
            let symbols = super::chart_symbols(&state, crate::bars_feed::RADAR_SYMBOLS).await;
            crate::bars_feed::publish_closed_bars(state.market.as_ref(), &state.events, symbols).await;
        }
        if let Some(after) = live.next_step().filter(|after| Some(*after) != before) {
            live.handled(after - chrono::Duration::seconds(tradeops_brokers::simulated::live::STEP_SECONDS));
        }
        let next = live.next_step();
        let wait = next
            .and_then(|t| (t - state.market_clock.now()).to_std().ok())
            .map(|d| d.div_f64(live.speed))
            .unwrap_or_default();
        // At most 50 ms, in slices of 5 ms that end once the market clock reaches the next step:
        // a clock set forward (a manual clock, a resumed machine) is noticed within a slice.
        let until = tokio::time::Instant::now() + wait.clamp(Duration::from_millis(1), Duration::from_millis(50));
        loop {
            tokio::time::sleep_until(until.min(tokio::time::Instant::now() + Duration::from_millis(5))).await;
            if tokio::time::Instant::now() >= until || next.is_some_and(|t| state.market_clock.now() >= t) {
                break;
            }
        }
    }
}
