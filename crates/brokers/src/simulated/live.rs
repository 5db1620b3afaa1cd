//! The live feed of the simulated market, driven by the market clock: what the simulated
//! [`MarketData`](crate::market::MarketData) reads its snapshots from.
//!
//! Each minute every symbol prints four trades — open at :00, the first extreme at :15, the
//! other at :30, the close at :45 — taken from the day generator's bar for that minute. The
//! trades are folded into minute bars that complete on exact minute boundaries; at each boundary
//! the radar scans the whole universe. [`LiveMarket::advance_to`] processes every step up to a
//! given market time, so tests drive it with a manual clock and the runner with the real one.

use crate::market::{ClosedBar, Snapshot};
use chrono::{Duration, NaiveDate};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Mutex;
use tokio::time::Instant;
use tradeops_core::bars::{minute_floor, MinuteBarBuilder};
use tradeops_core::calendar::{MarketCalendar, SessionPhase};
use tradeops_core::market::{Bar, Price, Trade};
use tradeops_core::radar::{scan, RadarInput, RadarRow};
use tradeops_core::settings::{MarketCalendarKind, MomentumRadarSettings};
use tradeops_core::{Clock, Symbol, Timestamp};
use tradeops_sim::day::close_of;
use tradeops_sim::profile::{expected_cum_fraction, DayClock};
use tradeops_sim::{daily_volume, DayGenerator, Universe};

/// Seconds between feed steps (four per minute).
pub const STEP_SECONDS: i64 = 15;
/// Days in the radar's average volume (backtests' history uses the same).
pub use tradeops_sim::history::AVERAGE_VOLUME_DAYS;
/// Most rows a scan keeps (the maximum `top_n`).
pub const MAX_RADAR_ROWS: usize = 200;
const RECENT_BARS: usize = 6;

/// The radar result of one scan.
#[derive(Clone, Debug)]
pub struct RadarScan {
    pub captured_at: Timestamp,
    pub rows: Vec<RadarRow>,
    pub scanned: usize,
    /// CPU time of the scan itself.
    pub scan_micros: u64,
}

struct SymbolLive {
    generator: DayGenerator,
    builder: MinuteBarBuilder,
    pending: Option<Bar>,
    recent: Vec<Bar>,
    volume: u64,
    last: Price,
    prev_close: Price,
    average_volume: u64,
}

struct LiveState {
    date: Option<NaiveDate>,
    clock: Option<DayClock>,
    calendar: MarketCalendarKind,
    next_step: Option<Timestamp>,
    symbols: Vec<SymbolLive>,
}

/// What the `data_broker` health probe reports.
#[derive(Clone, Debug)]
pub struct FeedStatus {
    pub market_time: Option<Timestamp>,
    /// The last step whose market step, scans and the allocator's watches the service has
    /// finished handing on (see [`LiveMarket::handled`]).
    pub handled_through: Option<Timestamp>,
    pub date: Option<NaiveDate>,
    pub symbols: usize,
    /// Service-clock time since the last step was processed.
    pub since_last_step: Option<std::time::Duration>,
}

pub struct LiveMarket {
    universe: std::sync::Arc<Universe>,
    state: Mutex<LiveState>,
    /// The service clock (real time in operation), which says how fresh the feed is.
    clock: std::sync::Arc<dyn Clock>,
    /// Service-clock milliseconds when the last step ran (`i64::MIN`: never).
    last_step_ms: AtomicI64,
    /// Market-time milliseconds of the last step handed on (`i64::MIN`: none).
    handled_ms: AtomicI64,
    pub speed: f64,
    /// Imported float and sector, laid over the universe's in every scan.
    reference: std::sync::Arc<crate::reference::ReferenceData>,
    /// Whether the universe's float and sector are known (false: a real feed's "none").
    reference_data: bool,
}

impl LiveMarket {
    pub fn new(universe: std::sync::Arc<Universe>, speed: f64, clock: std::sync::Arc<dyn Clock>) -> LiveMarket {
        LiveMarket {
            universe,
            state: Mutex::new(LiveState {
                date: None,
                clock: None,
                calendar: MarketCalendarKind::AlwaysOpen,
                next_step: None,
                symbols: Vec::new(),
            }),
            clock,
            last_step_ms: AtomicI64::new(i64::MIN),
            handled_ms: AtomicI64::new(i64::MIN),
            speed,
            reference: Default::default(),
            reference_data: true,
        }
    }

    /// The same feed, whose scans know no float or sector but the imported ones.
    pub fn without_reference_data(self) -> LiveMarket {
        LiveMarket { reference_data: false, ..self }
    }

    /// The same feed, whose scans take float and sector from `reference` where imported.
    pub fn with_reference(self, reference: std::sync::Arc<crate::reference::ReferenceData>) -> LiveMarket {
        LiveMarket { reference, ..self }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, LiveState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Market time of the next step to process.
    pub fn next_step(&self) -> Option<Timestamp> {
        self.state().next_step
    }

    /// The service has handed on everything of the steps up to `at` (the engine's market step,
    /// the scans, the allocator's watches): what a test stepping a manual clock waits for.
    pub fn handled(&self, at: Timestamp) {
        self.handled_ms.store(at.timestamp_millis(), Ordering::Relaxed);
    }

    pub fn status(&self) -> FeedStatus {
        let st = self.state();
        let ms = self.last_step_ms.load(Ordering::Relaxed);
        let handled = self.handled_ms.load(Ordering::Relaxed);
        FeedStatus {
            market_time: st.next_step.map(|t| t - Duration::seconds(STEP_SECONDS)),
            handled_through: (handled != i64::MIN).then(|| tradeops_core::time::from_epoch_ms(handled)),
            date: st.date,
            symbols: self.universe.len(),
            since_last_step: (ms != i64::MIN).then(|| {
                std::time::Duration::from_millis(self.clock.now().timestamp_millis().saturating_sub(ms).max(0) as u64)
            }),
        }
    }

    /// The last trade price of `symbol`.
    pub fn last_price(&self, symbol: &Symbol) -> Option<Price> {
        let p = self.universe.get(symbol)?;
        self.state().symbols.get(p.index).map(|s| s.last)
    }

    /// Previous close, last trade and quote of `symbol` now, read together.
    pub fn snapshot(&self, symbol: &Symbol) -> Option<Snapshot> {
        let p = self.universe.get(symbol)?;
        let st = self.state();
        let s = st.symbols.get(p.index)?;
        Some(Snapshot {
            prev_close: s.prev_close,
            last: s.last,
            quote: tradeops_sim::quote::quote_around(s.last, s.average_volume),
        })
    }

    /// The last completed minute bar of `symbol` and its time-of-day relative volume as of that
    /// bar: the volume of the bar in progress (the print at the boundary starts the next bar) is
    /// left out, so the engine's `Bar` event sees what a backtest of the same bars sees.
    pub fn last_closed_bar(&self, symbol: &Symbol) -> Option<ClosedBar> {
        let p = self.universe.get(symbol)?;
        let st = self.state();
        let s = st.symbols.get(p.index)?;
        let bar = *s.recent.last()?;
        let partial = s.builder.in_progress().map_or(0, |b| b.volume);
        Some(ClosedBar { bar, relative_volume: relative_volume(&st, s, s.volume.saturating_sub(partial)) })
    }

    /// The quote of `symbol` around its last trade.
    pub fn quote(&self, symbol: &Symbol) -> Option<tradeops_core::market::Quote> {
        let p = self.universe.get(symbol)?;
        let st = self.state();
        let s = st.symbols.get(p.index)?;
        Some(tradeops_sim::quote::quote_around(s.last, s.average_volume))
    }

    /// The last completed minute bars of `symbol` (up to 6), oldest first, and its volume today.
    pub fn recent_bars(&self, symbol: &Symbol) -> Option<(Vec<Bar>, u64)> {
        let p = self.universe.get(symbol)?;
        self.state().symbols.get(p.index).map(|s| (s.recent.clone(), s.volume))
    }

    /// Processes every step up to market time `now`; returns the scans made on the way.
    pub fn advance_to(
        &self,
        now: Timestamp,
        calendar: MarketCalendar,
        radar: &MomentumRadarSettings,
    ) -> Vec<RadarScan> {
        let mut st = self.state();
        st.calendar = calendar.kind();
        if st.next_step.is_none() {
            self.start_day(&mut st, calendar.date_of(now), calendar);
            let clock = st.clock.expect("day started");
            let current = minute_floor(now);
            let minutes_done = ((current - clock.start).num_minutes()).clamp(0, clock.minutes as i64) as u32;
            for s in st.symbols.iter_mut() {
                for _ in 0..minutes_done {
                    if let Some(bar) = s.generator.next_bar() {
                        s.volume += bar.volume;
                        s.last = bar.close;
                        push_recent(&mut s.recent, bar);
                    }
                }
            }
            st.next_step = Some(current);
        }
        let mut scans = Vec::new();
        while let Some(step) = st.next_step.filter(|t| *t <= now) {
            let k = (step - minute_floor(step)).num_seconds() / STEP_SECONDS;
            if k == 0 {
                if let Some(scan) = self.minute_boundary(&mut st, step, calendar, radar) {
                    scans.push(scan);
                }
            } else {
                for s in st.symbols.iter_mut() {
                    print_step(s, step, k);
                }
                if !radar.scan_on_minute_boundary && radar.enabled && calendar.phase(step) != SessionPhase::Closed {
                    scans.push(self.scan(&st, step, radar));
                }
            }
            st.next_step = Some(step + Duration::seconds(STEP_SECONDS));
        }
        self.last_step_ms.store(self.clock.now().timestamp_millis(), Ordering::Relaxed);
        scans
    }

    fn minute_boundary(
        &self,
        st: &mut LiveState,
        at: Timestamp,
        calendar: MarketCalendar,
        radar: &MomentumRadarSettings,
    ) -> Option<RadarScan> {
        for s in st.symbols.iter_mut() {
            if let Some(bar) = s.builder.close(at) {
                push_recent(&mut s.recent, bar);
            }
        }
        let date = calendar.date_of(at);
        if st.date != Some(date) {
            self.start_day(st, date, calendar);
        }
        // A closed exchange has no session to scan; the last scan of the session stays served.
        let open = calendar.phase(at) != SessionPhase::Closed;
        let scan = (radar.enabled && open).then(|| self.scan(st, at, radar));
        for s in st.symbols.iter_mut() {
            s.pending = s.generator.next_bar().filter(|bar| bar.start == at);
            print_step(s, at, 0);
        }
        scan
    }

    fn scan(&self, st: &LiveState, at: Timestamp, radar: &MomentumRadarSettings) -> RadarScan {
        let started = Instant::now();
        let clock = st.clock.expect("day started");
        let minute = ((at - clock.start).num_minutes()).clamp(0, clock.minutes as i64) as u32;
        let expected_fraction = expected_cum_fraction(&clock, minute);
        let reference = self.reference.current();
        let inputs = self.universe.symbols.iter().zip(&st.symbols).map(|(p, s)| RadarInput {
            symbol: &p.symbol,
            sector: reference.sector(&p.symbol, self.reference_data.then_some(p.sector)),
            float: reference.float(&p.symbol, self.reference_data.then_some(p.float)),
            prev_close: s.prev_close,
            last: s.last,
            volume: s.volume,
            average_volume: s.average_volume,
            expected_fraction,
            recent: &s.recent,
        });
        let rows = scan(inputs, radar, at, MAX_RADAR_ROWS);
        RadarScan {
            captured_at: at,
            rows,
            scanned: st.symbols.len(),
            scan_micros: started.elapsed().as_micros() as u64,
        }
    }

    /// New generators and daily reference values for `date`.
    fn start_day(&self, st: &mut LiveState, date: NaiveDate, calendar: MarketCalendar) {
        let u = &self.universe;
        let previous_days: Vec<NaiveDate> =
            std::iter::successors(Some(date), |d| Some(calendar.previous_trading_day(*d)))
                .skip(1)
                .take(AVERAGE_VOLUME_DAYS)
                .collect();
        let prev_trading_day = previous_days[0];
        st.symbols = u
            .symbols
            .iter()
            .map(|p| {
                let generator = DayGenerator::for_symbol(u, p, date);
                let plan = generator.plan();
                // The previous regular close of the calendar's previous trading day.
                let prev_close = Price::from_f64_tick(close_of(u, p, prev_trading_day));
                let average_volume =
                    previous_days.iter().map(|d| daily_volume(u, p, *d)).sum::<u64>() / previous_days.len() as u64;
                SymbolLive {
                    last: Price::from_f64_tick(plan.prev_close),
                    generator,
                    builder: MinuteBarBuilder::default(),
                    pending: None,
                    recent: Vec::with_capacity(RECENT_BARS + 1),
                    volume: 0,
                    prev_close,
                    average_volume,
                }
            })
            .collect();
        st.date = Some(date);
        st.clock = Some(DayClock::for_date(date));
    }
}

/// `volume` over what an average day has traded by the next step's minute.
fn relative_volume(st: &LiveState, s: &SymbolLive, volume: u64) -> Option<f64> {
    let clock = st.clock?;
    let at = st.next_step.unwrap_or(clock.start);
    let minute = ((at - clock.start).num_minutes()).clamp(0, clock.minutes as i64) as u32;
    let expected = s.average_volume as f64 * expected_cum_fraction(&clock, minute);
    (expected >= 1.0).then(|| volume as f64 / expected)
}

fn push_recent(recent: &mut Vec<Bar>, bar: Bar) {
    recent.push(bar);
    if recent.len() > RECENT_BARS {
        recent.remove(0);
    }
}

/// Prints step `k` (0–3) of the minute's bar as a trade.
fn print_step(s: &mut SymbolLive, at: Timestamp, k: i64) {
    let Some(bar) = s.pending else { return };
    let high_first = (bar.start.timestamp() / 60 + bar.open.0) % 2 == 0;
    let price = match (k, high_first) {
        (0, _) => bar.open,
        (1, true) | (2, false) => bar.high,
        (1, false) | (2, true) => bar.low,
        _ => bar.close,
    };
    let quarter = bar.volume / 4;
    let size = if k == 3 { bar.volume - 3 * quarter } else { quarter };
    s.builder.on_trade(&Trade { at, price, size });
    s.volume += size;
    s.last = price;
}

#[cfg(test)]
mod tests;
