//! Alpaca's data REST APIs (research/domain.md §1.8): the [`DataClient`] of the reference
//! endpoints of the Trading API (assets, calendar, clock) and of the Market Data API v2
//! (multi-symbol snapshots in batches of [`SNAPSHOT_BATCH`], historical bars followed page after
//! page). Every request first takes a permit from one [`RateBudget`] (at most
//! [`REQUESTS_PER_MINUTE`] in any minute, waiting rather than failing); a 429 is waited out as Alpaca's
//! `Retry-After` / `X-RateLimit-Reset` say and sent again (up to [`RATE_LIMIT_RETRIES`] times);
//! 5xx, timeouts and unreadable replies are [`MarketDataError::Unavailable`] with the reason.
//! The API secret is sent only as a header marked sensitive and never appears in `Debug`, logs
//! or errors.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use chrono::{NaiveDate, SecondsFormat};
use reqwest::{RequestBuilder, StatusCode};
use serde::de::DeserializeOwned;
use tradeops_core::market::{Bar, Timeframe};
use tradeops_core::{Clock, Symbol, Timestamp};

use super::data_wire as wire;
use super::rest::{retry_after, AlpacaCredentials, ClientBuildError};
use crate::market::MarketDataError;

/// Symbols per snapshots request: 500 symbols of up to 5 characters keep the URL near 3 KB,
/// well inside what Alpaca's front end takes, and a US-equity universe (~11,000 symbols) in 23
/// requests.
pub const SNAPSHOT_BATCH: usize = 500;
/// Symbols per multi-symbol bars request (the same URL bound).
pub const BARS_SYMBOL_BATCH: usize = 500;
/// The most bars one page of `GET /v2/stocks/bars` may hold.
pub const BARS_PAGE_LIMIT: usize = 10_000;
/// The budget of the whole data client: Alpaca's free plan allows 200 requests a minute.
pub const REQUESTS_PER_MINUTE: u32 = 200;
/// How many 429s in a row one request waits out before giving up.
pub const RATE_LIMIT_RETRIES: u32 = 3;
/// The wait after a 429 that names no time.
const DEFAULT_RATE_LIMIT_WAIT: Duration = Duration::from_secs(1);
/// The exchanges whose listings make the universe (no OTC).
pub const UNIVERSE_EXCHANGES: [&str; 5] = ["NYSE", "NASDAQ", "AMEX", "ARCA", "BATS"];

/// Which tape the data comes from: `iex` (free, ~2–3 % of volume), `sip` (the consolidated
/// tape, paid) or `delayed_sip`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DataFeed {
    Iex,
    Sip,
    DelayedSip,
}

impl DataFeed {
    pub fn as_str(self) -> &'static str {
        match self {
            DataFeed::Iex => "iex",
            DataFeed::Sip => "sip",
            DataFeed::DelayedSip => "delayed_sip",
        }
    }
}

/// The width of the bars asked of `GET /v2/stocks/bars`: core's timeframes, and half-hours,
/// which the radar's catch-up reads a day's morning in (CONTRACT §12: a pre-market of 04:00–09:30
/// is eleven of them a symbol, where it is 330 minutes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BarWidth {
    Minute,
    HalfHour,
    Day,
}

impl BarWidth {
    /// Alpaca's `timeframe`.
    pub fn as_str(self) -> &'static str {
        match self {
            BarWidth::Minute => "1Min",
            BarWidth::HalfHour => "30Min",
            BarWidth::Day => "1Day",
        }
    }
}

impl From<Timeframe> for BarWidth {
    fn from(timeframe: Timeframe) -> BarWidth {
        match timeframe {
            Timeframe::Minute => BarWidth::Minute,
            Timeframe::Day => BarWidth::Day,
        }
    }
}

/// One symbol of the universe: an active, tradable US equity listed on a national exchange.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UniverseAsset {
    pub symbol: Symbol,
    pub name: Option<String>,
    pub exchange: String,
}

/// Keeps the assets tradeops trades: tradable, active, on one of [`UNIVERSE_EXCHANGES`], with a
/// symbol [`Symbol::parse`] accepts; sorted by symbol.
pub fn universe_of(assets: Vec<wire::Asset>) -> Vec<UniverseAsset> {
    let mut universe: Vec<UniverseAsset> = assets
        .into_iter()
        .filter(|a| a.tradable && (a.status.is_empty() || a.status == "active"))
        .filter(|a| UNIVERSE_EXCHANGES.contains(&a.exchange.as_str()))
        .filter_map(|a| {
            let symbol = Symbol::parse(&a.symbol).ok()?;
            (symbol.as_str() == a.symbol).then_some(UniverseAsset { symbol, name: a.name, exchange: a.exchange })
        })
        .collect();
    universe.sort_by(|a, b| a.symbol.cmp(&b.symbol));
    universe.dedup_by(|a, b| a.symbol == b.symbol);
    universe
}

pub use super::budget::RateBudget;

/// A client of Alpaca's Trading API (reference data) and Market Data API at their base URLs
/// (`https://paper-api.alpaca.markets`, `https://data.alpaca.markets`, or stand-ins in tests).
#[derive(Clone)]
pub struct DataClient {
    http: reqwest::Client,
    trading_url: String,
    data_url: String,
    feed: DataFeed,
    key_id: String,
    budget: Arc<RateBudget>,
    clock: Arc<dyn Clock>,
    /// When a request last succeeded (service clock).
    last_success: Arc<Mutex<Option<chrono::DateTime<chrono::Utc>>>>,
}

/// How recent a success [`DataClient::ping`] accepts instead of a request while the budget is
/// spent.
pub const PING_SUCCESS_WINDOW: Duration = Duration::from_secs(60);

impl fmt::Debug for DataClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DataClient")
            .field("trading_url", &self.trading_url)
            .field("data_url", &self.data_url)
            .field("feed", &self.feed)
            .field("key_id", &self.key_id)
            .finish()
    }
}

impl DataClient {
    /// A client of `trading_url` and `data_url` (no trailing path) reading `feed`, with
    /// `timeout` per request and a budget of [`REQUESTS_PER_MINUTE`]; `clock` is what a
    /// rate-limit reset time is measured from when the reply carries no `Date`.
    pub fn new(
        trading_url: &str,
        data_url: &str,
        feed: DataFeed,
        credentials: &AlpacaCredentials,
        timeout: Duration,
        clock: Arc<dyn Clock>,
    ) -> Result<DataClient, ClientBuildError> {
        let http = credentials.http_client(timeout)?;
        Ok(DataClient {
            http,
            trading_url: trading_url.trim_end_matches('/').to_string(),
            data_url: data_url.trim_end_matches('/').to_string(),
            feed,
            key_id: credentials.key_id.clone(),
            budget: Arc::new(RateBudget::per_minute(REQUESTS_PER_MINUTE)),
            clock,
            last_success: Arc::new(Mutex::new(None)),
        })
    }

    /// The same client with another request budget (tests; a paid plan's larger one).
    pub fn with_budget(self, budget: RateBudget) -> DataClient {
        DataClient { budget: Arc::new(budget), ..self }
    }

    pub fn feed(&self) -> DataFeed {
        self.feed
    }

    /// `GET /v2/assets?status=active&asset_class=us_equity`, filtered by [`universe_of`].
    pub async fn universe(&self) -> Result<Vec<UniverseAsset>, MarketDataError> {
        let url = format!("{}/v2/assets", self.trading_url);
        let assets: Vec<wire::Asset> =
            self.get(|| self.http.get(&url).query(&[("status", "active"), ("asset_class", "us_equity")])).await?;
        Ok(universe_of(assets))
    }

    /// `GET /v2/calendar?start=&end=`: the trading days between two dates, inclusive.
    pub async fn calendar(&self, start: NaiveDate, end: NaiveDate) -> Result<Vec<wire::CalendarDay>, MarketDataError> {
        let url = format!("{}/v2/calendar", self.trading_url);
        let (start, end) = (start.to_string(), end.to_string());
        self.get(|| self.http.get(&url).query(&[("start", start.as_str()), ("end", end.as_str())])).await
    }

    /// `GET /v2/clock`: whether the market is open, and its next open and close.
    pub async fn market_clock(&self) -> Result<wire::MarketClock, MarketDataError> {
        let url = format!("{}/v2/clock", self.trading_url);
        self.get(|| self.http.get(&url)).await
    }

    /// Whether Alpaca answers, for health: `GET /v2/clock` when the budget has a permit free
    /// now; while it is spent (a scan or a download took it), a probe must not wait for one
    /// (it would time out and report Alpaca down), so a request that succeeded within
    /// [`PING_SUCCESS_WINDOW`] stands for the answer.
    pub async fn ping(&self) -> Result<(), MarketDataError> {
        if self.budget.try_acquire() {
            let url = format!("{}/v2/clock", self.trading_url);
            return self.send::<wire::MarketClock>(|| self.http.get(&url), true).await.map(|_| ());
        }
        let last = *self.last_success.lock().unwrap_or_else(PoisonError::into_inner);
        let window = chrono::Duration::from_std(PING_SUCCESS_WINDOW).unwrap_or_default();
        match last {
            Some(at) if self.clock.now() - at < window => Ok(()),
            _ => Err(MarketDataError::Unavailable(
                "the request budget is spent and no Alpaca request succeeded in the last minute".into(),
            )),
        }
    }

    /// Snapshots of `symbols`, [`SNAPSHOT_BATCH`] per request; a symbol Alpaca has nothing of
    /// is absent from the map.
    pub async fn snapshots(&self, symbols: &[Symbol]) -> Result<BTreeMap<Symbol, wire::Snapshot>, MarketDataError> {
        let url = format!("{}/v2/stocks/snapshots", self.data_url);
        let mut snapshots = BTreeMap::new();
        for batch in symbols.chunks(SNAPSHOT_BATCH) {
            let list = join(batch);
            let page: BTreeMap<String, Option<wire::Snapshot>> = self
                .get(|| self.http.get(&url).query(&[("symbols", list.as_str()), ("feed", self.feed.as_str())]))
                .await?;
            for (name, snapshot) in page {
                if let (Ok(symbol), Some(snapshot)) = (Symbol::parse(&name), snapshot) {
                    snapshots.insert(symbol, snapshot);
                }
            }
        }
        Ok(snapshots)
    }

    /// Raw (unadjusted) bars of `symbols` starting in `[start, end)`, oldest first per symbol:
    /// [`BARS_SYMBOL_BATCH`] symbols per request, each followed through `next_page_token` until
    /// Alpaca gives none. A token Alpaca repeats is an error rather than a loop.
    pub async fn bars(
        &self,
        symbols: &[Symbol],
        timeframe: Timeframe,
        start: Timestamp,
        end: Timestamp,
    ) -> Result<BTreeMap<Symbol, Vec<Bar>>, MarketDataError> {
        self.bars_of_width(symbols, timeframe.into(), start, end).await
    }

    /// [`DataClient::bars`] of any [`BarWidth`] (a bar's `start` is its first minute).
    pub async fn bars_of_width(
        &self,
        symbols: &[Symbol],
        width: BarWidth,
        start: Timestamp,
        end: Timestamp,
    ) -> Result<BTreeMap<Symbol, Vec<Bar>>, MarketDataError> {
        let url = format!("{}/v2/stocks/bars", self.data_url);
        let frame = width.as_str();
        let from = start.to_rfc3339_opts(SecondsFormat::Secs, true);
        let until = end.to_rfc3339_opts(SecondsFormat::Secs, true);
        let limit = BARS_PAGE_LIMIT.to_string();
        let mut bars: BTreeMap<Symbol, Vec<Bar>> = BTreeMap::new();
        for batch in symbols.chunks(BARS_SYMBOL_BATCH) {
            let list = join(batch);
            let mut token: Option<String> = None;
            loop {
                let page: wire::BarsPage = self
                    .get(|| {
                        let mut query = vec![
                            ("symbols", list.as_str()),
                            ("timeframe", frame),
                            ("start", from.as_str()),
                            ("end", until.as_str()),
                            ("limit", limit.as_str()),
                            ("adjustment", "raw"),
                            ("feed", self.feed.as_str()),
                        ];
                        if let Some(token) = &token {
                            query.push(("page_token", token.as_str()));
                        }
                        self.http.get(&url).query(&query)
                    })
                    .await?;
                for (name, page_bars) in page.bars.unwrap_or_default() {
                    let Ok(symbol) = Symbol::parse(&name) else { continue };
                    let kept = page_bars.iter().map(wire::DataBar::bar).filter(|b| b.start >= start && b.start < end);
                    bars.entry(symbol).or_default().extend(kept);
                }
                match page.next_page_token.filter(|t| !t.is_empty()) {
                    Some(next) if token.as_deref() == Some(next.as_str()) => {
                        return Err(MarketDataError::Unavailable(format!("Alpaca repeated the bars page token {next}")))
                    }
                    Some(next) => token = Some(next),
                    None => break,
                }
            }
        }
        for series in bars.values_mut() {
            series.sort_by_key(|b| b.start);
            series.dedup_by_key(|b| b.start);
        }
        Ok(bars)
    }

    /// Sends the request `build` makes, within the budget, waiting out 429s.
    async fn get<T: DeserializeOwned>(&self, build: impl Fn() -> RequestBuilder) -> Result<T, MarketDataError> {
        self.send(build, false).await
    }

    /// [`DataClient::get`], the first permit already taken when `permitted`.
    async fn send<T: DeserializeOwned>(
        &self,
        build: impl Fn() -> RequestBuilder,
        mut permitted: bool,
    ) -> Result<T, MarketDataError> {
        let mut limited = 0;
        loop {
            if !std::mem::take(&mut permitted) {
                self.budget.acquire().await;
            }
            let response = build().send().await.map_err(transport_error)?;
            let status = response.status();
            let headers = response.headers().clone();
            let body = response.text().await.map_err(transport_error)?;
            if status.is_success() {
                let parsed = serde_json::from_str(&body)
                    .map_err(|e| MarketDataError::Unavailable(format!("unreadable Alpaca data reply: {e}")));
                if parsed.is_ok() {
                    *self.last_success.lock().unwrap_or_else(PoisonError::into_inner) = Some(self.clock.now());
                }
                return parsed;
            }
            if status == StatusCode::TOO_MANY_REQUESTS && limited < RATE_LIMIT_RETRIES {
                limited += 1;
                let wait = retry_after(&headers, self.clock.now()).unwrap_or(DEFAULT_RATE_LIMIT_WAIT);
                tracing::warn!(?wait, attempt = limited, "Alpaca data rate limit: waiting");
                tokio::time::sleep(wait).await;
                continue;
            }
            return Err(map_error(status, &body));
        }
    }
}

fn join(symbols: &[Symbol]) -> String {
    symbols.iter().map(Symbol::as_str).collect::<Vec<_>>().join(",")
}

/// A failed data reply as [`MarketDataError::Unavailable`], with the status and Alpaca's
/// message (`{"message": …}`, else the body's first 200 characters).
pub fn map_error(status: StatusCode, body: &str) -> MarketDataError {
    let message = serde_json::from_str::<serde_json::Value>(body)
        .ok()
        .and_then(|v| v.get("message").and_then(|m| m.as_str()).map(str::to_string))
        .unwrap_or_else(|| body.chars().take(200).collect());
    let kind = match status.as_u16() {
        429 => "rate limited",
        500..=599 => "server error",
        401 | 403 => "not authorized",
        _ => "refused",
    };
    MarketDataError::Unavailable(format!("Alpaca data {kind}: {} {message}", status.as_u16()))
}

fn transport_error(error: reqwest::Error) -> MarketDataError {
    let what = if error.is_timeout() {
        "timed out"
    } else if error.is_connect() {
        "connection failed"
    } else {
        "request failed"
    };
    MarketDataError::Unavailable(format!("Alpaca data {what}: {}", error.without_url()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::time::Instant;

    fn asset(symbol: &str, exchange: &str, tradable: bool) -> wire::Asset {
        wire::Asset {
            symbol: symbol.into(),
            name: None,
            exchange: exchange.into(),
            status: "active".into(),
            tradable,
            class: Some("us_equity".into()),
        }
    }

    #[test]
    fn the_universe_keeps_tradable_listed_symbols_core_accepts() {
        let assets = vec![
            asset("MSFT", "NASDAQ", true),
            asset("AAPL", "NASDAQ", true),
            asset("BRK.B", "NYSE", true),
            asset("OTCX", "OTC", true),
            asset("HALT", "NYSE", false),
            asset("BAD/WS", "NYSE", true),
            asset("SPY", "ARCA", true),
            asset("TOOLONGSYMBOL", "BATS", true),
            asset("aapl", "NASDAQ", true),
        ];
        let kept: Vec<String> = universe_of(assets).into_iter().map(|a| a.symbol.to_string()).collect();
        assert_eq!(kept, vec!["AAPL", "BRK.B", "MSFT", "SPY"]);
    }

    #[test]
    fn failed_replies_name_their_status_and_message() {
        let error = map_error(StatusCode::SERVICE_UNAVAILABLE, r#"{"message":"try later"}"#);
        assert_eq!(error.to_string(), "market data unavailable: Alpaca data server error: 503 try later");
        let error = map_error(StatusCode::FORBIDDEN, "forbidden");
        assert!(error.to_string().contains("not authorized: 403 forbidden"), "{error}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_permit_is_taken_now_or_not_at_all() {
        let budget = RateBudget::per_minute(2);
        assert!(budget.try_acquire());
        budget.acquire().await;
        assert!(!budget.try_acquire(), "two in the last minute");
        tokio::time::advance(Duration::from_secs(60)).await;
        assert!(budget.try_acquire());
    }

    #[tokio::test(start_paused = true)]
    async fn the_budget_waits_for_a_permit_instead_of_failing() {
        let budget = RateBudget::per_minute(2);
        let started = Instant::now();
        budget.acquire().await;
        tokio::time::advance(Duration::from_secs(20)).await;
        budget.acquire().await;
        assert_eq!(started.elapsed(), Duration::from_secs(20));
        budget.acquire().await;
        assert_eq!(started.elapsed(), Duration::from_secs(60), "the third waits for the first to age a minute");
        budget.acquire().await;
        assert_eq!(started.elapsed(), Duration::from_secs(80), "then for the next oldest");
    }

    /// While the budget is spent, the health ping does not wait for a permit: a success within
    /// the last minute answers for Alpaca; without one, it says the budget is spent.
    #[tokio::test]
    async fn the_ping_never_waits_on_a_spent_budget() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let asked = Arc::new(AtomicUsize::new(0));
        let counter = asked.clone();
        let app = axum::Router::new().route(
            "/v2/clock",
            axum::routing::get(move || {
                counter.fetch_add(1, Ordering::SeqCst);
                async {
                    r#"{"timestamp":"2026-11-25T15:30:00Z","is_open":true,"next_open":"2026-11-26T14:30:00Z","next_close":"2026-11-25T21:00:00Z"}"#
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        let at = "2026-11-25T15:30:00Z".parse().unwrap();
        let clock = Arc::new(tradeops_core::clock::ManualClock::new(at));
        let credentials = AlpacaCredentials { key_id: "AK".into(), secret_key: "secret".into() };
        let client = DataClient::new(&url, &url, DataFeed::Iex, &credentials, Duration::from_secs(5), clock.clone())
            .unwrap()
            .with_budget(RateBudget::per_minute(1));
        client.ping().await.unwrap();
        assert_eq!(asked.load(Ordering::SeqCst), 1);
        let started = Instant::now();
        client.ping().await.unwrap();
        assert_eq!(asked.load(Ordering::SeqCst), 1, "the budget is spent: the success of a moment ago stands");
        assert!(started.elapsed() < Duration::from_secs(1));
        clock.advance(chrono::Duration::seconds(61));
        let error = client.ping().await.unwrap_err();
        assert!(error.to_string().contains("request budget is spent"), "{error}");
    }
}
