//! Database outages: the service runs on a PostgreSQL cluster of its own (initdb + pg_ctl
//! under a temp dir, never the shared server), which the test stops and starts again. While it
//! is down, requests that need it are refused with 503 `SERVICE_UNAVAILABLE` at once, health
//! says `DOWN` with HTTP 503, new orders are refused and never sent, and the emergency halt
//! still acts at once; once it is back, what was held in memory is stored. And no false
//! outages: a database that answers, however busy, is never reported down, while one really
//! stopped is refused within a second.

use crate::helpers::*;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;
use tokio::time::Instant;

/// A PostgreSQL cluster of the test's own, run as the `postgres` user (initdb refuses root).
pub(crate) struct OwnPostgres {
    bin: PathBuf,
    dir: tempfile::TempDir,
    port: u16,
}

impl OwnPostgres {
    /// `None` (`test` skips, saying why) where PostgreSQL's server binaries are not installed;
    /// CI (which sets `TRADEOPS_REQUIRE_SERVICES=1`) fails instead.
    pub(crate) fn start(test: &str) -> Option<OwnPostgres> {
        let bin = std::fs::read_dir("/usr/lib/postgresql").ok().and_then(|versions| {
            versions.filter_map(Result::ok).map(|v| v.path().join("bin")).find(|b| b.join("initdb").exists())
        });
        let Some(bin) = bin else {
            skip(
                test,
                "no PostgreSQL server binaries (/usr/lib/postgresql/*/bin/initdb) on this machine",
                REQUIRE_SERVICES,
            );
            return None;
        };
        let dir = tempfile::tempdir().expect("temp dir");
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let pg = OwnPostgres { bin, dir, port };
        let owner = Command::new("chown").args(["-R", "postgres:postgres"]).arg(pg.dir.path()).status().unwrap();
        assert!(owner.success(), "chown the cluster's folder to postgres");
        pg.run("initdb", &["-D", &pg.data(), "-U", "postgres", "--auth=trust", "--no-sync"]);
        pg.ctl_start();
        Some(pg)
    }

    fn data(&self) -> String {
        self.dir.path().join("data").display().to_string()
    }

    pub(crate) fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    fn run(&self, tool: &str, args: &[&str]) {
        let mut cmd = if nix_is_root() { Command::new("runuser") } else { Command::new(self.bin.join(tool)) };
        if nix_is_root() {
            cmd.args(["-u", "postgres", "--"]).arg(self.bin.join(tool));
        }
        let out = cmd.args(args).output().expect("run a PostgreSQL tool");
        assert!(out.status.success(), "{tool} {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    }

    pub(crate) fn ctl_start(&self) {
        let options =
            format!("-p {} -k {} -c listen_addresses=127.0.0.1 -c fsync=off", self.port, self.dir.path().display());
        let log = self.dir.path().join("log").display().to_string();
        self.run("pg_ctl", &["-D", &self.data(), "-o", &options, "-l", &log, "-w", "start"]);
    }

    /// Stops this cluster only (pg_ctl signals the postmaster whose PID its data folder holds).
    pub(crate) fn ctl_stop(&self) {
        self.run("pg_ctl", &["-D", &self.data(), "-m", "fast", "-w", "stop"]);
    }
}

impl OwnPostgres {
    /// Every process of this cluster (the postmaster, from its data folder, and its children).
    fn processes(&self) -> Vec<String> {
        let pid = std::fs::read_to_string(Path::new(&self.data()).join("postmaster.pid")).unwrap();
        let pid = pid.lines().next().unwrap().trim().to_string();
        let children = Command::new("pgrep").args(["-P", &pid]).output().unwrap();
        let mut all: Vec<String> =
            String::from_utf8_lossy(&children.stdout).split_whitespace().map(String::from).collect();
        all.push(pid);
        all
    }

    /// Freezes the cluster (SIGSTOP): it stops answering without closing a connection.
    fn freeze(&self) {
        let status = Command::new("kill").arg("-STOP").args(self.processes()).status().unwrap();
        assert!(status.success());
    }

    fn thaw(&self) {
        let status = Command::new("kill").arg("-CONT").args(self.processes()).status().unwrap();
        assert!(status.success());
    }
}

impl Drop for OwnPostgres {
    fn drop(&mut self) {
        if Path::new(&self.data()).join("postmaster.pid").exists() {
            // Thawed without asserting: some of its processes may have ended already.
            let _ = std::panic::catch_unwind(|| {
                Command::new("kill").arg("-CONT").args(self.processes()).stderr(std::process::Stdio::null()).status()
            });
            let _ = std::panic::catch_unwind(|| self.run("pg_ctl", &["-D", &self.data(), "-m", "immediate", "stop"]));
        }
    }
}

fn nix_is_root() -> bool {
    Command::new("id").arg("-u").output().is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// The service on `pg`, Redis off. The tests walk every endpoint quickly: the per-token budget
/// is not what they test.
async fn start_on(pg: &OwnPostgres) -> TestApp {
    let mut config = test_config(pg.url());
    config.redis_url = None;
    (config.auth.rate_limit_per_second, config.auth.rate_limit_burst) = (10_000, 10_000);
    start(config, std::sync::Arc::new(TestDb::External), axum::Router::new()).await
}

/// Buys 10 shares of `symbol` at market and waits for the fill; returns the order's id.
async fn buy_filled(app: &TestApp, symbol: &str) -> String {
    let bought = app.post("/api/orders", ADMIN_TOKEN, json!({"symbol": symbol, "side": "BUY", "quantity": 10})).await;
    let bought = bought.assert_ok(201)["client_order_id"].as_str().unwrap().to_string();
    app.wait_for_order(&bought, "FILLED").await;
    bought
}

/// Polls `GET /api/health` until the database component is `want`; returns the last reply.
async fn wait_health(app: &TestApp, want: &str) -> Reply {
    for _ in 0..100 {
        let reply = app.call(reqwest::Method::GET, "/api/health", None, None).await;
        if reply.data()["components"]["database"] == want {
            return reply;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("health never became {want}");
}

/// A request during the outage: refused with 503 SERVICE_UNAVAILABLE and `Retry-After`,
/// promptly. The bound asserted is loose (a hang guard: before, such requests took 5–40 s); the
/// measured times are in docs/PERFORMANCE.md.
async fn assert_unavailable(app: &TestApp, method: reqwest::Method, path: &str, body: Option<Value>) {
    let started = Instant::now();
    let reply = app.call(method.clone(), path, Some(ADMIN_TOKEN), body).await;
    let took = started.elapsed();
    eprintln!("during the outage: {method} {path} answered 503 in {took:?}");
    reply.assert_error(503, "SERVICE_UNAVAILABLE");
    assert!(reply.headers.get("retry-after").is_some(), "{path}: Retry-After");
    assert!(took < Duration::from_secs(3), "{path} answered after {took:?}");
}

/// The emergency halt, answered at once in memory with `persisted: false`.
async fn halt_answered_at_once(app: &TestApp, started: Instant, reason: &str) {
    let halt = app.post("/api/risk/emergency-halt", ADMIN_TOKEN, json!({"reason": reason})).await;
    let took = started.elapsed();
    eprintln!("{reason}: the emergency halt answered in {took:?}");
    let halted = halt.assert_ok(200);
    assert_eq!((halted["halted"].clone(), halted["liquidation_requested"].clone()), (json!(true), json!(true)));
    assert_eq!(halted["persisted"], false, "{}", halt.body);
    assert!(took < Duration::from_secs(3), "the halt answered after {took:?}");
}

/// The emergency halt sent while the database is stopped (on PostgreSQL, where another service
/// could take the term over unseen): answered at once in memory, and nothing of it reaches the
/// broker while this service's term cannot be renewed — the position is still held after the
/// market moved on for a while. [`wait_until_stored`] sees the exit fill once the database is back.
/// Sent once the window of the term's last renewal (made before the outage) has passed: within
/// it the exit may still go out, as the lease allows.
async fn halt_held_through_the_outage(app: &TestApp, started: Instant, reason: &str) {
    tokio::time::sleep(tradeops_server::cluster::LEASE - tradeops_server::cluster::MARGIN).await;
    halt_answered_at_once(app, started, reason).await;
    for _ in 0..20 {
        app.market.advance(chrono::Duration::milliseconds(200));
        tokio::time::sleep(Duration::from_millis(30)).await;
    }
    let positions = app.get("/api/positions").await;
    assert_eq!(
        positions.data().as_array().map(Vec::len),
        Some(1),
        "no exit reaches the broker outside the term's window: {}",
        positions.body
    );
}

/// The audit rows the service holds in memory for the database, as its health reports them.
async fn audit_rows_held(app: &TestApp) -> Option<u64> {
    let components = app.get("/api/health/components").await;
    let database = components.data().as_array()?.iter().find(|c| c["name"] == "database")?.clone();
    database["detail"]["audit_rows_held"].as_u64()
}

/// The emergency halt taken with `reason` has its audit row, outcome OK.
async fn assert_halt_audited(app: &TestApp, reason: &str) {
    let audit = app.get("/api/audit?action=risk.emergency_halt").await;
    let rows = audit.data().as_array().unwrap();
    assert!(rows.iter().any(|r| r["outcome"] == "OK" && r["request"]["reason"] == reason), "{}", audit.body);
}

/// Moves the market on until the position is flat (the halt's exit filled) and what was held in
/// memory during the outage is stored (`GET /api/risk/state`: `state_persisted`, no
/// `unsaved_writes`; read live, not from the health probes' last snapshot), audit rows included.
async fn wait_until_stored(app: &TestApp) {
    for _ in 0..100 {
        app.market.advance(chrono::Duration::milliseconds(200));
        let risk = app.get("/api/risk/state").await;
        let flat = app.get("/api/positions").await.data().as_array().is_some_and(|p| p.is_empty());
        // The held audit rows are read only once the engine's writes are stored (fewer requests).
        if flat
            && risk.data()["state_persisted"] == true
            && risk.data()["unsaved_writes"] == 0
            && audit_rows_held(app).await == Some(0)
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the writes held during the outage were never stored");
}

#[tokio::test]
async fn a_database_outage_fails_fast_and_never_blocks_the_halt() {
    const TEST: &str = "a_database_outage_fails_fast_and_never_blocks_the_halt";
    let Some(pg) = OwnPostgres::start(TEST) else { return };
    let app = start_on(&pg).await;
    let symbols = app.market_symbols(3).await;
    let (held, _) = &symbols[0];
    buy_filled(&app, held).await;
    let (resting_symbol, price) = &symbols[1];
    let limit = ((price * 0.97) * 100.0).floor() / 100.0;
    let resting = app
        .post(
            "/api/orders",
            ADMIN_TOKEN,
            json!({"symbol": resting_symbol, "side": "BUY", "quantity": 5, "order_type": "LIMIT", "limit_price": limit, "time_in_force": "GTC"}),
        )
        .await;
    let resting = resting.assert_ok(201)["client_order_id"].as_str().unwrap().to_string();
    app.wait_for_order(&resting, "ACCEPTED").await;
    let viewer = app.token("outage-viewer", "viewer").await;

    pg.ctl_stop();
    // At once, before the probe may have noticed: the request waits for a connection at most.
    assert_unavailable(&app, reqwest::Method::GET, "/api/orders?limit=5", None).await;
    let health = wait_health(&app, "DOWN").await;
    assert_eq!(health.status.as_u16(), 503, "health answers 503 while DOWN: {}", health.body);
    assert_eq!(health.data()["status"], "DOWN");
    // Tokens known before the outage keep signing in while the token poll fails;
    // an unknown one is refused from memory, never waiting for the database.
    let me = app.get_as("/api/auth/me", &viewer).await;
    assert_eq!(me.assert_ok(200)["name"], "outage-viewer");
    app.get_as("/api/auth/me", "tro_unknown_during_outage").await.assert_error(401, "UNAUTHORIZED");

    // Every read answers at once: from memory (200), or refused (503); never a 500 or a hang.
    // (Endpoints with path parameters are covered by the order lookup below.)
    let doc = app.call(reqwest::Method::GET, "/api/openapi.json", None, None).await.body;
    for (path, item) in doc["paths"].as_object().unwrap() {
        if path.contains('{') || item.get("get").is_none() || path == "/api/events" {
            continue;
        }
        let started = Instant::now();
        let reply = app.get(path).await;
        let took = started.elapsed();
        assert!(took < Duration::from_secs(3), "GET {path} answered after {took:?}");
        match reply.status.as_u16() {
            200 => {}
            400 => reply.assert_error(400, "VALIDATION_ERROR"), // a required query parameter
            503 if path == "/api/health" => {}
            503 => reply.assert_error(503, "SERVICE_UNAVAILABLE"),
            other => panic!("GET {path} during the outage answered {other}: {}", reply.body),
        }
    }
    assert_unavailable(&app, reqwest::Method::GET, "/api/orders", None).await;
    assert_unavailable(&app, reqwest::Method::GET, &format!("/api/orders/{resting}"), None).await;
    assert_unavailable(&app, reqwest::Method::GET, "/api/trades", None).await;
    assert_unavailable(&app, reqwest::Method::GET, "/api/audit", None).await;
    // Writes that need the database are refused, and change nothing (checked after the outage).
    let (watch_symbol, _) = &symbols[2];
    let writes = [
        (reqwest::Method::PUT, "/api/settings", json!({"risk_controls": {"max_daily_loss": 777}})),
        (reqwest::Method::POST, "/api/radar/watch", json!({"symbol": watch_symbol})),
        (reqwest::Method::POST, "/api/radar/block", json!({"symbol": watch_symbol, "reason": "outage"})),
        (reqwest::Method::POST, "/api/auth/tokens", json!({"name": "during-outage", "role": "viewer"})),
        (
            reqwest::Method::POST,
            "/api/data/download",
            json!({"symbol": watch_symbol, "start": "2026-11-02T14:30:00Z", "end": "2026-11-03T21:00:00Z"}),
        ),
    ];
    for (method, path, body) in writes {
        assert_unavailable(&app, method, path, Some(body)).await;
    }
    // A new order cannot be written ahead: refused, and never sent.
    let (refused_symbol, _) = &symbols[2];
    let order = json!({"symbol": refused_symbol, "side": "BUY", "quantity": 7});
    assert_unavailable(&app, reqwest::Method::POST, "/api/orders", Some(order)).await;

    // The halt acts at once in memory and says the latch is not stored yet; its exit waits
    // for the term to be renewed.
    let started = Instant::now();
    halt_held_through_the_outage(&app, started, "outage test").await;
    // Health says the halt's audit row waits in memory for the database.
    let mut rows_held = 0;
    for _ in 0..40 {
        rows_held = audit_rows_held(&app).await.unwrap_or(0);
        if rows_held > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(rows_held >= 1, "the halt's audit row is shown held during the outage");

    // Resuming is not a change made in memory only.
    assert_unavailable(&app, reqwest::Method::POST, "/api/risk/resume", Some(json!({"reason": "too early"}))).await;

    pg.ctl_start();
    let health = wait_health(&app, "HEALTHY").await;
    assert_eq!(health.status.as_u16(), 200, "{}", health.body);
    // What was held in memory is stored: the halt, the exit, the cancel, the position.
    wait_until_stored(&app).await;
    let app = app.restart().await;
    let risk = app.get("/api/risk/state").await;
    assert_eq!(risk.assert_ok(200)["trading_state"], "HALTED", "the halt survived the outage and a restart");
    assert!(app.get("/api/positions").await.data().as_array().unwrap().is_empty(), "the exit is stored");
    assert_eq!(app.get(&format!("/api/orders/{resting}")).await.data()["status"], "CANCELED");
    // The order refused during the outage left nothing: refused before the engine saw it.
    let orders = app.get(&format!("/api/orders?symbol={refused_symbol}")).await;
    assert_eq!(orders.data().as_array().unwrap().len(), 0, "{}", orders.body);
    assert_eq!(
        app.get("/api/settings").await.data()["risk_controls"]["max_daily_loss"],
        500.0,
        "the settings change refused during the outage left the default"
    );
    assert!(app
        .get("/api/watchlist")
        .await
        .data()
        .as_array()
        .unwrap()
        .iter()
        .all(|w| w["symbol"] != watch_symbol.as_str()));
    assert!(app.get("/api/radar/blocks").await.data().as_array().unwrap().is_empty());
    assert!(app.get("/api/auth/tokens").await.data().as_array().unwrap().iter().all(|t| t["name"] != "during-outage"));
    assert!(app.get("/api/data/downloads").await.data().as_array().unwrap().is_empty());
    // The halt taken during the outage, and the order refused then, kept their audit rows.
    assert_halt_audited(&app, "outage test").await;
    let audit = app.get("/api/audit?action=order.create&outcome=SERVICE_UNAVAILABLE").await;
    assert_eq!(audit.data().as_array().unwrap().len(), 1, "{}", audit.body);
    let exits = app.get(&format!("/api/orders?symbol={held}")).await;
    let sells: Vec<_> = exits.data().as_array().unwrap().iter().filter(|o| o["side"] == "SELL").collect();
    assert_eq!(sells.len(), 1, "one exit, stored once: {}", exits.body);
    assert_eq!((sells[0]["status"].clone(), sells[0]["filled_quantity"].clone()), (json!("FILLED"), json!(10)));
}

/// A small filesystem of the test's own (tmpfs), for a disk that fills up.
struct SmallDisk {
    dir: tempfile::TempDir,
}

impl SmallDisk {
    /// `None` (`test` skips, saying why) where this process may not mount a tmpfs; CI fails
    /// instead.
    fn mount(test: &str, megabytes: u32) -> Option<SmallDisk> {
        let dir = tempfile::tempdir().expect("temp dir");
        let mounted = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={megabytes}m"), "tmpfs"])
            .arg(dir.path())
            .output();
        match mounted {
            Ok(out) if out.status.success() => Some(SmallDisk { dir }),
            Ok(out) => {
                let why = format!("cannot mount a tmpfs here: {}", String::from_utf8_lossy(&out.stderr).trim());
                skip(test, &why, REQUIRE_SERVICES);
                None
            }
            Err(e) => {
                skip(test, &format!("cannot run mount: {e}"), REQUIRE_SERVICES);
                None
            }
        }
    }

    /// Writes a filler file until the disk is full.
    fn fill(&self) {
        use std::io::Write;
        let mut filler = std::fs::File::create(self.dir.path().join("filler")).unwrap();
        let block = vec![0u8; 64 * 1024];
        while filler.write_all(&block).is_ok() {}
        let _ = filler.flush();
    }

    fn free(&self) {
        std::fs::remove_file(self.dir.path().join("filler")).unwrap();
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(self.dir.path()).status();
    }
}

#[tokio::test]
async fn a_full_disk_refuses_writes_with_503_and_the_halt_still_acts() {
    const TEST: &str = "a_full_disk_refuses_writes_with_503_and_the_halt_still_acts";
    let Some(disk) = SmallDisk::mount(TEST, 48) else { return };
    let path = disk.dir.path().join("tradeops.db");
    let mut config = test_config(format!("sqlite://{}", path.display()));
    config.redis_url = None;
    // The waits below poll several endpoints a step: more than an operator's budget.
    config.auth.rate_limit_per_second = 1_000;
    config.auth.rate_limit_burst = 1_000;
    let app = start(config, std::sync::Arc::new(TestDb::External), axum::Router::new()).await;
    let symbols = app.market_symbols(2).await;
    let (held, _) = &symbols[0];
    buy_filled(&app, held).await;

    // Empty the write-ahead log into the database file, so the next write must grow it.
    let direct = tradeops_store::Database::connect(&format!("sqlite://{}", path.display())).await.unwrap();
    direct.execute_raw("PRAGMA wal_checkpoint(TRUNCATE)").await.unwrap();
    direct.close().await;
    disk.fill();

    let (refused_symbol, _) = &symbols[1];
    let order = json!({"symbol": refused_symbol, "side": "BUY", "quantity": 7});
    assert_unavailable(&app, reqwest::Method::POST, "/api/orders", Some(order)).await;
    // Reads still work: the database is there, it cannot grow.
    app.get("/api/orders").await.assert_ok(200);
    let halt = app.post("/api/risk/emergency-halt", ADMIN_TOKEN, json!({"reason": "disk full"})).await;
    assert_eq!(halt.assert_ok(200)["persisted"], false, "{}", halt.body);

    disk.free();
    wait_until_stored(&app).await;
    let app = app.restart().await;
    assert_eq!(app.get("/api/risk/state").await.data()["trading_state"], "HALTED");
    assert!(app.get("/api/positions").await.data().as_array().unwrap().is_empty());
    let orders = app.get(&format!("/api/orders?symbol={refused_symbol}")).await;
    assert_eq!(
        orders.data().as_array().unwrap().len(),
        0,
        "refused by its write-ahead and taken back: {}",
        orders.body
    );
    assert_eq!(app.get("/api/risk/state").await.data()["trades_today"], 1, "the refused order counts no trade");
}

#[tokio::test]
async fn a_frozen_database_never_holds_a_request_or_the_halt() {
    const TEST: &str = "a_frozen_database_never_holds_a_request_or_the_halt";
    let Some(pg) = OwnPostgres::start(TEST) else { return };
    let app = start_on(&pg).await;
    let (held, _) = app.market_symbols(1).await.remove(0);
    let bought = buy_filled(&app, &held).await;

    // The server stops answering but keeps every connection open: nothing fails, all waits.
    // The halt at once, before the probe has noticed: its writes wait a bounded time each.
    pg.freeze();
    let started = Instant::now();
    // Its exit reaches the broker while the term's window lasts, else once the database is back
    // (`wait_until_stored` sees the position flat either way).
    halt_answered_at_once(&app, started, "frozen database").await;
    assert_unavailable(&app, reqwest::Method::GET, "/api/orders?limit=5", None).await;
    assert_unavailable(&app, reqwest::Method::GET, &format!("/api/orders/{bought}"), None).await;

    pg.thaw();
    wait_health(&app, "HEALTHY").await;
    wait_until_stored(&app).await;
    let app = app.restart().await;
    assert_eq!(app.get("/api/risk/state").await.data()["trading_state"], "HALTED");
    assert!(app.get("/api/positions").await.data().as_array().unwrap().is_empty());
    assert_halt_audited(&app, "frozen database").await;
}

/// A service whose database link is black-holed (its own cluster frozen: connections open, no
/// byte answered) cannot renew its term, so once the term's window has passed it sends the
/// broker nothing — not even the emergency halt's exit, which another service reaching the
/// database could be sending by then. The halt is answered at once, in memory; its exit fills
/// once the database answers again and the term is renewed.
#[tokio::test]
async fn a_service_whose_renewals_stall_sends_nothing_after_its_term_s_window() {
    const TEST: &str = "a_service_whose_renewals_stall_sends_nothing_after_its_term_s_window";
    let Some(pg) = OwnPostgres::start(TEST) else { return };
    let app = start_on(&pg).await;
    let (held, _) = app.market_symbols(1).await.remove(0);
    buy_filled(&app, &held).await;

    pg.freeze();
    // Past the window of the last renewal sent before the freeze (with room for a slow machine).
    let window = tradeops_server::cluster::LEASE - tradeops_server::cluster::MARGIN;
    tokio::time::sleep(window * 2).await;
    let started = Instant::now();
    halt_held_through_the_outage(&app, started, "renewals stalled").await;

    pg.thaw();
    wait_health(&app, "HEALTHY").await;
    wait_until_stored(&app).await;
    let exits = app.get(&format!("/api/orders?symbol={held}")).await;
    let sells: Vec<_> = exits.data().as_array().unwrap().iter().filter(|o| o["side"] == "SELL").collect();
    assert_eq!(sells.len(), 1, "the exit kept back is sent once, not replaced: {}", exits.body);
    assert_eq!(sells[0]["status"], "FILLED", "{}", exits.body);
}

/// A database really stopped is reported within a second (two probes in a row must fail, the
/// second taken at once after the first): `GET /api/health` answers 503 with the `database`
/// component `DOWN`, and a read that needs the database is refused 503 at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_database_is_reported_down_within_a_second() {
    const TEST: &str = "a_stopped_database_is_reported_down_within_a_second";
    let Some(pg) = OwnPostgres::start(TEST) else { return };
    let app = start_on(&pg).await;
    wait_health(&app, "HEALTHY").await;
    pg.ctl_stop();
    let stopped = Instant::now();
    loop {
        let health = app.call(reqwest::Method::GET, "/api/health", None, None).await;
        if health.status == 503 && health.data()["components"]["database"] == "DOWN" {
            break;
        }
        assert!(stopped.elapsed() < Duration::from_secs(1), "still {} after {:?}", health.body, stopped.elapsed());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    eprintln!("the stopped database was reported DOWN after {:?}", stopped.elapsed());
    let started = Instant::now();
    app.get("/api/audit").await.assert_error(503, "SERVICE_UNAVAILABLE");
    assert!(started.elapsed() < Duration::from_millis(500), "refused at once, not after {:?}", started.elapsed());
}

/// Clients hammering the service on PostgreSQL, each on a connection of its own.
const CLIENTS: usize = 64;
/// How long they do.
const LOAD: Duration = Duration::from_secs(8);

/// One client's share of the load: mixed reads and writes until `until`; the answers, by status,
/// and the body of every 503.
async fn hammer(app_base: String, client: usize, until: Instant) -> (u64, Vec<String>) {
    let http = reqwest::Client::new();
    let (mut answered, mut refused) = (0, Vec::new());
    let mut n = 0u64;
    while Instant::now() < until {
        n += 1;
        let request = match (client as u64 + n) % 6 {
            0 => http.get(format!("{app_base}/api/audit?limit=20")),
            1 => http.get(format!("{app_base}/api/orders?limit=20")),
            2 => http.get(format!("{app_base}/api/settings")),
            3 => http.get(format!("{app_base}/api/auth/tokens")),
            4 => http
                .put(format!("{app_base}/api/settings"))
                .json(&json!({"risk_controls": {"max_daily_loss": 500 + (n % 50)}})),
            _ => http
                .post(format!("{app_base}/api/auth/tokens"))
                .json(&json!({"name": format!("load-{client}-{n}"), "role": "viewer"})),
        };
        let response = request.bearer_auth(ADMIN_TOKEN).send().await.expect("the service answers");
        answered += 1;
        if response.status() == 503 {
            refused.push(response.text().await.unwrap_or_default());
        }
    }
    (answered, refused)
}

/// No false outages: 64 connections of mixed reads and writes against a service on
/// PostgreSQL while a sweep keeps the cores busy get no 503, and health never says the database
/// is `DOWN` (one slow probe is not an outage, and the probe never waits behind the pool's or
/// the runtime's queue).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_busy_database_that_answers_is_never_reported_down() {
    const TEST: &str = "a_busy_database_that_answers_is_never_reported_down";
    let (db, url) = TestDb::new().await;
    if !matches!(db, TestDb::Postgres { .. }) {
        skip(TEST, "the load runs on PostgreSQL: TRADEOPS_TEST_DATABASE_URL is not set", REQUIRE_SERVICES);
        return;
    }
    let mut config = test_config(url);
    // Thousands of requests a second from one token: its budget is not what this tests.
    (config.auth.rate_limit_per_second, config.auth.rate_limit_burst) = (1_000_000, 1_000_000);
    let app = start(config, std::sync::Arc::new(db), axum::Router::new()).await;
    crate::backtests::import_golden(&app).await;
    let grid = json!({"fast": {"from": 2, "to": 19, "step": 1}, "slow": {"from": 20, "to": 80, "step": 1}});
    let sweep = app.post("/api/backtests/sweeps", ADMIN_TOKEN, crate::backtests::sweep_request(grid)).await;
    let sweep = sweep.assert_ok(202)["sweep_id"].as_str().unwrap().to_string();

    let until = Instant::now() + LOAD;
    let clients: Vec<_> = (0..CLIENTS).map(|c| tokio::spawn(hammer(app.base.clone(), c, until))).collect();
    let mut health_down = Vec::new();
    while Instant::now() < until {
        let health = app.call(reqwest::Method::GET, "/api/health", None, None).await;
        if health.data()["components"]["database"] == "DOWN" {
            health_down.push(health.body.to_string());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (mut answered, mut refused) = (0, Vec::new());
    for client in clients {
        let (n, r) = client.await.unwrap();
        answered += n;
        refused.extend(r);
    }
    let sweep = app.get(&format!("/api/backtests/sweeps/{sweep}")).await;
    eprintln!("{answered} requests from {CLIENTS} connections; the sweep: {}", sweep.data()["status"]);
    assert!(answered >= CLIENTS as u64 * 4, "the load ran: {answered} requests");
    assert!(
        refused.is_empty(),
        "{} requests refused 503 while the database answered: {:?}",
        refused.len(),
        &refused[..refused.len().min(3)]
    );
    assert!(health_down.is_empty(), "health said the database was DOWN: {:?}", health_down.first());
    assert_ne!(sweep.data()["status"], "QUEUED", "the sweep ran during the load: {}", sweep.body);
}

/// A database that stalls for a moment (its cluster paused 0.85 s, as a checkpoint or a busy
/// machine pauses it) is slow, not down: one probe gets no answer in time, and that alone is no
/// outage. Requests through the stall are answered, none refused 503, and health says the
/// database is `DEGRADED` meanwhile, never `DOWN`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_that_stalls_for_a_moment_is_slow_not_down() {
    const TEST: &str = "a_database_that_stalls_for_a_moment_is_slow_not_down";
    let Some(pg) = OwnPostgres::start(TEST) else { return };
    let app = start_on(&pg).await;
    wait_health(&app, "HEALTHY").await;
    let until = Instant::now() + Duration::from_secs(3);
    let readers: Vec<_> = (0..4)
        .map(|_| {
            let (client, url) = (app.client.clone(), app.url("/api/audit?limit=5"));
            tokio::spawn(async move {
                let mut statuses = Vec::new();
                while Instant::now() < until {
                    let answer = client.get(&url).bearer_auth(ADMIN_TOKEN).send().await.unwrap();
                    statuses.push(answer.status().as_u16());
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                statuses
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(300)).await;
    pg.freeze();
    let frozen = Instant::now();
    let mut health = Vec::new();
    while Instant::now() < until {
        if frozen.elapsed() >= Duration::from_millis(850) && pg_frozen(&health) {
            pg.thaw();
            health.push("thawed".to_string());
        }
        let reply = app.call(reqwest::Method::GET, "/api/health", None, None).await;
        health.push(reply.data()["components"]["database"].as_str().unwrap_or_default().to_string());
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    if pg_frozen(&health) {
        pg.thaw();
    }
    let mut statuses = Vec::new();
    for reader in readers {
        statuses.extend(reader.await.unwrap());
    }
    health.dedup();
    eprintln!("health through the stall: {health:?}");
    assert!(health.iter().any(|s| s == "DEGRADED"), "the stall was seen (a probe unanswered): {health:?}");
    assert!(!health.iter().any(|s| s == "DOWN"), "health said the database was DOWN: {health:?}");
    assert!(statuses.iter().all(|s| *s == 200), "requests through the stall: {statuses:?}");
}

/// Whether the cluster is still paused, by what the stall test noted (`thawed` once resumed).
fn pg_frozen(noted: &[String]) -> bool {
    !noted.iter().any(|n| n == "thawed")
}
