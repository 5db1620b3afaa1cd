//! The trading mode every response reports in `meta.mode` and `X-Trading-Mode`.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// `PAPER` trades simulated money, `DEMO` runs the simulated market faster than real time,
/// `LIVE` routes real orders.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "UPPERCASE")]
pub enum TradingMode {
    #[default]
    Paper,
    Live,
    Demo,
}

impl TradingMode {
    pub fn as_str(self) -> &'static str {
        match self {
            TradingMode::Paper => "PAPER",
            TradingMode::Live => "LIVE",
            TradingMode::Demo => "DEMO",
        }
    }
}

impl fmt::Display for TradingMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for TradingMode {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_uppercase().as_str() {
            "PAPER" => Ok(TradingMode::Paper),
            "LIVE" => Ok(TradingMode::Live),
            "DEMO" => Ok(TradingMode::Demo),
            _ => Err(format!("must be one of PAPER, LIVE, DEMO (got {s:?})")),
        }
    }
}
