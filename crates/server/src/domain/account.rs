//! The account as the engine's view has it (a real broker's own figures when it keeps an
//! account): [`AccountSummary`], the figures
//! `GET /api/account/summary` serves and the `account.updated` event carries (the account feed
//! compares them to decide when to publish), each money figure rounded to the cent by [`figure`].

use crate::engine_view::EngineView;
use rust_decimal::prelude::ToPrimitive;
use rust_decimal::Decimal;
use serde::Serialize;
use tradeops_core::calendar::SessionPhase;
use tradeops_core::risk::TradingState;

/// A money figure as the account endpoints show it: dollars rounded to the cent.
pub fn figure(d: Decimal) -> f64 {
    d.round_dp(2).to_f64().unwrap_or(0.0)
}

// The paper broker's account: what the console's header shows (no doc comment: it would
// change the OpenAPI document).
#[derive(Serialize, utoipa::ToSchema)]
pub struct AccountSummary {
    pub buying_power: f64,
    pub equity: f64,
    pub cash: f64,
    /// A cash account: the buying power.
    pub margin_available: f64,
    /// Equity now minus equity at the start of the session.
    pub day_pnl: f64,
    pub realized_pnl: f64,
    pub unrealized_pnl: f64,
    pub broker_name: &'static str,
    /// `ACTIVE`, or `TRADING_HALTED` during an emergency halt.
    pub account_status: &'static str,
    /// What the open positions stand to lose from their marks: each down to the stop its
    /// strategy manages it with, or its whole market value when no stop protects it.
    pub open_risk: f64,
    /// The market's session now (CONTRACT §12): `PRE_MARKET`, `REGULAR`, `AFTER_HOURS`,
    /// `CLOSED`.
    pub session: SessionPhase,
}

impl AccountSummary {
    /// The account as the engine's view has it (also the `account.updated` event's figures).
    pub fn of(v: &EngineView, session: SessionPhase) -> AccountSummary {
        let (cash, equity, buying_power, day_pnl) = v.account_figures();
        AccountSummary {
            buying_power: figure(buying_power),
            equity: figure(equity),
            cash: figure(cash),
            margin_available: figure(buying_power),
            day_pnl: figure(day_pnl),
            realized_pnl: figure(v.realized_today),
            unrealized_pnl: figure(v.unrealized),
            broker_name: v.broker,
            account_status: if v.trading_state == TradingState::Halted { "TRADING_HALTED" } else { "ACTIVE" },
            open_risk: figure(v.open_risk()),
            session,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine_view::PositionView;
    use tradeops_core::engine::StrategyStatus;
    use tradeops_core::positions::{AlertLevel, Position};
    use tradeops_core::strategy::Levels;
    use tradeops_core::Symbol;

    fn dec(text: &str) -> Decimal {
        text.parse().expect("a decimal")
    }

    #[test]
    fn the_summary_rounds_to_the_cent_and_says_when_trading_is_halted() {
        let view = EngineView {
            cash: dec("1000.004"),
            equity: dec("1012.345"),
            start_equity: dec("1000"),
            buying_power: dec("900.999"),
            realized_today: dec("-1.005"),
            unrealized: dec("13.35"),
            trading_state: TradingState::Halted,
            ..EngineView::default()
        };
        let s = AccountSummary::of(&view, SessionPhase::Regular);
        assert_eq!((s.cash, s.equity, s.buying_power, s.margin_available), (1000.0, 1012.34, 901.0, 901.0));
        assert_eq!((s.day_pnl, s.realized_pnl, s.unrealized_pnl), (12.34, -1.0, 13.35));
        assert_eq!(s.account_status, "TRADING_HALTED");
        let active =
            AccountSummary::of(&EngineView { trading_state: TradingState::Reducing, ..view }, SessionPhase::Regular);
        assert_eq!(active.account_status, "ACTIVE");
    }

    #[test]
    fn open_risk_is_the_loss_down_to_each_stop_or_the_whole_value_without_one() {
        let held = |symbol: &str, quantity: u64, mark: &str, levels: Option<(&str, Option<&str>)>| PositionView {
            position: Position {
                quantity,
                cost_basis: dec(mark) * Decimal::from(quantity),
                ..Position::new(Symbol::parse(symbol).unwrap())
            },
            mark: dec(mark),
            status: StrategyStatus::Hold,
            alert_level: AlertLevel::None,
            levels: levels.map(|(stop, target)| Levels { stop_loss: dec(stop), target: target.map(dec) }),
            halted: false,
            protection: Default::default(),
        };
        let view = EngineView {
            positions: vec![
                // 100 × (5.50 − 5.39) = 11.00
                held("ABCD", 100, "5.50", Some(("5.39", Some("5.75")))),
                // A stop at or above the mark (moved to breakeven, price above it): nothing.
                held("EFGH", 50, "7.00", Some(("7.25", None))),
                // No stop (left to the operator): its whole value, 10 × 12.345 = 123.45.
                held("IJKL", 10, "12.345", None),
            ],
            ..EngineView::default()
        };
        assert_eq!(view.open_risk(), dec("134.45"));
        assert_eq!(AccountSummary::of(&view, SessionPhase::Regular).open_risk, 134.45);
        assert_eq!(
            AccountSummary::of(&EngineView::default(), SessionPhase::Closed).open_risk,
            0.0,
            "nothing held, nothing at risk"
        );
    }
}
