use super::*;
use crate::simulated::SimulatedMarket;
use tradeops_core::market::Timeframe;
use tradeops_core::time::parse_ts;

fn ts(text: &str) -> Timestamp {
    parse_ts(text).unwrap()
}

/// The radar with every filter open (every symbol a row).
pub(crate) fn open_filters() -> MomentumRadarSettings {
    MomentumRadarSettings {
        min_price: rust_decimal::Decimal::new(1, 2),
        max_price: rust_decimal::Decimal::new(100_000, 0),
        min_percentage_gain: -100.0,
        min_relative_volume: 0.0,
        max_float: u64::MAX / 2,
        min_volume: 0,
        ..MomentumRadarSettings::default()
    }
}

fn market(symbols: usize) -> (SimulatedMarket, LiveMarket) {
    let sim = SimulatedMarket::new(20261121, symbols);
    let service = tradeops_core::ManualClock::new(ts("2026-11-20T15:00:00Z"));
    let live = LiveMarket::new(sim.universe.clone(), 1.0, std::sync::Arc::new(service));
    (sim, live)
}

#[test]
fn the_feed_age_is_read_on_the_service_clock() {
    let sim = SimulatedMarket::new(20261121, 5);
    let service = tradeops_core::ManualClock::new(ts("2026-11-25T10:00:00Z"));
    let live = LiveMarket::new(sim.universe.clone(), 1.0, std::sync::Arc::new(service.clone()));
    assert_eq!(live.status().since_last_step, None, "never stepped");
    live.advance_to(ts("2026-11-20T15:00:20Z"), NYSE, &open_filters());
    assert_eq!(live.status().since_last_step, Some(std::time::Duration::ZERO));
    service.advance(chrono::Duration::milliseconds(4_250));
    assert_eq!(live.status().since_last_step, Some(std::time::Duration::from_millis(4_250)));
}

const NYSE: MarketCalendar = MarketCalendar::new(MarketCalendarKind::Nyse);

#[test]
fn feed_bars_equal_history_bars() {
    let (sim, live) = market(40);
    let f = open_filters();
    live.advance_to(ts("2026-11-20T15:00:20Z"), NYSE, &f);
    live.advance_to(ts("2026-11-20T15:10:00Z"), NYSE, &f);
    for p in &sim.universe.symbols {
        let (recent, volume) = live.recent_bars(&p.symbol).unwrap();
        let history = sim
            .bars_sync(&p.symbol, Timeframe::Minute, ts("2026-11-20T15:04:00Z"), ts("2026-11-20T15:10:00Z"))
            .unwrap();
        assert_eq!(recent, history, "{}", p.symbol);
        // volume today: every minute since midnight New York plus the open print of 15:10
        let day = sim
            .bars_sync(&p.symbol, Timeframe::Minute, ts("2026-11-20T05:00:00Z"), ts("2026-11-20T15:10:00Z"))
            .unwrap();
        let now_bar = sim
            .bars_sync(&p.symbol, Timeframe::Minute, ts("2026-11-20T15:10:00Z"), ts("2026-11-20T15:11:00Z"))
            .unwrap();
        // (a halted symbol has no bar and no print at 15:10)
        let printed = now_bar.first().map_or(0, |b| b.volume / 4);
        assert_eq!(volume, day.iter().map(|b| b.volume).sum::<u64>() + printed, "{}", p.symbol);
    }
}

#[test]
fn scans_happen_exactly_on_minute_boundaries() {
    let (_, live) = market(30);
    let f = open_filters();
    let first = live.advance_to(ts("2026-11-20T15:00:20Z"), NYSE, &f);
    assert_eq!(first.iter().map(|s| s.captured_at).collect::<Vec<_>>(), vec![ts("2026-11-20T15:00:00Z")]);
    let none = live.advance_to(ts("2026-11-20T15:00:59.999Z"), NYSE, &f);
    assert!(none.is_empty());
    let next = live.advance_to(ts("2026-11-20T15:03:00Z"), NYSE, &f);
    let at: Vec<_> = next.iter().map(|s| s.captured_at).collect();
    assert_eq!(at, vec![ts("2026-11-20T15:01:00Z"), ts("2026-11-20T15:02:00Z"), ts("2026-11-20T15:03:00Z")]);
    assert!(next.iter().all(|s| s.scanned == 30 && s.rows.len() == 30));
    assert_eq!(live.next_step(), Some(ts("2026-11-20T15:03:15Z")));
}

#[test]
fn runners_lead_the_radar_after_the_open() {
    let (sim, live) = market(500);
    let scans = live.advance_to(ts("2026-11-20T15:30:00Z"), NYSE, &open_filters());
    let rows = &scans.last().unwrap().rows;
    let date = NaiveDate::from_ymd_opt(2026, 11, 20).unwrap();
    let top = &rows[0];
    let p = sim.universe.get(&top.symbol).unwrap();
    assert_eq!(tradeops_sim::day_kind(&sim.universe, p, date), tradeops_sim::DayKind::Runner, "{top:?}");
    assert!(top.percentage_gain >= 10.0 && top.relative_volume.unwrap() >= 2.0, "{top:?}");
    // the default filters keep only momentum names, ranked by gain
    let filtered = live.advance_to(ts("2026-11-20T15:31:00Z"), NYSE, &MomentumRadarSettings::default());
    let rows = &filtered[0].rows;
    assert!(!rows.is_empty() && rows.len() < 50, "{} rows pass the default filters", rows.len());
    assert!(rows.windows(2).all(|w| w[0].percentage_gain >= w[1].percentage_gain));
    assert!(rows.iter().all(|r| r.percentage_gain >= 10.0 && r.relative_volume.unwrap_or(0.0) >= 5.0));
}

#[test]
fn the_day_rolls_at_midnight_new_york() {
    let (_, live) = market(20);
    let f = open_filters();
    let always = MarketCalendar::new(MarketCalendarKind::AlwaysOpen);
    live.advance_to(ts("2026-11-21T04:58:00Z"), always, &f);
    assert_eq!(live.status().date, NaiveDate::from_ymd_opt(2026, 11, 20));
    let scans = live.advance_to(ts("2026-11-21T05:00:00Z"), always, &f);
    assert_eq!(live.status().date, NaiveDate::from_ymd_opt(2026, 11, 21));
    let midnight = scans.last().unwrap();
    assert_eq!(midnight.captured_at, ts("2026-11-21T05:00:00Z"));
    assert_eq!(midnight.rows.len(), 20, "open filters: every symbol");
    assert!(midnight.rows.iter().all(|r| r.volume == 0), "volume restarts with the new date");
}

#[test]
fn disabled_radar_does_not_scan() {
    let (_, live) = market(10);
    let off = MomentumRadarSettings { enabled: false, ..open_filters() };
    assert!(live.advance_to(ts("2026-11-20T15:05:00Z"), NYSE, &off).is_empty());
}

#[test]
fn a_closed_nyse_session_is_not_scanned_but_always_open_is() {
    let (sim, live) = market(20);
    let f = open_filters();
    // Saturday 2026-11-21, 10:00 New York
    assert!(live.advance_to(ts("2026-11-21T15:00:00Z"), NYSE, &f).is_empty());
    let always = MarketCalendar::new(MarketCalendarKind::AlwaysOpen);
    assert_eq!(live.advance_to(ts("2026-11-21T15:01:00Z"), always, &f).len(), 1);
    // quotes straddle the last trade
    let p = &sim.universe.symbols[0];
    let q = live.quote(&p.symbol).unwrap();
    let last = live.last_price(&p.symbol).unwrap();
    assert!(q.bid <= last && last <= q.ask && q.bid < q.ask, "{q:?} around {last:?}");
}

/// The first halt of `code` on the default market's 2026-11-20, and its symbol.
fn first_halt(sim: &SimulatedMarket, code: &str) -> (Symbol, tradeops_sim::HaltWindow) {
    let date = NaiveDate::from_ymd_opt(2026, 11, 20).unwrap();
    sim.universe
        .symbols
        .iter()
        .find_map(|p| {
            let windows = tradeops_sim::halt_windows(&sim.universe, p, date);
            windows.into_iter().find(|w| &*w.halt.reason_code == code).map(|w| (p.symbol.clone(), w))
        })
        .expect("the default seed halts symbols every day")
}

#[test]
fn a_paused_symbol_prints_nothing_and_reports_its_pause_until_the_reopening() {
    let (sim, live) = market(500);
    let (symbol, pause) = first_halt(&sim, tradeops_core::market::LULD_PAUSE);
    let f = open_filters();
    let minute = Duration::minutes(1);
    live.advance_to(pause.start - minute * 3, NYSE, &f);
    live.advance_to(pause.start - minute + Duration::seconds(50), NYSE, &f);
    assert_eq!(live.halt(&symbol), None, "the minute that closes at its band trades");
    let clipped = sim.bars_sync(&symbol, Timeframe::Minute, pause.start - minute, pause.start).unwrap();
    assert_eq!(live.last_price(&symbol), Some(clipped[0].close));

    live.advance_to(pause.start, NYSE, &f);
    assert_eq!(live.halt(&symbol), Some(pause.halt.clone()));
    assert_eq!(pause.halt.since, pause.start, "since the end of the clipped minute");
    let (quote, last) = (live.quote(&symbol), live.last_price(&symbol));
    let scans = live.advance_to(pause.end - Duration::seconds(15), NYSE, &f);
    assert_eq!(live.halt(&symbol), Some(pause.halt.clone()));
    assert_eq!((live.quote(&symbol), live.last_price(&symbol)), (quote, last), "no prints while paused");
    assert!(scans.len() >= 4 && scans.iter().all(|s| s.rows.iter().any(|r| r.symbol == symbol)), "still scanned");
    let (recent, _) = live.recent_bars(&symbol).unwrap();
    assert_eq!(recent.last(), clipped.last(), "no bar while paused");

    live.advance_to(pause.end, NYSE, &f);
    assert_eq!(live.halt(&symbol), None);
    let reopening = sim.bars_sync(&symbol, Timeframe::Minute, pause.end, pause.end + minute).unwrap();
    assert_eq!(live.last_price(&symbol), Some(reopening[0].open), "the reopening print");
    // The feed's bars across the pause are history's.
    live.advance_to(pause.end + minute * 3, NYSE, &f);
    let (recent, _) = live.recent_bars(&symbol).unwrap();
    let history = sim.bars_sync(&symbol, Timeframe::Minute, pause.start - minute * 3, pause.end + minute * 3).unwrap();
    assert_eq!(recent, history[history.len() - recent.len()..], "{symbol}");
    assert!(recent.len() >= 4, "{recent:?}");
}

#[test]
fn a_news_halt_is_the_simulated_markets_halt_from_its_first_minute() {
    use crate::market::MarketData;
    let (sim, live) = market(500);
    let (symbol, news) = first_halt(&sim, tradeops_core::market::NEWS_PENDING);
    let live = std::sync::Arc::new(live);
    let sim = SimulatedMarket::new(20261121, 500).with_live(live.clone());
    assert_eq!(sim.halt(&symbol), None, "no feed step yet");
    let f = open_filters();
    live.advance_to(news.start - Duration::seconds(15), NYSE, &f);
    assert_eq!(sim.halt(&symbol), None);
    live.advance_to(news.start, NYSE, &f);
    assert_eq!(sim.halt(&symbol), Some(tradeops_core::market::SymbolHalt::news_pending(news.start)));
    live.advance_to(news.end - Duration::seconds(15), NYSE, &f);
    assert_eq!(sim.halt(&symbol), Some(news.halt.clone()));
    live.advance_to(news.end, NYSE, &f);
    assert_eq!(sim.halt(&symbol), None);
}

/// The pre-market columns of the feed's scans on Monday 2026-11-23 are core's tally of the
/// market's own minute bars (its history): in the pre-market, at the open and on, on NYSE and
/// on ALWAYS_OPEN; the pre-market and the after-hours are scanned, the night is not (CONTRACT
/// §12).
#[test]
fn scans_tally_the_whole_trading_day_from_the_markets_bars() {
    let (sim, live) = market(40);
    let f = open_filters();
    let monday = NaiveDate::from_ymd_opt(2026, 11, 23).unwrap();
    let nyse_day = NYSE.trading_day(monday).unwrap();
    let history = |symbol: &Symbol, until: &str| {
        sim.bars_sync(symbol, Timeframe::Minute, ts("2026-11-23T05:00:00Z"), ts(until)).unwrap()
    };
    let gap_of = |row: &RadarRow, price: Option<Price>| {
        let prev = live.snapshot(&row.symbol).unwrap().prev_close.to_f64();
        price.map(|p| ((p.to_f64() - prev) / prev * 1e6).round() / 1e4)
    };

    // 08:00 New York (13:00Z): the pre-market, scanned.
    let scans = live.advance_to(ts("2026-11-23T13:00:00Z"), NYSE, &f);
    let pre = scans.last().unwrap();
    assert_eq!((pre.captured_at, pre.session), (ts("2026-11-23T13:00:00Z"), SessionPhase::PreMarket));
    assert_eq!(pre.rows.len(), 40);
    let mut traded = 0;
    for row in &pre.rows {
        let bars = history(&row.symbol, "2026-11-23T13:00:00Z");
        let premarket: Vec<&Bar> = bars.iter().filter(|b| b.start >= nyse_day.pre_market_open).collect();
        assert_eq!(row.session, SessionPhase::PreMarket);
        assert_eq!(row.premarket_volume, premarket.iter().map(|b| b.volume).sum::<u64>(), "{row:?}");
        assert_eq!(row.premarket_high, premarket.iter().map(|b| b.high).max(), "{row:?}");
        let expected = gap_of(row, (!premarket.is_empty()).then_some(row.price));
        assert_eq!(row.gap_pct, expected, "the last trade against the previous close: {row:?}");
        traded += usize::from(!premarket.is_empty());
    }
    assert!(traded > 30, "most names trade in the pre-market: {traded}");

    // Between boundaries (scans every 15 s) the minute in progress counts as it stands: in the
    // pre-market, every share traded today but the night's.
    let every_step = MomentumRadarSettings { scan_on_minute_boundary: false, ..f.clone() };
    let mid = live.advance_to(ts("2026-11-23T13:00:30Z"), NYSE, &every_step).pop().unwrap();
    assert_eq!(mid.captured_at, ts("2026-11-23T13:00:30Z"));
    for row in &mid.rows {
        let night: u64 = history(&row.symbol, "2026-11-23T09:00:00Z").iter().map(|b| b.volume).sum();
        assert_eq!(row.premarket_volume, row.volume - night, "{row:?}");
    }

    // The calendar switched to ALWAYS_OPEN: no pre-market, the day's first trade is its open.
    let always = MarketCalendar::new(MarketCalendarKind::AlwaysOpen);
    let switched = live.advance_to(ts("2026-11-23T13:01:00Z"), always, &f).pop().unwrap();
    assert_eq!(switched.session, SessionPhase::Regular);
    for row in &switched.rows {
        let first = history(&row.symbol, "2026-11-23T13:01:00Z").first().map(|b| b.open);
        assert_eq!((row.session, row.premarket_volume, row.premarket_high), (SessionPhase::Regular, 0, None));
        assert_eq!(row.gap_pct, gap_of(row, first), "{row:?}");
    }

    // 10:00 (15:00Z) back on NYSE: the regular session; the gap is the regular open's, the
    // pre-market's figures stay what 04:00–09:30 traded.
    let open = live.advance_to(ts("2026-11-23T15:00:00Z"), NYSE, &f).pop().unwrap();
    assert_eq!(open.session, SessionPhase::Regular);
    for row in &open.rows {
        let bars = history(&row.symbol, "2026-11-23T15:00:00Z");
        let premarket: Vec<&Bar> =
            bars.iter().filter(|b| b.start >= nyse_day.pre_market_open && b.start < nyse_day.regular_open).collect();
        let regular_open = bars.iter().find(|b| b.start >= nyse_day.regular_open).map(|b| b.open);
        assert_eq!(row.premarket_volume, premarket.iter().map(|b| b.volume).sum::<u64>(), "{row:?}");
        assert_eq!(row.premarket_high, premarket.iter().map(|b| b.high).max(), "{row:?}");
        let gap_price = regular_open.or(premarket.last().map(|b| b.close));
        assert_eq!(row.gap_pct, gap_of(row, gap_price), "{row:?}");
    }

    // The after-hours are scanned; after 20:00 the exchange is closed and nothing is.
    let evening = live.advance_to(ts("2026-11-23T22:00:00Z"), NYSE, &f);
    assert_eq!(
        evening.last().map(|s| (s.captured_at, s.session)),
        Some((ts("2026-11-23T22:00:00Z"), SessionPhase::AfterHours))
    );
    let night = live.advance_to(ts("2026-11-24T01:30:00Z"), NYSE, &f);
    assert_eq!(night.last().map(|s| s.captured_at), Some(ts("2026-11-24T00:59:00Z")), "the last scan is 19:59's");
}

/// The pre-market's book is thin (CONTRACT §12): at 07:00 New York a symbol's quote is
/// `EXTENDED_SPREAD_FACTOR` times as wide and a tenth as deep as the regular session's around
/// the same last trade, and at 11:00 it is the regular session's again; the snapshot reads the
/// same book.
#[test]
fn the_pre_market_quotes_a_wider_thinner_book_than_the_regular_session() {
    let (sim, live) = market(20);
    let f = open_filters();
    // Friday 2026-11-20: 07:00, then 11:00 New York.
    for (at, extended) in [("2026-11-20T12:00:00Z", true), ("2026-11-20T16:00:00Z", false)] {
        live.advance_to(ts(at), NYSE, &f);
        for p in &sim.universe.symbols {
            let (last, volume) = (live.last_price(&p.symbol).unwrap(), live.average_volume(&p.symbol).unwrap());
            let quote = live.quote(&p.symbol).unwrap();
            let regular = tradeops_sim::quote::quote_around(last, volume);
            assert_eq!(quote, tradeops_sim::quote::quote_in_session(last, volume, extended), "{} at {at}", p.symbol);
            assert_eq!(live.snapshot(&p.symbol).unwrap().quote, quote, "{} at {at}", p.symbol);
            assert!(quote.bid <= last && last <= quote.ask, "{}: {quote:?} around {last:?}", p.symbol);
            if extended {
                assert!(quote.ask.0 - quote.bid.0 > regular.ask.0 - regular.bid.0, "{}: wider at 07:00", p.symbol);
                assert!(quote.bid_size < regular.bid_size || regular.bid_size == 100, "{}: thinner", p.symbol);
            }
        }
    }
}

/// Thursday 2026-11-19, 17:00 New York (the after-hours), and 14 hours later: Friday's 07:00
/// (the pre-market), across the day roll — a machine that slept through the night.
const BEFORE_THE_JUMP: &str = "2026-11-19T22:00:00Z";
const AFTER_THE_JUMP: &str = "2026-11-20T12:00:00Z";

/// A service clock standing still that, read once armed, runs what it was armed with first:
/// what the feed does after a step (it reads this clock) happens then, on the feed's thread.
#[derive(Default)]
struct ArmedClock(std::sync::Mutex<Option<Box<dyn FnOnce() + Send>>>);

impl tradeops_core::Clock for ArmedClock {
    fn now(&self) -> Timestamp {
        let armed = self.0.lock().unwrap().take();
        if let Some(then) = armed {
            then();
        }
        ts("2026-11-20T15:00:00Z")
    }
}

/// A reader asking for the market while a 14-hour catch-up has taken one step reads it as of
/// that step: the feed hands it the market before its next step, rather than after the 3,359
/// steps left.
#[test]
fn a_reader_waits_for_one_step_of_a_catch_up_not_for_the_whole_jump() {
    let sim = SimulatedMarket::new(20261121, 50);
    let clock = std::sync::Arc::new(ArmedClock::default());
    let live = std::sync::Arc::new(LiveMarket::new(sim.universe.clone(), 1.0, clock.clone()));
    let f = open_filters();
    let (from, to) = (ts(BEFORE_THE_JUMP), ts(AFTER_THE_JUMP));
    live.advance_to(from, NYSE, &f);
    let (ask, asked) = std::sync::mpsc::channel::<()>();
    let reader = {
        let live = live.clone();
        std::thread::spawn(move || asked.recv().ok().and_then(|()| live.status().market_time))
    };
    // Once the jump's first step is taken: the reader asks, and has time to wait for the market.
    *clock.0.lock().unwrap() = Some(Box::new(move || {
        ask.send(()).expect("reader listens");
        std::thread::sleep(std::time::Duration::from_millis(200));
    }));
    live.advance_to(to, NYSE, &f);
    let read = reader.join().expect("reader");
    let first = from + Duration::seconds(STEP_SECONDS);
    assert_eq!(read, Some(first), "asked at {first}, the reader read the market of {read:?} (the jump ends at {to})");
    assert_eq!(live.status().market_time, Some(to));
}

/// A reader reading the feed in a loop while it catches up 14 hours reads it part way, at many
/// of its steps, not only before the jump and after.
#[test]
fn a_reader_in_a_loop_reads_a_catch_up_part_way() {
    let (_, live) = market(50);
    let f = open_filters();
    let (from, to) = (ts(BEFORE_THE_JUMP), ts(AFTER_THE_JUMP));
    live.advance_to(from, NYSE, &f);
    let live = std::sync::Arc::new(live);
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (reading, started) = std::sync::mpsc::channel();
    let reader = {
        let (live, done) = (live.clone(), done.clone());
        std::thread::spawn(move || {
            let mut seen = std::collections::BTreeSet::new();
            loop {
                // A read after `done` is set reads the market after the jump.
                let last = done.load(Ordering::Relaxed);
                seen.insert(live.status().market_time.expect("stepped"));
                if seen.len() == 1 {
                    let _ = reading.send(());
                }
                if last {
                    return seen;
                }
            }
        })
    };
    started.recv().expect("reader reads");
    live.advance_to(to, NYSE, &f);
    done.store(true, Ordering::Relaxed);
    let seen = reader.join().expect("reader");
    assert_eq!((seen.first(), seen.last()), (Some(&from), Some(&to)), "read before the jump and after");
    // Handed the market at every step it waits at, the reader reads most of the 3,360; fewer
    // where the machine runs something else instead of it.
    assert!(seen.len() >= 12, "the reader read the market at {} steps: {seen:?}", seen.len());
}

/// Handing the market to readers between steps leaves the catch-up's work as it was: one call
/// over 14 hours, read all along, makes the scans, bars, prints and halts of the same steps
/// taken one call each.
#[test]
fn a_catch_up_read_all_along_makes_the_scans_and_bars_of_its_steps_taken_one_by_one() {
    let (sim, caught_up) = market(20);
    let (_, stepped) = market(20);
    let f = open_filters();
    let (from, to) = (ts(BEFORE_THE_JUMP), ts(AFTER_THE_JUMP));
    caught_up.advance_to(from, NYSE, &f);
    stepped.advance_to(from, NYSE, &f);
    let done = std::sync::atomic::AtomicBool::new(false);
    let at_once = std::thread::scope(|scope| {
        let symbol = &sim.universe.symbols[0].symbol;
        let reader = scope.spawn(|| {
            let mut reads = 0u64;
            while !done.load(Ordering::Relaxed) {
                std::hint::black_box((caught_up.snapshot(symbol), caught_up.recent_bars(symbol)));
                reads += 1;
            }
            reads
        });
        let scans = caught_up.advance_to(to, NYSE, &f);
        done.store(true, Ordering::Relaxed);
        assert!(reader.join().expect("reader") > 0);
        scans
    });
    let mut one_by_one = Vec::new();
    while let Some(step) = stepped.next_step().filter(|s| *s <= to) {
        one_by_one.extend(stepped.advance_to(step, NYSE, &f));
    }
    let key = |s: &RadarScan| (s.captured_at, s.session, s.rows.clone(), s.scanned);
    assert!(!at_once.is_empty(), "the after-hours and the pre-market are scanned");
    assert_eq!(at_once.iter().map(key).collect::<Vec<_>>(), one_by_one.iter().map(key).collect::<Vec<_>>());
    assert_eq!(caught_up.next_step(), stepped.next_step());
    assert_eq!(caught_up.status().date, stepped.status().date);
    for p in &sim.universe.symbols {
        let s = &p.symbol;
        assert_eq!(caught_up.recent_bars(s), stepped.recent_bars(s), "{s}");
        assert_eq!(caught_up.snapshot(s), stepped.snapshot(s), "{s}");
        assert_eq!(caught_up.last_closed_bar(s), stepped.last_closed_bar(s), "{s}");
        assert_eq!(caught_up.halt(s), stepped.halt(s), "{s}");
    }
}
