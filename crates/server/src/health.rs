//! Component health (CONTRACT §3): real probes of the database and cache with measured latency
//! and `last_ok_at`, the API's and risk manager's own state, and the configured broker adapters.
//! Probes run in the background every `health.probe_interval_ms`; requests read the latest
//! results, so a health check never waits on a slow dependency.

use crate::state::AppState;
use serde::Serialize;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::sync::RwLock;
use std::time::Duration;
use tradeops_core::time::format_ts;
use tradeops_core::Timestamp;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "UPPERCASE")]
pub enum HealthStatus {
    Disabled,
    Healthy,
    Degraded,
    Down,
}

/// One row of `GET /api/health/components`.
#[derive(Clone, Debug, Serialize, utoipa::ToSchema)]
pub struct ComponentHealth {
    pub name: String,
    pub status: HealthStatus,
    /// Latency of the last probe, in milliseconds.
    pub latency_ms: Option<f64>,
    /// When the component was last seen healthy.
    pub last_ok_at: Option<String>,
    #[schema(value_type = Object)]
    pub detail: Value,
}

/// Component keys, in the order they are listed.
pub const COMPONENTS: [&str; 6] = ["api", "data_broker", "execution_broker", "risk_manager", "cache", "database"];

/// A database probe slower than this is `DEGRADED`.
const SLOW_DATABASE: Duration = Duration::from_millis(500);
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

#[derive(Default)]
pub struct HealthMonitor {
    components: RwLock<BTreeMap<&'static str, ComponentHealth>>,
}

struct Probe {
    status: HealthStatus,
    latency: Option<Duration>,
    detail: Value,
}

impl HealthMonitor {
    /// The latest result of every component, in [`COMPONENTS`] order.
    pub fn snapshot(&self) -> Vec<ComponentHealth> {
        let components = self.components.read().unwrap_or_else(|e| e.into_inner());
        COMPONENTS.iter().filter_map(|name| components.get(name).cloned()).collect()
    }

    /// Each component's status alone (what `GET /api/health` needs, without cloning details).
    pub fn statuses(&self) -> Vec<(&'static str, HealthStatus)> {
        let components = self.components.read().unwrap_or_else(|e| e.into_inner());
        COMPONENTS.iter().filter_map(|name| components.get(name).map(|c| (*name, c.status))).collect()
    }

    /// The worst status among enabled components.
    pub fn overall(statuses: impl IntoIterator<Item = HealthStatus>) -> HealthStatus {
        statuses.into_iter().filter(|s| *s != HealthStatus::Disabled).max().unwrap_or(HealthStatus::Healthy)
    }

    /// Runs every probe once and records the results.
    pub async fn probe_all(&self, state: &AppState) {
        let now = state.clock.now();
        let (database, cache) = tokio::join!(probe_database(state), probe_cache(state));
        let results = [
            ("api", probe_api(state)),
            ("data_broker", probe_feed(state)),
            ("execution_broker", probe_execution(state)),
            ("risk_manager", probe_risk_manager(state).await),
            ("cache", cache),
            ("database", database),
        ];
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
            state.events.publish("health.changed", state.settings.mode(), change);
        }
    }

    /// Records a probe; returns the `health.changed` event when the status changed.
    fn record(
        &self,
        components: &mut BTreeMap<&'static str, ComponentHealth>,
        name: &'static str,
        probe: Probe,
        now: Timestamp,
    ) -> Option<Value> {
        let previous = components.get(name);
        let last_ok_at = if probe.status == HealthStatus::Healthy {
            Some(format_ts(&now))
        } else {
            previous.and_then(|p| p.last_ok_at.clone())
        };
        let change = previous.filter(|p| p.status != probe.status).map(|prev| {
            tracing::warn!(component = name, from = ?prev.status, to = ?probe.status, detail = %probe.detail, "health changed");
            json!({"component": name, "from": prev.status, "to": probe.status, "detail": probe.detail})
        });
        components.insert(
            name,
            ComponentHealth {
                name: name.to_string(),
                status: probe.status,
                latency_ms: probe.latency.map(|d| (d.as_secs_f64() * 1e6).round() / 1e3),
                last_ok_at,
                detail: probe.detail,
            },
        );
        change
    }
}

async fn probe_database(state: &AppState) -> Probe {
    let backend = state.db.backend().name();
    match tokio::time::timeout(PROBE_TIMEOUT, state.db.probe()).await {
        Ok(Ok(latency)) => Probe {
            status: if latency > SLOW_DATABASE { HealthStatus::Degraded } else { HealthStatus::Healthy },
            latency: Some(latency),
            detail: json!({"backend": backend}),
        },
        Ok(Err(e)) => Probe {
            status: HealthStatus::Down,
            latency: None,
            detail: json!({"backend": backend, "error": e.to_string()}),
        },
        Err(_) => Probe {
            status: HealthStatus::Down,
            latency: None,
            detail: json!({"backend": backend, "error": format!("no answer within {PROBE_TIMEOUT:?}")}),
        },
    }
}

/// The cache is an accelerator: when it is unreachable the service keeps working, `DEGRADED`.
async fn probe_cache(state: &AppState) -> Probe {
    let backend = state.cache.backend();
    match tokio::time::timeout(PROBE_TIMEOUT, state.cache.ping()).await {
        Ok(Ok(latency)) => {
            Probe { status: HealthStatus::Healthy, latency: Some(latency), detail: json!({"backend": backend}) }
        }
        Ok(Err(e)) => Probe {
            status: HealthStatus::Degraded,
            latency: None,
            detail: json!({"backend": backend, "error": e.to_string()}),
        },
        Err(_) => Probe {
            status: HealthStatus::Degraded,
            latency: None,
            detail: json!({"backend": backend, "error": format!("no answer within {PROBE_TIMEOUT:?}")}),
        },
    }
}

/// The API reports its own traffic; any server error in the last minute makes it `DEGRADED`.
fn probe_api(state: &AppState) -> Probe {
    let m = &state.metrics;
    let recent_errors = m.server_errors_within(Duration::from_secs(60));
    Probe {
        status: if recent_errors { HealthStatus::Degraded } else { HealthStatus::Healthy },
        latency: None,
        detail: json!({
            "bind": state.config.bind.to_string(),
            "uptime_seconds": m.uptime().as_secs(),
            "requests_total": m.requests_total(),
            "in_flight": m.in_flight(),
            "server_errors_total": m.server_errors_total(),
        }),
    }
}

/// The market data feed: fresh while steps keep coming at the pace the market clock sets.
fn probe_feed(state: &AppState) -> Probe {
    let Some(live) = &state.live else {
        return probe_adapter("market data", state.settings.current().runtime.market_data_broker);
    };
    let feed = live.status();
    let step = Duration::from_secs_f64(crate::market::live::STEP_SECONDS as f64 / live.speed);
    let fresh = step * 2 + Duration::from_secs(1);
    let status = match feed.since_last_step {
        Some(age) if age <= fresh => HealthStatus::Healthy,
        Some(age) if age <= fresh + Duration::from_secs(60) => HealthStatus::Degraded,
        // Not stepped yet: starting, unless it has been far too long.
        None if state.metrics.uptime() < Duration::from_secs(30) => HealthStatus::Degraded,
        _ => HealthStatus::Down,
    };
    let radar = state.radar.local();
    Probe {
        status,
        latency: None,
        detail: json!({
            "adapter": state.market.name(),
            "symbols": feed.symbols,
            "speed": live.speed,
            "market_time": feed.market_time.map(|t| format_ts(&t)),
            "trading_date": feed.date.map(|d| d.to_string()),
            "last_tick_age_ms": feed.since_last_step.map(|d| d.as_millis() as u64),
            "radar_captured_at": radar.captured_at.map(|t| format_ts(&t)),
            "radar_rows": radar.rows.len(),
            "radar_scan_micros": radar.scan_micros,
            "radar_latency_ms": radar.latency_ms,
        }),
    }
}

/// The risk manager: the trading state and the effective limits it enforces. A halt or the
/// daily loss limit is a deliberate state, not a fault: the component stays `HEALTHY` and says so.
async fn probe_risk_manager(state: &AppState) -> Probe {
    let settings = state.settings.current();
    let view = state.engine.get().map(|e| e.view());
    Probe {
        status: HealthStatus::Healthy,
        latency: None,
        detail: json!({
            "trading_state": view.as_ref().map(|v| v.trading_state),
            "state_persisted": view.as_ref().map(|v| v.state_persisted),
            "unsaved_writes": view.as_ref().map(|v| v.unsaved_writes),
            "trades_today": view.as_ref().map(|v| v.trades_today),
            "settings_version": state.settings.version().await,
            "limits": settings.risk_controls,
        }),
    }
}

/// The paper broker: `HEALTHY` while its book agrees with the engine's, `DEGRADED` on a
/// reconciliation mismatch.
fn probe_execution(state: &AppState) -> Probe {
    let adapter = state.settings.current().runtime.execution_broker;
    let Some(view) = state.engine.get().map(|e| e.view()) else {
        return probe_adapter("execution", adapter);
    };
    let status = if view.reconciliation_status == "OK" { HealthStatus::Healthy } else { HealthStatus::Degraded };
    Probe {
        status,
        latency: None,
        detail: json!({
            "adapter": adapter,
            "open_orders": view.open_orders,
            "broker_open_orders": view.broker_open_orders,
            "reconciliation_status": view.reconciliation_status,
            "reconciliation_detail": view.reconciliation_detail,
        }),
    }
}

/// Broker adapters register their own probes when they are part of the build; until then the
/// configured adapter is reported as `DISABLED` with the reason.
fn probe_adapter(kind: &str, adapter: impl Serialize) -> Probe {
    let adapter = serde_json::to_value(adapter).unwrap_or(Value::Null);
    Probe {
        status: HealthStatus::Disabled,
        latency: None,
        detail: json!({
            "adapter": adapter,
            "reason": format!("the {kind} adapter {adapter} is configured but not running in this build"),
        }),
    }
}
