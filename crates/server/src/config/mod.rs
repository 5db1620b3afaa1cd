//! Configuration (CONTRACT §9): the embedded `config/default.toml`, an optional `--config FILE`
//! over it, then `TRADEOPS_*` environment variables, which win. Loading is a pure function of
//! those three inputs and lists every problem it finds instead of stopping at the first.

use std::collections::BTreeMap;
use std::fmt;
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;
use toml::{Table, Value};
use tradeops_core::settings::{ExecutionBrokerKind, MarketDataBrokerKind};
use tradeops_core::TradingMode;

pub mod notice_kinds;
mod notifications;
mod reader;
pub use notifications::{ChannelConfig, ChannelTarget, NotificationsConfig, Secret, TELEGRAM_API_URL};
use reader::Reader;

/// The embedded defaults, identical to `config/default.toml` in the repository.
pub const DEFAULT_TOML: &str = include_str!("../../../../config/default.toml");

#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    pub bind: SocketAddr,
    pub shutdown_grace: Duration,
    pub database_url: String,
    /// `None`: the in-process cache.
    pub redis_url: Option<String>,
    pub cache_key_prefix: String,
    /// Applied at start as a settings change when set.
    pub mode: Option<TradingMode>,
    pub auth: AuthConfig,
    pub audit: AuditConfig,
    pub sim: SimConfig,
    pub brokers: BrokersConfig,
    pub alpaca: AlpacaSettings,
    pub paper: PaperConfigValues,
    pub health_probe_interval: Duration,
    pub jobs: JobsConfig,
    /// Where other nodes of a cluster reach this one (`None`: from the bind address).
    pub advertise_url: Option<String>,
    pub log: LogConfig,
    /// Serve the console from this folder instead of the copy built into the binary (for
    /// working on the console: `npm run build` there, reload the page).
    pub console_dir: Option<std::path::PathBuf>,
    /// Messages to the operator's phone and team chat (CONTRACT §13).
    pub notifications: NotificationsConfig,
}

#[derive(Clone, Debug, PartialEq)]
pub struct AuthConfig {
    pub enabled: bool,
    pub admin_token: Option<String>,
    pub rate_limit_per_second: u32,
    pub rate_limit_burst: u32,
    /// Budget of requests without a valid token, per client address.
    pub anonymous_rate_limit_per_second: u32,
    pub anonymous_rate_limit_burst: u32,
    /// Take the client address from `X-Forwarded-For` (behind a trusted reverse proxy only).
    pub trust_forwarded_for: bool,
}

#[derive(Clone, Debug, PartialEq)]
pub struct JobsConfig {
    /// Whether `serve` runs downloads and backtests itself.
    pub run: bool,
    /// How long a claim or renewal holds a job.
    pub lease: Duration,
    /// Backtests run at once in this process.
    pub backtest_parallel: usize,
    /// Downloads run at once in this process.
    pub download_parallel: usize,
}

#[derive(Clone, Debug, PartialEq)]
pub struct AuditConfig {
    /// Rows older than this many days are pruned.
    pub retention_days: u32,
}

#[derive(Clone, Debug, PartialEq)]
pub struct SimConfig {
    pub seed: u64,
    /// Simulated seconds per real second; `None` means by mode (DEMO 60, otherwise 1).
    pub speed: Option<f64>,
    pub symbols: u32,
    /// Whether the simulated market gives a float and sector per symbol (true); false plays a
    /// real feed, which has neither: only imported reference data is known.
    pub reference_data: bool,
}

/// The adapters the service trades and reads the market through (`[brokers]`). Left unset, the
/// in-process ones; when set, the choice is audited at start.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct BrokersConfig {
    pub execution: Option<ExecutionBrokerKind>,
    pub market_data: Option<MarketDataBrokerKind>,
}

impl BrokersConfig {
    /// The execution adapter to build (`paper` unless configured).
    pub fn execution(&self) -> ExecutionBrokerKind {
        self.execution.unwrap_or_default()
    }

    /// The market-data adapter to build (`simulated` unless configured).
    pub fn market_data(&self) -> MarketDataBrokerKind {
        self.market_data.unwrap_or_default()
    }

    /// Whether the file or the environment chose either adapter.
    pub fn is_configured(&self) -> bool {
        self.execution.is_some() || self.market_data.is_some()
    }
}

/// Alpaca's paper Trading API.
pub const ALPACA_PAPER_URL: &str = "https://paper-api.alpaca.markets";
/// Alpaca's live Trading API (real money).
pub const ALPACA_LIVE_URL: &str = "https://api.alpaca.markets";

/// Alpaca's market-data feed: `iex` (one exchange, free) or `sip` (every US exchange).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AlpacaFeed {
    Iex,
    Sip,
}

impl AlpacaFeed {
    pub fn as_str(self) -> &'static str {
        match self {
            AlpacaFeed::Iex => "iex",
            AlpacaFeed::Sip => "sip",
        }
    }
}

/// Where and as whom the service reaches Alpaca (`[alpaca]`). `Debug` never shows the secret
/// (the credentials' own `Debug` hides it).
#[derive(Clone, Debug, PartialEq)]
pub struct AlpacaSettings {
    /// Both halves of the key pair, or none.
    pub credentials: Option<tradeops_brokers::alpaca::rest::AlpacaCredentials>,
    /// `None`: by mode ([`ALPACA_PAPER_URL`], or [`ALPACA_LIVE_URL`] in `LIVE`).
    pub trading_url: Option<String>,
    pub data_url: String,
    /// `None`: Alpaca's stream of the feed.
    pub data_stream_url: Option<String>,
    pub feed: AlpacaFeed,
    pub request_timeout: Duration,
}

impl AlpacaSettings {
    /// The Trading API base the service trades through in `mode`.
    pub fn trading_url(&self, mode: TradingMode) -> String {
        match &self.trading_url {
            Some(url) => url.trim_end_matches('/').to_string(),
            None if mode == TradingMode::Live => ALPACA_LIVE_URL.into(),
            None => ALPACA_PAPER_URL.into(),
        }
    }

    /// The trade-updates stream of a Trading API base: the same host at `/stream`, over `wss`
    /// for `https` (`ws` for a plain `http` stand-in).
    pub fn trade_stream_url(trading_url: &str) -> String {
        let base = trading_url.trim_end_matches('/');
        match base.strip_prefix("https://") {
            Some(rest) => format!("wss://{rest}/stream"),
            None => format!("ws://{}/stream", base.trim_start_matches("http://")),
        }
    }

    /// The market-data stream URL (the feed's path on Alpaca's stream host unless configured).
    pub fn data_stream_url(&self) -> String {
        self.data_stream_url
            .clone()
            .unwrap_or_else(|| format!("wss://stream.data.alpaca.markets/v2/{}", self.feed.as_str()))
    }

    /// Whether a Trading API base is Alpaca's paper endpoint (where `LIVE` must not trade).
    pub fn is_paper_endpoint(url: &str) -> bool {
        url.trim_end_matches('/') == ALPACA_PAPER_URL
    }
}

/// The paper broker's settings (`[paper]`).
#[derive(Clone, Debug, PartialEq)]
pub struct PaperConfigValues {
    pub initial_cash: rust_decimal::Decimal,
    pub ack_latency_ms: i64,
    pub cancel_latency_ms: i64,
    pub slippage_bps: f64,
    pub fee_per_share: rust_decimal::Decimal,
}

impl PaperConfigValues {
    /// The paper broker's fill model as these settings set it.
    pub fn broker_config(&self) -> tradeops_brokers::paper::PaperConfig {
        tradeops_brokers::paper::PaperConfig {
            ack_latency_ms: self.ack_latency_ms,
            cancel_latency_ms: self.cancel_latency_ms,
            slippage_bps: self.slippage_bps,
            fee_per_share: self.fee_per_share,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogFormat {
    Pretty,
    Json,
}

#[derive(Clone, Debug, PartialEq)]
pub struct LogConfig {
    pub filter: String,
    pub format: LogFormat,
}

/// Every problem found in the configuration.
#[derive(Debug, PartialEq)]
pub struct ConfigErrors(pub Vec<String>);

impl fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "invalid configuration ({} problem{}):", self.0.len(), if self.0.len() == 1 { "" } else { "s" })?;
        for problem in &self.0 {
            writeln!(f, "  - {problem}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigErrors {}

/// Environment variables and the `section.key` each one sets.
const ENV_KEYS: &[(&str, &str)] = &[
    ("TRADEOPS_BIND", "server.bind"),
    ("TRADEOPS_DATABASE_URL", "database.url"),
    ("TRADEOPS_REDIS_URL", "cache.redis_url"),
    ("TRADEOPS_MODE", "runtime.mode"),
    ("TRADEOPS_EXECUTION_BROKER", "brokers.execution"),
    ("TRADEOPS_MARKET_DATA", "brokers.market_data"),
    ("TRADEOPS_ALPACA_KEY_ID", "alpaca.key_id"),
    ("TRADEOPS_ALPACA_SECRET_KEY", "alpaca.secret_key"),
    ("TRADEOPS_ALPACA_TRADING_URL", "alpaca.trading_url"),
    ("TRADEOPS_ALPACA_DATA_URL", "alpaca.data_url"),
    ("TRADEOPS_ALPACA_DATA_STREAM_URL", "alpaca.data_stream_url"),
    ("TRADEOPS_ALPACA_FEED", "alpaca.feed"),
    ("TRADEOPS_AUTH_ENABLED", "auth.enabled"),
    ("TRADEOPS_ADMIN_TOKEN", "auth.admin_token"),
    ("TRADEOPS_RATE_LIMIT_PER_SECOND", "auth.rate_limit_per_second"),
    ("TRADEOPS_RATE_LIMIT_BURST", "auth.rate_limit_burst"),
    ("TRADEOPS_ANONYMOUS_RATE_LIMIT_PER_SECOND", "auth.anonymous_rate_limit_per_second"),
    ("TRADEOPS_ANONYMOUS_RATE_LIMIT_BURST", "auth.anonymous_rate_limit_burst"),
    ("TRADEOPS_TRUST_FORWARDED_FOR", "auth.trust_forwarded_for"),
    ("TRADEOPS_AUDIT_RETENTION_DAYS", "audit.retention_days"),
    ("TRADEOPS_JOBS_RUN", "jobs.run"),
    ("TRADEOPS_ADVERTISE_URL", "cluster.advertise_url"),
    ("TRADEOPS_JOBS_LEASE_SECONDS", "jobs.lease_seconds"),
    ("TRADEOPS_JOBS_BACKTEST_PARALLEL", "jobs.backtest_parallel"),
    ("TRADEOPS_JOBS_DOWNLOAD_PARALLEL", "jobs.download_parallel"),
    ("TRADEOPS_SIM_SEED", "simulation.seed"),
    ("TRADEOPS_SIM_SPEED", "simulation.speed"),
    ("TRADEOPS_SIM_SYMBOLS", "simulation.symbols"),
    ("TRADEOPS_SIM_REFERENCE_DATA", "simulation.reference_data"),
    ("TRADEOPS_LOG", "log.filter"),
    ("TRADEOPS_LOG_FORMAT", "log.format"),
    ("TRADEOPS_CONSOLE_DIR", "console.dir"),
];

/// Variables that are not configuration keys but are allowed to be set.
const ENV_OTHER: &[&str] = &["TRADEOPS_CONFIG"];

impl Default for Config {
    /// The embedded defaults alone.
    fn default() -> Self {
        Config::load(None, &BTreeMap::new()).expect("embedded defaults are valid")
    }
}

impl Config {
    /// Reads the optional file from disk, then [`Config::from_sources`].
    pub fn load(file: Option<&Path>, env: &BTreeMap<String, String>) -> Result<Config, ConfigErrors> {
        match file.map(std::fs::read_to_string) {
            None => Config::from_sources(None, env),
            Some(Ok(text)) => Config::from_sources(Some(&text), env),
            Some(Err(e)) => {
                // Still check the environment, so every problem is listed at once.
                let problem = format!("cannot read {}: {e}", file.map(|p| p.display().to_string()).unwrap_or_default());
                let mut problems = vec![problem];
                if let Err(ConfigErrors(more)) = Config::from_sources(None, env) {
                    problems.extend(more);
                }
                Err(ConfigErrors(problems))
            }
        }
    }

    /// Builds the configuration from the defaults, a file's text and the environment.
    pub fn from_sources(file: Option<&str>, env: &BTreeMap<String, String>) -> Result<Config, ConfigErrors> {
        let mut problems = Vec::new();
        let mut table: Table = DEFAULT_TOML.parse().expect("embedded defaults parse");
        if let Some(text) = file {
            match text.parse::<Table>() {
                Ok(overlay) => merge(&mut table, overlay, "", &mut problems),
                Err(e) => problems.push(format!("config file is not valid TOML: {}", e.to_string().trim())),
            }
        }
        // Alpaca's own variable names for the key pair, under the service's (which win).
        for (var, key) in [("APCA_API_KEY_ID", "alpaca.key_id"), ("APCA_API_SECRET_KEY", "alpaca.secret_key")] {
            if let Some(value) = env.get(var) {
                set_from_env(&mut table, key, var, value, &mut problems);
            }
        }
        for (var, value) in env.iter().filter(|(k, _)| k.starts_with("TRADEOPS_") && !k.starts_with("TRADEOPS_TEST_")) {
            match ENV_KEYS.iter().find(|(name, _)| name == var) {
                Some((_, key)) => set_from_env(&mut table, key, var, value, &mut problems),
                None if ENV_OTHER.contains(&var.as_str()) => {}
                None => problems.push(format!("{var}: unknown variable (known: {})", env_names())),
            }
        }
        let mut r = Reader { table, problems };
        r.problems.iter_mut().for_each(|p| *p = p.trim().to_string());
        let config = r.build();
        r.leftovers();
        if r.problems.is_empty() {
            Ok(config)
        } else {
            Err(ConfigErrors(r.problems))
        }
    }
}

fn env_names() -> String {
    ENV_KEYS.iter().map(|(n, _)| *n).chain(ENV_OTHER.iter().copied()).collect::<Vec<_>>().join(", ")
}

/// Known keys the defaults leave unset (commented out in `config/default.toml`).
const UNSET_BY_DEFAULT: &[&str] = &["runtime.mode", "brokers.execution", "brokers.market_data"];

/// Overlays `from` onto `into`; keys the defaults do not know are problems.
fn merge(into: &mut Table, from: Table, prefix: &str, problems: &mut Vec<String>) {
    for (key, value) in from {
        let path = if prefix.is_empty() { key.clone() } else { format!("{prefix}.{key}") };
        match (into.get_mut(&key), value) {
            (Some(Value::Table(inner)), Value::Table(overlay)) => merge(inner, overlay, &path, problems),
            (Some(Value::Table(_)), _) => problems.push(format!("{path}: must be a section")),
            (Some(slot), value) => *slot = value,
            // These are commented out in the defaults but are known keys.
            (None, value) if UNSET_BY_DEFAULT.contains(&path.as_str()) => {
                into.insert(key, value);
            }
            (None, _) => problems.push(format!("{path}: unknown key")),
        }
    }
}

/// Environment values are text; they are typed like the default they replace.
fn set_from_env(table: &mut Table, key: &str, var: &str, raw: &str, problems: &mut Vec<String>) {
    let (section, field) = key.split_once('.').expect("keys are section.field");
    let Some(Value::Table(section)) = table.get_mut(section) else { return };
    let typed = match section.get(field) {
        Some(Value::Boolean(_)) => match raw.to_ascii_lowercase().as_str() {
            "true" | "1" | "yes" => Value::Boolean(true),
            "false" | "0" | "no" => Value::Boolean(false),
            _ => return problems.push(format!("{var}: must be true or false (got {raw:?})")),
        },
        Some(Value::Integer(_)) => match raw.trim().parse::<i64>() {
            Ok(n) => Value::Integer(n),
            Err(_) => match raw.trim().parse::<f64>() {
                Ok(x) if field == "speed" => Value::Float(x),
                _ => return problems.push(format!("{var}: must be a whole number (got {raw:?})")),
            },
        },
        _ => Value::String(raw.to_string()),
    };
    section.insert(field.to_string(), typed);
}

/// A database URL without its password, for messages.
pub fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let creds = &url[scheme + 3..at];
            match creds.split_once(':') {
                Some((user, _)) => format!("{}{user}:***{}", &url[..scheme + 3], &url[at..]),
                None => url.to_string(),
            }
        }
        _ => url.to_string(),
    }
}

#[cfg(test)]
mod tests;
