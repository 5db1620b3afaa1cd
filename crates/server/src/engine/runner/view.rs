//! What the runner tells operators: the [`EngineView`] it publishes after every batch (the
//! book, the day's figures, the broker's state and `reconciliation_status`), the batch's events
//! once it is saved, and while `HALTED` each change of what is still open, until flat.

use super::Runner;
use crate::engine_view::{EngineView, PositionView};
use crate::events::{Event as Published, RiskChange};
use rust_decimal::Decimal;
use std::sync::Arc;
use tradeops_core::market::Side;
use tradeops_core::risk::TradingState;

impl Runner {
    /// Publishes the engine's view, then the batch's events, then the halt's progress:
    /// operators see a change only once it is persisted.
    pub(super) fn publish_events(&mut self, events: Vec<Published>) {
        self.publish();
        for event in events {
            self.events.publish(event);
        }
        self.halt_progress();
    }

    /// While halted, each change of what is still open is published, until flat.
    fn halt_progress(&mut self) {
        if self.engine.trading_state() != TradingState::Halted {
            self.last_progress = None;
            return;
        }
        let positions = self.engine.positions().values().filter(|p| !p.is_flat()).count();
        let orders = self.engine.orders().values().filter(|o| !o.status.is_final()).count();
        if self.last_progress == Some((positions, orders)) {
            return;
        }
        self.last_progress = Some((positions, orders));
        let progress = RiskChange::Liquidation { open_positions: positions, open_orders: orders };
        self.events.publish(Published::RiskStateChanged(progress));
    }

    pub(super) fn publish(&self) {
        let e = &self.engine;
        let limits = &e.settings().risk_controls;
        let positions = e
            .positions()
            .values()
            .filter(|p| !p.is_flat())
            .map(|p| {
                let mark = e
                    .market()
                    .get(&p.symbol)
                    .map(|m| m.last)
                    .filter(|m| *m > Decimal::ZERO)
                    .or(p.average_entry_price())
                    .unwrap_or_default();
                PositionView {
                    alert_level: p.alert_level(mark, limits),
                    status: e.position_status(&p.symbol),
                    levels: e.position_levels(&p.symbol),
                    halted: e.halt_of(&p.symbol).is_some(),
                    protection: e.protection(&p.symbol),
                    mark,
                    position: p.clone(),
                }
            })
            .collect();
        let reserved: Decimal = e
            .orders()
            .values()
            .filter(|o| !o.status.is_final() && o.side == Side::Buy)
            .map(|o| Decimal::from(o.remaining()) * o.limit_price.or(o.stop_price).unwrap_or_default())
            .sum();
        let broker_open_orders = self.venue.open_orders_known();
        let (status, detail) = self.reconciliation.status(self.anomalies.last(), broker_open_orders, self.venue.name());
        let view = EngineView {
            trading_state: e.trading_state(),
            halt: e.halt().cloned(),
            halt_stopped: e.halt_stopped().iter().cloned().collect(),
            positions,
            cash: e.cash(),
            equity: e.equity(),
            buying_power: (e.cash() - reserved).max(Decimal::ZERO),
            realized_today: e.day().realized_today,
            unrealized: e.unrealized_pnl(),
            daily_pnl: e.daily_pnl(),
            drawdown: e.drawdown(),
            start_equity: e.day().start_equity,
            trades_today: e.day().trades_today,
            session: e.day().date,
            by_symbol: e.day().by_symbol.iter().map(|(s, (pnl, n))| (s.clone(), *pnl, *n)).collect(),
            open_orders: e.orders().values().filter(|o| !o.status.is_final()).count(),
            broker_open_orders,
            state_persisted: self.books.state_persisted(),
            unsaved_writes: self.books.held(),
            reconciliation_status: status,
            reconciliation_detail: detail,
            venue_unavailable: self.venue.down().map(|(reason, _)| reason.clone()),
            followed: self.relevant().into_iter().collect(),
            broker: self.venue.name(),
            venue_account: self.reconciliation.venue_account().cloned(),
        };
        self.view.send_replace(Arc::new(view));
    }
}
