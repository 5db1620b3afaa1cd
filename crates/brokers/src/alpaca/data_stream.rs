//! Alpaca's stock market-data stream (research/domain.md §1.8, `wss://stream.data.alpaca.markets
//! /v2/{feed}`): the WebSocket client that authenticates, subscribes the trades, quotes, minute
//! bars and trading statuses of the watched symbols (changed at any time through
//! [`MarketDataStream::set_watched`]), and folds what arrives into the [`LiveBook`] the adapter
//! reads snapshots and closed bars from, and the [`HaltBook`] it reads halts from. It reconnects with the trade stream's [`Backoff`],
//! resubscribes, pings an idle connection, and after every (re)connect — and for every symbol
//! newly watched — fills the minute bars it may have missed from REST ([`MinuteBarSource`]):
//! Alpaca's stream has no replay. Its connection's state is [`DataStreamState`].

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use chrono::NaiveDate;
use futures::{SinkExt, StreamExt};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_tungstenite::tungstenite::Message;
use tradeops_core::bars::minute_floor;
use tradeops_core::market::{Bar, Price, Quote, Timeframe};
use tradeops_core::{Clock, Symbol, Timestamp};
use tradeops_sim::profile::DayClock;

use super::data::DataClient;
use super::data_wire::{self as wire, StreamMessage};
use super::halts::HaltBook;
use super::stream::{Backoff, BackoffPolicy};
use crate::market::MarketDataError;

/// Completed minute bars kept per symbol (the radar reads the last 5; a chart's last half hour).
pub const KEPT_MINUTE_BARS: usize = 30;

// ---------------------------------------------------------------------------------------------
// The live book
// ---------------------------------------------------------------------------------------------

/// What the stream knows of one symbol.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SymbolLive {
    /// The latest trade's price and time.
    pub last_trade: Option<(Price, Timestamp)>,
    pub quote: Option<Quote>,
    /// Completed minute bars, oldest first, at most [`KEPT_MINUTE_BARS`], one per start.
    pub bars: Vec<Bar>,
}

/// The minute volumes of a symbol's current New York day, for its relative volume.
#[derive(Clone, Debug, Default)]
struct DayVolume {
    date: Option<NaiveDate>,
    /// Volume by bar start, of `date`'s bars only.
    by_minute: BTreeMap<Timestamp, u64>,
    /// Every minute of `date` up to the latest bar is held: a gap fill reached back to the
    /// day's start (or the previous day was complete and the stream carried on into this one)
    /// and no gap fill failed since.
    complete: bool,
}

#[derive(Debug, Default)]
struct Entry {
    live: SymbolLive,
    day: DayVolume,
}

/// The live state of every symbol the stream has heard of.
#[derive(Debug, Default)]
pub struct LiveBook {
    symbols: Mutex<HashMap<Symbol, Entry>>,
    /// Woken by each new trade: the feed steps the engine on it, so a stop the engine holds
    /// (CONTRACT §12) fires on the print that crosses it rather than at the next second.
    trades: tokio::sync::Notify,
}

impl LiveBook {
    pub fn get(&self, symbol: &Symbol) -> Option<SymbolLive> {
        self.lock().get(symbol).map(|e| e.live.clone())
    }

    /// A trade; an older one than the latest (out of order, or a gap fill's) leaves the last
    /// price as it is.
    pub fn on_trade(&self, symbol: &Symbol, trade: &wire::DataTrade) {
        let mut symbols = self.lock();
        let live = &mut symbols.entry(symbol.clone()).or_default().live;
        if live.last_trade.is_none_or(|(_, at)| trade.at >= at) {
            live.last_trade = Some((trade.price, trade.at));
            drop(symbols);
            self.trades.notify_one();
        }
    }

    /// Waits for the next trade the book takes (one taken since the last wait counts).
    pub async fn next_trade(&self) {
        self.trades.notified().await;
    }

    pub fn on_quote(&self, symbol: &Symbol, quote: &wire::DataQuote) {
        self.lock().entry(symbol.clone()).or_default().live.quote = Some(quote.quote());
    }

    /// A completed minute bar, in its place by start; a bar already held (the stream's and the
    /// gap fill's copy of the same minute) is replaced, never doubled. The first bar of a new
    /// New York day starts that day's volume.
    pub fn on_bar(&self, symbol: &Symbol, bar: Bar) {
        let mut symbols = self.lock();
        let entry = symbols.entry(symbol.clone()).or_default();
        let bars = &mut entry.live.bars;
        match bars.binary_search_by_key(&bar.start, |b| b.start) {
            Ok(i) => bars[i] = bar,
            Err(i) => bars.insert(i, bar),
        }
        if bars.len() > KEPT_MINUTE_BARS {
            let excess = bars.len() - KEPT_MINUTE_BARS;
            bars.drain(..excess);
        }
        let date = ny_date(bar.start);
        let day = &mut entry.day;
        if day.date.is_none_or(|d| date > d) {
            let carried = day.date.is_some() && day.complete;
            *day = DayVolume { date: Some(date), by_minute: BTreeMap::new(), complete: carried };
        }
        if day.date == Some(date) {
            day.by_minute.insert(bar.start, bar.volume);
        }
    }

    /// The bars of a gap fill of `[from, …)` on New York date `today`: held as
    /// [`LiveBook::on_bar`] holds them, and when `from` is at or before the day's start, the
    /// day's volume is complete.
    pub fn fill(&self, symbol: &Symbol, bars: Vec<Bar>, from: Timestamp, today: NaiveDate) {
        for bar in bars {
            self.on_bar(symbol, bar);
        }
        let mut symbols = self.lock();
        let day = &mut symbols.entry(symbol.clone()).or_default().day;
        if day.date.is_none_or(|d| today > d) {
            *day = DayVolume { date: Some(today), ..DayVolume::default() };
        }
        if day.date == Some(today) && from <= DayClock::for_date(today).start {
            day.complete = true;
        }
    }

    /// A gap fill of `symbols` failed: their day volumes miss minutes.
    pub fn gap_failed(&self, symbols: &[Symbol]) {
        let mut book = self.lock();
        for symbol in symbols {
            book.entry(symbol.clone()).or_default().day.complete = false;
        }
    }

    /// Shares of `symbol` traded on New York date `date` by the bars held, when the book holds
    /// every minute of that day so far; `None` otherwise.
    pub fn day_volume(&self, symbol: &Symbol, date: NaiveDate) -> Option<u64> {
        let symbols = self.lock();
        let day = &symbols.get(symbol)?.day;
        (day.date == Some(date) && day.complete).then(|| day.by_minute.values().sum())
    }

    /// The start of the latest minute bar held of `symbol`.
    pub fn last_bar_start(&self, symbol: &Symbol) -> Option<Timestamp> {
        self.lock().get(symbol).and_then(|e| e.live.bars.last()).map(|b| b.start)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Symbol, Entry>> {
        self.symbols.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The New York date of `at`.
pub fn ny_date(at: Timestamp) -> NaiveDate {
    at.with_timezone(&chrono_tz::America::New_York).date_naive()
}

// ---------------------------------------------------------------------------------------------
// Gap fill, health, configuration
// ---------------------------------------------------------------------------------------------

/// Minute bars from REST: what the stream missed while down (implemented by [`DataClient`]).
#[async_trait]
pub trait MinuteBarSource: Send + Sync {
    /// Minute bars of `symbols` starting in `[start, end)`, oldest first per symbol.
    async fn minute_bars(
        &self,
        symbols: &[Symbol],
        start: Timestamp,
        end: Timestamp,
    ) -> Result<BTreeMap<Symbol, Vec<Bar>>, MarketDataError>;
}

#[async_trait]
impl MinuteBarSource for DataClient {
    async fn minute_bars(
        &self,
        symbols: &[Symbol],
        start: Timestamp,
        end: Timestamp,
    ) -> Result<BTreeMap<Symbol, Vec<Bar>>, MarketDataError> {
        self.bars(symbols, Timeframe::Minute, start, end).await
    }
}

/// The stream's connection as health reads it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DataStreamState {
    /// Authenticated and subscribed.
    pub connected: bool,
    /// When the latest frame arrived (service clock).
    pub last_message_at: Option<Timestamp>,
    /// Successful connections so far (1 + reconnects).
    pub connections: u64,
    /// The latest failure (connect, authentication, an `error` message from Alpaca, a gap
    /// fill, a dropped connection); kept after a recovery so health can say what happened.
    pub last_error: Option<String>,
    /// Symbols subscribed on the current connection.
    pub subscribed: usize,
}

impl DataStreamState {
    pub fn reconnects(&self) -> u64 {
        self.connections.saturating_sub(1)
    }
}

#[derive(Debug, Default)]
struct Health(Mutex<DataStreamState>);

impl Health {
    fn snapshot(&self) -> DataStreamState {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    fn update(&self, change: impl FnOnce(&mut DataStreamState)) {
        change(&mut self.0.lock().unwrap_or_else(PoisonError::into_inner));
    }
}

/// Where and how the stream connects.
#[derive(Clone)]
pub struct DataStreamConfig {
    /// `wss://stream.data.alpaca.markets/v2/iex` (or `/sip`), or a stand-in.
    pub url: String,
    pub key_id: String,
    /// Never logged, never in an error (this type's `Debug` hides it).
    pub secret_key: String,
    pub backoff: BackoffPolicy,
    /// How long the handshake, the `connected` greeting and the authentication reply may each
    /// take.
    pub auth_timeout: Duration,
    /// A connection silent this long is pinged; silent as long again, it is replaced.
    pub idle_timeout: Duration,
    /// How far back a gap fill reaches at most (a symbol with no bar yet is filled from the
    /// New York day's start, within this bound).
    pub gap_lookback: Duration,
}

impl std::fmt::Debug for DataStreamConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DataStreamConfig")
            .field("url", &self.url)
            .field("key_id", &self.key_id)
            .field("secret_key", &"<hidden>")
            .field("backoff", &self.backoff)
            .field("auth_timeout", &self.auth_timeout)
            .field("idle_timeout", &self.idle_timeout)
            .field("gap_lookback", &self.gap_lookback)
            .finish()
    }
}

impl DataStreamConfig {
    /// Alpaca's stream of `feed` with the usual timings: 10 s to authenticate, a ping after
    /// 30 s of silence, gap fills reaching back a whole day.
    pub fn alpaca(feed: super::data::DataFeed, credentials: &super::rest::AlpacaCredentials) -> DataStreamConfig {
        DataStreamConfig {
            url: format!("wss://stream.data.alpaca.markets/v2/{}", feed.as_str()),
            key_id: credentials.key_id.clone(),
            secret_key: credentials.secret_key.clone(),
            backoff: BackoffPolicy::default(),
            auth_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(30),
            gap_lookback: Duration::from_secs(24 * 3600),
        }
    }
}

/// Why a connection ended (reported in [`DataStreamState::last_error`], then retried).
#[derive(Debug, thiserror::Error)]
pub enum DataStreamError {
    #[error("cannot connect to the market-data stream: {0}")]
    Connect(String),
    #[error("the market-data stream refused the connection or credentials ({code} {msg})")]
    Refused { code: i64, msg: String },
    #[error("no reply from the market-data stream within {0:?} ({1})")]
    Timeout(Duration, &'static str),
    #[error("the market-data stream failed: {0}")]
    Socket(String),
    #[error("the market-data stream closed")]
    Closed,
    #[error("the market-data stream was silent for {0:?} and did not answer a ping")]
    Silent(Duration),
}

// ---------------------------------------------------------------------------------------------
// The client
// ---------------------------------------------------------------------------------------------

/// The running stream: a task that connects, subscribes and folds until dropped.
#[derive(Debug)]
pub struct MarketDataStream {
    book: Arc<LiveBook>,
    halts: Arc<HaltBook>,
    health: Arc<Health>,
    watched: watch::Sender<BTreeSet<Symbol>>,
    task: JoinHandle<()>,
}

impl MarketDataStream {
    /// Starts the stream's task on the current runtime, watching nothing yet.
    pub fn spawn(config: DataStreamConfig, gap_fill: Arc<dyn MinuteBarSource>, clock: Arc<dyn Clock>) -> Self {
        let book = Arc::new(LiveBook::default());
        let halts = Arc::new(HaltBook::default());
        let health = Arc::new(Health::default());
        let (watched, receiver) = watch::channel(BTreeSet::new());
        let runner = Runner {
            backoff: Backoff::new(config.backoff.clone()),
            config,
            gap_fill,
            clock,
            book: book.clone(),
            halts: halts.clone(),
            health: health.clone(),
            watched: receiver,
            subscribed: BTreeSet::new(),
        };
        let task = tokio::spawn(runner.run());
        Self { book, halts, health, watched, task }
    }

    /// Makes `symbols` the subscription (trades, quotes, minute bars and trading statuses): the
    /// stream subscribes the new ones, unsubscribes the dropped ones (and forgets their halts)
    /// and fills the new ones' recent minute bars.
    pub fn set_watched(&self, symbols: impl IntoIterator<Item = Symbol>) {
        let symbols: BTreeSet<Symbol> = symbols.into_iter().collect();
        self.watched.send_if_modified(|current| {
            let changed = *current != symbols;
            *current = symbols;
            changed
        });
    }

    pub fn watched(&self) -> BTreeSet<Symbol> {
        self.watched.borrow().clone()
    }

    pub fn book(&self) -> &Arc<LiveBook> {
        &self.book
    }

    /// The halts of the streamed symbols.
    pub fn halts(&self) -> &Arc<HaltBook> {
        &self.halts
    }

    pub fn health(&self) -> DataStreamState {
        self.health.snapshot()
    }
}

impl Drop for MarketDataStream {
    fn drop(&mut self) {
        self.task.abort();
    }
}

type Socket = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

struct Runner {
    config: DataStreamConfig,
    gap_fill: Arc<dyn MinuteBarSource>,
    clock: Arc<dyn Clock>,
    book: Arc<LiveBook>,
    halts: Arc<HaltBook>,
    health: Arc<Health>,
    backoff: Backoff,
    watched: watch::Receiver<BTreeSet<Symbol>>,
    /// Subscribed on the current connection.
    subscribed: BTreeSet<Symbol>,
}

impl Runner {
    async fn run(mut self) {
        loop {
            self.subscribed.clear();
            let error = match self.connect().await {
                Ok(socket) => {
                    self.backoff.reset();
                    let subscribed = self.subscribed.len();
                    self.health.update(|s| {
                        s.connected = true;
                        s.connections += 1;
                        s.subscribed = subscribed;
                    });
                    tracing::info!(url = %self.config.url, subscribed, "market-data stream connected");
                    let symbols: Vec<Symbol> = self.subscribed.iter().cloned().collect();
                    self.fill_gap(&symbols).await;
                    let error = self.read(socket).await;
                    self.halts.connection_lost();
                    self.health.update(|s| {
                        s.connected = false;
                        s.subscribed = 0;
                    });
                    error
                }
                Err(error) => error,
            };
            if matches!(error, DataStreamError::Closed) && self.watched.has_changed().is_err() {
                return; // The adapter is gone.
            }
            tracing::warn!(%error, "market-data stream down; reconnecting");
            let message = error.to_string();
            self.health.update(|s| s.last_error = Some(message));
            tokio::time::sleep(self.backoff.next_delay()).await;
        }
    }

    /// Connects, waits for the greeting, authenticates and subscribes the watched symbols.
    async fn connect(&mut self) -> Result<Socket, DataStreamError> {
        let timeout = self.config.auth_timeout;
        let (mut socket, _) = tokio::time::timeout(timeout, tokio_tungstenite::connect_async(self.config.url.as_str()))
            .await
            .map_err(|_| DataStreamError::Timeout(timeout, "WebSocket handshake"))?
            .map_err(|e| DataStreamError::Connect(e.to_string()))?;
        tokio::time::timeout(timeout, expect_success(&mut socket, "connected"))
            .await
            .map_err(|_| DataStreamError::Timeout(timeout, "connected greeting"))??;
        let auth = serde_json::json!({"action": "auth", "key": self.config.key_id, "secret": self.config.secret_key});
        send(&mut socket, &auth).await?;
        tokio::time::timeout(timeout, expect_success(&mut socket, "authenticated"))
            .await
            .map_err(|_| DataStreamError::Timeout(timeout, "authentication"))??;
        let watched = self.watched.borrow_and_update().clone();
        self.resubscribe(&mut socket, watched).await?;
        Ok(socket)
    }

    /// Subscribes what `watched` adds to the subscription and unsubscribes what it drops (and
    /// forgets the halts of any symbol not watched, dropped while connected or while down);
    /// returns the added symbols.
    async fn resubscribe(
        &mut self,
        socket: &mut Socket,
        watched: BTreeSet<Symbol>,
    ) -> Result<Vec<Symbol>, DataStreamError> {
        let added: Vec<Symbol> = watched.difference(&self.subscribed).cloned().collect();
        let dropped: Vec<Symbol> = self.subscribed.difference(&watched).cloned().collect();
        if !dropped.is_empty() {
            send(socket, &channels("unsubscribe", &dropped)).await?;
        }
        if !added.is_empty() {
            send(socket, &channels("subscribe", &added)).await?;
        }
        self.halts.keep_only(&watched);
        self.subscribed = watched;
        Ok(added)
    }

    /// Fills the minute bars of `symbols` up to the current minute from REST: from the minute
    /// after the latest bar held of each (the New York day's start for a symbol with none, so
    /// that its day volume is whole), never from more than `gap_lookback` back. A failure is
    /// reported in health and the stream goes on (the next reconnect fills again).
    async fn fill_gap(&mut self, symbols: &[Symbol]) {
        if symbols.is_empty() {
            return;
        }
        let now = self.clock.now();
        let today = ny_date(now);
        let end = minute_floor(now);
        let day_start = DayClock::for_date(today).start;
        let earliest = end - chrono::Duration::from_std(self.config.gap_lookback).unwrap_or_default();
        let start = symbols
            .iter()
            .map(|s| self.book.last_bar_start(s).map_or(day_start, |t| t + chrono::Duration::minutes(1)))
            .min()
            .unwrap_or(day_start)
            .max(earliest);
        if start >= end {
            return;
        }
        match self.gap_fill.minute_bars(symbols, start, end).await {
            Ok(mut bars) => {
                let count: usize = bars.values().map(Vec::len).sum();
                for symbol in symbols {
                    self.book.fill(symbol, bars.remove(symbol).unwrap_or_default(), start, today);
                }
                tracing::info!(symbols = symbols.len(), bars = count, %start, %end, "market-data gap filled");
            }
            Err(error) => {
                tracing::warn!(%error, "market-data gap fill failed");
                self.book.gap_failed(symbols);
                let message = format!("gap fill failed: {error}");
                self.health.update(|s| s.last_error = Some(message));
            }
        }
    }

    /// Reads frames and follows the watched set until the connection ends or stays silent
    /// through a ping.
    async fn read(&mut self, mut socket: Socket) -> DataStreamError {
        let idle = self.config.idle_timeout;
        let mut pinged = false;
        loop {
            let frame = tokio::select! {
                changed = self.watched.changed() => {
                    if changed.is_err() {
                        return DataStreamError::Closed;
                    }
                    let watched = self.watched.borrow_and_update().clone();
                    match self.resubscribe(&mut socket, watched).await {
                        Ok(added) => {
                            let subscribed = self.subscribed.len();
                            self.health.update(|s| s.subscribed = subscribed);
                            self.fill_gap(&added).await;
                        }
                        Err(error) => return error,
                    }
                    continue;
                }
                frame = tokio::time::timeout(idle, socket.next()) => frame,
            };
            let frame = match frame {
                Ok(Some(frame)) => frame,
                Ok(None) => return DataStreamError::Closed,
                Err(_) if pinged => return DataStreamError::Silent(idle),
                Err(_) => {
                    if let Err(error) = socket.send(Message::Ping(Default::default())).await {
                        return DataStreamError::Socket(error.to_string());
                    }
                    pinged = true;
                    continue;
                }
            };
            pinged = false;
            let message = match frame {
                Ok(message) => message,
                Err(e) => return DataStreamError::Socket(e.to_string()),
            };
            let bytes: &[u8] = match &message {
                Message::Text(text) => text.as_bytes(),
                Message::Binary(bytes) => bytes,
                Message::Close(_) => return DataStreamError::Closed,
                Message::Ping(_) | Message::Pong(_) | Message::Frame(_) => continue,
            };
            let now = self.clock.now();
            self.health.update(|s| s.last_message_at = Some(now));
            for message in parse_frame(bytes) {
                self.apply(message);
            }
        }
    }

    fn apply(&self, message: StreamMessage) {
        match message {
            StreamMessage::Trade { symbol, trade } => {
                if let Ok(symbol) = Symbol::parse(&symbol) {
                    self.book.on_trade(&symbol, &trade);
                }
            }
            StreamMessage::Quote { symbol, quote } => {
                if let Ok(symbol) = Symbol::parse(&symbol) {
                    self.book.on_quote(&symbol, &quote);
                }
            }
            StreamMessage::Bar { symbol, bar } => {
                if let Ok(symbol) = Symbol::parse(&symbol) {
                    self.book.on_bar(&symbol, bar.bar());
                }
            }
            // Only a subscribed symbol's: a status that crosses an unsubscribe would hold a halt
            // no later status could end.
            StreamMessage::Status { symbol, status } => {
                if let Some(symbol) = Symbol::parse(&symbol).ok().filter(|s| self.subscribed.contains(s)) {
                    self.halts.on_status(&symbol, &status, self.clock.now());
                }
            }
            StreamMessage::Error { code, msg } => {
                tracing::warn!(code, %msg, "market-data stream error message");
                let message = format!("Alpaca stream error {code} {msg}");
                self.health.update(|s| s.last_error = Some(message));
            }
            StreamMessage::Subscription { trades, quotes, bars, statuses } => {
                tracing::debug!(
                    trades = trades.len(),
                    quotes = quotes.len(),
                    bars = bars.len(),
                    statuses = statuses.len(),
                    "subscription"
                );
            }
            StreamMessage::Success { .. } | StreamMessage::Other => {}
        }
    }
}

/// `{"action": action, "trades": symbols, "quotes": symbols, "bars": symbols, "statuses":
/// symbols}`.
fn channels(action: &str, symbols: &[Symbol]) -> serde_json::Value {
    let list: Vec<&str> = symbols.iter().map(Symbol::as_str).collect();
    serde_json::json!({"action": action, "trades": list, "quotes": list, "bars": list, "statuses": list})
}

/// The messages of one frame (a JSON array, or a single object); unreadable elements are
/// logged and skipped, so one message Alpaca changes never loses its neighbours.
pub fn parse_frame(bytes: &[u8]) -> Vec<StreamMessage> {
    let values: Vec<serde_json::Value> = match serde_json::from_slice::<serde_json::Value>(bytes) {
        Ok(serde_json::Value::Array(values)) => values,
        Ok(value) => vec![value],
        Err(e) => {
            tracing::warn!(error = %e, "unreadable market-data frame: skipped");
            return Vec::new();
        }
    };
    values
        .into_iter()
        .filter_map(|value| match serde_json::from_value(value) {
            Ok(message) => Some(message),
            Err(e) => {
                tracing::warn!(error = %e, "unreadable market-data message: skipped");
                None
            }
        })
        .collect()
}

async fn send(socket: &mut Socket, message: &serde_json::Value) -> Result<(), DataStreamError> {
    socket.send(Message::Text(message.to_string().into())).await.map_err(|e| DataStreamError::Socket(e.to_string()))
}

/// Waits for `{"T":"success","msg":expected}`; an `error` message first is a refusal.
async fn expect_success(socket: &mut Socket, expected: &str) -> Result<(), DataStreamError> {
    while let Some(frame) = socket.next().await {
        let message = frame.map_err(|e| DataStreamError::Socket(e.to_string()))?;
        let bytes: &[u8] = match &message {
            Message::Text(text) => text.as_bytes(),
            Message::Binary(bytes) => bytes,
            Message::Close(_) => return Err(DataStreamError::Closed),
            _ => continue,
        };
        for message in parse_frame(bytes) {
            match message {
                StreamMessage::Success { msg } if msg == expected => return Ok(()),
                StreamMessage::Error { code, msg } => return Err(DataStreamError::Refused { code, msg }),
                _ => {}
            }
        }
    }
    Err(DataStreamError::Closed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{TimeZone, Utc};

    fn at(minute: u32) -> Timestamp {
        Utc.with_ymd_and_hms(2026, 11, 25, 15, minute, 0).unwrap()
    }

    fn bar(minute: u32, close: i64) -> Bar {
        let price = Price::from_cents(close);
        Bar { start: at(minute), open: price, high: price, low: price, close: price, volume: 100 }
    }

    #[test]
    fn bars_are_kept_in_order_once_per_minute_and_bounded() {
        let book = LiveBook::default();
        let abcd = Symbol::parse("ABCD").unwrap();
        book.on_bar(&abcd, bar(2, 100));
        book.on_bar(&abcd, bar(1, 99));
        book.on_bar(&abcd, bar(2, 101));
        let bars = book.get(&abcd).unwrap().bars;
        assert_eq!(bars, vec![bar(1, 99), bar(2, 101)]);
        for minute in 3..(KEPT_MINUTE_BARS as u32 + 10) {
            book.on_bar(&abcd, bar(minute, 100));
        }
        let bars = book.get(&abcd).unwrap().bars;
        assert_eq!(bars.len(), KEPT_MINUTE_BARS);
        assert_eq!(book.last_bar_start(&abcd), Some(at(KEPT_MINUTE_BARS as u32 + 9)));
    }

    #[test]
    fn the_day_volume_counts_each_minute_once_and_only_when_the_day_is_whole() {
        let book = LiveBook::default();
        let abcd = Symbol::parse("ABCD").unwrap();
        let today = ny_date(at(0));
        book.on_bar(&abcd, bar(1, 100));
        assert_eq!(book.day_volume(&abcd, today), None, "no fill from the day's start yet");
        book.fill(&abcd, vec![bar(0, 100), bar(1, 100)], DayClock::for_date(today).start, today);
        assert_eq!(book.day_volume(&abcd, today), Some(200));
        book.on_bar(&abcd, bar(2, 100));
        assert_eq!(book.day_volume(&abcd, today), Some(300));
        book.gap_failed(std::slice::from_ref(&abcd));
        assert_eq!(book.day_volume(&abcd, today), None);
        // A fill from later in the day does not make it whole again.
        book.fill(&abcd, vec![bar(3, 100)], at(3), today);
        assert_eq!(book.day_volume(&abcd, today), None);
        // The next day's first bar, on a whole day, carries on whole.
        let other = Symbol::parse("WXYZ").unwrap();
        book.fill(&other, vec![bar(5, 100)], DayClock::for_date(today).start, today);
        let tomorrow = Utc.with_ymd_and_hms(2026, 11, 26, 9, 0, 0).unwrap();
        book.on_bar(&other, Bar { start: tomorrow, ..bar(0, 100) });
        assert_eq!(book.day_volume(&other, ny_date(tomorrow)), Some(100));
        assert_eq!(book.day_volume(&other, today), None);
    }

    #[test]
    fn an_older_trade_does_not_replace_the_last_price() {
        let book = LiveBook::default();
        let abcd = Symbol::parse("ABCD").unwrap();
        let trade = |minute, cents| wire::DataTrade { at: at(minute), price: Price::from_cents(cents), size: 1 };
        book.on_trade(&abcd, &trade(5, 500));
        book.on_trade(&abcd, &trade(4, 400));
        assert_eq!(book.get(&abcd).unwrap().last_trade, Some((Price::from_cents(500), at(5))));
    }

    #[test]
    fn a_frame_keeps_its_readable_messages() {
        let frame = br#"[{"T":"t","S":"ABCD","p":"not a number","t":"2026-11-25T15:00:00Z"},
            {"T":"q","S":"ABCD","bp":1.5,"bs":1,"ap":1.6,"as":1,"t":"2026-11-25T15:00:00Z"}]"#;
        let messages = parse_frame(frame);
        assert_eq!(messages.len(), 1);
        assert!(matches!(messages[0], StreamMessage::Quote { .. }));
        assert!(parse_frame(b"not json").is_empty());
    }

    #[test]
    fn subscriptions_name_the_four_channels() {
        let symbols = [Symbol::parse("AB").unwrap(), Symbol::parse("CD").unwrap()];
        let list = ["AB", "CD"];
        assert_eq!(
            channels("subscribe", &symbols),
            serde_json::json!({"action": "subscribe", "trades": list, "quotes": list, "bars": list, "statuses": list})
        );
    }

    #[test]
    fn the_config_never_shows_the_secret() {
        let credentials =
            super::super::rest::AlpacaCredentials { key_id: "AK1".into(), secret_key: "very-secret".into() };
        let config = DataStreamConfig::alpaca(super::super::data::DataFeed::Sip, &credentials);
        assert_eq!(config.url, "wss://stream.data.alpaca.markets/v2/sip");
        assert!(!format!("{config:?}").contains("very-secret"));
    }
}
