//! The runner's venue part: every call to the execution broker goes through [`Venue`], which
//! bounds it in time ([`BROKER_TIMEOUT`]), notes whether the venue answered (a venue found
//! unavailable refuses new operator orders `BROKER_UNAVAILABLE` until a call succeeds again),
//! and keeps what a venue that fails leaves behind: orders whose submit went unanswered (looked
//! up by client order id before any resend), the venue's refusals owed to the engine as
//! reports, and the count of the broker's working orders.
//!
//! Every call that may trade — a submit (the engine's, the halt's exits, reconciliation's
//! resends), a cancel (the operator's, the halt's, reconciliation's), a look-up by client order
//! id (which decides a resend) and the description of a foreign order (which adopts it) — first
//! passes one check, [`Venue::permit`], here and nowhere else: this engine's [`Term`] is valid
//! on this process's monotonic clock (not over, and within the window of its last successful
//! renewal, `crate::cluster`). The call is then bounded by the end of the lease as well: what
//! has not left the process by then never leaves (the adapters' futures are cancel-safe). The
//! broker itself is private to this module, so no path reaches it around the check.
//!
//! A term whose window passed is not necessarily over: when a renewal succeeds again, sending
//! resumes, and what was refused meanwhile is kept, not lost — a submit is kept as one the
//! broker did not answer (looked up by client order id once the term is valid, sent again only
//! if the broker never received it, never if an operator was answered `BROKER_UNAVAILABLE`),
//! a cancel is sent again by reconciliation (the order stays `PENDING_CANCEL` and the broker's
//! copy shows no cancel on its way), a look-up is asked again later. Reads that cannot trade
//! (the broker's open orders, account, positions and reports) are not held back.

use crate::cluster::{NotValid, Term};
use rust_decimal::Decimal;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use tradeops_brokers::{BrokerError, ExecutionBroker, MarketUpdate, Rejection, VenueAccount, VenuePosition};
use tradeops_core::broker::{BrokerLookup, BrokerOpenOrder, BrokerReport};
use tradeops_core::engine::CommandError;
use tradeops_core::orders::{ClientOrderId, Order, OrderStatus};
use tradeops_core::risk::{RiskFigure, RiskRefusal, RiskRule};
use tradeops_core::Timestamp;

/// The longest the runner waits for one call to the execution broker: a venue that stops
/// answering never holds the engine (the emergency halt, the health probe and every command
/// wait behind it). A call not answered in time counts as the broker being unavailable.
pub(super) const BROKER_TIMEOUT: Duration = Duration::from_secs(2);

/// How long an order whose submit found the broker unavailable waits before it is looked up by
/// client order id (and sent again only if the broker does not have it): the venue may still be
/// taking the submit whose reply was lost. Longer when the venue asked for it (`retry_after`).
const RESEND_AFTER: Duration = Duration::from_secs(2);

/// The note an operator's order carries (as its `reject_reason`, while it is looked up) once
/// placing it was answered `BROKER_UNAVAILABLE`: it is never sent again.
pub(super) const UNANSWERED: &str =
    "placing it was answered BROKER_UNAVAILABLE: looked up at the broker, never sent again";

/// The execution broker as the runner sees it (see the module's doc).
pub(super) struct Venue {
    broker: Arc<dyn ExecutionBroker>,
    term: Arc<Term>,
    /// The broker's count of working orders, as of its last report or order taken (what the
    /// published view shows).
    open_orders: usize,
    /// The broker's answers owed to the engine: refusals of a submit or a cancel, delivered
    /// with the next reports.
    answers: Vec<BrokerReport>,
    /// Orders whose submit found the broker unavailable, with when each is due to be looked
    /// up: reconciliation asks by client order id and sends again only what never arrived.
    unconfirmed: BTreeMap<ClientOrderId, Timestamp>,
    /// A submit went out since the broker's working orders were last counted.
    recount: bool,
    /// The last call found the venue unavailable (why, and the venue's own wait).
    down: Option<(String, Option<Duration>)>,
    /// A remote venue (one with an event connection): its requests count against its limit,
    /// so its working orders are not counted after every batch nor for every health probe.
    remote: bool,
}

/// A broker call bounded by [`BROKER_TIMEOUT`]; past it, [`BrokerError::Unavailable`].
async fn bounded<T>(call: impl std::future::Future<Output = Result<T, BrokerError>>) -> Result<T, BrokerError> {
    match tokio::time::timeout(BROKER_TIMEOUT, call).await {
        Ok(answer) => answer,
        Err(_) => {
            Err(BrokerError::Unavailable { reason: format!("no answer within {BROKER_TIMEOUT:?}"), retry_after: None })
        }
    }
}

/// Leave to make one trading call, given by [`Venue::permit`] only: by when the call must be
/// answered (the end of the term's lease; `None`: a term nobody can take over).
struct Permit {
    until: Option<tokio::time::Instant>,
}

/// Why a trading call was not made, or not answered: the term (nothing of this engine may
/// reach the broker now), or the broker's own answer.
enum Refused {
    Term(NotValid),
    Broker(BrokerError),
}

/// A trading call under `permit`: bounded by [`BROKER_TIMEOUT`] (the broker unavailable past
/// it) and by the end of the term's lease (abandoned then: the term's window has passed).
async fn trading<T>(
    permit: Permit,
    call: impl std::future::Future<Output = Result<T, BrokerError>>,
) -> Result<T, Refused> {
    let timeout = tokio::time::Instant::now() + BROKER_TIMEOUT;
    let deadline = permit.until.map_or(timeout, |until| until.min(timeout));
    match tokio::time::timeout_at(deadline, call).await {
        Ok(answer) => answer.map_err(Refused::Broker),
        Err(_) if deadline < timeout => Err(Refused::Term(NotValid::Expired)),
        Err(_) => Err(Refused::Broker(BrokerError::Unavailable {
            reason: format!("no answer within {BROKER_TIMEOUT:?}"),
            retry_after: None,
        })),
    }
}

/// What a call refused for this engine's term (`why`) says where a broker error is expected.
fn not_sent(why: NotValid) -> BrokerError {
    let reason = match why {
        NotValid::Over => "this engine's term is over: nothing more is sent to the broker",
        NotValid::Expired => "this engine's term was not renewed in time: nothing is sent to the broker until it is",
    };
    BrokerError::Unavailable { reason: reason.into(), retry_after: None }
}

/// A broker's reports, bounded by [`BROKER_TIMEOUT`]: none this time when it does not answer.
async fn bounded_reports(call: impl std::future::Future<Output = Vec<BrokerReport>>) -> Vec<BrokerReport> {
    tokio::time::timeout(BROKER_TIMEOUT, call).await.unwrap_or_else(|_| {
        tracing::warn!("the execution broker did not report within {BROKER_TIMEOUT:?}");
        Vec::new()
    })
}

/// When an order whose submit or look-up found the venue unavailable is next looked up: after
/// [`RESEND_AFTER`], or the venue's own wait (`retry_after`) when it asked for longer.
fn resend_at(retry_after: Option<Duration>, now: Timestamp) -> Timestamp {
    let wait = retry_after.map_or(RESEND_AFTER, |after| after.max(RESEND_AFTER));
    now + chrono::Duration::from_std(wait).unwrap_or(chrono::Duration::seconds(2))
}

impl Venue {
    pub fn new(broker: Arc<dyn ExecutionBroker>, term: Arc<Term>, open_orders: usize) -> Venue {
        let remote = broker.connection().is_some();
        Venue {
            broker,
            term,
            open_orders,
            answers: Vec::new(),
            unconfirmed: BTreeMap::new(),
            recount: false,
            down: None,
            remote,
        }
    }

    /// The adapter's name as configured.
    pub fn name(&self) -> &'static str {
        self.broker.name()
    }

    /// The venue's notice that reports are waiting (a remote venue's stream; see
    /// [`ExecutionBroker::reports_waiting`]).
    pub fn reports_waiting(&self) -> Option<Arc<tokio::sync::Notify>> {
        self.broker.reports_waiting()
    }

    /// Rebuilds an in-process venue's book and account at start from the engine's open orders
    /// and held shares (nothing is sent: a real venue keeps its own); the orders it may never
    /// have received, for reconciliation to look up.
    pub async fn restore(
        &mut self,
        open: &[Order],
        held: &[(tradeops_core::Symbol, u64)],
        now: Timestamp,
    ) -> Vec<ClientOrderId> {
        let unsent = self.broker.restore(open, now).await;
        self.broker.open_account(held).await;
        unsent
    }

    /// The one check every trading call passes (see the module's doc): leave to make one now,
    /// or why not.
    fn permit(&self) -> Result<Permit, NotValid> {
        self.term.valid(tokio::time::Instant::now()).map(|until| Permit { until })
    }

    /// Why a new operator order is refused before anything is written or counted, when this
    /// engine may not send now: `EngineStopped` once its term is over, `BROKER_UNAVAILABLE`
    /// while its term's window has passed (it resumes once a renewal succeeds).
    pub fn term_refusal(&self) -> Option<CommandError> {
        match self.permit() {
            Ok(_) => None,
            Err(NotValid::Over) => Some(CommandError::EngineStopped),
            Err(NotValid::Expired) => Some(CommandError::BrokerUnavailable {
                reason:
                    "this service's term as the engine's leader was not renewed in time (the database did not answer): \
                         nothing is sent to the broker until it is"
                        .into(),
                retry_after: Some(Duration::from_secs(1)),
                client_order_id: None,
            }),
        }
    }

    /// A submit this engine's term kept from the broker, kept as one the broker did not answer
    /// (`abandoned`: it was under way when the lease ended and may have reached the broker, so
    /// the venue's usual wait applies before it is looked up; else it never left and is looked
    /// up as soon as the term is valid again). Returns what answers an operator's order.
    fn held_back(&mut self, order: &Order, now: Timestamp, abandoned: bool) -> CommandError {
        let id = &order.client_order_id;
        let due = if abandoned { resend_at(None, now) } else { now };
        self.unconfirmed.insert(id.clone(), due);
        tracing::warn!(client_order_id = %id, abandoned, "this engine's term was not renewed in time: the order is kept for reconciliation, looked up once the term is renewed");
        let reason = format!(
            "this service's term as the engine's leader was not renewed in time (the database did not answer): order {id} \
             is looked up once it is (it is marked REJECTED unless the broker received it, and never sent again)"
        );
        CommandError::BrokerUnavailable {
            reason,
            retry_after: Some(Duration::from_secs(1)),
            client_order_id: Some(id.clone()),
        }
    }

    /// A remote venue (see [`Venue::remote`]).
    pub fn is_remote(&self) -> bool {
        self.remote
    }

    /// The broker's count of working orders as last known.
    pub fn open_orders_known(&self) -> usize {
        self.open_orders
    }

    /// Why the venue is unavailable, and its own wait, while its last call found it so.
    pub fn down(&self) -> Option<&(String, Option<Duration>)> {
        self.down.as_ref()
    }

    /// The broker's working orders changed other than by a submit (an order adopted): counted
    /// again after the batch.
    pub fn open_orders_changed(&mut self) {
        self.recount = true;
    }

    /// Whether a submit went out since the working orders were last counted.
    pub fn needs_recount(&self) -> bool {
        self.recount
    }

    pub fn is_unconfirmed(&self, id: &ClientOrderId) -> bool {
        self.unconfirmed.contains_key(id)
    }

    pub fn any_unconfirmed(&self) -> bool {
        !self.unconfirmed.is_empty()
    }

    /// The broker reported on the order: it has it.
    pub fn confirmed(&mut self, id: &ClientOrderId) {
        self.unconfirmed.remove(id);
    }

    /// Takes the unconfirmed orders whose wait is over by `now`.
    pub fn due_for_lookup(&mut self, now: Timestamp) -> Vec<ClientOrderId> {
        let due: Vec<ClientOrderId> =
            self.unconfirmed.iter().filter(|(_, after)| **after <= now).map(|(id, _)| id.clone()).collect();
        for id in &due {
            self.unconfirmed.remove(id);
        }
        due
    }

    /// The order could not be looked up (`e`): asked again once the venue's wait is over.
    pub fn look_up_later(&mut self, id: ClientOrderId, e: &BrokerError, now: Timestamp) {
        let retry_after = match e {
            BrokerError::Unavailable { retry_after, .. } => *retry_after,
            _ => None,
        };
        self.unconfirmed.insert(id, resend_at(retry_after, now));
    }

    /// Notes whether the execution broker answered: a call that found it unavailable marks it
    /// down (new operator orders are refused until a call succeeds); any answer marks it up.
    fn note<T>(&mut self, answer: &Result<T, BrokerError>) {
        match answer {
            Err(BrokerError::Unavailable { reason, retry_after }) => {
                if self.down.is_none() {
                    tracing::warn!(%reason, "the execution broker is unavailable: new orders are refused until it answers");
                }
                self.down = Some((reason.clone(), *retry_after));
            }
            _ => {
                if self.down.take().is_some() {
                    tracing::info!("the execution broker answers again: new orders are taken");
                }
            }
        }
    }

    /// Sends an order. A refusal becomes the order's rejection (delivered with the next
    /// reports); an unreachable broker leaves the order as written ahead, for reconciliation to
    /// look up and send again. Returns the refusal that answers an operator's order: the
    /// venue's, or `EngineStopped` once this engine's term is over (nothing is sent).
    pub async fn submit(&mut self, order: &Order, now: Timestamp) -> Option<CommandError> {
        let id = &order.client_order_id;
        let permit = match self.permit() {
            Ok(permit) => permit,
            Err(NotValid::Over) => return Some(CommandError::EngineStopped),
            Err(NotValid::Expired) => return Some(self.held_back(order, now, false)),
        };
        self.recount = true;
        let sent = match trading(permit, self.broker.submit(order, now)).await {
            Ok(()) => Ok(()),
            Err(Refused::Term(_)) => return Some(self.held_back(order, now, true)),
            Err(Refused::Broker(e)) => Err(e),
        };
        self.note(&sent);
        match sent {
            Ok(()) => {
                self.unconfirmed.remove(id);
                None
            }
            Err(BrokerError::AlreadyReceived(_)) => {
                tracing::info!(client_order_id = %id, "the broker already has the order: its reports follow");
                self.unconfirmed.remove(id);
                None
            }
            Err(BrokerError::Unavailable { reason, retry_after }) => {
                self.unconfirmed.insert(id.clone(), resend_at(retry_after, now));
                tracing::warn!(client_order_id = %id, %reason, "the broker is unavailable: the order stays written ahead for reconciliation");
                let reason = format!(
                    "{reason} (order {id} is looked up: it is marked REJECTED unless the broker received it, and never sent again)"
                );
                Some(CommandError::BrokerUnavailable { reason, retry_after, client_order_id: Some(id.clone()) })
            }
            Err(e @ (BrokerError::Rejected { .. } | BrokerError::UnknownOrder(_))) => {
                tracing::warn!(client_order_id = %id, error = %e, "the broker refused the order");
                self.unconfirmed.remove(id);
                let (reason, kind) = match e {
                    BrokerError::Rejected { reason, kind } => (reason, kind),
                    other => (other.to_string(), Rejection::Other),
                };
                let refusal = refusal(order, &reason, kind, self.broker.name());
                self.answers.push(BrokerReport::Rejected { client_order_id: id.clone(), reason, at: now });
                refusal
            }
        }
    }

    /// Asks the broker to cancel an order (`status`: the order's status in the engine, if it
    /// knows it). A refusal becomes a `CancelRejected` report; an unreachable broker leaves the
    /// cancel to reconciliation, which finds it missing and sends it again. A broker that does
    /// not know an order whose submit it never confirmed says nothing yet: the order stays
    /// cancelling, and reconciliation looks it up — never sent, it is then marked so and never
    /// sent. Returns the refusal that answers an operator's cancel.
    pub async fn cancel(
        &mut self,
        id: &ClientOrderId,
        status: Option<OrderStatus>,
        now: Timestamp,
    ) -> Option<CommandError> {
        let permit = match self.permit() {
            Ok(permit) => permit,
            Err(NotValid::Over) => return Some(CommandError::EngineStopped),
            Err(NotValid::Expired) => {
                tracing::warn!(client_order_id = %id, "cancel not sent: this engine's term was not renewed in time; reconciliation sends it again once it is");
                return None;
            }
        };
        let answer = match trading(permit, self.broker.cancel(id, now)).await {
            Ok(()) => Ok(()),
            Err(Refused::Term(_)) => {
                tracing::warn!(client_order_id = %id, "cancel abandoned at the end of this engine's lease: reconciliation sends it again if the broker did not take it");
                return None;
            }
            Err(Refused::Broker(e)) => Err(e),
        };
        self.note(&answer);
        match answer {
            Ok(()) => None,
            Err(e) if e.is_retryable() => {
                tracing::warn!(client_order_id = %id, error = %e, "cancel not sent: reconciliation sends it again");
                None
            }
            Err(BrokerError::UnknownOrder(_)) if self.unconfirmed.contains_key(id) => {
                tracing::info!(client_order_id = %id, "cancel of an order the broker never confirmed: reconciliation looks it up");
                None
            }
            Err(e) => {
                tracing::warn!(client_order_id = %id, error = %e, "the broker refused the cancel");
                let (reason, refusal) = match e {
                    BrokerError::Rejected { reason, kind: Rejection::NotCancellable { filled } } => {
                        let status = match (filled, status) {
                            (true, _) => OrderStatus::Filled,
                            (false, Some(status)) => status,
                            (false, None) => OrderStatus::Canceled,
                        };
                        (reason, Some(CommandError::NotCancellable { status }))
                    }
                    BrokerError::Rejected { reason, .. } => (reason, None),
                    other => (other.to_string(), None),
                };
                self.answers.push(BrokerReport::CancelRejected { client_order_id: id.clone(), reason, at: now });
                refusal
            }
        }
    }

    /// What the broker knows of one client order id: a trading call, since its answer decides
    /// a resend (refused, as unavailable, while this engine may not send).
    pub async fn lookup(&mut self, id: &ClientOrderId) -> Result<BrokerLookup, BrokerError> {
        let permit = self.permit().map_err(not_sent)?;
        let found = match trading(permit, self.broker.lookup(id)).await {
            Err(Refused::Term(why)) => return Err(not_sent(why)),
            Err(Refused::Broker(e)) => Err(e),
            Ok(found) => Ok(found),
        };
        self.note(&found);
        found
    }

    /// The broker's working orders (their count kept for the view).
    pub async fn open_orders(&mut self) -> Result<Vec<BrokerOpenOrder>, BrokerError> {
        let open = bounded(self.broker.open_orders()).await;
        self.note(&open);
        if let Ok(open) = &open {
            self.open_orders = open.len();
        }
        open
    }

    /// Brings the count of the broker's working orders up to date (kept when it cannot be read).
    pub async fn count_open_orders(&mut self) {
        self.recount = false;
        let _ = self.open_orders().await;
    }

    /// The health probe's count of working orders: a remote venue's as reconciliation last
    /// listed them (a probe spends none of its request budget), an in-process one's asked now.
    pub async fn probe(&mut self) -> usize {
        if !self.remote {
            let _ = self.open_orders().await;
        }
        self.open_orders
    }

    /// A working broker order the engine did not place, as an order to adopt: a trading call,
    /// since an order this engine did not place may be a newer term's (refused, as unavailable,
    /// while this engine may not send).
    pub async fn foreign_order(&mut self, id: &ClientOrderId) -> Result<Option<Order>, BrokerError> {
        let permit = self.permit().map_err(not_sent)?;
        let found = trading(permit, self.broker.foreign_order(id)).await;
        self.looked_up(found)
    }

    /// An order the engine placed in an earlier term and has no record of, as it was sent: a
    /// trading call, as [`Venue::foreign_order`] (an id this engine does not know may be a
    /// newer term's).
    pub async fn sent_order(&mut self, id: &ClientOrderId) -> Result<Option<Order>, BrokerError> {
        let permit = self.permit().map_err(not_sent)?;
        let found = trading(permit, self.broker.sent_order(id)).await;
        self.looked_up(found)
    }

    /// The answer of a look-up by client order id under the term: a refusal for the term is
    /// the order not sent; the broker's answer, found or failed, is noted as any call's.
    fn looked_up(&mut self, found: Result<Option<Order>, Refused>) -> Result<Option<Order>, BrokerError> {
        let found = match found {
            Err(Refused::Term(why)) => return Err(not_sent(why)),
            Err(Refused::Broker(e)) => Err(e),
            Ok(found) => Ok(found),
        };
        if !matches!(found, Ok(None)) {
            self.note(&found);
        }
        found
    }

    /// A report to deliver again with the next ones (what it is about cannot be applied yet).
    pub fn owe(&mut self, report: BrokerReport) {
        self.answers.push(report);
    }

    /// Whether a remote venue's event connection has been made (and its gap filled) at least
    /// once since start: what an earlier term left at the venue is then among the reports.
    /// An in-process venue always is.
    pub fn caught_up(&self) -> bool {
        self.broker.connection().is_none_or(|c| c.connected || c.connections > 0)
    }

    /// The venue's account figures (`None`: a venue without books of its own, which says
    /// nothing about whether it is reachable).
    pub async fn account(&mut self) -> Result<Option<VenueAccount>, BrokerError> {
        let account = bounded(self.broker.account()).await;
        if !matches!(account, Ok(None)) {
            self.note(&account);
        }
        account
    }

    /// The venue's positions (`None`: a venue that keeps none).
    pub async fn positions(&mut self) -> Result<Option<Vec<VenuePosition>>, BrokerError> {
        let positions = bounded(self.broker.positions()).await;
        self.note(&positions);
        positions
    }

    /// The reports owed to the engine: the venue's refusals first, then those it has due by
    /// `now`.
    pub async fn reports(&mut self, now: Timestamp) -> Vec<BrokerReport> {
        let mut reports = std::mem::take(&mut self.answers);
        reports.extend(bounded_reports(self.broker.poll(now)).await);
        reports
    }

    /// An in-process venue's matching of its working orders against a market update.
    pub async fn on_market(&self, update: &MarketUpdate<'_>) -> Vec<BrokerReport> {
        bounded_reports(self.broker.on_market(update)).await
    }

    /// An in-process venue's DAY orders expire at the session's end.
    pub async fn expire_day_orders(&self, now: Timestamp) -> Vec<BrokerReport> {
        bounded_reports(self.broker.expire_day_orders(now)).await
    }

    /// When the next report an in-process venue delivers by itself is due.
    pub fn next_due(&self) -> Option<Timestamp> {
        self.broker.next_due()
    }
}

/// What the operator is answered when the venue (`broker`, by name) refuses `order` for good:
/// a refusal for buying power or shares is `RISK_BLOCKED` under the contract's `BUYING_POWER`
/// rule with the venue's figures (its buying power against the order's cost; or the shares it
/// holds available against those sold); a field it will not take is `VALIDATION_ERROR` naming
/// it (`order` when it named none it could be matched to); anything else is no refusal of the
/// command: the order is answered as placed and reads `REJECTED` with the venue's reason.
fn refusal(order: &Order, reason: &str, kind: Rejection, broker: &str) -> Option<CommandError> {
    let money = |d: Option<Decimal>| d.map(RiskFigure::Money).unwrap_or(RiskFigure::None);
    let shares = |d: Option<Decimal>| {
        d.and_then(|d| rust_decimal::prelude::ToPrimitive::to_u64(&d.trunc()))
            .map(RiskFigure::Shares)
            .unwrap_or(RiskFigure::None)
    };
    let risk = |limit, current| {
        CommandError::Risk(Box::new(RiskRefusal {
            rule: RiskRule::BuyingPower,
            limit,
            current,
            message: format!("The broker ({broker}) refused the order: {reason}"),
        }))
    };
    match kind {
        Rejection::BuyingPower { available, required } => Some(risk(money(available), money(required))),
        Rejection::SharesAvailable { available, requested } => {
            let requested = requested.or(Some(Decimal::from(order.quantity)));
            Some(risk(shares(available), shares(requested)))
        }
        Rejection::Invalid { field } => Some(CommandError::Invalid {
            field: field.unwrap_or("order"),
            reason: format!("refused by the broker ({broker}): {reason}"),
        }),
        Rejection::NotCancellable { .. } | Rejection::Other => None,
    }
}

#[cfg(test)]
mod tests;
