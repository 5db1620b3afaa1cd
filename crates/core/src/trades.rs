//! Completed trades (CONTRACT §4 "Trades"): one round trip — flat → position → flat — of one
//! symbol, built from fills. The same builder serves live and paper trading (fed the orders and
//! executions the database holds) and backtests (fed the engine's effects), so a trade looks the
//! same wherever it came from.
//!
//! A trade's row and timeline come from its orders; `features` (market state at entry) and the
//! excursions of its `outcomes` come from the bars around it ([`enrich`]).

use crate::engine::LIQUIDATION_REASON;
use crate::market::{Bar, Side};
use crate::orders::{ClientOrderId, Execution, Order, OrderStatus};
use crate::symbol::Symbol;
use crate::time::Timestamp;
use rust_decimal::prelude::ToPrimitive;
use rust_decimal::Decimal;
use serde::Serialize;
use std::collections::BTreeMap;

/// `winner_loser_label` (CONTRACT §3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, utoipa::ToSchema)]
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
#[derive(Clone, Debug, PartialEq, Serialize, utoipa::ToSchema)]
pub struct TradeEvent {
    #[serde(with = "crate::time::serde_ts")]
    #[schema(value_type = String, format = DateTime)]
    pub timestamp: Timestamp,
    /// `ORDER_SUBMITTED`, `FILL`, `ORDER_CANCELED`, `ORDER_REJECTED`, `ORDER_EXPIRED`, or an
    /// operator action (`OPERATOR_<ACTION>`).
    pub kind: String,
    pub detail: String,
}

/// Why the trade entered or exited, in words.
#[derive(Clone, Debug, PartialEq, Serialize, utoipa::ToSchema)]
pub struct Explanation {
    /// The strategy rule that fired (`FIRST_PULLBACK_BREAKOUT`, `STOP_LOSS`, …) or the operator
    /// action (`MANUAL_ORDER`, `MANUAL_CLOSE`, `EMERGENCY_HALT`), or `END_OF_DATA` for a
    /// backtest's final close.
    pub rule: String,
    pub text: String,
}

/// Market state when the trade entered (CONTRACT §4 deep dive).
#[derive(Clone, Debug, Default, PartialEq, Serialize, utoipa::ToSchema)]
pub struct Features {
    /// Average entry price, dollars.
    pub price: f64,
    /// Gain versus the previous close, percent.
    pub percentage_gain: Option<f64>,
    pub relative_volume: Option<f64>,
    /// Shares in the float.
    pub float: Option<u64>,
    /// Change over the last completed minute before entry, percent.
    pub change_1m: Option<f64>,
    /// Change over the last five completed minutes before entry, percent.
    pub change_5m: Option<f64>,
    /// Minutes from the 09:30 regular open (negative in pre-market).
    pub minutes_since_open: i64,
    pub sector: Option<String>,
    /// How far below the day's high the entry was, percent of the high (0 at a new high).
    pub distance_from_high_pct: Option<f64>,
    /// How far above (positive) or below the day's VWAP the entry was, percent of VWAP.
    pub distance_from_vwap_pct: Option<f64>,
}

/// How the trade turned out.
#[derive(Clone, Debug, Default, PartialEq, Serialize, utoipa::ToSchema)]
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
#[derive(Clone, Debug, PartialEq, Serialize, utoipa::ToSchema)]
pub struct Trade {
    /// `<SYMBOL>-<entry time, UTC, yyyymmddThhmmss>`: stable across rebuilds.
    pub trade_id: String,
    #[schema(value_type = String)]
    pub symbol: Symbol,
    /// The strategy of the entry order; null for a trade opened by hand.
    pub strategy_id: Option<String>,
    #[serde(with = "crate::time::serde_ts")]
    #[schema(value_type = String, format = DateTime)]
    pub entry_time: Timestamp,
    #[serde(with = "crate::time::serde_ts")]
    #[schema(value_type = String, format = DateTime)]
    pub exit_time: Timestamp,
    /// Sells minus buys, dollars, before fees.
    #[serde(with = "rust_decimal::serde::float")]
    #[schema(value_type = f64)]
    pub gross_pnl: Decimal,
    #[serde(with = "rust_decimal::serde::float")]
    #[schema(value_type = f64)]
    pub net_pnl: Decimal,
    pub winner_loser_label: Label,
    /// Most shares held at once.
    pub quantity: u64,
    /// Average price of every buy, dollars.
    #[serde(with = "rust_decimal::serde::float")]
    #[schema(value_type = f64)]
    pub entry_price: Decimal,
    /// Average price of every sell, dollars.
    #[serde(with = "rust_decimal::serde::float")]
    #[schema(value_type = f64)]
    pub exit_price: Decimal,
    #[serde(with = "rust_decimal::serde::float")]
    #[schema(value_type = f64)]
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
}

/// The rule and sentence an order carries in its `reason`: a strategy order's reason is
/// `RULE: sentence`; operator orders are named by what made them.
pub fn explain(order: &Order) -> Explanation {
    let reason = order.reason.clone().unwrap_or_default();
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

/// The reason of the sell a backtest places to close what is open after the last bar.
pub const END_OF_DATA_REASON: &str = "end of backtest data";

struct OpenTrade {
    strategy_id: Option<String>,
    entry_time: Timestamp,
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
    open: BTreeMap<Symbol, OpenTrade>,
    /// Executions already applied, per order (orders are observed as whole snapshots).
    seen: BTreeMap<ClientOrderId, usize>,
    /// The entry stop a strategy named for each symbol's working entry (for the R multiple).
    entry_stops: BTreeMap<Symbol, Decimal>,
}

impl TradeBuilder {
    pub fn new(mode: &str, breakeven_threshold: Decimal) -> TradeBuilder {
        TradeBuilder {
            mode: mode.to_string(),
            breakeven_threshold,
            open: BTreeMap::new(),
            seen: BTreeMap::new(),
            entry_stops: BTreeMap::new(),
        }
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
        if let Some(open) = self.open.get_mut(symbol) {
            open.events.push(TradeEvent { timestamp, kind: kind.to_string(), detail });
        }
    }

    /// Observes an order snapshot: applies executions not seen before, and records its
    /// submission and its end in the open trade's timeline. Returns the trades it completed.
    pub fn order(&mut self, order: &Order) -> Vec<Trade> {
        let seen = self.seen.get(&order.client_order_id).copied();
        let mut done = Vec::new();
        if seen.is_none() && self.is_open(&order.symbol) {
            self.note(&order.symbol, order.created_at, "ORDER_SUBMITTED", describe(order));
        }
        let from = seen.unwrap_or(0);
        for execution in order.executions.iter().skip(from) {
            if let Some(trade) = self.fill(order, execution) {
                done.push(trade);
            }
        }
        if order.status.is_final() {
            self.seen.remove(&order.client_order_id);
            let kind = match order.status {
                OrderStatus::Canceled => Some("ORDER_CANCELED"),
                OrderStatus::Rejected => Some("ORDER_REJECTED"),
                OrderStatus::Expired => Some("ORDER_EXPIRED"),
                _ => None,
            };
            if let Some(kind) = kind.filter(|_| self.is_open(&order.symbol)) {
                let detail = format!(
                    "{} {} {} {}: {} of {} filled{}",
                    order.client_order_id,
                    order.side.as_str(),
                    order.quantity,
                    order.symbol,
                    order.filled_quantity,
                    order.quantity,
                    order.reject_reason.as_ref().map(|r| format!(" ({r})")).unwrap_or_default()
                );
                self.note(&order.symbol, order.updated_at, kind, detail);
            }
        } else {
            self.seen.insert(order.client_order_id.clone(), order.executions.len());
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
            let submitted =
                TradeEvent { timestamp: order.created_at, kind: "ORDER_SUBMITTED".into(), detail: describe(order) };
            self.open.insert(
                symbol.clone(),
                OpenTrade {
                    strategy_id: order.strategy_id.clone(),
                    entry_time: execution.timestamp,
                    position: 0,
                    max_position: 0,
                    bought: 0,
                    sold: 0,
                    buy_value: Decimal::ZERO,
                    sell_value: Decimal::ZERO,
                    fees: Decimal::ZERO,
                    events: vec![submitted],
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
                let explanation = explain(order);
                open.exit_reason = explanation.rule.clone();
                if open.explanations.last() != Some(&explanation) {
                    open.explanations.push(explanation);
                }
                "sold"
            }
        };
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
            trade_id: format!("{}-{}", symbol, open.entry_time.format("%Y%m%dT%H%M%S")),
            symbol: symbol.clone(),
            strategy_id: open.strategy_id,
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
            },
        }
    }
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
    if let Some(stop) = order.stop_price {
        text.push_str(&format!(" stop {}", stop.normalize()));
    }
    if let Some(limit) = order.limit_price {
        text.push_str(&format!(" limit {}", limit.normalize()));
    }
    if let Some(reason) = &order.reason {
        text.push_str(&format!(" — {reason}"));
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
    let minute = chrono::Duration::minutes(1);
    let entry = trade.entry_time;
    let entry_price = trade.entry_price.to_f64().unwrap_or(0.0);
    // Bars completed before the entry, from the start of its day (`bars` is in time order).
    let from = bars.partition_point(|b| b.start < day_start);
    let to = bars.partition_point(|b| b.start + minute <= entry).max(from);
    let before = &bars[from..to];
    let price = entry_price;
    let pct = |from: f64, to: f64| (from > 0.0).then(|| (to - from) / from * 100.0);
    let close_back = |n: usize| before.len().checked_sub(n + 1).map(|i| before[i].close.to_f64());
    let last_close = before.last().map(|b| b.close.to_f64());
    let high = before.iter().map(|b| b.high).max().map(|h| h.to_f64().max(price));
    let (pv, v) = before.iter().fold((0.0, 0u64), |(pv, v), b| {
        let typical = (b.high.to_f64() + b.low.to_f64() + b.close.to_f64()) / 3.0;
        (pv + typical * b.volume as f64, v + b.volume)
    });
    let vwap = (v > 0).then(|| pv / v as f64);
    trade.detail.features = Some(Features {
        price,
        percentage_gain: ctx.prev_close.and_then(|p| p.to_f64()).and_then(|p| pct(p, price)),
        relative_volume: ctx.relative_volume,
        float: ctx.float,
        change_1m: close_back(1).zip(last_close).and_then(|(a, b)| pct(a, b)),
        change_5m: close_back(5).zip(last_close).and_then(|(a, b)| pct(a, b)),
        minutes_since_open: (entry - ctx.regular_open).num_minutes(),
        sector: ctx.sector.clone(),
        distance_from_high_pct: high.filter(|h| *h > 0.0).map(|h| (h - price) / h * 100.0),
        distance_from_vwap_pct: vwap.and_then(|w| pct(w, price)),
    });
    // Excursions over the bars that began while the trade was open (the entry's bar included)
    // and the exit price itself.
    let last = bars.partition_point(|b| b.start < trade.exit_time).max(to);
    let during = &bars[to..last];
    let exit_price = trade.exit_price.to_f64();
    let (mut best, mut worst) = (exit_price, exit_price);
    for bar in during {
        best = Some(best.map_or(bar.high.to_f64(), |x| x.max(bar.high.to_f64())));
        worst = Some(worst.map_or(bar.low.to_f64(), |x| x.min(bar.low.to_f64())));
    }
    if entry_price > 0.0 {
        trade.detail.outcomes.mfe = best.map(|b| ((b - entry_price) / entry_price).max(0.0));
        trade.detail.outcomes.mae = worst.map(|w| ((entry_price - w) / entry_price).max(0.0));
    }
}
