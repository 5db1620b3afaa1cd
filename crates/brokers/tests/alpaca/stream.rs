//! The trade-updates stream against a stand-in of Alpaca's `/stream` WebSocket: it checks the
//! authenticate and listen messages, refuses the first connection's credentials, sends binary
//! frames (with a duplicate), drops a connection, and a fake [`GapFill`] returns an order that
//! filled while the stream was down.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, TimeZone, Utc};
use futures::{SinkExt, StreamExt};
use rust_decimal::Decimal;
use serde_json::{json, Value};
use tokio::net::TcpListener;
use tokio_tungstenite::tungstenite::Message;
use tradeops_brokers::alpaca::stream::{BackoffPolicy, GapFill, StreamConfig, TradeUpdatesStream, REJECTED_BY_ALPACA};
use tradeops_brokers::alpaca::wire;
use tradeops_brokers::BrokerError;
use tradeops_core::broker::BrokerReport;
use tradeops_core::clock::ManualClock;
use tradeops_core::orders::{ClientOrderId, Execution};
use tradeops_core::time::Timestamp;

const KEY_ID: &str = "AKTEST";
const SECRET: &str = "test-secret";

fn ts(second: u32) -> Timestamp {
    Utc.with_ymd_and_hms(2026, 11, 25, 14, 31, second).unwrap()
}

fn cid(raw: &str) -> ClientOrderId {
    ClientOrderId::parse(raw).unwrap()
}

fn order_json(id: &str, client_order_id: &str, status: &str, filled_qty: u64, avg: Option<&str>) -> Value {
    json!({"id": id, "client_order_id": client_order_id, "symbol": "ABCD", "side": "buy", "qty": "100",
        "filled_qty": filled_qty.to_string(), "filled_avg_price": avg, "type": "market",
        "time_in_force": "day", "status": status, "limit_price": null, "extended_hours": false})
}

fn event(event: &str, order: Value, at: Timestamp) -> Value {
    json!({"stream": "trade_updates", "data": {"event": event, "timestamp": at, "order": order}})
}

fn fill_event(execution_id: &str, order: Value, qty: u64, price: &str, at: Timestamp) -> Value {
    let name = if order["status"] == "filled" { "fill" } else { "partial_fill" };
    json!({"stream": "trade_updates", "data": {"event": name, "execution_id": execution_id,
        "timestamp": at, "price": price, "qty": qty.to_string(), "order": order}})
}

/// What a connection of the stand-in does after the handshake.
enum Script {
    /// Replies `unauthorized` and closes.
    Refuse,
    /// Authorizes, expects the listen, sends these frames (binary), then closes.
    SendAndClose(Vec<Value>),
    /// Same, then keeps the connection open.
    SendAndHold(Vec<Value>),
}

/// The stand-in's record: connections accepted and protocol violations seen.
#[derive(Default)]
struct StandIn {
    connections: AtomicUsize,
    violations: Mutex<Vec<String>>,
}

impl StandIn {
    fn violation(&self, what: String) {
        self.violations.lock().unwrap().push(what);
    }
}

async fn start(scripts: Vec<Script>) -> (String, Arc<StandIn>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("ws://{}/stream", listener.local_addr().unwrap());
    let stand_in = Arc::new(StandIn::default());
    let record = stand_in.clone();
    tokio::spawn(async move {
        let mut held = Vec::new();
        for script in scripts {
            let (tcp, _) = listener.accept().await.unwrap();
            record.connections.fetch_add(1, Ordering::SeqCst);
            let mut socket = tokio_tungstenite::accept_async(tcp).await.unwrap();
            let auth = next_json(&mut socket).await;
            let expected = json!({"action": "authenticate", "data": {"key_id": KEY_ID, "secret_key": SECRET}});
            if auth != expected {
                record.violation(format!("authenticate message: {auth}"));
            }
            if let Script::Refuse = script {
                let reply =
                    json!({"stream": "authorization", "data": {"status": "unauthorized", "action": "authenticate"}});
                socket.send(Message::Binary(reply.to_string().into())).await.unwrap();
                socket.close(None).await.ok();
                continue;
            }
            let reply = json!({"stream": "authorization", "data": {"status": "authorized", "action": "authenticate"}});
            socket.send(Message::Binary(reply.to_string().into())).await.unwrap();
            let listen = next_json(&mut socket).await;
            if listen != json!({"action": "listen", "data": {"streams": ["trade_updates"]}}) {
                record.violation(format!("listen message: {listen}"));
            }
            let listening = json!({"stream": "listening", "data": {"streams": ["trade_updates"]}});
            socket.send(Message::Binary(listening.to_string().into())).await.unwrap();
            let (frames, hold) = match script {
                Script::SendAndClose(frames) => (frames, false),
                Script::SendAndHold(frames) => (frames, true),
                Script::Refuse => unreachable!(),
            };
            for frame in frames {
                socket.send(Message::Binary(frame.to_string().into())).await.unwrap();
            }
            if hold {
                held.push(socket);
            } else {
                // Dropped without a close handshake, as a network fault would.
                drop(socket);
            }
        }
        // Keep the held connections open, and refuse (by not accepting) any further ones.
        std::future::pending::<()>().await;
        drop(held);
    });
    (url, stand_in)
}

async fn next_json(socket: &mut tokio_tungstenite::WebSocketStream<tokio::net::TcpStream>) -> Value {
    loop {
        match socket.next().await {
            Some(Ok(Message::Text(text))) => return serde_json::from_str(text.as_str()).unwrap_or(Value::Null),
            Some(Ok(Message::Binary(bytes))) => return serde_json::from_slice(&bytes).unwrap_or(Value::Null),
            Some(Ok(_)) => continue,
            _ => return Value::Null,
        }
    }
}

/// A fake REST client: returns the scripted answer of each call and records the `after` asked.
struct FakeGapFill {
    answers: Mutex<Vec<Result<Vec<wire::Order>, BrokerError>>>,
    asked: Mutex<Vec<DateTime<Utc>>>,
}

#[async_trait]
impl GapFill for FakeGapFill {
    async fn orders_updated_since(&self, after: DateTime<Utc>) -> Result<Vec<wire::Order>, BrokerError> {
        self.asked.lock().unwrap().push(after);
        let mut answers = self.answers.lock().unwrap();
        if answers.is_empty() {
            Ok(Vec::new())
        } else {
            answers.remove(0)
        }
    }
}

fn config(url: String) -> StreamConfig {
    StreamConfig {
        url,
        key_id: KEY_ID.into(),
        secret_key: SECRET.into(),
        backoff: BackoffPolicy {
            initial: Duration::from_millis(1),
            max: Duration::from_millis(5),
            jitter: 0.2,
            seed: 7,
        },
        gap_fill_from: ts(0),
        gap_overlap: Duration::from_secs(5),
        auth_timeout: Duration::from_secs(30),
        idle_timeout: Duration::from_secs(30),
    }
}

/// Drains the stream's queue until `done` holds of everything drained (bounded: a stuck
/// stream fails the test instead of hanging it).
async fn collect_until(stream: &TradeUpdatesStream, done: impl Fn(&[BrokerReport]) -> bool) -> Vec<BrokerReport> {
    let mut reports = Vec::new();
    for _ in 0..2000 {
        reports.extend(stream.queue().drain());
        if done(&reports) {
            return reports;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("the stream did not deliver; got {reports:#?}");
}

fn filled(client_order_id: &str, execution_id: &str, quantity: u64, price: Decimal, at: Timestamp) -> BrokerReport {
    BrokerReport::Filled {
        client_order_id: cid(client_order_id),
        execution: Execution { execution_id: execution_id.into(), timestamp: at, quantity, price, fee: Decimal::ZERO },
    }
}

fn accepted(client_order_id: &str, broker_order_id: &str, at: Timestamp) -> BrokerReport {
    BrokerReport::Accepted { client_order_id: cid(client_order_id), broker_order_id: broker_order_id.into(), at }
}

#[tokio::test]
async fn reports_in_order_once_each_and_fills_the_gap_after_a_drop() {
    let a = |status, filled, avg| order_json("ord-a", "to-A-1", status, filled, avg);
    let b = |status| order_json("ord-b", "to-B-1", status, 0, None);
    let c = |status| order_json("ord-c", "to-C-1", status, 0, None);
    let d = |status, filled, avg| order_json("ord-d", "to-D-1", status, filled, avg);
    let second_connection = vec![
        event("new", a("new", 0, None), ts(1)),
        fill_event("e-1", a("partially_filled", 40, Some("10")), 40, "10", ts(2)),
        // The same execution again: ignored.
        fill_event("e-1", a("partially_filled", 40, Some("10")), 40, "10", ts(2)),
        fill_event("e-2", a("filled", 100, Some("10.6")), 60, "11", ts(3)),
        event("new", b("new"), ts(4)),
        event("pending_cancel", b("pending_cancel"), ts(5)),
        event("canceled", b("canceled"), ts(6)),
        event("new", c("new"), ts(7)),
        event("rejected", c("rejected"), ts(8)),
        // An order placed by hand on Alpaca's site: not ours, skipped.
        event("new", order_json("ord-x", "web order #1", "new", 0, None), ts(9)),
        event("new", d("new", 0, None), ts(10)),
    ];
    // After the reconnect: D's own fill event arrives late (already gap-filled), then a marker.
    let third_connection = vec![
        fill_event("e-d", d("filled", 50, Some("20")), 50, "20", ts(20)),
        event("new", order_json("ord-e", "to-E-1", "new", 0, None), ts(30)),
    ];
    let (url, stand_in) =
        start(vec![Script::Refuse, Script::SendAndClose(second_connection), Script::SendAndHold(third_connection)])
            .await;
    let mut d_filled: wire::Order = serde_json::from_value(d("filled", 50, Some("20"))).unwrap();
    d_filled.filled_at = Some(ts(20));
    let a_filled: wire::Order = serde_json::from_value(a("filled", 100, Some("10.6"))).unwrap();
    let gap_fill = Arc::new(FakeGapFill {
        // First connection's gap fill: nothing; the second's: D filled while down, and A again.
        answers: Mutex::new(vec![Ok(Vec::new()), Ok(vec![a_filled, d_filled])]),
        asked: Mutex::new(Vec::new()),
    });
    let clock = Arc::new(ManualClock::new(ts(59)));
    let stream = TradeUpdatesStream::spawn(config(url), gap_fill.clone(), clock);

    let reports = collect_until(&stream, |r| r.iter().any(|r| r.client_order_id().as_str() == "to-E-1")).await;

    assert_eq!(
        reports,
        vec![
            accepted("to-A-1", "ord-a", ts(1)),
            filled("to-A-1", "e-1", 40, Decimal::from(10), ts(2)),
            filled("to-A-1", "e-2", 60, Decimal::from(11), ts(3)),
            accepted("to-B-1", "ord-b", ts(4)),
            BrokerReport::Canceled { client_order_id: cid("to-B-1"), at: ts(6) },
            accepted("to-C-1", "ord-c", ts(7)),
            BrokerReport::Rejected { client_order_id: cid("to-C-1"), reason: REJECTED_BY_ALPACA.into(), at: ts(8) },
            accepted("to-D-1", "ord-d", ts(10)),
            // The gap fill: D's fill, once (its late stream event adds nothing).
            filled("to-D-1", "gap:ord-d:50", 50, Decimal::from(20), ts(20)),
            accepted("to-E-1", "ord-e", ts(30)),
        ]
    );
    let violations = stand_in.violations.lock().unwrap().clone();
    assert_eq!(violations, Vec::<String>::new());
    // Refused, then connected, dropped, reconnected.
    assert_eq!(stand_in.connections.load(Ordering::SeqCst), 3);
    let health = stream.health();
    assert_eq!(health.connections, 2);
    assert!(health.connected);
    assert_eq!(health.last_event_at, Some(ts(30)));
    assert!(health.last_error.is_some());
    // Each gap fill started at the last event seen, less the overlap.
    assert_eq!(*gap_fill.asked.lock().unwrap(), vec![ts(0) - chrono::Duration::seconds(5), ts(5)]);
}

fn marker() -> Value {
    event("new", order_json("ord-e", "to-E-1", "new", 0, None), ts(30))
}

#[tokio::test]
async fn a_failed_gap_fill_drops_the_connection_and_is_retried_on_the_next() {
    let (url, stand_in) = start(vec![Script::SendAndHold(Vec::new()), Script::SendAndHold(vec![marker()])]).await;
    let mut d_filled: wire::Order =
        serde_json::from_value(order_json("ord-d", "to-D-1", "filled", 50, Some("20"))).unwrap();
    d_filled.filled_at = Some(ts(20));
    d_filled.submitted_at = Some(ts(10));
    let unavailable = BrokerError::Unavailable { reason: "503 from /v2/orders".into(), retry_after: None };
    let gap_fill = Arc::new(FakeGapFill {
        answers: Mutex::new(vec![Err(unavailable), Ok(vec![d_filled])]),
        asked: Mutex::new(Vec::new()),
    });
    let stream = TradeUpdatesStream::spawn(config(url), gap_fill.clone(), Arc::new(ManualClock::new(ts(59))));

    let reports = collect_until(&stream, |r| r.iter().any(|r| r.client_order_id().as_str() == "to-E-1")).await;

    assert_eq!(
        reports,
        vec![
            accepted("to-D-1", "ord-d", ts(10)),
            filled("to-D-1", "gap:ord-d:50", 50, Decimal::from(20), ts(20)),
            accepted("to-E-1", "ord-e", ts(30)),
        ]
    );
    assert_eq!(stand_in.connections.load(Ordering::SeqCst), 2);
    let health = stream.health();
    assert_eq!(health.connections, 1, "the first connection never completed");
    assert!(health.last_error.unwrap_or_default().contains("gap fill"));
    // Nothing was seen in between: both asked from the configured start.
    let start = ts(0) - chrono::Duration::seconds(5);
    assert_eq!(*gap_fill.asked.lock().unwrap(), vec![start, start]);
}

/// The stand-in never reads a held connection, so it never answers the client's ping.
#[tokio::test]
async fn a_silent_connection_is_pinged_then_replaced() {
    let (url, stand_in) = start(vec![Script::SendAndHold(Vec::new()), Script::SendAndHold(vec![marker()])]).await;
    let gap_fill = Arc::new(FakeGapFill { answers: Mutex::new(Vec::new()), asked: Mutex::new(Vec::new()) });
    let config = StreamConfig { idle_timeout: Duration::from_millis(20), ..config(url) };
    let stream = TradeUpdatesStream::spawn(config, gap_fill, Arc::new(ManualClock::new(ts(59))));

    let reports = collect_until(&stream, |r| r.iter().any(|r| r.client_order_id().as_str() == "to-E-1")).await;

    assert_eq!(reports, vec![accepted("to-E-1", "ord-e", ts(30))]);
    assert_eq!(stand_in.connections.load(Ordering::SeqCst), 2);
    let health = stream.health();
    assert_eq!(health.connections, 2);
    assert!(health.last_error.unwrap_or_default().contains("did not answer a ping"));
}
