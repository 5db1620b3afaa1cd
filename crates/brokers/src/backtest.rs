//! The backtests' bar broker behind [`ExecutionBroker`]: [`BarExecution`] wraps the pure fill
//! model [`BarBroker`] of `tradeops-core` (which `tradeops_core::backtest::run` drives directly,
//! synchronously, at full speed) so that any caller holding an `Arc<dyn ExecutionBroker>` can
//! trade against bars. Bars come in through [`ExecutionBroker::on_market`] (the update's bar,
//! matched at `update.at`, its open); an order is decided on the last bar given; acceptances of
//! `submit` and the results of `cancel` are delivered by the next `poll`.

use crate::execution::{BrokerError, ExecutionBroker, MarketUpdate};
use async_trait::async_trait;
use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard};
use tradeops_core::backtest::fills::BarBroker;
use tradeops_core::broker::{BrokerLookup, BrokerOpenOrder, BrokerReport};
use tradeops_core::market::Bar;
use tradeops_core::orders::{ClientOrderId, Order};
use tradeops_core::time::Timestamp;

struct Book {
    broker: BarBroker,
    /// The last bar given: the bar orders are decided on (a `CLOSE` fill fills at its close).
    bar: Option<Bar>,
    /// Every order taken, and whether it is still working (no partial fills: one fill ends it).
    orders: BTreeMap<ClientOrderId, bool>,
    /// Reports of `submit` and `cancel`, delivered by `poll`.
    pending: Vec<BrokerReport>,
}

impl Book {
    /// Takes the bar broker's reports, noting which orders they end.
    fn take(&mut self) -> Vec<BrokerReport> {
        let reports: Vec<_> = self.broker.take_reports().collect();
        for report in &reports {
            let ends = matches!(
                report,
                BrokerReport::Filled { .. }
                    | BrokerReport::Canceled { .. }
                    | BrokerReport::Expired { .. }
                    | BrokerReport::Rejected { .. }
            );
            if ends {
                self.orders.insert(report.client_order_id().clone(), false);
            }
        }
        reports
    }
}

/// The bar broker as an execution venue.
pub struct BarExecution {
    book: Mutex<Book>,
}

impl BarExecution {
    pub fn new(broker: BarBroker) -> Self {
        BarExecution { book: Mutex::new(Book { broker, bar: None, orders: BTreeMap::new(), pending: Vec::new() }) }
    }

    fn book(&self) -> MutexGuard<'_, Book> {
        self.book.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[async_trait]
impl ExecutionBroker for BarExecution {
    fn name(&self) -> &'static str {
        "backtest"
    }

    /// Refused before the first bar: there is no bar to decide the order on.
    async fn submit(&self, order: &Order, now: Timestamp) -> Result<(), BrokerError> {
        let mut book = self.book();
        let Some(bar) = book.bar else {
            return Err(BrokerError::rejected("the backtest broker has been given no bar yet"));
        };
        book.orders.insert(order.client_order_id.clone(), true);
        book.broker.submit(order, &bar, now);
        let reports = book.take();
        book.pending.extend(reports);
        Ok(())
    }

    async fn cancel(&self, id: &ClientOrderId, now: Timestamp) -> Result<(), BrokerError> {
        let mut book = self.book();
        book.broker.cancel(id, now);
        let reports = book.take();
        book.pending.extend(reports);
        Ok(())
    }

    async fn lookup(&self, id: &ClientOrderId) -> Result<BrokerLookup, BrokerError> {
        Ok(match self.book().orders.get(id) {
            None => BrokerLookup::Unknown,
            Some(true) => BrokerLookup::Open(BrokerOpenOrder { client_order_id: id.clone(), cancel_pending: false }),
            Some(false) => BrokerLookup::Closed,
        })
    }

    async fn open_orders(&self) -> Result<Vec<BrokerOpenOrder>, BrokerError> {
        let book = self.book();
        let open = book.orders.iter().filter(|(_, working)| **working);
        Ok(open.map(|(id, _)| BrokerOpenOrder { client_order_id: id.clone(), cancel_pending: false }).collect())
    }

    async fn poll(&self, _now: Timestamp) -> Vec<BrokerReport> {
        std::mem::take(&mut self.book().pending)
    }

    /// A bar (the update's, when it has one) is matched at `update.at` and becomes the bar
    /// orders are decided on. The reports still pending come first.
    async fn on_market(&self, update: &MarketUpdate<'_>) -> Vec<BrokerReport> {
        let mut book = self.book();
        let mut reports = std::mem::take(&mut book.pending);
        if let Some(bar) = update.bar {
            book.broker.on_bar(bar, update.at, update.session);
            book.bar = Some(*bar);
            reports.extend(book.take());
        }
        reports
    }

    async fn expire_day_orders(&self, now: Timestamp) -> Vec<BrokerReport> {
        let mut book = self.book();
        let mut reports = std::mem::take(&mut book.pending);
        book.broker.expire_day_orders(now);
        reports.extend(book.take());
        reports
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{Duration, TimeZone, Utc};
    use rust_decimal::Decimal;
    use tradeops_core::backtest::fills::FillModel;
    use tradeops_core::market::{Price, Quote, Side};
    use tradeops_core::orders::{OrderType, TimeInForce};
    use tradeops_core::symbol::Symbol;

    fn t(minutes: i64) -> Timestamp {
        Utc.with_ymd_and_hms(2026, 3, 2, 14, 30, 0).single().expect("valid") + Duration::minutes(minutes)
    }

    fn px(cents: i64) -> Price {
        Price::from_cents(cents)
    }

    fn bar(minute: i64, open: i64, high: i64, low: i64, close: i64) -> Bar {
        Bar { start: t(minute), open: px(open), high: px(high), low: px(low), close: px(close), volume: 5_000 }
    }

    fn order(
        id: &str,
        side: Side,
        order_type: OrderType,
        tif: TimeInForce,
        limit: Option<i64>,
        stop: Option<i64>,
    ) -> Order {
        Order::new(
            ClientOrderId::parse(id).expect("valid"),
            Symbol::parse("ABCD").expect("valid"),
            side,
            order_type,
            tif,
            100,
            limit.map(|c| Decimal::new(c, 2)),
            stop.map(|c| Decimal::new(c, 2)),
            t(0),
        )
    }

    /// What happens on one bar: the bar, then the orders decided on it and the cancels.
    enum Step {
        Bar(Bar),
        Submit(Box<Order>),
        Cancel(&'static str),
        Expire(Timestamp),
    }

    fn session() -> Vec<Step> {
        use OrderType::*;
        use Side::*;
        use TimeInForce::*;
        vec![
            Step::Bar(bar(0, 1000, 1010, 995, 1005)),
            Step::Submit(Box::new(order("mkt-buy", Buy, Market, Day, None, None))),
            Step::Submit(Box::new(order("lmt-buy", Buy, Limit, Day, Some(990), None))),
            Step::Submit(Box::new(order("stop-sell", Sell, Stop, Gtc, None, Some(985)))),
            Step::Submit(Box::new(order("stop-limit-buy", Buy, StopLimit, Day, Some(1030), Some(1020)))),
            Step::Submit(Box::new(order("lmt-sell", Sell, Limit, Day, Some(1100), None))),
            Step::Bar(bar(1, 1004, 1025, 988, 1020)),
            Step::Cancel("lmt-sell"),
            Step::Cancel("never-sent"),
            Step::Submit(Box::new(order("late-lmt", Buy, Limit, Day, Some(900), None))),
            Step::Bar(bar(2, 1019, 1019, 980, 982)),
            Step::Expire(t(3)),
            Step::Bar(bar(3, 981, 990, 970, 975)),
        ]
    }

    /// The reports of the session from the bar broker driven directly, as the backtest does.
    fn direct(fill: FillModel, slippage_bps: Decimal) -> Vec<BrokerReport> {
        let mut broker = BarBroker::new(fill, Decimal::new(1, 4), slippage_bps);
        let mut reports = Vec::new();
        let mut last = None;
        for step in session() {
            match step {
                Step::Bar(b) => {
                    broker.on_bar(&b, b.start, tradeops_core::calendar::SessionPhase::Regular);
                    last = Some(b);
                }
                Step::Submit(o) => broker.submit(&o, last.as_ref().expect("a bar first"), last.expect("bar").start),
                Step::Cancel(id) => broker.cancel(&ClientOrderId::parse(id).expect("valid"), t(1)),
                Step::Expire(at) => broker.expire_day_orders(at),
            }
            reports.extend(broker.take_reports());
        }
        reports
    }

    /// The same session through the trait.
    async fn through_the_trait(fill: FillModel, slippage_bps: Decimal) -> Vec<BrokerReport> {
        let venue: Box<dyn ExecutionBroker> =
            Box::new(BarExecution::new(BarBroker::new(fill, Decimal::new(1, 4), slippage_bps)));
        let symbol = Symbol::parse("ABCD").expect("valid");
        let quote = Quote { bid: px(0), ask: px(0), bid_size: 0, ask_size: 0 };
        let mut reports = Vec::new();
        let mut last: Option<Bar> = None;
        for step in session() {
            match step {
                Step::Bar(b) => {
                    let update = MarketUpdate {
                        symbol: &symbol,
                        at: b.start,
                        last: b.close,
                        quote,
                        bar: Some(&b),
                        halted: false,
                        session: tradeops_core::calendar::SessionPhase::Regular,
                    };
                    reports.extend(venue.on_market(&update).await);
                    last = Some(b);
                }
                Step::Submit(o) => venue.submit(&o, last.expect("a bar first").start).await.expect("taken"),
                Step::Cancel(id) => venue.cancel(&ClientOrderId::parse(id).expect("valid"), t(1)).await.expect("sent"),
                Step::Expire(at) => reports.extend(venue.expire_day_orders(at).await),
            }
            reports.extend(venue.poll(t(10)).await);
        }
        reports
    }

    #[tokio::test]
    async fn the_trait_fills_a_session_exactly_as_the_bar_broker_does() {
        for (fill, slippage) in [
            (FillModel::NextOpen, Decimal::ZERO),
            (FillModel::Close, Decimal::ZERO),
            (FillModel::NextOpen, Decimal::new(25, 0)),
        ] {
            let expected = direct(fill, slippage);
            assert!(expected.iter().filter(|r| matches!(r, BrokerReport::Filled { .. })).count() >= 3, "{expected:?}");
            assert!(expected.iter().any(|r| matches!(r, BrokerReport::Expired { .. })), "{expected:?}");
            assert!(expected.iter().any(|r| matches!(r, BrokerReport::CancelRejected { .. })), "{expected:?}");
            assert_eq!(through_the_trait(fill, slippage).await, expected, "{fill:?} at {slippage} bps");
        }
    }

    #[tokio::test]
    async fn it_knows_its_orders_and_refuses_one_before_any_bar() {
        let venue = BarExecution::new(BarBroker::new(FillModel::NextOpen, Decimal::ZERO, Decimal::ZERO));
        let early = order("early", Side::Buy, OrderType::Market, TimeInForce::Day, None, None);
        assert!(matches!(venue.submit(&early, t(0)).await, Err(BrokerError::Rejected { .. })));
        assert_eq!(venue.lookup(&early.client_order_id).await, Ok(BrokerLookup::Unknown));
        let symbol = Symbol::parse("ABCD").expect("valid");
        let quote = Quote { bid: px(0), ask: px(0), bid_size: 0, ask_size: 0 };
        let first = bar(0, 1000, 1010, 995, 1005);
        venue
            .on_market(&MarketUpdate {
                symbol: &symbol,
                at: t(0),
                last: px(1005),
                quote,
                bar: Some(&first),
                halted: false,
                session: tradeops_core::calendar::SessionPhase::Regular,
            })
            .await;
        let resting = order("resting", Side::Buy, OrderType::Limit, TimeInForce::Gtc, Some(500), None);
        venue.submit(&resting, t(0)).await.expect("taken");
        let open = BrokerOpenOrder { client_order_id: resting.client_order_id.clone(), cancel_pending: false };
        assert_eq!(venue.open_orders().await, Ok(vec![open.clone()]));
        assert_eq!(venue.lookup(&resting.client_order_id).await, Ok(BrokerLookup::Open(open)));
        venue.cancel(&resting.client_order_id, t(0)).await.expect("sent");
        let reports = venue.poll(t(0)).await;
        assert!(matches!(&reports[..], [BrokerReport::Accepted { .. }, BrokerReport::Canceled { .. }]), "{reports:?}");
        assert_eq!(venue.lookup(&resting.client_order_id).await, Ok(BrokerLookup::Closed));
    }
}
