//! Which streamed symbols are halted, as Alpaca's `statuses` channel last said: the
//! [`HaltBook`] the market-data stream folds trading-status messages into and
//! [`crate::MarketData::halt`] reads without a round trip. It is a `watch` channel's value, so
//! that a caller can also wait for a change ([`HaltBook::subscribe`]) instead of polling.
//!
//! After a reconnect the book keeps what it knew. Alpaca has no REST endpoint for a symbol's
//! halt state and no replay, so whatever happened while the stream was down is unknown until
//! the next status message. Of the two ways to be wrong, forgetting a halt (and letting the
//! engine send orders into a halted book, or trusting a stop that cannot trigger) costs more
//! than keeping one a few minutes too long: a halted symbol stays halted until a resumption
//! arrives. Each halt says whether it was heard on the current connection
//! ([`StreamedHalt::before_reconnect`]) so that what shows it can say how fresh it is.

use std::collections::{BTreeMap, BTreeSet};

use tokio::sync::watch;
use tradeops_core::market::SymbolHalt;
use tradeops_core::{Symbol, Timestamp};

use super::data_wire::{DataStatus, TradingStatus};

/// A halt the stream heard of.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StreamedHalt {
    pub halt: SymbolHalt,
    /// Heard on an earlier connection than the current one (or the stream is down now): the
    /// symbol may have resumed meanwhile, and it stays halted until a status says so.
    pub before_reconnect: bool,
}

/// The halted symbols, by symbol.
pub type Halts = BTreeMap<Symbol, StreamedHalt>;

/// The halt state of the streamed symbols.
#[derive(Debug)]
pub struct HaltBook {
    halts: watch::Sender<Halts>,
}

impl Default for HaltBook {
    fn default() -> Self {
        HaltBook { halts: watch::Sender::new(Halts::new()) }
    }
}

impl HaltBook {
    /// Why `symbol` cannot trade, as last heard; `None` while it trades (or nothing was heard).
    pub fn get(&self, symbol: &Symbol) -> Option<SymbolHalt> {
        self.halts.borrow().get(symbol).map(|h| h.halt.clone())
    }

    /// Every halt held now, with its freshness.
    pub fn all(&self) -> Halts {
        self.halts.borrow().clone()
    }

    /// A receiver that sees every change of the halts (a halt, a resumption, a new reason, a
    /// reconnect, a symbol no longer streamed).
    pub fn subscribe(&self) -> watch::Receiver<Halts> {
        self.halts.subscribe()
    }

    /// Folds one status message of `symbol` in; `received_at` stands for a message without a
    /// time. Halted and quoting-only both halt: a halt's `since` is the first halting message's
    /// time, and a later one (a news halt going `T1` → `T2`, its quotation resumption) updates
    /// the reason when it gives one. A trading resumption clears the halt, unless it is older
    /// than the halt (then it ends an earlier one). Other codes change nothing.
    pub fn on_status(&self, symbol: &Symbol, status: &DataStatus, received_at: Timestamp) {
        let at = status.at.unwrap_or(received_at);
        self.halts.send_if_modified(|halts| match status.trading_status() {
            TradingStatus::Halted | TradingStatus::QuotesOnly => {
                let before = halts.get(symbol).cloned();
                let halt = match &before {
                    None => SymbolHalt::new(status.halt_code(), status.halt_reason(), at),
                    Some(known) if status.reason_code.is_empty() => known.halt.clone(),
                    Some(known) => SymbolHalt::new(status.halt_code(), status.halt_reason(), known.halt.since),
                };
                let now = StreamedHalt { halt, before_reconnect: false };
                let changed = before.as_ref() != Some(&now);
                halts.insert(symbol.clone(), now);
                changed
            }
            TradingStatus::Trading => {
                let ends = halts.get(symbol).is_some_and(|h| at >= h.halt.since);
                if ends {
                    halts.remove(symbol);
                }
                ends
            }
            TradingStatus::Other => false,
        });
    }

    /// The stream's connection ended: every halt held is now as of before the reconnect.
    pub fn connection_lost(&self) {
        self.halts.send_if_modified(|halts| {
            let fresh = halts.values().filter(|h| !h.before_reconnect).count();
            halts.values_mut().for_each(|h| h.before_reconnect = true);
            fresh > 0
        });
    }

    /// Drops the halts of symbols not in `streamed`: no status will come for them, so a halt
    /// kept would never end.
    pub fn keep_only(&self, streamed: &BTreeSet<Symbol>) {
        self.halts.send_if_modified(|halts| {
            let held = halts.len();
            halts.retain(|symbol, _| streamed.contains(symbol));
            halts.len() != held
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{TimeZone, Utc};

    fn at(minute: u32) -> Timestamp {
        Utc.with_ymd_and_hms(2026, 10, 12, 14, minute, 0).unwrap()
    }

    fn status(code: &str, reason_code: &str, reason: &str, minute: u32) -> DataStatus {
        DataStatus {
            status_code: code.into(),
            status_message: String::new(),
            reason_code: reason_code.into(),
            reason_message: reason.into(),
            at: Some(at(minute)),
        }
    }

    fn swvl() -> Symbol {
        Symbol::parse("SWVL").unwrap()
    }

    #[test]
    fn a_news_halt_keeps_its_start_through_new_reasons_and_quoting_until_trading_resumes() {
        let book = HaltBook::default();
        let mut changes = book.subscribe();
        book.on_status(&swvl(), &status("H", "T1", "Halt News Pending", 31), at(40));
        assert_eq!(book.get(&swvl()), Some(SymbolHalt::new("T1", "Halt News Pending", at(31))));
        assert!(changes.has_changed().unwrap());
        changes.mark_unchanged();
        book.on_status(&swvl(), &status("H", "T2", "Halt News Dissemination", 33), at(40));
        assert_eq!(book.get(&swvl()), Some(SymbolHalt::new("T2", "Halt News Dissemination", at(31))));
        changes.mark_unchanged();
        book.on_status(&swvl(), &status("Q", "", "", 35), at(40));
        assert_eq!(book.get(&swvl()).map(|h| h.reason_code), Some("T2".into()), "no reason given: kept");
        assert!(!changes.has_changed().unwrap(), "nothing changed");
        book.on_status(&swvl(), &status("T", "", "", 36), at(40));
        assert_eq!(book.get(&swvl()), None);
        assert!(changes.has_changed().unwrap());
    }

    #[test]
    fn a_resumption_older_than_the_halt_does_not_end_it_and_indications_change_nothing() {
        let book = HaltBook::default();
        book.on_status(&swvl(), &status("2", "M", "LULD Trading Pause", 31), at(40));
        book.on_status(&swvl(), &status("3", "", "", 30), at(40));
        book.on_status(&swvl(), &status("A", "", "", 32), at(40));
        assert_eq!(book.get(&swvl()), Some(SymbolHalt::new("M", "LULD Trading Pause", at(31))));
        book.on_status(&swvl(), &status("3", "", "", 36), at(40));
        assert_eq!(book.get(&swvl()), None);
        book.on_status(&swvl(), &status("5", "", "", 37), at(40));
        assert_eq!(book.all(), Halts::new());
    }

    #[test]
    fn a_status_without_a_time_is_taken_as_of_its_arrival() {
        let book = HaltBook::default();
        let untimed = DataStatus { at: None, ..status("P", "LUDP", "Volatility Trading Pause", 0) };
        book.on_status(&swvl(), &untimed, at(40));
        assert_eq!(book.get(&swvl()).map(|h| h.since), Some(at(40)));
    }

    #[test]
    fn a_lost_connection_keeps_halts_as_of_before_it_and_a_fresh_status_confirms_one() {
        let book = HaltBook::default();
        book.on_status(&swvl(), &status("H", "LUDP", "Volatility Trading Pause", 31), at(40));
        book.connection_lost();
        let kept = book.all()[&swvl()].clone();
        assert!(kept.before_reconnect);
        assert_eq!(kept.halt.since, at(31));
        book.on_status(&swvl(), &status("H", "LUDP", "Volatility Trading Pause", 45), at(45));
        assert_eq!(book.all()[&swvl()], StreamedHalt { halt: kept.halt, before_reconnect: false });
    }

    #[test]
    fn a_symbol_no_longer_streamed_drops_out() {
        let book = HaltBook::default();
        let other = Symbol::parse("ABCD").unwrap();
        book.on_status(&swvl(), &status("H", "LUDP", "", 31), at(40));
        book.on_status(&other, &status("H", "T1", "", 31), at(40));
        book.keep_only(&BTreeSet::from([other.clone()]));
        assert_eq!(book.all().keys().collect::<Vec<_>>(), vec![&other]);
    }
}
