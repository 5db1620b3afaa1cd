//! Ticker symbols: 1–10 characters of `A-Z 0-9 . -`, case-insensitive on input, uppercase on
//! output (CONTRACT §1). Parsed once at the edge; deeper code never re-checks them.

use serde::{Deserialize, Deserializer, Serialize};
use std::fmt;

// Held inline (no allocation): a symbol is cloned onto every bar event and looked up in every
// per-symbol map, millions of times a second in a backtest. (A plain comment: a doc comment
// would become the schema's description in the OpenAPI document.)
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "openapi", schema(value_type = String, example = "ABCD", pattern = "^[A-Za-z0-9.-]{1,10}$"))]
pub struct Symbol(Inline);

/// Up to [`Symbol::MAX_LEN`] ASCII bytes, zero-padded to 15, then the length. The bytes are
/// never zero, so comparing the padded arrays orders symbols exactly as their strings (the
/// length decides nothing: equal bytes mean equal lengths); aligned, they are compared as one
/// big-endian integer loaded at once (map lookups by symbol compare on every bar).
#[derive(Clone, PartialEq, Eq, Hash)]
#[repr(align(16))]
struct Inline {
    bytes: [u8; 16],
}

impl Inline {
    const LEN_AT: usize = 15;

    fn key(&self) -> u128 {
        u128::from_be_bytes(self.bytes)
    }

    fn len(&self) -> usize {
        usize::from(self.bytes[Self::LEN_AT])
    }
}

impl Ord for Inline {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.key().cmp(&other.key())
    }
}

impl PartialOrd for Inline {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Symbol {
    pub const MAX_LEN: usize = 10;

    pub fn parse(raw: &str) -> Result<Self, String> {
        let upper = raw.trim().to_ascii_uppercase();
        if upper.is_empty() || upper.len() > Self::MAX_LEN {
            return Err("must be 1 to 10 characters".into());
        }
        if !upper.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '.' || c == '-') {
            return Err("may only contain A-Z, 0-9, '.' and '-'".into());
        }
        let mut bytes = [0; 16];
        bytes[..upper.len()].copy_from_slice(upper.as_bytes());
        bytes[Inline::LEN_AT] = upper.len() as u8;
        Ok(Symbol(Inline { bytes }))
    }

    pub fn as_str(&self) -> &str {
        std::str::from_utf8(&self.0.bytes[..self.0.len()]).expect("symbols are ASCII")
    }
}

impl fmt::Display for Symbol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Debug for Symbol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl Serialize for Symbol {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Symbol {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = String::deserialize(d)?;
        Symbol::parse(&raw).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_and_uppercases() {
        for (raw, want) in [("abcd", "ABCD"), ("BRK.B", "BRK.B"), ("x-1", "X-1"), (" spy ", "SPY")] {
            assert_eq!(Symbol::parse(raw).unwrap().as_str(), want);
        }
    }

    #[test]
    fn refuses_bad_symbols() {
        for raw in ["", "ABCDEFGHIJK", "AB CD", "ÄPFEL", "A$", "😀"] {
            assert!(Symbol::parse(raw).is_err(), "{raw:?} should be refused");
        }
    }

    /// Maps keyed by symbol list them alphabetically, as the strings sort.
    #[test]
    fn orders_as_strings() {
        let mut raw = ["ABC", "AB", "A", "B", "AB.C", "AB-C", "ZZZZZZZZZZ", "A1", "9", "ABCDEFGHIJ"];
        let mut symbols: Vec<Symbol> = raw.iter().map(|r| Symbol::parse(r).unwrap()).collect();
        raw.sort();
        symbols.sort();
        assert_eq!(symbols.iter().map(Symbol::as_str).collect::<Vec<_>>(), raw);
        assert_eq!(serde_json::to_string(&symbols[0]).unwrap(), "\"9\"");
        assert_eq!(format!("{:?}", symbols[0]), "\"9\"");
    }
}
