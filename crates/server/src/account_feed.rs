//! The `account.updated` event: what the console's header shows — the account summary, the
//! trading state and the market clock — published when any of it changes (the market clock by
//! the minute, as the header shows it), at most once a second. The header follows the stream
//! instead of polling.

use crate::domain::account::AccountSummary;
use crate::domain::settings::SettingsService;
use crate::engine_view::EngineView;
use crate::events::{AccountUpdate, Event, EventBus};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tradeops_brokers::simulated::live::LiveMarket;
use tradeops_core::calendar::MarketCalendar;
use tradeops_core::time::format_ts;
use tradeops_core::Clock;

/// The shortest gap between two `account.updated` events.
const AT_MOST_EVERY: Duration = Duration::from_secs(1);

/// Runs until the engine stops: waits for the engine's view (`views`) to change, publishes the
/// header's figures on `events` when they differ from the last published, then waits out
/// [`AT_MOST_EVERY`] (changes meanwhile are coalesced into the next event). The market time is
/// `market_clock`'s, its session the settings' calendar's; the trading date the `live` feed's,
/// when the simulated market runs.
pub async fn run(
    mut views: watch::Receiver<Arc<EngineView>>,
    settings: Arc<SettingsService>,
    market_clock: Arc<dyn Clock>,
    live: Option<Arc<LiveMarket>>,
    events: Arc<EventBus>,
) {
    let mut last: Option<Value> = None;
    loop {
        if views.changed().await.is_err() {
            return;
        }
        let view = views.borrow_and_update().clone();
        let market_time = market_clock.now();
        let session = MarketCalendar::new(settings.current().runtime.market_calendar).phase(market_time);
        let summary = serde_json::to_value(AccountSummary::of(&view, session)).unwrap_or_default();
        let figures = json!({
            "account": summary,
            "trading_state": view.trading_state,
            "market_minute": format_ts(&tradeops_core::bars::minute_floor(market_time)),
        });
        if last.as_ref() == Some(&figures) {
            continue;
        }
        let trading_date = live.as_ref().and_then(|l| l.status().date);
        events.publish(Event::AccountUpdated(AccountUpdate { view, market_time, trading_date, session }));
        last = Some(figures);
        tokio::time::sleep(AT_MOST_EVERY).await;
    }
}
