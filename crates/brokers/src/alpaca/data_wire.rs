//! Alpaca's market-data and reference JSON (research/domain.md §1.8): assets, the calendar and
//! clock of the Trading API, and the Market Data API v2's snapshots, bars, and the stock
//! stream's messages. Prices come as JSON numbers and are read straight into [`Price`] (rounded
//! to 1/10,000 dollar, the exchange tick); times as RFC 3339. Only the fields tradeops reads are
//! declared; unknown fields are ignored.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::Deserialize;
use tradeops_core::market::{Bar, Price, Quote};

/// One asset of `GET /v2/assets`.
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub struct Asset {
    pub symbol: String,
    #[serde(default)]
    pub name: Option<String>,
    /// `NYSE`, `NASDAQ`, `AMEX`, `ARCA`, `BATS`, `OTC`, …
    #[serde(default)]
    pub exchange: String,
    #[serde(default)]
    pub status: String,
    #[serde(default)]
    pub tradable: bool,
    #[serde(default)]
    pub class: Option<String>,
}

/// One day of `GET /v2/calendar`: dates as `YYYY-MM-DD`, times as `HH:MM` New York.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
pub struct CalendarDay {
    pub date: chrono::NaiveDate,
    pub open: String,
    pub close: String,
}

/// `GET /v2/clock`.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
pub struct MarketClock {
    pub timestamp: DateTime<Utc>,
    pub is_open: bool,
    pub next_open: DateTime<Utc>,
    pub next_close: DateTime<Utc>,
}

/// A trade print (REST `latestTrade` and the stream's `t`).
#[derive(Clone, Copy, Debug, PartialEq, Deserialize)]
pub struct DataTrade {
    #[serde(rename = "t")]
    pub at: DateTime<Utc>,
    #[serde(rename = "p")]
    pub price: Price,
    #[serde(rename = "s", default)]
    pub size: u64,
}

/// A quote (REST `latestQuote` and the stream's `q`).
#[derive(Clone, Copy, Debug, PartialEq, Deserialize)]
pub struct DataQuote {
    #[serde(rename = "t")]
    pub at: DateTime<Utc>,
    #[serde(rename = "bp")]
    pub bid: Price,
    #[serde(rename = "bs", default)]
    pub bid_size: u64,
    #[serde(rename = "ap")]
    pub ask: Price,
    #[serde(rename = "as", default)]
    pub ask_size: u64,
}

impl DataQuote {
    pub fn quote(&self) -> Quote {
        Quote { bid: self.bid, ask: self.ask, bid_size: self.bid_size, ask_size: self.ask_size }
    }
}

/// A bar (REST bars, snapshot bars and the stream's `b`): `t` is the bar's start (daily bars:
/// midnight New York, as core's [`Bar`] counts them).
#[derive(Clone, Copy, Debug, PartialEq, Deserialize)]
pub struct DataBar {
    #[serde(rename = "t")]
    pub start: DateTime<Utc>,
    #[serde(rename = "o")]
    pub open: Price,
    #[serde(rename = "h")]
    pub high: Price,
    #[serde(rename = "l")]
    pub low: Price,
    #[serde(rename = "c")]
    pub close: Price,
    #[serde(rename = "v", default)]
    pub volume: u64,
}

impl DataBar {
    pub fn bar(&self) -> Bar {
        Bar {
            start: self.start,
            open: self.open,
            high: self.high,
            low: self.low,
            close: self.close,
            volume: self.volume,
        }
    }
}

/// One symbol of `GET /v2/stocks/snapshots`; any part may be missing (a symbol that has not
/// traded on the feed).
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Snapshot {
    #[serde(default)]
    pub latest_trade: Option<DataTrade>,
    #[serde(default)]
    pub latest_quote: Option<DataQuote>,
    #[serde(default)]
    pub minute_bar: Option<DataBar>,
    #[serde(default)]
    pub daily_bar: Option<DataBar>,
    #[serde(default)]
    pub prev_daily_bar: Option<DataBar>,
}

/// One page of `GET /v2/stocks/bars` (multi-symbol): bars by symbol, and the next page's token
/// (absent or `null` on the last page).
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
pub struct BarsPage {
    #[serde(default)]
    pub bars: Option<BTreeMap<String, Vec<DataBar>>>,
    #[serde(default)]
    pub next_page_token: Option<String>,
}

/// One element of a stock-stream frame (frames are JSON arrays of these).
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(tag = "T")]
pub enum StreamMessage {
    #[serde(rename = "success")]
    Success { msg: String },
    #[serde(rename = "error")]
    Error {
        #[serde(default)]
        code: i64,
        #[serde(default)]
        msg: String,
    },
    #[serde(rename = "subscription")]
    Subscription {
        #[serde(default)]
        trades: Vec<String>,
        #[serde(default)]
        quotes: Vec<String>,
        #[serde(default)]
        bars: Vec<String>,
    },
    #[serde(rename = "t")]
    Trade {
        #[serde(rename = "S")]
        symbol: String,
        #[serde(flatten)]
        trade: DataTrade,
    },
    #[serde(rename = "q")]
    Quote {
        #[serde(rename = "S")]
        symbol: String,
        #[serde(flatten)]
        quote: DataQuote,
    },
    #[serde(rename = "b")]
    Bar {
        #[serde(rename = "S")]
        symbol: String,
        #[serde(flatten)]
        bar: DataBar,
    },
    /// Updated bars, daily bars, statuses, corrections, …: not read yet.
    #[serde(other)]
    Other,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_snapshot_reads_its_five_parts_and_prices_to_the_tick() {
        let text = r#"{"AAPL":{"latestTrade":{"t":"2026-11-25T15:00:01.5Z","x":"V","p":180.125,"s":100,"c":["@"],"i":52983525029461,"z":"C"},
            "latestQuote":{"t":"2026-11-25T15:00:01Z","ax":"V","ap":180.13,"as":2,"bx":"V","bp":180.12,"bs":3,"c":["R"],"z":"C"},
            "minuteBar":{"t":"2026-11-25T14:59:00Z","o":180,"h":180.2,"l":179.9,"c":180.1,"v":1200,"n":12,"vw":180.05},
            "dailyBar":{"t":"2026-11-25T05:00:00Z","o":178,"h":181,"l":177.5,"c":180.1,"v":250000},
            "prevDailyBar":{"t":"2026-11-24T05:00:00Z","o":175,"h":179,"l":174,"c":177.77,"v":300000}},
            "NONE":{"latestTrade":null}}"#;
        let snapshots: BTreeMap<String, Snapshot> = serde_json::from_str(text).unwrap();
        let aapl = &snapshots["AAPL"];
        assert_eq!(aapl.latest_trade.unwrap().price, Price(1_801_250));
        assert_eq!(
            aapl.latest_quote.unwrap().quote(),
            Quote { bid: Price::from_cents(18012), ask: Price::from_cents(18013), bid_size: 3, ask_size: 2 }
        );
        assert_eq!(aapl.prev_daily_bar.unwrap().close, Price::from_cents(17777));
        assert_eq!(aapl.daily_bar.unwrap().bar().volume, 250_000);
        assert_eq!(snapshots["NONE"], Snapshot::default());
    }

    #[test]
    fn stream_frames_read_every_message_type_and_skip_unknown_ones() {
        let text = r#"[{"T":"success","msg":"connected"},{"T":"error","code":406,"msg":"connection limit exceeded"},
            {"T":"subscription","trades":["AAPL"],"quotes":[],"bars":["*"]},
            {"T":"t","S":"AAPL","i":96921,"x":"D","p":126.55,"s":1,"t":"2026-11-25T15:00:00.1Z","c":["@"],"z":"C"},
            {"T":"q","S":"AAPL","bx":"U","bp":126.5,"bs":1,"ax":"Q","ap":126.6,"as":2,"t":"2026-11-25T15:00:00.2Z"},
            {"T":"b","S":"AAPL","o":126.5,"h":126.7,"l":126.4,"c":126.55,"v":5000,"t":"2026-11-25T14:59:00Z","n":3,"vw":126.6},
            {"T":"s","S":"AAPL","sc":"H","sm":"Trading Halt"}]"#;
        let messages: Vec<StreamMessage> = serde_json::from_str(text).unwrap();
        assert_eq!(messages[0], StreamMessage::Success { msg: "connected".into() });
        assert!(matches!(&messages[1], StreamMessage::Error { code: 406, .. }));
        assert!(matches!(&messages[2], StreamMessage::Subscription { bars, .. } if bars == &["*"]));
        assert!(
            matches!(&messages[3], StreamMessage::Trade { symbol, trade } if symbol == "AAPL" && trade.price == Price::from_cents(12655))
        );
        assert!(matches!(&messages[4], StreamMessage::Quote { quote, .. } if quote.ask_size == 2));
        assert!(matches!(&messages[5], StreamMessage::Bar { bar, .. } if bar.volume == 5000));
        assert_eq!(messages[6], StreamMessage::Other);
    }

    #[test]
    fn a_bars_page_without_a_token_is_the_last() {
        let page: BarsPage = serde_json::from_str(r#"{"bars":{"A":[]},"next_page_token":null}"#).unwrap();
        assert_eq!(page.next_page_token, None);
        let empty: BarsPage = serde_json::from_str(r#"{"bars":null}"#).unwrap();
        assert_eq!(empty.bars, None);
    }
}
