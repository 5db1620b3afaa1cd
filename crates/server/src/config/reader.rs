//! Reading the merged configuration table into a typed [`Config`]: each key taken out with its
//! type and bounds checked, every problem recorded (not only the first), and whatever is left
//! over reported as an unknown key.

use super::*;

/// Takes typed values out of the merged table, recording every problem.
pub(super) struct Reader {
    pub table: Table,
    pub problems: Vec<String>,
}

impl Reader {
    pub(super) fn take(&mut self, key: &str) -> Option<Value> {
        let (section, field) = key.split_once('.').expect("keys are section.field");
        match self.table.get_mut(section) {
            Some(Value::Table(t)) => t.remove(field),
            _ => None,
        }
    }

    pub(super) fn string(&mut self, key: &str) -> String {
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

    pub fn build(&mut self) -> Config {
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

        let notifications = self.notifications();

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
            notifications,
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
    pub fn leftovers(&mut self) {
        for (section, value) in &self.table {
            if let Value::Table(t) = value {
                for key in t.keys() {
                    self.problems.push(format!("{section}.{key}: unknown key"));
                }
            }
        }
    }
}
