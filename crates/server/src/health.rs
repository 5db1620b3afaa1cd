//! Component health (CONTRACT §3): every component is probed with a real round trip whose
//! latency is measured — the API over its own listener (what a load balancer sees), the market
//! data adapter with a bar request, the risk manager and the execution broker through the
//! engine runner's queue (every command and order takes it), the cache with a ping, the database
//! by its own prober's round trips (the one judge of whether it is down) — and `last_ok_at` is
//! when it was last healthy. A component that cannot be probed says
//! why (`unprobed_reason`, with `latency_ms` null). Probes run in the background every
//! `health.probe_interval_ms`; requests read the latest results, so a health check never waits
//! on a slow dependency. The trading state is read from the engine at request time, the one
//! source `/api/health`, the risk manager's row and `/api/risk/state` share. The probes reach
//! only what they are given ([`Probes`], built by [`crate::app`] once the engine runs).

use crate::domain::radar::RadarService;
use crate::domain::settings::SettingsService;
use crate::engine::EngineHandle;
use crate::events::{Event, EventBus, HealthChange, HealthStatus};
use crate::metrics::Metrics;
use serde::Serialize;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, RwLock};
use std::time::Duration;
use tradeops_brokers::simulated::live::LiveMarket;
use tradeops_brokers::MarketData;
use tradeops_core::risk::TradingState;
use tradeops_core::time::format_ts;
use tradeops_core::{Clock, Timestamp};
use tradeops_store::{AuditRepository, Cache, Database};

/// One row of `GET /api/health/components`.
#[derive(Clone, Debug, Serialize, utoipa::ToSchema)]
pub struct ComponentHealth {
    pub name: String,
    pub status: HealthStatus,
    /// Latency of the last probe, in milliseconds; `null` when it could not be measured.
    pub latency_ms: Option<f64>,
    /// Why the last probe measured no latency (not listening yet, no answer, an error).
    pub unprobed_reason: Option<String>,
    /// When the component was last seen healthy.
    pub last_ok_at: Option<String>,
    #[schema(value_type = Object)]
    pub detail: Value,
}

/// Component keys, in the order they are listed.
/// `cluster` is listed only on PostgreSQL (CONTRACT §10), where several processes may share
/// the database.
pub const COMPONENTS: [&str; 7] =
    ["api", "data_broker", "execution_broker", "risk_manager", "cache", "database", "cluster"];

/// A database probe slower than this is `DEGRADED`.
const SLOW_DATABASE: Duration = Duration::from_millis(500);
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

#[derive(Default)]
pub struct HealthMonitor {
    components: RwLock<BTreeMap<&'static str, ComponentHealth>>,
    /// Where the API listens (set once bound): the API probe's address.
    api_addr: std::sync::OnceLock<SocketAddr>,
    /// The database whose prober's verdict the `database` row reads at request time (set once
    /// built): a stopped database is `DOWN` (and `/api/health` 503) as soon as requests are
    /// refused, not at the next round of probes.
    database: std::sync::OnceLock<Database>,
}

/// What the probes reach and read, built once the engine runs (by [`crate::app`]).
pub struct Probes {
    /// Wall time: when a component was last healthy.
    pub clock: Arc<dyn Clock>,
    /// Where `health.changed` is published.
    pub events: Arc<EventBus>,
    pub db: Database,
    /// The audit log as actions write it (its rows held during a database outage).
    pub audit: Arc<dyn AuditRepository>,
    pub cache: Arc<dyn Cache>,
    /// The API's request counters and uptime.
    pub metrics: Arc<Metrics>,
    /// The configured listen address (the API's detail).
    pub bind: SocketAddr,
    /// The `data_broker` adapter, and the simulated market's live feed when it runs.
    pub market: Arc<dyn MarketData>,
    pub live: Option<Arc<LiveMarket>>,
    /// Market time, for the market data probe's bar request.
    pub market_clock: Arc<dyn Clock>,
    pub settings: Arc<SettingsService>,
    /// The radar's latest scan (the data broker's detail).
    pub radar: Arc<RadarService>,
    /// The engine runner: the risk manager and the execution broker are probed through it.
    pub engine: EngineHandle,
    /// The `execution_broker` adapter (owned by the engine runner; health reads only its name
    /// and its event connection).
    pub execution: Arc<dyn tradeops_brokers::ExecutionBroker>,
    /// This service's name in the cluster and the engine's term it holds.
    pub term: (String, i64),
}

struct Probe {
    status: HealthStatus,
    /// The measured round trip, or why there is none.
    latency: Result<Duration, String>,
    detail: Value,
}

impl HealthMonitor {
    /// Records where the API listens, so the API probe can reach it.
    pub fn listening_on(&self, addr: SocketAddr) {
        let _ = self.api_addr.set(addr);
    }

    /// Has the `database` row's status read from `db`'s prober when asked (see the field).
    pub fn watch_database(&self, db: Database) {
        let _ = self.database.set(db);
    }

    /// The latest result of every component, in [`COMPONENTS`] order.
    pub fn snapshot(&self) -> Vec<ComponentHealth> {
        let components = self.components.read().unwrap_or_else(|e| e.into_inner());
        COMPONENTS
            .iter()
            .filter_map(|name| components.get(name).cloned())
            .map(|mut c| {
                c.status = self.status_now(c.name.as_str(), c.status);
                c
            })
            .collect()
    }

    /// Each component's status alone (what `GET /api/health` needs, without cloning details).
    pub fn statuses(&self) -> Vec<(&'static str, HealthStatus)> {
        let components = self.components.read().unwrap_or_else(|e| e.into_inner());
        COMPONENTS
            .iter()
            .filter_map(|name| components.get(name).map(|c| (*name, self.status_now(name, c.status))))
            .collect()
    }

    /// A component's status as of now: the database's from its prober's verdict, any other's
    /// as its last probe recorded it.
    fn status_now(&self, name: &str, recorded: HealthStatus) -> HealthStatus {
        match self.database.get() {
            Some(db) if name == "database" => database_status(&db.probe_report()),
            _ => recorded,
        }
    }

    /// The worst status among enabled components.
    pub fn overall(statuses: impl IntoIterator<Item = HealthStatus>) -> HealthStatus {
        statuses.into_iter().filter(|s| *s != HealthStatus::Disabled).max().unwrap_or(HealthStatus::Healthy)
    }

    /// Runs every probe once and records the results.
    pub async fn probe_all(&self, state: &Probes) {
        let now = state.clock.now();
        let (database, cache, api, feed, engine, cluster) = tokio::join!(
            probe_database(state),
            probe_cache(state),
            probe_api(state, self.api_addr.get().copied()),
            probe_feed(state),
            probe_engine(&state.engine),
            probe_cluster(state),
        );
        let cluster = cluster.map(|probe| ("cluster", probe));
        let results = [
            ("api", api),
            ("data_broker", feed),
            ("execution_broker", probe_execution(state, &engine)),
            ("risk_manager", probe_risk_manager(state, &engine).await),
            ("cache", cache),
            ("database", database),
        ]
        .into_iter()
        .chain(cluster);
        let mut changes = Vec::new();
        {
            let mut components = self.components.write().unwrap_or_else(|e| e.into_inner());
            for (name, probe) in results {
                if let Some(change) = self.record(&mut components, name, probe, now) {
                    changes.push(change);
                }
            }
        }
        for change in changes {
            state.events.publish(Event::HealthChanged(change));
        }
    }

    /// Records a probe; returns the `health.changed` event when the status changed.
    fn record(
        &self,
        components: &mut BTreeMap<&'static str, ComponentHealth>,
        name: &'static str,
        probe: Probe,
        now: Timestamp,
    ) -> Option<HealthChange> {
        let previous = components.get(name);
        let last_ok_at = if probe.status == HealthStatus::Healthy {
            Some(format_ts(&now))
        } else {
            previous.and_then(|p| p.last_ok_at.clone())
        };
        let change = previous.filter(|p| p.status != probe.status).map(|prev| {
            tracing::warn!(component = name, from = ?prev.status, to = ?probe.status, detail = %probe.detail, "health changed");
            HealthChange { component: name, from: prev.status, to: probe.status, detail: probe.detail.clone() }
        });
        components.insert(
            name,
            ComponentHealth {
                name: name.to_string(),
                status: probe.status,
                latency_ms: probe.latency.as_ref().ok().map(|d| (d.as_secs_f64() * 1e6).round() / 1e3),
                unprobed_reason: probe.latency.err(),
                last_ok_at,
                detail: probe.detail,
            },
        );
        change
    }
}

/// The database as its prober found it ([`tradeops_store::Database::probe_report`]: a round trip
/// on a connection of its own every 250 ms, on a thread of its own), with the audit rows held in
/// memory until it answers again (written within half a second of its return). It is `DOWN`
/// exactly while the store refuses operations as unavailable — after probes failed in a row —
/// so health and the 503s it explains never disagree; one failed probe alone is `DEGRADED`
/// (suspect), as is a slow round trip. Reading the prober's verdict (rather than probing here
/// too) keeps one judge: a second prober's timeouts once counted towards the first's.
async fn probe_database(state: &Probes) -> Probe {
    let backend = state.db.backend().name();
    let held = state.audit.held_rows();
    let mut report = state.db.probe_report();
    if report.round_trip.is_none() && report.error.is_none() {
        // Not probed yet: the first health round runs while the service starts, before its
        // prober does. One probe now (bounded by the store), so the row shows a round trip.
        let _ = state.db.probe().await;
        report = state.db.probe_report();
    }
    let mut detail = json!({"backend": backend, "audit_rows_held": held});
    if let Some(error) = &report.error {
        detail["error"] = json!(error);
        detail["failed_probes_in_a_row"] = json!(report.failures);
    }
    let latency = match (&report.error, report.round_trip) {
        (Some(error), _) => Err(format!("the probe failed: {error}")),
        (None, Some(round_trip)) => Ok(round_trip),
        (None, None) => Err("not probed yet".to_string()),
    };
    Probe { status: database_status(&report), latency, detail }
}

/// The `database` component's status from what the prober found (see [`probe_database`]).
fn database_status(report: &tradeops_store::ProbeReport) -> HealthStatus {
    match report {
        r if !r.available => HealthStatus::Down,
        r if r.failures > 0 => HealthStatus::Degraded,
        r if r.round_trip.is_some_and(|t| t > SLOW_DATABASE) => HealthStatus::Degraded,
        _ => HealthStatus::Healthy,
    }
}

fn no_answer() -> String {
    format!("no answer within {PROBE_TIMEOUT:?}")
}

/// The cluster on PostgreSQL (`None` on SQLite): this node's role — `leader` while
/// it holds the engine's current term, else `follower` (its term was taken over: its engine
/// stopped, and it is `DOWN` until restarted as a standby) — the leader, the epoch, the leader's
/// last renewal and the members with their heartbeats. `DEGRADED` while a member's heartbeat is
/// stale (a process killed or paused, forgotten after a minute) or the database cannot be read.
async fn probe_cluster(state: &Probes) -> Option<Probe> {
    if state.db.backend() != tradeops_store::Backend::Postgres {
        return None;
    }
    let (node, epoch) = &state.term;
    let started = tokio::time::Instant::now();
    let read = async {
        Ok::<_, tradeops_store::StoreError>((state.db.engine_lease().await?, state.db.cluster_members().await?))
    };
    let (lease, members) = match tokio::time::timeout(PROBE_TIMEOUT, read).await {
        Ok(Ok(found)) => found,
        // The database's own component reports an outage: the cluster's state is unknown
        // meanwhile, not broken (the term is fenced, and renewed again once it is back).
        Ok(Err(e)) => {
            let error = e.to_string();
            let detail = json!({"node": node, "epoch": epoch, "error": error});
            return Some(Probe {
                status: HealthStatus::Degraded,
                latency: Err(format!("the probe failed: {e}")),
                detail,
            });
        }
        Err(_) => {
            let detail = json!({"node": node, "epoch": epoch, "error": no_answer()});
            return Some(Probe { status: HealthStatus::Degraded, latency: Err(no_answer()), detail });
        }
    };
    let latency = started.elapsed();
    let now = state.clock.now().timestamp_millis();
    let leader = lease.epoch == *epoch && lease.node_id.as_deref() == Some(node.as_str());
    let stale_after = crate::cluster::MEMBER_STALE_AFTER.as_millis() as i64;
    let members: Vec<Value> = members
        .iter()
        .map(|m| {
            let age = (now - m.heartbeat_at).max(0);
            json!({
                "node": m.node_id,
                "kind": m.kind,
                "started_at": format_ts(&tradeops_core::time::from_epoch_ms(m.started_at)),
                "last_heartbeat": format_ts(&tradeops_core::time::from_epoch_ms(m.heartbeat_at)),
                "heartbeat_age_ms": age,
                "stale": age > stale_after,
            })
        })
        .collect();
    let stale = members.iter().any(|m| m["stale"] == true);
    let status = match (leader, stale) {
        (false, _) => HealthStatus::Down,
        (true, true) => HealthStatus::Degraded,
        (true, false) => HealthStatus::Healthy,
    };
    let detail = json!({
        "role": if leader { "leader" } else { "follower" },
        "node": node,
        "leader": lease.node_id,
        "epoch": lease.epoch,
        "last_heartbeat": lease.renewed_at.map(|ms| format_ts(&tradeops_core::time::from_epoch_ms(ms))),
        "members": members,
    });
    Some(Probe { status, latency: Ok(latency), detail })
}

/// The cache is an accelerator: when it is unreachable the service keeps working, `DEGRADED`.
async fn probe_cache(state: &Probes) -> Probe {
    let backend = state.cache.backend();
    match tokio::time::timeout(PROBE_TIMEOUT, state.cache.ping()).await {
        Ok(Ok(latency)) => {
            Probe { status: HealthStatus::Healthy, latency: Ok(latency), detail: json!({"backend": backend}) }
        }
        Ok(Err(e)) => Probe {
            status: HealthStatus::Degraded,
            latency: Err(format!("the probe failed: {e}")),
            detail: json!({"backend": backend, "error": e.to_string()}),
        },
        Err(_) => Probe {
            status: HealthStatus::Degraded,
            latency: Err(no_answer()),
            detail: json!({"backend": backend, "error": no_answer()}),
        },
    }
}

/// `GET /api/health` over the API's own listener, as a load balancer asks it: the time to a
/// complete answer. Any server error in the last minute other than a 503 (a dependency
/// unavailable, which the component that is down reports) makes the API `DEGRADED`.
async fn probe_api(state: &Probes, addr: Option<SocketAddr>) -> Probe {
    let m = &state.metrics;
    let recent_errors = m.server_errors_within(Duration::from_secs(60));
    let latency = match addr {
        None => Err("the API is not listening yet".to_string()),
        Some(addr) => match tokio::time::timeout(PROBE_TIMEOUT, http_round_trip(loopback(addr))).await {
            Ok(Ok(latency)) => Ok(latency),
            Ok(Err(e)) => Err(format!("the probe failed: {e}")),
            Err(_) => Err(no_answer()),
        },
    };
    let status = match (&latency, recent_errors) {
        (Err(_), _) if addr.is_some() => HealthStatus::Down,
        (_, true) => HealthStatus::Degraded,
        _ => HealthStatus::Healthy,
    };
    Probe {
        status,
        latency,
        detail: json!({
            "bind": state.bind.to_string(),
            "uptime_seconds": m.uptime().as_secs(),
            "requests_total": m.requests_total(),
            "in_flight": m.in_flight(),
            "server_errors_total": m.server_errors_total(),
        }),
    }
}

/// The address to reach a listener on: loopback when it listens on every interface.
fn loopback(addr: SocketAddr) -> SocketAddr {
    match addr.ip() {
        ip if !ip.is_unspecified() => addr,
        std::net::IpAddr::V4(_) => SocketAddr::from((std::net::Ipv4Addr::LOCALHOST, addr.port())),
        std::net::IpAddr::V6(_) => SocketAddr::from((std::net::Ipv6Addr::LOCALHOST, addr.port())),
    }
}

/// One `GET /api/health` on a fresh connection, read to its end; the time it took.
async fn http_round_trip(addr: SocketAddr) -> std::io::Result<Duration> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let started = tokio::time::Instant::now();
    let mut stream = tokio::net::TcpStream::connect(addr).await?;
    let request =
        format!("GET /api/health HTTP/1.1\r\nHost: {addr}\r\nAccept: application/json\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await?;
    let mut response = Vec::new();
    stream.read_to_end(&mut response).await?;
    let status_line = response.split(|b| *b == b'\n').next().unwrap_or_default();
    let status_line = String::from_utf8_lossy(status_line);
    // 503 is the API answering that the platform is DOWN: the API itself works.
    if status_line.starts_with("HTTP/1.1 200") || status_line.starts_with("HTTP/1.1 503") {
        Ok(started.elapsed())
    } else {
        Err(std::io::Error::other(format!("answered {:?}", status_line.trim())))
    }
}

/// The market data adapter: a bar request's round trip, and fresh while steps keep coming at
/// the pace the market clock sets.
async fn probe_feed(state: &Probes) -> Probe {
    let latency = {
        let started = tokio::time::Instant::now();
        match tokio::time::timeout(PROBE_TIMEOUT, state.market.ping(state.market_clock.now())).await {
            Ok(Ok(())) => Ok(started.elapsed()),
            Ok(Err(e)) => Err(format!("the probe failed: {e}")),
            Err(_) => Err(no_answer()),
        }
    };
    let Some(live) = &state.live else {
        return probe_remote_feed(state, latency);
    };
    let feed = live.status();
    let step = Duration::from_secs_f64(tradeops_brokers::simulated::live::STEP_SECONDS as f64 / live.speed);
    let fresh = step * 2 + Duration::from_secs(1);
    let status = match feed.since_last_step {
        _ if latency.is_err() => HealthStatus::Down,
        Some(age) if age <= fresh => HealthStatus::Healthy,
        Some(age) if age <= fresh + Duration::from_secs(60) => HealthStatus::Degraded,
        // Not stepped yet: starting, unless it has been far too long.
        None if state.metrics.uptime() < Duration::from_secs(30) => HealthStatus::Degraded,
        _ => HealthStatus::Down,
    };
    let radar = state.radar.local();
    Probe {
        status,
        latency,
        detail: json!({
            "adapter": state.market.name(),
            "broker": state.market.name(),
            "symbols": feed.symbols,
            "speed": live.speed,
            "market_time": feed.market_time.map(|t| format_ts(&t)),
            "handled_through": feed.handled_through.map(|t| format_ts(&t)),
            "trading_date": feed.date.map(|d| d.to_string()),
            "last_tick_age_ms": feed.since_last_step.map(|d| d.as_millis() as u64),
            "radar_captured_at": radar.captured_at.map(|t| format_ts(&t)),
            "radar_rows": radar.rows.len(),
            "radar_scan_micros": radar.scan_micros,
            "radar_latency_ms": radar.latency_ms,
        }),
    }
}

/// A round trip through the engine runner's queue to the execution broker, or why there is none.
type EngineProbe = Result<(Duration, usize), String>;

async fn probe_engine(engine: &EngineHandle) -> EngineProbe {
    match tokio::time::timeout(PROBE_TIMEOUT, engine.probe()).await {
        Ok(Ok(answer)) => Ok(answer),
        Ok(Err(_)) => Err("the trading engine has stopped".into()),
        Err(_) => Err(format!("the trading engine did not answer within {PROBE_TIMEOUT:?}")),
    }
}

/// The live trading state: what `GET /api/health` and the risk manager's row report, read from
/// the `engine` when asked (the engine is restored before the service answers).
pub fn trading_state(engine: &EngineHandle) -> Option<TradingState> {
    Some(engine.view().trading_state)
}

/// The risk manager's detail as of now: the trading state (from the `engine`) and
/// the limits it enforces (from the `settings`).
pub async fn risk_manager_detail(settings_service: &SettingsService, engine: &EngineHandle) -> Value {
    let settings = settings_service.current();
    let view = Some(engine.view());
    json!({
        "trading_state": view.as_ref().map(|v| v.trading_state),
        "halted_at": view.as_ref().and_then(|v| v.halt.as_ref()).map(|h| format_ts(&h.at)),
        "state_persisted": view.as_ref().map(|v| v.state_persisted),
        "unsaved_writes": view.as_ref().map(|v| v.unsaved_writes),
        "trades_today": view.as_ref().map(|v| v.trades_today),
        "settings_version": settings_service.version().await,
        "limits": settings.risk_controls,
    })
}

/// The risk manager (the engine): the round trip of its command queue. A halt or the daily
/// loss limit is a deliberate state, not a fault: the component stays `HEALTHY` and says so.
async fn probe_risk_manager(state: &Probes, engine: &EngineProbe) -> Probe {
    Probe {
        status: if engine.is_ok() { HealthStatus::Healthy } else { HealthStatus::Down },
        latency: engine.as_ref().map(|(latency, _)| *latency).map_err(Clone::clone),
        detail: risk_manager_detail(&state.settings, &state.engine).await,
    }
}

/// The execution broker, reached through the runner that owns it: `HEALTHY` while its book
/// agrees with the engine's and it answers; `DEGRADED` on a reconciliation mismatch, while its
/// last call found it unavailable (new orders are refused `BROKER_UNAVAILABLE` meanwhile), or
/// while a remote venue's event stream is disconnected (fills arrive by the gap fill once it is
/// back). `detail.broker` names the adapter built at start (`adapter` is the one the settings
/// record); `detail.stream` is a remote venue's event connection;
/// `detail.positions_not_protected_at_broker` counts the open positions no protective order at
/// the broker covers.
fn probe_execution(state: &Probes, engine: &EngineProbe) -> Probe {
    let adapter = state.settings.current().runtime.execution_broker;
    let view = state.engine.view();
    let connection = state.execution.connection();
    let stream_down = connection.as_ref().is_some_and(|c| !c.connected);
    let status = match engine {
        Err(_) => HealthStatus::Down,
        Ok(_) if view.reconciliation_status == "OK" && view.venue_unavailable.is_none() && !stream_down => {
            HealthStatus::Healthy
        }
        Ok(_) => HealthStatus::Degraded,
    };
    let mut detail = json!({
        "adapter": adapter,
        "broker": state.execution.name(),
        "open_orders": view.open_orders,
        "broker_open_orders": engine.as_ref().map(|(_, open)| *open).unwrap_or(view.broker_open_orders),
        "reconciliation_status": view.reconciliation_status,
        "reconciliation_detail": view.reconciliation_detail,
        // Open positions without a protective order for their whole quantity resting at the
        // broker (CONTRACT §11): they are protected only while this service runs, or not at all.
        "positions_not_protected_at_broker": view
            .positions
            .iter()
            .filter(|p| p.protection.kind != tradeops_core::engine::ProtectionKind::Broker)
            .count(),
        // Of those, the ones whose stop the engine holds (CONTRACT §12: outside 09:30-16:00
        // every stop is the engine's, as no venue triggers one there).
        "engine_protected": view
            .positions
            .iter()
            .filter(|p| p.protection.kind == tradeops_core::engine::ProtectionKind::Engine)
            .count(),
    });
    if let Some(reason) = &view.venue_unavailable {
        detail["unavailable"] = json!(reason);
        detail["reason"] = json!(format!("the broker is unavailable: {reason}"));
    } else if let Some(c) = connection.as_ref().filter(|c| !c.connected) {
        let why = c.last_error.as_deref().unwrap_or("not connected yet");
        detail["reason"] = json!(format!("the order-update stream is disconnected: {why}"));
    }
    if let Some(c) = connection {
        detail["stream"] = json!({
            "connected": c.connected,
            "last_event_at": c.last_event_at.map(|t| tradeops_core::time::format_ts(&t)),
            "last_error": c.last_error,
            "connections": c.connections,
        });
    }
    Probe { status, latency: engine.as_ref().map(|(latency, _)| *latency).map_err(Clone::clone), detail }
}

/// A remote market-data source (Alpaca): `DOWN` when its round trip fails, `DEGRADED` while its
/// stream is disconnected (snapshots come from REST meanwhile; the reason is shown), `HEALTHY`
/// otherwise. The radar's latest scan shows whether scans keep coming (and `note`, when it read
/// Alpaca's `iex` feed, what that feed cannot show); `calendar_mismatch` lists the dates Alpaca's
/// calendar and core's NYSE calendar disagree on.
fn probe_remote_feed(state: &Probes, latency: Result<Duration, String>) -> Probe {
    let connection = state.market.connection();
    let status = match &connection {
        _ if latency.is_err() => HealthStatus::Down,
        Some(c) if !c.connected => HealthStatus::Degraded,
        _ => HealthStatus::Healthy,
    };
    let radar = state.radar.local();
    let mut detail = json!({
        "adapter": state.settings.current().runtime.market_data_broker,
        "broker": state.market.name(),
        "market_time": format_ts(&state.market_clock.now()),
        "radar_captured_at": radar.captured_at.map(|t| format_ts(&t)),
        "radar_rows": radar.rows.len(),
    });
    if let Err(reason) = &latency {
        detail["reason"] = json!(reason);
    } else if let Some(c) = connection.as_ref().filter(|c| !c.connected) {
        let why = c.last_error.as_deref().unwrap_or("not connected yet");
        detail["reason"] = json!(format!("the market-data stream is disconnected: {why}"));
    }
    // Alpaca's iex feed is one exchange's tape, which prints nothing before 08:00 New York: the
    // radar's pre-market columns (CONTRACT §12) miss the gappers of 04:00–08:00 on it.
    if radar.feed.as_deref() == Some("iex") {
        detail["note"] =
            json!("the iex feed has no prints before 08:00 New York: the sip feed is needed for the 04:00 gappers");
    }
    if let Some(c) = connection {
        detail["stream"] = json!({
            "connected": c.connected,
            "last_event_at": c.last_event_at.map(|t| format_ts(&t)),
            "last_error": c.last_error,
            "connections": c.connections,
        });
    }
    // Alpaca's sessions against core's NYSE calendar (checked once a day): a warning, not a
    // fault — the engine trades by core's calendar.
    if let Some(check) = state.market.calendar_check() {
        detail["calendar_checked_at"] = json!(format_ts(&check.checked_at));
        detail["calendar_checked_through"] = json!(check.to.to_string());
        detail["calendar_mismatch"] = json!(check.mismatches);
        detail["clock_skew_ms"] = json!(check.clock_skew_ms);
    }
    Probe { status, latency, detail }
}
