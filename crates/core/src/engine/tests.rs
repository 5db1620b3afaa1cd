use super::*;
use crate::broker::BrokerReport;
use crate::orders::{Execution, OrderStatus};
use crate::settings::MarketCalendarKind;
use crate::strategy::{Decision, Strategy, StrategyContext};
use crate::time::parse_ts;
use proptest::prelude::*;

fn t(s: &str) -> Timestamp {
    parse_ts(s).unwrap()
}

const NOW: &str = "2026-11-20T15:00:00Z";

fn sym(s: &str) -> Symbol {
    Symbol::parse(s).unwrap()
}

fn d(cents: i64) -> Decimal {
    Decimal::new(cents, 2)
}

/// Enters from the 3rd bar it sees, exits from the 6th: each once, on the first bar it may (flat
/// with nothing working for the entry, holding with nothing working for the exit), so a
/// decision the engine did not carry out (a halt) is made again on the next bar.
#[derive(Default)]
struct Scripted {
    bars: u32,
    entered: bool,
}

impl Strategy for Scripted {
    fn id(&self) -> &'static str {
        "scripted"
    }
    fn version(&self) -> &'static str {
        "0"
    }
    fn on_bar(
        &mut self,
        _bar: &Bar,
        ctx: &StrategyContext,
        _p: &crate::settings::StrategyAllocatorSettings,
    ) -> Vec<Decision> {
        self.bars += 1;
        match self.bars {
            3.. if ctx.position == 0 && !ctx.order_working && !self.entered => vec![Decision::Enter {
                quantity: 100,
                stop_price: d(510),
                limit_price: d(515),
                stop_loss: d(480),
                target: d(570),
                rule: "TEST_ENTRY",
                text: "entry for the test".into(),
            }],
            6.. if ctx.position > 0 && !ctx.order_working => {
                vec![Decision::Exit { quantity: ctx.position, rule: "TEST_EXIT", text: "exit for the test".into() }]
            }
            _ => vec![],
        }
    }
    fn on_entry_filled(&mut self, _quantity: u64, _price: Decimal) {
        self.entered = true;
    }
    fn reset_day(&mut self) {
        self.bars = 0;
    }
}

fn factory(id: &str) -> Option<Box<dyn Strategy>> {
    (id == "momentum_breakout").then(|| Box::new(Scripted::default()) as Box<dyn Strategy>)
}

fn engine() -> Engine {
    let mut e = Engine::new(Settings::default(), d(10_000_000), factory);
    e.handle(Event::Mark { symbol: sym("ABCD"), price: d(500), bid: None }, t(NOW));
    e
}

/// A quiet minute bar of ABCD around 5.00, `m` minutes after `NOW`.
fn bar(m: i64) -> Bar {
    Bar {
        start: t(NOW) + chrono::Duration::minutes(m),
        open: crate::market::Price::from_cents(500),
        high: crate::market::Price::from_cents(505),
        low: crate::market::Price::from_cents(495),
        close: crate::market::Price::from_cents(500),
        volume: 10_000,
    }
}

fn command(e: &mut Engine, c: Command) -> (Result<Reply, CommandError>, Vec<Effect>) {
    let mut fx = e.handle(Event::Command(c), t(NOW));
    let Some(Effect::Reply(reply)) = fx.pop() else { panic!("a command ends with its reply") };
    (reply, fx)
}

fn buy(qty: u64) -> Command {
    Command::PlaceOrder(ManualOrder {
        client_order_id: None,
        symbol: sym("ABCD"),
        side: Side::Buy,
        quantity: qty,
        order_type: OrderType::Market,
        limit_price: None,
        stop_price: None,
        time_in_force: TimeInForce::Day,
        reason: Some("test".into()),
        legs: None,
        extended_hours: false,
    })
}

fn submitted(fx: &[Effect]) -> Vec<Order> {
    fx.iter().filter_map(|f| if let Effect::Submit(o) = f { Some(Order::clone(o)) } else { None }).collect()
}

fn fill(e: &mut Engine, order: &Order, exec: &str, qty: u64, cents: i64) -> Vec<Effect> {
    fill_at(e, order, exec, qty, cents, t(NOW))
}

/// The broker accepts `order` and fills `qty` of it at `cents`, both at `at`.
fn fill_at(e: &mut Engine, order: &Order, exec: &str, qty: u64, cents: i64, at: Timestamp) -> Vec<Effect> {
    let id = order.client_order_id.clone();
    let mut fx = e.handle(
        Event::Broker(BrokerReport::Accepted {
            client_order_id: id.clone(),
            broker_order_id: format!("b-{exec}").into(),
            at,
        }),
        at,
    );
    fx.extend(e.handle(
        Event::Broker(BrokerReport::Filled {
            client_order_id: id,
            execution: Execution {
                execution_id: exec.into(),
                timestamp: at,
                quantity: qty,
                price: d(cents),
                fee: Decimal::ZERO,
            },
        }),
        at,
    ));
    fx
}

#[test]
fn a_manual_buy_fills_into_a_position_and_moves_cash() {
    let mut e = engine();
    let (reply, fx) = command(&mut e, buy(100));
    let Ok(Reply::Order(order)) = reply else { panic!("{reply:?}") };
    assert_eq!(order.status, OrderStatus::New);
    assert_eq!(submitted(&fx).len(), 1, "write-ahead: the order is handed over as NEW");
    let fx = fill(&mut e, &order, "e1", 100, 501);
    assert!(fx.iter().any(|f| matches!(f, Effect::PositionUpdated { position, status: StrategyStatus::Halted } if position.quantity == 100)));
    assert_eq!(e.orders[&order.client_order_id].status, OrderStatus::Filled);
    assert_eq!(e.cash, d(10_000_000) - d(50_100));
    assert_eq!(e.day.trades_today, 1);
}

/// A symbol whose watch ended reads `Closed` (nothing to manage); bought by hand, its position
/// is managed by hand: `Halted` (CONTRACT §3, §4), and `Closed` again once sold flat.
#[test]
fn a_manual_buy_where_a_watch_ended_is_managed_by_hand() {
    let mut e = engine();
    command(&mut e, Command::Watch { symbol: sym("ABCD"), source: "MANUAL".into() }).0.unwrap();
    command(&mut e, Command::StopWatch { symbol: sym("ABCD"), reason: "done".into() }).0.unwrap();
    assert_eq!(e.position_status(&sym("ABCD")), StrategyStatus::Closed);
    let (reply, _) = command(&mut e, buy(100));
    let Ok(Reply::Order(order)) = reply else { panic!("{reply:?}") };
    let fx = fill(&mut e, &order, "e1", 100, 501);
    assert!(fx.iter().any(|f| matches!(f, Effect::PositionUpdated { status: StrategyStatus::Halted, .. })), "{fx:?}");
    assert_eq!(e.position_status(&sym("ABCD")), StrategyStatus::Halted);
    let (reply, _) = command(&mut e, Command::ClosePosition { symbol: sym("ABCD"), quantity: None });
    let Ok(Reply::Close { client_order_id, .. }) = reply else { panic!("{reply:?}") };
    let close = Order::clone(&e.orders[&client_order_id]);
    fill(&mut e, &close, "e2", 100, 502);
    assert_eq!(e.position_status(&sym("ABCD")), StrategyStatus::Closed, "flat, nothing left to manage");
}

/// Generated ids: `to-SYMBOL-YYYYMMDDHHMMSS-N`, UTC, zero-padded, numbered from 1.
#[test]
fn generated_order_ids_name_symbol_time_and_sequence() {
    let mut e = engine();
    let (first, _) = command(&mut e, buy(1));
    let (second, _) = command(&mut e, buy(2));
    let ids: Vec<String> = [first, second]
        .into_iter()
        .map(|r| match r {
            Ok(Reply::Order(o)) => o.client_order_id.to_string(),
            other => panic!("{other:?}"),
        })
        .collect();
    let stamp = t(NOW).format("%Y%m%d%H%M%S").to_string();
    assert_eq!(ids, [format!("to-ABCD-{stamp}-1"), format!("to-ABCD-{stamp}-2")]);
}

#[test]
fn refused_orders_never_reach_the_broker_and_leave_a_violation() {
    let mut e = engine();
    e.blocks.insert(
        sym("ABCD"),
        Block {
            scope: "PERMANENT".into(),
            reason: "test".into(),
            actor: "t".into(),
            effective_from: t(NOW),
            expires_at: None,
        },
    );
    let (reply, fx) = command(&mut e, buy(100));
    assert!(matches!(&reply, Err(CommandError::Risk(r)) if r.rule == RiskRule::SymbolBlocked), "{reply:?}");
    assert!(submitted(&fx).is_empty());
    assert!(matches!(&fx[..], [Effect::Violation { rule: RiskRule::SymbolBlocked, .. }]));
    assert!(e.orders.is_empty() && e.day.trades_today == 0, "a refused order changes nothing");
}

#[test]
fn cancel_and_its_refusals() {
    let mut e = engine();
    let (_, fx) = command(&mut e, buy(100));
    let order = submitted(&fx)[0].clone();
    let (reply, fx) = command(&mut e, Command::CancelOrder { client_order_id: order.client_order_id.clone() });
    assert!(matches!(reply, Ok(Reply::Cancel { status: OrderStatus::PendingCancel, .. })));
    assert!(fx.contains(&Effect::Cancel(order.client_order_id.clone())));
    // Asking again re-sends the cancel (its answer may have been lost), answered as the contract
    // says of an order already PENDING_CANCEL.
    let (again, fx) = command(&mut e, Command::CancelOrder { client_order_id: order.client_order_id.clone() });
    assert_eq!(again, Err(CommandError::NotCancellable { status: OrderStatus::PendingCancel }));
    assert_eq!(fx, vec![Effect::Cancel(order.client_order_id.clone())]);
    assert_eq!(e.orders[&order.client_order_id].status, OrderStatus::PendingCancel);
    // Once the order has ended, a cancel is refused.
    let _ = e.handle(
        Event::Broker(BrokerReport::Canceled { client_order_id: order.client_order_id.clone(), at: t(NOW) }),
        t(NOW),
    );
    let (ended, fx) = command(&mut e, Command::CancelOrder { client_order_id: order.client_order_id.clone() });
    assert_eq!(ended, Err(CommandError::NotCancellable { status: OrderStatus::Canceled }));
    assert!(fx.is_empty(), "nothing sent for an order that has ended: {fx:?}");
    // The answer to a cancel sent again after the order ended changes nothing (no anomaly).
    let late = e.handle(
        Event::Broker(BrokerReport::Canceled { client_order_id: order.client_order_id.clone(), at: t(NOW) }),
        t(NOW),
    );
    assert!(late.is_empty(), "{late:?}");
    let unknown = ClientOrderId::parse("nope").unwrap();
    assert!(matches!(
        command(&mut e, Command::CancelOrder { client_order_id: unknown }).0,
        Err(CommandError::NotFound(_))
    ));
}

#[test]
fn closing_sells_the_position_in_full_or_in_part() {
    let mut e = engine();
    let (_, fx) = command(&mut e, buy(100));
    fill(&mut e, &submitted(&fx)[0], "e1", 100, 500);
    assert!(matches!(
        command(&mut e, Command::ClosePosition { symbol: sym("ABCD"), quantity: Some(101) }).0,
        Err(CommandError::Invalid { .. })
    ));
    let (reply, fx) = command(&mut e, Command::ClosePosition { symbol: sym("ABCD"), quantity: Some(40) });
    assert!(matches!(reply, Ok(Reply::Close { .. })));
    let sell = &submitted(&fx)[0];
    assert_eq!((sell.side, sell.quantity, sell.order_type), (Side::Sell, 40, OrderType::Market));
    assert_eq!(
        command(&mut e, Command::ClosePosition { symbol: sym("ZZZ"), quantity: None }).0,
        Err(CommandError::PositionNotFound(sym("ZZZ")))
    );
    // Malformed on its face before any lookup: no position is needed to refuse it.
    assert!(matches!(
        command(&mut e, Command::ClosePosition { symbol: sym("ZZZ"), quantity: Some(0) }).0,
        Err(CommandError::Invalid { field: "quantity", .. })
    ));
}

#[test]
fn a_watched_position_the_emergency_halt_flattened_reads_closed_not_halted() {
    let mut e = engine();
    command(&mut e, Command::Watch { symbol: sym("ABCD"), source: "MANUAL".into() }).0.unwrap();
    let (_, fx) = command(&mut e, buy(100));
    fill(&mut e, &submitted(&fx)[0], "e1", 100, 500);
    let (_, fx) = command(&mut e, Command::EmergencyHalt { reason: "test".into(), actor: "ops".into() });
    assert!(
        fx.iter().any(|f| matches!(f, Effect::WatchUpdated { status: StrategyStatus::Halted, .. })),
        "held when the halt stops it: {fx:?}"
    );
    let exit = submitted(&fx).into_iter().find(|o| o.side == Side::Sell).unwrap();
    let fx = fill(&mut e, &exit, "x1", 100, 495);
    assert!(
        fx.iter().any(|f| matches!(f, Effect::WatchUpdated { status: StrategyStatus::Closed, .. })),
        "flat, nothing left to manage: {fx:?}"
    );
    assert_eq!(e.slots()[&sym("ABCD")].status, StrategyStatus::Closed);
}

#[test]
fn emergency_halt_latches_first_then_stops_cancels_and_exits() {
    let mut e = engine();
    command(&mut e, Command::Watch { symbol: sym("WXYZ"), source: "MANUAL".into() }).0.unwrap();
    let (_, fx) = command(&mut e, buy(100));
    fill(&mut e, &submitted(&fx)[0], "e1", 100, 500);
    let (_, fx) = command(&mut e, buy(50));
    let working = submitted(&fx)[0].clone();

    let (reply, fx) = command(&mut e, Command::EmergencyHalt { reason: "test".into(), actor: "ops".into() });
    assert!(matches!(reply, Ok(Reply::Halted { liquidation_requested: true, .. })));
    assert!(
        matches!(fx[0], Effect::TradingStateChanged { state: TradingState::Halted, halt: Some(_) }),
        "persist HALTED first: {fx:?}"
    );
    let pos = |p: &dyn Fn(&Effect) -> bool| fx.iter().position(p).unwrap();
    let stopped = pos(&|f| matches!(f, Effect::WatchUpdated { status: StrategyStatus::Closed, .. }));
    let cancelled = pos(&|f| f == &Effect::Cancel(working.client_order_id.clone()));
    let exit = pos(&|f| matches!(f, Effect::Submit(o) if o.side == Side::Sell));
    assert!(stopped < cancelled && cancelled < exit, "order: halt, stop, cancel, exit");
    let exits = submitted(&fx);
    assert_eq!((exits.len(), exits[0].quantity), (1, 100));

    // Idempotent: the exit is already working, nothing new.
    let (again, fx) = command(&mut e, Command::EmergencyHalt { reason: "again".into(), actor: "ops".into() });
    assert!(matches!(again, Ok(Reply::Halted { .. })) && submitted(&fx).is_empty());
    // Buys are refused; the position can still be closed.
    assert_eq!(command(&mut e, buy(1)).0, Err(CommandError::Halted));
    assert_eq!(
        command(&mut e, Command::Watch { symbol: sym("WXYZ"), source: "MANUAL".into() }).0,
        Err(CommandError::Halted)
    );
    // An exit cancelled by the broker is resubmitted while halted.
    let exit = exits[0].clone();
    e.handle(
        Event::Broker(BrokerReport::Accepted {
            client_order_id: exit.client_order_id.clone(),
            broker_order_id: "x".into(),
            at: t(NOW),
        }),
        t(NOW),
    );
    let fx = e.handle(
        Event::Broker(BrokerReport::Canceled { client_order_id: exit.client_order_id.clone(), at: t(NOW) }),
        t(NOW),
    );
    assert_eq!(submitted(&fx).iter().map(|o| o.quantity).collect::<Vec<_>>(), vec![100]);
    // Only resume ends it.
    assert!(matches!(
        command(&mut e, Command::Resume { reason: "ok".into(), actor: "ops".into() }).0,
        Ok(Reply::Resumed { state: TradingState::Active })
    ));
}

#[test]
fn a_fill_that_lands_while_halted_is_recorded_exited_and_a_violation() {
    let mut e = engine();
    let (_, fx) = command(&mut e, buy(40));
    let working = submitted(&fx)[0].clone();
    e.handle(
        Event::Broker(BrokerReport::Accepted {
            client_order_id: working.client_order_id.clone(),
            broker_order_id: "b-1".into(),
            at: t(NOW),
        }),
        t(NOW),
    );
    let (reply, _) = command(&mut e, Command::EmergencyHalt { reason: "test".into(), actor: "ops".into() });
    assert!(matches!(reply, Ok(Reply::Halted { liquidation_requested: false, .. })), "nothing held yet");
    assert_eq!(e.orders[&working.client_order_id].status, OrderStatus::PendingCancel);

    // The broker filled the buy before the cancel reached it.
    let fx = e.handle(
        Event::Broker(BrokerReport::Filled {
            client_order_id: working.client_order_id.clone(),
            execution: Execution {
                execution_id: "late".into(),
                timestamp: t(NOW),
                quantity: 40,
                price: d(500),
                fee: Decimal::ZERO,
            },
        }),
        t(NOW),
    );
    assert_eq!(e.positions[&sym("ABCD")].quantity, 40, "the fill is recorded");
    assert!(
        fx.iter()
            .any(|f| matches!(f, Effect::Violation { rule: RiskRule::FillWhileHalted, client_order_id: Some(id), .. }
            if *id == working.client_order_id)),
        "{fx:?}"
    );
    let exits = submitted(&fx);
    assert_eq!(exits.len(), 1, "{fx:?}");
    assert_eq!((exits[0].side, exits[0].quantity, exits[0].order_type), (Side::Sell, 40, OrderType::Market));
    assert_eq!(exits[0].reason.as_deref(), Some(LIQUIDATION_REASON));

    // The halt's own exit filling is no violation.
    let fx = fill(&mut e, &exits[0], "x1", 40, 499);
    assert!(!fx.iter().any(|f| matches!(f, Effect::Violation { .. })), "{fx:?}");
    assert!(e.halt_progress().is_complete());
}

#[test]
fn a_standing_halt_applied_again_resends_cancels_and_exits_what_is_left() {
    let mut e = engine();
    let (_, fx) = command(&mut e, buy(100));
    fill(&mut e, &submitted(&fx)[0], "e1", 100, 500);
    let (_, fx) = command(&mut e, buy(50));
    let working = submitted(&fx)[0].clone();
    assert_eq!(e.reassert_halt(t(NOW)), (vec![], HaltProgress::default()), "nothing to do unless HALTED");

    let (_, fx) = command(&mut e, Command::EmergencyHalt { reason: "test".into(), actor: "ops".into() });
    let exit = submitted(&fx)[0].clone();
    assert_eq!(e.halt_progress(), HaltProgress { open_orders: 1, open_positions: 1 });

    // After a restart the cancel's answer may have been lost: it goes out again; the exit is
    // still working, so no second exit.
    let (fx, progress) = e.reassert_halt(t(NOW));
    assert_eq!(fx, vec![Effect::Cancel(working.client_order_id.clone())], "{fx:?}");
    assert_eq!(progress, HaltProgress { open_orders: 1, open_positions: 1 });
    e.handle(
        Event::Broker(BrokerReport::Canceled { client_order_id: working.client_order_id.clone(), at: t(NOW) }),
        t(NOW),
    );
    // The exit is refused by the broker: the halt sends another once a second has passed (not
    // in a loop against a venue that keeps refusing), and applying it again sends no third.
    let reject = |e: &mut Engine, order: &Order, at: Timestamp| {
        let report =
            BrokerReport::Rejected { client_order_id: order.client_order_id.clone(), reason: "held".into(), at };
        e.handle(Event::Broker(report), at)
    };
    let fx = reject(&mut e, &exit, t(NOW));
    assert!(submitted(&fx).is_empty(), "a rejected exit waits: {fx:?}");
    let later = |secs: i64| t(NOW) + chrono::Duration::milliseconds(secs * 1000);
    assert!(submitted(&e.reassert_halt(later(0)).0).is_empty(), "not before its wait");
    let (fx, _) = e.reassert_halt(later(1));
    let second = submitted(&fx);
    assert_eq!(second.iter().map(|o| (o.side, o.quantity)).collect::<Vec<_>>(), vec![(Side::Sell, 100)], "{fx:?}");
    // Refused again: the wait doubles.
    reject(&mut e, &second[0], later(1));
    assert!(submitted(&e.reassert_halt(later(2)).0).is_empty(), "2 s after the second rejection, not 1");
    let (fx, _) = e.reassert_halt(later(3));
    let again = submitted(&fx);
    assert_eq!(again.len(), 1, "{fx:?}");
    let (fx, progress) = e.reassert_halt(later(3));
    assert!(submitted(&fx).is_empty(), "{fx:?}");
    assert_eq!(progress, HaltProgress { open_orders: 0, open_positions: 1 });
    fill(&mut e, &again[0], "x2", 100, 499);
    assert!(e.halt_progress().is_complete());
    assert_eq!(e.reassert_halt(t(NOW)).0, vec![], "a complete halt sends nothing");
}

#[test]
fn an_order_never_sent_is_withdrawn_as_if_never_placed() {
    let mut e = engine();
    let (_, fx) = command(&mut e, buy(100));
    let order = submitted(&fx)[0].clone();
    assert_eq!(e.day.trades_today, 1);
    assert!(e.withdraw_unsent(&order.client_order_id));
    assert!(e.orders.is_empty() && e.day.trades_today == 0);
    // The same order again is no duplicate, and may take the same id.
    let mut again = buy(100);
    if let Command::PlaceOrder(m) = &mut again {
        m.client_order_id = Some(order.client_order_id.clone());
    }
    let (reply, _) = command(&mut e, again);
    assert!(reply.is_ok(), "{reply:?}");
    // An order the broker has acknowledged is never withdrawn.
    fill(&mut e, &order, "e1", 10, 500);
    assert!(!e.withdraw_unsent(&order.client_order_id));
}

#[test]
fn the_same_order_after_a_rejection_is_no_duplicate() {
    let mut e = engine();
    let (_, fx) = command(&mut e, buy(100));
    let order = submitted(&fx)[0].clone();
    let (again, _) = command(&mut e, buy(100));
    assert!(matches!(again, Err(CommandError::Duplicate { .. })), "{again:?}");
    let rejected = BrokerReport::Rejected {
        client_order_id: order.client_order_id.clone(),
        reason: "never sent: the broker was unavailable".into(),
        at: t(NOW),
    };
    e.handle(Event::Broker(rejected), t(NOW));
    let (retry, fx) = command(&mut e, buy(100));
    assert!(retry.is_ok(), "a rejected order placed nothing: {retry:?}");
    assert_eq!(submitted(&fx).len(), 1);
}

#[test]
fn reaching_the_daily_loss_turns_reducing_until_the_next_day() {
    let mut e = engine();
    let (_, fx) = command(&mut e, buy(1000));
    fill(&mut e, &submitted(&fx)[0], "e1", 1000, 500);
    let fx = e.handle(Event::Mark { symbol: sym("ABCD"), price: d(449), bid: None }, t(NOW));
    assert_eq!(fx, vec![Effect::TradingStateChanged { state: TradingState::Reducing, halt: None }], "loss 510 ≥ 500");
    assert!(matches!(command(&mut e, buy(1)).0, Err(CommandError::Risk(r)) if r.rule == RiskRule::MaxDailyLoss));
    assert!(
        command(&mut e, Command::ClosePosition { symbol: sym("ABCD"), quantity: None }).0.is_ok(),
        "reducing orders pass"
    );
    let fx = e.handle(Event::Tick, t("2026-11-21T15:00:00Z"));
    assert!(fx.contains(&Effect::TradingStateChanged { state: TradingState::Active, halt: None }));
    assert_eq!(e.day.trades_today, 0);
}

#[test]
fn the_strategy_moves_a_symbol_through_buy_hold_sell_active() {
    let mut e = engine();
    let watched = command(&mut e, Command::Watch { symbol: sym("ABCD"), source: "MANUAL".into() }).0.unwrap();
    assert!(matches!(watched, Reply::Watch { already: false, .. }));
    assert_eq!(e.slots[&sym("ABCD")].status, StrategyStatus::Active);
    let mut statuses = Vec::new();
    let mut entry = None;
    let mut exit = None;
    for m in 0..6 {
        let fx = e.handle(
            Event::Bar { symbol: sym("ABCD"), bar: bar(m), prev_close: d(400), relative_volume: Some(8.0) },
            t(NOW),
        );
        for f in &fx {
            match f {
                Effect::WatchUpdated { status, .. } => statuses.push(*status),
                Effect::Submit(o) if o.side == Side::Buy => entry = Some(o.clone()),
                Effect::Submit(o) => exit = Some(o.clone()),
                _ => {}
            }
        }
        if m == 3 {
            let order = entry.clone().expect("entered on the 3rd bar");
            assert_eq!(
                (order.order_type, order.stop_price, order.limit_price),
                (OrderType::StopLimit, Some(d(510)), Some(d(515)))
            );
            assert!(order.reason.as_deref().unwrap().starts_with("TEST_ENTRY"));
            for f in fill(&mut e, &order, "e1", 100, 512) {
                if let Effect::WatchUpdated { status, .. } = f {
                    statuses.push(status);
                }
            }
        }
    }
    let exit = exit.expect("exited on the 6th bar");
    for f in fill(&mut e, &exit, "e2", 100, 520) {
        if let Effect::WatchUpdated { status, .. } = f {
            statuses.push(status);
        }
    }
    use StrategyStatus::*;
    assert_eq!(statuses, vec![Buy, Hold, Sell, Active]);
    assert!(e.positions[&sym("ABCD")].is_flat());
    assert_eq!(e.positions[&sym("ABCD")].realized_pnl, d(800));
}

#[test]
fn order_generating_commands_respect_the_session() {
    let mut e = engine();
    e.settings.runtime.market_calendar = MarketCalendarKind::Nyse;
    let saturday = t("2026-11-21T15:00:00Z");
    let mut fx = e.handle(Event::Command(buy(10)), saturday);
    assert!(matches!(fx.pop(), Some(Effect::Reply(Err(CommandError::MarketClosed { .. })))));
    assert!(submitted(&fx).is_empty());
}

#[test]
fn the_same_events_give_the_same_effects() {
    let run = || {
        let mut e = engine();
        let (_, fx) = command(&mut e, buy(100));
        let mut all = fx.clone();
        all.extend(fill(&mut e, &submitted(&fx)[0], "e1", 60, 501));
        all.extend(command(&mut e, Command::EmergencyHalt { reason: "r".into(), actor: "a".into() }).1);
        all
    };
    assert_eq!(run(), run());
}

proptest! {
    /// Whatever is asked, an order reaches the broker exactly when the command succeeds, buys
    /// never exceed the position limit, and no position goes negative.
    #[test]
    fn no_refused_order_reaches_the_broker(cmds in prop::collection::vec((any::<bool>(), 1u64..1500, 0u8..3), 1..30)) {
        let mut e = engine();
        let mut n = 0;
        for (is_buy, qty, fill_kind) in cmds {
            let c = if is_buy { buy(qty) } else { Command::ClosePosition { symbol: sym("ABCD"), quantity: Some(qty) } };
            let (reply, fx) = command(&mut e, c);
            let subs = submitted(&fx);
            prop_assert_eq!(subs.len(), usize::from(reply.is_ok()), "{:?}", reply);
            if let Some(order) = subs.first() {
                n += 1;
                if fill_kind > 0 {
                    fill(&mut e, order, &format!("e{n}"), order.quantity, 500);
                }
            }
            let held = e.positions.get(&sym("ABCD")).map(|p| p.quantity).unwrap_or(0);
            let open_buys: u64 = e.orders.values().filter(|o| !o.status.is_final() && o.side == Side::Buy).map(|o| o.remaining()).sum();
            prop_assert!(held + open_buys <= e.settings.risk_controls.max_position_size);
        }
    }
}

/// A venue for the engine's tests: acknowledges every order, fills market and stop-limit orders
/// at once at the price given, rests stop orders (the protective ones) until a bar trades
/// through them (or through a take-profit one-cancels-other with the stop), confirms cancels;
/// what the engine makes of each report is carried out the same way, and its decisions and
/// statuses noted.
#[derive(Default)]
struct TestVenue {
    resting: Vec<Order>,
    executions: u32,
    decisions: Vec<&'static str>,
    statuses: Vec<StrategyStatus>,
    placed: Vec<Order>,
}

impl TestVenue {
    fn carry(&mut self, e: &mut Engine, fx: Vec<Effect>, cents: i64, at: Timestamp) {
        let mut queue: std::collections::VecDeque<Effect> = fx.into();
        while let Some(effect) = queue.pop_front() {
            let reports = match effect {
                Effect::Decision { rule, .. } => {
                    self.decisions.push(rule);
                    continue;
                }
                Effect::WatchUpdated { status, .. } => {
                    self.statuses.push(status);
                    continue;
                }
                Effect::Submit(order) => {
                    self.placed.push(Order::clone(&order));
                    let id = order.client_order_id.clone();
                    let accepted = BrokerReport::Accepted {
                        client_order_id: id.clone(),
                        broker_order_id: format!("b-{id}").into(),
                        at,
                    };
                    if order.order_type == OrderType::Stop {
                        self.resting.push(Order::clone(&order));
                        vec![accepted]
                    } else {
                        vec![accepted, self.filled(&order, cents, at)]
                    }
                }
                Effect::Cancel(id) => {
                    self.resting.retain(|o| o.client_order_id != id);
                    vec![BrokerReport::Canceled { client_order_id: id, at }]
                }
                _ => continue,
            };
            for report in reports {
                queue.extend(e.handle(Event::Broker(report), at));
            }
        }
    }

    fn filled(&mut self, order: &Order, cents: i64, at: Timestamp) -> BrokerReport {
        self.executions += 1;
        BrokerReport::Filled {
            client_order_id: order.client_order_id.clone(),
            execution: Execution {
                execution_id: format!("x{}", self.executions).into(),
                timestamp: at,
                quantity: order.quantity,
                price: d(cents),
                fee: Decimal::ZERO,
            },
        }
    }

    /// The resting stops `bar` trades through fill at the stop, or at the open below it; else
    /// the take-profits it trades up to fill at the target, or at the open above it.
    fn trade(&mut self, e: &mut Engine, bar: &Bar) {
        let stop_through = |o: &Order| o.stop_price.is_some_and(|s| bar.low.to_decimal() <= s);
        let target = |o: &Order| o.legs.and_then(|l| l.take_profit);
        let target_through = |o: &Order| target(o).is_some_and(|t| bar.high.to_decimal() >= t);
        let (through, rest): (Vec<Order>, Vec<Order>) =
            std::mem::take(&mut self.resting).into_iter().partition(|o| stop_through(o) || target_through(o));
        self.resting = rest;
        for order in through {
            let price = match stop_through(&order) {
                true => order.stop_price.unwrap().min(bar.open.to_decimal()),
                false => target(&order).unwrap().max(bar.open.to_decimal()),
            };
            let cents = rust_decimal::prelude::ToPrimitive::to_i64(&(price * Decimal::ONE_HUNDRED)).unwrap();
            let report = self.filled(&order, cents, bar.start);
            let fx = e.handle(Event::Broker(report), bar.start);
            self.carry(e, fx, cents, bar.start);
        }
    }
}

/// The real strategy through the engine on a scripted runner: enter on the pullback breakout;
/// the entry's fill rests the strategy's stop and target at the broker (CONTRACT §11): half the
/// position under the stop one-cancels-other with a take-profit at 2R, the other half under the
/// stop alone; the take-profit's fill is the scale-out, the other stop replaced by the breakeven
/// stop the strategy moved to; the broker's stop sells the rest when the price comes back to it
/// (no order of the strategy's own is needed after the entry).
#[test]
fn momentum_breakout_enters_scales_out_and_its_stop_at_the_broker_stops_out_the_rest() {
    use crate::market::Price;
    let mut e = Engine::new(Settings::default(), d(10_000_000), crate::strategy::make);
    let runner = sym("RUNR");
    let open = t("2026-03-02T14:30:00Z"); // Monday 09:30 New York
    e.handle(Event::Command(Command::Watch { symbol: runner.clone(), source: "MANUAL".into() }), open);
    let rows: [(f64, f64, f64, f64, u64); 8] = [
        (5.00, 5.15, 5.00, 5.14, 200_000),
        (5.14, 5.30, 5.12, 5.28, 250_000),
        (5.28, 5.45, 5.26, 5.43, 300_000),
        (5.43, 5.60, 5.41, 5.58, 350_000),
        (5.55, 5.55, 5.46, 5.48, 150_000),
        (5.48, 5.50, 5.40, 5.47, 100_000),
        (5.52, 5.80, 5.50, 5.78, 300_000), // through the 5.75 target
        (5.70, 5.72, 5.50, 5.55, 200_000), // back through the 5.51 breakeven stop
    ];
    let mut venue = TestVenue::default();
    for (i, (o, h, l, c, v)) in rows.into_iter().enumerate() {
        let bar = Bar {
            start: open + chrono::Duration::minutes(i as i64),
            open: Price::from_f64_tick(o),
            high: Price::from_f64_tick(h),
            low: Price::from_f64_tick(l),
            close: Price::from_f64_tick(c),
            volume: v,
        };
        venue.trade(&mut e, &bar);
        let now = bar.start + chrono::Duration::minutes(1);
        let fx =
            e.handle(Event::Bar { symbol: runner.clone(), bar, prev_close: d(450), relative_volume: Some(5.0) }, now);
        // The entry triggers at its stop; nothing else fills at market.
        venue.carry(&mut e, fx, 551, now);
        let protection = e.protection(&runner);
        match i {
            0..=4 => assert_eq!(protection.kind, super::ProtectionKind::None),
            5 | 6 => assert_eq!(protection.kind, super::ProtectionKind::Broker, "bar {i}"),
            _ => assert_eq!(protection.kind, super::ProtectionKind::None, "flat after bar {i}"),
        }
    }
    let key = |o: &Order| (o.side, o.order_type, o.time_in_force, o.quantity, o.stop_price, o.limit_price);
    let placed: Vec<_> = venue.placed.iter().map(key).collect();
    use OrderType::*;
    assert_eq!(
        placed,
        vec![
            (Side::Buy, StopLimit, TimeInForce::Day, 416, Some(d(551)), Some(d(557))),
            // The strategy's stop with its take-profit for the half it scales out …
            (Side::Sell, Stop, TimeInForce::Gtc, 208, Some(d(539)), None),
            // … and alone for the rest, both resting until they fill or are cancelled.
            (Side::Sell, Stop, TimeInForce::Gtc, 208, Some(d(539)), None),
            // The take-profit filled: the rest protected at the breakeven stop.
            (Side::Sell, Stop, TimeInForce::Gtc, 208, Some(d(551)), None),
        ]
    );
    let targets: Vec<_> = venue.placed[1..].iter().map(|o| o.legs.and_then(|l| l.take_profit)).collect();
    assert_eq!(targets, vec![Some(d(575)), None, None]);
    assert!(venue.placed[1..].iter().all(Order::is_protective));
    assert_eq!(venue.decisions, vec!["FIRST_PULLBACK_BREAKOUT"], "no sell of the strategy's own");
    use StrategyStatus::*;
    assert_eq!(venue.statuses, vec![Buy, Hold, Active]);
    let p = &e.positions[&runner];
    assert!(p.is_flat());
    // 208 × (5.75 − 5.51) + 208 × (5.51 − 5.51)
    assert_eq!(p.realized_pnl, d(4992));
    assert_eq!(e.day.realized_today, d(4992));
}

#[test]
fn watching_respects_the_limit_and_blocks_which_expire_with_the_day() {
    let mut e = engine();
    e.settings.risk_controls.active_watchlist_limit = 1;
    let watch = |symbol: &str, source: &str| Command::Watch { symbol: sym(symbol), source: source.into() };
    assert!(matches!(command(&mut e, watch("AAA", "MANUAL")).0, Ok(Reply::Watch { already: false, .. })));
    assert!(matches!(command(&mut e, watch("AAA", "API")).0, Ok(Reply::Watch { already: true, .. })));
    let (full, fx) = command(&mut e, watch("BBB", "MANUAL"));
    assert!(matches!(&full, Err(CommandError::Risk(r)) if r.rule == RiskRule::ActiveWatchlistLimit));
    assert!(matches!(&fx[..], [Effect::Violation { rule: RiskRule::ActiveWatchlistLimit, .. }]));
    let (_, quiet) = command(&mut e, watch("BBB", "RADAR"));
    assert!(quiet.is_empty(), "the allocator's refusals leave no violation row");

    let block =
        Command::Block { symbol: sym("AAA"), scope: "TODAY".into(), reason: "news".into(), actor: "ops".into() };
    let (reply, fx) = command(&mut e, block);
    let Ok(Reply::Blocked { block, .. }) = reply else { panic!("{reply:?}") };
    assert_eq!(block.expires_at, Some(t("2026-11-21T05:00:00Z")), "ALWAYS_OPEN: midnight New York");
    assert!(fx.iter().any(|f| matches!(f, Effect::WatchUpdated { status: StrategyStatus::Closed, .. })));
    assert!(
        matches!(command(&mut e, watch("AAA", "MANUAL")).0, Err(CommandError::Risk(r)) if r.rule == RiskRule::SymbolBlocked)
    );
    let next_day = t("2026-11-21T05:00:00Z");
    let mut fx = e.handle(Event::Command(watch("AAA", "MANUAL")), next_day);
    assert!(matches!(fx.pop(), Some(Effect::Reply(Ok(Reply::Watch { already: false, .. })))), "the block expired");
    let unblock = Command::Unblock { symbol: sym("AAA"), reason: "x".into(), actor: "ops".into() };
    assert!(matches!(
        e.handle(Event::Command(unblock), next_day).pop(),
        Some(Effect::Reply(Err(CommandError::NotFound(_))))
    ));
}

/// The reference strategy through the engine: its cross above becomes a market buy of all the
/// buying power in whole shares, and its cross below a market sell of the whole position.
#[test]
fn sma_cross_buys_with_all_buying_power_and_sells_everything() {
    use crate::market::Price;
    let mut settings = Settings::default();
    settings.strategy_allocator.default_strategy_id = "sma_cross".into();
    let mut e = Engine::new(settings, d(100_000), crate::strategy::make);
    let s = sym("SMAX");
    let open = t("2026-03-02T14:30:00Z");
    e.handle(Event::Command(Command::Watch { symbol: s.clone(), source: "MANUAL".into() }), open);
    // SMA(10)/SMA(20): 20 bars falling from 30 to 11, then rising: the 10-bar average crosses
    // above the 20-bar one on the rise, then below once prices fall again.
    let closes: Vec<i64> = (0..20)
        .map(|i| 3000 - 100 * i)
        .chain((0..15).map(|i| 1200 + 150 * i))
        .chain((0..12).map(|i| 3200 - 200 * i))
        .collect();
    let mut orders = Vec::new();
    for (i, close) in closes.into_iter().enumerate() {
        let p = Price::from_decimal(d(close)).unwrap();
        let bar =
            Bar { start: open + chrono::Duration::minutes(i as i64), open: p, high: p, low: p, close: p, volume: 1000 };
        let now = bar.start + chrono::Duration::minutes(1);
        let fx = e.handle(Event::Bar { symbol: s.clone(), bar, prev_close: d(3000), relative_volume: None }, now);
        for order in submitted(&fx) {
            fill_at(&mut e, &order, &format!("x{i}"), order.quantity, close, now);
            orders.push((i, order.side, order.order_type, order.quantity, close));
        }
    }
    assert_eq!(orders.len(), 2, "{orders:?}");
    let (_, side, kind, quantity, price) = orders[0];
    assert_eq!((side, kind), (Side::Buy, OrderType::Market));
    // All of $1,000 in whole shares at the close plus the 3% market-order buffer: 1000 / 24.72.
    assert_eq!((price, quantity), (2400, 40));
    assert_eq!((orders[1].1, orders[1].2, orders[1].3), (Side::Sell, OrderType::Market, quantity));
    assert!(e.positions[&s].is_flat());
}

/// Bars of the one open position take the quick daily-loss check: after every bar, equity and
/// the day's peak are what the full definitions give, and the limit trips on the exact tick
/// (loss 500 ≥ 500 at $4.50; 499.90 at $4.5001 does not).
#[test]
fn the_daily_loss_check_on_bars_matches_its_definition_to_the_tick() {
    use crate::market::Price;
    let mut e = engine();
    let (_, fx) = command(&mut e, buy(1000));
    fill(&mut e, &submitted(&fx)[0], "e1", 1000, 500);
    let bar = |ticks: i64| {
        let p = Price(ticks);
        Bar { start: t(NOW), open: p, high: p, low: p, close: p, volume: 100 }
    };
    let mut peak = e.day.peak_equity;
    let closes = [51_000, 50_500, 52_000, 52_001, 47_000, 45_001];
    for (i, close) in closes.into_iter().enumerate() {
        for symbol in ["ABCD", "ZZZZ"] {
            let event = Event::Bar { symbol: sym(symbol), bar: bar(close), prev_close: d(500), relative_volume: None };
            let fx = e.handle(event, t(NOW));
            assert!(fx.is_empty(), "bar {i} of {symbol}: {fx:?}");
            let equity = e.equity();
            assert_eq!(e.current_equity(), equity, "bar {i} of {symbol}");
            peak = peak.max(equity);
            assert_eq!(e.day.peak_equity, peak, "bar {i} of {symbol}");
        }
    }
    assert_eq!(e.day.peak_equity, d(10_000_000) - d(500_000) + d(520_010), "the peak at $5.2001");
    assert_eq!(e.trading_state, TradingState::Active);
    let fx = e.handle(
        Event::Bar { symbol: sym("ABCD"), bar: bar(45_000), prev_close: d(500), relative_volume: None },
        t(NOW),
    );
    assert_eq!(fx, vec![Effect::TradingStateChanged { state: TradingState::Reducing, halt: None }]);
    assert_eq!(e.current_equity(), e.equity());
}

/// A new day whose book is as the last check saw it (bars alone since) sets the day's figures
/// without a full check: the day starts at the equity of the last bar, its peak follows the
/// bars, and the limit trips on the exact tick (a loss of 500 at $4.50, none at $4.5001); a
/// position past the limit once the previous day's realized P&L no longer offsets it reduces as
/// the day begins, whichever symbol's bar rolls the day.
#[test]
fn a_day_roll_sets_the_daily_loss_figures_as_the_full_check_does() {
    use crate::market::Price;
    let mut e = engine();
    let (_, fx) = command(&mut e, buy(1000));
    fill(&mut e, &submitted(&fx)[0], "e1", 1000, 500);
    let bar_on = |day: i64, ticks: i64| {
        let p = Price(ticks);
        Bar { start: t(NOW) + chrono::Duration::days(day), open: p, high: p, low: p, close: p, volume: 100 }
    };
    let on = |e: &mut Engine, symbol: &str, day: i64, ticks: i64| {
        let bar = bar_on(day, ticks);
        let now = bar.start + chrono::Duration::minutes(1);
        e.handle(Event::Bar { symbol: sym(symbol), bar, prev_close: d(500), relative_volume: None }, now)
    };
    on(&mut e, "ABCD", 0, 51_000);
    // Each day one bar, up then down: the day starts at the last bar's equity and peaks at the
    // higher of the two.
    let mut previous = e.equity();
    for (day, close) in [(1, 52_000), (2, 49_000), (3, 49_500), (4, 46_000)] {
        let fx = on(&mut e, "ABCD", day, close);
        assert_eq!(fx.iter().filter(|f| matches!(f, Effect::DayRolled { .. })).count(), 1, "day {day}: {fx:?}");
        assert_eq!(e.day.start_equity, previous, "day {day}");
        let equity = e.equity();
        assert_eq!(e.current_equity(), equity, "day {day}");
        assert_eq!(e.day.peak_equity, previous.max(equity), "day {day}");
        assert_eq!(e.trading_state, TradingState::Active, "day {day}: a loss of 400 at most");
        previous = equity;
    }
    // $4.5001 on a new day: a loss of 499.90, under the limit; $4.50 the next: 500, reached.
    assert!(!on(&mut e, "ABCD", 5, 45_001).iter().any(|f| matches!(f, Effect::TradingStateChanged { .. })));
    let fx = on(&mut e, "ABCD", 6, 45_000);
    assert!(fx.contains(&Effect::TradingStateChanged { state: TradingState::Reducing, halt: None }), "{fx:?}");
    on(&mut e, "ABCD", 7, 46_000);
    assert_eq!(e.trading_state, TradingState::Active, "a new day, 400 down");
    // 100 shares sold at $7.00 (200 realized), the rest marked at $4.30 (630 down): 430 down
    // on the day, twice (a check after the fill, then the quick one).
    let at = t(NOW) + chrono::Duration::days(8);
    let mut sell = buy(100);
    if let Command::PlaceOrder(order) = &mut sell {
        order.side = Side::Sell;
    }
    let fx = e.handle(Event::Command(sell), at);
    fill_at(&mut e, &submitted(&fx)[0], "x1", 100, 700, at);
    on(&mut e, "ABCD", 8, 43_000);
    on(&mut e, "ABCD", 8, 43_000);
    assert_eq!(e.trading_state, TradingState::Active);
    // The next day the realized 200 no longer offsets the 630: the bar that rolls the day, of
    // another symbol, trips the limit.
    let fx = on(&mut e, "ZZZZ", 9, 10_000);
    assert!(fx.contains(&Effect::TradingStateChanged { state: TradingState::Reducing, halt: None }), "{fx:?}");
    assert_eq!(e.current_equity(), e.equity());
}

/// `risk_controls.market_buy_buffer_pct` is what live trading values a market buy at: the last
/// trade plus the buffer. 200 shares at 5.00 with 1,000 of cash pass without a buffer and not
/// with the default 3 %.
#[test]
fn the_market_buy_buffer_is_a_setting_of_the_live_gate() {
    let mut e = Engine::new(Settings::default(), d(100_000), factory);
    e.handle(Event::Mark { symbol: sym("ABCD"), price: d(500), bid: None }, t(NOW));
    let refused = command(&mut e, buy(200)).0;
    assert!(matches!(&refused, Err(CommandError::Risk(r)) if r.rule == RiskRule::BuyingPower), "{refused:?}");
    e.settings.risk_controls.market_buy_buffer_pct = 0.0;
    assert!(command(&mut e, buy(200)).0.is_ok());
}

/// A strategy's entry above a size limit is sized down to what the gate allows — not sent to be
/// refused — and its decision says by which rule.
#[test]
fn strategy_entries_are_sized_down_to_the_limits() {
    let mut e = engine();
    e.settings.risk_controls.max_order_value = d(30_000);
    command(&mut e, Command::Watch { symbol: sym("ABCD"), source: "MANUAL".into() }).0.unwrap();
    let mut fx = Vec::new();
    for m in 0..3 {
        fx.extend(e.handle(
            Event::Bar { symbol: sym("ABCD"), bar: bar(m), prev_close: d(400), relative_volume: Some(8.0) },
            t(NOW),
        ));
    }
    let entry = submitted(&fx).pop().expect("entered on the 3rd bar");
    assert_eq!(entry.quantity, 58, "floor(300 / 5.15) of the 100 asked");
    let sentence = "entry for the test Sized down from 100 to 58 shares by MAX_ORDER_VALUE (limit 300).";
    assert_eq!(entry.reason.as_deref(), Some(format!("TEST_ENTRY: {sentence}").as_str()));
    assert!(fx.iter().any(|f| matches!(f, Effect::Decision { text, .. } if text == sentence)), "{fx:?}");
    assert!(!fx.iter().any(|f| matches!(f, Effect::Violation { .. })), "not a refusal");
}

#[test]
fn the_halt_remembers_the_strategies_it_stopped_and_restarts_exactly_those_after_resume() {
    let mut e = engine();
    for s in ["AAA", "BBB", "CCC", "DDD"] {
        command(&mut e, Command::Watch { symbol: sym(s), source: "MANUAL".into() }).0.unwrap();
    }
    // Stopped by hand before the halt: not the halt's to restart.
    command(&mut e, Command::StopWatch { symbol: sym("DDD"), reason: "done".into() }).0.unwrap();

    let (_, fx) = command(&mut e, Command::EmergencyHalt { reason: "test".into(), actor: "ops".into() });
    let stopped: Vec<Symbol> = ["AAA", "BBB", "CCC"].map(sym).into();
    assert!(fx.contains(&Effect::HaltStoppedChanged { symbols: stopped.clone() }), "{fx:?}");
    assert_eq!(e.halt_stopped.iter().cloned().collect::<Vec<_>>(), stopped);
    assert_eq!(command(&mut e, Command::RestartHaltStopped).0, Err(CommandError::Halted));

    // Resume leaves them stopped; the set stays until the operator acts.
    command(&mut e, Command::Resume { reason: "ok".into(), actor: "ops".into() }).0.unwrap();
    assert!(stopped.iter().all(|s| e.slots[s].status == StrategyStatus::Closed && e.slots[s].strategy.is_none()));
    assert_eq!(e.halt_stopped.len(), 3);

    // Since the halt: BBB restarted by hand, CCC blocked.
    command(&mut e, Command::Restart { symbol: sym("BBB") }).0.unwrap();
    let block =
        Command::Block { symbol: sym("CCC"), scope: "TODAY".into(), reason: "news".into(), actor: "ops".into() };
    command(&mut e, block).0.unwrap();
    assert_eq!(e.halt_stopped.iter().cloned().collect::<Vec<_>>(), vec![sym("AAA"), sym("CCC")]);

    let (reply, fx) = command(&mut e, Command::RestartHaltStopped);
    let Ok(Reply::HaltStoppedRestarted { restarted, skipped }) = reply else { panic!("{reply:?}") };
    assert_eq!(restarted, vec![(sym("AAA"), StrategyStatus::Active)]);
    assert_eq!(skipped, vec![(sym("CCC"), "CCC is blocked".to_string())]);
    assert!(fx.contains(&Effect::HaltStoppedChanged { symbols: vec![] }));
    assert!(e.slots[&sym("AAA")].strategy.is_some());
    assert!(e.slots[&sym("DDD")].strategy.is_none(), "stopped by hand before the halt: left alone");
    assert!(e.halt_stopped.is_empty());
    // Done once: again restarts nothing.
    let (again, fx) = command(&mut e, Command::RestartHaltStopped);
    assert_eq!(again, Ok(Reply::HaltStoppedRestarted { restarted: vec![], skipped: vec![] }));
    assert!(fx.is_empty());
}

/// A strategy the halt stopped that the operator watches again by hand is running, so it is no
/// longer listed as the halt's to restart.
#[test]
fn watching_a_halt_stopped_symbol_again_takes_it_off_the_halts_list() {
    let mut e = engine();
    for s in ["AAA", "BBB"] {
        command(&mut e, Command::Watch { symbol: sym(s), source: "MANUAL".into() }).0.unwrap();
    }
    command(&mut e, Command::EmergencyHalt { reason: "test".into(), actor: "ops".into() }).0.unwrap();
    command(&mut e, Command::Resume { reason: "ok".into(), actor: "ops".into() }).0.unwrap();
    let (reply, fx) = command(&mut e, Command::Watch { symbol: sym("AAA"), source: "MANUAL".into() });
    assert!(matches!(reply, Ok(Reply::Watch { already: false, .. })), "{reply:?}");
    assert!(e.slots[&sym("AAA")].strategy.is_some());
    assert_eq!(e.halt_stopped.iter().cloned().collect::<Vec<_>>(), vec![sym("BBB")]);
    assert!(fx.contains(&Effect::HaltStoppedChanged { symbols: vec![sym("BBB")] }), "{fx:?}");
}

/// A restart rebuilds the engine from what was persisted: the saved state and counters, the
/// positions, open orders and blocks in place, each watched symbol's slot with its status, and
/// the working orders attached to their slots (a strategy's buy as the entry, a sell as an exit;
/// a manual buy is neither).
#[test]
fn restore_sets_the_persisted_book_in_place_and_attaches_working_orders() {
    let now = t(NOW);
    let (abcd, wxyz, qrst) = (sym("ABCD"), sym("WXYZ"), sym("QRST"));
    let mut held = Position::new(abcd.clone());
    let bought =
        crate::positions::PositionFill { side: Side::Buy, quantity: 100, price: d(500), fee: Decimal::ZERO, at: now };
    held.apply(&bought).unwrap();
    let id = |s: &str| ClientOrderId::parse(s).unwrap();
    let order = |name: &str, symbol: &Symbol, side: Side, qty: u64| {
        Order::new(id(name), symbol.clone(), side, OrderType::Market, TimeInForce::Day, qty, None, None, now)
    };
    let mut entry = order("entry-1", &wxyz, Side::Buy, 10);
    entry.strategy_id = Some("momentum_breakout".into());
    let open_orders = vec![entry, order("exit-1", &abcd, Side::Sell, 50), order("manual-1", &abcd, Side::Buy, 5)];
    let saved = SavedState {
        cash: d(9_950_000),
        trading_state: TradingState::Reducing,
        halt: None,
        halt_stopped: BTreeSet::from([qrst.clone()]),
        trading_date: Some(NaiveDate::from_ymd_opt(2026, 11, 20).unwrap()),
        trades_today: 2,
        realized_today: d(-1_000),
        start_equity: d(10_000_000),
        peak_equity: d(10_010_000),
        order_sequence: 41,
    };
    let block = Block {
        scope: "PERMANENT".into(),
        reason: "test".into(),
        actor: "op".into(),
        effective_from: now,
        expires_at: None,
    };
    let watched = [(&abcd, StrategyStatus::Hold), (&wxyz, StrategyStatus::Buy), (&qrst, StrategyStatus::Closed)]
        .map(|(symbol, status)| Watched { symbol: symbol.clone(), status, added_at: now })
        .to_vec();
    let restored = Restored {
        state: Some(saved.clone()),
        positions: vec![held.clone()],
        open_orders,
        blocks: vec![(sym("BLKD"), block.clone())],
        watched,
    };
    let e = Engine::restore(Settings::default(), d(10_000_000), factory, restored, now);

    assert_eq!((e.cash(), e.trading_state(), e.halt()), (saved.cash, TradingState::Reducing, None));
    assert_eq!(e.halt_stopped(), &saved.halt_stopped, "a closed row is not restarted");
    let day = e.day();
    assert_eq!((day.date, day.trades_today, day.realized_today), (saved.trading_date, 2, d(-1_000)));
    assert_eq!((day.start_equity, day.peak_equity), (saved.start_equity, saved.peak_equity));
    assert_eq!(e.positions().get(&abcd), Some(&held));
    assert_eq!(e.orders().keys().cloned().collect::<Vec<_>>(), [id("entry-1"), id("exit-1"), id("manual-1")]);
    assert_eq!(e.blocks().get(&sym("BLKD")), Some(&block));
    assert!(e.is_blocked(&sym("BLKD"), now));
    let slot = |s: &Symbol| &e.slots()[s];
    // A running strategy gets a fresh instance, and the status its position and working orders
    // make: holding with a working sell is selling; flat with a working entry is buying.
    assert!(slot(&abcd).strategy.is_some() && slot(&wxyz).strategy.is_some(), "running strategies run again");
    assert_eq!((slot(&abcd).status, slot(&abcd).added_at), (StrategyStatus::Sell, Some(now)));
    assert_eq!(slot(&abcd).entry_order, None, "a manual buy is not a strategy's entry");
    assert_eq!(slot(&abcd).exit_orders, BTreeSet::from([id("exit-1")]));
    assert_eq!((slot(&wxyz).status, slot(&wxyz).entry_order.clone()), (StrategyStatus::Buy, Some(id("entry-1"))));
    assert_eq!(slot(&qrst).status, StrategyStatus::Closed);
    assert!(slot(&qrst).strategy.is_none());
    assert_eq!(e.order_sequence(), 41, "the order counter goes on from the saved one");
}

/// A restarted engine's generated ids never repeat one it holds, nor one the saved counter
/// says was made: a simulated market resumes at the second it stopped in.
#[test]
fn a_restored_engine_counts_order_ids_on_and_skips_ids_in_use() {
    let now = t(NOW);
    let stamp = now.format("%Y%m%d%H%M%S").to_string();
    let held = |n: u64| {
        let id = ClientOrderId::parse(&format!("to-ABCD-{stamp}-{n}")).unwrap();
        Order::new(id, sym("ABCD"), Side::Buy, OrderType::Limit, TimeInForce::Day, 1, Some(d(400)), None, now)
    };
    let restore = |order_sequence: u64, open_orders: Vec<Order>| {
        let state = SavedState {
            cash: d(10_000_000),
            trading_state: TradingState::Active,
            halt: None,
            halt_stopped: BTreeSet::new(),
            trading_date: None,
            trades_today: 0,
            realized_today: Decimal::ZERO,
            start_equity: d(10_000_000),
            peak_equity: d(10_000_000),
            order_sequence,
        };
        let restored = Restored { state: Some(state), positions: vec![], open_orders, blocks: vec![], watched: vec![] };
        let mut e = Engine::restore(Settings::default(), d(10_000_000), factory, restored, now);
        e.handle(Event::Mark { symbol: sym("ABCD"), price: d(500), bid: None }, now);
        e
    };
    let id_of = |e: &mut Engine| match command(e, buy(1)).0 {
        Ok(Reply::Order(o)) => o.client_order_id.to_string(),
        other => panic!("{other:?}"),
    };
    // The saved counter: on from 7.
    assert_eq!(id_of(&mut restore(7, vec![])), format!("to-ABCD-{stamp}-8"));
    // No counter saved (a state from before it was kept), an order of the same second held.
    assert_eq!(id_of(&mut restore(0, vec![held(1), held(2)])), format!("to-ABCD-{stamp}-3"));
}

/// Restoring while `HALTED` restarts nothing: the halt's stopped strategies stay stopped.
#[test]
fn restore_while_halted_leaves_the_halt_stopped_strategies_stopped() {
    let now = t(NOW);
    let halt = Halt { at: now, reason: "test".into(), actor: "op".into() };
    let saved = SavedState {
        cash: d(10_000_000),
        trading_state: TradingState::Halted,
        halt: Some(halt.clone()),
        halt_stopped: BTreeSet::from([sym("ABCD")]),
        trading_date: None,
        trades_today: 0,
        realized_today: Decimal::ZERO,
        start_equity: d(10_000_000),
        peak_equity: d(10_000_000),
        order_sequence: 0,
    };
    let watched = vec![Watched { symbol: sym("ABCD"), status: StrategyStatus::Active, added_at: now }];
    let restored = Restored { state: Some(saved), watched, ..Restored::default() };
    let e = Engine::restore(Settings::default(), d(10_000_000), factory, restored, now);
    assert_eq!((e.trading_state(), e.halt()), (TradingState::Halted, Some(&halt)));
    assert_eq!(e.halt_stopped(), &BTreeSet::from([sym("ABCD")]));
    assert!(e.slots()[&sym("ABCD")].strategy.is_none());
}

fn manual(c: &Command) -> &ManualOrder {
    let Command::PlaceOrder(m) = c else { panic!("a manual order") };
    m
}

#[test]
fn preview_answers_as_the_order_would_and_changes_nothing() {
    let mut e = engine();
    // Approved: the same order is then placed.
    let order = buy(100);
    let preview = e.preview(manual(&order), None, t(NOW)).unwrap();
    assert_eq!(preview.verdict, Ok(()));
    assert_eq!(preview.estimated_cost, Some(d(50_000)));
    assert!(preview.buying_power_after < preview.buying_power);
    assert!(e.orders.is_empty() && e.recent.is_empty() && e.day.trades_today == 0, "the preview placed nothing");
    let (reply, _) = command(&mut e, order.clone());
    assert!(reply.is_ok());
    // The same order again is a duplicate, for the preview and the order alike.
    let preview = e.preview(manual(&order), None, t(NOW)).unwrap();
    let (reply, _) = command(&mut e, order);
    assert_eq!(preview.verdict.map_err(CommandError::from), reply.map(|_| ()));
    // Refused by a risk rule: the same rule, limit and figure, and only the order leaves a
    // violation row.
    e.settings.risk_controls.max_order_value = d(10_000);
    let order = buy(300);
    let before = e.orders.len();
    let preview = e.preview(manual(&order), None, t(NOW)).unwrap();
    let (reply, fx) = command(&mut e, order);
    let Err(Refusal::Risk(previewed)) = preview.verdict else { panic!("refused by a rule: {preview:?}") };
    let Err(CommandError::Risk(refused)) = reply else { panic!("refused by a rule: {reply:?}") };
    assert_eq!(previewed, refused);
    assert_eq!(previewed.rule, RiskRule::MaxOrderValue);
    assert!(fx.iter().any(|f| matches!(f, Effect::Violation { .. })));
    assert_eq!(e.orders.len(), before);
}

fn halt_abcd(e: &mut Engine) -> Vec<Effect> {
    let halt = crate::market::SymbolHalt::luld_pause(t(NOW));
    e.handle(Event::Status { symbol: sym("ABCD"), halt: Some(halt) }, t(NOW))
}

fn order_of(kind: OrderType, side: Side, limit: Option<Decimal>, stop: Option<Decimal>) -> Command {
    Command::PlaceOrder(ManualOrder {
        client_order_id: None,
        symbol: sym("ABCD"),
        side,
        quantity: 10,
        order_type: kind,
        limit_price: limit,
        stop_price: stop,
        time_in_force: TimeInForce::Day,
        reason: None,
        legs: None,
        extended_hours: false,
    })
}

#[test]
fn a_status_change_is_reported_once_and_the_same_status_again_changes_nothing() {
    let mut e = engine();
    let fx = halt_abcd(&mut e);
    assert!(matches!(&fx[..], [Effect::SymbolStatus { halt: Some(h), .. }] if &*h.reason_code == "LUDP"), "{fx:?}");
    assert!(halt_abcd(&mut e).is_empty(), "the same halt again");
    assert_eq!(e.halt_of(&sym("ABCD")).map(|h| h.since), Some(t(NOW)));
    let fx = e.handle(Event::Status { symbol: sym("ABCD"), halt: None }, t(NOW));
    assert!(matches!(&fx[..], [Effect::SymbolStatus { halt: None, .. }]), "{fx:?}");
    assert!(e.handle(Event::Status { symbol: sym("ABCD"), halt: None }, t(NOW)).is_empty());
    assert!(e.halts().is_empty());
}

#[test]
fn market_and_stop_orders_and_closes_in_a_halted_symbol_are_refused_and_limits_wait() {
    let mut e = engine();
    let (_, fx) = command(&mut e, buy(100));
    fill(&mut e, &submitted(&fx)[0], "e1", 100, 500);
    halt_abcd(&mut e);
    let halted = |r: &Result<Reply, CommandError>| matches!(r, Err(CommandError::SymbolHalted { symbol, halt }) if *symbol == sym("ABCD") && &*halt.reason_code == "LUDP");
    for c in [
        order_of(OrderType::Market, Side::Buy, None, None),
        order_of(OrderType::Market, Side::Sell, None, None),
        order_of(OrderType::Stop, Side::Sell, None, Some(d(450))),
        Command::ClosePosition { symbol: sym("ABCD"), quantity: None },
        Command::ClosePosition { symbol: sym("ABCD"), quantity: Some(10) },
    ] {
        let (reply, fx) = command(&mut e, c.clone());
        assert!(halted(&reply), "{c:?}: {reply:?}");
        assert!(fx.is_empty(), "a refused order changes nothing and sends nothing: {fx:?}");
        if let Command::PlaceOrder(m) = &c {
            assert!(halted(&e.preview(m, None, t(NOW)).map(|_| Reply::Done)), "the preview says so too");
        }
    }
    // A limit order waits at the venue with its price.
    let (reply, fx) = command(&mut e, order_of(OrderType::Limit, Side::Sell, Some(d(510)), None));
    assert!(matches!(reply, Ok(Reply::Order(_))), "{reply:?}");
    assert_eq!(submitted(&fx).len(), 1);
    // Another symbol trades.
    e.handle(Event::Mark { symbol: sym("WXYZ"), price: d(500), bid: None }, t(NOW));
    let other = Command::PlaceOrder(ManualOrder { symbol: sym("WXYZ"), ..manual(&buy(1)).clone() });
    assert!(command(&mut e, other).0.is_ok());
    // Reopened: a close goes out.
    e.handle(Event::Status { symbol: sym("ABCD"), halt: None }, t(NOW));
    let (reply, fx) = command(&mut e, Command::ClosePosition { symbol: sym("ABCD"), quantity: Some(20) });
    assert!(matches!(reply, Ok(Reply::Close { .. })), "{reply:?}");
    assert_eq!(submitted(&fx).len(), 1);
}

#[test]
fn a_strategy_waits_for_the_reopen_neither_entering_nor_exiting_into_a_halt() {
    let bar_at = |e: &mut Engine, m| {
        e.handle(
            Event::Bar { symbol: sym("ABCD"), bar: bar(m), prev_close: d(400), relative_volume: Some(8.0) },
            t(NOW),
        )
    };
    let mut e = engine();
    command(&mut e, Command::Watch { symbol: sym("ABCD"), source: "MANUAL".into() }).0.unwrap();
    bar_at(&mut e, 0);
    bar_at(&mut e, 1);
    halt_abcd(&mut e);
    let fx = bar_at(&mut e, 2);
    assert!(submitted(&fx).is_empty(), "no entry into a halt: {fx:?}");
    assert_eq!(e.slots()[&sym("ABCD")].status, StrategyStatus::Active);
    e.handle(Event::Status { symbol: sym("ABCD"), halt: None }, t(NOW));
    let fx = bar_at(&mut e, 3);
    assert_eq!(submitted(&fx).len(), 1, "the strategy's first bar after the reopen enters: {fx:?}");

    // Held, then halted: the strategy's market exit waits; after the reopen it goes out.
    let mut e = engine();
    command(&mut e, Command::Watch { symbol: sym("ABCD"), source: "MANUAL".into() }).0.unwrap();
    let mut entry = None;
    for m in 0..3 {
        entry = entry.or_else(|| submitted(&bar_at(&mut e, m)).pop());
    }
    fill(&mut e, &entry.expect("entered on the 3rd bar"), "e1", 100, 512);
    bar_at(&mut e, 3);
    bar_at(&mut e, 4);
    halt_abcd(&mut e);
    let fx = bar_at(&mut e, 5);
    assert!(submitted(&fx).is_empty(), "no market exit into a halt: {fx:?}");
    assert_eq!(e.slots()[&sym("ABCD")].status, StrategyStatus::Hold);
    e.handle(Event::Status { symbol: sym("ABCD"), halt: None }, t(NOW));
    let fx = bar_at(&mut e, 6);
    assert_eq!(submitted(&fx).iter().map(|o| (o.side, o.quantity)).collect::<Vec<_>>(), vec![(Side::Sell, 100)]);
}

#[test]
fn the_emergency_halt_still_sends_its_exit_into_a_trading_halt() {
    let mut e = engine();
    let (_, fx) = command(&mut e, buy(100));
    fill(&mut e, &submitted(&fx)[0], "e1", 100, 500);
    halt_abcd(&mut e);
    let (reply, fx) = command(&mut e, Command::EmergencyHalt { reason: "test".into(), actor: "ops".into() });
    assert!(matches!(reply, Ok(Reply::Halted { liquidation_requested: true, .. })));
    let exits = submitted(&fx);
    assert_eq!(exits.iter().map(|o| (o.side, o.quantity)).collect::<Vec<_>>(), vec![(Side::Sell, 100)]);
}

/// A minute bar of ABCD closing at `close` cents, `m` minutes after 07:00 New York on Friday
/// 2026-11-20 (the pre-market).
fn pre_market_bar(m: i64, close: i64) -> (Bar, Timestamp) {
    let start = t("2026-11-20T12:00:00Z") + chrono::Duration::minutes(m);
    let price = crate::market::Price::from_cents(close);
    (
        Bar { start, open: price, high: price, low: price, close: price, volume: 10_000 },
        start + chrono::Duration::minutes(1),
    )
}

/// In the pre-market a strategy enters only with `strategy_allocator.trade_extended_hours`
/// (CONTRACT §12), and then as an extended-hours limit once the last trade is through its
/// breakout's trigger (no venue elects a stop there: the engine holds it); its exit there is an
/// extended-hours limit under the last trade.
#[test]
fn in_the_pre_market_a_strategy_enters_only_when_allowed_and_with_extended_hours_limits() {
    let run = |allowed: bool| {
        let mut settings = Settings::default();
        settings.runtime.market_calendar = MarketCalendarKind::Nyse;
        settings.strategy_allocator.trade_extended_hours = allowed;
        let mut e = Engine::new(settings, d(10_000_000), factory);
        let (_, at) = pre_market_bar(0, 500);
        e.handle(Event::Mark { symbol: sym("ABCD"), price: d(500), bid: None }, at);
        let watch = Command::Watch { symbol: sym("ABCD"), source: "MANUAL".into() };
        let mut fx = e.handle(Event::Command(watch), at);
        assert!(matches!(fx.pop(), Some(Effect::Reply(Ok(_)))));
        let mut placed = Vec::new();
        // Five bars at 5.00, under the trigger at 5.10; then one through it at 5.12.
        for (m, close) in [(0, 500), (1, 500), (2, 500), (3, 500), (4, 500), (5, 512)] {
            let (bar, at) = pre_market_bar(m, close);
            let fx = e.handle(Event::Bar { symbol: sym("ABCD"), bar, prev_close: d(450), relative_volume: None }, at);
            placed.extend(submitted(&fx));
        }
        (e, placed)
    };
    let (_, placed) = run(false);
    assert!(placed.is_empty(), "no entry in the pre-market unless allowed: {placed:?}");

    let (mut e, placed) = run(true);
    assert_eq!(placed.len(), 1, "one entry, once the last trade is through the trigger: {placed:?}");
    let entry = &placed[0];
    assert_eq!(
        (entry.order_type, entry.limit_price, entry.stop_price, entry.extended_hours),
        (OrderType::Limit, Some(d(515)), None, true)
    );
    let (_, at) = pre_market_bar(6, 512);
    fill_at(&mut e, entry, "x1", 100, 512, at);
    // The strategy's exit (from its sixth bar, holding): an extended-hours limit 1% under 5.12.
    let (bar, at) = pre_market_bar(7, 512);
    let fx = e.handle(Event::Bar { symbol: sym("ABCD"), bar, prev_close: d(450), relative_volume: None }, at);
    let exits = submitted(&fx);
    assert_eq!(exits.len(), 1, "{fx:?}");
    assert_eq!(
        (exits[0].side, exits[0].order_type, exits[0].limit_price, exits[0].extended_hours),
        (Side::Sell, OrderType::Limit, Some(d(506)), true)
    );
}
