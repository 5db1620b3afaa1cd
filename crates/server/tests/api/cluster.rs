//! Issue 25: more than one engine on one database. Each engine writes trading state in its own
//! term; once a newer engine has taken the database over, the old one writes and sends nothing
//! more and stops (fencing), and a service whose engine stopped says so. Runs on SQLite, and on
//! PostgreSQL in CI's second pass.

use crate::helpers::*;
use crate::venues::Switchable;
use serde_json::json;
use std::time::Duration;
use tradeops_store::Database;

/// Waits (up to ~10 s) until the service's `risk_manager` reads `status`.
async fn wait_for_risk_manager(app: &TestApp, status: &str) -> serde_json::Value {
    let mut last = serde_json::Value::Null;
    for _ in 0..100 {
        let rows = app.get("/api/health/components").await;
        last = rows.data().as_array().unwrap().iter().find(|c| c["name"] == "risk_manager").cloned().unwrap();
        if last["status"] == status {
            return last;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("risk_manager never read {status}: {last}");
}

/// An engine whose database a newer engine took over (issue 25.1): it sends no order to the
/// broker and writes none, its service answers 503 `SERVICE_UNAVAILABLE` to commands while
/// reads go on and `/api/health` says DOWN; a restart takes a new term and trades again.
#[tokio::test]
async fn an_engine_taken_over_writes_and_sends_nothing_more() {
    let venue = Switchable::new(&test_config(String::new()));
    let app = spawn_app_trading_through(venue.clone()).await;
    let (symbol, _) = app.market_symbols(1).await.remove(0);
    let buy = json!({"symbol": symbol, "side": "BUY", "quantity": 3, "order_type": "MARKET", "reason": "term 1"});
    let first = app.post("/api/orders", ADMIN_TOKEN, buy.clone()).await;
    first.assert_ok(201);
    assert_eq!(venue.submits(), 1);

    // Another engine starts its term on the same database (as a second service would).
    let other = Database::open(&app.config.database_url).await.unwrap();
    let (ours, holder) = other.engine_epoch().await.unwrap();
    assert!(holder.is_some_and(|h| h.contains(&std::process::id().to_string())), "the term names its service");
    let taken = other.take_engine_epoch("another-node", 0).await.unwrap();
    assert_eq!(taken, ours + 1);

    // Within a second the old engine learns it (it had nothing to write) and stops.
    let risk = wait_for_risk_manager(&app, "DOWN").await;
    assert_eq!(app.get("/api/health").await.status, 503, "{risk}");
    let refused = app.post("/api/orders", ADMIN_TOKEN, buy.clone()).await;
    refused.assert_error(503, "SERVICE_UNAVAILABLE");
    assert!(refused.headers.get("retry-after").is_some(), "{:?}", refused.headers);
    let halt = app.post("/api/risk/emergency-halt", ADMIN_TOKEN, json!({"reason": "from the old service"})).await;
    halt.assert_error(503, "SERVICE_UNAVAILABLE");
    assert_eq!(venue.submits(), 1, "nothing more reached the broker");
    // What it had stored is still read.
    let orders = app.get("/api/orders").await;
    let ids: Vec<&str> =
        orders.data().as_array().unwrap().iter().map(|o| o["client_order_id"].as_str().unwrap()).collect();
    assert_eq!(ids, vec![first.data()["client_order_id"].as_str().unwrap()], "nothing more was written");
    let (now, by) = other.engine_epoch().await.unwrap();
    assert_eq!((now, by.as_deref()), (taken, Some("another-node")), "the old engine did not take the term back");
    other.close().await;

    // Restarted, the service takes a new term and trades.
    let app = app.restart().await;
    let again = app
        .post("/api/orders", ADMIN_TOKEN, json!({"symbol": symbol, "side": "BUY", "quantity": 1, "reason": "term 3"}))
        .await;
    again.assert_ok(201);
    let check = Database::open(&app.config.database_url).await.unwrap();
    assert_eq!(check.engine_epoch().await.unwrap().0, taken + 1, "a start takes the next term");
    check.close().await;
}

/// An engine taken over while it writes: the write in flight is refused whole (the order is not
/// stored, not sent), and the engine stops at once rather than at its next check.
#[tokio::test]
async fn an_order_of_an_engine_taken_over_is_refused_unsent_and_unstored() {
    let venue = Switchable::new(&test_config(String::new()));
    let app = spawn_app_trading_through(venue.clone()).await;
    let (symbol, _) = app.market_symbols(1).await.remove(0);
    let other = Database::open(&app.config.database_url).await.unwrap();
    other.take_engine_epoch("another-node", 0).await.unwrap();
    // Straight after the takeover (before the engine's once-a-second check can see it).
    let refused = app
        .post("/api/orders", ADMIN_TOKEN, json!({"symbol": symbol, "side": "BUY", "quantity": 2, "reason": "late"}))
        .await;
    assert_eq!(refused.status, 503, "{:?}", refused.body);
    assert_eq!(venue.submits(), 0, "never sent");
    assert_eq!(app.get("/api/orders").await.data().as_array().unwrap().len(), 0, "never stored: {:?}", refused.body);
    wait_for_risk_manager(&app, "DOWN").await;
    other.close().await;
}
