//! When in the day shares trade: the day's phases in New York time (overnight, pre-market,
//! regular session, after-hours, overnight) and the U-shaped profile of the regular session.
//! The same profile gives the radar its expected volume by time of day (time-of-day RVol).

use chrono::{Duration, NaiveDate, NaiveTime, TimeZone};
use chrono_tz::America::New_York;
use std::sync::OnceLock;
use tradeops_core::Timestamp;

/// Regular-session minutes (09:30–16:00).
pub const REGULAR_MINUTES: u32 = 390;

/// Where one New York calendar date's phases start, as minute indices from its midnight.
/// A date has 1380, 1440 or 1500 minutes (daylight saving changes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DayClock {
    pub date: NaiveDate,
    /// 00:00 New York, as UTC.
    pub start: Timestamp,
    pub minutes: u32,
    /// 04:00, 09:30, 16:00, 20:00 New York.
    pub pre_open: u32,
    pub open: u32,
    pub close: u32,
    pub after_close: u32,
}

fn ny(date: NaiveDate, h: u32, m: u32) -> Timestamp {
    let local = date.and_time(NaiveTime::from_hms_opt(h, m, 0).expect("valid time"));
    New_York.from_local_datetime(&local).earliest().expect("midnight and session times exist every day").to_utc()
}

impl DayClock {
    pub fn for_date(date: NaiveDate) -> DayClock {
        let start = ny(date, 0, 0);
        let end = ny(date + Duration::days(1), 0, 0);
        let idx = |t: Timestamp| ((t - start).num_minutes()) as u32;
        DayClock {
            date,
            start,
            minutes: idx(end),
            pre_open: idx(ny(date, 4, 0)),
            open: idx(ny(date, 9, 30)),
            close: idx(ny(date, 16, 0)),
            after_close: idx(ny(date, 20, 0)),
        }
    }

    /// Phase boundaries as `[start, end)` minute ranges, in phase order.
    pub fn phases(&self) -> [(u32, u32); 5] {
        [
            (0, self.pre_open),
            (self.pre_open, self.open),
            (self.open, self.close),
            (self.close, self.after_close),
            (self.after_close, self.minutes),
        ]
    }

    /// Which phase a minute index is in (0..5).
    pub fn phase_of(&self, minute: u32) -> usize {
        self.phases().iter().position(|(a, b)| minute >= *a && minute < *b).unwrap_or(4)
    }
}

/// Share of a day's volume in each phase.
pub type PhaseShares = [f64; 5];

/// An ordinary day: almost all volume in the regular session.
pub const NORMAL_SHARES: PhaseShares = [0.005, 0.06, 0.88, 0.05, 0.005];
/// A news day: heavy pre-market trading after the news.
pub const RUNNER_SHARES: PhaseShares = [0.0025, 0.25, 0.70, 0.045, 0.0025];

/// Weight of regular-session minute `i` (0..390): a spike at the open, a trough at midday and
/// a rise into the close. The weights average 1.
pub fn regular_weight(i: u32) -> f64 {
    table().0[i.min(REGULAR_MINUTES - 1) as usize]
}

/// Sum of the weights of regular minutes `i..390`.
pub fn regular_remaining(i: u32) -> f64 {
    table().1[i.min(REGULAR_MINUTES) as usize]
}

fn table() -> &'static (Vec<f64>, Vec<f64>) {
    static TABLE: OnceLock<(Vec<f64>, Vec<f64>)> = OnceLock::new();
    TABLE.get_or_init(|| {
        let raw: Vec<f64> = (0..REGULAR_MINUTES)
            .map(|i| {
                let u = (i as f64 + 0.5) / REGULAR_MINUTES as f64;
                0.55 + 2.6 * (-u / 0.035).exp() + 0.9 * (-u / 0.2).exp() + 1.1 * (-(1.0 - u) / 0.04).exp()
            })
            .collect();
        let mean = raw.iter().sum::<f64>() / raw.len() as f64;
        let weights: Vec<f64> = raw.iter().map(|w| w / mean).collect();
        let mut remaining = vec![0.0; REGULAR_MINUTES as usize + 1];
        for i in (0..REGULAR_MINUTES as usize).rev() {
            remaining[i] = remaining[i + 1] + weights[i];
        }
        (weights, remaining)
    })
}

/// Expected fraction of an ordinary day's volume traded before minute `minute` of the day
/// (exclusive): the denominator of time-of-day adjusted relative volume.
pub fn expected_cum_fraction(clock: &DayClock, minute: u32) -> f64 {
    let mut done = 0.0;
    for (phase, (a, b)) in clock.phases().iter().enumerate() {
        let (a, b) = (*a, *b);
        if minute >= b {
            done += NORMAL_SHARES[phase];
        } else if minute > a {
            let within = if phase == 2 {
                1.0 - regular_remaining(minute - a) / REGULAR_MINUTES as f64
            } else {
                (minute - a) as f64 / (b - a).max(1) as f64
            };
            done += NORMAL_SHARES[phase] * within;
        }
    }
    done
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clock_handles_daylight_saving() {
        let normal = DayClock::for_date(NaiveDate::from_ymd_opt(2026, 11, 20).unwrap());
        assert_eq!((normal.minutes, normal.pre_open, normal.open, normal.close), (1440, 240, 570, 960));
        let spring = DayClock::for_date(NaiveDate::from_ymd_opt(2026, 3, 8).unwrap());
        assert_eq!((spring.minutes, spring.pre_open, spring.open), (1380, 180, 510));
        let fall = DayClock::for_date(NaiveDate::from_ymd_opt(2026, 11, 1).unwrap());
        assert_eq!((fall.minutes, fall.open), (1500, 630));
        assert_eq!(fall.close - fall.open, REGULAR_MINUTES);
    }

    #[test]
    fn regular_profile_is_u_shaped() {
        let open = regular_weight(0);
        let midday = regular_weight(195);
        let close = regular_weight(389);
        assert!(open > 3.0 * midday && close > 1.5 * midday, "{open} {midday} {close}");
        assert!((regular_remaining(0) - REGULAR_MINUTES as f64).abs() < 1e-9);
    }

    #[test]
    fn expected_fraction_grows_to_one() {
        let clock = DayClock::for_date(NaiveDate::from_ymd_opt(2026, 11, 20).unwrap());
        assert_eq!(expected_cum_fraction(&clock, 0), 0.0);
        assert!((expected_cum_fraction(&clock, clock.minutes) - 1.0).abs() < 1e-9);
        let mut last = 0.0;
        for m in 0..=clock.minutes {
            let f = expected_cum_fraction(&clock, m);
            assert!(f >= last - 1e-12);
            last = f;
        }
        assert!((expected_cum_fraction(&clock, clock.open) - 0.065).abs() < 1e-9);
    }
}
