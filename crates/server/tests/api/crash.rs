//! Crashes: `tradeops serve` processes killed with SIGKILL (or aborted inside the emergency
//! halt by `TRADEOPS_TEST_CRASH_POINT`) and started again on the same SQLite file. What an
//! operator saw acknowledged survives, and a halt caught half-done completes after the restart.

use crate::cli::{terminate, tradeops};
use reqwest::Method;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader};
use std::process::{Child, Stdio};
use std::time::Duration;

/// A running `tradeops serve` child on its own SQLite file, in DEMO (market 60x).
struct Running {
    child: Child,
    base: String,
}

/// A test that fails part-way leaves no server behind.
impl Drop for Running {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

pub(crate) const CRASH_TOKEN: &str = "tro_crash_test_admin_token_0123456789";

fn start_demo(dir: &std::path::Path, env: &[(&str, &str)]) -> Running {
    let mut cmd = tradeops(dir);
    cmd.arg("serve")
        .env("TRADEOPS_MODE", "DEMO")
        .env("TRADEOPS_ADMIN_TOKEN", CRASH_TOKEN)
        .env("TRADEOPS_RATE_LIMIT_BURST", "100000")
        .env("TRADEOPS_RATE_LIMIT_PER_SECOND", "100000")
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut first).unwrap();
    let base =
        first.split("listening on ").nth(1).and_then(|r| r.split_whitespace().next()).expect("address").to_string();
    Running { child, base }
}

pub(crate) async fn call(
    client: &reqwest::Client,
    base: &str,
    method: Method,
    path: &str,
    body: Option<Value>,
) -> Value {
    let mut req = client.request(method, format!("{base}{path}")).bearer_auth(CRASH_TOKEN);
    if let Some(b) = body {
        req = req.json(&b);
    }
    req.send().await.unwrap().json().await.unwrap()
}

/// Opens the radar's filters and returns at least `n` symbols priced 2–50 with their prices,
/// among those the simulated market (the service's default seed) does not halt on the scan's
/// day: these tests trade them at whatever market time the wall clock gives, and an order or a
/// close into a halt is refused `SYMBOL_HALTED` (halts are tested in `halts`).
pub(crate) async fn radar_symbols(client: &reqwest::Client, base: &str, n: usize) -> Vec<(String, f64)> {
    let sim = crate::helpers::SimDays::new();
    let quiet = |symbol: &str, captured_at: &str| {
        let date = crate::helpers::ny_date_of(captured_at);
        sim.quiet(symbol, date) && sim.quiet(symbol, date.succ_opt().expect("a next day"))
    };
    let open = json!({"momentum_radar": {"min_percentage_gain": -100, "min_relative_volume": 0,
        "max_float": 100000000000u64, "min_volume": 0, "min_price": 2, "max_price": 50},
        "risk_controls": {"open_position_limit": 10}});
    let set = call(client, base, Method::PUT, "/api/settings", Some(open)).await;
    assert_eq!(set["ok"], true, "{set}");
    // The filters apply at the next scan, made on a minute boundary: outside the session's
    // runners (at night the default filters list nothing) that is up to a minute away.
    let mut last = Value::Null;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(90);
    while tokio::time::Instant::now() < deadline {
        let radar = call(client, base, Method::GET, "/api/radar/momentum?top_n=200", None).await;
        let symbols: Vec<_> = radar["data"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| quiet(r["symbol"].as_str().unwrap(), r["captured_at"].as_str().unwrap()))
            .take(20)
            .map(|r| (r["symbol"].as_str().unwrap().to_string(), r["price"].as_f64().unwrap()))
            .collect();
        if symbols.len() >= n {
            return symbols;
        }
        last = radar;
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let rows = last["data"].as_array().map(|r| r.len()).unwrap_or_default();
    let at: Vec<_> = last["data"].as_array().into_iter().flatten().map(|r| r["captured_at"].clone()).take(3).collect();
    panic!("the radar never listed {n} symbols the simulated market leaves unhalted: {rows} rows captured at {at:?}");
}

pub(crate) async fn wait_status(client: &reqwest::Client, base: &str, id: &str, statuses: &[&str]) -> Value {
    for _ in 0..200 {
        let o = call(client, base, Method::GET, &format!("/api/orders/{id}"), None).await;
        if statuses.iter().any(|s| o["data"]["status"] == *s) {
            return o["data"].clone();
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("order {id} never reached {statuses:?}");
}

/// The facts a crash must not lose.
pub(crate) async fn facts(client: &reqwest::Client, base: &str) -> Value {
    let orders = call(client, base, Method::GET, "/api/orders?limit=1000", None).await;
    let orders: Vec<_> = orders["data"]
        .as_array()
        .unwrap_or_else(|| panic!("the orders are listed: {orders}"))
        .iter()
        .map(|o| json!([o["client_order_id"], o["status"], o["filled_quantity"], o["symbol"], o["quantity"]]))
        .collect();
    let positions = call(client, base, Method::GET, "/api/positions", None).await;
    let positions: Vec<_> = positions["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| json!([p["symbol"], p["quantity"], p["average_entry_price"], p["strategy_status"]]))
        .collect();
    let account = call(client, base, Method::GET, "/api/account/summary", None).await;
    let risk = call(client, base, Method::GET, "/api/risk/state", None).await;
    let watch = call(client, base, Method::GET, "/api/watchlist", None).await;
    let watch: Vec<_> =
        watch["data"].as_array().unwrap().iter().map(|w| json!([w["symbol"], w["strategy_status"]])).collect();
    let blocks = call(client, base, Method::GET, "/api/radar/blocks", None).await;
    let blocks: Vec<_> = blocks["data"].as_array().unwrap().iter().map(|b| b["symbol"].clone()).collect();
    json!({
        "orders": orders, "positions": positions, "cash": account["data"]["cash"],
        "trading_state": risk["data"]["trading_state"], "trades_today": risk["data"]["trades_today"],
        "watchlist": watch, "blocks": blocks,
    })
}

#[test]
fn a_kill_9_mid_trading_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let client = reqwest::Client::new();
    let mut running = start_demo(dir.path(), &[]);
    let before = rt.block_on(async {
        let base = running.base.clone();
        let symbols = radar_symbols(&client, &base, 5).await;
        let mut ids = Vec::new();
        for (s, _) in &symbols[..3] {
            let placed = call(&client, &base, Method::POST, "/api/orders", Some(json!({"symbol": s, "side": "BUY", "quantity": 10}))).await;
            ids.push(placed["data"]["client_order_id"].as_str().expect("placed").to_string());
        }
        let (resting, price) = &symbols[3];
        let limit = ((price * 0.97) * 100.0).floor() / 100.0;
        let rest = call(&client, &base, Method::POST, "/api/orders", Some(json!({"symbol": resting, "side": "BUY", "quantity": 5, "order_type": "LIMIT", "limit_price": limit, "time_in_force": "GTC"}))).await;
        assert_eq!(rest["ok"], true, "{rest}");
        let watched = call(&client, &base, Method::POST, "/api/radar/watch", Some(json!({"symbol": symbols[4].0}))).await;
        assert_eq!(watched["ok"], true, "{watched}");
        let blocked = call(&client, &base, Method::POST, "/api/radar/block", Some(json!({"symbol": symbols[0].0, "reason": "crash test", "block_scope": "PERMANENT"}))).await;
        assert_eq!(blocked["ok"], true, "{blocked}");
        for id in &ids {
            wait_status(&client, &base, id, &["FILLED"]).await;
        }
        facts(&client, &base).await
    });
    assert_eq!(before["positions"].as_array().unwrap().len(), 3, "{before}");
    running.child.kill().unwrap(); // SIGKILL: no graceful anything
    running.child.wait().unwrap();

    let mut again = start_demo(dir.path(), &[]);
    let after = rt.block_on(facts(&client, &again.base));
    assert_eq!(after, before, "state after kill -9 and restart");
    let risk = rt.block_on(call(&client, &again.base, Method::GET, "/api/risk/state", None));
    assert_eq!(risk["data"]["reconciliation_status"], "OK");
    assert!(terminate(&mut again.child).success());
}

/// A bracket's position in DEMO (paper broker) whose stop rests at the broker, then `kill -9`:
/// started again, the stop is the same order, taken back working (not placed a second time,
/// not cancelled as foreign), the position reads protected at the broker, and a close still
/// frees its shares first: sold once, nothing refused for shares held, the stop cancelled.
#[test]
fn a_kill_9_keeps_a_brackets_stop_resting_once_and_a_close_after_it_frees_the_shares() {
    let dir = tempfile::tempdir().unwrap();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let client = reqwest::Client::new();
    let mut running = start_demo(dir.path(), &[]);
    let position = |base: String, symbol: String| {
        let client = client.clone();
        async move {
            let rows = call(&client, &base, Method::GET, "/api/positions", None).await;
            rows["data"].as_array().unwrap().iter().find(|r| r["symbol"] == symbol.as_str()).cloned()
        }
    };
    let protected = |base: String, symbol: String| {
        let position = &position;
        async move {
            for _ in 0..200 {
                if let Some(row) = position(base.clone(), symbol.clone()).await.filter(|r| r["protection"] == "BROKER")
                {
                    return row;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            panic!("{symbol} never protected at the broker");
        }
    };
    let (symbol, stop_id, before) = rt.block_on(async {
        let base = running.base.clone();
        let (symbol, price) = radar_symbols(&client, &base, 1).await.remove(0);
        // 20 % under the price: the simulated market does not reach it during the test.
        let stop = ((price * 0.8) * 100.0).floor() / 100.0;
        let body = json!({"symbol": symbol, "side": "BUY", "quantity": 10, "stop_loss": {"stop_price": stop}});
        let placed = call(&client, &base, Method::POST, "/api/orders", Some(body)).await;
        assert_eq!(placed["ok"], true, "{placed}");
        let row = protected(base.clone(), symbol.clone()).await;
        let stop_id = row["protective_order_id"].as_str().expect("the stop's id").to_string();
        (symbol, stop_id, facts(&client, &base).await)
    });
    running.child.kill().unwrap(); // SIGKILL
    running.child.wait().unwrap();

    let mut again = start_demo(dir.path(), &[]);
    rt.block_on(async {
        let base = again.base.clone();
        assert_eq!(facts(&client, &base).await, before, "state after kill -9 and restart");
        let row = protected(base.clone(), symbol.clone()).await;
        assert_eq!(row["protective_order_id"], json!(stop_id), "the same stop, taken back");
        let orders = call(&client, &base, Method::GET, &format!("/api/orders?symbol={symbol}"), None).await;
        assert_eq!(orders["data"].as_array().unwrap().len(), 2, "the entry and one stop: {orders}");
        let risk = call(&client, &base, Method::GET, "/api/risk/state", None).await;
        assert_eq!(risk["data"]["reconciliation_status"], "OK", "the stop is ours, not foreign: {risk}");

        let close = call(&client, &base, Method::POST, "/api/positions/close", Some(json!({"symbol": symbol}))).await;
        let close_id = close["data"]["close_order_client_order_id"].as_str().expect("closing").to_string();
        let sold = wait_status(&client, &base, &close_id, &["FILLED", "REJECTED"]).await;
        assert_eq!(
            (sold["status"].as_str(), sold["executions"].as_array().map(Vec::len)),
            (Some("FILLED"), Some(1)),
            "{sold}"
        );
        wait_status(&client, &base, &stop_id, &["CANCELED"]).await;
        for _ in 0..100 {
            if position(base.clone(), symbol.clone()).await.is_none() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert_eq!(position(base.clone(), symbol.clone()).await, None, "flat");
    });
    assert!(terminate(&mut again.child).success());
}

/// Where the emergency halt is interrupted.
#[derive(Clone, Copy, Debug)]
enum Kill {
    /// Aborted inside the halt at a `TRADEOPS_TEST_CRASH_POINT`, before it answered.
    Inside(&'static str),
    /// Aborted at a `TRADEOPS_TEST_CRASH_POINT` right after the halt answered: its cancels
    /// and exits are with the broker, the orders' new states not stored.
    Answered(&'static str),
    /// SIGKILL as soon as the halt's orders read `PENDING_CANCEL` (stored right after the
    /// answer): its cancels are on their way, unanswered.
    AfterReply,
    /// SIGKILL once the exits have filled, the resting buys still `PENDING_CANCEL`.
    AfterExitsFilled,
}

/// DEMO with a broker slow to answer cancels (one market hour): two positions and four GTC
/// limit buys 2–4 % under the market; the emergency halt is interrupted at `kill`. Started
/// again with a prompt broker, within 10 s the broker holds no open order and no position is
/// open, and the service is still `HALTED`.
fn a_halt_interrupted_by_a_crash_completes_after_restart(kill: Kill) {
    let dir = tempfile::tempdir().unwrap();
    let slow = dir.path().join("slow-cancels.toml");
    std::fs::write(&slow, "[paper]\ncancel_latency_ms = 3600000\n").unwrap();
    let slow = slow.display().to_string();
    let mut env = vec![("TRADEOPS_CONFIG", slow.as_str())];
    if let Kill::Inside(point) | Kill::Answered(point) = kill {
        env.push(("TRADEOPS_TEST_CRASH_POINT", point));
    }
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let client = reqwest::Client::new();
    let mut running = start_demo(dir.path(), &env);
    let resting = rt.block_on(async {
        let base = running.base.clone();
        let symbols = radar_symbols(&client, &base, 7).await;
        // A watched symbol: its strategy must stay stopped after the restart.
        let watched = call(&client, &base, Method::POST, "/api/radar/watch", Some(json!({"symbol": symbols[6].0}))).await;
        assert_eq!(watched["ok"], true, "{watched}");
        let mut bought = Vec::new();
        for (s, _) in &symbols[..2] {
            let placed = call(&client, &base, Method::POST, "/api/orders", Some(json!({"symbol": s, "side": "BUY", "quantity": 10}))).await;
            bought.push(placed["data"]["client_order_id"].as_str().expect("placed").to_string());
        }
        for id in &bought {
            wait_status(&client, &base, id, &["FILLED"]).await;
        }
        let mut resting = Vec::new();
        for (i, (s, price)) in symbols[2..6].iter().enumerate() {
            let limit = ((price * (0.98 - 0.006 * i as f64)) * 100.0).floor() / 100.0;
            let order = json!({"symbol": s, "side": "BUY", "quantity": 5, "order_type": "LIMIT", "limit_price": limit, "time_in_force": "GTC"});
            let placed = call(&client, &base, Method::POST, "/api/orders", Some(order)).await;
            resting.push(placed["data"]["client_order_id"].as_str().unwrap_or_else(|| panic!("{placed}")).to_string());
        }
        for id in &resting {
            wait_status(&client, &base, id, &["ACCEPTED"]).await;
        }
        let halt = client
            .post(format!("{base}/api/risk/emergency-halt"))
            .bearer_auth(CRASH_TOKEN)
            .json(&json!({"reason": "crash test"}))
            .send()
            .await;
        match kill {
            Kill::Inside(point) => assert!(halt.is_err(), "the process stopped at {point} before answering"),
            Kill::Answered(_) | Kill::AfterReply | Kill::AfterExitsFilled => {
                let halt: Value = halt.unwrap().json().await.unwrap();
                assert_eq!(halt["data"]["halted"], true, "{halt}");
            }
        }
        if let Kill::AfterReply = kill {
            for id in &resting {
                wait_status(&client, &base, id, &["PENDING_CANCEL"]).await;
            }
        }
        if let Kill::AfterExitsFilled = kill {
            let mut flat = false;
            for _ in 0..200 {
                let positions = call(&client, &base, Method::GET, "/api/positions", None).await;
                if positions["data"].as_array().unwrap().is_empty() {
                    flat = true;
                    break;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            assert!(flat, "the halt's exits filled before the kill");
            for id in &resting {
                let o = call(&client, &base, Method::GET, &format!("/api/orders/{id}"), None).await;
                assert_eq!(o["data"]["status"], "PENDING_CANCEL", "the slow broker has not answered: {o}");
            }
        }
        resting
    });
    running.child.kill().ok(); // SIGKILL (the crash points have aborted already)
    running.child.wait().unwrap();

    let mut again = start_demo(dir.path(), &[]);
    let base = again.base.clone();
    rt.block_on(async {
        let mut reconciliation = Vec::new();
        let mut done = false;
        for _ in 0..100 {
            let health = call(&client, &base, Method::GET, "/api/health/components", None).await;
            let execution =
                health["data"].as_array().unwrap().iter().find(|c| c["name"] == "execution_broker").unwrap().clone();
            let detail = &execution["detail"];
            reconciliation.push(detail["reconciliation_detail"].as_str().unwrap_or_default().to_string());
            let positions = call(&client, &base, Method::GET, "/api/positions", None).await;
            if detail["broker_open_orders"] == 0
                && detail["open_orders"] == 0
                && positions["data"].as_array().unwrap().is_empty()
            {
                done = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let state = facts(&client, &base).await;
        assert!(done, "{kill:?}: after 10 s the broker still works orders or a position is open: {state}");
        assert_eq!(state["trading_state"], "HALTED", "{kill:?}: {state}");
        for o in state["orders"].as_array().unwrap() {
            assert!(["FILLED", "CANCELED", "REJECTED", "EXPIRED"].contains(&o[1].as_str().unwrap()), "{kill:?}: {o}");
        }
        for id in &resting {
            let o = call(&client, &base, Method::GET, &format!("/api/orders/{id}"), None).await;
            assert_eq!(o["data"]["status"], "CANCELED", "{kill:?}: {o}");
        }
        for w in state["watchlist"].as_array().unwrap() {
            assert!(["Closed", "Halted"].contains(&w[1].as_str().unwrap()), "{kill:?}: a strategy left running: {w}");
        }
        if let Kill::AfterReply | Kill::AfterExitsFilled = kill {
            // The restarted broker was still working the orders whose cancels were lost with
            // the process: reconciliation reported it, and sent the cancels again.
            assert!(
                reconciliation.iter().any(|d| d.contains("PENDING_CANCEL here but working at the broker")),
                "{kill:?}: {reconciliation:?}"
            );
        }
        let risk = call(&client, &base, Method::GET, "/api/risk/state", None).await;
        assert_eq!(risk["data"]["reconciliation_status"], "OK", "{risk}");
    });
    assert!(terminate(&mut again.child).success());
}

#[test]
fn a_halt_killed_after_latching_completes_after_restart() {
    a_halt_interrupted_by_a_crash_completes_after_restart(Kill::Inside("halt-latched"));
}

#[test]
fn a_halt_killed_with_its_exits_written_ahead_completes_after_restart() {
    a_halt_interrupted_by_a_crash_completes_after_restart(Kill::Inside("halt-written-ahead"));
}

#[test]
fn a_halt_killed_after_answering_before_its_orders_states_are_stored_completes_after_restart() {
    a_halt_interrupted_by_a_crash_completes_after_restart(Kill::Answered("halt-answered"));
}

#[test]
fn a_halt_killed_with_its_cancels_unanswered_completes_after_restart() {
    a_halt_interrupted_by_a_crash_completes_after_restart(Kill::AfterReply);
}

#[test]
fn a_halt_killed_after_its_exits_filled_completes_after_restart() {
    a_halt_interrupted_by_a_crash_completes_after_restart(Kill::AfterExitsFilled);
}
