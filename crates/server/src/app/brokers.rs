//! The broker adapters a service is built with (CONTRACT §10): the mode checked against them,
//! Alpaca's execution and market-data adapters configured, and the choice recorded in the audit
//! log when it changes.

use crate::config::Config;
use crate::domain::settings::SettingsService;
use anyhow::Context;
use std::sync::Arc;
use std::time::Duration;
use tradeops_brokers::alpaca::market::AlpacaMarketData;
use tradeops_brokers::reference::ReferenceData;
use tradeops_brokers::ExecutionBroker;
use tradeops_core::settings::{ExecutionBrokerKind, MarketDataBrokerKind};
use tradeops_core::{Clock, TradingMode};

/// Records the configured broker adapters in the audit log (action `brokers.configured`, actor
/// `config`), as the configured mode is recorded as a settings version: when the file or the
/// environment chose them and the choice differs from the one recorded last.
/// The adapters built at start, by name.
pub(super) struct BrokerChoice {
    pub execution: &'static str,
    pub market_data: &'static str,
}

pub(super) async fn audit_broker_choice(
    config: &Config,
    chosen: BrokerChoice,
    audit: &dyn tradeops_store::AuditRepository,
    audit_store: &dyn tradeops_store::AuditRepository,
    settings: &SettingsService,
    market_clock: &Arc<dyn Clock>,
    clock: &Arc<dyn Clock>,
) {
    let brokers = &config.brokers;
    if !brokers.is_configured() {
        return;
    }
    let choice = serde_json::json!({"execution": brokers.execution(), "market_data": brokers.market_data()});
    let filter = tradeops_store::AuditFilter {
        action: Some(BROKERS_CONFIGURED.into()),
        limit: 1,
        ..tradeops_store::AuditFilter::default()
    };
    let last = match audit_store.list_audit(&filter).await {
        Ok(rows) => rows.into_iter().next(),
        Err(e) => {
            tracing::error!(error = %e, "could not read the broker choice last recorded; recording this one");
            None
        }
    };
    if last.and_then(|row| serde_json::from_str::<serde_json::Value>(&row.entry.request).ok()) == Some(choice.clone()) {
        return;
    }
    let entry = tradeops_store::AuditEntry {
        ts: market_clock.now().timestamp_millis(),
        wall_ts: clock.now().timestamp_millis(),
        actor: "config".into(),
        role: None,
        action: BROKERS_CONFIGURED.into(),
        target: "brokers".into(),
        request: choice.to_string(),
        outcome: "OK".into(),
        mode: settings.mode().as_str().to_string(),
        request_id: format!("config-{}", uuid::Uuid::new_v4().simple()),
    };
    tracing::info!(execution = chosen.execution, market_data = chosen.market_data, "broker adapters configured");
    if let Err(e) = audit.append_audit(&entry).await {
        tracing::error!(error = %e, "could not write the broker choice to the audit log");
    }
}

/// Refuses to start a mode the adapters cannot serve: `LIVE` needs the alpaca execution broker
/// against a live endpoint; `DEMO` runs on the simulated market (CONTRACT §10). The configured
/// mode is checked with the configuration; this covers a mode persisted by an earlier run.
pub(super) fn check_mode_against_brokers(mode: TradingMode, config: &Config) -> anyhow::Result<()> {
    if mode == TradingMode::Live {
        if let Some(reason) = live_refusal(config, mode) {
            anyhow::bail!("the persisted mode is LIVE, but {reason}");
        }
    }
    if mode == TradingMode::Demo
        && (config.brokers.market_data() != MarketDataBrokerKind::Simulated
            || config.brokers.execution() != ExecutionBrokerKind::Paper)
    {
        anyhow::bail!(
            "DEMO runs on the simulated market through the paper broker: set TRADEOPS_MARKET_DATA=simulated and \
             TRADEOPS_EXECUTION_BROKER=paper, or another mode"
        );
    }
    Ok(())
}

/// Why this configuration cannot trade `LIVE` (switched to at start or at runtime), if it can't.
pub(super) fn live_refusal(config: &Config, mode: TradingMode) -> Option<String> {
    use crate::config::AlpacaSettings;
    match config.brokers.execution() {
        ExecutionBrokerKind::Paper => {
            Some("LIVE needs the alpaca execution broker; this process trades through paper (chosen at start: TRADEOPS_EXECUTION_BROKER)".into())
        }
        ExecutionBrokerKind::Alpaca if AlpacaSettings::is_paper_endpoint(&config.alpaca.trading_url(mode)) => Some(format!(
            "LIVE needs Alpaca's live endpoint; this process trades {} (restart with TRADEOPS_MODE=LIVE, or set TRADEOPS_ALPACA_TRADING_URL)",
            config.alpaca.trading_url(mode)
        )),
        ExecutionBrokerKind::Alpaca => None,
    }
}

/// The Alpaca execution adapter at the Trading API `mode` trades (its stream at `/stream` of the
/// same host); its first gap fill asks for orders changed since `from`.
pub(super) fn alpaca_execution(
    alpaca: &crate::config::AlpacaSettings,
    mode: TradingMode,
    from: tradeops_core::Timestamp,
    clock: Arc<dyn Clock>,
) -> anyhow::Result<Arc<dyn ExecutionBroker>> {
    use tradeops_brokers::alpaca::execution::{AlpacaConfig, AlpacaExecution};
    let credentials = alpaca.credentials.clone().context("the alpaca adapter needs credentials")?;
    let base_url = alpaca.trading_url(mode);
    let config = AlpacaConfig {
        stream_url: crate::config::AlpacaSettings::trade_stream_url(&base_url),
        base_url,
        credentials,
        request_timeout: alpaca.request_timeout,
        backoff: Default::default(),
        gap_fill_from: from,
        gap_overlap: Duration::from_secs(2),
        auth_timeout: Duration::from_secs(10),
        idle_timeout: Duration::from_secs(30),
        // The engine runner restores the book first: the stream's first gap fill then knows what
        // was already applied.
        wait_for_restore: true,
    };
    tracing::info!(trading_url = %config.base_url, stream_url = %config.stream_url, key_id = %config.credentials.key_id, "trading through Alpaca");
    Ok(AlpacaExecution::start(config, clock)?)
}

/// The audit action of the broker choice made at start.
pub const BROKERS_CONFIGURED: &str = "brokers.configured";

/// Alpaca's market data over `mode`'s Trading API (assets, calendar, clock) and the configured
/// data API and stream.
/// Alpaca's market data; with its stream (`with_stream`: the service's live marks and bars), or
/// its REST history only (a job worker).
pub(crate) fn alpaca_market_data(
    alpaca: &crate::config::AlpacaSettings,
    mode: TradingMode,
    reference: Arc<ReferenceData>,
    clock: Arc<dyn Clock>,
    with_stream: bool,
) -> anyhow::Result<Arc<AlpacaMarketData>> {
    use tradeops_brokers::alpaca::data::DataFeed;
    use tradeops_brokers::alpaca::data_stream::DataStreamConfig;
    use tradeops_brokers::alpaca::market::AlpacaDataConfig;
    let credentials = alpaca.credentials.clone().context("the alpaca adapter needs credentials")?;
    let feed = match alpaca.feed {
        crate::config::AlpacaFeed::Iex => DataFeed::Iex,
        crate::config::AlpacaFeed::Sip => DataFeed::Sip,
    };
    let stream = DataStreamConfig { url: alpaca.data_stream_url(), ..DataStreamConfig::alpaca(feed, &credentials) };
    let config = AlpacaDataConfig {
        trading_url: alpaca.trading_url(mode),
        data_url: alpaca.data_url.clone(),
        feed,
        timeout: alpaca.request_timeout,
        stream: with_stream.then_some(stream),
    };
    tracing::info!(data_url = %config.data_url, stream_url = %alpaca.data_stream_url(), feed = feed.as_str(), "market data from Alpaca");
    Ok(Arc::new(AlpacaMarketData::connect(config, &credentials, reference, clock)?))
}
