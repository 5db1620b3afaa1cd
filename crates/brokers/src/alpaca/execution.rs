//! The Alpaca execution adapter: [`AlpacaExecution`] assembles the REST client
//! ([`TradingClient`]) and the trade-updates stream ([`TradeUpdatesStream`]) into one
//! [`ExecutionBroker`]. It owns what joins the two: the map of our client order ids to Alpaca's
//! order ids (Alpaca cancels by its own id), the set of orders submitted and not yet seen final,
//! and the stream's gap fill ([`AlpacaOrders`], a [`GapFill`]) built from them.
//!
//! A protective order with a take-profit is an `oco` at Alpaca (CONTRACT §11): two orders there,
//! one here. Every read of Alpaca's orders nests each group's legs under its top-level order
//! (`nested=true`; a lookup by client order id is read again by id, nested), so the stop leg is
//! never listed, looked up, adopted or cancelled as an order of its own, and the stream's mapper
//! learns each group from those reads (also after a restart, from the first gap fill's).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use rust_decimal::prelude::ToPrimitive;
use rust_decimal::Decimal;
use tradeops_core::broker::{BrokerLookup, BrokerOpenOrder, BrokerReport};
use tradeops_core::clock::Clock;
use tradeops_core::orders::{ClientOrderId, Order};
use tradeops_core::time::Timestamp;

use super::rest::{AlpacaCredentials, ClientBuildError, TradingClient};
use super::stream::{BackoffPolicy, GapFill, StreamConfig, StreamState, TradeUpdatesStream};
use super::wire;
use crate::execution::{BrokerError, ExecutionBroker};

/// Where and how the adapter reaches Alpaca.
#[derive(Clone, Debug)]
pub struct AlpacaConfig {
    /// The Trading API's base URL (`https://paper-api.alpaca.markets`, or a stand-in).
    pub base_url: String,
    /// The trade-updates stream (`wss://paper-api.alpaca.markets/stream`, or a stand-in).
    pub stream_url: String,
    /// `Debug` hides the secret.
    pub credentials: AlpacaCredentials,
    /// Bound of every REST request.
    pub request_timeout: Duration,
    pub backoff: BackoffPolicy,
    /// The first gap fill asks for orders changed since this time (the service's start).
    pub gap_fill_from: Timestamp,
    /// See [`StreamConfig::gap_overlap`].
    pub gap_overlap: Duration,
    /// See [`StreamConfig::auth_timeout`].
    pub auth_timeout: Duration,
    /// See [`StreamConfig::idle_timeout`].
    pub idle_timeout: Duration,
    /// The stream connects only once [`ExecutionBroker::restore`] has been called (the
    /// service, which always restores its book first); otherwise at once.
    pub wait_for_restore: bool,
}

/// An order submitted through the adapter and not yet seen final.
#[derive(Clone, Copy, Debug)]
struct Unfinished {
    quantity: u64,
    filled: u64,
}

#[derive(Debug, Default)]
struct Book {
    /// Alpaca's order id of every client order id learned (submit replies, lookups, lists,
    /// stream reports).
    broker_ids: HashMap<ClientOrderId, Arc<str>>,
    /// Orders submitted (or being submitted) and not yet seen final.
    unfinished: HashMap<ClientOrderId, Unfinished>,
}

/// Alpaca's orders as the adapter knows them: the REST client plus what it learned. It is the
/// stream's [`GapFill`] (held by the stream's task, which must not hold the adapter itself, or
/// dropping the adapter would never stop the task).
#[derive(Debug)]
pub struct AlpacaOrders {
    client: TradingClient,
    book: Mutex<Book>,
}

impl AlpacaOrders {
    pub fn new(client: TradingClient) -> Self {
        Self { client, book: Mutex::new(Book::default()) }
    }

    fn book(&self) -> std::sync::MutexGuard<'_, Book> {
        self.book.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Alpaca's id of our order, when learned.
    pub fn broker_order_id(&self, id: &ClientOrderId) -> Option<Arc<str>> {
        self.book().broker_ids.get(id).cloned()
    }

    /// The client order ids submitted and not yet seen final, sorted.
    pub fn unfinished(&self) -> Vec<ClientOrderId> {
        let mut ids: Vec<ClientOrderId> = self.book().unfinished.keys().cloned().collect();
        ids.sort();
        ids
    }

    /// `orders` with each order of a group that came alone (a leg, an order that replaced one)
    /// replaced by its group's top-level order with the legs nested, each group once. An order
    /// of a group whose top-level order cannot be found is left out: a leg is never an order of
    /// its own.
    async fn nest(&self, orders: Vec<wire::Order>) -> Result<Vec<wire::Order>, BrokerError> {
        let mut nested: Vec<wire::Order> = Vec::with_capacity(orders.len());
        let mut seen: HashSet<String> = HashSet::new();
        let members: HashSet<String> =
            orders.iter().flat_map(|o| o.legs.iter().flatten().map(|l| l.id.clone())).collect();
        for order in orders {
            if members.contains(&order.id) {
                continue; // listed under its top-level order too
            }
            let order = if order.in_group() && order.legs.is_none() {
                match self.group_of(&order).await? {
                    Some(parent) => parent,
                    None => {
                        tracing::warn!(order = %order.id, "an order of a group without its group: left out");
                        continue;
                    }
                }
            } else {
                order
            };
            if seen.insert(order.id.clone()) {
                nested.push(order);
            }
        }
        Ok(nested)
    }

    /// Records what an order snapshot from Alpaca tells: its id, and whether it is final. An
    /// open order of ours not yet tracked (one sent by an earlier process, seen in the open list
    /// of the first gap fill or of a reconciliation) joins the unfinished set, so a gap fill
    /// finds it even when it closes while the stream is down.
    fn learn_order(&self, order: &wire::Order) {
        let Ok(id) = ClientOrderId::parse(&order.client_order_id) else { return };
        let mut book = self.book();
        if order.is_final() {
            book.unfinished.remove(&id);
        } else if !book.unfinished.contains_key(&id) {
            let shares = |d: Option<Decimal>| d.and_then(|d| d.trunc().to_u64()).unwrap_or(0);
            let tracked = Unfinished { quantity: shares(order.qty), filled: shares(order.filled_qty) };
            book.unfinished.insert(id.clone(), tracked);
        }
        book.broker_ids.entry(id).or_insert_with(|| order.id.as_str().into());
    }

    /// Records what a stream report tells: an id on acceptance; the end of an order on a
    /// cancel, expiry, rejection or the fill that completes it.
    fn learn_report(&self, report: &BrokerReport) {
        let mut book = self.book();
        match report {
            BrokerReport::Accepted { client_order_id, broker_order_id, .. } => {
                book.broker_ids.entry(client_order_id.clone()).or_insert_with(|| broker_order_id.clone());
            }
            BrokerReport::Filled { client_order_id, execution } => {
                if let Some(tracked) = book.unfinished.get_mut(client_order_id) {
                    tracked.filled = tracked.filled.saturating_add(execution.quantity);
                    if tracked.filled >= tracked.quantity {
                        book.unfinished.remove(client_order_id);
                    }
                }
            }
            BrokerReport::Canceled { client_order_id, .. }
            | BrokerReport::Rejected { client_order_id, .. }
            | BrokerReport::Expired { client_order_id, .. } => {
                book.unfinished.remove(client_order_id);
            }
            BrokerReport::CancelRejected { .. } => {}
        }
    }
}

#[async_trait]
impl GapFill for AlpacaOrders {
    /// Every order that may have changed since `after`, deduplicated by Alpaca's id:
    /// 1. all open orders (`status=open`);
    /// 2. every order *submitted* after `after` (`status=all&after=…`, paged): Alpaca filters
    ///    `after` by submission time, so this alone misses an order submitted before the gap
    ///    and filled, canceled or expired during it; hence
    /// 3. each order this adapter submitted and has not yet seen final, looked up by client
    ///    order id (an order sent before `after` that closed in the gap is among these).
    ///
    /// The set holds what this process submitted and every open order of ours it has seen
    /// (so an earlier process's orders open at the first connection are covered); an order of an
    /// earlier process that closed before this process saw it open is reported only when its id
    /// is one the engine generates (submitted after `after`): the engine records it if its
    /// database lacks it (an earlier term sent it and could not write it), and drops the report
    /// otherwise. An order looked up and not found (a submit that never landed)
    /// stays in the set and is looked up again at each gap fill. Any failed request fails the
    /// whole gap fill, which the stream retries on its next connection.
    async fn orders_updated_since(&self, after: DateTime<Utc>) -> Result<Vec<wire::Order>, BrokerError> {
        // Orders this process knows (sent, learned or restored) before the fill: an ended order
        // outside them ended before this process started — the engine holds it ended already
        // (or never placed it) — and nothing of it is reported.
        let tracked: HashSet<String> = {
            let book = self.book();
            book.broker_ids.keys().chain(book.unfinished.keys()).map(|id| id.as_str().to_string()).collect()
        };
        let mut orders = self.client.open_orders().await?;
        orders.extend(self.client.orders_updated_since(after).await?);
        let mut seen: HashSet<String> = HashSet::new();
        orders.retain(|o| seen.insert(o.id.clone()));
        let mut orders = self.nest(orders).await?;
        seen = orders.iter().flat_map(|o| o.members().map(|m| m.id.clone())).collect();
        let listed: HashSet<String> = orders.iter().map(|o| o.client_order_id.clone()).collect();
        for id in self.unfinished() {
            if listed.contains(id.as_str()) {
                continue;
            }
            if let Some(order) = self.client.by_client_order_id_nested(&id).await? {
                if seen.insert(order.id.clone()) {
                    orders.push(order);
                }
            }
        }
        // An ended order of the engine's own ids outside them may be one an earlier term sent
        // and could not write (its database link cut while it reached Alpaca): reported, so
        // the engine records it unless its database holds it.
        orders.retain(|o| {
            !o.is_final()
                || tracked.contains(&o.client_order_id)
                || ClientOrderId::parse(&o.client_order_id).is_ok_and(|id| id.is_engines())
        });
        for order in &orders {
            self.learn_order(order);
        }
        Ok(orders)
    }

    async fn nested_order(&self, broker_order_id: &str) -> Result<Option<wire::Order>, BrokerError> {
        self.client.nested(broker_order_id).await
    }

    /// The member read again by its id with `nested=true` (a top-level order comes back with
    /// its legs); a leg comes back alone, and its group is the top-level order among the
    /// symbol's orders since a minute before it was submitted whose legs (or replacements, or
    /// `group_id`) include it.
    async fn group_of(&self, member: &wire::Order) -> Result<Option<wire::Order>, BrokerError> {
        if member.legs.as_ref().is_some_and(|l| !l.is_empty()) {
            return Ok(Some(member.clone()));
        }
        if let Some(order) = self.client.nested(&member.id).await? {
            if order.legs.as_ref().is_some_and(|l| !l.is_empty()) {
                return Ok(Some(order));
            }
        }
        let Some(submitted) = member.submitted_at.or(member.created_at) else { return Ok(None) };
        let listed = self.client.group_orders(&member.symbol, submitted - chrono::Duration::minutes(1)).await?;
        Ok(listed.into_iter().find(|o| {
            o.legs.as_ref().is_some_and(|l| !l.is_empty())
                && (o.members().any(|m| m.id == member.id || m.replaced_by.as_deref() == Some(member.id.as_str()))
                    || member.group_id.as_ref().is_some_and(|g| o.group_id.as_ref() == Some(g)))
        }))
    }
}

/// Alpaca behind [`ExecutionBroker`]: orders over REST, their outcome over the trade-updates
/// stream, whose task runs from [`AlpacaExecution::start`] until the adapter is dropped.
#[derive(Debug)]
pub struct AlpacaExecution {
    orders: Arc<AlpacaOrders>,
    stream: TradeUpdatesStream,
}

impl AlpacaExecution {
    /// Builds the REST client and spawns the stream's task on the current Tokio runtime.
    pub fn start(config: AlpacaConfig, clock: Arc<dyn Clock>) -> Result<Arc<Self>, ClientBuildError> {
        let client = TradingClient::new(&config.base_url, &config.credentials, config.request_timeout, clock.clone())?;
        let orders = Arc::new(AlpacaOrders::new(client));
        let stream_config = StreamConfig {
            url: config.stream_url,
            key_id: config.credentials.key_id.clone(),
            secret_key: config.credentials.secret_key.clone(),
            backoff: config.backoff,
            gap_fill_from: config.gap_fill_from,
            gap_overlap: config.gap_overlap,
            auth_timeout: config.auth_timeout,
            idle_timeout: config.idle_timeout,
        };
        let stream = match config.wait_for_restore {
            true => TradeUpdatesStream::spawn_after_restore(stream_config, orders.clone(), clock),
            false => TradeUpdatesStream::spawn(stream_config, orders.clone(), clock),
        };
        Ok(Arc::new(Self { orders, stream }))
    }

    /// The stream's connection, for health.
    pub fn stream_state(&self) -> StreamState {
        self.stream.health()
    }

    /// What the adapter learned of Alpaca's orders.
    pub fn orders(&self) -> &Arc<AlpacaOrders> {
        &self.orders
    }

    /// Alpaca's id of our order: learned, else looked up; `UnknownOrder` when Alpaca has none.
    async fn broker_order_id(&self, id: &ClientOrderId) -> Result<Arc<str>, BrokerError> {
        if let Some(known) = self.orders.broker_order_id(id) {
            return Ok(known);
        }
        match self.orders.client.by_client_order_id_nested(id).await? {
            Some(order) => {
                self.learn(&order);
                Ok(order.id.as_str().into())
            }
            None => Err(BrokerError::UnknownOrder(id.clone())),
        }
    }
}

impl AlpacaExecution {
    /// Records an order read from Alpaca: in the book, and its group (legs nested) in the
    /// stream's mapper.
    fn learn(&self, order: &wire::Order) {
        self.orders.learn_order(order);
        self.stream.learn_group(order);
    }
}

#[async_trait]
impl GapFill for AlpacaExecution {
    async fn orders_updated_since(&self, after: DateTime<Utc>) -> Result<Vec<wire::Order>, BrokerError> {
        self.orders.orders_updated_since(after).await
    }

    async fn nested_order(&self, broker_order_id: &str) -> Result<Option<wire::Order>, BrokerError> {
        self.orders.nested_order(broker_order_id).await
    }

    async fn group_of(&self, member: &wire::Order) -> Result<Option<wire::Order>, BrokerError> {
        self.orders.group_of(member).await
    }
}

/// An open Alpaca order as an order of ours (what reconciliation adopts), when tradeops can
/// represent it: a working market, limit, stop or stop-limit order, day/gtc/ioc, whole shares;
/// or an `oco` sell read with its stop leg nested, as the protective order it is (CONTRACT §11:
/// a stop with its take-profit as [`ExitLegs`]). A leg alone, and any other group, is not.
pub fn adoptable(order: &wire::Order) -> Option<Order> {
    use tradeops_core::market::Side;
    use tradeops_core::orders::{OrderStatus, OrderType, TimeInForce};
    if order.is_final() {
        return None;
    }
    if order.in_group() {
        return adoptable_oco(order);
    }
    let client_order_id = ClientOrderId::parse(&order.client_order_id).ok()?;
    let symbol = tradeops_core::Symbol::parse(&order.symbol).ok()?;
    let side = match order.side.as_str() {
        "buy" => Side::Buy,
        "sell" => Side::Sell,
        _ => return None,
    };
    let order_type = match order.order_type.as_deref()? {
        "market" => OrderType::Market,
        "limit" => OrderType::Limit,
        "stop" => OrderType::Stop,
        "stop_limit" => OrderType::StopLimit,
        _ => return None,
    };
    let time_in_force = match order.time_in_force.as_deref()? {
        "day" => TimeInForce::Day,
        "gtc" => TimeInForce::Gtc,
        "ioc" => TimeInForce::Ioc,
        _ => return None,
    };
    let whole = |d: Option<Decimal>| d.filter(|d| d.fract().is_zero()).and_then(|d| d.to_u64());
    let quantity = whole(order.qty)?;
    let filled = whole(order.filled_qty.or(Some(Decimal::ZERO)))?;
    let created_at = order.submitted_at.or(order.created_at)?;
    let mut adopted = Order::new(
        client_order_id,
        symbol,
        side,
        order_type,
        time_in_force,
        quantity,
        order.limit_price,
        order.stop_price,
        created_at,
    );
    adopted.broker_order_id = Some(order.id.as_str().into());
    adopted.status = if filled > 0 { OrderStatus::PartiallyFilled } else { OrderStatus::Accepted };
    adopted.filled_quantity = filled;
    adopted.filled_notional = order.filled_avg_price.unwrap_or_default() * Decimal::from(filled);
    adopted.updated_at = order.updated_at.unwrap_or(created_at);
    Some(adopted)
}

/// An `oco` sell (take-profit on top, its stop leg nested) as our protective order: a GTC stop
/// (stop-limit) sell whose legs carry the take-profit, its fills those of both orders.
fn adoptable_oco(order: &wire::Order) -> Option<Order> {
    use tradeops_core::orders::{ExitLegs, OrderStatus};
    if order.order_class.as_deref() != Some("oco") || order.side != "sell" {
        return None;
    }
    let stop = order.legs.as_ref()?.iter().find(|l| matches!(l.order_type.as_deref(), Some("stop" | "stop_limit")))?;
    let legs =
        ExitLegs { stop_price: stop.stop_price?, stop_limit_price: stop.limit_price, take_profit: order.limit_price };
    let top = wire::Order { order_class: None, legs: None, ..order.clone() };
    let mut adopted = adoptable(&wire::Order {
        order_type: Some(if legs.stop_limit_price.is_some() { "stop_limit" } else { "stop" }.into()),
        limit_price: legs.stop_limit_price,
        stop_price: Some(legs.stop_price),
        time_in_force: Some("gtc".into()),
        status: if top.is_final_alone() { "new".into() } else { top.status.clone() },
        ..top
    })?;
    let whole = |d: Option<Decimal>| d.filter(|d| d.fract().is_zero()).and_then(|d| d.to_u64()).unwrap_or(0);
    let filled: u64 = order.members().map(|m| whole(m.filled_qty)).sum();
    let notional: Decimal =
        order.members().map(|m| m.filled_avg_price.unwrap_or_default() * Decimal::from(whole(m.filled_qty))).sum();
    adopted.legs = Some(legs);
    adopted.filled_quantity = filled.min(adopted.quantity);
    adopted.filled_notional = notional;
    adopted.status = if filled > 0 { OrderStatus::PartiallyFilled } else { OrderStatus::Accepted };
    Some(adopted)
}

/// Our lookup answer for an order as Alpaca reports it.
pub fn lookup_of(order: &wire::Order) -> BrokerLookup {
    if order.is_final() {
        return BrokerLookup::Closed;
    }
    match ClientOrderId::parse(&order.client_order_id) {
        Ok(client_order_id) => {
            BrokerLookup::Open(BrokerOpenOrder { client_order_id, cancel_pending: order.status == "pending_cancel" })
        }
        Err(_) => BrokerLookup::Unknown,
    }
}

#[async_trait]
impl ExecutionBroker for AlpacaExecution {
    fn name(&self) -> &'static str {
        "alpaca"
    }

    fn reports_waiting(&self) -> Option<Arc<tokio::sync::Notify>> {
        Some(self.stream.queue().arrived())
    }

    fn connection(&self) -> Option<crate::execution::VenueConnection> {
        let state = self.stream.health();
        Some(crate::execution::VenueConnection {
            connected: state.connected,
            last_event_at: state.last_event_at,
            last_error: state.last_error,
            connections: state.connections,
        })
    }

    /// Sends the order exactly once ([`TradingClient::submit_once`]). The order joins the set
    /// the gap fill looks up before it is sent (a lost reply may still have placed it) and
    /// leaves it when Alpaca rejects it outright.
    async fn submit(&self, order: &Order, _now: Timestamp) -> Result<(), BrokerError> {
        let id = order.client_order_id.clone();
        self.orders.book().unfinished.insert(id.clone(), Unfinished { quantity: order.quantity, filled: 0 });
        match self.orders.client.submit_once(order).await {
            Ok(placed) => {
                // An `oco`'s reply nests its stop leg: the group is known before any of its
                // updates.
                self.learn(&placed);
                Ok(())
            }
            Err(error) => {
                if matches!(error, BrokerError::Rejected { .. }) {
                    self.orders.book().unfinished.remove(&id);
                }
                Err(error)
            }
        }
    }

    async fn cancel(&self, id: &ClientOrderId, _now: Timestamp) -> Result<(), BrokerError> {
        let broker_order_id = self.broker_order_id(id).await?;
        self.orders.client.cancel(id, &broker_order_id).await
    }

    /// The order by client order id, its legs nested: an `oco` of ours is open while either of
    /// its orders works; a leg's own id is not ours (`Unknown`).
    async fn lookup(&self, id: &ClientOrderId) -> Result<BrokerLookup, BrokerError> {
        if self.stream.is_leg_client_id(id.as_str()) {
            return Ok(BrokerLookup::Unknown);
        }
        match self.orders.client.by_client_order_id_nested(id).await? {
            Some(order) => {
                self.learn(&order);
                Ok(lookup_of(&order))
            }
            None => Ok(BrokerLookup::Unknown),
        }
    }

    /// Alpaca's open orders, groups nested: an `oco` of ours once, by our client order id (its
    /// stop leg never as an order of its own, which reconciliation would cancel or adopt).
    async fn open_orders(&self) -> Result<Vec<BrokerOpenOrder>, BrokerError> {
        let orders = self.orders.nest(self.orders.client.open_orders().await?).await?;
        let mut open: Vec<BrokerOpenOrder> = orders
            .iter()
            .filter_map(|order| {
                self.learn(order);
                if self.stream.is_leg_client_id(&order.client_order_id) {
                    return None;
                }
                match lookup_of(order) {
                    BrokerLookup::Open(open) => Some(open),
                    BrokerLookup::Closed | BrokerLookup::Unknown => None,
                }
            })
            .collect();
        open.sort_by(|a, b| a.client_order_id.cmp(&b.client_order_id));
        Ok(open)
    }

    /// Takes the engine's open orders at a restart as its own book: their Alpaca ids, the set
    /// the gap fill looks up (so an order that ended while the service was down is found), and
    /// what was already reported of each (accepted, the shares filled and the executions
    /// applied, so nothing is reported twice); then lets the stream connect. Returns the orders
    /// with no Alpaca id (never acknowledged), which the caller looks up.
    async fn restore(&self, orders: &[Order], _now: Timestamp) -> Vec<ClientOrderId> {
        let mut unsent = Vec::new();
        {
            let mut book = self.orders.book();
            for order in orders.iter().filter(|o| !o.status.is_final()) {
                let id = order.client_order_id.clone();
                book.unfinished
                    .insert(id.clone(), Unfinished { quantity: order.quantity, filled: order.filled_quantity });
                match &order.broker_order_id {
                    Some(broker_id) => {
                        book.broker_ids.insert(id, broker_id.clone());
                        self.stream.seed(
                            broker_id,
                            true,
                            Decimal::from(order.filled_quantity),
                            order.filled_notional,
                            order.executions.iter().map(|e| e.execution_id.to_string()),
                        );
                    }
                    None => unsent.push(id),
                }
            }
        }
        self.stream.restored();
        unsent
    }

    /// `GET /v2/account`.
    async fn account(&self) -> Result<Option<crate::execution::VenueAccount>, BrokerError> {
        let account = self.orders.client.account().await?;
        Ok(Some(crate::execution::VenueAccount {
            cash: account.cash,
            equity: account.equity,
            buying_power: account.buying_power,
            last_equity: account.last_equity,
            trading_blocked: account.trading_blocked || account.account_blocked,
        }))
    }

    /// `GET /v2/positions`: shares signed by side; a symbol tradeops cannot name is left out.
    async fn positions(&self) -> Result<Option<Vec<crate::execution::VenuePosition>>, BrokerError> {
        let mut positions: Vec<crate::execution::VenuePosition> = self
            .orders
            .client
            .positions()
            .await?
            .iter()
            .filter_map(|p| {
                let symbol = tradeops_core::Symbol::parse(&p.symbol).ok()?;
                let shares = p.qty.trunc().to_i64()?;
                let short = p.side.as_deref() == Some("short") && shares > 0;
                Some(crate::execution::VenuePosition {
                    symbol,
                    quantity: if short { -shares } else { shares },
                    average_price: p.avg_entry_price,
                })
            })
            .collect();
        positions.sort_by(|a, b| a.symbol.cmp(&b.symbol));
        Ok(Some(positions))
    }

    /// The order as Alpaca has it (`GET /v2/orders:by_client_order_id`, a group's legs nested),
    /// when it is working and tradeops can represent it (market, limit, stop, stop-limit; day,
    /// gtc, ioc; an `oco` sell as a protective order). A leg of a group (Alpaca's client order
    /// id of the stop of our `oco`) is never described as an order of its own.
    async fn foreign_order(&self, id: &ClientOrderId) -> Result<Option<Order>, BrokerError> {
        if self.stream.is_leg_client_id(id.as_str()) {
            return Ok(None);
        }
        let Some(order) = self.orders.client.by_client_order_id_nested(id).await? else { return Ok(None) };
        self.learn(&order);
        if order.in_group() && order.legs.as_ref().is_none_or(|l| l.is_empty()) {
            // A leg alone: its group, when it is ours, is what the engine knows.
            if let Some(parent) = self.orders.group_of(&order).await? {
                self.learn(&parent);
            }
            return Ok(None);
        }
        Ok(adoptable(&order))
    }

    /// The order as Alpaca has it (`GET /v2/orders:by_client_order_id`), described as it was
    /// sent: the reports its state implies (the stream's, the gap fill's, through the one
    /// mapper, so nothing twice) carry it to its state. A group or a leg is never described:
    /// a protective order is always written ahead, and only an emergency halt's exits are ever
    /// sent unwritten.
    async fn sent_order(&self, id: &ClientOrderId) -> Result<Option<Order>, BrokerError> {
        if self.stream.is_leg_client_id(id.as_str()) {
            return Ok(None);
        }
        let Some(order) = self.orders.client.by_client_order_id(id).await? else { return Ok(None) };
        if order.in_group() {
            return Ok(None);
        }
        self.learn(&order);
        let sent =
            wire::Order { status: "new".into(), filled_qty: Some(Decimal::ZERO), filled_avg_price: None, ..order };
        Ok(adoptable(&sent).map(|mut sent| {
            sent.status = tradeops_core::orders::OrderStatus::New;
            sent
        }))
    }

    /// The stream's reports so far, oldest first: Alpaca's reports are due when they arrive.
    async fn poll(&self, _now: Timestamp) -> Vec<BrokerReport> {
        let reports = self.stream.queue().drain();
        for report in &reports {
            self.orders.learn_report(report);
        }
        reports
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn order(client_order_id: &str, status: &str) -> wire::Order {
        serde_json::from_value(serde_json::json!({
            "id": "ord-1", "client_order_id": client_order_id, "symbol": "ABCD", "side": "buy",
            "status": status
        }))
        .unwrap()
    }

    #[test]
    fn open_orders_seen_are_tracked_until_a_final_report_or_snapshot() {
        let client = TradingClient::new(
            "http://127.0.0.1:1",
            &AlpacaCredentials { key_id: "PK".into(), secret_key: "s".into() },
            Duration::from_secs(1),
            Arc::new(tradeops_core::ManualClock::new(chrono::TimeZone::timestamp_opt(&Utc, 0, 0).unwrap())),
        )
        .unwrap();
        let orders = AlpacaOrders::new(client);
        let mut earlier = order("to-ABCD-1", "partially_filled");
        earlier.qty = Some(Decimal::from(100));
        earlier.filled_qty = Some(Decimal::from(40));
        orders.learn_order(&earlier);
        orders.learn_order(&order("web order", "new"));
        let id = ClientOrderId::parse("to-ABCD-1").unwrap();
        assert_eq!(orders.unfinished(), vec![id.clone()]);
        assert_eq!(orders.broker_order_id(&id).as_deref(), Some("ord-1"));
        let fill = |quantity| BrokerReport::Filled {
            client_order_id: id.clone(),
            execution: tradeops_core::orders::Execution {
                execution_id: "e".into(),
                timestamp: chrono::TimeZone::timestamp_opt(&Utc, 0, 0).unwrap(),
                quantity,
                price: Decimal::ONE,
                fee: Decimal::ZERO,
            },
        };
        orders.learn_report(&fill(30));
        assert_eq!(orders.unfinished(), vec![id.clone()], "70 of 100 filled");
        orders.learn_report(&fill(30));
        assert!(orders.unfinished().is_empty(), "the rest filled");
        orders.learn_order(&order("to-ABCD-1", "new"));
        orders.learn_order(&order("to-ABCD-1", "canceled"));
        assert!(orders.unfinished().is_empty(), "a final snapshot ends it");
    }

    #[test]
    fn lookups_map_alpacas_statuses() {
        let id = ClientOrderId::parse("to-ABCD-1").unwrap();
        let open = |cancel_pending| BrokerLookup::Open(BrokerOpenOrder { client_order_id: id.clone(), cancel_pending });
        for status in ["new", "accepted", "pending_new", "partially_filled", "done_for_day"] {
            assert_eq!(lookup_of(&order("to-ABCD-1", status)), open(false), "{status}");
        }
        assert_eq!(lookup_of(&order("to-ABCD-1", "pending_cancel")), open(true));
        for status in ["filled", "canceled", "expired", "rejected", "replaced"] {
            assert_eq!(lookup_of(&order("to-ABCD-1", status)), BrokerLookup::Closed, "{status}");
        }
        assert_eq!(lookup_of(&order("not ours / web", "new")), BrokerLookup::Unknown);
    }
}
