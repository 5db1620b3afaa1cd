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
    e.handle(Event::Mark { symbol: sym(), price: d(500), bid: None }, t());
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
        extended_hours: false,
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
    e.handle(Event::Mark { symbol: sym(), price: d(500), bid: None }, t());
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

/// A strategy for these tests: buys 10 shares on its first bar and manages them with the stop
/// the test sets (none until then) and the target it sets (none unless set), where it sells
/// half the position; its target taken, its stop moves to the entry (5.00).
struct Stopped {
    stop: StopCell,
    target: StopCell,
    bought: bool,
    held: bool,
}

impl crate::strategy::Strategy for Stopped {
    fn id(&self) -> &'static str {
        "stopped"
    }
    fn version(&self) -> &'static str {
        "1"
    }
    fn on_bar(
        &mut self,
        _bar: &crate::market::Bar,
        ctx: &crate::strategy::StrategyContext,
        _params: &crate::settings::StrategyAllocatorSettings,
    ) -> Vec<crate::strategy::Decision> {
        if ctx.position > 0 || self.bought {
            return Vec::new();
        }
        self.bought = true;
        vec![crate::strategy::Decision::Buy { quantity: Some(10), rule: "TEST_ENTRY", text: "buy".into() }]
    }
    fn on_entry_filled(&mut self, _quantity: u64, _price: Decimal) {
        self.held = true;
    }
    fn reset_day(&mut self) {}
    fn levels(&self) -> Option<crate::strategy::Levels> {
        let stop = (*self.stop.lock().unwrap()).filter(|_| self.held)?;
        Some(crate::strategy::Levels { stop_loss: stop, target: *self.target.lock().unwrap() })
    }
    fn target_quantity(&self, held: u64, _params: &crate::settings::StrategyAllocatorSettings) -> u64 {
        held / 2
    }
    fn on_target_filled(&mut self, _quantity: u64, _price: Decimal) {
        *self.target.lock().unwrap() = None;
        *self.stop.lock().unwrap() = Some(d(500));
    }
    fn adopt_levels(&mut self, stop: Decimal, target: Option<Decimal>) {
        *self.stop.lock().unwrap() = Some(stop);
        *self.target.lock().unwrap() = target;
    }
}

type StopCell = std::sync::Arc<std::sync::Mutex<Option<Decimal>>>;

/// An engine whose `Stopped` strategy on ABCD has bought 10 at 5.00 on a bar with its stop at
/// 4.80: the fill's effects, and the cell the test moves the stop with.
fn strategy_filled(settings: impl FnOnce(&mut Settings)) -> (Engine, StopCell, Vec<Effect>) {
    let (e, stop, _, fx) = strategy_filled_with(None, settings);
    (e, stop, fx)
}

/// [`strategy_filled`] with the strategy's target at `target`: the fill's effects, and the
/// cells of the stop and the target.
fn strategy_filled_with(
    target: Option<Decimal>,
    settings: impl FnOnce(&mut Settings),
) -> (Engine, StopCell, StopCell, Vec<Effect>) {
    let mut s = Settings::default();
    s.runtime.market_calendar = MarketCalendarKind::AlwaysOpen;
    settings(&mut s);
    let mut e = Engine::new(s, d(10_000_000), crate::strategy::make);
    e.handle(Event::Mark { symbol: sym(), price: d(500), bid: None }, t());
    e.handle(Event::Command(Command::Watch { symbol: sym(), source: "MANUAL".into() }), t());
    let stop: StopCell = std::sync::Arc::new(std::sync::Mutex::new(Some(d(480))));
    let target_cell: StopCell = std::sync::Arc::new(std::sync::Mutex::new(target));
    let strategy = Stopped { stop: stop.clone(), target: target_cell.clone(), bought: false, held: false };
    e.replace_strategy(&sym(), Some(Box::new(strategy)));
    let fx = bar(&mut e, 0);
    let entry = submitted(&fx).remove(0);
    assert_eq!((entry.side, entry.quantity), (Side::Buy, 10), "{fx:?}");
    accept(&mut e, &entry.client_order_id);
    let fx = fill(&mut e, &entry.client_order_id, "x1", 10, 500);
    (e, stop, target_cell, fx)
}

/// A bar of ABCD at 5.00, `minute` minutes after `t()`.
fn bar(e: &mut Engine, minute: i64) -> Vec<Effect> {
    let p = crate::market::Price::from_f64_tick(5.0);
    let start = t() + chrono::Duration::minutes(minute);
    let bar = crate::market::Bar { start, open: p, high: p, low: p, close: p, volume: 1000 };
    let event = Event::Bar { symbol: sym(), bar, prev_close: d(450), relative_volume: Some(3.0) };
    e.handle(event, start + chrono::Duration::minutes(1))
}

fn violations(fx: &[Effect]) -> Vec<(crate::risk::RiskRule, String)> {
    fx.iter()
        .filter_map(|f| match f {
            Effect::Violation { rule, detail: crate::risk::ViolationDetail::Refused { message, .. }, .. } => {
                Some((*rule, message.clone()))
            }
            _ => None,
        })
        .collect()
}

#[test]
fn a_strategy_position_rests_its_stop_at_the_broker_and_the_copy_follows_the_strategy() {
    let (mut e, stop, fx) = strategy_filled(|_| {});
    let placed = submitted(&fx);
    assert_eq!(placed.len(), 1, "the entry's fill places the strategy's stop: {fx:?}");
    let p = &placed[0];
    assert!(p.is_protective());
    assert_eq!(
        (p.side, p.order_type, p.time_in_force, p.quantity, p.stop_price),
        (Side::Sell, OrderType::Stop, TimeInForce::Gtc, 10, Some(d(480)))
    );
    assert_eq!(e.protection(&sym()).kind, ProtectionKind::Engine, "not acknowledged yet");
    accept(&mut e, &p.client_order_id);
    assert_eq!(e.protection(&sym()).kind, ProtectionKind::Broker);
    // A bar with the stop unchanged changes nothing at the broker.
    let fx = bar(&mut e, 1);
    assert!(cancels(&fx).is_empty() && submitted(&fx).is_empty(), "{fx:?}");
    // The strategy moves its stop (to a price a venue takes in whole cents): the broker's copy is
    // replaced — cancelled, then placed again once the cancel is confirmed.
    *stop.lock().unwrap() = Some(Decimal::new(49876, 4));
    let fx = bar(&mut e, 2);
    assert_eq!(cancels(&fx), vec![p.client_order_id.clone()], "{fx:?}");
    let fx = canceled(&mut e, &p.client_order_id);
    let again = submitted(&fx);
    assert_eq!(again.len(), 1, "{fx:?}");
    assert!(again[0].is_protective());
    assert_eq!((again[0].quantity, again[0].stop_price), (10, Some(d(498))), "rounded down to the cent");
    assert!(violations(&fx).is_empty());
}

#[test]
fn require_broker_stop_sells_a_strategy_position_whose_stop_the_broker_refused() {
    let (mut e, _, fx) = strategy_filled(|_| {});
    let p = submitted(&fx).remove(0);
    let fx = report(
        &mut e,
        BrokerReport::Rejected { client_order_id: p.client_order_id.clone(), reason: "no".into(), at: t() },
    );
    let found = violations(&fx);
    assert_eq!(found.len(), 1, "{fx:?}");
    assert_eq!(found[0].0, crate::risk::RiskRule::BrokerStopMissing);
    assert!(found[0].1.contains("the broker refused it"), "{}", found[0].1);
    let sold = submitted(&fx);
    assert_eq!(sold.len(), 1, "{fx:?}");
    assert_eq!((sold[0].side, sold[0].order_type, sold[0].quantity), (Side::Sell, OrderType::Market, 10));
    assert!(sold[0].reason.as_deref().unwrap().starts_with("BROKER_STOP_MISSING: "), "{:?}", sold[0].reason);
    assert_eq!(sold[0].strategy_id.as_deref(), Some("stopped"));
}

#[test]
fn require_broker_stop_sells_a_strategy_position_whose_stop_never_rested_in_time() {
    let (mut e, _, fx) = strategy_filled(|_| {});
    let p = submitted(&fx).remove(0);
    let wait = |s| t() + chrono::Duration::seconds(s);
    let fx = e.handle(Event::Tick, wait(super::BROKER_STOP_DEADLINE_SECONDS - 1));
    assert!(violations(&fx).is_empty(), "{fx:?}");
    let fx = e.handle(Event::Tick, wait(super::BROKER_STOP_DEADLINE_SECONDS));
    let found = violations(&fx);
    assert_eq!(found.len(), 1, "{fx:?}");
    assert!(found[0].1.contains("not resting at the broker within 5 s"), "{}", found[0].1);
    // The stop the broker may yet hold is cancelled first: the exit waits for its shares.
    assert_eq!(cancels(&fx), vec![p.client_order_id.clone()]);
    assert!(submitted(&fx).is_empty());
    let fx = canceled(&mut e, &p.client_order_id);
    let sold = submitted(&fx);
    assert_eq!(sold.len(), 1, "{fx:?}");
    assert_eq!((sold[0].side, sold[0].quantity), (Side::Sell, 10));
    // Flat once sold: nothing protects it, nothing more is placed.
    let fx = fill(&mut e, &sold[0].client_order_id, "x2", 10, 499);
    assert!(submitted(&fx).is_empty(), "{fx:?}");
    assert_eq!(e.protection(&sym()).kind, ProtectionKind::None);
}

#[test]
fn a_stop_resting_in_time_or_the_setting_off_sells_nothing() {
    let (mut e, _, fx) = strategy_filled(|_| {});
    let p = submitted(&fx).remove(0);
    accept(&mut e, &p.client_order_id);
    let fx = e.handle(Event::Tick, t() + chrono::Duration::seconds(60));
    assert!(violations(&fx).is_empty() && submitted(&fx).is_empty(), "{fx:?}");

    let (mut e, _, fx) = strategy_filled(|s| s.risk_controls.require_broker_stop = false);
    let p = submitted(&fx).remove(0);
    let fx = report(
        &mut e,
        BrokerReport::Rejected { client_order_id: p.client_order_id.clone(), reason: "no".into(), at: t() },
    );
    assert!(violations(&fx).is_empty() && submitted(&fx).is_empty(), "{fx:?}");
    // The engine still watches the strategy's level.
    assert_eq!(e.protection(&sym()).kind, ProtectionKind::Engine);
}

/// A strategy position whose strategy has a target (5.40, half sold there): the take-profit
/// and the stop one-cancels-other for 5 shares, the stop alone for the other 5, placed when the
/// entry fills; acknowledged, the position reads `BROKER` with the stop for the rest's id.
fn targeted() -> (Engine, StopCell, StopCell, Order, Order) {
    let (mut e, stop, target, fx) = strategy_filled_with(Some(d(540)), |_| {});
    let placed = submitted(&fx);
    assert_eq!(placed.len(), 2, "the take-profit's order and the rest's stop: {fx:?}");
    let (a, b) = (placed[0].clone(), placed[1].clone());
    assert_eq!(e.protection(&sym()).kind, ProtectionKind::Engine, "not acknowledged yet");
    accept(&mut e, &a.client_order_id);
    assert_eq!(e.protection(&sym()).kind, ProtectionKind::Engine, "5 of 10 resting");
    accept(&mut e, &b.client_order_id);
    (e, stop, target, a, b)
}

#[test]
fn a_strategy_target_rests_as_a_take_profit_for_its_part_and_a_stop_for_the_rest() {
    let (e, _, _, a, b) = targeted();
    let of = |o: &Order| (o.side, o.order_type, o.time_in_force, o.quantity, o.stop_price, o.legs);
    assert_eq!(of(&a), (Side::Sell, OrderType::Stop, TimeInForce::Gtc, 5, Some(d(480)), Some(legs(480, Some(540)))));
    assert_eq!(of(&b), (Side::Sell, OrderType::Stop, TimeInForce::Gtc, 5, Some(d(480)), Some(legs(480, None))));
    assert!(a.is_protective() && b.is_protective());
    let protection = e.protection(&sym());
    assert_eq!((protection.kind, protection.order_id), (ProtectionKind::Broker, Some(b.client_order_id.clone())));
    assert!(e.target_at_broker(&sym()), "the strategy leaves its target to the broker");
}

#[test]
fn the_take_profit_filling_is_the_scale_out_and_the_other_stop_follows_to_breakeven() {
    let (mut e, stop, target, a, b) = targeted();
    let fx = fill(&mut e, &a.client_order_id, "x2", 5, 541);
    assert_eq!(*target.lock().unwrap(), None, "the strategy learnt it took its profit");
    assert_eq!(*stop.lock().unwrap(), Some(d(500)));
    assert_eq!(cancels(&fx), std::slice::from_ref(&b.client_order_id), "the rest's stop follows: {fx:?}");
    assert!(submitted(&fx).is_empty(), "placed again once its cancel is confirmed");
    let fx = canceled(&mut e, &b.client_order_id);
    let again = submitted(&fx);
    assert_eq!(again.len(), 1, "{fx:?}");
    assert_eq!((again[0].quantity, again[0].legs), (5, Some(legs(500, None))), "the rest at breakeven");
    accept(&mut e, &again[0].client_order_id);
    assert_eq!(e.protection(&sym()).kind, ProtectionKind::Broker);
    assert!(!e.target_at_broker(&sym()));
    // The next bar changes nothing at the broker: no second take-profit, no second sale.
    let fx = bar(&mut e, 1);
    assert!(submitted(&fx).is_empty() && cancels(&fx).is_empty(), "{fx:?}");
    assert_eq!(e.positions()[&sym()].quantity, 5);
}

#[test]
fn a_stop_elected_sells_both_parts_and_a_flat_position_keeps_nothing_resting() {
    let (mut e, _, target, a, b) = targeted();
    let fx = fill(&mut e, &a.client_order_id, "x2", 5, 479);
    assert!(submitted(&fx).is_empty() && cancels(&fx).is_empty(), "the other stop is elected too: {fx:?}");
    assert_eq!(*target.lock().unwrap(), Some(d(540)), "a stop is no take-profit");
    let fx = fill(&mut e, &b.client_order_id, "x3", 5, 479);
    assert!(submitted(&fx).is_empty(), "{fx:?}");
    assert!(e.positions()[&sym()].is_flat());
    assert_eq!(e.protective_orders(&sym()).count(), 0);
}

#[test]
fn a_close_frees_the_shares_of_both_orders_and_sells_once_both_have_ended() {
    let (mut e, _, _, a, b) = targeted();
    let (reply, fx) = command(&mut e, Command::ClosePosition { symbol: sym(), quantity: None });
    let Ok(Reply::Close { client_order_id: close, .. }) = reply else { panic!("{reply:?}") };
    assert!(submitted(&fx).is_empty(), "the sell waits for the shares: {fx:?}");
    assert_eq!(cancels(&fx), [a.client_order_id.clone(), b.client_order_id.clone()], "both freed");
    assert!(e.is_held_exit(&close));
    let fx = canceled(&mut e, &a.client_order_id);
    assert!(submitted(&fx).is_empty(), "the rest's stop still holds its shares: {fx:?}");
    assert!(e.is_held_exit(&close));
    let fx = canceled(&mut e, &b.client_order_id);
    let sent = submitted(&fx);
    assert_eq!(sent.len(), 1, "{fx:?}");
    assert_eq!((sent[0].client_order_id.clone(), sent[0].quantity), (close, 10));
}

#[test]
fn after_a_restart_both_orders_are_taken_back_and_the_strategy_learns_whether_it_scaled_out() {
    use crate::strategy::Levels;
    let (e, _, _, a, b) = targeted();
    let restart = |open: Vec<Order>| {
        let restored = super::super::Restored {
            positions: e.positions().values().cloned().collect(),
            open_orders: open,
            watched: vec![super::super::Watched {
                symbol: sym(),
                status: super::super::StrategyStatus::Hold,
                added_at: t(),
            }],
            ..Default::default()
        };
        Engine::restore(e.settings().clone(), d(10_000_000), crate::strategy::make, restored, t())
    };
    let open: Vec<Order> = e.orders().values().filter(|o| !o.status.is_final()).map(|o| Order::clone(o)).collect();
    let mut again = restart(open);
    let fx = again.restore_protection(t());
    assert!(submitted(&fx).is_empty() && cancels(&fx).is_empty(), "taken back, not placed again: {fx:?}");
    assert_eq!(
        again.position_levels(&sym()),
        Some(Levels { stop_loss: d(480), target: Some(d(540)) }),
        "a take-profit resting: the target not taken yet"
    );
    let protection = again.protection(&sym());
    assert_eq!((protection.kind, protection.order_id), (ProtectionKind::Broker, Some(b.client_order_id.clone())));
    // The restarted strategy (momentum_breakout, half at the target) wants what rests.
    let fx = bar(&mut again, 1);
    assert!(submitted(&fx).is_empty() && cancels(&fx).is_empty(), "{fx:?}");

    // Only a stop at the entry rests: the target was taken before the restart.
    let mut breakeven = b.clone();
    breakeven.legs = Some(legs(500, None));
    breakeven.stop_price = Some(d(500));
    let mut again = restart(vec![breakeven]);
    again.restore_protection(t());
    assert_eq!(again.position_levels(&sym()), Some(Levels { stop_loss: d(500), target: None }), "scaled out");
    let _ = a;
}

/// A target goes to the venue as a sell limit: on its tick (whole cents from $1, hundredths of
/// a cent below), rounded up, never below the strategy's level; a stop rounded down.
#[test]
fn a_target_is_rounded_up_to_the_venue_tick_and_a_stop_down() {
    let p = |s: &str| s.parse::<Decimal>().unwrap();
    for (target, venue) in
        [("5.75", "5.75"), ("5.7501", "5.76"), ("5.759", "5.76"), ("0.51234", "0.5124"), ("0.99999", "1.0000")]
    {
        assert_eq!(super::venue_target(p(target)), p(venue), "{target}");
        assert!(super::venue_target(p(target)) >= p(target));
    }
    assert_eq!(super::venue_stop(p("5.759")), p("5.75"));
    assert_eq!(super::venue_stop(p("0.51236")), p("0.5123"));
}

/// The whole day on the NYSE calendar (CONTRACT §12): a stop resting at the broker protects in
/// the regular session only; from 16:00 the engine holds it, and fires it when the last trade
/// crosses it as an extended-hours limit under the last trade — after freeing the shares the
/// broker's copy holds — re-priced while the market falls away, until it fills.
#[test]
fn after_the_close_the_engine_holds_the_stop_and_fires_it_as_an_extended_hours_limit() {
    let mut settings = Settings::default();
    settings.runtime.market_calendar = MarketCalendarKind::Nyse;
    let mut e = Engine::new(settings, d(10_000_000), |_| None);
    let at = |text: &str| parse_ts(text).unwrap();
    let mark = |e: &mut Engine, cents: i64, when: Timestamp| {
        e.handle(Event::Mark { symbol: sym(), price: d(cents), bid: None }, when)
    };
    let broker = |e: &mut Engine, r: BrokerReport, when: Timestamp| e.handle(Event::Broker(r), when);
    // Friday 2026-11-20, 10:00 New York: a bracket entry, filled; its stop rests at the broker.
    let ten = at("2026-11-20T15:00:00Z");
    mark(&mut e, 500, ten);
    let mut fx = e.handle(Event::Command(order(Side::Buy, 10, Some(legs(480, None)))), ten);
    assert!(matches!(fx.pop(), Some(Effect::Reply(Ok(_)))));
    let entry = submitted(&fx).remove(0);
    let ack = |id: &ClientOrderId, when| BrokerReport::Accepted {
        client_order_id: id.clone(),
        broker_order_id: format!("b-{id}").into(),
        at: when,
    };
    broker(&mut e, ack(&entry.client_order_id, ten), ten);
    let execution =
        Execution { execution_id: "x1".into(), timestamp: ten, quantity: 10, price: d(500), fee: Decimal::ZERO };
    let fx = broker(&mut e, BrokerReport::Filled { client_order_id: entry.client_order_id.clone(), execution }, ten);
    let stop = submitted(&fx).remove(0);
    broker(&mut e, ack(&stop.client_order_id, ten), ten);
    assert_eq!(e.protection(&sym()).kind, ProtectionKind::Broker);

    // 16:00:01: the broker's stop still rests, but no venue triggers it now.
    let after_close = at("2026-11-20T21:00:01Z");
    let fx = mark(&mut e, 495, after_close);
    assert!(submitted(&fx).is_empty() && cancels(&fx).is_empty(), "nothing to do above the stop: {fx:?}");
    assert!(
        fx.iter().any(|f| matches!(f, Effect::PositionUpdated { position, .. } if position.symbol == sym())),
        "the row is published again as the session changes: {fx:?}"
    );
    let protection = e.protection(&sym());
    assert_eq!((protection.kind, protection.order_id), (ProtectionKind::Engine, Some(stop.client_order_id.clone())));

    // 16:05: a trade at 4.79 crosses the stop. The broker's copy is cancelled first, to free the
    // shares; once it is, the exit goes out as an extended-hours limit 1% under the last trade.
    let crossed = at("2026-11-20T21:05:00Z");
    let fx = mark(&mut e, 479, crossed);
    assert_eq!(cancels(&fx), vec![stop.client_order_id.clone()], "{fx:?}");
    assert!(submitted(&fx).is_empty(), "the exit waits for the shares: {fx:?}");
    let fx =
        broker(&mut e, BrokerReport::Canceled { client_order_id: stop.client_order_id.clone(), at: crossed }, crossed);
    let exit = submitted(&fx).remove(0);
    assert_eq!(
        (exit.side, exit.order_type, exit.time_in_force, exit.quantity, exit.limit_price, exit.extended_hours),
        (Side::Sell, OrderType::Limit, TimeInForce::Day, 10, Some(d(474)), true)
    );
    assert_eq!(crate::trades::explain(&exit).rule, "STOP_LOSS", "{:?}", exit.reason);
    broker(&mut e, ack(&exit.client_order_id, crossed), crossed);
    // Another trade through the stop sends nothing more: the exit is working.
    assert!(submitted(&mark(&mut e, 478, crossed)).is_empty());

    // 5 s later the market is at 4.60: the exit is cancelled and sent again at 4.55.
    let later = at("2026-11-20T21:05:05Z");
    mark(&mut e, 460, later);
    let fx = e.handle(Event::Tick, later);
    assert_eq!(cancels(&fx), vec![exit.client_order_id.clone()], "{fx:?}");
    let fx = broker(&mut e, BrokerReport::Canceled { client_order_id: exit.client_order_id.clone(), at: later }, later);
    let again = submitted(&fx).remove(0);
    assert_eq!((again.quantity, again.limit_price, again.extended_hours), (10, Some(d(455)), true));
    assert_eq!(again.reason, exit.reason, "the same exit, re-priced");
    broker(&mut e, ack(&again.client_order_id, later), later);
    let execution =
        Execution { execution_id: "x2".into(), timestamp: later, quantity: 10, price: d(456), fee: Decimal::ZERO };
    broker(&mut e, BrokerReport::Filled { client_order_id: again.client_order_id.clone(), execution }, later);
    assert!(e.positions()[&sym()].is_flat());
}

/// Outside the regular session only an extended-hours `LIMIT` `DAY` order is taken; a market
/// or stop order, or a limit not so marked, is refused with the next regular open and nothing
/// is sent (CONTRACT §12).
#[test]
fn in_the_pre_market_only_an_extended_hours_limit_is_taken() {
    let mut settings = Settings::default();
    settings.runtime.market_calendar = MarketCalendarKind::Nyse;
    let mut e = Engine::new(settings, d(10_000_000), |_| None);
    let seven = parse_ts("2026-11-20T12:00:00Z").unwrap();
    e.handle(Event::Mark { symbol: sym(), price: d(500), bid: None }, seven);
    let with = |kind, limit: Option<i64>, stop: Option<i64>, extended| {
        Command::PlaceOrder(ManualOrder {
            client_order_id: None,
            symbol: sym(),
            side: Side::Buy,
            quantity: 10,
            order_type: kind,
            limit_price: limit.map(d),
            stop_price: stop.map(d),
            time_in_force: TimeInForce::Day,
            reason: None,
            legs: None,
            extended_hours: extended,
        })
    };
    let regular_open = parse_ts("2026-11-20T14:30:00Z").unwrap();
    for c in [
        with(OrderType::Market, None, None, false),
        with(OrderType::Limit, Some(505), None, false),
        with(OrderType::Stop, None, Some(510), false),
    ] {
        let mut fx = e.handle(Event::Command(c), seven);
        let Some(Effect::Reply(reply)) = fx.pop() else { panic!("a reply") };
        assert_eq!(
            reply,
            Err(CommandError::OutsideRegularSession {
                session: crate::calendar::SessionPhase::PreMarket,
                regular_open
            })
        );
        assert!(fx.is_empty(), "nothing happens: {fx:?}");
    }
    let mut fx = e.handle(Event::Command(with(OrderType::Market, None, None, true)), seven);
    assert!(matches!(fx.pop(), Some(Effect::Reply(Err(CommandError::Invalid { field: "extended_hours", .. })))));
    let mut fx = e.handle(Event::Command(with(OrderType::Limit, Some(505), None, true)), seven);
    assert!(matches!(fx.pop(), Some(Effect::Reply(Ok(_)))));
    let placed = submitted(&fx);
    assert_eq!((placed.len(), placed[0].extended_hours), (1, true));
}

/// An entry bought in the pre-market gets its stop at the broker the moment it fills, where it
/// waits for the open (no venue triggers it before): the row reads `ENGINE` until 09:30 and
/// `BROKER` from 09:30:00, with nothing placed then (CONTRACT §12).
#[test]
fn a_stop_placed_in_the_pre_market_protects_at_the_broker_from_the_open_with_nothing_placed_then() {
    let mut settings = Settings::default();
    settings.runtime.market_calendar = MarketCalendarKind::Nyse;
    let mut e = Engine::new(settings, d(10_000_000), |_| None);
    let seven = parse_ts("2026-11-20T12:00:00Z").unwrap();
    e.handle(Event::Mark { symbol: sym(), price: d(500), bid: None }, seven);
    let mut entry = order(Side::Buy, 10, Some(legs(480, None)));
    if let Command::PlaceOrder(m) = &mut entry {
        (m.order_type, m.limit_price, m.extended_hours) = (OrderType::Limit, Some(d(505)), true);
    }
    let mut fx = e.handle(Event::Command(entry), seven);
    assert!(matches!(fx.pop(), Some(Effect::Reply(Ok(_)))));
    let entry = submitted(&fx).remove(0);
    let ack = |id: &ClientOrderId| BrokerReport::Accepted {
        client_order_id: id.clone(),
        broker_order_id: format!("b-{id}").into(),
        at: seven,
    };
    e.handle(Event::Broker(ack(&entry.client_order_id)), seven);
    let execution =
        Execution { execution_id: "x1".into(), timestamp: seven, quantity: 10, price: d(505), fee: Decimal::ZERO };
    let fx = e.handle(
        Event::Broker(BrokerReport::Filled { client_order_id: entry.client_order_id.clone(), execution }),
        seven,
    );
    let stop = submitted(&fx).remove(0);
    assert_eq!(
        (stop.order_type, stop.time_in_force, stop.stop_price),
        (OrderType::Stop, TimeInForce::Gtc, Some(d(480)))
    );
    e.handle(Event::Broker(ack(&stop.client_order_id)), seven);
    assert_eq!(e.protection(&sym()).kind, ProtectionKind::Engine, "07:00: the broker would not trigger it");
    let open = parse_ts("2026-11-20T14:30:00Z").unwrap();
    let fx = e.handle(Event::Tick, open);
    assert!(submitted(&fx).is_empty() && cancels(&fx).is_empty(), "nothing to place at 09:30: {fx:?}");
    let protection = e.protection(&sym());
    assert_eq!((protection.kind, protection.order_id), (ProtectionKind::Broker, Some(stop.client_order_id)));
}

/// Outside the regular session an exit is a limit the slippage under the bid (the last trade
/// where no quote is known), marked extended-hours; in the regular session a market order.
#[test]
fn an_exit_outside_the_regular_session_is_limited_under_the_bid() {
    let mut settings = Settings::default();
    settings.runtime.market_calendar = MarketCalendarKind::Nyse;
    let mut e = Engine::new(settings, d(10_000_000), |_| None);
    let five_pm = parse_ts("2026-11-20T22:00:00Z").unwrap();
    e.handle(Event::Mark { symbol: sym(), price: d(500), bid: Some(d(490)) }, five_pm);
    assert_eq!(
        e.exit_shape(&sym(), five_pm),
        (OrderType::Limit, Some(d(485)), true),
        "1% under 4.90, down to the cent"
    );
    e.handle(Event::Mark { symbol: sym(), price: d(500), bid: None }, five_pm);
    assert_eq!(e.exit_shape(&sym(), five_pm), (OrderType::Limit, Some(d(495)), true));
    let ten_am = parse_ts("2026-11-20T15:00:00Z").unwrap();
    assert_eq!(e.exit_shape(&sym(), ten_am), (OrderType::Market, None, false));
}
