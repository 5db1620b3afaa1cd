//! Effective settings: loaded from the newest persisted version, changed only through
//! [`SettingsService::update`] (validated, guarded, persisted as a new version), and published
//! on a watch channel so components pick changes up without a restart.

use crate::domain::tokens::Principal;
use crate::domain::{DomainError, DomainResult, GuardSubject};
use serde_json::value::RawValue;
use serde_json::{json, Value};
use std::sync::Arc;
use tokio::sync::{watch, Mutex};
use tradeops_core::settings::{ExecutionBrokerKind, MarketCalendarKind, MarketDataBrokerKind, SettingsGuard};
use tradeops_core::{Clock, Role, Settings, TradingMode};
use tradeops_store::{SettingsRepository, SettingsVersion};

pub struct SettingsService {
    repo: Arc<dyn SettingsRepository>,
    clock: Arc<dyn Clock>,
    auth_enabled: bool,
    tx: watch::Sender<Arc<Settings>>,
    /// The effective settings already serialised: read far more often than they change.
    json: std::sync::RwLock<Arc<RawValue>>,
    /// Serialises writers; holds the effective version number.
    version: Mutex<i64>,
    /// The adapters built at start (CONTRACT §10: brokers are chosen at start), once known.
    running: std::sync::OnceLock<RunningBrokers>,
}

/// The broker adapters this process runs, recorded at start: the settings' broker fields must
/// name them, and `LIVE` can be switched to at runtime only when `live_refusal` is `None`.
#[derive(Clone, Debug, PartialEq)]
pub struct RunningBrokers {
    pub execution: ExecutionBrokerKind,
    pub market_data: MarketDataBrokerKind,
    /// Why this process cannot trade `LIVE` (the paper broker, or Alpaca's paper endpoint).
    pub live_refusal: Option<String>,
}

/// Result of a successful update.
pub struct SettingsChange {
    pub updated: Vec<String>,
    pub settings: Arc<Settings>,
    pub version: i64,
}

impl SettingsService {
    /// Loads the newest version, or persists the defaults as version 1 on first start.
    pub async fn load(
        repo: Arc<dyn SettingsRepository>,
        clock: Arc<dyn Clock>,
        auth_enabled: bool,
    ) -> DomainResult<Self> {
        let (settings, version) = match repo.latest_settings().await? {
            Some(v) => (parse_version(&v)?, v.version),
            None => {
                let settings = Settings::default();
                repo.append_settings(&SettingsVersion {
                    version: 1,
                    settings: settings.to_json().to_string(),
                    updated: "[]".into(),
                    actor: "system".into(),
                    created_at: clock.now().timestamp_millis(),
                })
                .await?;
                (settings, 1)
            }
        };
        let json = std::sync::RwLock::new(to_raw(&settings));
        let (tx, _) = watch::channel(Arc::new(settings));
        Ok(Self { repo, clock, auth_enabled, tx, json, version: Mutex::new(version), running: Default::default() })
    }

    pub fn current(&self) -> Arc<Settings> {
        self.tx.borrow().clone()
    }

    /// The effective settings as JSON, serialised once per version.
    pub fn current_json(&self) -> Arc<RawValue> {
        self.json.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    pub fn mode(&self) -> TradingMode {
        self.tx.borrow().runtime.trading_mode
    }

    /// Changes take effect for subscribers as soon as they are persisted.
    pub fn subscribe(&self) -> watch::Receiver<Arc<Settings>> {
        self.tx.subscribe()
    }

    pub async fn version(&self) -> i64 {
        *self.version.lock().await
    }

    /// Applies a partial update for `caller`. Nothing changes unless every field is valid and
    /// every guard is satisfied.
    /// `exposure`: open positions and working orders, which block every guarded change.
    pub async fn update(
        &self,
        patch: &Value,
        caller: &Principal,
        confirmed_live: bool,
        exposure: (usize, usize),
    ) -> DomainResult<SettingsChange> {
        let mut version = self.version.lock().await;
        let current = self.current();
        let outcome = current.apply_patch(patch).map_err(DomainError::Validation)?;
        let real_market = self.running.get().is_some_and(|r| r.market_data == MarketDataBrokerKind::Alpaca);
        if real_market && outcome.settings.runtime.market_calendar != MarketCalendarKind::Nyse {
            return Err(DomainError::validation(
                "runtime.market_calendar",
                "must be NYSE while the market data is Alpaca's: a real market keeps its own hours",
            ));
        }
        if outcome.updated.is_empty() {
            return Ok(SettingsChange { updated: vec![], settings: current, version: *version });
        }
        for guard in current.guards_for(&outcome.settings) {
            self.check_guard(&guard, &outcome.settings, caller, confirmed_live, exposure)?;
        }
        self.persist(&mut version, outcome.settings, outcome.updated, &caller.name).await
    }

    /// Applies the configured mode at start (`TRADEOPS_MODE`), recorded as actor `config`.
    pub async fn apply_configured_mode(&self, mode: TradingMode) -> DomainResult<()> {
        let mut version = self.version.lock().await;
        let current = self.current();
        if current.runtime.trading_mode == mode {
            return Ok(());
        }
        let mut next = (*current).clone();
        next.runtime.trading_mode = mode;
        self.persist(&mut version, next, vec!["runtime.trading_mode".into()], "config").await?;
        Ok(())
    }

    /// Records the adapters built at start and makes the settings' broker fields name them
    /// (a new version by actor `config` when they named others): what the settings show is
    /// what trades.
    pub async fn apply_running_brokers(&self, running: RunningBrokers) -> DomainResult<()> {
        let mut version = self.version.lock().await;
        let current = self.current();
        let mut next = (*current).clone();
        let mut updated = Vec::new();
        if next.runtime.execution_broker != running.execution {
            next.runtime.execution_broker = running.execution;
            updated.push("runtime.execution_broker".to_string());
        }
        if next.runtime.market_data_broker != running.market_data {
            next.runtime.market_data_broker = running.market_data;
            updated.push("runtime.market_data_broker".to_string());
        }
        // A real market's sessions are the NYSE's (CONTRACT §10: the calendar is Alpaca's, which
        // the feed checks against core's NYSE rules every day).
        if running.market_data == MarketDataBrokerKind::Alpaca
            && next.runtime.market_calendar != MarketCalendarKind::Nyse
        {
            next.runtime.market_calendar = MarketCalendarKind::Nyse;
            updated.push("runtime.market_calendar".to_string());
        }
        let _ = self.running.set(running);
        if !updated.is_empty() {
            self.persist(&mut version, next, updated, "config").await?;
        }
        Ok(())
    }

    /// Takes the newest stored version when it is newer than the one in effect here: another
    /// process (the service, for a job worker) changed the settings. Whether it did.
    pub async fn reload_if_newer(&self) -> DomainResult<bool> {
        let Some(stored) = self.repo.latest_settings().await? else { return Ok(false) };
        let mut version = self.version.lock().await;
        if stored.version <= *version {
            return Ok(false);
        }
        let settings = parse_version(&stored)?;
        *version = stored.version;
        *self.json.write().unwrap_or_else(|e| e.into_inner()) = to_raw(&settings);
        self.tx.send_replace(Arc::new(settings));
        tracing::info!(version = stored.version, actor = %stored.actor, "settings changed elsewhere: taken");
        Ok(true)
    }

    async fn persist(
        &self,
        version: &mut i64,
        settings: Settings,
        updated: Vec<String>,
        actor: &str,
    ) -> DomainResult<SettingsChange> {
        let next_version = *version + 1;
        self.repo
            .append_settings(&SettingsVersion {
                version: next_version,
                settings: settings.to_json().to_string(),
                updated: json!(updated).to_string(),
                actor: actor.to_string(),
                created_at: self.clock.now().timestamp_millis(),
            })
            .await?;
        *version = next_version;
        *self.json.write().unwrap_or_else(|e| e.into_inner()) = to_raw(&settings);
        let settings = Arc::new(settings);
        self.tx.send_replace(settings.clone());
        tracing::info!(version = next_version, actor, ?updated, "settings changed");
        Ok(SettingsChange { updated, settings, version: next_version })
    }

    fn check_guard(
        &self,
        guard: &SettingsGuard,
        next: &Settings,
        caller: &Principal,
        confirmed: bool,
        (positions, orders): (usize, usize),
    ) -> DomainResult<()> {
        let (fields, what): (Vec<&str>, &str) = match guard {
            SettingsGuard::SwitchToLive => (vec!["runtime.trading_mode"], "Switching to LIVE"),
            SettingsGuard::BrokerChange(field) => (vec![field], "Changing a broker"),
            SettingsGuard::RiskLimitRaisedWhileLive(fields) => (fields.clone(), "Raising a risk limit while LIVE"),
        };
        let blocked = |guard: &'static str, reason: String| DomainError::GuardRefused {
            guard,
            reason,
            subject: GuardSubject::Fields(fields.iter().map(|f| f.to_string()).collect()),
        };
        if !caller.role.allows(Role::Admin) {
            return Err(blocked("admin_role", format!("{what} needs an admin token")));
        }
        if !confirmed {
            return Err(blocked("X-Confirm-Live", format!("{what} needs header X-Confirm-Live: true")));
        }
        if positions > 0 || orders > 0 {
            return Err(blocked(
                "no_open_exposure",
                format!("{what} is refused while {positions} positions and {orders} orders are open"),
            ));
        }
        if let (SettingsGuard::BrokerChange(_), Some(running)) = (guard, self.running.get()) {
            if next.runtime.execution_broker != running.execution
                || next.runtime.market_data_broker != running.market_data
            {
                return Err(blocked(
                    "broker_chosen_at_start",
                    format!(
                        "Brokers are chosen at start (this process runs execution {:?} and market data {:?}): \
                         restart with TRADEOPS_EXECUTION_BROKER / TRADEOPS_MARKET_DATA to change them",
                        running.execution, running.market_data
                    ),
                ));
            }
        }
        if *guard == SettingsGuard::SwitchToLive {
            if let Some(reason) = self.running.get().and_then(|r| r.live_refusal.clone()) {
                return Err(blocked("live_capable_broker", reason));
            }
            if !next.runtime.execution_broker.is_live_capable() {
                return Err(blocked(
                    "live_capable_broker",
                    format!("LIVE needs a live-capable execution broker; {:?} is not", next.runtime.execution_broker),
                ));
            }
            if !self.auth_enabled {
                return Err(blocked("authentication", "LIVE needs authentication enabled".into()));
            }
        }
        Ok(())
    }

    pub async fn history(&self, before: Option<i64>, limit: u32) -> DomainResult<Vec<SettingsVersion>> {
        Ok(self.repo.settings_history(before, limit).await?)
    }
}

/// The settings a stored version holds.
fn parse_version(v: &SettingsVersion) -> DomainResult<Settings> {
    let doc: Value = serde_json::from_str(&v.settings).map_err(DomainError::internal)?;
    Settings::from_json(&doc)
        .map_err(|e| DomainError::internal(format!("persisted settings v{} are invalid: {e:?}", v.version)))
}

fn to_raw(settings: &Settings) -> Arc<RawValue> {
    Arc::from(RawValue::from_string(settings.to_json().to_string()).expect("settings serialise to valid JSON"))
}
