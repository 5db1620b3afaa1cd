//! Trading halts in the day walk: LULD bands and volatility pauses, news halts, and how they
//! show in bars (none while halted; the reopening bar gapped and carrying the halted volume),
//! on the service's default seed.

use super::*;
use tradeops_core::market::{LULD_PAUSE, NEWS_PENDING};
use tradeops_core::Timestamp;

/// The service's default seed and universe size (`config/default.toml`).
const DEFAULT_SEED: u64 = 20_261_121;
const DEFAULT_SYMBOLS: usize = 500;

fn date(d: u32) -> NaiveDate {
    NaiveDate::from_ymd_opt(2026, 11, d).unwrap()
}

/// Five weekdays of the default market.
fn weekdays() -> [NaiveDate; 5] {
    [date(16), date(17), date(18), date(19), date(20)]
}

fn minutes(plan: DayPlan) -> Vec<Minute> {
    let mut generator = DayGenerator::new(plan);
    std::iter::from_fn(|| generator.next_minute()).collect()
}

/// The same day with halts and without (where every minute trades at the walk's price).
fn with_and_without(u: &Universe, p: &SymbolProfile, on: NaiveDate) -> (Vec<Minute>, Vec<Bar>) {
    let plan = day_plan(u, p, on);
    let free = minutes(DayPlan { halts: false, ..plan.clone() });
    let free = free.into_iter().map(|m| if let Minute::Traded(b) = m { b } else { unreachable!("no halts") });
    (minutes(plan), free.collect())
}

/// The symbols of the default universe with a halt on `on`, and their windows.
fn halted(u: &Universe, on: NaiveDate) -> Vec<(&SymbolProfile, Vec<HaltWindow>)> {
    u.symbols.iter().map(|p| (p, halt_windows(u, p, on))).filter(|(_, w)| !w.is_empty()).collect()
}

#[test]
fn a_pause_has_no_bars_for_five_minutes_and_the_reopening_bar_carries_their_volume_at_the_walks_price() {
    let u = Universe::generate(DEFAULT_SEED, DEFAULT_SYMBOLS);
    let mut pauses = 0;
    for (p, windows) in halted(&u, date(20)) {
        let (day, free) = with_and_without(&u, p, date(20));
        assert_eq!(day.len(), free.len());
        let clock = DayClock::for_date(date(20));
        let index = |t: Timestamp| (t - clock.start).num_minutes() as usize;
        for w in windows {
            let (from, until) = (index(w.start), index(w.end));
            assert!(day[from..until].iter().all(|m| *m == Minute::Halted(w.halt.clone())), "{} {w:?}", p.symbol);
            if &*w.halt.reason_code == LULD_PAUSE {
                pauses += 1;
                // Unless a news halt cut it short.
                let by_news = matches!(&day[until], Minute::Halted(h) if &*h.reason_code == NEWS_PENDING);
                assert!(until - from == PAUSE_MINUTES as usize || by_news, "{} {w:?}", p.symbol);
                let Minute::Traded(clipped) = &day[from - 1] else { panic!("a pause follows a traded minute") };
                assert_ne!(clipped.close, free[from - 1].close, "{}: the walk closed outside the band", p.symbol);
            }
            if let Minute::Traded(reopening) = &day[until] {
                // Since the first halted minute (a pause a news halt cut short included).
                let first = (0..from).rev().take_while(|k| matches!(day[*k], Minute::Halted(_))).last().unwrap_or(from);
                let volume: u64 = free[first..=until].iter().map(|b| b.volume).sum();
                assert_eq!(reopening.volume, volume, "{} {w:?}", p.symbol);
                assert_eq!(reopening.open, free[until].open, "{}: opens at the walk's price", p.symbol);
            }
        }
        // Every minute that traded outside a halt traded the walk's volume, and the day's total
        // is the same.
        let volume = |m: &Minute| if let Minute::Traded(b) = m { b.volume } else { 0 };
        assert_eq!(day.iter().map(volume).sum::<u64>(), free.iter().map(|b| b.volume).sum::<u64>());
        assert_eq!(day.iter().map(volume).sum::<u64>(), daily_volume(&u, p, date(20)));
    }
    assert!(pauses >= 5, "{pauses} pauses");
}

#[test]
fn no_bar_trades_outside_its_band() {
    let u = Universe::generate(DEFAULT_SEED, DEFAULT_SYMBOLS);
    for on in [date(19), date(20)] {
        let clock = DayClock::for_date(on);
        for p in &u.symbols {
            let plan = day_plan(&u, p, on);
            let mut closes: Vec<(u32, Price)> = Vec::new();
            for minute in minutes(plan.clone()) {
                let Minute::Traded(bar) = minute else { continue };
                let m = (bar.start - clock.start).num_minutes() as u32;
                if !(clock.open..clock.close).contains(&m) {
                    continue;
                }
                // The reference the rules define, from the bars alone.
                let last5: Vec<f64> = closes.iter().filter(|(at, _)| at + 5 >= m).map(|(_, c)| c.to_f64()).collect();
                let reference =
                    if last5.is_empty() { bar.open.to_f64() } else { last5.iter().sum::<f64>() / last5.len() as f64 };
                let width = band_width(reference, plan.prev_close, m - clock.open);
                let inside = |price: Price| {
                    let x = price.to_f64();
                    // A tick of tolerance: the band is rounded inwards to the tick grid.
                    reference - width - 1e-9 <= x && x <= reference + width + 1e-9
                };
                let last_minute = m + 1 == clock.close;
                let (symbol, at) = (&p.symbol, bar.start);
                assert!(inside(bar.open) && inside(bar.high.min(bar.close.max(bar.open))), "{symbol} {at} {bar:?}");
                assert!(inside(bar.low.max(bar.close.min(bar.open))), "{symbol} {at} {bar:?}");
                // The closing cross is not bound by the bands.
                assert!(last_minute || (inside(bar.close) && inside(bar.high) && inside(bar.low)), "{symbol} {at}");
                closes.push((m, bar.close));
                closes.retain(|(at, _)| at + 5 > m);
            }
        }
    }
}

#[test]
fn news_halts_come_on_some_runners_only_for_twenty_to_sixty_minutes_and_reopen_with_a_gap() {
    let u = Universe::generate(DEFAULT_SEED, DEFAULT_SYMBOLS);
    let (mut runners, mut with_news) = (0, 0);
    for on in weekdays() {
        let clock = DayClock::for_date(on);
        let session =
            clock.start + Duration::minutes(clock.open.into())..clock.start + Duration::minutes(clock.close.into());
        for p in &u.symbols {
            let windows = halt_windows(&u, p, on);
            let news: Vec<&HaltWindow> = windows.iter().filter(|w| &*w.halt.reason_code == NEWS_PENDING).collect();
            let runner = day_kind(&u, p, on) == DayKind::Runner;
            runners += usize::from(runner);
            assert!(news.len() <= usize::from(runner), "{} {on}: {news:?}", p.symbol);
            let Some(w) = news.first() else { continue };
            with_news += 1;
            assert!((20..=60).contains(&(w.end - w.start).num_minutes()), "{w:?}");
            assert!(session.contains(&w.start) && session.contains(&w.end), "{w:?}");
            assert_eq!(w.halt, SymbolHalt::news_pending(w.start), "since: the halt minute's start");
            let bars = DayGenerator::for_symbol(&u, p, on).remaining_bars();
            let before = bars.iter().rev().find(|b| b.start < w.start).unwrap();
            let reopening = bars.iter().find(|b| b.start >= w.end).unwrap();
            assert_eq!(reopening.start, w.end);
            let gap = reopening.open.to_f64() / before.close.to_f64() - 1.0;
            assert!(gap.abs() > 0.01, "{} {on}: reopens {gap:+.3} from the last trade", p.symbol);
        }
    }
    // About one runner in three.
    assert!(with_news * 5 > runners && with_news * 2 < runners, "{with_news} of {runners} runners");
}

#[test]
fn the_default_seed_halts_several_symbols_a_day() {
    let u = Universe::generate(DEFAULT_SEED, DEFAULT_SYMBOLS);
    let mut report = Vec::new();
    for on in weekdays() {
        let windows: Vec<HaltWindow> = halted(&u, on).into_iter().flat_map(|(_, w)| w).collect();
        let luld = windows.iter().filter(|w| &*w.halt.reason_code == LULD_PAUSE).count();
        report.push((on, luld, windows.len() - luld));
    }
    eprintln!("(date, LULD pauses, news halts): {report:?}");
    // Measured: 11–26 pauses and 7–15 news halts a day on these dates (the example
    // `halts_per_day` prints the distribution over 20 days).
    for (on, luld, news) in report {
        assert!(luld >= 8 && news >= 4 && luld + news >= 15, "{on}: {luld} pauses, {news} news halts");
    }
}

#[test]
fn halts_are_deterministic_and_follow_the_seed() {
    let (a, b) = (Universe::generate(DEFAULT_SEED, 200), Universe::generate(DEFAULT_SEED, 200));
    let mut other = a.clone();
    other.seed += 1;
    let all =
        |u: &Universe| -> Vec<Vec<HaltWindow>> { u.symbols.iter().map(|p| halt_windows(u, p, date(20))).collect() };
    let first = all(&a);
    assert!(first.iter().any(|w| !w.is_empty()));
    assert_eq!(first, all(&b));
    assert_ne!(first, all(&other));
}

#[test]
fn the_generator_reports_the_halt_of_the_minute_it_generated() {
    let u = Universe::generate(DEFAULT_SEED, DEFAULT_SYMBOLS);
    let (p, windows) = halted(&u, date(20)).into_iter().next().expect("a halt on the default seed");
    let mut generator = DayGenerator::for_symbol(&u, p, date(20));
    assert_eq!(generator.halt(), None, "before the first minute");
    let clock = DayClock::for_date(date(20));
    while let Some(minute) = generator.next_minute() {
        let start = clock.start + Duration::minutes(generator.minute() as i64 - 1);
        let expected = windows.iter().find(|w| w.start <= start && start < w.end).map(|w| &w.halt);
        assert_eq!(generator.halt(), expected, "{start}");
        assert_eq!(matches!(minute, Minute::Halted(_)), expected.is_some());
    }
}
