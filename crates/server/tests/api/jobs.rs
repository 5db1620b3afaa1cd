//! Canceling jobs: `POST /api/data/downloads/{request_id}/cancel` and
//! `POST /api/backtests/{backtest_id}/cancel` — a queued or running job ends `CANCELED` and
//! stays so; a job already ended is refused (`SETTINGS_UPDATE_BLOCKED`, guard `job_final`) and
//! nothing changes; the operator role is required; every attempt is audited.

use crate::helpers::*;
use reqwest::Method;
use serde_json::{json, Value};
use tradeops_store::{BacktestRecord, BacktestRepository, JobKind, JobRepository, JobStatus, Lease};

async fn cancel(app: &TestApp, path: &str, token: &str) -> Reply {
    app.call(Method::POST, path, Some(token), None).await
}

async fn download(app: &TestApp, id: &str) -> Value {
    app.get(&format!("/api/data/downloads/{id}")).await.data().clone()
}

/// A backtest that is `RUNNING` under the lease of a worker of another process (which never
/// writes): the service's own workers leave it alone.
async fn a_run_held_elsewhere(app: &TestApp) -> String {
    let db = tradeops_store::Database::open(&app.config.database_url).await.unwrap();
    let elsewhere = Lease { owner: "worker-elsewhere".into(), expires_at: Some(i64::MAX / 2) };
    for n in 0.. {
        let id = format!("bt-held-{n}");
        let record = BacktestRecord {
            backtest_id: id.clone(),
            strategy_id: "sma_cross".into(),
            symbol: "GOLDN".into(),
            status: JobStatus::Queued,
            progress: 0.0,
            request: "{}".into(),
            result: None,
            error: None,
            requested_by: "admin".into(),
            created_at: 0,
            started_at: None,
            finished_at: None,
        };
        db.insert_backtest(&record).await.unwrap();
        // The service's worker may take it first; then another.
        if db.claim_job(JobKind::Backtest, &id, &elsewhere).await.unwrap() {
            db.close().await;
            return id;
        }
    }
    unreachable!()
}

#[tokio::test]
async fn a_download_canceled_as_soon_as_queued_ends_canceled_and_stays_so() {
    let app = spawn_app().await;
    let symbol = app.market_symbols(1).await.remove(0).0;
    let body = json!({"symbol": symbol, "start": "2026-01-05T05:00:00Z", "end": "2026-11-01T05:00:00Z"});
    let queued = app.post("/api/data/download", ADMIN_TOKEN, body).await;
    let id = queued.assert_ok(202)["request_id"].as_str().unwrap().to_string();
    // The download's writes hold SQLite's one writer; on a loaded machine the cancel may find
    // the database busy past its wait and be refused with SERVICE_UNAVAILABLE ("retry
    // shortly"), changing nothing: retried, as a client does.
    let mut reply = cancel(&app, &format!("/api/data/downloads/{id}/cancel"), ADMIN_TOKEN).await;
    for _ in 0..10 {
        if reply.status != 503 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        reply = cancel(&app, &format!("/api/data/downloads/{id}/cancel"), ADMIN_TOKEN).await;
    }
    let canceled = reply.assert_ok(200).clone();
    assert_eq!((canceled["request_id"].as_str(), canceled["status"].as_str()), (Some(id.as_str()), Some("CANCELED")));
    assert!(canceled["finished_at"].is_string(), "{canceled}");
    // Whether the worker had started it or not, it stops: nothing more is written.
    tokio::time::sleep(std::time::Duration::from_millis(700)).await;
    let later = download(&app, &id).await;
    assert_eq!(later["status"], "CANCELED", "{later}");
    tokio::time::sleep(std::time::Duration::from_millis(700)).await;
    assert_eq!(download(&app, &id).await, later, "a canceled job does not move");
    let audit = app.get("/api/audit?action=data.download_cancel").await;
    // One cancel went through (a refused attempt before it is audited as refused).
    let rows = audit_rows(&audit.body);
    assert_eq!(
        rows.iter().filter(|r| r.ends_with(" OK")).cloned().collect::<Vec<_>>(),
        vec![format!("data.download_cancel {id} OK")]
    );
    assert!(rows.iter().all(|r| r.ends_with(" OK") || r.ends_with(" SERVICE_UNAVAILABLE")), "{rows:?}");
}

#[tokio::test]
async fn a_running_backtest_is_canceled() {
    let app = spawn_app().await;
    let id = a_run_held_elsewhere(&app).await;
    assert_eq!(app.get(&format!("/api/backtests/{id}")).await.data()["status"], "RUNNING");
    let reply = cancel(&app, &format!("/api/backtests/{id}/cancel"), ADMIN_TOKEN).await;
    let canceled = reply.assert_ok(200).clone();
    assert_eq!((canceled["backtest_id"].as_str(), canceled["status"].as_str()), (Some(id.as_str()), Some("CANCELED")));
    assert_eq!(app.get(&format!("/api/backtests/{id}")).await.data()["status"], "CANCELED");
}

#[tokio::test]
async fn a_finished_job_is_not_canceled_and_nothing_changes() {
    let app = spawn_app().await;
    let symbol = app.market_symbols(1).await.remove(0).0;
    let body = json!({"symbol": symbol, "start": "2026-11-18T05:00:00Z", "end": "2026-11-19T05:00:00Z"});
    let id = app.post("/api/data/download", ADMIN_TOKEN, body).await.assert_ok(202)["request_id"]
        .as_str()
        .unwrap()
        .to_string();
    let mut done = download(&app, &id).await;
    for _ in 0..300 {
        if done["status"] == "COMPLETED" {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        done = download(&app, &id).await;
    }
    assert_eq!(done["status"], "COMPLETED", "{done}");
    let refused = cancel(&app, &format!("/api/data/downloads/{id}/cancel"), ADMIN_TOKEN).await;
    refused.assert_error(409, "SETTINGS_UPDATE_BLOCKED");
    let detail = &refused.body["error"]["detail"];
    assert_eq!((detail["guard"].as_str(), detail["status"].as_str()), (Some("job_final"), Some("COMPLETED")));
    assert!(detail["reason"].as_str().unwrap().contains("COMPLETED"), "{detail}");
    assert_eq!(download(&app, &id).await, done, "nothing changes");

    let run = a_run_held_elsewhere(&app).await;
    cancel(&app, &format!("/api/backtests/{run}/cancel"), ADMIN_TOKEN).await.assert_ok(200);
    let before = app.get(&format!("/api/backtests/{run}")).await.data().clone();
    let again = cancel(&app, &format!("/api/backtests/{run}/cancel"), ADMIN_TOKEN).await;
    again.assert_error(409, "SETTINGS_UPDATE_BLOCKED");
    assert_eq!(again.body["error"]["detail"]["status"], "CANCELED");
    assert_eq!(app.get(&format!("/api/backtests/{run}")).await.data(), &before, "nothing changes");
    let audit = app.get("/api/audit?action=backtest.cancel").await;
    assert_eq!(
        audit_rows(&audit.body),
        vec![format!("backtest.cancel {run} SETTINGS_UPDATE_BLOCKED"), format!("backtest.cancel {run} OK")]
    );
}

#[tokio::test]
async fn an_unknown_job_is_not_found() {
    let app = spawn_app().await;
    cancel(&app, "/api/data/downloads/dl-nothing/cancel", ADMIN_TOKEN).await.assert_error(404, "NOT_FOUND");
    cancel(&app, "/api/backtests/bt-nothing/cancel", ADMIN_TOKEN).await.assert_error(404, "NOT_FOUND");
}

#[tokio::test]
async fn a_viewer_cannot_cancel_and_nothing_changes() {
    let app = spawn_app().await;
    let viewer = app.token("wall-screen", "viewer").await;
    let id = a_run_held_elsewhere(&app).await;
    cancel(&app, &format!("/api/backtests/{id}/cancel"), &viewer).await.assert_error(403, "FORBIDDEN");
    cancel(&app, "/api/data/downloads/dl-any/cancel", &viewer).await.assert_error(403, "FORBIDDEN");
    assert_eq!(app.get(&format!("/api/backtests/{id}")).await.data()["status"], "RUNNING");
    let audit = app.get("/api/audit?action=backtest.cancel").await;
    assert_eq!(audit_rows(&audit.body), vec![format!("backtest.cancel {id} FORBIDDEN")]);
}
