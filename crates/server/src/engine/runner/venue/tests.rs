//! [`Venue`]'s own tests, against a scripted broker that answers each call as told (an error,
//! or no answer at all): unanswered submits and their look-ups, the venue's refusals as
//! reports, a venue that is down or too slow, and the term's check on every trading call.

use super::*;
use async_trait::async_trait;
use std::sync::Mutex;
use tradeops_core::market::Side;
use tradeops_core::trades::fixtures;

/// A venue that answers each call with what the test scripted (once), and records the
/// trading requests it received.
#[derive(Default)]
struct Scripted {
    submit: Mutex<Option<BrokerError>>,
    cancel: Mutex<Option<BrokerError>>,
    /// Never answers a submit (a venue that hangs).
    hang: bool,
    received: Mutex<Vec<String>>,
}

#[async_trait]
impl ExecutionBroker for Scripted {
    fn name(&self) -> &'static str {
        "scripted"
    }
    async fn submit(&self, order: &Order, _now: Timestamp) -> Result<(), BrokerError> {
        if self.hang {
            std::future::pending::<()>().await;
        }
        self.received.lock().unwrap().push(format!("submit {}", order.client_order_id));
        self.submit.lock().unwrap().take().map_or(Ok(()), Err)
    }
    async fn cancel(&self, id: &ClientOrderId, _now: Timestamp) -> Result<(), BrokerError> {
        self.received.lock().unwrap().push(format!("cancel {id}"));
        self.cancel.lock().unwrap().take().map_or(Ok(()), Err)
    }
    async fn lookup(&self, id: &ClientOrderId) -> Result<BrokerLookup, BrokerError> {
        self.received.lock().unwrap().push(format!("lookup {id}"));
        Ok(BrokerLookup::Unknown)
    }
    async fn open_orders(&self) -> Result<Vec<BrokerOpenOrder>, BrokerError> {
        Ok(Vec::new())
    }
    async fn poll(&self, _now: Timestamp) -> Vec<BrokerReport> {
        Vec::new()
    }
}

fn now() -> Timestamp {
    fixtures::t(0)
}

fn order(id: &str, quantity: u64) -> Order {
    fixtures::order(id, Side::Sell, quantity, 0, "exit", None)
}

fn venue(broker: Scripted) -> (Venue, Arc<Scripted>, Arc<Term>) {
    let broker = Arc::new(broker);
    let term = Arc::new(Term::default());
    (Venue::new(broker.clone(), term.clone(), 0), broker, term)
}

fn unavailable(retry_after: Option<Duration>) -> BrokerError {
    BrokerError::Unavailable { reason: "503 from the venue".into(), retry_after }
}

#[tokio::test]
async fn a_submit_the_venue_did_not_answer_is_looked_up_after_the_venues_own_wait() {
    let (mut venue, _, _) =
        venue(Scripted { submit: Mutex::new(Some(unavailable(Some(Duration::from_secs(5))))), ..Scripted::default() });
    let refusal = venue.submit(&order("c-1", 10), now()).await;
    let Some(CommandError::BrokerUnavailable { retry_after, client_order_id, .. }) = refusal else {
        panic!("expected BROKER_UNAVAILABLE, got {refusal:?}");
    };
    assert_eq!(retry_after, Some(Duration::from_secs(5)));
    assert_eq!(client_order_id.as_ref().map(ClientOrderId::as_str), Some("c-1"));
    assert!(venue.down().is_some(), "new operator orders are refused while the venue is down");
    // Not before the venue's 5 s: a submit in flight may still land.
    assert!(venue.due_for_lookup(now() + chrono::Duration::seconds(4)).is_empty());
    let due = venue.due_for_lookup(now() + chrono::Duration::seconds(5));
    assert_eq!(due, vec![ClientOrderId::parse("c-1").unwrap()]);
    assert!(!venue.any_unconfirmed(), "taken for the look-up");
}

#[tokio::test]
async fn any_answer_brings_the_venue_back_up() {
    let (mut venue, _, _) = venue(Scripted { submit: Mutex::new(Some(unavailable(None))), ..Scripted::default() });
    venue.submit(&order("c-1", 10), now()).await;
    assert!(venue.down().is_some());
    assert_eq!(venue.probe().await, 0);
    assert!(venue.down().is_none(), "the listing answered");
}

#[tokio::test]
async fn a_resubmit_the_venue_already_has_is_no_refusal_and_no_longer_unconfirmed() {
    let id = ClientOrderId::parse("c-1").unwrap();
    let (mut venue, _, _) =
        venue(Scripted { submit: Mutex::new(Some(BrokerError::AlreadyReceived(id.clone()))), ..Scripted::default() });
    venue.look_up_later(id.clone(), &unavailable(None), now());
    assert_eq!(venue.submit(&order("c-1", 10), now()).await, None);
    assert!(!venue.is_unconfirmed(&id));
    assert!(venue.reports(now()).await.is_empty(), "no rejection owed to the engine");
}

#[tokio::test]
async fn a_venue_refusal_for_shares_is_a_buying_power_risk_refusal_and_a_rejection_report() {
    let kind = Rejection::SharesAvailable { available: Some(Decimal::from(3)), requested: None };
    let refused = BrokerError::Rejected { reason: "insufficient qty available for order".into(), kind };
    let (mut venue, _, _) = venue(Scripted { submit: Mutex::new(Some(refused)), ..Scripted::default() });
    let refusal = venue.submit(&order("c-1", 10), now()).await;
    let Some(CommandError::Risk(risk)) = refusal else { panic!("expected RISK_BLOCKED, got {refusal:?}") };
    assert_eq!(risk.rule, RiskRule::BuyingPower);
    assert_eq!((risk.limit, risk.current), (RiskFigure::Shares(3), RiskFigure::Shares(10)));
    assert!(risk.message.contains("scripted"), "{}", risk.message);
    let reports = venue.reports(now()).await;
    assert!(
        matches!(&reports[..], [BrokerReport::Rejected { reason, .. }] if reason.contains("insufficient qty")),
        "{reports:?}"
    );
    assert!(venue.down().is_none(), "a refusal is an answer");
}

#[tokio::test]
async fn a_field_the_venue_refuses_is_named_and_any_other_refusal_answers_the_order_as_placed() {
    let invalid = BrokerError::Rejected { reason: "bad tif".into(), kind: Rejection::Invalid { field: None } };
    let (mut venue, broker, _) = venue(Scripted { submit: Mutex::new(Some(invalid)), ..Scripted::default() });
    let refusal = venue.submit(&order("c-1", 10), now()).await;
    assert!(matches!(refusal, Some(CommandError::Invalid { field: "order", .. })), "{refusal:?}");
    *broker.submit.lock().unwrap() = Some(BrokerError::rejected("symbol not tradable"));
    assert_eq!(venue.submit(&order("c-2", 10), now()).await, None, "the order reads REJECTED instead");
    assert_eq!(venue.reports(now()).await.len(), 2);
}

#[tokio::test(start_paused = true)]
async fn a_venue_that_does_not_answer_counts_as_unavailable_after_the_timeout() {
    let (mut venue, _, _) = venue(Scripted { hang: true, ..Scripted::default() });
    let started = tokio::time::Instant::now();
    let refusal = venue.submit(&order("c-1", 10), now()).await;
    assert_eq!(started.elapsed(), BROKER_TIMEOUT);
    assert!(matches!(refusal, Some(CommandError::BrokerUnavailable { .. })), "{refusal:?}");
    assert!(venue.is_unconfirmed(&ClientOrderId::parse("c-1").unwrap()));
}

#[tokio::test]
async fn once_the_term_is_over_nothing_reaches_the_broker() {
    let (mut venue, broker, term) = venue(Scripted::default());
    assert!(term.end());
    assert!(!term.end(), "ended once");
    let id = ClientOrderId::parse("c-1").unwrap();
    assert_eq!(venue.submit(&order("c-1", 10), now()).await, Some(CommandError::EngineStopped));
    assert_eq!(venue.cancel(&id, Some(OrderStatus::Accepted), now()).await, Some(CommandError::EngineStopped));
    assert!(broker.received.lock().unwrap().is_empty());
}

/// A term whose window passed (no renewal for `LEASE − MARGIN`) sends nothing, keeps what
/// it refused, and sends again once a renewal succeeds.
#[tokio::test(start_paused = true)]
async fn a_trading_call_is_refused_and_kept_once_the_term_s_window_passes_and_resumes_after_a_renewal() {
    let broker = Arc::new(Scripted::default());
    let term = Arc::new(Term::leased());
    let mut venue = Venue::new(broker.clone(), term.clone(), 0);
    let sent = |b: &Scripted| b.received.lock().unwrap().clone();
    term.renewed(tokio::time::Instant::now());
    assert_eq!(venue.submit(&order("c-1", 10), now()).await, None);
    assert_eq!(sent(&broker), vec!["submit c-1"]);

    tokio::time::advance(crate::cluster::LEASE - crate::cluster::MARGIN).await;
    let refusal = venue.submit(&order("c-2", 10), now()).await;
    assert!(
        matches!(&refusal, Some(CommandError::BrokerUnavailable { client_order_id: Some(id), .. }) if id.as_str() == "c-2"),
        "{refusal:?}"
    );
    assert!(venue.term_refusal().is_some(), "new operator orders are refused before anything is written");
    let (c1, c2) = (ClientOrderId::parse("c-1").unwrap(), ClientOrderId::parse("c-2").unwrap());
    assert_eq!(venue.cancel(&c1, Some(OrderStatus::Accepted), now()).await, None, "left to reconciliation");
    assert!(venue.lookup(&c2).await.is_err(), "a look-up may lead to a resend");
    assert!(venue.foreign_order(&c2).await.is_err(), "an order not ours may be a newer term's");
    assert_eq!(sent(&broker), vec!["submit c-1"], "nothing more reached the broker");
    assert!(venue.down().is_none(), "the venue itself is not down");
    assert!(venue.reports(now()).await.is_empty(), "no rejection: the order is kept");
    assert_eq!(venue.due_for_lookup(now()), vec![c2.clone()], "never sent: looked up at once");

    // Renewed again: the order kept is looked up, and the cancel sent.
    term.renewed(tokio::time::Instant::now());
    assert!(venue.term_refusal().is_none());
    assert_eq!(venue.lookup(&c2).await.ok(), Some(BrokerLookup::Unknown));
    assert_eq!(venue.submit(&order("c-2", 10), now()).await, None);
    assert_eq!(venue.cancel(&c1, Some(OrderStatus::PendingCancel), now()).await, None);
    assert_eq!(sent(&broker), vec!["submit c-1", "lookup c-2", "submit c-2", "cancel c-1"]);
}

/// A call under way when the lease ends is abandoned then (not at the broker's timeout),
/// and the order kept as one the broker may have received.
#[tokio::test(start_paused = true)]
async fn a_submit_under_way_when_the_lease_ends_is_abandoned_and_looked_up() {
    let broker = Arc::new(Scripted { hang: true, ..Scripted::default() });
    let term = Arc::new(Term::leased());
    let mut venue = Venue::new(broker.clone(), term.clone(), 0);
    let renewed = tokio::time::Instant::now();
    term.renewed(renewed);
    tokio::time::advance(Duration::from_millis(100)).await;
    let refusal = venue.submit(&order("c-1", 10), now()).await;
    assert_eq!(tokio::time::Instant::now(), renewed + crate::cluster::LEASE, "abandoned at the lease's end");
    assert!(matches!(refusal, Some(CommandError::BrokerUnavailable { .. })), "{refusal:?}");
    let id = ClientOrderId::parse("c-1").unwrap();
    assert!(venue.is_unconfirmed(&id));
    assert!(venue.due_for_lookup(now()).is_empty(), "it may be at the broker: the venue's wait applies");
    assert!(venue.down().is_none());
}

#[tokio::test]
async fn a_cancel_of_a_filled_order_answers_not_cancellable_filled() {
    let refused = BrokerError::Rejected {
        reason: "order is already in \"filled\" state".into(),
        kind: Rejection::NotCancellable { filled: true },
    };
    let (mut venue, _, _) = venue(Scripted { cancel: Mutex::new(Some(refused)), ..Scripted::default() });
    let id = ClientOrderId::parse("c-1").unwrap();
    let refusal = venue.cancel(&id, Some(OrderStatus::Accepted), now()).await;
    assert_eq!(refusal, Some(CommandError::NotCancellable { status: OrderStatus::Filled }));
    let reports = venue.reports(now()).await;
    assert!(matches!(&reports[..], [BrokerReport::CancelRejected { .. }]), "{reports:?}");
}

#[tokio::test]
async fn a_cancel_the_venue_could_not_take_is_left_to_reconciliation() {
    let (mut venue, _, _) = venue(Scripted { cancel: Mutex::new(Some(unavailable(None))), ..Scripted::default() });
    let id = ClientOrderId::parse("c-1").unwrap();
    assert_eq!(venue.cancel(&id, Some(OrderStatus::Accepted), now()).await, None);
    assert!(venue.reports(now()).await.is_empty(), "no CancelRejected: it is sent again");
    assert!(venue.down().is_some());
}

#[tokio::test]
async fn a_cancel_of_an_order_the_venue_never_confirmed_says_nothing_yet() {
    let id = ClientOrderId::parse("c-1").unwrap();
    let (mut venue, _, _) =
        venue(Scripted { cancel: Mutex::new(Some(BrokerError::UnknownOrder(id.clone()))), ..Scripted::default() });
    venue.look_up_later(id.clone(), &unavailable(None), now());
    assert_eq!(venue.cancel(&id, Some(OrderStatus::PendingCancel), now()).await, None);
    assert!(venue.reports(now()).await.is_empty(), "the look-up decides");
}
