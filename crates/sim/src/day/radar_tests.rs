//! The default radar on the simulated market: enough runners pass its filters, early and for
//! most of the session, that a demonstration (and every test that needs a fresh symbol) has
//! plenty to work with. Drives the day generator directly, as the live feed does: the radar
//! sees each symbol's completed minute bars, its previous trading day's close and its 10-day
//! average volume.

use super::*;
use crate::profile::expected_cum_fraction;
use std::collections::BTreeSet;
use tradeops_core::calendar::MarketCalendar;
use tradeops_core::radar::{scan, RadarInput, AVERAGE_VOLUME_DAYS};
use tradeops_core::settings::{MarketCalendarKind, MomentumRadarSettings};
use tradeops_core::Symbol;

/// The service's default seed and universe size (`config/default.toml`).
const DEFAULT_SEED: u64 = 20_261_121;
const DEFAULT_SYMBOLS: usize = 500;

struct Live {
    generator: DayGenerator,
    prev_close: Price,
    average_volume: u64,
    volume: u64,
    last: Price,
    recent: Vec<Bar>,
}

/// The symbols on the default radar at each of `minutes` (indices from New York midnight,
/// ascending) of `date`, scanning at the minute boundary as the live feed does.
fn radar_through_day(u: &Universe, date: NaiveDate, minutes: &[u32]) -> Vec<BTreeSet<Symbol>> {
    let calendar = MarketCalendar::new(MarketCalendarKind::AlwaysOpen);
    let previous: Vec<NaiveDate> = std::iter::successors(Some(date), |d| Some(calendar.previous_trading_day(*d)))
        .skip(1)
        .take(AVERAGE_VOLUME_DAYS)
        .collect();
    let mut live: Vec<Live> = u
        .symbols
        .iter()
        .map(|p| {
            let generator = DayGenerator::for_symbol(u, p, date);
            let last = Price::from_f64_tick(generator.plan().prev_close);
            Live {
                generator,
                prev_close: Price::from_f64_tick(close_of(u, p, previous[0])),
                average_volume: previous.iter().map(|d| daily_volume(u, p, *d)).sum::<u64>() / previous.len() as u64,
                volume: 0,
                last,
                recent: Vec::new(),
            }
        })
        .collect();
    let clock = DayClock::for_date(date);
    let filters = MomentumRadarSettings::default();
    let mut done = 0;
    minutes
        .iter()
        .map(|&minute| {
            for s in live.iter_mut() {
                for _ in done..minute {
                    // A halted minute prints nothing.
                    let Minute::Traded(bar) = s.generator.next_minute().expect("the day has this minute") else {
                        continue;
                    };
                    s.volume += bar.volume;
                    s.last = bar.close;
                    s.recent.push(bar);
                    if s.recent.len() > 6 {
                        s.recent.remove(0);
                    }
                }
            }
            done = minute;
            let at = clock.start + Duration::minutes(minute.into());
            let inputs = u.symbols.iter().zip(&live).map(|(p, s)| RadarInput {
                symbol: &p.symbol,
                sector: Some(p.sector),
                float: Some(p.float),
                prev_close: s.prev_close,
                last: s.last,
                volume: s.volume,
                average_volume: s.average_volume,
                expected_fraction: expected_cum_fraction(&clock, minute),
                recent: &s.recent,
                session: tradeops_core::calendar::SessionPhase::Regular,
                day: Default::default(),
            });
            scan(inputs, &filters, at, 200).into_iter().map(|r| r.symbol).collect()
        })
        .collect()
}

#[test]
fn at_least_ten_symbols_pass_the_default_radar_by_ten_and_stay_most_of_the_session() {
    let u = Universe::generate(DEFAULT_SEED, DEFAULT_SYMBOLS);
    // Every 15 minutes from 10:00 to 16:00 New York.
    let mut report = Vec::new();
    for day in 16..=27 {
        let on = NaiveDate::from_ymd_opt(2026, 11, day).expect("valid");
        let clock = DayClock::for_date(on);
        let minutes: Vec<u32> = (clock.open + 30..=clock.close).step_by(15).collect();
        let scans = radar_through_day(&u, on, &minutes);
        let at_ten = &scans[0];
        // On the radar at 10:00 and in most of the scans to the close.
        let staying =
            at_ten.iter().filter(|s| scans.iter().filter(|scan| scan.contains(*s)).count() * 2 > scans.len()).count();
        let runners = u.symbols.iter().filter(|p| day_kind(&u, p, on) == DayKind::Runner).count();
        report.push((on, runners, at_ten.len(), staying));
    }
    eprintln!("{report:?}");
    for (on, _, at_ten, staying) in report {
        assert!(at_ten >= 10 && staying >= 10, "{on}: {at_ten} on the radar at 10:00, {staying} staying");
    }
}
