//! The event stream kept in the database (PostgreSQL): the engine's leader stores
//! every event it publishes, as its subscribers are sent it ([`keep_events`]), and the next
//! leader reads the newest back into its resume buffer ([`earlier_events`]), so a client that
//! reconnects to any node with `Last-Event-ID` gets what it missed across a failover — all
//! that the old leader had stored (it stores every 50 ms; what it published in its last moments
//! before dying may be lost, and the console reloads its state on reconnect anyway). Here, in
//! the HTTP layer, because the stored text is the events' wire form.

use crate::events::{Event, EventBus, StoredEvent, BUFFER, KINDS};
use crate::http::routes::events::wire;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::broadcast::error::{RecvError, TryRecvError};
use tradeops_core::Clock;
use tradeops_store::Database;

/// How long stored events are kept.
const KEEP: Duration = Duration::from_secs(24 * 3600);
/// The most events one write stores.
const BATCH: usize = 500;

/// Stores the events `events` publishes until the bus closes: every 50 ms what was published
/// since, in one transaction; older than a day deleted every minute. A write that fails loses
/// those events for resume only (subscribers got them); one that falls behind skips.
pub async fn keep_events(events: Arc<EventBus>, db: Database, clock: Arc<dyn Clock>) {
    let (_, mut live) = events.subscribe(None);
    let mut pruned = tokio::time::Instant::now();
    loop {
        let first = match live.recv().await {
            Ok(event) => event,
            Err(RecvError::Lagged(missed)) => {
                tracing::warn!(
                    missed,
                    "events were published faster than they were stored: those are not kept for resume"
                );
                continue;
            }
            Err(RecvError::Closed) => return,
        };
        let mut batch: Vec<Arc<StoredEvent>> = vec![first];
        while batch.len() < BATCH {
            match live.try_recv() {
                Ok(event) => batch.push(event),
                Err(TryRecvError::Lagged(_)) => continue,
                Err(_) => break,
            }
        }
        let now = clock.now().timestamp_millis();
        let rows: Vec<(i64, &str, &str, i64)> = batch
            .iter()
            .filter(|e| !matches!(e.event, Event::Earlier(_)))
            .map(|e| (e.id as i64, e.kind(), wire(e).as_ref(), now))
            .collect();
        if let Err(e) = db.append_events(&rows).await {
            tracing::debug!(error = %e, events = rows.len(), "events not stored for resume");
        }
        if pruned.elapsed() > Duration::from_secs(60) {
            pruned = tokio::time::Instant::now();
            if let Err(e) = db.prune_events(now - KEEP.as_millis() as i64).await {
                tracing::debug!(error = %e, "old stored events not deleted");
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The newest stored events, for a new leader's resume buffer (oldest first); none when they
/// cannot be read.
pub async fn earlier_events(db: &Database) -> Vec<(u64, &'static str, String)> {
    match db.recent_events(BUFFER as i64).await {
        Ok(rows) => rows
            .into_iter()
            .filter_map(|(id, kind, text)| Some((u64::try_from(id).ok()?, *KINDS.iter().find(|k| **k == kind)?, text)))
            .collect(),
        Err(e) => {
            tracing::warn!(error = %e, "the stored events could not be read: a resume from before this term replays nothing");
            Vec::new()
        }
    }
}
