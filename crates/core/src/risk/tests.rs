use super::*;
use crate::time::parse_ts;
use proptest::prelude::*;

fn now() -> Timestamp {
    parse_ts("2026-11-20T15:00:00Z").unwrap()
}

fn d(cents: i64) -> Decimal {
    Decimal::new(cents, 2)
}

struct Case {
    id: ClientOrderId,
    symbol: Symbol,
    limits: RiskControls,
    recent: Vec<RecentOrder>,
}

impl Case {
    fn new() -> Case {
        Case {
            id: ClientOrderId::parse("c-9").unwrap(),
            symbol: Symbol::parse("ABCD").unwrap(),
            limits: RiskControls::default(),
            recent: vec![],
        }
    }

    fn order(&self, side: Side, qty: u64) -> OrderIntent<'_> {
        OrderIntent {
            client_order_id: &self.id,
            symbol: &self.symbol,
            side,
            order_type: OrderType::Market,
            quantity: qty,
            limit_price: None,
            stop_price: None,
        }
    }

    fn snapshot(&self) -> RiskSnapshot<'_> {
        RiskSnapshot {
            trading_state: TradingState::Active,
            limits: &self.limits,
            blocked: false,
            last_price: Some(d(500)),
            market_fill: None,
            position: 0,
            open_buy_quantity: 0,
            open_sell_quantity: 0,
            open_positions: 0,
            trades_today: 0,
            daily_pnl: Decimal::ZERO,
            buying_power: d(10_000_000),
            client_order_id_used: false,
            recent_orders: &self.recent,
        }
    }
}

fn rule_of(v: &Verdict) -> Option<&'static str> {
    match v {
        Verdict::Refused(Refusal::Risk(r)) => Some(r.rule.as_str()),
        _ => None,
    }
}

#[test]
fn an_ordinary_buy_is_approved() {
    let c = Case::new();
    assert_eq!(check(&c.order(Side::Buy, 100), &c.snapshot(), now()), Verdict::Approved);
}

#[test]
fn each_rule_refuses_with_limit_and_current() {
    let c = Case::new();
    let buy = c.order(Side::Buy, 100);
    let cases: Vec<(RiskSnapshot, &str)> = vec![
        (
            RiskSnapshot { trading_state: TradingState::Reducing, daily_pnl: d(-60_000), ..c.snapshot() },
            "MAX_DAILY_LOSS",
        ),
        (RiskSnapshot { blocked: true, ..c.snapshot() }, "SYMBOL_BLOCKED"),
        (RiskSnapshot { last_price: Some(d(30_000)), ..c.snapshot() }, "MAX_ORDER_VALUE"),
        (RiskSnapshot { position: 1_950, ..c.snapshot() }, "MAX_POSITION_SIZE"),
        (RiskSnapshot { open_buy_quantity: 1_901, ..c.snapshot() }, "MAX_POSITION_SIZE"),
        (RiskSnapshot { open_positions: 3, ..c.snapshot() }, "OPEN_POSITION_LIMIT"),
        (RiskSnapshot { trades_today: 20, ..c.snapshot() }, "MAX_TRADES_PER_DAY"),
        (RiskSnapshot { daily_pnl: d(-50_000), ..c.snapshot() }, "MAX_DAILY_LOSS"),
        (RiskSnapshot { buying_power: d(50_000), ..c.snapshot() }, "BUYING_POWER"),
    ];
    for (snapshot, expected) in cases {
        let verdict = check(&buy, &snapshot, now());
        assert_eq!(rule_of(&verdict), Some(expected), "{verdict:?}");
    }
    // an open position in the symbol does not count against opening it again
    assert_eq!(
        check(&buy, &RiskSnapshot { open_positions: 3, position: 100, ..c.snapshot() }, now()),
        Verdict::Approved
    );
    let Verdict::Refused(Refusal::Risk(r)) = check(&buy, &RiskSnapshot { trades_today: 20, ..c.snapshot() }, now())
    else {
        panic!()
    };
    assert_eq!((r.limit, r.current), (RiskFigure::Count(20), RiskFigure::Count(20)));
}

#[test]
fn the_price_collar_guards_limit_and_stop_prices() {
    let c = Case::new();
    let far = OrderIntent { order_type: OrderType::Limit, limit_price: Some(d(530)), ..c.order(Side::Buy, 10) };
    assert_eq!(rule_of(&check(&far, &c.snapshot(), now())), Some("PRICE_COLLAR"), "6% from 5.00");
    let near = OrderIntent { limit_price: Some(d(520)), ..far.clone() };
    assert_eq!(check(&near, &c.snapshot(), now()), Verdict::Approved, "4% from 5.00");
    let sell_far = OrderIntent {
        side: Side::Sell,
        order_type: OrderType::Stop,
        limit_price: None,
        stop_price: Some(d(400)),
        ..far
    };
    let held = RiskSnapshot { position: 10, ..c.snapshot() };
    assert_eq!(rule_of(&check(&sell_far, &held, now())), Some("PRICE_COLLAR"));
}

#[test]
fn halted_refuses_buys_but_lets_positions_close() {
    let c = Case::new();
    let halted = RiskSnapshot { trading_state: TradingState::Halted, position: 100, blocked: true, ..c.snapshot() };
    assert_eq!(check(&c.order(Side::Buy, 1), &halted, now()), Verdict::Refused(Refusal::Halted));
    assert_eq!(check(&c.order(Side::Sell, 100), &halted, now()), Verdict::Approved);
    let reducing = RiskSnapshot { trading_state: TradingState::Reducing, ..halted };
    assert_eq!(check(&c.order(Side::Sell, 40), &reducing, now()), Verdict::Approved);
}

#[test]
fn sells_never_exceed_the_shares_available() {
    let c = Case::new();
    let s = RiskSnapshot { position: 100, open_sell_quantity: 30, ..c.snapshot() };
    assert_eq!(check(&c.order(Side::Sell, 70), &s, now()), Verdict::Approved);
    assert!(matches!(
        check(&c.order(Side::Sell, 71), &s, now()),
        Verdict::Refused(Refusal::Invalid { field: "quantity", .. })
    ));
    assert!(
        matches!(check(&c.order(Side::Sell, 1), &c.snapshot(), now()), Verdict::Refused(Refusal::Invalid { .. })),
        "no short selling"
    );
}

#[test]
fn duplicates_within_the_window_and_reused_ids() {
    let mut c = Case::new();
    c.recent = vec![RecentOrder {
        client_order_id: ClientOrderId::parse("earlier").unwrap(),
        symbol: c.symbol.clone(),
        side: Side::Buy,
        quantity: 100,
        submitted_at: now() - chrono::Duration::seconds(9),
    }];
    let verdict = check(&c.order(Side::Buy, 100), &c.snapshot(), now());
    assert!(
        matches!(&verdict, Verdict::Refused(Refusal::Duplicate { existing, .. }) if existing.as_str() == "earlier"),
        "{verdict:?}"
    );
    assert_eq!(check(&c.order(Side::Buy, 101), &c.snapshot(), now()), Verdict::Approved, "different quantity");
    assert_eq!(
        check(&c.order(Side::Buy, 100), &c.snapshot(), now() + chrono::Duration::seconds(1)),
        Verdict::Approved,
        "window passed"
    );
    let reused = RiskSnapshot { client_order_id_used: true, ..c.snapshot() };
    assert!(matches!(check(&c.order(Side::Buy, 5), &reused, now()), Verdict::Refused(Refusal::Duplicate { .. })));
}

#[test]
fn order_types_need_their_prices() {
    let c = Case::new();
    let limit_without = OrderIntent { order_type: OrderType::Limit, ..c.order(Side::Buy, 1) };
    assert!(matches!(
        check(&limit_without, &c.snapshot(), now()),
        Verdict::Refused(Refusal::Invalid { field: "limit_price", .. })
    ));
    let market_with = OrderIntent { limit_price: Some(d(500)), ..c.order(Side::Buy, 1) };
    assert!(matches!(
        check(&market_with, &c.snapshot(), now()),
        Verdict::Refused(Refusal::Invalid { field: "limit_price", .. })
    ));
    let stop_without =
        OrderIntent { order_type: OrderType::StopLimit, limit_price: Some(d(500)), ..c.order(Side::Buy, 1) };
    assert!(matches!(
        check(&stop_without, &c.snapshot(), now()),
        Verdict::Refused(Refusal::Invalid { field: "stop_price", .. })
    ));
}

proptest! {
    /// Soundness: a buy the gate approves satisfies every limit; a refusal always names why.
    #[test]
    fn approved_buys_respect_every_limit(
        qty in 1u64..3000, price_cents in 50i64..5000, position in 0u64..2500, open_buy in 0u64..500,
        open_positions in 0u32..5, trades in 0u32..25, pnl_cents in -80_000i64..20_000, bp_cents in 0i64..5_000_000,
        halted in any::<bool>(), blocked in any::<bool>(),
    ) {
        let c = Case::new();
        let s = RiskSnapshot {
            trading_state: if halted { TradingState::Halted } else { TradingState::Active },
            blocked,
            last_price: Some(d(price_cents)),
            position,
            open_buy_quantity: open_buy,
            open_positions,
            trades_today: trades,
            daily_pnl: d(pnl_cents),
            buying_power: d(bp_cents),
            ..c.snapshot()
        };
        let l = &c.limits;
        if check(&c.order(Side::Buy, qty), &s, now()) == Verdict::Approved {
            let notional = Decimal::from(qty) * d(price_cents);
            prop_assert!(!halted && !blocked);
            prop_assert!(notional <= l.max_order_value);
            prop_assert!(position + open_buy + qty <= l.max_position_size);
            prop_assert!(position > 0 || open_buy > 0 || open_positions < l.open_position_limit);
            prop_assert!(trades < l.max_trades_per_day);
            prop_assert!(-d(pnl_cents) < l.max_daily_loss);
            prop_assert!(notional * l.market_buy_factor() <= d(bp_cents));
        }
    }
}

proptest! {
    /// Sizing within the limits: the size [`BuyRoom::size`] gives passes every size rule of the
    /// gate (and the gate then approves it when nothing else refuses), one share more is refused
    /// by the rule it names, and an all-in size spends buying power to the last whole share.
    #[test]
    fn buys_sized_to_the_room_pass_and_one_share_more_is_refused(
        wanted in proptest::option::of(1u64..5000), price_cents in 50i64..50_000, fill_cents in 50i64..50_000,
        known_fill in any::<bool>(), position in 0u64..2500, open_buy in 0u64..500, bp_cents in 0i64..10_000_000,
        buffer_bps in 0u32..1000,
    ) {
        let mut c = Case::new();
        c.limits.market_buy_buffer_pct = f64::from(buffer_bps) / 100.0;
        let s = RiskSnapshot {
            last_price: Some(d(price_cents)),
            market_fill: known_fill.then(|| d(fill_cents)),
            position,
            open_buy_quantity: open_buy,
            buying_power: d(bp_cents),
            ..c.snapshot()
        };
        let room = BuyRoom::of(OrderType::Market, None, None, &s).unwrap();
        prop_assert_eq!(room.reference, if known_fill { d(fill_cents) } else { d(price_cents) });
        let (size, bound) = room.size(wanted);
        prop_assert!(size <= wanted.unwrap_or(u64::MAX));
        if size > 0 {
            prop_assert_eq!(check(&c.order(Side::Buy, size), &s, now()), Verdict::Approved);
        }
        let over = match check(&c.order(Side::Buy, size + 1), &s, now()) {
            Verdict::Refused(Refusal::Risk(r)) => Some(r.rule),
            _ => None,
        };
        match (bound, wanted) {
            (Some((rule, room_left)), _) => {
                prop_assert_eq!(room_left, size);
                prop_assert!(over.is_some(), "{:?} bound it, so one share more is refused", rule);
            }
            // All in: buying power's last whole share (a size rule at the same room may refuse first).
            (None, None) => prop_assert!(over.is_some(), "one share past all in is refused"),
            (None, Some(w)) => prop_assert_eq!(size, w),
        }
    }
}

#[test]
fn sizing_names_the_rule_that_bound_it() {
    let c = Case::new();
    // 5 a share: 25,000 buys 5,000; 2,000 shares less 1,990 held leave 10; buying power 100,000.
    let s = RiskSnapshot { position: 1990, ..c.snapshot() };
    let room = BuyRoom::of(OrderType::Market, None, None, &s).unwrap();
    assert_eq!((room.order_value, room.position_size), (5000, 10));
    assert_eq!(room.size(Some(100)), (10, Some((RiskRule::MaxPositionSize, 10))));
    assert_eq!(room.size(Some(5)), (5, None));
    // 30 a share: 25,000 buys 833, 100,000 of buying power 3,236 at 30 × 1.03.
    let s = RiskSnapshot { last_price: Some(d(3_000)), ..c.snapshot() };
    let room = BuyRoom::of(OrderType::Market, None, None, &s).unwrap();
    assert_eq!(room.size(None), (833, Some((RiskRule::MaxOrderValue, 833))), "all in, capped by the order value");
    // A limit buy is valued at its limit, without the market buffer.
    let s = RiskSnapshot { buying_power: d(103_000), ..c.snapshot() };
    let limit = BuyRoom::of(OrderType::Limit, Some(d(1_000)), None, &s).unwrap();
    assert_eq!((limit.reference, limit.buying_power), (d(1_000), 103));
    let market = BuyRoom::of(OrderType::Market, None, None, &s).unwrap();
    assert_eq!(market.buying_power, 200, "1,030 / (5 × 1.03)");
}

proptest! {
    /// Whole shares in integers are `Decimal`'s floor of the quotient.
    #[test]
    fn whole_shares_are_the_decimal_floor(
        dollars in 0i64..i64::MAX, dollar_scale in 0u32..12, price in 1i64..i64::MAX, price_scale in 0u32..12,
    ) {
        let (dollars, per_share) = (Decimal::new(dollars, dollar_scale), Decimal::new(price, price_scale));
        let by_decimal = (dollars / per_share).floor().to_u64().unwrap_or(u64::MAX);
        prop_assert_eq!(whole_shares(dollars, per_share), by_decimal);
    }
}

/// Each figure kind serializes as `RISK_BLOCKED`'s `detail` showed it when it was built as JSON:
/// money and percentages as floats, counts and shares as integers, a symbol as text, a block as
/// its scope and reason, no figure as `null`.
#[test]
fn risk_figures_serialize_as_the_api_shows_them() {
    let text = |figure: RiskFigure| serde_json::to_string(&figure).unwrap();
    assert_eq!(text(RiskFigure::Money(Decimal::new(25_000, 0))), "25000.0");
    assert_eq!(text(RiskFigure::Money(d(-12_345))), "-123.45");
    assert_eq!(text(RiskFigure::Money(Decimal::new(1_030_005, 4))), "103.0005");
    assert_eq!(text(RiskFigure::Percent(5.0)), "5.0");
    assert_eq!(text(RiskFigure::Percent(7.14)), "7.14");
    assert_eq!(text(RiskFigure::Count(20)), "20");
    assert_eq!(text(RiskFigure::Shares(2_010)), "2010");
    assert_eq!(text(RiskFigure::Symbol(Symbol::parse("ABCD").unwrap())), "\"ABCD\"");
    let block = RiskFigure::Block { block_scope: "TODAY".into(), reason: "halted news".into() };
    assert_eq!(text(block), r#"{"block_scope":"TODAY","reason":"halted news"}"#);
    assert_eq!(text(RiskFigure::None), "null");
}

/// A violation row's detail keeps its keys in the order the API and the rows had them.
#[test]
fn violation_details_serialize_with_their_keys_in_order() {
    let refusal = RiskRefusal {
        rule: RiskRule::MaxTradesPerDay,
        limit: RiskFigure::Count(20),
        current: RiskFigure::Count(21),
        message: "21 trades today (limit 20)".into(),
    };
    assert_eq!(
        serde_json::to_string(&ViolationDetail::of(&refusal)).unwrap(),
        r#"{"limit":20,"current":21,"message":"21 trades today (limit 20)"}"#
    );
    let fill = ViolationDetail::FillWhileHalted {
        message: "bought while HALTED".into(),
        quantity: 10,
        price: d(1_234),
        order_status: OrderStatus::Filled,
    };
    assert_eq!(
        serde_json::to_string(&fill).unwrap(),
        r#"{"message":"bought while HALTED","quantity":10,"price":"12.34","order_status":"FILLED"}"#
    );
}

/// The figures of refusals from the gate, as JSON: a money limit is a float even when whole.
#[test]
fn refusal_figures_from_the_gate_serialize_as_numbers() {
    let c = Case::new();
    let snapshot = RiskSnapshot { last_price: Some(d(30_005)), ..c.snapshot() };
    let Verdict::Refused(Refusal::Risk(r)) = check(&c.order(Side::Buy, 100), &snapshot, now()) else { panic!() };
    assert_eq!(r.rule, RiskRule::MaxOrderValue);
    let json = serde_json::to_string(&(&r.limit, &r.current)).unwrap();
    assert_eq!(json, "[25000.0,30005.0]");
}
