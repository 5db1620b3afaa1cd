use super::*;
use proptest::prelude::*;

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

#[test]
fn stepping_live_across_symbols_equals_history() {
    let u = Universe::generate(11, 50);
    let on = date(2026, 11, 20);
    let history: Vec<Vec<Bar>> = (0..50).map(|i| day(&u, i, on)).collect();
    let mut live: Vec<DayGenerator> = u.symbols.iter().map(|p| DayGenerator::for_symbol(&u, p, on)).collect();
    let minutes = history[0].len();
    for minute in 0..minutes {
        for (g, bars) in live.iter_mut().zip(&history) {
            assert_eq!(g.next_bar().as_ref(), Some(&bars[minute]));
        }
    }
}

#[test]
fn a_day_covers_its_new_york_date_minute_by_minute() {
    let u = Universe::generate(1, 10);
    for on in [date(2026, 11, 20), date(2026, 3, 8), date(2026, 11, 1)] {
        let bars = day(&u, 0, on);
        let clock = DayClock::for_date(on);
        assert_eq!(bars.len() as u32, clock.minutes);
        assert_eq!(bars[0].start, clock.start);
        assert!(bars.windows(2).all(|w| (w[1].start - w[0].start).num_seconds() == 60));
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
        assert_eq!(second[clock.close as usize - 1].close, Price::from_f64_tick(plan.close), "regular close");
        assert_eq!(second[clock.open as usize - 1].close, Price::from_f64_tick(plan.open), "open");
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
            let bars = day(&u, p.index, start);
            let hod = bars[plan.clock.open as usize..plan.clock.close as usize].iter().map(|b| b.high).max().unwrap();
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
        let bars = day(&u, i, on);
        let open = DayClock::for_date(on).open as usize;
        first += bars[open..open + 30].iter().map(|b| b.volume).sum::<u64>();
        mid += bars[open + 180..open + 210].iter().map(|b| b.volume).sum::<u64>();
        last += bars[open + 360..open + 390].iter().map(|b| b.volume).sum::<u64>();
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
        let bars = day(&u, i, on);
        let open = DayClock::for_date(on).open as usize;
        let r: Vec<f64> =
            bars[open..open + 390].windows(2).map(|w| (w[1].close.to_f64() / w[0].close.to_f64()).ln().abs()).collect();
        let mean = r.iter().sum::<f64>() / r.len() as f64;
        num += r.windows(2).map(|w| (w[0] - mean) * (w[1] - mean)).sum::<f64>();
        den += r.iter().map(|x| (x - mean).powi(2)).sum::<f64>();
    }
    assert!(num / den > 0.05, "lag-1 autocorrelation of |r| = {}", num / den);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Any seed, symbol and date: prices positive, OHLC consistent, open = previous close.
    #[test]
    fn bars_are_consistent(seed in any::<u64>(), index in 0usize..120, days in 0i64..4000) {
        let u = Universe::generate(seed, 120);
        let on = date(2016, 1, 1) + Duration::days(days);
        let bars = day(&u, index, on);
        for w in bars.windows(2) {
            prop_assert_eq!(w[1].open, w[0].close);
        }
        for b in &bars {
            prop_assert!(b.is_consistent(), "{:?}", b);
        }
    }
}
