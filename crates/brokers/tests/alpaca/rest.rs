//! The Trading REST client against a stand-in Alpaca: an axum app that checks the auth headers,
//! keeps orders as Alpaca does (unique client order ids, `after` exclusive on submission time,
//! pages of at most `limit`), counts every request, and answers the next requests with queued
//! faults (an error status, a reply lost after the order was created, a reply too slow).

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Duration as ChronoDuration, SecondsFormat, Utc};
use rust_decimal::Decimal;
use serde_json::{json, Value};
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tradeops_brokers::alpaca::rest::{AlpacaCredentials, TradingClient};
use tradeops_brokers::{BrokerError, Rejection};
use tradeops_core::market::Side;
use tradeops_core::orders::{ClientOrderId, Order, OrderType, TimeInForce};
use tradeops_core::symbol::Symbol;
use tradeops_core::time::parse_ts;
use tradeops_core::ManualClock;

const KEY_ID: &str = "PKSTANDIN";
const SECRET: &str = "stand-in-secret-9f3a";

/// What the stand-in does with the next request (whatever its route).
#[derive(Clone, Debug)]
enum Fault {
    /// Answers normally.
    Pass,
    /// Answers this status, body and headers without doing anything.
    Status(u16, Value, Vec<(&'static str, String)>),
    /// Creates the order, then answers 500: the reply is lost.
    CreateThen500,
    /// Creates the order, then answers only after this long (past the client's timeout).
    CreateThenSleep(Duration),
}

#[derive(Default)]
struct Book {
    orders: Vec<Value>,
    faults: VecDeque<Fault>,
    /// (method, path) → requests received.
    calls: HashMap<(String, String), usize>,
    bodies: Vec<Value>,
    queries: Vec<HashMap<String, String>>,
    next_id: u64,
}

type Shared = Arc<Mutex<Book>>;

fn start() -> DateTime<Utc> {
    parse_ts("2026-11-25T14:30:00Z").unwrap()
}

fn stamp(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::Micros, true)
}

impl Book {
    fn create(&mut self, body: &Value) -> Value {
        self.next_id += 1;
        let at = stamp(start() + ChronoDuration::milliseconds(self.next_id as i64));
        let order = json!({
            "id": format!("0b1e6e2a-0000-4000-8000-{:012}", self.next_id),
            "client_order_id": body["client_order_id"], "symbol": body["symbol"],
            "created_at": at, "submitted_at": at, "updated_at": at,
            "qty": body["qty"], "filled_qty": "0", "filled_avg_price": null,
            "type": body["type"], "side": body["side"], "time_in_force": body["time_in_force"],
            "limit_price": body.get("limit_price"), "stop_price": body.get("stop_price"),
            "status": "accepted", "extended_hours": false, "legs": null,
        });
        self.orders.push(order.clone());
        order
    }

    fn find(&self, client_order_id: &str) -> Option<usize> {
        self.orders.iter().position(|o| o["client_order_id"] == client_order_id)
    }
}

fn error(status: u16, code: i64, message: &str) -> Response {
    (StatusCode::from_u16(status).unwrap(), axum::Json(json!({"code": code, "message": message}))).into_response()
}

async fn alpaca(State(book): State<Shared>, method: Method, uri: Uri, headers: HeaderMap, body: Bytes) -> Response {
    let path = uri.path().to_string();
    let query: HashMap<String, String> = uri
        .query()
        .unwrap_or("")
        .split('&')
        .filter(|p| !p.is_empty())
        .filter_map(|p| p.split_once('='))
        .map(|(k, v)| (k.to_string(), percent_decode(v)))
        .collect();
    let fault = {
        let mut b = book.lock().unwrap();
        *b.calls.entry((method.to_string(), path.clone())).or_default() += 1;
        b.queries.push(query.clone());
        b.faults.pop_front().unwrap_or(Fault::Pass)
    };
    let authorized = headers.get("apca-api-key-id").is_some_and(|v| v == KEY_ID)
        && headers.get("apca-api-secret-key").is_some_and(|v| v == SECRET);
    if !authorized {
        return error(401, 40110000, "request is not authorized");
    }
    if let Fault::Status(status, body, extra) = &fault {
        let mut response = (StatusCode::from_u16(*status).unwrap(), axum::Json(body.clone())).into_response();
        for (name, value) in extra {
            response.headers_mut().insert(*name, value.parse().unwrap());
        }
        return response;
    }
    match (method.as_str(), path.as_str()) {
        ("POST", "/v2/orders") => {
            let Ok(sent) = serde_json::from_slice::<Value>(&body) else {
                return error(400, 40010000, "invalid json");
            };
            let created = {
                let mut b = book.lock().unwrap();
                b.bodies.push(sent.clone());
                let required = ["symbol", "qty", "side", "type", "time_in_force", "client_order_id"];
                if required.iter().any(|k| !sent[*k].is_string()) {
                    return error(422, 40010000, "missing or malformed field");
                }
                if b.find(sent["client_order_id"].as_str().unwrap()).is_some() {
                    return error(422, 40010001, "client_order_id must be unique");
                }
                b.create(&sent)
            };
            match fault {
                Fault::CreateThen500 => error(500, 50010000, "internal server error"),
                Fault::CreateThenSleep(pause) => {
                    tokio::time::sleep(pause).await;
                    axum::Json(created).into_response()
                }
                _ => axum::Json(created).into_response(),
            }
        }
        ("GET", "/v2/orders:by_client_order_id") => {
            let b = book.lock().unwrap();
            match query.get("client_order_id").and_then(|id| b.find(id)) {
                Some(i) => axum::Json(b.orders[i].clone()).into_response(),
                None => error(404, 40410000, "order not found"),
            }
        }
        ("GET", "/v2/orders") => {
            let b = book.lock().unwrap();
            let limit: usize = query.get("limit").map_or(50, |l| l.parse().unwrap()).min(500);
            let after = query.get("after").map(|a| DateTime::parse_from_rfc3339(a).unwrap().with_timezone(&Utc));
            let submitted = |o: &Value| -> DateTime<Utc> { o["submitted_at"].as_str().unwrap().parse().unwrap() };
            let open =
                |o: &Value| !matches!(o["status"].as_str(), Some("filled" | "canceled" | "expired" | "rejected"));
            let mut page: Vec<Value> = b
                .orders
                .iter()
                .filter(|o| match query.get("status").map(String::as_str) {
                    Some("all") => true,
                    _ => open(o),
                })
                .filter(|o| after.is_none_or(|a| submitted(o) > a))
                .cloned()
                .collect();
            page.sort_by_key(|o| submitted(o));
            if query.get("direction").map(String::as_str) != Some("asc") {
                page.reverse();
            }
            page.truncate(limit);
            axum::Json(page).into_response()
        }
        ("DELETE", p) if p.starts_with("/v2/orders/") => {
            let id = &p["/v2/orders/".len()..];
            let mut b = book.lock().unwrap();
            let Some(order) = b.orders.iter_mut().find(|o| o["id"] == id) else {
                return error(404, 40410000, "order not found");
            };
            if order["status"] == "filled" {
                return error(422, 42210000, "order is already in \"filled\" state");
            }
            order["status"] = json!("pending_cancel");
            StatusCode::NO_CONTENT.into_response()
        }
        ("GET", "/v2/account") => axum::Json(json!({
            "id": "acct", "status": "ACTIVE", "currency": "USD", "cash": "25000.5", "equity": "26010.25",
            "last_equity": "25500", "buying_power": "100000", "trading_blocked": false, "account_blocked": false,
        }))
        .into_response(),
        ("GET", "/v2/positions") => axum::Json(json!([
            {"symbol": "ABCD", "qty": "100", "avg_entry_price": "4.125", "side": "long", "current_price": "4.31"},
        ]))
        .into_response(),
        _ => error(404, 40410000, "route not found"),
    }
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' if i + 2 < bytes.len() => {
                out.push(u8::from_str_radix(&text[i + 1..i + 3], 16).unwrap());
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8(out).unwrap()
}

struct StandIn {
    book: Shared,
    url: String,
}

impl StandIn {
    async fn start() -> StandIn {
        let book: Shared = Arc::default();
        let app = axum::Router::new().fallback(alpaca).with_state(book.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        StandIn { book, url }
    }

    fn client_with(&self, secret: &str, timeout: Duration) -> TradingClient {
        let credentials = AlpacaCredentials { key_id: KEY_ID.into(), secret_key: secret.into() };
        TradingClient::new(&self.url, &credentials, timeout, Arc::new(ManualClock::new(start()))).unwrap()
    }

    fn client(&self) -> TradingClient {
        self.client_with(SECRET, Duration::from_secs(5))
    }

    fn fault(&self, faults: impl IntoIterator<Item = Fault>) {
        self.book.lock().unwrap().faults.extend(faults);
    }

    fn calls(&self, method: &str, path: &str) -> usize {
        self.book.lock().unwrap().calls.get(&(method.to_string(), path.to_string())).copied().unwrap_or(0)
    }

    fn orders_of(&self, client_order_id: &str) -> usize {
        self.book.lock().unwrap().orders.iter().filter(|o| o["client_order_id"] == client_order_id).count()
    }

    fn bodies(&self) -> Vec<Value> {
        self.book.lock().unwrap().bodies.clone()
    }
}

#[allow(clippy::too_many_arguments)]
fn order(
    id: &str,
    side: Side,
    order_type: OrderType,
    tif: TimeInForce,
    qty: u64,
    limit: Option<&str>,
    stop: Option<&str>,
) -> Order {
    Order::new(
        ClientOrderId::parse(id).unwrap(),
        Symbol::parse("ABCD").unwrap(),
        side,
        order_type,
        tif,
        qty,
        limit.map(|p| p.parse().unwrap()),
        stop.map(|p| p.parse().unwrap()),
        start(),
    )
}

fn market(id: &str) -> Order {
    order(id, Side::Buy, OrderType::Market, TimeInForce::Day, 100, None, None)
}

const POST: (&str, &str) = ("POST", "/v2/orders");
const LOOKUP: (&str, &str) = ("GET", "/v2/orders:by_client_order_id");

#[tokio::test]
async fn orders_go_out_in_alpacas_json_with_the_key_headers() {
    let alpaca = StandIn::start().await;
    let client = alpaca.client();
    let sent = [
        order("to-1", Side::Buy, OrderType::Limit, TimeInForce::Day, 100, Some("12.345"), None),
        order("to-2", Side::Sell, OrderType::StopLimit, TimeInForce::Gtc, 250, Some("0.81234"), Some("0.8")),
        order("to-3", Side::Sell, OrderType::Stop, TimeInForce::Day, 5, None, Some("180")),
        order("to-4", Side::Buy, OrderType::Market, TimeInForce::Ioc, 1, None, None),
    ];
    for o in &sent {
        let placed = client.submit(o).await.unwrap();
        assert_eq!(placed.client_order_id, o.client_order_id.as_str());
        assert_eq!(placed.status, "accepted");
    }
    assert_eq!(
        alpaca.bodies(),
        vec![
            json!({"symbol": "ABCD", "qty": "100", "side": "buy", "type": "limit", "time_in_force": "day",
                "limit_price": "12.35", "client_order_id": "to-1"}),
            json!({"symbol": "ABCD", "qty": "250", "side": "sell", "type": "stop_limit", "time_in_force": "gtc",
                "limit_price": "0.8123", "stop_price": "0.80", "client_order_id": "to-2"}),
            json!({"symbol": "ABCD", "qty": "5", "side": "sell", "type": "stop", "time_in_force": "day",
                "stop_price": "180.00", "client_order_id": "to-3"}),
            json!({"symbol": "ABCD", "qty": "1", "side": "buy", "type": "market", "time_in_force": "ioc",
                "client_order_id": "to-4"}),
        ]
    );
    // Looked up by client order id: found, and unknown.
    let found = client.by_client_order_id(&ClientOrderId::parse("to-2").unwrap()).await.unwrap().unwrap();
    assert_eq!((found.limit_price, found.stop_price), (Some(Decimal::new(8123, 4)), Some(Decimal::new(80, 2))));
    assert_eq!(client.by_client_order_id(&ClientOrderId::parse("to-9").unwrap()).await.unwrap(), None);
}

#[tokio::test]
async fn a_wrong_secret_is_refused_and_never_shown() {
    let alpaca = StandIn::start().await;
    let wrong = "wrong-secret-77";
    let error = alpaca.client_with(wrong, Duration::from_secs(5)).submit(&market("to-1")).await.unwrap_err();
    let BrokerError::Rejected { reason, .. } = &error else { panic!("{error:?}") };
    assert_eq!(reason, "401 request is not authorized");
    assert!(!format!("{error:?}{error}").contains(wrong));
    assert_eq!(alpaca.orders_of("to-1"), 0);
}

#[tokio::test]
async fn forbidden_keeps_alpacas_message_and_figures() {
    let alpaca = StandIn::start().await;
    alpaca.fault([Fault::Status(
        403,
        json!({"code": 40310000, "message": "insufficient buying power", "buying_power": "1200.5", "cost_basis": "4800"}),
        vec![],
    )]);
    let error = alpaca.client().submit(&market("to-1")).await.unwrap_err();
    assert_eq!(
        error,
        BrokerError::Rejected {
            reason: "403 insufficient buying power (buying_power 1200.5, cost_basis 4800)".into(),
            kind: Rejection::BuyingPower {
                available: Some(Decimal::new(12005, 1)),
                required: Some(Decimal::from(4800))
            },
        }
    );
}

#[tokio::test]
async fn a_second_send_of_an_id_is_already_received_and_other_422s_are_rejections() {
    let alpaca = StandIn::start().await;
    let client = alpaca.client();
    let o = market("to-1");
    client.submit(&o).await.unwrap();
    assert_eq!(client.submit(&o).await.unwrap_err(), BrokerError::AlreadyReceived(o.client_order_id.clone()));
    assert_eq!((alpaca.calls(POST.0, POST.1), alpaca.orders_of("to-1")), (2, 1));

    alpaca.fault([Fault::Status(422, json!({"code": 40010000, "message": "qty must be > 0"}), vec![])]);
    assert_eq!(
        client.submit(&market("to-2")).await.unwrap_err(),
        BrokerError::Rejected {
            reason: "422 qty must be > 0".into(),
            kind: Rejection::Invalid { field: Some("quantity") }
        }
    );
}

#[tokio::test]
async fn cancels_are_taken_refused_when_filled_and_unknown_when_alpaca_has_no_such_order() {
    let alpaca = StandIn::start().await;
    let client = alpaca.client();
    let working = client.submit(&market("to-1")).await.unwrap();
    let filled = client.submit(&market("to-2")).await.unwrap();
    alpaca.book.lock().unwrap().orders[1]["status"] = json!("filled");
    let (one, two) = (ClientOrderId::parse("to-1").unwrap(), ClientOrderId::parse("to-2").unwrap());

    client.cancel(&one, &working.id).await.unwrap();
    assert_eq!(alpaca.book.lock().unwrap().orders[0]["status"], "pending_cancel");
    assert_eq!(
        client.cancel(&two, &filled.id).await.unwrap_err(),
        BrokerError::Rejected {
            reason: "422 order is already in \"filled\" state".into(),
            kind: Rejection::NotCancellable { filled: true }
        }
    );
    assert_eq!(
        client.cancel(&one, "0b1e6e2a-0000-4000-8000-999999999999").await.unwrap_err(),
        BrokerError::UnknownOrder(one.clone())
    );
}

#[tokio::test]
async fn too_many_requests_says_when_to_come_back() {
    let alpaca = StandIn::start().await;
    let client = alpaca.client();
    let body = json!({"message": "rate limit exceeded"});
    alpaca.fault([Fault::Status(429, body.clone(), vec![("retry-after", "3".into())])]);
    let error = client.account().await.unwrap_err();
    assert_eq!(
        error,
        BrokerError::Unavailable {
            reason: "429 rate limit exceeded".into(),
            retry_after: Some(Duration::from_secs(3))
        }
    );

    // Reset 42 s after the reply's Date.
    let date = parse_ts("2026-11-25T14:35:00Z").unwrap();
    let reset = (date.timestamp() + 42).to_string();
    alpaca.fault([Fault::Status(
        429,
        body,
        vec![("x-ratelimit-reset", reset), ("date", "Wed, 25 Nov 2026 14:35:00 GMT".into())],
    )]);
    let error = client.positions().await.unwrap_err();
    assert_eq!(
        error,
        BrokerError::Unavailable {
            reason: "429 rate limit exceeded".into(),
            retry_after: Some(Duration::from_secs(42))
        }
    );
}

#[tokio::test]
async fn server_errors_timeouts_and_refused_connections_are_unavailable() {
    let alpaca = StandIn::start().await;
    alpaca.fault([Fault::Status(503, json!({"message": "upstream down"}), vec![])]);
    let error = alpaca.client().open_orders().await.unwrap_err();
    assert_eq!(error, BrokerError::Unavailable { reason: "503 upstream down".into(), retry_after: None });

    alpaca.fault([Fault::CreateThenSleep(Duration::from_secs(2))]);
    let error = alpaca.client_with(SECRET, Duration::from_millis(200)).submit(&market("to-1")).await.unwrap_err();
    assert!(
        matches!(&error, BrokerError::Unavailable { reason, retry_after: None } if reason.contains("timed out")),
        "{error:?}"
    );

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let closed = format!("http://{}", listener.local_addr().unwrap());
    drop(listener);
    let credentials = AlpacaCredentials { key_id: KEY_ID.into(), secret_key: SECRET.into() };
    let nowhere =
        TradingClient::new(&closed, &credentials, Duration::from_secs(5), Arc::new(ManualClock::new(start()))).unwrap();
    let error = nowhere.account().await.unwrap_err();
    assert!(
        matches!(&error, BrokerError::Unavailable { reason, .. } if reason.contains("connection failed")),
        "{error:?}"
    );
}

#[tokio::test]
async fn orders_since_follow_the_pages_until_a_short_one() {
    let alpaca = StandIn::start().await;
    {
        let mut book = alpaca.book.lock().unwrap();
        for i in 0..1003 {
            let body = json!({"client_order_id": format!("to-{i}"), "symbol": "ABCD", "qty": "1", "side": "buy",
                "type": "market", "time_in_force": "day"});
            book.create(&body);
        }
        book.orders[7]["status"] = json!("filled");
        book.orders.reverse(); // The stand-in sorts; the client must not rely on insertion order.
    }
    let client = alpaca.client();
    let all = client.orders_updated_since(start()).await.unwrap();
    let ids: Vec<String> = all.iter().map(|o| o.client_order_id.clone()).collect();
    let expected: Vec<String> = (0..1003).map(|i| format!("to-{i}")).collect();
    assert_eq!(ids, expected);
    assert_eq!(alpaca.calls("GET", "/v2/orders"), 3);
    let afters: Vec<String> = alpaca.book.lock().unwrap().queries.iter().map(|q| q["after"].clone()).collect();
    assert_eq!(
        afters,
        vec![
            "2026-11-25T14:30:00Z".to_string(),
            "2026-11-25T14:30:00.500Z".to_string(),
            "2026-11-25T14:30:01Z".to_string(),
        ]
    );
    for query in alpaca.book.lock().unwrap().queries.iter() {
        assert_eq!(
            (query["status"].as_str(), query["direction"].as_str(), query["limit"].as_str()),
            ("all", "asc", "500")
        );
    }

    // Exactly a page's worth after the cursor: one more (empty) page confirms the end.
    let since = start() + ChronoDuration::milliseconds(503);
    let tail = client.orders_updated_since(since).await.unwrap();
    assert_eq!(tail.len(), 500);
    assert_eq!(tail[0].client_order_id, "to-503");
    assert_eq!(alpaca.calls("GET", "/v2/orders"), 5);

    // Open orders: all but the filled one (the stand-in's one page of 500 newest first).
    assert_eq!(client.open_orders().await.unwrap().len(), 500);
}

#[tokio::test]
async fn account_and_positions_read_alpacas_decimals() {
    let alpaca = StandIn::start().await;
    let client = alpaca.client();
    let account = client.account().await.unwrap();
    assert_eq!(
        (account.cash, account.equity, account.buying_power),
        (Decimal::new(250005, 1), Decimal::new(2601025, 2), Decimal::from(100000))
    );
    let positions = client.positions().await.unwrap();
    assert_eq!(
        (positions[0].symbol.as_str(), positions[0].qty, positions[0].avg_entry_price),
        ("ABCD", Decimal::from(100), Decimal::new(4125, 3))
    );
}

#[tokio::test]
async fn a_lost_reply_to_a_created_order_is_found_without_a_second_post() {
    let alpaca = StandIn::start().await;
    alpaca.fault([Fault::CreateThen500]);
    let placed = alpaca.client().submit_once(&market("to-1")).await.unwrap();
    assert_eq!((placed.client_order_id.as_str(), placed.status.as_str()), ("to-1", "accepted"));
    assert_eq!((alpaca.calls(POST.0, POST.1), alpaca.calls(LOOKUP.0, LOOKUP.1), alpaca.orders_of("to-1")), (1, 1, 1));
}

#[tokio::test]
async fn a_reply_past_the_timeout_is_found_without_a_second_post() {
    let alpaca = StandIn::start().await;
    alpaca.fault([Fault::CreateThenSleep(Duration::from_secs(2))]);
    let client = alpaca.client_with(SECRET, Duration::from_millis(200));
    let placed = client.submit_once(&market("to-1")).await.unwrap();
    assert_eq!(placed.client_order_id, "to-1");
    assert_eq!((alpaca.calls(POST.0, POST.1), alpaca.calls(LOOKUP.0, LOOKUP.1), alpaca.orders_of("to-1")), (1, 1, 1));
}

#[tokio::test]
async fn an_order_that_did_not_land_is_sent_once_more() {
    let alpaca = StandIn::start().await;
    alpaca.fault([Fault::Status(500, json!({"message": "internal server error"}), vec![])]);
    let placed = alpaca.client().submit_once(&market("to-1")).await.unwrap();
    assert_eq!(placed.client_order_id, "to-1");
    assert_eq!((alpaca.calls(POST.0, POST.1), alpaca.calls(LOOKUP.0, LOOKUP.1), alpaca.orders_of("to-1")), (2, 1, 1));
}

#[tokio::test]
async fn a_resend_answered_duplicate_is_looked_up_again() {
    let alpaca = StandIn::start().await;
    // The order lands but the reply is lost; the lookup does not see it yet (404); the resend
    // is refused as a duplicate; the second lookup finds it.
    alpaca.fault([
        Fault::CreateThen500,
        Fault::Status(404, json!({"code": 40410000, "message": "order not found"}), vec![]),
    ]);
    let placed = alpaca.client().submit_once(&market("to-1")).await.unwrap();
    assert_eq!(placed.client_order_id, "to-1");
    assert_eq!((alpaca.calls(POST.0, POST.1), alpaca.calls(LOOKUP.0, LOOKUP.1), alpaca.orders_of("to-1")), (2, 2, 1));
}

#[tokio::test]
async fn a_rate_limited_submit_is_returned_to_wait_and_neither_looked_up_nor_resent() {
    let alpaca = StandIn::start().await;
    alpaca.fault([Fault::Status(429, json!({"message": "rate limit exceeded"}), vec![("retry-after", "1".into())])]);
    let error = alpaca.client().submit_once(&market("to-1")).await.unwrap_err();
    assert!(matches!(error, BrokerError::Unavailable { retry_after: Some(_), .. }), "{error:?}");
    assert_eq!((alpaca.calls(POST.0, POST.1), alpaca.calls(LOOKUP.0, LOOKUP.1), alpaca.orders_of("to-1")), (1, 0, 0));
}

#[tokio::test]
async fn an_order_rejected_for_good_is_not_resent() {
    let alpaca = StandIn::start().await;
    alpaca.fault([Fault::Status(
        403,
        json!({"message": "insufficient qty available for order", "available": "0"}),
        vec![],
    )]);
    let error = alpaca.client().submit_once(&market("to-1")).await.unwrap_err();
    assert_eq!(
        error,
        BrokerError::Rejected {
            reason: "403 insufficient qty available for order (available 0)".into(),
            kind: Rejection::SharesAvailable { available: Some(Decimal::ZERO), requested: Some(Decimal::from(100)) },
        }
    );
    assert_eq!((alpaca.calls(POST.0, POST.1), alpaca.calls(LOOKUP.0, LOOKUP.1)), (1, 0));
}

/// Reads the first bytes a client sends to a plain TCP listener: a TLS client opens with a
/// handshake record (content type 22, version 3.x), a plain one with text.
async fn first_bytes_sent(connect: impl FnOnce(String) -> tokio::task::JoinHandle<()>) -> [u8; 2] {
    use tokio::io::AsyncReadExt;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let client = connect(format!("127.0.0.1:{port}"));
    let accepted = tokio::time::timeout(Duration::from_secs(10), listener.accept()).await;
    let (mut socket, _) = accepted.expect("the client connects (a build without TLS never does)").unwrap();
    let mut head = [0u8; 2];
    socket.read_exact(&mut head).await.unwrap();
    drop(socket);
    let _ = client.await;
    head
}

#[tokio::test]
async fn https_and_wss_urls_speak_tls_so_real_alpaca_can_be_reached() {
    const TLS_HANDSHAKE: [u8; 2] = [0x16, 0x03];
    let https = first_bytes_sent(|host| {
        tokio::spawn(async move {
            let credentials = AlpacaCredentials { key_id: KEY_ID.into(), secret_key: SECRET.into() };
            let clock = Arc::new(ManualClock::new(start()));
            let client =
                TradingClient::new(&format!("https://{host}"), &credentials, Duration::from_secs(5), clock).unwrap();
            // The stand-in hangs up mid-handshake: the venue is unavailable, nothing panics.
            let answer = client.account().await;
            assert!(matches!(answer, Err(BrokerError::Unavailable { .. })), "{answer:?}");
        })
    })
    .await;
    assert_eq!(https, TLS_HANDSHAKE, "an https:// base URL opens with a TLS ClientHello");
    let wss = first_bytes_sent(|host| {
        tokio::spawn(async move {
            let answer = tokio_tungstenite::connect_async(format!("wss://{host}/stream")).await;
            assert!(answer.is_err());
        })
    })
    .await;
    assert_eq!(wss, TLS_HANDSHAKE, "a wss:// stream URL opens with a TLS ClientHello");
}

/// Alpaca allows 200 Trading API requests a minute: the client paces itself rather than
/// collect 429s. With a budget of 2, the third request waits until the first is a minute old
/// (tokio's clock is paused: the wait passes at once, and is measured exactly).
#[tokio::test(start_paused = true)]
async fn requests_beyond_the_budget_wait_for_the_window_to_pass() {
    let alpaca = StandIn::start().await;
    let client = alpaca.client().with_budget(tradeops_brokers::alpaca::budget::RateBudget::per_minute(2));
    let started = tokio::time::Instant::now();
    client.submit(&market("to-1")).await.unwrap();
    client.submit(&market("to-2")).await.unwrap();
    assert!(started.elapsed() < Duration::from_secs(1), "within the budget: no wait");
    client.submit(&market("to-3")).await.unwrap();
    assert!(started.elapsed() >= Duration::from_secs(60), "the third waited for the window: {:?}", started.elapsed());
    assert_eq!(alpaca.calls(POST.0, POST.1), 3, "nothing dropped");
}
