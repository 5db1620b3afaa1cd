//! Which part of a backtest's range must be downloaded before it runs (CONTRACT §4: "data comes
//! from stored bars, downloaded first from the data broker when missing").
//!
//! The unit is the trading day of the run's calendar. A day is covered when a bar of it is
//! stored, or when completed downloads span its part of the range: a day the data broker had
//! nothing for (a halt, a listing later in the range) is downloaded once, not before every run.
//! Any bar of a day covers it (a download interrupted mid-day is stored a day at a time, so a day
//! partly stored is an import of part of a day, not second-guessed) — except the last day of a
//! completed download that ended inside it: a download reaching past the market's present stops
//! there and records its range as ending there, so that day holds only the bars closed by then
//! and is downloaded again when a run needs it whole.

use crate::calendar::{ny_instant, MarketCalendar, NyDay};
use crate::market::Bar;
use crate::time::Timestamp;
use chrono::{Duration, NaiveDate};

/// The span of `[from, end)` to download: from the first uncovered trading day to the end of
/// the last one, clipped to the range (one span, since storing bars again is harmless and one
/// job is what an operator can follow). `None` when every trading day is covered.
///
/// `bars`: the stored bars of the range, oldest first; `downloaded`: the ranges of completed
/// downloads of the symbol and timeframe, in any order.
pub fn missing_span(
    bars: &[Bar],
    downloaded: &[(Timestamp, Timestamp)],
    calendar: MarketCalendar,
    from: Timestamp,
    end: Timestamp,
) -> Option<(Timestamp, Timestamp)> {
    if from >= end {
        return None;
    }
    let mut ny = NyDay::default();
    let mut stored: Vec<NaiveDate> = bars.iter().map(|b| ny.date_of(b.start)).collect();
    stored.dedup();
    let spans = merged(downloaded);
    // Days a completed download stopped inside (at the market's present, or at an end the
    // operator chose mid-day): their stored bars may be part of the day only.
    let cut: Vec<NaiveDate> = downloaded
        .iter()
        .map(|s| (ny.date_of(s.1), s.1))
        .filter(|(date, end)| ny_instant(*date, (0, 0)) != *end)
        .map(|(date, _)| date)
        .collect();
    let mut missing: Option<(Timestamp, Timestamp)> = None;
    let (mut date, last) = (ny.date_of(from), ny.date_of(end - Duration::milliseconds(1)));
    while date <= last {
        let part = (ny_instant(date, (0, 0)).max(from), ny_instant(date + Duration::days(1), (0, 0)).min(end));
        let whole = stored.binary_search(&date).is_ok() && !cut.contains(&date);
        let covered = whole || spans.iter().any(|s| s.0 <= part.0 && s.1 >= part.1);
        if part.0 < part.1 && calendar.is_trading_day(date) && !covered {
            missing = Some((missing.map_or(part.0, |m| m.0), part.1));
        }
        date += Duration::days(1);
    }
    missing
}

/// The union of ranges, as disjoint ranges in time order.
fn merged(ranges: &[(Timestamp, Timestamp)]) -> Vec<(Timestamp, Timestamp)> {
    let mut sorted: Vec<_> = ranges.iter().copied().filter(|r| r.0 < r.1).collect();
    sorted.sort();
    let mut out: Vec<(Timestamp, Timestamp)> = Vec::with_capacity(sorted.len());
    for r in sorted {
        match out.last_mut() {
            Some(last) if r.0 <= last.1 => last.1 = last.1.max(r.1),
            _ => out.push(r),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::market::Price;
    use crate::settings::MarketCalendarKind;
    use crate::time::parse_ts;

    fn ts(text: &str) -> Timestamp {
        parse_ts(text).expect("test timestamp")
    }

    fn bar(start: &str) -> Bar {
        let p = Price::from_cents(1000);
        Bar { start: ts(start), open: p, high: p, low: p, close: p, volume: 100 }
    }

    fn nyse() -> MarketCalendar {
        MarketCalendar::new(MarketCalendarKind::Nyse)
    }

    // Mon 2026-11-16 … Fri 2026-11-20 in New York (UTC−5): days start at 05:00Z.
    const FROM: &str = "2026-11-16T05:00:00Z";
    const END: &str = "2026-11-21T05:00:00Z";

    /// A download made at 10:00 on Friday stopped there: Friday's morning is stored, and a later
    /// run over Friday downloads the day again instead of running on the morning alone.
    #[test]
    fn a_day_a_download_stopped_inside_is_downloaded_again() {
        let morning: Vec<Bar> =
            vec![bar("2026-11-19T15:00:00Z"), bar("2026-11-20T14:30:00Z"), bar("2026-11-20T15:00:00Z")];
        let stopped_at_ten = [(ts("2026-11-19T05:00:00Z"), ts("2026-11-20T15:00:00Z"))];
        let from = ts("2026-11-19T05:00:00Z");
        assert_eq!(
            missing_span(&morning, &stopped_at_ten, nyse(), from, ts(END)),
            Some((ts("2026-11-20T05:00:00Z"), ts(END))),
            "Thursday is whole, Friday is not"
        );
        // A later download of the whole of Friday covers it.
        let whole = [stopped_at_ten[0], (ts("2026-11-20T05:00:00Z"), ts(END))];
        assert_eq!(missing_span(&morning, &whole, nyse(), from, ts(END)), None);
    }

    #[test]
    fn a_range_with_nothing_stored_is_missing_whole() {
        assert_eq!(missing_span(&[], &[], nyse(), ts(FROM), ts(END)), Some((ts(FROM), ts(END))));
    }

    #[test]
    fn a_range_stored_in_part_is_missing_from_the_first_empty_day_to_the_last() {
        // Monday and Thursday stored: Tuesday, Wednesday and Friday are not.
        let bars = [bar("2026-11-16T15:00:00Z"), bar("2026-11-16T15:01:00Z"), bar("2026-11-19T15:00:00Z")];
        assert_eq!(missing_span(&bars, &[], nyse(), ts(FROM), ts(END)), Some((ts("2026-11-17T05:00:00Z"), ts(END))));
        // Monday to Thursday stored, Friday not: only Friday.
        let bars = ["16", "17", "18", "19"].map(|d| bar(&format!("2026-11-{d}T15:00:00Z")));
        assert_eq!(missing_span(&bars, &[], nyse(), ts(FROM), ts(END)), Some((ts("2026-11-20T05:00:00Z"), ts(END))));
    }

    #[test]
    fn every_trading_day_stored_is_covered_and_weekends_are_not_asked_for() {
        let bars = ["16", "17", "18", "19", "20"].map(|d| bar(&format!("2026-11-{d}T15:00:00Z")));
        // To Monday the 23rd: Saturday and Sunday are not NYSE trading days.
        assert_eq!(missing_span(&bars, &[], nyse(), ts(FROM), ts("2026-11-23T05:00:00Z")), None);
        // On an always-open calendar they are.
        let always = MarketCalendar::new(MarketCalendarKind::AlwaysOpen);
        assert_eq!(
            missing_span(&bars, &[], always, ts(FROM), ts("2026-11-23T05:00:00Z")),
            Some((ts("2026-11-21T05:00:00Z"), ts("2026-11-23T05:00:00Z")))
        );
    }

    #[test]
    fn a_day_a_completed_download_found_empty_is_not_downloaded_again() {
        // Wednesday has no bars (a halt), but a completed download covered Tuesday–Thursday.
        let bars = ["16", "17", "19", "20"].map(|d| bar(&format!("2026-11-{d}T15:00:00Z")));
        let downloaded = [(ts("2026-11-17T05:00:00Z"), ts("2026-11-18T12:00:00Z"))];
        // The download ended mid-Wednesday: Wednesday is still missing.
        assert_eq!(
            missing_span(&bars, &downloaded, nyse(), ts(FROM), ts(END)),
            Some((ts("2026-11-18T05:00:00Z"), ts("2026-11-19T05:00:00Z")))
        );
        // A second download, overlapping the first, covers the rest of it.
        let downloaded = [(ts("2026-11-18T10:00:00Z"), ts("2026-11-19T05:00:00Z")), downloaded[0]];
        assert_eq!(missing_span(&bars, &downloaded, nyse(), ts(FROM), ts(END)), None);
    }

    #[test]
    fn a_range_starting_mid_day_asks_only_for_its_own_part() {
        let from = ts("2026-11-16T15:00:00Z");
        assert_eq!(
            missing_span(&[], &[], nyse(), from, ts("2026-11-16T20:00:00Z")),
            Some((from, ts("2026-11-16T20:00:00Z")))
        );
        // A download of exactly that part covers it.
        let downloaded = [(from, ts("2026-11-16T20:00:00Z"))];
        assert_eq!(missing_span(&[], &downloaded, nyse(), from, ts("2026-11-16T20:00:00Z")), None);
        assert_eq!(missing_span(&[], &[], nyse(), from, from), None);
    }
}
