//! Backtests (CONTRACT §4, DESIGN.md "One engine, two clocks"): the live [`Engine`] — the same
//! strategies, risk gate and order state machine — fed stored bars in time order by a manual
//! clock, with the bar-based [`fills::BarBroker`] in place of the execution broker. Pure and
//! deterministic: the same request and bars give the same result, bit for bit.
//!
//! Each bar is an engine `Bar` event stamped at the bar's end (a 1-minute bar at `start + 1m`,
//! a daily bar at 16:00 New York of its date); orders decided on it are accepted at once and
//! fill by the fill model, their reports stamped at the fill. Market entries are sized and
//! checked at the price the fill model will pay (the next bar's open under `NEXT_OPEN`), as
//! backtesting.py sizes a buy at its fill: the engine is told it with each bar
//! ([`Engine::bar_into`]); the strategy decides on the bars alone. The symbol is watched before the
//! first bar, as an operator would. After the last bar working orders are cancelled and an open
//! position is sold at the last bar's close. The equity curve is the engine's equity (cash plus
//! the position at the last close) after each bar. Trades carry their row, outcomes, features
//! and explanations; not the live deep dive's events timeline, which a stored run does not keep
//! (its trades are rows, CONTRACT §4) and which would be most of what a run's orders cost.

pub mod coverage;
pub mod fills;

use crate::bars::SessionRunning;
use crate::calendar::{ny_dates_of, ny_instant, NyDate, NyDateCursor, NyDates, NyDay, SessionPhase};
use crate::engine::{BarTime, Command, Effect, Engine, Event};
use crate::market::{Bar, Price, Timeframe};
use crate::metrics::{CurveStats, EquityPoint, Metrics};
use crate::orders::{ClientOrderId, Order};
use crate::settings::{FieldError, Settings};
use crate::strategy::{self, sma_cross::SmaCross, ParameterKind, Strategy};
use crate::symbol::Symbol;
use crate::time::Timestamp;
use crate::trades::{decided_at, enrich_with, in_session, MarketContext, Trade, TradeBuilder, END_OF_DATA_REASON};
use chrono::NaiveDate;
use fills::{BarBroker, FillModel};
use rust_decimal::prelude::FromPrimitive;
use rust_decimal::Decimal;
use std::collections::BTreeMap;
use std::sync::Arc;

/// What to run.
#[derive(Clone, Debug, PartialEq)]
pub struct BacktestSpec {
    pub strategy_id: String,
    pub symbol: Symbol,
    pub timeframe: Timeframe,
    /// The first bar traded starts at or after this. Earlier bars of the same New York date
    /// only count toward the day's volume (relative volume counts the whole day, as the radar's).
    pub start: Timestamp,
    /// Validated by [`validate_parameters`].
    pub parameters: BTreeMap<String, f64>,
    pub initial_cash: Decimal,
    /// Fraction of traded value.
    pub commission_rate: Decimal,
    pub slippage_bps: Decimal,
    pub fill: FillModel,
}

/// What a run produced.
#[derive(Clone, Debug, PartialEq)]
pub struct BacktestOutput {
    pub metrics: Metrics,
    pub trades: Vec<Trade>,
    /// At most [`MAX_CURVE_POINTS`] points (see [`curve_index`]); metrics use every bar.
    pub equity_curve: Vec<EquityPoint>,
    pub final_equity: Decimal,
    pub bars: u64,
    pub orders: u64,
    /// Every order of the run in the order submitted (what the strategy asked for, and why), as
    /// it ended: the engine's own order, taken when it became final (the log does not share it
    /// before, so the engine copies an order to change it only while an effect still holds it).
    pub order_log: Vec<Arc<Order>>,
    /// Orders the risk gate refused, by rule.
    pub refusals: BTreeMap<String, u64>,
}

/// The most equity points a result keeps.
pub const MAX_CURVE_POINTS: usize = 2_000;

/// What [`run_metrics`] reports: the figures of [`BacktestOutput`] without its trades, order log
/// and curve — the same numbers, bit for bit, as [`run`] gives them.
#[derive(Clone, Debug, PartialEq)]
pub struct BacktestMetrics {
    pub metrics: Metrics,
    pub final_equity: Decimal,
    pub bars: u64,
    pub orders: u64,
    pub refusals: BTreeMap<String, u64>,
}

/// What a run keeps of its orders and trades.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Keep {
    /// The order log and every trade with its features, outcomes and explanations.
    Everything,
    /// Each trade's net P&L alone (all the metrics read of trades): an order or trade is dropped
    /// as soon as it is final, so the run's memory grows by 16 bytes a trade, not kilobytes.
    Metrics,
}

/// What the run knows of the market besides the symbol's bars: the previous close and relative
/// volume the radar gives the live engine, and the instrument's float and sector.
pub trait History {
    /// The last regular-session close before `date`.
    fn prev_close(&mut self, date: NaiveDate) -> Option<Decimal>;
    /// The volume expected by each minute of New York `date`, the denominator of time-of-day
    /// relative volume: entry `m` is the volume expected by minute `m` of the day, the last entry
    /// standing for every later minute (daily bars: one entry, the day's). Empty when unknown.
    /// Asked once per date; a run divides by it on every bar.
    fn expected_volume(&mut self, date: NaiveDate) -> &[f64];
    /// Time-of-day relative volume at minute `minute_of_day` of New York `date`, with `volume`
    /// traded so far that date.
    fn relative_volume(&mut self, date: NaiveDate, minute_of_day: u32, volume: u64) -> Option<f64> {
        relative_volume_from(self.expected_volume(date), minute_of_day, volume)
    }
    fn float(&self) -> Option<u64> {
        None
    }
    fn sector(&self) -> Option<String> {
        None
    }
    /// The New York dates of the bars this history was made from, when it keeps them: every run
    /// over those bars reads its dates there (else a run works out its own, date by date, in
    /// every run). No default: a history that wraps another must pass its dates on, or every
    /// combination of a sweep works the calendar out again.
    fn ny_dates(&self) -> Option<NyDates>;
}

/// Relative volume from a date's [`History::expected_volume`]: `volume` over the volume expected
/// by `minute_of_day`; unknown where nothing (or less than one share) is expected.
#[inline]
pub fn relative_volume_from(expected: &[f64], minute_of_day: u32, volume: u64) -> Option<f64> {
    let last = expected.len().checked_sub(1)?;
    let expected = expected[(minute_of_day as usize).min(last)];
    (expected >= 1.0).then(|| volume as f64 / expected)
}

/// [`History`] measured from the bars themselves (data imported from a file, say): the previous
/// close is the last close of the previous date in the data (16:00 New York or earlier, for
/// minute bars); relative volume compares the volume by this minute with the average volume by
/// the same minute over the previous (up to 10) dates of the data, and is unknown on the first.
/// Dates are asked for in order by a run (and again by the next run of a sweep's part, which
/// shares the history): a cursor finds the next date without a search, and each date's expected
/// volume is worked out once.
#[derive(Clone)]
pub struct BarHistory {
    /// What the bars say, worked out once and shared by every clone (a sweep's threads each
    /// take one: building it is a pass over the bars and the calendar for each of them).
    facts: Arc<BarFacts>,
    /// Per date, the volume expected by each minute, once asked for.
    expected: Vec<Option<Box<[f64]>>>,
    /// The index of the date last asked for: the next question is most often about it or the next.
    cursor: usize,
    /// The expected volume of a date not in the data, last asked for.
    scratch: Box<[f64]>,
}

/// A [`BarHistory`]'s facts: the dates of the data, ascending, and per date its last close and
/// cumulative volume by minute of day (daily bars: one entry); the bars' New York dates.
struct BarFacts {
    dates: Vec<NaiveDate>,
    closes: Vec<Decimal>,
    cumulative: Vec<Vec<u64>>,
    /// The New York dates of the bars (see [`History::ny_dates`]).
    ny_dates: NyDates,
}

impl BarHistory {
    pub fn new(bars: &[Bar], timeframe: Timeframe) -> BarHistory {
        let daily = timeframe == Timeframe::Day;
        // Per date, in the order first met, its last close and each minute's volume; `index`
        // finds a date's place when the date changes (bars in time order change it once a
        // day: a search per bar was most of building a million-bar history).
        let mut by_date: Vec<(NaiveDate, Price, Vec<u64>)> = Vec::new();
        let mut index: BTreeMap<NaiveDate, usize> = BTreeMap::new();
        let mut current: Option<(NaiveDate, usize)> = None;
        let mut day = NyDay::default();
        for bar in bars {
            let (date, minute) = day.locate(bar.start);
            let at = match current {
                Some((d, at)) if d == date => at,
                _ => {
                    let at = *index.entry(date).or_insert_with(|| {
                        by_date.push((date, bar.close, vec![0; if daily { 1 } else { 1440 }]));
                        by_date.len() - 1
                    });
                    current = Some((date, at));
                    at
                }
            };
            let entry = &mut by_date[at];
            if daily || minute < 16 * 60 {
                entry.1 = bar.close;
            }
            // Each minute's own volume first; made cumulative below, once per date (adding a
            // bar's volume to every later minute cost a million-bar series 10⁹ additions).
            entry.2[if daily { 0 } else { (minute as usize).min(1439) }] += bar.volume;
        }
        by_date.sort_unstable_by_key(|(date, ..)| *date);
        let (mut dates, mut closes, mut cumulative) = (Vec::new(), Vec::new(), Vec::new());
        for (date, close, mut slots) in by_date {
            let mut total = 0;
            for slot in slots.iter_mut() {
                total += *slot;
                *slot = total;
            }
            dates.push(date);
            closes.push(close.to_decimal());
            cumulative.push(slots);
        }
        let expected = vec![None; dates.len()];
        let ny_dates = ny_dates_of(bars.iter().map(|b| b.start.timestamp()));
        let facts = Arc::new(BarFacts { dates, closes, cumulative, ny_dates });
        BarHistory { facts, expected, cursor: 0, scratch: Box::new([]) }
    }

    /// How many of the data's dates come before `date` (the cursor moved there).
    fn before(&mut self, date: NaiveDate) -> usize {
        let at = |i: usize, dates: &[NaiveDate]| {
            (i <= dates.len() && (i == 0 || dates[i - 1] < date) && (i == dates.len() || dates[i] >= date)).then_some(i)
        };
        let dates = &self.facts.dates;
        let found = at(self.cursor, dates)
            .or_else(|| at(self.cursor + 1, dates))
            .unwrap_or_else(|| dates.partition_point(|d| *d < date));
        self.cursor = found;
        found
    }
}

impl History for BarHistory {
    fn prev_close(&mut self, date: NaiveDate) -> Option<Decimal> {
        let before = self.before(date);
        before.checked_sub(1).map(|i| self.facts.closes[i])
    }

    /// The average, over the previous (up to 10) dates of the data, of the volume by each minute.
    fn expected_volume(&mut self, date: NaiveDate) -> &[f64] {
        let before = self.before(date);
        // A date not in the data (asked for all the same) is worked out each time; one of
        // the data, once.
        let known = self.facts.dates.get(before) == Some(&date);
        let table = |cumulative: &[Vec<u64>]| -> Box<[f64]> {
            let previous = &cumulative[before.saturating_sub(10)..before];
            let Some(first) = previous.first() else { return Box::new([]) };
            let n = previous.len() as f64;
            (0..first.len()).map(|m| previous.iter().map(|by_minute| by_minute[m]).sum::<u64>() as f64 / n).collect()
        };
        if !known {
            self.scratch = table(&self.facts.cumulative);
            return &self.scratch;
        }
        if self.expected[before].is_none() {
            self.expected[before] = Some(table(&self.facts.cumulative));
        }
        self.expected[before].as_deref().unwrap_or_default()
    }

    fn ny_dates(&self) -> Option<NyDates> {
        Some(self.facts.ny_dates.clone())
    }
}

/// Why a run could not be made.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum BacktestError {
    #[error("no bars for {symbol} {timeframe} in the requested range")]
    NoData { symbol: Symbol, timeframe: &'static str },
    #[error("the engine refused to watch {symbol}: {reason}")]
    Refused { symbol: Symbol, reason: String },
}

/// Checks a run's `strategy_id`, `timeframe` and `parameters` against the catalog
/// (`GET /api/strategies`); returns every parameter's value, defaults filled in.
pub fn validate_parameters(
    strategy_id: &str,
    timeframe: Timeframe,
    parameters: &serde_json::Map<String, serde_json::Value>,
    settings: &Settings,
) -> Result<BTreeMap<String, f64>, Vec<FieldError>> {
    let catalog = strategy::catalog(&settings.strategy_allocator);
    let Some(info) = catalog.iter().find(|s| s.strategy_id == strategy_id) else {
        let known: Vec<&str> = catalog.iter().map(|s| s.strategy_id).collect();
        return Err(vec![FieldError::new("strategy_id", format!("unknown strategy; one of {}", known.join(", ")))]);
    };
    let mut errors = Vec::new();
    if !info.timeframes.contains(&timeframe) {
        let allowed: Vec<&str> = info.timeframes.iter().map(|t| t.as_str()).collect();
        errors.push(FieldError::new("timeframe", format!("{strategy_id} runs on {}", allowed.join(", "))));
    }
    for name in parameters.keys() {
        if !info.parameters.iter().any(|p| p.name == name) {
            let known: Vec<&str> = info.parameters.iter().map(|p| p.name).collect();
            errors.push(FieldError::new(
                format!("parameters.{name}"),
                format!("unknown parameter of {strategy_id}; one of {}", known.join(", ")),
            ));
        }
    }
    let mut values = BTreeMap::new();
    for p in &info.parameters {
        let field = format!("parameters.{}", p.name);
        let value = match parameters.get(p.name) {
            None => p.default,
            Some(v) => match v.as_f64() {
                Some(x) if x.is_finite() => x,
                _ => {
                    errors.push(FieldError::new(field, "must be a number"));
                    continue;
                }
            },
        };
        if p.kind == ParameterKind::Integer && value.fract() != 0.0 {
            errors.push(FieldError::new(field, "must be a whole number"));
        } else if value < p.minimum || value > p.maximum {
            errors.push(FieldError::new(field, format!("must be between {} and {}", p.minimum, p.maximum)));
        } else {
            values.insert(p.name.to_string(), value);
        }
    }
    if strategy_id == strategy::sma_cross::ID {
        if let (Some(fast), Some(slow)) = (values.get("fast"), values.get("slow")) {
            if fast >= slow {
                errors.push(FieldError::new("parameters.fast", "must be less than slow"));
            }
        }
    }
    if errors.is_empty() {
        Ok(values)
    } else {
        Err(errors)
    }
}

/// The settings a run trades under: the operator's, with the strategy's parameters applied and
/// the allocator's auto-watch off (the run watches its one symbol itself).
fn run_settings(spec: &BacktestSpec, settings: &Settings) -> Settings {
    let mut s = settings.clone();
    s.strategy_allocator.default_strategy_id = spec.strategy_id.clone();
    s.strategy_allocator.auto_watch = false;
    let a = &mut s.strategy_allocator;
    for (name, value) in &spec.parameters {
        let money = Decimal::from_f64(*value).map(|d| d.round_dp(4));
        match name.as_str() {
            "risk_per_trade" => a.risk_per_trade = money.unwrap_or(a.risk_per_trade),
            "max_position_value" => a.max_position_value = money.unwrap_or(a.max_position_value),
            "reward_multiple" => a.reward_multiple = *value,
            "scale_out_fraction" => a.scale_out_fraction = *value,
            _ => {}
        }
    }
    s
}

fn strategy_for(spec: &BacktestSpec) -> Option<Box<dyn Strategy>> {
    if spec.strategy_id == strategy::sma_cross::ID {
        let window = |name, default: u32| spec.parameters.get(name).map_or(default, |v| *v as u32);
        let fast = window("fast", strategy::sma_cross::DEFAULT_FAST);
        let slow = window("slow", strategy::sma_cross::DEFAULT_SLOW);
        return SmaCross::new(fast, slow).ok().map(|s| Box::new(s) as Box<dyn Strategy>);
    }
    strategy::make(&spec.strategy_id)
}

/// When the engine sees a bar: at its end (`date`: the New York date the bar starts on).
fn bar_end_on(bar: &Bar, date: &NyDate, timeframe: Timeframe) -> Timestamp {
    match timeframe {
        Timeframe::Minute => crate::time::plus_seconds(&bar.start, 60),
        Timeframe::Day => date.four_pm.max(bar.start),
    }
}

struct Run {
    engine: Engine,
    broker: BarBroker,
    trades: TradeBuilder,
    keep: Keep,
    /// The trades completed, under [`Keep::Everything`]; their net P&L, under [`Keep::Metrics`].
    completed: Vec<Trade>,
    pnl: Vec<Decimal>,
    /// Orders submitted.
    placed: u64,
    /// The order log by submission (under [`Keep::Everything`]), each filled in when its order
    /// becomes final, and the log places of the orders still working.
    orders: Vec<Option<Arc<Order>>>,
    working: Vec<(ClientOrderId, usize)>,
    refusals: BTreeMap<String, u64>,
    /// Effects not yet carried out, oldest first: the engine appends to it. Carried out a
    /// generation at a time (the effects of the reports of one generation's orders make the
    /// next), which is first in, first out; `carrying` holds the generation being carried out.
    /// Both kept from event to event, so handling one allocates nothing and an effect is moved
    /// once.
    fx: Vec<Effect>,
    carrying: Vec<Effect>,
}

impl Run {
    /// The engine handles `event` at `now` (decided on `bar`); its effects are carried out, the
    /// broker's reports fed back until none are left. Whether it had any effect.
    fn handle(&mut self, event: Event, now: Timestamp, bar: &Bar) -> bool {
        self.engine.handle_into(event, now, &mut self.fx);
        self.carry_out_any(bar, now)
    }

    /// Carries out what the last event (or bar, [`Engine::bar_into`]) queued; whether there was
    /// anything.
    fn carry_out_any(&mut self, bar: &Bar, now: Timestamp) -> bool {
        if self.fx.is_empty() {
            return false;
        }
        self.carry_out(bar, now);
        true
    }

    /// Carries out the queued effects, feeding the broker's reports back until none are left.
    fn carry_out(&mut self, bar: &Bar, now: Timestamp) {
        while !self.fx.is_empty() {
            let mut generation = std::mem::take(&mut self.carrying);
            std::mem::swap(&mut generation, &mut self.fx);
            for effect in generation.drain(..) {
                self.carry_out_one(effect, bar, now);
            }
            self.carrying = generation;
        }
    }

    /// Carries out one effect; the engine's effects of the broker's reports to it are queued.
    fn carry_out_one(&mut self, effect: Effect, bar: &Bar, now: Timestamp) {
        match effect {
            Effect::Submit(order) => {
                if let Some(stop) = order.stop_loss {
                    self.trades.entry_stop(&order.symbol, stop);
                }
                self.observe(&order);
                self.broker.submit(&order, bar, now);
                self.placed += 1;
                if self.keep == Keep::Everything {
                    self.working.push((order.client_order_id.clone(), self.orders.len()));
                    self.orders.push(None);
                }
            }
            Effect::Cancel(id) => self.broker.cancel(&id, now),
            Effect::OrderUpdated(order) => {
                self.observe(&order);
                if order.status.is_final() {
                    self.engine.forget_final_order(&order.client_order_id);
                    if let Some(i) = self.working.iter().rposition(|(id, _)| *id == order.client_order_id) {
                        let (_, at) = self.working.swap_remove(i);
                        self.orders[at] = Some(order);
                    }
                }
                return;
            }
            Effect::Violation { rule, .. } => {
                *self.refusals.entry(rule.as_str().to_string()).or_default() += 1;
                return;
            }
            _ => return,
        }
        self.report();
    }

    /// Gives the trade builder an order as it is now, and keeps the trade it completes.
    fn observe(&mut self, order: &Order) {
        if let Some(trade) = self.trades.order(order) {
            match self.keep {
                Keep::Everything => self.completed.push(trade),
                Keep::Metrics => self.pnl.push(trade.net_pnl),
            }
        }
    }

    /// Queues what the engine makes of the broker's reports.
    fn report(&mut self) {
        for report in self.broker.take_reports() {
            let at = report.at();
            self.engine.handle_into(Event::Broker(report), at, &mut self.fx);
        }
    }

    /// The broker's reports of a bar (fills, expiries), and what follows from them.
    fn fills(&mut self, bar: &Bar, at: Timestamp) {
        self.report();
        self.carry_out(bar, at);
    }
}

/// Runs `spec` over `bars` (oldest first, of `spec.symbol` and `spec.timeframe`), calling
/// `progress` with the fraction done now and then.
pub fn run(
    spec: &BacktestSpec,
    settings: &Settings,
    bars: &[Bar],
    history: &mut dyn History,
    progress: &mut dyn FnMut(f64),
) -> Result<BacktestOutput, BacktestError> {
    run_keeping(Keep::Everything, spec, settings, bars, history, progress)
}

/// [`run`] for its figures alone (a sweep's combination): the same metrics, final equity and
/// counts, without keeping the order log and the trades. Those are all but a little of a run's
/// memory — about 3 KB a round trip, and `sma_cross` 5/20 makes 14,000 over a million minute
/// bars (48 MB) — and a run that keeps them writes to fresh pages all along: on two threads that
/// was a quarter of the time zeroing pages, and the threads slowed each other down.
pub fn run_metrics(
    spec: &BacktestSpec,
    settings: &Settings,
    bars: &[Bar],
    history: &mut dyn History,
    progress: &mut dyn FnMut(f64),
) -> Result<BacktestMetrics, BacktestError> {
    let output = run_keeping(Keep::Metrics, spec, settings, bars, history, progress)?;
    let BacktestOutput { metrics, final_equity, bars, orders, refusals, .. } = output;
    Ok(BacktestMetrics { metrics, final_equity, bars, orders, refusals })
}

/// [`run`], keeping what `keep` says (the output's trades and order log are empty under
/// [`Keep::Metrics`]).
fn run_keeping(
    keep: Keep,
    spec: &BacktestSpec,
    settings: &Settings,
    bars: &[Bar],
    history: &mut dyn History,
    progress: &mut dyn FnMut(f64),
) -> Result<BacktestOutput, BacktestError> {
    let warmup = bars.partition_point(|b| b.start < spec.start);
    // Every bar given: the features at entry read the entry's whole day, as the strategy did
    // (its volume counts the bars before the start too).
    let all_bars = bars;
    let (early, bars) = bars.split_at(warmup);
    let Some(first) = bars.first() else {
        return Err(BacktestError::NoData { symbol: spec.symbol.clone(), timeframe: spec.timeframe.as_str() });
    };
    let settings = run_settings(spec, settings);
    let breakeven = settings.analytics.breakeven_threshold;
    let mut engine = Engine::new(settings, spec.initial_cash, strategy::make);
    if spec.timeframe == Timeframe::Day {
        // A daily bar stands for its whole day: the session of the instant it is seen at (its
        // close) says nothing of the session its orders trade in (its fill model's open or close).
        engine.without_session_rules();
    }
    let symbol = &spec.symbol;
    let watch = Command::Watch { symbol: symbol.clone(), source: "API".into() };
    let fx = engine.handle(Event::Command(watch), first.start);
    if let Some(Effect::Reply(Err(e))) = fx.iter().find(|f| matches!(f, Effect::Reply(_))) {
        return Err(BacktestError::Refused { symbol: symbol.clone(), reason: format!("{e:?}") });
    }
    engine.replace_strategy(symbol, strategy_for(spec));
    let mut run = Run {
        engine,
        broker: BarBroker::new(spec.fill, spec.commission_rate, spec.slippage_bps),
        trades: TradeBuilder::new("BACKTEST", breakeven).without_timeline(),
        keep,
        completed: Vec::new(),
        pnl: Vec::new(),
        placed: 0,
        orders: Vec::new(),
        working: Vec::new(),
        refusals: BTreeMap::new(),
        fx: Vec::new(),
        carrying: Vec::new(),
    };
    // Metrics see every bar; the curve keeps the last point of each of MAX_CURVE_POINTS runs.
    // A date a daily bar; minute bars span at least one date per 960 (the extended session's).
    let dates = match spec.timeframe {
        Timeframe::Day => bars.len(),
        Timeframe::Minute => bars.len() / 960 + 1,
    };
    let mut stats = CurveStats::with_dates(spec.initial_cash, dates);
    let kept = bars.len().min(MAX_CURVE_POINTS);
    let mut curve = Vec::with_capacity(kept);
    let mut next_kept = curve_index(1, bars.len(), kept);
    let mut day = NyDay::default();
    // The dates of the bars' starts and ends, read from the history's when it keeps them; else
    // each worked out as the run reaches it (a table built here would cost a pass over the bars).
    let ny_dates = history.ny_dates().unwrap_or_else(|| Arc::from(Vec::new()));
    let (mut starts, mut ends) = (NyDateCursor::new(ny_dates.clone()), NyDateCursor::new(ny_dates));
    let mut epoch = crate::time::EpochSeconds::default();
    let first_date = day.date_of(first.start);
    let mut date = Some(first_date);
    let mut prev_close = history.prev_close(first_date).unwrap_or(Decimal::ZERO);
    let mut expected_volume = history.expected_volume(first_date).to_vec();
    let mut volume: u64 = early.iter().filter(|b| day.date_of(b.start) == first_date).map(|b| b.volume).sum();
    let (step, mut next_progress) = ((bars.len() / 100).max(1), 0);
    // The engine's equity version after the last bar (see the loop).
    let mut equity_version = u64::MAX;
    let mut enricher = Enricher::new();
    for (i, bar) in bars.iter().enumerate() {
        let start = epoch.of(&bar.start);
        let ny_date = starts.locate(start);
        let (today, minute) = (ny_date.date, ny_date.minute(start));
        if date != Some(today) {
            // The broker's reports at this date's open (expiries, fills) are of this date.
            run.engine.enter_date(ny_date);
            if date.is_some() {
                run.broker.expire_day_orders(bar.start);
                run.fills(bar, bar.start);
            }
            date = Some(today);
            volume = 0;
            prev_close = history.prev_close(today).unwrap_or(Decimal::ZERO);
            expected_volume.clear();
            expected_volume.extend_from_slice(history.expected_volume(today));
        }
        if run.broker.has_working() {
            let open = match spec.timeframe {
                Timeframe::Minute => bar.start,
                Timeframe::Day => ny_date.nine_thirty.max(bar.start),
            };
            // A minute bar fills by its session's rules (CONTRACT §12); a daily bar is the day.
            let session = match spec.timeframe {
                Timeframe::Minute => run.engine.session_at(bar.start),
                Timeframe::Day => SessionPhase::Regular,
            };
            run.broker.on_bar(bar, open, session);
            run.fills(bar, open);
            if run.broker.stops_placed_in_bar(bar, open) {
                run.fills(bar, open);
            }
        }
        volume += bar.volume;
        let now = bar_end_on(bar, ny_date, spec.timeframe);
        let relative_volume = relative_volume_from(&expected_volume, minute + 1, volume);
        // Entries decided on this bar are sized at the price they will fill at.
        let fill = run.broker.market_buy_fill(bar, bars.get(i + 1));
        // A daily bar ends on its own date (16:00 New York of it, or its start if later): only a
        // minute bar's end can fall on the next date.
        let (now_seconds, end_date) = match spec.timeframe {
            Timeframe::Minute => (start + 60, ends.locate(start + 60)),
            Timeframe::Day => (now.timestamp(), ny_date),
        };
        let time = BarTime { seconds: now_seconds, date: end_date };
        run.engine.bar_into(symbol, bar, prev_close, relative_volume, fill, now, Some(time), &mut run.fx);
        // A day roll (every bar of daily bars) is announced and changes nothing when carried
        // out: a bar whose only effects are day rolls leaves the book as the bar's daily-loss
        // check saw it, as a bar without effects does, and its equity is read the same way;
        // its effects are dropped rather than carried out one by one to the same end.
        let only_day_rolls = run.fx.iter().all(|effect| matches!(effect, Effect::DayRolled { .. }));
        let fx_applied = if only_day_rolls {
            run.fx.clear();
            false
        } else {
            run.carry_out_any(bar, now)
        };
        let date = end_date.date;
        let version = run.engine.equity_version();
        if fx_applied || version != equity_version {
            equity_version = version;
            match run.engine.current_equity_split().filter(|_| !fx_applied) {
                Some((cash, value)) => stats.push_split_on(date, cash, value),
                None => {
                    let equity = if fx_applied { run.engine.equity() } else { run.engine.current_equity() };
                    stats.push_on(date, equity);
                }
            }
        } else {
            stats.repeat_on(date);
        }
        if enricher.done < run.completed.len() {
            enricher.catch_up(&mut run.completed, all_bars, spec.timeframe, history);
        }
        if i == next_kept {
            curve.push(EquityPoint { timestamp: now, equity: stats.last() });
            next_kept = curve_index(curve.len() + 1, bars.len(), kept);
        }
        if i == next_progress {
            progress(i as f64 / bars.len() as f64);
            next_progress += step;
        }
    }
    // Close what is open at the last bar's close.
    let last = bars.last().expect("not empty");
    let now = bar_end_on(last, starts.locate(last.start.timestamp()), spec.timeframe);
    let working: Vec<_> =
        run.engine.orders().values().filter(|o| o.status.is_cancellable()).map(|o| o.client_order_id.clone()).collect();
    for id in working {
        run.handle(Event::Command(Command::CancelOrder { client_order_id: id }), now, last);
    }
    let fx = run.engine.close_out(END_OF_DATA_REASON, now);
    let exits: Vec<_> = fx
        .iter()
        .filter_map(|f| if let Effect::Submit(o) = f { Some(o.client_order_id.clone()) } else { None })
        .collect();
    // There is no next bar: the close-out fills at the last close whatever the fill model.
    run.broker.set_fill(FillModel::Close);
    run.fx.extend(fx);
    run.carry_out(last, now);
    if !exits.is_empty() {
        let equity = run.engine.equity();
        stats.amend_last(equity);
        if let Some(point) = curve.last_mut() {
            point.equity = equity;
        }
    }
    progress(1.0);
    for (id, at) in std::mem::take(&mut run.working) {
        run.orders[at] = run.engine.order(&id).cloned();
    }

    let mut trades = run.completed;
    enricher.catch_up(&mut trades, all_bars, spec.timeframe, history);
    let pnl = match keep {
        Keep::Everything => trades.iter().map(|t| t.net_pnl).collect(),
        Keep::Metrics => run.pnl,
    };
    let metrics = stats.finish(&pnl);
    Ok(BacktestOutput {
        metrics,
        trades,
        final_equity: run.engine.equity(),
        equity_curve: curve,
        bars: bars.len() as u64,
        orders: run.placed,
        order_log: run.orders.into_iter().flatten().collect(),
        refusals: run.refusals,
    })
}

/// Adds features at entry and excursions to each trade as it completes, from the run's bars:
/// they are then among the last read, in cache (after the run, each trade's bars come from
/// memory, and that was a fifth of a minute-bar run's time). The day's running values (VWAP
/// sums, high, volume) are carried forward from trade to trade rather than re-read from each
/// trade's day start, and each trade's bars are found from the previous trade's (see [`seek`]).
struct Enricher {
    day: NyDay,
    running: Running,
    /// The entry date of the last trade, its first bar and its 09:30 open.
    current: Option<(NaiveDate, usize, Timestamp)>,
    /// Where the last search ended.
    hint: usize,
    /// Trades of the run enriched so far.
    done: usize,
}

impl Enricher {
    fn new() -> Enricher {
        let running = Running { from: 0, next: 0, values: SessionRunning::default() };
        Enricher { day: NyDay::default(), running, current: None, hint: 0, done: 0 }
    }

    /// Enriches the trades completed since the last call, in order.
    fn catch_up(&mut self, trades: &mut [Trade], bars: &[Bar], timeframe: Timeframe, history: &mut dyn History) {
        while let Some(trade) = trades.get_mut(self.done) {
            self.enrich(trade, bars, timeframe, history);
            self.done += 1;
        }
    }

    fn enrich(&mut self, trade: &mut Trade, bars: &[Bar], timeframe: Timeframe, history: &mut dyn History) {
        // The market of the entry's decision (the bar the strategy decided on just completed),
        // read as the strategy read it: its running values and its relative volume.
        let decided = decided_at(trade);
        let (date, minute_of_day) = self.day.locate(decided);
        let (from, regular_open) = match self.current {
            Some((d, from, open)) if d == date => (from, open),
            _ => {
                let day_start = ny_instant(date, (0, 0));
                let from = seek(bars, 0, self.hint, |b| b.start < day_start);
                let open = ny_instant(date, (9, 30));
                self.current = Some((date, from, open));
                (from, open)
            }
        };
        // Bars completed by the decision; bars begun while the trade was open.
        let completed_by = decided - chrono::Duration::minutes(1);
        let to = seek(bars, from, self.hint, |b| b.start <= completed_by);
        let entered_by = trade.entry_time - chrono::Duration::minutes(1);
        let first = seek(bars, to, to, |b| b.start <= entered_by);
        self.hint = to;
        let before = self.running.after(bars, from, to, regular_open);
        let ctx = MarketContext {
            prev_close: history.prev_close(date),
            float: history.float(),
            sector: history.sector(),
            relative_volume: history.relative_volume(date, minute_of_day, before.map_or(0, |r| r.volume())),
            regular_open,
        };
        let exit_time = trade.exit_time;
        let last = seek(bars, first, first, |b| b.start < exit_time);
        if timeframe == Timeframe::Minute {
            enrich_with(trade, bars, (from, to, first, last), before, &ctx);
        } else {
            // Daily bars: no intraday state at entry; excursions over the days held.
            let ctx = MarketContext { relative_volume: None, ..ctx };
            enrich_with(trade, bars, (from, to, first, last), before, &ctx);
        }
    }
}

/// The first index at or after `lo` whose bar fails `holds` (true of a leading run of
/// `bars[lo..]`), searched forward from `hint` in doubling steps: the answer is usually near the
/// hint, so the search reads a few bars near it rather than halving the whole slice. Correct
/// whatever the hint.
fn seek(bars: &[Bar], lo: usize, hint: usize, holds: impl Fn(&Bar) -> bool) -> usize {
    let hint = hint.clamp(lo, bars.len());
    if hint > lo && !holds(&bars[hint - 1]) {
        return lo + bars[lo..hint].partition_point(holds);
    }
    // Every bar before `known` holds.
    let (mut known, mut step) = (hint, 1);
    loop {
        let probe = known + step - 1;
        if probe >= bars.len() {
            return known + bars[known..].partition_point(holds);
        }
        if !holds(&bars[probe]) {
            return known + bars[known..probe].partition_point(holds);
        }
        known = probe + 1;
        step *= 2;
    }
}

/// A day's running values, moved forward bar by bar (back to the day's start only when asked
/// for an earlier point).
struct Running {
    /// The day's first bar, and the next bar to add.
    from: usize,
    next: usize,
    values: SessionRunning,
}

impl Running {
    /// The running values of the day starting at `bars[from]` after `bars[end - 1]` (`None` when
    /// `end == from`).
    fn after(&mut self, bars: &[Bar], from: usize, end: usize, regular_open: Timestamp) -> Option<SessionRunning> {
        if self.from != from || self.next > end {
            *self = Running { from, next: from, values: SessionRunning::default() };
        }
        for bar in &bars[self.next..end] {
            self.values.add(bar, in_session(bar, regular_open));
        }
        self.next = end;
        (end > from).then_some(self.values)
    }
}

/// The index of the `k`-th (from 1) of `kept` points taken from a curve of `n`: the last point
/// of each of `kept` equal runs, so the final equity is always kept (`usize::MAX` past the end).
pub fn curve_index(k: usize, n: usize, kept: usize) -> usize {
    if k == 0 || k > kept {
        return usize::MAX;
    }
    (k * n).div_ceil(kept) - 1
}

/// Dollars as `f64` for JSON (exact values stay `Decimal` inside).
pub fn dollars(d: Decimal) -> f64 {
    crate::market::decimal_to_f64(d)
}

#[cfg(test)]
mod tests;
