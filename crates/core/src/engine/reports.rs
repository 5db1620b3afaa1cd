//! Broker reports: orders move through their state machine, fills move positions and cash, and
//! the symbol's strategy status follows (`Buy → Hold → Sell → Active`).

use super::{Effect, Engine, StrategyStatus};
use crate::broker::BrokerReport;
use crate::market::Side;
use crate::orders::OrderStatus;
use crate::positions::{Position, PositionFill};
use crate::risk::{RiskRule, TradingState, ViolationDetail};
use crate::time::Timestamp;
use rust_decimal::Decimal;

impl Engine {
    pub(super) fn on_report(&mut self, report: BrokerReport, now: Timestamp, fx: &mut Vec<Effect>) {
        let id = report.client_order_id().clone();
        let Some(order) = self.orders.get_mut(&id) else {
            fx.push(Effect::Anomaly(format!("broker report for unknown order {id}: {report:?}")));
            return;
        };
        let before = order.status;
        if matches!(report, BrokerReport::CancelRejected { .. } | BrokerReport::Canceled { .. }) && before.is_final() {
            // The answer to a cancel sent again (after a restart, by an operator, or by
            // reconciliation for a broker order still working that we hold ended): the order
            // has ended here already, so nothing changes.
            return;
        }
        let updated_at = fx.len();
        if let Err(e) = std::sync::Arc::make_mut(order).apply(report.order_event(), report.at()) {
            // Duplicate or impossible report: the order stays as it was.
            fx.push(Effect::Anomaly(format!("broker report refused for order {id}: {e}")));
            return;
        }
        let order = order.clone();
        if order.status == OrderStatus::Rejected {
            // A rejected order placed nothing: the same order again is no duplicate of it.
            self.recent.retain(|r| r.client_order_id != id);
        }

        if let BrokerReport::Filled { execution, .. } = &report {
            let position =
                self.positions.entry(order.symbol.clone()).or_insert_with(|| Position::new(order.symbol.clone()));
            let fill = PositionFill {
                side: order.side,
                quantity: execution.quantity,
                price: execution.price,
                fee: execution.fee,
                at: execution.timestamp,
            };
            match position.apply(&fill) {
                Ok(realized) => {
                    self.day.realized_today += realized - execution.fee;
                    self.day.by_symbol.entry(order.symbol.clone()).or_default().0 += realized - execution.fee;
                    let amount = execution.price * Decimal::from(execution.quantity);
                    self.cash += match order.side {
                        Side::Buy => -amount - execution.fee,
                        Side::Sell => amount - execution.fee,
                    };
                }
                Err(e) => {
                    // A sell fill beyond the position (e.g. a late fill racing a close).
                    fx.push(Effect::Anomaly(format!("fill of order {id} not applied to the position: {e}")));
                }
            }
            let position = position.clone();
            if order.side == Side::Buy {
                if let Some(slot) = self.slots.get_mut(&order.symbol) {
                    if slot.entry_order.as_ref() == Some(&id) {
                        if let Some(s) = slot.strategy.as_mut() {
                            s.on_entry_filled(execution.quantity, execution.price);
                        }
                    }
                }
            }
            let status = self.status_after_fill(&order.symbol, &position);
            self.set_status(&order.symbol, status, None, fx);
            fx.push(Effect::PositionUpdated { status: self.position_status(&order.symbol), position });
            self.check_daily_loss(fx);
            if self.trading_state == TradingState::Halted && order.side == Side::Buy {
                // An order the halt is cancelling filled first (a cancel racing a fill, or one
                // lost in a crash): the shares are recorded, exited at once, and the operator
                // told.
                fx.push(Effect::Violation {
                    rule: RiskRule::FillWhileHalted,
                    symbol: order.symbol.clone(),
                    client_order_id: Some(id.clone()),
                    detail: ViolationDetail::FillWhileHalted {
                        message: format!(
                            "{} shares of {} bought while HALTED: order {id} filled before its cancel landed; \
                             the halt sells them at market",
                            execution.quantity, order.symbol
                        ),
                        quantity: execution.quantity,
                        price: execution.price,
                        order_status: order.status,
                    },
                });
                self.submit_liquidation(now, fx);
            }
        }

        let (symbol, status) = (order.symbol.clone(), order.status);
        // The update goes out before what the fill caused (the order's own snapshot first).
        fx.insert(updated_at, Effect::OrderUpdated(order.clone()));
        let ended = status.is_final() && !before.is_final();
        if ended {
            self.order_finished(&symbol, &id, status, now, fx);
        }
        let protected =
            order.legs.is_some() || self.brackets.contains_key(&symbol) || self.freeing.contains_key(&symbol);
        if protected || self.strategy_levels(&symbol).is_some() {
            self.after_order_event(&order, ended, now, fx);
        }
        if order.is_protective() && status == OrderStatus::Rejected {
            // A strategy position's stop the broker refused is not waited for.
            self.check_broker_stops(now, Some(&symbol), fx);
        }
    }

    /// Status after a fill for a strategy-managed symbol.
    pub(super) fn status_after_fill(&self, symbol: &crate::symbol::Symbol, position: &Position) -> StrategyStatus {
        let Some(slot) = self.slots.get(symbol) else { return StrategyStatus::Halted };
        if slot.strategy.is_none() {
            // `Halted` is a position left to manual management (CONTRACT §3): once it is flat
            // with no order of the symbol working (the emergency halt's exit filled, the
            // operator closed it), nothing is left to manage, and the row reads `Closed`.
            let nothing_left =
                || position.is_flat() && !self.orders.values().any(|o| o.symbol == *symbol && !o.status.is_final());
            if slot.status == StrategyStatus::Halted && nothing_left() {
                return StrategyStatus::Closed;
            }
            // A position bought by hand where a watch had ended (`Closed`: nothing to manage)
            // is managed by hand from its first share (CONTRACT §4, `POST /api/orders`).
            if slot.status == StrategyStatus::Closed && !position.is_flat() {
                return StrategyStatus::Halted;
            }
            return slot.status;
        }
        let exiting = slot.exit_orders.iter().any(|id| self.is_working(id));
        match (position.is_flat(), exiting) {
            (true, _) if slot.entry_order.as_ref().is_some_and(|id| self.is_working(id)) => StrategyStatus::Buy,
            (true, _) => StrategyStatus::Active,
            (false, true) => StrategyStatus::Sell,
            (false, false) => StrategyStatus::Hold,
        }
    }

    pub(super) fn order_finished(
        &mut self,
        symbol: &crate::symbol::Symbol,
        id: &crate::orders::ClientOrderId,
        status: OrderStatus,
        now: Timestamp,
        fx: &mut Vec<Effect>,
    ) {
        if let Some(slot) = self.slots.get_mut(symbol) {
            if slot.entry_order.as_ref() == Some(id) {
                slot.entry_order = None;
            }
            slot.exit_orders.remove(id);
        }
        let position =
            self.positions.get(symbol).cloned().unwrap_or_else(|| crate::positions::Position::new(symbol.clone()));
        let next = self.status_after_fill(symbol, &position);
        self.set_status(symbol, next, None, fx);
        self.resend_repriced(id, status, now, fx);
        // While halted, an exit that ended without filling everything is resubmitted; one the
        // broker rejected, after a wait that doubles with each rejection in a row (1 s up to
        // 30 s), and then by the halt applied again (every reconciliation pass).
        if self.trading_state == TradingState::Halted && status != OrderStatus::Filled {
            let rejected_exit = status == OrderStatus::Rejected
                && self.orders.get(id).is_some_and(|o| o.reason.as_deref() == Some(super::LIQUIDATION_REASON));
            if rejected_exit {
                let rejections = self.exit_backoff.get(symbol).map_or(0, |(_, n)| *n) + 1;
                let wait = chrono::Duration::seconds((1i64 << (rejections - 1).min(5)).min(30));
                self.exit_backoff.insert(symbol.clone(), (now + wait, rejections));
            }
            self.submit_liquidation(now, fx);
        }
    }
}
