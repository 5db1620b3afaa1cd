//! Ticker symbols: 1–10 characters of `A-Z 0-9 . -`, case-insensitive on input, uppercase on
//! output (CONTRACT §1). Parsed once at the edge; deeper code never re-checks them.

use serde::{Deserialize, Deserializer, Serialize};
use std::fmt;

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, utoipa::ToSchema)]
#[schema(value_type = String, example = "ABCD")]
pub struct Symbol(String);

impl Symbol {
    pub fn parse(raw: &str) -> Result<Self, String> {
        let upper = raw.trim().to_ascii_uppercase();
        if upper.is_empty() || upper.len() > 10 {
            return Err("must be 1 to 10 characters".into());
        }
        if !upper.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '.' || c == '-') {
            return Err("may only contain A-Z, 0-9, '.' and '-'".into());
        }
        Ok(Symbol(upper))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Symbol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
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
}
