//! Building and running the service: storage, cache, tokens, settings, health, router, listener.
//! Tests build exactly this, on port 0.

mod background;
pub(crate) mod brokers;

use background::{feed_deps, spawn_background};

use crate::budget::RateLimiter;
use crate::clock::ScaledClock;
use crate::cluster::Election;
use crate::config::{redact, Config};
use crate::domain::radar::RadarService;
use crate::domain::reference::ReferenceService;
use crate::domain::settings::{RunningBrokers, SettingsService};
use crate::domain::tokens::{generate_token, TokenRegistry};
use crate::domain::watchlist::WatchlistService;
use crate::engine::{CrashPoint, EngineDeps};
use crate::events::EventBus;
use crate::health::{HealthMonitor, Probes};
use crate::http;
use crate::http::state::{AppState, Inner};
use crate::metrics::Metrics;
use anyhow::Context;
use axum::Router;
use brokers::{
    alpaca_execution, alpaca_market_data, audit_broker_choice, check_mode_against_brokers, live_refusal, BrokerChoice,
};
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tradeops_brokers::alpaca::market::AlpacaMarketData;
use tradeops_brokers::paper::{PaperBroker, PaperExecution};
use tradeops_brokers::reference::{ReferenceData, WithReference};
use tradeops_brokers::simulated::live::LiveMarket;
use tradeops_brokers::simulated::SimulatedMarket;
use tradeops_brokers::{ExecutionBroker, MarketData};
use tradeops_core::calendar::MarketCalendar;
use tradeops_core::settings::{ExecutionBrokerKind, MarketDataBrokerKind};
use tradeops_core::{Clock, Role, TradingMode};
use tradeops_store::{Cache, Database, InstanceLock, MemoryCache, RedisCache};

/// Name of the bootstrap admin token.
pub const BOOTSTRAP_TOKEN_NAME: &str = "admin";

/// What tests may replace.
#[derive(Default)]
pub struct Overrides {
    /// Market time (default: by mode).
    pub market_clock: Option<Arc<dyn Clock>>,
    /// Extra routes under the same middleware (tests prove that a panicking handler still
    /// answers with the envelope).
    pub extra_routes: Router<AppState>,
    /// This service's name in the cluster (default: host, process and bind address); a cluster
    /// node names itself by its public address, its service listening inside.
    pub node_id: Option<String>,
    /// Given, while this service waits for the engine's term, the router of the reads it can
    /// answer from the database with no engine ([`http::router::database_reads`]): a cluster
    /// node's front serves them meanwhile.
    pub standby: Option<Box<dyn FnOnce(Router) + Send>>,
}

pub struct Application {
    listener: TcpListener,
    router: Router,
    state: AppState,
    /// The admin token created on this start, to print once.
    bootstrap_token: Option<String>,
    engine_task: JoinHandle<()>,
    /// What the background health probes reach.
    probes: Arc<Probes>,
    /// Alpaca's market data, when it is the source: its feed task runs with the service.
    alpaca_data: Option<Arc<AlpacaMarketData>>,
    /// The hold on a SQLite database, released once the service has closed it.
    instance: Option<InstanceLock>,
    /// The engine's term this service holds: renewed while it runs, released when it stops.
    term: (Election, i64),
    /// The term's renewals, begun as soon as it was taken: the term's window runs from the take,
    /// and the engine's restore may already send.
    renewing: Renewing,
}

/// The renewals of this service's term ([`Election::hold`]) as a task, aborted if the service
/// is dropped without being run; `lost` is told when the term is taken over.
struct Renewing {
    /// Both `None` once handed over ([`Renewing::into_parts`]): nothing left to abort.
    task: Option<JoinHandle<()>>,
    lost: Option<tokio::sync::oneshot::Receiver<()>>,
}

impl Renewing {
    fn start(election: &Election, epoch: i64) -> Renewing {
        let (lost_tx, lost) = tokio::sync::oneshot::channel::<()>();
        let holder = election.clone();
        let task = tokio::spawn(async move {
            holder.hold(epoch).await;
            let _ = lost_tx.send(());
        });
        Renewing { task: Some(task), lost: Some(lost) }
    }

    /// The task (to stop with the service's others) and the notice of a takeover.
    fn into_parts(mut self) -> (JoinHandle<()>, tokio::sync::oneshot::Receiver<()>) {
        let task = self.task.take().expect("handed over once");
        let lost = self.lost.take().expect("handed over once");
        (task, lost)
    }
}

impl Drop for Renewing {
    fn drop(&mut self) {
        if let Some(task) = &self.task {
            task.abort();
        }
    }
}

impl Application {
    pub async fn build(config: Config, clock: Arc<dyn Clock>) -> anyhow::Result<Application> {
        Self::build_with(config, clock, Overrides::default()).await
    }

    /// Like [`Application::build`], with test overrides.
    pub async fn build_with(
        config: Config,
        clock: Arc<dyn Clock>,
        overrides: Overrides,
    ) -> anyhow::Result<Application> {
        Self::assemble(config, clock, overrides, None).await
    }

    /// Like [`Application::build_with`], trading through `execution` instead of the configured
    /// execution broker (tests: a venue that refuses or cannot be reached on cue).
    pub async fn build_with_execution(
        config: Config,
        clock: Arc<dyn Clock>,
        overrides: Overrides,
        execution: Arc<dyn ExecutionBroker>,
    ) -> anyhow::Result<Application> {
        Self::assemble(config, clock, overrides, Some(execution)).await
    }

    async fn assemble(
        config: Config,
        clock: Arc<dyn Clock>,
        overrides: Overrides,
        execution: Option<Arc<dyn ExecutionBroker>>,
    ) -> anyhow::Result<Application> {
        let extra = overrides.extra_routes;
        let node = overrides.node_id.unwrap_or_else(|| node_id(&config));
        // One service per SQLite file (its engine is the only writer of trading state): a second
        // is refused here, naming the first, before anything is opened.
        let holder = format!("pid {}, starting", std::process::id());
        let instance = InstanceLock::acquire(&config.database_url, &holder).map_err(|e| anyhow::anyhow!("{e}"))?;
        let db = Database::open(&config.database_url)
            .await
            .with_context(|| format!("opening the database {}", redact(&config.database_url)))?;
        let cache: Arc<dyn Cache> = match &config.redis_url {
            Some(url) => Arc::new(RedisCache::new(url, &config.cache_key_prefix)?),
            None => Arc::new(MemoryCache::new()),
        };
        let tokens = TokenRegistry::load(Arc::new(db.clone())).await.map_err(|e| anyhow::anyhow!("{e}"))?;
        let bootstrap_token = bootstrap_admin(&config, &tokens, clock.as_ref()).await?;
        let settings = SettingsService::load(Arc::new(db.clone()), clock.clone(), config.auth.enabled)
            .await
            .map_err(|e| anyhow::anyhow!("loading settings: {e}"))?;
        if let Some(mode) = config.mode {
            settings.apply_configured_mode(mode).await.map_err(|e| anyhow::anyhow!("{e}"))?;
        }
        let mode = settings.mode();
        check_mode_against_brokers(mode, &config)?;
        let settings = Arc::new(settings);
        let calendar = MarketCalendar::new(settings.current().runtime.market_calendar);
        let speed = market_speed(&config, mode);
        // DEMO resumes from the latest market time anything was persisted with: a restart never
        // rewinds the market.
        let resume_at = {
            let repo: &dyn tradeops_store::TradingRepository = &db;
            repo.latest_market_time().await?.map(tradeops_core::time::from_epoch_ms)
        };
        let market_clock: Arc<dyn Clock> = match overrides.market_clock {
            Some(c) => c,
            None => market_clock(&config, mode, calendar, resume_at, &clock),
        };
        // The adapters chosen by configuration, passed to the engine runner explicitly.
        let mut alpaca_data: Option<Arc<AlpacaMarketData>> = None;
        // Imported float and sector, laid over whatever the source says (radar, instruments,
        // trade features, backtest history), loaded before the first scan.
        let reference_data = Arc::new(ReferenceData::default());
        let reference = Arc::new(ReferenceService::new(Arc::new(db.clone()), reference_data.clone()));
        reference.reload().await.map_err(|e| anyhow::anyhow!("loading the imported reference data: {e}"))?;
        let (source, live): (Arc<dyn MarketData>, _) = match config.brokers.market_data() {
            MarketDataBrokerKind::Simulated => {
                let mut simulated = SimulatedMarket::new(config.sim.seed, config.sim.symbols as usize);
                let mut live = LiveMarket::new(simulated.universe.clone(), speed, clock.clone())
                    .with_reference(reference_data.clone());
                if !config.sim.reference_data {
                    simulated = simulated.without_reference_data();
                    live = live.without_reference_data();
                }
                let live = Arc::new(live);
                (Arc::new(simulated.with_live(live.clone())), Some(live))
            }
            MarketDataBrokerKind::Alpaca => {
                let alpaca = alpaca_market_data(&config.alpaca, mode, reference_data.clone(), clock.clone(), true)?;
                alpaca_data = Some(alpaca.clone());
                (alpaca, None)
            }
        };
        let market: Arc<dyn MarketData> = Arc::new(WithReference::new(source, reference_data.clone()));
        let execution: Arc<dyn ExecutionBroker> = match (execution, config.brokers.execution()) {
            (Some(given), _) => given,
            (None, ExecutionBrokerKind::Paper) => {
                let book = PaperBroker::new(config.paper.broker_config());
                // Ids of this start never collide with stored ones.
                let prefix = format!("{}-", tradeops_core::time::to_epoch_ms(&clock.now()));
                Arc::new(PaperExecution::new(book.with_id_prefix(&prefix)))
            }
            (None, ExecutionBrokerKind::Alpaca) => {
                let from = resume_at.unwrap_or_else(|| clock.now()) - chrono::Duration::minutes(1);
                alpaca_execution(&config.alpaca, mode, from, clock.clone())?
            }
        };
        settings
            .apply_running_brokers(RunningBrokers {
                execution: config.brokers.execution(),
                market_data: config.brokers.market_data(),
                live_refusal: live_refusal(&config, mode),
            })
            .await
            .map_err(|e| anyhow::anyhow!("recording the broker adapters in the settings: {e}"))?;
        let events = Arc::new(EventBus::new(market_clock.clone(), clock.clone(), settings.subscribe()));
        let radar = Arc::new(RadarService::new(cache.clone(), Arc::new(db.clone())));
        let metrics = Arc::new(Metrics::new(clock.clone()));
        let jobs = crate::jobs::Jobs::new(crate::jobs::JobContext {
            db: db.clone(),
            events: events.clone(),
            market: market.clone(),
            reference: reference_data,
            settings: settings.subscribe(),
            clock: clock.clone(),
            market_clock: market_clock.clone(),
            limits: job_limits(&config),
            worker: crate::jobs::worker_name(&node),
            downloads: Default::default(),
            backtests: Default::default(),
            sweeps: Default::default(),
            desk: desk_source(&config),
            sweep_threads: Default::default(),
            walk_forward_findings: Default::default(),
        });
        let audit = crate::audit_outbox::AuditOutbox::wrap(Arc::new(db.clone()));
        let audit_store: Arc<dyn tradeops_store::AuditRepository> = Arc::new(db.clone());
        // The service's state around an engine: the running one once this service holds the
        // term, or none while it waits for it (its reads need none).
        let console_url = config.advertise_url.clone().unwrap_or_else(|| format!("http://{}", config.bind));
        let notifier_on = |db: tradeops_store::Database, term: Arc<crate::cluster::Term>| {
            crate::notify::Notifier::new(&config.notifications, console_url.clone(), db, term, clock.clone())
        };
        let state_around = |engine: crate::engine::EngineHandle, tokens: TokenRegistry, notifier| {
            AppState::new(Inner {
                notifier,
                radar: radar.clone(),
                reference: reference.clone(),
                watchlist: WatchlistService::new(Arc::new(db.clone()), market_clock.clone()),
                market: market.clone(),
                execution_broker: execution.name(),
                live: live.clone(),
                events: events.clone(),
                market_clock: market_clock.clone(),
                engine,
                jobs: jobs.clone(),
                trade_cache: Default::default(),
                order_pages: Default::default(),
                rate_limiter: RateLimiter::new(config.auth.rate_limit_per_second, config.auth.rate_limit_burst),
                client_limiter: crate::http::client_limit::ClientLimiter::new(
                    config.auth.anonymous_rate_limit_per_second,
                    config.auth.anonymous_rate_limit_burst,
                ),
                refusals: Default::default(),
                audit: audit.clone(),
                audit_store: audit_store.clone(),
                config: config.clone(),
                clock: clock.clone(),
                db: db.clone(),
                cache: cache.clone(),
                tokens,
                settings: settings.clone(),
                health: HealthMonitor::default(),
                metrics: metrics.clone(),
            })
        };
        if let Some(standby) = overrides.standby {
            let tokens = TokenRegistry::load(Arc::new(db.clone())).await.map_err(|e| anyhow::anyhow!("{e}"))?;
            let reads = state_around(
                crate::engine::EngineHandle::detached(),
                tokens,
                notifier_on(db.clone(), Arc::new(crate::cluster::Term::sole())),
            );
            standby(http::router::database_reads(reads));
        }
        // This engine's term: it writes trading state only while no newer engine has
        // taken the database over. On PostgreSQL, where several services may share the
        // database, the term is elected: this service waits while another holds it (a hot
        // standby) and takes it over once released or left unrenewed. On SQLite (one service
        // per file) it is taken at once.
        let election = Election::new(db.clone(), node.clone(), clock.clone());
        let epoch = election.acquire().await.map_err(|e| anyhow::anyhow!("starting the engine's term: {e}"))?;
        tracing::info!(epoch, node = %election.node_id(), "the engine's term begins");
        let renewing = Renewing::start(&election, epoch);
        // Event ids grow across terms; on PostgreSQL the last term's events come first, so a
        // stream resumes across a failover.
        if db.backend() == tradeops_store::Backend::Postgres {
            events.preload(http::event_log::earlier_events(&db).await);
        }
        events.continue_after(u64::try_from(epoch).unwrap_or_default() << 32);
        let engine_deps = EngineDeps {
            db: db.fenced(epoch),
            settings: settings.subscribe(),
            events: events.clone(),
            market_clock: market_clock.clone(),
            initial_cash: config.paper.initial_cash,
            crash_point: CrashPoint::from_env(),
            broker: execution.clone(),
            market: market.clone(),
            term: election.term(),
            node: election.node_id().to_string(),
        };
        if let Some(live) = &live {
            crate::feed::simulated::warm_up(market_clock.as_ref(), &settings, &radar, live.clone()).await?;
        }
        let chosen = BrokerChoice { execution: execution.name(), market_data: market.name() };
        audit_broker_choice(&config, chosen, audit.as_ref(), audit_store.as_ref(), &settings, &market_clock, &clock)
            .await;
        let (engine, engine_task) =
            crate::engine::spawn_engine(engine_deps).await.context("restoring the trading engine")?;
        // Notifications are recorded on the engine's term: a deposed leader sends nothing more.
        let state = state_around(engine.clone(), tokens, notifier_on(db.fenced(epoch), election.term()));
        let probes = Arc::new(Probes {
            clock: clock.clone(),
            events,
            db: state.db.clone(),
            audit: state.audit.clone(),
            cache: state.cache.clone(),
            metrics,
            bind: state.config.bind,
            market,
            live: state.live.clone(),
            market_clock: state.market_clock.clone(),
            settings,
            radar,
            engine,
            execution: execution.clone(),
            term: (election.node_id().to_string(), epoch),
        });
        state.health.watch_database(state.db.clone());
        state.health.probe_all(&probes).await;

        let listener =
            TcpListener::bind(state.config.bind).await.with_context(|| format!("binding {}", state.config.bind))?;
        if let Ok(addr) = listener.local_addr() {
            state.health.listening_on(addr);
            if let Some(lock) = &instance {
                lock.describe(&format!("pid {}, listening on {addr}", std::process::id()));
            }
        }
        let router = http::router::router(state.clone(), extra);
        let term = (election, epoch);
        Ok(Application {
            listener,
            router,
            state,
            bootstrap_token,
            engine_task,
            probes,
            alpaca_data,
            instance,
            term,
            renewing,
        })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.listener.local_addr().expect("a bound listener has an address")
    }

    pub fn state(&self) -> &AppState {
        &self.state
    }

    pub fn bootstrap_token(&self) -> Option<&str> {
        self.bootstrap_token.as_deref()
    }

    /// Serves until `shutdown` resolves, then stops taking connections, lets in-flight requests
    /// finish (up to the configured grace), persists pending state and closes the database.
    pub async fn run_until_stopped(self, shutdown: impl Future<Output = ()> + Send + 'static) -> anyhow::Result<()> {
        self.run(shutdown, None).await
    }

    /// The API this service answers with once it leads: a cluster node's front switches to it
    /// before the node says it leads, so no request in between is refused as leaderless.
    pub fn router(&self) -> Router {
        self.router.clone()
    }

    /// This service's name in the cluster and the engine's term it holds.
    pub fn term(&self) -> (&str, i64) {
        (self.term.0.node_id(), self.term.1)
    }

    /// Like [`Application::run_until_stopped`], behind a cluster node's `front` (which this
    /// service's router now answers for), and stopping also when this service's term is taken
    /// over: its engine has stopped, and the process is to be restarted as a follower.
    pub async fn run_behind(
        self,
        front: Arc<crate::http::front::Front>,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> anyhow::Result<()> {
        self.run(shutdown, Some(front)).await
    }

    async fn run(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
        front: Option<Arc<crate::http::front::Front>>,
    ) -> anyhow::Result<()> {
        let Application { listener, router, state, engine_task, probes, alpaca_data, instance, term, renewing, .. } =
            self;
        let mut background = spawn_background(&state, probes);
        let (election, epoch) = term;
        let (renewals, lost_rx) = renewing.into_parts();
        background.push(renewals);
        let shutdown: std::pin::Pin<Box<dyn Future<Output = ()> + Send>> = match &front {
            Some(front) => {
                front.lead(router.clone());
                Box::pin(async move {
                    tokio::select! {
                        _ = shutdown => {}
                        Ok(()) = lost_rx => {
                            tracing::error!("this node's term was taken over: it stops, to be restarted as a follower");
                        }
                    }
                })
            }
            None => Box::pin(shutdown),
        };
        let node = election.node_id().to_string();
        // A cluster node's front heartbeats for the node already, leading or following.
        if front.is_none() {
            let (db, clock) = (state.db.clone(), state.clock.clone());
            background.push(tokio::spawn(crate::cluster::heartbeat(db, node.clone(), "serve", None, clock)));
        }
        if state.db.backend() == tradeops_store::Backend::Postgres {
            let (events, db, clock) = (state.events.clone(), state.db.clone(), state.clock.clone());
            background.push(tokio::spawn(http::event_log::keep_events(events, db, clock)));
            background.push(tokio::spawn(crate::jobs::relay_worker_updates(state.jobs.clone())));
        }
        if let Some(alpaca) = alpaca_data {
            background.push(tokio::spawn(crate::feed::alpaca::run_marks(feed_deps(&state), alpaca.clone())));
            background.push(tokio::spawn(crate::feed::alpaca::run_scans(feed_deps(&state), alpaca)));
        }
        let mut engine_task = engine_task;
        let grace = state.config.shutdown_grace;
        let (stopping_tx, stopping_rx) = tokio::sync::oneshot::channel::<()>();
        let service = router.into_make_service_with_connect_info::<SocketAddr>();
        let server = axum::serve(listener, service).with_graceful_shutdown(async move {
            shutdown.await;
            tracing::info!("shutting down: finishing in-flight requests");
            let _ = stopping_tx.send(());
        });
        let server = tokio::spawn(async move { server.await });
        let result = tokio::select! {
            r = server => r.context("server task")?.context("serving"),
            _ = async { let _ = stopping_rx.await; tokio::time::sleep(grace).await } => {
                tracing::warn!(?grace, "in-flight requests did not finish within the grace period");
                Ok(())
            }
        };
        // Its term taken over, the engine first hands an emergency halt it could not store to
        // the next leader (`Runner::hand_over_halt`; the database just answered): waited for.
        let handing_over = election.term().is_over();
        if !handing_over || tokio::time::timeout(HAND_OVER_WAIT, &mut engine_task).await.is_err() {
            if handing_over {
                tracing::error!(wait = ?HAND_OVER_WAIT, "the engine did not stop in time: an unstored halt may not be handed over");
            }
            // Still running: stopped with the rest (a finished task is not awaited again).
            background.push(engine_task);
        }
        for task in &background {
            task.abort();
        }
        for task in background {
            let _ = task.await;
        }
        // The engine has stopped: a service waiting for the term takes it at once.
        election.release(epoch).await;
        crate::cluster::leave(&state.db, &node).await;
        if state.config.jobs.run {
            state.jobs.release_held().await;
        }
        state.tokens.flush_usage().await;
        // Every refusal counted so far reaches the audit log, whatever minute it is; then the
        // rows held during a database outage are written.
        state.refusals.flush(state.audit_store.as_ref(), state.clock.now().timestamp_millis(), true).await;
        state.audit.flush_held().await;
        state.db.close().await;
        drop(instance);
        tracing::info!("stopped");
        result
    }
}

/// How long a node whose term was taken over waits for its engine to hand over an emergency
/// halt it could not store, before it exits.
const HAND_OVER_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// What this service calls itself where it takes the engine's term: its host, process and
/// address.
pub(crate) fn node_id(config: &Config) -> String {
    format!("{}:{}", host_and_process(), config.bind)
}

/// `host:pid` of this process.
pub(crate) fn host_and_process() -> String {
    format!("{}:{}", host_name(), std::process::id())
}

/// This machine's host name (`localhost` when it cannot be read).
pub(crate) fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".into())
}

async fn bootstrap_admin(config: &Config, tokens: &TokenRegistry, clock: &dyn Clock) -> anyhow::Result<Option<String>> {
    let now = clock.now().timestamp_millis();
    let fail = |e: crate::domain::DomainError| anyhow::anyhow!("bootstrap admin token: {e}");
    if let Some(secret) = &config.auth.admin_token {
        if tokens.resolve(secret, now).is_none() {
            tokens.replace(BOOTSTRAP_TOKEN_NAME, Role::Admin, secret, "config", now).await.map_err(fail)?;
        }
        return Ok(None);
    }
    if config.auth.enabled && tokens.is_empty() {
        let secret = generate_token();
        tokens.create(BOOTSTRAP_TOKEN_NAME, Role::Admin, &secret, "bootstrap", now).await.map_err(fail)?;
        return Ok(Some(secret));
    }
    Ok(None)
}

/// The market's time by configuration and mode: a real market's is the wall clock's (CONTRACT
/// §10); DEMO's runs at the configured speed from 09:25 New York of the current trading day, or
/// from `resume_at` (the latest market time anything was stored with) when that is later, so a
/// restart never rewinds it.
pub(crate) fn market_clock(
    config: &Config,
    mode: TradingMode,
    calendar: MarketCalendar,
    resume_at: Option<tradeops_core::Timestamp>,
    clock: &Arc<dyn Clock>,
) -> Arc<dyn Clock> {
    let speed = market_speed(config, mode);
    if config.brokers.market_data() == MarketDataBrokerKind::Alpaca {
        clock.clone()
    } else if mode == TradingMode::Demo {
        let start = demo_start(calendar, clock.now()).max(resume_at.unwrap_or_default());
        Arc::new(ScaledClock::starting_at(start, speed))
    } else if speed != 1.0 {
        Arc::new(ScaledClock::starting_at(clock.now(), speed))
    } else {
        clock.clone()
    }
}

/// Simulated seconds per real second: configured, else 60 in DEMO and 1 otherwise.
pub(crate) fn market_speed(config: &Config, mode: TradingMode) -> f64 {
    config.sim.speed.unwrap_or(if mode == TradingMode::Demo { 60.0 } else { 1.0 })
}

/// What desk replays run on: the paper broker's fill model, and the simulated market they
/// regenerate when it is the data broker.
pub(crate) fn desk_source(config: &Config) -> crate::jobs::desk::DeskSource {
    crate::jobs::desk::DeskSource {
        simulated: (config.brokers.market_data() == MarketDataBrokerKind::Simulated).then_some(
            crate::jobs::desk::SimulatedSource {
                seed: config.sim.seed,
                symbols: config.sim.symbols as usize,
                reference_data: config.sim.reference_data,
            },
        ),
        paper: config.paper.broker_config(),
    }
}

/// What the `[jobs]` configuration lets this process run.
pub(crate) fn job_limits(config: &Config) -> crate::jobs::JobLimits {
    crate::jobs::JobLimits {
        lease: chrono::Duration::from_std(config.jobs.lease).unwrap_or(crate::jobs::LEASE),
        backtest_parallel: config.jobs.backtest_parallel,
        download_parallel: config.jobs.download_parallel,
    }
}

/// Reloads the imported reference data every [`crate::domain::reference::RELOAD_EVERY`]: imports
/// by the CLI or another process reach this one within a reload.
pub(crate) async fn keep_reference_loaded(service: Arc<ReferenceService>) {
    let mut tick = tokio::time::interval(crate::domain::reference::RELOAD_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    loop {
        tick.tick().await;
        if let Err(e) = service.reload().await {
            tracing::debug!(error = %e, "imported reference data not reloaded; the loaded data stays");
        }
    }
}

/// DEMO starts its market at 09:25 New York of the current (or last) trading day.
fn demo_start(calendar: MarketCalendar, now: tradeops_core::Timestamp) -> tradeops_core::Timestamp {
    let today = calendar.date_of(now);
    let date = if calendar.is_trading_day(today) { today } else { calendar.previous_trading_day(today) };
    match calendar.trading_day(date) {
        Some(day) if calendar.kind() == tradeops_core::settings::MarketCalendarKind::Nyse => {
            day.regular_open - chrono::Duration::minutes(5)
        }
        _ => {
            let open = date.and_hms_opt(9, 25, 0).expect("valid time");
            chrono::TimeZone::from_local_datetime(&chrono_tz::America::New_York, &open)
                .earliest()
                .map(|t| t.to_utc())
                .unwrap_or(now)
        }
    }
}

/// Registers SIGINT and SIGTERM handlers now (so a signal during start-up is not lost) and
/// returns a future that resolves when either arrives.
pub fn shutdown_signal() -> std::io::Result<impl Future<Output = ()> + Send + 'static> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let mut interrupt = signal(SignalKind::interrupt())?;
        let mut terminate = signal(SignalKind::terminate())?;
        Ok(async move {
            tokio::select! { _ = interrupt.recv() => {}, _ = terminate.recv() => {} }
        })
    }
    #[cfg(not(unix))]
    {
        Ok(async {
            let _ = tokio::signal::ctrl_c().await;
        })
    }
}
