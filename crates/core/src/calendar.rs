//! Market session calendar: which dates trade, and when each session phase begins and ends.
//!
//! Two calendars exist ([`MarketCalendarKind`]):
//! - `ALWAYS_OPEN`: every date trades and every moment is in the regular session. Day-scoped
//!   state still needs a "day", so a trading day is the New York calendar day (midnight to
//!   midnight, America/New_York).
//! - `NYSE`: weekdays minus exchange holidays; pre-market 04:00, regular 09:30–16:00 (13:00 on
//!   early-close days), after-hours until 20:00 (17:00 on early-close days), all in
//!   America/New_York with daylight saving time taken from the tz database.
//!
//! Holidays and early closes are computed from the exchange's rules, not read from per-year
//! tables. Unscheduled closures (national days of mourning, weather or other emergencies) are
//! **not** modelled: on such a day this calendar reports a normal session.
//!
//! Pure: nothing here reads the wall clock; every answer is a function of its arguments.

use crate::settings::MarketCalendarKind;
use crate::time::Timestamp;
use chrono::{Datelike, Duration, NaiveDate, NaiveTime, TimeZone, Utc, Weekday};
use chrono_tz::America::New_York;
use serde::Serialize;

/// Where a moment falls in the exchange day.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum SessionPhase {
    Closed,
    PreMarket,
    Regular,
    AfterHours,
}

/// One trading day's times, as UTC instants.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TradingDay {
    /// The New York calendar date of the session.
    pub date: NaiveDate,
    pub pre_market_open: Timestamp,
    pub regular_open: Timestamp,
    pub regular_close: Timestamp,
    pub after_hours_close: Timestamp,
    /// Regular session ends at 13:00 (after-hours at 17:00) instead of 16:00 (20:00).
    pub early_close: bool,
}

/// Where a moment stands in the exchange day, as `GET /api/market/session` and the
/// `market.session` event show it (CONTRACT §12).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SessionView {
    pub session: SessionPhase,
    /// The New York calendar date of the moment.
    pub trading_day: NaiveDate,
    /// That date's session times; `None` when the exchange does not trade on it.
    pub day: Option<TradingDay>,
    /// The phase that begins next, and when.
    pub next_session: SessionPhase,
    pub next_session_at: Timestamp,
}

impl SessionPhase {
    /// The contract's name (`PRE_MARKET`, `REGULAR`, `AFTER_HOURS`, `CLOSED`).
    pub fn as_str(self) -> &'static str {
        match self {
            SessionPhase::Closed => "CLOSED",
            SessionPhase::PreMarket => "PRE_MARKET",
            SessionPhase::Regular => "REGULAR",
            SessionPhase::AfterHours => "AFTER_HOURS",
        }
    }

    /// The regular session: the only one in which a venue triggers resting stops and takes
    /// market orders (CONTRACT §12).
    pub fn is_regular(self) -> bool {
        self == SessionPhase::Regular
    }

    /// The pre-market or the after-hours: only extended-hours limit orders trade.
    pub fn is_extended(self) -> bool {
        matches!(self, SessionPhase::PreMarket | SessionPhase::AfterHours)
    }
}

/// Session calendar of one [`MarketCalendarKind`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MarketCalendar {
    kind: MarketCalendarKind,
}

/// NYSE wall-clock times (America/New_York) as (hour, minute).
const PRE_MARKET_OPEN: (u32, u32) = (4, 0);
const REGULAR_OPEN: (u32, u32) = (9, 30);
const REGULAR_CLOSE: (u32, u32) = (16, 0);
const EARLY_REGULAR_CLOSE: (u32, u32) = (13, 0);
const AFTER_HOURS_CLOSE: (u32, u32) = (20, 0);
const EARLY_AFTER_HOURS_CLOSE: (u32, u32) = (17, 0);

impl MarketCalendar {
    pub const fn new(kind: MarketCalendarKind) -> Self {
        Self { kind }
    }

    pub fn kind(&self) -> MarketCalendarKind {
        self.kind
    }

    /// NYSE: weekdays that are not exchange holidays. ALWAYS_OPEN: every date.
    pub fn is_trading_day(&self, date: NaiveDate) -> bool {
        match self.kind {
            MarketCalendarKind::AlwaysOpen => true,
            MarketCalendarKind::Nyse => is_weekday(date) && !is_nyse_holiday(date),
        }
    }

    /// The session times of `date` if it is a trading day. NYSE: pre-market 04:00, regular
    /// 09:30–16:00 (13:00 on early-close days), after-hours until 20:00 (17:00 on early-close
    /// days), all America/New_York. ALWAYS_OPEN: every phase spans the whole New York calendar
    /// day: `pre_market_open = regular_open` = 00:00 NY of `date`, `regular_close =
    /// after_hours_close` = 00:00 NY of the next date, `early_close` false.
    pub fn trading_day(&self, date: NaiveDate) -> Option<TradingDay> {
        // A pure function of (kind, date), asked for every bar of every run (a sweep repeats
        // the same dates per combination): remembered per thread.
        thread_local! {
            static KNOWN: std::cell::RefCell<std::collections::HashMap<(bool, NaiveDate), Option<TradingDay>, FastHash>> =
                std::cell::RefCell::new(std::collections::HashMap::default());
        }
        let key = (self.kind == MarketCalendarKind::Nyse, date);
        if let Some(known) = KNOWN.with(|k| k.borrow().get(&key).copied()) {
            return known;
        }
        let day = self.compute_trading_day(date);
        KNOWN.with(|k| {
            let mut known = k.borrow_mut();
            if known.len() >= 100_000 {
                known.clear();
            }
            known.insert(key, day);
        });
        day
    }

    fn compute_trading_day(&self, date: NaiveDate) -> Option<TradingDay> {
        if !self.is_trading_day(date) {
            return None;
        }
        match self.kind {
            MarketCalendarKind::AlwaysOpen => {
                let start = ny_instant(date, (0, 0));
                let end = ny_instant(date.succ_opt()?, (0, 0));
                Some(TradingDay {
                    date,
                    pre_market_open: start,
                    regular_open: start,
                    regular_close: end,
                    after_hours_close: end,
                    early_close: false,
                })
            }
            MarketCalendarKind::Nyse => {
                let early_close = is_nyse_early_close(date);
                let (close, after_close) = if early_close {
                    (EARLY_REGULAR_CLOSE, EARLY_AFTER_HOURS_CLOSE)
                } else {
                    (REGULAR_CLOSE, AFTER_HOURS_CLOSE)
                };
                Some(TradingDay {
                    date,
                    pre_market_open: ny_instant(date, PRE_MARKET_OPEN),
                    regular_open: ny_instant(date, REGULAR_OPEN),
                    regular_close: ny_instant(date, close),
                    after_hours_close: ny_instant(date, after_close),
                    early_close,
                })
            }
        }
    }

    /// Phase at `at`. ALWAYS_OPEN: always Regular.
    pub fn phase(&self, at: Timestamp) -> SessionPhase {
        match self.kind {
            MarketCalendarKind::AlwaysOpen => SessionPhase::Regular,
            MarketCalendarKind::Nyse => match self.trading_day(self.date_of(at)) {
                None => SessionPhase::Closed,
                Some(day) if at < day.pre_market_open => SessionPhase::Closed,
                Some(day) if at < day.regular_open => SessionPhase::PreMarket,
                Some(day) if at < day.regular_close => SessionPhase::Regular,
                Some(day) if at < day.after_hours_close => SessionPhase::AfterHours,
                Some(_) => SessionPhase::Closed,
            },
        }
    }

    /// True when order-generating actions are allowed: NYSE during PreMarket, Regular or
    /// AfterHours (extended-hours trading allowed); ALWAYS_OPEN always.
    pub fn is_open(&self, at: Timestamp) -> bool {
        self.phase(at) != SessionPhase::Closed
    }

    /// The next moment at or after `at` when [`is_open`](Self::is_open) becomes true (`at`
    /// itself if open now). NYSE: the pre-market open (04:00 NY) of today if `at` is before
    /// it, else of the next trading day.
    pub fn next_open(&self, at: Timestamp) -> Timestamp {
        if self.is_open(at) {
            return at;
        }
        self.first_after(at, |day| day.pre_market_open).unwrap_or(at)
    }

    /// The next regular-session open strictly after `at` (NYSE: 09:30 of the first trading day
    /// whose 09:30 is after `at`; ALWAYS_OPEN: the next midnight NY).
    pub fn next_regular_open(&self, at: Timestamp) -> Timestamp {
        self.first_after(at, |day| day.regular_open).unwrap_or(at)
    }

    /// Where `at` stands in the exchange day: its phase, its date's session times, and the
    /// next change of phase. ALWAYS_OPEN is `REGULAR` all day, and its next "change" is the next
    /// New York midnight, when the next trading day's regular session begins.
    pub fn session(&self, at: Timestamp) -> SessionView {
        let trading_day = self.date_of(at);
        let day = self.trading_day(trading_day);
        let session = self.phase(at);
        let (next_session, next_session_at) = match self.kind {
            MarketCalendarKind::AlwaysOpen => (SessionPhase::Regular, self.next_regular_open(at)),
            MarketCalendarKind::Nyse => {
                let today = day.and_then(|d| {
                    [
                        (SessionPhase::PreMarket, d.pre_market_open),
                        (SessionPhase::Regular, d.regular_open),
                        (SessionPhase::AfterHours, d.regular_close),
                        (SessionPhase::Closed, d.after_hours_close),
                    ]
                    .into_iter()
                    .find(|(_, when)| *when > at)
                });
                today.unwrap_or_else(|| {
                    (SessionPhase::PreMarket, self.first_after(at, |d| d.pre_market_open).unwrap_or(at))
                })
            }
        };
        SessionView { session, trading_day, day, next_session, next_session_at }
    }

    /// The New York calendar date of `at` (the trading date a timestamp belongs to, whatever
    /// the phase).
    pub fn date_of(&self, at: Timestamp) -> NaiveDate {
        at.with_timezone(&New_York).date_naive()
    }

    /// When "today" ends for day-scoped state (e.g. TODAY blocks): the end of the trading day in
    /// progress or of the next one, i.e. the first `after_hours_close` strictly after `at`.
    /// ALWAYS_OPEN: the next midnight NY after `at`.
    pub fn end_of_trading_day(&self, at: Timestamp) -> Timestamp {
        self.first_after(at, |day| day.after_hours_close).unwrap_or(at)
    }

    /// The most recent trading date strictly before `date` (for previous-close lookups).
    pub fn previous_trading_day(&self, date: NaiveDate) -> NaiveDate {
        let mut day = date;
        while let Some(prev) = day.pred_opt() {
            if self.is_trading_day(prev) {
                return prev;
            }
            day = prev;
        }
        day
    }

    /// The next trading date strictly after `date`.
    pub fn next_trading_day(&self, date: NaiveDate) -> NaiveDate {
        let mut day = date;
        while let Some(next) = day.succ_opt() {
            if self.is_trading_day(next) {
                return next;
            }
            day = next;
        }
        day
    }

    /// The first `pick(trading day)` strictly after `at`, looking at the trading day `at` falls
    /// on and then forward. Each picked instant lies on its own date (or, for ALWAYS_OPEN's
    /// closes, at the following midnight), so looking at today and the next trading day is
    /// enough. `None` only at the end of the representable date range.
    fn first_after(&self, at: Timestamp, pick: impl Fn(&TradingDay) -> Timestamp) -> Option<Timestamp> {
        let mut date = self.date_of(at);
        if !self.is_trading_day(date) {
            date = self.next_trading_day(date);
        }
        // Two steps suffice (see above); a third guards against surprises without looping forever.
        for _ in 0..3 {
            if let Some(day) = self.trading_day(date) {
                let candidate = pick(&day);
                if candidate > at {
                    return Some(candidate);
                }
            }
            let next = self.next_trading_day(date);
            if next == date {
                return None;
            }
            date = next;
        }
        None
    }
}

/// NYSE holidays of a year, as (date, name), sorted. Only dates on which the exchange is closed
/// are listed (a New Year's Day falling on Saturday is not observed, NYSE Rule 7.2).
/// Unscheduled closures (e.g. national days of mourning) are not modelled.
pub fn nyse_holidays(year: i32) -> Vec<(NaiveDate, &'static str)> {
    let mut holidays = Vec::with_capacity(10);
    let mut push = |date: Option<NaiveDate>, name: &'static str| {
        if let Some(date) = date {
            holidays.push((date, name));
        }
    };

    // New Year's Day: Sunday → Monday Jan 2; Saturday → not observed (no Friday Dec 31 closure).
    push(
        ymd(year, 1, 1).and_then(|d| match d.weekday() {
            Weekday::Sat => None,
            Weekday::Sun => d.succ_opt(),
            _ => Some(d),
        }),
        "New Year's Day",
    );
    push(nth_weekday(year, 1, Weekday::Mon, 3), "Martin Luther King, Jr. Day");
    push(nth_weekday(year, 2, Weekday::Mon, 3), "Washington's Birthday");
    push(easter_sunday(year).and_then(|d| d.checked_sub_signed(Duration::days(2))), "Good Friday");
    push(last_weekday(year, 5, Weekday::Mon), "Memorial Day");
    if year >= 2022 {
        push(ymd(year, 6, 19).and_then(observed_fixed), "Juneteenth National Independence Day");
    }
    push(ymd(year, 7, 4).and_then(observed_fixed), "Independence Day");
    push(nth_weekday(year, 9, Weekday::Mon, 1), "Labor Day");
    push(nth_weekday(year, 11, Weekday::Thu, 4), "Thanksgiving Day");
    push(ymd(year, 12, 25).and_then(observed_fixed), "Christmas Day");

    holidays.sort_by_key(|(date, _)| *date);
    holidays
}

/// NYSE early-close (13:00) days of a year: July 3 when it is Monday–Thursday (Independence
/// Day on Tuesday–Friday), the day after Thanksgiving, and Christmas Eve when it is a weekday
/// that is not itself a holiday. Sorted.
pub fn nyse_early_closes(year: i32) -> Vec<NaiveDate> {
    let holidays: Vec<NaiveDate> = nyse_holidays(year).into_iter().map(|(date, _)| date).collect();
    let candidates =
        [ymd(year, 7, 3), nth_weekday(year, 11, Weekday::Thu, 4).and_then(|d| d.succ_opt()), ymd(year, 12, 24)];
    let mut closes: Vec<NaiveDate> =
        candidates.into_iter().flatten().filter(|d| is_weekday(*d) && !holidays.contains(d)).collect();
    closes.sort();
    closes
}

fn is_nyse_holiday(date: NaiveDate) -> bool {
    year_dates(date.year(), |year| nyse_holidays(year).into_iter().map(|(d, _)| d).collect(), true).contains(&date)
}

fn is_nyse_early_close(date: NaiveDate) -> bool {
    year_dates(date.year(), nyse_early_closes, false).contains(&date)
}

/// The hasher of the calendar's per-thread memos, whose keys are small integers (dates,
/// instants) the service makes itself: FxHash's multiply-rotate, a few cycles a key where
/// SipHash (the default, for keys an attacker may choose) cost a sweep a tenth of its time.
pub type FastHash = std::hash::BuildHasherDefault<WordHasher>;

/// See [`FastHash`].
#[derive(Clone, Copy, Default)]
pub struct WordHasher(u64);

impl WordHasher {
    #[inline]
    fn mix(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

impl std::hash::Hasher for WordHasher {
    /// Rotated as rustc-hash's: the multiply leaves the low bits (which pick a bucket) weakest.
    #[inline]
    fn finish(&self) -> u64 {
        self.0.rotate_left(26)
    }
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.mix(u64::from_le_bytes(word));
        }
    }
    #[inline]
    fn write_u8(&mut self, n: u8) {
        self.mix(u64::from(n));
    }
    #[inline]
    fn write_u32(&mut self, n: u32) {
        self.mix(u64::from(n));
    }
    #[inline]
    fn write_i32(&mut self, n: i32) {
        self.mix(n as u32 as u64);
    }
    #[inline]
    fn write_u64(&mut self, n: u64) {
        self.mix(n);
    }
    #[inline]
    fn write_i64(&mut self, n: i64) {
        self.mix(n as u64);
    }
}

/// A year's holidays (`holidays`) or early closes, worked out once per thread: asked for every
/// bar of every run.
fn year_dates(year: i32, make: impl FnOnce(i32) -> Vec<NaiveDate>, holidays: bool) -> std::rc::Rc<[NaiveDate]> {
    type Known = std::collections::HashMap<(i32, bool), std::rc::Rc<[NaiveDate]>, FastHash>;
    thread_local! {
        static KNOWN: std::cell::RefCell<Known> = std::cell::RefCell::new(Known::default());
    }
    KNOWN.with(|k| k.borrow_mut().entry((year, holidays)).or_insert_with(|| make(year).into()).clone())
}

fn is_weekday(date: NaiveDate) -> bool {
    !matches!(date.weekday(), Weekday::Sat | Weekday::Sun)
}

fn ymd(year: i32, month: u32, day: u32) -> Option<NaiveDate> {
    NaiveDate::from_ymd_opt(year, month, day)
}

/// A fixed-date holiday's observed date: Saturday → Friday before, Sunday → Monday after.
fn observed_fixed(date: NaiveDate) -> Option<NaiveDate> {
    match date.weekday() {
        Weekday::Sat => date.pred_opt(),
        Weekday::Sun => date.succ_opt(),
        _ => Some(date),
    }
}

/// The `n`-th (1-based) `weekday` of a month.
fn nth_weekday(year: i32, month: u32, weekday: Weekday, n: u32) -> Option<NaiveDate> {
    NaiveDate::from_weekday_of_month_opt(year, month, weekday, u8::try_from(n).ok()?)
}

/// The last `weekday` of a month.
fn last_weekday(year: i32, month: u32, weekday: Weekday) -> Option<NaiveDate> {
    let first_of_next = if month == 12 { ymd(year + 1, 1, 1)? } else { ymd(year, month + 1, 1)? };
    let last = first_of_next.pred_opt()?;
    let back = (7 + last.weekday().num_days_from_monday() - weekday.num_days_from_monday()) % 7;
    last.checked_sub_signed(Duration::days(i64::from(back)))
}

/// Easter Sunday (Gregorian), by the anonymous Gregorian algorithm (Meeus/Jones/Butcher).
fn easter_sunday(year: i32) -> Option<NaiveDate> {
    let a = year.rem_euclid(19);
    let b = year.div_euclid(100);
    let c = year.rem_euclid(100);
    let d = b.div_euclid(4);
    let e = b.rem_euclid(4);
    let f = (b + 8).div_euclid(25);
    let g = (b - f + 1).div_euclid(3);
    let h = (19 * a + b - d - g + 15).rem_euclid(30);
    let i = c.div_euclid(4);
    let k = c.rem_euclid(4);
    let l = (32 + 2 * e + 2 * i - h - k).rem_euclid(7);
    let m = (a + 11 * h + 22 * l).div_euclid(451);
    let month = (h + l - 7 * m + 114).div_euclid(31);
    let day = (h + l - 7 * m + 114).rem_euclid(31) + 1;
    ymd(year, u32::try_from(month).ok()?, u32::try_from(day).ok()?)
}

/// The UTC instant of a New York wall-clock time on `date`. The times used here (00:00 and
/// 04:00–20:00) never fall in a DST gap or overlap (the switch happens at 02:00), but the
/// conversion is total anyway: an overlap takes the earlier instant, a gap the instant the
/// clock jumps to.
pub fn ny_instant(date: NaiveDate, (hour, minute): (u32, u32)) -> Timestamp {
    // Pure, and asked again for the same dates by every run over the same bars (a daily bar's
    // 16:00, a day's session times): remembered per thread.
    thread_local! {
        static KNOWN: std::cell::RefCell<std::collections::HashMap<(NaiveDate, u32, u32), Timestamp, FastHash>> =
            std::cell::RefCell::new(std::collections::HashMap::default());
    }
    if let Some(known) = KNOWN.with(|k| k.borrow().get(&(date, hour, minute)).copied()) {
        return known;
    }
    let at = convert_ny(date, hour, minute);
    KNOWN.with(|k| {
        let mut known = k.borrow_mut();
        if known.len() >= 200_000 {
            known.clear();
        }
        known.insert((date, hour, minute), at);
    });
    at
}

fn convert_ny(date: NaiveDate, hour: u32, minute: u32) -> Timestamp {
    let time = NaiveTime::from_hms_opt(hour, minute, 0).unwrap_or(NaiveTime::MIN);
    let local = date.and_time(time);
    New_York
        .from_local_datetime(&local)
        .earliest()
        .or_else(|| New_York.from_local_datetime(&(local + Duration::hours(1))).earliest())
        .map(|t| t.with_timezone(&Utc))
        .unwrap_or_else(|| Utc.from_utc_datetime(&local))
}

/// The New York date of a stream of timestamps without a time-zone conversion per call: the
/// current date's bounds are kept and only a timestamp outside them is converted.
#[derive(Clone, Copy, Debug, Default)]
pub struct NyDay {
    /// The date and its bounds in epoch seconds.
    bounds: Option<(NaiveDate, i64, i64)>,
}

impl NyDay {
    /// The New York date of `at`.
    pub fn date_of(&mut self, at: Timestamp) -> NaiveDate {
        self.locate(at).0
    }

    /// The New York date of `at` and the minutes since that date's midnight.
    pub fn locate(&mut self, at: Timestamp) -> (NaiveDate, u32) {
        self.locate_seconds(at.timestamp())
    }

    /// [`NyDay::locate`] of an instant given in seconds since the epoch.
    #[inline]
    pub fn locate_seconds(&mut self, seconds: i64) -> (NaiveDate, u32) {
        match self.bounds {
            Some((date, start, end)) if seconds >= start && seconds < end => (date, ((seconds - start) / 60) as u32),
            _ => self.move_to(seconds),
        }
    }

    /// The date changed: finds it and its bounds (once a day; kept out of line so the common
    /// path above stays a compare and a division).
    #[cold]
    #[inline(never)]
    fn move_to(&mut self, seconds: i64) -> (NaiveDate, u32) {
        let (date, start, end) = day_bounds(seconds);
        self.bounds = Some((date, start, end));
        (date, ((seconds - start) / 60).max(0) as u32)
    }
}

/// What the engine and a backtest read of a New York date on every bar, worked out once per
/// date: its bounds, its regular exchange session, and the 09:30 and 16:00 instants a daily bar
/// fills and ends at. Live, the engine works it out as a date begins; a backtest's history holds
/// one per date of its bars ([`NyDates`]), shared by every run over them (a sweep's
/// combinations), so no run converts time zones or looks up a memo per bar.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NyDate {
    pub date: NaiveDate,
    /// Midnight to midnight New York, in seconds since the epoch (`end` excluded).
    pub start: i64,
    pub end: i64,
    /// The regular session's open and close in seconds (NYSE: 13:00 on an early close; 09:30 and
    /// 16:00 on a date without a session, since strategies time their day by the exchange's
    /// hours whatever the trading calendar).
    pub session_open: i64,
    pub session_close: i64,
    /// 09:30 and 16:00 New York.
    pub nine_thirty: Timestamp,
    pub four_pm: Timestamp,
}

impl NyDate {
    /// The New York date of the instant `seconds`.
    pub fn containing(seconds: i64) -> NyDate {
        let (date, start, end) = day_bounds(seconds);
        let nyse = MarketCalendar::new(MarketCalendarKind::Nyse);
        let (nine_thirty, four_pm) = (ny_instant(date, (9, 30)), ny_instant(date, (16, 0)));
        let (open, close) = match nyse.trading_day(date) {
            Some(day) => (day.regular_open, day.regular_close),
            None => (nine_thirty, four_pm),
        };
        NyDate {
            date,
            start,
            end,
            session_open: open.timestamp(),
            session_close: close.timestamp(),
            nine_thirty,
            four_pm,
        }
    }

    #[inline]
    pub fn contains(&self, seconds: i64) -> bool {
        self.start <= seconds && seconds < self.end
    }

    /// Minutes since the date's midnight of an instant within it.
    #[inline]
    pub fn minute(&self, seconds: i64) -> u32 {
        ((seconds - self.start) / 60).max(0) as u32
    }
}

/// The [`NyDate`]s of a history's bars, ascending, shared by the runs over it; each run walks
/// them forward with its own [`NyDateCursor`].
pub type NyDates = std::sync::Arc<[NyDate]>;

/// [`NyDates`] of `starts` (instants in seconds, any order): each date they fall on, and the
/// next date of each (a minute bar that starts on a date's last minute ends on the next).
pub fn ny_dates_of(starts: impl IntoIterator<Item = i64>) -> NyDates {
    let mut day = NyDay::default();
    let mut dates: Vec<NyDate> = Vec::new();
    let mut last: Option<NaiveDate> = None;
    // The date after the last one met: most often the next start's (consecutive daily bars),
    // then taken as it is rather than worked out again.
    let mut after: Option<NyDate> = None;
    for seconds in starts {
        let (date, _) = day.locate_seconds(seconds);
        if last != Some(date) {
            last = Some(date);
            let this = match after {
                Some(next) if next.contains(seconds) => next,
                _ => NyDate::containing(seconds),
            };
            let next = NyDate::containing(this.end);
            after = Some(next);
            dates.extend([this, next]);
        }
    }
    dates.sort_unstable_by_key(|d| d.start);
    dates.dedup_by_key(|d| d.start);
    dates.into()
}

/// A walk over [`NyDates`] in time order: the date of each instant found by a comparison or two,
/// and worked out ([`NyDate::containing`]) only for an instant outside them.
#[derive(Clone, Debug)]
pub struct NyDateCursor {
    dates: NyDates,
    at: usize,
    outside: Option<NyDate>,
}

impl NyDateCursor {
    pub fn new(dates: NyDates) -> NyDateCursor {
        NyDateCursor { dates, at: 0, outside: None }
    }

    /// The date of `seconds`.
    #[inline]
    pub fn locate(&mut self, seconds: i64) -> &NyDate {
        if self.dates.get(self.at).is_some_and(|d| d.contains(seconds)) {
            return &self.dates[self.at];
        }
        self.move_to(seconds)
    }

    #[cold]
    #[inline(never)]
    fn move_to(&mut self, seconds: i64) -> &NyDate {
        if self.outside.is_some_and(|d| d.contains(seconds)) {
            return self.outside.as_ref().expect("checked above");
        }
        // One of the next few (the dates hold each bar's date and the day after it: daily bars
        // step one or two dates a bar, three over a weekend), else searched for.
        let ahead = self.dates.get(self.at + 1..).unwrap_or_default();
        let found = if let Some(k) = ahead.iter().take(3).position(|d| d.contains(seconds)) {
            Some(self.at + 1 + k)
        } else {
            let i = self.dates.partition_point(|d| d.end <= seconds);
            self.dates.get(i).is_some_and(|d| d.contains(seconds)).then_some(i)
        };
        match found {
            Some(i) => {
                self.at = i;
                &self.dates[i]
            }
            None => self.outside.insert(NyDate::containing(seconds)),
        }
    }
}

/// The New York date of the instant `seconds` and that date's bounds (epoch seconds). A pure
/// function, asked again for the same instants by every run over the same bars (a sweep's
/// combinations: daily bars change date on every bar): remembered per thread.
fn day_bounds(seconds: i64) -> (NaiveDate, i64, i64) {
    thread_local! {
        static KNOWN: std::cell::RefCell<std::collections::HashMap<i64, (NaiveDate, i64, i64), FastHash>> =
            std::cell::RefCell::new(std::collections::HashMap::default());
    }
    if let Some(known) = KNOWN.with(|k| k.borrow().get(&seconds).copied()) {
        return known;
    }
    let at = chrono::DateTime::from_timestamp(seconds, 0).expect("instants of the market are in range");
    let date = at.with_timezone(&New_York).date_naive();
    let start = ny_instant(date, (0, 0)).timestamp();
    let end = ny_instant(date + Duration::days(1), (0, 0)).timestamp();
    KNOWN.with(|k| {
        let mut known = k.borrow_mut();
        if known.len() >= 200_000 {
            known.clear();
        }
        known.insert(seconds, (date, start, end));
    });
    (date, start, end)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::parse_ts;
    use proptest::prelude::*;

    fn nyse() -> MarketCalendar {
        MarketCalendar::new(MarketCalendarKind::Nyse)
    }

    fn always() -> MarketCalendar {
        MarketCalendar::new(MarketCalendarKind::AlwaysOpen)
    }

    fn d(text: &str) -> NaiveDate {
        NaiveDate::parse_from_str(text, "%Y-%m-%d").expect("test date")
    }

    fn ts(text: &str) -> Timestamp {
        parse_ts(text).expect("test timestamp")
    }

    #[test]
    fn kind_round_trips() {
        assert_eq!(nyse().kind(), MarketCalendarKind::Nyse);
        assert_eq!(always().kind(), MarketCalendarKind::AlwaysOpen);
    }

    #[test]
    fn session_phase_serializes_screaming_snake_case() {
        let cases = [
            (SessionPhase::Closed, "\"CLOSED\""),
            (SessionPhase::PreMarket, "\"PRE_MARKET\""),
            (SessionPhase::Regular, "\"REGULAR\""),
            (SessionPhase::AfterHours, "\"AFTER_HOURS\""),
        ];
        for (phase, json) in cases {
            assert_eq!(serde_json::to_string(&phase).unwrap(), json);
        }
    }

    #[test]
    fn easter_sundays() {
        let cases = [
            (2000, "2000-04-23"),
            (2008, "2008-03-23"),
            (2019, "2019-04-21"),
            (2022, "2022-04-17"),
            (2024, "2024-03-31"),
            (2025, "2025-04-20"),
            (2026, "2026-04-05"),
            (2027, "2027-03-28"),
            (2028, "2028-04-16"),
            (2029, "2029-04-01"),
            (2030, "2030-04-21"),
            (2038, "2038-04-25"),
            (2285, "2285-03-22"),
        ];
        for (year, expected) in cases {
            assert_eq!(easter_sunday(year), Some(d(expected)), "Easter {year}");
        }
    }

    #[test]
    fn nyse_holidays_2025_match_published_list() {
        let expected = [
            ("2025-01-01", "New Year's Day"),
            ("2025-01-20", "Martin Luther King, Jr. Day"),
            ("2025-02-17", "Washington's Birthday"),
            ("2025-04-18", "Good Friday"),
            ("2025-05-26", "Memorial Day"),
            ("2025-06-19", "Juneteenth National Independence Day"),
            ("2025-07-04", "Independence Day"),
            ("2025-09-01", "Labor Day"),
            ("2025-11-27", "Thanksgiving Day"),
            ("2025-12-25", "Christmas Day"),
        ];
        let expected: Vec<_> = expected.iter().map(|(date, name)| (d(date), *name)).collect();
        assert_eq!(nyse_holidays(2025), expected);
    }

    #[test]
    fn nyse_holidays_2026_match_published_list() {
        let expected = [
            ("2026-01-01", "New Year's Day"),
            ("2026-01-19", "Martin Luther King, Jr. Day"),
            ("2026-02-16", "Washington's Birthday"),
            ("2026-04-03", "Good Friday"),
            ("2026-05-25", "Memorial Day"),
            ("2026-06-19", "Juneteenth National Independence Day"),
            ("2026-07-03", "Independence Day"),
            ("2026-09-07", "Labor Day"),
            ("2026-11-26", "Thanksgiving Day"),
            ("2026-12-25", "Christmas Day"),
        ];
        let expected: Vec<_> = expected.iter().map(|(date, name)| (d(date), *name)).collect();
        assert_eq!(nyse_holidays(2026), expected);
    }

    #[test]
    fn nyse_holidays_2022_saturday_new_year_not_observed() {
        // Jan 1 2022 was a Saturday: no holiday on Fri Dec 31 2021 nor Mon Jan 3 2022.
        // Juneteenth (Sun) → Mon Jun 20; Christmas (Sun) → Mon Dec 26.
        let dates: Vec<NaiveDate> = nyse_holidays(2022).into_iter().map(|(date, _)| date).collect();
        let expected: Vec<NaiveDate> = [
            "2022-01-17",
            "2022-02-21",
            "2022-04-15",
            "2022-05-30",
            "2022-06-20",
            "2022-07-04",
            "2022-09-05",
            "2022-11-24",
            "2022-12-26",
        ]
        .iter()
        .map(|s| d(s))
        .collect();
        assert_eq!(dates, expected);
        assert!(!nyse_holidays(2021).iter().any(|(date, _)| *date == d("2021-12-31")));
        assert!(nyse().is_trading_day(d("2021-12-31")));
        assert!(nyse().is_trading_day(d("2022-01-03")));
        assert_eq!(nyse().next_trading_day(d("2021-12-30")), d("2021-12-31"));
        assert_eq!(nyse().next_trading_day(d("2021-12-31")), d("2022-01-03"));
    }

    #[test]
    fn nyse_holiday_observance_rules() {
        let cases = [
            // (date, is a holiday)
            ("2021-06-18", false), // Juneteenth only from 2022
            ("2023-01-02", true),  // New Year's Day on Sunday → Monday
            ("2027-07-05", true),  // Independence Day on Sunday → Monday
            ("2027-12-24", true),  // Christmas on Saturday → Friday
            ("2027-12-31", false), // New Year 2028 on Saturday: not observed
            ("2028-01-03", false),
            ("2026-07-03", true), // Independence Day on Saturday → Friday
        ];
        for (date, holiday) in cases {
            assert_eq!(is_nyse_holiday(d(date)), holiday, "{date}");
            assert_eq!(nyse().is_trading_day(d(date)), !holiday, "{date}");
        }
    }

    #[test]
    fn nyse_early_closes_by_year() {
        let cases: [(i32, &[&str]); 6] = [
            (2023, &["2023-07-03", "2023-11-24"]), // Dec 24 2023 is a Sunday
            (2024, &["2024-07-03", "2024-11-29", "2024-12-24"]),
            (2025, &["2025-07-03", "2025-11-28", "2025-12-24"]),
            // Jul 3 2026 is the observed Independence Day: no early close.
            (2026, &["2026-11-27", "2026-12-24"]),
            // Jul 3 2027 is a Saturday; Dec 24 2027 is the observed Christmas.
            (2027, &["2027-11-26"]),
            (2028, &["2028-07-03", "2028-11-24"]), // Dec 24 2028 is a Sunday
        ];
        for (year, expected) in cases {
            let expected: Vec<NaiveDate> = expected.iter().map(|s| d(s)).collect();
            assert_eq!(nyse_early_closes(year), expected, "{year}");
        }
    }

    #[test]
    fn trading_day_times_across_dst() {
        let cases = [
            // (date, pre-market open, regular open, regular close, after-hours close, early)
            ("2026-03-06", "09:00", "14:30", "21:00", "01:00", false), // Fri, EST
            ("2026-03-09", "08:00", "13:30", "20:00", "00:00", false), // Mon, EDT
            ("2026-10-30", "08:00", "13:30", "20:00", "00:00", false), // Fri, EDT
            ("2026-11-02", "09:00", "14:30", "21:00", "01:00", false), // Mon, EST
            ("2026-11-27", "09:00", "14:30", "18:00", "22:00", true),  // day after Thanksgiving
            ("2025-07-03", "08:00", "13:30", "17:00", "21:00", true),  // Thu before July 4
        ];
        for (date, pre, open, close, after, early) in cases {
            let day = nyse().trading_day(d(date)).expect("trading day");
            let next = d(date).succ_opt().unwrap();
            let on = |hm: &str, date: NaiveDate| ts(&format!("{date}T{hm}:00Z"));
            // After-hours close at 20:00 NY is on the next UTC date unless it is early.
            let after_date = if early { d(date) } else { next };
            assert_eq!(day.date, d(date));
            assert_eq!(day.pre_market_open, on(pre, d(date)), "{date} pre");
            assert_eq!(day.regular_open, on(open, d(date)), "{date} open");
            assert_eq!(day.regular_close, on(close, d(date)), "{date} close");
            assert_eq!(day.after_hours_close, on(after, after_date), "{date} after");
            assert_eq!(day.early_close, early, "{date} early");
        }
        for date in ["2026-03-07", "2026-03-08", "2026-11-01", "2026-11-26", "2026-04-03"] {
            assert_eq!(nyse().trading_day(d(date)), None, "{date}");
        }
    }

    #[test]
    fn phases_around_dst_switch_weekends() {
        use SessionPhase::*;
        let cases = [
            ("2026-03-06T20:59:59.999Z", Regular),    // Fri 15:59:59.999 EST
            ("2026-03-06T21:00:00Z", AfterHours),     // Fri 16:00 EST
            ("2026-03-07T00:59:59.999Z", AfterHours), // Fri 19:59:59.999 EST
            ("2026-03-07T01:00:00Z", Closed),         // Fri 20:00 EST
            ("2026-03-07T15:00:00Z", Closed),         // Saturday
            ("2026-03-08T07:30:00Z", Closed),         // Sunday, 03:30 EDT just after the switch
            ("2026-03-08T15:00:00Z", Closed),         // Sunday
            ("2026-03-09T07:59:59.999Z", Closed),     // Mon 03:59:59.999 EDT
            ("2026-03-09T08:00:00Z", PreMarket),      // Mon 04:00 EDT
            ("2026-03-09T13:29:59.999Z", PreMarket),  // Mon 09:29:59.999 EDT
            ("2026-03-09T13:30:00Z", Regular),        // Mon 09:30 EDT
            ("2026-03-09T20:00:00Z", AfterHours),     // Mon 16:00 EDT
            ("2026-03-10T00:00:00Z", Closed),         // Mon 20:00 EDT
            ("2026-10-30T13:30:00Z", Regular),        // Fri 09:30 EDT
            ("2026-10-31T00:00:00Z", Closed),         // Fri 20:00 EDT
            ("2026-11-01T15:00:00Z", Closed),         // Sunday (switch day)
            ("2026-11-02T08:30:00Z", Closed),         // Mon 03:30 EST
            ("2026-11-02T09:00:00Z", PreMarket),      // Mon 04:00 EST
            ("2026-11-02T13:30:00Z", PreMarket),      // Mon 08:30 EST
            ("2026-11-02T14:30:00Z", Regular),        // Mon 09:30 EST
            ("2026-11-02T21:00:00Z", AfterHours),     // Mon 16:00 EST
            ("2026-11-03T01:00:00Z", Closed),         // Mon 20:00 EST
        ];
        for (at, expected) in cases {
            assert_eq!(nyse().phase(ts(at)), expected, "{at}");
        }
    }

    #[test]
    fn a_session_view_names_the_next_change_through_the_day_and_over_weekends_and_early_closes() {
        use SessionPhase::*;
        // (at, phase, next phase, next at): Fri 2026-11-27 is an early close (13:00 / 17:00),
        // Mon 2026-11-30 a full day (EST, UTC−5).
        let cases = [
            ("2026-11-27T08:59:00Z", Closed, PreMarket, "2026-11-27T09:00:00Z"),
            ("2026-11-27T09:00:00Z", PreMarket, Regular, "2026-11-27T14:30:00Z"),
            ("2026-11-27T14:30:00Z", Regular, AfterHours, "2026-11-27T18:00:00Z"),
            ("2026-11-27T18:00:00Z", AfterHours, Closed, "2026-11-27T22:00:00Z"),
            // After Friday's close: Monday's pre-market, over the weekend.
            ("2026-11-27T22:00:00Z", Closed, PreMarket, "2026-11-30T09:00:00Z"),
            ("2026-11-28T15:00:00Z", Closed, PreMarket, "2026-11-30T09:00:00Z"),
            ("2026-11-30T20:59:59.999Z", Regular, AfterHours, "2026-11-30T21:00:00Z"),
            ("2026-11-30T21:00:00Z", AfterHours, Closed, "2026-12-01T01:00:00Z"),
            ("2026-12-01T01:00:00Z", Closed, PreMarket, "2026-12-01T09:00:00Z"),
        ];
        for (at, session, next, next_at) in cases {
            let view = nyse().session(ts(at));
            assert_eq!((view.session, view.next_session, view.next_session_at), (session, next, ts(next_at)), "{at}");
            assert_eq!(view.trading_day, nyse().date_of(ts(at)), "{at}");
        }
        // A closed date has no session times; a trading day has its own.
        assert_eq!(nyse().session(ts("2026-11-28T15:00:00Z")).day, None);
        let friday = nyse().session(ts("2026-11-27T15:00:00Z")).day.expect("a trading day");
        assert!(friday.early_close);
        assert_eq!(friday.regular_close, ts("2026-11-27T18:00:00Z"));
        // ALWAYS_OPEN is regular all day; its next day begins at New York's midnight.
        let always = MarketCalendar::new(MarketCalendarKind::AlwaysOpen).session(ts("2026-11-28T15:00:00Z"));
        assert_eq!((always.session, always.next_session), (Regular, Regular));
        assert_eq!(always.next_session_at, ts("2026-11-29T05:00:00Z"));
        assert_eq!(SessionPhase::PreMarket.as_str(), "PRE_MARKET");
        assert!(SessionPhase::AfterHours.is_extended() && !SessionPhase::Regular.is_extended());
    }

    #[test]
    fn phase_boundaries() {
        use SessionPhase::*;
        let cases = [
            // Wed 2026-01-14, EST (UTC−5).
            ("2026-01-14T05:00:00Z", Closed), // 00:00 NY
            ("2026-01-14T08:59:59.999Z", Closed),
            ("2026-01-14T09:00:00Z", PreMarket),
            ("2026-01-14T14:29:59.999Z", PreMarket),
            ("2026-01-14T14:30:00Z", Regular),
            ("2026-01-14T20:59:59.999Z", Regular),
            ("2026-01-14T21:00:00Z", AfterHours),
            ("2026-01-15T00:59:59.999Z", AfterHours),
            ("2026-01-15T01:00:00Z", Closed),
            ("2026-01-15T04:59:59.999Z", Closed), // 23:59:59.999 NY
            // Wed 2026-06-10, EDT (UTC−4).
            ("2026-06-10T07:59:59.999Z", Closed),
            ("2026-06-10T08:00:00Z", PreMarket),
            ("2026-06-10T13:29:59.999Z", PreMarket),
            ("2026-06-10T13:30:00Z", Regular),
            ("2026-06-10T19:59:59.999Z", Regular),
            ("2026-06-10T20:00:00Z", AfterHours),
            ("2026-06-10T23:59:59.999Z", AfterHours),
            ("2026-06-11T00:00:00Z", Closed),
            // Early close: Fri 2026-11-27 (EST), 13:00 / 17:00 NY.
            ("2026-11-27T09:00:00Z", PreMarket),
            ("2026-11-27T14:30:00Z", Regular),
            ("2026-11-27T17:59:59.999Z", Regular),
            ("2026-11-27T18:00:00Z", AfterHours),
            ("2026-11-27T21:59:59.999Z", AfterHours),
            ("2026-11-27T22:00:00Z", Closed),
            // Early close: Thu 2025-07-03 (EDT).
            ("2025-07-03T16:59:59.999Z", Regular),
            ("2025-07-03T17:00:00Z", AfterHours),
            ("2025-07-03T20:59:59.999Z", AfterHours),
            ("2025-07-03T21:00:00Z", Closed),
            // Weekend: Sat 2026-01-17, Sun 2026-01-18.
            ("2026-01-17T09:00:00Z", Closed),
            ("2026-01-17T15:00:00Z", Closed),
            ("2026-01-17T22:00:00Z", Closed),
            ("2026-01-18T15:00:00Z", Closed),
            // Holidays: MLK Day 2026-01-19, Good Friday 2026-04-03, Thanksgiving 2026-11-26.
            ("2026-01-19T09:00:00Z", Closed),
            ("2026-01-19T14:30:00Z", Closed),
            ("2026-01-19T21:00:00Z", Closed),
            ("2026-04-03T08:00:00Z", Closed),
            ("2026-04-03T13:30:00Z", Closed),
            ("2026-04-03T20:00:00Z", Closed),
            ("2026-11-26T15:00:00Z", Closed),
        ];
        for (at, expected) in cases {
            assert_eq!(nyse().phase(ts(at)), expected, "{at}");
            assert_eq!(nyse().is_open(ts(at)), expected != Closed, "{at}");
        }
    }

    #[test]
    fn date_of_uses_new_york_date() {
        let cases = [
            ("2026-01-15T04:59:59.999Z", "2026-01-14"),
            ("2026-01-15T05:00:00Z", "2026-01-15"),
            ("2026-06-11T03:59:59.999Z", "2026-06-10"),
            ("2026-06-11T04:00:00Z", "2026-06-11"),
            ("2026-01-17T15:00:00Z", "2026-01-17"), // Saturday: still its own date
        ];
        for (at, date) in cases {
            assert_eq!(nyse().date_of(ts(at)), d(date), "{at}");
            assert_eq!(always().date_of(ts(at)), d(date), "{at}");
        }
    }

    #[test]
    fn next_open_nyse() {
        let cases = [
            // Open now: returns `at` itself.
            ("2026-01-16T15:00:00Z", "2026-01-16T15:00:00Z"),
            ("2026-01-16T09:00:00Z", "2026-01-16T09:00:00Z"),
            ("2026-01-17T00:59:59.999Z", "2026-01-17T00:59:59.999Z"),
            // Before today's pre-market: today's 04:00.
            ("2026-01-14T08:00:00Z", "2026-01-14T09:00:00Z"),
            // Fri 20:00 EST, weekend, then MLK Monday → Tue 2026-01-20 04:00 EST.
            ("2026-01-17T01:00:00Z", "2026-01-20T09:00:00Z"),
            ("2026-01-18T15:00:00Z", "2026-01-20T09:00:00Z"),
            ("2026-01-19T15:00:00Z", "2026-01-20T09:00:00Z"),
            // Thu 2026-04-02 20:00 EDT, Good Friday, weekend → Mon 2026-04-06 04:00 EDT.
            ("2026-04-03T00:00:00Z", "2026-04-06T08:00:00Z"),
            ("2026-04-03T14:00:00Z", "2026-04-06T08:00:00Z"),
            // Wed before Thanksgiving after hours → Fri 2026-11-27 04:00 EST.
            ("2026-11-26T01:00:00Z", "2026-11-27T09:00:00Z"),
            // Early-close Friday after 17:00 EST → Mon 2026-11-30 04:00 EST.
            ("2026-11-27T22:00:00Z", "2026-11-30T09:00:00Z"),
            ("2026-11-27T21:59:59.999Z", "2026-11-27T21:59:59.999Z"),
            // Across the spring-forward weekend: Fri 20:00 EST → Mon 04:00 EDT.
            ("2026-03-07T01:00:00Z", "2026-03-09T08:00:00Z"),
        ];
        for (at, expected) in cases {
            assert_eq!(nyse().next_open(ts(at)), ts(expected), "{at}");
        }
    }

    #[test]
    fn next_regular_open_nyse() {
        let cases = [
            // Pre-market: today's 09:30.
            ("2026-04-02T12:00:00Z", "2026-04-02T13:30:00Z"),
            // Exactly at the open: strictly after → next trading day (Good Friday skipped).
            ("2026-04-02T13:30:00Z", "2026-04-06T13:30:00Z"),
            ("2026-04-02T14:00:00Z", "2026-04-06T13:30:00Z"),
            // Friday before a long weekend (MLK Day) → Tuesday.
            ("2026-01-16T15:00:00Z", "2026-01-20T14:30:00Z"),
            ("2026-01-17T15:00:00Z", "2026-01-20T14:30:00Z"),
            // Wed before Thanksgiving → Fri (early-close day still opens at 09:30).
            ("2026-11-25T15:00:00Z", "2026-11-27T14:30:00Z"),
            ("2026-11-27T15:00:00Z", "2026-11-30T14:30:00Z"),
            // Weekend of the spring-forward switch.
            ("2026-03-06T20:00:00Z", "2026-03-09T13:30:00Z"),
            // Midnight NY before a trading day.
            ("2026-01-14T05:00:00Z", "2026-01-14T14:30:00Z"),
        ];
        for (at, expected) in cases {
            assert_eq!(nyse().next_regular_open(ts(at)), ts(expected), "{at}");
        }
    }

    #[test]
    fn end_of_trading_day_nyse() {
        let cases = [
            ("2026-01-14T08:00:00Z", "2026-01-15T01:00:00Z"), // before pre-market
            ("2026-01-14T15:00:00Z", "2026-01-15T01:00:00Z"), // regular session
            ("2026-01-15T00:59:59.999Z", "2026-01-15T01:00:00Z"),
            ("2026-01-15T01:00:00Z", "2026-01-16T01:00:00Z"), // exactly at 20:00: strictly after
            ("2026-01-15T03:00:00Z", "2026-01-16T01:00:00Z"), // 22:00 NY Jan 14
            ("2026-01-17T15:00:00Z", "2026-01-21T01:00:00Z"), // Saturday → Tue (MLK Monday)
            ("2026-11-26T15:00:00Z", "2026-11-27T22:00:00Z"), // Thanksgiving → early-close Fri
            ("2026-11-27T15:00:00Z", "2026-11-27T22:00:00Z"), // early close: 17:00 EST
            ("2026-03-07T01:00:00Z", "2026-03-10T00:00:00Z"), // → Mon 20:00 EDT
        ];
        for (at, expected) in cases {
            assert_eq!(nyse().end_of_trading_day(ts(at)), ts(expected), "{at}");
        }
    }

    #[test]
    fn previous_and_next_trading_day_nyse() {
        let previous = [
            ("2026-01-20", "2026-01-16"), // over MLK long weekend
            ("2026-04-06", "2026-04-02"), // over Good Friday
            ("2026-01-02", "2025-12-31"), // over New Year's Day
            ("2026-01-14", "2026-01-13"),
            ("2026-01-18", "2026-01-16"), // from a Sunday
            ("2026-11-27", "2026-11-25"), // over Thanksgiving
        ];
        for (date, expected) in previous {
            assert_eq!(nyse().previous_trading_day(d(date)), d(expected), "{date}");
        }
        let next = [
            ("2026-01-16", "2026-01-20"),
            ("2026-04-02", "2026-04-06"),
            ("2026-12-24", "2026-12-28"),
            ("2026-07-02", "2026-07-06"),
            ("2026-12-31", "2027-01-04"), // Jan 1 2027 is a Friday holiday
        ];
        for (date, expected) in next {
            assert_eq!(nyse().next_trading_day(d(date)), d(expected), "{date}");
        }
    }

    #[test]
    fn always_open_on_a_saturday() {
        let cal = always();
        let sat = d("2026-01-17");
        let at = ts("2026-01-17T15:00:00Z");
        assert!(cal.is_trading_day(sat));
        assert!(cal.is_trading_day(d("2026-01-19"))); // NYSE holiday, irrelevant here
        assert_eq!(
            cal.trading_day(sat),
            Some(TradingDay {
                date: sat,
                pre_market_open: ts("2026-01-17T05:00:00Z"),
                regular_open: ts("2026-01-17T05:00:00Z"),
                regular_close: ts("2026-01-18T05:00:00Z"),
                after_hours_close: ts("2026-01-18T05:00:00Z"),
                early_close: false,
            })
        );
        assert_eq!(cal.phase(at), SessionPhase::Regular);
        assert_eq!(cal.phase(ts("2026-01-17T05:00:00Z")), SessionPhase::Regular);
        assert!(cal.is_open(at));
        assert_eq!(cal.next_open(at), at);
        assert_eq!(cal.next_regular_open(at), ts("2026-01-18T05:00:00Z"));
        assert_eq!(cal.next_regular_open(ts("2026-01-18T05:00:00Z")), ts("2026-01-19T05:00:00Z"));
        assert_eq!(cal.end_of_trading_day(at), ts("2026-01-18T05:00:00Z"));
        assert_eq!(cal.end_of_trading_day(ts("2026-01-18T05:00:00Z")), ts("2026-01-19T05:00:00Z"));
        assert_eq!(cal.date_of(at), sat);
        assert_eq!(cal.previous_trading_day(sat), d("2026-01-16"));
        assert_eq!(cal.next_trading_day(sat), d("2026-01-18"));
    }

    #[test]
    fn always_open_days_follow_new_york_midnight_across_dst() {
        let cal = always();
        // Spring forward: a 23-hour day. Fall back: a 25-hour day.
        let spring = cal.trading_day(d("2026-03-08")).unwrap();
        assert_eq!(spring.regular_open, ts("2026-03-08T05:00:00Z"));
        assert_eq!(spring.after_hours_close, ts("2026-03-09T04:00:00Z"));
        let fall = cal.trading_day(d("2026-11-01")).unwrap();
        assert_eq!(fall.regular_open, ts("2026-11-01T04:00:00Z"));
        assert_eq!(fall.after_hours_close, ts("2026-11-02T05:00:00Z"));
        for at in ["2026-03-08T06:30:00Z", "2026-03-08T07:30:00Z", "2026-11-01T05:30:00Z", "2026-11-01T06:30:00Z"] {
            assert_eq!(cal.phase(ts(at)), SessionPhase::Regular, "{at}");
            assert!(cal.is_open(ts(at)), "{at}");
        }
        assert_eq!(cal.end_of_trading_day(ts("2026-03-08T12:00:00Z")), ts("2026-03-09T04:00:00Z"));
        assert_eq!(cal.next_regular_open(ts("2026-11-01T12:00:00Z")), ts("2026-11-02T05:00:00Z"));
    }

    #[test]
    fn every_day_2024_through_2030() {
        let cal = nyse();
        let holiday_counts = [(2024, 10), (2025, 10), (2026, 10), (2027, 10), (2028, 9), (2029, 10), (2030, 10)];
        for (year, count) in holiday_counts {
            assert_eq!(nyse_holidays(year).len(), count, "{year}");
        }
        let mut date = d("2024-01-01");
        let mut trading_days = 0;
        while date <= d("2030-12-31") {
            let holidays: Vec<NaiveDate> = nyse_holidays(date.year()).into_iter().map(|(h, _)| h).collect();
            let weekday = !matches!(date.weekday(), Weekday::Sat | Weekday::Sun);
            let expected = weekday && !holidays.contains(&date);
            assert_eq!(cal.is_trading_day(date), expected, "{date}");
            match cal.trading_day(date) {
                None => assert!(!expected, "{date}"),
                Some(day) => {
                    trading_days += 1;
                    assert_eq!(day.date, date);
                    assert!(day.pre_market_open < day.regular_open, "{date}");
                    assert!(day.regular_open < day.regular_close, "{date}");
                    assert!(day.regular_close < day.after_hours_close, "{date}");
                    assert_eq!(day.early_close, nyse_early_closes(date.year()).contains(&date), "{date}");
                    let regular_hours = if day.early_close { 210 } else { 390 };
                    assert_eq!((day.regular_close - day.regular_open).num_minutes(), regular_hours, "{date}");
                    assert_eq!((day.regular_open - day.pre_market_open).num_minutes(), 330, "{date}");
                    assert_eq!((day.after_hours_close - day.regular_close).num_minutes(), 240, "{date}");
                    assert_eq!(cal.date_of(day.pre_market_open), date);
                    assert_eq!(cal.date_of(day.after_hours_close), date);
                    let ms = Duration::milliseconds(1);
                    assert_eq!(cal.phase(day.pre_market_open - ms), SessionPhase::Closed, "{date}");
                    assert_eq!(cal.phase(day.regular_open), SessionPhase::Regular, "{date}");
                    assert_eq!(cal.phase(day.after_hours_close), SessionPhase::Closed, "{date}");
                    assert_eq!(cal.next_open(day.pre_market_open - ms), day.pre_market_open, "{date}");
                    assert_eq!(cal.end_of_trading_day(day.pre_market_open), day.after_hours_close, "{date}");
                    assert!(cal.next_trading_day(date) > date);
                    assert_eq!(cal.previous_trading_day(cal.next_trading_day(date)), date, "{date}");
                }
            }
            date = date.succ_opt().unwrap();
        }
        // Weekdays minus holidays: 2024 262−10, 2025–2027 and 2029–2030 261−10, 2028 260−9.
        assert_eq!(trading_days, 252 + 5 * 251 + 251);
    }

    proptest! {
        #[test]
        fn navigation_invariants(ms in 1_577_836_800_000i64..1_924_992_000_000i64, kind in prop_oneof![
            Just(MarketCalendarKind::Nyse),
            Just(MarketCalendarKind::AlwaysOpen),
        ]) {
            let cal = MarketCalendar::new(kind);
            let at = crate::time::from_epoch_ms(ms);
            let open = cal.next_open(at);
            prop_assert!(open >= at);
            prop_assert!(cal.is_open(open));
            prop_assert_eq!(open == at, cal.is_open(at));
            let regular = cal.next_regular_open(at);
            prop_assert!(regular > at);
            prop_assert_eq!(cal.phase(regular), SessionPhase::Regular);
            let end = cal.end_of_trading_day(at);
            prop_assert!(end > at);
            prop_assert!(!cal.is_open(end) || kind == MarketCalendarKind::AlwaysOpen);
            prop_assert!(cal.is_trading_day(cal.previous_trading_day(cal.date_of(at))));
            prop_assert!(cal.is_trading_day(cal.next_trading_day(cal.date_of(at))));
        }

        /// A run's dates read from a history's table are those worked out one by one: the date,
        /// the minute of day and the session, for instants in and outside the table, in time
        /// order with jumps (a walk-forward window's part starts anywhere).
        #[test]
        fn a_cursor_over_a_history_s_dates_finds_what_the_conversion_finds(
            table in proptest::collection::vec(1_500_000_000i64..1_900_000_000, 1..40),
            asked in proptest::collection::vec(1_450_000_000i64..1_950_000_000, 1..80),
        ) {
            let mut asked = asked;
            asked.sort_unstable();
            let mut cursor = NyDateCursor::new(ny_dates_of(table));
            let (mut day, nyse) = (NyDay::default(), MarketCalendar::new(MarketCalendarKind::Nyse));
            for seconds in asked {
                let found = *cursor.locate(seconds);
                let (date, minute) = day.locate_seconds(seconds);
                prop_assert_eq!((found.date, found.minute(seconds)), (date, minute));
                prop_assert_eq!(found, NyDate::containing(seconds));
                let session = nyse.trading_day(date).map(|d| (d.regular_open.timestamp(), d.regular_close.timestamp()));
                let nine_thirty = ny_instant(date, (9, 30)).timestamp();
                prop_assert_eq!(
                    (found.session_open, found.session_close),
                    session.unwrap_or((nine_thirty, ny_instant(date, (16, 0)).timestamp()))
                );
            }
        }
    }
}
