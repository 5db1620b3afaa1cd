//! Alpaca as the market-data source, through the real service: the
//! service starts with `market_data = alpaca` (execution stays `paper`, mode `PAPER`) against
//! stand-ins started in the test — an axum app speaking the Trading API's assets, clock and
//! calendar and the Market Data API's snapshots and bars (paging bars by `next_page_token`,
//! recording every request), and a tokio-tungstenite server speaking the stock stream (text
//! frames; it can drop the connection and refuse reconnects). Everything is asserted over HTTP.
//! The market clock is the wall clock ([`service_clock`]: real time moved into a session), and
//! the stand-in's "today" is its New York date.

use crate::helpers::*;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use chrono::{Datelike, Duration as Days, NaiveDate, TimeZone, Utc};
use futures::{SinkExt, StreamExt};
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::{broadcast, Notify};
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::Message;
use tradeops_brokers::alpaca::rest::AlpacaCredentials;
use tradeops_core::calendar::MarketCalendar;
use tradeops_core::market::Timeframe;
use tradeops_core::settings::{ExecutionBrokerKind, MarketCalendarKind, MarketDataBrokerKind};
use tradeops_core::{Symbol, Timestamp, TradingMode};
use tradeops_server::config::{AlpacaFeed, BrokersConfig};
use tradeops_store::DataRepository;

// One key pair for both stand-ins: a service reading both (`alpaca_desk`) has one.
use crate::alpaca::{KEY_ID, SECRET};
const GOLDEN_CSV: &str = include_str!("fixtures/golden_daily.csv");

/// The wall clock of these tests, the market clock of a service reading Alpaca (and the
/// stand-in's): real time, moved to 11:00 New York of the latest NYSE trading day, so that a
/// test run at night or on a weekend still trades inside a session.
pub(crate) fn service_clock() -> Arc<dyn tradeops_core::Clock> {
    static CLOCK: std::sync::OnceLock<Arc<tradeops_server::clock::ScaledClock>> = std::sync::OnceLock::new();
    CLOCK.get_or_init(|| clock_in_latest_session(|day| day.regular_open + Days::minutes(90))).clone()
}

/// Real time moved to `at(the latest NYSE trading day)`, running at the wall's pace.
pub(crate) fn clock_in_latest_session(
    at: fn(&tradeops_core::calendar::TradingDay) -> Timestamp,
) -> Arc<tradeops_server::clock::ScaledClock> {
    let real = tradeops_core::Clock::now(&tradeops_server::clock::SystemClock);
    let nyse = tradeops_core::calendar::MarketCalendar::new(tradeops_core::settings::MarketCalendarKind::Nyse);
    let today = nyse.date_of(real);
    let day = if nyse.is_trading_day(today) { today } else { nyse.previous_trading_day(today) };
    let session = nyse.trading_day(day).expect("a trading day has a session");
    Arc::new(tradeops_server::clock::ScaledClock::starting_at(at(&session), 1.0))
}

pub(crate) fn wall_now() -> Timestamp {
    service_clock().now()
}

pub(crate) fn ny_date(at: Timestamp) -> NaiveDate {
    at.with_timezone(&chrono_tz::America::New_York).date_naive()
}

/// Midnight New York of `date` (where Alpaca's daily bars start).
pub(crate) fn ny_midnight(date: NaiveDate) -> Timestamp {
    tradeops_core::calendar::ny_instant(date, (0, 0))
}

pub(crate) fn previous_weekday(date: NaiveDate) -> NaiveDate {
    let mut d = date.pred_opt().unwrap();
    while matches!(d.weekday(), chrono::Weekday::Sat | chrono::Weekday::Sun) {
        d = d.pred_opt().unwrap();
    }
    d
}

fn money(cents: i64) -> f64 {
    cents as f64 / 100.0
}

pub(crate) fn bar_json(t: Timestamp, open: f64, high: f64, low: f64, close: f64, volume: u64) -> Value {
    json!({"t": t, "o": open, "h": high, "l": low, "c": close, "v": volume, "n": 1, "vw": close})
}

pub(crate) fn flat_bar(t: Timestamp, cents: i64, volume: u64) -> Value {
    bar_json(t, money(cents), money(cents), money(cents), money(cents), volume)
}

// ---------------------------------------------------------------------------------------------
// The REST stand-in
// ---------------------------------------------------------------------------------------------

#[derive(Default)]
struct Book {
    assets: Vec<Value>,
    snapshots: BTreeMap<String, Value>,
    /// Bars by timeframe (`1Min`, `1Day`) and symbol, oldest first.
    bars: BTreeMap<(String, String), Vec<(Timestamp, Value)>>,
    page_size: usize,
    /// Sessions that differ from core's NYSE calendar: `None` closes the date, `Some` sets
    /// its open and close.
    calendar_changes: BTreeMap<NaiveDate, Option<(&'static str, &'static str)>>,
    /// Every request: path and decoded query.
    requests: Vec<(String, BTreeMap<String, String>)>,
    unauthenticated: usize,
    /// How long each bars request takes (a download's progress can then be watched).
    bars_delay: Duration,
    /// The stand-in's time (none: [`wall_now`]).
    clock: Option<Arc<dyn tradeops_core::Clock>>,
}

impl Book {
    fn now(&self) -> Timestamp {
        self.clock.as_ref().map_or_else(wall_now, |c| c.now())
    }
}

type Shared = Arc<Mutex<Book>>;

fn query_of(uri: &Uri) -> BTreeMap<String, String> {
    form_urlencoded_pairs(uri.query().unwrap_or_default())
}

fn form_urlencoded_pairs(query: &str) -> BTreeMap<String, String> {
    query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            (decode(k), decode(v))
        })
        .collect()
}

fn decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
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

/// Core's NYSE sessions of `[start, end]` as Alpaca lists them, with the book's changes.
fn calendar(book: &Book, start: NaiveDate, end: NaiveDate) -> Value {
    let nyse = MarketCalendar::new(MarketCalendarKind::Nyse);
    let mut days = Vec::new();
    let mut date = start;
    while date <= end {
        let session = match book.calendar_changes.get(&date) {
            Some(changed) => changed.map(|(open, close)| (open.to_string(), close.to_string())),
            None => nyse.trading_day(date).map(|d| {
                let close = if d.early_close { "13:00" } else { "16:00" };
                ("09:30".to_string(), close.to_string())
            }),
        };
        if let Some((open, close)) = session {
            days.push(json!({"date": date.to_string(), "open": open, "close": close,
                "session_open": "0400", "session_close": "2000", "settlement_date": date.to_string()}));
        }
        date = date.succ_opt().unwrap();
    }
    Value::Array(days)
}

async fn alpaca(State(book): State<Shared>, uri: Uri, headers: HeaderMap) -> Response {
    let delay = book.lock().unwrap().bars_delay;
    if uri.path() == "/v2/stocks/bars" && !delay.is_zero() {
        tokio::time::sleep(delay).await;
    }
    let mut book = book.lock().unwrap();
    let query = query_of(&uri);
    let path = uri.path().to_string();
    book.requests.push((path.clone(), query.clone()));
    let authenticated = headers.get("apca-api-key-id").is_some_and(|v| v == KEY_ID)
        && headers.get("apca-api-secret-key").is_some_and(|v| v == SECRET);
    if !authenticated {
        book.unauthenticated += 1;
        return (StatusCode::UNAUTHORIZED, "{\"message\":\"unauthorized\"}").into_response();
    }
    let now = book.now();
    let body = match path.as_str() {
        "/v2/assets" => Value::Array(book.assets.clone()),
        "/v2/clock" => json!({"timestamp": now, "is_open": true,
            "next_open": now + Days::days(1), "next_close": now + Days::hours(1)}),
        "/v2/calendar" => {
            let day = |k: &str| query.get(k).and_then(|d| d.parse::<NaiveDate>().ok()).unwrap();
            calendar(&book, day("start"), day("end"))
        }
        "/v2/stocks/snapshots" => {
            let symbols = query.get("symbols").cloned().unwrap_or_default();
            let found: serde_json::Map<String, Value> =
                symbols.split(',').filter_map(|s| book.snapshots.get(s).map(|v| (s.to_string(), v.clone()))).collect();
            Value::Object(found)
        }
        "/v2/stocks/bars" => bars_page(&book, &query),
        _ => return (StatusCode::NOT_FOUND, "{\"message\":\"not found\"}").into_response(),
    };
    ([("content-type", "application/json")], body.to_string()).into_response()
}

/// One page of multi-symbol bars, paged as Alpaca pages them (by symbol, then time); the
/// token is the offset of the page's first bar.
fn bars_page(book: &Book, query: &BTreeMap<String, String>) -> Value {
    let start: Timestamp = query["start"].parse().unwrap();
    let end: Timestamp = query["end"].parse().unwrap();
    let timeframe = &query["timeframe"];
    let mut all: Vec<(String, Value)> = Vec::new();
    for symbol in query["symbols"].split(',') {
        for (t, bar) in book.bars.get(&(timeframe.clone(), symbol.to_string())).into_iter().flatten() {
            if *t >= start && *t < end {
                all.push((symbol.to_string(), bar.clone()));
            }
        }
    }
    let offset: usize = query.get("page_token").map_or(0, |t| t.parse().unwrap());
    let size = book.page_size.min(query["limit"].parse().unwrap());
    let mut bars: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    for (symbol, bar) in all.iter().skip(offset).take(size) {
        bars.entry(symbol.clone()).or_default().push(bar.clone());
    }
    let next = (offset + size < all.len()).then(|| (offset + size).to_string());
    json!({"bars": bars, "next_page_token": next})
}

// ---------------------------------------------------------------------------------------------
// The stream stand-in
// ---------------------------------------------------------------------------------------------

#[derive(Default)]
struct Stream {
    connections: AtomicUsize,
    /// While set, a connection is answered `402 auth failed` and closed.
    refuse: AtomicBool,
    /// Every message the service sent after authenticating (subscribes, unsubscribes).
    received: Mutex<Vec<Value>>,
    /// Drops the connection being served (no close handshake).
    drop: Notify,
}

type Socket = tokio_tungstenite::WebSocketStream<tokio::net::TcpStream>;

fn text(v: Value) -> Message {
    Message::Text(v.to_string().into())
}

async fn next_json(socket: &mut Socket) -> Option<Value> {
    loop {
        match socket.next().await {
            Some(Ok(Message::Text(t))) => return Some(serde_json::from_str(t.as_str()).unwrap_or(Value::Null)),
            Some(Ok(_)) => continue,
            _ => return None,
        }
    }
}

/// Serves one connection: greeting, auth (refused while `refuse` is set), then records what
/// the client sends, answers subscriptions and forwards `frames` until told to drop.
async fn serve(tcp: tokio::net::TcpStream, stream: Arc<Stream>, mut frames: broadcast::Receiver<Value>) {
    let Ok(mut socket) = tokio_tungstenite::accept_async(tcp).await else { return };
    stream.connections.fetch_add(1, Ordering::SeqCst);
    if socket.send(text(json!([{"T": "success", "msg": "connected"}]))).await.is_err() {
        return;
    }
    let Some(auth) = next_json(&mut socket).await else { return };
    let good = auth == json!({"action": "auth", "key": KEY_ID, "secret": SECRET});
    if !good || stream.refuse.load(Ordering::SeqCst) {
        let _ = socket.send(text(json!([{"T": "error", "code": 402, "msg": "auth failed"}]))).await;
        let _ = socket.close(None).await;
        return;
    }
    if socket.send(text(json!([{"T": "success", "msg": "authenticated"}]))).await.is_err() {
        return;
    }
    loop {
        tokio::select! {
            message = next_json(&mut socket) => {
                let Some(message) = message else { return };
                stream.received.lock().unwrap().push(message.clone());
                if message["action"] == "subscribe" {
                    let list = message["trades"].clone();
                    let reply = json!([{"T": "subscription", "trades": list, "quotes": list, "bars": list}]);
                    if socket.send(text(reply)).await.is_err() {
                        return;
                    }
                }
            }
            frame = frames.recv() => {
                let Ok(frame) = frame else { continue };
                if socket.send(text(frame)).await.is_err() {
                    return;
                }
            }
            _ = stream.drop.notified() => return, // dropped without a close handshake
        }
    }
}

pub(crate) struct StandIn {
    book: Shared,
    pub(crate) url: String,
    stream: Arc<Stream>,
    pub(crate) stream_url: String,
    frames: broadcast::Sender<Value>,
}

impl StandIn {
    async fn start() -> StandIn {
        StandIn::start_with(None).await
    }

    /// A stand-in whose time is `clock`'s (its clock, snapshots and "today").
    pub(crate) async fn start_on(clock: Arc<dyn tradeops_core::Clock>) -> StandIn {
        StandIn::start_with(Some(clock)).await
    }

    async fn start_with(clock: Option<Arc<dyn tradeops_core::Clock>>) -> StandIn {
        let book: Shared = Arc::new(Mutex::new(Book { page_size: 10_000, clock, ..Book::default() }));
        let app = axum::Router::new().fallback(alpaca).with_state(book.clone());
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });

        let stream = Arc::new(Stream::default());
        let (frames, _) = broadcast::channel(64);
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let stream_url = format!("ws://{}/v2/iex", listener.local_addr().unwrap());
        let (serving, sender) = (stream.clone(), frames.clone());
        tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                tokio::spawn(serve(tcp, serving.clone(), sender.subscribe()));
            }
        });
        StandIn { book, url, stream, stream_url, frames }
    }

    fn book(&self) -> std::sync::MutexGuard<'_, Book> {
        self.book.lock().unwrap()
    }

    pub(crate) fn requests_to(&self, path: &str) -> Vec<BTreeMap<String, String>> {
        self.book().requests.iter().filter(|(p, _)| p == path).map(|(_, q)| q.clone()).collect()
    }

    fn add_asset(&self, symbol: &str, exchange: &str) {
        self.book().assets.push(json!({"id": format!("id-{symbol}"), "class": "us_equity", "exchange": exchange,
            "symbol": symbol, "name": format!("{symbol} Inc."), "status": "active", "tradable": true,
            "marginable": true, "shortable": true, "easy_to_borrow": true, "fractionable": true}));
    }

    /// A symbol that closed yesterday at `prev` cents and trades at `last` now, with today's
    /// `volume`.
    pub(crate) fn add_mover(&self, symbol: &str, prev: i64, last: i64, volume: u64) {
        self.add_asset(symbol, "NASDAQ");
        let now = self.book().now();
        let today = ny_date(now);
        let snapshot = json!({
            "latestTrade": {"t": now, "p": money(last), "s": 100, "x": "V", "i": 1, "c": ["@"], "z": "C"},
            "latestQuote": {"t": now, "bp": money(last - 1), "bs": 2, "ap": money(last + 1), "as": 3},
            "minuteBar": flat_bar(tradeops_core::bars::minute_floor(now) - Days::minutes(1), last, 1000),
            "dailyBar": flat_bar(ny_midnight(today), last, volume),
            "prevDailyBar": flat_bar(ny_midnight(previous_weekday(today)), prev, 900_000),
        });
        self.book().snapshots.insert(symbol.into(), snapshot);
    }

    pub(crate) fn add_bars(&self, timeframe: &str, symbol: &str, bars: Vec<(Timestamp, Value)>) {
        self.book().bars.entry((timeframe.into(), symbol.into())).or_default().extend(bars);
    }

    /// Sends one text frame (a JSON array of messages) on every open connection.
    pub(crate) fn send(&self, frame: Value) {
        let _ = self.frames.send(frame);
    }

    pub(crate) fn received(&self) -> Vec<Value> {
        self.stream.received.lock().unwrap().clone()
    }
}

// ---------------------------------------------------------------------------------------------
// The service
// ---------------------------------------------------------------------------------------------

pub(crate) fn alpaca_config(config: &mut tradeops_server::Config, alpaca: &StandIn) {
    config.mode = Some(TradingMode::Paper);
    config.brokers =
        BrokersConfig { execution: Some(ExecutionBrokerKind::Paper), market_data: Some(MarketDataBrokerKind::Alpaca) };
    config.alpaca.credentials = Some(AlpacaCredentials { key_id: KEY_ID.into(), secret_key: SECRET.into() });
    config.alpaca.trading_url = Some(alpaca.url.clone());
    config.alpaca.data_url = alpaca.url.clone();
    config.alpaca.data_stream_url = Some(alpaca.stream_url.clone());
    config.alpaca.feed = AlpacaFeed::Iex;
}

pub(crate) async fn start_service(alpaca: &StandIn) -> TestApp {
    let (db, url) = TestDb::new().await;
    let mut config = test_config(url);
    alpaca_config(&mut config, alpaca);
    start_on_own_market_clock(config, Arc::new(db), service_clock()).await
}

/// The radar's filters opened (prices up to $100): what ranks is the stand-in's snapshots.
pub(crate) fn open_filters() -> Value {
    json!({"momentum_radar": {"min_percentage_gain": -100, "min_relative_volume": 0, "max_float": 100000000000u64,
        "min_volume": 0, "min_price": 0.01, "max_price": 100}})
}

pub(crate) async fn data_broker(app: &TestApp) -> Value {
    let health = app.get("/api/health/components").await;
    health.data().as_array().unwrap().iter().find(|c| c["name"] == "data_broker").cloned().expect("data_broker")
}

/// Polls `read` every 50 ms until `check` holds of what it returns; panics after `limit`
/// naming `what` and the last value seen.
pub(crate) async fn wait_until<T: std::fmt::Debug, F: std::future::Future<Output = T>>(
    what: &str,
    limit: Duration,
    mut read: impl FnMut() -> F,
    check: impl Fn(&T) -> bool,
) -> T {
    let started = Instant::now();
    loop {
        let value = read().await;
        if check(&value) {
            return value;
        }
        if started.elapsed() > limit {
            panic!("{what}: not within {limit:?}; last seen: {value:?}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn wait_done(app: &TestApp, path: &str) -> Value {
    wait_until(
        &format!("{path} finished"),
        Duration::from_secs(30),
        || async { app.get(path).await.data().clone() },
        |job| job["status"] == "COMPLETED" || job["status"] == "FAILED",
    )
    .await
}

/// The golden sma_cross run (as `backtests.rs` runs it) on `symbol`.
fn golden_request(symbol: &str) -> Value {
    json!({
        "strategy_id": "sma_cross", "symbol": symbol, "timeframe": "1d",
        "start": "2026-01-01T00:00:00Z", "end": "2026-05-01T00:00:00Z",
        "parameters": {"fast": 5, "slow": 10},
        "initial_cash": 10000, "commission_rate": 0.001, "slippage_bps": 5,
        "settings": {"risk_controls": {"max_daily_loss": 100000, "max_position_size": 100000, "max_order_value": 1000000}}
    })
}

/// A backtest's result without what differs between runs and symbols.
fn comparable(mut run: Value) -> Value {
    for key in ["backtest_id", "created_at", "started_at", "finished_at", "requested_by", "symbol"] {
        run.as_object_mut().unwrap().remove(key);
    }
    for trade in run["trades"].as_array_mut().into_iter().flatten() {
        for key in ["trade_id", "symbol"] {
            trade.as_object_mut().unwrap().remove(key);
        }
    }
    run
}

/// The golden fixture's daily bars as Alpaca serves them (midnight New York starts).
fn golden_bars() -> Vec<(Timestamp, Value)> {
    let bars = tradeops_core::csv_bars::parse_bars_csv(GOLDEN_CSV, Timeframe::Day).unwrap();
    bars.iter()
        .map(|b| {
            let v = bar_json(b.start, b.open.to_f64(), b.high.to_f64(), b.low.to_f64(), b.close.to_f64(), b.volume);
            (b.start, v)
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn alpaca_market_data_drives_the_radar_bars_downloads_backtests_health_and_the_watchlist() {
    let started = Instant::now();
    let alpaca = StandIn::start().await;
    // Movers: gains of +40 %, +20 %, +5 %, -25 %; EEE is over the $100 maximum and OTCX is not
    // listed on a national exchange (not in the universe).
    for (symbol, prev, last, volume) in [
        ("AAA", 500, 600, 2_000_000),
        ("BBB", 500, 700, 3_000_000),
        ("CCC", 500, 525, 1_000_000),
        ("DDD", 400, 300, 500_000),
        ("EEE", 10_000, 15_000, 800_000),
    ] {
        alpaca.add_mover(symbol, prev, last, volume);
    }
    let bbb = alpaca.book().snapshots["BBB"].clone();
    alpaca.book().snapshots.insert("OTCX".into(), bbb);
    alpaca.add_asset("OTCX", "OTC");
    alpaca.add_asset("GOLDN", "NYSE");
    alpaca.book().page_size = 7;
    // 30 minute bars of AAA on a past Friday, and 10 a day over three days for the download.
    let session = Utc.with_ymd_and_hms(2026, 11, 20, 14, 30, 0).unwrap();
    let minute_bars: Vec<(Timestamp, Value)> = (0..30)
        .map(|i| {
            let t = session + Days::minutes(i);
            let cents = 500 + i;
            (t, bar_json(t, money(cents), money(cents + 3), money(cents - 2), money(cents + 1), 100 + i as u64))
        })
        .collect();
    alpaca.add_bars("1Min", "AAA", minute_bars.clone());
    // Three days in three weeks: a download steps a week at a time from Alpaca.
    let download_days = [(2026, 10, 27), (2026, 11, 3), (2026, 11, 10)];
    for (y, m, d) in download_days {
        let open = Utc.with_ymd_and_hms(y, m, d, 14, 30, 0).unwrap();
        let day: Vec<_> =
            (0..10).map(|i| (open + Days::minutes(i), flat_bar(open + Days::minutes(i), 400 + i, 50))).collect();
        alpaca.add_bars("1Min", "CCC", day);
    }
    alpaca.add_bars("1Day", "GOLDN", golden_bars());

    // The radar's filters are settings: set them, then start again so that the first scan
    // (at start; later ones come once a minute) uses them.
    let mut app = start_service(&alpaca).await;
    // A real market keeps NYSE hours: the calendar is set so at start, and kept so.
    let settings = app.get("/api/settings").await;
    assert_eq!(settings.assert_ok(200)["runtime"]["market_calendar"], "NYSE", "{}", settings.body);
    let always = json!({"runtime": {"market_calendar": "ALWAYS_OPEN"}});
    let refused = app.put_settings(ADMIN_TOKEN, always).await;
    refused.assert_error(400, "VALIDATION_ERROR");
    assert_eq!(refused.body["error"]["detail"]["field"], "runtime.market_calendar");
    app.put_settings(ADMIN_TOKEN, open_filters()).await.assert_ok(200);
    app.stop().await;
    let app = start_on_own_market_clock(app.config.clone(), app.db.clone(), service_clock()).await;
    let boot = Instant::now();

    // The radar: rows ranked from the stand-in's snapshots.
    let radar = wait_until(
        "a radar scan over Alpaca's snapshots",
        Duration::from_secs(15),
        || async { app.get("/api/radar/momentum?top_n=200").await },
        |r| r.data().as_array().is_some_and(|rows| !rows.is_empty()),
    )
    .await;
    let rows = radar.data().as_array().unwrap();
    let ranked: Vec<(&str, f64, f64)> = rows
        .iter()
        .map(|r| (r["symbol"].as_str().unwrap(), r["price"].as_f64().unwrap(), r["percentage_gain"].as_f64().unwrap()))
        .collect();
    assert_eq!(
        ranked,
        vec![("BBB", 7.0, 40.0), ("AAA", 6.0, 20.0), ("CCC", 5.25, 5.0), ("DDD", 3.0, -25.0)],
        "ranked by gain; EEE over the maximum price, OTCX outside the universe: {}",
        radar.body
    );
    let scans = alpaca.requests_to("/v2/stocks/snapshots");
    let scanned: BTreeSet<&str> = scans[0]["symbols"].split(',').collect();
    assert_eq!(scanned, BTreeSet::from(["AAA", "BBB", "CCC", "DDD", "EEE", "GOLDN"]), "the universe is scanned");
    assert!(scans.iter().all(|q| q["feed"] == "iex"), "the configured feed");
    let radar_after = boot.elapsed();

    // Health: the data broker is Alpaca, its stream connected, its calendar agrees with core's.
    let healthy = wait_until(
        "data_broker HEALTHY with its stream connected",
        Duration::from_secs(10),
        || data_broker(&app),
        |c| {
            c["status"] == "HEALTHY"
                && c["detail"]["stream"]["connected"] == true
                && c["detail"]["calendar_mismatch"].is_array()
        },
    )
    .await;
    assert_eq!(healthy["detail"]["broker"], "alpaca", "{healthy}");
    assert_eq!(healthy["detail"]["adapter"], "alpaca", "{healthy}");
    assert_eq!(healthy["detail"]["calendar_mismatch"], json!([]), "{healthy}");
    let skew = healthy["detail"]["clock_skew_ms"].as_i64().expect("clock_skew_ms");
    assert!(skew.abs() < 2_000, "the stand-in's clock is the wall clock: {healthy}");
    let asked = alpaca.requests_to("/v2/calendar");
    let today = ny_date(wall_now());
    assert_eq!(asked[0]["start"], today.to_string());
    assert_eq!(asked[0]["end"], (today + Days::days(30)).to_string());
    // From here on, count the health probe's pings (every 100 ms here).
    let (pings_before, pinging) = (alpaca.requests_to("/v2/clock").len(), Instant::now());

    // Bars through the API: every page, in order.
    let bars = app.get("/api/market/bars?symbol=AAA&start=2026-11-20T14:30:00Z&end=2026-11-20T15:00:00Z").await;
    let rows = bars.assert_ok(200).as_array().unwrap().clone();
    let expected: Vec<Value> = minute_bars
        .iter()
        .map(|(t, b)| {
            json!({"timestamp": tradeops_core::time::format_ts(t), "open": b["o"], "high": b["h"], "low": b["l"],
                "close": b["c"], "volume": b["v"]})
        })
        .collect();
    assert_eq!(rows, expected, "the stand-in's 30 bars, oldest first");
    // The API's request (a chart of AAA also streams it: the stream fills its recent bars with
    // a request of its own, over another range).
    let pages: Vec<_> = alpaca
        .requests_to("/v2/stocks/bars")
        .into_iter()
        .filter(|q| q["symbols"] == "AAA" && q["timeframe"] == "1Min" && q["start"] == "2026-11-20T14:30:00Z")
        .collect();
    assert_eq!(pages.len(), 5, "30 bars in pages of 7");
    assert_eq!(pages[4].get("page_token").map(String::as_str), Some("28"));
    app.get("/api/market/bars?symbol=ZZZZ").await.assert_error(404, "NOT_FOUND");

    // A minute download over three weeks, a bar request taking 300 ms: stored a week (one
    // request) at a time, its progress reported after each.
    alpaca.book().bars_delay = Duration::from_millis(300);
    let body =
        json!({"symbol": "CCC", "start": "2026-10-26T05:00:00Z", "end": "2026-11-16T05:00:00Z", "timeframe": "1m"});
    let id = app.post("/api/data/download", ADMIN_TOKEN, body).await.assert_ok(202)["request_id"]
        .as_str()
        .unwrap()
        .to_string();
    let seen: Mutex<Vec<(f64, i64)>> = Mutex::new(Vec::new());
    let path = format!("/api/data/downloads/{id}");
    let (seen_by, app_ref, path_ref) = (&seen, &app, &path);
    let done = wait_until(
        "the minute download finished",
        Duration::from_secs(30),
        || async move {
            let job = app_ref.get(path_ref).await.data().clone();
            let progress = (job["progress"].as_f64().unwrap_or(-1.0), job["bars"].as_i64().unwrap_or(-1));
            seen_by.lock().unwrap().push(progress);
            job
        },
        |job| job["status"] == "COMPLETED" || job["status"] == "FAILED",
    )
    .await;
    let seen = seen.into_inner().unwrap();
    alpaca.book().bars_delay = Duration::ZERO;
    assert_eq!(
        (done["status"].as_str(), done["bars"].as_i64(), done["progress"].as_f64()),
        (Some("COMPLETED"), Some(30), Some(1.0)),
        "{done}"
    );
    assert!(seen.iter().any(|(p, _)| *p > 0.0 && *p < 1.0), "progress between the steps: {seen:?}");
    for (progress, bars) in &seen {
        assert_eq!(*bars, (progress * 3.0).round() as i64 * 10, "a week's bars stored per third: {seen:?}");
    }
    let db = tradeops_store::Database::open(&app.config.database_url).await.unwrap();
    let stored = db.bars(&Symbol::parse("CCC").unwrap(), "1m", 0, i64::MAX).await.unwrap();
    let closes: Vec<i64> = stored.iter().map(|b| (b.close.to_f64() * 100.0).round() as i64).collect();
    assert_eq!(closes, (0..3).flat_map(|_| 400..410).collect::<Vec<i64>>(), "exactly the stand-in's bars");
    let requests: Vec<_> = alpaca
        .requests_to("/v2/stocks/bars")
        .into_iter()
        .filter(|q| q["symbols"] == "CCC" && q["timeframe"] == "1Min")
        .collect();
    let steps: Vec<&str> =
        requests.iter().filter(|q| !q.contains_key("page_token")).map(|q| q["start"].as_str()).collect();
    assert_eq!(
        steps,
        vec!["2026-10-26T05:00:00Z", "2026-11-02T05:00:00Z", "2026-11-09T05:00:00Z"],
        "a request (and its pages: 10 bars in pages of 7) per week, not per day"
    );
    assert_eq!(requests.len(), 6);

    // A daily download of the golden fixture's bars from Alpaca, then the golden backtest on
    // it and on the same bars imported from the CSV under another symbol: the same result.
    let body =
        json!({"symbol": "GOLDN", "start": "2026-01-01T00:00:00Z", "end": "2026-05-01T00:00:00Z", "timeframe": "1d"});
    let id = app.post("/api/data/download", ADMIN_TOKEN, body).await.assert_ok(202)["request_id"]
        .as_str()
        .unwrap()
        .to_string();
    let done = wait_done(&app, &format!("/api/data/downloads/{id}")).await;
    assert_eq!((done["status"].as_str(), done["bars"].as_i64()), (Some("COMPLETED"), Some(80)), "{done}");
    let stored = db.bars(&Symbol::parse("GOLDN").unwrap(), "1d", 0, i64::MAX).await.unwrap();
    db.close().await;
    assert_eq!(stored, tradeops_core::csv_bars::parse_bars_csv(GOLDEN_CSV, Timeframe::Day).unwrap());
    let import = app
        .client
        .post(app.url("/api/data/import?symbol=GOLDC&timeframe=1d"))
        .bearer_auth(ADMIN_TOKEN)
        .header("content-type", "text/csv")
        .body(GOLDEN_CSV);
    assert_eq!(app.raw(import).await.assert_ok(200)["bars"], 80);
    let mut results = Vec::new();
    for symbol in ["GOLDN", "GOLDC"] {
        let queued = app.post("/api/backtests/run", ADMIN_TOKEN, golden_request(symbol)).await;
        let id = queued.assert_ok(202)["backtest_id"].as_str().unwrap().to_string();
        let run = wait_done(&app, &format!("/api/backtests/{id}")).await;
        assert_eq!(run["status"], "COMPLETED", "{run}");
        results.push(run);
    }
    let trades = results[0]["trades"].as_array().unwrap();
    assert!(trades.len() >= 3, "the fixture crosses several times: {}", results[0]);
    assert_eq!(results[0]["trades"][0]["symbol"], "GOLDN");
    assert_eq!(comparable(results[0].clone()), comparable(results[1].clone()), "Alpaca's bars are the CSV's");

    // A watched symbol is subscribed on the stream and its streamed trade is its price.
    let watch = app.post("/api/radar/watch", ADMIN_TOKEN, json!({"symbol": "CCC"})).await;
    assert_eq!(watch.assert_ok(200)["watchlist_status"], "WATCHING", "{}", watch.body);
    wait_until(
        "the stand-in sees CCC subscribed",
        Duration::from_secs(10),
        || async { alpaca.received() },
        |received| received.iter().any(|m| m["action"] == "subscribe" && m["trades"] == json!(["CCC"])),
    )
    .await;
    // (AAA, charted above, was subscribed before: looked at, it is streamed for a while too.)
    let subscribe =
        alpaca.received().into_iter().find(|m| m["action"] == "subscribe" && m["trades"] == json!(["CCC"])).unwrap();
    assert_eq!(
        subscribe,
        json!({"action": "subscribe", "trades": ["CCC"], "quotes": ["CCC"], "bars": ["CCC"], "statuses": ["CCC"]})
    );
    let price = || async {
        let rows = app.get("/api/watchlist").await;
        rows.data().as_array().unwrap().iter().find(|r| r["symbol"] == "CCC").map(|r| r["current_price"].clone())
    };
    assert_eq!(price().await, Some(json!(5.25)), "from the latest scan before the stream says more");
    let now = wall_now();
    let minute = tradeops_core::bars::minute_floor(now) - Days::minutes(1);
    alpaca.send(json!([
        {"T": "t", "S": "CCC", "i": 7, "x": "V", "p": 5.61, "s": 100, "t": now, "c": ["@"], "z": "C"},
        {"T": "q", "S": "CCC", "bx": "V", "bp": 5.60, "bs": 3, "ax": "V", "ap": 5.62, "as": 4, "t": now},
        {"T": "b", "S": "CCC", "o": 5.3, "h": 5.61, "l": 5.3, "c": 5.6, "v": 4200, "t": minute, "n": 9, "vw": 5.5}
    ]));
    wait_until("the streamed trade is CCC's price", Duration::from_secs(10), price, |p| *p == Some(json!(5.61))).await;
    // The engine marks by the stream too: a position bought now is valued at the streamed trade
    // (filled by the paper broker at the streamed quote).
    let order = app.post("/api/orders", ADMIN_TOKEN, json!({"symbol": "CCC", "side": "BUY", "quantity": 10})).await;
    order.assert_ok(201);
    let position = || async {
        let rows = app.get("/api/positions").await;
        rows.data().as_array().unwrap().iter().find(|r| r["symbol"] == "CCC").cloned()
    };
    let held = wait_until("a CCC position marked at the streamed trade", Duration::from_secs(10), position, |p| {
        p.as_ref().is_some_and(|p| p["quantity"] == 10 && p["market_price"] == 5.61)
    })
    .await;
    assert_eq!(held.unwrap()["average_entry_price"], 5.62, "bought at the streamed ask");
    wait_until(
        "health shows the stream's last event",
        Duration::from_secs(5),
        || data_broker(&app),
        |c| c["detail"]["stream"]["last_event_at"].is_string(),
    )
    .await;

    // The stand-in drops the stream and refuses reconnects: DEGRADED with the reason, then
    // back without a restart once it takes connections again.
    alpaca.stream.refuse.store(true, Ordering::SeqCst);
    alpaca.stream.drop.notify_waiters();
    let outage = Instant::now();
    let degraded = wait_until(
        "data_broker DEGRADED while the stream is refused",
        Duration::from_secs(10),
        || data_broker(&app),
        |c| c["status"] == "DEGRADED",
    )
    .await;
    assert_eq!(degraded["detail"]["stream"]["connected"], false, "{degraded}");
    let reason = degraded["detail"]["reason"].as_str().unwrap_or_default();
    assert!(reason.contains("market-data stream is disconnected"), "{degraded}");
    wait_until(
        "a refused reconnect",
        Duration::from_secs(10),
        || data_broker(&app),
        |c| c["detail"]["reason"].as_str().is_some_and(|r| r.contains("402 auth failed")),
    )
    .await;
    let connections = alpaca.stream.connections.load(Ordering::SeqCst);
    alpaca.stream.refuse.store(false, Ordering::SeqCst);
    let recovered = wait_until(
        "data_broker HEALTHY again after the stream is back",
        Duration::from_secs(20),
        || data_broker(&app),
        |c| c["status"] == "HEALTHY" && c["detail"]["stream"]["connected"] == true,
    )
    .await;
    assert!(alpaca.stream.connections.load(Ordering::SeqCst) > connections, "{recovered}");
    assert_eq!(recovered["detail"]["stream"]["connections"], 2, "one reconnect counted: {recovered}");
    let outage_took = outage.elapsed();
    // Resubscribed on the new connection, and it carries trades again.
    wait_until(
        "CCC subscribed again",
        Duration::from_secs(10),
        || async { alpaca.received() },
        |r| {
            let with_ccc = |m: &&Value| m["trades"].as_array().is_some_and(|t| t.contains(&json!("CCC")));
            r.iter().filter(|m| m["action"] == "subscribe").filter(with_ccc).count() == 2
        },
    )
    .await;
    alpaca.send(json!([{"T": "t", "S": "CCC", "i": 8, "x": "V", "p": 5.70, "s": 100, "t": wall_now()}]));
    wait_until("a trade after the reconnect", Duration::from_secs(10), price, |p| *p == Some(json!(5.7))).await;
    wait_until("the engine marks the position at it", Duration::from_secs(10), position, |p| {
        p.as_ref().is_some_and(|p| p["market_price"] == 5.7)
    })
    .await;
    assert_eq!(alpaca.book().unauthenticated, 0, "every request carried the key pair");
    // The probe does not spend a request of the budget each time: one per 10 s at most.
    let pings = alpaca.requests_to("/v2/clock").len() - pings_before;
    let probes = pinging.elapsed().as_millis() / 100;
    assert!(pings as u64 <= 2 + pinging.elapsed().as_secs() / 10, "{pings} clock requests in {probes} probes");
    eprintln!(
        "alpaca_data: radar after {radar_after:?}, outage and recovery {outage_took:?}, whole test {:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn a_calendar_that_differs_from_the_nyse_rules_is_shown_in_health() {
    let alpaca = StandIn::start().await;
    alpaca.add_mover("AAA", 500, 600, 1_000_000);
    // The next NYSE trading day after today closed (as for a day of mourning), the one after
    // closing early.
    let nyse = MarketCalendar::new(MarketCalendarKind::Nyse);
    let today = ny_date(wall_now());
    let closed = nyse.next_trading_day(today);
    let early = nyse.next_trading_day(closed);
    alpaca.book().calendar_changes.insert(closed, None);
    alpaca.book().calendar_changes.insert(early, Some(("09:30", "12:00")));
    let app = start_service(&alpaca).await;
    let component = wait_until(
        "the calendar check in health",
        Duration::from_secs(15),
        || data_broker(&app),
        |c| c["detail"]["calendar_mismatch"].is_array(),
    )
    .await;
    let close = if nyse.trading_day(early).unwrap().early_close { "13:00" } else { "16:00" };
    let regular = if nyse.trading_day(closed).unwrap().early_close { "13:00" } else { "16:00" };
    assert_eq!(
        component["detail"]["calendar_mismatch"],
        json!([
            format!("{closed}: Alpaca has no session; the NYSE calendar trades 09:30-{regular}"),
            format!("{early}: Alpaca trades 09:30-12:00; the NYSE calendar 09:30-{close}"),
        ]),
        "{component}"
    );
    assert_eq!(component["detail"]["broker"], "alpaca");
    assert_eq!(alpaca.requests_to("/v2/calendar").len(), 1, "checked once a day");
}
