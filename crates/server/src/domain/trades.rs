//! Completed trades of live and paper trading (`GET /api/trades`), built from what the database
//! holds — every order with its executions — by the same `TradeBuilder` backtests use, so they
//! survive any restart and never disagree with the orders. Features at entry and excursions come
//! from the data broker's minute bars around each trade; operator actions on the symbol while
//! the trade was open come from the audit log. The list is rebuilt only when orders or
//! executions changed, and a trade's features and excursions are fetched once, not at every
//! rebuild.

use crate::domain::settings::SettingsService;
use crate::domain::DomainResult;
use chrono::NaiveDate;
use rust_decimal::Decimal;
use serde_json::value::RawValue;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use tradeops_brokers::MarketData;
use tradeops_core::calendar::{ny_instant, MarketCalendar, NyDay};
use tradeops_core::market::{Side, Timeframe};
use tradeops_core::orders::{Order, OrderStatus};
use tradeops_core::trades::{enrich, MarketContext, Trade, TradeBuilder, TradeEvent};
use tradeops_core::{Symbol, Timestamp};
use tradeops_store::{AuditFilter, AuditRepository, TradingRepository};

/// The store's change counter of orders and executions: what a build depends on.
type OrdersVersion = i64;

/// Completed trades of one build, each with its list row serialised once: a list request copies
/// the rows it returns instead of serialising every trade again.
pub struct CompletedTrades {
    /// Oldest exit first.
    pub trades: Vec<Trade>,
    /// [`trade_row`] of each trade, as JSON text.
    rows: Vec<Arc<RawValue>>,
}

impl CompletedTrades {
    fn new(trades: Vec<Trade>) -> CompletedTrades {
        let rows = trades
            .iter()
            .map(|t| Arc::from(serde_json::value::to_raw_value(&trade_row(t)).expect("a JSON value serialises")))
            .collect();
        CompletedTrades { trades, rows }
    }

    /// The rows of the trades `filter` keeps, newest exit first.
    pub fn rows(&self, filter: &TradeFilter<'_>) -> Vec<Arc<RawValue>> {
        self.trades.iter().zip(&self.rows).rev().filter(|(t, _)| filter.matches(t)).map(|(_, r)| r.clone()).collect()
    }
}

/// The last build, by the orders' version; and each trade's market detail, kept across builds so
/// a new order does not fetch the bars of every earlier trade again.
#[derive(Default)]
pub struct TradeCache {
    /// With the breakeven threshold its labels were given by (a setting).
    built: Mutex<Option<(OrdersVersion, Decimal, Arc<CompletedTrades>)>>,
    /// Held while building: requests that find the build stale wait for the one build in
    /// progress instead of each rebuilding every trade at once.
    building: tokio::sync::Mutex<()>,
    /// By (mode, trade id): the trade as built from its orders, and the same trade with its
    /// features and excursions. Reused while the built trade is unchanged.
    detailed: Mutex<BTreeMap<(String, String), (Trade, Trade)>>,
}

impl TradeCache {
    fn detailed(&self, built: &Trade) -> Option<Trade> {
        let detailed = self.detailed.lock().unwrap_or_else(|e| e.into_inner());
        detailed.get(&(built.mode.clone(), built.trade_id.clone())).filter(|(b, _)| b == built).map(|(_, d)| d.clone())
    }

    /// The last build when it is of `version` or later (the counter only moves forward) and
    /// labelled with `breakeven`.
    fn built_since(&self, version: OrdersVersion, breakeven: Decimal) -> Option<Arc<CompletedTrades>> {
        let built = self.built.lock().unwrap_or_else(|e| e.into_inner());
        built.as_ref().filter(|(v, b, _)| *v >= version && *b == breakeven).map(|(_, _, trades)| trades.clone())
    }
}

/// A trade row (CONTRACT §4): the seed's columns plus `quantity`, `entry_price`, `exit_price`,
/// `fees`, `mode`, and the headline outcomes.
pub fn trade_row(t: &Trade) -> Value {
    let mut row = serde_json::to_value(t).unwrap_or(Value::Null);
    if let Value::Object(fields) = &mut row {
        let o = &t.detail.outcomes;
        fields.insert("return_pct".into(), json!(o.return_pct));
        fields.insert("r_multiple".into(), json!(o.r_multiple));
        fields.insert("hold_seconds".into(), json!(o.hold_seconds));
        fields.insert("exit_reason".into(), json!(o.exit_reason));
    }
    row
}

/// The deep dive: `trade`, `events`, `features`, `outcomes`, `explanations`.
pub fn trade_detail(t: &Trade) -> Value {
    json!({
        "trade": trade_row(t),
        "events": t.detail.events,
        "features": t.detail.features,
        "outcomes": t.detail.outcomes,
        "explanations": t.detail.explanations,
    })
}

/// Completed trades over what they are built from, passed in: the stored orders, the audit log
/// (operator actions), the data broker (features and excursions), the settings (breakeven,
/// calendar) and the cache of the last build.
pub struct TradesService<'a> {
    pub orders: &'a dyn TradingRepository,
    pub audit: &'a dyn AuditRepository,
    pub market: &'a dyn MarketData,
    pub settings: &'a SettingsService,
    pub cache: &'a TradeCache,
}

impl TradesService<'_> {
    /// Every completed trade, oldest exit first: the last build while no order or execution was
    /// written since, else a new one.
    pub async fn completed(&self) -> DomainResult<Arc<CompletedTrades>> {
        let repo = self.orders;
        let settings = self.settings.current();
        let breakeven = settings.analytics.breakeven_threshold;
        let version = repo.orders_version().await?;
        if let Some(trades) = self.cache.built_since(version, breakeven) {
            return Ok(trades);
        }
        let _building = self.cache.building.lock().await;
        // Built meanwhile by the request this one waited for.
        if let Some(trades) = self.cache.built_since(version, breakeven) {
            return Ok(trades);
        }
        let orders = repo.all_orders().await?;
        let mut trades = build(&orders, breakeven);
        let calendar = MarketCalendar::new(settings.runtime.market_calendar);
        let mut kept = BTreeMap::new();
        for trade in &mut trades {
            let built = trade.clone();
            match self.cache.detailed(&built) {
                Some(detailed) => *trade = detailed,
                // A trade whose bars could not be fetched is shown without them, and tried again at
                // the next build.
                None if !add_market_detail(self, trade, calendar).await => continue,
                None => {}
            }
            kept.insert((built.mode.clone(), built.trade_id.clone()), (built, trade.clone()));
        }
        // Only the trades of this build: the map never outgrows the trade list.
        *self.cache.detailed.lock().unwrap_or_else(|e| e.into_inner()) = kept;
        add_operator_actions(self, &mut trades).await?;
        let trades = Arc::new(CompletedTrades::new(trades));
        *self.cache.built.lock().unwrap_or_else(|e| e.into_inner()) = Some((version, breakeven, trades.clone()));
        Ok(trades)
    }
}

/// Replays every order's life — submission, each execution, its end — in time order through a
/// builder per mode (paper and live are different accounts).
pub fn build(orders: &[(Order, String)], breakeven_threshold: Decimal) -> Vec<Trade> {
    // (when, sequence, order index, executions seen, final)
    let mut steps = Vec::new();
    for (i, (order, _)) in orders.iter().enumerate() {
        steps.push((order.created_at, 0usize, i, 0usize, false));
        for (k, e) in order.executions.iter().enumerate() {
            steps.push((e.timestamp, 1, i, k + 1, false));
        }
        if order.status.is_final() {
            steps.push((order.updated_at.max(order.created_at), 2, i, order.executions.len(), true));
        }
    }
    steps.sort_by_key(|s| (s.0, s.2, s.1, s.3));
    let mut builders: BTreeMap<&str, TradeBuilder> = BTreeMap::new();
    let mut trades = Vec::new();
    // Steps of one instant: the database's order of them is not the order they happened in (a
    // fill and an exit sent in the same millisecond of a market clock, or by two terms). Long
    // only, a sell fills against shares held: a sell's fill found with nothing open waits, with
    // the rest of its order's steps of that instant, until the instant's buy fills of the same
    // symbol and account are replayed. Anywhere else the order is the sort's.
    let mut at = 0;
    while at < steps.len() {
        let instant = steps[at].0;
        let end = at + steps[at..].iter().take_while(|s| s.0 == instant).count();
        let mut waiting: Vec<usize> = Vec::new();
        for k in at..end {
            let (_, kind, i, _, _) = steps[k];
            let (order, mode) = &orders[i];
            let waits = waiting.iter().any(|&w| steps[w].2 == i)
                || (kind == 1
                    && order.side == Side::Sell
                    && !builders.get(mode.as_str()).is_some_and(|b| b.is_open(&order.symbol))
                    && steps[k + 1..end].iter().any(|s| {
                        let (other, other_mode) = &orders[s.2];
                        s.1 == 1 && other.side == Side::Buy && other.symbol == order.symbol && other_mode == mode
                    }));
            if waits {
                waiting.push(k);
            } else {
                trades.extend(replay(&mut builders, orders, steps[k], breakeven_threshold));
            }
        }
        for k in waiting {
            trades.extend(replay(&mut builders, orders, steps[k], breakeven_threshold));
        }
        at = end;
    }
    trades.sort_by(|a, b| (a.exit_time, &a.trade_id).cmp(&(b.exit_time, &b.trade_id)));
    trades
}

/// One step of [`build`]: the order as it stood after `seen` of its executions (its end when
/// `last`), observed by its account's builder; the trade it completed.
fn replay<'a>(
    builders: &mut BTreeMap<&'a str, TradeBuilder>,
    orders: &'a [(Order, String)],
    (_, _, i, seen, last): (Timestamp, usize, usize, usize, bool),
    breakeven_threshold: Decimal,
) -> Option<Trade> {
    let (order, mode) = &orders[i];
    let builder = builders.entry(mode.as_str()).or_insert_with(|| TradeBuilder::new(mode, breakeven_threshold));
    let mut snapshot = order.clone();
    snapshot.executions.truncate(seen);
    if !last {
        snapshot.status = if seen == 0 { OrderStatus::New } else { OrderStatus::PartiallyFilled };
    }
    if seen == 0 && !last {
        if let Some(stop) = order.stop_loss {
            builder.entry_stop(&order.symbol, stop);
        }
    }
    builder.order(&snapshot)
}

/// Features at entry and excursions from the data broker's minute bars of the entry's day;
/// `false` when the bars could not be fetched (the features then come from what else is known).
/// The features are the market of the entry's decision, with the relative volume the strategy
/// was given then: the same history over the day's volume by that minute.
async fn add_market_detail(service: &TradesService<'_>, trade: &mut Trade, calendar: MarketCalendar) -> bool {
    let decided = tradeops_core::trades::decided_at(trade);
    let date = NyDay::default().date_of(decided);
    let day_start = ny_instant(date, (0, 0));
    let end = trade.exit_time + chrono::Duration::minutes(1);
    let fetched = service.market.bars(&trade.symbol, Timeframe::Minute, day_start, end).await;
    if let Err(e) = &fetched {
        tracing::warn!(trade_id = %trade.trade_id, error = %e, "no bars for a trade's features and excursions");
    }
    let complete = fetched.is_ok();
    let bars = fetched.unwrap_or_default();
    let instrument = service.market.instrument(&trade.symbol);
    let mut history = service.market.history(&trade.symbol, calendar);
    let minute = (decided - day_start).num_minutes().max(0) as u32;
    let volume: u64 =
        bars.iter().take_while(|b| b.start + chrono::Duration::minutes(1) <= decided).map(|b| b.volume).sum();
    let ctx = MarketContext {
        prev_close: history.as_mut().and_then(|h| h.prev_close(date)),
        // The market source's instrument carries the imported reference data where imported.
        float: instrument.as_ref().and_then(|i| i.float),
        sector: instrument.as_ref().and_then(|i| i.sector.clone()),
        relative_volume: history.as_mut().and_then(|h| h.relative_volume(date, minute, volume)),
        regular_open: ny_instant(date, (9, 30)),
    };
    enrich(trade, &bars, day_start, &ctx);
    complete
}

/// Audited actions whose effect the timeline already shows as an order of its own.
const SHOWN_AS_ORDERS: &[&str] = &["position.close", "order.create", "order.cancel"];

/// Operator actions on each trade's symbol while it was open (from the audit log: halts, stops,
/// blocks — closes already show as their orders) join its timeline, which is then put in time
/// order. Audit rows and trades both carry market time, in DEMO too.
async fn add_operator_actions(service: &TradesService<'_>, trades: &mut [Trade]) -> DomainResult<()> {
    let symbols: std::collections::BTreeSet<Symbol> = trades.iter().map(|t| t.symbol.clone()).collect();
    for symbol in symbols {
        let entries = audit_of(service, &symbol).await?;
        for trade in trades.iter_mut().filter(|t| t.symbol == symbol) {
            for e in entries.iter().filter(|e| !SHOWN_AS_ORDERS.contains(&e.action.as_str())) {
                let at = tradeops_core::time::from_epoch_ms(e.ts);
                if at >= trade.entry_time && at <= trade.exit_time {
                    trade.detail.events.push(TradeEvent {
                        timestamp: at,
                        kind: format!("OPERATOR_{}", e.action.to_uppercase().replace(['.', '/'], "_")),
                        detail: format!("{} ({}) {}", e.actor, e.role.as_deref().unwrap_or("-"), e.action),
                    });
                }
            }
            trade.detail.events.sort_by_key(|e| e.timestamp);
        }
    }
    Ok(())
}

/// Every successful audited action on a symbol, page by page: a trade keeps its operator
/// actions however long the log grows.
async fn audit_of(service: &TradesService<'_>, symbol: &Symbol) -> DomainResult<Vec<tradeops_store::AuditEntry>> {
    const PAGE: u32 = 500;
    let mut filter =
        AuditFilter { outcome: Some("OK".into()), target: Some(symbol.to_string()), limit: PAGE, ..Default::default() };
    let mut entries = Vec::new();
    loop {
        let page = service.audit.list_audit(&filter).await?;
        let (count, last) = (page.len(), page.last().map(|r| r.audit_id));
        entries.extend(page.into_iter().map(|r| r.entry));
        match last {
            Some(id) if count == PAGE as usize => filter.before_id = Some(id),
            _ => return Ok(entries),
        }
    }
}

/// `GET /api/trades` filters.
pub struct TradeFilter<'a> {
    /// Entered on a New York date: that date's instants [start, end), found once per request
    /// rather than converting every trade's entry time to New York time.
    entered: Option<(Timestamp, Timestamp)>,
    strategy_id: Option<&'a str>,
    symbol: Option<&'a Symbol>,
}

impl<'a> TradeFilter<'a> {
    /// Trades entered on `date` (New York), of `strategy_id` (`manual`: opened by hand), of
    /// `symbol`; each `None` keeps every trade.
    pub fn new(date: Option<NaiveDate>, strategy_id: Option<&'a str>, symbol: Option<&'a Symbol>) -> Self {
        let entered = date.map(|d| (ny_instant(d, (0, 0)), ny_instant(d + chrono::Duration::days(1), (0, 0))));
        TradeFilter { entered, strategy_id, symbol }
    }

    pub fn matches(&self, t: &Trade) -> bool {
        self.entered.is_none_or(|(start, end)| t.entry_time >= start && t.entry_time < end)
            && self.strategy_id.is_none_or(|s| t.strategy_id.as_deref().unwrap_or("manual") == s)
            && self.symbol.is_none_or(|s| t.symbol == *s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tradeops_core::market::Side;
    use tradeops_core::orders::OrderEvent;
    use tradeops_core::trades::fixtures::{d, fill, order, t};
    use tradeops_core::trades::Label;

    /// A trade's market detail is reused only for the same trade as built from its orders: a
    /// later fill that changes it (or another account's trade of the same id) is fetched anew.
    #[test]
    fn market_detail_is_reused_only_for_an_unchanged_trade() {
        let mut buy = order("b1", Side::Buy, 100, 0, "manual order", None);
        fill(&mut buy, 100, "5", 0);
        let mut sell = order("s1", Side::Sell, 100, 5, "manual close of 100 ABC", None);
        fill(&mut sell, 100, "5.5", 5);
        let stored = vec![(buy, "PAPER".to_string()), (sell, "PAPER".to_string())];
        let built = build(&stored, d("1")).remove(0);
        let mut detailed = built.clone();
        detailed.detail.outcomes.mfe = Some(0.25);
        let cache = TradeCache::default();
        assert_eq!(cache.detailed(&built), None);
        cache
            .detailed
            .lock()
            .unwrap()
            .insert((built.mode.clone(), built.trade_id.clone()), (built.clone(), detailed.clone()));
        assert_eq!(cache.detailed(&built), Some(detailed));
        let changed = Trade { fees: d("2"), ..built.clone() };
        assert_eq!(cache.detailed(&changed), None, "a changed trade is enriched again");
        let live = Trade { mode: "LIVE".into(), ..built };
        assert_eq!(cache.detailed(&live), None, "another account's trade");
    }

    /// An entry filled and an exit sent and filled in the same millisecond (a market clock
    /// standing still, or an exit an earlier term sent and a new one recorded), the exit
    /// listed first by the database (its id sorts first): the exit is replayed after the
    /// entry's fill it sold, and the round trip is one trade. A sell of shares held from
    /// before still comes first, as it happened.
    #[test]
    fn an_exit_filled_in_the_instant_of_its_entry_is_replayed_after_it() {
        let mut buy = order("to-ABC-2-1", Side::Buy, 5, 0, "manual order", None);
        fill(&mut buy, 5, "5", 1);
        let mut sell = order("to-ABC-1-999", Side::Sell, 5, 1, "emergency halt", None);
        fill(&mut sell, 5, "5.5", 1);
        let stored = vec![(sell, "PAPER".to_string()), (buy, "PAPER".to_string())];
        let trades = build(&stored, d("1"));
        assert_eq!(trades.len(), 1, "{trades:?}");
        assert_eq!((trades[0].quantity, trades[0].entry_price, trades[0].exit_price), (5, d("5"), d("5.5")));

        // Held from before: 5 bought at minute 0, sold and bought again at minute 1.
        let mut first = order("to-ABC-0-1", Side::Buy, 5, 0, "manual order", None);
        fill(&mut first, 5, "4", 0);
        let mut again = order("to-ABC-2-1", Side::Buy, 5, 1, "manual order", None);
        fill(&mut again, 5, "5", 1);
        let mut close = order("to-ABC-1-999", Side::Sell, 5, 1, "manual close", None);
        fill(&mut close, 5, "4.5", 1);
        let stored = vec![(first, "PAPER".to_string()), (close, "PAPER".to_string()), (again, "PAPER".to_string())];
        let trades = build(&stored, d("1"));
        assert_eq!(trades.len(), 1, "the first round trip closed; the second is open: {trades:?}");
        assert_eq!((trades[0].entry_price, trades[0].exit_price), (d("4"), d("4.5")));
    }

    /// Orders as the database holds them — final, with every execution — replayed in time
    /// order: an entry filled in two parts then cancelled, a scale-out, and an operator's close
    /// filled in two parts make one PAPER trade; a LIVE round trip in between is its own trade
    /// (another account), listed first as it ended first.
    #[test]
    fn stored_orders_with_partial_fills_scale_outs_and_a_manual_close_replay_into_trades() {
        let mb = Some("momentum_breakout");
        let mut entry = order("e1", Side::Buy, 300, 0, "FIRST_PULLBACK_BREAKOUT: broke out above 5.10.", mb);
        entry.stop_loss = Some(d("4.90"));
        fill(&mut entry, 120, "5.10", 1);
        fill(&mut entry, 80, "5.15", 2);
        entry.apply(OrderEvent::Canceled, t(3)).unwrap();
        let mut target = order("s1", Side::Sell, 100, 5, "TAKE_PROFIT: reached the 2R target 5.50.", mb);
        fill(&mut target, 100, "5.50", 6);
        let mut close = order("s2", Side::Sell, 100, 9, "manual close of 100 ABC", None);
        fill(&mut close, 60, "5.30", 10);
        fill(&mut close, 40, "5.30", 11);
        let mut live_buy = order("l1", Side::Buy, 50, 4, "manual order", None);
        fill(&mut live_buy, 50, "6", 4);
        let mut live_sell = order("l2", Side::Sell, 50, 7, "manual close of 50 ABC", None);
        fill(&mut live_sell, 50, "6.5", 8);
        // The database lists orders by id, not by time.
        let stored: Vec<(Order, String)> =
            [(close, "PAPER"), (live_sell, "LIVE"), (entry, "PAPER"), (target, "PAPER"), (live_buy, "LIVE")]
                .into_iter()
                .map(|(o, mode)| (o, mode.to_string()))
                .collect();

        let trades = build(&stored, d("1"));
        assert_eq!(trades.len(), 2, "{trades:#?}");
        let (live, paper) = (&trades[0], &trades[1]);
        assert_eq!((live.mode.as_str(), live.quantity, live.gross_pnl, live.fees), ("LIVE", 50, d("25"), d("1")));
        assert_eq!((live.entry_time, live.exit_time), (t(4), t(8)));

        assert_eq!(paper.mode, "PAPER");
        // Bought 120 × 5.10 + 80 × 5.15 = 1,024 (the other 100 cancelled); sold 100 × 5.50 and
        // 100 × 5.30 = 1,080; five fills of 0.50.
        assert_eq!((paper.quantity, paper.entry_price, paper.exit_price), (200, d("5.12"), d("5.4")));
        assert_eq!((paper.gross_pnl, paper.fees, paper.net_pnl), (d("56"), d("2.5"), d("53.5")));
        assert_eq!((paper.entry_time, paper.exit_time), (t(1), t(11)));
        assert_eq!(paper.winner_loser_label, Label::Winner);
        assert_eq!(paper.strategy_id.as_deref(), Some("momentum_breakout"));
        let o = &paper.detail.outcomes;
        assert_eq!((o.exit_reason.as_str(), o.hold_seconds), ("MANUAL_CLOSE", 600));
        // Risk: (5.10 − 4.90) × 200 = 40 dollars; 53.5 / 40.
        assert_eq!(o.r_multiple, Some(1.3375));
        let kinds: Vec<&str> = paper.detail.events.iter().map(|e| e.kind.as_str()).collect();
        assert_eq!(
            kinds,
            [
                "ORDER_SUBMITTED",
                "FILL",
                "FILL",
                "ORDER_CANCELED",
                "ORDER_SUBMITTED",
                "FILL",
                "ORDER_SUBMITTED",
                "FILL",
                "FILL"
            ]
        );
        let rules: Vec<&str> = paper.detail.explanations.iter().map(|e| e.rule.as_str()).collect();
        assert_eq!(rules, ["FIRST_PULLBACK_BREAKOUT", "TAKE_PROFIT", "MANUAL_CLOSE"]);
    }
}
