//! The whole trading day (CONTRACT §12) through the API: the session and its changes, the
//! account's session, with the service's market clock moved through 04:00, 09:30, 16:00 and
//! 20:00 New York on the NYSE calendar.

use crate::events::Sse;
use crate::helpers::*;
use serde_json::{json, Value};
use std::sync::Arc;

fn ts(text: &str) -> tradeops_core::Timestamp {
    tradeops_core::time::parse_ts(text).unwrap()
}

/// A service whose market clock starts at `at` (on the simulated market).
async fn spawn_at(at: &str) -> TestApp {
    let (db, url) = TestDb::new().await;
    start_at(test_config(url), Arc::new(db), axum::Router::new(), tradeops_core::ManualClock::new(ts(at))).await
}

/// The session now, and that the account summary says the same.
async fn session(app: &TestApp) -> Value {
    let now = app.get("/api/market/session").await.assert_ok(200).clone();
    let account = app.get("/api/account/summary").await;
    assert_eq!(account.assert_ok(200)["session"], now["session"], "the account's session: {}", account.body);
    now
}

#[tokio::test]
async fn the_session_and_its_changes_follow_the_nyse_day() {
    // Monday 2026-11-23, 03:59 New York (EST, UTC−5).
    let app = spawn_at("2026-11-23T08:59:00Z").await;
    // The simulated market's default calendar, ALWAYS_OPEN, is regular all day.
    let always = session(&app).await;
    assert_eq!((always["session"].as_str(), always["next_session"].as_str()), (Some("REGULAR"), Some("REGULAR")));
    assert_eq!(always["next_session_at"], "2026-11-24T05:00:00.000Z", "the next New York midnight");

    let mut sse = Sse::open(&app, "?kinds=market.session", None).await;
    app.put_settings(ADMIN_TOKEN, json!({"runtime": {"market_calendar": "NYSE"}})).await.assert_ok(200);
    let closed = sse.next_of("market.session").await;
    let expected = json!({
        "session": "CLOSED", "trading_day": "2026-11-23",
        "pre_market_open_at": "2026-11-23T09:00:00.000Z", "regular_open_at": "2026-11-23T14:30:00.000Z",
        "regular_close_at": "2026-11-23T21:00:00.000Z", "after_hours_close_at": "2026-11-24T01:00:00.000Z",
        "next_session": "PRE_MARKET", "next_session_at": "2026-11-23T09:00:00.000Z",
    });
    assert_eq!(closed, expected);
    assert_eq!(session(&app).await, expected, "the endpoint says what the event said");

    let day = [
        ("2026-11-23T09:00:00Z", "PRE_MARKET", "REGULAR", "2026-11-23T14:30:00.000Z"),
        ("2026-11-23T14:30:00Z", "REGULAR", "AFTER_HOURS", "2026-11-23T21:00:00.000Z"),
        ("2026-11-23T21:00:00Z", "AFTER_HOURS", "CLOSED", "2026-11-24T01:00:00.000Z"),
        ("2026-11-24T01:00:00Z", "CLOSED", "PRE_MARKET", "2026-11-24T09:00:00.000Z"),
    ];
    for (at, now, next, next_at) in day {
        app.market.set(ts(at));
        let event = sse.next_of("market.session").await;
        assert_eq!(
            (event["session"].as_str(), event["next_session"].as_str(), event["next_session_at"].as_str()),
            (Some(now), Some(next), Some(next_at)),
            "at {at}: {event}"
        );
        assert_eq!(event["trading_day"], "2026-11-23", "20:00 New York is still Monday: {event}");
        assert_eq!(session(&app).await, event, "at {at}");
    }
}
