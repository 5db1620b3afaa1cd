//! Benchmarks of the Alpaca adapter, against stand-ins on 127.0.0.1 answering at
//! once (docs/PERFORMANCE.md, "Alpaca adapter"):
//!
//! - `orders`: the latency tradeops adds to an order's submit. The real `tradeops serve` binary
//!   (PAPER, simulated market data, `TRADEOPS_EXECUTION_BROKER=alpaca`) trades through a
//!   stand-in Alpaca Trading API (REST and the trade-updates WebSocket `/stream` on one port).
//!   Each round POSTs one market order to `POST /api/orders` (answered once the broker's reply
//!   is in) and, right after it, the same order straight to the stand-in's `POST /v2/orders`
//!   from the same process with the same HTTP client; both figures are client-side round trips.
//!   Added latency = `POST /api/orders` − the direct POST (p50 of each, p95 of each). The
//!   stand-in also stamps when the forwarded POST reached it and when it answered, which splits
//!   the tradeops round trip into "before the broker" and "after the broker".
//! - `fills`: a trade update on `/stream` to the Server-Sent Event. One resting limit order per
//!   run is filled one share at a time; the stand-in stamps t0 as it writes each
//!   `partial_fill`/`fill` frame to the WebSocket, a client of `GET /api/events` (kinds
//!   `execution.created`) stamps t1 as the event's bytes arrive; same process, same monotonic
//!   clock; matched by Alpaca's `execution_id`.
//! - `scan`: `AlpacaMarketData::scan` over a stand-in universe of 10,000 symbols (assets,
//!   snapshots, daily bars): requests by endpoint and wall time of a cold scan (first of the
//!   day: universe, daily history, snapshots) and a warm one (snapshots only), in process.
//!
//! Rerun: `cargo bench -p tradeops-server --bench alpaca [-- orders|fills|scan ...]`. Knobs
//! (environment): `BENCH_RUNS` (5), `BENCH_ORDERS` (30 a run), `BENCH_ORDER_GAP_MS` (2000: the
//! gap kept from the first runs, when the service spent ~90 Trading API requests a minute of
//! Alpaca's 200 on its own listings; now ~16, see docs/PERFORMANCE.md), `BENCH_FILLS` (40 a
//! run), `BENCH_FILL_GAP_MS` (700, plus 0-9; `BENCH_FILLS=200 BENCH_FILL_GAP_MS=10` is the
//! burst the first runs stalled on), `BENCH_SYMBOLS` (10,000),
//! `BENCH_VENUE_DELAY_MS` (0: the stand-in Trading API holds every REST answer back this long,
//! as Alpaca's round trip would), `TRADEOPS_BIN` (default: the `tradeops` binary cargo built with this bench, release
//! profile). The service needs the simulated market's regular session to take market orders:
//! run `orders`/`fills` between 9:30 and 16:00 New York on a trading day.
// A benchmark measures wall time; only logic must read time through the injected clock.
#![allow(clippy::disallowed_methods)]

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use axum::extract::State;
use axum::http::{Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use futures::{SinkExt, StreamExt};
use rust_decimal::Decimal;
use serde_json::{json, Value};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message;
use tradeops_brokers::alpaca::data::{DataClient, DataFeed};
use tradeops_brokers::alpaca::data_stream::ny_date;
use tradeops_brokers::alpaca::market::AlpacaMarketData;
use tradeops_brokers::alpaca::rest::AlpacaCredentials;
use tradeops_brokers::reference::ReferenceData;
use tradeops_core::settings::MomentumRadarSettings;
use tradeops_core::Clock;
use tradeops_server::clock::SystemClock;
use tradeops_sim::profile::DayClock;

const KEY_ID: &str = "PKBENCH00000";
const SECRET: &str = "bench-secret-3c1d";
const TOKEN: &str = "tro_bench_admin_token_0123456789abcdef";

fn env_num(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// The `q` quantile of sorted `v` (the value at index ⌊q·n⌋, as `bench/order_latency.py`).
fn quantile(v: &[f64], q: f64) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    s[((q * s.len() as f64) as usize).min(s.len() - 1)]
}

fn median(v: &[f64]) -> f64 {
    quantile(v, 0.5)
}

fn list(v: &[f64]) -> String {
    v.iter().map(|x| format!("{x:.3}")).collect::<Vec<_>>().join(" ")
}

// ---------------------------------------------------------------------------------------------
// The stand-in Trading API: REST and `/stream` on one port.
// ---------------------------------------------------------------------------------------------

/// One account's orders, positions and cash as Alpaca would keep them.
#[derive(Default)]
struct Book {
    orders: Vec<Value>,
    index: HashMap<String, usize>,
    positions: BTreeMap<String, (i64, Decimal)>,
    cash: Decimal,
    next_id: u64,
    next_execution: u64,
}

fn dec(v: &Value) -> Decimal {
    v.as_str().and_then(|s| s.parse().ok()).unwrap_or_default()
}

fn now_json() -> Value {
    json!(chrono::Utc::now())
}

fn is_open(order: &Value) -> bool {
    !matches!(order["status"].as_str(), Some("filled" | "canceled" | "expired" | "rejected" | "replaced"))
}

impl Book {
    fn update(&self, event: &str, i: usize, extra: Value) -> String {
        let mut data = json!({"event": event, "timestamp": now_json(), "order": self.orders[i].clone()});
        if let (Some(data), Some(extra)) = (data.as_object_mut(), extra.as_object()) {
            data.extend(extra.clone());
        }
        json!({"stream": "trade_updates", "data": data}).to_string()
    }

    /// Creates the order; a market order fills whole at `price`. The trade updates it makes.
    fn create(&mut self, sent: &Value, price: Option<Decimal>) -> (usize, Vec<(String, Option<String>)>) {
        self.next_id += 1;
        let now = now_json();
        let order = json!({
            "id": format!("7c2d0e4b-0000-4000-8000-{:012}", self.next_id),
            "client_order_id": sent["client_order_id"], "symbol": sent["symbol"],
            "created_at": now, "submitted_at": now, "updated_at": now,
            "filled_at": null, "canceled_at": null, "failed_at": null,
            "qty": sent["qty"], "filled_qty": "0", "filled_avg_price": null,
            "type": sent["type"], "side": sent["side"], "time_in_force": sent["time_in_force"],
            "limit_price": sent.get("limit_price").cloned().unwrap_or(Value::Null),
            "stop_price": null, "status": "new", "extended_hours": false, "legs": null,
        });
        self.orders.push(order);
        let i = self.orders.len() - 1;
        self.index.insert(sent["client_order_id"].as_str().unwrap_or_default().to_string(), i);
        let mut frames = vec![(self.update("new", i, json!({})), None)];
        if sent["type"] == "market" {
            if let Some(price) = price {
                let qty = dec(&self.orders[i]["qty"]).try_into().unwrap_or(0u64);
                frames.push(self.fill(i, qty, price));
            }
        }
        (i, frames)
    }

    /// Fills `qty` of order `i` at `price`; its trade update and execution id.
    fn fill(&mut self, i: usize, qty: u64, price: Decimal) -> (String, Option<String>) {
        let shares = Decimal::from(qty);
        let order = &self.orders[i];
        let (total, filled) = (dec(&order["qty"]), dec(&order["filled_qty"]));
        let average = order["filled_avg_price"].as_str().and_then(|p| p.parse::<Decimal>().ok()).unwrap_or_default();
        let now_filled = filled + shares;
        let new_average = ((average * filled + price * shares) / now_filled).round_dp(4);
        let symbol = order["symbol"].as_str().unwrap_or_default().to_string();
        let buy = order["side"] == "buy";
        let now = now_json();
        let order = &mut self.orders[i];
        order["filled_qty"] = json!(now_filled.to_string());
        order["filled_avg_price"] = json!(new_average.to_string());
        order["updated_at"] = now.clone();
        let done = now_filled >= total;
        if done {
            order["status"] = json!("filled");
            order["filled_at"] = now;
        } else {
            order["status"] = json!("partially_filled");
        }
        let position = self.positions.entry(symbol.clone()).or_insert((0, Decimal::ZERO));
        if buy {
            position.0 += qty as i64;
            position.1 += shares * price;
            self.cash -= shares * price;
        } else {
            let held = Decimal::from(position.0);
            let cost = if held.is_zero() { Decimal::ZERO } else { position.1 / held };
            position.0 -= qty as i64;
            position.1 -= cost * shares;
            self.cash += shares * price;
        }
        let position_qty = position.0;
        if position_qty == 0 {
            self.positions.remove(&symbol);
        }
        self.next_execution += 1;
        let execution_id = format!("bench-exec-{:07}", self.next_execution);
        let extra = json!({"execution_id": execution_id, "price": price.to_string(), "qty": qty.to_string(),
            "position_qty": position_qty.to_string()});
        (self.update(if done { "fill" } else { "partial_fill" }, i, extra), Some(execution_id))
    }

    fn account(&self, prices: &HashMap<String, Decimal>) -> Value {
        let held: Decimal = self
            .positions
            .iter()
            .map(|(s, (q, _))| prices.get(s).copied().unwrap_or_default() * Decimal::from(*q))
            .sum();
        let equity = self.cash + held;
        json!({"id": "acct-bench", "status": "ACTIVE", "currency": "USD", "cash": self.cash.to_string(),
            "equity": equity.to_string(), "last_equity": equity.to_string(),
            "buying_power": self.cash.to_string(), "trading_blocked": false, "account_blocked": false})
    }

    fn positions_json(&self, prices: &HashMap<String, Decimal>) -> Value {
        let rows: Vec<Value> = self
            .positions
            .iter()
            .map(|(symbol, (qty, cost))| {
                json!({"symbol": symbol, "qty": qty.to_string(),
                    "avg_entry_price": (*cost / Decimal::from(*qty)).round_dp(4).to_string(),
                    "side": if *qty > 0 { "long" } else { "short" },
                    "current_price": prices.get(symbol).copied().unwrap_or_default().to_string()})
            })
            .collect();
        json!(rows)
    }
}

/// The stand-in: the service's account (`book`, its updates on the stream) and a shadow
/// account for the orders the bench POSTs directly (the same work, its updates built and
/// dropped, so the service never hears of them).
struct Venue {
    book: Book,
    shadow: Book,
    prices: HashMap<String, Decimal>,
    /// Requests by `METHOD path`.
    calls: BTreeMap<String, usize>,
    /// `POST /v2/orders` by client order id: when it reached the handler and when it answered.
    posts: HashMap<String, (Instant, Instant)>,
    /// When each execution's frame was written to the WebSocket.
    sent: HashMap<String, Instant>,
    stream: Option<mpsc::UnboundedSender<(String, Option<String>)>>,
}

type Shared = Arc<Mutex<Venue>>;

fn error(status: u16, body: Value) -> Response {
    (StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR), axum::Json(body)).into_response()
}

/// The REST API; every answer is held back `BENCH_VENUE_DELAY_MS` (0: at once), as a round
/// trip to Alpaca would be.
async fn rest(State(venue): State<Shared>, method: Method, uri: Uri, body: String) -> Response {
    let response = answer(&venue, &method, &uri, &body);
    let delay = env_num("BENCH_VENUE_DELAY_MS", 0);
    if delay > 0 {
        tokio::time::sleep(Duration::from_millis(delay)).await;
    }
    response
}

fn answer(venue: &Shared, method: &Method, uri: &Uri, body: &str) -> Response {
    let entered = Instant::now();
    let path = uri.path().to_string();
    let query: HashMap<String, String> =
        form_urlencoded::parse(uri.query().unwrap_or("").as_bytes()).into_owned().collect();
    let mut guard = venue.lock().unwrap_or_else(|e| e.into_inner());
    let v = &mut *guard;
    let status = query.get("status").map(|s| format!("?status={s}")).unwrap_or_default();
    *v.calls.entry(format!("{method} {path}{status}")).or_default() += 1;
    match (method.as_str(), path.as_str()) {
        ("POST", "/v2/orders") => {
            let sent: Value = serde_json::from_str(body).unwrap_or(Value::Null);
            let id = sent["client_order_id"].as_str().unwrap_or_default().to_string();
            let direct = id.starts_with("direct-");
            let book = if direct { &mut v.shadow } else { &mut v.book };
            if book.index.contains_key(&id) {
                return error(422, json!({"code": 40010001, "message": "client_order_id must be unique"}));
            }
            let price = v.prices.get(sent["symbol"].as_str().unwrap_or_default()).copied();
            let (i, frames) = book.create(&sent, price);
            let reply = axum::Json(book.orders[i].clone()).into_response();
            if !direct {
                if let Some(tx) = &v.stream {
                    for frame in frames {
                        let _ = tx.send(frame);
                    }
                }
            }
            v.posts.insert(id, (entered, Instant::now()));
            reply
        }
        ("GET", "/v2/orders:by_client_order_id") => {
            match query.get("client_order_id").and_then(|id| v.book.index.get(id)) {
                Some(&i) => axum::Json(v.book.orders[i].clone()).into_response(),
                None => error(404, json!({"code": 40410000, "message": "order not found"})),
            }
        }
        ("GET", "/v2/orders") => {
            let after = query.get("after").and_then(|a| chrono::DateTime::parse_from_rfc3339(a).ok());
            let mut rows: Vec<Value> = v
                .book
                .orders
                .iter()
                .filter(|o| match query.get("status").map(String::as_str) {
                    Some("all") => true,
                    Some("closed") => !is_open(o),
                    _ => is_open(o),
                })
                .filter(|o| {
                    let submitted =
                        o["submitted_at"].as_str().and_then(|s| chrono::DateTime::parse_from_rfc3339(s).ok());
                    after.is_none_or(|a| submitted.is_some_and(|s| s > a))
                })
                .cloned()
                .collect();
            if query.get("direction").map(String::as_str) != Some("asc") {
                rows.reverse();
            }
            rows.truncate(query.get("limit").and_then(|l| l.parse().ok()).unwrap_or(50));
            axum::Json(rows).into_response()
        }
        ("DELETE", p) if p.starts_with("/v2/orders/") => {
            let id = &p["/v2/orders/".len()..];
            match v.book.orders.iter().position(|o| o["id"] == id) {
                Some(i) if is_open(&v.book.orders[i]) => {
                    let now = now_json();
                    v.book.orders[i]["status"] = json!("canceled");
                    v.book.orders[i]["canceled_at"] = now;
                    let frame = v.book.update("canceled", i, json!({}));
                    if let Some(tx) = &v.stream {
                        let _ = tx.send((frame, None));
                    }
                    StatusCode::NO_CONTENT.into_response()
                }
                Some(_) => error(422, json!({"code": 42210000, "message": "order is not open"})),
                None => error(404, json!({"code": 40410000, "message": "order not found"})),
            }
        }
        ("GET", "/v2/account") => axum::Json(v.book.account(&v.prices)).into_response(),
        ("GET", "/v2/positions") => axum::Json(v.book.positions_json(&v.prices)).into_response(),
        _ => error(404, json!({"code": 40410000, "message": "route not found"})),
    }
}

/// The HTTP connections of the stand-in's address, handed to axum (`/stream` is served apart).
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

async fn route_connections(listener: TcpListener, http: mpsc::UnboundedSender<(TcpStream, SocketAddr)>, venue: Shared) {
    loop {
        let Ok((tcp, addr)) = listener.accept().await else { return };
        let _ = tcp.set_nodelay(true);
        let (http, venue) = (http.clone(), venue.clone());
        tokio::spawn(async move {
            let mut start = [0u8; 11];
            let mut seen = 0;
            for _ in 0..500 {
                match tcp.peek(&mut start).await {
                    Ok(0) | Err(_) => return,
                    Ok(n) => seen = n,
                }
                if seen == start.len() {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(1)).await;
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

/// The trade-updates stream: authenticate, listen, then the account's updates as binary frames
/// (Alpaca's paper stream sends binary), each execution's write time noted.
async fn serve_stream(tcp: TcpStream, venue: Shared) {
    let Ok(mut socket) = tokio_tungstenite::accept_async(tcp).await else { return };
    let auth = next_json(&mut socket).await;
    let status = if auth["data"]["key_id"] == KEY_ID && auth["data"]["secret_key"] == SECRET {
        "authorized"
    } else {
        "unauthorized"
    };
    let reply = json!({"stream": "authorization", "data": {"status": status, "action": "authenticate"}});
    if socket.send(Message::Binary(reply.to_string().into())).await.is_err() || status != "authorized" {
        return;
    }
    let _listen = next_json(&mut socket).await;
    let (tx, mut rx) = mpsc::unbounded_channel();
    venue.lock().unwrap_or_else(|e| e.into_inner()).stream = Some(tx);
    let listening = json!({"stream": "listening", "data": {"streams": ["trade_updates"]}});
    if socket.send(Message::Binary(listening.to_string().into())).await.is_err() {
        return;
    }
    loop {
        tokio::select! {
            frame = rx.recv() => match frame {
                Some((text, execution)) => {
                    let at = Instant::now();
                    if socket.send(Message::Binary(text.into())).await.is_err() {
                        break;
                    }
                    if let Some(execution) = execution {
                        venue.lock().unwrap_or_else(|e| e.into_inner()).sent.insert(execution, at);
                    }
                }
                None => break,
            },
            incoming = socket.next() => match incoming {
                Some(Ok(_)) => {}
                _ => break,
            },
        }
    }
}

async fn start_venue(cash: Decimal) -> anyhow::Result<(String, Shared)> {
    let venue: Shared = Arc::new(Mutex::new(Venue {
        book: Book { cash, ..Book::default() },
        shadow: Book { cash, ..Book::default() },
        prices: HashMap::new(),
        calls: BTreeMap::new(),
        posts: HashMap::new(),
        sent: HashMap::new(),
        stream: None,
    }));
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(route_connections(listener, tx, venue.clone()));
    let app = axum::Router::new().fallback(rest).with_state(venue.clone());
    tokio::spawn(async move { axum::serve(HttpConnections { rx, addr }, app).await });
    Ok((format!("http://{addr}"), venue))
}

// ---------------------------------------------------------------------------------------------
// The service under test.
// ---------------------------------------------------------------------------------------------

/// `tradeops serve` in a temporary directory (SQLite under it), killed on drop.
struct Service {
    child: Child,
    base: String,
    http: reqwest::Client,
    dir: tempfile::TempDir,
}

impl Drop for Service {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

impl Service {
    async fn start(trading_url: &str) -> anyhow::Result<Service> {
        let bin =
            std::env::var("TRADEOPS_BIN").map(PathBuf::from).unwrap_or(PathBuf::from(env!("CARGO_BIN_EXE_tradeops")));
        // The service runs in a directory of its own: a relative path is the caller's.
        let bin = std::fs::canonicalize(&bin).with_context(|| format!("no service binary at {}", bin.display()))?;
        let dir = tempfile::tempdir()?;
        let port = free_port()?;
        let mut command = Command::new(&bin);
        // The service refuses TRADEOPS_* variables it does not know: none of the caller's.
        for (name, _) in std::env::vars().filter(|(k, _)| k.starts_with("TRADEOPS_") || k.starts_with("APCA_")) {
            command.env_remove(name);
        }
        let log = std::fs::File::create(dir.path().join("service.log"))?;
        let child = command
            .arg("serve")
            .current_dir(dir.path())
            .env("TRADEOPS_BIND", format!("127.0.0.1:{port}"))
            .env("TRADEOPS_MODE", "PAPER")
            .env("TRADEOPS_ADMIN_TOKEN", TOKEN)
            .env("TRADEOPS_RATE_LIMIT_PER_SECOND", "10000000")
            .env("TRADEOPS_RATE_LIMIT_BURST", "10000000")
            .env("TRADEOPS_EXECUTION_BROKER", "alpaca")
            .env("TRADEOPS_MARKET_DATA", "simulated")
            .env("TRADEOPS_ALPACA_KEY_ID", KEY_ID)
            .env("TRADEOPS_ALPACA_SECRET_KEY", SECRET)
            .env("TRADEOPS_ALPACA_TRADING_URL", trading_url)
            .stdout(log.try_clone()?)
            .stderr(log)
            .stdin(Stdio::null())
            .spawn()
            .with_context(|| format!("starting {}", bin.display()))?;
        let http = reqwest::Client::builder().timeout(Duration::from_secs(10)).tcp_nodelay(true).build()?;
        let service = Service { child, base: format!("http://127.0.0.1:{port}"), http, dir };
        for _ in 0..300 {
            if let Ok(components) = service.get("/api/health/components").await {
                let execution = components["data"].as_array().and_then(|rows| {
                    rows.iter().find(|c| c["name"] == "execution_broker" && c["detail"]["stream"]["connected"] == true)
                });
                if execution.is_some() {
                    return Ok(service);
                }
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let log = std::fs::read_to_string(service.dir.path().join("service.log")).unwrap_or_default();
        bail!("the service did not connect to the stand-in within 30 s:\n{log}")
    }

    async fn get(&self, path: &str) -> anyhow::Result<Value> {
        let reply = self.http.get(format!("{}{path}", self.base)).bearer_auth(TOKEN).send().await?;
        Ok(reply.json().await?)
    }

    async fn send(&self, method: reqwest::Method, path: &str, body: Value) -> anyhow::Result<(u16, Value)> {
        let reply =
            self.http.request(method, format!("{}{path}", self.base)).bearer_auth(TOKEN).json(&body).send().await?;
        let status = reply.status().as_u16();
        Ok((status, reply.json().await?))
    }

    /// Lifts the daily trade count and the duplicate window (one symbol traded many times) and
    /// returns a symbol of the simulated market priced 2–50 and its price.
    async fn prepare(&self) -> anyhow::Result<(String, Decimal)> {
        let (status, reply) = self
            .send(
                reqwest::Method::PUT,
                "/api/settings",
                json!({"risk_controls": {"max_trades_per_day": 100000, "duplicate_order_window_seconds": 0}}),
            )
            .await?;
        if status != 200 {
            bail!("settings refused: {reply}");
        }
        let mut opened = false;
        for _ in 0..150 {
            let rows = self.get("/api/radar/momentum?top_n=50").await?;
            let found = rows["data"].as_array().into_iter().flatten().find_map(|r| {
                let price = r["price"].as_f64()?;
                (2.0..=50.0).contains(&price).then(|| (r["symbol"].as_str().unwrap_or_default().to_string(), price))
            });
            if let Some((symbol, price)) = found {
                return Ok((symbol, Decimal::try_from(price)?.round_dp(2)));
            }
            if !opened {
                let open = json!({"momentum_radar": {"min_percentage_gain": -100, "min_relative_volume": 0,
                    "max_float": 100000000000u64, "min_volume": 0, "min_price": 2, "max_price": 50}});
                self.send(reqwest::Method::PUT, "/api/settings", open).await?;
                opened = true;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        bail!("no symbol priced 2-50 on the radar within 75 s")
    }
}

// ---------------------------------------------------------------------------------------------
// 1. Order submit through tradeops against straight to the stand-in.
// ---------------------------------------------------------------------------------------------

struct OrderRun {
    api: Vec<f64>,
    direct: Vec<f64>,
    before_broker: Vec<f64>,
    after_broker: Vec<f64>,
    /// The POST reaching the stand-in → the order's first `order.updated` past NEW on the
    /// event stream, and which status that was.
    acked: Vec<f64>,
    acked_as: BTreeMap<String, usize>,
    statuses: BTreeMap<String, usize>,
}

/// The service, its stand-in and the symbol traded.
struct Desk<'a> {
    service: &'a Service,
    venue: &'a Shared,
    venue_url: &'a str,
    symbol: &'a str,
    price: Decimal,
    arrivals: Arrivals,
}

async fn order_run(
    desk: &Desk<'_>,
    direct: &reqwest::Client,
    run: usize,
    orders: usize,
    gap: Duration,
) -> anyhow::Result<OrderRun> {
    let Desk { service, venue, venue_url, symbol, .. } = *desk;
    let mut out = OrderRun {
        api: Vec::new(),
        direct: Vec::new(),
        before_broker: Vec::new(),
        after_broker: Vec::new(),
        acked: Vec::new(),
        acked_as: BTreeMap::new(),
        statuses: BTreeMap::new(),
    };
    let mut reached = Vec::new();
    for i in 0..orders {
        let side = if i % 2 == 1 { "SELL" } else { "BUY" };
        let body = json!({"symbol": symbol, "side": side, "quantity": 10});
        let sent = Instant::now();
        let (status, reply) = service.send(reqwest::Method::POST, "/api/orders", body).await?;
        let answered = Instant::now();
        if status != 201 {
            bail!("order {i} refused ({status}): {reply}");
        }
        let id = reply["data"]["client_order_id"].as_str().unwrap_or_default().to_string();
        *out.statuses.entry(reply["data"]["status"].as_str().unwrap_or("?").to_string()).or_default() += 1;
        out.api.push(ms(answered - sent));
        let stamps = venue.lock().unwrap_or_else(|e| e.into_inner()).posts.get(&id).copied();
        if let Some((entered, left)) = stamps {
            out.before_broker.push(ms(entered - sent));
            out.after_broker.push(ms(answered - left));
            reached.push((id.clone(), entered));
        }

        let order = json!({"symbol": symbol, "qty": "10", "side": side.to_ascii_lowercase(), "type": "market",
            "time_in_force": "day", "client_order_id": format!("direct-{run}-{i}")});
        let sent = Instant::now();
        let reply = direct.post(format!("{venue_url}/v2/orders")).json(&order).send().await?;
        let status = reply.status();
        let _order: Value = reply.json().await?;
        let answered = Instant::now();
        if !status.is_success() {
            bail!("the stand-in refused the direct order: {status}");
        }
        out.direct.push(ms(answered - sent));
        tokio::time::sleep(gap).await;
    }
    let arrived = desk.arrivals.lock().unwrap_or_else(|e| e.into_inner());
    for (id, entered) in reached {
        let first = ["ACCEPTED", "PARTIALLY_FILLED", "FILLED"]
            .iter()
            .filter_map(|status| Some((*status, *arrived.get(&format!("order:{id}:{status}"))?)))
            .min_by_key(|(_, at)| *at);
        if let Some((status, at)) = first {
            out.acked.push(ms(at.saturating_duration_since(entered)));
            *out.acked_as.entry(status.to_string()).or_default() += 1;
        }
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// 2. Trade update on /stream → execution.created on GET /api/events.
// ---------------------------------------------------------------------------------------------

/// When each event first arrived: `exec:{execution_id}` (`execution.created`) and
/// `order:{client_order_id}:{status}` (`order.updated`).
type Arrivals = Arc<Mutex<HashMap<String, Instant>>>;

/// Reads `GET /api/events?kinds=execution.created,order.updated`, noting the instant each
/// event's bytes arrived.
async fn follow_events(service: &Service, arrivals: Arrivals) -> anyhow::Result<()> {
    let client = reqwest::Client::builder().tcp_nodelay(true).build()?;
    let mut reply = client
        .get(format!("{}/api/events?kinds=execution.created,order.updated", service.base))
        .bearer_auth(TOKEN)
        .send()
        .await?
        .error_for_status()?;
    tokio::spawn(async move {
        let mut buffer = String::new();
        while let Ok(Some(chunk)) = reply.chunk().await {
            let at = Instant::now();
            buffer.push_str(&String::from_utf8_lossy(&chunk));
            while let Some(end) = buffer.find("\n\n") {
                let event: String = buffer.drain(..end + 2).collect();
                for line in event.lines() {
                    if let Some(data) = line.strip_prefix("data:") {
                        let data: Value = serde_json::from_str(data.trim()).unwrap_or(Value::Null);
                        let key = match (data["kind"].as_str(), &data["data"]) {
                            (Some("execution.created"), d) => d["execution_id"].as_str().map(|e| format!("exec:{e}")),
                            (Some("order.updated"), d) => match (d["client_order_id"].as_str(), d["status"].as_str()) {
                                (Some(id), Some(status)) => Some(format!("order:{id}:{status}")),
                                _ => None,
                            },
                            _ => None,
                        };
                        if let Some(key) = key {
                            arrivals.lock().unwrap_or_else(|e| e.into_inner()).entry(key).or_insert(at);
                        }
                    }
                }
            }
        }
    });
    Ok(())
}

async fn fill_run(desk: &Desk<'_>, run: usize, fills: usize, gap: Duration) -> anyhow::Result<Vec<f64>> {
    let Desk { service, venue, symbol, price, ref arrivals, .. } = *desk;
    let side = if run % 2 == 1 { "SELL" } else { "BUY" };
    let limit: f64 = price.to_string().parse()?;
    let body = json!({"symbol": symbol, "side": side, "quantity": fills, "order_type": "LIMIT", "limit_price": limit});
    let (status, reply) = service.send(reqwest::Method::POST, "/api/orders", body).await?;
    if status != 201 {
        bail!("the resting order was refused ({status}): {reply}");
    }
    let id = reply["data"]["client_order_id"].as_str().unwrap_or_default().to_string();
    let mut executions = Vec::with_capacity(fills);
    for k in 0..fills {
        {
            let mut v = venue.lock().unwrap_or_else(|e| e.into_inner());
            let i = *v.book.index.get(&id).context("the stand-in has no such order")?;
            let frame = v.book.fill(i, 1, price);
            executions.push(frame.1.clone().unwrap_or_default());
            if let Some(tx) = &v.stream {
                let _ = tx.send(frame);
            }
        }
        // Spread over the service's timers: the gap plus 0-9 ms, varying fill to fill.
        tokio::time::sleep(gap + Duration::from_millis((k as u64 * 7 + run as u64 * 3) % 10)).await;
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    let latencies = loop {
        let latencies: Vec<f64> = {
            let (v, arrived) =
                (venue.lock().unwrap_or_else(|e| e.into_inner()), arrivals.lock().unwrap_or_else(|e| e.into_inner()));
            executions
                .iter()
                .filter_map(|e| Some(ms(arrived.get(&format!("exec:{e}"))?.checked_duration_since(*v.sent.get(e)?)?)))
                .collect()
        };
        if latencies.len() == fills || Instant::now() > deadline {
            break latencies;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    if latencies.len() < fills {
        eprintln!("  run {run}: {} of {fills} fills reached the event stream within 10 s", latencies.len());
    }
    Ok(latencies)
}

// ---------------------------------------------------------------------------------------------
// 3. Radar scan of a 10,000-symbol universe from snapshots.
// ---------------------------------------------------------------------------------------------

struct DataVenue {
    assets: String,
    symbols: HashMap<String, usize>,
    calls: BTreeMap<String, usize>,
    /// Time spent in the stand-in's handlers (building its replies).
    busy: Duration,
}

type SharedData = Arc<Mutex<DataVenue>>;

fn symbol_name(i: usize) -> String {
    let mut n = i;
    let mut name = String::new();
    for _ in 0..4 {
        name.insert(0, (b'A' + (n % 26) as u8) as char);
        n /= 26;
    }
    name
}

fn weekdays(start: chrono::NaiveDate, end: chrono::NaiveDate) -> Vec<chrono::NaiveDate> {
    use chrono::Datelike;
    start
        .iter_days()
        .take_while(|d| *d < end)
        .filter(|d| !matches!(d.weekday(), chrono::Weekday::Sat | chrono::Weekday::Sun))
        .collect()
}

fn bar_json(t: chrono::DateTime<chrono::Utc>, close: f64, volume: u64) -> Value {
    json!({"t": t, "o": close, "h": close * 1.01, "l": close * 0.99, "c": close, "v": volume})
}

fn price_of(i: usize) -> f64 {
    2.0 + (i * 37 % 4800) as f64 / 100.0
}

async fn data_api(State(venue): State<SharedData>, uri: Uri) -> Response {
    let entered = Instant::now();
    let path = uri.path().to_string();
    let query: HashMap<String, String> =
        form_urlencoded::parse(uri.query().unwrap_or("").as_bytes()).into_owned().collect();
    let symbols_of = |v: &DataVenue| -> Vec<(String, usize)> {
        query
            .get("symbols")
            .map(|s| s.split(',').filter_map(|name| Some((name.to_string(), *v.symbols.get(name)?))).collect())
            .unwrap_or_default()
    };
    let mut v = venue.lock().unwrap_or_else(|e| e.into_inner());
    *v.calls.entry(path.clone()).or_default() += 1;
    let response = match path.as_str() {
        "/v2/assets" => ([("content-type", "application/json")], v.assets.clone()).into_response(),
        "/v2/stocks/snapshots" => {
            let now = chrono::Utc::now();
            let today = ny_date(now);
            let previous = weekdays(today - chrono::Duration::days(7), today).last().copied().unwrap_or(today);
            let mut page = serde_json::Map::new();
            for (name, i) in symbols_of(&v) {
                let close = price_of(i);
                let last = close * (1.0 + (i % 40) as f64 / 100.0);
                let volume = 20_000 + (i as u64 * 7919) % 2_000_000;
                page.insert(
                    name,
                    json!({
                        "latestTrade": {"t": now, "p": last, "s": 100},
                        "latestQuote": {"t": now, "bp": last - 0.01, "bs": 3, "ap": last + 0.01, "as": 4},
                        "minuteBar": bar_json(now - chrono::Duration::minutes(1), last, volume / 300),
                        "dailyBar": bar_json(DayClock::for_date(today).start, last, volume),
                        "prevDailyBar": bar_json(DayClock::for_date(previous).start, close, volume / 2),
                    }),
                );
            }
            axum::Json(Value::Object(page)).into_response()
        }
        "/v2/stocks/bars" => {
            let parse =
                |k: &str| query.get(k).and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok()).map(|t| t.to_utc());
            let (Some(start), Some(end)) = (parse("start"), parse("end")) else {
                return error(422, json!({"message": "start and end are required"}));
            };
            let limit: usize = query.get("limit").and_then(|l| l.parse().ok()).unwrap_or(1000);
            let offset: usize = query.get("page_token").and_then(|t| t.parse().ok()).unwrap_or(0);
            let days: Vec<_> = weekdays(ny_date(start), ny_date(end) + chrono::Duration::days(1))
                .into_iter()
                .map(|d| DayClock::for_date(d).start)
                .filter(|t| *t >= start && *t < end)
                .collect();
            let mut bars: BTreeMap<String, Vec<Value>> = BTreeMap::new();
            let all = symbols_of(&v);
            let total = all.len() * days.len();
            for n in offset..(offset + limit).min(total) {
                let (name, i) = &all[n / days.len()];
                let volume = 20_000 + (*i as u64 * 7919 + n as u64 * 13) % 2_000_000;
                bars.entry(name.clone()).or_default().push(bar_json(days[n % days.len()], price_of(*i), volume));
            }
            let next = (offset + limit < total).then(|| (offset + limit).to_string());
            axum::Json(json!({"bars": bars, "next_page_token": next})).into_response()
        }
        _ => error(404, json!({"message": "not found"})),
    };
    v.busy += entered.elapsed();
    response
}

async fn start_data(symbols: usize) -> anyhow::Result<(String, SharedData)> {
    let names: Vec<String> = (0..symbols).map(symbol_name).collect();
    let assets: Vec<Value> = names
        .iter()
        .map(|s| {
            json!({"symbol": s, "name": format!("{s} Inc."), "exchange": "NASDAQ", "status": "active",
            "tradable": true, "class": "us_equity"})
        })
        .collect();
    let venue: SharedData = Arc::new(Mutex::new(DataVenue {
        assets: serde_json::to_string(&assets)?,
        symbols: names.into_iter().enumerate().map(|(i, s)| (s, i)).collect(),
        calls: BTreeMap::new(),
        busy: Duration::ZERO,
    }));
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}", listener.local_addr()?);
    let app = axum::Router::new().fallback(data_api).with_state(venue.clone());
    tokio::spawn(async move { axum::serve(listener, app).await });
    Ok((url, venue))
}

struct ScanFigures {
    wall: f64,
    requests: BTreeMap<String, usize>,
    stand_in: f64,
    radar_cpu: f64,
    scanned: usize,
    rows: usize,
}

async fn measured_scan(alpaca: &AlpacaMarketData, venue: &SharedData) -> anyhow::Result<ScanFigures> {
    {
        let mut v = venue.lock().unwrap_or_else(|e| e.into_inner());
        v.calls.clear();
        v.busy = Duration::ZERO;
    }
    let settings = MomentumRadarSettings::default();
    let started = Instant::now();
    let scan = alpaca.scan(SystemClock.now(), &settings).await?;
    let wall = ms(started.elapsed());
    let v = venue.lock().unwrap_or_else(|e| e.into_inner());
    Ok(ScanFigures {
        wall,
        requests: v.calls.clone(),
        stand_in: ms(v.busy),
        radar_cpu: scan.scan_micros as f64 / 1000.0,
        scanned: scan.scanned,
        rows: scan.rows.len(),
    })
}

async fn scan_bench(runs: usize, symbols: usize) -> anyhow::Result<()> {
    let (url, venue) = start_data(symbols).await?;
    let credentials = AlpacaCredentials { key_id: KEY_ID.into(), secret_key: SECRET.into() };
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let (mut cold, mut warm) = (Vec::new(), Vec::new());
    for run in 0..runs {
        // A fresh adapter (and a fresh request budget) each run: its first scan is the day's.
        let client = DataClient::new(&url, &url, DataFeed::Iex, &credentials, Duration::from_secs(30), clock.clone())?;
        let alpaca = AlpacaMarketData::new(Arc::new(client), None, Arc::new(ReferenceData::default()), clock.clone());
        let c = measured_scan(&alpaca, &venue).await?;
        let w = measured_scan(&alpaca, &venue).await?;
        for (what, f) in [("cold", &c), ("warm", &w)] {
            eprintln!(
                "  run {}: {what} scan {:.1} ms ({} symbols scanned, {} rows; stand-in {:.1} ms, radar {:.2} ms); requests {:?}",
                run + 1,
                f.wall,
                f.scanned,
                f.rows,
                f.stand_in,
                f.radar_cpu,
                f.requests
            );
        }
        cold.push(c);
        warm.push(w);
    }
    println!("\n== 3. Radar refresh of {symbols} symbols from snapshots (AlpacaMarketData::scan, {runs} runs) ==");
    for (what, figures) in [("cold (universe + daily history + snapshots)", &cold), ("warm (snapshots only)", &warm)] {
        let wall: Vec<f64> = figures.iter().map(|f| f.wall).collect();
        let stand_in: Vec<f64> = figures.iter().map(|f| f.stand_in).collect();
        let own: Vec<f64> = figures.iter().map(|f| f.wall - f.stand_in).collect();
        let radar: Vec<f64> = figures.iter().map(|f| f.radar_cpu).collect();
        let requests = &figures[0].requests;
        let total: usize = requests.values().sum();
        println!("{what}: {total} requests {requests:?}");
        println!(
            "  wall median {:.1} ms [{}]; of it the stand-in's handlers {:.1} ms, the rest (client, JSON, radar) {:.1} ms; radar::scan {:.2} ms",
            median(&wall),
            list(&wall),
            median(&stand_in),
            median(&own),
            median(&radar)
        );
        println!(
            "  at Alpaca's 200 requests/min: {total} requests = {:.0}% of a minute's budget; \
             at most {} such scans a minute",
            total as f64 / 2.0,
            200 / total.max(1)
        );
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let chosen: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with("--")).collect();
    let wants = |what: &str| chosen.is_empty() || chosen.iter().any(|c| c == what);
    let runs = env_num("BENCH_RUNS", 5) as usize;

    // Each section has a service of its own: a fresh Trading API budget (see `fills`).
    for section in ["orders", "fills"].into_iter().filter(|s| wants(s)) {
        let (venue_url, venue) = start_venue(Decimal::from(100_000)).await?;
        let service = Service::start(&venue_url).await?;
        let (symbol, price) = service.prepare().await?;
        venue.lock().unwrap_or_else(|e| e.into_inner()).prices.insert(symbol.clone(), price);
        eprintln!("service up at {}; trading {symbol} at {price} through the stand-in {venue_url}", service.base);

        let arrivals: Arrivals = Arc::default();
        follow_events(&service, arrivals.clone()).await?;
        let desk = Desk { service: &service, venue: &venue, venue_url: &venue_url, symbol: &symbol, price, arrivals };
        // What the service asks of the Trading API on its own, idle, for 15 s.
        let before = venue.lock().unwrap_or_else(|e| e.into_inner()).calls.clone();
        tokio::time::sleep(Duration::from_secs(15)).await;
        let after = venue.lock().unwrap_or_else(|e| e.into_inner()).calls.clone();
        let idle: BTreeMap<&String, usize> =
            after.iter().map(|(k, n)| (k, n - before.get(k).copied().unwrap_or(0))).filter(|(_, n)| *n > 0).collect();
        let idle_total: usize = idle.values().sum();
        println!(
            "\nidle Trading API requests of the service over 15 s: {idle_total} {idle:?} (≈ {} a minute)",
            idle_total * 4
        );

        if section == "orders" {
            let orders = env_num("BENCH_ORDERS", 30) as usize;
            let gap = Duration::from_millis(env_num("BENCH_ORDER_GAP_MS", 2000));
            let direct = reqwest::Client::builder()
                .timeout(Duration::from_secs(10))
                .tcp_nodelay(true)
                .default_headers({
                    let mut h = reqwest::header::HeaderMap::new();
                    h.insert("APCA-API-KEY-ID", KEY_ID.parse()?);
                    h.insert("APCA-API-SECRET-KEY", SECRET.parse()?);
                    h
                })
                .build()?;
            let mut results = Vec::new();
            for run in 0..runs {
                let before = venue.lock().unwrap_or_else(|e| e.into_inner()).calls.clone();
                let started = Instant::now();
                let r = order_run(&desk, &direct, run, orders, gap).await?;
                let after = venue.lock().unwrap_or_else(|e| e.into_inner()).calls.clone();
                let made: BTreeMap<&String, usize> = after
                    .iter()
                    .map(|(k, n)| (k, n - before.get(k).copied().unwrap_or(0)))
                    .filter(|(_, n)| *n > 0)
                    .collect();
                let total = made.values().sum::<usize>() - orders; // less the bench's direct POSTs
                let per_minute = total as f64 * 60.0 / started.elapsed().as_secs_f64();
                eprintln!(
                    "  run {}: the service's Trading API requests {total} ({per_minute:.0} a minute) {made:?}",
                    run + 1
                );
                eprintln!(
                    "  run {}: POST /api/orders p50 {:.3} p95 {:.3} ms; direct p50 {:.3} p95 {:.3} ms; replies {:?}; \
                     stand-in → acknowledged on the event stream p50 {:.3} p95 {:.3} ms ({} orders, as {:?})",
                    run + 1,
                    median(&r.api),
                    quantile(&r.api, 0.95),
                    median(&r.direct),
                    quantile(&r.direct, 0.95),
                    r.statuses,
                    median(&r.acked),
                    quantile(&r.acked, 0.95),
                    r.acked.len(),
                    r.acked_as
                );
                results.push(r);
            }
            let per = |f: &dyn Fn(&OrderRun) -> f64| -> Vec<f64> { results.iter().map(f).collect() };
            let api50 = per(&|r| median(&r.api));
            let api95 = per(&|r| quantile(&r.api, 0.95));
            let direct50 = per(&|r| median(&r.direct));
            let direct95 = per(&|r| quantile(&r.direct, 0.95));
            let added50 = per(&|r| median(&r.api) - median(&r.direct));
            let added95 = per(&|r| quantile(&r.api, 0.95) - quantile(&r.direct, 0.95));
            let before50 = per(&|r| median(&r.before_broker));
            let after50 = per(&|r| median(&r.after_broker));
            let max = per(&|r| quantile(&r.api, 1.0));
            let acked50 = per(&|r| median(&r.acked));
            let acked95 = per(&|r| quantile(&r.acked, 0.95));
            println!("\n== 1. Order submit: {orders} market orders a run, {runs} runs, medians of the runs ==");
            println!("POST /api/orders (tradeops → stand-in):  p50 {:.3} ms [{}]", median(&api50), list(&api50));
            println!("                                         p95 {:.3} ms [{}]", median(&api95), list(&api95));
            println!("                                         max {:.3} ms [{}]", median(&max), list(&max));
            println!("POST /v2/orders straight to the stand-in: p50 {:.3} ms [{}]", median(&direct50), list(&direct50));
            println!("                                         p95 {:.3} ms [{}]", median(&direct95), list(&direct95));
            println!("added by tradeops: p50 {:.3} ms [{}] (goal < 1 ms)", median(&added50), list(&added50));
            println!("                   p95 {:.3} ms [{}]", median(&added95), list(&added95));
            println!(
                "split of the tradeops round trip, p50: before the stand-in {:.3} ms [{}], after it answered {:.3} ms [{}]",
                median(&before50),
                list(&before50),
                median(&after50),
                list(&after50)
            );
            println!(
                "POST reached the stand-in → first order.updated past NEW on GET /api/events: p50 {:.3} ms [{}], p95 {:.3} ms [{}]",
                median(&acked50),
                list(&acked50),
                median(&acked95),
                list(&acked95)
            );
        }

        if section == "fills" {
            let fills = env_num("BENCH_FILLS", 40) as usize;
            let gap = Duration::from_millis(env_num("BENCH_FILL_GAP_MS", 700));
            let mut p50 = Vec::new();
            let mut p95 = Vec::new();
            let mut max = Vec::new();
            let mut count = 0;
            for run in 0..runs {
                let before = venue.lock().unwrap_or_else(|e| e.into_inner()).calls.clone();
                let started = Instant::now();
                let l = fill_run(&desk, run, fills, gap).await?;
                let after = venue.lock().unwrap_or_else(|e| e.into_inner()).calls.clone();
                let made: BTreeMap<&String, usize> = after
                    .iter()
                    .map(|(k, n)| (k, n - before.get(k).copied().unwrap_or(0)))
                    .filter(|(_, n)| *n > 0)
                    .collect();
                let total = made.values().sum::<usize>();
                let per_minute = total as f64 * 60.0 / started.elapsed().as_secs_f64();
                eprintln!(
                    "  run {}: the service's Trading API requests {total} ({per_minute:.0} a minute) {made:?}",
                    run + 1
                );
                if l.is_empty() {
                    bail!("no fill reached the event stream");
                }
                eprintln!(
                    "  run {}: {} fills, p50 {:.3} p95 {:.3} max {:.3} ms",
                    run + 1,
                    l.len(),
                    median(&l),
                    quantile(&l, 0.95),
                    quantile(&l, 1.0)
                );
                count += l.len();
                p50.push(median(&l));
                p95.push(quantile(&l, 0.95));
                max.push(quantile(&l, 1.0));
            }
            println!("\n== 2. Trade update on /stream → execution.created on GET /api/events: {count} fills over {runs} runs ==");
            println!("p50 {:.3} ms [{}] (goal < 1 ms)", median(&p50), list(&p50));
            println!("p95 {:.3} ms [{}]", median(&p95), list(&p95));
            println!("max {:.3} ms [{}]", median(&max), list(&max));
        }
        let calls = venue.lock().unwrap_or_else(|e| e.into_inner()).calls.clone();
        println!("\nTrading API requests the stand-in answered in all: {calls:?}");
    }

    if wants("scan") {
        scan_bench(runs, env_num("BENCH_SYMBOLS", 10_000) as usize).await?;
    }
    Ok(())
}
