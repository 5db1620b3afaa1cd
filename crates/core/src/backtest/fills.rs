//! The simulated matching engine of backtests (CONTRACT §4 `fill`, research/domain.md §5.2 and
//! §5.5): bar-based, deterministic, no partial fills.
//!
//! - Orders are accepted at once.
//! - **Market** orders fill at the next bar's open (`NEXT_OPEN`), or at the close of the bar
//!   the decision was taken on (`CLOSE`).
//! - **Stop** buys trigger when a bar's high reaches the stop and fill at `max(open, stop)` — the
//!   open when the bar gaps through the stop; stop sells mirror it with the low.
//! - **Stop-limit** buys trigger the same way and then fill at `max(open, stop)` when that is
//!   within the limit; when the bar opened above the limit they fill at the limit only if the bar
//!   came back down to it; a triggered order that did not fill rests as a limit order.
//! - **Limit** buys fill when the low reaches the limit, at `min(open, limit)`; sells mirror it.
//! - Slippage moves every fill price `slippage_bps` against the order (never past its limit),
//!   rounded to the 1/10,000 dollar tick. Commission is `commission_rate` × the fill's value.
//! - Fills are stamped at the bar's open: its start for minute bars, 09:30 New York for daily ones.
//! - Unfilled stop and limit DAY orders expire when the New York date changes; market orders
//!   always fill at the next bar (a bar-based backtest has no intraday book to queue them in).
//! - A sell stop placed by a fill within a bar (a position's protective stop, CONTRACT §11,
//!   placed the moment its entry fills) rests for the rest of that bar: when the bar's low is at
//!   or below it, it fills at the stop — the worst case a bar allows (its low came after the
//!   entry), which is what a venue holding the stop does when the price falls back through it.
//!   It is matched against that bar once, after the bar's fills and what the engine placed on
//!   them (a stop replaced on a fill, e.g. moved to breakeven by a take-profit's fill, included).
//! - **Sessions** (CONTRACT §12): a minute bar outside 09:30–16:00 New York (on the run's
//!   calendar) fills only orders marked extended-hours (limits), and elects no stop; a resting
//!   stop, a market order and an unmarked limit wait for the regular session. A bar while the
//!   market is closed fills nothing. A daily bar is the whole day: always regular.
//! - A protective sell with a take-profit (one-cancels-other, CONTRACT §11) fills as a limit at
//!   the take-profit until its stop is elected: at the open when the bar opens at or above the
//!   target, else by its stop when the bar trades down to it (the worst case when the bar
//!   reaches both), else at the target when the bar's high reaches it. One fill ends both legs.
//!   A take-profit placed within a bar works from the next bar (only its stop is matched
//!   against the rest of that bar, as above).

use crate::broker::BrokerReport;
use crate::calendar::SessionPhase;
use crate::market::{Bar, Price, Side};
use crate::orders::{ClientOrderId, Execution, Order, OrderType, TimeInForce};
use crate::time::Timestamp;
use rust_decimal::Decimal;

/// When a market order fills (CONTRACT §4 `fill`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum FillModel {
    /// A decision on a bar's close fills at the next bar's open.
    #[default]
    NextOpen,
    /// At the close of the bar the decision was taken on.
    Close,
}

struct Working {
    id: ClientOrderId,
    side: Side,
    order_type: OrderType,
    tif: TimeInForce,
    quantity: u64,
    limit: Option<Price>,
    stop: Option<Price>,
    /// A protective order's take-profit leg (one-cancels-other with its stop).
    take_profit: Option<Price>,
    triggered: bool,
    /// Fills in the extended sessions too (CONTRACT §12).
    extended_hours: bool,
}

/// The backtest broker.
pub struct BarBroker {
    fill: FillModel,
    commission_rate: Decimal,
    /// `slippage_bps` / 10,000.
    slippage: Decimal,
    working: Vec<Working>,
    executions: u64,
    /// Where ids are written before they are shared (one allocation per id).
    scratch: String,
    /// Reports not yet taken ([`BarBroker::take_reports`]): one buffer for the whole run, not a
    /// vector per order and per fill.
    reports: Vec<BrokerReport>,
    /// The working orders matched against the current bar ([`BarBroker::on_bar`]); those after
    /// them were placed by its fills ([`BarBroker::stops_placed_in_bar`]).
    matched: Option<usize>,
    /// The session of the current bar: only in the regular one is a stop elected.
    regular: bool,
}

impl BarBroker {
    pub fn new(fill: FillModel, commission_rate: Decimal, slippage_bps: Decimal) -> BarBroker {
        BarBroker {
            fill,
            commission_rate,
            slippage: slippage_bps / Decimal::from(10_000),
            working: Vec::new(),
            executions: 0,
            scratch: String::new(),
            reports: Vec::new(),
            matched: None,
            regular: true,
        }
    }

    pub fn has_working(&self) -> bool {
        !self.working.is_empty()
    }

    /// Takes the reports of the calls so far (acceptances, fills, cancels, expiries), oldest
    /// first.
    pub fn take_reports(&mut self) -> std::vec::Drain<'_, BrokerReport> {
        self.reports.drain(..)
    }

    /// A new order at `now`, decided on `bar`: accepted, and filled at once when it is a market
    /// order under `CLOSE`.
    pub fn submit(&mut self, order: &Order, bar: &Bar, now: Timestamp) {
        self.scratch.clear();
        self.scratch.extend(["bt-", order.client_order_id.as_str()]);
        self.reports.push(BrokerReport::Accepted {
            client_order_id: order.client_order_id.clone(),
            broker_order_id: self.scratch.as_str().into(),
            at: now,
        });
        let tick = |d: Option<Decimal>| d.and_then(Price::from_decimal);
        let working = Working {
            id: order.client_order_id.clone(),
            side: order.side,
            order_type: order.order_type,
            tif: order.time_in_force,
            quantity: order.quantity,
            limit: tick(order.limit_price),
            stop: tick(order.stop_price),
            take_profit: tick(order.legs.filter(|_| order.is_protective()).and_then(|l| l.take_profit)),
            triggered: false,
            extended_hours: order.extended_hours,
        };
        if order.order_type == OrderType::Market && self.fill == FillModel::Close {
            let fill = self.execute(&working, bar.close, now);
            self.reports.push(fill);
        } else {
            self.working.push(working);
        }
    }

    /// The price a market buy decided on `decided_on` fills at, slippage included: `next`'s open
    /// under `NEXT_OPEN` (`None` on the last bar: there is no next one), the decision bar's close
    /// under `CLOSE`. The engine sizes and checks market entries at it. Asked on every bar: in
    /// ticks, and without slippage (the usual case) without any decimal arithmetic.
    #[inline]
    pub fn market_buy_fill(&self, decided_on: &Bar, next: Option<&Bar>) -> Option<Price> {
        let reference = match self.fill {
            FillModel::NextOpen => next?.open,
            FillModel::Close => decided_on.close,
        };
        if self.slippage.is_zero() {
            return Some(reference);
        }
        // Slipped prices are rounded to the tick, so they are prices.
        Price::from_decimal(slipped(reference.to_decimal(), Side::Buy, self.slippage, None))
    }

    /// Changes when market orders submitted from now on fill.
    pub fn set_fill(&mut self, fill: FillModel) {
        self.fill = fill;
    }

    pub fn cancel(&mut self, id: &ClientOrderId, now: Timestamp) {
        let report = match self.working.iter().position(|w| &w.id == id) {
            Some(i) => {
                self.working.remove(i);
                // The orders matched against the bar are one fewer: those placed on its fills
                // keep their place after them.
                if let Some(matched) = self.matched.as_mut().filter(|m| i < **m) {
                    *matched -= 1;
                }
                BrokerReport::Canceled { client_order_id: id.clone(), at: now }
            }
            None => BrokerReport::CancelRejected { client_order_id: id.clone(), reason: "not working".into(), at: now },
        };
        self.reports.push(report);
    }

    /// The trading date changed: unfilled stop and limit DAY orders expire.
    pub fn expire_day_orders(&mut self, now: Timestamp) {
        let reports = &mut self.reports;
        self.working.retain(|w| {
            let expires = w.tif == TimeInForce::Day && w.order_type != OrderType::Market;
            if expires {
                reports.push(BrokerReport::Expired { client_order_id: w.id.clone(), at: now });
            }
            !expires
        });
    }

    /// Matches working orders against a new bar of `session`; fills are stamped `at` (the
    /// bar's open). Outside the regular session only extended-hours orders are matched; while
    /// closed, none (see the module's doc).
    pub fn on_bar(&mut self, bar: &Bar, at: Timestamp, session: SessionPhase) {
        self.regular = session.is_regular();
        let mut i = 0;
        while i < self.working.len() {
            let waits = !self.regular && (session == SessionPhase::Closed || !self.working[i].extended_hours);
            if waits {
                i += 1;
                continue;
            }
            match match_bar(&mut self.working[i], bar) {
                Some(price) => {
                    let working = self.working.remove(i);
                    let fill = self.execute(&working, price, at);
                    self.reports.push(fill);
                }
                None => i += 1,
            }
        }
        self.matched = Some(self.working.len());
    }

    /// After the fills of the bar [`BarBroker::on_bar`] matched (and what the engine placed on
    /// them): the sell stops placed meanwhile fill at their stop where `bar` traded down to
    /// them (see the module's doc); whether any did. Once per bar: the orders placed later, on
    /// the bar's close, work from the next bar.
    pub fn stops_placed_in_bar(&mut self, bar: &Bar, at: Timestamp) -> bool {
        let Some(from) = self.matched.take() else { return false };
        if !self.regular {
            // No venue elects a stop outside the regular session (CONTRACT §12).
            return false;
        }
        let mut any = false;
        let mut i = from;
        while i < self.working.len() {
            let w = &self.working[i];
            let through = match (w.side, w.order_type, w.stop) {
                (Side::Sell, OrderType::Stop, Some(stop)) if bar.low.0 > 0 && bar.low <= stop => Some(stop),
                _ => None,
            };
            match through {
                Some(stop) => {
                    let working = self.working.remove(i);
                    let fill = self.execute(&working, stop, at);
                    self.reports.push(fill);
                    any = true;
                }
                None => i += 1,
            }
        }
        any
    }

    fn execute(&mut self, w: &Working, reference: Price, at: Timestamp) -> BrokerReport {
        let price = slipped(reference.to_decimal(), w.side, self.slippage, w.limit.map(Price::to_decimal));
        self.executions += 1;
        let fee = match self.commission_rate.is_zero() {
            true => Decimal::ZERO,
            false => self.commission_rate * price * Decimal::from(w.quantity),
        };
        self.scratch.clear();
        self.scratch.push_str("bt-x");
        crate::time::push_digits(&mut self.scratch, self.executions, 1);
        BrokerReport::Filled {
            client_order_id: w.id.clone(),
            execution: Execution {
                execution_id: self.scratch.as_str().into(),
                timestamp: at,
                quantity: w.quantity,
                price,
                fee,
            },
        }
    }
}

/// `price` moved `slippage` (a fraction) against `side`, on the tick, never past `limit`.
fn slipped(price: Decimal, side: Side, slippage: Decimal, limit: Option<Decimal>) -> Decimal {
    if slippage.is_zero() {
        return price;
    }
    let moved = match side {
        Side::Buy => price * (Decimal::ONE + slippage),
        Side::Sell => price * (Decimal::ONE - slippage),
    }
    .round_dp(4);
    match (side, limit) {
        (Side::Buy, Some(limit)) => moved.min(limit.max(price)),
        (Side::Sell, Some(limit)) => moved.max(limit.min(price)),
        _ => moved,
    }
}

/// The price `w` fills at within `bar`, if it does.
fn match_bar(w: &mut Working, bar: &Bar) -> Option<Price> {
    if let (Some(target), false) = (w.take_profit, w.triggered) {
        return take_profit_or_stop(w, target, bar);
    }
    let buy = w.side == Side::Buy;
    let limit_fill = |limit: Price| -> Option<Price> {
        if buy {
            (bar.low <= limit).then(|| bar.open.min(limit))
        } else {
            (bar.high >= limit).then(|| bar.open.max(limit))
        }
    };
    match w.order_type {
        OrderType::Market => Some(bar.open),
        OrderType::Limit => limit_fill(w.limit?),
        OrderType::Stop | OrderType::StopLimit if w.triggered => match w.limit {
            Some(limit) => limit_fill(limit),
            None => Some(bar.open),
        },
        OrderType::Stop | OrderType::StopLimit => {
            let fill = stop_in_bar(w.side, w.stop?, w.limit, bar)?;
            w.triggered = true;
            fill
        }
    }
}

/// A protective sell whose take-profit is `target`, working for all of `bar` (see the module's
/// doc): the take-profit at the open when the bar opens at or above it, else the stop when the
/// bar trades down to it, else the take-profit at the target when the bar's high reaches it. A
/// take-profit's fill is a limit's: slippage never takes it below the target.
fn take_profit_or_stop(w: &mut Working, target: Price, bar: &Bar) -> Option<Price> {
    if bar.open >= target {
        w.limit = Some(target);
        return Some(bar.open);
    }
    if let Some(fill) = stop_in_bar(w.side, w.stop?, w.limit, bar) {
        w.triggered = true;
        return fill;
    }
    if bar.high >= target {
        w.limit = Some(target);
        return Some(target);
    }
    None
}

/// A stop (`limit` `None`) or stop-limit order working for all of `bar`: `None` when the bar does
/// not reach the stop; else triggered, filling at the stop, or the open when the bar opened past
/// it — within the limit; when it opened past the limit too (the trigger was its first trade), at
/// the limit if the bar came back to it (`Some(None)`: triggered, no fill). The paper broker fills
/// a stop-limit triggered within a bar by the same rule, so live and backtest agree.
pub fn stop_in_bar(side: Side, stop: Price, limit: Option<Price>, bar: &Bar) -> Option<Option<Price>> {
    let buy = side == Side::Buy;
    let (touched, at) = if buy {
        (bar.high >= stop, bar.open.max(stop))
    } else {
        (bar.low.0 > 0 && bar.low <= stop, bar.open.min(stop))
    };
    if !touched {
        return None;
    }
    Some(match limit {
        None => Some(at),
        Some(limit) if (buy && at <= limit) || (!buy && at >= limit) => Some(at),
        // Gapped through the limit: fills only if the bar came back to it.
        Some(limit) => {
            if buy {
                (bar.low <= limit).then_some(limit)
            } else {
                (bar.high >= limit).then_some(limit)
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::orders::OrderStatus;
    use crate::symbol::Symbol;
    use chrono::TimeZone;

    fn px(text: &str) -> Price {
        Price::from_decimal(text.parse().unwrap()).unwrap()
    }

    fn bar(minute: i64, o: &str, h: &str, l: &str, c: &str) -> Bar {
        let start = chrono::Utc.with_ymd_and_hms(2026, 3, 2, 15, 0, 0).unwrap() + chrono::Duration::minutes(minute);
        Bar { start, open: px(o), high: px(h), low: px(l), close: px(c), volume: 1000 }
    }

    fn order(side: Side, kind: OrderType, limit: Option<&str>, stop: Option<&str>) -> Order {
        let id = ClientOrderId::parse("t-1").unwrap();
        let d = |s: Option<&str>| s.map(|s| s.parse().unwrap());
        let at = bar(0, "1", "1", "1", "1").start;
        let mut o =
            Order::new(id, Symbol::parse("ABC").unwrap(), side, kind, TimeInForce::Day, 100, d(limit), d(stop), at);
        o.status = OrderStatus::New;
        o
    }

    // Each call with the reports it made.
    fn submit(b: &mut BarBroker, order: &Order, bar: &Bar, now: Timestamp) -> Vec<BrokerReport> {
        b.submit(order, bar, now);
        b.take_reports().collect()
    }

    fn on_bar(b: &mut BarBroker, bar: &Bar, at: Timestamp) -> Vec<BrokerReport> {
        b.on_bar(bar, at, SessionPhase::Regular);
        b.take_reports().collect()
    }

    fn expire(b: &mut BarBroker, now: Timestamp) -> Vec<BrokerReport> {
        b.expire_day_orders(now);
        b.take_reports().collect()
    }

    fn filled_at(reports: &[BrokerReport]) -> Option<(Decimal, Decimal, Timestamp)> {
        reports.iter().find_map(|r| match r {
            BrokerReport::Filled { execution, .. } => Some((execution.price, execution.fee, execution.timestamp)),
            _ => None,
        })
    }

    #[test]
    fn outside_the_regular_session_a_stop_waits_and_an_extended_hours_limit_fills() {
        let decided = bar(0, "10", "10", "10", "10");
        let mut b = BarBroker::new(FillModel::NextOpen, Decimal::ZERO, Decimal::ZERO);
        let stop = order(Side::Sell, OrderType::Stop, None, Some("9.50"));
        submit(&mut b, &stop, &decided, decided.start);
        let mut limit = order(Side::Sell, OrderType::Limit, Some("9.40"), None);
        limit.client_order_id = ClientOrderId::parse("t-2").unwrap();
        limit.extended_hours = true;
        submit(&mut b, &limit, &decided, decided.start);
        let mut market = order(Side::Buy, OrderType::Market, None, None);
        market.client_order_id = ClientOrderId::parse("t-3").unwrap();
        submit(&mut b, &market, &decided, decided.start);
        let fills = |reports: Vec<BrokerReport>| -> Vec<(String, Decimal)> {
            reports
                .into_iter()
                .filter_map(|r| match r {
                    BrokerReport::Filled { client_order_id, execution } => {
                        Some((client_order_id.to_string(), execution.price))
                    }
                    _ => None,
                })
                .collect()
        };
        let d = |s: &str| s.parse::<Decimal>().unwrap();
        // A 07:00 bar through the stop: only the extended-hours limit fills.
        let early = bar(1, "9.60", "9.60", "9.00", "9.10");
        b.on_bar(&early, early.start, SessionPhase::PreMarket);
        assert_eq!(fills(b.take_reports().collect()), vec![("t-2".to_string(), d("9.60"))]);
        assert!(!b.stops_placed_in_bar(&early, early.start), "no stop elected in the pre-market");
        // While closed nothing fills.
        b.on_bar(&early, early.start, SessionPhase::Closed);
        assert!(b.take_reports().next().is_none());
        // The regular session: the market order at the open, the stop elected by the gap.
        let open = bar(2, "9.20", "9.30", "9.10", "9.20");
        b.on_bar(&open, open.start, SessionPhase::Regular);
        assert_eq!(
            fills(b.take_reports().collect()),
            vec![("t-1".to_string(), d("9.20")), ("t-3".to_string(), d("9.20"))]
        );
    }

    #[test]
    fn market_orders_fill_at_the_next_open_or_the_close() {
        let decided = bar(0, "10", "10.5", "9.9", "10.2");
        let next = bar(1, "10.3", "10.4", "10.1", "10.2");
        let mut b = BarBroker::new(FillModel::NextOpen, Decimal::ZERO, Decimal::ZERO);
        let reports = submit(&mut b, &order(Side::Buy, OrderType::Market, None, None), &decided, next.start);
        assert!(matches!(reports.as_slice(), [BrokerReport::Accepted { .. }]));
        let (price, _, at) = filled_at(&on_bar(&mut b, &next, next.start)).unwrap();
        assert_eq!((price, at), ("10.3".parse().unwrap(), next.start));

        let mut b = BarBroker::new(FillModel::Close, Decimal::ZERO, Decimal::ZERO);
        let (price, ..) =
            filled_at(&submit(&mut b, &order(Side::Buy, OrderType::Market, None, None), &decided, next.start))
                .expect("CLOSE fills at once");
        assert_eq!(price, "10.2".parse().unwrap());
        assert!(!b.has_working());
    }

    #[test]
    fn slippage_and_commission_go_against_the_order() {
        let decided = bar(0, "10", "10", "10", "10");
        let next = bar(1, "20", "20", "20", "20");
        let mut b = BarBroker::new(FillModel::NextOpen, "0.001".parse().unwrap(), Decimal::from(50));
        submit(&mut b, &order(Side::Buy, OrderType::Market, None, None), &decided, next.start);
        let (price, fee, _) = filled_at(&on_bar(&mut b, &next, next.start)).unwrap();
        assert_eq!(price, "20.1".parse::<Decimal>().unwrap(), "50 bps above 20");
        assert_eq!(fee, "2.01".parse::<Decimal>().unwrap(), "0.1% of 100 × 20.10");
        let mut b = BarBroker::new(FillModel::NextOpen, Decimal::ZERO, Decimal::from(50));
        submit(&mut b, &order(Side::Sell, OrderType::Market, None, None), &decided, next.start);
        assert_eq!(filled_at(&on_bar(&mut b, &next, next.start)).unwrap().0, "19.9".parse::<Decimal>().unwrap());
    }

    #[test]
    fn stop_limit_buys_trigger_on_the_high_and_respect_the_limit() {
        let decided = bar(0, "10", "10", "10", "10");
        let mut b = BarBroker::new(FillModel::NextOpen, Decimal::ZERO, Decimal::ZERO);
        submit(&mut b, &order(Side::Buy, OrderType::StopLimit, Some("10.60"), Some("10.50")), &decided, decided.start);
        assert!(on_bar(&mut b, &bar(1, "10.1", "10.4", "10", "10.3"), decided.start).is_empty(), "high below the stop");
        let (price, ..) = filled_at(&on_bar(&mut b, &bar(2, "10.3", "10.8", "10.2", "10.7"), decided.start)).unwrap();
        assert_eq!(price, "10.5".parse().unwrap(), "fills at the stop when traded through");

        // Gap above the stop but within the limit: the open.
        submit(&mut b, &order(Side::Buy, OrderType::StopLimit, Some("10.60"), Some("10.50")), &decided, decided.start);
        assert_eq!(
            filled_at(&on_bar(&mut b, &bar(3, "10.55", "10.9", "10.5", "10.8"), decided.start)).unwrap().0,
            "10.55".parse().unwrap()
        );

        // Gap above the limit and never back: triggered, rests as a limit order, then fills.
        submit(&mut b, &order(Side::Buy, OrderType::StopLimit, Some("10.60"), Some("10.50")), &decided, decided.start);
        assert!(on_bar(&mut b, &bar(4, "11", "11.2", "10.9", "11.1"), decided.start).is_empty());
        assert_eq!(
            filled_at(&on_bar(&mut b, &bar(5, "10.7", "10.8", "10.4", "10.5"), decided.start)).unwrap().0,
            "10.6".parse().unwrap()
        );
    }

    #[test]
    fn day_orders_expire_but_market_orders_wait_for_the_next_bar() {
        let decided = bar(0, "10", "10", "10", "10");
        let mut b = BarBroker::new(FillModel::NextOpen, Decimal::ZERO, Decimal::ZERO);
        submit(&mut b, &order(Side::Buy, OrderType::StopLimit, Some("10.60"), Some("10.50")), &decided, decided.start);
        submit(&mut b, &order(Side::Sell, OrderType::Market, None, None), &decided, decided.start);
        let expired = expire(&mut b, decided.start);
        assert_eq!(expired.len(), 1);
        assert!(matches!(expired[0], BrokerReport::Expired { .. }));
        assert!(b.has_working(), "the market order still fills at the next open");
    }

    /// A protective sell: a GTC stop at 9.50, one-cancels-other with a take-profit at 10.50.
    fn oco(id: &str) -> Order {
        let mut o = order(Side::Sell, OrderType::Stop, None, Some("9.50"));
        o.client_order_id = ClientOrderId::parse(id).unwrap();
        o.time_in_force = TimeInForce::Gtc;
        o.legs = Some(crate::orders::ExitLegs {
            stop_price: "9.50".parse().unwrap(),
            stop_limit_price: None,
            take_profit: Some("10.50".parse().unwrap()),
        });
        o
    }

    #[test]
    fn a_take_profit_fills_as_a_limit_until_its_stop_is_elected_the_worse_first() {
        let decided = bar(0, "10", "10", "10", "10");
        let cases = [
            (bar(1, "10", "10.4", "9.6", "10"), None, "neither leg reached"),
            (bar(1, "10", "10.6", "9.6", "10.5"), Some("10.50"), "the high through the target: the target"),
            (bar(1, "10.7", "10.9", "10.6", "10.8"), Some("10.70"), "opened above the target: the open"),
            (bar(1, "10", "10.4", "9.4", "9.6"), Some("9.50"), "the low through the stop: the stop"),
            (bar(1, "10", "10.6", "9.4", "10"), Some("9.50"), "both reached: the stop, the worse"),
            (bar(1, "9.3", "10.6", "9.2", "10"), Some("9.30"), "opened below the stop: the open"),
        ];
        for (through, price, why) in cases {
            let mut b = BarBroker::new(FillModel::NextOpen, Decimal::ZERO, Decimal::ZERO);
            submit(&mut b, &oco("p-1"), &decided, decided.start);
            let filled = filled_at(&on_bar(&mut b, &through, through.start)).map(|f| f.0);
            assert_eq!(filled, price.map(|p| p.parse::<Decimal>().unwrap()), "{why}");
            assert_eq!(b.has_working(), price.is_none(), "{why}: one fill ends both legs");
        }
        // Slippage never takes the take-profit's fill below its target: it is a limit's.
        let mut b = BarBroker::new(FillModel::NextOpen, Decimal::ZERO, Decimal::from(50));
        submit(&mut b, &oco("p-1"), &decided, decided.start);
        let through = bar(1, "10", "10.6", "9.6", "10.5");
        assert_eq!(filled_at(&on_bar(&mut b, &through, through.start)).unwrap().0, "10.5".parse().unwrap());
    }

    /// A stop placed on a fill within a bar, after a working order of the bar was cancelled (a
    /// take-profit filled, the rest's stop replaced at breakeven): the new stop is the one
    /// matched against the rest of the bar.
    #[test]
    fn a_stop_replaced_within_a_bar_rests_for_the_rest_of_it() {
        let decided = bar(0, "10", "10", "10", "10");
        let mut b = BarBroker::new(FillModel::NextOpen, Decimal::ZERO, Decimal::ZERO);
        let mut old = order(Side::Sell, OrderType::Stop, None, Some("9.50"));
        old.client_order_id = ClientOrderId::parse("p-2").unwrap();
        submit(&mut b, &oco("p-1"), &decided, decided.start);
        submit(&mut b, &old, &decided, decided.start);
        let through = bar(1, "10", "10.6", "9.9", "10.2");
        assert_eq!(filled_at(&on_bar(&mut b, &through, through.start)).unwrap().0, "10.5".parse().unwrap());
        b.cancel(&old.client_order_id, through.start);
        let mut breakeven = order(Side::Sell, OrderType::Stop, None, Some("10"));
        breakeven.client_order_id = ClientOrderId::parse("p-3").unwrap();
        submit(&mut b, &breakeven, &decided, through.start);
        b.take_reports().for_each(drop);
        assert!(b.stops_placed_in_bar(&through, through.start), "the bar's low 9.90 is below the new stop");
        assert_eq!(filled_at(&b.take_reports().collect::<Vec<_>>()).unwrap().0, "10".parse().unwrap());
    }
}
