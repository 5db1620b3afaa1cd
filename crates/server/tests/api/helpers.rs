//! `spawn_app()` and friends.

use reqwest::{header::HeaderMap, Method, StatusCode};
use serde_json::Value;
use std::sync::Arc;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tradeops_core::Clock;
use tradeops_server::app::Overrides;
use tradeops_server::clock::SystemClock;
use tradeops_server::{Application, Config};

pub const ADMIN_TOKEN: &str = "tro_test_admin_token_0123456789abcdef";

/// Set (to `1`) where PostgreSQL and Redis are promised (the second pass of `.ci/run`): a test
/// that needs them, a PostgreSQL installation or a tmpfs then fails rather than skip.
pub const REQUIRE_SERVICES: &str = "TRADEOPS_REQUIRE_SERVICES";
/// Set (to `1`) where Chromium is promised (`.ci/run`).
pub const REQUIRE_BROWSER: &str = "TRADEOPS_REQUIRE_BROWSER";

/// Whether the environment variable `var` promises what a test needs.
pub fn required(var: &str) -> bool {
    std::env::var(var).is_ok_and(|v| v == "1")
}

/// Called by a test that cannot run here, before it returns: says so and why where the person
/// running the tests sees it (written to the process's stderr, past the harness's capture of
/// a passing test's output) — or fails the test where `require` (an environment variable such
/// as [`REQUIRE_SERVICES`]) promised what it needs.
pub fn skip(test: &str, why: &str, require: &str) {
    if required(require) {
        panic!("{test} cannot run: {why} ({require}=1 promised it could)");
    }
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "SKIPPED {test}: {why}");
}

/// A database that lives as long as the test.
pub enum TestDb {
    /// Kept for its lifetime: the folder is deleted when the test ends.
    Sqlite(#[allow(dead_code)] tempfile::TempDir),
    Postgres {
        admin_url: String,
        name: String,
    },
    /// A database the test manages itself (its own PostgreSQL cluster).
    External,
}

impl TestDb {
    pub async fn new() -> (TestDb, String) {
        match std::env::var("TRADEOPS_TEST_DATABASE_URL") {
            Ok(admin_url) if !admin_url.is_empty() => {
                let name = format!("tradeops_test_{}", uuid::Uuid::new_v4().simple());
                let db = tradeops_store::Database::connect(&admin_url)
                    .await
                    .expect("TRADEOPS_TEST_DATABASE_URL is set but PostgreSQL is not reachable");
                db.execute_raw(&format!("CREATE DATABASE {name}")).await.expect("create test database");
                db.close().await;
                let url = replace_db_name(&admin_url, &name);
                (TestDb::Postgres { admin_url, name }, url)
            }
            _ => {
                assert!(
                    !required(REQUIRE_SERVICES),
                    "{REQUIRE_SERVICES}=1 but TRADEOPS_TEST_DATABASE_URL is not set: the tests would run on SQLite"
                );
                let dir = tempfile::tempdir().expect("temp dir");
                let url = format!("sqlite://{}/tradeops.db", dir.path().display());
                (TestDb::Sqlite(dir), url)
            }
        }
    }
}

fn replace_db_name(url: &str, name: &str) -> String {
    let (base, query) = url.split_once('?').map(|(b, q)| (b, Some(q))).unwrap_or((url, None));
    let slash = base.rfind('/').expect("postgres URL has a database path");
    let mut out = format!("{}/{name}", &base[..slash]);
    if let Some(q) = query {
        out.push('?');
        out.push_str(q);
    }
    out
}

impl Drop for TestDb {
    fn drop(&mut self) {
        if let TestDb::Postgres { admin_url, name } = self {
            let (admin_url, name) = (admin_url.clone(), name.clone());
            // Drop runs inside the test's runtime; use a thread with its own runtime.
            let _ = std::thread::spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
                rt.block_on(async {
                    if let Ok(db) = tradeops_store::Database::connect(&admin_url).await {
                        let _ = db.execute_raw(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")).await;
                        db.close().await;
                    }
                });
            })
            .join();
        }
    }
}

/// Market time at which every test app starts: Friday 2026-11-20, 10:00 New York.
pub const MARKET_START: &str = "2026-11-20T15:00:00Z";

pub struct TestApp {
    pub base: String,
    /// The market clock; advance it to move the simulated market.
    pub market: tradeops_core::ManualClock,
    pub config: Config,
    pub client: reqwest::Client,
    pub db: Arc<TestDb>,
    /// The service's clock (the wall clock unless a test drives it).
    pub clock: Arc<dyn Clock>,
    shutdown: Option<oneshot::Sender<()>>,
    server: Option<JoinHandle<anyhow::Result<()>>>,
}

/// A response, parsed.
#[derive(Debug)]
pub struct Reply {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Value,
}

impl Reply {
    pub fn code(&self) -> &str {
        self.body["error"]["code"].as_str().unwrap_or("")
    }

    pub fn data(&self) -> &Value {
        &self.body["data"]
    }

    /// Asserts the error envelope with this status and code.
    #[track_caller]
    pub fn assert_error(&self, status: u16, code: &str) {
        assert_eq!(self.status.as_u16(), status, "body: {}", self.body);
        assert_eq!(self.body["ok"], false, "body: {}", self.body);
        assert_eq!(self.code(), code, "body: {}", self.body);
        assert_meta(&self.body, &self.headers);
    }

    #[track_caller]
    pub fn assert_ok(&self, status: u16) -> &Value {
        assert_eq!(self.status.as_u16(), status, "body: {}", self.body);
        assert_eq!(self.body["ok"], true, "body: {}", self.body);
        assert_meta(&self.body, &self.headers);
        self.data()
    }
}

/// Every envelope has meta.mode, an RFC 3339 ms timestamp, and the request id of the header.
#[track_caller]
pub fn assert_meta(body: &Value, headers: &HeaderMap) {
    let meta = &body["meta"];
    let mode = meta["mode"].as_str().expect("meta.mode");
    assert!(["PAPER", "LIVE", "DEMO"].contains(&mode), "{body}");
    let ts = meta["timestamp"].as_str().expect("meta.timestamp");
    assert!(ts.ends_with('Z') && ts.len() == 24, "timestamp {ts}");
    let id = meta["request_id"].as_str().expect("meta.request_id");
    assert_eq!(headers.get("x-request-id").and_then(|v| v.to_str().ok()), Some(id));
    assert_eq!(headers.get("x-trading-mode").and_then(|v| v.to_str().ok()), Some(mode));
}

/// The rows of a `GET /api/audit` body as `action target outcome`, newest first.
pub fn audit_rows(body: &Value) -> Vec<String> {
    let rows = body["data"].as_array().expect("audit rows");
    rows.iter()
        .map(|r| {
            let field = |name: &str| r[name].as_str().unwrap_or_default().to_string();
            format!("{} {} {}", field("action"), field("target"), field("outcome"))
        })
        .collect()
}

pub fn test_config(database_url: String) -> Config {
    init_test_log();
    let mut config = Config {
        bind: "127.0.0.1:0".parse().unwrap(),
        database_url,
        shutdown_grace: std::time::Duration::from_secs(5),
        health_probe_interval: std::time::Duration::from_millis(100),
        ..Config::default()
    };
    config.auth.admin_token = Some(ADMIN_TOKEN.into());
    match std::env::var("TRADEOPS_TEST_REDIS_URL") {
        Ok(url) if !url.is_empty() => {
            config.redis_url = Some(url);
            config.cache_key_prefix = format!("tradeops-test-{}:", uuid::Uuid::new_v4().simple());
        }
        _ => assert!(
            !required(REQUIRE_SERVICES),
            "{REQUIRE_SERVICES}=1 but TRADEOPS_TEST_REDIS_URL is not set: the tests would run on the in-process cache"
        ),
    }
    config
}

/// `TRADEOPS_TEST_LOG=warn` (any `RUST_LOG` filter) prints the services' own logs beside a
/// test's output: what a refusal's envelope does not say (which write timed out, which probe
/// failed) is in them.
fn init_test_log() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        if let Ok(filter) = std::env::var("TRADEOPS_TEST_LOG") {
            let _ = tracing_subscriber::fmt()
                .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
                .with_test_writer()
                .try_init();
        }
    });
}

pub async fn spawn_app() -> TestApp {
    spawn_app_with(|_| {}).await
}

pub async fn spawn_app_with(adjust: impl FnOnce(&mut Config)) -> TestApp {
    let (db, url) = TestDb::new().await;
    let mut config = test_config(url);
    adjust(&mut config);
    start(config, Arc::new(db), axum::Router::new()).await
}

pub async fn start(
    config: Config,
    db: Arc<TestDb>,
    extra: axum::Router<tradeops_server::http::state::AppState>,
) -> TestApp {
    let market = tradeops_core::ManualClock::new(tradeops_core::time::parse_ts(MARKET_START).unwrap());
    start_at(config, db, extra, market).await
}

pub async fn start_at(
    config: Config,
    db: Arc<TestDb>,
    extra: axum::Router<tradeops_server::http::state::AppState>,
    market: tradeops_core::ManualClock,
) -> TestApp {
    start_with_clock(config, db, extra, market, Arc::new(SystemClock)).await
}

/// A test app whose service clock (audit time, budgets, housekeeping) is `clock`.
pub async fn spawn_app_with_clock(clock: tradeops_core::ManualClock, adjust: impl FnOnce(&mut Config)) -> TestApp {
    let (db, url) = TestDb::new().await;
    let mut config = test_config(url);
    adjust(&mut config);
    let market = tradeops_core::ManualClock::new(tradeops_core::time::parse_ts(MARKET_START).unwrap());
    start_with_clock(config, Arc::new(db), axum::Router::new(), market, Arc::new(clock)).await
}

pub async fn start_with_clock(
    config: Config,
    db: Arc<TestDb>,
    extra: axum::Router<tradeops_server::http::state::AppState>,
    market: tradeops_core::ManualClock,
    clock: Arc<dyn Clock>,
) -> TestApp {
    let overrides =
        Overrides { market_clock: Some(Arc::new(market.clone())), extra_routes: extra, ..Default::default() };
    let app = Application::build_with(config.clone(), clock.clone(), overrides).await.expect("app builds");
    serve(app, config, db, market, clock)
}

/// A test app trading through `execution` instead of the configured execution broker (a venue
/// that fails on cue); restarted, it trades through the configured one.
pub async fn spawn_app_trading_through(execution: Arc<dyn tradeops_brokers::ExecutionBroker>) -> TestApp {
    let (db, url) = TestDb::new().await;
    let config = test_config(url);
    let market = tradeops_core::ManualClock::new(tradeops_core::time::parse_ts(MARKET_START).unwrap());
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let overrides = Overrides {
        market_clock: Some(Arc::new(market.clone())),
        extra_routes: axum::Router::new(),
        ..Default::default()
    };
    let app = Application::build_with_execution(config.clone(), clock.clone(), overrides, execution)
        .await
        .expect("app builds");
    serve(app, config, Arc::new(db), market, clock)
}

/// Runs a built app until the returned [`TestApp`] stops it.
fn serve(
    app: Application,
    config: Config,
    db: Arc<TestDb>,
    market: tradeops_core::ManualClock,
    clock: Arc<dyn Clock>,
) -> TestApp {
    let base = format!("http://{}", app.local_addr());
    let (tx, rx) = oneshot::channel();
    let server = tokio::spawn(app.run_until_stopped(async {
        let _ = rx.await;
    }));
    TestApp {
        base,
        market,
        config,
        client: reqwest::Client::new(),
        db,
        clock,
        shutdown: Some(tx),
        server: Some(server),
    }
}

impl TestApp {
    /// Stops gracefully and starts again on the same database.
    pub async fn restart(mut self) -> TestApp {
        self.stop().await;
        start_with_clock(
            self.config.clone(),
            self.db.clone(),
            axum::Router::new(),
            self.market.clone(),
            self.clock.clone(),
        )
        .await
    }

    pub async fn stop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(server) = self.server.take() {
            server.await.expect("server task").expect("server stopped cleanly");
        }
    }

    pub async fn call(&self, method: Method, path: &str, token: Option<&str>, body: Option<Value>) -> Reply {
        let mut req = self.client.request(method, format!("{}{path}", self.base));
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        if let Some(b) = body {
            req = req.json(&b);
        }
        Self::parse(req.send().await.expect("request sent")).await
    }

    pub async fn raw(&self, req: reqwest::RequestBuilder) -> Reply {
        Self::parse(req.send().await.expect("request sent")).await
    }

    async fn parse(resp: reqwest::Response) -> Reply {
        let status = resp.status();
        let headers = resp.headers().clone();
        let text = resp.text().await.expect("body");
        let body = serde_json::from_str(&text).unwrap_or_else(|_| panic!("not JSON ({status}): {text}"));
        Reply { status, headers, body }
    }

    pub async fn get(&self, path: &str) -> Reply {
        self.call(Method::GET, path, Some(ADMIN_TOKEN), None).await
    }

    pub async fn get_as(&self, path: &str, token: &str) -> Reply {
        self.call(Method::GET, path, Some(token), None).await
    }

    pub async fn put_settings(&self, token: &str, body: Value) -> Reply {
        self.call(Method::PUT, "/api/settings", Some(token), Some(body)).await
    }

    /// `PUT /api/settings` with `X-Confirm-Live: true`.
    pub async fn put_settings_confirmed(&self, token: &str, body: &Value) -> Reply {
        let req = self.client.put(self.url("/api/settings")).bearer_auth(token).header("x-confirm-live", "true");
        self.raw(req.json(body)).await
    }

    /// Creates a token with `role` as the admin and returns its secret.
    pub async fn token(&self, name: &str, role: &str) -> String {
        let reply = self
            .call(
                Method::POST,
                "/api/auth/tokens",
                Some(ADMIN_TOKEN),
                Some(serde_json::json!({"name": name, "role": role})),
            )
            .await;
        reply.assert_ok(201)["token"].as_str().expect("token").to_string()
    }

    pub async fn settings_version(&self) -> i64 {
        self.get("/api/settings/history?limit=1").await.data()[0]["version"].as_i64().expect("version")
    }

    pub async fn post(&self, path: &str, token: &str, body: Value) -> Reply {
        self.call(Method::POST, path, Some(token), Some(body)).await
    }

    /// Waits (up to 5 s) until the radar's latest scan was captured at `at`, and returns
    /// `GET /api/radar/momentum?top_n=200` then.
    pub async fn wait_for_scan(&self, at: &str) -> Reply {
        for _ in 0..100 {
            let health = self.get("/api/health/components").await;
            let feed = health.data().as_array().unwrap().iter().find(|c| c["name"] == "data_broker").cloned();
            if feed.is_some_and(|f| f["detail"]["radar_captured_at"] == at) {
                return self.get("/api/radar/momentum?top_n=200").await;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        panic!("no radar scan captured at {at}");
    }

    /// Waits (up to 5 s) until the feed has processed the step at market time `at` (as the
    /// `data_broker` health probe reports it).
    pub async fn wait_for_feed(&self, at: &str) {
        for _ in 0..1000 {
            let health = self.get("/api/health/components").await;
            let feed = health.data().as_array().unwrap().iter().find(|c| c["name"] == "data_broker").cloned();
            if feed.is_some_and(|f| f["detail"]["market_time"] == at) {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        panic!("the feed never reached {at}");
    }

    /// `n` symbols of the market with their last prices, from a scan with the filters open.
    pub async fn market_symbols(&self, n: usize) -> Vec<(String, f64)> {
        let open = serde_json::json!({"momentum_radar": {"min_percentage_gain": -100, "min_relative_volume": 0,
            "max_float": 100000000000u64, "min_volume": 0, "min_price": 0.01, "max_price": 100000}});
        self.put_settings(ADMIN_TOKEN, open).await.assert_ok(200);
        let next = self.market.now() + chrono::Duration::minutes(1);
        let boundary = tradeops_core::bars::minute_floor(next);
        self.market.set(boundary);
        let rows = self.wait_for_scan(&tradeops_core::time::format_ts(&boundary)).await;
        rows.data()
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| (2.0..=50.0).contains(&r["price"].as_f64().unwrap()))
            .take(n)
            .map(|r| (r["symbol"].as_str().unwrap().to_string(), r["price"].as_f64().unwrap()))
            .collect()
    }

    /// Moves market time on by `seconds` and waits until the order reaches `status`.
    pub async fn wait_for_order(&self, id: &str, status: &str) -> Value {
        for _ in 0..100 {
            self.market.advance(chrono::Duration::milliseconds(200));
            let reply = self.get(&format!("/api/orders/{id}")).await;
            if reply.data()["status"] == status {
                return reply.data().clone();
            }
            tokio::time::sleep(std::time::Duration::from_millis(30)).await;
        }
        panic!("order {id} never reached {status}: {}", self.get(&format!("/api/orders/{id}")).await.body);
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }
}

impl Drop for TestApp {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
    }
}

/// A test app whose market clock is chosen as the service chooses it (no override): a real
/// market's (Alpaca's) is the wall clock. `market` is then unused.
pub async fn start_on_own_market_clock(config: Config, db: Arc<TestDb>, clock: Arc<dyn Clock>) -> TestApp {
    let overrides = Overrides { market_clock: None, extra_routes: axum::Router::new(), ..Default::default() };
    let app = Application::build_with(config.clone(), clock.clone(), overrides).await.expect("app builds");
    let base = format!("http://{}", app.local_addr());
    let (tx, rx) = oneshot::channel();
    let server = tokio::spawn(app.run_until_stopped(async {
        let _ = rx.await;
    }));
    let market = tradeops_core::ManualClock::new(tradeops_core::time::parse_ts(MARKET_START).unwrap());
    TestApp {
        base,
        market,
        config,
        client: reqwest::Client::new(),
        db,
        clock,
        shutdown: Some(tx),
        server: Some(server),
    }
}

/// The tests' simulated market (the default seed and size of [`test_config`]), asked what it does
/// on a day: which symbols it halts, and when. Tests that trade at whatever market time a run
/// reaches avoid the halted ones (an order or close into a halt is refused `SYMBOL_HALTED`).
pub struct SimDays(tradeops_sim::Universe);

impl SimDays {
    pub fn new() -> SimDays {
        let sim = test_config(String::new()).sim;
        SimDays(tradeops_sim::Universe::generate(sim.seed, sim.symbols as usize))
    }

    /// `symbol`'s halts on the New York `date` (none for a symbol not in the market).
    pub fn halts(&self, symbol: &str, date: chrono::NaiveDate) -> Vec<tradeops_core::market::HaltWindow> {
        let profile = tradeops_core::Symbol::parse(symbol).ok().and_then(|s| self.0.get(&s).cloned());
        profile.map(|p| tradeops_sim::halt_windows(&self.0, &p, date)).unwrap_or_default()
    }

    /// Whether `symbol` is in the market and trades all of `date` without a halt.
    pub fn quiet(&self, symbol: &str, date: chrono::NaiveDate) -> bool {
        let known = tradeops_core::Symbol::parse(symbol).is_ok_and(|s| self.0.get(&s).is_some());
        known && self.halts(symbol, date).is_empty()
    }
}

/// The New York date of an RFC 3339 market time.
pub fn ny_date_of(text: &str) -> chrono::NaiveDate {
    tradeops_core::time::parse_ts(text)
        .expect("a market time")
        .with_timezone(&chrono_tz::America::New_York)
        .date_naive()
}

/// The lines `child` writes to its (piped) standard output, as they come, read on a thread of
/// their own.
pub fn output_lines(child: &mut std::process::Child) -> std::sync::mpsc::Receiver<String> {
    use std::io::BufRead;
    let stdout = child.stdout.take().expect("the child's standard output is piped");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}
