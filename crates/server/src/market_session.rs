//! The `market.session` event (CONTRACT §12): published when the market's present enters
//! another session (04:00 pre-market, 09:30 regular, 16:00 after-hours, 20:00 closed, on the
//! NYSE calendar) or another New York date, so the console's session badge and its countdown
//! follow the stream instead of polling `GET /api/market/session`.

use crate::domain::settings::SettingsService;
use crate::events::{Event, EventBus};
use std::sync::Arc;
use std::time::Duration;
use tradeops_core::calendar::MarketCalendar;
use tradeops_core::Clock;

/// How often the market's clock is read. The market's clock may run faster than the wall's
/// (DEMO: 60×, so a change is published within 15 market seconds there) or be moved by a test,
/// so the task looks rather than sleeping until the change it expects.
const LOOK_EVERY: Duration = Duration::from_millis(250);

/// Runs until the service stops: on the calendar the settings name (`runtime.market_calendar`,
/// read each time: a change applies at once) and `market_clock`, publishes the session view
/// whenever its session or date differs from the last one seen. The first look publishes
/// nothing: a console reads the session when it connects.
pub async fn run(settings: Arc<SettingsService>, market_clock: Arc<dyn Clock>, events: Arc<EventBus>) {
    let mut last = None;
    let mut tick = tokio::time::interval(LOOK_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let calendar = MarketCalendar::new(settings.current().runtime.market_calendar);
        let view = calendar.session(market_clock.now());
        let key = (view.session, view.trading_day);
        if last.is_some_and(|seen| seen != key) {
            events.publish(Event::MarketSession(view));
        }
        last = Some(key);
    }
}
