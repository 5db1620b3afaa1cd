//! Timestamps as the contract writes them: RFC 3339, UTC, `Z`, millisecond precision.
//! Requests may use any RFC 3339 offset; they are normalised to UTC.

use chrono::{DateTime, SecondsFormat, TimeZone, Utc};

/// A point in time, always UTC.
pub type Timestamp = DateTime<Utc>;

/// `2026-11-21T14:30:05.123Z`.
pub fn format_ts(ts: &Timestamp) -> String {
    ts.to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// Parses any RFC 3339 timestamp and normalises it to UTC.
pub fn parse_ts(text: &str) -> Result<Timestamp, String> {
    DateTime::parse_from_rfc3339(text)
        .map(|t| t.with_timezone(&Utc))
        .map_err(|e| format!("not an RFC 3339 timestamp ({e})"))
}

/// Milliseconds since the Unix epoch: how timestamps are stored.
pub fn to_epoch_ms(ts: &Timestamp) -> i64 {
    ts.timestamp_millis()
}

/// Inverse of [`to_epoch_ms`]; out-of-range values clamp to the epoch rather than panic.
pub fn from_epoch_ms(ms: i64) -> Timestamp {
    Utc.timestamp_millis_opt(ms).single().unwrap_or_default()
}

/// Appends `at` in UTC as `YYYYMMDD`, the separator if any, `HHMMSS` (ids made of a time), digit by
/// digit: ids are made for every order of a backtest, and chrono's format parser would be most
/// of their cost.
pub fn push_compact_utc(out: &mut String, at: &Timestamp, separator: Option<char>) {
    use chrono::{Datelike, Timelike};
    // The UTC fields as stored (`DateTime`'s own accessors convert to local time on each call).
    let (date, time) = (at.naive_utc().date(), at.naive_utc().time());
    let year = u64::try_from(date.year()).unwrap_or(0);
    // `YYYYMMDD` (a year past 9999 takes its digits) and `HHMMSS`, written backwards into one
    // buffer around the separator, then appended at once.
    let mut buf = [0u8; 64];
    let mut at = buf.len();
    for value in [time.second(), time.minute(), time.hour()] {
        at = write_digits(&mut buf, at, value.into(), 2);
    }
    if let Some(separator) = separator {
        let mut bytes = [0u8; 4];
        let bytes = separator.encode_utf8(&mut bytes).as_bytes();
        at -= bytes.len();
        buf[at..at + bytes.len()].copy_from_slice(bytes);
    }
    for (value, width) in [(date.day().into(), 2), (date.month().into(), 2), (year, 4)] {
        at = write_digits(&mut buf, at, value, width);
    }
    push_ascii(out, &buf[at..]);
}

/// Appends `value` in decimal, zero-padded to at least `width` digits.
pub fn push_digits(out: &mut String, value: u64, width: usize) {
    let mut buf = [0u8; 20];
    for _ in buf.len()..width {
        out.push('0');
    }
    let start = write_digits(&mut buf, 20, value, width.min(20));
    push_ascii(out, &buf[start..]);
}

/// Writes `value` in decimal, zero-padded to at least `width` digits, to end just before `end`
/// in `buf`; returns where it starts. The one digit writer of ids, sentences and prices (the
/// format machinery would be most of their cost on every order of a backtest).
pub(crate) fn write_digits(buf: &mut [u8], end: usize, value: u64, width: usize) -> usize {
    let (mut rest, mut at) = (value, end);
    loop {
        at -= 1;
        buf[at] = b'0' + (rest % 10) as u8;
        rest /= 10;
        if rest == 0 && end - at >= width {
            return at;
        }
    }
}

/// Appends ASCII bytes (digits) as text, in one copy.
pub(crate) fn push_ascii(out: &mut String, bytes: &[u8]) {
    out.push_str(std::str::from_utf8(bytes).expect("ASCII digits"));
}

/// Seconds since the epoch of a stream of instants, the date's calendar arithmetic done once
/// per UTC date: chrono's `timestamp` decodes the date (year, ordinal, leap years) on every call,
/// and a backtest asks for millions of bars' instants that share a date a thousand at a time.
/// The same value as `Timestamp::timestamp`.
#[derive(Clone, Copy, Debug, Default)]
pub struct EpochSeconds {
    /// The last date seen and its midnight in seconds since the epoch.
    day: Option<(chrono::NaiveDate, i64)>,
}

impl EpochSeconds {
    #[inline]
    pub fn of(&mut self, at: &Timestamp) -> i64 {
        use chrono::Timelike;
        let naive = at.naive_utc();
        let midnight = match self.day {
            Some((date, midnight)) if date == naive.date() => midnight,
            _ => self.move_to(naive.date()),
        };
        midnight + i64::from(naive.time().num_seconds_from_midnight())
    }

    #[cold]
    #[inline(never)]
    fn move_to(&mut self, date: chrono::NaiveDate) -> i64 {
        let midnight = date.and_time(chrono::NaiveTime::MIN).and_utc().timestamp();
        self.day = Some((date, midnight));
        midnight
    }
}

/// `at` plus `seconds` (at most a day): within the same UTC date (a minute bar's end, but for
/// the day's last minute) only the time of day moves, without chrono's date arithmetic.
#[inline]
pub fn plus_seconds(at: &Timestamp, seconds: u32) -> Timestamp {
    use chrono::Timelike;
    let naive = at.naive_utc();
    let time = naive.time();
    let within = time.num_seconds_from_midnight() + seconds;
    // A leap second (nanoseconds past 10⁹) takes chrono's path, which knows its rules.
    let moved = (within < 86_400 && time.nanosecond() < 1_000_000_000)
        .then(|| chrono::NaiveTime::from_num_seconds_from_midnight_opt(within, time.nanosecond()))
        .flatten();
    match moved {
        Some(moved) => naive.date().and_time(moved).and_utc(),
        None => *at + chrono::TimeDelta::seconds(seconds.into()),
    }
}

/// Serde adapter writing a [`Timestamp`] in the contract's format.
pub mod serde_ts {
    use super::*;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(ts: &Timestamp, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format_ts(ts))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Timestamp, D::Error> {
        let text = String::deserialize(d)?;
        parse_ts(&text).map_err(serde::de::Error::custom)
    }
}

/// Serde adapter for an optional [`Timestamp`] (`null` when absent).
pub mod serde_ts_opt {
    use super::*;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(ts: &Option<Timestamp>, s: S) -> Result<S::Ok, S::Error> {
        match ts {
            Some(ts) => s.serialize_str(&format_ts(ts)),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Timestamp>, D::Error> {
        Option::<String>::deserialize(d)?.map(|text| parse_ts(&text).map_err(serde::de::Error::custom)).transpose()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_with_millis_and_z() {
        let ts = parse_ts("2026-11-21T09:30:05.1234-05:00").unwrap();
        assert_eq!(format_ts(&ts), "2026-11-21T14:30:05.123Z");
    }

    #[test]
    fn rejects_non_rfc3339() {
        for bad in ["2026-11-21", "yesterday", "2026-13-01T00:00:00Z", "", "2026-11-21T14:30:05"] {
            assert!(parse_ts(bad).is_err(), "{bad} should be refused");
        }
    }

    #[test]
    fn compact_times_and_digits_match_chrono_and_std_formatting() {
        for text in ["2026-11-21T09:03:05.123Z", "0999-01-02T23:59:59Z", "2026-12-31T00:00:00Z", "0000-03-01T00:00:09Z"]
        {
            let ts = parse_ts(text).unwrap();
            let mut out = String::from("x-");
            push_compact_utc(&mut out, &ts, Some('T'));
            out.push('-');
            push_compact_utc(&mut out, &ts, None);
            assert_eq!(out, format!("x-{}-{}", ts.format("%Y%m%dT%H%M%S"), ts.format("%Y%m%d%H%M%S")));
        }
        let mut out = String::new();
        for (value, width) in [(7, 2), (0, 1), (12_345, 2), (u64::MAX, 1), (42, 6), (0, 3), (42, 22), (7, 0)] {
            push_digits(&mut out, value, width);
            out.push(' ');
        }
        assert_eq!(out, format!("07 0 12345 {} 000042 000 {:022} 7 ", u64::MAX, 42));
    }

    proptest::proptest! {
        /// Instants in time order, as a run asks for them (dates change now and then, leap
        /// seconds included), and a jump back to an earlier date.
        #[test]
        fn epoch_seconds_and_plus_seconds_match_chrono(
            start in -2_000_000_000i64..4_000_000_000,
            steps in proptest::collection::vec((0i64..200_000, 0u32..2_000_000_000, 0u32..=86_400), 1..40),
        ) {
            let mut seconds = EpochSeconds::default();
            let mut at = start;
            for (step, nanos, plus) in steps {
                at += step;
                // Past 10⁹ nanoseconds only at a minute's last second (a leap second).
                let Some(ts) = chrono::DateTime::from_timestamp(at, nanos) else { continue };
                proptest::prop_assert_eq!(seconds.of(&ts), ts.timestamp());
                proptest::prop_assert_eq!(plus_seconds(&ts, plus), ts + chrono::TimeDelta::seconds(plus.into()));
            }
            let back = chrono::DateTime::from_timestamp(start - 86_400 * 3, 0).expect("in range");
            proptest::prop_assert_eq!(seconds.of(&back), back.timestamp());
        }
    }

    #[test]
    fn epoch_ms_round_trips() {
        let ts = parse_ts("2026-11-21T14:30:05.123Z").unwrap();
        assert_eq!(from_epoch_ms(to_epoch_ms(&ts)), ts);
    }
}
