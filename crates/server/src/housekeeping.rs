//! Housekeeping that keeps the disk bounded, woken every second and timed by the
//! injected clock: aggregated refusals are written ([`crate::refusals`]), audit rows older than
//! `audit.retention_days` (and notification deliveries as old) are pruned every hour (first at start), and SQLite's write-ahead log
//! is checkpointed every [`WAL_CHECKPOINT_EVERY`] (truncated when long: see
//! `Database::checkpoint_wal`). What it works on is passed in as [`Housekeeping`].

use crate::refusals::RefusalLog;
use chrono::Duration as Span;
use std::sync::Arc;
use std::time::Duration;
use tradeops_core::{Clock, Timestamp};
use tradeops_store::{AuditRepository, Database};

/// What housekeeping works on.
pub struct Housekeeping {
    pub clock: Arc<dyn Clock>,
    /// The database whose write-ahead log is checkpointed.
    pub db: Database,
    /// The audit log as actions write it (pruned through it).
    pub audit: Arc<dyn AuditRepository>,
    /// The audit log itself, where the aggregated refusals are written.
    pub audit_store: Arc<dyn AuditRepository>,
    /// The aggregated refusals not yet written.
    pub refusals: Arc<RefusalLog>,
    /// `audit.retention_days`.
    pub retention_days: u32,
}

/// How often the audit log is pruned.
pub const PRUNE_EVERY: Span = Span::hours(1);
/// How often SQLite's WAL is checkpointed: often enough that a burst of writes cannot pile up
/// gigabytes (at most 8 MiB plus ten seconds of writes before a truncation), rarely enough that
/// a truncation's pause (writers wait for readers) is rare.
pub const WAL_CHECKPOINT_EVERY: Span = Span::seconds(10);

/// When each periodic job is next due.
pub struct Schedule {
    next_prune: Timestamp,
    next_checkpoint: Timestamp,
}

impl Schedule {
    /// Everything due at once: the first prune happens at start.
    pub fn starting(now: Timestamp) -> Schedule {
        Schedule { next_prune: now, next_checkpoint: now + WAL_CHECKPOINT_EVERY }
    }
}

/// One round: whatever is due at the clock's current time.
pub async fn run_due(state: &Housekeeping, schedule: &mut Schedule) {
    let now = state.clock.now();
    state.refusals.flush(state.audit_store.as_ref(), now.timestamp_millis(), false).await;
    if now >= schedule.next_prune {
        schedule.next_prune = now + PRUNE_EVERY;
        prune_audit(state, now).await;
    }
    if now >= schedule.next_checkpoint {
        schedule.next_checkpoint = now + WAL_CHECKPOINT_EVERY;
        match state.db.checkpoint_wal().await {
            Ok(true) => {}
            Ok(false) => tracing::debug!("WAL checkpoint incomplete (readers busy); next round retries"),
            Err(e) => tracing::warn!(error = %e, "WAL checkpoint failed"),
        }
    }
}

/// Deletes audit rows older than the retention.
pub async fn prune_audit(state: &Housekeeping, now: Timestamp) {
    let cutoff = now - Span::days(state.retention_days.into());
    match state.audit.prune_audit(cutoff.timestamp_millis()).await {
        Ok(0) => {}
        Ok(deleted) => {
            tracing::info!(deleted, retention_days = state.retention_days, "pruned the audit log")
        }
        Err(e) => tracing::warn!(error = %e, "could not prune the audit log"),
    }
    // Notification deliveries are kept as long as the audit (those still to send always).
    match state.db.prune_deliveries(cutoff.timestamp_millis()).await {
        Ok(0) => {}
        Ok(deleted) => tracing::info!(deleted, "pruned the notification deliveries"),
        Err(e) => tracing::warn!(error = %e, "could not prune the notification deliveries"),
    }
}

/// The background task.
pub async fn run(state: Housekeeping) {
    let mut schedule = Schedule::starting(state.clock.now());
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        run_due(&state, &mut schedule).await;
    }
}
