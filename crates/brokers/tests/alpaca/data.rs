//! The Alpaca market-data adapter against stand-ins started in the test: an axum app speaking
//! the Trading API's reference endpoints and the Market Data API's snapshots and bars (paging
//! bars with a small page, counting requests, answering scripted faults first), and a
//! tokio-tungstenite server speaking the stock stream (greeting, auth, subscribe, JSON-array
//! text frames, a dropped connection). The stand-ins are shared with the halt tests
//! (`halts.rs`).

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use chrono::{NaiveDate, TimeZone, Utc};
use futures::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, Notify};
use tokio_tungstenite::tungstenite::Message;
use tradeops_brokers::alpaca::data::{DataClient, DataFeed, RateBudget, SNAPSHOT_BATCH};
use tradeops_brokers::alpaca::data_stream::{DataStreamConfig, MarketDataStream};
use tradeops_brokers::alpaca::market::{AlpacaDataConfig, AlpacaMarketData};
use tradeops_brokers::alpaca::rest::AlpacaCredentials;
use tradeops_brokers::alpaca::stream::BackoffPolicy;
use tradeops_brokers::{MarketData, Snapshot};
use tradeops_core::clock::ManualClock;
use tradeops_core::market::{Bar, Price, Quote, Timeframe};
use tradeops_core::radar::{self, RadarInput};
use tradeops_core::settings::MomentumRadarSettings;
use tradeops_core::{Symbol, Timestamp};
use tradeops_sim::profile::{expected_cum_fraction, DayClock};

const KEY_ID: &str = "AKDATA";
const SECRET: &str = "data-secret-42";

/// 10:30 New York on a Wednesday.
pub(crate) fn now() -> Timestamp {
    Utc.with_ymd_and_hms(2026, 11, 25, 15, 30, 0).unwrap()
}

fn minute(hour: u32, minute: u32) -> Timestamp {
    Utc.with_ymd_and_hms(2026, 11, 25, hour, minute, 0).unwrap()
}

pub(crate) fn sym(raw: &str) -> Symbol {
    Symbol::parse(raw).unwrap()
}

fn bar_json(t: Timestamp, close_cents: i64, volume: u64) -> Value {
    let close = close_cents as f64 / 100.0;
    json!({"t": t, "o": close, "h": close, "l": close, "c": close, "v": volume, "n": 1, "vw": close})
}

fn bar(t: Timestamp, close_cents: i64, volume: u64) -> Bar {
    let close = Price::from_cents(close_cents);
    Bar { start: t, open: close, high: close, low: close, close, volume }
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
    /// Bars per page (the stand-in's own limit).
    page_size: usize,
    /// Replies given before any real one: status, headers.
    faults: VecDeque<(u16, Vec<(&'static str, String)>)>,
    /// Every request: path and its decoded query.
    requests: Vec<(String, BTreeMap<String, String>)>,
    /// Requests that came without both key headers.
    unauthenticated: usize,
}

type Shared = Arc<Mutex<Book>>;

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

fn query_of(uri: &Uri) -> BTreeMap<String, String> {
    uri.query()
        .unwrap_or_default()
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            (decode(k), decode(v))
        })
        .collect()
}

async fn alpaca(State(book): State<Shared>, uri: Uri, headers: HeaderMap) -> Response {
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
    if let Some((status, fault_headers)) = book.faults.pop_front() {
        let mut response =
            (StatusCode::from_u16(status).unwrap(), json!({"message": "rate limit exceeded"}).to_string())
                .into_response();
        for (name, value) in fault_headers {
            response.headers_mut().insert(name, value.parse().unwrap());
        }
        return response;
    }
    let body = match path.as_str() {
        "/v2/assets" => Value::Array(book.assets.clone()),
        "/v2/clock" => json!({"timestamp": now(), "is_open": true,
            "next_open": "2026-11-26T14:30:00Z", "next_close": "2026-11-25T21:00:00Z"}),
        "/v2/calendar" => json!([{"date": "2026-11-25", "open": "09:30", "close": "16:00"}]),
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

/// One page of multi-symbol bars, as Alpaca pages them: by symbol, then time; the token is the
/// offset of the page's first bar.
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
    let page = all.iter().skip(offset).take(size);
    let mut bars: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    for (symbol, bar) in page {
        bars.entry(symbol.clone()).or_default().push(bar.clone());
    }
    let next = (offset + size < all.len()).then(|| (offset + size).to_string());
    json!({"bars": bars, "next_page_token": next})
}

pub(crate) struct RestStandIn {
    book: Shared,
    url: String,
}

impl RestStandIn {
    pub(crate) async fn start() -> RestStandIn {
        let book: Shared = Arc::new(Mutex::new(Book { page_size: 10_000, ..Book::default() }));
        let app = axum::Router::new().fallback(alpaca).with_state(book.clone());
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        RestStandIn { book, url }
    }

    pub(crate) fn client(&self, clock: Arc<ManualClock>) -> DataClient {
        let credentials = AlpacaCredentials { key_id: KEY_ID.into(), secret_key: SECRET.into() };
        DataClient::new(&self.url, &self.url, DataFeed::Sip, &credentials, Duration::from_secs(600), clock).unwrap()
    }

    fn book(&self) -> std::sync::MutexGuard<'_, Book> {
        self.book.lock().unwrap()
    }

    fn requests_to(&self, path: &str) -> Vec<BTreeMap<String, String>> {
        self.book().requests.iter().filter(|(p, _)| p == path).map(|(_, q)| q.clone()).collect()
    }

    fn add_bars(&self, timeframe: &str, symbol: &str, bars: impl IntoIterator<Item = (Timestamp, Value)>) {
        self.book().bars.entry((timeframe.into(), symbol.into())).or_default().extend(bars);
    }
}

pub(crate) fn clock() -> Arc<ManualClock> {
    Arc::new(ManualClock::new(now()))
}

fn asset(symbol: &str, exchange: &str, tradable: bool) -> Value {
    json!({"id": format!("id-{symbol}"), "class": "us_equity", "exchange": exchange, "symbol": symbol,
        "name": format!("{symbol} Inc."), "status": "active", "tradable": tradable, "marginable": true,
        "shortable": true, "easy_to_borrow": true, "fractionable": true})
}

// ---------------------------------------------------------------------------------------------
// REST
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn the_universe_keeps_tradable_listed_symbols_with_the_key_headers() {
    let alpaca = RestStandIn::start().await;
    alpaca.book().assets = vec![
        asset("ABCD", "NASDAQ", true),
        asset("BRK.B", "NYSE", true),
        asset("SPY", "ARCA", true),
        asset("OTCQ", "OTC", true),
        asset("NOPE", "NYSE", false),
        asset("BAD$", "AMEX", true),
        asset("ZZZ", "BATS", true),
        asset("AAA", "AMEX", true),
    ];
    let market = AlpacaMarketData::new(Arc::new(alpaca.client(clock())), None, Default::default(), clock());
    assert_eq!(market.load_universe().await.unwrap(), 5);
    let symbols: Vec<String> = market.universe().iter().map(|a| a.symbol.to_string()).collect();
    assert_eq!(symbols, vec!["AAA", "ABCD", "BRK.B", "SPY", "ZZZ"]);
    let asked = alpaca.requests_to("/v2/assets");
    assert_eq!(asked[0].get("status").map(String::as_str), Some("active"));
    assert_eq!(asked[0].get("asset_class").map(String::as_str), Some("us_equity"));
    assert_eq!(alpaca.book().unauthenticated, 0);
    let instrument = market.instrument(&sym("ABCD")).unwrap();
    assert_eq!((instrument.sector, instrument.float), (None, None), "Alpaca knows neither, and none was imported");
    assert!(market.instrument(&sym("OTCQ")).is_none());
    // The clock and the calendar.
    let clock_reply = market.market_clock().await.unwrap();
    assert!(clock_reply.is_open);
    market.ping(now()).await.unwrap();
    let day = NaiveDate::from_ymd_opt(2026, 11, 25).unwrap();
    let calendar = market.client().calendar(day, day).await.unwrap();
    assert_eq!(calendar[0].date, day);
}

#[tokio::test]
async fn snapshots_go_in_batches_and_every_symbol_comes_back() {
    let alpaca = RestStandIn::start().await;
    let names: Vec<String> = (0..(2 * SNAPSHOT_BATCH + 3)).map(|i| format!("S{i}")).collect();
    for name in &names {
        alpaca.book().snapshots.insert(name.clone(), json!({"latestTrade": {"t": now(), "p": 5.0, "s": 1}}));
    }
    let client = alpaca.client(clock());
    let symbols: Vec<Symbol> = names.iter().map(|n| sym(n)).collect();
    let snapshots = client.snapshots(&symbols).await.unwrap();
    assert_eq!(snapshots.len(), names.len());
    let asked = alpaca.requests_to("/v2/stocks/snapshots");
    let sizes: Vec<usize> = asked.iter().map(|q| q["symbols"].split(',').count()).collect();
    assert_eq!(sizes, vec![SNAPSHOT_BATCH, SNAPSHOT_BATCH, 3]);
    assert!(asked.iter().all(|q| q.get("feed").map(String::as_str) == Some("sip")));
}

#[tokio::test]
async fn bars_follow_the_page_token_and_return_every_bar_once_in_order() {
    let alpaca = RestStandIn::start().await;
    alpaca.book().page_size = 4;
    for (symbol, base) in [("AAAA", 500), ("BBBB", 900)] {
        alpaca.add_bars(
            "1Min",
            symbol,
            (0..10).map(|i| (minute(15, i), bar_json(minute(15, i), base + i as i64, 100))),
        );
    }
    let client = alpaca.client(clock());
    let bars =
        client.bars(&[sym("AAAA"), sym("BBBB")], Timeframe::Minute, minute(15, 0), minute(15, 10)).await.unwrap();
    for (symbol, base) in [("AAAA", 500), ("BBBB", 900)] {
        let expected: Vec<Bar> = (0..10).map(|i| bar(minute(15, i), base + i as i64, 100)).collect();
        assert_eq!(bars[&sym(symbol)], expected, "{symbol}");
    }
    let asked = alpaca.requests_to("/v2/stocks/bars");
    assert_eq!(asked.len(), 5, "20 bars in pages of 4");
    assert_eq!(asked[0].get("page_token"), None);
    assert_eq!(asked[4].get("page_token").map(String::as_str), Some("16"));
    assert!(asked.iter().all(|q| q["timeframe"] == "1Min" && q["adjustment"] == "raw" && q["limit"] == "10000"));
    // The single-symbol read of the trait keeps [start, end) and closed bars only.
    let market = AlpacaMarketData::new(Arc::new(client), None, Default::default(), clock());
    let one = market.bars(&sym("AAAA"), Timeframe::Minute, minute(15, 2), minute(15, 5)).await.unwrap();
    assert_eq!(one.iter().map(|b| b.start).collect::<Vec<_>>(), vec![minute(15, 2), minute(15, 3), minute(15, 4)]);
}

#[tokio::test(start_paused = true)]
async fn a_429_is_waited_out_as_retry_after_says_and_the_request_succeeds() {
    let alpaca = RestStandIn::start().await;
    alpaca.book().snapshots.insert("ABCD".into(), json!({"latestTrade": {"t": now(), "p": 5.0, "s": 1}}));
    alpaca.book().faults.push_back((429, vec![("retry-after", "30".into())]));
    let client = alpaca.client(clock());
    let started = tokio::time::Instant::now();
    let snapshots = client.snapshots(&[sym("ABCD")]).await.unwrap();
    assert_eq!(snapshots.len(), 1);
    assert!(started.elapsed() >= Duration::from_secs(30), "waited {:?}", started.elapsed());
    assert_eq!(alpaca.requests_to("/v2/stocks/snapshots").len(), 2);
    // A server error is Unavailable with its reason, not retried.
    alpaca.book().faults.push_back((503, vec![]));
    let error = client.snapshots(&[sym("ABCD")]).await.unwrap_err();
    assert!(error.to_string().contains("503"), "{error}");
}

#[tokio::test(start_paused = true)]
async fn the_request_budget_waits_instead_of_failing() {
    let alpaca = RestStandIn::start().await;
    let client = alpaca.client(clock()).with_budget(RateBudget::per_minute(3));
    let started = tokio::time::Instant::now();
    for _ in 0..4 {
        client.market_clock().await.unwrap();
    }
    assert!(started.elapsed() >= Duration::from_secs(60), "the 4th request waited {:?}", started.elapsed());
    assert_eq!(alpaca.requests_to("/v2/clock").len(), 4);
}

#[tokio::test]
async fn the_secret_never_shows_in_debug() {
    let alpaca = RestStandIn::start().await;
    let client = Arc::new(alpaca.client(clock()));
    let credentials = AlpacaCredentials { key_id: KEY_ID.into(), secret_key: SECRET.into() };
    let config = DataStreamConfig::alpaca(DataFeed::Iex, &credentials);
    let market = AlpacaMarketData::new(client.clone(), None, Default::default(), clock());
    for shown in [format!("{client:?}"), format!("{config:?}"), format!("{market:?}"), format!("{credentials:?}")] {
        assert!(!shown.contains(SECRET), "{shown}");
    }
    // Nor in an error: a refused request.
    alpaca.book().faults.push_back((500, vec![]));
    let error = client.market_clock().await.unwrap_err();
    assert!(!format!("{error:?} {error}").contains(SECRET));
}

#[tokio::test]
async fn without_a_stream_snapshots_come_from_rest_and_are_served_again_briefly() {
    let alpaca = RestStandIn::start().await;
    alpaca.book().snapshots.insert(
        "ABCD".into(),
        json!({"latestTrade": {"t": now(), "p": 5.5, "s": 1},
            "latestQuote": {"t": now(), "bp": 5.49, "bs": 1, "ap": 5.51, "as": 2},
            "dailyBar": bar_json(DayClock::for_date(NaiveDate::from_ymd_opt(2026, 11, 25).unwrap()).start, 550, 1000),
            "prevDailyBar": bar_json(previous_weekdays()[11], 500, 900)}),
    );
    let clock = clock();
    let market = AlpacaMarketData::new(Arc::new(alpaca.client(clock.clone())), None, Default::default(), clock.clone());
    let expected = Snapshot {
        prev_close: Price::from_cents(500),
        last: Price::from_cents(550),
        quote: Quote { bid: Price::from_cents(549), ask: Price::from_cents(551), bid_size: 1, ask_size: 2 },
    };
    assert_eq!(market.snapshot(&sym("ABCD")).await, Some(expected));
    assert_eq!(market.snapshot(&sym("ABCD")).await, Some(expected));
    assert_eq!(alpaca.requests_to("/v2/stocks/snapshots").len(), 1);
    clock.advance(chrono::Duration::seconds(6));
    assert_eq!(market.snapshot(&sym("ABCD")).await, Some(expected));
    assert_eq!(alpaca.requests_to("/v2/stocks/snapshots").len(), 2);
    assert_eq!(market.snapshot(&sym("NONE")).await, None);
    assert_eq!(market.last_closed_bar(&sym("ABCD")).await, None, "closed bars come from the stream");
}

// ---------------------------------------------------------------------------------------------
// The radar scan
// ---------------------------------------------------------------------------------------------

/// The previous 12 weekdays before 2026-11-25, at midnight New York (05:00Z), oldest first.
fn previous_weekdays() -> Vec<Timestamp> {
    let mut days = Vec::new();
    let mut date = NaiveDate::from_ymd_opt(2026, 11, 25).unwrap();
    while days.len() < 12 {
        date = date.pred_opt().unwrap();
        if !matches!(chrono::Datelike::weekday(&date), chrono::Weekday::Sat | chrono::Weekday::Sun) {
            days.push(DayClock::for_date(date).start);
        }
    }
    days.reverse();
    days
}

struct Mover {
    symbol: &'static str,
    prev_close: i64,
    last: i64,
    volume: u64,
    /// Daily volume of the previous days (all the same, but the oldest two differ: they are
    /// outside the average's 10 days).
    daily: u64,
}

#[tokio::test]
async fn the_radar_scan_ranks_the_universe_as_core_radar_scan_does() {
    let alpaca = RestStandIn::start().await;
    let movers = [
        Mover { symbol: "AAA", prev_close: 500, last: 600, volume: 3_000_000, daily: 1_000_000 },
        Mover { symbol: "BBB", prev_close: 500, last: 700, volume: 3_000_000, daily: 1_000_000 },
        Mover { symbol: "CCC", prev_close: 500, last: 520, volume: 3_000_000, daily: 1_000_000 },
        Mover { symbol: "DDD", prev_close: 400, last: 600, volume: 100_000, daily: 1_000_000 },
        Mover { symbol: "EEE", prev_close: 300, last: 450, volume: 2_000_000, daily: 500_000 },
        Mover { symbol: "FFF", prev_close: 300, last: 450, volume: 2_000_000, daily: 500_000 },
    ];
    let today = DayClock::for_date(NaiveDate::from_ymd_opt(2026, 11, 25).unwrap()).start;
    let days = previous_weekdays();
    for m in &movers {
        alpaca.book().assets.push(asset(m.symbol, "NASDAQ", true));
        alpaca.book().snapshots.insert(
            m.symbol.into(),
            json!({"latestTrade": {"t": now(), "p": m.last as f64 / 100.0, "s": 100},
                "latestQuote": {"t": now(), "bp": 1.0, "bs": 1, "ap": 1.01, "as": 1},
                "minuteBar": bar_json(minute(15, 29), m.last - 10, 5000),
                "dailyBar": bar_json(today, m.last, m.volume),
                "prevDailyBar": bar_json(*days.last().unwrap(), m.prev_close, m.daily)}),
        );
        let history =
            days.iter().enumerate().map(|(i, t)| (*t, bar_json(*t, 100, if i < 2 { 9 * m.daily } else { m.daily })));
        alpaca.add_bars("1Day", m.symbol, history);
        // Today's bar is not history.
        alpaca.add_bars("1Day", m.symbol, [(today, bar_json(today, m.last, 77 * m.daily))]);
    }
    alpaca.book().page_size = 7;
    let imported = "symbol,float,sector\nAAA,5000000,Health Care\nFFF,90000000,Technology\n";
    let book =
        tradeops_core::reference::ReferenceBook::new(tradeops_core::reference::parse_reference_csv(imported).unwrap());
    let reference = Arc::new(tradeops_brokers::reference::ReferenceData::new(book));
    let market = AlpacaMarketData::new(Arc::new(alpaca.client(clock())), None, reference.clone(), clock());
    let settings = MomentumRadarSettings::default();
    let scan = market.scan(now(), &settings).await.unwrap();

    // The same inputs through core's scan: the sim's profile at 10:30 New York, the 10-day mean.
    let clock_of_day = DayClock::for_date(NaiveDate::from_ymd_opt(2026, 11, 25).unwrap());
    let expected_fraction = expected_cum_fraction(&clock_of_day, 10 * 60 + 30);
    let symbols: Vec<Symbol> = movers.iter().map(|m| sym(m.symbol)).collect();
    let recents: Vec<[Bar; 1]> = movers.iter().map(|m| [bar(minute(15, 29), m.last - 10, 5000)]).collect();
    let nyse = tradeops_core::calendar::MarketCalendar::new(tradeops_core::settings::MarketCalendarKind::Nyse);
    let inputs = movers.iter().enumerate().map(|(i, m)| {
        let (sector, float) = match m.symbol {
            "AAA" => (Some("Health Care"), Some(5_000_000)),
            "FFF" => (Some("Technology"), Some(90_000_000)),
            _ => (None, None),
        };
        RadarInput {
            symbol: &symbols[i],
            sector,
            float,
            prev_close: Price::from_cents(m.prev_close),
            last: Price::from_cents(m.last),
            volume: m.volume,
            average_volume: m.daily,
            expected_fraction,
            recent: &recents[i],
            // The regular session. The first scan reads the day so far from the bars endpoint
            // (none here), which holds the snapshot's minute: no bar is tallied.
            session: nyse.phase(now()),
            day: radar::DayTally::default(),
        }
    });
    let expected = radar::scan(inputs, &settings, now(), 200);
    assert_eq!(scan.rows, expected);
    let ranked: Vec<(u32, &str)> = scan.rows.iter().map(|r| (r.rank, r.symbol.as_str())).collect();
    // DDD's volume is too thin, CCC's gain too small, FFF's float over the maximum; EEE's and
    // BBB's floats are unknown (nothing imported), which a float ceiling does not pass.
    assert_eq!(ranked, vec![(1, "AAA")]);
    assert_eq!(scan.scanned, movers.len());
    assert_eq!(scan.rows[0].sector.as_deref(), Some("Health Care"));
    // Without a ceiling, the unknown floats pass (and FFF's large one).
    let open = MomentumRadarSettings { max_float: radar::NO_FLOAT_CEILING, ..settings.clone() };
    let all = market.scan(now(), &open).await.unwrap();
    let ranked: Vec<(u32, &str)> = all.rows.iter().map(|r| (r.rank, r.symbol.as_str())).collect();
    assert_eq!(ranked, vec![(1, "EEE"), (2, "FFF"), (3, "BBB"), (4, "AAA")]);
    assert_eq!((all.rows[0].float, all.rows[0].sector.as_deref()), (None, None));
    assert_eq!(market.instrument(&sym("EEE")).unwrap().average_volume, 500_000);

    // The daily history is fetched once per day: a second scan only asks for snapshots.
    let history_requests = alpaca.requests_to("/v2/stocks/bars").len();
    assert!(history_requests >= 2, "12 daily bars × 6 symbols in pages of 7");
    market.scan(now() + chrono::Duration::minutes(1), &settings).await.unwrap();
    assert_eq!(alpaca.requests_to("/v2/stocks/bars").len(), history_requests);
    assert_eq!(alpaca.requests_to("/v2/stocks/snapshots").len(), 3, "one per scan");
    assert_eq!(alpaca.requests_to("/v2/assets").len(), 1, "the universe too is loaded once a day");

    // A radar limited to some symbols asks for their snapshots only.
    let listed = MomentumRadarSettings { universe: vec![sym("CCC"), sym("AAA")], min_percentage_gain: 0.0, ..open };
    let scan = market.scan(now(), &listed).await.unwrap();
    let asked = alpaca.requests_to("/v2/stocks/snapshots");
    assert_eq!(asked.last().unwrap()["symbols"], "AAA,CCC");
    assert_eq!(scan.rows.iter().map(|r| r.symbol.as_str()).collect::<Vec<_>>(), vec!["AAA", "CCC"]);
}

// ---------------------------------------------------------------------------------------------
// The stream
// ---------------------------------------------------------------------------------------------

/// What a connection of the stream stand-in does after authenticating.
pub(crate) enum Script {
    /// Answers the auth with `402 auth failed` and closes.
    Refuse,
    /// Expects a subscribe, sends these frames (text, JSON arrays), waits for `drop` to be
    /// notified and drops the connection without a close handshake.
    SendThenDrop(Vec<Value>),
    /// Expects a subscribe, sends these frames and holds the connection.
    SendAndHold(Vec<Value>),
    /// Expects a subscribe, then sends each frame the test sends as it comes and records every
    /// later request (subscribe, unsubscribe) in `later`; drops the connection, without a close
    /// handshake, once the test drops its sender.
    Live(mpsc::UnboundedReceiver<Value>),
}

#[derive(Default)]
pub(crate) struct StreamStandIn {
    pub(crate) connections: AtomicUsize,
    auths: Mutex<Vec<Value>>,
    /// The first request of each connection.
    pub(crate) subscribes: Mutex<Vec<Value>>,
    /// The later requests of [`Script::Live`] connections.
    pub(crate) later: Mutex<Vec<Value>>,
    drop: Notify,
}

async fn next_json(socket: &mut tokio_tungstenite::WebSocketStream<tokio::net::TcpStream>) -> Value {
    loop {
        match socket.next().await {
            Some(Ok(Message::Text(text))) => return serde_json::from_str(text.as_str()).unwrap_or(Value::Null),
            Some(Ok(_)) => continue,
            _ => return Value::Null,
        }
    }
}

pub(crate) async fn start_stream(scripts: Vec<Script>) -> (String, Arc<StreamStandIn>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("ws://{}/v2/sip", listener.local_addr().unwrap());
    let stand_in = Arc::new(StreamStandIn::default());
    let record = stand_in.clone();
    tokio::spawn(async move {
        let mut held = Vec::new();
        for script in scripts {
            let (tcp, _) = listener.accept().await.unwrap();
            record.connections.fetch_add(1, Ordering::SeqCst);
            let mut socket = tokio_tungstenite::accept_async(tcp).await.unwrap();
            let text = |v: Value| Message::Text(v.to_string().into());
            socket.send(text(json!([{"T": "success", "msg": "connected"}]))).await.unwrap();
            let auth = next_json(&mut socket).await;
            record.auths.lock().unwrap().push(auth);
            if let Script::Refuse = script {
                socket.send(text(json!([{"T": "error", "code": 402, "msg": "auth failed"}]))).await.unwrap();
                socket.close(None).await.ok();
                continue;
            }
            socket.send(text(json!([{"T": "success", "msg": "authenticated"}]))).await.unwrap();
            let subscribe = next_json(&mut socket).await;
            let trades = subscribe["trades"].clone();
            record.subscribes.lock().unwrap().push(subscribe);
            let reply =
                json!([{"T": "subscription", "trades": trades, "quotes": trades, "bars": trades, "statuses": trades}]);
            socket.send(text(reply)).await.unwrap();
            match script {
                Script::SendThenDrop(frames) => {
                    for frame in frames {
                        socket.send(text(frame)).await.unwrap();
                    }
                    record.drop.notified().await;
                    drop(socket);
                }
                Script::SendAndHold(frames) => {
                    for frame in frames {
                        socket.send(text(frame)).await.unwrap();
                    }
                    held.push(socket);
                }
                Script::Live(mut frames) => loop {
                    tokio::select! {
                        frame = frames.recv() => match frame {
                            Some(frame) => socket.send(text(frame)).await.unwrap(),
                            None => break,
                        },
                        request = next_json(&mut socket) => match request {
                            Value::Null => break,
                            request => record.later.lock().unwrap().push(request),
                        },
                    }
                },
                Script::Refuse => unreachable!(),
            }
        }
        std::future::pending::<()>().await;
        drop(held);
    });
    (url, stand_in)
}

pub(crate) fn stream_config(url: String) -> DataStreamConfig {
    DataStreamConfig {
        url,
        key_id: KEY_ID.into(),
        secret_key: SECRET.into(),
        backoff: BackoffPolicy {
            initial: Duration::from_millis(1),
            max: Duration::from_millis(5),
            jitter: 0.2,
            seed: 3,
        },
        auth_timeout: Duration::from_secs(30),
        idle_timeout: Duration::from_secs(30),
        gap_lookback: Duration::from_secs(24 * 3600),
    }
}

/// Polls `check` until it holds (bounded: a stuck stream fails the test instead of hanging it).
pub(crate) async fn eventually(what: &str, check: impl Fn() -> bool) {
    for _ in 0..2000 {
        if check() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("never happened: {what}");
}

#[tokio::test]
async fn the_stream_authenticates_subscribes_and_folds_trades_quotes_and_bars_into_snapshots() {
    let alpaca = RestStandIn::start().await;
    alpaca.book().snapshots.insert(
        "ABCD".into(),
        json!({"latestTrade": {"t": now(), "p": 5.20, "s": 1},
            "latestQuote": {"t": now(), "bp": 5.19, "bs": 1, "ap": 5.21, "as": 1},
            "dailyBar": bar_json(DayClock::for_date(NaiveDate::from_ymd_opt(2026, 11, 25).unwrap()).start, 520, 1000),
            "prevDailyBar": bar_json(previous_weekdays()[11], 500, 900)}),
    );
    let frames = vec![json!([
        {"T": "t", "S": "ABCD", "i": 1, "x": "V", "p": 5.5, "s": 100, "t": "2026-11-25T15:29:59Z", "c": ["@"], "z": "C"},
        {"T": "q", "S": "ABCD", "bx": "V", "bp": 5.49, "bs": 3, "ax": "V", "ap": 5.51, "as": 4, "t": "2026-11-25T15:29:59Z"},
        {"T": "b", "S": "ABCD", "o": 5.4, "h": 5.5, "l": 5.4, "c": 5.5, "v": 700, "t": "2026-11-25T15:29:00Z", "n": 3, "vw": 5.45}
    ])];
    let (url, stand_in) = start_stream(vec![Script::Refuse, Script::SendAndHold(frames)]).await;
    // The REST gap fill finds nothing to add before 15:29's bar arrives: its bar is not served.
    let config = AlpacaDataConfig {
        trading_url: alpaca.url.clone(),
        data_url: alpaca.url.clone(),
        feed: DataFeed::Sip,
        timeout: Duration::from_secs(600),
        stream: Some(stream_config(url)),
    };
    let credentials = AlpacaCredentials { key_id: KEY_ID.into(), secret_key: SECRET.into() };
    assert!(!format!("{config:?}").contains(SECRET));
    let market = AlpacaMarketData::connect(config, &credentials, Default::default(), clock()).unwrap();
    market.set_watched([sym("ABCD")]);
    eventually("the subscription", || stand_in.subscribes.lock().unwrap().len() == 1).await;
    let health = || market.stream_health().unwrap();
    eventually("a frame", || health().last_message_at.is_some() && health().connected).await;
    for _ in 0..200 {
        if market.last_closed_bar(&sym("ABCD")).await.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(
        *stand_in.auths.lock().unwrap(),
        vec![json!({"action": "auth", "key": KEY_ID, "secret": SECRET}); 2],
        "authenticated again after the refusal"
    );
    assert_eq!(
        stand_in.subscribes.lock().unwrap()[0],
        json!({"action": "subscribe", "trades": ["ABCD"], "quotes": ["ABCD"], "bars": ["ABCD"], "statuses": ["ABCD"]})
    );
    let state = health();
    assert_eq!((state.connected, state.connections, state.subscribed), (true, 1, 1));
    assert!(state.last_error.unwrap().contains("402 auth failed"));
    let snapshot = market.snapshot(&sym("ABCD")).await.unwrap();
    assert_eq!(snapshot.prev_close, Price::from_cents(500), "from the REST snapshot");
    assert_eq!(snapshot.last, Price::from_cents(550), "the stream's trade");
    assert_eq!(
        snapshot.quote,
        Quote { bid: Price::from_cents(549), ask: Price::from_cents(551), bid_size: 3, ask_size: 4 }
    );
    // Known now (the previous close from that REST snapshot), the stream alone answers.
    let snapshot_requests = alpaca.requests_to("/v2/stocks/snapshots").len();
    assert_eq!(market.snapshot(&sym("ABCD")).await.unwrap().last, Price::from_cents(550));
    assert_eq!(alpaca.requests_to("/v2/stocks/snapshots").len(), snapshot_requests);
    let closed = market.last_closed_bar(&sym("ABCD")).await.unwrap();
    assert_eq!((closed.bar.start, closed.bar.close, closed.bar.volume), (minute(15, 29), Price::from_cents(550), 700));
}

#[tokio::test]
async fn a_dropped_stream_reconnects_resubscribes_and_fills_the_missed_minute_bar() {
    let alpaca = RestStandIn::start().await;
    // REST knows 15:28 (also streamed) and 15:29 (missed while down).
    alpaca.add_bars("1Min", "ABCD", [(minute(15, 28), bar_json(minute(15, 28), 510, 300))]);
    alpaca.add_bars("1Min", "ABCD", [(minute(15, 29), bar_json(minute(15, 29), 520, 400))]);
    let first = vec![
        json!([{"T": "b", "S": "ABCD", "o": 5.1, "h": 5.1, "l": 5.1, "c": 5.1, "v": 300, "t": "2026-11-25T15:28:00Z"}]),
    ];
    let (url, stand_in) = start_stream(vec![Script::SendThenDrop(first), Script::SendAndHold(Vec::new())]).await;
    // Connected at 15:28:30: the first gap fill reaches up to 15:28 (exclusive).
    let clock = Arc::new(ManualClock::new(minute(15, 28) + chrono::Duration::seconds(30)));
    let client = Arc::new(alpaca.client(clock.clone()));
    let stream = MarketDataStream::spawn(stream_config(url), client, clock.clone());
    stream.set_watched([sym("ABCD")]);
    let abcd = sym("ABCD");
    eventually("the first bar", || stream.book().last_bar_start(&abcd) == Some(minute(15, 28))).await;
    // Down through 15:29; back at 15:30:05.
    clock.set(minute(15, 30) + chrono::Duration::seconds(5));
    stand_in.drop.notify_one();
    eventually("the missed bar", || stream.book().last_bar_start(&abcd) == Some(minute(15, 29))).await;
    let bars = stream.book().get(&abcd).unwrap().bars;
    assert_eq!(bars, vec![bar(minute(15, 28), 510, 300), bar(minute(15, 29), 520, 400)]);
    assert_eq!(stand_in.connections.load(Ordering::SeqCst), 2);
    let subscribes = stand_in.subscribes.lock().unwrap().clone();
    assert_eq!(subscribes.len(), 2);
    assert_eq!(subscribes[0], subscribes[1], "the same subscription after the reconnect");
    // Filled from the day's start on connecting, then carried by the stream and the gap
    // fill: the day's volume is whole.
    assert_eq!(stream.book().day_volume(&abcd, NaiveDate::from_ymd_opt(2026, 11, 25).unwrap()), Some(700));
    let state = stream.health();
    assert_eq!((state.connected, state.reconnects()), (true, 1));
    assert!(state.last_error.is_some());
    // The reconnect's gap fill asked from the minute after the last bar held.
    let asked = alpaca.requests_to("/v2/stocks/bars");
    let last = asked.last().unwrap();
    assert_eq!((last["start"].as_str(), last["end"].as_str()), ("2026-11-25T15:29:00Z", "2026-11-25T15:30:00Z"));
}
