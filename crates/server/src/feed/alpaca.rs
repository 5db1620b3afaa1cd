//! The live feed when Alpaca is the market-data source: the counterpart of the simulated
//! market's feed loop ([`super::simulated`]), driven by the wall clock (a real market's
//! time). Two tasks:
//! - [`run_marks`] every second subscribes Alpaca's stream to the symbols the engine follows
//!   and steps the engine (marks, and at each minute boundary the closed bar strategies read,
//!   then `bars.closed` for the console's charts);
//! - [`run_scans`] once a minute scans the radar over the whole universe from batched
//!   snapshots and publishes it exactly as the simulated radar's scans are published.
//!
//! [`run_scans`] also compares Alpaca's calendar (`GET /v2/calendar`, the next
//! [`CALENDAR_CHECK_DAYS`](tradeops_brokers::alpaca::market::CALENDAR_CHECK_DAYS) days) with core's NYSE calendar once a New York day, and logs a
//! warning for each date they disagree on; health's `data_broker` shows the dates as
//! `calendar_mismatch` (`MarketData::calendar_check`), and how far the wall clock (the market clock)
//! is from Alpaca's as `clock_skew_ms` (a warning beyond 2 s).
//!
//! Neither stops on a failure: an unreachable Alpaca is retried at the next tick, and health's
//! `data_broker` component says what failed.

use super::FeedDeps;
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;
use tradeops_brokers::alpaca::data_stream::ny_date;
use tradeops_brokers::alpaca::market::{AlpacaMarketData, CLOCK_SKEW_WARNING_MS};
use tradeops_core::bars::minute_floor;
use tradeops_core::Symbol;

/// How long after a minute boundary the minute's bar is taken as closed: Alpaca's stream sends
/// a minute bar shortly after the minute ends.
const BAR_SETTLE: chrono::Duration = chrono::Duration::seconds(2);

/// A failed calendar check is tried again after this long.
const CALENDAR_RETRY: Duration = Duration::from_secs(600);

/// The shortest gap between two steps a trade wakes: a busy tape's prints are taken together.
const TRADE_STEP_GAP: Duration = Duration::from_millis(20);

/// Steps the engine every second by the market clock and on each streamed trade (at most every
/// [`TRADE_STEP_GAP`]: outside the regular session the engine holds the stops, CONTRACT §12,
/// and fires one on the print that crosses it), the minute's bar once per minute, and keeps the
/// stream subscribed to what the engine follows.
pub async fn run_marks(state: FeedDeps, alpaca: Arc<AlpacaMarketData>) {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut subscribed: BTreeSet<Symbol> = BTreeSet::new();
    let mut last_bar_minute = None;
    let mut stepped = tokio::time::Instant::now();
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = alpaca.next_trade() => {
                tokio::time::sleep_until(stepped + TRADE_STEP_GAP).await;
            }
        }
        stepped = tokio::time::Instant::now();
        let followed: BTreeSet<Symbol> = state.engine.view().followed.iter().cloned().collect();
        if followed != subscribed {
            tracing::info!(symbols = followed.len(), "Alpaca stream subscribed to the symbols the engine follows");
            subscribed = followed;
        }
        // Every second: also ends the streaming of symbols an operator stopped looking at.
        alpaca.set_watched(subscribed.iter().cloned());
        let now = state.market_clock.now();
        let minute = minute_floor(now - BAR_SETTLE);
        let bar_closed = last_bar_minute.is_some_and(|last| minute > last);
        if last_bar_minute.is_none() || bar_closed {
            last_bar_minute = Some(minute);
        }
        if state.engine.market_step(now, bar_closed).await.is_err() {
            return; // the engine has stopped: the service is shutting down
        }
        if bar_closed {
            // The charts' bars: the streamed symbols' (held, watched, working orders, looked at) only —
            // the radar's other rows would cost REST requests from Alpaca's budget.
            let mut symbols = super::chart_symbols(&state, 0).await;
            symbols.extend(alpaca.shown());
            crate::bars_feed::publish_closed_bars(state.market.as_ref(), &state.events, symbols).await;
        }
    }
}

/// Scans the radar once a minute (and at start), loading Alpaca's universe first and again
/// when a load failed.
pub async fn run_scans(state: FeedDeps, alpaca: Arc<AlpacaMarketData>) {
    let mut last_scan_minute = None;
    let mut calendar_checked = None;
    let mut calendar_retry_at = tokio::time::Instant::now();
    loop {
        let today = ny_date(state.market_clock.now());
        if calendar_checked != Some(today) && tokio::time::Instant::now() >= calendar_retry_at {
            match alpaca.check_calendar(today).await {
                Ok(check) => {
                    calendar_checked = Some(today);
                    for mismatch in &check.mismatches {
                        tracing::warn!(%mismatch, "Alpaca's calendar and the NYSE calendar disagree");
                    }
                    if check.clock_skew_ms.abs() > CLOCK_SKEW_WARNING_MS {
                        tracing::warn!(
                            skew_ms = check.clock_skew_ms,
                            "the wall clock (the market clock) is off Alpaca's"
                        );
                    }
                    if check.mismatches.is_empty() {
                        tracing::info!(from = %check.from, to = %check.to, "Alpaca's calendar agrees with the NYSE calendar");
                    }
                }
                Err(e) => {
                    tracing::warn!(error = %e, "Alpaca calendar not checked; retrying in 10 minutes");
                    calendar_retry_at = tokio::time::Instant::now() + CALENDAR_RETRY;
                }
            }
        }
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
