//! Strategies: pure decision makers on 1-minute bars. A strategy sees the bars of its symbol and
//! its own position, and answers with [`Decision`]s, each carrying the rule that fired and a
//! sentence explaining it (these become trade explanations). No clock, no randomness, no I/O.

pub mod momentum_breakout;
pub mod sma_cross;

use crate::market::Bar;
use crate::settings::StrategyAllocatorSettings;
use rust_decimal::Decimal;
use serde::Serialize;

/// Strategies by id, for the engine and backtests.
pub fn make(id: &str) -> Option<Box<dyn Strategy>> {
    match id {
        "momentum_breakout" => Some(Box::new(momentum_breakout::MomentumBreakout::new())),
        "sma_cross" => Some(Box::new(sma_cross::SmaCross::default())),
        _ => None,
    }
}

/// What the strategy knows besides the bar.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StrategyContext {
    /// Previous regular-session close (for the day's gain).
    pub prev_close: Decimal,
    /// Time-of-day adjusted relative volume now, if known.
    pub relative_volume: Option<f64>,
    /// Shares the strategy holds (filled entries minus filled exits).
    pub position: u64,
    /// Whether an entry or exit order of the strategy is still working.
    pub order_working: bool,
    /// Minutes since the regular open (negative before it).
    pub minutes_since_open: i64,
    /// Minutes until the regular close.
    pub minutes_to_close: i64,
    /// `runtime.flatten_minutes_before_close`: flatten when `minutes_to_close` is at or below it
    /// (0 disables).
    pub flatten_minutes_before_close: u32,
    /// Cash not reserved by working buy orders, dollars.
    pub buying_power: Decimal,
    /// A take-profit at the strategy's target rests at the broker (CONTRACT §11): its limit
    /// sells there what the strategy sells at the target ([`Strategy::target_quantity`]), and
    /// [`Strategy::on_target_filled`] says when it did, so the strategy does not sell at the
    /// target itself (the same shares twice).
    pub target_at_broker: bool,
}

/// What the strategy wants done. The engine turns decisions into orders through the risk gate.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "action", rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Decision {
    /// Buy with a stop-limit: trigger at `stop_price`, pay at most `limit_price`; protect with
    /// `stop_loss`. `quantity` is sized by dollars risked per share.
    Enter {
        quantity: u64,
        stop_price: Decimal,
        limit_price: Decimal,
        stop_loss: Decimal,
        target: Decimal,
        rule: &'static str,
        text: String,
    },
    /// Buy at market: `quantity` shares, or (`None`) as many whole shares as buying power takes
    /// at the fill price (strategies that invest all their cash, e.g. `sma_cross`), sized by the
    /// engine, which knows the fill price where the venue states it.
    Buy { quantity: Option<u64>, rule: &'static str, text: String },
    /// Sell `quantity` at market.
    Exit { quantity: u64, rule: &'static str, text: String },
    /// Withdraw the working entry order.
    CancelEntry { rule: &'static str, text: String },
}

impl Decision {
    /// The sentence explaining the decision.
    pub fn text(&self) -> &str {
        match self {
            Decision::Enter { text, .. }
            | Decision::Buy { text, .. }
            | Decision::Exit { text, .. }
            | Decision::CancelEntry { text, .. } => text,
        }
    }

    /// Takes the sentence out, leaving it empty (the engine moves it into its effect).
    pub fn take_text(&mut self) -> String {
        match self {
            Decision::Enter { text, .. }
            | Decision::Buy { text, .. }
            | Decision::Exit { text, .. }
            | Decision::CancelEntry { text, .. } => std::mem::take(text),
        }
    }

    pub fn rule(&self) -> &'static str {
        match self {
            Decision::Enter { rule, .. }
            | Decision::Buy { rule, .. }
            | Decision::Exit { rule, .. }
            | Decision::CancelEntry { rule, .. } => rule,
        }
    }
}

/// The levels a strategy manages its position with, as it holds them now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Levels {
    /// The protective stop: the strategy sells the position when a bar trades at or below it.
    pub stop_loss: Decimal,
    /// Where the strategy takes (part of) its profit; `None` once it has, or when it sets none.
    pub target: Option<Decimal>,
}

/// A strategy instance for one symbol.
pub trait Strategy: Send + Sync {
    fn id(&self) -> &'static str;
    fn version(&self) -> &'static str;
    /// A completed 1-minute bar.
    fn on_bar(&mut self, bar: &Bar, ctx: &StrategyContext, params: &StrategyAllocatorSettings) -> Vec<Decision>;
    /// Entry filled (possibly partly) at `price`: the strategy starts managing `quantity` shares.
    fn on_entry_filled(&mut self, quantity: u64, price: Decimal);
    /// The day rolled: forget intraday state.
    fn reset_day(&mut self);
    /// The stop and target the strategy manages its position with now: `None` while it holds
    /// none, and for a strategy that manages no such levels (`sma_cross` exits on its signal).
    fn levels(&self) -> Option<Levels> {
        None
    }
    /// How many of `held` shares the strategy sells at its target (while [`Strategy::levels`]
    /// has one): what a take-profit at the broker is placed for (CONTRACT §11), the rest resting
    /// under the stop alone. All of them unless the strategy scales out.
    fn target_quantity(&self, held: u64, _params: &StrategyAllocatorSettings) -> u64 {
        held
    }
    /// The take-profit resting at the broker at the strategy's target sold `quantity` shares at
    /// (on average) `price`: what the strategy does when it takes its profit itself (for
    /// `momentum_breakout`, scaled out, the stop to breakeven) without selling again.
    fn on_target_filled(&mut self, _quantity: u64, _price: Decimal) {}
    /// A restarted instance handed a held position (`on_entry_filled`) learns the levels that
    /// protect it at the broker (CONTRACT §11): the stop resting there, and the target of a
    /// take-profit still resting with it (`None` when none does: taken already, or never placed),
    /// so it manages the position at the levels it had rather than at default ones. Strategies
    /// without levels ignore it.
    fn adopt_levels(&mut self, _stop: Decimal, _target: Option<Decimal>) {}
}

/// How a parameter's value is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ParameterKind {
    Integer,
    Number,
}

/// One parameter of a strategy, for `GET /api/strategies` and to validate backtest `parameters`.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ParameterInfo {
    pub name: &'static str,
    pub kind: ParameterKind,
    /// The value used when a run does not give one (for `momentum_breakout`, the effective
    /// `strategy_allocator` setting).
    pub default: f64,
    pub minimum: f64,
    pub maximum: f64,
    pub description: &'static str,
}

/// A built-in strategy.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct StrategyInfo {
    pub strategy_id: &'static str,
    pub strategy_version: &'static str,
    pub description: &'static str,
    /// Whether it may trade the live watchlist (`strategy_allocator.default_strategy_id`);
    /// every strategy can be backtested.
    pub live: bool,
    pub timeframes: Vec<crate::market::Timeframe>,
    pub parameters: Vec<ParameterInfo>,
}

/// Every built-in strategy, with parameter defaults taken from the effective allocator settings.
pub fn catalog(allocator: &StrategyAllocatorSettings) -> Vec<StrategyInfo> {
    use rust_decimal::prelude::ToPrimitive;
    use ParameterKind::{Integer, Number};
    let money = |d: Decimal| d.to_f64().unwrap_or(0.0);
    let p = |name, kind, default, minimum, maximum, description| ParameterInfo {
        name,
        kind,
        default,
        minimum,
        maximum,
        description,
    };
    let strategies = [
        StrategyInfo {
            strategy_id: "momentum_breakout",
            strategy_version: momentum_breakout::MomentumBreakout::VERSION,
            description: "First-pullback breakout on 1-minute bars: buys a stop-limit above a pullback after an \
                          impulse leg in a stock up 10%+ on 2x+ relative volume above VWAP, in the first 150 \
                          minutes; stop below the pullback, scales out at the target, exits on a close below \
                          VWAP or before the close.",
            live: true,
            timeframes: vec![crate::market::Timeframe::Minute],
            parameters: vec![
                p("risk_per_trade", Number, money(allocator.risk_per_trade), 0.01, 1e9, "Dollars risked per trade."),
                p(
                    "max_position_value",
                    Number,
                    money(allocator.max_position_value),
                    0.01,
                    1e9,
                    "Cap on one position's entry value, dollars.",
                ),
                p("reward_multiple", Number, allocator.reward_multiple, 0.5, 20.0, "Target as a multiple of the risk."),
                p(
                    "scale_out_fraction",
                    Number,
                    allocator.scale_out_fraction,
                    0.0,
                    1.0,
                    "Fraction of the position sold at the target.",
                ),
            ],
        },
        StrategyInfo {
            strategy_id: sma_cross::ID,
            strategy_version: sma_cross::VERSION,
            description: "Reference long-only moving-average crossover: buys with all buying power in whole \
                          shares when the fast average crosses above the slow one, sells everything when it \
                          crosses below.",
            live: false,
            timeframes: vec![crate::market::Timeframe::Minute, crate::market::Timeframe::Day],
            parameters: vec![
                p(
                    "fast",
                    Integer,
                    sma_cross::DEFAULT_FAST.into(),
                    1.0,
                    f64::from(sma_cross::MAX_WINDOW - 1),
                    "Bars in the fast average.",
                ),
                p(
                    "slow",
                    Integer,
                    sma_cross::DEFAULT_SLOW.into(),
                    2.0,
                    sma_cross::MAX_WINDOW.into(),
                    "Bars in the slow average; more than fast.",
                ),
            ],
        },
    ];
    strategies.into()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The catalog names exactly the strategies `make` builds, at the versions they report, and
    /// momentum_breakout's defaults follow the operator's settings.
    #[test]
    fn the_catalog_matches_the_strategies_built() {
        let allocator = StrategyAllocatorSettings { risk_per_trade: Decimal::new(125, 0), ..Default::default() };
        let catalog = catalog(&allocator);
        for info in &catalog {
            let built = make(info.strategy_id).expect("every listed strategy is built");
            assert_eq!((built.id(), built.version()), (info.strategy_id, info.strategy_version));
            assert_eq!(info.live, crate::settings::LIVE_STRATEGIES.contains(&info.strategy_id));
            for p in &info.parameters {
                assert!(p.minimum <= p.default && p.default <= p.maximum, "{}: {p:?}", info.strategy_id);
            }
        }
        assert_eq!(catalog.iter().map(|s| s.strategy_id).collect::<Vec<_>>(), ["momentum_breakout", "sma_cross"]);
        assert_eq!(catalog[0].parameters[0].default, 125.0);
        assert!(make("nope").is_none());
    }
}
