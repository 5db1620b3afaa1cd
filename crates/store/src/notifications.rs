//! Deliveries of notifications to the operator's phone and team chat (CONTRACT §13): one row
//! per notice and channel, with its status (`RETRYING`: not delivered yet, queued or between
//! attempts; `SENT`; `FAILED`; `FOLDED` into a digest), its attempts and its last error.
//!
//! The dispatcher records a notice's deliveries before it sends any of them, and brings each up
//! to date as it goes. Recording first is what makes a failover neither lose nor repeat a
//! notification: a new leader finds in [`Database::pending_deliveries`] what the old one had not
//! sent (with the message, kept as JSON text, to send it again), and a notice recorded already is
//! reported as such by [`Database::record_deliveries`], so it is not sent a second time. The
//! writes go through `Database::begin`, so a handle fenced to an engine term that is over
//! ([`Database::fenced`]) records and updates nothing.

use sqlx::any::AnyRow;
use sqlx::Row;

use crate::db::{Database, StoreError};

/// A delivery to record before sending: one notice to one channel.
#[derive(Clone, Debug, PartialEq)]
pub struct NewDelivery {
    /// The notice's id: an event-bus id as text, `test-…`, `summary-YYYY-MM-DD`, `digest-…`.
    pub event_id: String,
    /// The channel's configured name.
    pub channel: String,
    /// The event kind (`order.filled`, `test`, `digest`, …).
    pub kind: String,
    /// Never dropped nor folded into a digest (`risk.*`, `position.stopped_out`, …).
    pub critical: bool,
    /// `RETRYING` (to send) or `FOLDED` (folded into a digest as it was recorded).
    pub status: String,
    /// The notice as JSON text, so that a new leader can send it again.
    pub message: String,
    /// Wall time, epoch ms.
    pub created_at: i64,
}

/// A stored delivery.
#[derive(Clone, Debug, PartialEq)]
pub struct DeliveryRecord {
    pub delivery_id: i64,
    pub event_id: String,
    pub channel: String,
    pub kind: String,
    pub critical: bool,
    /// `RETRYING`, `SENT`, `FAILED` or `FOLDED`.
    pub status: String,
    pub attempts: i64,
    pub message: String,
    /// Wall times, epoch ms.
    pub created_at: i64,
    pub sent_at: Option<i64>,
    /// Why the last attempt failed.
    pub error: Option<String>,
}

/// One channel's deliveries, counted (`GET /api/notifications/channels`).
#[derive(Clone, Debug, PartialEq)]
pub struct DeliveryCounts {
    pub channel: String,
    pub sent: i64,
    pub failed: i64,
    pub folded: i64,
    pub last_sent_at: Option<i64>,
    /// The error of the most recent `FAILED` or `RETRYING` delivery that has one.
    pub last_error: Option<String>,
}

const DELIVERY_COLUMNS: &str =
    "delivery_id, event_id, channel, kind, critical, status, attempts, message, created_at, sent_at, error";

fn delivery_row(r: &AnyRow) -> Result<DeliveryRecord, StoreError> {
    Ok(DeliveryRecord {
        delivery_id: r.try_get("delivery_id")?,
        event_id: r.try_get("event_id")?,
        channel: r.try_get("channel")?,
        kind: r.try_get("kind")?,
        critical: r.try_get::<i64, _>("critical")? != 0,
        status: r.try_get("status")?,
        attempts: r.try_get("attempts")?,
        message: r.try_get("message")?,
        created_at: r.try_get("created_at")?,
        sent_at: r.try_get("sent_at")?,
        error: r.try_get("error")?,
    })
}

impl Database {
    /// Records the deliveries of one notice in one transaction, each `RETRYING` with no attempt
    /// yet (through `Database::begin`: a fenced handle whose term has passed is refused with
    /// [`StoreError::Fenced`] and records nothing). A (event_id, channel) already recorded is
    /// left as it is. Returns, in the order given, each row's `delivery_id` and whether this call
    /// inserted it (false: it was there already, and the caller must not send it again).
    pub async fn record_deliveries(&self, rows: &[NewDelivery]) -> Result<Vec<(i64, bool)>, StoreError> {
        if rows.is_empty() {
            return Ok(Vec::new());
        }
        let mut tx = self.begin().await?;
        let mut recorded = Vec::with_capacity(rows.len());
        for d in rows {
            let inserted = sqlx::query(
                "INSERT INTO notification_deliveries (event_id, channel, kind, critical, status, attempts, message, \
                 created_at) VALUES ($1, $2, $3, $4, $5, 0, $6, $7) \
                 ON CONFLICT (event_id, channel) DO NOTHING RETURNING delivery_id",
            )
            .bind(&d.event_id)
            .bind(&d.channel)
            .bind(&d.kind)
            .bind(i64::from(d.critical))
            .bind(&d.status)
            .bind(&d.message)
            .bind(d.created_at)
            .fetch_optional(&mut *tx)
            .await?;
            let entry = match inserted {
                Some(row) => (row.try_get("delivery_id")?, true),
                None => {
                    let row = sqlx::query(
                        "SELECT delivery_id FROM notification_deliveries WHERE event_id = $1 AND channel = $2",
                    )
                    .bind(&d.event_id)
                    .bind(&d.channel)
                    .fetch_one(&mut *tx)
                    .await?;
                    (row.try_get("delivery_id")?, false)
                }
            };
            recorded.push(entry);
        }
        tx.commit().await?;
        Ok(recorded)
    }

    /// Sets a delivery's status, attempts, sent_at and error (through `Database::begin`:
    /// fenced like [`Database::record_deliveries`]). An unknown id changes nothing.
    pub async fn update_delivery(
        &self,
        delivery_id: i64,
        status: &str,
        attempts: i64,
        sent_at: Option<i64>,
        error: Option<&str>,
    ) -> Result<(), StoreError> {
        let mut tx = self.begin().await?;
        sqlx::query(
            "UPDATE notification_deliveries SET status = $1, attempts = $2, sent_at = $3, error = $4 \
             WHERE delivery_id = $5",
        )
        .bind(status)
        .bind(attempts)
        .bind(sent_at)
        .bind(error)
        .bind(delivery_id)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    /// The deliveries still to send (status `RETRYING`), oldest first, at most `limit`.
    pub async fn pending_deliveries(&self, limit: i64) -> Result<Vec<DeliveryRecord>, StoreError> {
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {DELIVERY_COLUMNS} FROM notification_deliveries WHERE status = 'RETRYING' \
             ORDER BY delivery_id LIMIT $1"
        )))
        .bind(limit)
        .fetch_all(self.pool()?)
        .await?;
        rows.iter().map(delivery_row).collect()
    }

    /// One page of deliveries, newest first: of `channel` when given, before `before_id` (the
    /// cursor: the last `delivery_id` of the previous page) when given, at most `limit`.
    pub async fn deliveries(
        &self,
        channel: Option<&str>,
        before_id: Option<i64>,
        limit: i64,
    ) -> Result<Vec<DeliveryRecord>, StoreError> {
        // `($n IS NULL OR …)` keeps the SQL static, the same on both backends.
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {DELIVERY_COLUMNS} FROM notification_deliveries \
             WHERE ($1 IS NULL OR channel = $1) AND ($2 IS NULL OR delivery_id < $2) \
             ORDER BY delivery_id DESC LIMIT $3"
        )))
        .bind(channel)
        .bind(before_id)
        .bind(limit)
        .fetch_all(self.pool()?)
        .await?;
        rows.iter().map(delivery_row).collect()
    }

    /// One delivery by its notice and channel.
    pub async fn delivery(&self, event_id: &str, channel: &str) -> Result<Option<DeliveryRecord>, StoreError> {
        let row = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {DELIVERY_COLUMNS} FROM notification_deliveries WHERE event_id = $1 AND channel = $2"
        )))
        .bind(event_id)
        .bind(channel)
        .fetch_optional(self.pool()?)
        .await?;
        row.as_ref().map(delivery_row).transpose()
    }

    /// Per channel (by name): how many deliveries were `SENT`, `FAILED` and `FOLDED`, the last
    /// `sent_at`, and the error of the most recent `FAILED` or `RETRYING` delivery that has one.
    pub async fn delivery_counts(&self) -> Result<Vec<DeliveryCounts>, StoreError> {
        let rows = sqlx::query(
            "SELECT d.channel AS channel, \
                    COUNT(CASE WHEN d.status = 'SENT' THEN 1 END) AS sent, \
                    COUNT(CASE WHEN d.status = 'FAILED' THEN 1 END) AS failed, \
                    COUNT(CASE WHEN d.status = 'FOLDED' THEN 1 END) AS folded, \
                    MAX(d.sent_at) AS last_sent_at, \
                    (SELECT e.error FROM notification_deliveries e \
                      WHERE e.channel = d.channel AND e.status IN ('FAILED', 'RETRYING') AND e.error IS NOT NULL \
                      ORDER BY e.delivery_id DESC LIMIT 1) AS last_error \
             FROM notification_deliveries d GROUP BY d.channel ORDER BY d.channel",
        )
        .fetch_all(self.pool()?)
        .await?;
        rows.iter()
            .map(|r| {
                Ok(DeliveryCounts {
                    channel: r.try_get("channel")?,
                    sent: r.try_get("sent")?,
                    failed: r.try_get("failed")?,
                    folded: r.try_get("folded")?,
                    last_sent_at: r.try_get("last_sent_at")?,
                    last_error: r.try_get("last_error")?,
                })
            })
            .collect()
    }

    /// Deletes the deliveries created before `before_ms` that are no longer pending (retention:
    /// a `RETRYING` one is kept, whatever its age, until it is sent or given up); how many.
    pub async fn prune_deliveries(&self, before_ms: i64) -> Result<u64, StoreError> {
        self.delete_in_batches(
            "DELETE FROM notification_deliveries WHERE delivery_id IN \
             (SELECT delivery_id FROM notification_deliveries WHERE created_at < $1 AND status <> 'RETRYING' \
              ORDER BY delivery_id LIMIT $2)",
            before_ms,
        )
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_databases::{databases, drop_postgres};

    fn notice(event_id: &str, channel: &str, created_at: i64) -> NewDelivery {
        NewDelivery {
            event_id: event_id.into(),
            channel: channel.into(),
            kind: "order.filled".into(),
            critical: false,
            status: "RETRYING".into(),
            message: format!(r#"{{"event_id":"{event_id}"}}"#),
            created_at,
        }
    }

    fn event_ids(rows: &[DeliveryRecord]) -> Vec<&str> {
        rows.iter().map(|r| r.event_id.as_str()).collect()
    }

    /// A notice recorded again (a new leader replaying what the old one recorded) is reported as
    /// there already, and the stored row keeps its status: it is not sent twice.
    #[tokio::test]
    async fn a_delivery_recorded_twice_is_kept_as_it_was_and_not_sent_again() {
        for (db, _dir, admin) in databases().await {
            let backend = db.backend().name();
            let mut stop = notice("42", "phone", 10);
            stop.kind = "position.stopped_out".into();
            stop.critical = true;
            let first = db.record_deliveries(&[stop.clone(), notice("42", "team", 10)]).await.unwrap();
            assert!(first.iter().all(|&(_, inserted)| inserted), "{backend}: {first:?}");
            assert_ne!(first[0].0, first[1].0, "{backend}");
            db.update_delivery(first[0].0, "SENT", 1, Some(11), None).await.unwrap();

            let again = db.record_deliveries(&[notice("43", "phone", 12), stop.clone()]).await.unwrap();
            assert!(again[0].1, "{backend}: a new notice is inserted");
            assert_eq!(again[1], (first[0].0, false), "{backend}: the one recorded already is reported so");
            let stored = db.delivery("42", "phone").await.unwrap().expect("recorded");
            assert_eq!(
                stored,
                DeliveryRecord {
                    delivery_id: first[0].0,
                    event_id: "42".into(),
                    channel: "phone".into(),
                    kind: "position.stopped_out".into(),
                    critical: true,
                    status: "SENT".into(),
                    attempts: 1,
                    message: stop.message.clone(),
                    created_at: 10,
                    sent_at: Some(11),
                    error: None,
                },
                "{backend}: left as it was"
            );
            assert_eq!(db.delivery("42", "pager").await.unwrap(), None, "{backend}");
            db.close().await;
            drop_postgres(admin).await;
        }
    }

    /// Pending deliveries are the `RETRYING` ones, oldest first: a delivery sent (or given up,
    /// or folded) is no longer listed; one between attempts still is, with its error.
    #[tokio::test]
    async fn a_sent_delivery_is_no_longer_pending() {
        for (db, _dir, admin) in databases().await {
            let backend = db.backend().name();
            let ids: Vec<i64> = db
                .record_deliveries(&[notice("1", "phone", 1), notice("2", "phone", 2), notice("3", "phone", 3)])
                .await
                .unwrap()
                .into_iter()
                .map(|(id, _)| id)
                .collect();
            let pending = db.pending_deliveries(10).await.unwrap();
            assert_eq!(event_ids(&pending), ["1", "2", "3"], "{backend}");
            assert!(pending.iter().all(|d| d.status == "RETRYING" && d.attempts == 0), "{backend}");
            assert_eq!(event_ids(&db.pending_deliveries(2).await.unwrap()), ["1", "2"], "{backend}: at most limit");

            db.update_delivery(ids[0], "SENT", 1, Some(5), None).await.unwrap();
            db.update_delivery(ids[1], "RETRYING", 2, None, Some("429 Too Many Requests")).await.unwrap();
            let pending = db.pending_deliveries(10).await.unwrap();
            assert_eq!(event_ids(&pending), ["2", "3"], "{backend}");
            assert_eq!((pending[0].attempts, pending[0].error.as_deref()), (2, Some("429 Too Many Requests")));
            db.update_delivery(ids[1], "FAILED", 5, None, Some("gave up")).await.unwrap();
            db.update_delivery(ids[2], "FOLDED", 0, None, None).await.unwrap();
            assert!(db.pending_deliveries(10).await.unwrap().is_empty(), "{backend}");
            db.close().await;
            drop_postgres(admin).await;
        }
    }

    /// Pages newest first, each continuing below the previous page's last id, of one channel or
    /// of all.
    #[tokio::test]
    async fn deliveries_are_paged_newest_first_with_a_cursor_and_filtered_by_channel() {
        for (db, _dir, admin) in databases().await {
            let backend = db.backend().name();
            for n in 1..=5 {
                let id = n.to_string();
                db.record_deliveries(&[notice(&id, "phone", n), notice(&id, "team", n)]).await.unwrap();
            }
            let all = db.deliveries(None, None, 100).await.unwrap();
            assert_eq!(all.len(), 10, "{backend}");
            assert!(all.windows(2).all(|w| w[0].delivery_id > w[1].delivery_id), "{backend}: newest first");

            let first = db.deliveries(Some("team"), None, 2).await.unwrap();
            assert_eq!(event_ids(&first), ["5", "4"], "{backend}");
            assert!(first.iter().all(|d| d.channel == "team"), "{backend}");
            let second = db.deliveries(Some("team"), Some(first[1].delivery_id), 2).await.unwrap();
            assert_eq!(event_ids(&second), ["3", "2"], "{backend}");
            let third = db.deliveries(Some("team"), Some(second[1].delivery_id), 2).await.unwrap();
            assert_eq!(event_ids(&third), ["1"], "{backend}: the last page");
            assert!(third.iter().all(|d| d.channel == "team"), "{backend}");
            assert!(db.deliveries(Some("pager"), None, 10).await.unwrap().is_empty(), "{backend}");
            let below = db.deliveries(None, Some(all[2].delivery_id), 100).await.unwrap();
            assert_eq!(below, all[3..], "{backend}: every channel below the cursor");
            db.close().await;
            drop_postgres(admin).await;
        }
    }

    /// Per channel: sent, failed and folded counted, the last send, and the newest error of a
    /// delivery that failed or is being retried (a sent one's old error does not count).
    #[tokio::test]
    async fn delivery_counts_per_channel_with_the_last_send_and_error() {
        for (db, _dir, admin) in databases().await {
            let backend = db.backend().name();
            let rows: Vec<NewDelivery> = (1..=6).map(|n| notice(&n.to_string(), "phone", n)).collect();
            let ids: Vec<i64> = db.record_deliveries(&rows).await.unwrap().into_iter().map(|(id, _)| id).collect();
            db.record_deliveries(&[notice("1", "team", 1)]).await.unwrap();
            db.update_delivery(ids[0], "SENT", 1, Some(100), None).await.unwrap();
            db.update_delivery(ids[1], "SENT", 3, Some(300), Some("timed out")).await.unwrap();
            db.update_delivery(ids[2], "FAILED", 5, None, Some("401 Unauthorized")).await.unwrap();
            db.update_delivery(ids[3], "RETRYING", 1, None, Some("502 Bad Gateway")).await.unwrap();
            db.update_delivery(ids[4], "FOLDED", 0, None, None).await.unwrap();

            let counts = db.delivery_counts().await.unwrap();
            assert_eq!(
                counts,
                [
                    DeliveryCounts {
                        channel: "phone".into(),
                        sent: 2,
                        failed: 1,
                        folded: 1,
                        last_sent_at: Some(300),
                        last_error: Some("502 Bad Gateway".into()),
                    },
                    DeliveryCounts {
                        channel: "team".into(),
                        sent: 0,
                        failed: 0,
                        folded: 0,
                        last_sent_at: None,
                        last_error: None,
                    },
                ],
                "{backend}"
            );
            db.close().await;
            drop_postgres(admin).await;
        }
    }

    /// A leader whose term was taken over records nothing more (the new leader records and sends
    /// instead), nor updates what it had recorded.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_fenced_handle_whose_term_is_over_records_nothing() {
        for (db, _dir, admin) in databases().await {
            let backend = db.backend().name();
            let first = db.take_engine_epoch("node-a", 1).await.unwrap();
            let old = db.fenced(first);
            let (id, inserted) = old.record_deliveries(&[notice("1", "phone", 1)]).await.unwrap()[0];
            assert!(inserted, "{backend}: the term's own write");

            let second = db.take_engine_epoch("node-b", 2).await.unwrap();
            let refused = old.record_deliveries(&[notice("2", "phone", 2), notice("2", "team", 2)]).await.unwrap_err();
            assert!(matches!(refused, StoreError::Fenced { epoch } if epoch == first), "{backend}: {refused:?}");
            let update = old.update_delivery(id, "SENT", 1, Some(3), None).await;
            assert!(matches!(update, Err(StoreError::Fenced { .. })), "{backend}: {update:?}");
            let stored = db.deliveries(None, None, 10).await.unwrap();
            assert_eq!(event_ids(&stored), ["1"], "{backend}: nothing recorded after the takeover");
            assert_eq!(stored[0].status, "RETRYING", "{backend}: nor updated");

            let new = db.fenced(second);
            assert_eq!(new.record_deliveries(&[notice("1", "phone", 1)]).await.unwrap(), [(id, false)], "{backend}");
            new.update_delivery(id, "SENT", 1, Some(3), None).await.unwrap();
            assert!(db.pending_deliveries(10).await.unwrap().is_empty(), "{backend}");
            db.close().await;
            drop_postgres(admin).await;
        }
    }

    /// Retention deletes old deliveries that are done with, never one still to send.
    #[tokio::test]
    async fn pruning_keeps_pending_deliveries() {
        for (db, _dir, admin) in databases().await {
            let backend = db.backend().name();
            let rows: Vec<NewDelivery> = (1..=4).map(|n| notice(&n.to_string(), "phone", n * 10)).collect();
            let ids: Vec<i64> = db.record_deliveries(&rows).await.unwrap().into_iter().map(|(id, _)| id).collect();
            db.update_delivery(ids[0], "SENT", 1, Some(11), None).await.unwrap();
            db.update_delivery(ids[1], "FAILED", 5, None, Some("gave up")).await.unwrap();
            // ids[2] (created at 30) stays RETRYING; ids[3] (created at 40) is SENT but recent.
            db.update_delivery(ids[3], "SENT", 1, Some(41), None).await.unwrap();

            assert_eq!(db.prune_deliveries(35).await.unwrap(), 2, "{backend}");
            let left = db.deliveries(None, None, 10).await.unwrap();
            assert_eq!(event_ids(&left), ["4", "3"], "{backend}: the recent one and the pending one");
            assert_eq!(db.prune_deliveries(1_000).await.unwrap(), 1, "{backend}");
            assert_eq!(event_ids(&db.pending_deliveries(10).await.unwrap()), ["3"], "{backend}");
            db.close().await;
            drop_postgres(admin).await;
        }
    }
}
