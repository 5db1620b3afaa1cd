//! The assembled adapter ([`AlpacaExecution`]) against one stand-in Alpaca: an axum app serving
//! the Trading REST API over an order book, and a WebSocket listener serving `/stream` from the
//! same book (binary frames, sent when the test says, a connection dropped when the test says).
//! Faults are queued per request; every request is counted by method and path.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::State;
use axum::http::{Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, TimeZone, Utc};
use futures::{SinkExt, StreamExt};
use rust_decimal::Decimal;
use serde_json::{json, Value};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message;
use tradeops_brokers::alpaca::execution::{AlpacaConfig, AlpacaExecution};
use tradeops_brokers::alpaca::rest::AlpacaCredentials;
use tradeops_brokers::alpaca::stream::BackoffPolicy;
use tradeops_brokers::{BrokerError, ExecutionBroker};
use tradeops_core::broker::{BrokerLookup, BrokerOpenOrder, BrokerReport};
use tradeops_core::market::Side;
use tradeops_core::orders::{ClientOrderId, Order, OrderType, TimeInForce};
use tradeops_core::symbol::Symbol;
use tradeops_core::time::Timestamp;
use tradeops_core::ManualClock;

const KEY_ID: &str = "PKADAPTER";
const SECRET: &str = "adapter-secret-51c7";

fn at(minute: u32, second: u32) -> Timestamp {
    Utc.with_ymd_and_hms(2026, 11, 25, 14, minute, second).unwrap()
}

fn cid(raw: &str) -> ClientOrderId {
    ClientOrderId::parse(raw).unwrap()
}

fn order(id: &str, quantity: u64) -> Order {
    let symbol = Symbol::parse("ABCD").unwrap();
    Order::new(cid(id), symbol, Side::Buy, OrderType::Market, TimeInForce::Day, quantity, None, None, at(30, 0))
}

/// What the test tells the stream's open connection.
enum Push {
    Frame(Value),
    /// Drop the connection without a close handshake, as a network fault would.
    Drop,
}

#[derive(Default)]
struct Book {
    orders: Vec<Value>,
    /// Creates the next POSTed order, then answers 500.
    lose_next_submit_reply: bool,
    calls: HashMap<(String, String), usize>,
    deleted: Vec<String>,
    next_id: u64,
    /// The open stream connection's sender.
    stream: Option<mpsc::UnboundedSender<Push>>,
    connections: usize,
    /// Connections the client ended (closed or dropped).
    client_closed: usize,
}

type Shared = Arc<Mutex<Book>>;

impl Book {
    /// Every order was submitted at 14:00, before any gap fill's `after`: only the open list
    /// and the lookups by client order id can find it again.
    fn create(&mut self, client_order_id: &str, qty: &str, status: &str) -> Value {
        self.next_id += 1;
        let order = json!({
            "id": format!("7c2d0c5e-0000-4000-8000-{:012}", self.next_id),
            "client_order_id": client_order_id, "symbol": "ABCD",
            "created_at": "2026-11-25T14:00:00Z", "submitted_at": "2026-11-25T14:00:00Z",
            "updated_at": "2026-11-25T14:00:00Z", "qty": qty, "filled_qty": "0",
            "filled_avg_price": null, "type": "market", "side": "buy", "time_in_force": "day",
            "limit_price": null, "stop_price": null, "status": status, "extended_hours": false,
        });
        self.orders.push(order.clone());
        order
    }

    fn find(&mut self, client_order_id: &str) -> Option<&mut Value> {
        self.orders.iter_mut().find(|o| o["client_order_id"] == client_order_id)
    }
}

fn error(status: u16, code: i64, message: &str) -> Response {
    (StatusCode::from_u16(status).unwrap(), axum::Json(json!({"code": code, "message": message}))).into_response()
}

fn is_open(order: &Value) -> bool {
    !matches!(order["status"].as_str(), Some("filled" | "canceled" | "expired" | "rejected" | "replaced"))
}

async fn rest(
    State(book): State<Shared>,
    method: Method,
    uri: Uri,
    headers: axum::http::HeaderMap,
    body: String,
) -> Response {
    let path = uri.path().to_string();
    let query: HashMap<String, String> = uri
        .query()
        .unwrap_or("")
        .split('&')
        .filter_map(|p| p.split_once('='))
        .map(|(k, v)| (k.to_string(), v.replace("%3A", ":").replace("%2B", "+")))
        .collect();
    let mut b = book.lock().unwrap();
    *b.calls.entry((method.to_string(), path.clone())).or_default() += 1;
    let authorized = headers.get("apca-api-key-id").is_some_and(|v| v == KEY_ID)
        && headers.get("apca-api-secret-key").is_some_and(|v| v == SECRET);
    if !authorized {
        return error(401, 40110000, "request is not authorized");
    }
    match (method.as_str(), path.as_str()) {
        ("POST", "/v2/orders") => {
            let sent: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
            let Some(client_order_id) = sent["client_order_id"].as_str() else {
                return error(422, 40010000, "client_order_id is required");
            };
            if b.find(client_order_id).is_some() {
                return error(422, 40010001, "client_order_id must be unique");
            }
            let created = b.create(client_order_id, sent["qty"].as_str().unwrap_or("0"), "accepted");
            if std::mem::take(&mut b.lose_next_submit_reply) {
                return error(500, 50010000, "internal server error");
            }
            axum::Json(created).into_response()
        }
        ("GET", "/v2/orders:by_client_order_id") => {
            match query.get("client_order_id").and_then(|id| b.find(id)).cloned() {
                Some(order) => axum::Json(order).into_response(),
                None => error(404, 40410000, "order not found"),
            }
        }
        ("GET", "/v2/orders") => {
            let after = query.get("after").map(|a| DateTime::parse_from_rfc3339(a).unwrap().with_timezone(&Utc));
            let submitted = |o: &Value| -> DateTime<Utc> { o["submitted_at"].as_str().unwrap().parse().unwrap() };
            let list: Vec<Value> = b
                .orders
                .iter()
                .filter(|o| match query.get("status").map(String::as_str) {
                    Some("all") => true,
                    Some("closed") => !is_open(o),
                    _ => is_open(o),
                })
                .filter(|o| after.is_none_or(|a| submitted(o) > a))
                .cloned()
                .collect();
            axum::Json(list).into_response()
        }
        ("DELETE", p) if p.starts_with("/v2/orders/") => {
            let id = p["/v2/orders/".len()..].to_string();
            let Some(order) = b.orders.iter_mut().find(|o| o["id"] == id.as_str()) else {
                return error(404, 40410000, "order not found");
            };
            order["status"] = json!("pending_cancel");
            b.deleted.push(id);
            StatusCode::NO_CONTENT.into_response()
        }
        _ => error(404, 40410000, "route not found"),
    }
}

/// Serves `/stream` connections one after another: authorizes, checks the listen, then sends
/// what the test pushes until told to drop, or until the client goes away.
async fn stream(listener: tokio::net::TcpListener, book: Shared) {
    loop {
        let Ok((tcp, _)) = listener.accept().await else { return };
        let Ok(mut socket) = tokio_tungstenite::accept_async(tcp).await else { continue };
        let auth = next_json(&mut socket).await;
        if auth != json!({"action": "authenticate", "data": {"key_id": KEY_ID, "secret_key": SECRET}}) {
            continue;
        }
        let authorized = json!({"stream": "authorization", "data": {"status": "authorized", "action": "authenticate"}});
        if socket.send(Message::Binary(authorized.to_string().into())).await.is_err() {
            continue;
        }
        if next_json(&mut socket).await != json!({"action": "listen", "data": {"streams": ["trade_updates"]}}) {
            continue;
        }
        let listening = json!({"stream": "listening", "data": {"streams": ["trade_updates"]}});
        if socket.send(Message::Binary(listening.to_string().into())).await.is_err() {
            continue;
        }
        let (tx, mut rx) = mpsc::unbounded_channel();
        {
            let mut b = book.lock().unwrap();
            b.stream = Some(tx);
            b.connections += 1;
        }
        loop {
            tokio::select! {
                push = rx.recv() => match push {
                    Some(Push::Frame(frame)) => {
                        if socket.send(Message::Binary(frame.to_string().into())).await.is_err() {
                            break;
                        }
                    }
                    Some(Push::Drop) | None => break,
                },
                incoming = socket.next() => match incoming {
                    Some(Ok(_)) => {}
                    _ => {
                        book.lock().unwrap().client_closed += 1;
                        break;
                    }
                },
            }
        }
    }
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

struct StandIn {
    book: Shared,
    adapter: Arc<AlpacaExecution>,
}

/// The adapter's configuration against a stand-in at `base_url` / `stream_url`: reconnects
/// within 200 ms, its gap fill from `gap_fill_from`, and (`wait_for_restore`) its stream held
/// until the engine's open orders are restored.
pub(crate) fn adapter_config(
    base_url: String,
    stream_url: String,
    credentials: AlpacaCredentials,
    gap_fill_from: Timestamp,
    wait_for_restore: bool,
) -> AlpacaConfig {
    AlpacaConfig {
        base_url,
        stream_url,
        credentials,
        request_timeout: Duration::from_secs(10),
        backoff: BackoffPolicy {
            initial: Duration::from_millis(20),
            max: Duration::from_millis(200),
            ..Default::default()
        },
        gap_fill_from,
        gap_overlap: Duration::from_secs(1),
        auth_timeout: Duration::from_secs(10),
        idle_timeout: Duration::from_secs(600),
        wait_for_restore,
    }
}

impl StandIn {
    async fn start() -> StandIn {
        let book: Shared = Arc::default();
        let app = axum::Router::new().fallback(rest).with_state(book.clone());
        let http = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base_url = format!("http://{}", http.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(http, app).await.unwrap() });
        let ws = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let stream_url = format!("ws://{}/stream", ws.local_addr().unwrap());
        tokio::spawn(stream(ws, book.clone()));
        let credentials = AlpacaCredentials { key_id: KEY_ID.into(), secret_key: SECRET.into() };
        let config = adapter_config(base_url, stream_url, credentials, at(30, 0), false);
        let adapter = AlpacaExecution::start(config, Arc::new(ManualClock::new(at(40, 0)))).unwrap();
        let stand_in = StandIn { book, adapter };
        stand_in.connected(1).await;
        stand_in
    }

    /// Waits (bounded, 30 s at most; a wait, not a timing assertion) until the adapter has made `n` connections and is connected, its gap
    /// fill done.
    async fn connected(&self, n: usize) {
        for _ in 0..3000 {
            let state = self.adapter.stream_state();
            if state.connected && state.connections == n as u64 && self.book.lock().unwrap().connections == n {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("the stream did not reach {n} connections: {:?}", self.adapter.stream_state());
    }

    fn calls(&self, method: &str, path: &str) -> usize {
        self.book.lock().unwrap().calls.get(&(method.to_string(), path.to_string())).copied().unwrap_or(0)
    }

    fn orders_of(&self, client_order_id: &str) -> usize {
        self.book.lock().unwrap().orders.iter().filter(|o| o["client_order_id"] == client_order_id).count()
    }

    fn alpaca_id(&self, client_order_id: &str) -> String {
        self.book.lock().unwrap().find(client_order_id).unwrap()["id"].as_str().unwrap().to_string()
    }

    fn seed(&self, client_order_id: &str, status: &str) -> String {
        self.book.lock().unwrap().create(client_order_id, "100", status)["id"].as_str().unwrap().to_string()
    }

    fn push(&self, push: Push) {
        self.book.lock().unwrap().stream.as_ref().unwrap().send(push).ok();
    }

    /// Sets the order's status (and fills it whole at `price` for `filled`), returning it.
    fn set(&self, client_order_id: &str, status: &str, price: Option<&str>, when: Timestamp) -> Value {
        let mut b = self.book.lock().unwrap();
        let order = b.find(client_order_id).unwrap();
        order["status"] = json!(status);
        order["updated_at"] = json!(when);
        if let Some(price) = price {
            order["filled_qty"] = order["qty"].clone();
            order["filled_avg_price"] = json!(price);
            order["filled_at"] = json!(when);
        }
        order.clone()
    }

    fn event(&self, event: &str, order: Value, when: Timestamp) {
        self.push(Push::Frame(json!({"stream": "trade_updates",
            "data": {"event": event, "timestamp": when, "order": order}})));
    }

    fn fill_event(&self, execution_id: &str, order: Value, price: &str, when: Timestamp) {
        let qty = order["qty"].clone();
        self.push(Push::Frame(json!({"stream": "trade_updates", "data": {"event": "fill",
            "execution_id": execution_id, "timestamp": when, "price": price, "qty": qty, "order": order}})));
    }

    /// Polls (bounded) until the reports made so far satisfy `done`.
    async fn poll_until(&self, done: impl Fn(&[BrokerReport]) -> bool) -> Vec<BrokerReport> {
        let mut reports = Vec::new();
        for _ in 0..3000 {
            reports.extend(self.adapter.poll(at(45, 0)).await);
            if done(&reports) {
                return reports;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("reports never complete: {reports:?}");
    }
}

fn fills_of(reports: &[BrokerReport], id: &str) -> usize {
    reports
        .iter()
        .filter(|r| matches!(r, BrokerReport::Filled { client_order_id, .. } if client_order_id.as_str() == id))
        .count()
}

#[tokio::test]
async fn a_submitted_order_is_acknowledged_then_filled_over_the_stream() {
    let alpaca = StandIn::start().await;
    assert_eq!(alpaca.adapter.name(), "alpaca");
    alpaca.adapter.submit(&order("to-ABCD-1", 100), at(31, 0)).await.unwrap();
    assert_eq!(alpaca.calls("POST", "/v2/orders"), 1);
    let alpaca_id = alpaca.alpaca_id("to-ABCD-1");

    let acked = alpaca.set("to-ABCD-1", "new", None, at(31, 1));
    alpaca.event("new", acked, at(31, 1));
    let filled = alpaca.set("to-ABCD-1", "filled", Some("12.34"), at(31, 2));
    alpaca.fill_event("exec-1", filled, "12.34", at(31, 2));

    let reports = alpaca.poll_until(|r| r.len() >= 2).await;
    assert_eq!(reports.len(), 2, "{reports:?}");
    assert_eq!(
        reports[0],
        BrokerReport::Accepted {
            client_order_id: cid("to-ABCD-1"),
            broker_order_id: alpaca_id.as_str().into(),
            at: at(31, 1)
        }
    );
    let BrokerReport::Filled { client_order_id, execution } = &reports[1] else { panic!("{reports:?}") };
    assert_eq!(client_order_id, &cid("to-ABCD-1"));
    assert_eq!(
        (&*execution.execution_id, execution.quantity, execution.price, execution.timestamp),
        ("exec-1", 100, Decimal::new(1234, 2), at(31, 2))
    );
    assert!(alpaca.adapter.orders().unfinished().is_empty(), "the whole fill ends the order");
}

#[tokio::test]
async fn a_submit_whose_reply_is_lost_leaves_exactly_one_order() {
    let alpaca = StandIn::start().await;
    alpaca.book.lock().unwrap().lose_next_submit_reply = true;
    alpaca.adapter.submit(&order("to-ABCD-2", 10), at(31, 0)).await.unwrap();
    assert_eq!(alpaca.orders_of("to-ABCD-2"), 1);
    assert_eq!(alpaca.calls("POST", "/v2/orders"), 1, "found by lookup, not sent again");
    assert_eq!(alpaca.calls("GET", "/v2/orders:by_client_order_id"), 1);
    // The id learned from the lookup serves the cancel without another lookup.
    alpaca.adapter.cancel(&cid("to-ABCD-2"), at(31, 5)).await.unwrap();
    let alpaca_id = alpaca.alpaca_id("to-ABCD-2");
    assert_eq!(alpaca.book.lock().unwrap().deleted, vec![alpaca_id]);
    assert_eq!(alpaca.calls("GET", "/v2/orders:by_client_order_id"), 1);
}

#[tokio::test]
async fn a_cancel_by_client_order_id_reaches_alpacas_id() {
    let alpaca = StandIn::start().await;
    alpaca.adapter.submit(&order("to-ABCD-3", 10), at(31, 0)).await.unwrap();
    alpaca.adapter.cancel(&cid("to-ABCD-3"), at(31, 1)).await.unwrap();
    let submitted = alpaca.alpaca_id("to-ABCD-3");
    assert_eq!(alpaca.calls("DELETE", &format!("/v2/orders/{submitted}")), 1);
    assert_eq!(alpaca.calls("GET", "/v2/orders:by_client_order_id"), 0, "its id was learned at submit");

    // An order the adapter never saw (sent before a restart) is looked up first.
    let earlier = alpaca.seed("to-ABCD-4", "new");
    alpaca.adapter.cancel(&cid("to-ABCD-4"), at(31, 2)).await.unwrap();
    assert_eq!(alpaca.calls("GET", "/v2/orders:by_client_order_id"), 1);
    assert_eq!(alpaca.book.lock().unwrap().deleted, vec![submitted, earlier]);

    let unknown = alpaca.adapter.cancel(&cid("to-NONE-1"), at(31, 3)).await;
    assert_eq!(unknown, Err(BrokerError::UnknownOrder(cid("to-NONE-1"))));
    assert_eq!(alpaca.book.lock().unwrap().deleted.len(), 2);
}

#[tokio::test]
async fn a_fill_in_a_stream_gap_is_reported_once_after_the_reconnect() {
    let alpaca = StandIn::start().await;
    alpaca.adapter.submit(&order("to-ABCD-5", 100), at(31, 0)).await.unwrap();
    let acked = alpaca.set("to-ABCD-5", "new", None, at(31, 1));
    alpaca.event("new", acked, at(31, 1));
    let first = alpaca.poll_until(|r| !r.is_empty()).await;
    assert!(matches!(first.as_slice(), [BrokerReport::Accepted { .. }]), "{first:?}");
    let lookups_before = alpaca.calls("GET", "/v2/orders:by_client_order_id");

    // The connection drops; the order fills meanwhile. It was submitted before the gap, so
    // neither the open list nor the `after` list has it: only the lookup by client order id.
    alpaca.push(Push::Drop);
    let filled = alpaca.set("to-ABCD-5", "filled", Some("20.5"), at(31, 20));
    alpaca.connected(2).await;
    assert_eq!(alpaca.calls("GET", "/v2/orders:by_client_order_id"), lookups_before + 1);

    // The real fill arrives late on the new connection; a marker order tells it was read.
    alpaca.fill_event("exec-9", filled, "20.5", at(31, 20));
    alpaca.seed("to-MARK-1", "new");
    let mark = alpaca.set("to-MARK-1", "new", None, at(31, 30));
    alpaca.event("new", mark, at(31, 30));
    let reports = alpaca
        .poll_until(|r| r.iter().any(|r| matches!(r, BrokerReport::Accepted { client_order_id, .. } if client_order_id.as_str() == "to-MARK-1")))
        .await;
    assert_eq!(fills_of(&reports, "to-ABCD-5"), 1, "{reports:?}");
    let fill = reports.iter().find_map(|r| match r {
        BrokerReport::Filled { execution, .. } => Some(execution.clone()),
        _ => None,
    });
    let fill = fill.unwrap();
    assert_eq!((fill.quantity, fill.price), (100, Decimal::new(205, 1)));
    assert!(alpaca.adapter.orders().unfinished().is_empty());
    assert!(alpaca.adapter.stream_state().last_error.is_some(), "the drop is kept for health");
}

#[tokio::test]
async fn lookup_and_open_orders_map_alpacas_statuses() {
    let alpaca = StandIn::start().await;
    alpaca.seed("to-ABCD-6", "accepted");
    alpaca.seed("to-ABCD-7", "pending_cancel");
    alpaca.seed("to-ABCD-8", "filled");
    alpaca.seed("web order / manual", "new");
    alpaca.seed("to-ABCD-0", "partially_filled");
    let open = |id: &str, cancel_pending| BrokerOpenOrder { client_order_id: cid(id), cancel_pending };
    let adapter = &alpaca.adapter;
    assert_eq!(adapter.lookup(&cid("to-ABCD-6")).await.unwrap(), BrokerLookup::Open(open("to-ABCD-6", false)));
    assert_eq!(adapter.lookup(&cid("to-ABCD-7")).await.unwrap(), BrokerLookup::Open(open("to-ABCD-7", true)));
    assert_eq!(adapter.lookup(&cid("to-ABCD-8")).await.unwrap(), BrokerLookup::Closed);
    assert_eq!(adapter.lookup(&cid("to-NONE-2")).await.unwrap(), BrokerLookup::Unknown);
    assert_eq!(
        adapter.open_orders().await.unwrap(),
        vec![open("to-ABCD-0", false), open("to-ABCD-6", false), open("to-ABCD-7", true)]
    );
}

#[tokio::test]
async fn dropping_the_adapter_ends_its_stream() {
    let alpaca = StandIn::start().await;
    let book = alpaca.book.clone();
    drop(alpaca);
    for _ in 0..3000 {
        if book.lock().unwrap().client_closed == 1 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the stream's connection outlived the adapter");
}
