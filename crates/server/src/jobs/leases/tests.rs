//! The generic job operations on a real database: SQLite, or PostgreSQL when
//! `TRADEOPS_TEST_DATABASE_URL` is set (a fresh database each test), with a [`ManualClock`]
//! driving the leases.

use super::*;
use crate::jobs::{cancel, CancelError};
use tradeops_core::time::parse_ts;
use tradeops_core::ManualClock;
use tradeops_store::JobStatus;
use tradeops_store::{BacktestRecord, BacktestRepository, DataRepository, Database, JobRecord};

/// A database that lives as long as the value (the SQLite folder is deleted after).
struct TestDb(Database, #[allow(dead_code)] Option<tempfile::TempDir>);

async fn database() -> TestDb {
    match std::env::var("TRADEOPS_TEST_DATABASE_URL") {
        Ok(admin) if !admin.is_empty() => {
            let name = format!("tradeops_jobs_{}", uuid::Uuid::new_v4().simple());
            let db = Database::connect(&admin).await.expect("PostgreSQL reachable");
            db.execute_raw(&format!("CREATE DATABASE {name}")).await.expect("create test database");
            db.close().await;
            let (base, query) = admin.split_once('?').map(|(b, q)| (b, Some(q))).unwrap_or((&admin, None));
            let url = format!(
                "{}/{name}{}",
                &base[..base.rfind('/').unwrap()],
                query.map(|q| format!("?{q}")).unwrap_or_default()
            );
            TestDb(Database::open(&url).await.unwrap(), None)
        }
        _ => {
            let dir = tempfile::tempdir().unwrap();
            let db = Database::open(&format!("sqlite://{}/t.db", dir.path().display())).await.unwrap();
            TestDb(db, Some(dir))
        }
    }
}

fn clock() -> ManualClock {
    ManualClock::new(parse_ts("2026-11-20T15:00:00Z").unwrap())
}

fn worker(db: &Database, clock: &ManualClock) -> Leases {
    Leases::new(Arc::new(db.clone()), Arc::new(clock.clone()), super::LEASE)
}

fn download(id: &str, status: JobStatus) -> JobRecord {
    JobRecord {
        request_id: id.into(),
        symbol: "ABC".into(),
        timeframe: "1m".into(),
        start: 0,
        end: 86_400_000,
        status,
        progress: 0.4,
        bars: 576,
        error: None,
        requested_by: "admin".into(),
        created_at: 1,
        started_at: None,
        finished_at: None,
    }
}

fn backtest(id: &str, status: JobStatus) -> BacktestRecord {
    BacktestRecord {
        backtest_id: id.into(),
        strategy_id: "sma_cross".into(),
        symbol: "ABC".into(),
        status,
        progress: 0.4,
        request: "{}".into(),
        result: None,
        error: None,
        requested_by: "admin".into(),
        created_at: 1,
        started_at: None,
        finished_at: None,
    }
}

async fn status(db: &Database, id: &str) -> JobRecord {
    DataRepository::job(db, id).await.unwrap().unwrap()
}

#[tokio::test]
async fn a_queued_job_is_claimed_by_exactly_one_of_two_workers() {
    let TestDb(db, _dir) = database().await;
    let clock = clock();
    let (a, b) = (worker(&db, &clock), worker(&db, &clock));
    for n in 0..5 {
        let id = format!("dl-{n}");
        db.insert_job(&download(&id, JobStatus::Queued)).await.unwrap();
        let (took_a, took_b) = tokio::join!(a.claim(JobKind::Download, &id), b.claim(JobKind::Download, &id));
        assert!(took_a.unwrap() ^ took_b.unwrap(), "one claimant and only one takes {id}");
        assert_eq!(status(&db, &id).await.status, JobStatus::Running);
    }
    db.close().await;
}

/// Workers claim the oldest queued jobs, each a different one, even when they claim at the
/// same moment (on PostgreSQL a row being taken is skipped, not waited for); with nothing
/// queued a claim takes nothing. A worker that stops hands its running jobs back: queued
/// again at once (a backtest with its progress reset), and not another worker's.
#[tokio::test]
async fn workers_claim_the_oldest_queued_jobs_each_a_different_one() {
    let TestDb(db, _dir) = database().await;
    let clock = clock();
    let workers: Vec<Leases> = (0..4).map(|_| worker(&db, &clock)).collect();
    for n in 0..6 {
        let mut job = download(&format!("dl-{n}"), JobStatus::Queued);
        job.created_at = 10 - n; // dl-5 is the oldest
        db.insert_job(&job).await.unwrap();
    }
    let claims = futures::future::join_all(workers.iter().map(|w| w.claim_next(JobKind::Download))).await;
    let mut taken: Vec<String> = claims.into_iter().map(|c| c.unwrap().expect("a queued job for each")).collect();
    taken.sort();
    assert_eq!(taken, ["dl-2", "dl-3", "dl-4", "dl-5"], "the four oldest, one each");
    for id in &taken {
        assert_eq!(status(&db, id).await.status, JobStatus::Running);
    }
    assert_eq!(workers[0].claim_next(JobKind::Download).await.unwrap().as_deref(), Some("dl-1"));
    assert_eq!(workers[0].claim_next(JobKind::Download).await.unwrap().as_deref(), Some("dl-0"));
    assert_eq!(workers[1].claim_next(JobKind::Download).await.unwrap(), None, "nothing left queued");
    assert_eq!(workers[1].claim_next(JobKind::Backtest).await.unwrap(), None);

    db.insert_backtest(&backtest("bt-1", JobStatus::Queued)).await.unwrap();
    assert_eq!(workers[0].claim_next(JobKind::Backtest).await.unwrap().as_deref(), Some("bt-1"));
    let mut released = db.release_jobs(JobKind::Download, workers[0].owner(), Recovery::Resume).await.unwrap();
    released.sort();
    let mine: Vec<&str> = ["dl-0", "dl-1"].into_iter().filter(|id| released.contains(&id.to_string())).collect();
    assert_eq!(mine.len(), 2, "both of its downloads: {released:?}");
    assert_eq!(released.len(), 3, "its own only (one of the first four was its): {released:?}");
    assert_eq!(status(&db, "dl-0").await.status, JobStatus::Queued);
    assert_eq!(status(&db, "dl-0").await.progress, 0.4, "a download resumes");
    assert_eq!(db.release_jobs(JobKind::Backtest, workers[0].owner(), Recovery::Rerun).await.unwrap(), ["bt-1"]);
    let run = BacktestRepository::backtest(&db, "bt-1").await.unwrap().unwrap();
    assert_eq!((run.status, run.progress), (JobStatus::Queued, 0.0), "a backtest runs again");
    let others = taken.iter().filter(|id| !released.contains(id)).count();
    assert_eq!(others, 3, "the other workers' jobs stay theirs");
    db.close().await;
}

/// A worker never takes back its own job, even past the lease (its outcome write may be
/// retrying through a long database outage, with the heartbeat failing too); another worker
/// does. At the start of a single-process service (`orphans`), every running job of another
/// owner is taken back at once, whatever its lease.
#[tokio::test]
async fn a_worker_keeps_its_own_job_past_the_lease_and_orphans_are_swept_at_start() {
    let TestDb(db, _dir) = database().await;
    let clock = clock();
    let (a, b) = (worker(&db, &clock), worker(&db, &clock));
    db.insert_job(&download("dl-mine", JobStatus::Queued)).await.unwrap();
    assert!(a.claim(JobKind::Download, "dl-mine").await.unwrap());
    clock.advance(chrono::Duration::seconds(45));
    assert!(a.recover(JobKind::Download, false).await.unwrap().is_empty(), "its own job, past the lease");
    let mut job = status(&db, "dl-mine").await;
    job.status = JobStatus::Completed;
    assert!(db.update_leased_job(&job, &a.released()).await.unwrap(), "so its outcome still lands");

    db.insert_job(&download("dl-left", JobStatus::Queued)).await.unwrap();
    assert!(a.claim(JobKind::Download, "dl-left").await.unwrap());
    assert!(b.recover(JobKind::Download, false).await.unwrap().is_empty(), "the lease still runs");
    assert_eq!(b.recover(JobKind::Download, true).await.unwrap(), vec!["dl-left".to_string()], "swept at start");
    assert_eq!(status(&db, "dl-left").await.status, JobStatus::Queued);
    db.close().await;
}

#[tokio::test]
async fn a_lease_left_to_expire_lets_another_worker_take_the_job() {
    let TestDb(db, _dir) = database().await;
    let clock = clock();
    let (a, b) = (worker(&db, &clock), worker(&db, &clock));
    db.insert_job(&download("dl-1", JobStatus::Queued)).await.unwrap();
    assert!(a.claim(JobKind::Download, "dl-1").await.unwrap());
    clock.advance(chrono::Duration::seconds(20));
    assert!(a.renew(JobKind::Download, "dl-1").await.unwrap(), "the holder renews its lease");
    clock.advance(chrono::Duration::seconds(25));
    assert!(b.recover(JobKind::Download, false).await.unwrap().is_empty(), "renewed 25 s ago: still held");
    assert!(!b.claim(JobKind::Download, "dl-1").await.unwrap());
    clock.advance(chrono::Duration::seconds(10));
    assert_eq!(b.recover(JobKind::Download, false).await.unwrap(), vec!["dl-1".to_string()], "35 s without renewal");
    assert!(b.claim(JobKind::Download, "dl-1").await.unwrap(), "the second worker takes the job");
    assert!(!a.renew(JobKind::Download, "dl-1").await.unwrap(), "the first lost it");
    let mut job = status(&db, "dl-1").await;
    job.progress = 0.9;
    assert!(!db.update_leased_job(&job, &a.lease()).await.unwrap(), "a write of the first no longer lands");
    assert!(db.update_leased_job(&job, &b.lease()).await.unwrap());
    db.close().await;
}

#[tokio::test]
async fn a_queued_job_is_canceled_at_once_and_never_claimed() {
    let TestDb(db, _dir) = database().await;
    let clock = clock();
    let a = worker(&db, &clock);
    db.insert_job(&download("dl-1", JobStatus::Queued)).await.unwrap();
    cancel(&db, &clock, JobKind::Download, "dl-1").await.unwrap();
    let job = status(&db, "dl-1").await;
    assert_eq!(job.status, JobStatus::Canceled);
    assert_eq!(job.finished_at, Some(clock.now().timestamp_millis()));
    assert!(!a.claim(JobKind::Download, "dl-1").await.unwrap());
    let again = cancel(&db, &clock, JobKind::Download, "dl-1").await;
    assert!(matches!(again, Err(CancelError::Final(JobStatus::Canceled))), "{again:?}");
    assert!(matches!(cancel(&db, &clock, JobKind::Download, "dl-none").await, Err(CancelError::NotFound)));
    db.close().await;
}

#[tokio::test]
async fn a_running_job_is_canceled_and_its_worker_stops_at_its_next_write() {
    let TestDb(db, _dir) = database().await;
    let clock = clock();
    let a = worker(&db, &clock);
    db.insert_backtest(&backtest("bt-1", JobStatus::Queued)).await.unwrap();
    assert!(a.claim(JobKind::Backtest, "bt-1").await.unwrap());
    cancel(&db, &clock, JobKind::Backtest, "bt-1").await.unwrap();
    let mut run = db.backtest("bt-1").await.unwrap().unwrap();
    assert_eq!(run.status, JobStatus::Canceled);
    run.status = JobStatus::Completed;
    run.result = Some("{}".into());
    assert!(!db.update_leased_backtest(&run, &a.released()).await.unwrap(), "the outcome is not written");
    assert!(!a.renew(JobKind::Backtest, "bt-1").await.unwrap());
    let run = db.backtest("bt-1").await.unwrap().unwrap();
    assert_eq!((run.status, run.result), (JobStatus::Canceled, None));
    clock.advance(chrono::Duration::minutes(5));
    assert!(a.recover(JobKind::Backtest, false).await.unwrap().is_empty(), "a canceled job is never taken back");
    let done = backtest("bt-2", JobStatus::Completed);
    db.insert_backtest(&done).await.unwrap();
    let refused = cancel(&db, &clock, JobKind::Backtest, "bt-2").await;
    assert!(matches!(refused, Err(CancelError::Final(JobStatus::Completed))), "{refused:?}");
    assert_eq!(db.backtest("bt-2").await.unwrap().unwrap(), done, "nothing changes");
    db.close().await;
}

/// A crash leaves jobs RUNNING without a live lease: a download resumes with its progress,
/// a backtest runs again from the start; a held or final job is left alone.
#[tokio::test]
async fn jobs_of_a_stopped_worker_resume_or_rerun_by_kind() {
    let TestDb(db, _dir) = database().await;
    let clock = clock();
    let (a, b) = (worker(&db, &clock), worker(&db, &clock));
    db.insert_job(&download("dl-crashed", JobStatus::Running)).await.unwrap();
    db.insert_job(&download("dl-done", JobStatus::Completed)).await.unwrap();
    db.insert_job(&download("dl-held", JobStatus::Queued)).await.unwrap();
    assert!(a.claim(JobKind::Download, "dl-held").await.unwrap());
    db.insert_backtest(&backtest("bt-crashed", JobStatus::Running)).await.unwrap();
    assert_eq!(b.recover(JobKind::Download, false).await.unwrap(), vec!["dl-crashed".to_string()]);
    let resumed = status(&db, "dl-crashed").await;
    assert_eq!((resumed.status, resumed.progress, resumed.bars), (JobStatus::Queued, 0.4, 576));
    assert_eq!(status(&db, "dl-held").await.status, JobStatus::Running);
    assert_eq!(status(&db, "dl-done").await.status, JobStatus::Completed);
    assert_eq!(b.recover(JobKind::Backtest, false).await.unwrap(), vec!["bt-crashed".to_string()]);
    let rerun = db.backtest("bt-crashed").await.unwrap().unwrap();
    assert_eq!((rerun.status, rerun.progress), (JobStatus::Queued, 0.0));
    db.close().await;
}

#[test]
fn statuses_are_their_contract_names() {
    for status in JobStatus::ALL {
        assert_eq!(serde_json::to_value(status).unwrap(), status.as_str());
        assert_eq!(JobStatus::parse(status.as_str()), Some(status));
    }
    assert_eq!(JobStatus::parse("running"), None);
    assert!(JobStatus::Canceled.is_final() && !JobStatus::Running.is_final());
}
