//! `GET /api/events`: Server-Sent Events with ids, kinds, resume and auth.

use crate::helpers::*;
use reqwest::Method;
use serde_json::{json, Value};
use std::time::Duration;

/// A minimal SSE reader over a streaming response.
pub(crate) struct Sse {
    resp: reqwest::Response,
    buf: String,
}

impl Sse {
    pub(crate) async fn open(app: &TestApp, query: &str, last_event_id: Option<u64>) -> Sse {
        let mut req = app.client.get(app.url(&format!("/api/events{query}"))).bearer_auth(ADMIN_TOKEN);
        if let Some(id) = last_event_id {
            req = req.header("last-event-id", id.to_string());
        }
        let resp = req.send().await.unwrap();
        assert_eq!(resp.status(), 200);
        assert!(resp.headers()["content-type"].to_str().unwrap().starts_with("text/event-stream"));
        Sse { resp, buf: String::new() }
    }

    /// The data of the next event of `kind`, skipping others.
    pub(crate) async fn next_of(&mut self, kind: &str) -> Value {
        loop {
            let (_, k, body) = self.next().await;
            if k == kind {
                return body["data"].clone();
            }
        }
    }

    /// The next event: (id, kind, data), skipping heartbeats.
    pub(crate) async fn next(&mut self) -> (u64, String, Value) {
        loop {
            if let Some(end) = self.buf.find("\n\n") {
                let block: String = self.buf.drain(..end + 2).collect();
                let (mut id, mut kind, mut data) = (None, None, String::new());
                for line in block.lines() {
                    if let Some(v) = line.strip_prefix("id:") {
                        id = v.trim().parse().ok();
                    } else if let Some(v) = line.strip_prefix("event:") {
                        kind = Some(v.trim().to_string());
                    } else if let Some(v) = line.strip_prefix("data:") {
                        data.push_str(v.trim());
                    }
                }
                if let (Some(id), Some(kind)) = (id, kind) {
                    return (id, kind, serde_json::from_str(&data).unwrap());
                }
                continue;
            }
            let chunk =
                tokio::time::timeout(Duration::from_secs(10), self.resp.chunk()).await.expect("an event in time");
            let chunk = chunk.unwrap().expect("the stream stays open");
            self.buf.push_str(&String::from_utf8_lossy(&chunk));
        }
    }
}

#[tokio::test]
async fn the_stream_needs_a_token_and_valid_parameters() {
    let app = spawn_app().await;
    app.call(Method::GET, "/api/events", None, None).await.assert_error(401, "UNAUTHORIZED");
    let bad = app.get("/api/events?kinds=order.updated,nonsense").await;
    bad.assert_error(400, "VALIDATION_ERROR");
    assert_eq!(bad.body["error"]["detail"]["field"], "kinds");
    let reply =
        app.raw(app.client.get(app.url("/api/events")).bearer_auth(ADMIN_TOKEN).header("last-event-id", "x")).await;
    reply.assert_error(400, "VALIDATION_ERROR");
}

#[tokio::test]
async fn events_arrive_in_order_filtered_and_resume_after_a_disconnect() {
    let app = spawn_app().await;
    let mut sse = Sse::open(&app, "?kinds=settings.updated", None).await;
    for n in 21..24 {
        app.put_settings(ADMIN_TOKEN, json!({"analytics": {"min_sample_size": n}})).await.assert_ok(200);
    }
    let mut seen = Vec::new();
    for _ in 0..3 {
        let (id, kind, data) = sse.next().await;
        assert_eq!(kind, "settings.updated");
        assert_eq!(data["kind"], "settings.updated");
        assert_eq!(data["mode"], "PAPER");
        assert!(data["timestamp"].as_str().unwrap().ends_with('Z'));
        seen.push((id, data["data"]["version"].as_i64().unwrap()));
    }
    assert!(seen.windows(2).all(|w| w[0].0 < w[1].0), "monotonic ids: {seen:?}");
    assert_eq!(seen.iter().map(|s| s.1).collect::<Vec<_>>(), vec![2, 3, 4]);
    drop(sse);

    app.put_settings(ADMIN_TOKEN, json!({"analytics": {"min_sample_size": 30}})).await.assert_ok(200);
    let mut resumed = Sse::open(&app, "?kinds=settings.updated", Some(seen[0].0)).await;
    let versions: Vec<i64> = {
        let mut v = Vec::new();
        for _ in 0..3 {
            v.push(resumed.next().await.2["data"]["version"].as_i64().unwrap());
        }
        v
    };
    assert_eq!(versions, vec![3, 4, 5], "replayed after Last-Event-ID, including what happened while away");
}

#[tokio::test]
async fn an_order_streams_its_updates_execution_and_position() {
    // A fee per share, so a fee lost on the way to the event shows.
    let app = spawn_app_with(|c| c.paper.fee_per_share = rust_decimal::Decimal::new(5, 3)).await;
    let (symbol, _) = app.market_symbols(1).await.remove(0);
    let mut sse = Sse::open(&app, "?kinds=order.updated,execution.created,position.updated", None).await;
    let placed = app.post("/api/orders", ADMIN_TOKEN, json!({"symbol": symbol, "side": "BUY", "quantity": 10})).await;
    let id = placed.assert_ok(201)["client_order_id"].as_str().unwrap().to_string();
    app.wait_for_order(&id, "FILLED").await;
    let mut kinds = Vec::new();
    let mut statuses = Vec::new();
    while !kinds.contains(&"position.updated".to_string()) {
        let (_, kind, data) = sse.next().await;
        if kind == "order.updated" {
            assert_eq!(data["data"]["client_order_id"], id);
            statuses.push(data["data"]["status"].as_str().unwrap().to_string());
        }
        // Money and prices are JSON numbers in events as everywhere (seed §2.1).
        if kind == "execution.created" {
            assert!(data["data"]["price"].as_f64().is_some_and(|p| p > 0.0), "{data}");
            let quantity = data["data"]["quantity"].as_f64().unwrap();
            assert_eq!(data["data"]["fee"].as_f64(), Some(quantity * 0.005), "{data}");
        }
        if kind == "position.updated" {
            assert!(data["data"]["average_entry_price"].as_f64().is_some_and(|p| p > 0.0), "{data}");
            assert_eq!(data["data"]["realized_pnl"].as_f64(), Some(0.0), "an opening buy realizes nothing: {data}");
        }
        kinds.push(kind);
    }
    assert_eq!(statuses.first().map(String::as_str), Some("NEW"));
    assert!(statuses.contains(&"FILLED".to_string()), "{statuses:?}");
    assert!(kinds.contains(&"execution.created".to_string()), "{kinds:?}");
}

#[tokio::test]
async fn the_emergency_halt_streams_its_progress_until_flat() {
    let app = spawn_app().await;
    let (symbol, _) = app.market_symbols(1).await.remove(0);
    let placed = app.post("/api/orders", ADMIN_TOKEN, json!({"symbol": symbol, "side": "BUY", "quantity": 10})).await;
    app.wait_for_order(placed.data()["client_order_id"].as_str().unwrap(), "FILLED").await;
    let mut sse = Sse::open(&app, "?kinds=risk.state_changed", None).await;
    app.post("/api/risk/emergency-halt", ADMIN_TOKEN, json!({"reason": "test"})).await.assert_ok(200);
    let (_, _, first) = sse.next().await;
    assert_eq!(first["data"]["trading_state"], "HALTED");
    assert_eq!(first["data"]["halt"]["reason"], "test", "the latch comes first");
    loop {
        app.market.advance(chrono::Duration::milliseconds(500));
        let (_, _, event) = sse.next().await;
        if event["data"]["liquidation"]["flat"] == true {
            break;
        }
    }
}

#[tokio::test]
async fn a_backtest_streams_its_progress_until_completed() {
    let app = spawn_app().await;
    let (symbol, _) = app.market_symbols(1).await.remove(0);
    let mut sse = Sse::open(&app, "?kinds=backtest.updated", None).await;
    let body = json!({"strategy_id": "sma_cross", "symbol": symbol, "start": "2026-11-18T14:30:00Z",
        "end": "2026-11-18T21:00:00Z"});
    let id = app.post("/api/backtests/run", ADMIN_TOKEN, body).await.assert_ok(202)["backtest_id"].clone();
    let mut seen = Vec::new();
    loop {
        let (_, kind, event) = sse.next().await;
        assert_eq!(kind, "backtest.updated");
        let run = &event["data"];
        assert_eq!(run["backtest_id"], id);
        seen.push((run["status"].as_str().unwrap().to_string(), run["progress"].as_f64().unwrap()));
        if run["status"] == "COMPLETED" {
            assert!(run["total_return"].is_number(), "{run}");
            break;
        }
    }
    assert_eq!(seen.first().map(|s| s.0.as_str()), Some("QUEUED"));
    assert!(seen.iter().any(|s| s.0 == "RUNNING"));
    assert!(seen.windows(2).all(|w| w[0].1 <= w[1].1), "progress only grows: {seen:?}");
    assert_eq!(seen.last().unwrap().1, 1.0);
}

/// The console's header follows `account.updated`: the account's figures, the trading state and
/// the market clock, sent as they change (the clock by the minute) rather than polled.
#[tokio::test]
async fn the_header_figures_stream_as_the_market_clock_and_trading_state_move() {
    let app = spawn_app().await;
    let mut sse = Sse::open(&app, "?kinds=account.updated,risk.state_changed", None).await;
    app.market.advance(chrono::Duration::minutes(1));
    let first = sse.next_of("account.updated").await;
    assert!(first["equity"].is_number() && first["day_pnl"].is_number(), "{first}");
    assert_eq!(first["trading_state"], "ACTIVE");
    let first_time = first["market_time"].as_str().unwrap().to_string();

    // The market moves on a minute: a new event carries the new market time.
    app.market.advance(chrono::Duration::minutes(1));
    let moved = sse.next_of("account.updated").await;
    assert!(moved["market_time"].as_str().unwrap() > first_time.as_str(), "{moved}");

    app.post("/api/risk/emergency-halt", ADMIN_TOKEN, json!({"reason": "test"})).await.assert_ok(200);
    let halted = sse.next_of("account.updated").await;
    assert_eq!(halted["trading_state"], "HALTED", "{halted}");
    assert_eq!(halted["account_status"], "TRADING_HALTED");
}

/// In DEMO the simulated market's time is the only clock of the desk: an order, its
/// execution, the audit row of the action that placed it and the events reporting it all carry
/// market time (here days before the wall clock), with the wall time kept beside it in the audit
/// row and the event.
#[tokio::test]
async fn in_demo_orders_executions_audit_rows_and_events_carry_market_time() {
    use tradeops_core::time::parse_ts;
    let wall_before = tradeops_core::Clock::now(&tradeops_server::clock::SystemClock);
    let app = spawn_app_with(|c| c.mode = Some(tradeops_core::TradingMode::Demo)).await;
    let (symbol, _) = app.market_symbols(1).await.remove(0);
    let market_from = tradeops_core::Clock::now(&app.market);
    assert!(wall_before - market_from > chrono::Duration::hours(1), "the test's market runs behind the wall clock");
    let mut sse = Sse::open(&app, "?kinds=order.updated,execution.created", None).await;
    let placed = app.post("/api/orders", ADMIN_TOKEN, json!({"symbol": symbol, "side": "BUY", "quantity": 10})).await;
    let id = placed.assert_ok(201)["client_order_id"].as_str().unwrap().to_string();
    let order = app.wait_for_order(&id, "FILLED").await;
    let market_to = tradeops_core::Clock::now(&app.market);
    let market_time = |what: &str, at: &Value| {
        let t = parse_ts(at.as_str().unwrap_or_else(|| panic!("{what}: {at}"))).unwrap();
        assert!(market_from <= t && t <= market_to, "{what} {t} is not market time ({market_from}..{market_to})");
    };
    let wall_time = |what: &str, at: &Value| {
        let t = parse_ts(at.as_str().unwrap_or_else(|| panic!("{what}: {at}"))).unwrap();
        assert!(t >= wall_before, "{what} {t} is not wall time (from {wall_before})");
    };
    market_time("order submitted_at", &order["submitted_at"]);
    market_time("order updated_at", &order["updated_at"]);
    market_time("execution", &order["executions"][0]["timestamp"]);

    let audit = app.get("/api/audit?action=order.create").await;
    let row = &audit.assert_ok(200)[0];
    assert_eq!((row["target"].as_str(), row["mode"].as_str()), (Some(symbol.as_str()), Some("DEMO")));
    market_time("audit row", &row["timestamp"]);
    wall_time("audit row wall_time", &row["wall_time"]);

    let mut seen = Vec::new();
    while seen.len() < 2 {
        let (_, kind, data) = sse.next().await;
        assert_eq!(data["mode"], "DEMO");
        market_time(&kind, &data["timestamp"]);
        wall_time(&kind, &data["wall_time"]);
        if !seen.contains(&kind) {
            seen.push(kind);
        }
    }
}

/// The console's charts grow from the stream: each closed minute brings one `bars.closed` event
/// with the bar of every watched symbol (and the radar's top ones), matching what
/// `GET /api/market/bars` then returns for that minute; the order ticket reads the quote.
#[tokio::test]
async fn closed_minutes_stream_the_bars_of_watched_symbols_and_the_quote_answers() {
    let app = spawn_app().await;
    let (symbol, _) = app.market_symbols(1).await.remove(0);
    app.post("/api/radar/watch", ADMIN_TOKEN, json!({"symbol": symbol})).await.assert_ok(200);
    let mut sse = Sse::open(&app, "?kinds=bars.closed", None).await;
    app.market.advance(chrono::Duration::minutes(1));
    let closed = sse.next_of("bars.closed").await;
    let bar = closed["bars"].as_array().unwrap().iter().find(|b| b["symbol"] == symbol.as_str()).cloned();
    let bar = bar.unwrap_or_else(|| panic!("{symbol} in {closed}"));
    assert!(bar["low"].as_f64().unwrap() <= bar["close"].as_f64().unwrap(), "{bar}");
    let bars = app.get(&format!("/api/market/bars?symbol={symbol}")).await;
    let rows = bars.assert_ok(200).as_array().unwrap().clone();
    let same = rows.iter().find(|r| r["timestamp"] == bar["timestamp"]).unwrap_or_else(|| panic!("{bar} in the bars"));
    for field in ["open", "high", "low", "close", "volume"] {
        assert_eq!(same[field], bar[field], "{field}");
    }

    let quote = app.get(&format!("/api/market/quote?symbol={symbol}")).await;
    let quote = quote.assert_ok(200);
    assert!(quote["bid"].as_f64().unwrap() <= quote["ask"].as_f64().unwrap(), "{quote}");
    assert!(quote["last"].as_f64().unwrap() > 0.0);
    app.get("/api/market/quote?symbol=ZZZZZ").await.assert_error(404, "NOT_FOUND");
}
