//! The `account.updated` event: what the console's header shows — the account summary, the
//! trading state and the market clock — published when any of it changes (the market clock by
//! the minute, as the header shows it), at most once a second. The header follows the stream
//! instead of polling.

use crate::events::{AccountUpdate, Event};
use crate::http::routes::account::AccountSummary;
use crate::http::state::AppState;
use serde_json::{json, Value};
use std::time::Duration;
use tradeops_core::time::format_ts;

/// The shortest gap between two `account.updated` events.
const AT_MOST_EVERY: Duration = Duration::from_secs(1);

/// Runs until the engine stops: waits for the engine's view to change, publishes the header's
/// figures when they differ from the last published, then waits out [`AT_MOST_EVERY`] (changes
/// meanwhile are coalesced into the next event).
pub async fn run(state: AppState) {
    let mut views = state.engine().subscribe();
    let mut last: Option<Value> = None;
    loop {
        if views.changed().await.is_err() {
            return;
        }
        let view = views.borrow_and_update().clone();
        let market_time = state.market_clock.now();
        let summary = serde_json::to_value(AccountSummary::of(&view)).unwrap_or_default();
        let figures = json!({
            "account": summary,
            "trading_state": view.trading_state,
            "market_minute": format_ts(&tradeops_core::bars::minute_floor(market_time)),
        });
        if last.as_ref() == Some(&figures) {
            continue;
        }
        let trading_date = state.live.as_ref().and_then(|l| l.status().date);
        state.events.publish(Event::AccountUpdated(AccountUpdate { view, market_time, trading_date }));
        last = Some(figures);
        tokio::time::sleep(AT_MOST_EVERY).await;
    }
}
