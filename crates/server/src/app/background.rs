//! The service's background tasks, started once it listens: health probes, token usage and
//! changes, the database probe, housekeeping, the reference data reload, the account feed, the
//! market session's changes, the
//! simulated market's feed loop, and the job workers unless separate processes run them.

use super::keep_reference_loaded;
use crate::health::Probes;
use crate::http::state::AppState;
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinHandle;

pub(super) fn spawn_background(state: &AppState, probes: Arc<Probes>) -> Vec<JoinHandle<()>> {
    let health = {
        let state = state.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(state.config.health_probe_interval);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                state.health.probe_all(&probes).await;
            }
        })
    };
    let token_usage = {
        let state = state.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(30));
            loop {
                tick.tick().await;
                state.tokens.flush_usage().await;
            }
        })
    };
    // Tokens created or revoked elsewhere (the CLI, another node) take effect within a poll,
    // and on PostgreSQL at once, when their write's notification arrives; a failed poll (the
    // database is down) keeps the tokens already known.
    let announced = Arc::new(tokio::sync::Notify::new());
    let token_notices = state.db.token_change_listener().map(|mut listener| {
        let announced = announced.clone();
        tokio::spawn(async move {
            loop {
                match listener.next().await {
                    // A change, or a (re)connection after which one may have gone unannounced.
                    Ok(_) => announced.notify_one(),
                    Err(e) => {
                        tracing::debug!(error = %e, "cannot listen for token changes; polling only");
                        tokio::time::sleep(Duration::from_secs(1)).await;
                    }
                }
            }
        })
    });
    let token_changes = {
        let state = state.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(crate::domain::tokens::TOKEN_POLL_EVERY);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let mut failing = false;
            loop {
                tokio::select! {
                    _ = tick.tick() => {}
                    _ = announced.notified() => {}
                }
                match state.tokens.refresh().await {
                    Ok(reloaded) => {
                        if reloaded {
                            tracing::debug!("tokens changed in the database; reloaded");
                        }
                        failing = false;
                    }
                    Err(e) if !failing => {
                        failing = true;
                        tracing::warn!(error = %e, "could not look for token changes; known tokens stay valid");
                    }
                    Err(_) => {}
                }
            }
        })
    };
    // Outages are noticed within a second: requests are then refused at once with
    // SERVICE_UNAVAILABLE instead of each waiting for a connection.
    let database = spawn_database_prober(state.db.clone());
    let reference = tokio::spawn(keep_reference_loaded(state.reference.clone()));
    let mut tasks = vec![
        health,
        reference,
        token_usage,
        token_changes,
        database,
        tokio::spawn(crate::housekeeping::run(crate::housekeeping::Housekeeping {
            clock: state.clock.clone(),
            db: state.db.clone(),
            audit: state.audit.clone(),
            audit_store: state.audit_store.clone(),
            refusals: state.refusals.clone(),
            retention_days: state.config.audit.retention_days,
        })),
        tokio::spawn(crate::account_feed::run(
            state.engine().subscribe(),
            state.settings.clone(),
            state.market_clock.clone(),
            state.live.clone(),
            state.events.clone(),
        )),
        tokio::spawn(crate::market_session::run(
            state.settings.clone(),
            state.market_clock.clone(),
            state.events.clone(),
        )),
    ];
    tasks.extend(state.notifier.start(crate::notify::NotifierDeps {
        events: state.events.clone(),
        engine: state.engine().clone(),
        settings: state.settings.clone(),
        audit: state.audit.clone(),
        market_clock: state.market_clock.clone(),
    }));
    if let Some(live) = &state.live {
        tasks.push(tokio::spawn(crate::feed::simulated::run(feed_deps(state), live.clone())));
    }
    // Downloads and backtests, unless `tradeops worker` processes run them (`jobs.run`).
    if state.config.jobs.run {
        tasks.extend(crate::jobs::spawn_workers(&state.jobs));
    }
    tasks.extend(token_notices);
    tasks
}

/// What the live feeds are given of the service.
pub(super) fn feed_deps(state: &AppState) -> crate::feed::FeedDeps {
    crate::feed::FeedDeps {
        settings: state.settings.clone(),
        events: state.events.clone(),
        radar: state.radar.clone(),
        watchlist: state.watchlist.clone(),
        engine: state.engine().clone(),
        market: state.market.clone(),
        market_clock: state.market_clock.clone(),
    }
}

/// The database's prober ([`tradeops_store::Database::probe`]), on a thread of its own with a
/// runtime of its own: its deadline then measures the database, never how long the service's
/// workers, busy with requests and sweeps, take to poll it (a late poll read as no answer was
/// a false outage). It probes every [`tradeops_store::PROBE_EVERY`], and again
/// [`tradeops_store::PROBE_CONFIRM_AFTER`] after a failure. It stops when the returned task
/// is aborted or dropped (with the service).
fn spawn_database_prober(db: tradeops_store::Database) -> JoinHandle<()> {
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let prober = move || {
        let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
            Ok(runtime) => runtime,
            Err(e) => return tracing::error!(error = %e, "the database prober cannot start"),
        };
        runtime.block_on(async move {
            tokio::pin!(stopped);
            let mut pause = Duration::ZERO;
            loop {
                tokio::select! {
                    _ = &mut stopped => return,
                    _ = tokio::time::sleep(pause) => {}
                }
                pause = match db.probe().await {
                    Ok(_) => tradeops_store::PROBE_EVERY,
                    Err(_) => tradeops_store::PROBE_CONFIRM_AFTER,
                };
            }
        });
    };
    if let Err(e) = std::thread::Builder::new().name("database-prober".into()).spawn(prober) {
        tracing::error!(error = %e, "the database prober cannot start");
    }
    tokio::spawn(async move {
        let _running_while_held = stop;
        std::future::pending::<()>().await
    })
}
