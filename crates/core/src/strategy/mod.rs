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
    /// Buy `quantity` at market (strategies that size from cash, e.g. `sma_cross`).
    Buy { quantity: u64, rule: &'static str, text: String },
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

    pub fn rule(&self) -> &'static str {
        match self {
            Decision::Enter { rule, .. }
            | Decision::Buy { rule, .. }
            | Decision::Exit { rule, .. }
            | Decision::CancelEntry { rule, .. } => rule,
        }
    }
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
}
