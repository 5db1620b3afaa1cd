//! Trading Alpaca through the real server (CONTRACT §10): the service configured with the Alpaca execution
//! broker (`[brokers] execution = "alpaca"`) against a stand-in Alpaca Trading API, driven only
//! through the service's HTTP API, and checked against the stand-in's own book.
//!
//! The stand-in ([`StandIn`]) is one address serving Alpaca's REST API (an axum app over its own
//! order book, positions and cash) and, on the same host, the trade-updates WebSocket `/stream`
//! (the service derives `ws://HOST/stream` from `http://HOST`): connections are told apart by
//! their request line. Market orders fill at once at the price the test sets for their symbol
//! (whole, or in the parts the test sets); limit orders rest until the test fills them. Every
//! request is counted by method and path, and every `POST /v2/orders` by client order id. Faults
//! are queued for the next submit (a lost or slow reply after the order is created, a 429, a
//! 403, a 422), or set for a while (every request answered 503; the stream dropped and refused).
//!
//! Market data is the simulated market; the stand-in fills at a price near the symbol's
//! simulated price (the engine's own risk gate marks positions at the simulated price, so a
//! fill far from it would read as a loss). Time is the real clock's; market time (the manual
//! market clock of the test app) is moved on while waiting, since the service looks up an order
//! whose submit went unanswered after a wait in market time. Every wait is bounded (~10 s).
//!
//! Protection at the venue (CONTRACT §11) as Alpaca does it (research: alpaca-protection-and-
//! halts.md §1–§6): GTC `stop` / `stop_limit` sells rest until [`StandIn::trade`] prints a price
//! through them; an `order_class: oco` sell is a take-profit limit on top (the client order id
//! sent) with its stop leg `held` under it (a client order id of the venue's), nested under it
//! only when asked (`nested=true`); a trade through the take-profit fills it and cancels the leg,
//! a trade through the stop replaces the take-profit and fills the leg; a cancel of any order of
//! the group cancels the group. A sell of more shares than the position less those held by the
//! other working sells (a group holding its shares once) is refused 403 40310000 "insufficient
//! qty available", with Alpaca's figures.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use futures::{SinkExt, StreamExt};
use rust_decimal::Decimal;
use serde_json::{json, Value};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message;
use tradeops_brokers::alpaca::rest::AlpacaCredentials;
use tradeops_core::settings::ExecutionBrokerKind;
use tradeops_core::{Clock, ManualClock};
use tradeops_server::Config;

use crate::helpers::{start_at, test_config, TestApp, TestDb, ADMIN_TOKEN, MARKET_START};

pub const KEY_ID: &str = "PKSTANDIN0000";
pub const SECRET: &str = "stand-in-secret-9f2e";

/// What the test tells the stream's open connection.
enum Push {
    Frame(Value),
    /// Drop the connection without a close handshake, as a network fault would.
    Drop,
}

/// A fault the next `POST /v2/orders` meets.
#[derive(Clone, Debug)]
pub enum SubmitFault {
    /// Creates the order, then answers 500: the reply is lost.
    LostReply,
    /// Creates the order, then answers only after this long (past the client's timeout).
    SlowReply(Duration),
    /// 429 with `Retry-After` (seconds) and `X-RateLimit-*`; nothing is created.
    RateLimited { retry_after: u64 },
    /// 403 insufficient buying power, with Alpaca's figures; nothing is created.
    BuyingPower { buying_power: &'static str, cost_basis: &'static str },
    /// 403 insufficient shares for a sell, with what is available; nothing is created.
    SharesAvailable { available: &'static str },
    /// 422 with this message and Alpaca's generic validation code, 40010001 (the code of any
    /// malformed order, and of a duplicate client order id); nothing is created.
    Unprocessable(&'static str),
}

/// One trading request the stand-in received, in arrival order: which door it came through
/// ([`StandIn::door`]: one per process of a cluster, so who sent it) and what it asked.
#[derive(Clone, Debug)]
pub struct Sent {
    pub door: String,
    /// `submit` (`POST /v2/orders`) or `cancel` (`DELETE /v2/orders/{id}`).
    pub kind: &'static str,
    pub client_order_id: String,
    pub symbol: String,
    pub side: String,
    pub qty: i64,
    /// The shares of the symbol held when it arrived.
    pub held: i64,
}

/// The stand-in's account.
pub struct Venue {
    /// Orders as Alpaca reports them (its JSON), oldest first.
    orders: Vec<Value>,
    /// The price market orders of a symbol fill at (none: they rest).
    prices: HashMap<String, Decimal>,
    /// Market orders fill in these parts (the rest in one last part); empty: whole.
    parts: Vec<u64>,
    /// Signed shares and their cost (for the average entry price).
    positions: BTreeMap<String, (i64, Decimal)>,
    cash: Decimal,
    calls: HashMap<(String, String), usize>,
    posts: HashMap<String, usize>,
    submit_faults: VecDeque<SubmitFault>,
    /// The next this many lookups by client order id answer 500.
    lookup_faults: usize,
    /// The next this many lookups by client order id answer 404 (the order not visible yet).
    lookup_misses: usize,
    /// Every REST request answers 503 while set.
    down: bool,
    /// A cancel request leaves the order `pending_cancel` (the test ends it) while set.
    hold_cancels: bool,
    next_id: u64,
    next_execution: u64,
    /// The open stream connections (each one's number and sender): every update goes to each,
    /// as Alpaca serves every connection of an account (the processes of a cluster each hold
    /// one).
    streams: Vec<(usize, mpsc::UnboundedSender<Push>)>,
    /// New stream connections are dropped at once while set.
    stream_refused: bool,
    connections: usize,
    /// Alpaca's timestamps: the test app's market time.
    clock: Arc<dyn Clock>,
    /// Each leg's top-level order (Alpaca ids): an `oco`'s stop under its take-profit.
    parents: HashMap<String, String>,
    /// Stop-limit orders whose stop was traded through: limit orders now.
    triggered: std::collections::HashSet<String>,
    /// Where `GET` of the Trading API's reference routes ([`REFERENCE_PATHS`]) is forwarded:
    /// the market-data stand-in's address, when one service reads both from this host.
    reference: Option<String>,
    /// Every trading request, in arrival order.
    sent: Vec<Sent>,
    /// Alpaca's session rules apply (see [`StandIn::keep_sessions`]).
    sessions: bool,
}

/// The door (listening address) a request came through: `""` for the stand-in's own address.
#[derive(Clone)]
struct Door(String);

/// The Trading API's routes the market-data adapter reads (assets, clock, calendar).
const REFERENCE_PATHS: [&str; 3] = ["/v2/assets", "/v2/clock", "/v2/calendar"];

type Shared = Arc<Mutex<Venue>>;

fn is_open(order: &Value) -> bool {
    !matches!(order["status"].as_str(), Some("filled" | "canceled" | "expired" | "rejected" | "replaced"))
}

fn dec(v: &Value) -> Decimal {
    v.as_str().and_then(|s| s.parse().ok()).unwrap_or_default()
}

fn error(status: u16, body: Value) -> Response {
    (StatusCode::from_u16(status).unwrap(), axum::Json(body)).into_response()
}

impl Venue {
    /// Records a trading request (a submit or a cancel) as it arrives.
    fn record(&mut self, door: &str, method: &str, path: &str, body: &str) {
        let (kind, order) = match (method, path) {
            ("POST", "/v2/orders") => ("submit", serde_json::from_str(body).unwrap_or(Value::Null)),
            ("DELETE", p) if p.starts_with("/v2/orders/") => {
                let id = &p["/v2/orders/".len()..];
                ("cancel", self.orders.iter().find(|o| o["id"] == id).cloned().unwrap_or(Value::Null))
            }
            _ => return,
        };
        let symbol = order["symbol"].as_str().unwrap_or_default().to_string();
        let held = self.positions.get(&symbol).map(|p| p.0).unwrap_or(0);
        self.sent.push(Sent {
            door: door.to_string(),
            kind,
            client_order_id: order["client_order_id"].as_str().unwrap_or_default().to_string(),
            side: order["side"].as_str().unwrap_or_default().to_string(),
            qty: dec(&order["qty"]).try_into().unwrap_or(0),
            held,
            symbol,
        });
    }

    fn now(&self) -> Value {
        json!(self.clock.now())
    }

    fn index(&self, client_order_id: &str) -> Option<usize> {
        self.orders.iter().position(|o| o["client_order_id"] == client_order_id)
    }

    /// Sends a trade update on every open connection; lost when there is none (a gap).
    fn send(&mut self, event: &str, i: usize, extra: Value) {
        let mut data = json!({"event": event, "timestamp": self.now(), "order": self.orders[i].clone()});
        if let (Some(data), Some(extra)) = (data.as_object_mut(), extra.as_object()) {
            data.extend(extra.clone());
        }
        let frame = json!({"stream": "trade_updates", "data": data});
        for (_, tx) in &self.streams {
            let _ = tx.send(Push::Frame(frame.clone()));
        }
    }

    /// The market's session now, on the NYSE calendar (Alpaca's), while the stand-in keeps
    /// sessions ([`StandIn::keep_sessions`]); else regular all day.
    fn session(&self) -> tradeops_core::calendar::SessionPhase {
        if !self.sessions {
            return tradeops_core::calendar::SessionPhase::Regular;
        }
        let nyse = tradeops_core::calendar::MarketCalendar::new(tradeops_core::settings::MarketCalendarKind::Nyse);
        nyse.phase(self.clock.now())
    }

    fn create(&mut self, sent: &Value) -> usize {
        if sent["order_class"] == "oco" {
            return self.create_oco(sent);
        }
        self.next_id += 1;
        let now = self.now();
        let order = json!({
            "id": format!("9b1e0f3a-0000-4000-8000-{:012}", self.next_id),
            "client_order_id": sent["client_order_id"], "symbol": sent["symbol"],
            "created_at": now, "submitted_at": now, "updated_at": now,
            "filled_at": null, "canceled_at": null, "failed_at": null,
            "qty": sent["qty"], "filled_qty": "0", "filled_avg_price": null,
            "type": sent["type"], "side": sent["side"], "time_in_force": sent["time_in_force"],
            "limit_price": sent.get("limit_price").cloned().unwrap_or(Value::Null),
            "stop_price": sent.get("stop_price").cloned().unwrap_or(Value::Null),
            "status": "new", "extended_hours": sent["extended_hours"] == true, "legs": null, "order_class": "",
            "replaced_by": null,
        });
        self.orders.push(order);
        let i = self.orders.len() - 1;
        self.send("new", i, json!({}));
        // Outside the regular session a market order waits for the open (Alpaca's rule).
        if self.orders[i]["type"] == "market" && self.session().is_regular() {
            let symbol = self.orders[i]["symbol"].as_str().unwrap_or_default().to_string();
            if let Some(price) = self.prices.get(&symbol).copied() {
                let qty = dec(&self.orders[i]["qty"]).try_into().unwrap_or(0u64);
                let mut left = qty;
                for part in self.parts.clone() {
                    if part >= left {
                        break;
                    }
                    self.fill(i, part, price, true);
                    left -= part;
                }
                self.fill(i, left, price, true);
            }
        }
        i
    }

    /// An `oco` as Alpaca makes it: the take-profit on top (`new`, the client order id sent, a
    /// `new` update), the stop leg `held` under it with a client order id of the venue's (no
    /// update). Returns the top-level order's index.
    fn create_oco(&mut self, sent: &Value) -> usize {
        let now = self.now();
        let order = |v: &mut Venue, client_order_id: Value, fields: Value| {
            v.next_id += 1;
            let mut order = json!({
                "id": format!("9b1e0f3a-0000-4000-8000-{:012}", v.next_id),
                "client_order_id": client_order_id, "symbol": sent["symbol"],
                "created_at": now, "submitted_at": now, "updated_at": now,
                "filled_at": null, "canceled_at": null, "failed_at": null,
                "qty": sent["qty"], "filled_qty": "0", "filled_avg_price": null,
                "side": sent["side"], "time_in_force": sent["time_in_force"],
                "limit_price": null, "stop_price": null, "status": "new", "extended_hours": false,
                "legs": null, "order_class": "oco", "replaced_by": null,
            });
            for (k, val) in fields.as_object().unwrap() {
                order[k] = val.clone();
            }
            v.orders.push(order);
            v.orders.len() - 1
        };
        let top = order(
            self,
            sent["client_order_id"].clone(),
            json!({"type": "limit", "limit_price": sent["take_profit"]["limit_price"]}),
        );
        let stop_limit = sent["stop_loss"]["limit_price"].clone();
        let leg_client_order_id = format!("5f0c9d1e-7b2a-4c3d-9e8f-{:012}", self.next_id + 1);
        let leg = order(
            self,
            json!(leg_client_order_id),
            json!({"type": if stop_limit.is_null() { "stop" } else { "stop_limit" },
                "stop_price": sent["stop_loss"]["stop_price"], "limit_price": stop_limit, "status": "held"}),
        );
        let (top_id, leg_id) = (self.id_at(top), self.id_at(leg));
        self.parents.insert(leg_id, top_id);
        self.send("new", top, json!({}));
        top
    }

    fn id_at(&self, i: usize) -> String {
        self.orders[i]["id"].as_str().unwrap().to_string()
    }

    /// The orders of `i`'s group (its top-level order first), or `i` alone.
    fn group(&self, i: usize) -> Vec<usize> {
        let id = self.id_at(i);
        let top = self.parents.get(&id).cloned().unwrap_or(id);
        let mut members = vec![self.orders.iter().position(|o| o["id"] == top.as_str()).unwrap()];
        members.extend((0..self.orders.len()).filter(|j| self.parents.get(&self.id_at(*j)).is_some_and(|p| *p == top)));
        members
    }

    fn is_leg(&self, i: usize) -> bool {
        self.parents.contains_key(&self.id_at(i))
    }

    /// Order `i` as Alpaca answers it: with its group's legs under it when `nested` (research
    /// §2.3; a leg is itself never nested).
    fn view(&self, i: usize, nested: bool) -> Value {
        let mut order = self.orders[i].clone();
        if nested && !self.is_leg(i) {
            let legs: Vec<Value> = self.group(i).into_iter().skip(1).map(|j| self.orders[j].clone()).collect();
            if !legs.is_empty() {
                order["legs"] = json!(legs);
            }
        }
        order
    }

    /// Shares of `symbol` held for working sell orders (a group's once: its shares are held
    /// once, research §6), and those orders' ids.
    fn held_for_orders(&self, symbol: &str) -> (Decimal, Vec<String>) {
        let mut held = Decimal::ZERO;
        let mut related = Vec::new();
        for i in (0..self.orders.len()).filter(|i| !self.is_leg(*i)) {
            let order = &self.orders[i];
            if order["symbol"] != symbol || order["side"] != "sell" {
                continue;
            }
            let remaining = self
                .group(i)
                .into_iter()
                .filter(|j| is_open(&self.orders[*j]))
                .map(|j| dec(&self.orders[j]["qty"]) - dec(&self.orders[j]["filled_qty"]))
                .max();
            if let Some(remaining) = remaining {
                held += remaining;
                related.push(self.id_at(i));
            }
        }
        (held, related)
    }

    /// Alpaca's refusal of a sell of more shares than are free (research §6), if it is one.
    fn shares_refusal(&self, sent: &Value) -> Option<Response> {
        if sent["side"] != "sell" {
            return None;
        }
        let symbol = sent["symbol"].as_str().unwrap_or_default();
        let requested = dec(&sent["qty"]);
        let existing = Decimal::from(self.positions.get(symbol).map(|p| p.0).unwrap_or(0).max(0));
        let (held, related) = self.held_for_orders(symbol);
        let available = (existing - held).max(Decimal::ZERO);
        if requested <= available {
            return None;
        }
        let message = format!("insufficient qty available for order (requested: {requested}, available: {available})");
        let mut body = json!({"available": available.to_string(), "code": 40310000,
            "existing_qty": existing.to_string(), "held_for_orders": held.to_string(),
            "message": message, "symbol": symbol});
        if !related.is_empty() {
            body["related_orders"] = json!(related);
        }
        Some(error(403, body))
    }

    /// A trade of `symbol` at `price`: the price market orders fill at from now on, and every
    /// resting order it goes through fills at it — a limit (a buy at or above the price, a sell
    /// at or below), a sell stop at or above it (a stop-limit becomes its limit), an `oco`'s
    /// take-profit (its stop leg cancelled) or its stop (the take-profit replaced, the leg
    /// filled, research §2.4).
    fn trade(&mut self, symbol: &str, price: Decimal) {
        self.prices.insert(symbol.to_string(), price);
        let regular = self.session().is_regular();
        for i in 0..self.orders.len() {
            let order = self.orders[i].clone();
            if order["symbol"] != symbol || !is_open(&order) || order["status"] == "pending_cancel" {
                continue;
            }
            // Alpaca's sessions (CONTRACT §12): outside 09:30-16:00 only an order marked
            // extended-hours trades, and no stop (nor an `oco` leg) is triggered.
            if !regular && order["extended_hours"] != true {
                continue;
            }
            let id = self.id_at(i);
            let left: u64 = (dec(&order["qty"]) - dec(&order["filled_qty"])).try_into().unwrap_or(0);
            let sell = order["side"] == "sell";
            let limit = order["limit_price"].as_str().map(|_| dec(&order["limit_price"]));
            let stop = order["stop_price"].as_str().map(|_| dec(&order["stop_price"]));
            let through_limit = |l: Decimal| if sell { price >= l } else { price <= l };
            match order["type"].as_str() {
                Some("limit") if !self.is_leg(i) && order["status"] != "held" && limit.is_some_and(through_limit) => {
                    self.fill(i, left, price, true);
                    // One-cancels-other: the rest of the group goes.
                    for j in self.group(i).into_iter().skip(1) {
                        if is_open(&self.orders[j]) {
                            self.end_cancel(j);
                        }
                    }
                }
                Some("stop" | "stop_limit") if sell => {
                    let triggered = self.triggered.contains(&id) || stop.is_some_and(|s| price <= s);
                    if !triggered {
                        continue;
                    }
                    self.triggered.insert(id.clone());
                    if self.is_leg(i) && order["status"] == "held" {
                        // The stop triggers: Alpaca replaces the resting take-profit by it.
                        let top = self.group(i)[0];
                        if is_open(&self.orders[top]) {
                            let now = self.now();
                            self.orders[top]["status"] = json!("replaced");
                            self.orders[top]["replaced_by"] = json!(id);
                            self.orders[top]["updated_at"] = now;
                            self.send("replaced", top, json!({}));
                        }
                        self.orders[i]["status"] = json!("new");
                        self.send("new", i, json!({}));
                    }
                    let fills = order["type"] == "stop" || limit.is_some_and(through_limit);
                    if fills {
                        self.fill(i, left, price, true);
                    }
                }
                _ => {}
            }
        }
    }

    /// Fills `qty` shares of order `i` at `price`: the order, the position and the cash move;
    /// a `fill` / `partial_fill` goes out when `report` (and a connection is open).
    fn fill(&mut self, i: usize, qty: u64, price: Decimal, report: bool) {
        let shares = Decimal::from(qty);
        let order = &self.orders[i];
        let total = dec(&order["qty"]);
        let filled = dec(&order["filled_qty"]);
        let average = order["filled_avg_price"].as_str().and_then(|p| p.parse::<Decimal>().ok()).unwrap_or_default();
        let now_filled = filled + shares;
        assert!(now_filled <= total, "the stand-in cannot fill more than the order: {order}");
        let new_average = ((average * filled + price * shares) / now_filled).round_dp(4);
        let symbol = order["symbol"].as_str().unwrap().to_string();
        let buy = order["side"] == "buy";
        let now = self.now();
        let order = &mut self.orders[i];
        order["filled_qty"] = json!(now_filled.to_string());
        order["filled_avg_price"] = json!(new_average.to_string());
        order["updated_at"] = now.clone();
        let done = now_filled == total;
        if done {
            order["status"] = json!("filled");
            order["filled_at"] = now;
        } else if order["status"] != "pending_cancel" {
            order["status"] = json!("partially_filled");
        }
        let position = self.positions.entry(symbol.clone()).or_insert((0, Decimal::ZERO));
        if buy {
            position.0 += qty as i64;
            position.1 += shares * price;
            self.cash -= shares * price;
        } else {
            let held = Decimal::from(position.0);
            let average_cost = if held.is_zero() { Decimal::ZERO } else { position.1 / held };
            position.0 -= qty as i64;
            position.1 -= average_cost * shares;
            if position.0 == 0 {
                position.1 = Decimal::ZERO;
            }
            self.cash += shares * price;
        }
        let position_qty = position.0;
        if position_qty == 0 {
            self.positions.remove(&symbol);
        }
        if report {
            self.next_execution += 1;
            let execution_id = format!("exec-{:06}", self.next_execution);
            let extra = json!({"execution_id": execution_id, "price": price.to_string(),
                "qty": qty.to_string(), "position_qty": position_qty.to_string()});
            self.send(if done { "fill" } else { "partial_fill" }, i, extra);
        }
    }

    fn account(&self) -> Value {
        let held: Decimal = self.positions.iter().map(|(s, (q, _))| self.mark(s) * Decimal::from(*q)).sum();
        let equity = self.cash + held;
        json!({"id": "acct-standin", "status": "ACTIVE", "currency": "USD", "cash": self.cash.to_string(),
            "equity": equity.to_string(), "last_equity": equity.to_string(),
            "buying_power": self.cash.to_string(), "trading_blocked": false, "account_blocked": false})
    }

    fn mark(&self, symbol: &str) -> Decimal {
        self.prices.get(symbol).copied().unwrap_or_default()
    }

    fn positions_json(&self) -> Value {
        let rows: Vec<Value> = self
            .positions
            .iter()
            .map(|(symbol, (qty, cost))| {
                let average = (*cost / Decimal::from(*qty)).round_dp(4);
                json!({"symbol": symbol, "qty": qty.to_string(), "avg_entry_price": average.to_string(),
                    "side": if *qty > 0 { "long" } else { "short" }, "current_price": self.mark(symbol).to_string()})
            })
            .collect();
        json!(rows)
    }

    /// A cancel of order `i`, and of the rest of its group (research §5: any cancel in a group
    /// cancels the group).
    fn cancel(&mut self, i: usize) -> Response {
        let status = self.orders[i]["status"].as_str().unwrap_or_default().to_string();
        let open: Vec<usize> = self.group(i).into_iter().filter(|j| is_open(&self.orders[*j])).collect();
        if open.is_empty() {
            let message = format!("order is already in \"{status}\" state");
            return error(422, json!({"code": 42210000, "message": message}));
        }
        for j in open {
            self.orders[j]["status"] = json!("pending_cancel");
            self.send("pending_cancel", j, json!({}));
            if !self.hold_cancels {
                self.end_cancel(j);
            }
        }
        StatusCode::NO_CONTENT.into_response()
    }

    fn end_cancel(&mut self, i: usize) {
        let now = self.now();
        self.orders[i]["status"] = json!("canceled");
        self.orders[i]["canceled_at"] = now.clone();
        self.orders[i]["updated_at"] = now;
        self.send("canceled", i, json!({}));
    }
}

/// The REST API. Answers after the venue's lock is released (a slow reply sleeps unlocked).
async fn rest(
    State(venue): State<Shared>,
    axum::Extension(door): axum::Extension<Door>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: String,
) -> Response {
    let reference = venue.lock().unwrap().reference.clone();
    if let Some(host) = reference.filter(|_| method == Method::GET && REFERENCE_PATHS.contains(&uri.path())) {
        *venue.lock().unwrap().calls.entry((method.to_string(), uri.path().to_string())).or_default() += 1;
        return forward(&host, &uri, &headers).await;
    }
    let (response, delay) = answer(&venue, &door.0, &method, &uri, &headers, &body);
    if let Some(delay) = delay {
        tokio::time::sleep(delay).await;
    }
    response
}

/// A reference request forwarded as it came (path, query, key pair) to `host`; its answer.
async fn forward(host: &str, uri: &Uri, headers: &HeaderMap) -> Response {
    let target = format!("{host}{}", uri.path_and_query().map_or(uri.path(), |p| p.as_str()));
    let mut request = reqwest::Client::new().get(target);
    for name in ["apca-api-key-id", "apca-api-secret-key"] {
        if let Some(value) = headers.get(name).and_then(|v| v.to_str().ok()) {
            request = request.header(name, value);
        }
    }
    match request.send().await {
        Ok(reply) => {
            let status = StatusCode::from_u16(reply.status().as_u16()).unwrap();
            let body = reply.bytes().await.unwrap_or_default();
            (status, [("content-type", "application/json")], body).into_response()
        }
        Err(e) => error(502, json!({"code": 50210000, "message": e.to_string()})),
    }
}

fn answer(
    venue: &Shared,
    door: &str,
    method: &Method,
    uri: &Uri,
    headers: &HeaderMap,
    body: &str,
) -> (Response, Option<Duration>) {
    let path = uri.path().to_string();
    let query: HashMap<String, String> =
        form_urlencoded::parse(uri.query().unwrap_or("").as_bytes()).into_owned().collect();
    let mut v = venue.lock().unwrap();
    *v.calls.entry((method.to_string(), path.clone())).or_default() += 1;
    let authorized = headers.get("apca-api-key-id").is_some_and(|h| h == KEY_ID)
        && headers.get("apca-api-secret-key").is_some_and(|h| h == SECRET);
    if !authorized {
        return (error(401, json!({"code": 40110000, "message": "request is not authorized"})), None);
    }
    if v.down {
        return (error(503, json!({"code": 50310000, "message": "service unavailable"})), None);
    }
    v.record(door, method.as_str(), &path, body);
    match (method.as_str(), path.as_str()) {
        ("POST", "/v2/orders") => {
            let sent: Value = serde_json::from_str(body).unwrap_or(Value::Null);
            let Some(id) = sent["client_order_id"].as_str().map(str::to_string) else {
                return (error(422, json!({"code": 40010000, "message": "client_order_id is required"})), None);
            };
            *v.posts.entry(id.clone()).or_default() += 1;
            if v.index(&id).is_some() {
                return (error(422, json!({"code": 40010001, "message": "client_order_id must be unique"})), None);
            }
            if let Some(refused) = v.shares_refusal(&sent) {
                return (refused, None);
            }
            if sent["extended_hours"] == true && (sent["type"] != "limit" || sent["time_in_force"] != "day") {
                let message = "only type=\"limit\" is allowed for extended hours orders";
                return (error(422, json!({"code": 40010001, "message": message})), None);
            }
            match v.submit_faults.pop_front() {
                Some(SubmitFault::RateLimited { retry_after }) => {
                    let reset = (v.clock.now().timestamp() + retry_after as i64).to_string();
                    let response = (
                        StatusCode::TOO_MANY_REQUESTS,
                        [
                            ("retry-after", retry_after.to_string()),
                            ("x-ratelimit-limit", "200".to_string()),
                            ("x-ratelimit-remaining", "0".to_string()),
                            ("x-ratelimit-reset", reset),
                        ],
                        axum::Json(json!({"code": 42910000, "message": "rate limit exceeded"})),
                    );
                    (response.into_response(), None)
                }
                Some(SubmitFault::BuyingPower { buying_power, cost_basis }) => {
                    let body = json!({"code": 40310000, "message": "insufficient buying power",
                        "buying_power": buying_power, "cost_basis": cost_basis});
                    (error(403, body), None)
                }
                Some(SubmitFault::SharesAvailable { available }) => {
                    let message = format!(
                        "insufficient qty available for order (requested: {}, available: {available})",
                        sent["qty"].as_str().unwrap_or_default()
                    );
                    let body = json!({"code": 40310000, "message": message, "available": available,
                        "existing_qty": available, "held_for_orders": "0"});
                    (error(403, body), None)
                }
                Some(SubmitFault::Unprocessable(message)) => {
                    (error(422, json!({"code": 40010001, "message": message})), None)
                }
                Some(SubmitFault::LostReply) => {
                    v.create(&sent);
                    (error(500, json!({"code": 50010000, "message": "internal server error"})), None)
                }
                Some(SubmitFault::SlowReply(delay)) => {
                    let i = v.create(&sent);
                    (axum::Json(v.view(i, true)).into_response(), Some(delay))
                }
                None => {
                    // The reply nests an `oco`'s leg (research §2.3).
                    let i = v.create(&sent);
                    (axum::Json(v.view(i, true)).into_response(), None)
                }
            }
        }
        ("GET", "/v2/orders:by_client_order_id") => {
            if v.lookup_faults > 0 {
                v.lookup_faults -= 1;
                return (error(500, json!({"code": 50010000, "message": "internal server error"})), None);
            }
            if v.lookup_misses > 0 {
                v.lookup_misses -= 1;
                return (error(404, json!({"code": 40410000, "message": "order not found"})), None);
            }
            match query.get("client_order_id").and_then(|id| v.index(id)) {
                Some(i) => (axum::Json(v.orders[i].clone()).into_response(), None),
                None => (error(404, json!({"code": 40410000, "message": "order not found"})), None),
            }
        }
        ("GET", "/v2/orders") => {
            let after = query.get("after").map(|a| chrono::DateTime::parse_from_rfc3339(a).unwrap().to_utc());
            let submitted = |o: &Value| -> chrono::DateTime<chrono::Utc> {
                serde_json::from_value(o["submitted_at"].clone()).unwrap()
            };
            // With `nested=true` a group is listed once, under its top-level order, open while
            // any of its orders is; without, every order alone.
            let nested = query.get("nested").map(String::as_str) == Some("true");
            let symbols: Option<Vec<&str>> = query.get("symbols").map(|s| s.split(',').collect());
            let mut list: Vec<Value> = (0..v.orders.len())
                .filter(|i| !(nested && v.is_leg(*i)))
                .filter(|i| {
                    let open = if nested {
                        v.group(*i).iter().any(|j| is_open(&v.orders[*j]))
                    } else {
                        is_open(&v.orders[*i])
                    };
                    match query.get("status").map(String::as_str) {
                        Some("all") => true,
                        Some("closed") => !open,
                        _ => open,
                    }
                })
                .filter(|i| after.is_none_or(|a| submitted(&v.orders[*i]) > a))
                .filter(|i| symbols.as_ref().is_none_or(|s| s.iter().any(|s| v.orders[*i]["symbol"] == *s)))
                .map(|i| v.view(i, nested))
                .collect();
            if query.get("direction").map(String::as_str) != Some("asc") {
                list.reverse();
            }
            let limit = query.get("limit").and_then(|l| l.parse().ok()).unwrap_or(50usize);
            list.truncate(limit);
            (axum::Json(list).into_response(), None)
        }
        ("GET", p) if p.starts_with("/v2/orders/") => {
            let id = &p["/v2/orders/".len()..];
            let nested = query.get("nested").map(String::as_str) == Some("true");
            match v.orders.iter().position(|o| o["id"] == id) {
                Some(i) => (axum::Json(v.view(i, nested)).into_response(), None),
                None => (error(404, json!({"code": 40410000, "message": "order not found"})), None),
            }
        }
        ("DELETE", p) if p.starts_with("/v2/orders/") => {
            let id = &p["/v2/orders/".len()..];
            match v.orders.iter().position(|o| o["id"] == id) {
                Some(i) => (v.cancel(i), None),
                None => (error(404, json!({"code": 40410000, "message": "order not found"})), None),
            }
        }
        ("GET", "/v2/account") => (axum::Json(v.account()).into_response(), None),
        ("GET", "/v2/positions") => (axum::Json(v.positions_json()).into_response(), None),
        _ => (error(404, json!({"code": 40410000, "message": "route not found"})), None),
    }
}

/// The HTTP connections of the stand-in's one address, handed to axum (the `/stream` ones are
/// served apart).
struct HttpConnections {
    rx: mpsc::UnboundedReceiver<(TcpStream, SocketAddr)>,
    addr: SocketAddr,
}

impl axum::serve::Listener for HttpConnections {
    type Io = TcpStream;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (TcpStream, SocketAddr) {
        match self.rx.recv().await {
            Some(connection) => connection,
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<SocketAddr> {
        Ok(self.addr)
    }
}

/// Tells each connection by its request line: `GET /stream` is the trade-updates stream; any
/// other goes to the REST app.
async fn route_connections(listener: TcpListener, http: mpsc::UnboundedSender<(TcpStream, SocketAddr)>, venue: Shared) {
    loop {
        let Ok((tcp, addr)) = listener.accept().await else { return };
        let (http, venue) = (http.clone(), venue.clone());
        tokio::spawn(async move {
            let mut start = [0u8; 12];
            let mut seen = 0;
            for _ in 0..500 {
                match tcp.peek(&mut start).await {
                    Ok(0) | Err(_) => return,
                    Ok(n) => seen = n,
                }
                if seen == start.len() {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
            if start[..seen].starts_with(b"GET /stream") {
                serve_stream(tcp, venue).await;
            } else {
                let _ = http.send((tcp, addr));
            }
        });
    }
}

async fn next_json(socket: &mut tokio_tungstenite::WebSocketStream<TcpStream>) -> Value {
    loop {
        match socket.next().await {
            Some(Ok(Message::Text(text))) => return serde_json::from_str(text.as_str()).unwrap_or(Value::Null),
            Some(Ok(Message::Binary(bytes))) => return serde_json::from_slice(&bytes).unwrap_or(Value::Null),
            Some(Ok(_)) => continue,
            _ => return Value::Null,
        }
    }
}

/// One stream connection: authenticate → `authorization`, `listen` → `listening`, then the
/// venue's trade updates as binary frames until the test drops it or the client goes away.
async fn serve_stream(tcp: TcpStream, venue: Shared) {
    if venue.lock().unwrap().stream_refused {
        return;
    }
    let Ok(mut socket) = tokio_tungstenite::accept_async(tcp).await else { return };
    let auth = next_json(&mut socket).await;
    let expected = json!({"action": "authenticate", "data": {"key_id": KEY_ID, "secret_key": SECRET}});
    if auth != expected {
        let refused = json!({"stream": "authorization", "data": {"status": "unauthorized", "action": "authenticate"}});
        let _ = socket.send(Message::Binary(refused.to_string().into())).await;
        return;
    }
    let authorized = json!({"stream": "authorization", "data": {"status": "authorized", "action": "authenticate"}});
    if socket.send(Message::Binary(authorized.to_string().into())).await.is_err() {
        return;
    }
    let listen = next_json(&mut socket).await;
    if listen != json!({"action": "listen", "data": {"streams": ["trade_updates"]}}) {
        return;
    }
    let (tx, mut rx) = mpsc::unbounded_channel();
    let number = {
        let mut v = venue.lock().unwrap();
        v.connections += 1;
        let number = v.connections;
        v.streams.push((number, tx));
        number
    };
    let listening = json!({"stream": "listening", "data": {"streams": ["trade_updates"]}});
    if socket.send(Message::Binary(listening.to_string().into())).await.is_ok() {
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
                    _ => break,
                },
            }
        }
    }
    let mut v = venue.lock().unwrap();
    v.streams.retain(|(n, _)| *n != number);
}

/// Serves `venue` (REST and `/stream`) on a new address of 127.0.0.1 as `door`; its base URL.
async fn listen(venue: Shared, door: &str) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(route_connections(listener, tx, venue.clone()));
    let app = axum::Router::new().fallback(rest).with_state(venue).layer(axum::Extension(Door(door.to_string())));
    tokio::spawn(async move { axum::serve(HttpConnections { rx, addr }, app).await.unwrap() });
    format!("http://{addr}")
}

/// A stand-in Alpaca Trading API (REST and `/stream`) on 127.0.0.1.
pub struct StandIn {
    pub base_url: String,
    venue: Shared,
}

impl StandIn {
    /// Starts the stand-in with `cash`; its timestamps are `clock`'s.
    pub async fn start(cash: Decimal, clock: ManualClock) -> StandIn {
        StandIn::start_on(cash, Arc::new(clock)).await
    }

    /// [`StandIn::start`] on any clock.
    pub async fn start_on(cash: Decimal, clock: Arc<dyn Clock>) -> StandIn {
        let venue: Shared = Arc::new(Mutex::new(Venue {
            orders: Vec::new(),
            prices: HashMap::new(),
            parts: Vec::new(),
            positions: BTreeMap::new(),
            cash,
            calls: HashMap::new(),
            posts: HashMap::new(),
            submit_faults: VecDeque::new(),
            lookup_faults: 0,
            lookup_misses: 0,
            down: false,
            hold_cancels: false,
            next_id: 0,
            next_execution: 0,
            streams: Vec::new(),
            stream_refused: false,
            connections: 0,
            clock,
            parents: HashMap::new(),
            triggered: Default::default(),
            reference: None,
            sent: Vec::new(),
            sessions: false,
        }));
        let base_url = listen(venue.clone(), "").await;
        StandIn { base_url, venue }
    }

    /// Another address of the same venue, named `door`: the requests that come through it are
    /// recorded as `door`'s ([`StandIn::sent`]). Its base URL.
    pub async fn door(&self, door: &str) -> String {
        listen(self.venue.clone(), door).await
    }

    /// Every trading request so far, in arrival order.
    pub(crate) fn sent(&self) -> Vec<Sent> {
        self.venue().sent.clone()
    }

    /// The service's configuration for trading through this stand-in (the request timeout stays
    /// the configured default, 10 s, longer than the runner's 2 s bound of a broker call).
    pub fn configure(&self, config: &mut Config) {
        config.brokers.execution = Some(ExecutionBrokerKind::Alpaca);
        config.alpaca.credentials = Some(AlpacaCredentials { key_id: KEY_ID.into(), secret_key: SECRET.into() });
        config.alpaca.trading_url = Some(self.base_url.clone());
    }

    fn venue(&self) -> std::sync::MutexGuard<'_, Venue> {
        self.venue.lock().unwrap()
    }

    /// Serves the Trading API's reference routes (assets, clock, calendar) by forwarding them
    /// to `host` (the market-data stand-in), so that one host is the whole Trading API.
    pub fn forward_reference_to(&self, host: &str) {
        self.venue().reference = Some(host.to_string());
    }

    /// From now on the stand-in trades by Alpaca's sessions on its clock (CONTRACT §12):
    /// outside 09:30–16:00 New York only orders marked extended-hours fill, a market order
    /// waits for the open, and no stop triggers. Off by default: the stand-ins on the wall
    /// clock (the cluster's) would otherwise stop trading at night and on weekends.
    pub fn keep_sessions(&self) {
        self.venue().sessions = true;
    }

    pub fn set_price(&self, symbol: &str, price: Decimal) {
        self.venue().prices.insert(symbol.to_string(), price);
    }

    /// A trade of `symbol` at `price`: market orders fill at it from now on, and the resting
    /// orders it goes through fill ([`Venue::trade`]: limits, stops, an `oco`'s either leg).
    pub fn trade(&self, symbol: &str, price: Decimal) {
        self.venue().trade(symbol, price);
    }

    /// The stop leg of the group whose top-level order has `client_order_id` (Alpaca's JSON).
    pub(crate) fn leg_of(&self, client_order_id: &str) -> Value {
        let v = self.venue();
        let i = v.index(client_order_id).unwrap_or_else(|| panic!("the stand-in has no order {client_order_id}"));
        v.group(i).get(1).map(|j| v.orders[*j].clone()).unwrap_or_else(|| panic!("{client_order_id} has no leg"))
    }

    fn set_parts(&self, parts: Vec<u64>) {
        self.venue().parts = parts;
    }

    fn fault(&self, fault: SubmitFault) {
        self.venue().submit_faults.push_back(fault);
    }

    fn fail_lookups(&self, n: usize) {
        self.venue().lookup_faults = n;
    }

    fn miss_lookups(&self, n: usize) {
        self.venue().lookup_misses = n;
    }

    fn set_down(&self, down: bool) {
        self.venue().down = down;
    }

    fn hold_cancels(&self, hold: bool) {
        self.venue().hold_cancels = hold;
    }

    /// Requests made of `method path`.
    pub(crate) fn calls(&self, method: &str, path: &str) -> usize {
        self.venue().calls.get(&(method.to_string(), path.to_string())).copied().unwrap_or(0)
    }

    /// `POST /v2/orders` requests made with this client order id.
    fn posts(&self, client_order_id: &str) -> usize {
        self.venue().posts.get(client_order_id).copied().unwrap_or(0)
    }

    /// Orders the stand-in holds with this client order id.
    fn orders_of(&self, client_order_id: &str) -> usize {
        self.venue().orders.iter().filter(|o| o["client_order_id"] == client_order_id).count()
    }

    pub(crate) fn order(&self, client_order_id: &str) -> Value {
        let v = self.venue();
        let i = v.index(client_order_id).unwrap_or_else(|| panic!("the stand-in has no order {client_order_id}"));
        v.orders[i].clone()
    }

    /// Creates an order as a `POST /v2/orders` of `sent` (Alpaca's request JSON) would, without
    /// a request: what a process sent that the test's services never saw.
    pub(crate) fn place(&self, sent: Value) {
        self.venue().create(&sent);
    }

    /// Fills `qty` of the order at `price`; `report`: send its trade update.
    pub(crate) fn fill(&self, client_order_id: &str, qty: u64, price: Decimal, report: bool) {
        let mut v = self.venue();
        let i = v.index(client_order_id).unwrap();
        v.fill(i, qty, price, report);
    }

    /// Alpaca rejects an order it had accepted.
    fn reject(&self, client_order_id: &str) {
        let mut v = self.venue();
        let i = v.index(client_order_id).unwrap();
        let now = v.now();
        v.orders[i]["status"] = json!("rejected");
        v.orders[i]["failed_at"] = now;
        v.send("rejected", i, json!({}));
    }

    /// The stream connection drops; new ones are refused until [`StandIn::allow_stream`].
    fn drop_stream(&self) {
        let mut v = self.venue();
        v.stream_refused = true;
        for (_, tx) in v.streams.drain(..) {
            let _ = tx.send(Push::Drop);
        }
    }

    fn allow_stream(&self) {
        self.venue().stream_refused = false;
    }

    /// Every order the stand-in holds, oldest first (Alpaca's JSON).
    pub(crate) fn orders(&self) -> Vec<Value> {
        self.venue().orders.clone()
    }

    pub(crate) fn open_orders(&self) -> Vec<String> {
        let v = self.venue();
        v.orders.iter().filter(|o| is_open(o)).map(|o| o["client_order_id"].as_str().unwrap().to_string()).collect()
    }

    /// Signed shares and average entry price of each position.
    pub(crate) fn positions(&self) -> BTreeMap<String, (i64, Decimal)> {
        let v = self.venue();
        v.positions.iter().map(|(s, (q, cost))| (s.clone(), (*q, *cost / Decimal::from(*q)))).collect()
    }

    pub(crate) fn cash(&self) -> Decimal {
        self.venue().cash
    }
}

/// The service trading through a fresh stand-in; the stand-in's cash is the service's
/// starting cash, its timestamps the service's market time.
async fn start() -> (TestApp, StandIn) {
    start_at_market(MARKET_START).await
}

/// [`start`] with the market's clock (the service's and the stand-in's) at `at`.
async fn start_at_market(at: &str) -> (TestApp, StandIn) {
    let market = ManualClock::new(tradeops_core::time::parse_ts(at).unwrap());
    let (db, url) = TestDb::new().await;
    let mut config = test_config(url);
    let alpaca = StandIn::start(config.paper.initial_cash, market.clone()).await;
    alpaca.configure(&mut config);
    let app = start_at(config, Arc::new(db), axum::Router::new(), market).await;
    let health = wait_for_execution(&app, "the order-update stream to connect", |c| {
        c["status"] == "HEALTHY" && c["detail"]["stream"]["connected"] == true
    })
    .await;
    assert_eq!(health["detail"]["broker"], "alpaca", "{health}");
    (app, alpaca)
}

/// Moves market time on a little and lets the service work (one step of every bounded wait).
async fn step(app: &TestApp) {
    app.market.advance(chrono::Duration::milliseconds(100));
    tokio::time::sleep(Duration::from_millis(50)).await;
}

/// Waits (up to ~10 s) until order `id` reads one of `statuses`.
async fn wait_for_order(app: &TestApp, id: &str, statuses: &[&str]) -> Value {
    for _ in 0..200 {
        let order = app.get(&format!("/api/orders/{id}")).await;
        if statuses.iter().any(|s| order.data()["status"] == *s) {
            return order.data().clone();
        }
        step(app).await;
    }
    panic!("order {id} never reached {statuses:?}: {}", app.get(&format!("/api/orders/{id}")).await.body);
}

/// Waits (up to ~10 s) until order `id` has `quantity` shares filled.
async fn wait_for_filled(app: &TestApp, id: &str, quantity: u64) -> Value {
    for _ in 0..200 {
        let order = app.get(&format!("/api/orders/{id}")).await;
        if order.data()["filled_quantity"] == quantity {
            return order.data().clone();
        }
        step(app).await;
    }
    panic!("order {id} never had {quantity} filled: {}", app.get(&format!("/api/orders/{id}")).await.body);
}

/// The `execution_broker` health component.
async fn execution(app: &TestApp) -> Value {
    let components = app.get("/api/health/components").await;
    let rows = components.data().as_array().expect("components").clone();
    rows.into_iter().find(|c| c["name"] == "execution_broker").expect("execution_broker")
}

/// Waits (up to ~10 s) until the `execution_broker` component satisfies `done`.
pub(crate) async fn wait_for_execution(app: &TestApp, what: &str, done: impl Fn(&Value) -> bool) -> Value {
    let mut last = Value::Null;
    for _ in 0..200 {
        last = execution(app).await;
        if done(&last) {
            return last;
        }
        step(app).await;
    }
    panic!("waited ~10 s for {what}; execution_broker: {last}");
}

/// Waits (up to ~10 s) until the books agree again: reconciliation `OK`, the venue answering,
/// as a health probe made after this call found them (health is probed in the background: the
/// last result may predate what the test just did, such as a call the venue failed).
pub(crate) async fn wait_for_reconciled(app: &TestApp) -> Value {
    let before = execution(app).await["last_ok_at"].clone();
    wait_for_execution(app, "reconciliation_status OK and HEALTHY, probed after the wait began", |c| {
        c["status"] == "HEALTHY" && c["detail"]["reconciliation_status"] == "OK" && c["last_ok_at"] != before
    })
    .await
}

/// The market trades `symbol` at the limit of whichever extended-hours exit is working at the
/// venue until the venue holds none of it (up to ~10 s). An exit left unfilled for 5 s while the
/// bid falls away is cancelled and sent again lower (CONTRACT §12), so the exit a test saw may
/// have been replaced by the time its trade arrives: as in a real market, later trades fill the
/// one that replaced it.
async fn trade_at_the_working_exit(app: &TestApp, alpaca: &StandIn, symbol: &str) {
    for _ in 0..200 {
        if alpaca.positions().get(symbol).is_none_or(|(q, _)| *q == 0) {
            return;
        }
        let working = alpaca
            .venue()
            .orders
            .iter()
            .find(|o| o["symbol"] == symbol && o["side"] == "sell" && o["type"] == "limit" && is_open(o))
            .map(|o| dec(&o["limit_price"]));
        if let Some(limit) = working {
            alpaca.trade(symbol, limit);
        }
        step(app).await;
    }
    panic!(
        "waited ~10 s for the exit of {symbol} to fill; open orders {:?}, positions {:?}",
        alpaca.open_orders(),
        alpaca.positions()
    );
}

/// Waits (up to ~10 s) until the stand-in satisfies `done`.
async fn wait_for_venue(app: &TestApp, alpaca: &StandIn, what: &str, done: impl Fn(&StandIn) -> bool) {
    for _ in 0..200 {
        if done(alpaca) {
            return;
        }
        step(app).await;
    }
    panic!(
        "waited ~10 s for the stand-in: {what}; open orders {:?}, positions {:?}",
        alpaca.open_orders(),
        alpaca.positions()
    );
}

/// `n` symbols of the simulated market with a fill price near their simulated price (cents).
async fn symbols(app: &TestApp, n: usize) -> Vec<(String, Decimal)> {
    let found = app.market_symbols(n).await;
    assert_eq!(found.len(), n, "the simulated market has {n} symbols priced 2..50: {found:?}");
    found.into_iter().map(|(s, p)| (s, Decimal::try_from(p).unwrap().round_dp(2))).collect()
}

async fn place(app: &TestApp, body: Value) -> crate::helpers::Reply {
    app.post("/api/orders", ADMIN_TOKEN, body).await
}

fn market_buy(symbol: &str, quantity: u64) -> Value {
    json!({"symbol": symbol, "side": "BUY", "quantity": quantity})
}

fn limit_buy(symbol: &str, quantity: u64, price: Decimal) -> Value {
    json!({"symbol": symbol, "side": "BUY", "quantity": quantity, "order_type": "LIMIT", "limit_price": price.to_string().parse::<f64>().unwrap()})
}

/// Places an order the service takes (201); its client order id.
async fn placed(app: &TestApp, body: Value) -> String {
    let reply = place(app, body).await;
    reply.assert_ok(201)["client_order_id"].as_str().expect("client_order_id").to_string()
}

pub(crate) fn cents(x: f64) -> i64 {
    (x * 100.0).round() as i64
}

pub(crate) fn cents_of(d: Decimal) -> i64 {
    (d * Decimal::from(100)).round().try_into().unwrap()
}

/// The service's positions and cash equal the stand-in's, to the cent.
pub(crate) async fn assert_books_agree(app: &TestApp, alpaca: &StandIn) {
    let rows = app.get("/api/positions").await;
    let ours: BTreeMap<String, (i64, i64)> = rows
        .assert_ok(200)
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["quantity"].as_u64().unwrap() > 0)
        .map(|p| {
            let average = p["average_entry_price"].as_f64().expect("average_entry_price");
            (p["symbol"].as_str().unwrap().to_string(), (p["quantity"].as_i64().unwrap(), cents(average)))
        })
        .collect();
    let theirs: BTreeMap<String, (i64, i64)> =
        alpaca.positions().into_iter().map(|(s, (q, average))| (s, (q, cents_of(average)))).collect();
    assert_eq!(ours, theirs, "positions (shares, average entry in cents): the service's vs the stand-in's");
    let account = app.get("/api/account/summary").await;
    let cash = account.assert_ok(200)["cash"].as_f64().expect("cash");
    assert_eq!(cents(cash), cents_of(alpaca.cash()), "cash: the service's {cash} vs the stand-in's {}", alpaca.cash());
}

/// Partial fills of market orders, a limit order filled in two parts by the test, a sell: the
/// service's positions and cash are the venue's to the cent; each order was sent once.
#[tokio::test]
async fn alpaca_partial_fills_leave_positions_and_cash_equal_to_the_venues() {
    let (app, alpaca) = start().await;
    let syms = symbols(&app, 2).await;
    let ((a, pa), (b, pb)) = (syms[0].clone(), syms[1].clone());
    alpaca.set_price(&a, pa);
    alpaca.set_price(&b, pb);

    // A market buy filled in three parts.
    alpaca.set_parts(vec![10, 15]);
    let first = placed(&app, market_buy(&a, 40)).await;
    let order = wait_for_order(&app, &first, &["FILLED"]).await;
    assert_eq!(order["filled_quantity"], 40, "{order}");
    assert_eq!(order["executions"].as_array().unwrap().len(), 3, "three executions: {order}");
    alpaca.set_parts(Vec::new());

    // A limit buy resting at the venue, filled in two parts by the test.
    let limit = pb - Decimal::new(5, 2);
    let second = placed(&app, limit_buy(&b, 30, limit)).await;
    wait_for_order(&app, &second, &["ACCEPTED"]).await;
    alpaca.fill(&second, 12, limit, true);
    let order = wait_for_order(&app, &second, &["PARTIALLY_FILLED"]).await;
    assert_eq!(order["filled_quantity"], 12, "{order}");
    assert_books_agree(&app, &alpaca).await;
    alpaca.fill(&second, 18, limit - Decimal::new(1, 2), true);
    wait_for_order(&app, &second, &["FILLED"]).await;

    // Part of the first position sold.
    let sell = json!({"symbol": a, "side": "SELL", "quantity": 15});
    alpaca.set_price(&a, pa + Decimal::new(3, 2));
    let third = placed(&app, sell).await;
    wait_for_order(&app, &third, &["FILLED"]).await;

    assert_books_agree(&app, &alpaca).await;
    for id in [&first, &second, &third] {
        assert_eq!((alpaca.posts(id), alpaca.orders_of(id)), (1, 1), "{id}: one POST, one order at the venue");
    }
    wait_for_reconciled(&app).await;
}

/// Every submit fault leaves exactly one broker order per intent (or none, when the venue took
/// none), and the operator is told what happened.
#[tokio::test]
async fn alpaca_submit_faults_leave_exactly_one_order_per_intent() {
    let (app, alpaca) = start().await;
    let syms = symbols(&app, 1).await;
    let (a, pa) = syms[0].clone();
    alpaca.set_price(&a, pa);

    // 1. A 500 after the order was created: the adapter looks it up and finds it, never
    //    POSTing again; the operator's order is taken.
    alpaca.fault(SubmitFault::LostReply);
    let lost = placed(&app, market_buy(&a, 11)).await;
    wait_for_order(&app, &lost, &["FILLED"]).await;
    assert_eq!((alpaca.posts(&lost), alpaca.orders_of(&lost)), (1, 1), "a lost 500 reply: one POST, one order");
    wait_for_reconciled(&app).await;

    // 2. A reply slower than the runner waits for a broker call (2 s): the operator is told
    //    BROKER_UNAVAILABLE (503, Retry-After) while the venue has the order; it is looked up
    //    later, found, and works, never POSTed again.
    alpaca.fault(SubmitFault::SlowReply(Duration::from_secs(3)));
    let reply = place(&app, market_buy(&a, 12)).await;
    reply.assert_error(503, "BROKER_UNAVAILABLE");
    let retry_after = reply.headers.get("retry-after").expect("Retry-After").to_str().unwrap();
    assert!(retry_after.parse::<u64>().is_ok_and(|s| s > 0), "Retry-After {retry_after}");
    let slow = reply.body["error"]["detail"]["client_order_id"].as_str().expect("the order written ahead").to_string();
    let order = wait_for_order(&app, &slow, &["FILLED"]).await;
    assert!(order["broker_order_id"].is_string(), "{order}");
    assert_eq!((alpaca.posts(&slow), alpaca.orders_of(&slow)), (1, 1), "a timed-out submit: one POST, one order");
    wait_for_reconciled(&app).await;

    // 3. The reply is lost and so is the lookup's: the operator is told BROKER_UNAVAILABLE
    //    (503, Retry-After); the order written ahead is looked up later, found, and works.
    alpaca.fault(SubmitFault::LostReply);
    alpaca.fail_lookups(1);
    let reply = place(&app, market_buy(&a, 13)).await;
    reply.assert_error(503, "BROKER_UNAVAILABLE");
    let retry_after = reply.headers.get("retry-after").expect("Retry-After").to_str().unwrap();
    assert!(retry_after.parse::<u64>().is_ok_and(|s| s > 0), "Retry-After {retry_after}");
    let unknown =
        reply.body["error"]["detail"]["client_order_id"].as_str().expect("the order written ahead").to_string();
    let order = wait_for_order(&app, &unknown, &["FILLED"]).await;
    assert!(order["broker_order_id"].is_string(), "{order}");
    wait_for_reconciled(&app).await;
    assert_eq!((alpaca.posts(&unknown), alpaca.orders_of(&unknown)), (1, 1), "lost reply and lookup: one POST");

    // 4. 429: nothing was created; BROKER_UNAVAILABLE with the venue's wait; the order is
    //    looked up once the wait is over, found missing, and marked REJECTED, never re-sent.
    alpaca.fault(SubmitFault::RateLimited { retry_after: 3 });
    let reply = place(&app, market_buy(&a, 14)).await;
    reply.assert_error(503, "BROKER_UNAVAILABLE");
    assert_eq!(
        reply.headers.get("retry-after").and_then(|h| h.to_str().ok()),
        Some("3"),
        "{:?} {}",
        reply.headers,
        reply.body
    );
    let limited =
        reply.body["error"]["detail"]["client_order_id"].as_str().expect("the order written ahead").to_string();
    let order = wait_for_order(&app, &limited, &["REJECTED"]).await;
    assert!(order["reject_reason"].as_str().unwrap_or_default().starts_with("never sent"), "{order}");
    assert_eq!((alpaca.posts(&limited), alpaca.orders_of(&limited)), (1, 0), "a 429: one POST, no order");

    // 5. The reply is lost and the lookup does not see the order yet: the adapter sends it once
    //    more, the venue refuses the duplicate client_order_id (422, 40010001), and that answer
    //    is taken as "it landed": still one order, and the operator's order is taken.
    alpaca.fault(SubmitFault::LostReply);
    alpaca.miss_lookups(1);
    let twice = placed(&app, market_buy(&a, 15)).await;
    wait_for_order(&app, &twice, &["FILLED"]).await;
    assert_eq!(alpaca.orders_of(&twice), 1, "one order at the venue");
    assert_eq!(alpaca.posts(&twice), 2, "the second POST was refused as a duplicate client_order_id");

    wait_for_reconciled(&app).await;
    assert_books_agree(&app, &alpaca).await;
    assert_eq!(alpaca.calls("POST", "/v2/orders"), 6, "five intents, six POSTs in all (one refused as a duplicate)");
}

/// The venue's refusals are answered as the operator relies on: a 403 for buying power is
/// RISK_BLOCKED (BUYING_POWER, the venue's figures) with a violation row; a 422 naming a field
/// is VALIDATION_ERROR naming ours; a rejection after acceptance reads REJECTED; a cancel the
/// venue answers "already filled" is ORDER_NOT_CANCELLABLE, and the fill, arriving late, counts.
#[tokio::test]
async fn alpaca_refusals_are_answered_as_risk_validation_and_not_cancellable() {
    let (app, alpaca) = start().await;
    let syms = symbols(&app, 2).await;
    let ((a, pa), (b, pb)) = (syms[0].clone(), syms[1].clone());

    alpaca.fault(SubmitFault::BuyingPower { buying_power: "1000.50", cost_basis: "5000" });
    let reply = place(&app, market_buy(&a, 10)).await;
    reply.assert_error(422, "RISK_BLOCKED");
    let detail = &reply.body["error"]["detail"];
    assert_eq!(detail["rule"], "BUYING_POWER", "{}", reply.body);
    assert_eq!((detail["limit"].as_f64(), detail["current"].as_f64()), (Some(1000.5), Some(5000.0)), "{}", reply.body);
    let violations = app.get("/api/risk/violations").await;
    let rows = violations.assert_ok(200).as_array().unwrap().clone();
    assert!(
        rows.iter().any(|r| r["rule"] == "BUYING_POWER" && r["symbol"] == a.as_str()),
        "a violation row for the venue's refusal: {rows:?}"
    );

    // A sell the venue refuses for the shares it holds: RISK_BLOCKED with its figures.
    alpaca.set_price(&a, pa);
    let held = placed(&app, market_buy(&a, 11)).await;
    wait_for_order(&app, &held, &["FILLED"]).await;
    alpaca.fault(SubmitFault::SharesAvailable { available: "4" });
    let reply = place(&app, json!({"symbol": a, "side": "SELL", "quantity": 11})).await;
    reply.assert_error(422, "RISK_BLOCKED");
    let detail = &reply.body["error"]["detail"];
    assert_eq!(detail["rule"], "BUYING_POWER", "{}", reply.body);
    assert_eq!((detail["limit"].as_u64(), detail["current"].as_u64()), (Some(4), Some(11)), "{}", reply.body);

    alpaca.fault(SubmitFault::Unprocessable(
        "invalid limit_price 0.001. sub-penny increment does not fulfill minimum pricing criteria",
    ));
    let reply = place(&app, limit_buy(&a, 10, pa)).await;
    reply.assert_error(400, "VALIDATION_ERROR");
    assert_eq!(reply.body["error"]["detail"]["field"], "limit_price", "{}", reply.body);

    // Accepted, then rejected by the venue.
    let rejected = placed(&app, limit_buy(&a, 10, pa - Decimal::new(10, 2))).await;
    wait_for_order(&app, &rejected, &["ACCEPTED"]).await;
    alpaca.reject(&rejected);
    wait_for_order(&app, &rejected, &["REJECTED"]).await;

    // Filled at the venue before its report reached the service: the cancel is refused there.
    let limit = pb - Decimal::new(2, 2);
    let filled = placed(&app, limit_buy(&b, 20, limit)).await;
    wait_for_order(&app, &filled, &["ACCEPTED"]).await;
    alpaca.fill(&filled, 20, limit, false);
    let reply = app.post("/api/orders/cancel", ADMIN_TOKEN, json!({"client_order_id": filled})).await;
    reply.assert_error(409, "ORDER_NOT_CANCELLABLE");
    assert_eq!(reply.body["error"]["detail"]["status"], "FILLED", "{}", reply.body);
    assert_eq!(alpaca.order(&filled)["status"], "filled");
    // The fill's report arrives after the refused cancel and is applied.
    let (i, execution) = {
        let mut v = alpaca.venue();
        v.next_execution += 1;
        (v.index(&filled).unwrap(), format!("exec-late-{}", v.next_execution))
    };
    alpaca.venue().send(
        "fill",
        i,
        json!({"execution_id": execution, "price": limit.to_string(), "qty": "20", "position_qty": "20"}),
    );
    wait_for_order(&app, &filled, &["FILLED"]).await;

    for id in [&rejected, &filled] {
        assert_eq!(alpaca.posts(id), 1, "{id} sent once");
    }
    wait_for_reconciled(&app).await;
    assert_books_agree(&app, &alpaca).await;
}

/// Alpaca answers every malformed order `422` with code 40010001, the code it also gives a
/// reused client order id: only the message "client_order_id must be unique" means the venue
/// has the order. Any other such answer is that order's rejection: the operator is told why
/// (never `BROKER_UNAVAILABLE`), the order reads `REJECTED` with Alpaca's message, it is never
/// sent again, and the venue stays available for the next order.
#[tokio::test]
async fn alpaca_a_malformed_order_is_rejected_not_taken_for_a_duplicate() {
    let (app, alpaca) = start().await;
    let syms = symbols(&app, 1).await;
    let (a, pa) = syms[0].clone();
    alpaca.set_price(&a, pa);
    let messages = [
        "qty must be > 0",
        "only type=\"limit\" is allowed for extended hours orders",
        "extended hours order must be DAY limit orders",
        "invalid limit_price 0.001. sub-penny increment does not fulfill minimum pricing criteria",
    ];
    for (i, message) in messages.iter().enumerate() {
        let id = format!("malformed-{i}");
        alpaca.fault(SubmitFault::Unprocessable(message));
        let mut body = limit_buy(&a, 10, pa - Decimal::new(5, 2));
        body["client_order_id"] = json!(id);
        let reply = place(&app, body).await;
        reply.assert_error(400, "VALIDATION_ERROR");
        let reason = reply.body["error"]["detail"]["reason"].as_str().unwrap_or_default().to_string();
        assert!(reason.contains(message), "the refusal carries Alpaca's message {message:?}: {}", reply.body);
        let order = wait_for_order(&app, &id, &["REJECTED"]).await;
        let why = order["reject_reason"].as_str().unwrap_or_default();
        assert!(why.contains(message), "the order carries Alpaca's message {message:?}: {order}");
    }
    // Nothing is sent again, however long the service runs on.
    for _ in 0..60 {
        step(&app).await;
    }
    app.market.advance(chrono::Duration::seconds(30));
    for _ in 0..20 {
        step(&app).await;
    }
    for i in 0..messages.len() {
        let id = format!("malformed-{i}");
        assert_eq!(alpaca.posts(&id), 1, "{id} sent once");
        assert_eq!(alpaca.orders_of(&id), 0, "{id} never placed");
        assert_eq!(app.get(&format!("/api/orders/{id}")).await.data()["status"], "REJECTED");
    }
    // The venue stayed available: health never turned, and the next order is taken and fills.
    let health = execution(&app).await;
    assert_eq!(health["status"], "HEALTHY", "{health}");
    assert!(health["detail"]["unavailable"].is_null(), "{health}");
    let id = placed(&app, market_buy(&a, 10)).await;
    wait_for_order(&app, &id, &["FILLED"]).await;
    assert_books_agree(&app, &alpaca).await;
}

/// The pre-market on Alpaca (CONTRACT §12), with the stand-in keeping Alpaca's sessions: a
/// market order is refused before anything is sent; an extended-hours limit is sent marked
/// `extended_hours` and fills there; a position bought with a stop reads `ENGINE` (no venue
/// triggers a stop at 07:00) while its stop rests at the venue for the open; the engine fires
/// it when a trade crosses it, freeing the shares first, as an extended-hours limit; and the
/// emergency halt flattens at 07:00 through extended-hours limits, as the venue's book shows.
#[tokio::test]
async fn alpaca_the_pre_market_trades_extended_hours_limits_with_the_stop_held_by_the_engine() {
    // Monday 2026-11-23, 07:00 New York.
    let (app, alpaca) = start_at_market("2026-11-23T12:00:00Z").await;
    alpaca.keep_sessions();
    app.put_settings(ADMIN_TOKEN, json!({"runtime": {"market_calendar": "NYSE"}})).await.assert_ok(200);
    let syms = symbols(&app, 2).await;
    let ((a, pa), (b, pb)) = (syms[0].clone(), syms[1].clone());
    alpaca.set_price(&a, pa);
    alpaca.set_price(&b, pb);

    let posts = alpaca.calls("POST", "/v2/orders");
    place(&app, market_buy(&a, 10)).await.assert_error(409, "OUTSIDE_REGULAR_SESSION");
    place(&app, limit_buy(&a, 10, pa)).await.assert_error(409, "OUTSIDE_REGULAR_SESSION");
    assert_eq!(alpaca.calls("POST", "/v2/orders"), posts, "nothing reached the venue");

    // B: an extended-hours limit with a stop well under the market: sent alone, marked, and
    // filled by a pre-market trade. Its stop rests at the venue for the open; until then the
    // engine holds it.
    let cents = |d: Decimal| d.round_dp(2).to_string().parse::<f64>().unwrap();
    let mut b_entry = limit_buy(&b, 20, pb);
    b_entry["extended_hours"] = json!(true);
    b_entry["stop_loss"] = json!({"stop_price": cents(pb * Decimal::new(90, 2))});
    let b_id = placed(&app, b_entry).await;
    let sent = alpaca.order(&b_id);
    assert_eq!((sent["extended_hours"].as_bool(), sent["type"].as_str()), (Some(true), Some("limit")), "{sent}");
    alpaca.trade(&b, pb);
    wait_for_order(&app, &b_id, &["FILLED"]).await;
    wait_for_venue(&app, &alpaca, "B's stop resting", |v| v.open_orders().len() == 1).await;
    let mut row = Value::Null;
    for _ in 0..100 {
        let positions = app.get("/api/positions").await;
        let rows = positions.data().as_array().unwrap().clone();
        row = rows.into_iter().find(|p| p["symbol"] == b.as_str()).unwrap_or_default();
        if row["protection"] == "ENGINE" && row["protective_order_id"].is_string() {
            break;
        }
        step(&app).await;
    }
    assert_eq!(row["protection"], "ENGINE", "no venue triggers a stop at 07:00: {row}");
    let health = wait_for_execution(&app, "the engine-protected count", |c| c["detail"]["engine_protected"] == 1).await;
    assert_eq!(health["detail"]["engine_protected"], 1, "{health}");

    // A: bought with a stop over the market's last trade (under its limit, as a stop must be):
    // the next trade crosses it. The venue elects nothing at 07:00; the engine frees the shares
    // its stop holds and sells them as an extended-hours limit.
    let mut entry = limit_buy(&a, 10, pa * Decimal::new(1045, 3));
    entry["limit_price"] = json!(cents(pa * Decimal::new(1045, 3)));
    entry["extended_hours"] = json!(true);
    entry["stop_loss"] = json!({"stop_price": cents(pa * Decimal::new(103, 2))});
    let id = placed(&app, entry).await;
    alpaca.trade(&a, pa);
    wait_for_order(&app, &id, &["FILLED"]).await;
    let mut exit = Value::Null;
    for _ in 0..200 {
        let orders = app.get("/api/orders?limit=50").await;
        let rows = orders.data().as_array().unwrap().clone();
        let found = rows.into_iter().find(|o| {
            o["symbol"] == a.as_str()
                && o["side"] == "SELL"
                && o["reason"].as_str().is_some_and(|r| r.starts_with("STOP_LOSS"))
        });
        if let Some(found) = found {
            exit = found;
            if alpaca.venue().index(exit["client_order_id"].as_str().unwrap()).is_some() {
                break;
            }
        }
        step(&app).await;
    }
    let exit_id = exit["client_order_id"].as_str().expect("the engine's stop exit").to_string();
    let at_venue = alpaca.order(&exit_id);
    assert_eq!(
        (at_venue["extended_hours"].as_bool(), at_venue["type"].as_str()),
        (Some(true), Some("limit")),
        "{at_venue}"
    );
    assert_eq!(alpaca.positions()[&a].0, 10, "the venue triggered no stop in the pre-market");
    // Trades at its limit fill it (a sell limit fills at or above its price).
    trade_at_the_working_exit(&app, &alpaca, &a).await;
    let trades = wait_for_trades(&app, &a, 1).await;
    assert_eq!(trades.data()[0]["exit_reason"], "STOP_LOSS", "{}", trades.body);

    // The emergency halt at 07:00: an extended-hours limit under the last trade, filled.
    app.post("/api/risk/emergency-halt", ADMIN_TOKEN, json!({"reason": "pre-market drill"})).await.assert_ok(200);
    let mut halt_exit = None;
    for _ in 0..200 {
        // Its stop (a sell `stop`) is cancelled first; the exit is the sell that is not.
        halt_exit = alpaca
            .venue()
            .orders
            .iter()
            .find(|o| o["symbol"] == b.as_str() && o["side"] == "sell" && o["type"] != "stop")
            .cloned();
        if halt_exit.is_some() {
            break;
        }
        step(&app).await;
    }
    let halt_exit = halt_exit.expect("the halt's exit reached the venue");
    assert_eq!(
        (halt_exit["extended_hours"].as_bool(), halt_exit["type"].as_str()),
        (Some(true), Some("limit")),
        "{halt_exit}"
    );
    trade_at_the_working_exit(&app, &alpaca, &b).await;
    wait_for_reconciled(&app).await;
    assert_books_agree(&app, &alpaca).await;
}

/// Fills that arrive after the operator asked to cancel count, to the share: the venue's cancel
/// had not happened yet. One order is filled in part and then cancelled (CANCELED with its
/// filled shares), another filled whole (FILLED).
#[tokio::test]
async fn alpaca_fills_after_a_cancel_request_count() {
    let (app, alpaca) = start().await;
    let syms = symbols(&app, 2).await;
    let ((a, pa), (b, pb)) = (syms[0].clone(), syms[1].clone());
    alpaca.hold_cancels(true);

    let limit = pa - Decimal::new(4, 2);
    let partly = placed(&app, limit_buy(&a, 25, limit)).await;
    let limit_b = pb - Decimal::new(6, 2);
    let whole = placed(&app, limit_buy(&b, 16, limit_b)).await;
    for id in [&partly, &whole] {
        wait_for_order(&app, id, &["ACCEPTED"]).await;
        let reply = app.post("/api/orders/cancel", ADMIN_TOKEN, json!({"client_order_id": id})).await;
        assert_eq!(reply.assert_ok(200)["status"], "PENDING_CANCEL", "{}", reply.body);
        wait_for_venue(&app, &alpaca, "the cancel request reached it", |v| v.order(id)["status"] == "pending_cancel")
            .await;
    }

    alpaca.fill(&partly, 10, limit, true);
    wait_for_filled(&app, &partly, 10).await;
    {
        let mut v = alpaca.venue();
        let i = v.index(&partly).unwrap();
        v.end_cancel(i);
    }
    let order = wait_for_order(&app, &partly, &["CANCELED"]).await;
    assert_eq!(order["filled_quantity"], 10, "the shares filled before the cancel count: {order}");

    alpaca.fill(&whole, 6, limit_b, true);
    alpaca.fill(&whole, 10, limit_b, true);
    let order = wait_for_order(&app, &whole, &["FILLED"]).await;
    assert_eq!(order["filled_quantity"], 16, "{order}");

    wait_for_reconciled(&app).await;
    assert_books_agree(&app, &alpaca).await;
    assert_eq!((alpaca.posts(&partly), alpaca.posts(&whole)), (1, 1));
}

/// The stream drops; the order fills while it is down; the service says the stream is down
/// (DEGRADED, with why), then, reconnected, takes the fill from the gap fill once, and the
/// books agree.
#[tokio::test]
async fn alpaca_a_fill_while_the_stream_is_down_is_taken_after_the_reconnect() {
    let (app, alpaca) = start().await;
    let syms = symbols(&app, 1).await;
    let (a, pa) = syms[0].clone();
    let limit = pa - Decimal::new(3, 2);
    let id = placed(&app, limit_buy(&a, 30, limit)).await;
    wait_for_order(&app, &id, &["ACCEPTED"]).await;
    let canceled = placed(&app, limit_buy(&a, 3, limit - Decimal::new(10, 2))).await;
    wait_for_order(&app, &canceled, &["ACCEPTED"]).await;

    alpaca.drop_stream();
    let down = wait_for_execution(&app, "DEGRADED while the stream is down", |c| c["status"] == "DEGRADED").await;
    let reason = down["detail"]["reason"].as_str().unwrap_or_default();
    assert!(reason.contains("stream is disconnected"), "{down}");
    alpaca.fill(&id, 10, limit, true);
    // Cancelled while the stream is down: the cancel's report is lost too.
    let reply = app.post("/api/orders/cancel", ADMIN_TOKEN, json!({"client_order_id": canceled})).await;
    assert_eq!(reply.assert_ok(200)["status"], "PENDING_CANCEL", "{}", reply.body);
    assert_eq!(alpaca.order(&canceled)["status"], "canceled");

    alpaca.allow_stream();
    let up = wait_for_execution(&app, "HEALTHY once the stream is back", |c| {
        c["status"] == "HEALTHY" && c["detail"]["stream"]["connected"] == true
    })
    .await;
    assert!(up["detail"]["stream"]["connections"].as_u64().unwrap() >= 2, "{up}");
    let order = wait_for_order(&app, &id, &["PARTIALLY_FILLED"]).await;
    assert_eq!(order["filled_quantity"], 10, "the gap's fill, once: {order}");
    wait_for_order(&app, &canceled, &["CANCELED"]).await;
    assert_books_agree(&app, &alpaca).await;
    // The rest fills over the stream: the gap's shares are not counted again.
    alpaca.fill(&id, 20, limit - Decimal::new(1, 2), true);
    let order = wait_for_order(&app, &id, &["FILLED"]).await;
    assert_eq!(order["filled_quantity"], 30, "{order}");
    wait_for_reconciled(&app).await;
    assert_books_agree(&app, &alpaca).await;
    assert_eq!(alpaca.posts(&id), 1);
}

/// A venue that cannot be reached: health says so, new orders are answered BROKER_UNAVAILABLE
/// (503, Retry-After) and reach nothing; once it answers, orders are taken again.
#[tokio::test]
async fn alpaca_an_unreachable_venue_answers_503_until_it_is_back() {
    let (app, alpaca) = start().await;
    let syms = symbols(&app, 1).await;
    let (a, pa) = syms[0].clone();
    alpaca.set_price(&a, pa);

    alpaca.set_down(true);
    let down = wait_for_execution(&app, "DEGRADED while the venue is unreachable", |c| {
        c["status"] == "DEGRADED" && c["detail"]["unavailable"].is_string()
    })
    .await;
    assert!(down["detail"]["reason"].as_str().unwrap().contains("unavailable"), "{down}");
    let posts = alpaca.calls("POST", "/v2/orders");
    let reply = place(&app, market_buy(&a, 10)).await;
    reply.assert_error(503, "BROKER_UNAVAILABLE");
    assert!(reply.headers.get("retry-after").is_some(), "{:?}", reply.headers);
    assert_eq!(alpaca.calls("POST", "/v2/orders"), posts, "nothing reached the venue");

    alpaca.set_down(false);
    wait_for_reconciled(&app).await;
    let id = placed(&app, market_buy(&a, 10)).await;
    wait_for_order(&app, &id, &["FILLED"]).await;
    assert_books_agree(&app, &alpaca).await;
}

/// The emergency halt cancels every open order at the venue and flattens every position there
/// with market exits, as the venue's own book confirms.
#[tokio::test]
async fn alpaca_the_emergency_halt_cancels_and_flattens_at_the_venue() {
    let (app, alpaca) = start().await;
    let syms = symbols(&app, 2).await;
    let ((a, pa), (b, pb)) = (syms[0].clone(), syms[1].clone());
    alpaca.set_price(&a, pa);
    alpaca.set_price(&b, pb);
    let first = placed(&app, market_buy(&a, 20)).await;
    let second = placed(&app, market_buy(&b, 35)).await;
    wait_for_order(&app, &first, &["FILLED"]).await;
    wait_for_order(&app, &second, &["FILLED"]).await;
    let resting_at = pa - Decimal::new(20, 2);
    let resting = placed(&app, limit_buy(&a, 5, resting_at)).await;
    wait_for_order(&app, &resting, &["ACCEPTED"]).await;
    alpaca.fill(&resting, 3, resting_at, true);
    wait_for_order(&app, &resting, &["PARTIALLY_FILLED"]).await;
    assert_eq!(alpaca.open_orders(), vec![resting.clone()]);
    assert_eq!(alpaca.positions().len(), 2);

    let reply = app.post("/api/risk/emergency-halt", ADMIN_TOKEN, json!({"reason": "Alpaca's proof"})).await;
    let halted = reply.assert_ok(200);
    assert_eq!(
        (halted["halted"].as_bool(), halted["liquidation_requested"].as_bool()),
        (Some(true), Some(true)),
        "{halted}"
    );
    wait_for_venue(&app, &alpaca, "no open order and no position", |v| {
        v.open_orders().is_empty() && v.positions().is_empty()
    })
    .await;
    assert_eq!(alpaca.order(&resting)["status"], "canceled");
    let exits: Vec<Value> = {
        let v = alpaca.venue();
        v.orders.iter().filter(|o| o["side"] == "sell").cloned().collect()
    };
    assert_eq!(exits.len(), 2, "one market exit per position: {exits:?}");
    let sold: BTreeMap<String, String> =
        exits.iter().map(|o| (o["symbol"].as_str().unwrap().into(), o["qty"].as_str().unwrap().into())).collect();
    assert_eq!(
        sold,
        BTreeMap::from([(a.clone(), "23".into()), (b.clone(), "35".into())]),
        "each exit sells the whole position"
    );
    assert!(exits.iter().all(|o| o["type"] == "market" && o["status"] == "filled"), "{exits:?}");
    wait_for_order(&app, &resting, &["CANCELED"]).await;
    for _ in 0..200 {
        let positions = app.get("/api/positions").await;
        if positions.data().as_array().unwrap().iter().all(|p| p["quantity"] == 0) {
            break;
        }
        step(&app).await;
    }
    assert_books_agree(&app, &alpaca).await;
    wait_for_reconciled(&app).await;
}

/// CONTRACT §10: the halt is retried until the broker confirms it. Halted while the venue
/// cannot be reached, the service cancels the open order and flattens every position once it
/// answers again, with exactly one filled exit per position at the venue.
#[tokio::test]
async fn alpaca_a_halt_while_the_venue_is_unreachable_is_carried_out_once_it_is_back() {
    let (app, alpaca) = start().await;
    let syms = symbols(&app, 2).await;
    let ((a, pa), (b, pb)) = (syms[0].clone(), syms[1].clone());
    alpaca.set_price(&a, pa);
    alpaca.set_price(&b, pb);
    let first = placed(&app, market_buy(&a, 21)).await;
    let second = placed(&app, market_buy(&b, 17)).await;
    wait_for_order(&app, &first, &["FILLED"]).await;
    wait_for_order(&app, &second, &["FILLED"]).await;
    let resting = placed(&app, limit_buy(&b, 4, pb - Decimal::new(25, 2))).await;
    wait_for_order(&app, &resting, &["ACCEPTED"]).await;

    alpaca.set_down(true);
    wait_for_execution(&app, "DEGRADED while the venue is unreachable", |c| c["detail"]["unavailable"].is_string())
        .await;
    let reply = app.post("/api/risk/emergency-halt", ADMIN_TOKEN, json!({"reason": "venue down"})).await;
    let halted = reply.assert_ok(200);
    assert_eq!(halted["halted"], true, "{halted}");
    assert_eq!(alpaca.open_orders(), vec![resting.clone()], "nothing reached the venue while it was down");

    alpaca.set_down(false);
    wait_for_venue(&app, &alpaca, "no open order and no position once it answers", |v| {
        v.open_orders().is_empty() && v.positions().is_empty()
    })
    .await;
    assert_eq!(alpaca.order(&resting)["status"], "canceled");
    let exits: Vec<Value> = {
        let v = alpaca.venue();
        v.orders.iter().filter(|o| o["side"] == "sell").cloned().collect()
    };
    let sold: BTreeMap<String, String> =
        exits.iter().map(|o| (o["symbol"].as_str().unwrap().into(), o["qty"].as_str().unwrap().into())).collect();
    assert_eq!(exits.len(), 2, "exactly one exit per position reached the venue: {exits:?}");
    assert_eq!(sold, BTreeMap::from([(a.clone(), "21".into()), (b.clone(), "17".into())]));
    for exit in &exits {
        let id = exit["client_order_id"].as_str().unwrap();
        assert_eq!(alpaca.orders_of(id), 1, "{exit}");
    }
    wait_for_order(&app, &resting, &["CANCELED"]).await;
    // The exits' fills may still be on their way: reconciliation reads OK meanwhile (a symbol
    // with an order in flight is not compared), so wait for the book to be flat first.
    for _ in 0..200 {
        let positions = app.get("/api/positions").await;
        if positions.data().as_array().unwrap().iter().all(|p| p["quantity"] == 0) {
            break;
        }
        step(&app).await;
    }
    wait_for_reconciled(&app).await;
    assert_books_agree(&app, &alpaca).await;
}

/// CONTRACT §10: a cancel is retried until the broker confirms it. Asked while the venue
/// cannot be reached, the order reads PENDING_CANCEL, and is cancelled at the venue once it
/// answers.
#[tokio::test]
async fn alpaca_a_cancel_while_the_venue_is_unreachable_reaches_it_once_it_is_back() {
    let (app, alpaca) = start().await;
    let syms = symbols(&app, 1).await;
    let (a, pa) = syms[0].clone();
    let id = placed(&app, limit_buy(&a, 9, pa - Decimal::new(15, 2))).await;
    wait_for_order(&app, &id, &["ACCEPTED"]).await;

    alpaca.set_down(true);
    wait_for_execution(&app, "DEGRADED while the venue is unreachable", |c| c["detail"]["unavailable"].is_string())
        .await;
    let reply = app.post("/api/orders/cancel", ADMIN_TOKEN, json!({"client_order_id": id})).await;
    assert_eq!(reply.assert_ok(200)["status"], "PENDING_CANCEL", "{}", reply.body);
    assert_eq!(alpaca.order(&id)["status"], "new", "the venue still works it");

    alpaca.set_down(false);
    wait_for_order(&app, &id, &["CANCELED"]).await;
    assert_eq!(alpaca.order(&id)["status"], "canceled");
    wait_for_reconciled(&app).await;
}

/// An order of ours that rests, then fills at the venue while the service is stopped, reads
/// FILLED after the restart, and the books agree. The order was submitted more than a minute
/// (of market time) before the service last wrote anything, as any order resting a while is.
#[tokio::test]
async fn alpaca_an_order_filled_while_the_service_was_down_reads_filled_after_the_restart() {
    let (app, alpaca) = start().await;
    let syms = symbols(&app, 2).await;
    let ((a, pa), (b, pb)) = (syms[0].clone(), syms[1].clone());
    alpaca.set_price(&b, pb);
    let limit = pa - Decimal::new(8, 2);
    let resting = placed(&app, limit_buy(&a, 12, limit)).await;
    wait_for_order(&app, &resting, &["ACCEPTED"]).await;
    // The order rests; the service trades on meanwhile.
    app.market.advance(chrono::Duration::minutes(3));
    let other = placed(&app, market_buy(&b, 7)).await;
    wait_for_order(&app, &other, &["FILLED"]).await;

    let mut app = app;
    app.stop().await;
    alpaca.fill(&resting, 12, limit, false);
    let app = crate::helpers::start_with_clock(
        app.config.clone(),
        app.db.clone(),
        axum::Router::new(),
        app.market.clone(),
        app.clock.clone(),
    )
    .await;
    let order = wait_for_order(&app, &resting, &["FILLED"]).await;
    assert_eq!(order["filled_quantity"], 12, "{order}");
    wait_for_reconciled(&app).await;
    assert_books_agree(&app, &alpaca).await;
}

/// Restarts the service on the same database, market clock and stand-in.
/// An order an earlier term sent and could not write (its database link was cut while it still
/// reached the broker: an emergency halt's exit) is found at the broker by its client order id —
/// one the engine generates — when the next term starts, and recorded before anything else as
/// the broker has it: the order, its fill, the position closed and the trade, once (a second
/// restart adds nothing); the books agree with the broker's.
#[tokio::test]
async fn alpaca_an_order_an_earlier_term_sent_and_could_not_write_is_recorded_once() {
    let (app, alpaca) = start().await;
    let (a, pa) = symbols(&app, 1).await.remove(0);
    alpaca.set_price(&a, pa);
    let bought = placed(&app, market_buy(&a, 5)).await;
    wait_for_order(&app, &bought, &["FILLED"]).await;
    let mut app = app;
    app.stop().await;
    let id = format!("to-{a}-20261120150000-999");
    alpaca.place(json!({"client_order_id": id, "symbol": a, "qty": "5", "side": "sell", "type": "market",
        "time_in_force": "day"}));
    assert!(alpaca.positions().is_empty(), "the earlier term's exit sold the shares at the broker");

    let app = restart_stopped(app).await;
    let order = wait_for_order(&app, &id, &["FILLED"]).await;
    assert_eq!(order["reason"], tradeops_core::engine::EARLIER_TERM_REASON, "{order}");
    assert_eq!(order["executions"].as_array().map(Vec::len), Some(1), "{order}");
    wait_for_reconciled(&app).await;
    assert_books_agree(&app, &alpaca).await;
    let trades = wait_for_trades(&app, &a, 1).await;
    assert_eq!(trades.data().as_array().map(Vec::len), Some(1), "one trade: {}", trades.body);

    let app = restart(app).await;
    wait_for_reconciled(&app).await;
    let again = app.get(&format!("/api/orders/{id}")).await;
    assert_eq!(again.data()["executions"].as_array().map(Vec::len), Some(1), "once: {}", again.body);
    let trades = app.get(&format!("/api/trades?symbol={a}")).await;
    assert_eq!(trades.data().as_array().map(Vec::len), Some(1), "still one trade: {}", trades.body);
    assert_books_agree(&app, &alpaca).await;
}

/// Waits (up to ~10 s) until `symbol` has `n` trades listed; the last listing.
async fn wait_for_trades(app: &TestApp, symbol: &str, n: usize) -> crate::helpers::Reply {
    for _ in 0..200 {
        let trades = app.get(&format!("/api/trades?symbol={symbol}")).await;
        if trades.data().as_array().map(Vec::len) == Some(n) {
            return trades;
        }
        step(app).await;
    }
    app.get(&format!("/api/trades?symbol={symbol}")).await
}

/// A stopped service started again on its database and clocks, its stream connected.
async fn restart_stopped(app: TestApp) -> TestApp {
    let app = crate::helpers::start_with_clock(
        app.config.clone(),
        app.db.clone(),
        axum::Router::new(),
        app.market.clone(),
        app.clock.clone(),
    )
    .await;
    wait_for_execution(&app, "the order-update stream to connect after the restart", |c| {
        c["detail"]["stream"]["connected"] == true
    })
    .await;
    app
}

async fn restart(mut app: TestApp) -> TestApp {
    app.stop().await;
    let app = crate::helpers::start_with_clock(
        app.config.clone(),
        app.db.clone(),
        axum::Router::new(),
        app.market.clone(),
        app.clock.clone(),
    )
    .await;
    wait_for_execution(&app, "the order-update stream to connect after the restart", |c| {
        c["detail"]["stream"]["connected"] == true
    })
    .await;
    app
}

/// A partially filled order still working at a restart keeps its fills once: the first gap
/// fill of the new process must not report the shares already applied again.
#[tokio::test]
async fn alpaca_a_partially_filled_order_keeps_its_fills_once_across_a_restart() {
    let (app, alpaca) = start().await;
    let syms = symbols(&app, 1).await;
    let (a, pa) = syms[0].clone();
    let limit = pa - Decimal::new(7, 2);
    let id = placed(&app, limit_buy(&a, 20, limit)).await;
    wait_for_order(&app, &id, &["ACCEPTED"]).await;
    alpaca.fill(&id, 5, limit, true);
    wait_for_filled(&app, &id, 5).await;

    let app = restart(app).await;
    // Moving on, the gap fill and the reconciliation have run; the order still has 5 filled.
    for _ in 0..40 {
        step(&app).await;
    }
    let order = app.get(&format!("/api/orders/{id}")).await;
    assert_eq!(order.data()["filled_quantity"], 5, "the fill before the restart counts once: {}", order.body);
    assert_books_agree(&app, &alpaca).await;
    alpaca.fill(&id, 15, limit, true);
    let order = wait_for_order(&app, &id, &["FILLED"]).await;
    assert_eq!(order["filled_quantity"], 20, "{order}");
    wait_for_reconciled(&app).await;
    assert_books_agree(&app, &alpaca).await;
}

/// A restart after ordinary trading leaves the books reconciled (OK, HEALTHY): the orders
/// filled before it are not reported as unknown.
#[tokio::test]
async fn alpaca_a_restart_after_trading_leaves_the_books_reconciled() {
    let (app, alpaca) = start().await;
    let syms = symbols(&app, 1).await;
    let (a, pa) = syms[0].clone();
    alpaca.set_price(&a, pa);
    let id = placed(&app, market_buy(&a, 8)).await;
    wait_for_order(&app, &id, &["FILLED"]).await;
    wait_for_reconciled(&app).await;

    let app = restart(app).await;
    wait_for_reconciled(&app).await;
    let order = app.get(&format!("/api/orders/{id}")).await;
    assert_eq!(order.data()["filled_quantity"], 8, "{}", order.body);
    assert_books_agree(&app, &alpaca).await;
}

/// The order rows and the account summary name the broker the service trades through.
#[tokio::test]
async fn alpaca_orders_and_the_account_name_the_broker() {
    let (app, alpaca) = start().await;
    let syms = symbols(&app, 1).await;
    let (a, pa) = syms[0].clone();
    alpaca.set_price(&a, pa);
    let id = placed(&app, market_buy(&a, 6)).await;
    let order = wait_for_order(&app, &id, &["FILLED"]).await;
    assert_eq!(order["broker_name"], "alpaca", "{order}");
    let account = app.get("/api/account/summary").await;
    assert_eq!(account.assert_ok(200)["broker_name"], "alpaca", "{}", account.body);
}

/// The emergency halt while the order-update stream is down: the cancels and exits reach the
/// venue, their reports are lost, and the gap fill after the reconnect brings the service's
/// book flat, equal to the venue's.
#[tokio::test]
async fn alpaca_a_halt_while_the_stream_is_down_is_reported_by_the_gap_fill() {
    let (app, alpaca) = start().await;
    let syms = symbols(&app, 2).await;
    let ((a, pa), (b, pb)) = (syms[0].clone(), syms[1].clone());
    alpaca.set_price(&a, pa);
    alpaca.set_price(&b, pb);
    let first = placed(&app, market_buy(&a, 13)).await;
    let second = placed(&app, market_buy(&b, 19)).await;
    wait_for_order(&app, &first, &["FILLED"]).await;
    wait_for_order(&app, &second, &["FILLED"]).await;
    let resting = placed(&app, limit_buy(&a, 2, pa - Decimal::new(9, 2))).await;
    wait_for_order(&app, &resting, &["ACCEPTED"]).await;

    alpaca.drop_stream();
    wait_for_execution(&app, "DEGRADED while the stream is down", |c| c["status"] == "DEGRADED").await;
    let reply = app.post("/api/risk/emergency-halt", ADMIN_TOKEN, json!({"reason": "stream down"})).await;
    assert_eq!(reply.assert_ok(200)["liquidation_requested"], true, "{}", reply.body);
    wait_for_venue(&app, &alpaca, "no open order and no position", |v| {
        v.open_orders().is_empty() && v.positions().is_empty()
    })
    .await;

    alpaca.allow_stream();
    wait_for_order(&app, &resting, &["CANCELED"]).await;
    for _ in 0..200 {
        let positions = app.get("/api/positions").await;
        if positions.data().as_array().unwrap().iter().all(|p| p["quantity"] == 0) {
            break;
        }
        step(&app).await;
    }
    wait_for_reconciled(&app).await;
    assert_books_agree(&app, &alpaca).await;
    let exits = alpaca.venue().orders.iter().filter(|o| o["side"] == "sell").count();
    assert_eq!(exits, 2, "one exit per position");
}

/// CONTRACT §10: what reconciliation finds at the broker that tradeops did not place is
/// adopted and reported — a working order (reason "adopted from broker", no strategy), a
/// position (managed by hand: `Halted`) — and the broker's cash is taken as the service's;
/// the books then agree and reconciliation is OK. Positions and cash are reconciled at start
/// and every minute of market time.
#[tokio::test]
async fn alpaca_orders_and_positions_placed_outside_tradeops_are_adopted() {
    let (app, alpaca) = start().await;
    let syms = symbols(&app, 2).await;
    let ((a, pa), (b, pb)) = (syms[0].clone(), syms[1].clone());
    // Placed at the broker by hand (its web screen): a resting limit buy, and 40 shares bought.
    {
        let mut venue = alpaca.venue();
        venue.create(&json!({"client_order_id": "web-5f1c2a", "symbol": a, "qty": "7", "type": "limit",
            "side": "buy", "time_in_force": "gtc", "limit_price": (pa - Decimal::ONE).to_string()}));
        venue.positions.insert(b.clone(), (40, pb * Decimal::from(40)));
        venue.cash -= pb * Decimal::from(40);
        venue.prices.insert(b.clone(), pb);
    }
    // The order is found by the next pass (every second); positions and cash at the next minute.
    let adopted = wait_for_order(&app, "web-5f1c2a", &["ACCEPTED"]).await;
    assert_eq!(adopted["reason"], "adopted from broker", "{adopted}");
    assert_eq!(adopted["strategy_id"], Value::Null);
    assert_eq!(adopted["quantity"], 7);
    app.market.advance(chrono::Duration::seconds(61));
    let mut held = Value::Null;
    for _ in 0..200 {
        let rows = app.get("/api/positions").await;
        if let Some(row) = rows.data().as_array().unwrap().iter().find(|p| p["symbol"] == b.as_str()) {
            held = row.clone();
            break;
        }
        step(&app).await;
    }
    assert_eq!(held["quantity"], 40, "the position held at the broker is adopted: {held}");
    assert_eq!(held["strategy_status"], "Halted", "managed by hand: {held}");
    assert_eq!(cents(held["average_entry_price"].as_f64().unwrap()), cents_of(pb));
    let health = wait_for_reconciled(&app).await;
    assert!(
        health["detail"]["reconciliation_detail"].as_str().unwrap().contains("last mismatch corrected"),
        "the adoption is reported: {health}"
    );
    assert_books_agree(&app, &alpaca).await;
    // The adopted order counts as working: the operator can cancel it like any other.
    let cancelled = app.post("/api/orders/cancel", ADMIN_TOKEN, json!({"client_order_id": "web-5f1c2a"})).await;
    assert_eq!(cancelled.assert_ok(200)["status"], "PENDING_CANCEL");
    wait_for_venue(&app, &alpaca, "the adopted order cancelled at the broker", |v| v.open_orders().is_empty()).await;
}

/// A holding that differs from the broker's with nothing in flight is a mismatch, shown in
/// health with both quantities until they agree again; cash is not taken while it lasts.
#[tokio::test]
async fn alpaca_a_position_that_differs_from_the_brokers_is_a_mismatch_until_it_agrees() {
    let (app, alpaca) = start().await;
    let syms = symbols(&app, 1).await;
    let (a, pa) = syms[0].clone();
    alpaca.set_price(&a, pa);
    let id = placed(&app, market_buy(&a, 10)).await;
    wait_for_order(&app, &id, &["FILLED"]).await;
    wait_for_reconciled(&app).await;
    // 2 shares leave the account outside tradeops (a transfer, a corporate action).
    alpaca.venue().positions.get_mut(&a).unwrap().0 = 8;
    app.market.advance(chrono::Duration::seconds(61));
    let health =
        wait_for_execution(&app, "a MISMATCH of the position", |c| c["detail"]["reconciliation_status"] == "MISMATCH")
            .await;
    assert_eq!(health["status"], "DEGRADED");
    let detail = health["detail"]["reconciliation_detail"].as_str().unwrap();
    assert!(detail.contains(&format!("{a}: 10 shares here, 8 at the broker")), "{detail}");
    // Back as it was: the next pass finds the books agreeing.
    alpaca.venue().positions.get_mut(&a).unwrap().0 = 10;
    app.market.advance(chrono::Duration::seconds(61));
    wait_for_reconciled(&app).await;
    assert_books_agree(&app, &alpaca).await;
}

/// An order answered `BROKER_UNAVAILABLE` is never sent again, even by the recovery after a
/// restart: the operator was told it was not placed (and may place it again), so the mark that
/// says so is stored with the order, not held in memory.
#[tokio::test]
async fn alpaca_an_order_answered_503_is_never_sent_even_after_a_restart() {
    let (app, alpaca) = start().await;
    let syms = symbols(&app, 1).await;
    let (a, pa) = syms[0].clone();
    alpaca.set_price(&a, pa);
    alpaca.fault(SubmitFault::RateLimited { retry_after: 30 });
    let reply = place(&app, market_buy(&a, 10)).await;
    reply.assert_error(503, "BROKER_UNAVAILABLE");
    let id = reply.body["error"]["detail"]["client_order_id"].as_str().expect("the order written ahead").to_string();
    let written = app.get(&format!("/api/orders/{id}")).await;
    assert_eq!(written.data()["status"], "NEW", "{}", written.body);
    let note = written.data()["reject_reason"].as_str().unwrap_or_default().to_string();
    assert!(note.contains("answered BROKER_UNAVAILABLE"), "the mark is on the order: {}", written.body);

    // Restarted before the lookup was due: the recovery looks the order up, finds Alpaca never
    // got it, and marks it rather than sending it.
    let app = restart(app).await;
    let order = wait_for_order(&app, &id, &["REJECTED", "ACCEPTED", "FILLED"]).await;
    assert_eq!(order["status"], "REJECTED", "{order}");
    let reason = order["reject_reason"].as_str().unwrap_or_default();
    assert!(reason.starts_with("never sent") && reason.contains("answered BROKER_UNAVAILABLE"), "{order}");
    assert_eq!((alpaca.posts(&id), alpaca.orders_of(&id)), (1, 0), "sent once (refused), never again");
}

/// The stand-in speaks Alpaca's protection (research §1–§6) as the adapter reads it: GTC stops
/// rest until a trade goes through them; an `oco` is a take-profit with its stop leg `held`
/// under it (nested only when asked), filled by whichever side a trade goes through, the other
/// cancelled (or the take-profit replaced); a cancel takes the group; a sell beyond the shares
/// not held for other sells is refused 403 40310000 with Alpaca's figures.
#[tokio::test]
async fn alpaca_the_stand_in_speaks_alpacas_protection_wire_format() {
    let market = ManualClock::new(tradeops_core::time::parse_ts(MARKET_START).unwrap());
    let alpaca = StandIn::start(Decimal::from(100_000), market).await;
    let http = reqwest::Client::new();
    let post = |body: Value| {
        http.post(format!("{}/v2/orders", alpaca.base_url))
            .header("APCA-API-KEY-ID", KEY_ID)
            .header("APCA-API-SECRET-KEY", SECRET)
            .json(&body)
            .send()
    };
    let get = |path: String| {
        http.get(format!("{}{path}", alpaca.base_url))
            .header("APCA-API-KEY-ID", KEY_ID)
            .header("APCA-API-SECRET-KEY", SECRET)
            .send()
    };
    let sell = |id: &str, qty: &str, extra: Value| {
        let mut body =
            json!({"symbol": "ABCD", "qty": qty, "side": "sell", "time_in_force": "gtc", "client_order_id": id});
        body.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        body
    };
    let d = |s: &str| s.parse::<Decimal>().unwrap();
    alpaca.set_price("ABCD", d("10"));
    let bought = post(json!({"symbol": "ABCD", "qty": "100", "side": "buy", "type": "market",
        "time_in_force": "day", "client_order_id": "to-ABCD-B1"}))
    .await
    .unwrap();
    assert_eq!(bought.status(), 200);
    assert_eq!(alpaca.positions()["ABCD"].0, 100);

    // A plain protective stop rests, holding its shares.
    let stop = post(sell("to-ABCD-S1", "10", json!({"type": "stop", "stop_price": "9.50"}))).await.unwrap();
    assert_eq!(stop.status(), 200);
    assert_eq!(alpaca.order("to-ABCD-S1")["status"], "new");
    let refused = post(sell("to-ABCD-X1", "95", json!({"type": "market"}))).await.unwrap();
    assert_eq!(refused.status(), 403);
    let body: Value = refused.json().await.unwrap();
    assert_eq!(body["code"], 40310000);
    assert_eq!(body["message"], "insufficient qty available for order (requested: 95, available: 90)");
    assert_eq!((&body["existing_qty"], &body["held_for_orders"]), (&json!("100"), &json!("10")));

    // An oco: the take-profit on top with our id, the stop leg held under it with the venue's.
    let oco = post(sell(
        "to-ABCD-O1",
        "90",
        json!({"type": "limit", "order_class": "oco",
        "take_profit": {"limit_price": "12.00"}, "stop_loss": {"stop_price": "9.00"}}),
    ))
    .await
    .unwrap();
    assert_eq!(oco.status(), 200);
    let oco: Value = oco.json().await.unwrap();
    assert_eq!(
        (&oco["order_class"], &oco["type"], &oco["limit_price"]),
        (&json!("oco"), &json!("limit"), &json!("12.00"))
    );
    let leg = &oco["legs"][0];
    assert_eq!((&leg["type"], &leg["status"], &leg["stop_price"]), (&json!("stop"), &json!("held"), &json!("9.00")));
    assert_ne!(leg["client_order_id"], "to-ABCD-O1");
    let nested: Value = get("/v2/orders?status=open&nested=true".into()).await.unwrap().json().await.unwrap();
    assert_eq!(nested.as_array().unwrap().len(), 2, "the stop, and the oco once: {nested}");
    let flat: Value = get("/v2/orders?status=open".into()).await.unwrap().json().await.unwrap();
    assert_eq!(flat.as_array().unwrap().len(), 3, "each order alone: {flat}");
    let by_id: Value =
        get(format!("/v2/orders/{}?nested=true", oco["id"].as_str().unwrap())).await.unwrap().json().await.unwrap();
    assert_eq!(by_id["legs"][0]["id"], leg["id"]);
    let refused: Value = post(sell("to-ABCD-X2", "1", json!({"type": "market"}))).await.unwrap().json().await.unwrap();
    assert_eq!(refused["message"], "insufficient qty available for order (requested: 1, available: 0)");
    assert_eq!(refused["held_for_orders"], "100", "the oco holds its shares once");

    // A trade through the plain stop fills it; the oco's stop is lower and stays held.
    alpaca.trade("ABCD", d("9.40"));
    assert_eq!(alpaca.order("to-ABCD-S1")["status"], "filled");
    assert_eq!(alpaca.order("to-ABCD-S1")["filled_avg_price"], "9.40");
    assert_eq!(alpaca.leg_of("to-ABCD-O1")["status"], "held");
    assert_eq!(alpaca.positions()["ABCD"].0, 90);

    // A cancel of the oco cancels both of its orders.
    let cancel = http
        .delete(format!("{}/v2/orders/{}", alpaca.base_url, oco["id"].as_str().unwrap()))
        .header("APCA-API-KEY-ID", KEY_ID)
        .header("APCA-API-SECRET-KEY", SECRET)
        .send()
        .await
        .unwrap();
    assert_eq!(cancel.status(), 204);
    assert_eq!(
        (alpaca.order("to-ABCD-O1")["status"].clone(), alpaca.leg_of("to-ABCD-O1")["status"].clone()),
        (json!("canceled"), json!("canceled"))
    );

    // A trade through the take-profit fills it and cancels the leg.
    let tp = |id: &str, qty: &str| {
        sell(
            id,
            qty,
            json!({"type": "limit", "order_class": "oco",
        "take_profit": {"limit_price": "12.00"}, "stop_loss": {"stop_price": "9.00", "limit_price": "8.90"}}),
        )
    };
    assert_eq!(post(tp("to-ABCD-O2", "40")).await.unwrap().status(), 200);
    alpaca.trade("ABCD", d("12.10"));
    assert_eq!(alpaca.order("to-ABCD-O2")["status"], "filled");
    assert_eq!(alpaca.leg_of("to-ABCD-O2")["status"], "canceled");
    assert_eq!(alpaca.positions()["ABCD"].0, 50);

    // A trade through the stop replaces the take-profit and fills the leg (a stop-limit: at or
    // above its limit).
    assert_eq!(post(tp("to-ABCD-O3", "50")).await.unwrap().status(), 200);
    alpaca.trade("ABCD", d("8.95"));
    assert_eq!(alpaca.order("to-ABCD-O3")["status"], "replaced");
    let leg = alpaca.leg_of("to-ABCD-O3");
    assert_eq!(
        (&leg["type"], &leg["status"], &leg["filled_avg_price"]),
        (&json!("stop_limit"), &json!("filled"), &json!("8.95"))
    );
    assert!(!alpaca.positions().contains_key("ABCD"), "sold out: {:?}", alpaca.positions());
}

/// A bracket bought through the service (CONTRACT §11): once the entry fills, the position is
/// protected at the venue by one `oco` (our client order id on the take-profit, the stop leg the
/// venue's); a trade through the stop sells it there, and the service reads the leg's fill as
/// its protective order's, flat, the books agreeing.
#[tokio::test]
async fn alpaca_a_brackets_stop_leg_at_the_venue_closes_the_position() {
    let (app, alpaca) = start().await;
    let (symbol, price) = symbols(&app, 1).await.remove(0);
    alpaca.set_price(&symbol, price);
    let stop = (price * Decimal::new(95, 2)).round_dp(2);
    let target = (price * Decimal::new(110, 2)).round_dp(2);
    let num = |d: Decimal| d.to_string().parse::<f64>().unwrap();
    let entry = placed(
        &app,
        json!({"symbol": symbol, "side": "BUY", "quantity": 20,
            "stop_loss": {"stop_price": num(stop)}, "take_profit": {"limit_price": num(target)}}),
    )
    .await;
    wait_for_order(&app, &entry, &["FILLED"]).await;
    let mut protective = None;
    for _ in 0..200 {
        protective = alpaca.orders().into_iter().find(|o| o["order_class"] == "oco" && o["type"] == "limit");
        if protective.is_some() {
            break;
        }
        step(&app).await;
    }
    let protective = protective.expect("an oco at the venue protects the position");
    let id = protective["client_order_id"].as_str().unwrap().to_string();
    assert_eq!(alpaca.posts(&entry), 1);
    assert_eq!((&protective["qty"], &protective["time_in_force"]), (&json!("20"), &json!("gtc")));
    let leg = alpaca.leg_of(&id);
    assert_eq!(
        (&leg["status"], leg["stop_price"].as_str().map(|s| s.parse::<Decimal>().unwrap())),
        (&json!("held"), Some(stop))
    );
    wait_for_order(&app, &id, &["ACCEPTED"]).await;

    alpaca.trade(&symbol, stop - Decimal::new(2, 2));
    let order = wait_for_order(&app, &id, &["FILLED"]).await;
    assert_eq!(order["filled_quantity"], 20, "{order}");
    wait_for_reconciled(&app).await;
    assert_books_agree(&app, &alpaca).await;
    assert!(!alpaca.positions().contains_key(&symbol));
}

/// Buys 20 of a symbol with a bracket (stop 5 % under, target 10 % over) and waits until its
/// `oco` works at the venue; returns the symbol, its stop and our protective order's id.
async fn bracketed(app: &TestApp, alpaca: &StandIn) -> (String, Decimal, String) {
    let (symbol, price) = symbols(app, 1).await.remove(0);
    alpaca.set_price(&symbol, price);
    let stop = (price * Decimal::new(95, 2)).round_dp(2);
    let target = (price * Decimal::new(110, 2)).round_dp(2);
    let num = |d: Decimal| d.to_string().parse::<f64>().unwrap();
    let entry = placed(
        app,
        json!({"symbol": symbol, "side": "BUY", "quantity": 20,
            "stop_loss": {"stop_price": num(stop)}, "take_profit": {"limit_price": num(target)}}),
    )
    .await;
    wait_for_order(app, &entry, &["FILLED"]).await;
    for _ in 0..200 {
        let rows = app.get("/api/positions").await;
        let row = rows.data().as_array().unwrap().iter().find(|r| r["symbol"] == symbol.as_str()).cloned();
        if let Some(row) = row.filter(|r| r["protection"] == "BROKER") {
            return (symbol, stop, row["protective_order_id"].as_str().unwrap().to_string());
        }
        step(app).await;
    }
    panic!("{symbol} never protected at the venue");
}

/// A close of a position whose `oco` holds its shares at the venue (Alpaca refuses a sell of
/// them, 40310000): the service cancels the `oco` first and sells once the cancel is confirmed —
/// never refused, the venue flat, the books agreeing.
#[tokio::test]
async fn alpaca_a_close_frees_the_shares_the_brackets_oco_holds_before_selling() {
    let (app, alpaca) = start().await;
    let (symbol, _, protective) = bracketed(&app, &alpaca).await;
    let close = app.post("/api/positions/close", ADMIN_TOKEN, json!({"symbol": symbol})).await;
    let close_id = close.assert_ok(200)["close_order_client_order_id"].as_str().unwrap().to_string();
    let sold = wait_for_order(&app, &close_id, &["FILLED", "REJECTED"]).await;
    assert_eq!(sold["status"], "FILLED", "the close was never refused for shares held: {sold}");
    wait_for_order(&app, &protective, &["CANCELED"]).await;
    assert_eq!(alpaca.order(&protective)["status"], "canceled");
    assert_eq!(alpaca.leg_of(&protective)["status"], "canceled");
    assert!(!alpaca.positions().contains_key(&symbol), "flat at the venue: {:?}", alpaca.positions());
    wait_for_reconciled(&app).await;
    assert_books_agree(&app, &alpaca).await;
}

/// The hard way (CONTRACT §11): a bracketed position, the service stopped, the price through the
/// stop at the venue while nobody watches, the service started again. The stop leg's fill is
/// taken from the venue's record once: our protective order `FILLED` with one execution, the
/// position closed, a `STOP_LOSS` trade, the books agreeing — and no second stop placed.
#[tokio::test]
async fn alpaca_a_stop_that_filled_while_the_service_was_down_is_recorded_once() {
    let (app, alpaca) = start().await;
    let (symbol, stop, protective) = bracketed(&app, &alpaca).await;
    let mut app = app;
    app.stop().await;
    alpaca.trade(&symbol, stop - Decimal::new(3, 2));
    assert!(!alpaca.positions().contains_key(&symbol), "the venue sold while the service was down");
    let app = restart(app).await;
    let order = wait_for_order(&app, &protective, &["FILLED"]).await;
    assert_eq!(order["executions"].as_array().unwrap().len(), 1, "one fill, once: {order}");
    assert_eq!(order["filled_quantity"], 20);
    wait_for_reconciled(&app).await;
    assert_books_agree(&app, &alpaca).await;
    let trades = app.get(&format!("/api/trades?symbol={symbol}")).await;
    let trade_id = trades.data()[0]["trade_id"].as_str().expect("a trade").to_string();
    let trade = app.get(&format!("/api/trades/{trade_id}")).await.data().clone();
    assert_eq!(trade["outcomes"]["exit_reason"], "STOP_LOSS", "{trade}");
    let ocos = alpaca.orders().into_iter().filter(|o| o["order_class"] == "oco" && o["type"] == "limit").count();
    assert_eq!(ocos, 1, "no second stop was placed");
}

/// Benchmark, not a test (`bench/protection_latency.sh`): from an entry's fill to its `oco`
/// resting at the Alpaca stand-in, as the stand-in's own book shows them — the entry `filled`
/// there, then our protective order there — watched from the test between two polls of the
/// book (the service runs on the same runtime), over `TRADEOPS_BENCH_TRIALS` bracket buys
/// (default 50), each closed before the next, paced inside Alpaca's request budget.
#[tokio::test]
#[ignore = "a benchmark: bench/protection_latency.sh"]
async fn bench_fill_to_stop_resting_on_the_alpaca_stand_in() {
    let trials: usize = std::env::var("TRADEOPS_BENCH_TRIALS").ok().and_then(|t| t.parse().ok()).unwrap_or(50);
    let (app, alpaca) = start().await;
    let (symbol, price) = symbols(&app, 1).await.remove(0);
    alpaca.set_price(&symbol, price);
    let limits = json!({"risk_controls": {"max_trades_per_day": 10000, "duplicate_order_window_seconds": 0}});
    app.put_settings(ADMIN_TOKEN, limits).await.assert_ok(200);
    let num = |d: Decimal| d.round_dp(2).to_string().parse::<f64>().unwrap();
    let (stop, target) = (num(price * Decimal::new(95, 2)), num(price * Decimal::new(110, 2)));
    let resting = |seen: usize| {
        alpaca
            .orders()
            .iter()
            .filter(|o| o["order_class"] == "oco" && o["type"] == "limit" && o["status"] != "rejected")
            .count()
            > seen
    };
    let mut waits = Vec::new();
    for trial in 0..trials {
        let body = json!({"symbol": symbol, "side": "BUY", "quantity": 10 + trial as u64 % 7,
            "stop_loss": {"stop_price": stop}, "take_profit": {"limit_price": target}});
        let entry = placed(&app, body).await;
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(30);
        let waited = |what: &str| {
            assert!(tokio::time::Instant::now() < deadline, "trial {trial}: {what}: {:?}", alpaca.orders());
        };
        while alpaca.order(&entry)["status"] != "filled" {
            waited("the entry never filled at the venue");
            tokio::task::yield_now().await;
        }
        let filled = tokio::time::Instant::now();
        while !resting(trial) {
            waited("no oco came to rest at the venue");
            tokio::task::yield_now().await;
        }
        waits.push(filled.elapsed());
        app.post("/api/positions/close", ADMIN_TOKEN, json!({"symbol": symbol})).await.assert_ok(200);
        // Flat at the venue, read from its book (the API's budget is for the orders).
        while alpaca.positions().contains_key(&symbol) {
            waited("the close never sold at the venue");
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        // A trial makes about seven Trading API requests: paced inside Alpaca's 200 a minute,
        // so that no trial waits for the request budget.
        tokio::time::sleep(std::time::Duration::from_millis(2500)).await;
    }
    crate::protection::report("Alpaca stand-in", waits);
}
