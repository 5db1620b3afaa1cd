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
    fn epoch_ms_round_trips() {
        let ts = parse_ts("2026-11-21T14:30:05.123Z").unwrap();
        assert_eq!(from_epoch_ms(to_epoch_ms(&ts)), ts);
    }
}
