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

/// The embedded defaults, identical to `config/default.toml` in the repository.
pub const DEFAULT_TOML: &str = include_str!("../../../config/default.toml");

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

/// Takes typed values out of the merged table, recording every problem.
struct Reader {
    table: Table,
    problems: Vec<String>,
}

impl Reader {
    fn take(&mut self, key: &str) -> Option<Value> {
        let (section, field) = key.split_once('.').expect("keys are section.field");
        match self.table.get_mut(section) {
            Some(Value::Table(t)) => t.remove(field),
            _ => None,
        }
    }

    fn string(&mut self, key: &str) -> String {
        match self.take(key) {
            Some(Value::String(s)) => s,
            Some(other) => {
                self.problems.push(format!("{key}: must be a string (got {other})"));
                String::new()
            }
            None => String::new(),
        }
    }

    fn boolean(&mut self, key: &str) -> bool {
        match self.take(key) {
            Some(Value::Boolean(b)) => b,
            Some(other) => {
                self.problems.push(format!("{key}: must be true or false (got {other})"));
                false
            }
            None => false,
        }
    }

    fn integer(&mut self, key: &str, min: i64, max: i64) -> i64 {
        match self.take(key) {
            Some(Value::Integer(n)) if (min..=max).contains(&n) => n,
            Some(other) => {
                self.problems.push(format!("{key}: must be a whole number from {min} to {max} (got {other})"));
                min
            }
            None => min,
        }
    }

    fn number(&mut self, key: &str, min: f64, max: f64) -> f64 {
        let value = match self.take(key) {
            Some(Value::Integer(n)) => n as f64,
            Some(Value::Float(x)) => x,
            Some(other) => {
                self.problems.push(format!("{key}: must be a number (got {other})"));
                return min;
            }
            None => return min,
        };
        if !(min..=max).contains(&value) {
            self.problems.push(format!("{key}: must be from {min} to {max} (got {value})"));
        }
        value
    }

    /// A dollar amount from a number, exact to 4 decimals.
    fn money(&mut self, key: &str, min: f64, max: f64) -> rust_decimal::Decimal {
        let value = self.number(key, min, max);
        rust_decimal::Decimal::try_from(value).map(|d| d.round_dp(4)).unwrap_or_default()
    }

    /// An adapter named by `key`, one of `allowed`.
    fn adapter<K: Copy>(&mut self, key: &str, allowed: &[(&str, K)]) -> Option<K> {
        let names = allowed.iter().map(|(name, _)| *name).collect::<Vec<_>>().join(", ");
        let name = match self.take(key)? {
            Value::String(s) => s.trim().to_ascii_lowercase(),
            other => {
                self.problems.push(format!("{key}: must be a string, one of {names} (got {other})"));
                return None;
            }
        };
        if let Some((_, kind)) = allowed.iter().find(|(n, _)| *n == name) {
            return Some(*kind);
        }
        self.problems.push(format!("{key}: unknown adapter {name:?}; use one of {names}"));
        None
    }

    fn build(&mut self) -> Config {
        let bind_text = self.string("server.bind");
        let bind = bind_text.parse::<SocketAddr>().unwrap_or_else(|_| {
            self.problems.push(format!("server.bind: not an address like 127.0.0.1:8080 (got {bind_text:?})"));
            SocketAddr::from(([127, 0, 0, 1], 8080))
        });
        let shutdown_grace = Duration::from_secs(self.integer("server.shutdown_grace_seconds", 0, 600) as u64);

        let database_url = self.string("database.url");
        if !(database_url.starts_with("sqlite:")
            || database_url.starts_with("postgres://")
            || database_url.starts_with("postgresql://"))
        {
            self.problems.push(format!(
                "database.url: must start with sqlite: or postgres:// (got {:?})",
                redact(&database_url)
            ));
        }
        let redis_url = Some(self.string("cache.redis_url")).filter(|u| !u.is_empty());
        if let Some(url) = &redis_url {
            if url.starts_with("rediss://") {
                self.problems.push("cache.redis_url: Redis over TLS (rediss://) is not supported by this build; use redis:// through a local TLS tunnel".into());
            } else if !url.starts_with("redis://") {
                self.problems.push(format!("cache.redis_url: must start with redis:// (got {:?})", redact(url)));
            }
        }
        let cache_key_prefix = self.string("cache.key_prefix");
        let console_dir = Some(self.string("console.dir")).filter(|d| !d.is_empty()).map(std::path::PathBuf::from);
        if let Some(dir) = &console_dir {
            if !dir.join("index.html").is_file() {
                self.problems.push(format!(
                    "console.dir: {} has no index.html (run `npm run build` in console/)",
                    dir.display()
                ));
            }
        }

        let mode = match self.take("runtime.mode") {
            None => None,
            Some(Value::String(s)) => match s.parse::<TradingMode>() {
                Ok(mode) => Some(mode),
                Err(e) => {
                    self.problems.push(format!("runtime.mode: {e}"));
                    None
                }
            },
            Some(other) => {
                self.problems.push(format!("runtime.mode: must be a string (got {other})"));
                None
            }
        };

        let brokers = BrokersConfig {
            execution: self.adapter(
                "brokers.execution",
                &[("paper", ExecutionBrokerKind::Paper), ("alpaca", ExecutionBrokerKind::Alpaca)],
            ),
            market_data: self.adapter(
                "brokers.market_data",
                &[("simulated", MarketDataBrokerKind::Simulated), ("alpaca", MarketDataBrokerKind::Alpaca)],
            ),
        };
        let alpaca = self.alpaca(&brokers, mode);

        let auth = AuthConfig {
            enabled: self.boolean("auth.enabled"),
            admin_token: Some(self.string("auth.admin_token")).filter(|t| !t.is_empty()),
            rate_limit_per_second: self.integer("auth.rate_limit_per_second", 1, 10_000_000) as u32,
            rate_limit_burst: self.integer("auth.rate_limit_burst", 1, 10_000_000) as u32,
            anonymous_rate_limit_per_second: self.integer("auth.anonymous_rate_limit_per_second", 1, 10_000_000) as u32,
            anonymous_rate_limit_burst: self.integer("auth.anonymous_rate_limit_burst", 1, 10_000_000) as u32,
            trust_forwarded_for: self.boolean("auth.trust_forwarded_for"),
        };
        let audit = AuditConfig { retention_days: self.integer("audit.retention_days", 1, 36_500) as u32 };
        if let Some(token) = &auth.admin_token {
            if token.len() < 16 || token.len() > 256 || !token.chars().all(|c| c.is_ascii_graphic()) {
                self.problems.push("auth.admin_token: must be 16 to 256 printable ASCII characters".into());
            }
        }
        if !auth.enabled && !bind.ip().is_loopback() {
            self.problems.push(format!("auth.enabled: may be false only when listening on loopback (bind is {bind})"));
        }
        if mode == Some(TradingMode::Live) {
            if brokers.execution() != ExecutionBrokerKind::Alpaca {
                self.problems.push(
                    "runtime.mode: LIVE needs the alpaca execution broker (TRADEOPS_EXECUTION_BROKER=alpaca)".into(),
                );
            }
            if !auth.enabled {
                self.problems.push("runtime.mode: LIVE needs authentication enabled".into());
            }
        }

        let seed = self.integer("simulation.seed", 0, i64::MAX) as u64;
        let speed = self.number("simulation.speed", 0.0, 10_000.0);
        let symbols = self.integer("simulation.symbols", 1, 20_000) as u32;
        let reference_data = self.boolean("simulation.reference_data");
        let sim = SimConfig { seed, speed: (speed > 0.0).then_some(speed), symbols, reference_data };

        let paper = PaperConfigValues {
            initial_cash: self.money("paper.initial_cash", 1.0, 1e10),
            ack_latency_ms: self.integer("paper.ack_latency_ms", 0, 60_000),
            cancel_latency_ms: self.integer("paper.cancel_latency_ms", 0, 3_600_000),
            slippage_bps: self.number("paper.slippage_bps", 0.0, 1_000.0),
            fee_per_share: self.money("paper.fee_per_share", 0.0, 10.0),
        };
        let health_probe_interval =
            Duration::from_millis(self.integer("health.probe_interval_ms", 100, 600_000) as u64);
        let advertise_url = Some(self.string("cluster.advertise_url").trim().trim_end_matches('/').to_string())
            .filter(|u| !u.is_empty());
        if let Some(url) = &advertise_url {
            if !(url.starts_with("http://") || url.starts_with("https://")) || url.contains(char::is_whitespace) {
                self.problems.push(format!("cluster.advertise_url: must be an http:// or https:// URL (got {url:?})"));
            }
        }
        let jobs = JobsConfig {
            run: self.boolean("jobs.run"),
            lease: Duration::from_secs(self.integer("jobs.lease_seconds", 3, 3_600) as u64),
            backtest_parallel: self.integer("jobs.backtest_parallel", 1, 256) as usize,
            download_parallel: self.integer("jobs.download_parallel", 1, 256) as usize,
        };

        let filter = self.string("log.filter");
        if let Err(e) = tracing_subscriber::EnvFilter::try_new(&filter) {
            self.problems.push(format!("log.filter: not a tracing filter ({e}) (got {filter:?})"));
        }
        let format = match self.string("log.format").as_str() {
            "pretty" => LogFormat::Pretty,
            "json" => LogFormat::Json,
            other => {
                self.problems.push(format!("log.format: must be pretty or json (got {other:?})"));
                LogFormat::Pretty
            }
        };

        Config {
            bind,
            shutdown_grace,
            database_url,
            redis_url,
            cache_key_prefix,
            mode,
            auth,
            audit,
            sim,
            brokers,
            alpaca,
            paper,
            health_probe_interval,
            jobs,
            advertise_url,
            console_dir,
            log: LogConfig { filter, format },
        }
    }

    /// The `[alpaca]` group, checked against the adapters chosen: credentials are required
    /// when either is `alpaca`, and `LIVE` must not trade Alpaca's paper endpoint.
    fn alpaca(&mut self, brokers: &BrokersConfig, mode: Option<TradingMode>) -> AlpacaSettings {
        let key_id = self.string("alpaca.key_id").trim().to_string();
        let secret_key = self.string("alpaca.secret_key").trim().to_string();
        let credentials = (!key_id.is_empty() && !secret_key.is_empty())
            .then_some(tradeops_brokers::alpaca::rest::AlpacaCredentials { key_id, secret_key });
        let url = |r: &mut Reader, key: &str, schemes: &[&str]| -> Option<String> {
            let url = r.string(key).trim().to_string();
            if url.is_empty() {
                return None;
            }
            if !schemes.iter().any(|s| url.starts_with(s)) || url.contains(char::is_whitespace) {
                r.problems.push(format!("{key}: must be a {} URL (got {url:?})", schemes.join(" or ")));
            }
            Some(url)
        };
        let trading_url = url(self, "alpaca.trading_url", &["https://", "http://"]);
        let data_url = url(self, "alpaca.data_url", &["https://", "http://"]).unwrap_or_default();
        let data_stream_url = url(self, "alpaca.data_stream_url", &["wss://", "ws://"]);
        let feed = match self.string("alpaca.feed").trim().to_ascii_lowercase().as_str() {
            "iex" => AlpacaFeed::Iex,
            "sip" => AlpacaFeed::Sip,
            other => {
                self.problems.push(format!("alpaca.feed: must be iex or sip (got {other:?})"));
                AlpacaFeed::Iex
            }
        };
        let request_timeout = Duration::from_millis(self.integer("alpaca.request_timeout_ms", 100, 120_000) as u64);
        let chosen =
            brokers.execution() == ExecutionBrokerKind::Alpaca || brokers.market_data() == MarketDataBrokerKind::Alpaca;
        if chosen && credentials.is_none() {
            self.problems.push(
                "alpaca: the alpaca adapter needs credentials: set TRADEOPS_ALPACA_KEY_ID and \
                 TRADEOPS_ALPACA_SECRET_KEY (or APCA_API_KEY_ID and APCA_API_SECRET_KEY)"
                    .into(),
            );
        }
        let settings = AlpacaSettings { credentials, trading_url, data_url, data_stream_url, feed, request_timeout };
        if mode == Some(TradingMode::Live)
            && brokers.execution() == ExecutionBrokerKind::Alpaca
            && AlpacaSettings::is_paper_endpoint(&settings.trading_url(TradingMode::Live))
        {
            self.problems.push(format!(
                "alpaca.trading_url: LIVE trades real money and cannot use Alpaca's paper endpoint {ALPACA_PAPER_URL}"
            ));
        }
        settings
    }

    /// Keys nobody read are unknown (only reachable when a section held extra keys).
    fn leftovers(&mut self) {
        for (section, value) in &self.table {
            if let Value::Table(t) = value {
                for key in t.keys() {
                    self.problems.push(format!("{section}.{key}: unknown key"));
                }
            }
        }
    }
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
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn passwords_never_appear_in_messages() {
        assert_eq!(redact("postgres://u:secret@h:5432/db"), "postgres://u:***@h:5432/db");
        let errs = Config::from_sources(None, &env(&[("TRADEOPS_DATABASE_URL", "mysql://u:secret@h/db")])).unwrap_err();
        assert!(!errs.to_string().contains("secret"), "{errs}");
    }

    #[test]
    fn a_bad_file_does_not_hide_environment_problems() {
        let errs = Config::from_sources(Some("[server\nbind="), &env(&[("TRADEOPS_SIM_SYMBOLS", "lots")])).unwrap_err();
        assert_eq!(errs.0.len(), 2, "{errs}");
        let missing = Config::load(Some(Path::new("/nonexistent/tradeops.toml")), &env(&[("TRADEOPS_MODE", "x")]));
        assert_eq!(missing.unwrap_err().0.len(), 2);
    }

    #[test]
    fn defaults_match_the_contract() {
        let c = Config::default();
        assert_eq!(c.bind.to_string(), "127.0.0.1:8080");
        assert_eq!(c.database_url, "sqlite://./data/tradeops.db");
        assert_eq!(c.redis_url, None);
        assert_eq!(c.mode, None);
        assert!(c.auth.enabled);
        assert_eq!((c.auth.rate_limit_per_second, c.auth.rate_limit_burst), (20, 40));
        assert_eq!((c.auth.anonymous_rate_limit_per_second, c.auth.anonymous_rate_limit_burst), (5, 20));
        assert!(!c.auth.trust_forwarded_for);
        assert_eq!(c.audit.retention_days, 90);
        assert_eq!(c.sim.symbols, 500);
    }

    #[test]
    fn environment_wins_over_file() {
        let file = "[server]\nbind = \"127.0.0.1:9000\"\n[simulation]\nsymbols = 100\n";
        let c = Config::from_sources(Some(file), &env(&[("TRADEOPS_SIM_SYMBOLS", "10000"), ("TRADEOPS_MODE", "demo")]))
            .unwrap();
        assert_eq!(c.bind.port(), 9000);
        assert_eq!(c.sim.symbols, 10_000);
        assert_eq!(c.mode, Some(TradingMode::Demo));
    }

    #[test]
    fn every_problem_is_listed() {
        let file = "[server]\nbind = \"nowhere\"\nbogus = 1\n[log]\nformat = \"xml\"\n[extra]\nx = 1\n";
        let errs = Config::from_sources(
            Some(file),
            &env(&[
                ("TRADEOPS_AUTH_ENABLED", "maybe"),
                ("TRADEOPS_DATABASE_URL", "mysql://x"),
                ("TRADEOPS_SIM_SYMBOLS", "lots"),
                ("TRADEOPS_BOGUS", "1"),
                ("TRADEOPS_LOG", "info,[[["),
                ("TRADEOPS_TEST_DATABASE_URL", "ignored"),
            ]),
        )
        .unwrap_err();
        let text = errs.to_string();
        for needle in [
            "server.bind",
            "server.bogus",
            "log.format",
            "extra: unknown key",
            "TRADEOPS_AUTH_ENABLED",
            "database.url",
            "TRADEOPS_SIM_SYMBOLS",
            "TRADEOPS_BOGUS",
            "log.filter",
        ] {
            assert!(text.contains(needle), "{needle} missing from:\n{text}");
        }
        assert_eq!(errs.0.len(), 9, "{text}");
    }

    #[test]
    fn auth_off_only_on_loopback_and_live_refused_without_live_broker() {
        let errs = Config::from_sources(
            None,
            &env(&[("TRADEOPS_BIND", "0.0.0.0:8080"), ("TRADEOPS_AUTH_ENABLED", "false"), ("TRADEOPS_MODE", "LIVE")]),
        )
        .unwrap_err()
        .to_string();
        assert!(errs.contains("loopback"), "{errs}");
        assert!(errs.contains("LIVE needs the alpaca execution broker"), "{errs}");
        assert!(Config::from_sources(None, &env(&[("TRADEOPS_AUTH_ENABLED", "false")])).is_ok());
    }

    #[test]
    fn broker_adapters_are_chosen_by_file_or_environment() {
        let c = Config::default();
        assert_eq!(c.brokers, BrokersConfig::default());
        assert!(!c.brokers.is_configured());
        assert_eq!(
            (c.brokers.execution(), c.brokers.market_data()),
            (ExecutionBrokerKind::Paper, MarketDataBrokerKind::Simulated)
        );
        let file = Config::from_sources(Some("[brokers]\nmarket_data = \"simulated\"\n"), &env(&[])).unwrap();
        assert_eq!(file.brokers, BrokersConfig { execution: None, market_data: Some(MarketDataBrokerKind::Simulated) });
        let both = Config::from_sources(
            Some("[brokers]\nexecution = \"alpaca\"\n"),
            &env(&[("TRADEOPS_EXECUTION_BROKER", "paper"), ("TRADEOPS_MARKET_DATA", "Simulated")]),
        )
        .unwrap();
        assert_eq!(both.brokers.execution, Some(ExecutionBrokerKind::Paper), "the environment wins");
        assert_eq!(both.brokers.market_data, Some(MarketDataBrokerKind::Simulated));
        assert!(both.brokers.is_configured());

        let errs = Config::from_sources(
            None,
            &env(&[("TRADEOPS_EXECUTION_BROKER", "alpaca"), ("TRADEOPS_MARKET_DATA", "bloomberg")]),
        )
        .unwrap_err();
        assert_eq!(errs.0.len(), 2, "{errs}");
        assert!(errs.0[0].contains("brokers.market_data") && errs.0[0].contains("simulated, alpaca"), "{errs}");
        assert!(errs.0[1].starts_with("alpaca: the alpaca adapter needs credentials"), "{errs}");
        let unknown_key = Config::from_sources(Some("[brokers]\nrisk = \"paper\"\n"), &env(&[])).unwrap_err();
        assert!(unknown_key.to_string().contains("brokers.risk: unknown key"), "{unknown_key}");
    }

    #[test]
    fn alpaca_is_configured_by_its_group_and_environment_and_its_secret_never_shows() {
        let secret = "sk-very-secret-0042";
        let c = Config::from_sources(
            None,
            &env(&[
                ("TRADEOPS_EXECUTION_BROKER", "alpaca"),
                ("APCA_API_KEY_ID", "PKAPCA"),
                ("APCA_API_SECRET_KEY", secret),
                ("TRADEOPS_ALPACA_KEY_ID", "PKTRADEOPS"),
                ("TRADEOPS_ALPACA_FEED", "SIP"),
            ]),
        )
        .unwrap();
        let credentials = c.alpaca.credentials.clone().expect("credentials from the environment");
        assert_eq!(
            (credentials.key_id.as_str(), credentials.secret_key.as_str()),
            ("PKTRADEOPS", secret),
            "TRADEOPS_ wins over APCA_"
        );
        assert_eq!(c.alpaca.feed, AlpacaFeed::Sip);
        assert_eq!(c.alpaca.trading_url(TradingMode::Paper), ALPACA_PAPER_URL);
        assert_eq!(c.alpaca.trading_url(TradingMode::Live), ALPACA_LIVE_URL);
        assert_eq!(c.alpaca.data_stream_url(), "wss://stream.data.alpaca.markets/v2/sip");
        assert_eq!(AlpacaSettings::trade_stream_url(ALPACA_PAPER_URL), "wss://paper-api.alpaca.markets/stream");
        assert_eq!(AlpacaSettings::trade_stream_url("http://127.0.0.1:9/"), "ws://127.0.0.1:9/stream");
        assert!(!format!("{c:?}").contains(secret), "Debug of the configuration hides the secret");

        // LIVE on Alpaca's paper endpoint is refused; on its live endpoint it is taken.
        let live = |url: &str| {
            Config::from_sources(
                None,
                &env(&[
                    ("TRADEOPS_MODE", "LIVE"),
                    ("TRADEOPS_EXECUTION_BROKER", "alpaca"),
                    ("TRADEOPS_ALPACA_KEY_ID", "PK"),
                    ("TRADEOPS_ALPACA_SECRET_KEY", secret),
                    ("TRADEOPS_ALPACA_TRADING_URL", url),
                ]),
            )
        };
        let errs = live(ALPACA_PAPER_URL).unwrap_err();
        assert_eq!(errs.0.len(), 1, "{errs}");
        assert!(errs.0[0].starts_with("alpaca.trading_url: LIVE trades real money"), "{errs}");
        assert!(live(ALPACA_LIVE_URL).is_ok());

        let errs = Config::from_sources(
            None,
            &env(&[("TRADEOPS_ALPACA_TRADING_URL", "ftp://x"), ("TRADEOPS_ALPACA_FEED", "opra")]),
        )
        .unwrap_err();
        assert_eq!(errs.0.len(), 2, "{errs}");
        assert!(!errs.to_string().contains(secret));
    }

    #[test]
    fn flood_settings_are_validated() {
        let c = Config::from_sources(
            None,
            &env(&[
                ("TRADEOPS_ANONYMOUS_RATE_LIMIT_PER_SECOND", "2"),
                ("TRADEOPS_ANONYMOUS_RATE_LIMIT_BURST", "8"),
                ("TRADEOPS_TRUST_FORWARDED_FOR", "true"),
                ("TRADEOPS_AUDIT_RETENTION_DAYS", "30"),
            ]),
        )
        .unwrap();
        assert_eq!((c.auth.anonymous_rate_limit_per_second, c.auth.anonymous_rate_limit_burst), (2, 8));
        assert!(c.auth.trust_forwarded_for);
        assert_eq!(c.audit.retention_days, 30);
        let errs = Config::from_sources(
            Some("[audit]\nretention_days = 0\n"),
            &env(&[("TRADEOPS_ANONYMOUS_RATE_LIMIT_BURST", "0"), ("TRADEOPS_TRUST_FORWARDED_FOR", "sometimes")]),
        )
        .unwrap_err()
        .to_string();
        for needle in ["audit.retention_days", "auth.anonymous_rate_limit_burst", "TRADEOPS_TRUST_FORWARDED_FOR"] {
            assert!(errs.contains(needle), "{needle} missing from:\n{errs}");
        }
    }
}
