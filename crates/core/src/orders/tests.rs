use super::*;
use crate::time::parse_ts;
use proptest::prelude::*;
use OrderStatus::*;

fn at() -> Timestamp {
    parse_ts("2026-11-20T15:00:00Z").unwrap()
}

fn order(qty: u64) -> Order {
    Order::new(
        ClientOrderId::parse("c-1").unwrap(),
        Symbol::parse("ABCD").unwrap(),
        Side::Buy,
        OrderType::Limit,
        TimeInForce::Day,
        qty,
        Some(Decimal::new(1000, 2)),
        None,
        at(),
    )
}

fn fill(id: &str, qty: u64, cents: i64) -> OrderEvent {
    OrderEvent::Filled(Execution {
        execution_id: id.into(),
        timestamp: at(),
        quantity: qty,
        price: Decimal::new(cents, 2),
        fee: Decimal::ZERO,
    })
}

fn accepted() -> OrderEvent {
    OrderEvent::Accepted { broker_order_id: "b-1".into() }
}

#[test]
fn accepted_partial_then_filled_with_exact_average() {
    let mut o = order(300);
    assert_eq!(o.apply(accepted(), at()), Ok(Accepted));
    assert_eq!(o.apply(fill("e1", 100, 1000), at()), Ok(PartiallyFilled));
    assert_eq!(o.apply(fill("e2", 100, 1001), at()), Ok(PartiallyFilled));
    assert_eq!(o.apply(fill("e3", 100, 1001), at()), Ok(Filled));
    assert_eq!(o.filled_notional, Decimal::new(300_200, 2));
    assert_eq!(o.average_fill_price(), Some(Decimal::new(100_067, 4)), "10.00667 → 10.0067");
    assert_eq!(o.remaining(), 0);
}

#[test]
fn a_fill_racing_a_cancel_and_a_late_fill_after_it_are_booked() {
    let mut o = order(300);
    o.apply(accepted(), at()).unwrap();
    assert_eq!(o.apply(OrderEvent::CancelRequested, at()), Ok(PendingCancel));
    assert_eq!(o.apply(fill("e1", 100, 1000), at()), Ok(PendingCancel));
    assert_eq!(o.apply(OrderEvent::Canceled, at()), Ok(Canceled));
    assert_eq!(o.apply(fill("e2", 50, 1000), at()), Ok(Canceled), "late fill after the cancel");
    assert_eq!(o.filled_quantity, 150);
    assert_eq!(o.apply(fill("e3", 150, 1000), at()), Ok(Filled), "a late fill can complete it");
}

#[test]
fn cancel_rejected_returns_to_working() {
    let mut o = order(10);
    o.apply(accepted(), at()).unwrap();
    o.apply(fill("e1", 4, 1000), at()).unwrap();
    o.apply(OrderEvent::CancelRequested, at()).unwrap();
    assert_eq!(o.apply(OrderEvent::CancelRejected, at()), Ok(PartiallyFilled));
    let mut fresh = order(10);
    fresh.apply(OrderEvent::CancelRequested, at()).unwrap();
    assert_eq!(fresh.apply(OrderEvent::CancelRejected, at()), Ok(New));
}

#[test]
fn refusals_change_nothing() {
    let mut o = order(10);
    o.apply(accepted(), at()).unwrap();
    o.apply(fill("e1", 10, 1000), at()).unwrap();
    let before = o.clone();
    assert_eq!(
        o.apply(OrderEvent::CancelRequested, at()),
        Err(OrderError::IllegalTransition { from: Filled, event: "cancel request" })
    );
    assert!(matches!(o.apply(fill("e2", 1, 1000), at()), Err(OrderError::Overfill { .. })));
    assert_eq!(o.apply(fill("e1", 1, 1000), at()), Err(OrderError::DuplicateExecution("e1".into())));
    assert_eq!(o, before);
    let mut p = order(10);
    assert!(matches!(p.apply(fill("x", 11, 1000), at()), Err(OrderError::Overfill { .. })));
    assert_eq!(p.apply(fill("x", 0, 1000), at()), Err(OrderError::InvalidFill));
    assert_eq!(p.apply(OrderEvent::Rejected { reason: "no".into() }, at()), Ok(Rejected));
    assert!(p.apply(accepted(), at()).is_err());
}

#[test]
fn client_order_ids_are_validated() {
    assert!(ClientOrderId::parse("strat:ABCD:20261120:1").is_ok());
    for bad in ["", "has space", "ü", &"x".repeat(65)] {
        assert!(ClientOrderId::parse(bad).is_err(), "{bad:?}");
    }
}

fn allowed(from: OrderStatus, to: OrderStatus) -> bool {
    match from {
        New => matches!(to, Accepted | PartiallyFilled | Filled | PendingCancel | Canceled | Rejected | Expired),
        Accepted => matches!(to, PartiallyFilled | Filled | PendingCancel | Canceled | Rejected | Expired),
        PartiallyFilled => matches!(to, PartiallyFilled | Filled | PendingCancel | Canceled | Expired),
        // A fill may race the cancel, the cancel may land or be refused (back to working), the
        // broker may still reject or expire it: every status can follow.
        PendingCancel => true,
        Canceled => matches!(to, Canceled | Filled),
        Expired => matches!(to, Expired | Filled),
        Filled | Rejected => false,
    }
}

fn event_strategy() -> impl Strategy<Value = OrderEvent> {
    prop_oneof![
        Just(accepted()),
        (0u8..8, 1u64..60, 900i64..1100).prop_map(|(id, q, c)| fill(&format!("e{id}"), q, c)),
        Just(OrderEvent::CancelRequested),
        Just(OrderEvent::Canceled),
        Just(OrderEvent::CancelRejected),
        Just(OrderEvent::Rejected { reason: "r".into() }),
        Just(OrderEvent::Expired),
    ]
}

proptest! {
    /// Whatever arrives, in whatever order: only table transitions happen, refused events change
    /// nothing, fills never exceed the order, FILLED exactly when fully filled, the books equal
    /// the executions, and a final order never becomes working again.
    #[test]
    fn the_state_machine_holds_its_invariants(qty in 1u64..200, events in prop::collection::vec(event_strategy(), 1..40)) {
        let mut o = order(qty);
        for event in events {
            let before = o.clone();
            match o.apply(event, at()) {
                Ok(to) => prop_assert!(allowed(before.status, to), "{:?} → {:?}", before.status, to),
                Err(_) => prop_assert_eq!(&o, &before),
            }
            prop_assert!(o.filled_quantity <= o.quantity);
            prop_assert_eq!(o.status == Filled, o.filled_quantity == o.quantity && o.status != Rejected);
            prop_assert_eq!(o.executions.iter().map(|e| e.quantity).sum::<u64>(), o.filled_quantity);
            let notional: Decimal = o.executions.iter().map(|e| e.price * Decimal::from(e.quantity)).sum();
            prop_assert_eq!(notional, o.filled_notional);
            if before.status.is_final() {
                prop_assert!(o.status.is_final(), "{:?} became {:?}", before.status, o.status);
            }
        }
    }
}
