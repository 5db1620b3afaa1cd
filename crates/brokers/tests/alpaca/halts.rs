//! Halts from Alpaca's `statuses` channel, against the stock-stream stand-in of `data.rs`
//! driven live by the test: what `MarketData::halt` says through a UTDF news halt, a LULD
//! pause, a CTS halt and resume, imbalance messages, a reconnect and an unsubscribe. Status
//! messages are the research's (docs/plans/alpaca-protection-and-halts.md §8).

use std::sync::atomic::Ordering;
use std::sync::Arc;

use chrono::Duration;
use serde_json::{json, Value};
use tokio::sync::mpsc;
use tradeops_brokers::alpaca::data_stream::MarketDataStream;
use tradeops_brokers::alpaca::market::AlpacaMarketData;
use tradeops_brokers::MarketData;
use tradeops_core::market::{Price, SymbolHalt};
use tradeops_core::{Symbol, Timestamp};

use crate::data::{clock, eventually, now, start_stream, stream_config, sym, RestStandIn, Script, StreamStandIn};

/// The market over a stream whose connections are live scripts, watching `watched`.
struct Halts {
    market: AlpacaMarketData,
    stand_in: Arc<StreamStandIn>,
    /// The frames of each connection still open, in order; dropping one drops its connection.
    connections: Vec<mpsc::UnboundedSender<Value>>,
    /// Trades sent as markers so far (each frame ends with one).
    markers: i64,
    _rest: RestStandIn,
}

impl Halts {
    async fn start(connections: usize, watched: &[&str]) -> Halts {
        let rest = RestStandIn::start().await;
        let (senders, receivers): (Vec<_>, Vec<_>) = (0..connections).map(|_| mpsc::unbounded_channel()).unzip();
        let (url, stand_in) = start_stream(receivers.into_iter().map(Script::Live).collect()).await;
        let client = Arc::new(rest.client(clock()));
        let stream = MarketDataStream::spawn(stream_config(url), client.clone(), clock());
        let market = AlpacaMarketData::new(client, Some(stream), Default::default(), clock());
        market.set_watched(watched.iter().map(|s| sym(s)));
        eventually("the subscription", || stand_in.subscribes.lock().unwrap().len() == 1).await;
        Halts { market, stand_in, connections: senders, markers: 0, _rest: rest }
    }

    /// Sends `statuses` in one frame on the current connection, followed by a trade of the
    /// first watched symbol, and waits until that trade is read: everything before it is too.
    async fn send(&mut self, statuses: Vec<Value>) {
        self.markers += 1;
        let marker = Price::from_cents(10_000 + self.markers);
        let at = now() + Duration::seconds(self.markers);
        let mut frame = statuses;
        frame.push(json!({"T": "t", "S": "SWVL", "p": marker.to_f64(), "s": 1, "t": at}));
        self.connections[0].send(Value::Array(frame)).unwrap();
        let market = &self.market;
        eventually("the marker trade", || market.last_price(&sym("SWVL")) == Some(marker)).await;
    }

    fn halt(&self, symbol: &str) -> Option<SymbolHalt> {
        self.market.halt(&sym(symbol))
    }
}

fn status(symbol: &str, code: &str, message: &str, reason_code: &str, reason: &str, t: &str) -> Value {
    json!({"T": "s", "S": symbol, "sc": code, "sm": message, "rc": reason_code, "rm": reason, "t": t, "z": "C"})
}

fn t(text: &str) -> Timestamp {
    text.parse().unwrap()
}

#[tokio::test]
async fn a_luld_pause_halts_through_quoting_and_ends_when_trading_resumes() {
    let mut alpaca = Halts::start(1, &["SWVL", "XYZ"]).await;
    let list = json!(["SWVL", "XYZ"]);
    assert_eq!(
        alpaca.stand_in.subscribes.lock().unwrap()[0],
        json!({"action": "subscribe", "trades": list, "quotes": list, "bars": list, "statuses": list})
    );
    let mut updates = alpaca.market.halt_updates().unwrap();
    assert_eq!(alpaca.halt("SWVL"), None);

    let paused = "2026-11-25T15:31:00.000000001Z";
    alpaca.send(vec![status("SWVL", "H", "Trading Halt", "LUDP", "Volatility Trading Pause", paused)]).await;
    let pause = SymbolHalt::new("LUDP", "Volatility Trading Pause", t(paused));
    assert_eq!(alpaca.halt("SWVL"), Some(pause.clone()));
    assert_eq!(alpaca.halt("XYZ"), None);
    assert!(updates.has_changed().unwrap(), "a change is published");
    assert!(!updates.borrow_and_update()[&sym("SWVL")].before_reconnect);

    let quoting =
        status("SWVL", "Q", "Quotation Resumption", "LUDP", "Volatility Trading Pause", "2026-11-25T15:35:45Z");
    alpaca.send(vec![quoting]).await;
    assert_eq!(alpaca.halt("SWVL"), Some(pause), "quotes only: still halted");
    assert!(!updates.has_changed().unwrap());

    // Messages tradeops does not read yet, between the resumption and its neighbours, break
    // nothing.
    let luld = json!({"T": "l", "S": "SWVL", "u": 5.5, "d": 4.5, "i": "E", "t": "2026-11-25T15:35:59Z", "z": "C"});
    let unknown = json!({"T": "imbalance", "S": "SWVL", "whatever": [1, 2]});
    let resumed = status("SWVL", "T", "Trading Resumption", "", "", "2026-11-25T15:36:00Z");
    alpaca.send(vec![luld, unknown, resumed]).await;
    assert_eq!(alpaca.halt("SWVL"), None);
    assert!(updates.has_changed().unwrap());
    assert!(alpaca.market.stream_health().unwrap().connected);
}

#[tokio::test]
async fn a_news_halt_keeps_its_first_since_as_its_reason_moves_from_t1_to_t2() {
    let mut alpaca = Halts::start(1, &["SWVL", "ABCD"]).await;
    alpaca.send(vec![status("ABCD", "H", "Trading Halt", "T1", "Halt News Pending", "2026-11-25T15:00:00Z")]).await;
    assert_eq!(alpaca.halt("ABCD"), Some(SymbolHalt::new("T1", "Halt News Pending", t("2026-11-25T15:00:00Z"))));
    alpaca.send(vec![status("ABCD", "H", "Trading Halt", "T2", "", "2026-11-25T15:20:00Z")]).await;
    assert_eq!(
        alpaca.halt("ABCD"),
        Some(SymbolHalt::new("T2", "Trading Halt", t("2026-11-25T15:00:00Z"))),
        "the new code, its reason from sm (rm empty), the first since"
    );
    alpaca.send(vec![status("ABCD", "T", "Trading Resumption", "", "", "2026-11-25T15:30:00Z")]).await;
    assert_eq!(alpaca.halt("ABCD"), None);
}

#[tokio::test]
async fn a_cts_halt_ends_with_its_resume_and_imbalance_indications_change_nothing() {
    let mut alpaca = Halts::start(1, &["SWVL", "XYZ"]).await;
    let reason = "Limit Up-Limit Down (LULD) Trading Pause";
    let imbalance = |code: &str| status("XYZ", code, "Order Imbalance", "", "", "2026-11-25T15:32:00Z");
    alpaca.send(vec![imbalance("7"), imbalance("5")]).await;
    assert_eq!(alpaca.halt("XYZ"), None, "an indication is no halt");
    alpaca.send(vec![status("XYZ", "2", "Trading Halt", "M", reason, "2026-11-25T15:31:00Z")]).await;
    let halt = Some(SymbolHalt::new("M", reason, t("2026-11-25T15:31:00Z")));
    assert_eq!(alpaca.halt("XYZ"), halt);
    alpaca.send(vec![imbalance("A"), imbalance("C"), imbalance("E"), imbalance("F")]).await;
    assert_eq!(alpaca.halt("XYZ"), halt, "an indication is no resumption");
    alpaca.send(vec![status("XYZ", "3", "Resume", "M", reason, "2026-11-25T15:36:02Z")]).await;
    assert_eq!(alpaca.halt("XYZ"), None);
}

#[tokio::test]
async fn a_halt_is_kept_across_a_reconnect_until_a_resumption_arrives() {
    let mut alpaca = Halts::start(2, &["SWVL"]).await;
    let paused = "2026-11-25T15:31:00Z";
    alpaca
        .send(vec![status("SWVL", "P", "Volatility Trading Pause", "LUDP", "Volatility Trading Pause", paused)])
        .await;
    let updates = alpaca.market.halt_updates().unwrap();

    alpaca.connections.remove(0); // The first connection drops.
    let stand_in = alpaca.stand_in.clone();
    eventually("the second subscription", || stand_in.subscribes.lock().unwrap().len() == 2).await;
    let market = &alpaca.market;
    eventually("connected again", || market.stream_health().unwrap().connections == 2).await;
    assert_eq!(stand_in.connections.load(Ordering::SeqCst), 2);
    let subscribes = stand_in.subscribes.lock().unwrap().clone();
    assert_eq!(subscribes[0], subscribes[1], "statuses subscribed again");
    let kept = SymbolHalt::new("LUDP", "Volatility Trading Pause", t(paused));
    assert_eq!(alpaca.halt("SWVL"), Some(kept.clone()), "no status since: still halted");
    assert!(updates.borrow()[&sym("SWVL")].before_reconnect, "as of before the reconnect");

    // A status on the new connection confirms the same halt, then a resumption ends it.
    alpaca.send(vec![status("SWVL", "Q", "Quotation Resumption", "LUDP", "", "2026-11-25T15:35:45Z")]).await;
    let confirmed = updates.borrow()[&sym("SWVL")].clone();
    assert_eq!((confirmed.halt.since, confirmed.before_reconnect), (kept.since, false));
    alpaca.send(vec![status("SWVL", "T", "Trading Resumption", "", "", "2026-11-25T15:36:00Z")]).await;
    assert_eq!(alpaca.halt("SWVL"), None);
}

#[tokio::test]
async fn a_symbol_no_longer_streamed_is_unsubscribed_from_statuses_and_its_halt_forgotten() {
    let mut alpaca = Halts::start(1, &["SWVL", "ABCD", "XYZ"]).await;
    alpaca
        .send(vec![
            status("ABCD", "H", "Trading Halt", "T1", "Halt News Pending", "2026-11-25T15:00:00Z"),
            status("XYZ", "2", "Trading Halt", "M", "LULD Trading Pause", "2026-11-25T15:31:00Z"),
        ])
        .await;
    assert!(alpaca.halt("ABCD").is_some() && alpaca.halt("XYZ").is_some());

    alpaca.market.set_watched([sym("SWVL"), sym("XYZ")]);
    let stand_in = alpaca.stand_in.clone();
    eventually("the unsubscribe", || !stand_in.later.lock().unwrap().is_empty()).await;
    let list = json!(["ABCD"]);
    assert_eq!(
        stand_in.later.lock().unwrap()[0],
        json!({"action": "unsubscribe", "trades": list, "quotes": list, "bars": list, "statuses": list})
    );
    assert_eq!(alpaca.halt("ABCD"), None);
    assert!(alpaca.halt("XYZ").is_some(), "still streamed: kept");

    // A status crossing the unsubscribe halts nothing: no later one could end it.
    alpaca.send(vec![status("ABCD", "H", "Trading Halt", "T2", "", "2026-11-25T15:20:00Z")]).await;
    assert_eq!(alpaca.halt("ABCD"), None);
    let halted: Vec<Symbol> = alpaca.market.halt_updates().unwrap().borrow().keys().cloned().collect();
    assert_eq!(halted, vec![sym("XYZ")]);
}
