//! The runner's side of the order ticket's risk preview: the order is checked as
//! `Input::Command(PlaceOrder)` would check it — an unknown symbol refused, the symbol valued at
//! the market data's last trade, its halt as the source says now — but the engine is only read
//! ([`Engine::preview`]): no mark is applied, no order saved; only a change of the symbol's halt
//! is taken in first, as before an order (one halt state, CONTRACT §11).

use super::Runner;
use tradeops_core::engine::{CommandError, ManualOrder, OrderPreview};

impl Runner {
    pub(super) async fn preview(&self, order: &ManualOrder) -> Result<OrderPreview, CommandError> {
        let now = self.market_clock.now();
        if self.market.instrument(&order.symbol).is_none() {
            let unknown = format!("{} is not a symbol of the {} market", order.symbol, self.market.name());
            return Err(CommandError::NotFound(unknown));
        }
        let mark = self.market.snapshot(&order.symbol).await.map(|s| s.last.to_decimal());
        self.engine.preview(order, mark, now)
    }
}
