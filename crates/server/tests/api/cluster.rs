//! More than one engine on one database (CONTRACT §10). Each engine writes trading state in its own
//! term; once a newer engine has taken the database over, the old one writes and sends nothing
//! more and stops (fencing), and a service whose engine stopped says so. Runs on SQLite, and on
//! PostgreSQL in CI's second pass.

use crate::helpers::*;
use crate::venues::Switchable;
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;
use tradeops_server::cluster::Election;
use tradeops_store::Database;

/// Waits (up to ~10 s) until the service's `risk_manager` reads `status`.
async fn wait_for_risk_manager(app: &TestApp, status: &str) -> serde_json::Value {
    let mut last = serde_json::Value::Null;
    for _ in 0..100 {
        let rows = app.get("/api/health/components").await;
        last = rows.data().as_array().unwrap().iter().find(|c| c["name"] == "risk_manager").cloned().unwrap();
        if last["status"] == status {
            return last;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("risk_manager never read {status}: {last}");
}

/// An engine whose database a newer engine took over: it sends no order to the
/// broker and writes none, its service answers 503 `SERVICE_UNAVAILABLE` to commands while
/// reads go on and `/api/health` says DOWN; a restart takes a new term and trades again.
#[tokio::test]
async fn an_engine_taken_over_writes_and_sends_nothing_more() {
    let venue = Switchable::new(&test_config(String::new()));
    let app = spawn_app_trading_through(venue.clone()).await;
    let (symbol, _) = app.market_symbols(1).await.remove(0);
    let buy = json!({"symbol": symbol, "side": "BUY", "quantity": 3, "order_type": "MARKET", "reason": "term 1"});
    let first = app.post("/api/orders", ADMIN_TOKEN, buy.clone()).await;
    first.assert_ok(201);
    assert_eq!(venue.submits(), 1);

    // Another engine starts its term on the same database (as a second service would).
    let other = Database::open(&app.config.database_url).await.unwrap();
    let (ours, holder) = other.engine_epoch().await.unwrap();
    assert!(holder.is_some_and(|h| h.contains(&std::process::id().to_string())), "the term names its service");
    let taken = other.take_engine_epoch("another-node", 0).await.unwrap();
    assert_eq!(taken, ours + 1);

    // Within a second the old engine learns it (it had nothing to write) and stops.
    let risk = wait_for_risk_manager(&app, "DOWN").await;
    assert_eq!(app.get("/api/health").await.status, 503, "{risk}");
    let refused = app.post("/api/orders", ADMIN_TOKEN, buy.clone()).await;
    refused.assert_error(503, "SERVICE_UNAVAILABLE");
    assert!(refused.headers.get("retry-after").is_some(), "{:?}", refused.headers);
    let halt = app.post("/api/risk/emergency-halt", ADMIN_TOKEN, json!({"reason": "from the old service"})).await;
    halt.assert_error(503, "SERVICE_UNAVAILABLE");
    assert_eq!(venue.submits(), 1, "nothing more reached the broker");
    // What it had stored is still read.
    let orders = app.get("/api/orders").await;
    let ids: Vec<&str> =
        orders.data().as_array().unwrap().iter().map(|o| o["client_order_id"].as_str().unwrap()).collect();
    assert_eq!(ids, vec![first.data()["client_order_id"].as_str().unwrap()], "nothing more was written");
    let (now, by) = other.engine_epoch().await.unwrap();
    assert_eq!((now, by.as_deref()), (taken, Some("another-node")), "the old engine did not take the term back");
    other.close().await;

    // Restarted, the service takes a new term and trades.
    let app = app.restart().await;
    let again = app
        .post("/api/orders", ADMIN_TOKEN, json!({"symbol": symbol, "side": "BUY", "quantity": 1, "reason": "term 3"}))
        .await;
    again.assert_ok(201);
    let check = Database::open(&app.config.database_url).await.unwrap();
    assert_eq!(check.engine_epoch().await.unwrap().0, taken + 1, "a start takes the next term");
    check.close().await;
}

/// An engine taken over while it writes: the write in flight is refused whole (the order is not
/// stored, not sent), and the engine stops at once rather than at its next check.
#[tokio::test]
async fn an_order_of_an_engine_taken_over_is_refused_unsent_and_unstored() {
    let venue = Switchable::new(&test_config(String::new()));
    let app = spawn_app_trading_through(venue.clone()).await;
    let (symbol, _) = app.market_symbols(1).await.remove(0);
    let other = Database::open(&app.config.database_url).await.unwrap();
    other.take_engine_epoch("another-node", 0).await.unwrap();
    // Straight after the takeover (before the engine's once-a-second check can see it).
    let refused = app
        .post("/api/orders", ADMIN_TOKEN, json!({"symbol": symbol, "side": "BUY", "quantity": 2, "reason": "late"}))
        .await;
    assert_eq!(refused.status, 503, "{:?}", refused.body);
    assert_eq!(venue.submits(), 0, "never sent");
    assert_eq!(app.get("/api/orders").await.data().as_array().unwrap().len(), 0, "never stored: {:?}", refused.body);
    wait_for_risk_manager(&app, "DOWN").await;
    other.close().await;
}

/// A PostgreSQL database for a test of several services on one database, or `None` (the test
/// says it skipped; it fails instead where PostgreSQL is promised).
pub(crate) async fn postgres_db(test: &str) -> Option<(Arc<TestDb>, String)> {
    let (db, url) = TestDb::new().await;
    match db {
        TestDb::Postgres { .. } => Some((Arc::new(db), url)),
        _ => {
            skip(
                test,
                "several services share a PostgreSQL database: TRADEOPS_TEST_DATABASE_URL is not set",
                REQUIRE_SERVICES,
            );
            None
        }
    }
}

/// Services taking part in the election on `db` by name, with `lease`, renewing every 100 ms.
fn electing(db: &Database, lease: Duration) -> impl Fn(&str) -> Election + '_ {
    let clock: Arc<dyn tradeops_core::Clock> = Arc::new(tradeops_server::clock::SystemClock);
    move |name| {
        Election::new(db.clone(), name.to_string(), clock.clone()).with_timing(lease, Duration::from_millis(100))
    }
}

/// The election of the engine's term: the first service takes it at once; a second
/// waits while the holder renews it, takes it over once the renewals stop (a holder killed or
/// paused), after which the old holder's writes are refused; a released term is taken at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_service_takes_the_term_once_its_holder_stops_renewing() {
    let Some((_keep, url)) = postgres_db("a_waiting_service_takes_the_term_once_its_holder_stops_renewing").await
    else {
        return;
    };
    let db = Database::open(&url).await.unwrap();
    let elect = electing(&db, Duration::from_secs(3));
    let a = elect("a");
    let first =
        tokio::time::timeout(Duration::from_secs(5), a.acquire()).await.expect("a free term is taken at once").unwrap();
    let holder = a.clone();
    let renewing = tokio::spawn(async move { holder.hold(first).await });

    let b = elect("b");
    let waiting = tokio::spawn(async move { b.acquire().await });
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert!(!waiting.is_finished(), "b took a term its holder kept renewing");

    renewing.abort(); // a stops renewing: killed, or paused past the lease
    let second =
        tokio::time::timeout(Duration::from_secs(15), waiting).await.expect("b takes it over").unwrap().unwrap();
    assert_eq!(second, first + 1);
    assert_eq!(db.engine_epoch().await.unwrap(), (second, Some("b".into())));
    let old = db.fenced(first);
    let violation = tradeops_store::ViolationRecord {
        violation_id: 0,
        ts: 1,
        rule: "MAX_ORDER_VALUE".into(),
        symbol: None,
        client_order_id: None,
        detail: "{}".into(),
    };
    let late = tradeops_store::MarketRepository::insert_violation(&old, &violation);
    assert!(matches!(late.await, Err(tradeops_store::StoreError::Fenced { .. })), "a's writes are refused");
    // a, back, finds its term gone: its renewal says so at once.
    tokio::time::timeout(Duration::from_secs(5), a.hold(first)).await.expect("a's hold ends at its first renewal");

    elect("b").release(second).await;
    // c would wait a minute for an unrenewed term: a released one it takes at once.
    let c = elect("c").with_timing(Duration::from_secs(60), Duration::from_millis(100));
    let third = tokio::time::timeout(Duration::from_secs(5), c.acquire()).await.expect("released: taken at once");
    assert_eq!(third.unwrap(), second + 1);
    db.close().await;
}

/// The fast path of a takeover: the holder's advisory lock tells a waiting service
/// that the holder's session is gone (killed), so it takes the term over within a few renewal
/// periods instead of the lease; a holder that only stopped renewing (paused) keeps its session
/// and its lock, and is not taken over before the lease. The lease here is a minute, so only the
/// fast path can take it over within the test's bound.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_service_takes_over_at_once_when_the_holder_s_session_ends() {
    let Some((_keep, url)) = postgres_db("a_waiting_service_takes_over_at_once_when_the_holder_s_session_ends").await
    else {
        return;
    };
    let db = Database::open(&url).await.unwrap();
    let elect = electing(&db, Duration::from_secs(60));
    let a = elect("a");
    let first = tokio::time::timeout(Duration::from_secs(5), a.acquire()).await.expect("a free term").unwrap();
    assert!(a.holds_lock().await, "the holder holds the advisory lock");
    let holder = a.clone();
    let renewing = tokio::spawn(async move { holder.hold(first).await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    renewing.abort(); // paused: no renewals, but its session and lock live
    let _ = renewing.await;

    let b = elect("b");
    let waiting = tokio::spawn(async move { b.acquire().await });
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(!waiting.is_finished(), "b took over a holder whose session (and lock) lives before the lease");

    drop(a); // killed: its session ends, and the lock is freed
    let second = tokio::time::timeout(Duration::from_secs(15), waiting)
        .await
        .expect("b takes over once the holder's lock is free, long before the lease")
        .unwrap()
        .unwrap();
    assert_eq!(second, first + 1);
    assert_eq!(db.engine_epoch().await.unwrap(), (second, Some("b".into())));
    db.close().await;
}

/// A second service on the same PostgreSQL database is a hot standby: it waits
/// while the first runs the engine, and when the first stops it takes the engine's term over at
/// once, with the first's orders and positions, and trades.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standby_takes_over_when_the_engine_s_service_stops() {
    let Some((db, url)) = postgres_db("a_standby_takes_over_when_the_engine_s_service_stops").await else { return };
    let market = tradeops_core::ManualClock::new(tradeops_core::time::parse_ts(MARKET_START).unwrap());
    let clock: Arc<dyn tradeops_core::Clock> = Arc::new(tradeops_server::clock::SystemClock);
    let mut first =
        start_with_clock(test_config(url.clone()), db.clone(), axum::Router::new(), market.clone(), clock.clone())
            .await;
    let (symbol, price) = first.market_symbols(1).await.remove(0);
    let limit = (price * 97.0).floor() / 100.0;
    let resting = first
        .post(
            "/api/orders",
            ADMIN_TOKEN,
            json!({"symbol": symbol, "side": "BUY", "quantity": 1, "order_type": "LIMIT", "limit_price": limit, "time_in_force": "GTC", "reason": "first service"}),
        )
        .await;
    resting.assert_ok(201);
    let id = resting.data()["client_order_id"].as_str().unwrap().to_string();

    let standby = tokio::spawn(start_with_clock(test_config(url), db, axum::Router::new(), market.clone(), clock));
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(!standby.is_finished(), "the second service waits while the first runs the engine");
    first.stop().await;
    let second = tokio::time::timeout(Duration::from_secs(15), standby).await.expect("the standby takes over").unwrap();
    let order = second.get(&format!("/api/orders/{id}")).await;
    assert_eq!(order.data()["reason"], "first service", "{:?}", order.body);
    let placed = second
        .post(
            "/api/orders",
            ADMIN_TOKEN,
            json!({"symbol": symbol, "side": "BUY", "quantity": 1, "reason": "second service"}),
        )
        .await;
    placed.assert_ok(201);
}

/// `tradeops serve` in DEMO on the database at `url`, its output lines as they come (the first,
/// "listening on …", once it holds the engine's term and listens).
fn serve_on(dir: &std::path::Path, url: &str) -> (std::process::Child, std::sync::mpsc::Receiver<String>) {
    run_on(dir, url, "serve", &[])
}

/// `tradeops COMMAND` (serve or worker) in DEMO on the database at `url` with `env` besides, its
/// output lines as they come.
fn run_on(
    dir: &std::path::Path,
    url: &str,
    command: &str,
    env: &[(&str, &str)],
) -> (std::process::Child, std::sync::mpsc::Receiver<String>) {
    let mut child = crate::cli::tradeops(dir)
        .arg(command)
        .env("TRADEOPS_DATABASE_URL", url)
        .env("TRADEOPS_MODE", "DEMO")
        .env("TRADEOPS_ADMIN_TOKEN", crate::crash::CRASH_TOKEN)
        .env("TRADEOPS_RATE_LIMIT_BURST", "100000")
        .env("TRADEOPS_RATE_LIMIT_PER_SECOND", "100000")
        .envs(env.iter().copied())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let rx = crate::helpers::output_lines(&mut child);
    (child, rx)
}

/// A `tradeops worker` with a 3 s lease, and the name its leases carry (from its first line).
fn worker_on(dir: &std::path::Path, url: &str) -> (std::process::Child, String) {
    let (child, lines) = run_on(dir, url, "worker", &[("TRADEOPS_JOBS_LEASE_SECONDS", "3")]);
    let line = lines.recv_timeout(Duration::from_secs(30)).expect("the worker starts");
    let owner = line.strip_prefix("worker ").and_then(|r| r.strip_suffix(" started")).expect("worker NAME started");
    (child, owner.to_string())
}

/// Waits for a node's line saying it leads the engine (a node that finds no leader takes the
/// term at once; until then it answers 503).
fn wait_leads(lines: &std::sync::mpsc::Receiver<String>) {
    loop {
        let line = lines.recv_timeout(Duration::from_secs(30)).expect("the node leads the engine");
        if line.contains("leads the engine") {
            return;
        }
    }
}

/// The address a service's first line names.
fn listening(line: &str) -> String {
    line.split("listening on ").nth(1).and_then(|r| r.split_whitespace().next()).expect("an address").to_string()
}

/// Failover after `kill -9`, processes on one PostgreSQL database: the standby
/// waits while the first service runs the engine; killed, the first is replaced — the standby
/// takes the term over, with every order, position and cash the first stored (none lost, none
/// doubled: its resting order still works, found at the broker's side by its id), and trades.
#[test]
fn a_standby_takes_over_when_the_engine_s_service_is_killed() {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let Some((_keep, url)) = rt.block_on(postgres_db("a_standby_takes_over_when_the_engine_s_service_is_killed"))
    else {
        return;
    };
    let (dir_a, dir_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let client = reqwest::Client::new();
    let (mut first, first_lines) = serve_on(dir_a.path(), &url);
    let base = listening(&first_lines.recv_timeout(Duration::from_secs(30)).expect("the first service listens"));
    wait_leads(&first_lines);
    let before = rt.block_on(async {
        use crate::crash::{call, facts, radar_symbols, wait_status};
        let symbols = radar_symbols(&client, &base, 2).await;
        let bought = call(&client, &base, reqwest::Method::POST, "/api/orders", Some(json!({"symbol": symbols[0].0, "side": "BUY", "quantity": 10}))).await;
        let bought = bought["data"]["client_order_id"].as_str().expect("bought").to_string();
        wait_status(&client, &base, &bought, &["FILLED"]).await;
        let limit = (symbols[1].1 * 97.0).floor() / 100.0;
        let resting = json!({"symbol": symbols[1].0, "side": "BUY", "quantity": 5, "order_type": "LIMIT", "limit_price": limit, "time_in_force": "GTC"});
        let resting = call(&client, &base, reqwest::Method::POST, "/api/orders", Some(resting)).await;
        let resting = resting["data"]["client_order_id"].as_str().expect("resting").to_string();
        wait_status(&client, &base, &resting, &["ACCEPTED"]).await;
        facts(&client, &base).await
    });

    let (mut standby, standby_lines) = serve_on(dir_b.path(), &url);
    let follower =
        listening(&standby_lines.recv_timeout(Duration::from_secs(30)).expect("the standby listens at once"));
    rt.block_on(async {
        // A follower answers with the leader's state, and says whose.
        assert_eq!(crate::crash::facts(&client, &follower).await, before, "the leader's orders, positions and cash");
        let answer = client
            .get(format!("{follower}/api/positions"))
            .bearer_auth(crate::crash::CRASH_TOKEN)
            .send()
            .await
            .unwrap();
        assert_eq!(answer.headers()["x-tradeops-leader"].to_str().unwrap(), base);
    });
    first.kill().unwrap();
    first.wait().unwrap();
    wait_leads(&standby_lines);
    let base = follower;
    rt.block_on(async {
        use crate::crash::{call, facts};
        let after = facts(&client, &base).await;
        assert_eq!(after["orders"], before["orders"], "every order the first service stored, once");
        assert_eq!(after["positions"], before["positions"]);
        assert_eq!(after["cash"], before["cash"]);
        let symbol = before["positions"][0][0].as_str().unwrap().to_string();
        let sold = call(
            &client,
            &base,
            reqwest::Method::POST,
            "/api/orders",
            Some(json!({"symbol": symbol, "side": "SELL", "quantity": 10})),
        )
        .await;
        assert_eq!(sold["ok"], true, "the standby trades: {sold}");
    });
    crate::cli::terminate(&mut standby);
}

/// Job workers, processes on one PostgreSQL database: a service that leaves its
/// jobs to workers (`jobs.run = false`) queues a backtest, and a `tradeops worker` claims it. Killed
/// with -9 mid-run, the worker leaves the run to another worker once its 3 s lease expires: run
/// again from the start by the second worker and completed once, by it, with the result of an
/// uninterrupted run. A worker stopped with SIGTERM hands its run back to the queue at once.
#[test]
fn a_worker_killed_mid_backtest_leaves_it_to_another_worker() {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let Some((_keep, url)) = rt.block_on(postgres_db("a_worker_killed_mid_backtest_leaves_it_to_another_worker"))
    else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let client = reqwest::Client::new();
    let (mut service, lines) = run_on(dir.path(), &url, "serve", &[("TRADEOPS_JOBS_RUN", "false")]);
    let base = listening(&lines.recv_timeout(Duration::from_secs(30)).expect("the service listens"));
    wait_leads(&lines);
    let db = rt.block_on(Database::open(&url)).unwrap();
    let holder = |id: &str| rt.block_on(db.job_holder(tradeops_store::JobKind::Backtest, id)).unwrap();
    let run = |id: &str| {
        rt.block_on(crate::crash::call(&client, &base, reqwest::Method::GET, &format!("/api/backtests/{id}"), None))
    };
    let symbol = rt.block_on(crate::crash::radar_symbols(&client, &base, 1)).remove(0).0;
    // Minute bars of 40 trading days: long enough to be caught running.
    let request = json!({"strategy_id": "sma_cross", "symbol": symbol, "timeframe": "1m",
        "start": "2026-09-01T00:00:00Z", "end": "2026-10-27T00:00:00Z", "parameters": {"fast": 5, "slow": 20}});
    let queue = |request: &serde_json::Value| {
        let queued = rt.block_on(crate::crash::call(
            &client,
            &base,
            reqwest::Method::POST,
            "/api/backtests/run",
            Some(request.clone()),
        ));
        queued["data"]["backtest_id"].as_str().unwrap_or_else(|| panic!("queued: {queued}")).to_string()
    };
    let wait = |id: &str, what: &str, done: &dyn Fn(&serde_json::Value) -> bool| {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
        loop {
            let body = run(id);
            if done(&body["data"]) {
                return body["data"].clone();
            }
            assert!(tokio::time::Instant::now() < deadline, "{what}: {body}");
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    let id = queue(&request);
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(run(&id)["data"]["status"], "QUEUED", "the service runs no job itself");

    let (mut first, first_name) = worker_on(dir.path(), &url);
    wait(&id, "the first worker runs it", &|r| r["status"] == "RUNNING");
    assert_eq!(holder(&id).as_deref(), Some(first_name.as_str()));
    first.kill().unwrap();
    first.wait().unwrap();

    let (mut second, second_name) = worker_on(dir.path(), &url);
    let done = wait(&id, "the second worker completes it", &|r| r["status"] == "COMPLETED");
    assert_eq!(holder(&id).as_deref(), Some(second_name.as_str()), "completed by the second worker, once");
    assert!(done["trade_count"].as_u64().unwrap() > 0, "{done}");

    // The same run uninterrupted gives the same result; stopped with SIGTERM, its worker hands
    // it back to the queue at once.
    let mut stream = rt
        .block_on(
            client
                .get(format!("{base}/api/events?kinds=backtest.updated"))
                .bearer_auth(crate::crash::CRASH_TOKEN)
                .send(),
        )
        .unwrap();
    let again = queue(&request);
    let uninterrupted = wait(&again, "the same run again", &|r| r["status"] == "COMPLETED");
    // The service's event stream follows the run the worker runs.
    rt.block_on(async {
        let mut seen = String::new();
        while !seen.split("\n\n").any(|m| m.contains(&again) && m.contains("COMPLETED")) {
            let chunk = tokio::time::timeout(Duration::from_secs(10), stream.chunk())
                .await
                .unwrap_or_else(|_| panic!("the worker's progress reaches the stream: {seen}"));
            seen.push_str(&String::from_utf8_lossy(&chunk.unwrap().expect("the stream stays open")));
        }
    });
    for key in ["total_return", "trade_count", "max_drawdown", "equity_curve", "trades"] {
        assert_eq!(uninterrupted[key], done[key], "{key}");
    }
    let third = queue(&request);
    wait(&third, "the second worker runs a third", &|r| r["status"] == "RUNNING");
    crate::cli::terminate(&mut second);
    let handed_back = run(&third)["data"].clone();
    assert_eq!(handed_back["status"], "QUEUED", "handed back at once: {handed_back}");
    assert_eq!(holder(&third), None);
    let (mut last, last_name) = worker_on(dir.path(), &url);
    wait(&third, "another worker takes it at once", &|r| r["status"] == "COMPLETED");
    assert_eq!(holder(&third).as_deref(), Some(last_name.as_str()));
    crate::cli::terminate(&mut last);
    crate::cli::terminate(&mut service);
    rt.block_on(db.close());
}

/// `tradeops worker` refuses SQLite, saying why: there the service runs its jobs itself.
#[test]
fn a_worker_refuses_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let out = crate::cli::tradeops(dir.path())
        .arg("worker")
        .env("TRADEOPS_DATABASE_URL", format!("sqlite://{}/t.db", dir.path().display()))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("tradeops worker needs PostgreSQL"), "{stderr}");
}

/// Waits until one of `nodes` says it leads the engine; its index.
pub(crate) fn which_leads(nodes: &[&std::sync::mpsc::Receiver<String>]) -> usize {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        for (i, lines) in nodes.iter().enumerate() {
            while let Ok(line) = lines.try_recv() {
                if line.contains("leads the engine") {
                    return i;
                }
            }
        }
        assert!(tokio::time::Instant::now() < deadline, "no node took the engine over");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn signal(child: &std::process::Child, sig: &str) {
    let done = std::process::Command::new("kill").args([sig, &child.id().to_string()]).status().unwrap();
    assert!(done.success(), "kill {sig}");
}

/// Three nodes on one PostgreSQL database: every node answers the whole
/// API, commands through a follower are carried out by the leader, and the event stream through a
/// follower carries the leader's events. The leader killed with -9 is replaced with every order
/// once. The next leader paused (SIGSTOP) past its lease: an emergency halt sent meanwhile to the
/// third node is stored first and answered there, and the third node, taking over, applies it
/// before anything else (HALTED, positions flattened); the paused leader, resumed, finds its term
/// gone and stops (exit 1). A node started again later follows, then takes over: HALTED stays
/// HALTED.
#[test]
fn three_nodes_survive_a_killed_leader_and_a_paused_one() {
    use crate::crash::{call, facts, radar_symbols, wait_status, CRASH_TOKEN};
    use reqwest::Method;
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let Some((_keep, url)) = rt.block_on(postgres_db("three_nodes_survive_a_killed_leader_and_a_paused_one")) else {
        return;
    };
    let dirs: Vec<_> = (0..4).map(|_| tempfile::tempdir().unwrap()).collect();
    let client = reqwest::Client::new();
    let (mut a, a_lines) = serve_on(dirs[0].path(), &url);
    let a_base = listening(&a_lines.recv_timeout(Duration::from_secs(30)).unwrap());
    wait_leads(&a_lines);
    let (b, b_lines) = serve_on(dirs[1].path(), &url);
    let (c, c_lines) = serve_on(dirs[2].path(), &url);
    let mut nodes = [b, c];
    let bases = [&b_lines, &c_lines]
        .map(|lines| listening(&lines.recv_timeout(Duration::from_secs(30)).expect("a follower listens")));

    // A follower's health: the leader's, but its `cluster` row says it follows; all three are
    // members.
    let cluster = rt.block_on(async {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        loop {
            let rows = call(&client, &bases[0], Method::GET, "/api/health/components", None).await;
            let row = rows["data"].as_array().unwrap().iter().find(|r| r["name"] == "cluster").cloned().unwrap();
            if row["detail"]["members"].as_array().unwrap().len() == 3 {
                return row;
            }
            assert!(tokio::time::Instant::now() < deadline, "three members: {row}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    });
    assert_eq!(cluster["detail"]["role"], "follower", "{cluster}");
    assert_ne!(cluster["detail"]["node"], cluster["detail"]["leader"]);
    assert_eq!(cluster["detail"]["leader_url"], a_base.as_str());
    let (symbol, bought) = rt.block_on(async {
        let symbols = radar_symbols(&client, &bases[0], 1).await;
        // The event stream through the third node carries what the leader does.
        let mut stream = client
            .get(format!("{}/api/events?kinds=order.updated", bases[1]))
            .bearer_auth(CRASH_TOKEN)
            .send()
            .await
            .unwrap();
        assert_eq!(stream.status(), 200);
        // An order through the second node: carried out by the leader, answered as there.
        let order = json!({"symbol": symbols[0].0, "side": "BUY", "quantity": 10});
        let placed =
            client.post(format!("{}/api/orders", bases[0])).bearer_auth(CRASH_TOKEN).json(&order).send().await.unwrap();
        assert_eq!(placed.status(), 201);
        assert_eq!(placed.headers()["x-tradeops-leader"].to_str().unwrap(), a_base);
        let placed: serde_json::Value = placed.json().await.unwrap();
        let id = placed["data"]["client_order_id"].as_str().unwrap().to_string();
        let mut seen = String::new();
        while !seen.contains(&id) {
            let chunk = tokio::time::timeout(Duration::from_secs(10), stream.chunk()).await.expect("the event arrives");
            seen.push_str(&String::from_utf8_lossy(&chunk.unwrap().expect("the stream stays open")));
        }
        // The id of the order's first event: a client that saw only that one resumes from it.
        let first_event = seen
            .split("\n\n")
            .find(|message| message.contains(&id))
            .and_then(|message| message.lines().find_map(|l| l.strip_prefix("id:")))
            .map(|n| n.trim().parse::<u64>().unwrap())
            .expect("an id");
        wait_status(&client, &a_base, &id, &["FILLED"]).await;
        (symbols[0].0.clone(), (id, first_event))
    });
    let (bought, first_event) = bought;
    std::thread::sleep(Duration::from_millis(300)); // the leader stores its events every 50 ms
    let before = rt.block_on(facts(&client, &a_base));
    assert_eq!(rt.block_on(facts(&client, &bases[1])), before, "every node answers with the leader's state");

    // The leader killed: one of the others takes over with every order once.
    a.kill().unwrap();
    a.wait().unwrap();
    let next = which_leads(&[&b_lines, &c_lines]);
    let other = 1 - next;
    let after = rt.block_on(facts(&client, &bases[other]));
    assert_eq!(after["orders"], before["orders"], "every order once, through the follower");
    assert_eq!(after["positions"], before["positions"]);
    // A client that saw only the order's first event resumes on another node, after the
    // failover, with what the killed leader published after it: the fill.
    rt.block_on(async {
        let mut stream = client
            .get(format!("{}/api/events?kinds=order.updated", bases[other]))
            .bearer_auth(CRASH_TOKEN)
            .header("last-event-id", first_event.to_string())
            .send()
            .await
            .unwrap();
        assert_eq!(stream.status(), 200);
        let mut seen = String::new();
        while !(seen.contains(&bought) && seen.contains("FILLED")) {
            let chunk = tokio::time::timeout(Duration::from_secs(10), stream.chunk())
                .await
                .unwrap_or_else(|_| panic!("the earlier term's events are replayed: {seen}"));
            seen.push_str(&String::from_utf8_lossy(&chunk.unwrap().expect("the stream stays open")));
        }
        let ids: Vec<u64> =
            seen.lines().filter_map(|l| l.strip_prefix("id:")).map(|n| n.trim().parse().unwrap()).collect();
        assert!(ids.iter().all(|id| *id > first_event), "only what came after: {ids:?}");
    });

    // The new leader paused past its lease; a halt through the other node meanwhile.
    signal(&nodes[next], "-STOP");
    let halt = rt.block_on(call(
        &client,
        &bases[other],
        Method::POST,
        "/api/risk/emergency-halt",
        Some(json!({"reason": "leader paused: halt from the other node"})),
    ));
    assert_eq!(halt["ok"], true, "{halt}");
    assert_eq!(halt["data"]["persisted"], true);
    assert_eq!(halt["data"]["liquidation_requested"], true, "a position was open");
    let lines = [&b_lines, &c_lines];
    assert_eq!(which_leads(&[lines[other]]), 0, "the other node takes over after the lease");
    let halted = rt.block_on(async {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        loop {
            let state = facts(&client, &bases[other]).await;
            let flat = state["positions"].as_array().unwrap().iter().all(|p| p[1] == 0);
            // `facts` lists the orders before the positions: an exit that fills between the two
            // reads shows a flat book beside its order still working. Settled means both agree.
            let ended = state["orders"]
                .as_array()
                .unwrap()
                .iter()
                .all(|o| ["FILLED", "CANCELED", "REJECTED", "EXPIRED"].contains(&o[1].as_str().unwrap_or("")));
            if state["trading_state"] == "HALTED" && flat && ended {
                return state;
            }
            assert!(tokio::time::Instant::now() < deadline, "the stored halt is applied: {state}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    });
    let audit = rt.block_on(call(&client, &bases[other], Method::GET, "/api/audit?action=risk.emergency_halt", None));
    assert!(audit["meta"]["count"].as_u64().unwrap() >= 1, "{audit}");

    // The paused leader, resumed, finds its term gone and stops.
    signal(&nodes[next], "-CONT");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(status) = nodes[next].try_wait().unwrap() {
            break status;
        }
        assert!(tokio::time::Instant::now() < deadline, "the resumed old leader stops");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(status.code(), Some(1), "it exits to be restarted as a follower");
    let still = rt.block_on(facts(&client, &bases[other]));
    assert_eq!(still["orders"], halted["orders"], "the resumed old leader wrote nothing");

    // HALTED stays HALTED through the next failover.
    let (mut d, d_lines) = serve_on(dirs[3].path(), &url);
    let d_base = listening(&d_lines.recv_timeout(Duration::from_secs(30)).unwrap());
    nodes[other].kill().unwrap();
    nodes[other].wait().unwrap();
    wait_leads(&d_lines);
    let last = rt.block_on(facts(&client, &d_base));
    assert_eq!(last["trading_state"], "HALTED");
    assert_eq!(last["orders"], halted["orders"]);
    let refused = rt.block_on(call(
        &client,
        &d_base,
        Method::POST,
        "/api/orders",
        Some(json!({"symbol": symbol, "side": "BUY", "quantity": 1})),
    ));
    assert_eq!(refused["error"]["code"], "EMERGENCY_HALT_ACTIVE", "{refused}");
    crate::cli::terminate(&mut d);
}

/// A follower forwards each client's own address with the cluster's shared secret:
/// the leader budgets anonymous callers per real client, not per follower — a flood through a
/// follower is refused 429 while another client through the same follower is still answered.
/// A client cannot claim an address itself: without the secret the header is dropped.
#[test]
fn a_follower_forwards_each_client_s_own_address() {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let Some((_keep, url)) = rt.block_on(postgres_db("a_follower_forwards_each_client_s_own_address")) else {
        return;
    };
    let (a_dir, b_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (mut a, a_lines) = serve_on(a_dir.path(), &url);
    let leader = listening(&a_lines.recv_timeout(Duration::from_secs(30)).unwrap());
    wait_leads(&a_lines);
    let (mut b, b_lines) = serve_on(b_dir.path(), &url);
    let follower = listening(&b_lines.recv_timeout(Duration::from_secs(30)).unwrap());
    let from = |ip: [u8; 4]| reqwest::Client::builder().local_address(std::net::IpAddr::from(ip)).build().unwrap();
    rt.block_on(async {
        let flood = from([127, 0, 0, 5]);
        let mut limited = false;
        for _ in 0..60 {
            let status = flood.get(format!("{follower}/api/positions")).send().await.unwrap().status();
            if status == 429 {
                limited = true;
                break;
            }
            assert_eq!(status, 401);
        }
        assert!(limited, "the flood through the follower is budgeted");
        let other = from([127, 0, 0, 6]).get(format!("{follower}/api/positions")).send().await.unwrap();
        assert_eq!(other.status(), 401, "another client through the same follower has its own budget");
        // Claiming the flood's address straight at the leader, without the secret, is ignored:
        // the caller is budgeted as itself.
        let claimed = from([127, 0, 0, 7])
            .get(format!("{leader}/api/positions"))
            .header("x-tradeops-client", "127.0.0.5")
            .header("x-tradeops-cluster-secret", "guessed")
            .send()
            .await
            .unwrap();
        assert_eq!(claimed.status(), 401);
    });
    crate::cli::terminate(&mut b);
    crate::cli::terminate(&mut a);
}

/// `METHOD path` on `base` as the admin: the status and the body.
async fn status_and_body(
    client: &reqwest::Client,
    base: &str,
    method: reqwest::Method,
    path: &str,
    body: Option<serde_json::Value>,
) -> (u16, serde_json::Value) {
    let mut req = client.request(method, format!("{base}{path}")).bearer_auth(crate::crash::CRASH_TOKEN);
    if let Some(body) = body {
        req = req.json(&body);
    }
    let answer = req.send().await.unwrap();
    (answer.status().as_u16(), answer.json().await.unwrap_or_default())
}

/// Reads need no engine: a node whose leader does not exist (the term is held, renewed, by a
/// holder that never listens) answers the plain reads of the database — the settings, the
/// audit log, the tokens — with what the database holds, written there after it started,
/// while commands and reads of the engine's books answer 503 `no_engine_leader`. Once it takes
/// the term, it serves them as the leader.
#[test]
fn a_node_with_no_leader_serves_the_database_s_reads() {
    use tradeops_store::{AuditRepository, SettingsRepository};
    const TEST: &str = "a_node_with_no_leader_serves_the_database_s_reads";
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let Some((_keep, url)) = rt.block_on(postgres_db(TEST)) else { return };
    let db = rt.block_on(Database::open(&url)).unwrap();
    // The term's holder: this test, which renews it and keeps its lock but never listens.
    let ghost = electing(&db, Duration::from_secs(60))("ghost-without-an-address");
    let epoch = rt.block_on(ghost.acquire()).unwrap();
    let holder = ghost.clone();
    let renewing = rt.spawn(async move { holder.hold(epoch).await });

    let dir = tempfile::tempdir().unwrap();
    let (mut node, lines) = serve_on(dir.path(), &url);
    let base = listening(&lines.recv_timeout(Duration::from_secs(30)).expect("the node listens"));
    let client = reqwest::Client::new();
    rt.block_on(async {
        use reqwest::Method;
        // Its standby service is built while it listens already: the reads are its own once
        // the first answers.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        loop {
            let (status, body) = status_and_body(&client, &base, Method::GET, "/api/settings", None).await;
            if status == 200 {
                break;
            }
            assert!(tokio::time::Instant::now() < deadline, "the settings never answered: {status} {body}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        // Written to the database after the node started (as a leader would): the node answers
        // what the database holds, not what it loaded.
        let latest = db.latest_settings().await.unwrap().expect("the settings are stored");
        let mut settings: serde_json::Value = serde_json::from_str(&latest.settings).unwrap();
        settings["risk_controls"]["max_daily_loss"] = json!(777);
        let version = tradeops_store::SettingsVersion {
            version: latest.version + 1,
            settings: settings.to_string(),
            updated: json!(["risk_controls.max_daily_loss"]).to_string(),
            actor: "elsewhere".into(),
            created_at: 1,
        };
        db.append_settings(&version).await.unwrap();
        let entry = tradeops_store::AuditEntry {
            ts: 1,
            wall_ts: 1,
            actor: "elsewhere".into(),
            role: Some("admin".into()),
            action: "settings.update".into(),
            target: "settings".into(),
            request: json!({"risk_controls": {"max_daily_loss": 777}}).to_string(),
            outcome: "OK".into(),
            mode: "DEMO".into(),
            request_id: "written-elsewhere".into(),
        };
        db.append_audit(&entry).await.unwrap();

        let (status, body) = status_and_body(&client, &base, Method::GET, "/api/settings", None).await;
        assert_eq!((status, body["data"]["risk_controls"]["max_daily_loss"].as_f64()), (200, Some(777.0)), "{body}");
        let (status, body) = status_and_body(&client, &base, Method::GET, "/api/settings/history?limit=1", None).await;
        assert_eq!((status, body["data"][0]["version"].as_i64()), (200, Some(latest.version + 1)), "{body}");
        let (status, body) = status_and_body(&client, &base, Method::GET, "/api/audit?actor=elsewhere", None).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["data"][0]["request_id"], "written-elsewhere", "{body}");
        let (status, body) = status_and_body(&client, &base, Method::GET, "/api/auth/tokens", None).await;
        assert!(status == 200 && body["data"].as_array().is_some_and(|t| !t.is_empty()), "{status} {body}");
        let (status, body) = status_and_body(&client, &base, Method::GET, "/api/auth/me", None).await;
        assert_eq!((status, body["data"]["role"].as_str()), (200, Some("admin")), "{body}");
        // A command, and a read of the engine's books, wait for a leader: held (10 s), then
        // refused as leaderless, since this holder never answers.
        let order = json!({"symbol": "AAPL", "side": "BUY", "quantity": 1});
        let waits = [
            (Method::POST, "/api/orders", Some(order)),
            (Method::PUT, "/api/settings", Some(json!({"risk_controls": {"max_daily_loss": 600}}))),
            (Method::GET, "/api/positions", None),
        ]
        .map(|(method, path, body)| {
            let (client, base) = (client.clone(), base.clone());
            async move { (method.clone(), path, status_and_body(&client, &base, method, path, body).await) }
        });
        for (method, path, (status, answer)) in futures::future::join_all(waits).await {
            assert_eq!(
                (status, answer["error"]["detail"]["reason"].as_str()),
                (503, Some("no_engine_leader")),
                "{method} {path}: {answer}"
            );
            assert_eq!(answer["meta"]["mode"], "DEMO", "the mode this node trades in: {answer}");
        }
        // Health answers with a health body all the same: DOWN, the database up.
        let (status, body) = status_and_body(&client, &base, Method::GET, "/api/health", None).await;
        assert_eq!((status, body["data"]["status"].as_str()), (503, Some("DOWN")), "{body}");
        assert_eq!(body["data"]["components"]["database"], "HEALTHY", "{body}");
    });
    // The holder goes: the node takes the term and serves the same reads as the leader.
    renewing.abort();
    rt.block_on(ghost.release(epoch));
    wait_leads(&lines);
    rt.block_on(async {
        let (status, body) = status_and_body(&client, &base, reqwest::Method::GET, "/api/settings", None).await;
        assert_eq!((status, body["data"]["risk_controls"]["max_daily_loss"].as_f64()), (200, Some(777.0)), "{body}");
    });
    crate::cli::terminate(&mut node);
    rt.block_on(db.close());
}

/// A lone node on a fresh PostgreSQL database answers its first requests as the service, not as
/// a failover: from the moment it listens, health answers with a health body, a settings write
/// and a read of the engine's state are served (held while the node takes the term and builds
/// its service), every answer in the configured mode (`DEMO`, never `PAPER`). Restarted with
/// SIGTERM, the same holds at once.
#[test]
fn a_lone_node_serves_its_first_requests_without_a_false_failover() {
    const TEST: &str = "a_lone_node_serves_its_first_requests_without_a_false_failover";
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let Some((_keep, url)) = rt.block_on(postgres_db(TEST)) else { return };
    let dir = tempfile::tempdir().unwrap();
    let client = reqwest::Client::new();
    for (start, limit) in [("first start", 601), ("after SIGTERM", 602)] {
        let (mut node, lines) = serve_on(dir.path(), &url);
        let base = listening(&lines.recv_timeout(Duration::from_secs(30)).expect("the node listens"));
        rt.block_on(async {
            use reqwest::Method;
            let settings = json!({"risk_controls": {"max_daily_loss": limit}});
            let (health, write, risk) = tokio::join!(
                status_and_body(&client, &base, Method::GET, "/api/health", None),
                status_and_body(&client, &base, Method::PUT, "/api/settings", Some(settings)),
                status_and_body(&client, &base, Method::GET, "/api/risk/state", None),
            );
            let (status, body) = health;
            assert!(status == 200 || status == 503, "{start}: {status} {body}");
            assert!(body["data"]["status"].is_string(), "{start}: health answers a health body: {body}");
            assert_eq!((status == 503), body["data"]["status"] == "DOWN", "{start}: 503 only when DOWN: {body}");
            for (what, (status, body)) in
                [("health", (status, body.clone())), ("settings", write.clone()), ("risk", risk.clone())]
            {
                assert_eq!(body["meta"]["mode"], "DEMO", "{start}, {what}: {status} {body}");
            }
            assert_eq!(write.0, 200, "{start}: the settings write is served: {}", write.1);
            assert_eq!(risk.0, 200, "{start}: the risk state is served: {}", risk.1);
            let (_, settings) = status_and_body(&client, &base, Method::GET, "/api/settings", None).await;
            assert_eq!(settings["data"]["risk_controls"]["max_daily_loss"].as_f64(), Some(limit as f64), "{start}");
        });
        assert!(crate::cli::terminate(&mut node).success(), "{start}: stops cleanly on SIGTERM");
    }
}
