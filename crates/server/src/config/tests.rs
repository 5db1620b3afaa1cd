//! Configuration loading, tested as a pure function of the embedded defaults, a file and the
//! environment.

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
