use super::*;
use proptest::prelude::*;
use tradeops_core::Timestamp;

fn date(y: i32, m: u32, d: u32) -> NaiveDate {
    NaiveDate::from_ymd_opt(y, m, d).unwrap()
}

fn day(u: &Universe, i: usize, on: NaiveDate) -> Vec<Bar> {
    DayGenerator::for_symbol(u, &u.symbols[i], on).remaining_bars()
}

#[test]
fn same_seed_symbol_and_date_give_identical_bars_and_other_seeds_differ() {
    let (a, b, c) = (Universe::generate(7, 300), Universe::generate(7, 300), Universe::generate(8, 300));
    let on = date(2026, 11, 20);
    assert_eq!(day(&a, 5, on), day(&b, 5, on));
    let mut other = a.clone();
    other.seed = 8;
    assert_ne!(day(&a, 5, on), day(&other, 5, on), "same symbol, other seed");
    assert_ne!(a.symbols[5].symbol, c.symbols[5].symbol);
}

/// The regular-session bars of a day, by session minute (0 is 9:30), skipping halted minutes.
fn session(u: &Universe, i: usize, on: NaiveDate) -> Vec<(u32, Bar)> {
    let clock = DayClock::for_date(on);
    let minute = |b: &Bar| ((b.start - clock.start).num_minutes() as u32).wrapping_sub(clock.open);
    day(u, i, on).into_iter().map(|b| (minute(&b), b)).filter(|(m, _)| *m < REGULAR_MINUTES).collect()
}

/// The bar of the minute starting at `at`, if it traded.
fn bar_at(bars: &[Bar], at: Timestamp) -> Option<&Bar> {
    bars.iter().find(|b| b.start == at)
}

#[test]
fn stepping_live_across_symbols_equals_history() {
    let u = Universe::generate(11, 50);
    let on = date(2026, 11, 20);
    let history: Vec<Vec<Bar>> = (0..50).map(|i| day(&u, i, on)).collect();
    let mut live: Vec<DayGenerator> = u.symbols.iter().map(|p| DayGenerator::for_symbol(&u, p, on)).collect();
    let mut stepped: Vec<Vec<Bar>> = vec![Vec::new(); 50];
    for _ in 0..DayClock::for_date(on).minutes {
        for (g, bars) in live.iter_mut().zip(stepped.iter_mut()) {
            if let Minute::Traded(bar) = g.next_minute().expect("the day has this minute") {
                bars.push(bar);
            }
        }
    }
    assert_eq!(stepped, history);
}

#[test]
fn a_day_covers_its_new_york_date_minute_by_minute() {
    let u = Universe::generate(1, 10);
    for on in [date(2026, 11, 20), date(2026, 3, 8), date(2026, 11, 1)] {
        let clock = DayClock::for_date(on);
        let mut generator = DayGenerator::for_symbol(&u, &u.symbols[0], on);
        let minutes: Vec<Minute> = std::iter::from_fn(|| generator.next_minute()).collect();
        assert_eq!(minutes.len() as u32, clock.minutes);
        let bars = day(&u, 0, on);
        assert_eq!(bars[0].start, clock.start);
        // A minute apart but across a halt, whose minutes have no bar.
        let halted = minutes.iter().filter(|m| matches!(m, Minute::Halted(_))).count();
        assert_eq!(bars.len() + halted, minutes.len());
        assert!(bars.windows(2).all(|w| (w[1].start - w[0].start).num_seconds() >= 60));
    }
}

#[test]
fn days_join_up_and_close_at_the_plan() {
    let u = Universe::generate(2, 200);
    for i in 0..200 {
        let p = &u.symbols[i];
        let (d1, d2) = (date(2026, 11, 19), date(2026, 11, 20));
        let first = day(&u, i, d1);
        let second = day(&u, i, d2);
        assert_eq!(first.last().unwrap().close, second[0].open, "{}", p.symbol);
        let plan = day_plan(&u, p, d2);
        let clock = plan.clock;
        let minute = |m: u32| bar_at(&second, clock.start + Duration::minutes(m.into())).expect("traded");
        assert_eq!(minute(clock.close - 1).close, Price::from_f64_tick(plan.close), "regular close");
        assert_eq!(minute(clock.open - 1).close, Price::from_f64_tick(plan.open), "open");
        assert_eq!(second.iter().map(|b| b.volume).sum::<u64>(), daily_volume(&u, p, d2));
        let daily = daily_bar(&u, p, d2);
        assert_eq!(daily.close, Price::from_f64_tick(plan.close));
        assert_eq!(daily.volume, plan.volume);
    }
}

#[test]
fn runners_every_day_gap_up_on_heavy_volume() {
    let u = Universe::generate(20261121, 500);
    let mut start = date(2026, 1, 1);
    for _ in 0..120 {
        let runners: Vec<_> = u.symbols.iter().filter(|p| day_kind(&u, p, start) == DayKind::Runner).collect();
        // The designated runner and one per news story (two stories may land on one name).
        assert!((1..=NEWS_RUNNERS as usize + 1).contains(&runners.len()), "{start}: {} runners", runners.len());
        for p in runners {
            let plan = day_plan(&u, p, start);
            let gap = plan.open / plan.prev_close - 1.0;
            assert!(gap >= 0.095, "{} {start} gap {gap}", p.symbol);
            let rvol = plan.volume as f64 / p.avg_volume as f64;
            assert!(rvol >= 11.9, "{} {start} rvol {rvol}", p.symbol);
            let hod = session(&u, p.index, start).iter().map(|(_, b)| b.high).max().unwrap();
            assert!(hod.to_f64() > plan.open * 1.05, "{} squeezes above the open", p.symbol);
        }
        start = start.succ_opt().unwrap();
    }
}

#[test]
fn volume_is_u_shaped_over_the_regular_session() {
    let u = Universe::generate(5, 400);
    let on = date(2026, 11, 18);
    let (mut first, mut mid, mut last) = (0u64, 0u64, 0u64);
    for i in 0..400 {
        if day_kind(&u, &u.symbols[i], on) == DayKind::Runner {
            continue;
        }
        let volume = |from: u32| -> u64 {
            session(&u, i, on).iter().filter(|(m, _)| (from..from + 30).contains(m)).map(|(_, b)| b.volume).sum()
        };
        first += volume(0);
        mid += volume(180);
        last += volume(360);
    }
    assert!(first > 2 * mid && last > mid, "first {first} mid {mid} last {last}");
}

#[test]
fn volatility_clusters() {
    // |returns| are autocorrelated when volatility clusters.
    let u = Universe::generate(9, 200);
    let on = date(2026, 11, 18);
    let (mut num, mut den) = (0.0, 0.0);
    for i in 0..200 {
        let bars: Vec<Bar> = session(&u, i, on).into_iter().map(|(_, b)| b).collect();
        let r: Vec<f64> = bars.windows(2).map(|w| (w[1].close.to_f64() / w[0].close.to_f64()).ln().abs()).collect();
        let mean = r.iter().sum::<f64>() / r.len() as f64;
        num += r.windows(2).map(|w| (w[0] - mean) * (w[1] - mean)).sum::<f64>();
        den += r.iter().map(|x| (x - mean).powi(2)).sum::<f64>();
    }
    assert!(num / den > 0.05, "lag-1 autocorrelation of |r| = {}", num / den);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Any seed, symbol and date: prices positive, OHLC consistent, open = previous close but
    /// after a halt (the reopening may gap).
    #[test]
    fn bars_are_consistent(seed in any::<u64>(), index in 0usize..120, days in 0i64..4000) {
        let u = Universe::generate(seed, 120);
        let on = date(2016, 1, 1) + Duration::days(days);
        let bars = day(&u, index, on);
        for w in bars.windows(2).filter(|w| (w[1].start - w[0].start).num_seconds() == 60) {
            prop_assert_eq!(w[1].open, w[0].close);
        }
        for b in &bars {
            prop_assert!(b.is_consistent(), "{:?}", b);
        }
    }
}
