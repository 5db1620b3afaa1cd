//! A bracket's protective order at the broker: placed when the entry fills, cancelled to free
//! the shares before any exit (which waits for the cancel), the rest protected again, and taken
//! back after a restart.

use super::super::{Command, CommandError, Effect, Engine, Event, ManualOrder, Reply};
use super::ProtectionKind;
use crate::broker::BrokerReport;
use crate::market::Side;
use crate::orders::{ClientOrderId, Execution, ExitLegs, Order, OrderStatus, OrderType, TimeInForce};
use crate::settings::{MarketCalendarKind, Settings};
use crate::symbol::Symbol;
use crate::time::{parse_ts, Timestamp};
use rust_decimal::Decimal;

const NOW: &str = "2026-11-20T15:00:00Z";

fn t() -> Timestamp {
    parse_ts(NOW).unwrap()
}

fn sym() -> Symbol {
    Symbol::parse("ABCD").unwrap()
}

fn d(cents: i64) -> Decimal {
    Decimal::new(cents, 2)
}

fn engine() -> Engine {
    let mut settings = Settings::default();
    settings.runtime.market_calendar = MarketCalendarKind::AlwaysOpen;
    let mut e = Engine::new(settings, d(10_000_000), |_| None);
    e.handle(Event::Mark { symbol: sym(), price: d(500) }, t());
    e
}

fn legs(stop: i64, target: Option<i64>) -> ExitLegs {
    ExitLegs { stop_price: d(stop), stop_limit_price: None, take_profit: target.map(d) }
}

fn order(side: Side, quantity: u64, legs: Option<ExitLegs>) -> Command {
    Command::PlaceOrder(ManualOrder {
        client_order_id: None,
        symbol: sym(),
        side,
        quantity,
        order_type: OrderType::Market,
        limit_price: None,
        stop_price: None,
        time_in_force: TimeInForce::Day,
        reason: None,
        legs,
    })
}

fn command(e: &mut Engine, c: Command) -> (Result<Reply, CommandError>, Vec<Effect>) {
    let mut fx = e.handle(Event::Command(c), t());
    let Some(Effect::Reply(reply)) = fx.pop() else { panic!("a command ends with its reply") };
    (reply, fx)
}

fn submitted(fx: &[Effect]) -> Vec<Order> {
    fx.iter().filter_map(|f| if let Effect::Submit(o) = f { Some(Order::clone(o)) } else { None }).collect()
}

fn cancels(fx: &[Effect]) -> Vec<ClientOrderId> {
    fx.iter().filter_map(|f| if let Effect::Cancel(id) = f { Some(id.clone()) } else { None }).collect()
}

fn report(e: &mut Engine, r: BrokerReport) -> Vec<Effect> {
    e.handle(Event::Broker(r), t())
}

fn accept(e: &mut Engine, id: &ClientOrderId) -> Vec<Effect> {
    report(
        e,
        BrokerReport::Accepted { client_order_id: id.clone(), broker_order_id: format!("b-{id}").into(), at: t() },
    )
}

fn fill(e: &mut Engine, id: &ClientOrderId, exec: &str, quantity: u64, cents: i64) -> Vec<Effect> {
    let execution =
        Execution { execution_id: exec.into(), timestamp: t(), quantity, price: d(cents), fee: Decimal::ZERO };
    report(e, BrokerReport::Filled { client_order_id: id.clone(), execution })
}

fn canceled(e: &mut Engine, id: &ClientOrderId) -> Vec<Effect> {
    report(e, BrokerReport::Canceled { client_order_id: id.clone(), at: t() })
}

/// Buys 10 ABCD with a stop at 4.80 (and a target at 5.40), filled at 5.00; returns the
/// protective order the fill placed, acknowledged by the broker.
fn protected(e: &mut Engine) -> Order {
    let (reply, fx) = command(e, order(Side::Buy, 10, Some(legs(480, Some(540)))));
    assert!(reply.is_ok(), "{reply:?}");
    let entry = submitted(&fx).remove(0);
    accept(e, &entry.client_order_id);
    let fx = fill(e, &entry.client_order_id, "x1", 10, 500);
    let placed = submitted(&fx);
    assert_eq!(placed.len(), 1, "the entry's fill places its protective order: {fx:?}");
    let protective = placed[0].clone();
    accept(e, &protective.client_order_id);
    protective
}

#[test]
fn a_filled_bracket_entry_rests_a_gtc_stop_with_its_target_at_the_broker_for_the_whole_position() {
    let mut e = engine();
    let p = protected(&mut e);
    assert_eq!(
        (p.side, p.order_type, p.time_in_force, p.quantity),
        (Side::Sell, OrderType::Stop, TimeInForce::Gtc, 10)
    );
    assert_eq!((p.stop_price, p.legs), (Some(d(480)), Some(legs(480, Some(540)))));
    assert!(p.is_protective());
    let protection = e.protection(&sym());
    assert_eq!((protection.kind, protection.order_id), (ProtectionKind::Broker, Some(p.client_order_id.clone())));
    let levels = e.position_levels(&sym()).expect("the bracket's levels are in force");
    assert_eq!((levels.stop_loss, levels.target), (d(480), Some(d(540))));
}

#[test]
fn legs_are_refused_naming_their_field_and_nothing_is_placed() {
    let mut e = engine();
    let cases = [
        (order(Side::Buy, 10, Some(legs(500, None))), "stop_loss.stop_price"),
        (order(Side::Buy, 10, Some(legs(480, Some(500)))), "take_profit.limit_price"),
        (order(Side::Sell, 10, Some(legs(480, None))), "stop_loss"),
        (
            order(
                Side::Buy,
                10,
                Some(ExitLegs { stop_price: d(480), stop_limit_price: Some(d(481)), take_profit: None }),
            ),
            "stop_loss.limit_price",
        ),
    ];
    for (c, field) in cases {
        let (reply, fx) = command(&mut e, c);
        assert!(matches!(reply, Err(CommandError::Invalid { field: f, .. }) if f == field), "{field}: {reply:?}");
        assert!(submitted(&fx).is_empty(), "a refused order sends nothing");
    }
    assert!(e.orders().is_empty());
}

#[test]
fn the_preview_states_the_risk_to_the_stop_and_the_reward_to_the_target() {
    let e = engine();
    let Command::PlaceOrder(m) = order(Side::Buy, 10, Some(legs(480, Some(540)))) else { unreachable!() };
    let preview = e.preview(&m, Some(d(500)), t()).expect("previewed");
    assert_eq!((preview.risk_to_stop, preview.reward_to_target), (Some(d(200)), Some(d(400))));
}

#[test]
fn a_close_waits_for_the_protective_cancel_then_sells_everything_and_protects_nothing_more() {
    let mut e = engine();
    let p = protected(&mut e);
    let (reply, fx) = command(&mut e, Command::ClosePosition { symbol: sym(), quantity: None });
    let Ok(Reply::Close { client_order_id: close, status, .. }) = reply else { panic!("{reply:?}") };
    assert_eq!(status, OrderStatus::New);
    assert!(submitted(&fx).is_empty(), "the shares are held by the protective order: the sell waits");
    assert_eq!(cancels(&fx), std::slice::from_ref(&p.client_order_id));
    assert!(e.is_held_exit(&close));
    let fx = canceled(&mut e, &p.client_order_id);
    let sent = submitted(&fx);
    assert_eq!(sent.len(), 1, "{fx:?}");
    assert_eq!((sent[0].client_order_id.clone(), sent[0].quantity), (close.clone(), 10));
    assert!(!e.is_held_exit(&close));
    accept(&mut e, &close);
    let fx = fill(&mut e, &close, "x2", 10, 495);
    assert!(submitted(&fx).is_empty(), "flat: nothing to protect");
    assert_eq!(e.protection(&sym()).kind, ProtectionKind::None);
    assert_eq!(e.position_levels(&sym()), None);
}

#[test]
fn a_partial_close_sells_its_part_and_protects_the_rest_with_a_new_stop() {
    let mut e = engine();
    let p = protected(&mut e);
    let (reply, _) = command(&mut e, Command::ClosePosition { symbol: sym(), quantity: Some(4) });
    assert!(reply.is_ok(), "{reply:?}");
    let fx = canceled(&mut e, &p.client_order_id);
    let mut sent = submitted(&fx);
    sent.sort_by_key(|o| o.is_protective());
    assert_eq!(sent.len(), 2, "{fx:?}");
    assert_eq!((sent[0].is_protective(), sent[0].quantity), (false, 4));
    assert_eq!((sent[1].is_protective(), sent[1].quantity, sent[1].legs), (true, 6, p.legs));
}

#[test]
fn an_exit_held_while_the_stop_filled_is_withdrawn_never_sent() {
    let mut e = engine();
    let p = protected(&mut e);
    let (reply, _) = command(&mut e, Command::ClosePosition { symbol: sym(), quantity: None });
    let Ok(Reply::Close { client_order_id: close, .. }) = reply else { panic!("{reply:?}") };
    // The stop filled at the broker before the cancel landed.
    let fx = fill(&mut e, &p.client_order_id, "x3", 10, 479);
    assert!(submitted(&fx).is_empty(), "no sell of shares that are gone: {fx:?}");
    assert_eq!(e.order(&close).map(|o| o.status), Some(OrderStatus::Canceled));
    assert!(e.positions().get(&sym()).is_none_or(|p| p.is_flat()));
}

#[test]
fn the_emergency_halt_frees_the_shares_then_sends_its_exit_and_protects_nothing_again() {
    let mut e = engine();
    let p = protected(&mut e);
    let (reply, fx) = command(&mut e, Command::EmergencyHalt { reason: "test".into(), actor: "op".into() });
    assert!(reply.is_ok());
    assert!(submitted(&fx).is_empty(), "the halt's exit waits for the protective cancel: {fx:?}");
    assert!(cancels(&fx).contains(&p.client_order_id));
    let fx = canceled(&mut e, &p.client_order_id);
    let sent = submitted(&fx);
    assert_eq!(sent.len(), 1, "{fx:?}");
    assert!(!sent[0].is_protective() && sent[0].quantity == 10);
    assert!(super::super::is_liquidation(&sent[0]));
}

#[test]
fn an_operators_cancel_of_the_protective_order_is_not_undone() {
    let mut e = engine();
    let p = protected(&mut e);
    let (reply, _) = command(&mut e, Command::CancelOrder { client_order_id: p.client_order_id.clone() });
    assert!(reply.is_ok());
    let fx = canceled(&mut e, &p.client_order_id);
    assert!(submitted(&fx).is_empty(), "{fx:?}");
    assert_eq!(
        e.protection(&sym()).kind,
        ProtectionKind::None,
        "nothing rests at the broker, and the engine does not watch a bracket's stop"
    );
    assert!(e.position_levels(&sym()).is_some(), "the levels stay shown");
}

#[test]
fn after_a_restart_an_exit_waiting_for_the_cancel_waits_again_and_the_cancel_is_sent_again() {
    let mut e = engine();
    let p = protected(&mut e);
    let (reply, _) = command(&mut e, Command::ClosePosition { symbol: sym(), quantity: None });
    let Ok(Reply::Close { client_order_id: close, .. }) = reply else { panic!("{reply:?}") };
    // What was persisted: the protective order acknowledged (its cancel lost), the exit NEW.
    let mut open: Vec<Order> = e.orders().values().filter(|o| !o.status.is_final()).map(|o| Order::clone(o)).collect();
    for o in &mut open {
        if o.client_order_id == p.client_order_id {
            o.status = OrderStatus::Accepted;
        }
    }
    let restored = super::super::Restored {
        positions: e.positions().values().cloned().collect(),
        open_orders: open,
        ..Default::default()
    };
    let mut again = Engine::restore(e.settings().clone(), d(10_000_000), |_| None, restored, t());
    let fx = again.restore_protection(t());
    assert_eq!(cancels(&fx), std::slice::from_ref(&p.client_order_id));
    assert!(again.is_held_exit(&close), "never sent before the shares are freed");
    assert!(again.position_levels(&sym()).is_some(), "the bracket's levels are in force again");
    let fx = canceled(&mut again, &p.client_order_id);
    assert_eq!(submitted(&fx).iter().map(|o| o.client_order_id.clone()).collect::<Vec<_>>(), [close]);
}

fn close_all(e: &mut Engine) -> ClientOrderId {
    let (reply, _) = command(e, Command::ClosePosition { symbol: sym(), quantity: None });
    let Ok(Reply::Close { client_order_id, .. }) = reply else { panic!("{reply:?}") };
    client_order_id
}

#[test]
fn a_held_exit_cancelled_is_withdrawn_here_and_the_position_is_protected_again() {
    let mut e = engine();
    let p = protected(&mut e);
    let close = close_all(&mut e);
    let (reply, fx) = command(&mut e, Command::CancelOrder { client_order_id: close.clone() });
    assert!(matches!(reply, Ok(Reply::Cancel { status: OrderStatus::Canceled, .. })), "{reply:?}");
    assert!(cancels(&fx).is_empty(), "the broker never had it: nothing to cancel there: {fx:?}");
    assert!(!e.is_held_exit(&close));
    let fx = canceled(&mut e, &p.client_order_id);
    let sent = submitted(&fx);
    assert_eq!(sent.len(), 1, "{fx:?}");
    assert!(sent[0].is_protective() && sent[0].quantity == 10, "the whole position protected again");
}

#[test]
fn the_emergency_halt_over_a_held_close_sells_the_position_once_the_shares_are_free() {
    let mut e = engine();
    let p = protected(&mut e);
    let close = close_all(&mut e);
    let (reply, fx) = command(&mut e, Command::EmergencyHalt { reason: "test".into(), actor: "op".into() });
    assert!(reply.is_ok());
    assert!(submitted(&fx).is_empty(), "{fx:?}");
    assert!(!cancels(&fx).contains(&close), "the held close is withdrawn, not cancelled at the broker");
    assert_eq!(e.order(&close).map(|o| o.status), Some(OrderStatus::Canceled));
    let fx = canceled(&mut e, &p.client_order_id);
    let sent = submitted(&fx);
    assert_eq!(sent.len(), 1, "the halt's exit goes once the shares are free: {fx:?}");
    assert!(super::super::is_liquidation(&sent[0]) && sent[0].quantity == 10);
}

#[test]
fn a_refused_cancel_of_the_stop_withdraws_the_exits_waiting_for_it() {
    let mut e = engine();
    let p = protected(&mut e);
    let close = close_all(&mut e);
    let fx = report(
        &mut e,
        BrokerReport::CancelRejected { client_order_id: p.client_order_id.clone(), reason: "no".into(), at: t() },
    );
    assert!(submitted(&fx).is_empty(), "never a sell of shares the stop still holds: {fx:?}");
    let withdrawn = e.order(&close).expect("kept");
    assert_eq!(withdrawn.status, OrderStatus::Canceled);
    assert!(withdrawn.reject_reason.as_deref().is_some_and(|r| r.contains("refused to cancel")), "{withdrawn:?}");
    assert!(!e.is_held_exit(&close));
    assert_eq!(e.protection(&sym()).kind, ProtectionKind::Broker, "the stop still rests");
    let (reply, _) = command(&mut e, Command::ClosePosition { symbol: sym(), quantity: None });
    assert!(reply.is_ok(), "the operator can close again: {reply:?}");
}

#[test]
fn an_exit_that_ends_unfilled_leaves_the_position_protected_again() {
    let mut e = engine();
    let p = protected(&mut e);
    let close = close_all(&mut e);
    canceled(&mut e, &p.client_order_id);
    let fx = report(&mut e, BrokerReport::Rejected { client_order_id: close.clone(), reason: "no".into(), at: t() });
    let sent = submitted(&fx);
    assert_eq!(sent.len(), 1, "{fx:?}");
    assert!(sent[0].is_protective() && sent[0].quantity == 10);
}

#[test]
fn a_day_exit_held_past_its_trading_day_is_never_sent() {
    let mut settings = Settings::default();
    settings.runtime.market_calendar = MarketCalendarKind::Nyse;
    let mut e = Engine::new(settings, d(10_000_000), |_| None);
    e.handle(Event::Mark { symbol: sym(), price: d(500) }, t());
    let p = protected(&mut e);
    let close = close_all(&mut e);
    let next_day = t() + chrono::Duration::days(1);
    let fx = e.handle(
        Event::Broker(BrokerReport::Canceled { client_order_id: p.client_order_id.clone(), at: next_day }),
        next_day,
    );
    assert!(submitted(&fx).iter().all(|o| o.client_order_id != close), "{fx:?}");
    assert_eq!(e.order(&close).map(|o| o.status), Some(OrderStatus::Canceled));
}
