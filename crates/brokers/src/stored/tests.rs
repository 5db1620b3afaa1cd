use super::*;
use crate::simulated::live::tests::open_filters;
use crate::simulated::SimulatedMarket;
use tradeops_core::calendar::MarketCalendar;
use tradeops_core::settings::MarketCalendarKind;
use tradeops_core::time::parse_ts;

fn ts(text: &str) -> Timestamp {
    parse_ts(text).unwrap()
}

fn bar(start: &str, close: i64, volume: u64) -> Bar {
    let p = Price(close);
    Bar { start: ts(start), open: p, high: p, low: p, close: p, volume }
}

#[test]
fn a_day_starts_from_the_previous_stored_close_and_the_average_of_the_stored_days_before() {
    let mut days = StoredDays::default();
    let symbol = Symbol::parse("ABC").unwrap();
    // Minute bars of two days (the 18th only partly: its daily bar says its close and volume).
    days.add(
        symbol.clone(),
        vec![bar("2026-11-19T14:31:00Z", 11_0000, 500), bar("2026-11-19T14:30:00Z", 10_5000, 700)],
        vec![bar("2026-11-18T05:00:00Z", 10_0000, 9_000), bar("2026-11-17T05:00:00Z", 9_0000, 3_000)],
    );
    let day = days.day(
        0,
        chrono::NaiveDate::from_ymd_opt(2026, 11, 19).unwrap(),
        &[
            chrono::NaiveDate::from_ymd_opt(2026, 11, 18).unwrap(),
            chrono::NaiveDate::from_ymd_opt(2026, 11, 17).unwrap(),
            chrono::NaiveDate::from_ymd_opt(2026, 11, 16).unwrap(),
        ],
    );
    assert_eq!(day.prev_close, Some(Price(10_0000)));
    assert_eq!(day.average_volume, 6_000, "the stored days among the three before");
    assert_eq!(
        day.bars.iter().map(|b| b.start).collect::<Vec<_>>(),
        vec![ts("2026-11-19T14:30:00Z"), ts("2026-11-19T14:31:00Z")]
    );
    // A day with nothing stored before it opens at its first print.
    let first = days.day(0, chrono::NaiveDate::from_ymd_opt(2026, 11, 16).unwrap(), &[]);
    assert_eq!((first.prev_close, first.average_volume), (None, 0));
    // Its days as daily bars: the stored daily bars, and the 19th from its minutes.
    let daily = days.bars(&symbol, Timeframe::Day, ts("2026-11-17T00:00:00Z"), ts("2026-11-20T00:00:00Z"));
    assert_eq!(
        daily.iter().map(|b| (b.close.0, b.volume)).collect::<Vec<_>>(),
        vec![(9_0000, 3_000), (10_0000, 9_000), (11_0000, 1_200)]
    );
}

#[test]
fn the_feed_prints_stored_minutes_as_it_prints_generated_ones() {
    // A simulated symbol's day, stored: the feed over the stored bars prints what the feed over
    // the universe prints, and its radar sees the same previous close, volume and last.
    let sim = SimulatedMarket::new(20261121, 3);
    let clock: std::sync::Arc<dyn tradeops_core::Clock> =
        std::sync::Arc::new(tradeops_core::ManualClock::new(ts("2026-11-20T15:00:00Z")));
    let calendar = MarketCalendar::new(MarketCalendarKind::AlwaysOpen);
    let mut days = StoredDays::default();
    for p in &sim.universe.symbols {
        let minute = sim
            .bars_sync(&p.symbol, Timeframe::Minute, ts("2026-11-19T05:00:00Z"), ts("2026-11-21T05:00:00Z"))
            .unwrap();
        let daily =
            sim.bars_sync(&p.symbol, Timeframe::Day, ts("2026-10-25T00:00:00Z"), ts("2026-11-20T05:00:00Z")).unwrap();
        days.add(p.symbol.clone(), minute, daily);
    }
    let generated = LiveMarket::new(sim.universe.clone(), 1.0, clock.clone()).without_reference_data();
    let stored = LiveMarket::over_stored(std::sync::Arc::new(days), 1.0, clock);
    let radar = open_filters();
    for at in ["2026-11-20T14:29:50Z", "2026-11-20T14:45:00Z", "2026-11-20T15:30:15Z"] {
        let a = generated.advance_to(ts(at), calendar, &radar);
        let b = stored.advance_to(ts(at), calendar, &radar);
        assert_eq!(a.len(), b.len(), "scans by {at}");
        for (x, y) in a.iter().zip(&b) {
            assert_eq!(format!("{:?}", x.rows), format!("{:?}", y.rows), "the scan at {}", x.captured_at);
        }
        for p in &sim.universe.symbols {
            assert_eq!(generated.snapshot(&p.symbol), stored.snapshot(&p.symbol), "{} at {at}", p.symbol);
            assert_eq!(generated.recent_bars(&p.symbol), stored.recent_bars(&p.symbol), "{} at {at}", p.symbol);
        }
    }
}

#[test]
fn a_stored_day_meets_the_halts_stored_with_it_as_the_simulated_day_does() {
    // A simulated runner halted on the 20th, its days stored with their halts: the feed over the
    // stored days reports the halt exactly when the feed over the universe does.
    let sim = SimulatedMarket::new(20261121, 200);
    let (from, to) = (ts("2026-11-19T05:00:00Z"), ts("2026-11-21T05:00:00Z"));
    let (symbol, halts) = sim
        .universe
        .symbols
        .iter()
        .map(|p| (p.symbol.clone(), sim.halt_windows(&p.symbol, from, to)))
        .find(|(_, halts)| halts.iter().any(|h| h.start >= ts("2026-11-20T14:45:00Z")))
        .expect("a symbol halted on the 20th after 09:45");
    let mut days = StoredDays::default();
    let minute = sim.bars_sync(&symbol, Timeframe::Minute, from, to).unwrap();
    let daily = sim.bars_sync(&symbol, Timeframe::Day, ts("2026-10-25T00:00:00Z"), ts("2026-11-20T05:00:00Z")).unwrap();
    days.add(symbol.clone(), minute, daily);
    days.add_halts(&symbol, halts.clone());
    let clock: std::sync::Arc<dyn tradeops_core::Clock> =
        std::sync::Arc::new(tradeops_core::ManualClock::new(ts("2026-11-20T14:30:00Z")));
    let calendar = MarketCalendar::new(MarketCalendarKind::AlwaysOpen);
    let generated = LiveMarket::new(sim.universe.clone(), 1.0, clock.clone()).without_reference_data();
    let stored = LiveMarket::over_stored(std::sync::Arc::new(days), 1.0, clock);
    let radar = open_filters();
    let halt = halts.iter().find(|h| h.start >= ts("2026-11-20T14:45:00Z")).unwrap();
    let mut at = halt.start - chrono::Duration::minutes(2);
    let mut seen = 0;
    while at < halt.end + chrono::Duration::minutes(2) {
        generated.advance_to(at, calendar, &radar);
        stored.advance_to(at, calendar, &radar);
        assert_eq!(generated.halt(&symbol), stored.halt(&symbol), "{symbol} at {at}");
        assert_eq!(generated.snapshot(&symbol), stored.snapshot(&symbol), "{symbol} at {at}");
        seen += usize::from(stored.halt(&symbol).as_ref() == Some(&halt.halt));
        at += chrono::Duration::seconds(15);
    }
    assert!(seen >= 4, "the halt was in force at some steps: {seen}");
}
