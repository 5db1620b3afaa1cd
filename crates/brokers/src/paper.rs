//! The in-process paper broker's matching engine (research/domain.md §5.5): orders in, broker
//! reports out, driven only by the timestamps and market updates it is given (no wall clock,
//! no randomness), so paper trading and backtests replay bit for bit.
//!
//! * **Latency.** An order is acknowledged `ack_latency_ms` after `submit`, a cancel lands
//!   `cancel_latency_ms` after `cancel` (never before the order's own ack). Until a cancel lands
//!   the order keeps working, so fills can race it.
//! * **Liquidity.** Per update, buys of a symbol share `ask_size` shares and sells `bid_size`
//!   (at least one), in submission order; what does not fill stays working.
//! * **Prices.** Market and triggered stop orders cross the quote plus `slippage_bps`; limits
//!   fill at the quote when it is marketable, or at the limit when the completed bar traded
//!   through it (a touch does not fill).
//! * **Sessions** (CONTRACT §12, Alpaca's rules). Outside 09:30–16:00 only orders marked
//!   extended-hours (a `LIMIT` `DAY` order; any other so marked is rejected as Alpaca rejects
//!   it) fill, and no stop is elected: a resting stop waits for the regular session, as does
//!   every other order. While the market is closed nothing fills.
//! * **No look-ahead.** A completed bar only counts for an order that was live for the whole bar:
//!   acknowledged (for a stop limit's limit, triggered) at or before the bar's start. Earlier
//!   parts of that minute may have traded before the order existed.
//!
//! [`PaperBroker`] is the synchronous matching engine (benchmarks and tests drive it directly);
//! [`PaperExecution`] puts it behind the [`ExecutionBroker`] trait for the engine runner.

use crate::execution::{BrokerError, ExecutionBroker, MarketUpdate};
use async_trait::async_trait;
use chrono::Duration;
use rust_decimal::Decimal;
use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard};
use tradeops_core::backtest::fills::stop_in_bar;
use tradeops_core::broker::{BrokerLookup, BrokerOpenOrder, BrokerReport};
use tradeops_core::calendar::SessionPhase;
use tradeops_core::market::{Bar, Price, Quote, Side};
use tradeops_core::orders::{ClientOrderId, Execution, Order, OrderType, TimeInForce};
use tradeops_core::symbol::Symbol;
use tradeops_core::time::Timestamp;

/// The paper broker's knobs.
#[derive(Clone, Debug, PartialEq)]
pub struct PaperConfig {
    /// Submit → `Accepted` report.
    pub ack_latency_ms: i64,
    /// Cancel → `Canceled` report (fills may still happen before it lands).
    pub cancel_latency_ms: i64,
    /// Market and stop fills pay this beyond the quote (buy above the ask, sell below the bid),
    /// rounded to the price tick (cents at or above $1, 1/10,000 below), at least 0.
    pub slippage_bps: f64,
    pub fee_per_share: Decimal,
}

impl Default for PaperConfig {
    fn default() -> Self {
        PaperConfig { ack_latency_ms: 50, cancel_latency_ms: 50, slippage_bps: 5.0, fee_per_share: Decimal::ZERO }
    }
}

/// An order the broker is still working.
#[derive(Clone, Debug)]
struct Working {
    id: ClientOrderId,
    symbol: Symbol,
    side: Side,
    order_type: OrderType,
    time_in_force: TimeInForce,
    limit: Option<Price>,
    stop: Option<Price>,
    remaining: u64,
    broker_order_id: std::sync::Arc<str>,
    /// When the ack is (or was) due.
    ack_at: Timestamp,
    /// Set when the ack has been delivered; only then does the order match.
    acked_at: Option<Timestamp>,
    /// When a stop or stop-limit order triggered; it stays triggered.
    triggered_at: Option<Timestamp>,
    /// A protective order's take-profit (CONTRACT §11): a sell limit one-cancels-other with
    /// the order's stop, filled as a limit at it until the stop triggers.
    take_profit: Option<Price>,
    /// Works in the extended sessions too (CONTRACT §12).
    extended_hours: bool,
}

/// How an order left the book.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Outcome {
    Filled,
    Canceled,
    Expired,
    Rejected,
}

impl Outcome {
    fn cancel_reject_reason(self) -> &'static str {
        match self {
            Outcome::Filled => "too late to cancel: order already filled",
            Outcome::Canceled => "order already canceled",
            Outcome::Expired => "too late to cancel: order already expired",
            Outcome::Rejected => "order was rejected",
        }
    }
}

/// A report the broker owes at a later time.
#[derive(Clone, Debug)]
enum Due {
    Ack(ClientOrderId),
    Reject(ClientOrderId, String),
    Cancel(ClientOrderId),
}

#[derive(Clone, Debug)]
struct Scheduled {
    at: Timestamp,
    seq: u64,
    due: Due,
}

/// The paper broker: a deterministic matching engine over the simulated market.
#[derive(Clone, Debug)]
pub struct PaperBroker {
    config: PaperConfig,
    /// Live orders (acknowledged or not), in submission order.
    working: Vec<Working>,
    /// Orders that left the book, and when.
    finished: BTreeMap<ClientOrderId, (Outcome, Timestamp)>,
    scheduled: Vec<Scheduled>,
    seq: u64,
    orders_taken: u64,
    executions: u64,
    /// Makes ids unique across processes (execution ids are stored forever).
    id_prefix: String,
    /// The shares the paper account holds, by symbol, once the service has told it
    /// ([`PaperBroker::open_account`]): a sell of more than is held and not already held for
    /// other working sells is refused, as a venue refuses it ("insufficient qty available",
    /// CONTRACT §11). `None`: a bare matching engine with no account (no such check).
    holdings: Option<BTreeMap<Symbol, u64>>,
}

impl PaperBroker {
    /// Prefixes every broker order id and execution id with `prefix` (e.g. the start time), so
    /// ids of a restarted broker never collide with stored ones.
    pub fn with_id_prefix(mut self, prefix: &str) -> Self {
        self.id_prefix = prefix.to_string();
        self
    }

    /// Takes back an order the engine already knows after a restart (the paper account's book
    /// is the engine's stored orders): an acknowledged one works at once with its broker id (no
    /// second ack). Returns false for an order never acknowledged, which the broker cannot
    /// have kept (its [`PaperBroker::lookup`] answers `Unknown`): the caller decides whether to
    /// send it.
    pub fn restore(&mut self, order: &Order, now: Timestamp) -> bool {
        let Some(broker_order_id) = order.broker_order_id.clone() else { return false };
        if let Ok((limit, stop)) = validate(order) {
            self.working.push(Working {
                id: order.client_order_id.clone(),
                symbol: order.symbol.clone(),
                side: order.side,
                order_type: order.order_type,
                time_in_force: order.time_in_force,
                limit,
                stop,
                remaining: order.quantity.saturating_sub(order.filled_quantity),
                broker_order_id,
                ack_at: now,
                acked_at: Some(now),
                triggered_at: None,
                take_profit: take_profit_of(order),
                extended_hours: order.extended_hours,
            });
        }
        true
    }

    /// What the broker knows of an order, by client order id.
    pub fn lookup(&self, id: &ClientOrderId) -> BrokerLookup {
        if self.working.iter().any(|o| &o.id == id) {
            BrokerLookup::Open(BrokerOpenOrder { client_order_id: id.clone(), cancel_pending: self.cancel_pending(id) })
        } else if self.finished.contains_key(id) {
            BrokerLookup::Closed
        } else {
            BrokerLookup::Unknown
        }
    }

    /// Every order still working, with whether a cancel of it is on its way, by client id.
    pub fn open_order_states(&self) -> Vec<BrokerOpenOrder> {
        let mut open: Vec<_> = self
            .working
            .iter()
            .map(|o| BrokerOpenOrder { client_order_id: o.id.clone(), cancel_pending: self.cancel_pending(&o.id) })
            .collect();
        open.sort_by(|a, b| a.client_order_id.cmp(&b.client_order_id));
        open
    }

    fn cancel_pending(&self, id: &ClientOrderId) -> bool {
        self.scheduled.iter().any(|s| matches!(&s.due, Due::Cancel(c) if c == id))
    }

    pub fn new(config: PaperConfig) -> Self {
        PaperBroker {
            config,
            working: Vec::new(),
            finished: BTreeMap::new(),
            scheduled: Vec::new(),
            seq: 0,
            orders_taken: 0,
            executions: 0,
            id_prefix: String::new(),
            holdings: None,
        }
    }

    /// Opens the paper account with the shares it holds (the engine's positions at a start):
    /// from now on sells are checked against them, and fills move them.
    pub fn open_account(&mut self, positions: impl IntoIterator<Item = (Symbol, u64)>) {
        self.holdings = Some(positions.into_iter().filter(|(_, q)| *q > 0).collect());
    }

    /// Why a sell of `quantity` cannot be taken: more than the account holds and does not
    /// already hold for its other working sells.
    fn shares_unavailable(&self, symbol: &Symbol, quantity: u64) -> Option<String> {
        let holdings = self.holdings.as_ref()?;
        let held = holdings.get(symbol).copied().unwrap_or(0);
        let for_orders: u64 =
            self.working.iter().filter(|o| &o.symbol == symbol && o.side == Side::Sell).map(|o| o.remaining).sum();
        let available = held.saturating_sub(for_orders);
        (quantity > available)
            .then(|| format!("insufficient qty available for order (requested: {quantity}, available: {available})"))
    }

    /// Takes an order (status NEW, as the engine built it). Reports come later from
    /// `advance`/`on_market`: `Accepted` after the ack latency, or `Rejected` (at the same time)
    /// when the order is malformed or its client id was already used.
    pub fn submit(&mut self, order: &Order, now: Timestamp) {
        let at = after(now, self.config.ack_latency_ms);
        let id = order.client_order_id.clone();
        if self.working.iter().any(|o| o.id == id) || self.finished.contains_key(&id) {
            self.schedule(at, Due::Reject(id, "duplicate client_order_id".into()));
            return;
        }
        let refused = match order.side {
            Side::Sell => self.shares_unavailable(&order.symbol, order.quantity.saturating_sub(order.filled_quantity)),
            Side::Buy => None,
        };
        match validate(order).and_then(|prices| refused.map_or(Ok(prices), Err)) {
            Ok((limit, stop)) => {
                self.orders_taken += 1;
                self.working.push(Working {
                    id: id.clone(),
                    symbol: order.symbol.clone(),
                    side: order.side,
                    order_type: order.order_type,
                    time_in_force: order.time_in_force,
                    limit,
                    stop,
                    remaining: order.quantity.saturating_sub(order.filled_quantity),
                    broker_order_id: format!("PB-{}{}", self.id_prefix, self.orders_taken).into(),
                    ack_at: at,
                    acked_at: None,
                    triggered_at: None,
                    take_profit: take_profit_of(order),
                    extended_hours: order.extended_hours,
                });
                self.schedule(at, Due::Ack(id));
            }
            Err(reason) => {
                self.finished.insert(id.clone(), (Outcome::Rejected, at));
                self.schedule(at, Due::Reject(id, reason));
            }
        }
    }

    /// Requests a cancel; unknown or finished orders get a CancelRejected report (from `advance`).
    /// The answer lands after the cancel latency, and never before the order's own ack or reject.
    /// A cancel of an order whose cancel is already on its way changes nothing (one answer).
    pub fn cancel(&mut self, id: &ClientOrderId, now: Timestamp) {
        if self.cancel_pending(id) {
            return;
        }
        let mut at = after(now, self.config.cancel_latency_ms);
        if let Some(order) = self.working.iter().find(|o| &o.id == id) {
            at = at.max(order.ack_at);
        } else if let Some((_, finished_at)) = self.finished.get(id) {
            at = at.max(*finished_at);
        }
        self.schedule(at, Due::Cancel(id.clone()));
    }

    /// When the next scheduled report (an ack or a cancel) is due.
    pub fn next_due(&self) -> Option<Timestamp> {
        self.scheduled.iter().map(|s| s.at).min()
    }

    /// Delivers every report due at or before `now` (acks, cancels), in time order, ties in
    /// submission order.
    pub fn advance(&mut self, now: Timestamp) -> Vec<BrokerReport> {
        let (mut due, later): (Vec<_>, Vec<_>) =
            std::mem::take(&mut self.scheduled).into_iter().partition(|s| s.at <= now);
        self.scheduled = later;
        due.sort_by_key(|s| (s.at, s.seq));
        due.into_iter().filter_map(|s| self.land(s)).collect()
    }

    /// Matches working, acknowledged orders of `update.symbol` against the update. Returns the
    /// reports that came due first (see `advance`), then fills (and IOC cancels) in submission order.
    /// In a halted symbol nothing fills and no stop is elected: its orders wait for the reopen,
    /// as a venue's do (CONTRACT §11).
    pub fn on_market(&mut self, update: &MarketUpdate<'_>) -> Vec<BrokerReport> {
        let mut reports = self.advance(update.at);
        if update.halted || update.session == SessionPhase::Closed {
            return reports;
        }
        let regular = update.session == SessionPhase::Regular;
        let slippage_bps = self.config.slippage_bps;
        let mut buy_shares = update.quote.ask_size.max(1);
        let mut sell_shares = update.quote.bid_size.max(1);
        let mut i = 0;
        while i < self.working.len() {
            let order = &mut self.working[i];
            let Some(acked_at) = order.acked_at.filter(|_| &order.symbol == update.symbol) else {
                i += 1;
                continue;
            };
            if !regular && !order.extended_hours {
                // It waits for the regular session; a stop is not elected before it.
                i += 1;
                continue;
            }
            if let (Some(stop), None) = (order.stop, order.triggered_at) {
                if stop_triggers(order.side, stop, update, acked_at) {
                    order.triggered_at = Some(update.at);
                }
            }
            let available = match order.side {
                Side::Buy => &mut buy_shares,
                Side::Sell => &mut sell_shares,
            };
            let quantity = order.remaining.min(*available);
            let fill = fill_price(order, update, acked_at, slippage_bps).filter(|_| quantity > 0);
            if fill.is_some() {
                *available -= quantity;
                order.remaining -= quantity;
            }
            let (id, remaining, ioc) = (order.id.clone(), order.remaining, order.time_in_force == TimeInForce::Ioc);
            let side = order.side;
            if let (Some(_), Some(holdings)) = (fill, self.holdings.as_mut()) {
                let held = holdings.entry(update.symbol.clone()).or_default();
                *held = match side {
                    Side::Buy => held.saturating_add(quantity),
                    Side::Sell => held.saturating_sub(quantity),
                };
            }
            if let Some(price) = fill {
                self.executions += 1;
                reports.push(BrokerReport::Filled {
                    client_order_id: id.clone(),
                    execution: Execution {
                        execution_id: format!("P-{}{}", self.id_prefix, self.executions).into(),
                        timestamp: update.at,
                        quantity,
                        price: price.to_decimal(),
                        fee: self.config.fee_per_share * Decimal::from(quantity),
                    },
                });
            }
            let outcome = if remaining == 0 {
                Outcome::Filled
            } else if ioc {
                reports.push(BrokerReport::Canceled { client_order_id: id.clone(), at: update.at });
                Outcome::Canceled
            } else {
                i += 1;
                continue;
            };
            self.working.remove(i);
            self.finished.insert(id, (outcome, update.at));
        }
        reports
    }

    /// Expires every working DAY order (and IOC leftovers) at the session close `now`, after
    /// delivering the reports due by then. GTC orders stay.
    pub fn expire_day_orders(&mut self, now: Timestamp) -> Vec<BrokerReport> {
        let mut reports = self.advance(now);
        let (expiring, staying): (Vec<_>, Vec<_>) =
            std::mem::take(&mut self.working).into_iter().partition(|o| o.time_in_force != TimeInForce::Gtc);
        self.working = staying;
        for order in expiring {
            reports.push(BrokerReport::Expired { client_order_id: order.id.clone(), at: now });
            self.finished.insert(order.id, (Outcome::Expired, now));
        }
        reports
    }

    /// Client ids of orders still working at the broker (acknowledged or not), sorted.
    pub fn open_orders(&self) -> Vec<ClientOrderId> {
        let mut ids: Vec<_> = self.working.iter().map(|o| o.id.clone()).collect();
        ids.sort();
        ids
    }

    fn schedule(&mut self, at: Timestamp, due: Due) {
        self.seq += 1;
        self.scheduled.push(Scheduled { at, seq: self.seq, due });
    }

    /// Applies one due event; an ack for an order that left the book before it landed is dropped.
    fn land(&mut self, event: Scheduled) -> Option<BrokerReport> {
        let at = event.at;
        match event.due {
            Due::Ack(id) => {
                let order = self.working.iter_mut().find(|o| o.id == id && o.acked_at.is_none())?;
                order.acked_at = Some(at);
                Some(BrokerReport::Accepted { client_order_id: id, broker_order_id: order.broker_order_id.clone(), at })
            }
            Due::Reject(id, reason) => Some(BrokerReport::Rejected { client_order_id: id, reason, at }),
            Due::Cancel(id) => {
                if let Some(i) = self.working.iter().position(|o| o.id == id) {
                    self.working.remove(i);
                    self.finished.insert(id.clone(), (Outcome::Canceled, at));
                    return Some(BrokerReport::Canceled { client_order_id: id, at });
                }
                let reason = match self.finished.get(&id) {
                    Some((outcome, _)) => outcome.cancel_reject_reason(),
                    None => "unknown order",
                };
                Some(BrokerReport::CancelRejected { client_order_id: id, reason: reason.into(), at })
            }
        }
    }
}

/// The paper broker behind [`ExecutionBroker`]: one [`PaperBroker`] under a mutex, each call a
/// short critical section (no call awaits while holding it). It never fails a call: refusals
/// come back as `Rejected` and `CancelRejected` reports, as from a real venue's stream.
#[derive(Debug)]
pub struct PaperExecution {
    book: Mutex<PaperBroker>,
}

impl PaperExecution {
    pub fn new(broker: PaperBroker) -> Self {
        PaperExecution { book: Mutex::new(broker) }
    }

    fn book(&self) -> MutexGuard<'_, PaperBroker> {
        self.book.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[async_trait]
impl ExecutionBroker for PaperExecution {
    fn name(&self) -> &'static str {
        "paper"
    }

    async fn submit(&self, order: &Order, now: Timestamp) -> Result<(), BrokerError> {
        self.book().submit(order, now);
        Ok(())
    }

    async fn cancel(&self, id: &ClientOrderId, now: Timestamp) -> Result<(), BrokerError> {
        self.book().cancel(id, now);
        Ok(())
    }

    async fn lookup(&self, id: &ClientOrderId) -> Result<BrokerLookup, BrokerError> {
        Ok(self.book().lookup(id))
    }

    async fn open_orders(&self) -> Result<Vec<BrokerOpenOrder>, BrokerError> {
        Ok(self.book().open_order_states())
    }

    async fn poll(&self, now: Timestamp) -> Vec<BrokerReport> {
        self.book().advance(now)
    }

    fn next_due(&self) -> Option<Timestamp> {
        self.book().next_due()
    }

    async fn on_market(&self, update: &MarketUpdate<'_>) -> Vec<BrokerReport> {
        self.book().on_market(update)
    }

    async fn expire_day_orders(&self, now: Timestamp) -> Vec<BrokerReport> {
        self.book().expire_day_orders(now)
    }

    /// The paper account's book is the engine's stored orders: each acknowledged one works again
    /// at once (see [`PaperBroker::restore`]); the ones never acknowledged are returned.
    async fn restore(&self, orders: &[Order], now: Timestamp) -> Vec<ClientOrderId> {
        let mut book = self.book();
        orders.iter().filter(|o| !book.restore(o, now)).map(|o| o.client_order_id.clone()).collect()
    }

    async fn open_account(&self, positions: &[(Symbol, u64)]) {
        self.book().open_account(positions.iter().cloned());
    }
}

/// `at` plus a latency (negative latencies count as 0).
fn after(at: Timestamp, ms: i64) -> Timestamp {
    Duration::try_milliseconds(ms.max(0)).and_then(|d| at.checked_add_signed(d)).unwrap_or(at)
}

/// The order's limit and stop prices, or why it cannot be worked.
fn validate(order: &Order) -> Result<(Option<Price>, Option<Price>), String> {
    if order.quantity <= order.filled_quantity {
        return Err("quantity must be positive".into());
    }
    let price = |needed: bool, value: Option<Decimal>, name: &str| -> Result<Option<Price>, String> {
        if !needed {
            return Ok(None);
        }
        let value = value.ok_or_else(|| format!("a {:?} order needs a {name} price", order.order_type))?;
        match Price::from_decimal(value) {
            Some(p) if p.0 > 0 => Ok(Some(p)),
            _ => Err(format!("{name} price must be positive with at most 4 decimals")),
        }
    };
    if order.extended_hours && (order.order_type != OrderType::Limit || order.time_in_force != TimeInForce::Day) {
        // Alpaca's words for it (its 422, code 40010001).
        return Err("only type=\"limit\" is allowed for extended hours orders, with time_in_force=\"day\"".into());
    }
    let limit = price(matches!(order.order_type, OrderType::Limit | OrderType::StopLimit), order.limit_price, "limit")?;
    let stop = price(matches!(order.order_type, OrderType::Stop | OrderType::StopLimit), order.stop_price, "stop")?;
    Ok((limit, stop))
}

/// The completed bar, if the order has been live for all of it.
fn bar_since<'a>(update: &MarketUpdate<'a>, live_since: Timestamp) -> Option<&'a Bar> {
    update.bar.filter(|bar| bar.start >= live_since)
}

/// A buy stop triggers on a trade or bar high at or above the stop, a sell stop on one at or below.
fn stop_triggers(side: Side, stop: Price, update: &MarketUpdate<'_>, acked_at: Timestamp) -> bool {
    let last = update.last;
    let bar = bar_since(update, acked_at);
    match side {
        Side::Buy => (last.0 > 0 && last >= stop) || bar.is_some_and(|b| b.high >= stop),
        Side::Sell => (last.0 > 0 && last <= stop) || bar.is_some_and(|b| b.low.0 > 0 && b.low <= stop),
    }
}

/// A protective order's take-profit price, when it has one on the tick grid.
fn take_profit_of(order: &Order) -> Option<Price> {
    order.legs.filter(|_| order.is_protective()).and_then(|l| l.take_profit).and_then(Price::from_decimal)
}

/// The price the order fills at on this update, if it fills. A protective order with a
/// take-profit fills as a limit at it until its stop triggers (one-cancels-other: whichever
/// fills first is the order's fill).
fn fill_price(order: &Working, update: &MarketUpdate<'_>, acked_at: Timestamp, slippage_bps: f64) -> Option<Price> {
    let quote = &update.quote;
    if let (Some(target), None) = (order.take_profit, order.triggered_at) {
        return limit_price(order.side, target, quote, bar_since(update, acked_at));
    }
    match order.order_type {
        OrderType::Market => market_price(order.side, quote, None, slippage_bps),
        OrderType::Stop => {
            order.triggered_at?;
            market_price(order.side, quote, order.stop, slippage_bps)
        }
        OrderType::Limit => limit_price(order.side, order.limit?, quote, bar_since(update, acked_at)),
        OrderType::StopLimit => {
            let (triggered_at, limit) = (order.triggered_at?, order.limit?);
            limit_price(order.side, limit, quote, bar_since(update, triggered_at))
                .or_else(|| triggered_in_bar(order, limit, update, acked_at))
        }
    }
}

/// A stop-limit order triggered during the bar this update completes, having been live for all
/// of it: the bar traded through the stop, so it fills as the backtests' bar fill model fills it
/// ([`stop_in_bar`]) even if the quotes seen in between, a few a minute, were all past the limit.
fn triggered_in_bar(order: &Working, limit: Price, update: &MarketUpdate<'_>, acked_at: Timestamp) -> Option<Price> {
    let triggered_at = order.triggered_at?;
    let bar = bar_since(update, acked_at).filter(|b| triggered_at >= b.start)?;
    stop_in_bar(order.side, order.stop?, Some(limit), bar).flatten()
}

/// A marketable fill: the far side of the quote (for a stop, no better than the stop) plus slippage.
fn market_price(side: Side, quote: &Quote, stop: Option<Price>, slippage_bps: f64) -> Option<Price> {
    match side {
        Side::Buy if quote.ask.0 > 0 => {
            let base = stop.map_or(quote.ask, |s| quote.ask.max(s));
            Some(with_slippage(side, base, slippage_bps))
        }
        Side::Sell if quote.bid.0 > 0 => {
            let base = stop.map_or(quote.bid, |s| quote.bid.min(s));
            Some(with_slippage(side, base, slippage_bps))
        }
        _ => None,
    }
}

/// A limit fill: at the quote when it is at or better than the limit, else at the limit when the
/// bar traded through it.
fn limit_price(side: Side, limit: Price, quote: &Quote, bar: Option<&Bar>) -> Option<Price> {
    match side {
        Side::Buy if quote.ask.0 > 0 && quote.ask <= limit => Some(quote.ask),
        Side::Buy => bar.filter(|b| b.low < limit).map(|_| limit),
        Side::Sell if quote.bid.0 > 0 && quote.bid >= limit => Some(quote.bid),
        Side::Sell => bar.filter(|b| b.high > limit).map(|_| limit),
    }
}

fn tick(price: i64) -> i64 {
    if price >= Price::SCALE {
        100
    } else {
        1
    }
}

/// `base` moved against the trader by `bps`, the move rounded to the nearest tick (halves away
/// from zero), never negative; the result is on the tick grid (rounded against the trader if the
/// base was not) and positive.
fn with_slippage(side: Side, base: Price, bps: f64) -> Price {
    let bps = if bps.is_finite() { bps.max(0.0) } else { 0.0 };
    let step = tick(base.0);
    let raw = base.0 as f64 * bps / 10_000.0;
    let slip = ((raw / step as f64).round() as i64).saturating_mul(step).max(0);
    match side {
        Side::Buy => {
            let p = base.0.saturating_add(slip);
            let step = tick(p);
            Price(p.div_euclid(step).saturating_add(i64::from(p.rem_euclid(step) != 0)).saturating_mul(step))
        }
        Side::Sell => {
            let p = base.0.saturating_sub(slip);
            Price((p.div_euclid(tick(p)) * tick(p)).max(1))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{TimeZone, Utc};
    use tradeops_core::orders::{OrderEvent, OrderStatus};

    fn t(ms: i64) -> Timestamp {
        Utc.with_ymd_and_hms(2026, 3, 2, 14, 30, 0).single().expect("valid") + Duration::milliseconds(ms)
    }

    fn sym() -> Symbol {
        Symbol::parse("ABCD").expect("valid")
    }

    fn id(raw: &str) -> ClientOrderId {
        ClientOrderId::parse(raw).expect("valid")
    }

    fn dec(raw: &str) -> Decimal {
        raw.parse().expect("decimal")
    }

    fn px(raw: &str) -> Price {
        Price::from_decimal(dec(raw)).expect("price")
    }

    #[allow(clippy::too_many_arguments)]
    fn order(
        raw_id: &str,
        side: Side,
        order_type: OrderType,
        tif: TimeInForce,
        quantity: u64,
        limit: Option<&str>,
        stop: Option<&str>,
    ) -> Order {
        Order::new(id(raw_id), sym(), side, order_type, tif, quantity, limit.map(dec), stop.map(dec), t(0))
    }

    fn market(raw_id: &str, side: Side, quantity: u64) -> Order {
        order(raw_id, side, OrderType::Market, TimeInForce::Day, quantity, None, None)
    }

    fn quote(bid: &str, ask: &str, size: u64) -> Quote {
        Quote { bid: px(bid), ask: px(ask), bid_size: size, ask_size: size }
    }

    fn update<'a>(symbol: &'a Symbol, ms: i64, last: &str, quote: Quote, bar: Option<&'a Bar>) -> MarketUpdate<'a> {
        MarketUpdate {
            symbol,
            at: t(ms),
            last: px(last),
            quote,
            bar,
            halted: false,
            session: tradeops_core::calendar::SessionPhase::Regular,
        }
    }

    /// A completed minute bar starting at `start_ms`.
    fn bar(start_ms: i64, high: &str, low: &str) -> Bar {
        Bar { start: t(start_ms), open: px(high), high: px(high), low: px(low), close: px(low), volume: 10_000 }
    }

    /// (client id, quantity, price) of every fill.
    fn fills(reports: &[BrokerReport]) -> Vec<(String, u64, Decimal)> {
        reports
            .iter()
            .filter_map(|r| match r {
                BrokerReport::Filled { client_order_id, execution } => {
                    Some((client_order_id.to_string(), execution.quantity, execution.price))
                }
                _ => None,
            })
            .collect()
    }

    fn no_slippage() -> PaperConfig {
        PaperConfig { slippage_bps: 0.0, ..PaperConfig::default() }
    }

    /// A broker with `orders` submitted at t(0) and acknowledged at t(50).
    fn acked(config: PaperConfig, orders: &[Order]) -> PaperBroker {
        let mut broker = PaperBroker::new(config);
        for o in orders {
            broker.submit(o, t(0));
        }
        let acks = broker.advance(t(50));
        assert_eq!(acks.len(), orders.len());
        assert!(acks.iter().all(|r| matches!(r, BrokerReport::Accepted { .. })), "{acks:?}");
        broker
    }

    #[test]
    fn defaults_match_the_contract() {
        let c = PaperConfig::default();
        assert_eq!(
            (c.ack_latency_ms, c.cancel_latency_ms, c.slippage_bps, c.fee_per_share),
            (50, 50, 5.0, Decimal::ZERO)
        );
    }

    #[test]
    fn ack_arrives_after_the_latency_not_before() {
        let s = sym();
        let mut broker = PaperBroker::new(PaperConfig::default());
        broker.submit(&market("a1", Side::Buy, 100), t(0));
        assert_eq!(broker.open_orders(), vec![id("a1")], "working before the ack");
        assert!(broker.advance(t(49)).is_empty());
        // Not acknowledged yet: a marketable quote does not fill it.
        assert!(broker.on_market(&update(&s, 49, "10.00", quote("9.99", "10.00", 1_000), None)).is_empty());
        assert_eq!(
            broker.advance(t(50)),
            vec![BrokerReport::Accepted { client_order_id: id("a1"), broker_order_id: "PB-1".into(), at: t(50) }]
        );
        assert!(broker.advance(t(1_000)).is_empty(), "delivered once");
    }

    #[test]
    fn outside_the_regular_session_only_extended_hours_limits_fill_and_no_stop_is_elected() {
        let s = sym();
        let stop = order("st", Side::Sell, OrderType::Stop, TimeInForce::Gtc, 100, None, Some("9.50"));
        let plain = order("pl", Side::Buy, OrderType::Limit, TimeInForce::Day, 100, Some("9.10"), None);
        let mut extended = order("ex", Side::Buy, OrderType::Limit, TimeInForce::Day, 100, Some("9.10"), None);
        extended.extended_hours = true;
        let mut broker = acked(no_slippage(), &[market("m1", Side::Buy, 100), stop, plain, extended]);
        let at = |ms, session| MarketUpdate { session, ..update(&s, ms, "9.00", quote("8.99", "9.00", 1_000), None) };
        // 07:00: the trade through the stop elects nothing; only the extended-hours limit fills.
        let reports = broker.on_market(&at(60, SessionPhase::PreMarket));
        assert_eq!(fills(&reports), vec![("ex".into(), 100, dec("9.00"))]);
        // 20:00 to 04:00: nothing at all.
        assert!(broker.on_market(&at(90, SessionPhase::Closed)).is_empty());
        // 09:30: the market order, the stop (elected by the first regular print) and the limit.
        let reports = broker.on_market(&at(120, SessionPhase::Regular));
        assert_eq!(
            fills(&reports),
            vec![("m1".into(), 100, dec("9.00")), ("st".into(), 100, dec("8.99")), ("pl".into(), 100, dec("9.00"))]
        );
        // A market order marked extended-hours is refused, as Alpaca refuses it.
        let mut marked = market("mx", Side::Buy, 100);
        marked.extended_hours = true;
        broker.submit(&marked, t(200));
        let refused = broker.advance(t(1_000));
        assert!(
            matches!(&refused[..], [BrokerReport::Rejected { reason, .. }] if reason.contains("only type=\"limit\"")),
            "{refused:?}"
        );
    }

    #[test]
    fn nothing_fills_or_triggers_in_a_halted_symbol_until_it_reopens() {
        let s = sym();
        let stop = order("st", Side::Sell, OrderType::Stop, TimeInForce::Day, 100, None, Some("9.50"));
        let mut broker = acked(no_slippage(), &[market("m1", Side::Buy, 100), stop]);
        let halted = MarketUpdate { halted: true, ..update(&s, 60, "9.00", quote("8.99", "9.00", 1_000), None) };
        assert!(broker.on_market(&halted).is_empty(), "a market order waits, a stop is not elected");
        assert_eq!(broker.open_orders().len(), 2);
        // The reopen: the market order fills, and the stop is elected by the first print.
        let reports = broker.on_market(&update(&s, 120, "9.00", quote("8.99", "9.00", 1_000), None));
        assert_eq!(fills(&reports), vec![("m1".into(), 100, dec("9.00")), ("st".into(), 100, dec("8.99"))]);
    }

    #[test]
    fn market_buy_fills_at_ask_plus_slippage_rounded_to_the_cent() {
        let s = sym();
        let config = PaperConfig { fee_per_share: dec("0.005"), ..PaperConfig::default() };
        let mut broker = acked(config, &[market("b1", Side::Buy, 100), market("s1", Side::Sell, 100)]);
        // 5 bps of $10.00 is half a cent: rounds to one cent. 5 bps of $9.99 is 0.4995¢: rounds to none.
        let reports = broker.on_market(&update(&s, 60, "10.00", quote("9.99", "10.00", 1_000), None));
        assert_eq!(fills(&reports), vec![("b1".into(), 100, dec("10.01")), ("s1".into(), 100, dec("9.99"))]);
        let BrokerReport::Filled { execution, .. } = &reports[0] else { panic!("{reports:?}") };
        assert_eq!((&*execution.execution_id, execution.timestamp, execution.fee), ("P-1", t(60), dec("0.5")));
        assert!(broker.open_orders().is_empty());

        // 5 bps of $4.00 is 0.2 cent: rounds to nothing; no slippage configured means the quote.
        let mut broker = acked(PaperConfig::default(), &[market("b2", Side::Buy, 10)]);
        let reports = broker.on_market(&update(&s, 60, "4.00", quote("3.99", "4.00", 1_000), None));
        assert_eq!(fills(&reports), vec![("b2".into(), 10, dec("4.00"))]);
        let mut broker = acked(no_slippage(), &[market("b3", Side::Buy, 10)]);
        let reports = broker.on_market(&update(&s, 60, "10.00", quote("9.99", "10.00", 1_000), None));
        assert_eq!(fills(&reports), vec![("b3".into(), 10, dec("10.00"))]);
        // Sub-dollar prices slip in 1/10,000 ticks: 50 bps of $0.5000 is $0.0025.
        let config = PaperConfig { slippage_bps: 50.0, ..PaperConfig::default() };
        let mut broker = acked(config, &[market("b4", Side::Buy, 10)]);
        let reports = broker.on_market(&update(&s, 60, "0.4990", quote("0.4980", "0.5000", 1_000), None));
        assert_eq!(fills(&reports), vec![("b4".into(), 10, dec("0.5025"))]);
    }

    #[test]
    fn slippage_is_never_negative_and_stays_on_the_tick() {
        assert_eq!(with_slippage(Side::Buy, px("10.00"), -20.0), px("10.00"));
        assert_eq!(with_slippage(Side::Sell, px("10.00"), f64::NAN), px("10.00"));
        assert_eq!(with_slippage(Side::Buy, px("10.005"), 0.0), px("10.01"), "off-tick base rounds against the buyer");
        assert_eq!(with_slippage(Side::Sell, px("10.005"), 0.0), px("10.00"), "and against the seller");
        assert_eq!(with_slippage(Side::Sell, px("10.00"), 10.0), px("9.99"));
        assert_eq!(with_slippage(Side::Buy, px("0.9999"), 1.0), px("1.00"), "crossing $1 lands on a cent");
        assert_eq!(with_slippage(Side::Buy, px("0.9999"), 10.0), px("1.01"), "$1.0009 is no price: up to a cent");
        assert_eq!(with_slippage(Side::Sell, px("0.0001"), 10_000.0), Price(1), "never zero");
    }

    #[test]
    fn quantity_above_ask_size_fills_partially_across_updates() {
        let s = sym();
        let mut broker = acked(no_slippage(), &[market("b1", Side::Buy, 500)]);
        let first = broker.on_market(&update(&s, 100, "10.00", quote("9.99", "10.00", 300), None));
        assert_eq!(fills(&first), vec![("b1".into(), 300, dec("10.00"))]);
        assert_eq!(broker.open_orders(), vec![id("b1")], "the rest keeps working");
        let second = broker.on_market(&update(&s, 200, "10.01", quote("10.00", "10.01", 300), None));
        assert_eq!(fills(&second), vec![("b1".into(), 200, dec("10.01"))]);
        assert!(broker.open_orders().is_empty());
        let total: u64 = fills(&first).iter().chain(&fills(&second)).map(|f| f.1).sum();
        assert_eq!(total, 500);
    }

    #[test]
    fn liquidity_is_shared_in_submission_order_and_never_zero() {
        let s = sym();
        let orders = [market("b1", Side::Buy, 300), market("b2", Side::Buy, 300), market("s1", Side::Sell, 50)];
        let mut broker = acked(no_slippage(), &orders);
        let reports = broker.on_market(&update(&s, 100, "10.00", quote("9.99", "10.00", 400), None));
        assert_eq!(
            fills(&reports),
            vec![("b1".into(), 300, dec("10.00")), ("b2".into(), 100, dec("10.00")), ("s1".into(), 50, dec("9.99"))]
        );
        let reports = broker.on_market(&update(&s, 200, "10.00", quote("9.99", "10.00", 0), None));
        assert_eq!(fills(&reports), vec![("b2".into(), 1, dec("10.00"))], "an empty size still trades one share");
        // Another symbol's update does not touch these orders.
        let other = Symbol::parse("WXYZ").expect("valid");
        assert!(broker.on_market(&update(&other, 300, "10.00", quote("9.99", "10.00", 1_000), None)).is_empty());
    }

    #[test]
    fn limit_buy_rests_until_the_ask_reaches_the_limit() {
        let s = sym();
        let buy = order("l1", Side::Buy, OrderType::Limit, TimeInForce::Day, 100, Some("10.00"), None);
        let mut broker = acked(PaperConfig::default(), &[buy]);
        assert!(broker.on_market(&update(&s, 100, "10.05", quote("10.04", "10.05", 1_000), None)).is_empty());
        assert_eq!(broker.open_orders(), vec![id("l1")]);
        let reports = broker.on_market(&update(&s, 200, "9.97", quote("9.97", "9.98", 1_000), None));
        assert_eq!(fills(&reports), vec![("l1".into(), 100, dec("9.98"))], "at the better ask, no slippage");
    }

    #[test]
    fn limit_sell_rests_until_the_bid_reaches_the_limit() {
        let s = sym();
        let sell = order("l1", Side::Sell, OrderType::Limit, TimeInForce::Day, 100, Some("10.00"), None);
        let mut broker = acked(PaperConfig::default(), &[sell]);
        assert!(broker.on_market(&update(&s, 100, "9.95", quote("9.95", "9.96", 1_000), None)).is_empty());
        let touch = bar(0, "10.00", "9.90");
        assert!(broker.on_market(&update(&s, 60_000, "9.95", quote("9.95", "9.96", 1_000), Some(&touch))).is_empty());
        let reports = broker.on_market(&update(&s, 60_100, "10.02", quote("10.02", "10.03", 1_000), None));
        assert_eq!(fills(&reports), vec![("l1".into(), 100, dec("10.02"))]);
    }

    #[test]
    fn a_bar_that_only_touches_the_limit_does_not_fill_but_one_trading_through_does() {
        let s = sym();
        let buy = order("l1", Side::Buy, OrderType::Limit, TimeInForce::Day, 100, Some("10.00"), None);
        let mut broker = acked(PaperConfig::default(), &[buy]);
        let q = quote("10.09", "10.10", 1_000);
        // The order has been live since t(50); bars starting later count.
        let touch = bar(60_000, "10.20", "10.00");
        assert!(broker.on_market(&update(&s, 120_000, "10.10", q, Some(&touch))).is_empty());
        let through = bar(120_000, "10.20", "9.99");
        let reports = broker.on_market(&update(&s, 180_000, "10.10", q, Some(&through)));
        assert_eq!(fills(&reports), vec![("l1".into(), 100, dec("10.00"))], "at the limit");
    }

    #[test]
    fn a_bar_that_began_before_the_ack_does_not_fill_or_trigger() {
        let s = sym();
        let buy = order("l1", Side::Buy, OrderType::Limit, TimeInForce::Day, 100, Some("10.00"), None);
        let stop = order("s1", Side::Buy, OrderType::Stop, TimeInForce::Day, 100, None, Some("10.50"));
        let mut broker = acked(PaperConfig::default(), &[buy, stop]);
        let early = bar(0, "10.60", "9.50"); // began at t(0), before the ack at t(50)
        assert!(broker
            .on_market(&update(&s, 60_000, "10.10", quote("10.09", "10.10", 1_000), Some(&early)))
            .is_empty());
        assert_eq!(broker.open_orders(), vec![id("l1"), id("s1")]);
    }

    #[test]
    fn stop_buy_triggers_on_last_at_the_stop_and_fills_at_least_at_the_stop() {
        let s = sym();
        let stop = |raw_id: &str| order(raw_id, Side::Buy, OrderType::Stop, TimeInForce::Gtc, 100, None, Some("10.00"));
        let mut broker = acked(no_slippage(), &[stop("st1")]);
        assert!(broker.on_market(&update(&s, 100, "9.95", quote("9.95", "9.96", 1_000), None)).is_empty());
        // Last trades at the stop while the quote lags below it: the fill is no better than the stop.
        let reports = broker.on_market(&update(&s, 200, "10.00", quote("9.98", "9.99", 1_000), None));
        assert_eq!(fills(&reports), vec![("st1".into(), 100, dec("10.00"))]);

        // With the ask above the stop it pays the ask plus slippage (5 bps of $10.20 ≈ 0.51¢ → 1¢).
        let mut broker = acked(PaperConfig::default(), &[stop("st2")]);
        let reports = broker.on_market(&update(&s, 200, "10.19", quote("10.19", "10.20", 1_000), None));
        assert_eq!(fills(&reports), vec![("st2".into(), 100, dec("10.21"))]);

        // A bar high at the stop triggers too.
        let mut broker = acked(no_slippage(), &[stop("st3")]);
        let b = bar(60_000, "10.00", "9.80");
        let reports = broker.on_market(&update(&s, 120_000, "9.90", quote("9.89", "9.90", 1_000), Some(&b)));
        assert_eq!(fills(&reports), vec![("st3".into(), 100, dec("10.00"))]);
    }

    #[test]
    fn stop_limit_does_not_fill_above_its_limit_after_triggering() {
        let s = sym();
        let sl = order("sl1", Side::Buy, OrderType::StopLimit, TimeInForce::Day, 100, Some("10.05"), Some("10.00"));
        let mut broker = acked(PaperConfig::default(), std::slice::from_ref(&sl));
        assert!(broker.on_market(&update(&s, 30_000, "10.10", quote("10.11", "10.12", 1_000), None)).is_empty());
        // Triggered, but the ask is still above the limit; a bar that began before the order was
        // live (its low may have come before) does not count.
        let early = bar(0, "10.20", "9.90");
        assert!(broker
            .on_market(&update(&s, 60_000, "10.08", quote("10.09", "10.10", 1_000), Some(&early)))
            .is_empty());
        assert_eq!(broker.open_orders(), vec![id("sl1")]);
        // The trigger persists although the last trade fell back below the stop.
        let reports = broker.on_market(&update(&s, 130_000, "9.99", quote("10.03", "10.04", 1_000), None));
        assert_eq!(fills(&reports), vec![("sl1".into(), 100, dec("10.04"))]);

        // A bar the order was live for that opened past the stop and the limit: the trigger was
        // its first trade, so its low came after it, and the order fills at its limit, as a
        // backtest fills it.
        let mut broker = acked(PaperConfig::default(), std::slice::from_ref(&sl));
        assert!(broker.on_market(&update(&s, 100_000, "10.10", quote("10.11", "10.12", 1_000), None)).is_empty());
        let gapped = bar(60_000, "10.20", "9.90");
        let reports = broker.on_market(&update(&s, 120_000, "10.08", quote("10.09", "10.10", 1_000), Some(&gapped)));
        assert_eq!(fills(&reports), vec![("sl1".into(), 100, dec("10.05"))]);
        // One that never came back to the limit does not fill it.
        let mut broker = acked(PaperConfig::default(), &[sl]);
        assert!(broker.on_market(&update(&s, 100_000, "10.10", quote("10.11", "10.12", 1_000), None)).is_empty());
        let above = bar(60_000, "10.20", "10.06");
        assert!(broker
            .on_market(&update(&s, 120_000, "10.08", quote("10.09", "10.10", 1_000), Some(&above)))
            .is_empty());
    }

    /// A stop-limit buy whose stop the bar traded through between two quotes, both past the
    /// limit, fills at the stop when the bar completes: the price the backtest gives it, which
    /// keeps live and backtest trading the same day the same way.
    #[test]
    fn stop_limit_triggered_between_quotes_fills_at_the_stop_the_bar_traded() {
        let s = sym();
        let sl = order("sl2", Side::Buy, OrderType::StopLimit, TimeInForce::Day, 100, Some("10.05"), Some("10.00"));
        let mut broker = acked(PaperConfig::default(), &[sl]);
        assert!(broker.on_market(&update(&s, 75_000, "9.95", quote("9.95", "9.96", 1_000), None)).is_empty());
        // The next quote is already past the limit: triggered, not filled.
        assert!(broker.on_market(&update(&s, 90_000, "10.10", quote("10.10", "10.11", 1_000), None)).is_empty());
        // The bar opened at 9.94, below the stop, and rose through it to 10.12.
        let b = Bar { open: px("9.94"), ..bar(60_000, "10.12", "9.90") };
        let reports = broker.on_market(&update(&s, 120_000, "10.09", quote("10.09", "10.10", 1_000), Some(&b)));
        assert_eq!(fills(&reports), vec![("sl2".into(), 100, dec("10.00"))]);
    }

    /// A protective sell: a stop at 9.50 one-cancels-other with a take-profit at 10.50.
    fn protective(raw_id: &str, quantity: u64) -> Order {
        let mut o = order(raw_id, Side::Sell, OrderType::Stop, TimeInForce::Gtc, quantity, None, Some("9.50"));
        o.legs = Some(tradeops_core::orders::ExitLegs {
            stop_price: dec("9.50"),
            stop_limit_price: None,
            take_profit: Some(dec("10.50")),
        });
        o
    }

    #[test]
    fn a_protective_order_fills_at_its_target_or_at_its_stop_whichever_comes_first() {
        let s = sym();
        let mut broker = acked(no_slippage(), &[protective("p1", 100)]);
        assert!(broker.on_market(&update(&s, 100, "10.00", quote("9.99", "10.00", 1_000), None)).is_empty());
        let reports = broker.on_market(&update(&s, 200, "10.50", quote("10.50", "10.51", 1_000), None));
        assert_eq!(fills(&reports), vec![("p1".into(), 100, dec("10.50"))], "the take-profit leg");
        assert!(broker.open_orders().is_empty(), "one fill ends both legs");

        let mut broker = acked(no_slippage(), &[protective("p2", 100)]);
        let reports = broker.on_market(&update(&s, 100, "9.50", quote("9.48", "9.49", 1_000), None));
        assert_eq!(fills(&reports), vec![("p2".into(), 100, dec("9.48"))], "the stop leg");
        assert!(broker.on_market(&update(&s, 200, "10.60", quote("10.60", "10.61", 1_000), None)).is_empty());
    }

    #[test]
    fn an_account_refuses_a_sell_of_shares_it_holds_for_another_order_as_a_venue_does() {
        let s = sym();
        let mut broker = PaperBroker::new(no_slippage());
        broker.open_account([(s.clone(), 100)]);
        broker.submit(&protective("p1", 100), t(0));
        broker.submit(&market("close", Side::Sell, 100), t(0));
        let reports = broker.advance(t(50));
        let rejected: Vec<_> = reports
            .iter()
            .filter_map(|r| match r {
                BrokerReport::Rejected { client_order_id, reason, .. } => {
                    Some((client_order_id.as_str(), reason.as_str()))
                }
                _ => None,
            })
            .collect();
        assert_eq!(rejected, [("close", "insufficient qty available for order (requested: 100, available: 0)")]);
        broker.cancel(&id("p1"), t(50));
        broker.advance(t(100));
        broker.submit(&market("close2", Side::Sell, 100), t(100));
        broker.advance(t(150));
        let reports = broker.on_market(&update(&s, 200, "10.00", quote("9.99", "10.00", 1_000), None));
        assert_eq!(fills(&reports), vec![("close2".into(), 100, dec("9.99"))], "freed, the shares sell");
        broker.submit(&market("short", Side::Sell, 1), t(300));
        assert!(matches!(broker.advance(t(350))[..], [BrokerReport::Rejected { .. }]), "sold out: no short");
    }

    #[test]
    fn stop_sell_is_symmetric() {
        let s = sym();
        let stop = |raw_id: &str| order(raw_id, Side::Sell, OrderType::Stop, TimeInForce::Day, 100, None, Some("9.50"));
        let config = PaperConfig { slippage_bps: 10.0, ..PaperConfig::default() };
        let mut broker = acked(config.clone(), &[stop("ss1")]);
        assert!(broker.on_market(&update(&s, 100, "9.60", quote("9.59", "9.60", 1_000), None)).is_empty());
        // Bid above the stop: no better than the stop, minus 10 bps (0.95¢ → 1¢).
        let reports = broker.on_market(&update(&s, 200, "9.50", quote("9.52", "9.53", 1_000), None));
        assert_eq!(fills(&reports), vec![("ss1".into(), 100, dec("9.49"))]);

        // A bar low at the stop triggers; a bid below the stop fills at the bid minus slippage.
        let mut broker = acked(config, &[stop("ss2")]);
        let b = bar(60_000, "9.70", "9.50");
        let reports = broker.on_market(&update(&s, 120_000, "9.45", quote("9.40", "9.41", 1_000), Some(&b)));
        assert_eq!(fills(&reports), vec![("ss2".into(), 100, dec("9.39"))]);

        // Stop-limit sell: triggered, but no fill below its limit.
        let sl = order("ss3", Side::Sell, OrderType::StopLimit, TimeInForce::Day, 100, Some("9.45"), Some("9.50"));
        let mut broker = acked(no_slippage(), &[sl]);
        assert!(broker.on_market(&update(&s, 100, "9.40", quote("9.40", "9.41", 1_000), None)).is_empty());
        let reports = broker.on_market(&update(&s, 200, "9.52", quote("9.46", "9.47", 1_000), None));
        assert_eq!(fills(&reports), vec![("ss3".into(), 100, dec("9.46"))]);
    }

    #[test]
    fn cancel_lands_after_the_cancel_latency() {
        let mut broker = acked(PaperConfig::default(), &[market("c1", Side::Buy, 100)]);
        broker.cancel(&id("c1"), t(100));
        assert!(broker.advance(t(149)).is_empty());
        assert_eq!(broker.open_orders(), vec![id("c1")], "still working until the cancel lands");
        assert_eq!(broker.advance(t(150)), vec![BrokerReport::Canceled { client_order_id: id("c1"), at: t(150) }]);
        assert!(broker.open_orders().is_empty());
    }

    #[test]
    fn a_cancel_before_the_ack_lands_after_it() {
        let config = PaperConfig { ack_latency_ms: 200, cancel_latency_ms: 10, ..PaperConfig::default() };
        let mut broker = PaperBroker::new(config);
        broker.submit(&market("c1", Side::Buy, 100), t(0));
        broker.cancel(&id("c1"), t(5));
        assert!(broker.advance(t(199)).is_empty());
        assert_eq!(
            broker.advance(t(200)),
            vec![
                BrokerReport::Accepted { client_order_id: id("c1"), broker_order_id: "PB-1".into(), at: t(200) },
                BrokerReport::Canceled { client_order_id: id("c1"), at: t(200) },
            ]
        );
    }

    #[test]
    fn a_fill_racing_a_cancel_is_reported_and_the_state_machine_takes_it() {
        let s = sym();
        let mut engine_order = market("r1", Side::Buy, 500);
        let mut broker = PaperBroker::new(no_slippage());
        broker.submit(&engine_order, t(0));
        let mut reports = broker.advance(t(50));
        broker.cancel(&id("r1"), t(100));
        engine_order.apply(OrderEvent::CancelRequested, t(100)).expect("cancel request");
        // The quote moves before the cancel lands: the order still fills what it can.
        let raced = broker.on_market(&update(&s, 120, "10.00", quote("9.99", "10.00", 200), None));
        assert_eq!(fills(&raced), vec![("r1".into(), 200, dec("10.00"))]);
        reports.extend(raced);
        let landed = broker.on_market(&update(&s, 150, "10.00", quote("9.99", "10.00", 200), None));
        assert_eq!(landed, vec![BrokerReport::Canceled { client_order_id: id("r1"), at: t(150) }], "no fill after it");
        reports.extend(landed);
        let mut last = OrderStatus::New;
        for r in &reports {
            last = engine_order.apply(r.order_event(), r.at()).expect("legal transition");
        }
        assert_eq!((last, engine_order.filled_quantity), (OrderStatus::Canceled, 200));

        // If the race fills the whole order, the cancel comes back rejected.
        let mut broker = acked(no_slippage(), &[market("r2", Side::Buy, 100)]);
        broker.cancel(&id("r2"), t(100));
        assert_eq!(fills(&broker.on_market(&update(&s, 120, "10.00", quote("9.99", "10.00", 200), None))).len(), 1);
        assert_eq!(
            broker.advance(t(150)),
            vec![BrokerReport::CancelRejected {
                client_order_id: id("r2"),
                reason: "too late to cancel: order already filled".into(),
                at: t(150)
            }]
        );
    }

    #[test]
    fn cancel_of_an_unknown_id_is_rejected() {
        let mut broker = PaperBroker::new(PaperConfig::default());
        broker.cancel(&id("ghost"), t(0));
        assert!(broker.advance(t(49)).is_empty());
        assert_eq!(
            broker.advance(t(50)),
            vec![BrokerReport::CancelRejected {
                client_order_id: id("ghost"),
                reason: "unknown order".into(),
                at: t(50)
            }]
        );
    }

    #[test]
    fn malformed_and_duplicate_orders_are_rejected_at_ack_time() {
        let mut broker = PaperBroker::new(PaperConfig::default());
        broker.submit(&order("x1", Side::Buy, OrderType::Limit, TimeInForce::Day, 100, None, None), t(0));
        broker.submit(&order("x2", Side::Buy, OrderType::Stop, TimeInForce::Day, 100, None, Some("0")), t(0));
        broker.submit(&market("x3", Side::Buy, 0), t(0));
        broker.submit(&market("ok", Side::Buy, 100), t(0));
        broker.submit(&market("ok", Side::Buy, 100), t(10));
        assert_eq!(broker.open_orders(), vec![id("ok")]);
        let reports = broker.advance(t(60));
        let kinds: Vec<_> = reports
            .iter()
            .map(|r| match r {
                BrokerReport::Rejected { client_order_id, reason, at } => format!("{client_order_id} {at:?} {reason}"),
                BrokerReport::Accepted { client_order_id, broker_order_id, .. } => {
                    format!("{client_order_id} accepted {broker_order_id}")
                }
                other => format!("{other:?}"),
            })
            .collect();
        assert_eq!(kinds.len(), 5);
        assert!(kinds[0].starts_with("x1") && kinds[0].contains("needs a limit price"), "{kinds:?}");
        assert!(kinds[1].starts_with("x2") && kinds[1].contains("stop price must be positive"), "{kinds:?}");
        assert!(kinds[2].starts_with("x3") && kinds[2].contains("quantity"), "{kinds:?}");
        assert_eq!(kinds[3], "ok accepted PB-1");
        assert!(kinds[4].starts_with("ok") && kinds[4].contains("duplicate"), "{kinds:?}");
        assert_eq!(broker.open_orders(), vec![id("ok")], "the duplicate does not disturb the original");
    }

    #[test]
    fn ioc_fills_what_the_first_update_allows_and_cancels_the_rest() {
        let s = sym();
        let ioc = order("i1", Side::Buy, OrderType::Market, TimeInForce::Ioc, 500, None, None);
        let mut broker = PaperBroker::new(no_slippage());
        broker.submit(&ioc, t(0));
        // The ack lands at the start of this update, then the order takes what is there.
        let reports = broker.on_market(&update(&s, 60, "10.00", quote("9.99", "10.00", 200), None));
        assert_eq!(
            reports,
            vec![
                BrokerReport::Accepted { client_order_id: id("i1"), broker_order_id: "PB-1".into(), at: t(50) },
                BrokerReport::Filled {
                    client_order_id: id("i1"),
                    execution: Execution {
                        execution_id: "P-1".into(),
                        timestamp: t(60),
                        quantity: 200,
                        price: dec("10.00"),
                        fee: Decimal::ZERO
                    }
                },
                BrokerReport::Canceled { client_order_id: id("i1"), at: t(60) },
            ]
        );
        assert!(broker.open_orders().is_empty());

        // A non-marketable IOC limit is canceled whole.
        let ioc = order("i2", Side::Buy, OrderType::Limit, TimeInForce::Ioc, 100, Some("9.90"), None);
        let mut broker = acked(no_slippage(), &[ioc]);
        assert_eq!(
            broker.on_market(&update(&s, 60, "10.00", quote("9.99", "10.00", 200), None)),
            vec![BrokerReport::Canceled { client_order_id: id("i2"), at: t(60) }]
        );
    }

    #[test]
    fn day_orders_expire_at_the_close_and_gtc_stays() {
        let s = sym();
        let orders = [
            order("day", Side::Buy, OrderType::Limit, TimeInForce::Day, 100, Some("9.00"), None),
            order("gtc", Side::Buy, OrderType::Limit, TimeInForce::Gtc, 100, Some("9.00"), None),
        ];
        let mut broker = acked(PaperConfig::default(), &orders);
        assert!(broker.on_market(&update(&s, 100, "10.00", quote("9.99", "10.00", 1_000), None)).is_empty());
        broker.submit(&market("late", Side::Buy, 100), t(1_000)); // not acknowledged by the close
        let close = t(1_010);
        assert_eq!(
            broker.expire_day_orders(close),
            vec![
                BrokerReport::Expired { client_order_id: id("day"), at: close },
                BrokerReport::Expired { client_order_id: id("late"), at: close },
            ]
        );
        assert_eq!(broker.open_orders(), vec![id("gtc")]);
        assert!(broker.advance(t(2_000)).is_empty(), "the expired order's ack is dropped");
        let reports = broker.on_market(&update(&s, 3_000, "8.99", quote("8.98", "8.99", 1_000), None));
        assert_eq!(fills(&reports), vec![("gtc".into(), 100, dec("8.99"))], "GTC works on");
    }

    /// A scripted session touching every path; returns every report.
    fn session() -> Vec<BrokerReport> {
        let s = sym();
        let config = PaperConfig { fee_per_share: dec("0.0035"), ..PaperConfig::default() };
        let mut broker = PaperBroker::new(config);
        let mut reports = Vec::new();
        broker.submit(&market("m1", Side::Buy, 700), t(0));
        broker.submit(&order("l1", Side::Buy, OrderType::Limit, TimeInForce::Gtc, 300, Some("9.95"), None), t(5));
        broker.submit(&order("st", Side::Sell, OrderType::Stop, TimeInForce::Day, 200, None, Some("9.90")), t(5));
        broker.submit(&order("io", Side::Sell, OrderType::Market, TimeInForce::Ioc, 900, None, None), t(7));
        broker.cancel(&id("nope"), t(8));
        for (k, cents) in [1000i64, 999, 996, 993, 989, 992, 1001].into_iter().enumerate() {
            let at = 60_000 * (k as i64 + 1);
            let last = Price::from_cents(cents);
            let q = Quote {
                bid: Price::from_cents(cents - 1),
                ask: Price::from_cents(cents),
                bid_size: 250,
                ask_size: 200,
            };
            let b = Bar {
                start: t(at - 60_000),
                open: last,
                high: last,
                low: Price::from_cents(cents - 3),
                close: last,
                volume: 1,
            };
            if k == 3 {
                broker.cancel(&id("l1"), t(at - 10));
            }
            reports.extend(broker.on_market(&MarketUpdate {
                symbol: &s,
                at: t(at),
                last,
                quote: q,
                bar: Some(&b),
                halted: false,
                session: tradeops_core::calendar::SessionPhase::Regular,
            }));
        }
        reports.extend(broker.expire_day_orders(t(600_000)));
        reports
    }

    #[test]
    fn the_same_inputs_produce_identical_reports() {
        let first = session();
        assert!(first.len() >= 8, "{first:?}");
        assert_eq!(first, session());
        let mut ids: Vec<_> = first
            .iter()
            .filter_map(|r| match r {
                BrokerReport::Filled { execution, .. } => Some(execution.execution_id.clone()),
                _ => None,
            })
            .collect();
        let n = ids.len();
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), n, "execution ids are unique");
        assert!(first.windows(2).all(|w| w[0].at() <= w[1].at()), "reports come in time order");
    }
}

#[cfg(test)]
mod restore_tests {
    use super::*;
    use tradeops_core::orders::OrderEvent;
    use tradeops_core::time::parse_ts;

    #[test]
    fn restored_orders_keep_working_without_a_second_ack_and_ids_stay_unique() {
        let at = parse_ts("2026-11-20T15:00:00Z").unwrap();
        let mut order = Order::new(
            ClientOrderId::parse("r-1").unwrap(),
            Symbol::parse("ABCD").unwrap(),
            Side::Buy,
            OrderType::Market,
            TimeInForce::Day,
            10,
            None,
            None,
            at,
        );
        order.apply(OrderEvent::Accepted { broker_order_id: "PB-old-1".into() }, at).unwrap();
        let mut broker = PaperBroker::new(PaperConfig::default()).with_id_prefix("s2-");
        assert!(broker.restore(&order, at));
        assert!(broker.advance(at + chrono::Duration::seconds(1)).is_empty(), "no second ack");
        let symbol = Symbol::parse("ABCD").unwrap();
        let quote = tradeops_core::market::Quote {
            bid: Price::from_cents(999),
            ask: Price::from_cents(1000),
            bid_size: 100,
            ask_size: 100,
        };
        let update = MarketUpdate {
            symbol: &symbol,
            at: at + chrono::Duration::seconds(2),
            last: Price::from_cents(1000),
            quote,
            bar: None,
            halted: false,
            session: tradeops_core::calendar::SessionPhase::Regular,
        };
        let reports = broker.on_market(&update);
        let BrokerReport::Filled { execution, .. } = &reports[0] else { panic!("{reports:?}") };
        assert!(execution.execution_id.starts_with("P-s2-"), "{}", execution.execution_id);
    }

    #[test]
    fn lookup_tells_working_cancelling_closed_and_unknown_orders_apart() {
        let at = parse_ts("2026-11-20T15:00:00Z").unwrap();
        let make = |id: &str| {
            Order::new(
                ClientOrderId::parse(id).unwrap(),
                Symbol::parse("ABCD").unwrap(),
                Side::Buy,
                OrderType::Limit,
                TimeInForce::Gtc,
                10,
                Some(Decimal::new(5, 0)),
                None,
                at,
            )
        };
        let mut broker = PaperBroker::new(PaperConfig::default());
        let never_acked = make("written-ahead");
        assert!(!broker.restore(&never_acked, at), "an order never acknowledged is not taken back");
        assert_eq!(broker.lookup(&never_acked.client_order_id), BrokerLookup::Unknown);

        let mut acked = make("acked");
        acked.apply(OrderEvent::Accepted { broker_order_id: "PB-1".into() }, at).unwrap();
        assert!(broker.restore(&acked, at));
        let id = acked.client_order_id.clone();
        let open = |cancel_pending| BrokerOpenOrder { client_order_id: id.clone(), cancel_pending };
        assert_eq!(broker.lookup(&id), BrokerLookup::Open(open(false)));
        broker.cancel(&id, at);
        assert_eq!(broker.lookup(&id), BrokerLookup::Open(open(true)));
        assert_eq!(broker.open_order_states(), vec![open(true)]);
        let reports = broker.advance(at + chrono::Duration::seconds(1));
        assert!(matches!(&reports[..], [BrokerReport::Canceled { .. }]), "{reports:?}");
        assert_eq!(broker.lookup(&id), BrokerLookup::Closed);
        assert!(broker.open_order_states().is_empty());
    }
}

#[cfg(test)]
mod execution_tests {
    use super::*;
    use tradeops_core::orders::OrderEvent;
    use tradeops_core::time::parse_ts;

    fn limit(id: &str, at: Timestamp) -> Order {
        Order::new(
            ClientOrderId::parse(id).unwrap(),
            Symbol::parse("ABCD").unwrap(),
            Side::Buy,
            OrderType::Limit,
            TimeInForce::Day,
            10,
            Some(Decimal::new(5, 0)),
            None,
            at,
        )
    }

    #[tokio::test]
    async fn the_trait_answers_as_the_matching_engine_does() {
        let at = parse_ts("2026-11-20T15:00:00Z").unwrap();
        let paper: &dyn ExecutionBroker = &PaperExecution::new(PaperBroker::new(PaperConfig::default()));
        assert_eq!(paper.name(), "paper");
        let mut acked = limit("acked", at);
        acked.apply(OrderEvent::Accepted { broker_order_id: "PB-1".into() }, at).unwrap();
        let never_acked = limit("written-ahead", at);
        let unknown = paper.restore(&[acked.clone(), never_acked.clone()], at).await;
        assert_eq!(unknown, vec![never_acked.client_order_id.clone()]);
        assert_eq!(paper.lookup(&never_acked.client_order_id).await, Ok(BrokerLookup::Unknown));

        paper.submit(&limit("new", at), at).await.unwrap();
        let open: Vec<_> = paper.open_orders().await.unwrap().into_iter().map(|o| o.client_order_id).collect();
        assert_eq!(open, vec![acked.client_order_id.clone(), ClientOrderId::parse("new").unwrap()]);
        let reports = paper.poll(at + chrono::Duration::milliseconds(50)).await;
        assert!(matches!(&reports[..], [BrokerReport::Accepted { .. }]), "{reports:?}");
        paper.cancel(&acked.client_order_id, at).await.unwrap();
        let expired = paper.expire_day_orders(at + chrono::Duration::seconds(1)).await;
        assert!(matches!(&expired[..], [BrokerReport::Canceled { .. }, BrokerReport::Expired { .. }]), "{expired:?}");
        assert!(paper.open_orders().await.unwrap().is_empty());
    }
}
