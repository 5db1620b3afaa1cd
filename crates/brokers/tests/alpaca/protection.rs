//! Protection at the venue through the assembled adapter (CONTRACT §11): a protective order
//! with a take-profit is one `oco` at Alpaca, two orders there and one here. Against a stand-in
//! Alpaca that keeps a group's orders flat and nests the legs under the top-level order only when
//! asked (`nested=true`, research §2.3), gives the stop leg a client order id of its own (§2.2)
//! and sends trade updates of each order alone when the test says: the request's shape, a stop
//! leg's fill reported as our order's, the take-profit's cancel arriving before the leg's fill,
//! our cancel of the group reported once, the groups found again after a restart, and the open
//! list naming the group once.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::State;
use axum::http::{Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use chrono::{TimeZone, Utc};
use futures::{SinkExt, StreamExt};
use rust_decimal::Decimal;
use serde_json::{json, Value};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message;
use tradeops_brokers::alpaca::execution::AlpacaExecution;
use tradeops_brokers::alpaca::rest::{order_request, AlpacaCredentials};
use tradeops_brokers::ExecutionBroker;
use tradeops_core::broker::{BrokerLookup, BrokerOpenOrder, BrokerReport};
use tradeops_core::market::Side;
use tradeops_core::orders::{ClientOrderId, ExitLegs, Order, OrderStatus, OrderType, TimeInForce};
use tradeops_core::symbol::Symbol;
use tradeops_core::time::Timestamp;
use tradeops_core::ManualClock;

const KEY_ID: &str = "PKPROTECT";
const SECRET: &str = "protect-secret-77a1";
const OURS: &str = "to-ABCD-P1";
/// The Alpaca id of the stand-in's first order.
const FIRST_ID: &str = "5d0c1a2b-0000-4000-8000-000000000001";

fn at(minute: u32, second: u32) -> Timestamp {
    Utc.with_ymd_and_hms(2026, 11, 25, 14, minute, second).unwrap()
}

fn cid(raw: &str) -> ClientOrderId {
    ClientOrderId::parse(raw).unwrap()
}

/// The engine's protective order: a GTC sell stop of 10 (stop-limit when `limit`), with a
/// take-profit when `target`.
fn protective(id: &str, stop: Decimal, limit: Option<Decimal>, target: Option<Decimal>) -> Order {
    let legs = ExitLegs { stop_price: stop, stop_limit_price: limit, take_profit: target };
    let mut order = Order::new(
        cid(id),
        Symbol::parse("ABCD").unwrap(),
        Side::Sell,
        legs.stop_type(),
        TimeInForce::Gtc,
        10,
        limit,
        Some(stop),
        at(30, 0),
    );
    order.legs = Some(legs);
    order
}

fn d(text: &str) -> Decimal {
    text.parse().unwrap()
}

enum Push {
    Frame(Value),
}

/// The stand-in's orders, flat as Alpaca keeps them; `parent` (not sent) ties a leg to its
/// group's top-level order.
#[derive(Default)]
struct Book {
    orders: Vec<Value>,
    posted: Vec<Value>,
    calls: HashMap<(String, String), usize>,
    next_id: u64,
    stream: Option<mpsc::UnboundedSender<Push>>,
    connections: usize,
}

type Shared = Arc<Mutex<Book>>;

impl Book {
    fn order(&mut self, fields: Value) -> Value {
        self.next_id += 1;
        let mut order = json!({
            "id": format!("5d0c1a2b-0000-4000-8000-{:012}", self.next_id),
            "symbol": "ABCD", "created_at": "2026-11-25T14:30:00Z", "submitted_at": "2026-11-25T14:30:00Z",
            "updated_at": "2026-11-25T14:30:00Z", "filled_qty": "0", "filled_avg_price": null,
            "side": "sell", "time_in_force": "gtc", "limit_price": null, "stop_price": null,
            "status": "new", "order_class": "", "legs": null, "replaced_by": null, "parent": null,
        });
        for (k, v) in fields.as_object().unwrap() {
            order[k] = v.clone();
        }
        self.orders.push(order.clone());
        order
    }

    /// An `oco` as Alpaca makes it from the request: the take-profit on top with the client
    /// order id sent, the stop leg `held` with an id of Alpaca's.
    fn oco(&mut self, sent: &Value) -> Value {
        let top = self.order(json!({"client_order_id": sent["client_order_id"], "qty": sent["qty"],
            "type": "limit", "order_class": "oco", "limit_price": sent["take_profit"]["limit_price"]}));
        let stop_type = if sent["stop_loss"]["limit_price"].is_string() { "stop_limit" } else { "stop" };
        let leg_client = format!("0f9e8d7c-aaaa-4bbb-8ccc-{:012}", self.next_id + 1);
        self.order(json!({"client_order_id": leg_client, "qty": sent["qty"], "type": stop_type,
            "order_class": "oco", "stop_price": sent["stop_loss"]["stop_price"],
            "limit_price": sent["stop_loss"].get("limit_price").cloned().unwrap_or(Value::Null),
            "status": "held", "parent": top["id"]}));
        self.view(top["id"].as_str().unwrap(), true)
    }

    fn index(&self, alpaca_id: &str) -> usize {
        self.orders.iter().position(|o| o["id"] == alpaca_id).unwrap()
    }

    /// An order as Alpaca answers it: `legs` filled in under a top-level order when `nested`.
    fn view(&self, alpaca_id: &str, nested: bool) -> Value {
        let mut order = self.orders[self.index(alpaca_id)].clone();
        if nested && order["parent"].is_null() {
            let legs: Vec<Value> =
                self.orders.iter().filter(|o| o["parent"] == alpaca_id).map(|o| strip(o.clone())).collect();
            if !legs.is_empty() {
                order["legs"] = json!(legs);
            }
        }
        strip(order)
    }

    fn set(&mut self, alpaca_id: &str, fields: Value) -> Value {
        let i = self.index(alpaca_id);
        for (k, v) in fields.as_object().unwrap() {
            self.orders[i][k] = v.clone();
        }
        self.view(alpaca_id, false)
    }

    fn group_open(&self, top: &Value) -> bool {
        let id = top["id"].as_str().unwrap();
        self.orders.iter().filter(|o| o["id"] == id || o["parent"] == id).any(is_open)
    }
}

fn strip(mut order: Value) -> Value {
    order.as_object_mut().unwrap().remove("parent");
    order
}

fn is_open(order: &Value) -> bool {
    !matches!(order["status"].as_str(), Some("filled" | "canceled" | "expired" | "rejected" | "replaced"))
}

fn error(status: u16, code: i64, message: &str) -> Response {
    (StatusCode::from_u16(status).unwrap(), axum::Json(json!({"code": code, "message": message}))).into_response()
}

async fn rest(State(book): State<Shared>, method: Method, uri: Uri, body: String) -> Response {
    let path = uri.path().to_string();
    let query: HashMap<String, String> = uri
        .query()
        .unwrap_or("")
        .split('&')
        .filter_map(|p| p.split_once('='))
        .map(|(k, v)| (k.into(), v.into()))
        .collect();
    let nested = query.get("nested").map(String::as_str) == Some("true");
    let mut b = book.lock().unwrap();
    *b.calls.entry((method.to_string(), path.clone())).or_default() += 1;
    match (method.as_str(), path.as_str()) {
        ("POST", "/v2/orders") => {
            let sent: Value = serde_json::from_str(&body).unwrap();
            b.posted.push(sent.clone());
            if sent["order_class"] == "oco" {
                return axum::Json(b.oco(&sent)).into_response();
            }
            let order = b.order(json!({"client_order_id": sent["client_order_id"], "qty": sent["qty"],
                "type": sent["type"], "stop_price": sent["stop_price"], "limit_price": sent.get("limit_price")}));
            axum::Json(strip(order)).into_response()
        }
        ("GET", "/v2/orders:by_client_order_id") => {
            let wanted = query.get("client_order_id").cloned().unwrap_or_default();
            match b.orders.iter().find(|o| o["client_order_id"] == wanted.as_str()) {
                Some(o) => axum::Json(strip(o.clone())).into_response(),
                None => error(404, 40410000, "order not found"),
            }
        }
        ("GET", "/v2/orders") => {
            let status = query.get("status").cloned().unwrap_or_else(|| "open".into());
            let list: Vec<Value> = if nested {
                b.orders
                    .iter()
                    .filter(|o| o["parent"].is_null())
                    .filter(|o| status == "all" || b.group_open(o))
                    .map(|o| b.view(o["id"].as_str().unwrap(), true))
                    .collect()
            } else {
                b.orders.iter().filter(|o| status == "all" || is_open(o)).map(|o| strip(o.clone())).collect()
            };
            axum::Json(list).into_response()
        }
        ("GET", p) if p.starts_with("/v2/orders/") => {
            let id = &p["/v2/orders/".len()..];
            match b.orders.iter().any(|o| o["id"] == id) {
                true => axum::Json(b.view(id, nested)).into_response(),
                false => error(404, 40410000, "order not found"),
            }
        }
        ("DELETE", p) if p.starts_with("/v2/orders/") => {
            // One-cancels-other: the whole group goes (its updates are the test's to send).
            let id = p["/v2/orders/".len()..].to_string();
            let members: Vec<String> = b
                .orders
                .iter()
                .filter(|o| o["id"] == id.as_str() || o["parent"] == id.as_str())
                .map(|o| o["id"].as_str().unwrap().to_string())
                .collect();
            for member in members {
                b.set(&member, json!({"status": "canceled", "canceled_at": "2026-11-25T14:35:00Z"}));
            }
            StatusCode::NO_CONTENT.into_response()
        }
        _ => error(404, 40410000, "route not found"),
    }
}

async fn serve_stream(listener: tokio::net::TcpListener, book: Shared) {
    loop {
        let Ok((tcp, _)) = listener.accept().await else { return };
        let Ok(mut socket) = tokio_tungstenite::accept_async(tcp).await else { continue };
        let _auth = socket.next().await;
        let authorized = json!({"stream": "authorization", "data": {"status": "authorized", "action": "authenticate"}});
        if socket.send(Message::Binary(authorized.to_string().into())).await.is_err() {
            continue;
        }
        let _listen = socket.next().await;
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
                    None => break,
                },
                incoming = socket.next() => if !matches!(incoming, Some(Ok(_))) { break },
            }
        }
    }
}

struct StandIn {
    book: Shared,
    adapter: Arc<AlpacaExecution>,
}

impl StandIn {
    /// A stand-in holding what `prepare` puts in its book, and an adapter started against it;
    /// `restore`: the engine's open orders it restores before its stream connects.
    async fn start(prepare: impl FnOnce(&mut Book), restore: Option<Vec<Order>>) -> StandIn {
        let book: Shared = Arc::default();
        prepare(&mut book.lock().unwrap());
        let app = axum::Router::new().fallback(rest).with_state(book.clone());
        let http = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base_url = format!("http://{}", http.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(http, app).await.unwrap() });
        let ws = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let stream_url = format!("ws://{}/stream", ws.local_addr().unwrap());
        tokio::spawn(serve_stream(ws, book.clone()));
        let credentials = AlpacaCredentials { key_id: KEY_ID.into(), secret_key: SECRET.into() };
        let config = crate::execution::adapter_config(base_url, stream_url, credentials, at(30, 0), restore.is_some());
        let adapter = AlpacaExecution::start(config, Arc::new(ManualClock::new(at(40, 0)))).unwrap();
        if let Some(orders) = restore {
            assert!(adapter.restore(&orders, at(40, 0)).await.is_empty());
        }
        let stand_in = StandIn { book, adapter };
        for _ in 0..3000 {
            if stand_in.adapter.stream_state().connected && stand_in.book.lock().unwrap().connections == 1 {
                return stand_in;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("the stream never connected: {:?}", stand_in.adapter.stream_state());
    }

    /// The top-level order and the stop leg of our group (Alpaca's JSON, not nested).
    fn group(&self) -> (Value, Value) {
        let b = self.book.lock().unwrap();
        let top = b.orders.iter().find(|o| o["client_order_id"] == OURS).cloned().unwrap();
        let leg = b.orders.iter().find(|o| o["parent"] == top["id"]).cloned().unwrap();
        (strip(top), strip(leg))
    }

    fn set(&self, order: &Value, fields: Value) -> Value {
        self.book.lock().unwrap().set(order["id"].as_str().unwrap(), fields)
    }

    fn send(&self, data: Value) {
        let frame = json!({"stream": "trade_updates", "data": data});
        self.book.lock().unwrap().stream.as_ref().unwrap().send(Push::Frame(frame)).unwrap();
    }

    fn event(&self, event: &str, order: Value, when: Timestamp) {
        self.send(json!({"event": event, "timestamp": when, "order": order}));
    }

    fn fill(&self, execution_id: &str, order: Value, qty: &str, price: &str, when: Timestamp) {
        self.send(json!({"event": "fill", "execution_id": execution_id, "timestamp": when, "price": price,
            "qty": qty, "position_qty": "0", "order": order}));
    }

    /// A marker order's `new`: once it is reported, everything sent before it was read.
    fn mark(&self) {
        let order = self.book.lock().unwrap().order(json!({"client_order_id": "to-MARK-1", "qty": "1",
            "type": "market", "side": "buy", "time_in_force": "day"}));
        self.event("new", strip(order), at(36, 0));
    }

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

    /// Reports until the marker is, with the marker's left out.
    async fn reports_until_marked(&self) -> Vec<BrokerReport> {
        self.mark();
        let marked = |r: &BrokerReport| r.client_order_id().as_str() == "to-MARK-1";
        let reports = self.poll_until(|rs| rs.iter().any(marked)).await;
        reports.into_iter().filter(|r| !marked(r)).collect()
    }
}

fn fills(reports: &[BrokerReport]) -> Vec<(String, String, u64, Decimal)> {
    reports
        .iter()
        .filter_map(|r| match r {
            BrokerReport::Filled { client_order_id, execution } => Some((
                client_order_id.to_string(),
                execution.execution_id.to_string(),
                execution.quantity,
                execution.price,
            )),
            _ => None,
        })
        .collect()
}

fn endings(reports: &[BrokerReport]) -> usize {
    reports
        .iter()
        .filter(|r| {
            matches!(r, BrokerReport::Canceled { .. } | BrokerReport::Expired { .. } | BrokerReport::Rejected { .. })
        })
        .count()
}

/// Every report names our order: never the leg's own client order id.
fn all_ours(reports: &[BrokerReport]) {
    for report in reports {
        assert_eq!(report.client_order_id().as_str(), OURS, "{reports:?}");
    }
}

#[test]
fn a_protective_order_with_a_take_profit_is_an_oco_and_without_one_a_plain_stop() {
    let oco = order_request(&protective(OURS, d("9.50"), Some(d("9.40")), Some(d("12.00"))));
    assert_eq!(
        serde_json::to_value(&oco).unwrap(),
        json!({"symbol": "ABCD", "qty": "10", "side": "sell", "type": "limit", "time_in_force": "gtc",
            "client_order_id": OURS, "order_class": "oco", "take_profit": {"limit_price": "12.00"},
            "stop_loss": {"stop_price": "9.50", "limit_price": "9.40"}})
    );
    let stop_only = order_request(&protective("to-ABCD-P2", d("9.5"), None, Some(d("12"))));
    assert_eq!(
        serde_json::to_value(&stop_only).unwrap()["stop_loss"],
        json!({"stop_price": "9.50"}),
        "a stop without a limit leaves the leg a stop"
    );
    let plain = order_request(&protective("to-ABCD-P3", d("9.5"), None, None));
    assert_eq!(
        serde_json::to_value(&plain).unwrap(),
        json!({"symbol": "ABCD", "qty": "10", "side": "sell", "type": "stop", "time_in_force": "gtc",
            "stop_price": "9.50", "client_order_id": "to-ABCD-P3"})
    );
    let stop_limit = order_request(&protective("to-ABCD-P4", d("9.5"), Some(d("9.4")), None));
    let body = serde_json::to_value(&stop_limit).unwrap();
    assert_eq!(
        (&body["type"], &body["limit_price"], &body["order_class"]),
        (&json!("stop_limit"), &json!("9.40"), &Value::Null)
    );
}

#[tokio::test]
async fn the_stop_legs_fill_is_a_fill_of_our_order_and_the_take_profits_cancel_ends_nothing() {
    let alpaca = StandIn::start(|_| {}, None).await;
    alpaca.adapter.submit(&protective(OURS, d("9.5"), None, Some(d("12"))), at(31, 0)).await.unwrap();
    assert_eq!(alpaca.book.lock().unwrap().posted[0]["order_class"], "oco");
    let (top, leg) = alpaca.group();
    alpaca.event("new", top.clone(), at(31, 1));
    // The stop triggers and fills; Alpaca cancels the take-profit after.
    let leg_new = alpaca.set(&leg, json!({"status": "new"}));
    alpaca.event("new", leg_new, at(33, 0));
    let leg_filled = alpaca.set(&leg, json!({"status": "filled", "filled_qty": "10", "filled_avg_price": "9.48"}));
    alpaca.fill("exec-stop-1", leg_filled, "10", "9.48", at(33, 1));
    let top_canceled = alpaca.set(&top, json!({"status": "canceled"}));
    alpaca.event("canceled", top_canceled, at(33, 2));

    let reports = alpaca.reports_until_marked().await;
    all_ours(&reports);
    assert_eq!(
        reports[0],
        BrokerReport::Accepted {
            client_order_id: cid(OURS),
            broker_order_id: top["id"].as_str().unwrap().into(),
            at: at(31, 1)
        }
    );
    assert_eq!(fills(&reports), vec![(OURS.into(), "exec-stop-1".into(), 10, d("9.48"))]);
    assert_eq!(endings(&reports), 0, "filled whole: the take-profit's cancel is one-cancels-other: {reports:?}");
    assert!(alpaca.adapter.orders().unfinished().is_empty());
}

/// Our bracket group placed at the stand-in, its stop leg then filled there (10 at 9.47) with
/// nothing told yet: the stand-in and the group's top-level order (the take-profit).
async fn stop_leg_filled_at_rest() -> (StandIn, Value) {
    let alpaca = StandIn::start(|_| {}, None).await;
    alpaca.adapter.submit(&protective(OURS, d("9.5"), None, Some(d("12"))), at(31, 0)).await.unwrap();
    let (top, leg) = alpaca.group();
    alpaca.set(
        &leg,
        json!({"status": "filled", "filled_qty": "10", "filled_avg_price": "9.47",
        "filled_at": "2026-11-25T14:33:01Z"}),
    );
    (alpaca, top)
}

#[tokio::test]
async fn a_take_profit_canceled_before_the_stop_legs_fill_is_reported_as_the_fill() {
    // Alpaca has filled the stop and cancelled the take-profit; the stream tells the cancel
    // first and the fill only later.
    let (alpaca, top) = stop_leg_filled_at_rest().await;
    let top_canceled = alpaca.set(&top, json!({"status": "canceled"}));
    alpaca.event("canceled", top_canceled, at(33, 2));
    let first = alpaca.poll_until(|r| !fills(r).is_empty()).await;
    all_ours(&first);
    assert_eq!(endings(&first), 0, "never a cancel of an order that filled: {first:?}");
    assert_eq!(fills(&first).len(), 1);
    let (_, _, quantity, price) = fills(&first)[0].clone();
    assert_eq!((quantity, price), (10, d("9.47")));

    let leg_filled = alpaca.group().1;
    alpaca.fill("exec-stop-2", leg_filled, "10", "9.47", at(33, 3));
    let later = alpaca.reports_until_marked().await;
    assert_eq!(fills(&later), vec![], "the fill itself, late, is already counted: {later:?}");
    assert_eq!(endings(&later), 0);
}

/// The same race when a listing read the leg `filled` before the take-profit's cancel came on
/// the stream: the group is not ended `Canceled` (an exit waiting for its shares would then
/// sell shares already sold), the leg's fill is reported instead.
#[tokio::test]
async fn a_leg_read_filled_before_the_take_profits_cancel_is_reported_as_the_fill_never_a_cancel() {
    let (alpaca, top) = stop_leg_filled_at_rest().await;
    // Reconciliation's listing reads the group while its take-profit still works.
    alpaca.adapter.open_orders().await.unwrap();
    let top_canceled = alpaca.set(&top, json!({"status": "canceled"}));
    alpaca.event("canceled", top_canceled, at(33, 2));
    let first = alpaca.poll_until(|r| !fills(r).is_empty() || endings(r) > 0).await;
    all_ours(&first);
    assert_eq!(endings(&first), 0, "never a cancel of an order that filled: {first:?}");
    assert_eq!(fills(&first).len(), 1, "{first:?}");
}

#[tokio::test]
async fn our_cancel_of_the_oco_cancels_both_orders_and_is_reported_once() {
    let alpaca = StandIn::start(|_| {}, None).await;
    alpaca.adapter.submit(&protective(OURS, d("9.5"), None, Some(d("12"))), at(31, 0)).await.unwrap();
    let (top, leg) = alpaca.group();
    alpaca.adapter.cancel(&cid(OURS), at(34, 0)).await.unwrap();
    assert_eq!(
        alpaca
            .book
            .lock()
            .unwrap()
            .calls
            .get(&("DELETE".into(), format!("/v2/orders/{}", top["id"].as_str().unwrap()))),
        Some(&1)
    );
    // Alpaca tells the take-profit's cancel; the held leg's may never come (research §7): the
    // group is read again and ends once.
    alpaca.event("canceled", alpaca.group().0, at(34, 1));
    let reports = alpaca.poll_until(|r| endings(r) > 0).await;
    all_ours(&reports);
    assert_eq!(reports.iter().filter(|r| matches!(r, BrokerReport::Canceled { .. })).count(), 1, "{reports:?}");
    // When the leg's cancel does come, it adds nothing.
    alpaca.event("canceled", alpaca.group().1, at(34, 2));
    let later = alpaca.reports_until_marked().await;
    assert_eq!(endings(&later), 0, "{later:?}");
    assert_eq!(alpaca.group().1["status"], "canceled");
    let _ = leg;
}

#[tokio::test]
async fn after_a_restart_the_group_is_found_again_and_its_stop_legs_fill_is_ours() {
    let mut top_id = String::new();
    let alpaca = StandIn::start(
        |book| {
            let sent = serde_json::to_value(order_request(&protective(OURS, d("9.5"), None, Some(d("12"))))).unwrap();
            top_id = book.oco(&sent)["id"].as_str().unwrap().to_string();
        },
        Some(vec![{
            // The engine's book: the protective order, accepted before the restart under the
            // top-level order's id (the stand-in's first).
            let mut order = protective(OURS, d("9.5"), None, Some(d("12")));
            order.status = OrderStatus::Accepted;
            order.broker_order_id = Some(FIRST_ID.into());
            order
        }]),
    )
    .await;
    // Only the top-level order's id was kept: the first gap fill's open list (nested) teaches
    // the leg.
    let (top, leg) = alpaca.group();
    assert_eq!(top["id"].as_str().unwrap(), top_id);
    assert_eq!(top_id, FIRST_ID);
    let leg_filled = alpaca.set(&leg, json!({"status": "filled", "filled_qty": "10", "filled_avg_price": "9.45"}));
    alpaca.fill("exec-stop-3", leg_filled, "10", "9.45", at(37, 0));
    let top_replaced = alpaca.set(&top, json!({"status": "replaced"}));
    alpaca.event("replaced", top_replaced, at(37, 1));
    let reports = alpaca.reports_until_marked().await;
    all_ours(&reports);
    assert_eq!(fills(&reports), vec![(OURS.into(), "exec-stop-3".into(), 10, d("9.45"))]);
    assert_eq!(endings(&reports), 0, "{reports:?}");
}

#[tokio::test]
async fn a_legs_fill_of_a_group_never_read_is_mapped_by_reading_its_group() {
    // The adapter started after the group was placed and never listed it (it is not open any
    // more when the fill arrives): the leg's update makes it read the group.
    let alpaca = StandIn::start(
        |book| {
            let sent = serde_json::to_value(order_request(&protective(OURS, d("9.5"), None, Some(d("12"))))).unwrap();
            book.oco(&sent);
        },
        None,
    )
    .await;
    let (top, leg) = alpaca.group();
    alpaca.set(&top, json!({"status": "canceled"}));
    let leg_filled = alpaca.set(&leg, json!({"status": "filled", "filled_qty": "10", "filled_avg_price": "9.44"}));
    alpaca.fill("exec-stop-4", leg_filled, "10", "9.44", at(37, 0));
    let reports = alpaca.reports_until_marked().await;
    let ours: Vec<&BrokerReport> = reports.iter().filter(|r| r.client_order_id().as_str() == OURS).collect();
    assert_eq!(ours.len(), reports.len(), "nothing in the leg's own name: {reports:?}");
    assert_eq!(fills(&reports), vec![(OURS.into(), "exec-stop-4".into(), 10, d("9.44"))]);
}

#[tokio::test]
async fn the_open_list_and_lookups_name_the_group_once_by_our_client_order_id() {
    let alpaca = StandIn::start(
        |book| {
            let sent = serde_json::to_value(order_request(&protective(OURS, d("9.5"), None, Some(d("12"))))).unwrap();
            book.oco(&sent);
        },
        None,
    )
    .await;
    let adapter = &alpaca.adapter;
    let ours = BrokerOpenOrder { client_order_id: cid(OURS), cancel_pending: false };
    assert_eq!(adapter.open_orders().await.unwrap(), vec![ours.clone()]);
    let (top, leg) = alpaca.group();
    let leg_client = cid(leg["client_order_id"].as_str().unwrap());
    assert_eq!(adapter.foreign_order(&leg_client).await.unwrap(), None, "the leg is not foreign");
    assert_eq!(adapter.lookup(&leg_client).await.unwrap(), BrokerLookup::Unknown);
    // The stop triggered: the take-profit was replaced, the stop works. Still open, once.
    alpaca.set(&top, json!({"status": "replaced"}));
    alpaca.set(&leg, json!({"status": "new"}));
    assert_eq!(adapter.open_orders().await.unwrap(), vec![ours.clone()]);
    assert_eq!(adapter.lookup(&cid(OURS)).await.unwrap(), BrokerLookup::Open(ours));
    alpaca.set(&leg, json!({"status": "filled", "filled_qty": "10", "filled_avg_price": "9.4"}));
    assert_eq!(adapter.open_orders().await.unwrap(), vec![]);
    assert_eq!(adapter.lookup(&cid(OURS)).await.unwrap(), BrokerLookup::Closed);
}

#[tokio::test]
async fn an_oco_of_ours_the_engine_lost_is_adopted_as_the_protective_order_it_is() {
    let alpaca = StandIn::start(
        |book| {
            let sent = serde_json::to_value(order_request(&protective(OURS, d("9.5"), Some(d("9.4")), Some(d("12")))))
                .unwrap();
            book.oco(&sent);
        },
        None,
    )
    .await;
    let adopted = alpaca.adapter.foreign_order(&cid(OURS)).await.unwrap().expect("adoptable");
    assert!(adopted.is_protective());
    assert_eq!(
        (adopted.order_type, adopted.time_in_force, adopted.quantity, adopted.stop_price, adopted.limit_price),
        (OrderType::StopLimit, TimeInForce::Gtc, 10, Some(d("9.5")), Some(d("9.4")))
    );
    assert_eq!(
        adopted.legs,
        Some(ExitLegs { stop_price: d("9.5"), stop_limit_price: Some(d("9.4")), take_profit: Some(d("12")) })
    );
}
