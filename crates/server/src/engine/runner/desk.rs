//! The whole-desk replay: the live engine runner — the same write-ahead orders,
//! risk gate, allocator and paper broker — driven through a simulated trading day on a manual
//! clock, in strict market-time order and as fast as it computes: every report the paper broker
//! schedules (acks, cancels) is delivered at its own due time with the market as it stood, then
//! the feed's next 15-second step is printed and the runner takes it (marks, fills, closed bars
//! to the strategies), then the allocator auto-watches the step's scan. That is the order live
//! PAPER trading at real speed sees them in (its 20 ms tick delivers an ack long before the next
//! print). Not replayed: operator commands and settings changes during the day, and the
//! once-a-second reconciliation (the paper broker's book is the engine's own).

use super::{restore, EngineDeps};
use crate::engine_view::EngineView;
use rust_decimal::Decimal;
use std::sync::Arc;
use tokio::sync::watch;
use tradeops_brokers::simulated::live::LiveMarket;
use tradeops_core::calendar::MarketCalendar;
use tradeops_core::clock::ManualClock;
use tradeops_core::engine::Command;
use tradeops_core::risk::TradingState;
use tradeops_core::{Clock, Symbol, Timestamp};

/// What a replayed stretch of market time left besides what its database holds (orders,
/// executions, violations, the watchlist): the engine's equity at each minute's close.
#[derive(Clone, Debug, Default)]
pub struct DeskOutcome {
    /// Market time and engine equity (cash plus positions at the last trade) at every minute
    /// boundary.
    pub equity: Vec<(Timestamp, Decimal)>,
    pub final_equity: Decimal,
    /// Feed steps taken and radar scans made.
    pub steps: u64,
    pub scans: u64,
    /// The trading state at the end (`REDUCING` once the daily loss limit was reached).
    pub trading_state: TradingState,
}

/// Replays market time `[from, until)` of `live` through a runner restored from `deps` (an
/// empty database: a flat book at `deps.initial_cash`), `clock` being the runner's market clock
/// and the feed's. `progress` hears the fraction done now and then.
pub async fn replay_desk(
    deps: EngineDeps,
    live: Arc<LiveMarket>,
    clock: Arc<ManualClock>,
    from: Timestamp,
    until: Timestamp,
    progress: &mut (dyn FnMut(f64) + Send),
) -> anyhow::Result<DeskOutcome> {
    let (view, _) = watch::channel(Arc::new(EngineView::default()));
    let (mut runner, _unsent) = restore(deps, view).await?;
    let settings = runner.settings.borrow().clone();
    let calendar = MarketCalendar::new(settings.runtime.market_calendar);
    let radar = settings.momentum_radar.clone();
    let mut outcome = DeskOutcome::default();
    clock.set(from);
    // The service's start at `from`: the feed's first call generates the day up to `from` (its
    // warm-up, handed to no one), then trading follows the steps after it — as a service started
    // at `from` trades.
    live.advance_to(from, calendar, &radar);
    let mut scans: Vec<tradeops_brokers::simulated::live::RadarScan> = Vec::new();
    let span = (until - from).num_milliseconds().max(1) as f64;
    let mut reported = 0.0;
    loop {
        outcome.scans += scans.len() as u64;
        if let Some(scan) = scans.last() {
            let ranked: Vec<Symbol> = scan.rows.iter().map(|r| r.symbol.clone()).collect();
            let at = clock.now();
            for symbol in runner.engine.auto_watch_picks(&ranked) {
                // Refusals (the watchlist limit, a block) are the engine's, as live.
                let _ = runner.command(Command::Watch { symbol, source: "RADAR".into() }, at).await;
            }
        }
        let Some(step) = live.next_step().filter(|s| *s < until) else { break };
        // The broker's reports due before the step, each at its own time.
        runner.deliver_due(step, false).await;
        clock.set(step);
        scans = live.advance_to(step, calendar, &radar);
        let bar_closed = step.timestamp().rem_euclid(60) == 0;
        runner.market_step(step, bar_closed).await;
        outcome.steps += 1;
        if bar_closed {
            outcome.equity.push((step, runner.engine.equity()));
            let done = (step - from).num_milliseconds() as f64 / span;
            if done >= reported + 0.05 {
                reported = done;
                progress(done.min(1.0));
            }
        }
        anyhow::ensure!(!runner.books.term_over(), "the replay's database refused its writes");
    }
    // Reports still due by the end (a last ack), then the day as it ended.
    runner.deliver_due(until, false).await;
    clock.set(until);
    runner.broker_reports(until).await;
    outcome.final_equity = runner.engine.equity();
    outcome.trading_state = runner.engine.trading_state();
    Ok(outcome)
}
