//! The runner's reconciliation part: the engine's book compared with the broker's, every
//! [`super::RECONCILE_EVERY`] and at start, and what disagrees corrected or shown
//! (`reconciliation_status` `MISMATCH` with its words, CONTRACT §10):
//! - orders whose submit went unanswered are looked up by client order id and sent again only
//!   if the broker never received them (never once their trading day, the halt or a cancel
//!   rules it out: those are marked never sent);
//! - working broker orders the engine holds ended, or cancelling with no cancel on its way,
//!   are cancelled at the broker; working broker orders it never placed are adopted;
//! - an order of ours the database lacks (an earlier term sent it and could not write it: its
//!   database link was cut while it still reached the broker) is recorded as it was sent, and
//!   the broker's reports carry it to its state — the fill, the position, a trade — once; a new
//!   term does this before anything else ([`Runner::catch_up`]), so its halt's exits and orders
//!   count the shares really held;
//! - positions and cash, with a venue that keeps its own: a position held there and not here is
//!   adopted, a quantity that differs is a mismatch shown until it agrees, and once every
//!   holding agrees the broker's cash is taken for the engine's.
//!
//! [`Reconciliation`] keeps what the passes found; the passes themselves are the runner's, as
//! they drive the engine and the venue.

use super::venue::UNANSWERED;
use super::Runner;
use rust_decimal::Decimal;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;
use tradeops_brokers::{VenueAccount, VenuePosition};
use tradeops_core::broker::{BrokerLookup, BrokerReport};
use tradeops_core::calendar::MarketCalendar;
use tradeops_core::orders::{ClientOrderId, Order, OrderStatus, TimeInForce};
use tradeops_core::positions::Position;
use tradeops_core::reconcile::Discrepancy;
use tradeops_core::risk::TradingState;
use tradeops_core::{Symbol, Timestamp};

/// How often a remote venue's open orders are listed (its request budget is shared with
/// orders: Alpaca allows 200 a minute). While its last call found it unavailable they are
/// listed at every reconciliation instead: that listing is what finds it back, and new orders
/// are refused until it does.
const REMOTE_LISTING_EVERY: Duration = Duration::from_secs(3);

/// How often positions and cash are reconciled with a venue that keeps its own (at start and
/// every minute), in market time.
const ACCOUNT_RECONCILE_EVERY: chrono::Duration = chrono::Duration::seconds(60);

/// How long a new term waits at start for a remote venue's event connection (and its gap
/// fill) before anything else ([`Runner::catch_up`]); past it, the term goes on and what the
/// gap fill finds is recorded when it comes.
const CATCH_UP_WAIT: Duration = Duration::from_secs(3);

/// What reconciliation found, and when it last looked.
#[derive(Default)]
pub(super) struct Reconciliation {
    /// What the last orders pass found wrong (and corrected), in words.
    mismatches: Vec<String>,
    /// The last disagreement corrected, and when: shown once the books agree again.
    last_corrected: Option<(Timestamp, String)>,
    /// When a remote venue's open orders were last listed.
    listed_at: Option<tokio::time::Instant>,
    /// When positions and cash were last reconciled with a venue that keeps its own (market
    /// time); `None`: not yet since start.
    account_checked_at: Option<Timestamp>,
    /// What the last positions-and-cash pass found wrong and could not correct, in words.
    account_mismatches: Vec<String>,
    /// The venue's own account figures as last read (a real broker's), with the engine's cash
    /// at that moment.
    venue_account: Option<(VenueAccount, Decimal)>,
}

/// What becomes of a report about an order of ours the engine does not hold (see
/// [`Runner::record_earlier_order`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Earlier {
    /// Recorded (or nothing to record it from): the report is applied.
    Apply,
    /// The database holds the order, ended: the report is dropped.
    Drop,
    /// The database or the broker cannot say now: the report is delivered again later.
    Wait,
}

/// How the holdings compare, symbol by symbol (see [`compare_holdings`]).
#[derive(Debug, Default, PartialEq)]
pub(super) struct Holdings {
    /// Held at the broker and not here: adopted (shares, average price).
    pub adopt: Vec<(Symbol, u64, Decimal)>,
    /// Disagreements that cannot be corrected here, in words.
    pub mismatches: Vec<String>,
    /// Every holding agrees (none differs, none is left alone for orders in flight).
    pub all_agree: bool,
}

/// Compares the engine's positions with the venue's; `in_flight`: symbols whose orders may still
/// fill (left alone: their fills may be on their way).
pub(super) fn compare_holdings(
    ours: &BTreeMap<Symbol, Position>,
    theirs: &[VenuePosition],
    in_flight: &BTreeSet<Symbol>,
) -> Holdings {
    let theirs: BTreeMap<&Symbol, &VenuePosition> = theirs.iter().map(|p| (&p.symbol, p)).collect();
    let mut symbols: BTreeSet<&Symbol> = theirs.keys().copied().collect();
    symbols.extend(ours.values().filter(|p| !p.is_flat()).map(|p| &p.symbol));
    let mut found = Holdings { all_agree: true, ..Holdings::default() };
    for symbol in symbols {
        let here = ours.get(symbol).map(|p| p.quantity).unwrap_or(0);
        let (quantity, price) = theirs.get(symbol).map(|p| (p.quantity, p.average_price)).unwrap_or_default();
        if quantity >= 0 && quantity as u64 == here {
            continue;
        }
        if in_flight.contains(symbol) {
            found.all_agree = false;
            continue;
        }
        match quantity {
            q if q < 0 => found.mismatches.push(format!(
                "{symbol}: short {} shares at the broker; tradeops trades long only (manage it at the broker)",
                -q
            )),
            q if here == 0 => found.adopt.push((symbol.clone(), q as u64, price)),
            q => found.mismatches.push(format!("{symbol}: {here} shares here, {q} at the broker")),
        }
    }
    found
}

/// Why an order written ahead that the broker never received must not be sent now, if it must
/// not: the halt (except the halt's own exits, which are what it wants at the broker: one kept
/// while this engine's term could not be renewed is sent once it is, not replaced), its cancel,
/// an earlier `BROKER_UNAVAILABLE` answer, an immediate-or-cancel order, or a DAY order whose
/// trading day is over.
pub(super) fn never_send(
    order: &Order,
    halted: bool,
    calendar: MarketCalendar,
    now: Timestamp,
) -> Option<&'static str> {
    if halted && !tradeops_core::engine::is_liquidation(order) {
        Some("trading is HALTED")
    } else if order.status == OrderStatus::PendingCancel {
        Some("its cancel was requested")
    } else if order.reject_reason.as_deref() == Some(UNANSWERED) {
        Some("placing it was answered BROKER_UNAVAILABLE")
    } else if order.time_in_force == TimeInForce::Ioc {
        Some("an immediate-or-cancel order cannot be sent later")
    } else if order.time_in_force == TimeInForce::Day && calendar.date_of(order.created_at) != calendar.date_of(now) {
        Some("its trading day has ended")
    } else {
        None
    }
}

impl Reconciliation {
    /// A disagreement was corrected at `now` (shown until the next one).
    pub fn corrected(&mut self, now: Timestamp, what: String) {
        self.last_corrected = Some((now, what));
    }

    /// The venue's account as last read, with the engine's cash then.
    pub fn venue_account(&self) -> Option<&(VenueAccount, Decimal)> {
        self.venue_account.as_ref()
    }

    /// Whether the broker's open orders are listed at this pass: every pass for an in-process
    /// venue or one found unavailable, every [`REMOTE_LISTING_EVERY`] for a remote one.
    fn listing_due(&mut self, remote: bool, venue_down: bool) -> bool {
        let due = !remote || venue_down || self.listed_at.is_none_or(|at| at.elapsed() >= REMOTE_LISTING_EVERY);
        if due {
            self.listed_at = Some(tokio::time::Instant::now());
        }
        due
    }

    fn account_due(&self, now: Timestamp) -> bool {
        self.account_checked_at.is_none_or(|at| now - at >= ACCOUNT_RECONCILE_EVERY)
    }

    /// `reconciliation_status` and its detail as operators read them: `MISMATCH` with the
    /// engine's anomaly or what reconciliation found wrong, else `OK` with the broker's count
    /// of working orders and the last disagreement corrected.
    pub fn status(&self, anomaly: Option<&String>, open_orders: usize, broker: &str) -> (&'static str, String) {
        if let Some(anomaly) = anomaly {
            return ("MISMATCH", anomaly.clone());
        }
        if !self.mismatches.is_empty() || !self.account_mismatches.is_empty() {
            let all: Vec<&str> = self.mismatches.iter().chain(&self.account_mismatches).map(String::as_str).collect();
            return ("MISMATCH", all.join("; "));
        }
        let mut detail = format!("{open_orders} open orders match the {broker} broker's book");
        if let Some((at, what)) = &self.last_corrected {
            detail.push_str(&format!("; last mismatch corrected at {}: {what}", tradeops_core::time::format_ts(at)));
        }
        ("OK", detail)
    }
}

impl Runner {
    /// Drives every order that was not final at the last stop: an order written ahead that the
    /// broker does not know is sent now, or — while `HALTED`, or when its cancel was already
    /// requested — marked as never sent (`REJECTED`, never sent at all). The books are then
    /// reconciled (a cancel that never reached the broker is sent again), and a standing halt
    /// applied again.
    pub(super) async fn recover(&mut self, unsent: Vec<ClientOrderId>, now: Timestamp) {
        let halted = self.engine.trading_state() == TradingState::Halted;
        // Exits that were waiting for a protective order's cancel wait again (its cancel is
        // sent again), before anything written ahead is looked up and sent.
        let freeing = self.engine.restore_protection(now);
        if !freeing.is_empty() {
            self.apply(freeing, now).await;
        }
        let never_sent = self.send_unknown(unsent, "the service stopped before sending it", now).await;
        if !never_sent.is_empty() {
            tracing::warn!(orders = never_sent.len(), "orders written ahead were never sent; marked REJECTED");
        }
        self.reports(never_sent, now).await;
        // Reconcile first, so what the broker still works against our book is reported as a
        // mismatch (and corrected) before the halt, applied again, cancels it anyway.
        self.reconcile(now).await;
        if halted {
            let (fx, progress) = self.engine.reassert_halt(now);
            tracing::warn!(
                open_orders = progress.open_orders,
                open_positions = progress.open_positions,
                "trading is HALTED: the halt is applied again"
            );
            self.apply(fx, now).await;
        }
    }

    /// Looks up each order by client order id and sends the ones the broker never received,
    /// unless they can no longer be sent ([`never_send`]): those are returned as `Rejected`
    /// reports (never sent, because of `cause`). An order the broker has is left to its
    /// reports; one it cannot be asked about now stays unconfirmed for the next reconciliation.
    async fn send_unknown(&mut self, ids: Vec<ClientOrderId>, cause: &str, now: Timestamp) -> Vec<BrokerReport> {
        let halted = self.engine.trading_state() == TradingState::Halted;
        let mut never_sent = Vec::new();
        for id in ids {
            let Some(order) = self.engine.order(&id).cloned() else { continue };
            if order.status.is_final() || self.engine.is_held_exit(&id) {
                // An exit held back until its protective order's cancel frees the shares it
                // sells (CONTRACT §11) is sent then, never before.
                continue;
            }
            match self.venue.lookup(&id).await {
                Ok(BrokerLookup::Unknown) => {}
                Ok(_) => continue, // the broker has it: its reports follow
                Err(e) => {
                    tracing::warn!(client_order_id = %id, error = %e, "cannot ask the broker about an order written ahead; asked again later");
                    self.venue.look_up_later(id, &e, now);
                    continue;
                }
            }
            match never_send(&order, halted, self.engine.calendar(), now) {
                Some(why) => never_sent.push(BrokerReport::Rejected {
                    client_order_id: id,
                    reason: format!("never sent: {cause}, and {why}"),
                    at: now,
                }),
                None => {
                    tracing::info!(client_order_id = %id, "order written ahead but never acknowledged: sending it");
                    let _ = self.send(&order, now).await;
                }
            }
        }
        never_sent
    }

    /// Compares the broker's book with the engine's and corrects what disagrees (see the
    /// module's doc). While `HALTED`, an incomplete halt is applied again (orders cancelled,
    /// exits sent) until nothing is open.
    pub(super) async fn reconcile(&mut self, now: Timestamp) {
        // Orders whose submit found the broker unavailable, once their wait is over (the venue
        // may still be taking a submit whose reply was lost).
        let due = self.venue.due_for_lookup(now);
        if !due.is_empty() {
            let cause = "the broker could not be reached when it was sent";
            let never_sent = self.send_unknown(due, cause, now).await;
            self.reports(never_sent, now).await;
        }
        if self.reconciliation.listing_due(self.venue.is_remote(), self.venue.down().is_some()) {
            self.reconcile_orders(now).await;
        }
        if self.reconciliation.account_due(now) {
            self.reconcile_account(now).await;
        }
        if self.engine.trading_state() == TradingState::Halted && !self.engine.halt_progress().is_complete() {
            let (fx, _) = self.engine.reassert_halt(now);
            if !fx.is_empty() {
                self.apply(fx, now).await;
            }
        }
    }

    /// Compares the broker's open orders with the engine's: a working broker order the engine
    /// holds cancelled (or ended), or is cancelling with no cancel on its way, is cancelled at
    /// the broker; one it does not know is adopted.
    async fn reconcile_orders(&mut self, now: Timestamp) {
        let open = match self.venue.open_orders().await {
            Ok(open) => open,
            Err(e) => {
                tracing::warn!(error = %e, "reconciliation skipped: the broker's open orders could not be read");
                return;
            }
        };
        let found = tradeops_core::reconcile::compare(self.engine.orders(), &open);
        let described: Vec<String> = found.iter().map(Discrepancy::describe).collect();
        let mut adopted = Vec::new();
        for (d, text) in found.iter().zip(&described) {
            // Logged when first found, not at every pass while it lasts.
            if !self.reconciliation.mismatches.contains(text) {
                tracing::warn!(client_order_id = %d.client_order_id(), "reconciliation: {text}");
            }
            match d {
                Discrepancy::LiveButEnded { client_order_id, .. } | Discrepancy::CancelNotSent { client_order_id } => {
                    let status = self.engine.order(client_order_id).map(|o| o.status);
                    self.venue.cancel(client_order_id, status, now).await;
                    self.reconciliation.corrected(now, text.clone());
                }
                Discrepancy::Unknown { client_order_id } => {
                    if self.adopt_foreign_order(client_order_id, now).await {
                        adopted.push(text.clone());
                    }
                }
                Discrepancy::Missing { .. } => {}
            }
        }
        self.reconciliation.mismatches = described.into_iter().filter(|t| !adopted.contains(t)).collect();
    }

    /// Adopts a working broker order the engine does not know (CONTRACT §10: reason "adopted
    /// from broker", no strategy); whether it was.
    pub(super) async fn adopt_foreign_order(&mut self, id: &ClientOrderId, now: Timestamp) -> bool {
        match self.venue.foreign_order(id).await {
            Ok(Some(order)) => {
                let (symbol, side, quantity) = (order.symbol.clone(), order.side, order.quantity);
                let fx = self.engine.adopt_order(order);
                if fx.is_empty() {
                    return false;
                }
                tracing::warn!(client_order_id = %id, %symbol, ?side, quantity, "reconciliation: adopted a broker order tradeops did not place");
                self.apply(fx, now).await;
                self.venue.open_orders_changed();
                self.reconciliation.corrected(now, format!("order {id} working at the broker was adopted"));
                true
            }
            Ok(None) => false,
            Err(e) => {
                tracing::warn!(client_order_id = %id, error = %e, "a broker order tradeops did not place could not be read");
                false
            }
        }
    }

    /// What to do with a report about an order of ours the engine does not hold (it restores
    /// only open orders): [`Earlier::Apply`] once the order is recorded as the broker says it
    /// was sent — an earlier term sent it and could not write it, and this report and those
    /// after it carry it to the broker's truth once ([`Engine::adopt_sent_order`]);
    /// [`Earlier::Drop`] when the database holds it (it ended before this term: nothing to
    /// report again); [`Earlier::Wait`] while the database or the broker cannot say.
    ///
    /// [`Engine::adopt_sent_order`]: tradeops_core::engine::Engine::adopt_sent_order
    pub(super) async fn record_earlier_order(&mut self, id: &ClientOrderId, now: Timestamp) -> Earlier {
        let db = self.books.db().clone();
        let repo: &dyn tradeops_store::TradingRepository = &db;
        match tokio::time::timeout(super::WRITE_TIMEOUT, repo.order(id.as_str())).await {
            Ok(Ok(Some(_))) => return Earlier::Drop,
            Ok(Ok(None)) => {}
            _ => return Earlier::Wait,
        }
        match self.venue.sent_order(id).await {
            Ok(Some(order)) => {
                let (symbol, side, quantity) = (order.symbol.clone(), order.side, order.quantity);
                let fx = self.engine.adopt_sent_order(order);
                tracing::warn!(client_order_id = %id, %symbol, ?side, quantity, "reconciliation: an order an earlier term sent and could not write is recorded from the broker");
                self.apply(fx, now).await;
                self.venue.open_orders_changed();
                self.reconciliation
                    .corrected(now, format!("order {id} sent by an earlier term was recorded from the broker"));
                Earlier::Apply
            }
            // Nothing to record it from: the report is the engine's anomaly, as before.
            Ok(None) => Earlier::Apply,
            Err(e) => {
                tracing::warn!(client_order_id = %id, error = %e, "an order of an earlier term could not be read at the broker; asked again with its next report");
                Earlier::Wait
            }
        }
    }

    /// Before this term sends anything: waits (up to [`CATCH_UP_WAIT`]) until a remote venue's
    /// event connection has been made once — its gap fill lists every order changed since
    /// before this service's last stored moment — and applies its reports, so an order an
    /// earlier term sent and could not write (the fill, the order, a trade) is recorded before
    /// the halt's exits or any order of this term counts the shares held.
    pub(super) async fn catch_up(&mut self, now: Timestamp) {
        let deadline = tokio::time::Instant::now() + CATCH_UP_WAIT;
        while !self.venue.caught_up() && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        if !self.venue.caught_up() {
            tracing::warn!(
                "the broker's event connection is not up yet: what an earlier term left there is recorded when it is"
            );
        }
        self.broker_reports(now).await;
    }

    /// Reconciles positions and cash with a venue that keeps its own (a real broker; the paper
    /// broker keeps none, and nothing is done). The account is read first, then the positions,
    /// compared by [`compare_holdings`]; when every holding agrees (ours counted the broker's
    /// fills up to the positions read, hence up to the account read before it) and no submit
    /// is unconfirmed, the broker's cash is taken for the engine's: its fees and transfers reach
    /// no fill. The venue's account figures are kept for the account screen.
    async fn reconcile_account(&mut self, now: Timestamp) {
        let account = match self.venue.account().await {
            // A venue without books of its own: nothing to reconcile, now or later.
            Ok(None) => {
                self.reconciliation.account_checked_at = Some(now);
                return;
            }
            Ok(Some(account)) => account,
            Err(e) => {
                tracing::warn!(error = %e, "positions and cash not reconciled: the broker's account could not be read");
                return;
            }
        };
        let positions = match self.venue.positions().await {
            Ok(positions) => positions.unwrap_or_default(),
            Err(e) => {
                tracing::warn!(error = %e, "positions not reconciled: the broker's positions could not be read");
                return;
            }
        };
        self.reconciliation.account_checked_at = Some(now);
        let in_flight: BTreeSet<Symbol> = self
            .engine
            .orders()
            .values()
            .filter(|o| !o.status.is_final() || self.venue.is_unconfirmed(&o.client_order_id))
            .map(|o| o.symbol.clone())
            .collect();
        let found = compare_holdings(self.engine.positions(), &positions, &in_flight);
        for (symbol, shares, price) in found.adopt {
            let fx = self.engine.adopt_position(&symbol, shares, price, now);
            tracing::warn!(%symbol, shares, %price, "reconciliation: adopted a position tradeops did not open");
            self.apply(fx, now).await;
            let what = format!("{symbol}: {shares} shares held at the broker were adopted (managed by hand)");
            self.reconciliation.corrected(now, what);
        }
        for text in found.mismatches.iter().filter(|t| !self.reconciliation.account_mismatches.contains(t)) {
            tracing::warn!("reconciliation: {text}");
        }
        if found.all_agree && found.mismatches.is_empty() && !self.venue.any_unconfirmed() {
            let fx = self.engine.adopt_cash(account.cash);
            self.apply(fx, now).await;
        }
        self.reconciliation.account_mismatches = found.mismatches;
        self.reconciliation.venue_account = Some((account, self.engine.cash()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tradeops_core::market::Side;
    use tradeops_core::settings::MarketCalendarKind;
    use tradeops_core::time::parse_ts;
    use tradeops_core::trades::fixtures;

    fn now() -> Timestamp {
        parse_ts("2026-11-20T15:00:00Z").unwrap()
    }

    fn sym(s: &str) -> Symbol {
        Symbol::parse(s).unwrap()
    }

    fn ours(held: &[(&str, u64)]) -> BTreeMap<Symbol, Position> {
        held.iter()
            .map(|(s, q)| {
                let mut p = Position::new(sym(s));
                p.quantity = *q;
                p.cost_basis = Decimal::from(*q) * Decimal::from(10);
                (sym(s), p)
            })
            .collect()
    }

    fn theirs(held: &[(&str, i64)]) -> Vec<VenuePosition> {
        held.iter()
            .map(|(s, q)| VenuePosition { symbol: sym(s), quantity: *q, average_price: Decimal::new(1250, 2) })
            .collect()
    }

    #[test]
    fn holdings_that_agree_find_nothing() {
        let found = compare_holdings(&ours(&[("AAPL", 5), ("MSFT", 0)]), &theirs(&[("AAPL", 5)]), &BTreeSet::new());
        assert_eq!(found, Holdings { all_agree: true, ..Holdings::default() });
    }

    #[test]
    fn a_position_held_only_at_the_broker_is_adopted_at_its_price() {
        let found = compare_holdings(&ours(&[]), &theirs(&[("AAPL", 7)]), &BTreeSet::new());
        assert_eq!(found.adopt, vec![(sym("AAPL"), 7, Decimal::new(1250, 2))]);
        assert!(found.mismatches.is_empty() && found.all_agree);
    }

    #[test]
    fn holdings_that_differ_are_mismatches_in_words() {
        let found = compare_holdings(
            &ours(&[("AAPL", 5), ("MSFT", 2)]),
            &theirs(&[("AAPL", 3), ("TSLA", -4)]),
            &BTreeSet::new(),
        );
        assert!(found.adopt.is_empty());
        assert_eq!(
            found.mismatches,
            vec![
                "AAPL: 5 shares here, 3 at the broker".to_string(),
                "MSFT: 2 shares here, 0 at the broker".to_string(),
                "TSLA: short 4 shares at the broker; tradeops trades long only (manage it at the broker)".to_string(),
            ]
        );
    }

    #[test]
    fn a_symbol_with_orders_in_flight_is_left_alone_and_the_cash_not_taken() {
        let in_flight = BTreeSet::from([sym("AAPL")]);
        let found = compare_holdings(&ours(&[("AAPL", 5)]), &theirs(&[("AAPL", 8)]), &in_flight);
        assert!(found.mismatches.is_empty() && found.adopt.is_empty());
        assert!(!found.all_agree, "its fills may be on their way");
    }

    fn order(tif: TimeInForce, created: &str) -> Order {
        let mut order = fixtures::order("c-1", Side::Buy, 10, 0, "entry", None);
        (order.time_in_force, order.created_at) = (tif, parse_ts(created).unwrap());
        order
    }

    #[test]
    fn an_order_the_broker_never_received_is_sent_unless_something_rules_it_out() {
        let calendar = MarketCalendar::new(MarketCalendarKind::Nyse);
        let today = "2026-11-20T14:59:00Z";
        let day = order(TimeInForce::Day, today);
        assert_eq!(never_send(&day, false, calendar, now()), None);
        assert_eq!(never_send(&day, true, calendar, now()), Some("trading is HALTED"));
        let mut cancelling = day.clone();
        cancelling.status = OrderStatus::PendingCancel;
        assert_eq!(never_send(&cancelling, false, calendar, now()), Some("its cancel was requested"));
        let mut unanswered = day.clone();
        unanswered.reject_reason = Some(UNANSWERED.into());
        assert_eq!(never_send(&unanswered, false, calendar, now()), Some("placing it was answered BROKER_UNAVAILABLE"));
        let ioc = order(TimeInForce::Ioc, today);
        assert_eq!(never_send(&ioc, false, calendar, now()), Some("an immediate-or-cancel order cannot be sent later"));
        let yesterday = "2026-11-19T15:00:00Z";
        assert_eq!(
            never_send(&order(TimeInForce::Day, yesterday), false, calendar, now()),
            Some("its trading day has ended")
        );
        assert_eq!(never_send(&order(TimeInForce::Gtc, yesterday), false, calendar, now()), None);
    }

    #[test]
    fn the_status_shows_an_anomaly_first_then_mismatches_then_the_last_correction() {
        let mut r = Reconciliation::default();
        let (status, detail) = r.status(None, 3, "paper");
        assert_eq!((status, detail.as_str()), ("OK", "3 open orders match the paper broker's book"));
        r.corrected(now(), "order c-9 working at the broker was adopted".into());
        let (status, detail) = r.status(None, 3, "paper");
        assert_eq!(status, "OK");
        assert!(
            detail.ends_with(
                "last mismatch corrected at 2026-11-20T15:00:00.000Z: order c-9 working at the broker was adopted"
            ),
            "{detail}"
        );
        r.mismatches = vec!["order c-1 is missing".into()];
        r.account_mismatches = vec!["AAPL: 5 shares here, 3 at the broker".into()];
        let (status, detail) = r.status(None, 3, "paper");
        assert_eq!(
            (status, detail.as_str()),
            ("MISMATCH", "order c-1 is missing; AAPL: 5 shares here, 3 at the broker")
        );
        let anomaly = "fill for an unknown order".to_string();
        assert_eq!(r.status(Some(&anomaly), 3, "paper"), ("MISMATCH", anomaly.clone()));
    }

    #[tokio::test(start_paused = true)]
    async fn a_remote_venues_orders_are_listed_every_few_seconds_unless_it_is_down() {
        let mut r = Reconciliation::default();
        assert!(r.listing_due(true, false), "at start");
        assert!(!r.listing_due(true, false), "its request budget is shared with orders");
        assert!(r.listing_due(true, true), "a venue found down is listed at every pass");
        assert!(r.listing_due(false, false), "an in-process venue at every pass");
        tokio::time::advance(REMOTE_LISTING_EVERY).await;
        assert!(r.listing_due(true, false));
    }

    #[test]
    fn positions_and_cash_are_reconciled_at_start_then_every_minute_of_market_time() {
        let mut r = Reconciliation::default();
        assert!(r.account_due(now()));
        r.account_checked_at = Some(now());
        assert!(!r.account_due(now() + chrono::Duration::seconds(59)));
        assert!(r.account_due(now() + ACCOUNT_RECONCILE_EVERY));
    }
}
