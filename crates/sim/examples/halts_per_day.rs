//! Trading halts per day on the service's default simulated market (seed 20261121, 500
//! symbols, `config/default.toml`): volatility pauses (`LUDP`) and news halts (`T1`) across the
//! universe over 20 weekdays, with the median and range per day.
//! `cargo run --release -p tradeops-sim --example halts_per_day [days] [seed] [symbols]`

use chrono::{Datelike, Duration, NaiveDate, Weekday};
use tradeops_core::market::{LULD_PAUSE, NEWS_PENDING};
use tradeops_sim::{day_kind, halt_windows, DayKind, Universe};

fn main() {
    let args: Vec<u64> = std::env::args().skip(1).filter_map(|a| a.parse().ok()).collect();
    let days = args.first().copied().unwrap_or(20) as usize;
    let seed = args.get(1).copied().unwrap_or(20_261_121);
    let symbols = args.get(2).copied().unwrap_or(500) as usize;
    let universe = Universe::generate(seed, symbols);
    let weekdays = std::iter::successors(NaiveDate::from_ymd_opt(2026, 11, 2), |d| Some(*d + Duration::days(1)))
        .filter(|d| !matches!(d.weekday(), Weekday::Sat | Weekday::Sun))
        .take(days);
    let mut totals = Vec::new();
    let (mut luld, mut news, mut on_runners) = (0, 0, 0);
    for date in weekdays {
        let (mut day_luld, mut day_news, mut symbols_halted) = (0, 0, 0);
        for p in &universe.symbols {
            let windows = halt_windows(&universe, p, date);
            day_luld += windows.iter().filter(|w| &*w.halt.reason_code == LULD_PAUSE).count();
            day_news += windows.iter().filter(|w| &*w.halt.reason_code == NEWS_PENDING).count();
            symbols_halted += usize::from(!windows.is_empty());
            if day_kind(&universe, p, date) == DayKind::Runner {
                on_runners += windows.len();
            }
        }
        println!("{date}: {day_luld} LULD pauses, {day_news} news halts, {symbols_halted} symbols halted");
        totals.push(day_luld + day_news);
        (luld, news) = (luld + day_luld, news + day_news);
    }
    totals.sort_unstable();
    let all = (luld + news).max(1);
    println!(
        "halts per day over {} days: median {}, range {}–{}; LULD {} ({:.0} %), T1 {} ({:.0} %), on runners {:.0} %",
        totals.len(),
        totals[totals.len() / 2],
        totals[0],
        totals[totals.len() - 1],
        luld,
        100.0 * luld as f64 / all as f64,
        news,
        100.0 * news as f64 / all as f64,
        100.0 * on_runners as f64 / all as f64,
    );
}
