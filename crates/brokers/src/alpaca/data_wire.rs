//! Alpaca's market-data and reference JSON (research/domain.md §1.8): assets, the calendar and
//! clock of the Trading API, and the Market Data API v2's snapshots, bars, and the stock
//! stream's messages, trading statuses (halts) among them. Prices come as JSON numbers and are read straight into [`Price`] (rounded
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

/// A trading-status message of the stream (`T:"s"`, the `statuses` channel): the SIP's status
/// of one symbol. Codes are the feed's own — CTS for tapes A/B (`sc` `2` halt, `3` resume),
/// UTDF for tape C (`H` halt, `P` volatility pause, `Q` quotation resumption, `T` trading
/// resumption) — and reason codes likewise (`M` or `LUDP` a LULD pause, `T1` news pending, …).
/// Alpaca may send empty strings (a resumption's `rc`/`rm`), so every text defaults to empty.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
pub struct DataStatus {
    #[serde(rename = "sc", default)]
    pub status_code: String,
    #[serde(rename = "sm", default)]
    pub status_message: String,
    #[serde(rename = "rc", default)]
    pub reason_code: String,
    #[serde(rename = "rm", default)]
    pub reason_message: String,
    /// When the status took effect; a message without one is taken as of its arrival.
    #[serde(rename = "t", default)]
    pub at: Option<DateTime<Utc>>,
}

/// What a [`DataStatus`] says of trading in its symbol.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TradingStatus {
    /// Halted or paused (UTDF `H`, `P`; CTS `2`).
    Halted,
    /// Quoting again, not yet trading (UTDF `Q`): still halted for an order.
    QuotesOnly,
    /// Trading again (UTDF `T`; CTS `3`).
    Trading,
    /// Says nothing of a halt: CTS indications and imbalances (`5`–`D`), the short-sale
    /// restriction (`E`), LULD (`F`, bands not a pause), or a code tradeops does not know.
    Other,
}

impl DataStatus {
    pub fn trading_status(&self) -> TradingStatus {
        match self.status_code.as_str() {
            "H" | "P" | "2" => TradingStatus::Halted,
            "Q" => TradingStatus::QuotesOnly,
            "T" | "3" => TradingStatus::Trading,
            _ => TradingStatus::Other,
        }
    }

    /// The halt's reason code: `rc`, or the status code when Alpaca sent none.
    pub fn halt_code(&self) -> &str {
        if self.reason_code.is_empty() {
            &self.status_code
        } else {
            &self.reason_code
        }
    }

    /// The halt's reason in words: `rm`, else `sm` (a message with an empty reason still says
    /// "Trading Halt"), else the code.
    pub fn halt_reason(&self) -> &str {
        [&self.reason_message, &self.status_message].into_iter().find(|m| !m.is_empty()).map_or(self.halt_code(), |m| m)
    }
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
        #[serde(default)]
        statuses: Vec<String>,
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
    #[serde(rename = "s")]
    Status {
        #[serde(rename = "S")]
        symbol: String,
        #[serde(flatten)]
        status: DataStatus,
    },
    /// Updated bars, daily bars, LULD bands, corrections, …: not read yet.
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
            {"T":"s","S":"AAPL","sc":"H","sm":"Trading Halt"},
            {"T":"l","S":"IONM","u":3.24,"d":2.65,"i":"B","t":"2023-04-06T13:34:45.565004401Z","z":"C"}]"#;
        let messages: Vec<StreamMessage> = serde_json::from_str(text).unwrap();
        assert_eq!(messages[0], StreamMessage::Success { msg: "connected".into() });
        assert!(matches!(&messages[1], StreamMessage::Error { code: 406, .. }));
        assert!(matches!(&messages[2], StreamMessage::Subscription { bars, .. } if bars == &["*"]));
        assert!(
            matches!(&messages[3], StreamMessage::Trade { symbol, trade } if symbol == "AAPL" && trade.price == Price::from_cents(12655))
        );
        assert!(matches!(&messages[4], StreamMessage::Quote { quote, .. } if quote.ask_size == 2));
        assert!(matches!(&messages[5], StreamMessage::Bar { bar, .. } if bar.volume == 5000));
        assert!(matches!(&messages[6], StreamMessage::Status { status, .. } if status.at.is_none()));
        assert_eq!(messages[7], StreamMessage::Other);
    }

    fn status(text: &str) -> (String, DataStatus) {
        match serde_json::from_str(text).unwrap() {
            StreamMessage::Status { symbol, status } => (symbol, status),
            other => panic!("not a status: {other:?}"),
        }
    }

    #[test]
    fn alpacas_status_example_reads_every_field() {
        let (symbol, status) = status(
            r#"{"T":"s","S":"AAPL","sc":"H","sm":"Trading Halt","rc":"T12","rm":"Trading Halted; For information requested by NASDAQ","t":"2021-02-22T19:15:00Z","z":"C"}"#,
        );
        assert_eq!(symbol, "AAPL");
        assert_eq!(
            status,
            DataStatus {
                status_code: "H".into(),
                status_message: "Trading Halt".into(),
                reason_code: "T12".into(),
                reason_message: "Trading Halted; For information requested by NASDAQ".into(),
                at: Some("2021-02-22T19:15:00Z".parse().unwrap()),
            }
        );
        assert_eq!(status.trading_status(), TradingStatus::Halted);
        assert_eq!(
            (status.halt_code(), status.halt_reason()),
            ("T12", "Trading Halted; For information requested by NASDAQ")
        );
    }

    #[test]
    fn status_codes_of_both_tapes_say_halted_quoting_or_trading() {
        let cases = [
            ("H", TradingStatus::Halted),
            ("P", TradingStatus::Halted),
            ("2", TradingStatus::Halted),
            ("Q", TradingStatus::QuotesOnly),
            ("T", TradingStatus::Trading),
            ("3", TradingStatus::Trading),
        ];
        let mut cases = cases.to_vec();
        for code in ["5", "6", "7", "8", "9", "A", "C", "D", "E", "F", "", "Z"] {
            cases.push((code, TradingStatus::Other));
        }
        for (code, expected) in cases {
            let status = DataStatus { status_code: code.into(), ..DataStatus::default() };
            assert_eq!(status.trading_status(), expected, "sc {code:?}");
        }
    }

    #[test]
    fn a_status_without_a_reason_is_named_by_its_status() {
        let (_, resume) = status(
            r#"{"T":"s","S":"SWVL","sc":"T","sm":"Trading Resumption","rc":"","rm":"","t":"2026-10-12T14:36:00Z","z":"C"}"#,
        );
        assert_eq!(resume.trading_status(), TradingStatus::Trading);
        assert_eq!((resume.halt_code(), resume.halt_reason()), ("T", "Trading Resumption"));
        let (_, luld) =
            status(r#"{"T":"s","S":"XYZ","sc":"2","sm":"Trading Halt","rc":"M","rm":"","t":"2026-10-12T14:31:00Z"}"#);
        assert_eq!((luld.halt_code(), luld.halt_reason()), ("M", "Trading Halt"), "sm when rm is empty");
        let (_, bare) = status(r#"{"T":"s","S":"XYZ","sc":"H"}"#);
        assert_eq!((bare.halt_code(), bare.halt_reason(), bare.at), ("H", "H", None));
    }

    #[test]
    fn the_subscription_reply_lists_the_statuses() {
        let reply: StreamMessage = serde_json::from_str(
            r#"{"T":"subscription","trades":["AAPL"],"quotes":[],"bars":[],"updatedBars":[],"dailyBars":[],"statuses":["AAPL","SWVL"],"lulds":[],"corrections":[],"cancelErrors":[]}"#,
        )
        .unwrap();
        assert!(matches!(reply, StreamMessage::Subscription { statuses, .. } if statuses == ["AAPL", "SWVL"]));
    }

    #[test]
    fn a_bars_page_without_a_token_is_the_last() {
        let page: BarsPage = serde_json::from_str(r#"{"bars":{"A":[]},"next_page_token":null}"#).unwrap();
        assert_eq!(page.next_page_token, None);
        let empty: BarsPage = serde_json::from_str(r#"{"bars":null}"#).unwrap();
        assert_eq!(empty.bars, None);
    }
}
