//! Refusals before a sensitive action is even considered — no or an invalid token (`UNAUTHORIZED`),
//! a spent budget (`RATE_LIMITED`) — audited in aggregate: one audit row per actor,
//! client address, action, outcome and minute, carrying the count, so a flood costs a counter in
//! memory per request instead of a database row.
//!
//! The row is written at the first refusal of its minute, so an attack shows in `GET /api/audit`
//! at once and in its place in time; later refusals of that minute only count in memory, and
//! [`RefusalLog::flush`] brings the row's `request` (`{"source", "count", "first", "last"}`) up to
//! date: every second, before the audit log is read, and at shutdown (so no count is lost). The
//! minute, `first` and `last` are the service's wall clock (a flood is counted in real time);
//! the row's timestamp is the market time of its first refusal, as every audit row's.
//!
//! Memory is bounded: a minute's windows leave once written, and past [`MAX_WINDOWS`] open
//! windows (a flood from that many addresses within one minute) further addresses are counted
//! together under the source `*`.

use serde_json::json;
use std::collections::HashMap;
use std::sync::Mutex;
use tradeops_core::time::{format_ts, from_epoch_ms};
use tradeops_store::{AuditEntry, AuditRepository};

/// Open windows kept before new sources are counted under `*`.
pub const MAX_WINDOWS: usize = 1_000;
/// Windows of past minutes kept while the database refuses their rows, before the oldest are
/// dropped (and logged).
const MAX_UNWRITTEN: usize = 10_000;

/// What one aggregate row counts.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RefusalKey {
    /// `anonymous`, or the token's name when a known caller ran out of budget.
    pub actor: String,
    pub role: Option<String>,
    /// The client address (see [`crate::http::client_limit::ClientAddr`]), or `*` for sources past [`MAX_WINDOWS`].
    pub source: String,
    pub action: &'static str,
    pub outcome: &'static str,
}

#[derive(Clone, Debug)]
struct Window {
    minute: i64,
    first_ms: i64,
    /// Market time of the first refusal.
    first_market_ms: i64,
    last_ms: i64,
    count: u64,
    /// The count the stored row says.
    stored: u64,
    audit_id: Option<i64>,
    /// The first refusal's request is writing the row.
    inserting: bool,
    mode: String,
    request_id: String,
}

impl Window {
    fn entry(&self, key: &RefusalKey) -> AuditEntry {
        AuditEntry {
            ts: self.first_market_ms,
            wall_ts: self.first_ms,
            actor: key.actor.clone(),
            role: key.role.clone(),
            action: key.action.to_string(),
            target: key.source.clone(),
            request: self.request(key),
            outcome: key.outcome.to_string(),
            mode: self.mode.clone(),
            request_id: self.request_id.clone(),
        }
    }

    fn request(&self, key: &RefusalKey) -> String {
        json!({
            "source": key.source,
            "count": self.count,
            "first": format_ts(&from_epoch_ms(self.first_ms)),
            "last": format_ts(&from_epoch_ms(self.last_ms)),
        })
        .to_string()
    }

    fn settled(&self) -> bool {
        !self.inserting && self.audit_id.is_some() && self.stored == self.count
    }
}

#[derive(Default)]
struct Windows {
    open: HashMap<RefusalKey, Window>,
    /// Windows of past minutes with something left to write.
    closed: Vec<(RefusalKey, Window)>,
}

/// Which window an insert belongs to, to hand its row id back.
pub struct Ticket {
    key: RefusalKey,
    minute: i64,
}

/// The aggregated refusals not yet fully written.
#[derive(Default)]
pub struct RefusalLog {
    windows: Mutex<Windows>,
    /// One flush at a time, so a row is never written twice.
    flushing: tokio::sync::Mutex<()>,
}

impl RefusalLog {
    /// Counts one refusal at `now_ms` (wall time; `market_ms` the market's). Returns the row to
    /// insert when it is the first of its window; the caller writes it and reports the id with
    /// [`RefusalLog::inserted`].
    pub fn record(
        &self,
        mut key: RefusalKey,
        now_ms: i64,
        market_ms: i64,
        mode: &str,
        request_id: &str,
    ) -> Option<(AuditEntry, Ticket)> {
        let minute = now_ms.div_euclid(60_000);
        let mut windows = self.lock();
        if !windows.open.contains_key(&key) && windows.open.len() >= MAX_WINDOWS {
            key.source = "*".into();
        }
        let fresh = Window {
            minute,
            first_ms: now_ms,
            first_market_ms: market_ms,
            last_ms: now_ms,
            count: 1,
            stored: 1,
            audit_id: None,
            inserting: true,
            mode: mode.to_string(),
            request_id: request_id.to_string(),
        };
        match windows.open.get_mut(&key) {
            // Refusals of an earlier minute arriving late (a clock set back) join the open one.
            Some(w) if w.minute >= minute => {
                w.count += 1;
                w.last_ms = w.last_ms.max(now_ms);
                return None;
            }
            Some(w) => {
                let old = std::mem::replace(w, fresh.clone());
                if !old.settled() {
                    windows.closed.push((key.clone(), old));
                }
            }
            None => {
                windows.open.insert(key.clone(), fresh.clone());
            }
        }
        Some((fresh.entry(&key), Ticket { key, minute }))
    }

    /// The first refusal's row was written (`Some(id)`) or could not be (`None`: the next
    /// flush inserts it).
    pub fn inserted(&self, ticket: Ticket, audit_id: Option<i64>) {
        let mut windows = self.lock();
        let Windows { open, closed } = &mut *windows;
        let window = match open.get_mut(&ticket.key) {
            Some(w) if w.minute == ticket.minute => Some(w),
            _ => closed.iter_mut().find(|(k, w)| *k == ticket.key && w.minute == ticket.minute).map(|(_, w)| w),
        };
        if let Some(w) = window {
            w.inserting = false;
            w.audit_id = audit_id;
            if audit_id.is_none() {
                w.stored = 0;
            }
        }
    }

    /// Writes every count not yet stored. Windows of minutes before `now_ms`'s (or all, with
    /// `all`, at shutdown) are then forgotten once written.
    pub async fn flush(&self, repo: &dyn AuditRepository, now_ms: i64, all: bool) {
        let _one = self.flushing.lock().await;
        let minute = now_ms.div_euclid(60_000);
        let work: Vec<(RefusalKey, Window)> = {
            let mut windows = self.lock();
            let ended: Vec<RefusalKey> =
                windows.open.iter().filter(|(_, w)| all || w.minute < minute).map(|(k, _)| k.clone()).collect();
            for key in ended {
                if let Some(w) = windows.open.remove(&key) {
                    windows.closed.push((key, w));
                }
            }
            let Windows { open, closed } = &mut *windows;
            open.iter()
                .chain(closed.iter().map(|(k, w)| (k, w)))
                .filter(|(_, w)| !w.inserting && !w.settled())
                .map(|(k, w)| (k.clone(), w.clone()))
                .collect()
        };
        for (key, window) in work {
            let written = match window.audit_id {
                Some(id) => repo.update_audit_request(id, &window.request(&key)).await.map(|()| id),
                None => repo.append_audit(&window.entry(&key)).await,
            };
            match written {
                Ok(id) => self.stored(&key, window.minute, id, window.count),
                Err(e) => tracing::warn!(error = %e, action = key.action, "could not write aggregated refusals"),
            }
        }
        let mut windows = self.lock();
        windows.closed.retain(|(_, w)| !w.settled());
        let excess = windows.closed.len().saturating_sub(MAX_UNWRITTEN);
        if excess > 0 {
            let lost: u64 = windows.closed.drain(..excess).map(|(_, w)| w.count - w.stored).sum();
            tracing::error!(
                windows = excess,
                refusals = lost,
                "the database keeps refusing audit rows: counts dropped"
            );
        }
    }

    fn stored(&self, key: &RefusalKey, minute: i64, audit_id: i64, count: u64) {
        let mut windows = self.lock();
        let Windows { open, closed } = &mut *windows;
        let window = match open.get_mut(key) {
            Some(w) if w.minute == minute => Some(w),
            _ => closed.iter_mut().find(|(k, w)| k == key && w.minute == minute).map(|(_, w)| w),
        };
        if let Some(w) = window {
            w.audit_id = Some(audit_id);
            w.stored = w.stored.max(count);
        }
    }

    /// Windows held in memory (for tests).
    pub fn len(&self) -> usize {
        let windows = self.lock();
        windows.open.len() + windows.closed.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Windows> {
        self.windows.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tradeops_store::{AuditFilter, AuditRecord, StoreError};

    /// Rows in memory; `fail` makes every write fail.
    #[derive(Default)]
    struct Rows {
        rows: Mutex<Vec<AuditEntry>>,
        fail: std::sync::atomic::AtomicBool,
    }

    #[async_trait::async_trait]
    impl AuditRepository for Rows {
        async fn append_audit(&self, entry: &AuditEntry) -> Result<i64, StoreError> {
            if self.fail.load(std::sync::atomic::Ordering::SeqCst) {
                return Err(StoreError::Corrupt("down".into()));
            }
            let mut rows = self.rows.lock().unwrap();
            rows.push(entry.clone());
            Ok(rows.len() as i64)
        }
        async fn list_audit(&self, _: &AuditFilter) -> Result<Vec<AuditRecord>, StoreError> {
            unreachable!()
        }
        async fn update_audit_request(&self, audit_id: i64, request: &str) -> Result<(), StoreError> {
            self.rows.lock().unwrap()[audit_id as usize - 1].request = request.to_string();
            Ok(())
        }
        async fn prune_audit(&self, _: i64) -> Result<u64, StoreError> {
            unreachable!()
        }
    }

    impl Rows {
        fn counts(&self) -> Vec<(String, u64)> {
            let rows = self.rows.lock().unwrap();
            rows.iter()
                .map(|r| {
                    let request: serde_json::Value = serde_json::from_str(&r.request).unwrap();
                    (r.target.clone(), request["count"].as_u64().unwrap())
                })
                .collect()
        }
    }

    fn key(source: &str) -> RefusalKey {
        RefusalKey {
            actor: "anonymous".into(),
            role: None,
            source: source.into(),
            action: "risk.emergency_halt",
            outcome: "UNAUTHORIZED",
        }
    }

    /// Records a refusal as the guard does: the first of a window writes its row.
    async fn refuse(log: &RefusalLog, repo: &Rows, source: &str, now_ms: i64) {
        if let Some((entry, ticket)) = log.record(key(source), now_ms, now_ms, "PAPER", "req") {
            let id = repo.append_audit(&entry).await.ok();
            log.inserted(ticket, id);
        }
    }

    #[tokio::test]
    async fn a_minute_of_refusals_is_one_row_with_its_count() {
        let (log, repo) = (RefusalLog::default(), Rows::default());
        for n in 0..100 {
            refuse(&log, &repo, "10.0.0.1", 60_000 + n * 100).await;
        }
        assert_eq!(repo.counts(), vec![("10.0.0.1".to_string(), 1)], "written at the first refusal");
        log.flush(&repo, 70_000, false).await;
        assert_eq!(repo.counts(), vec![("10.0.0.1".to_string(), 100)]);
        let request: serde_json::Value = serde_json::from_str(&repo.rows.lock().unwrap()[0].request).unwrap();
        assert_eq!(request["first"], "1970-01-01T00:01:00.000Z");
        assert_eq!(request["last"], "1970-01-01T00:01:09.900Z");
        refuse(&log, &repo, "10.0.0.1", 120_000).await;
        refuse(&log, &repo, "10.0.0.1", 120_001).await;
        assert_eq!(repo.counts().len(), 2, "the next minute is a new row");
        log.flush(&repo, 180_000, false).await;
        assert_eq!(repo.counts()[1].1, 2);
        assert!(log.is_empty(), "written minutes are forgotten");
    }

    #[tokio::test]
    async fn counts_survive_a_failed_write_and_are_all_written_at_shutdown() {
        let (log, repo) = (RefusalLog::default(), Rows::default());
        repo.fail.store(true, std::sync::atomic::Ordering::SeqCst);
        for n in 0..5 {
            refuse(&log, &repo, "10.0.0.2", n).await;
        }
        log.flush(&repo, 10, false).await;
        assert!(repo.counts().is_empty());
        repo.fail.store(false, std::sync::atomic::Ordering::SeqCst);
        refuse(&log, &repo, "10.0.0.2", 20).await;
        log.flush(&repo, 30, true).await;
        assert_eq!(repo.counts(), vec![("10.0.0.2".to_string(), 6)]);
        assert!(log.is_empty());
    }

    #[tokio::test]
    async fn sources_past_the_bound_are_counted_together() {
        let (log, repo) = (RefusalLog::default(), Rows::default());
        for n in 0..MAX_WINDOWS + 50 {
            refuse(&log, &repo, &format!("10.1.{}.{}", n / 256, n % 256), 0).await;
        }
        assert_eq!(log.len(), MAX_WINDOWS + 1);
        log.flush(&repo, 0, true).await;
        assert_eq!(repo.counts().last(), Some(&("*".to_string(), 50)));
    }
}
