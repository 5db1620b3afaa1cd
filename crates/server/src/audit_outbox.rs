//! Audit rows survive a database outage: a row whose write finds the database unavailable is
//! held in memory, in order, and written as soon as the database answers again (the halt taken
//! during an outage keeps its row). At most [`MAX_HELD`] rows are held; past that the count of
//! rows that could not be kept is written as one row of its own when the database is back.

use async_trait::async_trait;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;
use tradeops_store::{AuditEntry, AuditFilter, AuditRecord, AuditRepository, StoreError};

/// Rows held during an outage, at most.
pub const MAX_HELD: usize = 10_000;
/// How often held rows are retried.
const RETRY_EVERY: Duration = Duration::from_millis(500);
/// The longest a request waits for its audit row to be written before the row is held.
const APPEND_TIMEOUT: Duration = Duration::from_millis(200);
/// The longest a flush waits for a held row's first write, still under way, to end (it goes on
/// at the next flush past that).
const FIRST_WRITE_WAIT: Duration = Duration::from_secs(2);

/// A row's first write, still under way when its request stopped waiting for it.
type FirstWrite = tokio::task::JoinHandle<Result<i64, StoreError>>;

pub struct AuditOutbox {
    inner: Arc<dyn AuditRepository>,
    held: Mutex<Held>,
    /// One flush at a time: two would write the same front row twice.
    flushing: tokio::sync::Mutex<()>,
}

#[derive(Default)]
struct Held {
    /// Each row, and its first write when that was not answered in time: it goes on, and the
    /// flush waits for its outcome rather than write the row a second time beside it.
    rows: VecDeque<(AuditEntry, Option<FirstWrite>)>,
    /// Rows not kept because [`MAX_HELD`] were held already, and the newest of them.
    lost: u64,
    last_lost: Option<AuditEntry>,
}

impl AuditOutbox {
    /// Wraps the audit log; a background task retries held rows while the outbox lives.
    pub fn wrap(inner: Arc<dyn AuditRepository>) -> Arc<AuditOutbox> {
        let outbox =
            Arc::new(AuditOutbox { inner, held: Mutex::new(Held::default()), flushing: tokio::sync::Mutex::new(()) });
        let weak: Weak<AuditOutbox> = Arc::downgrade(&outbox);
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                loop {
                    tokio::time::sleep(RETRY_EVERY).await;
                    let Some(outbox) = weak.upgrade() else { return };
                    outbox.flush().await;
                }
            });
        }
        outbox
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Held> {
        self.held.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Rows waiting for the database.
    pub fn held(&self) -> usize {
        self.lock().rows.len()
    }

    fn hold(&self, entry: &AuditEntry, first_write: Option<FirstWrite>) {
        let mut held = self.lock();
        if held.rows.len() < MAX_HELD {
            held.rows.push_back((entry.clone(), first_write));
        } else {
            held.lost += 1;
            held.last_lost = Some(entry.clone());
        }
    }

    /// Writes the held rows, oldest first, until the database is unavailable again (a row
    /// refused for any other reason is logged and set aside, so it cannot block the rest). Does
    /// nothing while another flush runs (the background retry).
    pub async fn flush(&self) {
        let Ok(_only) = self.flushing.try_lock() else { return };
        self.write_held().await;
    }

    /// Writes the held rows as [`AuditOutbox::flush`] does, after waiting for a flush already
    /// running: what the service does last before closing the database, so a row the
    /// background retry was still writing is not dropped with the process.
    pub async fn flush_all(&self) {
        let _only = self.flushing.lock().await;
        self.write_held().await;
    }

    /// The flush itself; the caller holds `flushing` (two would write the same front row twice).
    async fn write_held(&self) {
        loop {
            let (entry, first_write) = {
                let mut held = self.lock();
                let Some((entry, first_write)) = held.rows.front_mut() else { break };
                (entry.clone(), first_write.take())
            };
            // A row whose first write was not answered in time: that write goes on, and its
            // answer stands. Only a write that failed is made again, after a look-up (the
            // store's own bound may have passed with the insert still landing): never two
            // writes of one row in flight at once.
            let mut answered = None;
            let mut maybe_stored = false;
            if let Some(mut write) = first_write {
                match tokio::time::timeout(FIRST_WRITE_WAIT, &mut write).await {
                    Err(_) => {
                        if let Some((_, slot)) = self.lock().rows.front_mut() {
                            *slot = Some(write);
                        }
                        return;
                    }
                    Ok(Ok(Err(e))) if e.is_unavailable() => maybe_stored = true,
                    Ok(Ok(answer)) => answered = Some(answer),
                    // The write's task ended without an answer.
                    Ok(Err(_)) => maybe_stored = true,
                }
            }
            let stored = maybe_stored
                && match self.inner.has_audit_row(&entry).await {
                    Ok(stored) => stored,
                    Err(e) if e.is_unavailable() => return,
                    Err(_) => false,
                };
            let written = match answered {
                Some(answer) => answer,
                None if stored => Ok(0),
                None => self.inner.append_audit(&entry).await,
            };
            match written {
                Ok(_) => {}
                Err(e) if e.is_unavailable() => return,
                Err(e) => tracing::error!(error = %e, action = %entry.action, "held audit row refused; set aside"),
            }
            self.lock().rows.pop_front();
        }
        let lost = {
            let mut held = self.lock();
            let count = std::mem::take(&mut held.lost);
            held.last_lost.take().filter(|_| count > 0).map(|last| (count, last))
        };
        if let Some((count, last)) = lost {
            let summary = AuditEntry {
                actor: "tradeops".into(),
                role: None,
                action: "audit.rows_lost".into(),
                target: "audit".into(),
                request: serde_json::json!({"count": count, "reason": "the database was unavailable and the outbox was full"})
                    .to_string(),
                outcome: "SERVICE_UNAVAILABLE".into(),
                ..last
            };
            if self.inner.append_audit(&summary).await.is_err() {
                let mut held = self.lock();
                held.lost += count;
                held.last_lost.get_or_insert(summary);
            }
        }
    }
}

#[async_trait]
impl AuditRepository for AuditOutbox {
    /// Appends the row, behind any still held (the background task writes those; a request
    /// never waits for them). While the database is unavailable the row is held and `Ok(0)`
    /// returned (no id yet).
    async fn append_audit(&self, entry: &AuditEntry) -> Result<i64, StoreError> {
        if self.held() > 0 {
            self.hold(entry, None);
            return Ok(0);
        }
        let (inner, row) = (self.inner.clone(), entry.clone());
        let mut write = tokio::spawn(async move { inner.append_audit(&row).await });
        let written = match tokio::time::timeout(APPEND_TIMEOUT, &mut write).await {
            Ok(Ok(written)) => written,
            Ok(Err(e)) => Err(StoreError::Unavailable(format!("the audit write ended without an answer: {e}"))),
            // Not answered in time (a database that stopped answering, or one slow under load):
            // held with its write, which goes on, so the request is not held up and the row is
            // written again only if that write fails.
            Err(_) => {
                tracing::warn!(action = %entry.action, "audit row not written in time: held until its write ends");
                self.hold(entry, Some(write));
                return Ok(0);
            }
        };
        match written {
            Err(e) if e.is_unavailable() => {
                tracing::warn!(action = %entry.action, "audit row held until the database is back");
                self.hold(entry, None);
                Ok(0)
            }
            other => other,
        }
    }

    /// Lists what is stored, after writing what is held: a row held because its write was
    /// answered late (a database slow under load) is listed as soon as the database answers,
    /// so a refusal an operator was just shown is in the audit list read next. While the
    /// database is unavailable the flush stops at once and the list is refused as it would be.
    async fn list_audit(&self, filter: &AuditFilter) -> Result<Vec<AuditRecord>, StoreError> {
        if self.held() > 0 {
            self.flush_all().await;
        }
        self.inner.list_audit(filter).await
    }

    async fn update_audit_request(&self, audit_id: i64, request: &str) -> Result<(), StoreError> {
        self.inner.update_audit_request(audit_id, request).await
    }

    async fn prune_audit(&self, before_ts: i64) -> Result<u64, StoreError> {
        self.inner.prune_audit(before_ts).await
    }

    async fn has_audit_row(&self, entry: &AuditEntry) -> Result<bool, StoreError> {
        self.inner.has_audit_row(entry).await
    }

    async fn flush_held(&self) {
        self.flush_all().await;
    }

    fn held_rows(&self) -> usize {
        self.held()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};

    /// An audit log that is down until told otherwise, and takes `write_time` per write.
    #[derive(Default)]
    struct Flaky {
        up: AtomicBool,
        rows: Arc<Mutex<Vec<AuditEntry>>>,
        write_time: Duration,
        /// A write stores its row after `write_time` even when its caller stopped waiting (a
        /// database that commits an insert whose answer came too late).
        lands_late: bool,
    }

    #[async_trait]
    impl AuditRepository for Flaky {
        async fn append_audit(&self, entry: &AuditEntry) -> Result<i64, StoreError> {
            if !self.up.load(Ordering::SeqCst) {
                return Err(StoreError::Unavailable("down".into()));
            }
            if self.lands_late {
                let (rows, entry, wait) = (self.rows.clone(), entry.clone(), self.write_time);
                let landed = tokio::spawn(async move {
                    tokio::time::sleep(wait).await;
                    let mut rows = rows.lock().unwrap();
                    rows.push(entry);
                    rows.len() as i64
                });
                return Ok(landed.await.unwrap());
            }
            tokio::time::sleep(self.write_time).await;
            let mut rows = self.rows.lock().unwrap();
            rows.push(entry.clone());
            Ok(rows.len() as i64)
        }
        async fn list_audit(&self, _: &AuditFilter) -> Result<Vec<AuditRecord>, StoreError> {
            let rows = self.rows.lock().unwrap();
            Ok(rows.iter().enumerate().map(|(i, e)| AuditRecord { audit_id: i as i64 + 1, entry: e.clone() }).collect())
        }
        async fn update_audit_request(&self, _: i64, _: &str) -> Result<(), StoreError> {
            Ok(())
        }
        async fn prune_audit(&self, _: i64) -> Result<u64, StoreError> {
            Ok(0)
        }
        async fn has_audit_row(&self, entry: &AuditEntry) -> Result<bool, StoreError> {
            Ok(self.rows.lock().unwrap().contains(entry))
        }
    }

    fn entry(action: &str) -> AuditEntry {
        AuditEntry {
            ts: 1,
            wall_ts: 1,
            actor: "ops".into(),
            role: Some("operator".into()),
            action: action.into(),
            target: "trading".into(),
            request: "{}".into(),
            outcome: "OK".into(),
            mode: "PAPER".into(),
            request_id: "r".into(),
        }
    }

    #[tokio::test]
    async fn rows_written_during_an_outage_are_stored_in_order_when_it_ends() {
        let log = Arc::new(Flaky::default());
        let outbox = AuditOutbox::wrap(log.clone());
        assert_eq!(outbox.append_audit(&entry("first")).await.unwrap(), 0);
        assert_eq!(outbox.append_audit(&entry("second")).await.unwrap(), 0);
        assert_eq!(outbox.held(), 2);
        log.up.store(true, Ordering::SeqCst);
        // A new row goes behind the held ones, which the flush writes in order, once each even
        // when two flushes run at once.
        assert_eq!(outbox.append_audit(&entry("third")).await.unwrap(), 0);
        tokio::join!(outbox.flush(), outbox.flush());
        let actions: Vec<_> = log.rows.lock().unwrap().iter().map(|r| r.action.clone()).collect();
        assert_eq!(actions, ["first", "second", "third"]);
        assert_eq!(outbox.held(), 0);
        assert_eq!(outbox.append_audit(&entry("fourth")).await.unwrap(), 4, "written at once again");
    }

    /// At shutdown the service writes what is held: it waits for the background retry that is
    /// writing the first row instead of returning while rows are still held.
    #[tokio::test(start_paused = true)]
    async fn the_last_flush_waits_for_the_retry_in_progress() {
        let log = Arc::new(Flaky { write_time: Duration::from_millis(100), ..Flaky::default() });
        let outbox = AuditOutbox::wrap(log.clone());
        outbox.append_audit(&entry("halt")).await.unwrap();
        outbox.append_audit(&entry("resume")).await.unwrap();
        log.up.store(true, Ordering::SeqCst);
        let retry = tokio::spawn({
            let outbox = outbox.clone();
            async move { outbox.flush().await }
        });
        tokio::time::sleep(Duration::from_millis(10)).await; // the retry is writing "halt"
        outbox.flush_held().await;
        assert_eq!(outbox.held(), 0, "nothing left held when the service closes the database");
        let actions: Vec<_> = log.rows.lock().unwrap().iter().map(|r| r.action.clone()).collect();
        assert_eq!(actions, ["halt", "resume"]);
        retry.await.unwrap();
    }

    /// A write answered too late is held, and may have been stored after all: the flush finds
    /// it stored and does not write it twice (a duplicate CI caught under load).
    #[tokio::test(start_paused = true)]
    async fn a_row_whose_write_timed_out_but_landed_is_not_stored_twice() {
        let log = Arc::new(Flaky { write_time: APPEND_TIMEOUT * 2, lands_late: true, ..Flaky::default() });
        log.up.store(true, Ordering::SeqCst);
        let outbox = AuditOutbox::wrap(log.clone());
        assert_eq!(outbox.append_audit(&entry("block")).await.unwrap(), 0, "held: not answered in time");
        assert_eq!(outbox.held(), 1);
        tokio::time::sleep(APPEND_TIMEOUT * 3).await; // the first write lands
        outbox.flush_held().await;
        let actions: Vec<_> = log.rows.lock().unwrap().iter().map(|r| r.action.clone()).collect();
        assert_eq!(actions, ["block"], "once");
        assert_eq!(outbox.held(), 0);
    }

    /// A write answered too late goes on, and the flush that comes before it lands waits for
    /// it instead of writing the row beside it: one row (it was two when the flush looked the
    /// row up before the late write had landed, and wrote it again).
    #[tokio::test(start_paused = true)]
    async fn a_row_flushed_while_its_late_write_is_under_way_is_stored_once() {
        let log = Arc::new(Flaky { write_time: APPEND_TIMEOUT * 3, lands_late: true, ..Flaky::default() });
        log.up.store(true, Ordering::SeqCst);
        let outbox = AuditOutbox::wrap(log.clone());
        assert_eq!(outbox.append_audit(&entry("cancel")).await.unwrap(), 0, "held: not answered in time");
        outbox.flush_held().await; // before the first write lands
        let actions: Vec<_> = log.rows.lock().unwrap().iter().map(|r| r.action.clone()).collect();
        assert_eq!(actions, ["cancel"], "once");
        assert_eq!(outbox.held(), 0);
    }

    /// A row held because its write was answered late is in the list read right after: the
    /// refused request an operator just saw is in the audit (a list that skipped it missed a
    /// refusal under load in CI).
    #[tokio::test(start_paused = true)]
    async fn a_list_includes_a_row_whose_write_was_answered_late() {
        let log = Arc::new(Flaky { write_time: APPEND_TIMEOUT * 3, ..Flaky::default() });
        log.up.store(true, Ordering::SeqCst);
        let outbox = AuditOutbox::wrap(log.clone());
        assert_eq!(outbox.append_audit(&entry("block")).await.unwrap(), 0, "held: not answered in time");
        let listed = outbox.list_audit(&AuditFilter::default()).await.unwrap();
        let actions: Vec<_> = listed.iter().map(|r| r.entry.action.as_str()).collect();
        assert_eq!(actions, ["block"]);
        assert_eq!(outbox.held(), 0);
    }

    #[tokio::test]
    async fn past_the_bound_the_rows_not_kept_are_counted_in_one_row() {
        let log = Arc::new(Flaky::default());
        let outbox = AuditOutbox::wrap(log.clone());
        for _ in 0..MAX_HELD + 5 {
            outbox.append_audit(&entry("flood")).await.unwrap();
        }
        assert_eq!(outbox.held(), MAX_HELD);
        log.up.store(true, Ordering::SeqCst);
        outbox.flush().await;
        let rows = log.rows.lock().unwrap();
        assert_eq!(rows.len(), MAX_HELD + 1);
        let summary = rows.last().unwrap();
        assert_eq!(summary.action, "audit.rows_lost");
        assert!(summary.request.contains("\"count\":5"), "{}", summary.request);
    }
}
