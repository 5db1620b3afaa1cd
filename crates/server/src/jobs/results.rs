//! What a completed backtest row stores as its `result`, typed: a single run's
//! ([`BacktestResult`], every metric of CONTRACT §4 with its trades and equity curve) and a desk
//! replay's ([`DeskResult`], in the shape of live analytics). Both share their headline metrics
//! ([`Headline`]) and curve points ([`CurvePoint`]); money is dollars as a JSON number and times
//! are RFC 3339, as everywhere in the API. `GET /api/backtests/{backtest_id}` serves the stored
//! fields in their stored order after the row's own, so the field order here is the order a
//! client reads.

use rust_decimal::Decimal;
use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeMap;
use tradeops_core::backtest::{dollars, BacktestOutput};
use tradeops_core::metrics::{EquityPoint, Metrics};
use tradeops_core::risk::TradingState;
use tradeops_core::trades::{Explanation, Features, Outcomes, Trade, TradeEvent};
use tradeops_core::Timestamp;

/// The metrics every run reports first, `null` where undefined (no trades, no returns).
#[derive(Clone, Debug, Serialize)]
pub struct Headline {
    pub total_return: f64,
    pub sharpe_ratio: Option<f64>,
    pub max_drawdown: f64,
    pub win_loss_ratio: Option<f64>,
    pub win_rate: Option<f64>,
    pub profit_factor: Option<f64>,
    pub trade_count: u64,
    pub expectancy: Option<f64>,
    pub gross_profit: f64,
    pub gross_loss: f64,
}

impl From<&Metrics> for Headline {
    fn from(m: &Metrics) -> Headline {
        Headline {
            total_return: m.total_return,
            sharpe_ratio: m.sharpe_ratio,
            max_drawdown: m.max_drawdown,
            win_loss_ratio: m.win_loss_ratio,
            win_rate: m.win_rate,
            profit_factor: m.profit_factor,
            trade_count: m.trade_count,
            expectancy: m.expectancy.map(dollars),
            gross_profit: dollars(m.gross_profit),
            gross_loss: dollars(m.gross_loss),
        }
    }
}

/// One point of an equity curve.
#[derive(Clone, Debug, Serialize)]
pub struct CurvePoint {
    #[serde(with = "tradeops_core::time::serde_ts")]
    pub timestamp: Timestamp,
    pub equity: f64,
}

impl From<&EquityPoint> for CurvePoint {
    fn from(p: &EquityPoint) -> CurvePoint {
        CurvePoint { timestamp: p.timestamp, equity: dollars(p.equity) }
    }
}

/// A single run's result: the headline metrics, what explains them (the days the Sharpe ratio
/// spans, bars, orders, the risk gate's refusals by rule), the trades (rows as
/// `GET /api/trades`) and the equity curve.
#[derive(Clone, Debug, Serialize)]
pub struct BacktestResult {
    #[serde(flatten)]
    pub headline: Headline,
    pub sharpe_days: u32,
    pub final_equity: f64,
    pub bars: u64,
    pub orders: u64,
    pub refusals: BTreeMap<String, u64>,
    pub trades: Vec<Value>,
    pub equity_curve: Vec<CurvePoint>,
}

impl From<&BacktestOutput> for BacktestResult {
    fn from(o: &BacktestOutput) -> BacktestResult {
        BacktestResult {
            headline: Headline::from(&o.metrics),
            sharpe_days: o.metrics.days,
            final_equity: dollars(o.final_equity),
            bars: o.bars,
            orders: o.orders,
            refusals: o.refusals.clone(),
            trades: o.trades.iter().map(crate::domain::trades::trade_row).collect(),
            equity_curve: o.equity_curve.iter().map(CurvePoint::from).collect(),
        }
    }
}

/// A desk replay's result, in the shape of live analytics.
#[derive(Clone, Debug, Serialize)]
pub struct DeskResult {
    /// `desk`: what tells a replay's result from a single run's.
    pub kind: &'static str,
    #[serde(flatten)]
    pub headline: Headline,
    pub final_equity: f64,
    /// The trading state at the end (`REDUCING` once the daily loss limit was reached).
    pub trading_state: TradingState,
    /// Feed steps taken and radar scans made.
    pub steps: u64,
    pub scans: u64,
    pub trades: Vec<ReplayedTrade>,
    pub violations: Vec<ReplayViolation>,
    /// The watchlist the allocator built.
    pub watched: Vec<ReplayWatch>,
    pub by_symbol: Vec<SymbolPerformance>,
    pub equity_curve: Vec<CurvePoint>,
}

/// A replayed trade: its row with its deep dive (features at entry, outcomes, explanations, the
/// orders' events), as `GET /api/trades/{trade_id}` gives a live trade's.
#[derive(Clone, Debug, Serialize)]
pub struct ReplayedTrade {
    /// The row as `GET /api/trades` gives it (`crate::domain::trades::trade_row`).
    #[serde(flatten)]
    pub row: Value,
    pub detail: DeepDive,
}

impl From<&Trade> for ReplayedTrade {
    fn from(t: &Trade) -> ReplayedTrade {
        ReplayedTrade {
            row: crate::domain::trades::trade_row(t),
            detail: DeepDive {
                events: t.detail.events.clone(),
                features: t.detail.features.clone(),
                outcomes: t.detail.outcomes.clone(),
                explanations: t.detail.explanations.clone(),
            },
        }
    }
}

/// A trade's deep dive.
#[derive(Clone, Debug, Serialize)]
pub struct DeepDive {
    pub events: Vec<TradeEvent>,
    pub features: Option<Features>,
    pub outcomes: Outcomes,
    pub explanations: Vec<Explanation>,
}

/// A risk violation the replay recorded.
#[derive(Clone, Debug, Serialize)]
pub struct ReplayViolation {
    pub rule: String,
    pub symbol: Option<String>,
    pub client_order_id: Option<String>,
    pub detail: Value,
    #[serde(with = "tradeops_core::time::serde_ts")]
    pub timestamp: Timestamp,
}

/// A symbol the replay's allocator watched.
#[derive(Clone, Debug, Serialize)]
pub struct ReplayWatch {
    pub symbol: String,
    pub source: String,
    pub strategy_id: String,
    pub strategy_status: String,
    #[serde(with = "tradeops_core::time::serde_ts")]
    pub time_added: Timestamp,
}

/// A symbol's completed trades in a replay.
#[derive(Clone, Debug, Default, Serialize)]
pub struct SymbolPerformance {
    pub symbol: String,
    pub trades: u64,
    pub wins: u64,
    #[serde(serialize_with = "as_dollars")]
    pub net_pnl: Decimal,
}

fn as_dollars<S: serde::Serializer>(amount: &Decimal, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(dollars(*amount))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn headline() -> Headline {
        Headline {
            total_return: 0.1,
            sharpe_ratio: None,
            max_drawdown: 0.05,
            win_loss_ratio: Some(2.0),
            win_rate: Some(0.5),
            profit_factor: None,
            trade_count: 2,
            expectancy: Some(12.5),
            gross_profit: 50.0,
            gross_loss: -25.0,
        }
    }

    fn at(text: &str) -> Timestamp {
        text.parse().unwrap()
    }

    /// The stored text, whose field order a client reads as it is.
    fn stored(result: &impl Serialize) -> String {
        serde_json::to_string(result).unwrap()
    }

    #[test]
    fn a_single_runs_result_lists_the_headline_then_what_explains_it() {
        let result = BacktestResult {
            headline: headline(),
            sharpe_days: 3,
            final_equity: 10_025.0,
            bars: 390,
            orders: 4,
            refusals: BTreeMap::from([("max_position".to_string(), 1)]),
            trades: vec![],
            equity_curve: vec![CurvePoint { timestamp: at("2026-01-05T21:00:00Z"), equity: 10_025.0 }],
        };
        assert_eq!(
            stored(&result),
            concat!(
                r#"{"total_return":0.1,"sharpe_ratio":null,"max_drawdown":0.05,"win_loss_ratio":2.0,"win_rate":0.5,"#,
                r#""profit_factor":null,"trade_count":2,"expectancy":12.5,"gross_profit":50.0,"gross_loss":-25.0,"#,
                r#""sharpe_days":3,"final_equity":10025.0,"bars":390,"orders":4,"refusals":{"max_position":1},"#,
                r#""trades":[],"equity_curve":[{"timestamp":"2026-01-05T21:00:00.000Z","equity":10025.0}]}"#
            )
        );
    }

    #[test]
    fn a_replays_result_is_shaped_as_live_analytics() {
        let result = DeskResult {
            kind: "desk",
            headline: headline(),
            final_equity: 10_025.0,
            trading_state: TradingState::Active,
            steps: 10,
            scans: 2,
            trades: vec![ReplayedTrade {
                row: json!({"trade_id": "t-1", "symbol": "ABCD"}),
                detail: DeepDive {
                    events: vec![],
                    features: None,
                    outcomes: Outcomes::default(),
                    explanations: vec![],
                },
            }],
            violations: vec![ReplayViolation {
                rule: "max_position".into(),
                symbol: Some("ABCD".into()),
                client_order_id: None,
                detail: json!({"limit": 1}),
                timestamp: at("2026-01-05T15:00:00Z"),
            }],
            watched: vec![ReplayWatch {
                symbol: "ABCD".into(),
                source: "auto".into(),
                strategy_id: "momentum".into(),
                strategy_status: "RUNNING".into(),
                time_added: at("2026-01-05T14:45:00Z"),
            }],
            by_symbol: vec![SymbolPerformance {
                symbol: "ABCD".into(),
                trades: 2,
                wins: 1,
                net_pnl: Decimal::new(2550, 2),
            }],
            equity_curve: vec![],
        };
        let text = stored(&result);
        let keys: Vec<String> =
            serde_json::from_str::<serde_json::Map<String, Value>>(&text).unwrap().keys().cloned().collect();
        assert_eq!(
            keys,
            [
                "kind",
                "total_return",
                "sharpe_ratio",
                "max_drawdown",
                "win_loss_ratio",
                "win_rate",
                "profit_factor",
                "trade_count",
                "expectancy",
                "gross_profit",
                "gross_loss",
                "final_equity",
                "trading_state",
                "steps",
                "scans",
                "trades",
                "violations",
                "watched",
                "by_symbol",
                "equity_curve"
            ]
        );
        let value: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(value["trading_state"], "ACTIVE");
        assert_eq!(value["trades"][0]["trade_id"], "t-1", "the row's own fields, then its deep dive");
        let detail: Vec<&String> = value["trades"][0]["detail"].as_object().unwrap().keys().collect();
        assert_eq!(detail, ["events", "features", "outcomes", "explanations"]);
        assert_eq!(value["violations"][0]["timestamp"], "2026-01-05T15:00:00.000Z");
        assert_eq!(value["watched"][0]["time_added"], "2026-01-05T14:45:00.000Z");
        assert_eq!(value["by_symbol"][0], json!({"symbol": "ABCD", "trades": 2, "wins": 1, "net_pnl": 25.5}));
    }
}
