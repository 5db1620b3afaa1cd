//! Fencing on a real database: SQLite always, PostgreSQL too when
//! `TRADEOPS_TEST_DATABASE_URL` is set (a fresh database each test; required where
//! `TRADEOPS_REQUIRE_SERVICES` is set). A handle fenced to an engine term writes trading state
//! while that term lasts and nothing once a newer engine took over; on PostgreSQL a takeover
//! waits for a write in flight.

use std::time::Duration;

use crate::test_databases::{databases, drop_postgres, postgres};
use crate::{BlockRecord, MarketRepository, StoreError, ViolationRecord, WatchRecord};

fn violation(ts: i64) -> ViolationRecord {
    ViolationRecord {
        violation_id: 0,
        ts,
        rule: "MAX_ORDER_VALUE".into(),
        symbol: Some("ABCD".into()),
        client_order_id: None,
        detail: "{}".into(),
    }
}

fn block(symbol: &str, at: i64) -> BlockRecord {
    BlockRecord {
        block_id: 0,
        symbol: symbol.into(),
        block_scope: "PERMANENT".into(),
        reason: "test".into(),
        actor: "ops".into(),
        effective_from: at,
        expires_at: None,
    }
}

/// A block placed over another replaces it in one transaction: one active block, the old one
/// lifted by the new one's actor.
#[tokio::test]
async fn a_new_block_replaces_the_active_one_at_once() {
    for (db, _dir, admin) in databases().await {
        let backend = db.backend().name();
        let term = db.fenced(db.take_engine_epoch("node-a", 1).await.unwrap());
        let first = term.replace_block(&block("ABCD", 10), 10, "replaced").await.unwrap();
        let second = term.replace_block(&block("ABCD", 20), 20, "replaced by a new block").await.unwrap();
        assert_ne!(first, second);
        let active = db.active_blocks(30).await.unwrap();
        assert_eq!(active.iter().map(|b| b.block_id).collect::<Vec<_>>(), vec![second], "{backend}");
        db.close().await;
        drop_postgres(admin).await;
    }
}

fn watch(symbol: &str) -> WatchRecord {
    WatchRecord {
        symbol: symbol.into(),
        source: "MANUAL".into(),
        strategy_id: "momentum_breakout".into(),
        strategy_version: "1.0.0".into(),
        strategy_status: "Active".into(),
        polling_status: "POLLING".into(),
        time_added: 1,
        time_closed: None,
        time_completed: None,
        reason: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_engine_writes_while_its_term_lasts_and_nothing_once_taken_over() {
    for (db, _dir, admin) in databases().await {
        let backend = db.backend().name();
        let (start, _) = db.engine_epoch().await.unwrap();
        let first = db.take_engine_epoch("node-a", 1_000).await.unwrap();
        assert_eq!(first, start + 1, "{backend}: each start moves the term on");
        assert_eq!(db.engine_epoch().await.unwrap(), (first, Some("node-a".into())), "{backend}");
        let old = db.fenced(first);
        assert_eq!(old.fence(), Some(first));
        old.insert_violation(&violation(1)).await.unwrap();
        old.put_watch_row(&watch("ABCD")).await.unwrap();

        let second = db.take_engine_epoch("node-b", 2_000).await.unwrap();
        assert_eq!(second, first + 1, "{backend}");
        let refused = old.insert_violation(&violation(2)).await.unwrap_err();
        assert!(matches!(refused, StoreError::Fenced { epoch } if epoch == first), "{backend}: {refused:?}");
        assert!(!refused.is_unavailable(), "{backend}: a fenced write is never held to retry");
        assert!(matches!(old.put_watch_row(&watch("EFGH")).await, Err(StoreError::Fenced { .. })), "{backend}");
        assert!(matches!(old.lift_blocks("ABCD", 3, "x", "y").await, Err(StoreError::Fenced { .. })), "{backend}");
        assert!(
            matches!(old.replace_block(&block("ABCD", 3), 3, "replaced").await, Err(StoreError::Fenced { .. })),
            "{backend}"
        );
        // An old term cannot mark a halt applied that it may never have applied.
        let halt = db.request_halt("test", "ops", "node-c", "r-1", 3).await.unwrap();
        assert!(matches!(old.mark_halts_applied(halt, first, 3).await, Err(StoreError::Fenced { .. })), "{backend}");
        assert_eq!(db.pending_halts().await.unwrap().len(), 1, "{backend}: still pending for the new term");

        let new = db.fenced(second);
        new.insert_violation(&violation(3)).await.unwrap();
        let stored: Vec<i64> = db.violations(10).await.unwrap().iter().map(|v| v.ts).collect();
        assert_eq!(stored, vec![3, 1], "{backend}: the old term's write after the takeover left nothing");
        let watched: Vec<String> = db.watch_rows().await.unwrap().into_iter().map(|w| w.symbol).collect();
        assert_eq!(watched, vec!["ABCD".to_string()], "{backend}");
        // Reads and the service's own writes are not the engine's: unfenced, they go on.
        assert_eq!(db.fence(), None);
        db.insert_violation(&violation(4)).await.unwrap();
        db.close().await;
        drop_postgres(admin).await;
    }
}

/// PostgreSQL: a takeover waits for the old engine's transaction in flight (whose write the new
/// engine then reads at its restore), and the old engine's next transaction is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_takeover_waits_for_the_write_in_flight_then_refuses_the_next() {
    let Some((db, _, admin)) = postgres().await else { return };
    let first = db.take_engine_epoch("node-a", 1).await.unwrap();
    let old = db.fenced(first);
    let mut tx = old.begin().await.unwrap();
    sqlx::query(
        "INSERT INTO risk_violations (ts, rule, symbol, client_order_id, detail) VALUES (7, 'R', NULL, NULL, '{}')",
    )
    .execute(&mut *tx)
    .await
    .unwrap();
    let other = db.clone();
    let takeover = tokio::spawn(async move { other.take_engine_epoch("node-b", 2).await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!takeover.is_finished(), "the takeover waits while the old term's transaction holds its row");
    tx.commit().await.unwrap();
    let second = tokio::time::timeout(Duration::from_secs(10), takeover).await.unwrap().unwrap().unwrap();
    assert_eq!(second, first + 1);
    let seen: Vec<i64> = db.violations(10).await.unwrap().iter().map(|v| v.ts).collect();
    assert_eq!(seen, vec![7], "the write that finished before the takeover is there for the new engine");
    assert!(matches!(old.begin().await, Err(StoreError::Fenced { .. })));
    db.close().await;
    drop_postgres(admin).await;
}

/// PostgreSQL: the holder's renewal does not wait for its engine's write in flight (which holds
/// the fence `FOR SHARE`), so a slow write never lapses the holder's sending window; a takeover
/// still waits for that write, and a renewal sent while the takeover waits finds the term gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renewal_does_not_wait_for_the_engines_write_in_flight_a_takeover_does() {
    let Some((db, _, admin)) = postgres().await else { return };
    let start = db.engine_lease().await.unwrap();
    let first = db.take_engine_term_after(&start, "node-a", 1).await.unwrap().expect("taken");
    let old = db.fenced(first);
    let mut tx = old.begin().await.unwrap();
    sqlx::query(
        "INSERT INTO risk_violations (ts, rule, symbol, client_order_id, detail) VALUES (8, 'R', NULL, NULL, '{}')",
    )
    .execute(&mut *tx)
    .await
    .unwrap();
    let renewal = tokio::time::timeout(Duration::from_secs(5), db.renew_engine_term(first, "node-a", 2)).await;
    assert!(matches!(renewal, Ok(Ok(true))), "renewed while the write is in flight: {renewal:?}");

    let observed = db.engine_lease().await.unwrap();
    let other = db.clone();
    let takeover = tokio::spawn(async move { other.take_engine_term_after(&observed, "node-b", 3).await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!takeover.is_finished(), "the takeover waits for the old term's write in flight");
    let racing = db.clone();
    let late = tokio::spawn(async move { racing.renew_engine_term(first, "node-a", 4).await });
    tokio::time::sleep(Duration::from_millis(100)).await;
    tx.commit().await.unwrap();
    let second = tokio::time::timeout(Duration::from_secs(10), takeover).await.unwrap().unwrap().unwrap();
    assert_eq!(second, Some(first + 1));
    let late = tokio::time::timeout(Duration::from_secs(10), late).await.unwrap().unwrap().unwrap();
    assert!(!late, "a renewal racing the takeover finds the term taken");
    assert!(matches!(old.begin().await, Err(StoreError::Fenced { .. })));
    assert!(db.fenced(second.unwrap()).begin().await.is_ok(), "the new term writes");
    db.close().await;
    drop_postgres(admin).await;
}

/// The term's lease: one of several services taking over at once wins; only the holder renews;
/// a released term is free (holder `None`) for the next to take.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_term_is_taken_by_one_renewed_by_its_holder_and_released() {
    for (db, _dir, admin) in databases().await {
        let backend = db.backend().name();
        let start = db.engine_lease().await.unwrap();
        assert_eq!(
            (start.node_id.as_deref(), start.renew_seq),
            (None, 0),
            "{backend}: nobody holds a new database's term"
        );
        let a = db.take_engine_term_after(&start, "a", 10).await.unwrap().expect("a takes it");
        assert_eq!(
            db.take_engine_term_after(&start, "b", 11).await.unwrap(),
            None,
            "{backend}: b saw the old term: too late"
        );
        let held = db.engine_lease().await.unwrap();
        assert_eq!((held.epoch, held.node_id.as_deref()), (a, Some("a")), "{backend}");
        assert!(db.renew_engine_term(a, "a", 12).await.unwrap(), "{backend}");
        assert!(!db.renew_engine_term(a, "b", 12).await.unwrap(), "{backend}: only the holder renews");
        assert_eq!(db.engine_lease().await.unwrap().renew_seq, held.renew_seq + 1, "{backend}");
        // A taker that read the term before its last renewal is too late: the holder's window
        // runs from a renewal the taker never saw.
        assert_eq!(db.take_engine_term_after(&held, "b", 12).await.unwrap(), None, "{backend}: renewed since b looked");
        assert_eq!(db.engine_lease().await.unwrap().epoch, a, "{backend}");
        db.release_engine_term(a, "b").await.unwrap();
        assert_eq!(
            db.engine_lease().await.unwrap().node_id.as_deref(),
            Some("a"),
            "{backend}: only the holder releases"
        );
        db.release_engine_term(a, "a").await.unwrap();
        assert_eq!(db.engine_lease().await.unwrap().node_id, None, "{backend}");
        let released = db.engine_lease().await.unwrap();
        let b = db.take_engine_term_after(&released, "b", 13).await.unwrap().expect("b takes the released term");
        assert_eq!(b, a + 1);
        assert!(!db.renew_engine_term(a, "a", 14).await.unwrap(), "{backend}: a's term is over");
        db.close().await;
        drop_postgres(admin).await;
    }
}
