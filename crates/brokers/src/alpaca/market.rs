//! The Alpaca market behind [`MarketData`]: [`AlpacaMarketData`] assembles the [`DataClient`]
//! (universe, calendar, clock, snapshots, bars) and the [`MarketDataStream`] (live trades,
//! quotes, minute bars and halts of the watched symbols), and scans the whole universe for the
//! momentum radar through core's [`radar::scan`], so that filters and ranking are the simulated
//! radar's. Alpaca gives no float and no sector: they come from the imported reference data
//! ([`ReferenceData`], shared with the service), and are unknown (`None`) where nothing was
//! imported.
//!
//! The radar's pre-market columns (CONTRACT §12) come from each symbol's minute bars of the day
//! (Alpaca's bars include the extended-hours trades), tallied by core ([`DayTally`]) on the NYSE
//! calendar's trading day: each scan's snapshot brings the minute just ended, and the minutes no
//! scan saw (before the service's first scan of the day, or a scan missed) are read from the
//! bars endpoint at the next scan ([`DayTallies`]).

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use chrono::{Duration, NaiveDate};
use tokio::time::Instant;
use tradeops_core::bars::minute_floor;
use tradeops_core::calendar::{MarketCalendar, TradingDay};
use tradeops_core::market::{Bar, Price, SymbolHalt, Timeframe};
use tradeops_core::radar::{self, DayTally, RadarInput};
use tradeops_core::settings::{MarketCalendarKind, MomentumRadarSettings};
use tradeops_core::{Clock, Symbol, Timestamp};
use tradeops_sim::profile::{expected_cum_fraction, DayClock};

use super::data::{BarWidth, DataClient, DataFeed, UniverseAsset};
use super::data_stream::{ny_date, DataStreamConfig, DataStreamState, MarketDataStream};
use super::data_wire as wire;
use super::halts::Halts;
use super::rest::{AlpacaCredentials, ClientBuildError};
use crate::market::{closed_bars, ClosedBar, Instrument, MarketData, MarketDataError, Snapshot};
use crate::reference::ReferenceData;
use crate::simulated::live::{RadarScan, AVERAGE_VOLUME_DAYS, MAX_RADAR_ROWS};

/// How long a symbol an operator looked at ([`MarketData::show`]: its quote, its chart) stays
/// streamed after the last look (service clock).
pub const SHOWN_FOR: Duration = Duration::minutes(5);

/// How long a REST snapshot is served again by [`MarketData::snapshot`] (service clock).
pub const REST_SNAPSHOT_TTL: Duration = Duration::seconds(5);
/// How long a successful [`MarketData::ping`] stands: health probes every couple of seconds
/// (every 100 ms in tests), and each real ping is a request of the 200-a-minute budget the
/// scans, snapshots and bars share. A failed ping stands for [`PING_FAILURE_TTL`].
pub const PING_TTL: Duration = Duration::seconds(10);
pub const PING_FAILURE_TTL: Duration = Duration::seconds(2);
/// How far ahead [`AlpacaMarketData::check_calendar`] compares Alpaca's sessions with core's.
pub const CALENDAR_CHECK_DAYS: i64 = 30;
/// Calendar days of daily bars asked for to find [`AVERAGE_VOLUME_DAYS`] trading days (weekends
/// and holidays included with room to spare).
const DAILY_HISTORY_CALENDAR_DAYS: i64 = 2 * AVERAGE_VOLUME_DAYS as i64 + 10;

/// Where the adapter reaches Alpaca.
#[derive(Clone, Debug)]
pub struct AlpacaDataConfig {
    /// The Trading API (`https://paper-api.alpaca.markets` or `https://api.alpaca.markets`):
    /// assets, calendar, clock.
    pub trading_url: String,
    /// The Market Data API (`https://data.alpaca.markets`).
    pub data_url: String,
    pub feed: DataFeed,
    /// Per REST request.
    pub timeout: std::time::Duration,
    /// The stock stream; `None` reads every snapshot from REST.
    pub stream: Option<DataStreamConfig>,
}

impl AlpacaDataConfig {
    /// Alpaca's hosts for `feed`, paper trading's reference host, 10 s requests, and the
    /// stream of [`DataStreamConfig::alpaca`].
    pub fn alpaca_paper(feed: DataFeed, credentials: &AlpacaCredentials) -> AlpacaDataConfig {
        AlpacaDataConfig {
            trading_url: "https://paper-api.alpaca.markets".into(),
            data_url: "https://data.alpaca.markets".into(),
            feed,
            timeout: std::time::Duration::from_secs(10),
            stream: Some(DataStreamConfig::alpaca(feed, credentials)),
        }
    }
}

/// The expected fraction of an ordinary day's volume traded by `now`, from the simulated
/// market's intraday profile, exactly as its live radar computes it: the New York date's
/// [`DayClock`] and the whole minutes since its midnight.
pub fn expected_fraction_at(now: Timestamp) -> f64 {
    let clock = DayClock::for_date(ny_date(now));
    let minute = (now - clock.start).num_minutes().clamp(0, i64::from(clock.minutes)) as u32;
    expected_cum_fraction(&clock, minute)
}

/// A symbol's day as a snapshot tells it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DayFigures {
    /// The previous regular session's close.
    pub prev_close: Price,
    /// The last trade (or the latest daily close when there is none).
    pub last: Price,
    /// Shares traded today (0 before today's first bar).
    pub volume: u64,
    /// The snapshot's latest minute bar, when it is today's.
    pub minute_bar: Option<Bar>,
}

/// Reads a snapshot as of New York date `today`: when its daily bar is today's, the previous
/// close is the previous daily bar's close and the volume the daily bar's; when the daily bar
/// is an earlier session's (before today's first trade), that session is the previous one and
/// the volume is 0. `None` without a previous close or a price.
pub fn day_figures(snapshot: &wire::Snapshot, today: NaiveDate) -> Option<DayFigures> {
    let daily_today = snapshot.daily_bar.filter(|b| ny_date(b.start) == today);
    let (prev_close, volume) = match daily_today {
        Some(daily) => (snapshot.prev_daily_bar?.close, daily.volume),
        None => (snapshot.daily_bar.or(snapshot.prev_daily_bar)?.close, 0),
    };
    let last = snapshot.latest_trade.map(|t| t.price).or(daily_today.map(|b| b.close)).unwrap_or(prev_close);
    let minute_bar = snapshot.minute_bar.filter(|b| ny_date(b.start) == today).map(|b| b.bar());
    Some(DayFigures { prev_close, last, volume, minute_bar })
}

/// The calendar of Alpaca's market: a real exchange's, which the service's calendar is too with
/// Alpaca market data (`runtime.market_calendar` is held at `NYSE` there, CONTRACT §12).
const CALENDAR: MarketCalendar = MarketCalendar::new(MarketCalendarKind::Nyse);

/// Today's minute bars folded into each symbol's [`DayTally`] on the NYSE trading day. A scan 2 s
/// after a minute boundary finds in each snapshot the symbol's latest minute bar: the minute just
/// ended, when the symbol traded in it (Alpaca computes a minute's bar a second after it ends).
/// So, scanning every minute, every minute before the scan's is folded in once; what no scan saw
/// is read from the bars endpoint ([`catch_up_spans`]) before the scan's own bars are folded.
#[derive(Debug)]
pub struct DayTallies {
    day: TradingDay,
    /// Every minute before this one is folded in for the `known` symbols.
    through: Timestamp,
    /// The symbols tallied since the pre-market open (whether they traded or not).
    known: HashSet<Symbol>,
    by_symbol: HashMap<Symbol, DayTally>,
}

impl DayTallies {
    /// A trading day's tallies before anything is folded in.
    pub fn new(day: TradingDay) -> DayTallies {
        DayTallies { day, through: day.pre_market_open, known: HashSet::new(), by_symbol: HashMap::new() }
    }

    /// Nothing after the regular close counts for a column: the minutes up to `now`'s, and no
    /// later than that.
    fn until(&self, now: Timestamp) -> Timestamp {
        minute_floor(now).min(self.day.regular_close)
    }

    /// The minutes the bars endpoint must give before a scan at `now` of `symbols`: for the
    /// symbols not tallied yet, the day so far; for the others, the minutes since `through`
    /// that the snapshots of `now` (the minute just ended) do not bring. Each as
    /// `(symbols, from, to)`.
    pub fn missing(&self, symbols: &[Symbol], now: Timestamp) -> Vec<(Vec<Symbol>, Timestamp, Timestamp)> {
        let until = self.until(now);
        let (known, fresh): (Vec<Symbol>, Vec<Symbol>) = symbols.iter().cloned().partition(|s| self.known.contains(s));
        let mut missing = Vec::new();
        if !fresh.is_empty() && self.day.pre_market_open < until {
            missing.push((fresh, self.day.pre_market_open, until));
        }
        if !known.is_empty() && self.through < until - Duration::minutes(1) {
            missing.push((known, self.through, until));
        }
        missing
    }

    /// Folds in a scan at `now` of `symbols`: `caught_up`, the bars the endpoint gave for
    /// [`DayTallies::missing`] (each symbol's oldest first), then `latest`, each symbol's newest
    /// minute bar from its snapshot, where no bar folded in covers its minute already (a
    /// half-hour caught up holds the minutes in it: a bar's width is not known to the tally);
    /// and marks `symbols` tallied through `now`'s minute.
    pub fn fold<'a>(
        &mut self,
        caught_up: impl IntoIterator<Item = (&'a Symbol, &'a Bar)>,
        latest: impl IntoIterator<Item = (&'a Symbol, &'a Bar)>,
        symbols: &[Symbol],
        now: Timestamp,
    ) {
        let until = self.until(now);
        // Caught up (new, or a minute missed): covered to `until`; else to `through`.
        let caught_up_known = self.through < until - Duration::minutes(1);
        let covered = |known: bool| if known && !caught_up_known { self.through } else { until };
        let latest: Vec<(&Symbol, &Bar)> =
            latest.into_iter().filter(|(symbol, bar)| bar.start >= covered(self.known.contains(*symbol))).collect();
        for (symbol, bar) in caught_up.into_iter().chain(latest) {
            self.by_symbol.entry(symbol.clone()).or_default().add(bar, &self.day);
        }
        self.known.extend(symbols.iter().cloned());
        self.through = self.through.max(until);
    }

    /// The tally of `symbol` (nothing traded: the default).
    pub fn of(&self, symbol: &Symbol) -> DayTally {
        self.by_symbol.get(symbol).copied().unwrap_or_default()
    }
}

/// How the minutes `[from, to)` are read: the whole half-hours as 30-minute bars (a morning is a
/// dozen bars a symbol, 500 symbols a page: the universe in one request per batch), the minutes
/// either side as minute bars. Half-hours start on the clock's :00 and :30, as New York's
/// pre-market and regular opens do, so no bar straddles one ([`DayTally::add`]).
pub fn catch_up_spans(from: Timestamp, to: Timestamp) -> Vec<(BarWidth, Timestamp, Timestamp)> {
    let half_hour = Duration::minutes(30);
    let floor = |t: Timestamp| chrono::DurationRound::duration_trunc(t, half_hour).unwrap_or(t);
    let first = if floor(from) == from { from } else { floor(from) + half_hour }.min(to);
    let last = floor(to).max(first);
    [(BarWidth::Minute, from, first), (BarWidth::HalfHour, first, last), (BarWidth::Minute, last, to)]
        .into_iter()
        .filter(|(_, start, end)| start < end)
        .collect()
}

/// Average daily volumes of one date's previous trading days.
#[derive(Debug)]
struct DailyHistory {
    date: NaiveDate,
    average_volume: HashMap<Symbol, u64>,
}

/// Alpaca's market data as tradeops reads it. Build it with [`AlpacaMarketData::new`], load the
/// universe with [`AlpacaMarketData::load_universe`], then choose the streamed symbols with
/// [`AlpacaMarketData::set_watched`] and scan with [`AlpacaMarketData::scan`].
pub struct AlpacaMarketData {
    client: Arc<DataClient>,
    stream: Option<MarketDataStream>,
    reference: Arc<ReferenceData>,
    clock: Arc<dyn Clock>,
    universe: Mutex<Arc<Vec<UniverseAsset>>>,
    daily: Mutex<Option<Arc<DailyHistory>>>,
    /// Serialises the daily history's refresh (one fetch per day, however many scans ask).
    daily_refresh: tokio::sync::Mutex<()>,
    /// The latest figures of each symbol, from the latest scan or REST snapshot.
    day: Mutex<HashMap<Symbol, DayFigures>>,
    /// Today's bars tallied for the radar's pre-market columns (`None` on a day the exchange
    /// does not trade); held across a scan's catch-up requests.
    tallies: tokio::sync::Mutex<Option<DayTallies>>,
    /// REST snapshots served by [`MarketData::snapshot`], and when they were fetched.
    rest_snapshots: Mutex<HashMap<Symbol, (Timestamp, Snapshot)>>,
    /// The latest real ping: when (service clock) and its failure, if it failed.
    last_ping: Mutex<Option<(Timestamp, Option<String>)>>,
    /// The latest comparison of Alpaca's calendar with core's NYSE calendar.
    calendar_check: Mutex<Option<CalendarCheck>>,
    /// What the stream follows: the symbols the engine follows ([`AlpacaMarketData::set_watched`])
    /// and those an operator looked at within [`SHOWN_FOR`], with when they were last looked at.
    subscription: Mutex<Subscription>,
}

/// The stream's symbols, by why they are streamed.
#[derive(Default)]
struct Subscription {
    followed: BTreeSet<Symbol>,
    shown: BTreeMap<Symbol, Timestamp>,
}

impl Subscription {
    /// The symbols to stream at `now`, forgetting the looks older than [`SHOWN_FOR`].
    fn symbols(&mut self, now: Timestamp) -> BTreeSet<Symbol> {
        self.shown.retain(|_, at| now - *at < SHOWN_FOR);
        self.followed.iter().chain(self.shown.keys()).cloned().collect()
    }
}

pub use crate::market::CalendarCheck;

/// A clock skew beyond this is logged as a warning by the feed.
pub const CLOCK_SKEW_WARNING_MS: i64 = 2_000;

/// The dates in `[from, to]` on which Alpaca's sessions `days` and core's NYSE calendar
/// disagree: a session one has and the other not (a holiday, an unscheduled closure), or a
/// different regular open or close (an early close). Times are New York's `HH:MM`.
pub fn calendar_mismatches(days: &[wire::CalendarDay], from: NaiveDate, to: NaiveDate) -> Vec<String> {
    use tradeops_core::calendar::MarketCalendar;
    use tradeops_core::settings::MarketCalendarKind;
    let nyse = MarketCalendar::new(MarketCalendarKind::Nyse);
    let hhmm = |t: Timestamp| t.with_timezone(&chrono_tz::America::New_York).format("%H:%M").to_string();
    let alpaca: BTreeMap<NaiveDate, &wire::CalendarDay> =
        days.iter().filter(|d| d.date >= from && d.date <= to).map(|d| (d.date, d)).collect();
    let mut mismatches = Vec::new();
    let mut date = from;
    while date <= to {
        let core = nyse.trading_day(date).map(|d| (hhmm(d.regular_open), hhmm(d.regular_close)));
        let theirs = alpaca.get(&date).map(|d| (d.open.clone(), d.close.clone()));
        match (theirs, core) {
            (None, None) => {}
            (None, Some((open, close))) => {
                mismatches.push(format!("{date}: Alpaca has no session; the NYSE calendar trades {open}-{close}"))
            }
            (Some((open, close)), None) => {
                mismatches.push(format!("{date}: Alpaca trades {open}-{close}; the NYSE calendar has no session"))
            }
            (Some(theirs), Some(core)) if theirs != core => mismatches.push(format!(
                "{date}: Alpaca trades {}-{}; the NYSE calendar {}-{}",
                theirs.0, theirs.1, core.0, core.1
            )),
            _ => {}
        }
        date = match date.succ_opt() {
            Some(next) => next,
            None => break,
        };
    }
    mismatches
}

impl std::fmt::Debug for AlpacaMarketData {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AlpacaMarketData")
            .field("client", &self.client)
            .field("stream", &self.stream.as_ref().map(MarketDataStream::health))
            .field("universe", &self.universe().len())
            .field("reference", &self.reference.current().len())
            .finish()
    }
}

impl AlpacaMarketData {
    /// The adapter over `client` and, when given, `stream` (without one, snapshots come from
    /// REST); `reference` gives sectors and floats.
    pub fn new(
        client: Arc<DataClient>,
        stream: Option<MarketDataStream>,
        reference: Arc<ReferenceData>,
        clock: Arc<dyn Clock>,
    ) -> AlpacaMarketData {
        AlpacaMarketData {
            client,
            stream,
            reference,
            clock,
            universe: Mutex::new(Arc::new(Vec::new())),
            daily: Mutex::new(None),
            daily_refresh: tokio::sync::Mutex::new(()),
            day: Mutex::new(HashMap::new()),
            tallies: tokio::sync::Mutex::new(None),
            rest_snapshots: Mutex::new(HashMap::new()),
            last_ping: Mutex::new(None),
            calendar_check: Mutex::new(None),
            subscription: Mutex::new(Subscription::default()),
        }
    }

    /// Builds the data client of `config` and, when it has a stream, starts the stream on the
    /// current runtime (its gap fills read the same client). The universe is not loaded yet:
    /// call [`AlpacaMarketData::load_universe`] (at start, and once a trading day).
    pub fn connect(
        config: AlpacaDataConfig,
        credentials: &AlpacaCredentials,
        reference: Arc<ReferenceData>,
        clock: Arc<dyn Clock>,
    ) -> Result<AlpacaMarketData, ClientBuildError> {
        let client = Arc::new(DataClient::new(
            &config.trading_url,
            &config.data_url,
            config.feed,
            credentials,
            config.timeout,
            clock.clone(),
        )?);
        let stream = config.stream.map(|stream| MarketDataStream::spawn(stream, client.clone(), clock.clone()));
        Ok(AlpacaMarketData::new(client, stream, reference, clock))
    }

    /// Loads (or reloads) the universe from `GET /v2/assets`; returns its size.
    pub async fn load_universe(&self) -> Result<usize, MarketDataError> {
        let universe = self.client.universe().await?;
        let size = universe.len();
        *self.universe.lock().unwrap_or_else(PoisonError::into_inner) = Arc::new(universe);
        tracing::info!(symbols = size, "Alpaca universe loaded");
        Ok(size)
    }

    /// The universe as last loaded, sorted by symbol.
    pub fn universe(&self) -> Arc<Vec<UniverseAsset>> {
        self.universe.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    pub fn client(&self) -> &Arc<DataClient> {
        &self.client
    }

    /// Streams the trades, quotes, minute bars and trading statuses of `symbols` — the symbols
    /// the engine follows — and of those an operator looked at within [`SHOWN_FOR`]
    /// ([`MarketData::show`]), and only those: the halts of the others are forgotten. Called
    /// again (every second by the feed) it also drops the looks that are over. Without a
    /// stream, nothing.
    pub fn set_watched(&self, symbols: impl IntoIterator<Item = Symbol>) {
        let mut subscription = self.subscription.lock().unwrap_or_else(PoisonError::into_inner);
        subscription.followed = symbols.into_iter().collect();
        let symbols = subscription.symbols(self.clock.now());
        drop(subscription);
        if let Some(stream) = &self.stream {
            stream.set_watched(symbols);
        }
    }

    /// Waits for the stream's next trade (forever without a stream).
    pub async fn next_trade(&self) {
        match &self.stream {
            Some(stream) => stream.book().next_trade().await,
            None => std::future::pending().await,
        }
    }

    /// The symbols streamed because an operator looked at them (not followed by the engine)
    /// within [`SHOWN_FOR`]: the charts' live bars include them.
    pub fn shown(&self) -> BTreeSet<Symbol> {
        let subscription = self.subscription.lock().unwrap_or_else(PoisonError::into_inner);
        let now = self.clock.now();
        subscription.shown.iter().filter(|(_, at)| now - **at < SHOWN_FOR).map(|(s, _)| s.clone()).collect()
    }

    /// The halts of the streamed symbols as they change (each with whether it was heard before
    /// the stream's latest reconnect, see [`super::halts`]), for a caller that publishes them
    /// without polling [`MarketData::halt`]; `None` without a stream.
    pub fn halt_updates(&self) -> Option<tokio::sync::watch::Receiver<Halts>> {
        self.stream.as_ref().map(|s| s.halts().subscribe())
    }

    /// The stream's connection for health; `None` without a stream.
    pub fn stream_health(&self) -> Option<DataStreamState> {
        self.stream.as_ref().map(MarketDataStream::health)
    }

    /// Alpaca's market clock (`GET /v2/clock`).
    pub async fn market_clock(&self) -> Result<wire::MarketClock, MarketDataError> {
        self.client.market_clock().await
    }

    /// Compares Alpaca's sessions of `from` and the next [`CALENDAR_CHECK_DAYS`] days
    /// (`GET /v2/calendar`) with core's NYSE calendar, and Alpaca's clock with the service's
    /// (`GET /v2/clock`), keeps the result (see
    /// [`AlpacaMarketData::calendar_check`]) and returns it.
    pub async fn check_calendar(&self, from: NaiveDate) -> Result<CalendarCheck, MarketDataError> {
        let to = from + Duration::days(CALENDAR_CHECK_DAYS);
        let days = self.client.calendar(from, to).await?;
        let asked = self.clock.now();
        let market_clock = self.client.market_clock().await?;
        let answered = self.clock.now();
        // Alpaca stamped its answer somewhere in the round trip: measured against its middle.
        let middle = asked + (answered - asked) / 2;
        let check = CalendarCheck {
            checked_at: answered,
            from,
            to,
            mismatches: calendar_mismatches(&days, from, to),
            clock_skew_ms: (market_clock.timestamp - middle).num_milliseconds(),
        };
        *self.calendar_check.lock().unwrap_or_else(PoisonError::into_inner) = Some(check.clone());
        Ok(check)
    }

    /// The latest [`AlpacaMarketData::check_calendar`] result.
    pub fn calendar_check(&self) -> Option<CalendarCheck> {
        self.calendar_check.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// The mean daily volume of each universe symbol over its last [`AVERAGE_VOLUME_DAYS`]
    /// daily bars before `date` (fewer for a recent listing), fetched once per date.
    async fn daily_history(&self, date: NaiveDate) -> Result<Arc<DailyHistory>, MarketDataError> {
        let cached = |this: &Self| this.daily.lock().unwrap_or_else(PoisonError::into_inner).clone();
        if let Some(history) = cached(self).filter(|h| h.date == date) {
            return Ok(history);
        }
        let _refreshing = self.daily_refresh.lock().await;
        if let Some(history) = cached(self).filter(|h| h.date == date) {
            return Ok(history);
        }
        let symbols: Vec<Symbol> = self.universe().iter().map(|a| a.symbol.clone()).collect();
        let end = DayClock::for_date(date).start;
        let start = DayClock::for_date(date - Duration::days(DAILY_HISTORY_CALENDAR_DAYS)).start;
        let bars = self.client.bars(&symbols, Timeframe::Day, start, end).await?;
        let average_volume = bars
            .into_iter()
            .filter(|(_, series)| !series.is_empty())
            .map(|(symbol, series)| {
                let last = &series[series.len().saturating_sub(AVERAGE_VOLUME_DAYS)..];
                let average = last.iter().map(|b| b.volume).sum::<u64>() / last.len() as u64;
                (symbol, average)
            })
            .collect();
        let history = Arc::new(DailyHistory { date, average_volume });
        *self.daily.lock().unwrap_or_else(PoisonError::into_inner) = Some(history.clone());
        Ok(history)
    }

    /// One radar scan of the whole universe as of `now`: snapshots in batches, average volumes
    /// from the day's daily history, the expected intraday fraction of the simulated market's
    /// profile, recent minute bars from the stream for watched symbols (the snapshot's latest
    /// minute bar otherwise), the session on the NYSE calendar and each symbol's day tallied from
    /// its minute bars ([`DayTallies`]), ranked and filtered by core's [`radar::scan`]. The first
    /// scan of a New York day (re)loads the universe and the daily history; later ones cost the
    /// snapshot requests only (one per [`SNAPSHOT_BATCH`](super::data::SNAPSHOT_BATCH) symbols),
    /// but for the bars no scan saw: the day so far at the first scan (in half-hours, one request
    /// per [`BARS_SYMBOL_BATCH`](super::data::BARS_SYMBOL_BATCH) symbols), the minutes of a scan
    /// missed.
    pub async fn scan(&self, now: Timestamp, settings: &MomentumRadarSettings) -> Result<RadarScan, MarketDataError> {
        let today = ny_date(now);
        let fresh = self.daily.lock().unwrap_or_else(PoisonError::into_inner).as_ref().is_some_and(|h| h.date == today);
        if self.universe().is_empty() || !fresh {
            // Listings change overnight: the first scan of a day reloads them.
            self.load_universe().await?;
        }
        let universe = self.universe();
        let history = self.daily_history(today).await?;
        // A radar limited to a list of symbols asks for theirs only.
        let symbols: Vec<Symbol> = universe
            .iter()
            .map(|a| a.symbol.clone())
            .filter(|s| settings.universe.is_empty() || settings.universe.contains(s))
            .collect();
        let snapshots = self.client.snapshots(&symbols).await?;
        let mut tallies = self.tallies.lock().await;
        if tallies.as_ref().map(|t| t.day.date) != Some(today) {
            *tallies = CALENDAR.trading_day(today).map(DayTallies::new);
        }
        if let Some(tallies) = tallies.as_mut() {
            let mut caught_up = Vec::new();
            for (symbols, from, to) in tallies.missing(&symbols, now) {
                for (width, start, end) in catch_up_spans(from, to) {
                    caught_up.push(self.client.bars_of_width(&symbols, width, start, end).await?);
                }
            }
            let caught_up =
                caught_up.iter().flat_map(|bars| bars.iter().flat_map(|(s, bars)| bars.iter().map(move |b| (s, b))));
            // The snapshots' own: the minute just ended (a bar still in progress is not one).
            let latest = snapshots.iter().filter_map(|(symbol, snapshot)| {
                let bar = snapshot.minute_bar.filter(|b| ny_date(b.start) == today)?.bar();
                (bar.start + Duration::minutes(1) <= now).then_some((symbol, bar))
            });
            let latest: Vec<(&Symbol, Bar)> = latest.collect();
            tallies.fold(caught_up, latest.iter().map(|(s, b)| (*s, b)), &symbols, now);
        }
        let started = Instant::now();
        let figures: Vec<(Symbol, DayFigures, Vec<Bar>)> = snapshots
            .iter()
            .filter_map(|(symbol, snapshot)| {
                let figures = day_figures(snapshot, today)?;
                let streamed = self.stream.as_ref().and_then(|s| s.book().get(symbol)).map(|live| live.bars);
                let recent = match streamed.filter(|bars| !bars.is_empty()) {
                    Some(bars) => bars,
                    None => figures.minute_bar.into_iter().collect(),
                };
                Some((symbol.clone(), figures, recent))
            })
            .collect();
        self.day
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .extend(figures.iter().map(|(symbol, f, _)| (symbol.clone(), *f)));
        let expected_fraction = expected_fraction_at(now);
        let book = self.reference.current();
        let session = CALENDAR.phase(now);
        let tallies = tallies.as_ref();
        let inputs = figures.iter().map(|(symbol, f, recent)| RadarInput {
            symbol,
            sector: book.sector(symbol, None),
            float: book.float(symbol, None),
            prev_close: f.prev_close,
            last: f.last,
            volume: f.volume,
            average_volume: history.average_volume.get(symbol).copied().unwrap_or(0),
            expected_fraction,
            recent,
            session,
            day: tallies.map(|t| t.of(symbol)).unwrap_or_default(),
        });
        let rows = radar::scan(inputs, settings, now, MAX_RADAR_ROWS);
        Ok(RadarScan {
            captured_at: now,
            session,
            rows,
            scanned: figures.len(),
            scan_micros: started.elapsed().as_micros() as u64,
            feed: Some(self.client.feed().as_str()),
        })
    }

    fn figures(&self, symbol: &Symbol) -> Option<DayFigures> {
        self.day.lock().unwrap_or_else(PoisonError::into_inner).get(symbol).copied()
    }

    /// Whether `symbol` is in the universe (any symbol is, before the universe is loaded:
    /// Alpaca then says what it knows).
    fn knows(&self, symbol: &Symbol) -> bool {
        let universe = self.universe();
        universe.is_empty() || universe.binary_search_by(|a| a.symbol.cmp(symbol)).is_ok()
    }
}

#[async_trait]
impl MarketData for AlpacaMarketData {
    fn name(&self) -> &'static str {
        "alpaca"
    }

    /// From the loaded universe; sector and float as imported (else unknown), the average volume from the day's history (0
    /// before the first scan).
    fn instrument(&self, symbol: &Symbol) -> Option<Instrument> {
        let universe = self.universe();
        let asset = universe.binary_search_by(|a| a.symbol.cmp(symbol)).ok().map(|i| &universe[i])?;
        let book = self.reference.current();
        let history = self.daily.lock().unwrap_or_else(PoisonError::into_inner).clone();
        Some(Instrument {
            symbol: asset.symbol.clone(),
            sector: book.sector(symbol, None).map(str::to_string),
            float: book.float(symbol, None),
            average_volume: history.and_then(|h| h.average_volume.get(symbol).copied()).unwrap_or(0),
        })
    }

    async fn bars(
        &self,
        symbol: &Symbol,
        timeframe: Timeframe,
        start: Timestamp,
        end: Timestamp,
    ) -> Result<Vec<Bar>, MarketDataError> {
        if !self.knows(symbol) {
            return Err(MarketDataError::UnknownSymbol(symbol.clone()));
        }
        let mut bars = self.client.bars(std::slice::from_ref(symbol), timeframe, start, end).await?;
        Ok(closed_bars(bars.remove(symbol).unwrap_or_default(), timeframe, self.clock.now()))
    }

    /// The stream's last trade, else the latest scan's.
    fn last_price(&self, symbol: &Symbol) -> Option<Price> {
        let streamed = self.stream.as_ref().and_then(|s| s.book().get(symbol)).and_then(|l| l.last_trade);
        streamed.map(|(price, _)| price).or_else(|| self.figures(symbol).map(|f| f.last))
    }

    /// The stream's halt of a streamed symbol, kept across a reconnect until a resumption
    /// arrives ([`super::halts`] says why); `None` without a stream (REST has no halt state).
    fn halt(&self, symbol: &Symbol) -> Option<SymbolHalt> {
        self.stream.as_ref()?.halts().get(symbol)
    }

    /// Streams `symbol` (a symbol of Alpaca's universe) for [`SHOWN_FOR`] from now, so that
    /// its quote is live and its trading status is Alpaca's `statuses` channel's (CONTRACT
    /// §11): subscribed at once the first time, kept while it is looked at again.
    fn show(&self, symbol: &Symbol) {
        if self.stream.is_none() || !self.knows(symbol) {
            return;
        }
        let now = self.clock.now();
        let mut subscription = self.subscription.lock().unwrap_or_else(PoisonError::into_inner);
        let new = subscription.shown.insert(symbol.clone(), now).is_none() && !subscription.followed.contains(symbol);
        if !new {
            return;
        }
        let symbols = subscription.symbols(now);
        drop(subscription);
        if let Some(stream) = &self.stream {
            stream.set_watched(symbols);
        }
    }

    /// The latest [`AlpacaMarketData::check_calendar`] result.
    fn calendar_check(&self) -> Option<CalendarCheck> {
        AlpacaMarketData::calendar_check(self)
    }

    /// The market-data stream's connection (`None` when snapshots come from REST alone).
    fn connection(&self) -> Option<crate::execution::VenueConnection> {
        let state = self.stream.as_ref()?.health();
        Some(crate::execution::VenueConnection {
            connected: state.connected,
            last_event_at: state.last_message_at,
            last_error: state.last_error,
            connections: state.connections,
        })
    }

    /// `GET /v2/clock`: one cheap authenticated round trip to Alpaca, at most once per
    /// [`PING_TTL`] ([`PING_FAILURE_TTL`] after a failure); in between, the latest result.
    /// While the request budget is spent, a recent success stands for it ([`DataClient::ping`]).
    async fn ping(&self, _now: Timestamp) -> Result<(), MarketDataError> {
        let now = self.clock.now();
        let last = self.last_ping.lock().unwrap_or_else(PoisonError::into_inner).clone();
        if let Some((at, failure)) = last {
            let ttl = if failure.is_some() { PING_FAILURE_TTL } else { PING_TTL };
            if now >= at && now - at < ttl {
                return failure.map_or(Ok(()), |reason| Err(MarketDataError::Unavailable(reason)));
            }
        }
        let result = self.client.ping().await;
        let failure = result.as_ref().err().map(|e| match e {
            MarketDataError::Unavailable(reason) => reason.clone(),
            other => other.to_string(),
        });
        *self.last_ping.lock().unwrap_or_else(PoisonError::into_inner) = Some((self.clock.now(), failure));
        result
    }

    /// The stream's last trade and quote with the previous close of the latest scan; for a
    /// symbol the stream has not both of (or no previous close is known), a REST snapshot,
    /// served again for [`REST_SNAPSHOT_TTL`] (a caller marking unwatched symbols on every tick
    /// would otherwise spend the request budget, and wait on it).
    async fn snapshot(&self, symbol: &Symbol) -> Option<Snapshot> {
        let live = self.stream.as_ref().and_then(|s| s.book().get(symbol));
        if let (Some(live), Some(figures)) = (&live, self.figures(symbol)) {
            if let (Some((last, _)), Some(quote)) = (live.last_trade, live.quote) {
                return Some(Snapshot { prev_close: figures.prev_close, last, quote });
            }
        }
        if !self.knows(symbol) {
            return None;
        }
        let now = self.clock.now();
        let recent = self.rest_snapshots.lock().unwrap_or_else(PoisonError::into_inner).get(symbol).copied();
        if let Some((fetched_at, snapshot)) = recent.filter(|(at, _)| now - *at < REST_SNAPSHOT_TTL) {
            tracing::trace!(%symbol, %fetched_at, "Alpaca snapshot from the cache");
            return Some(snapshot);
        }
        let snapshots = match self.client.snapshots(std::slice::from_ref(symbol)).await {
            Ok(snapshots) => snapshots,
            Err(error) => {
                tracing::warn!(%symbol, %error, "Alpaca snapshot failed");
                return None;
            }
        };
        let snapshot = snapshots.get(symbol)?;
        let figures = day_figures(snapshot, ny_date(self.clock.now()))?;
        self.day.lock().unwrap_or_else(PoisonError::into_inner).insert(symbol.clone(), figures);
        // The stream's own trade and quote, when it has them, are fresher than the snapshot's.
        let last = live.as_ref().and_then(|l| l.last_trade).map_or(figures.last, |(price, _)| price);
        let quote = live.and_then(|l| l.quote).or(snapshot.latest_quote.map(|q| q.quote()))?;
        let snapshot = Snapshot { prev_close: figures.prev_close, last, quote };
        self.rest_snapshots.lock().unwrap_or_else(PoisonError::into_inner).insert(symbol.clone(), (now, snapshot));
        Some(snapshot)
    }

    /// The stream's latest completed minute bar of a watched symbol when it ended within the
    /// last minute (the bar of the minute just closed: never the same bar again a minute
    /// later), and its relative volume
    /// as the simulated market measures it: the day's volume through that bar over what an
    /// average day has traded by its end. The day's volume is the stream's when it holds every
    /// minute of the day (see [`LiveBook::day_volume`]); otherwise the latest scan's (or REST
    /// snapshot's), an approximation.
    ///
    /// [`LiveBook::day_volume`]: super::data_stream::LiveBook::day_volume
    async fn last_closed_bar(&self, symbol: &Symbol) -> Option<ClosedBar> {
        let book = self.stream.as_ref()?.book();
        let bar = *book.get(symbol)?.bars.last()?;
        // Only a bar that ended within the last minute: the engine asks once a minute, and the
        // stream sends no bar for a minute without trades (nor after the close), so an older bar
        // would be handed to the strategies again, minute after minute.
        let ended = bar.start + Duration::minutes(1);
        let now = self.clock.now();
        if now < ended || now - ended >= Duration::minutes(1) {
            return None;
        }
        let history = self.daily.lock().unwrap_or_else(PoisonError::into_inner).clone();
        let average = history.and_then(|h| h.average_volume.get(symbol).copied());
        let volume = book.day_volume(symbol, ny_date(bar.start)).or_else(|| self.figures(symbol).map(|f| f.volume));
        let relative_volume = match (average, volume) {
            (Some(average), Some(volume)) => {
                let expected = average as f64 * expected_fraction_at(bar.start + Duration::minutes(1));
                (expected >= 1.0).then(|| volume as f64 / expected)
            }
            _ => None,
        };
        Some(ClosedBar { bar, relative_volume })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{TimeZone, Utc};

    fn bar(t: &str, close: i64, volume: u64) -> wire::DataBar {
        let price = Price::from_cents(close);
        wire::DataBar { start: t.parse().unwrap(), open: price, high: price, low: price, close: price, volume }
    }

    fn today() -> NaiveDate {
        NaiveDate::from_ymd_opt(2026, 11, 25).unwrap()
    }

    #[test]
    fn during_the_day_the_previous_close_is_yesterdays_and_the_volume_todays() {
        let snapshot = wire::Snapshot {
            latest_trade: Some(wire::DataTrade {
                at: "2026-11-25T15:00:00Z".parse().unwrap(),
                price: Price::from_cents(550),
                size: 10,
            }),
            latest_quote: None,
            minute_bar: Some(bar("2026-11-25T14:59:00Z", 549, 1000)),
            daily_bar: Some(bar("2026-11-25T05:00:00Z", 549, 80_000)),
            prev_daily_bar: Some(bar("2026-11-24T05:00:00Z", 500, 50_000)),
        };
        let figures = day_figures(&snapshot, today()).unwrap();
        assert_eq!(
            (figures.prev_close, figures.last, figures.volume),
            (Price::from_cents(500), Price::from_cents(550), 80_000)
        );
        assert_eq!(figures.minute_bar.map(|b| b.volume), Some(1000));
    }

    #[test]
    fn before_the_first_trade_the_latest_session_is_the_previous_one() {
        let snapshot = wire::Snapshot {
            daily_bar: Some(bar("2026-11-24T05:00:00Z", 500, 50_000)),
            prev_daily_bar: Some(bar("2026-11-23T05:00:00Z", 480, 40_000)),
            minute_bar: Some(bar("2026-11-24T20:59:00Z", 500, 10)),
            ..wire::Snapshot::default()
        };
        let figures = day_figures(&snapshot, today()).unwrap();
        assert_eq!(
            (figures.prev_close, figures.last, figures.volume),
            (Price::from_cents(500), Price::from_cents(500), 0)
        );
        assert_eq!(figures.minute_bar, None);
        assert_eq!(day_figures(&wire::Snapshot::default(), today()), None);
    }

    #[test]
    fn the_expected_fraction_is_the_simulated_profiles() {
        let at = Utc.with_ymd_and_hms(2026, 11, 25, 15, 30, 0).unwrap(); // 10:30 New York
        let clock = DayClock::for_date(today());
        assert_eq!(expected_fraction_at(at), expected_cum_fraction(&clock, 10 * 60 + 30));
        assert!(expected_fraction_at(at) > 0.06 && expected_fraction_at(at) < 0.5);
    }

    fn day(date: &str, open: &str, close: &str) -> wire::CalendarDay {
        wire::CalendarDay { date: date.parse().unwrap(), open: open.into(), close: close.into() }
    }

    /// Alpaca's sessions from Thanksgiving week to New Year 2027 as its calendar lists them
    /// (Thanksgiving and Christmas absent, the day after Thanksgiving and Christmas Eve closing
    /// at 13:00) agree with core's NYSE rules; a closure or an early close core does not know of
    /// is a mismatch.
    #[test]
    fn alpacas_calendar_is_compared_with_cores_nyse_calendar() {
        let from = NaiveDate::from_ymd_opt(2026, 11, 23).unwrap();
        let to = NaiveDate::from_ymd_opt(2027, 1, 4).unwrap();
        let nyse = tradeops_core::calendar::MarketCalendar::new(tradeops_core::settings::MarketCalendarKind::Nyse);
        let mut days = Vec::new();
        let mut date = from;
        while date <= to {
            let weekday = !matches!(chrono::Datelike::weekday(&date), chrono::Weekday::Sat | chrono::Weekday::Sun);
            let holiday = ["2026-11-26", "2026-12-25", "2027-01-01"].contains(&date.to_string().as_str());
            let early = ["2026-11-27", "2026-12-24"].contains(&date.to_string().as_str());
            if weekday && !holiday {
                days.push(day(&date.to_string(), "09:30", if early { "13:00" } else { "16:00" }));
            }
            assert_eq!(weekday && !holiday, nyse.is_trading_day(date), "{date}");
            date = date.succ_opt().unwrap();
        }
        assert_eq!(calendar_mismatches(&days, from, to), Vec::<String>::new());
        // A day of mourning (Alpaca closed), an early close core does not know, a session
        // Alpaca lists on a holiday.
        days.retain(|d| d.date.to_string() != "2026-12-01");
        days.iter_mut().filter(|d| d.date.to_string() == "2026-12-02").for_each(|d| d.close = "13:00".into());
        days.push(day("2026-12-25", "09:30", "16:00"));
        assert_eq!(
            calendar_mismatches(&days, from, to),
            vec![
                "2026-12-01: Alpaca has no session; the NYSE calendar trades 09:30-16:00".to_string(),
                "2026-12-02: Alpaca trades 09:30-13:00; the NYSE calendar 09:30-16:00".to_string(),
                "2026-12-25: Alpaca trades 09:30-16:00; the NYSE calendar has no session".to_string(),
            ]
        );
    }

    /// A minute without trades brings no bar from Alpaca: the previous one is not handed out
    /// again as the latest closed bar.
    #[tokio::test]
    async fn the_latest_closed_bar_is_only_the_minute_just_ended() {
        let at = |h, m, s| Utc.with_ymd_and_hms(2026, 11, 25, h, m, s).unwrap();
        let clock = Arc::new(tradeops_core::clock::ManualClock::new(at(15, 30, 2)));
        let credentials = AlpacaCredentials { key_id: "AK".into(), secret_key: "secret".into() };
        let config = AlpacaDataConfig {
            trading_url: "http://127.0.0.1:9".into(),
            data_url: "http://127.0.0.1:9".into(),
            feed: DataFeed::Iex,
            timeout: std::time::Duration::from_millis(100),
            stream: Some(DataStreamConfig {
                url: "ws://127.0.0.1:9/v2/iex".into(),
                ..DataStreamConfig::alpaca(DataFeed::Iex, &credentials)
            }),
        };
        let market = AlpacaMarketData::connect(config, &credentials, Default::default(), clock.clone()).unwrap();
        let abcd = Symbol::parse("ABCD").unwrap();
        market.stream.as_ref().unwrap().book().on_bar(&abcd, bar("2026-11-25T15:29:00Z", 500, 10).bar());
        let closed = market.last_closed_bar(&abcd).await.map(|c| c.bar.start);
        assert_eq!(closed, Some(at(15, 29, 0)), "the minute just ended");
        clock.set(at(15, 31, 2));
        assert_eq!(market.last_closed_bar(&abcd).await, None, "15:30 had no trade: no bar, not 15:29's again");
        clock.set(at(15, 29, 30));
        assert_eq!(market.last_closed_bar(&abcd).await, None, "not closed yet");
    }

    fn ny(hh: u32, mm: u32) -> Timestamp {
        // Wednesday 2026-11-25, EST (UTC−5): midnight New York is 05:00Z.
        Utc.with_ymd_and_hms(2026, 11, 25, 5, 0, 0).unwrap() + Duration::minutes(i64::from(hh * 60 + mm))
    }

    fn minute_bar(hh: u32, mm: u32, open: i64, high: i64, volume: u64) -> Bar {
        let (open, high) = (Price::from_cents(open), Price::from_cents(high));
        Bar { start: ny(hh, mm), open, high, low: open, close: open, volume }
    }

    #[test]
    fn a_days_catch_up_reads_half_hours_and_the_minutes_either_side() {
        use BarWidth::{HalfHour, Minute};
        assert_eq!(
            catch_up_spans(ny(4, 0), ny(10, 7)),
            vec![(HalfHour, ny(4, 0), ny(10, 0)), (Minute, ny(10, 0), ny(10, 7))],
            "a start at 10:07: the morning in half-hours, then seven minutes"
        );
        assert_eq!(
            catch_up_spans(ny(9, 17), ny(11, 0)),
            vec![(Minute, ny(9, 17), ny(9, 30)), (HalfHour, ny(9, 30), ny(11, 0))],
            "none straddles the regular open"
        );
        assert_eq!(catch_up_spans(ny(10, 3), ny(10, 7)), vec![(Minute, ny(10, 3), ny(10, 7))], "a scan missed");
        assert_eq!(catch_up_spans(ny(10, 7), ny(10, 7)), vec![]);
    }

    /// The first scan of the day reads the day so far; then each scan's snapshots bring the
    /// minute just ended and nothing is asked; a scan missed is caught up; a symbol new to the
    /// scans (a universe widened) is read from the pre-market open; after the regular close
    /// nothing counts any more.
    #[test]
    fn tallies_ask_for_the_minutes_no_scan_saw() {
        let day = CALENDAR.trading_day(today()).unwrap();
        let (aaa, bbb) = (Symbol::parse("AAA").unwrap(), Symbol::parse("BBB").unwrap());
        let mut tallies = DayTallies::new(day);
        let at = |hh, mm| ny(hh, mm) + Duration::seconds(2);
        assert_eq!(tallies.missing(std::slice::from_ref(&aaa), at(3, 0)), vec![], "before the pre-market");
        assert_eq!(
            tallies.missing(std::slice::from_ref(&aaa), at(8, 0)),
            vec![(vec![aaa.clone()], ny(4, 0), ny(8, 0))],
            "a start at 08:00"
        );
        // Half-hours caught up; the snapshot's 07:59 bar is inside the last of them.
        let caught_up = [minute_bar(4, 0, 450, 470, 1_000), minute_bar(7, 30, 460, 520, 20_000)];
        let inside = minute_bar(7, 59, 515, 519, 300);
        tallies.fold(caught_up.iter().map(|b| (&aaa, b)), [(&aaa, &inside)], std::slice::from_ref(&aaa), at(8, 0));
        assert_eq!(tallies.of(&aaa).premarket_volume(), 21_000, "07:59 is in the half-hour from 07:30");
        // 08:01: the snapshot's 08:00 bar, nothing asked.
        assert_eq!(tallies.missing(std::slice::from_ref(&aaa), at(8, 1)), vec![]);
        let snapshot = minute_bar(8, 0, 510, 530, 500);
        tallies.fold([], [(&aaa, &snapshot), (&aaa, &snapshot)], std::slice::from_ref(&aaa), at(8, 1));
        let tally = tallies.of(&aaa);
        assert_eq!((tally.premarket_volume(), tally.premarket_high()), (21_500, Some(Price::from_cents(530))));
        // Scanned again within the minute: the same bar, not counted again.
        tallies.fold([], [(&aaa, &snapshot)], std::slice::from_ref(&aaa), at(8, 1) + Duration::seconds(20));
        assert_eq!(tallies.of(&aaa).premarket_volume(), 21_500);
        // 08:04: the scans of 08:02 and 08:03 missed; BBB joins the scanned symbols.
        let both = [aaa.clone(), bbb.clone()];
        assert_eq!(
            tallies.missing(&both, at(8, 4)),
            vec![(vec![bbb.clone()], ny(4, 0), ny(8, 4)), (vec![aaa.clone()], ny(8, 1), ny(8, 4))]
        );
        tallies.fold([], [], &both, at(8, 4));
        assert_eq!(tallies.missing(&both, at(8, 5)), vec![]);
        tallies.fold([], [], &both, at(8, 5));
        // 09:31, no scan since 08:05: caught up, the first bar at 09:30 or after opens the
        // regular session (the snapshot's, the same minute, is not counted again).
        assert_eq!(tallies.missing(&both, at(9, 31)), vec![(both.to_vec(), ny(8, 5), ny(9, 31))]);
        let open = minute_bar(9, 30, 555, 560, 9_000);
        tallies.fold([(&aaa, &open)], [(&aaa, &open)], &both, at(9, 31));
        assert_eq!(tallies.of(&aaa).regular_open(), Some(Price::from_cents(555)));
        assert_eq!(tallies.of(&aaa).premarket_volume(), 21_500);
        assert_eq!(tallies.of(&bbb), DayTally::default(), "nothing traded");
        // After the close: nothing missing, however late.
        tallies.fold([], [], &both, at(16, 0));
        assert_eq!(tallies.missing(&both, at(19, 0)), vec![]);
        assert_eq!(tallies.missing(std::slice::from_ref(&Symbol::parse("CCC").unwrap()), at(19, 0)).len(), 1);
    }

    /// The stream follows the engine's symbols and those looked at within [`SHOWN_FOR`]: a look
    /// renewed keeps a symbol, one older is dropped.
    #[test]
    fn a_symbol_looked_at_is_streamed_for_a_while() {
        let at = |m: i64| Timestamp::from_timestamp(1_800_000_000 + m * 60, 0).unwrap();
        let sym = |s: &str| Symbol::parse(s).unwrap();
        let mut sub = Subscription::default();
        sub.followed.insert(sym("HELD"));
        sub.shown.insert(sym("LOOK"), at(0));
        sub.shown.insert(sym("HELD"), at(0));
        assert_eq!(sub.symbols(at(4)), [sym("HELD"), sym("LOOK")].into_iter().collect());
        assert_eq!(sub.symbols(at(5)), [sym("HELD")].into_iter().collect(), "five minutes after the last look");
        sub.shown.insert(sym("LOOK"), at(5));
        assert_eq!(sub.symbols(at(9)), [sym("HELD"), sym("LOOK")].into_iter().collect(), "looked at again");
    }
}
