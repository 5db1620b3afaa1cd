//! Alpaca's trade-updates stream (research §1.4): the WebSocket client of the trading
//! API's `/stream` (authenticate, listen to `trade_updates`, read Alpaca's binary JSON frames),
//! the mapping of each update to the [`BrokerReport`]s it means ([`ReportMapper`], which also
//! remembers what was reported so nothing is reported twice), the reconnect with backoff and
//! jitter, the gap fill from REST after every (re)connect ([`GapFill`]: Alpaca has no replay),
//! the queue the adapter's `poll` drains ([`ReportQueue`]) and the connection's state for health
//! ([`StreamHealth`]).
//!
//! A protective order with a take-profit is one `oco` order at Alpaca (CONTRACT §11): the
//! take-profit is the top-level order, named by our client order id, and the stop is a leg with
//! an id of Alpaca's. The engine knows one order, so the mapper keeps each group of ours
//! ([`ReportMapper::learn_group`]) and reports whatever happens to any of its orders as our
//! order's: a fill of either leg is a fill of it, and it ends only when every order of the
//! group has ended without filling it whole. An ending Alpaca reports before a leg's fill is
//! settled from REST (the group read again with `nested=true`, [`GapFill::nested_order`]), never
//! reported as a cancel of an order that filled.

use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use futures::{SinkExt, StreamExt};
use rust_decimal::prelude::ToPrimitive;
use rust_decimal::Decimal;
use tokio::task::JoinHandle;
use tokio_tungstenite::tungstenite::Message;
use tradeops_core::broker::BrokerReport;
use tradeops_core::clock::Clock;
use tradeops_core::orders::{ClientOrderId, Execution};
use tradeops_core::time::Timestamp;

use super::wire;
use crate::BrokerError;

/// How soon a group whose end waits on another of its orders is first read again from REST
/// while the stream is quiet (Alpaca cancels the other leg of an `oco` about a second after the
/// first); each fruitless read doubles the wait, up to [`RESOLVE_AT_MOST_EVERY`], so a group
/// that stays unsettled never spends the REST budget other requests need.
pub const RESOLVE_EVERY: Duration = Duration::from_millis(250);

/// The longest wait between two reads of an unsettled group.
pub const RESOLVE_AT_MOST_EVERY: Duration = Duration::from_secs(30);

/// Reason given for a rejection: Alpaca's order object carries no rejection text that
/// [`wire::Order`] declares, so every rejection reads the same.
pub const REJECTED_BY_ALPACA: &str = "rejected by Alpaca";

// ---------------------------------------------------------------------------------------------
// Mapping
// ---------------------------------------------------------------------------------------------

/// What has been reported of one Alpaca order (by Alpaca's order id).
#[derive(Clone, Debug, Default)]
struct Reported {
    accepted: bool,
    /// Shares reported filled so far, and their notional (shares × price, summed).
    filled_qty: Decimal,
    filled_notional: Decimal,
    /// A final report (canceled, expired or rejected) was made.
    closed: bool,
}

/// One group of orders at Alpaca (an `oco`: take-profit on top, the stop leg under it) that is
/// one order of ours: the top-level order's client order id names it.
#[derive(Clone, Debug)]
struct Group {
    client_order_id: ClientOrderId,
    /// Our order's shares: a fill of any member counts against them.
    quantity: Decimal,
    /// Every member's latest status, by Alpaca id, the top-level order's included.
    members: HashMap<String, String>,
    /// Shares (and their notional) reported filled of each member.
    member_filled: HashMap<String, (Decimal, Decimal)>,
    time_in_force: Option<String>,
}

/// Turns trade updates (and, after a reconnect, REST order snapshots) into [`BrokerReport`]s,
/// remembering what it reported so that each order is accepted once, each execution filled
/// once and each order closed once, whichever of the stream and the gap fill told it first.
/// The orders of a group ([`Group`]) are reported as the one order of ours they are; what was
/// reported of a group is kept under its top-level order's Alpaca id.
///
/// Memory grows with the orders and executions of the process's life (a day's trading is a few
/// thousand entries); nothing is pruned yet.
#[derive(Debug, Default)]
pub struct ReportMapper {
    orders: HashMap<String, Reported>,
    executions: HashSet<String>,
    /// Groups by their top-level order's Alpaca id.
    groups: HashMap<String, Group>,
    /// Each other member's (legs, replacements) top-level order.
    parents: HashMap<String, String>,
    /// The client order ids Alpaca gave the legs: never orders of their own.
    leg_client_ids: HashSet<String>,
    /// Groups one of whose orders ended while another still works, or whose ending came before
    /// a fill: to be read again from REST ([`ReportMapper::unresolved`]).
    unresolved: BTreeSet<String>,
}

impl ReportMapper {
    pub fn new() -> Self {
        Self::default()
    }

    /// Records what an earlier process already reported of Alpaca order `broker_order_id` (the
    /// engine's book at a restart): whether it was accepted, the shares filled and their
    /// notional, and the executions applied. A fill or gap fill reports only what lies beyond.
    pub fn seed(
        &mut self,
        broker_order_id: &str,
        accepted: bool,
        filled_qty: Decimal,
        filled_notional: Decimal,
        execution_ids: impl IntoIterator<Item = String>,
    ) {
        let reported = self.orders.entry(broker_order_id.to_string()).or_default();
        reported.accepted |= accepted;
        if filled_qty > reported.filled_qty {
            reported.filled_qty = filled_qty;
            reported.filled_notional = filled_notional;
        }
        self.executions.extend(execution_ids);
    }

    /// The reports one stream update means. `received_at` stands in for a time Alpaca left out.
    ///
    /// - `new`, `accepted`, `pending_new` → `Accepted` (once per order).
    /// - `fill`, `partial_fill` → `Filled` with the update's `execution_id`, `qty`, `price` and
    ///   `timestamp`; an execution id seen before yields nothing. When a gap fill already
    ///   reported part of the order's quantity synthetically, only the part of this execution
    ///   beyond what was reported is (the order's cumulative `filled_qty` tells). A fill after a
    ///   cancel request passes through unchanged: the engine accepts late fills.
    /// - `canceled` → `Canceled`; `expired`, and `done_for_day` of an order that is not GTC →
    ///   `Expired`; `rejected` → `Rejected`; `order_cancel_rejected` → `CancelRejected`.
    /// - No report: `pending_cancel` (our cancel is on its way; the engine already knows it
    ///   asked), `pending_replace` / `replaced` / `order_replace_rejected` (tradeops never
    ///   replaces orders), `done_for_day` of a GTC order (it comes back the next session),
    ///   `calculated`, `suspended`, `stopped` and any event Alpaca adds (nothing for the engine
    ///   to apply; logged at debug).
    ///
    /// An order whose `client_order_id` is not one of ours (not a valid [`ClientOrderId`]) is
    /// logged and skipped: adopting foreign orders is reconciliation's job, later.
    ///
    /// An update of an order of a learned group is mapped by [`ReportMapper::map_group_update`].
    pub fn map_update(&mut self, update: &wire::TradeUpdate, received_at: Timestamp) -> Vec<BrokerReport> {
        let order = &update.order;
        if let Some(parent) = self.group_of(&order.id) {
            return self.map_group_update(update, &parent, received_at);
        }
        let Some(client_order_id) = ours(order) else { return Vec::new() };
        let at = update.timestamp.or(order.updated_at).unwrap_or(received_at);
        match update.event.as_str() {
            "new" | "accepted" | "pending_new" => self.accept(order, &client_order_id, at).into_iter().collect(),
            "fill" | "partial_fill" => {
                let mut reports: Vec<BrokerReport> = self.accept(order, &client_order_id, at).into_iter().collect();
                reports.extend(self.fill(update, &client_order_id, at));
                reports
            }
            "canceled" => self.close(order, BrokerReport::Canceled { client_order_id, at }),
            "expired" => self.close(order, BrokerReport::Expired { client_order_id, at }),
            "done_for_day" if !is_gtc(order) => self.close(order, BrokerReport::Expired { client_order_id, at }),
            "rejected" => {
                let reason = REJECTED_BY_ALPACA.to_string();
                self.close(order, BrokerReport::Rejected { client_order_id, reason, at })
            }
            "order_cancel_rejected" => {
                let reason = "cancel rejected by Alpaca".to_string();
                vec![BrokerReport::CancelRejected { client_order_id, reason, at }]
            }
            other => {
                tracing::debug!(event = other, order = %order.id, "trade update with nothing to report");
                Vec::new()
            }
        }
    }

    /// The reports an order's current state (from REST, after a reconnect) implies beyond what
    /// was already reported: its acceptance, the fills not seen, and its end.
    ///
    /// Unseen fills are reported as one synthetic execution of the shares Alpaca counts filled
    /// (`filled_qty`) beyond those reported, with the id `gap:{order id}:{filled_qty}` (unique
    /// per order and cumulative quantity, so the same gap found twice is reported once) and the
    /// price that makes the order's reported notional equal `filled_qty × filled_avg_price`
    /// (rounded to 4 decimals). Limits: several executions missed in one gap become one; the
    /// price is exact only as far as Alpaca's `filled_avg_price` is; a real stream update of
    /// an execution already covered this way is recognised by the order's cumulative
    /// `filled_qty` (see [`ReportMapper::map_update`]), so an update without it could double.
    ///
    /// An order with its group's legs nested under it is learned as a group first; an order of
    /// a group is mapped by [`ReportMapper::map_group_order`].
    pub fn map_order(&mut self, order: &wire::Order, now: Timestamp) -> Vec<BrokerReport> {
        self.learn_group(order);
        if let Some(parent) = self.group_of(&order.id) {
            return self.map_group_order(order, &parent, now);
        }
        let Some(client_order_id) = ours(order) else { return Vec::new() };
        let mut reports = Vec::new();
        let status = order.status.as_str();
        if !matches!(status, "rejected" | "pending_new") {
            let at = order.submitted_at.or(order.created_at).or(order.updated_at).unwrap_or(now);
            reports.extend(self.accept(order, &client_order_id, at));
        }
        if let Some(report) = self.gap_fill(order, &client_order_id, now) {
            reports.push(report);
        }
        let closing = match status {
            "canceled" => Some(BrokerReport::Canceled {
                client_order_id: client_order_id.clone(),
                at: order.canceled_at.or(order.updated_at).unwrap_or(now),
            }),
            "expired" => Some(BrokerReport::Expired {
                client_order_id: client_order_id.clone(),
                at: order.expired_at.or(order.updated_at).unwrap_or(now),
            }),
            "done_for_day" if !is_gtc(order) => Some(BrokerReport::Expired {
                client_order_id: client_order_id.clone(),
                at: order.updated_at.unwrap_or(now),
            }),
            "rejected" => Some(BrokerReport::Rejected {
                client_order_id: client_order_id.clone(),
                reason: REJECTED_BY_ALPACA.to_string(),
                at: order.failed_at.or(order.updated_at).unwrap_or(now),
            }),
            _ => None,
        };
        if let Some(report) = closing {
            reports.extend(self.close(order, report));
        }
        reports
    }

    /// Learns a group from its top-level order read with its legs nested (`nested=true`, or a
    /// submit's reply): which Alpaca orders are one order of ours, and their statuses. An order
    /// without legs teaches nothing. Statuses already final stay so (a stream event may be
    /// newer than a REST read).
    pub fn learn_group(&mut self, order: &wire::Order) {
        let Some(legs) = order.legs.as_ref().filter(|l| !l.is_empty() && order.in_group()) else { return };
        let Ok(client_order_id) = ClientOrderId::parse(&order.client_order_id) else { return };
        let group = self.groups.entry(order.id.clone()).or_insert_with(|| Group {
            client_order_id,
            quantity: order.qty.unwrap_or_default(),
            members: HashMap::new(),
            member_filled: HashMap::new(),
            time_in_force: order.time_in_force.clone(),
        });
        for member in order.members() {
            let known = group.members.entry(member.id.clone()).or_insert_with(|| member.status.clone());
            if !is_final_status(known) {
                known.clone_from(&member.status);
            }
            if let Some(next) = member.replaced_by.as_ref().filter(|n| !n.is_empty()) {
                group.members.entry(next.clone()).or_insert_with(|| "new".into());
                self.parents.insert(next.clone(), order.id.clone());
            }
        }
        for leg in legs {
            self.parents.insert(leg.id.clone(), order.id.clone());
            self.leg_client_ids.insert(leg.client_order_id.clone());
        }
    }

    /// The top-level order's Alpaca id of the group `alpaca_id` belongs to, when learned.
    fn group_of(&self, alpaca_id: &str) -> Option<String> {
        if self.groups.contains_key(alpaca_id) {
            return Some(alpaca_id.to_string());
        }
        self.parents.get(alpaca_id).cloned()
    }

    /// Whether `alpaca_id` is an order of a learned group.
    pub fn knows_group_member(&self, alpaca_id: &str) -> bool {
        self.group_of(alpaca_id).is_some()
    }

    /// Whether `leg_client_order_id` is the client order id Alpaca gave a leg of a learned
    /// group (an order tradeops never placed on its own: not foreign, not to adopt).
    pub fn is_leg_client_id(&self, leg_client_order_id: &str) -> bool {
        self.leg_client_ids.contains(leg_client_order_id)
    }

    /// Our client order id of the group order `alpaca_id` belongs to, when learned.
    pub fn group_client_order_id(&self, alpaca_id: &str) -> Option<ClientOrderId> {
        self.group_of(alpaca_id).and_then(|p| self.groups.get(&p)).map(|g| g.client_order_id.clone())
    }

    /// The groups (their top-level orders' Alpaca ids) to read again from REST.
    pub fn unresolved(&self) -> Vec<String> {
        self.unresolved.iter().cloned().collect()
    }

    /// The reports one stream update of an order of group `parent` means, as our order's:
    /// - `new`, `accepted`, `pending_new` of any member → our order `Accepted` (once, with the
    ///   top-level order's Alpaca id, which a cancel of the whole group goes to);
    /// - `fill`, `partial_fill` of any member → `Filled` with Alpaca's execution id and that
    ///   member's price and shares (never beyond our order's quantity);
    /// - an ending (`canceled`, `expired`, `replaced`, `rejected`) → our order's end only when
    ///   every member has ended and the group was not filled whole; an ending while another
    ///   member works (one-cancels-other in flight, the stop triggered, a fill not yet on the
    ///   stream) marks the group to be read again ([`ReportMapper::unresolved`]);
    /// - `order_cancel_rejected` → `CancelRejected`; anything else → nothing.
    pub fn map_group_update(
        &mut self,
        update: &wire::TradeUpdate,
        parent: &str,
        received_at: Timestamp,
    ) -> Vec<BrokerReport> {
        let order = &update.order;
        let at = update.timestamp.or(order.updated_at).unwrap_or(received_at);
        let Some(group) = self.groups.get_mut(parent) else { return Vec::new() };
        let client_order_id = group.client_order_id.clone();
        let known = group.members.entry(order.id.clone()).or_default();
        if !is_final_status(known) {
            known.clone_from(&order.status);
        }
        if let Some(next) = order.replaced_by.as_ref().filter(|n| !n.is_empty()) {
            group.members.entry(next.clone()).or_insert_with(|| "new".into());
            self.parents.insert(next.clone(), parent.to_string());
        }
        match update.event.as_str() {
            "new" | "accepted" | "pending_new" => self.accept_key(parent, &client_order_id, at).into_iter().collect(),
            "fill" | "partial_fill" => {
                let mut reports: Vec<BrokerReport> =
                    self.accept_key(parent, &client_order_id, at).into_iter().collect();
                reports.extend(self.fill_member(update, parent, &client_order_id, at));
                reports.extend(self.settle(parent, at));
                reports
            }
            "canceled" | "expired" | "replaced" | "rejected" => self.settle(parent, at),
            "order_cancel_rejected" => {
                let reason = "cancel rejected by Alpaca".to_string();
                vec![BrokerReport::CancelRejected { client_order_id, reason, at }]
            }
            other => {
                tracing::debug!(event = other, order = %order.id, "trade update of a group with nothing to report");
                Vec::new()
            }
        }
    }

    /// The reports a REST snapshot of group `parent` (its top-level order with the legs nested,
    /// or one member alone) implies beyond what was reported: the acceptance, the shares filled
    /// of each member and not yet reported (one synthetic execution per member, as
    /// [`ReportMapper::map_order`] does, never more in all than Alpaca counts filled across the
    /// group beyond what was reported of it: a restart seeds the group's fills without saying
    /// which member made them), and the group's end.
    pub fn map_group_order(&mut self, order: &wire::Order, parent: &str, now: Timestamp) -> Vec<BrokerReport> {
        let Some(group) = self.groups.get_mut(parent) else { return Vec::new() };
        let client_order_id = group.client_order_id.clone();
        for member in order.members() {
            let known = group.members.entry(member.id.clone()).or_default();
            if !is_final_status(known) {
                known.clone_from(&member.status);
            }
        }
        let mut reports = Vec::new();
        let top = order.members().find(|m| m.id == parent);
        if top.is_none_or(|t| !matches!(t.status.as_str(), "rejected" | "pending_new")) {
            let at = order.submitted_at.or(order.created_at).or(order.updated_at).unwrap_or(now);
            reports.extend(self.accept_key(parent, &client_order_id, at));
        }
        // What Alpaca counts filled across the group beyond what was reported of it.
        let group = &self.groups[parent];
        let in_snapshot: HashSet<&str> = order.members().map(|m| m.id.as_str()).collect();
        let alpaca_total: Decimal = order.members().map(|m| m.filled_qty.unwrap_or_default()).sum::<Decimal>()
            + group
                .member_filled
                .iter()
                .filter(|(id, _)| !in_snapshot.contains(id.as_str()))
                .map(|(_, (q, _))| *q)
                .sum::<Decimal>();
        let reported_total = self.orders.get(parent).map(|r| r.filled_qty).unwrap_or_default();
        let mut budget = (alpaca_total - reported_total).min(group.quantity - reported_total);
        for member in order.members() {
            let filled = member.filled_qty.unwrap_or_default();
            let group = self.groups.get_mut(parent).expect("the group was found above");
            let (done, notional) = group.member_filled.get(&member.id).copied().unwrap_or_default();
            let missing = (filled - done).min(budget);
            if filled > done {
                // Alpaca's count of the member is what it reported, whether or not this part
                // was already reported under the group (a seed).
                let average = member.filled_avg_price.unwrap_or_default();
                group.member_filled.insert(member.id.clone(), (filled, filled * average));
            }
            if missing <= Decimal::ZERO {
                continue;
            }
            let Some(average) = member.filled_avg_price else {
                tracing::warn!(order = %member.id, "filled quantity without an average price: gap fill skipped");
                continue;
            };
            let execution_id = format!("gap:{}:{}", member.id, filled.normalize());
            if !self.executions.insert(execution_id.clone()) {
                continue;
            }
            let Some(quantity) = whole_shares(missing, &member.id) else { continue };
            let remainder = (filled * average - notional) / (filled - done);
            let price = if remainder > Decimal::ZERO { remainder.round_dp(4) } else { average };
            budget -= missing;
            let reported = self.orders.entry(parent.to_string()).or_default();
            reported.filled_qty += missing;
            reported.filled_notional += missing * price;
            reports.push(BrokerReport::Filled {
                client_order_id: client_order_id.clone(),
                // Commission-free, as every Alpaca equity execution.
                execution: Execution {
                    execution_id: execution_id.into(),
                    timestamp: member.filled_at.or(member.updated_at).unwrap_or(now),
                    quantity,
                    price,
                    fee: Decimal::ZERO,
                },
            });
        }
        let ended_at = order
            .members()
            .filter_map(|m| m.canceled_at.or(m.expired_at).or(m.failed_at))
            .max()
            .or(order.updated_at)
            .unwrap_or(now);
        reports.extend(self.settle(parent, ended_at));
        reports
    }

    /// A fill update's execution id, quantity and price, once: `None` for one seen before, or
    /// (logged) one without them.
    fn new_execution<'u>(&mut self, update: &'u wire::TradeUpdate) -> Option<(&'u str, Decimal, Decimal)> {
        let order = &update.order;
        let Some(execution_id) = update.execution_id.as_deref() else {
            tracing::warn!(order = %order.id, event = %update.event, "fill without an execution id: skipped");
            return None;
        };
        if !self.executions.insert(execution_id.to_string()) {
            return None;
        }
        let (Some(qty), Some(price)) = (update.qty, update.price) else {
            tracing::warn!(order = %order.id, execution_id, "fill without qty or price: skipped");
            return None;
        };
        Some((execution_id, qty, price))
    }

    /// One fill of a member of group `parent`, as a fill of our order.
    fn fill_member(
        &mut self,
        update: &wire::TradeUpdate,
        parent: &str,
        client_order_id: &ClientOrderId,
        at: Timestamp,
    ) -> Option<BrokerReport> {
        let order = &update.order;
        let (execution_id, qty, price) = self.new_execution(update)?;
        let group = self.groups.get_mut(parent)?;
        let (done, notional) = group.member_filled.get(&order.id).copied().unwrap_or_default();
        let reported = self.orders.entry(parent.to_string()).or_default();
        // The part of this execution not already reported by a gap fill of this member, and
        // never beyond our order (a restart's seed counts the group's fills as one).
        let mut shares = match order.filled_qty {
            Some(cumulative) => qty.min(cumulative - done),
            None => qty,
        };
        shares = shares.min(group.quantity - reported.filled_qty);
        if shares <= Decimal::ZERO {
            return None;
        }
        let quantity = whole_shares(shares, &order.id)?;
        group.member_filled.insert(order.id.clone(), (done + shares, notional + shares * price));
        reported.filled_qty += shares;
        reported.filled_notional += shares * price;
        Some(BrokerReport::Filled {
            client_order_id: client_order_id.clone(),
            // Commission-free, as every Alpaca equity execution.
            execution: Execution {
                execution_id: execution_id.into(),
                timestamp: at,
                quantity,
                price,
                fee: Decimal::ZERO,
            },
        })
    }

    /// Group `parent`'s end, once known: filled whole, it ends with its last fill (nothing more
    /// to report); every member ended short of that, it is `Canceled` (`Expired` when a member
    /// expired, `Rejected` when all were rejected), once; a member ended while another works, it
    /// is to be read again from REST.
    fn settle(&mut self, parent: &str, at: Timestamp) -> Vec<BrokerReport> {
        let Some(group) = self.groups.get(parent) else { return Vec::new() };
        let reported = self.orders.entry(parent.to_string()).or_default();
        if reported.closed {
            self.unresolved.remove(parent);
            return Vec::new();
        }
        if reported.filled_qty >= group.quantity && group.quantity > Decimal::ZERO {
            reported.closed = true;
            self.unresolved.remove(parent);
            return Vec::new();
        }
        let gtc = group.time_in_force.as_deref() == Some("gtc");
        let ended = |status: &str| is_final_status(status) || (status == "done_for_day" && !gtc);
        if !group.members.values().all(|s| ended(s)) {
            // A take-profit `replaced` by its triggered stop leaves the stop working for as
            // long as it takes: nothing to settle. Any other ending may be the group's end (or
            // come before a fill): read it again.
            if group.members.values().any(|s| ended(s) && s != "replaced") {
                self.unresolved.insert(parent.to_string());
            }
            return Vec::new();
        }
        if group.members.values().any(|s| s == "filled" || s == "partially_filled") {
            // A member filled that the reports have not carried yet (its status read from REST
            // before its fill came on the stream): ending the group `Canceled` now would free
            // the shares of an exit waiting for it while they are sold (CONTRACT §11). Read
            // again: the read reports the fill.
            self.unresolved.insert(parent.to_string());
            return Vec::new();
        }
        reported.closed = true;
        self.unresolved.remove(parent);
        let client_order_id = group.client_order_id.clone();
        let statuses: Vec<&str> = group.members.values().map(String::as_str).collect();
        if statuses.iter().any(|s| *s == "expired" || *s == "done_for_day") {
            vec![BrokerReport::Expired { client_order_id, at }]
        } else if statuses.iter().all(|s| *s == "rejected") {
            vec![BrokerReport::Rejected { client_order_id, reason: REJECTED_BY_ALPACA.to_string(), at }]
        } else {
            vec![BrokerReport::Canceled { client_order_id, at }]
        }
    }

    fn accept_key(&mut self, key: &str, client_order_id: &ClientOrderId, at: Timestamp) -> Option<BrokerReport> {
        let reported = self.orders.entry(key.to_string()).or_default();
        if reported.accepted {
            return None;
        }
        reported.accepted = true;
        Some(BrokerReport::Accepted { client_order_id: client_order_id.clone(), broker_order_id: key.into(), at })
    }

    fn accept(&mut self, order: &wire::Order, client_order_id: &ClientOrderId, at: Timestamp) -> Option<BrokerReport> {
        self.accept_key(&order.id, client_order_id, at)
    }

    fn fill(
        &mut self,
        update: &wire::TradeUpdate,
        client_order_id: &ClientOrderId,
        at: Timestamp,
    ) -> Option<BrokerReport> {
        let order = &update.order;
        let (execution_id, qty, price) = self.new_execution(update)?;
        let reported = self.orders.entry(order.id.clone()).or_default();
        // The part of this execution a gap fill has not already reported.
        let shares = match order.filled_qty {
            Some(cumulative) => qty.min(cumulative - reported.filled_qty),
            None => qty,
        };
        if shares <= Decimal::ZERO {
            return None;
        }
        let quantity = whole_shares(shares, &order.id)?;
        reported.filled_qty += shares;
        reported.filled_notional += shares * price;
        Some(BrokerReport::Filled {
            client_order_id: client_order_id.clone(),
            // Alpaca charges no commission on US equities: the fee is zero (regulatory pass-through
            // fees on sells are not reported per execution).
            execution: Execution {
                execution_id: execution_id.into(),
                timestamp: at,
                quantity,
                price,
                fee: Decimal::ZERO,
            },
        })
    }

    fn gap_fill(
        &mut self,
        order: &wire::Order,
        client_order_id: &ClientOrderId,
        now: Timestamp,
    ) -> Option<BrokerReport> {
        let filled = order.filled_qty.unwrap_or_default();
        let reported = self.orders.entry(order.id.clone()).or_default();
        let missing = filled - reported.filled_qty;
        if missing <= Decimal::ZERO {
            return None;
        }
        let Some(average) = order.filled_avg_price else {
            tracing::warn!(order = %order.id, "filled quantity without an average price: gap fill skipped");
            return None;
        };
        let execution_id = format!("gap:{}:{}", order.id, filled.normalize());
        if !self.executions.insert(execution_id.clone()) {
            return None;
        }
        let quantity = whole_shares(missing, &order.id)?;
        let remainder = (filled * average - reported.filled_notional) / missing;
        let price = if remainder > Decimal::ZERO { remainder.round_dp(4) } else { average };
        reported.filled_qty = filled;
        reported.filled_notional += missing * price;
        Some(BrokerReport::Filled {
            client_order_id: client_order_id.clone(),
            // Commission-free, as every Alpaca equity execution.
            execution: Execution {
                execution_id: execution_id.into(),
                timestamp: order.filled_at.or(order.updated_at).unwrap_or(now),
                quantity,
                price,
                fee: Decimal::ZERO,
            },
        })
    }

    fn close(&mut self, order: &wire::Order, report: BrokerReport) -> Vec<BrokerReport> {
        let reported = self.orders.entry(order.id.clone()).or_default();
        if reported.closed {
            return Vec::new();
        }
        reported.closed = true;
        vec![report]
    }
}

/// The order's client order id when it is one of ours.
fn ours(order: &wire::Order) -> Option<ClientOrderId> {
    match ClientOrderId::parse(&order.client_order_id) {
        Ok(id) => Some(id),
        Err(_) => {
            tracing::warn!(order = %order.id, client_order_id = %order.client_order_id, "update of an unknown order: skipped");
            None
        }
    }
}

/// Whether Alpaca reports nothing more of an order in this status (research §1.3).
fn is_final_status(status: &str) -> bool {
    matches!(status, "filled" | "canceled" | "expired" | "rejected" | "replaced")
}

fn is_gtc(order: &wire::Order) -> bool {
    order.time_in_force.as_deref() == Some("gtc")
}

/// Shares as the engine counts them; tradeops never orders fractions, so a fraction is logged
/// and skipped.
fn whole_shares(shares: Decimal, order_id: &str) -> Option<u64> {
    let whole = if shares.fract().is_zero() { shares.to_u64() } else { None };
    if whole.is_none() {
        tracing::error!(order = order_id, %shares, "fill of a fractional quantity: skipped");
    }
    whole
}

// ---------------------------------------------------------------------------------------------
// Queue, health, gap fill
// ---------------------------------------------------------------------------------------------

/// Reports waiting for the adapter's `poll`, in the order they were made.
#[derive(Debug, Default)]
pub struct ReportQueue {
    reports: Mutex<VecDeque<BrokerReport>>,
    /// Woken when reports are pushed: the engine runner applies them at once.
    arrived: Arc<tokio::sync::Notify>,
}

impl ReportQueue {
    pub fn push(&self, reports: impl IntoIterator<Item = BrokerReport>) {
        let mut queue = self.reports.lock().unwrap_or_else(PoisonError::into_inner);
        let before = queue.len();
        queue.extend(reports);
        if queue.len() > before {
            self.arrived.notify_one();
        }
    }

    /// Notified whenever reports are pushed.
    pub fn arrived(&self) -> Arc<tokio::sync::Notify> {
        self.arrived.clone()
    }

    /// Everything queued, oldest first.
    pub fn drain(&self) -> Vec<BrokerReport> {
        self.reports.lock().unwrap_or_else(PoisonError::into_inner).drain(..).collect()
    }
}

/// The stream's connection as health reads it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StreamState {
    /// Authorized, listening and gap-filled.
    pub connected: bool,
    /// The latest trade update's time (Alpaca's `timestamp`).
    pub last_event_at: Option<Timestamp>,
    /// The latest failure (connect, authorization, gap fill or a dropped connection); kept
    /// after a recovery so health can say what happened.
    pub last_error: Option<String>,
    /// Successful connections so far (1 + reconnects).
    pub connections: u64,
}

/// Shared [`StreamState`].
#[derive(Debug, Default)]
pub struct StreamHealth {
    state: Mutex<StreamState>,
}

impl StreamHealth {
    pub fn snapshot(&self) -> StreamState {
        self.state.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    fn update(&self, change: impl FnOnce(&mut StreamState)) {
        change(&mut self.state.lock().unwrap_or_else(PoisonError::into_inner));
    }
}

/// Orders whose state may have changed since a time, from Alpaca's REST API (implemented by
/// the REST client): what the stream may have missed while disconnected.
///
/// Alpaca's `GET /v2/orders` filters `after` by *submission* time (research §1.2), so passing
/// `after` through alone would miss an order submitted before the gap and filled during it.
/// An implementation returns at least every open order and every order closed since `after`
/// (e.g. `status=open`, plus `status=closed&direction=desc` paged until `updated_at` falls
/// before `after`). Returning more is harmless: [`ReportMapper::map_order`] reports only what
/// is new.
///
/// The two reads of one order's group serve the stream's `oco` groups (see the module doc);
/// an implementation without them (a test's) leaves groups to the gap fill.
#[async_trait]
pub trait GapFill: Send + Sync {
    async fn orders_updated_since(&self, after: DateTime<Utc>) -> Result<Vec<wire::Order>, BrokerError>;

    /// The order `broker_order_id` with its group's legs nested (`GET /v2/orders/{id}?nested=true`).
    async fn nested_order(&self, _broker_order_id: &str) -> Result<Option<wire::Order>, BrokerError> {
        Ok(None)
    }

    /// The top-level order, legs nested, of the group `member` belongs to (a leg, or an order
    /// that replaced one), when Alpaca has it.
    async fn group_of(&self, _member: &wire::Order) -> Result<Option<wire::Order>, BrokerError> {
        Ok(None)
    }
}

// ---------------------------------------------------------------------------------------------
// Backoff
// ---------------------------------------------------------------------------------------------

/// Reconnect delays: `initial` doubling up to `max`, each scaled by a factor drawn in
/// `[1 - jitter, 1 + jitter]` from a seeded generator (the same seed, the same delays).
#[derive(Clone, Debug, PartialEq)]
pub struct BackoffPolicy {
    pub initial: Duration,
    pub max: Duration,
    /// 0.2 = ±20 %.
    pub jitter: f64,
    pub seed: u64,
}

impl Default for BackoffPolicy {
    fn default() -> Self {
        Self { initial: Duration::from_millis(500), max: Duration::from_secs(30), jitter: 0.2, seed: 0x5eed }
    }
}

/// The delays of one [`BackoffPolicy`]; reset after a successful connection.
#[derive(Debug)]
pub struct Backoff {
    policy: BackoffPolicy,
    failures: u32,
    rng: u64,
}

impl Backoff {
    pub fn new(policy: BackoffPolicy) -> Self {
        let rng = policy.seed;
        Self { policy, failures: 0, rng }
    }

    /// The delay before the next attempt.
    pub fn next_delay(&mut self) -> Duration {
        let base = self.policy.initial.saturating_mul(1u32 << self.failures.min(20)).min(self.policy.max);
        self.failures = self.failures.saturating_add(1);
        // A uniform draw in [0, 1) from splitmix64.
        self.rng = self.rng.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        let unit = (z >> 11) as f64 / (1u64 << 53) as f64;
        base.mul_f64(1.0 + self.policy.jitter * (2.0 * unit - 1.0))
    }

    pub fn reset(&mut self) {
        self.failures = 0;
    }
}

// ---------------------------------------------------------------------------------------------
// The client
// ---------------------------------------------------------------------------------------------

/// Where and how the stream connects.
#[derive(Clone)]
pub struct StreamConfig {
    /// `ws://…/stream` or `wss://…/stream` (the trading host).
    pub url: String,
    pub key_id: String,
    /// Never logged, never in an error (this type's `Debug` hides it).
    pub secret_key: String,
    pub backoff: BackoffPolicy,
    /// The first gap fill asks for orders updated since this time (the service's start, or
    /// the last event it stored); later ones since the last event seen.
    pub gap_fill_from: Timestamp,
    /// How far before the last event seen a gap fill starts (clock skew, same-instant events).
    pub gap_overlap: Duration,
    /// How long the WebSocket handshake, and then the authorization reply, may each take
    /// before the connection is given up.
    pub auth_timeout: Duration,
    /// A connection silent this long is sent a ping; silent as long again, it is taken for
    /// dead (a half-open TCP connection never ends by itself) and replaced.
    pub idle_timeout: Duration,
}

impl std::fmt::Debug for StreamConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamConfig")
            .field("url", &self.url)
            .field("key_id", &self.key_id)
            .field("secret_key", &"<hidden>")
            .field("backoff", &self.backoff)
            .field("gap_fill_from", &self.gap_fill_from)
            .field("gap_overlap", &self.gap_overlap)
            .field("auth_timeout", &self.auth_timeout)
            .field("idle_timeout", &self.idle_timeout)
            .finish()
    }
}

/// Why a connection ended (reported in [`StreamState::last_error`], then retried).
#[derive(Debug, thiserror::Error)]
pub enum StreamError {
    #[error("cannot connect to the trade-updates stream: {0}")]
    Connect(String),
    #[error("the trade-updates stream refused the credentials ({0})")]
    Unauthorized(String),
    #[error("no authorization reply from the trade-updates stream within {0:?}")]
    AuthTimeout(Duration),
    #[error("the trade-updates stream failed: {0}")]
    Socket(String),
    #[error("the trade-updates stream closed")]
    Closed,
    #[error("the trade-updates stream was silent for {0:?} and did not answer a ping")]
    Silent(Duration),
    #[error("the gap fill after connecting failed: {0}")]
    GapFill(BrokerError),
}

/// The running stream: a task that connects, maps and queues until dropped.
#[derive(Debug)]
pub struct TradeUpdatesStream {
    queue: Arc<ReportQueue>,
    health: Arc<StreamHealth>,
    mapper: Arc<Mutex<ReportMapper>>,
    ready: tokio::sync::watch::Sender<bool>,
    task: JoinHandle<()>,
}

impl TradeUpdatesStream {
    /// Starts the stream's task on the current runtime.
    pub fn spawn(config: StreamConfig, gap_fill: Arc<dyn GapFill>, clock: Arc<dyn Clock>) -> Self {
        let stream = Self::spawn_after_restore(config, gap_fill, clock);
        stream.restored();
        stream
    }

    /// Starts the stream's task, which connects only once [`TradeUpdatesStream::restored`] is
    /// called: a restarted service first seeds the mapper with what it already applied
    /// ([`TradeUpdatesStream::seed`]), so the first gap fill reports nothing twice.
    pub fn spawn_after_restore(config: StreamConfig, gap_fill: Arc<dyn GapFill>, clock: Arc<dyn Clock>) -> Self {
        let queue = Arc::new(ReportQueue::default());
        let health = Arc::new(StreamHealth::default());
        let mapper = Arc::new(Mutex::new(ReportMapper::new()));
        let (ready, waiting) = tokio::sync::watch::channel(false);
        let runner = Runner {
            last_event_at: None,
            resolve_wait: RESOLVE_EVERY,
            backoff: Backoff::new(config.backoff.clone()),
            config,
            gap_fill,
            clock,
            mapper: mapper.clone(),
            ready: waiting,
            queue: queue.clone(),
            health: health.clone(),
        };
        let task = tokio::spawn(runner.run());
        Self { queue, health, mapper, ready, task }
    }

    /// Records what an earlier process already reported of an order (see [`ReportMapper::seed`]).
    pub fn seed(
        &self,
        broker_order_id: &str,
        accepted: bool,
        filled_qty: Decimal,
        filled_notional: Decimal,
        execution_ids: impl IntoIterator<Item = String>,
    ) {
        self.mapper.lock().unwrap_or_else(PoisonError::into_inner).seed(
            broker_order_id,
            accepted,
            filled_qty,
            filled_notional,
            execution_ids,
        );
    }

    /// Learns an order's group from it read with its legs nested (see
    /// [`ReportMapper::learn_group`]): a submit's reply, a lookup, an open-order listing.
    pub fn learn_group(&self, order: &wire::Order) {
        self.mapper.lock().unwrap_or_else(PoisonError::into_inner).learn_group(order);
    }

    /// Whether `client_order_id` is one Alpaca gave a leg of a learned group.
    pub fn is_leg_client_id(&self, client_order_id: &str) -> bool {
        self.mapper.lock().unwrap_or_else(PoisonError::into_inner).is_leg_client_id(client_order_id)
    }

    /// Our client order id of the learned group Alpaca order `alpaca_id` belongs to.
    pub fn group_client_order_id(&self, alpaca_id: &str) -> Option<ClientOrderId> {
        self.mapper.lock().unwrap_or_else(PoisonError::into_inner).group_client_order_id(alpaca_id)
    }

    /// Lets the stream connect (once the mapper is seeded).
    pub fn restored(&self) {
        self.ready.send_replace(true);
    }

    /// The reports made so far, for the adapter's `poll` to drain.
    pub fn queue(&self) -> &Arc<ReportQueue> {
        &self.queue
    }

    pub fn health(&self) -> StreamState {
        self.health.snapshot()
    }
}

impl Drop for TradeUpdatesStream {
    fn drop(&mut self) {
        self.task.abort();
    }
}

type Socket = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

struct Runner {
    config: StreamConfig,
    gap_fill: Arc<dyn GapFill>,
    clock: Arc<dyn Clock>,
    mapper: Arc<Mutex<ReportMapper>>,
    /// Set once the mapper holds what an earlier process reported (see
    /// [`TradeUpdatesStream::spawn_after_restore`]); the first connection waits for it.
    ready: tokio::sync::watch::Receiver<bool>,
    queue: Arc<ReportQueue>,
    health: Arc<StreamHealth>,
    backoff: Backoff,
    last_event_at: Option<Timestamp>,
    /// The wait before the next read of unsettled groups (see [`RESOLVE_EVERY`]).
    resolve_wait: Duration,
}

impl Runner {
    async fn run(mut self) {
        if self.ready.wait_for(|ready| *ready).await.is_err() {
            return; // the stream was dropped before it was ready
        }
        loop {
            let error = match self.connect().await {
                Ok(socket) => {
                    self.backoff.reset();
                    self.health.update(|s| {
                        s.connected = true;
                        s.connections += 1;
                    });
                    tracing::info!(url = %self.config.url, "trade-updates stream connected");
                    let error = self.read(socket).await;
                    self.health.update(|s| s.connected = false);
                    error
                }
                Err(error) => error,
            };
            tracing::warn!(%error, "trade-updates stream down; reconnecting");
            let message = error.to_string();
            self.health.update(|s| s.last_error = Some(message));
            tokio::time::sleep(self.backoff.next_delay()).await;
        }
    }

    /// Connects, authenticates, listens and fills the gap.
    async fn connect(&mut self) -> Result<Socket, StreamError> {
        let timeout = self.config.auth_timeout;
        let (mut socket, _) = tokio::time::timeout(timeout, tokio_tungstenite::connect_async(self.config.url.as_str()))
            .await
            .map_err(|_| StreamError::Connect(format!("no WebSocket handshake within {timeout:?}")))?
            .map_err(|e| StreamError::Connect(e.to_string()))?;
        let authenticate = serde_json::json!({"action": "authenticate",
            "data": {"key_id": self.config.key_id, "secret_key": self.config.secret_key}});
        send(&mut socket, &authenticate).await?;
        tokio::time::timeout(timeout, authorization(&mut socket))
            .await
            .map_err(|_| StreamError::AuthTimeout(timeout))??;
        send(&mut socket, &serde_json::json!({"action": "listen", "data": {"streams": ["trade_updates"]}})).await?;
        // Updates arriving meanwhile wait in the socket and are read after: the mapper drops
        // whatever the gap fill already reported.
        let after = self.last_event_at.unwrap_or(self.config.gap_fill_from)
            - chrono::Duration::from_std(self.config.gap_overlap).unwrap_or_default();
        let orders = self.gap_fill.orders_updated_since(after).await.map_err(StreamError::GapFill)?;
        let now = self.clock.now();
        let mut mapper = self.mapper.lock().unwrap_or_else(PoisonError::into_inner);
        for order in &orders {
            self.queue.push(mapper.map_order(order, now));
        }
        Ok(socket)
    }

    /// Reads updates until the connection ends or stays silent through a ping. While a group
    /// waits to be read again from REST ([`ReportMapper::unresolved`]), it is every
    /// [`RESOLVE_EVERY`] between frames at first, less often while it stays unsettled.
    async fn read(&mut self, mut socket: Socket) -> StreamError {
        let idle = self.config.idle_timeout;
        let mut pinged = false;
        let mut last_frame = tokio::time::Instant::now();
        loop {
            let waiting = !self.mapper.lock().unwrap_or_else(PoisonError::into_inner).unresolved.is_empty();
            let wait = if waiting { self.resolve_wait.min(idle) } else { idle };
            let frame = match tokio::time::timeout(wait, socket.next()).await {
                Ok(Some(frame)) => frame,
                Ok(None) => return StreamError::Closed,
                Err(_) => {
                    if waiting {
                        self.resolve_groups().await;
                        self.resolve_wait = self.resolve_wait.saturating_mul(2).min(RESOLVE_AT_MOST_EVERY);
                    }
                    if last_frame.elapsed() < idle {
                        continue;
                    }
                    if pinged {
                        return StreamError::Silent(idle);
                    }
                    if let Err(error) = socket.send(Message::Ping(Default::default())).await {
                        return StreamError::Socket(error.to_string());
                    }
                    pinged = true;
                    last_frame = tokio::time::Instant::now();
                    continue;
                }
            };
            last_frame = tokio::time::Instant::now();
            pinged = false;
            let message = match frame {
                Ok(message) => message,
                Err(e) => return StreamError::Socket(e.to_string()),
            };
            let bytes: &[u8] = match &message {
                Message::Binary(bytes) => bytes,
                Message::Text(text) => text.as_bytes(),
                Message::Close(_) => return StreamError::Closed,
                Message::Ping(_) | Message::Pong(_) | Message::Frame(_) => continue,
            };
            self.handle(bytes).await;
        }
    }

    async fn handle(&mut self, bytes: &[u8]) {
        let message: wire::StreamMessage = match serde_json::from_slice(bytes) {
            Ok(message) => message,
            Err(e) => {
                tracing::warn!(error = %e, "unreadable trade-updates frame: skipped");
                return;
            }
        };
        if message.stream != "trade_updates" {
            tracing::debug!(stream = %message.stream, "stream message");
            return;
        }
        let update: wire::TradeUpdate = match serde_json::from_value(message.data) {
            Ok(update) => update,
            Err(e) => {
                tracing::warn!(error = %e, "unreadable trade update: skipped");
                return;
            }
        };
        if let Some(at) = update.timestamp {
            if self.last_event_at.is_none_or(|last| at > last) {
                self.last_event_at = Some(at);
                self.health.update(|s| s.last_event_at = Some(at));
            }
        }
        let unknown_member = update.order.in_group()
            && !self.mapper.lock().unwrap_or_else(PoisonError::into_inner).knows_group_member(&update.order.id);
        if unknown_member {
            // An order of a group not learned (its submit's reply not read yet, a restart, the
            // order that replaced a take-profit): its group is read first, so that a leg is
            // reported as our order and never as one of its own.
            match self.gap_fill.group_of(&update.order).await {
                Ok(Some(parent)) => self.mapper.lock().unwrap_or_else(PoisonError::into_inner).learn_group(&parent),
                Ok(None) => {}
                Err(e) => {
                    tracing::warn!(error = %e, order = %update.order.id, "the group of an order could not be read")
                }
            }
        }
        let (reports, waiting) = {
            let mut mapper = self.mapper.lock().unwrap_or_else(PoisonError::into_inner);
            let reports = mapper.map_update(&update, self.clock.now());
            (reports, !mapper.unresolved.is_empty())
        };
        self.queue.push(reports);
        if waiting {
            self.resolve_groups().await;
            self.resolve_wait = RESOLVE_EVERY;
        }
    }

    /// Reads each group waiting to be resolved again with its legs nested, and reports what
    /// that settles (a leg's fill the stream has not brought yet, the group's end). A failed
    /// read leaves the group waiting.
    async fn resolve_groups(&mut self) {
        let parents = self.mapper.lock().unwrap_or_else(PoisonError::into_inner).unresolved();
        for parent in parents {
            match self.gap_fill.nested_order(&parent).await {
                Ok(Some(order)) => {
                    let now = self.clock.now();
                    let reports = self.mapper.lock().unwrap_or_else(PoisonError::into_inner).map_order(&order, now);
                    self.queue.push(reports);
                }
                Ok(None) => tracing::warn!(order = %parent, "a group waiting to be resolved is unknown to Alpaca"),
                Err(e) => {
                    tracing::warn!(error = %e, order = %parent, "a group waiting to be resolved could not be read")
                }
            }
        }
    }
}

async fn send(socket: &mut Socket, message: &serde_json::Value) -> Result<(), StreamError> {
    socket.send(Message::Text(message.to_string().into())).await.map_err(|e| StreamError::Socket(e.to_string()))
}

/// Waits for the `authorization` reply.
async fn authorization(socket: &mut Socket) -> Result<(), StreamError> {
    while let Some(frame) = socket.next().await {
        let message = frame.map_err(|e| StreamError::Socket(e.to_string()))?;
        let bytes: &[u8] = match &message {
            Message::Binary(bytes) => bytes,
            Message::Text(text) => text.as_bytes(),
            Message::Close(_) => return Err(StreamError::Closed),
            _ => continue,
        };
        let Ok(message) = serde_json::from_slice::<wire::StreamMessage>(bytes) else { continue };
        if message.stream != "authorization" {
            continue;
        }
        let status = message.data.get("status").and_then(|s| s.as_str()).unwrap_or_default();
        return if status == "authorized" { Ok(()) } else { Err(StreamError::Unauthorized(status.to_string())) };
    }
    Err(StreamError::Closed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn ts(second: u32) -> Timestamp {
        Utc.with_ymd_and_hms(2026, 11, 25, 14, 31, second).unwrap()
    }

    fn cid(raw: &str) -> ClientOrderId {
        ClientOrderId::parse(raw).unwrap()
    }

    fn order(status: &str, filled_qty: u64, filled_avg_price: Option<Decimal>) -> wire::Order {
        serde_json::from_value(serde_json::json!({
            "id": "ord-1", "client_order_id": "to-ABCD-1", "symbol": "ABCD", "side": "buy",
            "qty": "100", "filled_qty": filled_qty.to_string(), "time_in_force": "day",
            "filled_avg_price": filled_avg_price.map(|p| p.to_string()), "status": status,
            "updated_at": "2026-11-25T14:31:30Z"
        }))
        .unwrap()
    }

    fn update(event: &str, order: wire::Order, at: Timestamp) -> wire::TradeUpdate {
        wire::TradeUpdate {
            event: event.into(),
            execution_id: None,
            order,
            timestamp: Some(at),
            price: None,
            qty: None,
            position_qty: None,
        }
    }

    fn fill(execution_id: &str, qty: u64, price: Decimal, cumulative: u64, at: Timestamp) -> wire::TradeUpdate {
        let status = if cumulative == 100 { "filled" } else { "partially_filled" };
        let event = if cumulative == 100 { "fill" } else { "partial_fill" };
        wire::TradeUpdate {
            execution_id: Some(execution_id.into()),
            price: Some(price),
            qty: Some(Decimal::from(qty)),
            ..update(event, order(status, cumulative, Some(price)), at)
        }
    }

    fn filled(execution_id: &str, quantity: u64, price: Decimal, at: Timestamp) -> BrokerReport {
        BrokerReport::Filled {
            client_order_id: cid("to-ABCD-1"),
            execution: Execution {
                execution_id: execution_id.into(),
                timestamp: at,
                quantity,
                price,
                fee: Decimal::ZERO,
            },
        }
    }

    fn accepted(at: Timestamp) -> BrokerReport {
        BrokerReport::Accepted { client_order_id: cid("to-ABCD-1"), broker_order_id: "ord-1".into(), at }
    }

    #[test]
    fn new_accepted_and_pending_new_acknowledge_an_order_once() {
        let mut mapper = ReportMapper::new();
        assert_eq!(
            mapper.map_update(&update("pending_new", order("pending_new", 0, None), ts(1)), ts(9)),
            vec![accepted(ts(1))]
        );
        assert_eq!(mapper.map_update(&update("new", order("new", 0, None), ts(2)), ts(9)), vec![]);
        assert_eq!(mapper.map_update(&update("accepted", order("accepted", 0, None), ts(3)), ts(9)), vec![]);
    }

    #[test]
    fn fills_report_their_execution_once_commission_free() {
        let mut mapper = ReportMapper::new();
        mapper.map_update(&update("new", order("new", 0, None), ts(1)), ts(9));
        let price = Decimal::new(17908, 2);
        assert_eq!(mapper.map_update(&fill("e-1", 40, price, 40, ts(2)), ts(9)), vec![filled("e-1", 40, price, ts(2))]);
        assert_eq!(mapper.map_update(&fill("e-1", 40, price, 40, ts(2)), ts(9)), vec![], "duplicate");
        assert_eq!(
            mapper.map_update(&fill("e-2", 60, price, 100, ts(3)), ts(9)),
            vec![filled("e-2", 60, price, ts(3))]
        );
    }

    /// Without the order's cumulative quantity only the execution id can tell a duplicate.
    #[test]
    fn a_duplicate_execution_id_is_dropped_even_without_the_cumulative_quantity() {
        let mut mapper = ReportMapper::new();
        let price = Decimal::from(10);
        let mut first = fill("e-1", 40, price, 40, ts(2));
        first.order.filled_qty = None;
        assert_eq!(mapper.map_update(&first, ts(9)), vec![accepted(ts(2)), filled("e-1", 40, price, ts(2))]);
        assert_eq!(mapper.map_update(&first, ts(9)), vec![]);
    }

    #[test]
    fn a_fill_without_a_prior_new_acknowledges_the_order_first() {
        let mut mapper = ReportMapper::new();
        let price = Decimal::from(10);
        assert_eq!(
            mapper.map_update(&fill("e-1", 100, price, 100, ts(2)), ts(9)),
            vec![accepted(ts(2)), filled("e-1", 100, price, ts(2))]
        );
    }

    #[test]
    fn a_fill_after_a_cancel_request_passes_through() {
        let mut mapper = ReportMapper::new();
        mapper.map_update(&update("new", order("new", 0, None), ts(1)), ts(9));
        assert_eq!(
            mapper.map_update(&update("pending_cancel", order("pending_cancel", 0, None), ts(2)), ts(9)),
            vec![]
        );
        let price = Decimal::from(10);
        assert_eq!(
            mapper.map_update(&fill("e-1", 100, price, 100, ts(3)), ts(9)),
            vec![filled("e-1", 100, price, ts(3))]
        );
    }

    #[test]
    fn endings_are_reported_once() {
        let c = cid("to-ABCD-1");
        let mut mapper = ReportMapper::new();
        assert_eq!(
            mapper.map_update(&update("canceled", order("canceled", 0, None), ts(4)), ts(9)),
            vec![BrokerReport::Canceled { client_order_id: c.clone(), at: ts(4) }]
        );
        assert_eq!(mapper.map_update(&update("canceled", order("canceled", 0, None), ts(4)), ts(9)), vec![]);

        let mut mapper = ReportMapper::new();
        assert_eq!(
            mapper.map_update(&update("expired", order("expired", 0, None), ts(5)), ts(9)),
            vec![BrokerReport::Expired { client_order_id: c.clone(), at: ts(5) }]
        );

        let mut mapper = ReportMapper::new();
        assert_eq!(
            mapper.map_update(&update("rejected", order("rejected", 0, None), ts(6)), ts(9)),
            vec![BrokerReport::Rejected { client_order_id: c.clone(), reason: REJECTED_BY_ALPACA.into(), at: ts(6) }]
        );

        let mut mapper = ReportMapper::new();
        assert_eq!(
            mapper.map_update(&update("order_cancel_rejected", order("new", 0, None), ts(7)), ts(9)),
            vec![BrokerReport::CancelRejected {
                client_order_id: c,
                reason: "cancel rejected by Alpaca".into(),
                at: ts(7)
            }]
        );
    }

    #[test]
    fn done_for_day_expires_a_day_order_but_not_a_gtc_one() {
        let mut mapper = ReportMapper::new();
        let day = order("done_for_day", 0, None);
        assert_eq!(
            mapper.map_update(&update("done_for_day", day, ts(5)), ts(9)),
            vec![BrokerReport::Expired { client_order_id: cid("to-ABCD-1"), at: ts(5) }]
        );
        let mut mapper = ReportMapper::new();
        let gtc = wire::Order { time_in_force: Some("gtc".into()), ..order("done_for_day", 0, None) };
        assert_eq!(mapper.map_update(&update("done_for_day", gtc, ts(5)), ts(9)), vec![]);
    }

    #[test]
    fn replace_and_pending_events_report_nothing() {
        let mut mapper = ReportMapper::new();
        mapper.map_update(&update("new", order("new", 0, None), ts(1)), ts(9));
        for event in ["pending_cancel", "pending_replace", "replaced", "calculated", "something_new"] {
            assert_eq!(mapper.map_update(&update(event, order("new", 0, None), ts(2)), ts(9)), vec![], "{event}");
        }
    }

    #[test]
    fn an_order_not_ours_is_skipped() {
        let mut mapper = ReportMapper::new();
        let foreign = wire::Order { client_order_id: "not ours / web".into(), ..order("new", 0, None) };
        assert_eq!(mapper.map_update(&update("new", foreign, ts(1)), ts(9)), vec![]);
    }

    #[test]
    fn a_missing_timestamp_falls_back_to_the_order_then_the_receipt() {
        let mut mapper = ReportMapper::new();
        let mut u = update("new", order("new", 0, None), ts(1));
        u.timestamp = None;
        assert_eq!(mapper.map_update(&u, ts(9)), vec![accepted(ts(30))]);
    }

    #[test]
    fn a_gap_fill_reports_the_unseen_fill_once_and_the_real_event_does_not_double_it() {
        let mut mapper = ReportMapper::new();
        let first = Decimal::from(10);
        mapper.map_update(&update("new", order("new", 0, None), ts(1)), ts(9));
        mapper.map_update(&fill("e-1", 40, first, 40, ts(2)), ts(9));
        // While disconnected the other 60 filled at 11: the average is 10.6.
        let snapshot = wire::Order { filled_at: Some(ts(20)), ..order("filled", 100, Some(Decimal::new(106, 1))) };
        let gap = filled("gap:ord-1:100", 60, Decimal::from(11), ts(20));
        assert_eq!(mapper.map_order(&snapshot, ts(50)), vec![gap]);
        assert_eq!(mapper.map_order(&snapshot, ts(51)), vec![], "the same gap found again");
        // The real execution arrives late: already covered.
        assert_eq!(mapper.map_update(&fill("e-2", 60, Decimal::from(11), 100, ts(20)), ts(52)), vec![]);
    }

    #[test]
    fn a_gap_fill_of_an_unseen_order_accepts_fills_and_closes_it() {
        let mut mapper = ReportMapper::new();
        let snapshot = wire::Order {
            submitted_at: Some(ts(1)),
            filled_at: Some(ts(3)),
            canceled_at: Some(ts(4)),
            ..order("canceled", 30, Some(Decimal::from(12)))
        };
        assert_eq!(
            mapper.map_order(&snapshot, ts(50)),
            vec![
                accepted(ts(1)),
                filled("gap:ord-1:30", 30, Decimal::from(12), ts(3)),
                BrokerReport::Canceled { client_order_id: cid("to-ABCD-1"), at: ts(4) },
            ]
        );
        // The stream's own canceled after the gap fill is a duplicate.
        assert_eq!(mapper.map_update(&update("canceled", snapshot.clone(), ts(4)), ts(51)), vec![]);
        // A rejected order was never accepted.
        let mut mapper = ReportMapper::new();
        let rejected = wire::Order { id: "ord-2".into(), failed_at: Some(ts(2)), ..order("rejected", 0, None) };
        assert_eq!(
            mapper.map_order(&rejected, ts(50)),
            vec![BrokerReport::Rejected {
                client_order_id: cid("to-ABCD-1"),
                reason: REJECTED_BY_ALPACA.into(),
                at: ts(2)
            }]
        );
    }

    #[test]
    fn a_gap_fill_of_an_order_already_reported_adds_nothing() {
        let mut mapper = ReportMapper::new();
        let price = Decimal::from(10);
        mapper.map_update(&fill("e-1", 100, price, 100, ts(2)), ts(9));
        assert_eq!(mapper.map_order(&order("filled", 100, Some(price)), ts(50)), vec![]);
    }

    #[test]
    fn backoff_doubles_to_its_ceiling_within_the_jitter_and_repeats_with_its_seed() {
        let policy = BackoffPolicy::default();
        let mut backoff = Backoff::new(policy.clone());
        let delays: Vec<Duration> = (0..10).map(|_| backoff.next_delay()).collect();
        for (i, delay) in delays.iter().enumerate() {
            let base = Duration::from_millis(500).saturating_mul(1 << i).min(Duration::from_secs(30));
            assert!(*delay >= base.mul_f64(0.8) && *delay <= base.mul_f64(1.2), "{i}: {delay:?}");
        }
        assert_ne!(delays[0], Duration::from_millis(500), "jittered");
        let mut again = Backoff::new(policy);
        assert_eq!((0..10).map(|_| again.next_delay()).collect::<Vec<_>>(), delays);
        backoff.reset();
        assert!(backoff.next_delay() <= Duration::from_millis(600));
    }

    #[test]
    fn the_config_never_shows_the_secret() {
        let config = StreamConfig {
            url: "ws://127.0.0.1:1/stream".into(),
            key_id: "AK1".into(),
            secret_key: "very-secret".into(),
            backoff: BackoffPolicy::default(),
            gap_fill_from: ts(0),
            gap_overlap: Duration::from_secs(5),
            auth_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(30),
        };
        assert!(!format!("{config:?}").contains("very-secret"));
    }
}

#[cfg(test)]
mod queue_tests {
    use super::*;

    /// The engine runner is woken as soon as reports arrive (not at its next polling tick), and
    /// only when there are some.
    #[tokio::test(start_paused = true)]
    async fn pushing_reports_wakes_the_runner_and_an_empty_push_does_not() {
        let queue = ReportQueue::default();
        let arrived = queue.arrived();
        queue.push(Vec::new());
        assert!(tokio::time::timeout(Duration::from_secs(1), arrived.notified()).await.is_err(), "nothing pushed");
        let id = ClientOrderId::parse("to-1").unwrap();
        let at = tradeops_core::time::parse_ts("2026-11-25T15:00:00Z").unwrap();
        queue.push([BrokerReport::Canceled { client_order_id: id, at }]);
        tokio::time::timeout(Duration::from_millis(1), arrived.notified()).await.expect("woken at once");
        assert_eq!(queue.drain().len(), 1);
    }
}
