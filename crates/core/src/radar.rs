//! The momentum radar's columns, filters and ranking (research/domain.md §2).
//!
//! - `percentage_gain` = (last − previous regular close) / previous close × 100.
//! - `change_1m`, `change_5m` = (close of the last completed minute bar − open of the bar 1 or 5
//!   bars back) / that open × 100; `null` until enough bars exist.
//! - `volume` = shares traded today (the New York date, pre-market included).
//! - `average_volume` = mean daily volume of the previous 10 trading days ([`AVERAGE_VOLUME_DAYS`]).
//! - `relative_volume` is time-of-day adjusted: volume so far today divided by the volume an
//!   average day has traded by the same minute (`average_volume` × the expected cumulative
//!   fraction of a day's volume at that minute, from the market's intraday volume profile).
//! - `float` and `sector` are reference data: the imported values (`instrument_reference`) over
//!   the market source's; `null` when neither knows them (a real market-data feed has no float).
//!
//! The whole trading day (CONTRACT §12), from the symbol's bars of the day and the calendar's
//! [`TradingDay`] of the scan's date, tallied bar by bar ([`DayTally`]):
//! - `session` = the market session at `captured_at` on the service's calendar (`ALWAYS_OPEN`
//!   is `REGULAR` all day).
//! - `premarket_volume` = shares traded from the pre-market open to the regular open (04:00–09:30
//!   New York on the NYSE calendar; `ALWAYS_OPEN` has no pre-market: 0); `premarket_high` = the
//!   highest price traded then, `null` without a pre-market trade.
//! - `gap_pct` = (gap price − previous regular close) / previous close × 100, where the gap price
//!   is the last trade while in the pre-market (once the symbol traded in it), and once the
//!   regular session opened the day's regular open (its first trade at or after the regular
//!   open; until that trade, the pre-market's last trade); `null` without a previous close or
//!   without a trade today.
//!
//! Unknown reference data in the filters: a float ceiling (`max_float`) exists to find low
//! floats, so a symbol whose float is unknown does **not** pass it — unless the ceiling is at its
//! maximum ([`NO_FLOAT_CEILING`]), which means "no ceiling" and lets unknown floats through. No
//! filter reads the sector.

use crate::calendar::{SessionPhase, TradingDay};
use crate::market::{Bar, Price};
use crate::settings::MomentumRadarSettings;
use crate::symbol::Symbol;
use crate::time::Timestamp;
use serde::{Deserialize, Serialize};
use std::num::NonZeroI64;

/// The largest `momentum_radar.max_float` accepted: a ceiling set there is no ceiling, and a
/// symbol whose float is unknown passes it. The settings define it (the validator bounds
/// `max_float` with it); the filter's meaning of it is here.
pub use crate::settings::NO_FLOAT_CEILING;

/// Trading days in `average_volume`: every market source averages a symbol's daily volume over
/// this many previous days, so the radar's relative volume means the same whatever feeds it.
pub const AVERAGE_VOLUME_DAYS: usize = 10;

/// What the radar knows about one symbol at a scan.
#[derive(Clone, Debug)]
pub struct RadarInput<'a> {
    pub symbol: &'a Symbol,
    /// `None` when neither the imported reference data nor the market source knows it.
    pub sector: Option<&'a str>,
    /// Shares in the float; `None` when unknown.
    pub float: Option<u64>,
    pub prev_close: Price,
    pub last: Price,
    pub volume: u64,
    pub average_volume: u64,
    /// Expected fraction of a day's volume traded by now (0..=1).
    pub expected_fraction: f64,
    /// Completed minute bars, oldest first (the last 5 or more).
    pub recent: &'a [Bar],
    /// The market session at the scan (the same for every input of a scan, as
    /// `expected_fraction` is).
    pub session: SessionPhase,
    /// The symbol's day so far, tallied from its bars on the calendar's [`TradingDay`] of the
    /// scan's date (the default when the date does not trade).
    pub day: DayTally,
}

/// A symbol's day as its bars tell it, for the radar's pre-market columns (CONTRACT §12). A
/// source folds each bar in as it completes ([`DayTally::add`]), so a scan over the whole market
/// reads a few words per symbol instead of going over the day's bars again. Kept small (48
/// bytes): a live market holds two per symbol and a scan reads one for every symbol, every minute.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DayTally {
    premarket_volume: u64,
    /// Prices in ticks, `None` for none (a trade is never at 0).
    premarket_high: Option<NonZeroI64>,
    premarket_close: Option<NonZeroI64>,
    regular_open: Option<NonZeroI64>,
    /// The start of the last bar folded in: a bar seen again (the same minute in two
    /// snapshots) is not counted twice.
    last_start: Option<Timestamp>,
}

fn ticks(price: Price) -> Option<NonZeroI64> {
    NonZeroI64::new(price.0)
}

impl DayTally {
    /// The tally of `bars` (oldest first) on `day`.
    pub fn of_bars<'a>(bars: impl IntoIterator<Item = &'a Bar>, day: &TradingDay) -> DayTally {
        let mut tally = DayTally::default();
        for bar in bars {
            tally.add(bar, day);
        }
        tally
    }

    /// Folds in the next bar of the day (bars of any width that do not straddle the regular
    /// open: minute bars, half-hour bars). A bar starting no later than the last one folded in
    /// is one already counted, and is left out; bars before the pre-market open (overnight)
    /// and after the regular close (after-hours) count for none of the columns.
    #[inline]
    pub fn add(&mut self, bar: &Bar, day: &TradingDay) {
        if self.last_start.is_some_and(|last| bar.start <= last) {
            return;
        }
        self.last_start = Some(bar.start);
        if bar.start >= day.pre_market_open && bar.start < day.regular_open {
            self.premarket_volume += bar.volume;
            self.premarket_high = self.premarket_high.max(ticks(bar.high));
            self.premarket_close = ticks(bar.close);
        } else if bar.start >= day.regular_open && bar.start < day.regular_close && self.regular_open.is_none() {
            self.regular_open = ticks(bar.open);
        }
    }

    /// This tally with the bar in progress folded in as it stands (a scan between minute
    /// boundaries), the tally itself unchanged.
    #[inline]
    pub fn with_partial(mut self, bar: Option<&Bar>, day: &TradingDay) -> DayTally {
        if let Some(bar) = bar {
            self.add(bar, day);
        }
        self
    }

    /// Shares traded in the bars starting in `[pre_market_open, regular_open)`.
    pub fn premarket_volume(&self) -> u64 {
        self.premarket_volume
    }

    /// The highest high of those bars; `None` without one.
    pub fn premarket_high(&self) -> Option<Price> {
        self.premarket_high.map(|t| Price(t.get()))
    }

    /// The close of the last of them: the pre-market's last trade.
    pub fn premarket_close(&self) -> Option<Price> {
        self.premarket_close.map(|t| Price(t.get()))
    }

    /// The open of the first bar starting in `[regular_open, regular_close)`: the day's first
    /// regular trade.
    pub fn regular_open(&self) -> Option<Price> {
        self.regular_open.map(|t| Price(t.get()))
    }

    /// Whether the symbol traded in the pre-market.
    pub fn traded_premarket(&self) -> bool {
        self.premarket_high.is_some()
    }
}

/// One radar row (seed §2.4 plus `relative_volume` and `rank`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RadarRow {
    pub rank: u32,
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub symbol: Symbol,
    #[cfg_attr(feature = "openapi", schema(value_type = f64))]
    pub price: Price,
    pub percentage_gain: f64,
    pub change_1m: Option<f64>,
    pub change_5m: Option<f64>,
    pub volume: u64,
    pub average_volume: u64,
    pub relative_volume: Option<f64>,
    /// Shares in the float; `null` when unknown (not imported, and the market source has none).
    pub float: Option<u64>,
    /// `null` when unknown (not imported, and the market source has none).
    pub sector: Option<String>,
    #[serde(with = "crate::time::serde_ts")]
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub captured_at: Timestamp,
    /// The symbol's trading was halted when the scan was published (CONTRACT §11).
    #[serde(default)]
    pub halted: bool,
    /// The market session at `captured_at` on the service's calendar (CONTRACT §12).
    #[serde(deserialize_with = "session_named")]
    pub session: SessionPhase,
    /// The pre-market price, or the day's regular open, against the previous close, in percent;
    /// `null` without a previous close or a trade today.
    pub gap_pct: Option<f64>,
    /// Shares traded in the pre-market today (0 when none; `ALWAYS_OPEN` has none).
    pub premarket_volume: u64,
    /// The highest price traded in the pre-market today; `null` without a pre-market trade.
    #[cfg_attr(feature = "openapi", schema(value_type = Option<f64>))]
    pub premarket_high: Option<Price>,
}

/// Reads a session by its contract name ([`SessionPhase`] is written by name and read nowhere
/// else: a cached scan is the one place rows are read back).
fn session_named<'de, D: serde::Deserializer<'de>>(d: D) -> Result<SessionPhase, D::Error> {
    let name = String::deserialize(d)?;
    [SessionPhase::Closed, SessionPhase::PreMarket, SessionPhase::Regular, SessionPhase::AfterHours]
        .into_iter()
        .find(|phase| phase.as_str() == name)
        .ok_or_else(|| serde::de::Error::custom(format!("unknown session {name:?}")))
}

fn pct(from: Price, to: Price) -> Option<f64> {
    (from.0 > 0).then(|| round4((to.0 - from.0) as f64 / from.0 as f64 * 100.0))
}

fn round4(x: f64) -> f64 {
    (x * 10_000.0).round() / 10_000.0
}

fn change_over(recent: &[Bar], bars: usize) -> Option<f64> {
    let last = recent.last()?;
    let first = recent.len().checked_sub(bars).map(|i| &recent[i])?;
    pct(first.open, last.close)
}

/// The gap against the previous close: in the pre-market the last trade (once the symbol traded
/// there), otherwise the day's regular open, or before its first regular trade the pre-market's
/// last one.
fn gap_pct(input: &RadarInput<'_>) -> Option<f64> {
    let day = &input.day;
    let price = match input.session {
        SessionPhase::PreMarket => day.traded_premarket().then_some(input.last),
        _ => day.regular_open().or(day.premarket_close()),
    }?;
    pct(input.prev_close, price)
}

fn percentage_gain(input: &RadarInput<'_>) -> f64 {
    pct(input.prev_close, input.last).unwrap_or(0.0)
}

fn relative_volume(input: &RadarInput<'_>) -> Option<f64> {
    let expected = input.average_volume as f64 * input.expected_fraction;
    (expected >= 1.0).then(|| round4(input.volume as f64 / expected))
}

/// The row of one symbol (rank 0 until ranked).
pub fn radar_row(input: &RadarInput<'_>, captured_at: Timestamp) -> RadarRow {
    RadarRow {
        rank: 0,
        symbol: input.symbol.clone(),
        price: input.last,
        percentage_gain: percentage_gain(input),
        change_1m: change_over(input.recent, 1),
        change_5m: change_over(input.recent, 5),
        volume: input.volume,
        average_volume: input.average_volume,
        relative_volume: relative_volume(input),
        float: input.float,
        sector: input.sector.map(str::to_string),
        captured_at,
        halted: false,
        session: input.session,
        gap_pct: gap_pct(input),
        premarket_volume: input.day.premarket_volume(),
        premarket_high: input.day.premarket_high(),
    }
}

/// Whether a float passes the ceiling `max_float`: a known float at or under it; an unknown one
/// only when the ceiling is [`NO_FLOAT_CEILING`] (no ceiling). The ceiling is there to find low
/// floats, and an unknown float is not known to be low.
pub fn float_passes(float: Option<u64>, max_float: u64) -> bool {
    match float {
        Some(float) => float <= max_float,
        None => max_float >= NO_FLOAT_CEILING,
    }
}

/// Whether a row passes the radar's filters (an unknown float: see [`float_passes`]).
pub fn passes(row: &RadarRow, f: &MomentumRadarSettings) -> bool {
    screen(
        &Screened {
            symbol: &row.symbol,
            price: row.price,
            percentage_gain: row.percentage_gain,
            relative_volume: row.relative_volume,
            float: row.float,
            volume: row.volume,
        },
        f,
    )
}

/// What the filters read of a row.
struct Screened<'a> {
    symbol: &'a Symbol,
    price: Price,
    percentage_gain: f64,
    relative_volume: Option<f64>,
    float: Option<u64>,
    volume: u64,
}

fn screen(r: &Screened<'_>, f: &MomentumRadarSettings) -> bool {
    let price = r.price.to_decimal();
    price >= f.min_price
        && price <= f.max_price
        && r.percentage_gain >= f.min_percentage_gain
        && r.relative_volume.unwrap_or(0.0) >= f.min_relative_volume
        && float_passes(r.float, f.max_float)
        && r.volume >= f.min_volume
        && (f.universe.is_empty() || f.universe.contains(r.symbol))
}

/// Whether `input`'s row would pass the filters ([`passes`]), from the figures they read alone:
/// most of the market fails them, and a scan makes rows (the sector copied, the changes and the
/// gap worked out) of what passes only.
fn input_passes(input: &RadarInput<'_>, f: &MomentumRadarSettings) -> bool {
    screen(
        &Screened {
            symbol: input.symbol,
            price: input.last,
            percentage_gain: percentage_gain(input),
            relative_volume: relative_volume(input),
            float: input.float,
            volume: input.volume,
        },
        f,
    )
}

/// Scores every input, keeps the rows passing the filters, ranks them by gain (ties by symbol)
/// and keeps at most `limit`.
pub fn scan<'a>(
    inputs: impl IntoIterator<Item = RadarInput<'a>>,
    filters: &MomentumRadarSettings,
    captured_at: Timestamp,
    limit: usize,
) -> Vec<RadarRow> {
    let mut rows: Vec<RadarRow> =
        inputs.into_iter().filter(|i| input_passes(i, filters)).map(|i| radar_row(&i, captured_at)).collect();
    rows.sort_by(|a, b| b.percentage_gain.total_cmp(&a.percentage_gain).then_with(|| a.symbol.cmp(&b.symbol)));
    rows.truncate(limit);
    for (i, row) in rows.iter_mut().enumerate() {
        row.rank = i as u32 + 1;
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::calendar::MarketCalendar;
    use crate::settings::MarketCalendarKind;
    use crate::time::parse_ts;
    use rust_decimal::Decimal;

    fn bar(open: i64, close: i64) -> Bar {
        let (o, c) = (Price::from_cents(open), Price::from_cents(close));
        Bar {
            start: parse_ts("2026-11-20T14:30:00Z").unwrap(),
            open: o,
            high: o.max(c),
            low: o.min(c),
            close: c,
            volume: 1,
        }
    }

    fn input<'a>(symbol: &'a Symbol, recent: &'a [Bar], prev: i64, last: i64, volume: u64) -> RadarInput<'a> {
        RadarInput {
            symbol,
            sector: Some("Health Care"),
            float: Some(5_000_000),
            prev_close: Price::from_cents(prev),
            last: Price::from_cents(last),
            volume,
            average_volume: 1_000_000,
            expected_fraction: 0.25,
            recent,
            session: SessionPhase::Regular,
            day: DayTally::default(),
        }
    }

    #[test]
    fn columns_follow_their_definitions() {
        let sym = Symbol::parse("ABCD").unwrap();
        let recent = [bar(400, 410), bar(410, 420), bar(420, 430), bar(430, 440), bar(440, 450), bar(450, 460)];
        let row = radar_row(&input(&sym, &recent, 400, 460, 2_500_000), parse_ts("2026-11-20T14:36:00Z").unwrap());
        assert_eq!(row.percentage_gain, 15.0);
        assert_eq!(row.change_1m, Some(2.2222), "(4.60 − 4.50) / 4.50");
        assert_eq!(row.change_5m, Some(12.1951), "(4.60 − 4.10) / 4.10");
        assert_eq!(row.relative_volume, Some(10.0), "2.5M / (1M × 0.25)");
        let few = radar_row(&input(&sym, &recent[..3], 400, 460, 0), row.captured_at);
        assert_eq!(few.change_5m, None);
        assert_eq!(few.relative_volume, Some(0.0));
        let none = radar_row(&input(&sym, &[], 0, 460, 0), row.captured_at);
        assert_eq!((none.change_1m, none.percentage_gain), (None, 0.0));
    }

    #[test]
    fn filters_and_ranking() {
        let names: Vec<Symbol> =
            ["AAA", "BBB", "CCC", "DDD", "EEE"].iter().map(|s| Symbol::parse(s).unwrap()).collect();
        let recent = [bar(100, 101)];
        let inputs = vec![
            input(&names[0], &recent, 500, 600, 3_000_000),   // +20%, rvol 12
            input(&names[1], &recent, 500, 700, 3_000_000),   // +40%
            input(&names[2], &recent, 500, 520, 3_000_000),   // +4%: under min gain
            input(&names[3], &recent, 2000, 2600, 3_000_000), // $26: over max price
            input(&names[4], &recent, 500, 700, 100_000),     // rvol 0.4: under min rvol
        ];
        let f = MomentumRadarSettings::default();
        let at = parse_ts("2026-11-20T15:00:00Z").unwrap();
        let rows = scan(inputs.clone(), &f, at, 25);
        let got: Vec<_> = rows.iter().map(|r| (r.rank, r.symbol.as_str())).collect();
        assert_eq!(got, vec![(1, "BBB"), (2, "AAA")]);
        assert_eq!(scan(inputs.clone(), &f, at, 1).len(), 1);
        let wide = MomentumRadarSettings {
            max_price: Decimal::new(100, 0),
            min_percentage_gain: 0.0,
            min_relative_volume: 0.0,
            universe: vec![names[2].clone(), names[3].clone()],
            ..f
        };
        let got: Vec<_> = scan(inputs.clone(), &wide, at, 25).into_iter().map(|r| r.symbol.to_string()).collect();
        assert_eq!(got, vec!["DDD", "CCC"]);
        // The scan screens inputs before making rows: the same verdict as the rows'.
        for filters in [&f, &wide] {
            for i in &inputs {
                assert_eq!(input_passes(i, filters), passes(&radar_row(i, at), filters), "{}", i.symbol);
            }
        }
    }

    /// An unknown float fails a float ceiling (the ceiling finds low floats) unless the ceiling
    /// is the "no ceiling" maximum; a known float is compared as it is; an unknown sector is
    /// `None` on the row and filters nothing.
    #[test]
    fn unknown_float_fails_a_ceiling_and_unknown_sector_is_none() {
        let names: Vec<Symbol> = ["KNOWN", "BIG", "UNKNOWN"].iter().map(|s| Symbol::parse(s).unwrap()).collect();
        let recent = [bar(100, 101)];
        let mut inputs = vec![
            input(&names[0], &recent, 500, 600, 3_000_000),
            input(&names[1], &recent, 500, 600, 3_000_000),
            input(&names[2], &recent, 500, 600, 3_000_000),
        ];
        inputs[1].float = Some(50_000_000);
        inputs[2].float = None;
        inputs[2].sector = None;
        let at = parse_ts("2026-11-20T15:00:00Z").unwrap();
        let f = MomentumRadarSettings::default();
        let got: Vec<_> = scan(inputs.clone(), &f, at, 25).into_iter().map(|r| r.symbol.to_string()).collect();
        assert_eq!(got, vec!["KNOWN"], "50M is over the 20M ceiling; unknown is not known to be under it");
        let open = MomentumRadarSettings { max_float: NO_FLOAT_CEILING, ..f };
        let rows = scan(inputs, &open, at, 25);
        let got: Vec<_> = rows.iter().map(|r| (r.symbol.to_string(), r.float, r.sector.clone())).collect();
        assert_eq!(
            got,
            vec![
                ("BIG".into(), Some(50_000_000), Some("Health Care".into())),
                ("KNOWN".into(), Some(5_000_000), Some("Health Care".into())),
                ("UNKNOWN".into(), None, None),
            ]
        );
        assert!(float_passes(Some(20_000_000), 20_000_000) && !float_passes(Some(20_000_001), 20_000_000));
        assert!(!float_passes(None, NO_FLOAT_CEILING - 1) && float_passes(None, NO_FLOAT_CEILING));
        let json = serde_json::to_value(&rows[2]).unwrap();
        assert!(json["float"].is_null() && json["sector"].is_null(), "{json}");
    }

    const NYSE: MarketCalendar = MarketCalendar::new(MarketCalendarKind::Nyse);
    const ALWAYS_OPEN: MarketCalendar = MarketCalendar::new(MarketCalendarKind::AlwaysOpen);

    /// A minute bar starting at `hh:mm` New York on Monday 2026-11-23 (EST: UTC−5).
    fn ny_bar(hh: u32, mm: u32, open: i64, high: i64, close: i64, volume: u64) -> Bar {
        let start = parse_ts(&format!("2026-11-23T{:02}:{:02}:00Z", hh + 5, mm)).unwrap();
        let (open, high, close) = (Price::from_cents(open), Price::from_cents(high), Price::from_cents(close));
        Bar { start, open, high, low: open.min(close), close, volume }
    }

    /// A gapper's Monday: an overnight print at 03:00, pre-market trades from 04:00 to 09:29,
    /// the regular open at 09:30 and on.
    fn gapper_day() -> Vec<Bar> {
        vec![
            ny_bar(3, 0, 400, 405, 405, 50),      // overnight: before the pre-market
            ny_bar(4, 0, 450, 470, 460, 1_000),   // the news
            ny_bar(7, 15, 460, 520, 510, 20_000), // the pre-market high
            ny_bar(9, 29, 505, 508, 500, 5_000),  // the pre-market's last trade at 5.00
            ny_bar(9, 30, 530, 560, 550, 90_000), // the regular open at 5.30
            ny_bar(9, 31, 550, 600, 590, 70_000),
        ]
    }

    /// The row of a gapper (previous close 4.00) scanned at `at` New York on `calendar`, from
    /// its bars up to then, its last trade the last bar's close.
    fn gapper_row(calendar: MarketCalendar, at: &str, prev: i64) -> RadarRow {
        let at = parse_ts(at).unwrap();
        let day = calendar.trading_day(calendar.date_of(at)).unwrap();
        let bars: Vec<Bar> =
            gapper_day().into_iter().filter(|b| b.start + chrono::Duration::minutes(1) <= at).collect();
        let sym = Symbol::parse("GAPR").unwrap();
        let last = bars.last().unwrap().close;
        let input = RadarInput {
            last,
            session: calendar.phase(at),
            day: DayTally::of_bars(&bars, &day),
            ..input(&sym, &bars, prev, 0, bars.iter().map(|b| b.volume).sum())
        };
        radar_row(&input, at)
    }

    #[test]
    fn in_the_pre_market_the_gap_is_the_last_trade_against_the_previous_close() {
        // 08:00 New York: the pre-market's bars so far (04:00 and 07:15), the last trade 5.10.
        let row = gapper_row(NYSE, "2026-11-23T13:00:00Z", 400);
        assert_eq!(row.session, SessionPhase::PreMarket);
        assert_eq!(row.premarket_volume, 21_000, "04:00 and 07:15; not the overnight print");
        assert_eq!(row.premarket_high, Some(Price::from_cents(520)));
        assert_eq!(row.gap_pct, Some(27.5), "(5.10 − 4.00) / 4.00");
        assert_eq!(row.gap_pct, Some(row.percentage_gain), "the pre-market price is the last trade");
    }

    #[test]
    fn once_the_regular_session_opened_the_gap_is_the_regular_open() {
        // 10:00 New York: every bar of the day; the regular open 5.30, the last trade 5.90.
        let row = gapper_row(NYSE, "2026-11-23T15:00:00Z", 400);
        assert_eq!(row.session, SessionPhase::Regular);
        assert_eq!(row.gap_pct, Some(32.5), "(5.30 − 4.00) / 4.00, not the last trade");
        assert_eq!(row.percentage_gain, 47.5);
        assert_eq!((row.premarket_volume, row.premarket_high), (26_000, Some(Price::from_cents(520))));
        // 09:30:00, before the first regular trade: the gap as the pre-market left it (5.00).
        let opening = gapper_row(NYSE, "2026-11-23T14:30:00Z", 400);
        assert_eq!((opening.session, opening.gap_pct), (SessionPhase::Regular, Some(25.0)));
        assert_eq!(opening.premarket_volume, 26_000);
    }

    #[test]
    fn always_open_has_no_pre_market_and_gaps_from_the_days_first_trade() {
        // The same bars on ALWAYS_OPEN: REGULAR all day, the day's first trade (03:00 at 4.00,
        // against a previous close of 3.20) is its open.
        for at in ["2026-11-23T13:00:00Z", "2026-11-23T15:00:00Z"] {
            let row = gapper_row(ALWAYS_OPEN, at, 320);
            assert_eq!(row.session, SessionPhase::Regular, "{at}");
            assert_eq!((row.premarket_volume, row.premarket_high), (0, None), "{at}");
            assert_eq!(row.gap_pct, Some(25.0), "{at}: (4.00 − 3.20) / 3.20");
        }
    }

    #[test]
    fn no_pre_market_trade_and_no_previous_close() {
        let sym = Symbol::parse("QUIET").unwrap();
        let day = NYSE.trading_day(chrono::NaiveDate::from_ymd_opt(2026, 11, 23).unwrap()).unwrap();
        // 08:00 without a trade since 04:00 (an overnight print only): no pre-market figures,
        // no gap — the last trade is yesterday's price.
        let overnight = [ny_bar(3, 0, 400, 405, 405, 50)];
        let at = parse_ts("2026-11-23T13:00:00Z").unwrap();
        let pre = RadarInput {
            session: SessionPhase::PreMarket,
            day: DayTally::of_bars(&overnight, &day),
            ..input(&sym, &overnight, 400, 405, 50)
        };
        let row = radar_row(&pre, at);
        assert_eq!((row.premarket_volume, row.premarket_high, row.gap_pct), (0, None, None));
        // 10:00: no pre-market trade, the regular open 4.40: the gap is the open's.
        let regular_bars = [ny_bar(3, 0, 400, 405, 405, 50), ny_bar(9, 45, 440, 450, 445, 3_000)];
        let regular = RadarInput {
            session: SessionPhase::Regular,
            day: DayTally::of_bars(&regular_bars, &day),
            ..input(&sym, &regular_bars, 400, 445, 3_050)
        };
        let row = radar_row(&regular, parse_ts("2026-11-23T15:00:00Z").unwrap());
        assert_eq!((row.premarket_volume, row.premarket_high, row.gap_pct), (0, None, Some(10.0)));
        // No trade yet in the regular session either: nothing to gap.
        let none = RadarInput { day: DayTally::of_bars(&overnight, &day), ..regular.clone() };
        assert_eq!(radar_row(&none, at).gap_pct, None);
        // No previous close: no gap, whatever traded.
        let unknown = RadarInput { prev_close: Price(0), ..regular };
        assert_eq!(radar_row(&unknown, at).gap_pct, None);
    }

    #[test]
    fn a_bar_seen_again_is_counted_once_and_after_hours_is_no_regular_open() {
        let day = NYSE.trading_day(chrono::NaiveDate::from_ymd_opt(2026, 11, 23).unwrap()).unwrap();
        let mut tally = DayTally::default();
        let pre = ny_bar(8, 0, 500, 510, 505, 1_000);
        tally.add(&pre, &day);
        tally.add(&pre, &day);
        assert_eq!(tally.premarket_volume(), 1_000, "the same minute from two snapshots");
        // In progress: read with the partial bar, not kept.
        let partial = ny_bar(8, 1, 505, 530, 520, 200);
        let read = tally.with_partial(Some(&partial), &day);
        assert_eq!((read.premarket_volume(), read.premarket_high()), (1_200, Some(Price::from_cents(530))));
        assert_eq!(tally.premarket_volume(), 1_000);
        // A halted day: nothing in the regular session, a print after the close opens nothing.
        tally.add(&ny_bar(16, 30, 480, 480, 480, 10), &day);
        assert_eq!(tally.regular_open(), None);
        // Half-hour bars tally as their minutes do.
        let halves =
            [ny_bar(4, 0, 450, 470, 460, 1_000), ny_bar(9, 0, 500, 520, 510, 4_000), ny_bar(9, 30, 530, 560, 550, 9)];
        let tally = DayTally::of_bars(&halves, &day);
        assert_eq!(
            (tally.premarket_volume(), tally.premarket_high(), tally.premarket_close(), tally.regular_open()),
            (5_000, Some(Price::from_cents(520)), Some(Price::from_cents(510)), Some(Price::from_cents(530)))
        );
    }

    #[test]
    fn a_tally_is_small() {
        assert!(std::mem::size_of::<DayTally>() <= 48, "{}", std::mem::size_of::<DayTally>());
    }

    #[test]
    fn rows_read_back_keep_the_session() {
        let row = gapper_row(NYSE, "2026-11-23T13:00:00Z", 400);
        let json = serde_json::to_value(&row).unwrap();
        assert_eq!(json["session"], "PRE_MARKET");
        assert_eq!((json["premarket_volume"].as_u64(), json["premarket_high"].as_f64()), (Some(21_000), Some(5.2)));
        let back: RadarRow = serde_json::from_value(json.clone()).unwrap();
        assert_eq!(back, row);
        let mut unknown = json;
        unknown["session"] = "LUNCH".into();
        assert!(serde_json::from_value::<RadarRow>(unknown).is_err());
    }
}
