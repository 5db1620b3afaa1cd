//! Completed trades (CONTRACT §4 "Trades"): one round trip — flat → position → flat — of one
//! symbol, built from fills. The same builder serves live and paper trading (fed the orders and
//! executions the database holds) and backtests (fed the engine's effects), so a trade looks the
//! same wherever it came from.
//!
//! A trade's row and timeline come from its orders; `features` (market state at entry) and the
//! excursions of its `outcomes` come from the bars around it ([`enrich`]).

use crate::bars::{day_gain, SessionRunning};
use crate::engine::LIQUIDATION_REASON;
use crate::market::{decimal_to_f64, Bar, Price, Side};
use crate::orders::{ClientOrderId, Execution, Order, OrderStatus};
use crate::symbol::Symbol;
use crate::time::Timestamp;
use rust_decimal::prelude::ToPrimitive;
use rust_decimal::Decimal;
use serde::Serialize;
use std::collections::BTreeMap;

/// `winner_loser_label` (CONTRACT §3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Label {
    Winner,
    Loser,
    Breakeven,
}

impl Label {
    /// `|net_pnl|` below `breakeven_threshold` is `BREAKEVEN`.
    pub fn of(net_pnl: Decimal, breakeven_threshold: Decimal) -> Label {
        if net_pnl.abs() < breakeven_threshold {
            Label::Breakeven
        } else if net_pnl > Decimal::ZERO {
            Label::Winner
        } else {
            Label::Loser
        }
    }
}

/// One entry of a trade's timeline.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TradeEvent {
    #[serde(with = "crate::time::serde_ts")]
    #[cfg_attr(feature = "openapi", schema(value_type = String, format = DateTime))]
    pub timestamp: Timestamp,
    /// `ORDER_SUBMITTED`, `FILL`, `ORDER_CANCELED`, `ORDER_REJECTED`, `ORDER_EXPIRED`, or an
    /// operator action (`OPERATOR_<ACTION>`).
    pub kind: String,
    pub detail: String,
}

/// Why the trade entered or exited, in words.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Explanation {
    /// The strategy rule that fired (`FIRST_PULLBACK_BREAKOUT`, `STOP_LOSS`, …) or the operator
    /// action (`MANUAL_ORDER`, `MANUAL_CLOSE`, `EMERGENCY_HALT`), or `END_OF_DATA` for a
    /// backtest's final close.
    pub rule: String,
    pub text: String,
}

/// Market state when the trade's entry was decided (CONTRACT §4 deep dive): the bars completed
/// by the entry order's submission, read with the definitions the strategy decided on
/// ([`crate::bars::SessionRunning`], [`crate::bars::day_gain`]), so a strategy entry's features
/// are the numbers its reason quotes.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Features {
    /// The last price when the entry was decided (the close of the last completed minute bar;
    /// the average entry price when none had completed), dollars.
    pub price: f64,
    /// Gain versus the previous close, percent.
    pub percentage_gain: Option<f64>,
    pub relative_volume: Option<f64>,
    /// Shares in the float.
    pub float: Option<u64>,
    /// Change over the last completed minute before the decision, percent.
    pub change_1m: Option<f64>,
    /// Change over the last five completed minutes before the decision, percent.
    pub change_5m: Option<f64>,
    /// Minutes from the 09:30 regular open (negative in pre-market).
    pub minutes_since_open: i64,
    pub sector: Option<String>,
    /// How far below the session's high the price was, percent of the high (0 at a new high).
    pub distance_from_high_pct: Option<f64>,
    /// How far above (positive) or below the session's VWAP (from the 09:30 open) the price
    /// was, percent of VWAP.
    pub distance_from_vwap_pct: Option<f64>,
}

/// How the trade turned out.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Outcomes {
    /// Net P&L over the entry value, fraction (0.05 = +5%).
    pub return_pct: f64,
    /// Net P&L over the dollars put at risk by the entry's stop; null when the entry had no stop.
    pub r_multiple: Option<f64>,
    pub hold_seconds: i64,
    /// Maximum favourable excursion: the best price reached while open over the entry price,
    /// fraction (≥ 0); null when no bars cover the trade.
    pub mfe: Option<f64>,
    /// Maximum adverse excursion: the worst price reached while open below the entry price,
    /// fraction (≥ 0, a magnitude).
    pub mae: Option<f64>,
    /// The rule of the order that made the position flat (see [`Explanation::rule`]).
    pub exit_reason: String,
}

/// A completed round trip with its deep dive.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Trade {
    /// `<SYMBOL>-<entry time, UTC, yyyymmddThhmmss>`: stable across rebuilds.
    pub trade_id: String,
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub symbol: Symbol,
    /// The strategy of the entry order; null for a trade opened by hand.
    pub strategy_id: Option<String>,
    #[serde(with = "crate::time::serde_ts")]
    #[cfg_attr(feature = "openapi", schema(value_type = String, format = DateTime))]
    pub entry_time: Timestamp,
    #[serde(with = "crate::time::serde_ts")]
    #[cfg_attr(feature = "openapi", schema(value_type = String, format = DateTime))]
    pub exit_time: Timestamp,
    /// Sells minus buys, dollars, before fees.
    #[serde(with = "rust_decimal::serde::float")]
    #[cfg_attr(feature = "openapi", schema(value_type = f64))]
    pub gross_pnl: Decimal,
    #[serde(with = "rust_decimal::serde::float")]
    #[cfg_attr(feature = "openapi", schema(value_type = f64))]
    pub net_pnl: Decimal,
    pub winner_loser_label: Label,
    /// Most shares held at once.
    pub quantity: u64,
    /// Average price of every buy, dollars.
    #[serde(with = "rust_decimal::serde::float")]
    #[cfg_attr(feature = "openapi", schema(value_type = f64))]
    pub entry_price: Decimal,
    /// Average price of every sell, dollars.
    #[serde(with = "rust_decimal::serde::float")]
    #[cfg_attr(feature = "openapi", schema(value_type = f64))]
    pub exit_price: Decimal,
    #[serde(with = "rust_decimal::serde::float")]
    #[cfg_attr(feature = "openapi", schema(value_type = f64))]
    pub fees: Decimal,
    /// `PAPER`, `LIVE`, `DEMO`, or `BACKTEST`.
    pub mode: String,
    #[serde(skip)]
    pub detail: TradeDetail,
}

/// The deep-dive groups besides the row.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TradeDetail {
    pub events: Vec<TradeEvent>,
    pub features: Option<Features>,
    pub outcomes: Outcomes,
    pub explanations: Vec<Explanation>,
    /// Dollars at risk per share at entry (entry price minus the strategy's stop), when known.
    pub risk_per_share: Option<Decimal>,
    /// When the entry was decided: the entry order's submission (a strategy decides on the bar
    /// that just completed). The features at entry are the market of that instant.
    pub decided_at: Option<Timestamp>,
}

/// The rule and sentence an order carries in its `reason`: a strategy order's reason is
/// `RULE: sentence`; operator orders are named by what made them.
pub fn explain(order: &Order) -> Explanation {
    let reason = order.reason.as_deref().unwrap_or_default();
    // The stop the engine holds outside the regular session, a strategy's or a bracket's
    // (CONTRACT §12): a stop-out either way.
    if let Some(text) = reason.strip_prefix("STOP_LOSS: ") {
        return Explanation { rule: "STOP_LOSS".to_string(), text: text.to_string() };
    }
    if order.strategy_id.is_some() {
        if let Some((rule, text)) = reason.split_once(": ") {
            return Explanation { rule: rule.to_string(), text: text.to_string() };
        }
    }
    let rule = if reason == LIQUIDATION_REASON {
        "EMERGENCY_HALT"
    } else if reason.starts_with("manual close") {
        "MANUAL_CLOSE"
    } else if reason == END_OF_DATA_REASON {
        "END_OF_DATA"
    } else {
        "MANUAL_ORDER"
    };
    let side = if order.side == Side::Buy { "Bought" } else { "Sold" };
    let text = match (rule, reason.is_empty()) {
        ("EMERGENCY_HALT", _) => "Closed by the emergency liquidation and halt.".to_string(),
        ("MANUAL_CLOSE", _) => format!("An operator closed the position ({reason})."),
        ("END_OF_DATA", _) => "The backtest closed the open position at the last bar's close.".to_string(),
        (_, true) => format!("{side} by an operator's order."),
        (_, false) => format!("{side} by an operator's order: {reason}."),
    };
    Explanation { rule: rule.to_string(), text }
}

/// The exit a protective order made (CONTRACT §11): `STOP_LOSS` or `TAKE_PROFIT`, by the leg
/// its fill at `price` was.
pub fn explain_protective(order: &Order, price: Decimal) -> Explanation {
    let rule = order.protective_leg(price);
    let levels = order.legs;
    let text = match (rule, levels) {
        ("TAKE_PROFIT", Some(l)) => {
            format!("The take-profit at {} resting at the broker filled.", l.take_profit.unwrap_or(price).normalize())
        }
        (_, Some(l)) => format!("The stop at {} resting at the broker filled.", l.stop_price.normalize()),
        _ => "The protective order at the broker filled.".to_string(),
    };
    Explanation { rule: rule.to_string(), text }
}

/// The reason of the sell a backtest places to close what is open after the last bar.
pub const END_OF_DATA_REASON: &str = "end of backtest data";

struct OpenTrade {
    strategy_id: Option<std::sync::Arc<str>>,
    entry_time: Timestamp,
    decided_at: Timestamp,
    position: u64,
    max_position: u64,
    bought: u64,
    sold: u64,
    buy_value: Decimal,
    sell_value: Decimal,
    fees: Decimal,
    events: Vec<TradeEvent>,
    explanations: Vec<Explanation>,
    exit_reason: String,
    risk_per_share: Option<Decimal>,
}

/// Builds trades from fills in time order.
pub struct TradeBuilder {
    mode: String,
    breakeven_threshold: Decimal,
    /// Whether trades get their events timeline (see [`TradeBuilder::without_timeline`]).
    timeline: bool,
    open: BTreeMap<Symbol, OpenTrade>,
    /// Executions already applied, per working order (orders are observed as whole snapshots):
    /// a short list, searched from its end (the order observed last is usually asked again).
    seen: Vec<(ClientOrderId, usize)>,
    /// The entry stop a strategy named for each symbol's working entry (for the R multiple).
    entry_stops: BTreeMap<Symbol, Decimal>,
}

impl TradeBuilder {
    pub fn new(mode: &str, breakeven_threshold: Decimal) -> TradeBuilder {
        TradeBuilder {
            mode: mode.to_string(),
            breakeven_threshold,
            timeline: true,
            open: BTreeMap::new(),
            seen: Vec::new(),
            entry_stops: BTreeMap::new(),
        }
    }

    /// Builds the trades without their events timeline (`detail.events` stays empty); rows,
    /// outcomes and explanations are the same. For backtests: a stored run keeps trade rows
    /// (CONTRACT §4), and writing a timeline sentence for every order of millions of bars is
    /// most of what their orders cost.
    pub fn without_timeline(mut self) -> TradeBuilder {
        self.timeline = false;
        self
    }

    /// Whether a round trip of `symbol` is in progress.
    pub fn is_open(&self, symbol: &Symbol) -> bool {
        self.open.contains_key(symbol)
    }

    /// The stop-loss price the strategy set for its next entry of `symbol`.
    pub fn entry_stop(&mut self, symbol: &Symbol, stop_loss: Decimal) {
        self.entry_stops.insert(symbol.clone(), stop_loss);
    }

    /// An event of `symbol`'s timeline (an operator action); kept when a trade is open.
    pub fn note(&mut self, symbol: &Symbol, timestamp: Timestamp, kind: &str, detail: String) {
        self.record(symbol, timestamp, kind, || detail);
    }

    /// Adds an event to `symbol`'s open trade, its detail written only when it is kept (a
    /// trade is open and the builder keeps timelines).
    fn record(&mut self, symbol: &Symbol, timestamp: Timestamp, kind: &str, detail: impl FnOnce() -> String) {
        if !self.timeline {
            return;
        }
        if let Some(open) = self.open.get_mut(symbol) {
            open.events.push(TradeEvent { timestamp, kind: kind.to_string(), detail: detail() });
        }
    }

    /// Observes an order snapshot: applies executions not seen before, and records its
    /// submission and its end in the open trade's timeline. Returns the trade it completed: an
    /// order is of one side, so its fills end at most one round trip (a sell past flat is not a
    /// trade).
    pub fn order(&mut self, order: &Order) -> Option<Trade> {
        let at = self.seen.iter().rposition(|(id, _)| *id == order.client_order_id);
        let seen = at.map(|i| self.seen[i].1);
        let mut done = None;
        if seen.is_none() {
            self.record(&order.symbol, order.created_at, "ORDER_SUBMITTED", || describe(order));
        }
        let from = seen.unwrap_or(0);
        for execution in order.executions.iter().skip(from) {
            if let Some(trade) = self.fill(order, execution) {
                done = Some(trade);
            }
        }
        if order.status.is_final() {
            if let Some(i) = at {
                self.seen.swap_remove(i);
            }
            let kind = match order.status {
                OrderStatus::Canceled => Some("ORDER_CANCELED"),
                OrderStatus::Rejected => Some("ORDER_REJECTED"),
                OrderStatus::Expired => Some("ORDER_EXPIRED"),
                _ => None,
            };
            if let Some(kind) = kind {
                self.record(&order.symbol, order.updated_at, kind, || {
                    format!(
                        "{} {} {} {}: {} of {} filled{}",
                        order.client_order_id,
                        order.side.as_str(),
                        order.quantity,
                        order.symbol,
                        order.filled_quantity,
                        order.quantity,
                        order.reject_reason.as_ref().map(|r| format!(" ({r})")).unwrap_or_default()
                    )
                });
            }
        } else if let Some(i) = at {
            self.seen[i].1 = order.executions.len();
        } else {
            self.seen.push((order.client_order_id.clone(), order.executions.len()));
        }
        done
    }

    fn fill(&mut self, order: &Order, execution: &Execution) -> Option<Trade> {
        let symbol = &order.symbol;
        if !self.open.contains_key(symbol) {
            if order.side == Side::Sell {
                // A sell with nothing open here: a position from before what was observed.
                return None;
            }
            let explanation = explain(order);
            let risk =
                self.entry_stops.remove(symbol).map(|stop| execution.price - stop).filter(|r| *r > Decimal::ZERO);
            let submitted = self.timeline.then(|| TradeEvent {
                timestamp: order.created_at,
                kind: "ORDER_SUBMITTED".into(),
                detail: describe(order),
            });
            self.open.insert(
                symbol.clone(),
                OpenTrade {
                    strategy_id: order.strategy_id.clone(),
                    entry_time: execution.timestamp,
                    decided_at: order.created_at,
                    position: 0,
                    max_position: 0,
                    bought: 0,
                    sold: 0,
                    buy_value: Decimal::ZERO,
                    sell_value: Decimal::ZERO,
                    fees: Decimal::ZERO,
                    events: submitted.into_iter().collect(),
                    explanations: vec![explanation],
                    exit_reason: String::new(),
                    risk_per_share: risk,
                },
            );
        }
        let open = self.open.get_mut(symbol).expect("opened above");
        let value = execution.price * Decimal::from(execution.quantity);
        open.fees += execution.fee;
        let verb = match order.side {
            Side::Buy => {
                open.position += execution.quantity;
                open.bought += execution.quantity;
                open.buy_value += value;
                open.max_position = open.max_position.max(open.position);
                "bought"
            }
            Side::Sell => {
                let quantity = execution.quantity.min(open.position);
                open.position -= quantity;
                open.sold += quantity;
                open.sell_value += execution.price * Decimal::from(quantity);
                let explanation = match order.is_protective() {
                    true => explain_protective(order, execution.price),
                    false => explain(order),
                };
                open.exit_reason = explanation.rule.clone();
                if open.explanations.last() != Some(&explanation) {
                    open.explanations.push(explanation);
                }
                "sold"
            }
        };
        if self.timeline {
            open.events.push(TradeEvent {
                timestamp: execution.timestamp,
                kind: "FILL".into(),
                detail: format!(
                    "{verb} {} at {} (fee {}), {} held",
                    execution.quantity,
                    execution.price.normalize(),
                    execution.fee.normalize(),
                    open.position
                ),
            });
        }
        if open.position > 0 {
            return None;
        }
        let open = self.open.remove(symbol).expect("present");
        Some(self.finish(symbol, open, execution.timestamp))
    }

    fn finish(&self, symbol: &Symbol, open: OpenTrade, exit_time: Timestamp) -> Trade {
        let gross = open.sell_value - open.buy_value;
        let net = gross - open.fees;
        let entry_price = open.buy_value / Decimal::from(open.bought.max(1));
        let exit_price = open.sell_value / Decimal::from(open.sold.max(1));
        let r_multiple =
            open.risk_per_share.map(|r| r * Decimal::from(open.max_position)).and_then(|risk| (net / risk).to_f64());
        let outcomes = Outcomes {
            return_pct: if open.buy_value.is_zero() { 0.0 } else { (net / open.buy_value).to_f64().unwrap_or(0.0) },
            r_multiple,
            hold_seconds: (exit_time - open.entry_time).num_seconds(),
            mfe: None,
            mae: None,
            exit_reason: open.exit_reason,
        };
        Trade {
            trade_id: trade_id(symbol, &open.entry_time),
            symbol: symbol.clone(),
            strategy_id: open.strategy_id.as_deref().map(str::to_string),
            entry_time: open.entry_time,
            exit_time,
            gross_pnl: gross,
            net_pnl: net,
            winner_loser_label: Label::of(net, self.breakeven_threshold),
            quantity: open.max_position,
            entry_price: entry_price.round_dp(4).normalize(),
            exit_price: exit_price.round_dp(4).normalize(),
            fees: open.fees,
            mode: self.mode.clone(),
            detail: TradeDetail {
                events: open.events,
                features: None,
                outcomes,
                explanations: open.explanations,
                risk_per_share: open.risk_per_share,
                decided_at: Some(open.decided_at),
            },
        }
    }
}

/// `<SYMBOL>-<yyyymmddThhmmss>` of the entry, UTC.
fn trade_id(symbol: &Symbol, entry_time: &Timestamp) -> String {
    let mut id = String::with_capacity(32);
    id.push_str(symbol.as_str());
    id.push('-');
    crate::time::push_compact_utc(&mut id, entry_time, Some('T'));
    id
}

fn describe(order: &Order) -> String {
    let mut text = format!(
        "{} {} {} {} {}",
        order.client_order_id,
        order.side.as_str(),
        order.quantity,
        order.symbol,
        order.order_type.as_str()
    );
    use std::fmt::Write;
    if let Some(stop) = order.stop_price {
        let _ = write!(text, " stop {}", stop.normalize());
    }
    if let Some(limit) = order.limit_price {
        let _ = write!(text, " limit {}", limit.normalize());
    }
    if let Some(reason) = &order.reason {
        text.push_str(" — ");
        text.push_str(reason);
    }
    text
}

/// What [`enrich`] needs to know of the symbol besides its bars.
#[derive(Clone, Debug, Default)]
pub struct MarketContext {
    /// Previous regular-session close, dollars.
    pub prev_close: Option<Decimal>,
    pub float: Option<u64>,
    pub sector: Option<String>,
    /// Relative volume at entry, when the feed measured it.
    pub relative_volume: Option<f64>,
    /// The 09:30 regular open of the entry's date.
    pub regular_open: Timestamp,
}

/// Adds features at entry and the excursions to `trade` from 1-minute `bars` of the symbol
/// covering at least the entry's trading day up to the exit (oldest first; bars starting at or
/// after the exit are ignored).
pub fn enrich(trade: &mut Trade, bars: &[Bar], day_start: Timestamp, ctx: &MarketContext) {
    let from = bars.partition_point(|b| b.start < day_start);
    let to = bars.partition_point(|b| b.start + chrono::Duration::minutes(1) <= decided_at(trade)).max(from);
    let mut day = SessionRunning::default();
    for bar in &bars[from..to] {
        day.add(bar, in_session(bar, ctx.regular_open));
    }
    let first = to + bars[to..].partition_point(|b| b.start + chrono::Duration::minutes(1) <= trade.entry_time);
    let last = first + bars[first..].partition_point(|b| b.start < trade.exit_time);
    enrich_with(trade, bars, (from, to, first, last), (to > from).then_some(day), ctx);
}

/// When `trade`'s entry was decided: the market its features describe.
pub fn decided_at(trade: &Trade) -> Timestamp {
    trade.detail.decided_at.unwrap_or(trade.entry_time).min(trade.entry_time)
}

/// Whether a minute bar belongs to the regular session that opens at `regular_open`: it ends
/// at or after the open, as the strategy counts it (`minutes_since_open >= 0` at its close).
pub fn in_session(bar: &Bar, regular_open: Timestamp) -> bool {
    bar.start + chrono::Duration::minutes(1) >= regular_open
}

/// [`enrich`] with the trade's bars located: `bars[from..to]` completed by the entry's decision
/// since the start of its day, `before` their running values after `bars[to - 1]` (`None` if
/// none), and `bars[first..last]` the bars begun while the trade was open (the entry's bar
/// included).
pub fn enrich_with(
    trade: &mut Trade,
    bars: &[Bar],
    (from, to, first, last): (usize, usize, usize, usize),
    before: Option<SessionRunning>,
    ctx: &MarketContext,
) {
    let decided = decided_at(trade);
    let entry_price = decimal_to_f64(trade.entry_price);
    let pct = |from: f64, to: f64| (from > 0.0).then(|| (to - from) / from * 100.0);
    let close_back = |n: usize| (to - from).checked_sub(n + 1).map(|i| bars[from + i].close.to_f64());
    let last_close = (to > from).then(|| bars[to - 1].close);
    // The price the decision saw: the last completed bar's close (the strategy's `close`).
    let price = last_close.map_or(trade.entry_price, Price::to_decimal);
    let before = before.unwrap_or_default();
    let high = before.high().map(|h| h.to_f64().max(decimal_to_f64(price)));
    let percent = |fraction: Decimal| decimal_to_f64(fraction * Decimal::ONE_HUNDRED);
    trade.detail.features = Some(Features {
        price: decimal_to_f64(price),
        percentage_gain: ctx.prev_close.and_then(|p| day_gain(p, price)).map(percent),
        relative_volume: ctx.relative_volume,
        float: ctx.float,
        change_1m: close_back(1).zip(last_close).and_then(|(a, b)| pct(a, b.to_f64())),
        change_5m: close_back(5).zip(last_close).and_then(|(a, b)| pct(a, b.to_f64())),
        minutes_since_open: (decided - ctx.regular_open).num_minutes(),
        sector: ctx.sector.clone(),
        distance_from_high_pct: high.filter(|h| *h > 0.0).map(|h| (h - decimal_to_f64(price)) / h * 100.0),
        distance_from_vwap_pct: before.vwap().and_then(|w| day_gain(w, price)).map(percent),
    });
    // Excursions over the bars that began while the trade was open (the entry's bar included)
    // and the exit price itself: the extremes in ticks, converted once.
    let during = &bars[first..last];
    let high = during.iter().map(|b| b.high).max().map(Price::to_f64);
    let low = during.iter().map(|b| b.low).min().map(Price::to_f64);
    let exit_price = Some(decimal_to_f64(trade.exit_price));
    let extreme = |a: Option<f64>, b: Option<f64>, pick: fn(f64, f64) -> f64| match (a, b) {
        (Some(a), Some(b)) => Some(pick(a, b)),
        (a, b) => a.or(b),
    };
    let (best, worst) = (extreme(exit_price, high, f64::max), extreme(exit_price, low, f64::min));
    if entry_price > 0.0 {
        trade.detail.outcomes.mfe = best.map(|b| ((b - entry_price) / entry_price).max(0.0));
        trade.detail.outcomes.mae = worst.map(|w| ((entry_price - w) / entry_price).max(0.0));
    }
}

/// Orders and fills for tests of what is built from them, here and in the crates above
/// (`--features fixtures`).
#[cfg(any(test, feature = "fixtures"))]
pub mod fixtures {
    use crate::market::Side;
    use crate::orders::{ClientOrderId, Execution, Order, OrderEvent, OrderType, TimeInForce};
    use crate::symbol::Symbol;
    use crate::time::Timestamp;
    use chrono::TimeZone;
    use rust_decimal::Decimal;

    /// `minute` minutes after 15:00 UTC on Monday 2026-03-02.
    pub fn t(minute: i64) -> Timestamp {
        chrono::Utc.with_ymd_and_hms(2026, 3, 2, 15, 0, 0).unwrap() + chrono::Duration::minutes(minute)
    }

    pub fn d(text: &str) -> Decimal {
        text.parse().unwrap()
    }

    /// A market DAY order of ABC created at minute `at`, with its reason and strategy.
    pub fn order(id: &str, side: Side, quantity: u64, at: i64, reason: &str, strategy: Option<&str>) -> Order {
        let mut o = Order::new(
            ClientOrderId::parse(id).unwrap(),
            Symbol::parse("ABC").unwrap(),
            side,
            OrderType::Market,
            TimeInForce::Day,
            quantity,
            None,
            None,
            t(at),
        );
        o.reason = Some(reason.into());
        o.strategy_id = strategy.map(Into::into);
        o
    }

    /// A fill of `quantity` at `price` at minute `at`, with a fee of $0.50.
    pub fn fill(o: &mut Order, quantity: u64, price: &str, at: i64) {
        let n = o.executions.len();
        let execution = Execution {
            execution_id: format!("{}-x{n}", o.client_order_id).into(),
            timestamp: t(at),
            quantity,
            price: d(price),
            fee: d("0.5"),
        };
        o.apply(OrderEvent::Filled(execution), t(at)).unwrap();
    }
}

#[cfg(test)]
mod tests {
    use super::fixtures::{d, fill, order, t};
    use super::*;

    /// The day's VWAP is the volume-weighted average of (high + low + close) / 3, and its high
    /// the highest high, as the features quote them.
    #[test]
    fn day_running_values_match_hand_computation() {
        let bar = |h: &str, l: &str, c: &str, volume| {
            let p = |x: &str| Price::from_decimal(d(x)).unwrap();
            Bar { start: t(0), open: p(c), high: p(h), low: p(l), close: p(c), volume }
        };
        let mut day = SessionRunning::default();
        assert_eq!(day.vwap(), None);
        day.add(&bar("12", "8", "9", 1_000), false);
        assert_eq!((day.vwap(), day.high(), day.volume()), (None, None, 1_000), "pre-market counts only in volume");
        day.add(&bar("10.03", "9.97", "10", 100), true);
        day.add(&bar("11", "10", "10.5", 300), true);
        // (10 × 100 + 10.5 × 300) / 400
        assert_eq!(day.vwap(), Some(d("10.375")));
        assert_eq!((day.volume(), day.high()), (1_400, Some(Price::from_cents(1_100))));
    }

    /// An entry filled in two parts, a scale-out at the target, then an operator's close: one
    /// trade, with average prices over every fill.
    #[test]
    fn partial_fills_scale_outs_and_a_manual_close_make_one_trade() {
        let trade = scale_out_and_manual_close(TradeBuilder::new("PAPER", d("1")));
        let kinds: Vec<&str> = trade.detail.events.iter().map(|e| e.kind.as_str()).collect();
        assert_eq!(kinds, ["ORDER_SUBMITTED", "FILL", "FILL", "ORDER_SUBMITTED", "FILL", "ORDER_SUBMITTED", "FILL"]);
    }

    /// A backtest's builder makes the same trade — row, outcomes, explanations — without the
    /// events timeline.
    #[test]
    fn a_builder_without_timeline_makes_the_same_trade_without_events() {
        let with = scale_out_and_manual_close(TradeBuilder::new("PAPER", d("1")));
        let without = scale_out_and_manual_close(TradeBuilder::new("PAPER", d("1")).without_timeline());
        assert!(without.detail.events.is_empty());
        let events_dropped = Trade { detail: TradeDetail { events: Vec::new(), ..with.detail.clone() }, ..with };
        assert_eq!(without, events_dropped);
    }

    /// The trade of [`partial_fills_scale_outs_and_a_manual_close_make_one_trade`], its row,
    /// outcomes and explanations checked.
    fn scale_out_and_manual_close(mut b: TradeBuilder) -> Trade {
        let mut entry = order("e1", Side::Buy, 200, 0, "FIRST_PULLBACK_BREAKOUT: broke out above 5.10.", Some("mb"));
        entry.apply(crate::orders::OrderEvent::Accepted { broker_order_id: "b1".into() }, t(0)).unwrap();
        b.entry_stop(&entry.symbol, d("4.90"));
        assert!(b.order(&entry).is_none());
        fill(&mut entry, 120, "5.10", 1);
        assert!(b.order(&entry).is_none(), "120 held");
        fill(&mut entry, 80, "5.15", 2);
        assert!(b.order(&entry).is_none(), "200 held");
        let mut target = order("s1", Side::Sell, 100, 5, "TAKE_PROFIT: reached the 2R target 5.50.", Some("mb"));
        fill(&mut target, 100, "5.50", 6);
        assert!(b.order(&target).is_none(), "100 still held");
        let mut close = order("s2", Side::Sell, 100, 9, "manual close of 100 ABC", None);
        fill(&mut close, 100, "5.30", 10);
        let trade = b.order(&close).expect("the close completes the round trip");
        // Bought 120 × 5.10 + 80 × 5.15 = 1,024; sold 100 × 5.50 + 100 × 5.30 = 1,080; 4 fees of 0.50.
        assert_eq!((trade.quantity, trade.entry_price, trade.exit_price), (200, d("5.12"), d("5.4")));
        assert_eq!((trade.gross_pnl, trade.fees, trade.net_pnl), (d("56"), d("2"), d("54")));
        assert_eq!((trade.entry_time, trade.exit_time), (t(1), t(10)));
        assert_eq!(trade.winner_loser_label, Label::Winner);
        assert_eq!(trade.trade_id, "ABC-20260302T150100");
        let o = &trade.detail.outcomes;
        assert_eq!((o.exit_reason.as_str(), o.hold_seconds), ("MANUAL_CLOSE", 540));
        // Risk: (5.10 − 4.90) × 200 = 40 dollars; 54 / 40.
        assert_eq!(o.r_multiple, Some(1.35));
        assert!((o.return_pct - 54.0 / 1024.0).abs() < 1e-12);
        let rules: Vec<&str> = trade.detail.explanations.iter().map(|e| e.rule.as_str()).collect();
        assert_eq!(rules, ["FIRST_PULLBACK_BREAKOUT", "TAKE_PROFIT", "MANUAL_CLOSE"]);
        assert!(!b.is_open(&trade.symbol));
        trade
    }

    /// Flat → long → flat twice is two trades; a sell with nothing open is not a trade.
    #[test]
    fn each_round_trip_is_its_own_trade() {
        let mut b = TradeBuilder::new("LIVE", d("1"));
        let mut stray = order("s0", Side::Sell, 10, 0, "", None);
        fill(&mut stray, 10, "5", 0);
        assert!(b.order(&stray).is_none());
        let mut trades = Vec::new();
        for (i, exit) in [(0, "5.004"), (1, "4")] {
            let mut buy = order(&format!("b{i}"), Side::Buy, 100, 10 * i + 1, "", None);
            fill(&mut buy, 100, "5", 10 * i + 1);
            trades.extend(b.order(&buy));
            let mut sell = order(&format!("x{i}"), Side::Sell, 100, 10 * i + 2, "emergency liquidation", None);
            fill(&mut sell, 100, exit, 10 * i + 2);
            trades.extend(b.order(&sell));
        }
        assert_eq!(trades.len(), 2);
        assert_eq!(trades[0].net_pnl, d("-0.6"), "0.40 gross less two 0.50 fees");
        assert_eq!(trades[0].winner_loser_label, Label::Breakeven, "|−0.60| is under the 1.00 threshold");
        assert_eq!(trades[1].winner_loser_label, Label::Loser);
        assert_eq!(trades[1].detail.outcomes.exit_reason, "EMERGENCY_HALT");
        assert_eq!(trades[0].detail.explanations[0].rule, "MANUAL_ORDER");
        assert_eq!(trades[0].detail.outcomes.r_multiple, None, "no stop, no R");
        assert_eq!(trades[0].mode, "LIVE");
    }

    #[test]
    fn features_and_excursions_come_from_the_bars() {
        let bar = |minute: i64, low: &str, high: &str, close: &str, volume: u64| Bar {
            start: t(minute),
            open: crate::market::Price::from_decimal(d(close)).unwrap(),
            high: crate::market::Price::from_decimal(d(high)).unwrap(),
            low: crate::market::Price::from_decimal(d(low)).unwrap(),
            close: crate::market::Price::from_decimal(d(close)).unwrap(),
            volume,
        };
        // Six bars before the entry at minute 6, two while open.
        let bars = [
            bar(0, "9", "10", "10", 100),
            bar(1, "10", "11", "11", 100),
            bar(2, "10", "12", "11", 100),
            bar(3, "10", "11", "10", 100),
            bar(4, "10", "11", "10.5", 100),
            bar(5, "10", "11", "11", 100),
            bar(6, "10.5", "11.5", "11", 100),
            bar(7, "10", "13", "12", 100),
        ];
        let mut b = TradeBuilder::new("BACKTEST", d("1"));
        let mut buy = order("b", Side::Buy, 10, 6, "", None);
        fill(&mut buy, 10, "11", 6);
        b.order(&buy);
        let mut sell = order("s", Side::Sell, 10, 8, "", None);
        fill(&mut sell, 10, "12", 8);
        let mut trade = b.order(&sell).expect("the sell completes the trade");
        let ctx = MarketContext {
            prev_close: Some(d("10")),
            float: Some(5_000_000),
            sector: Some("Technology".into()),
            relative_volume: Some(4.5),
            regular_open: t(-30),
        };
        enrich(&mut trade, &bars, t(-600), &ctx);
        let f = trade.detail.features.clone().unwrap();
        assert_eq!((f.price, f.minutes_since_open, f.relative_volume), (11.0, 36, Some(4.5)));
        assert!((f.percentage_gain.unwrap() - 10.0).abs() < 1e-9);
        assert!((f.change_1m.unwrap() - (11.0 - 10.5) / 10.5 * 100.0).abs() < 1e-9);
        assert!((f.change_5m.unwrap() - (11.0 - 10.0) / 10.0 * 100.0).abs() < 1e-9, "{f:?}");
        assert!((f.distance_from_high_pct.unwrap() - (12.0 - 11.0) / 12.0 * 100.0).abs() < 1e-9);
        assert!(f.distance_from_vwap_pct.unwrap() > 0.0);
        let o = &trade.detail.outcomes;
        assert!((o.mfe.unwrap() - 2.0 / 11.0).abs() < 1e-12 && (o.mae.unwrap() - 1.0 / 11.0).abs() < 1e-12, "{o:?}");
    }
}
