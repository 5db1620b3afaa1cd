//! The `tradeops` binary: start-up output, configuration errors, graceful shutdown, CLI tokens.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

fn tradeops(dir: &std::path::Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_tradeops"));
    cmd.env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("TRADEOPS_DATABASE_URL", format!("sqlite://{}/tradeops.db", dir.display()))
        .env("TRADEOPS_BIND", "127.0.0.1:0")
        .current_dir(dir);
    cmd
}

/// Starts `serve` and returns the child, its base URL and every line it printed at start-up
/// (read until nothing more arrives for half a second).
fn serve(dir: &std::path::Path) -> (Child, String, Vec<String>) {
    let mut child = tradeops(dir).arg("serve").stdout(Stdio::piped()).stderr(Stdio::null()).spawn().unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut lines = vec![rx.recv_timeout(Duration::from_secs(30)).expect("start-up line")];
    while let Ok(line) = rx.recv_timeout(Duration::from_millis(500)) {
        lines.push(line);
    }
    let base =
        lines[0].split("listening on ").nth(1).and_then(|r| r.split_whitespace().next()).expect("address").to_string();
    (child, base, lines)
}

fn terminate(child: &mut Child) -> std::process::ExitStatus {
    Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap();
    for _ in 0..100 {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    child.kill().unwrap();
    panic!("did not stop on SIGTERM");
}

#[test]
fn first_start_prints_admin_token_once_and_sigterm_exits_zero() {
    let dir = tempfile::tempdir().unwrap();
    let (mut child, _, lines) = serve(dir.path());
    let out = lines.join("\n");
    assert!(out.contains("listening on http://127.0.0.1:"), "{out}");
    assert!(out.contains("mode PAPER") && out.contains("database sqlite") && out.contains("cache memory"), "{out}");
    let token = out.split_whitespace().find(|w| w.starts_with("tro_")).expect("admin token printed").to_string();
    assert!(out.contains(&format!("/#token={token}")), "sign-in URL printed: {out}");
    assert!(terminate(&mut child).success(), "graceful shutdown exits 0");

    let (mut again, _, lines) = serve(dir.path());
    assert!(lines.len() >= 2 && lines[1].contains("console:"), "{lines:?}");
    assert!(!lines.concat().contains("tro_"), "token shown only on first start: {lines:?}");
    assert!(terminate(&mut again).success());
}

#[test]
fn sigterm_during_start_up_still_exits_zero() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = tradeops(dir.path()).arg("serve").stdout(Stdio::piped()).stderr(Stdio::null()).spawn().unwrap();
    let mut first = String::new();
    // The pipe closes after the first line: the service must survive losing its stdout too.
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut first).unwrap();
    assert!(first.contains("listening on"), "{first}");
    assert!(terminate(&mut child).success(), "SIGTERM right after the first line exits 0");
}

#[test]
fn invalid_configuration_is_refused_listing_every_problem() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("bad.toml"), "[server]\nbind = \"nope\"\n[log]\nformat = \"xml\"\n").unwrap();
    let out = tradeops(dir.path())
        .args(["--config", "bad.toml", "serve"])
        .env_remove("TRADEOPS_BIND")
        .env("TRADEOPS_SIM_SYMBOLS", "0")
        .env("TRADEOPS_MODE", "SIDEWAYS")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    for needle in ["4 problems", "server.bind", "log.format", "simulation.symbols", "runtime.mode"] {
        assert!(err.contains(needle), "{needle} missing: {err}");
    }
}

#[test]
fn token_create_prints_a_working_token() {
    let dir = tempfile::tempdir().unwrap();
    let out = tradeops(dir.path()).args(["token", "create", "--name", "ci-bot", "--role", "viewer"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let token = String::from_utf8(out.stdout).unwrap().trim().to_string();
    assert!(token.starts_with("tro_"));
    let bad = tradeops(dir.path()).args(["token", "create", "--name", "x", "--role", "root"]).output().unwrap();
    assert!(!bad.status.success());

    let (mut child, base, _) = serve(dir.path());
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let status = rt.block_on(async {
        let client = reqwest::Client::new();
        let me: serde_json::Value =
            client.get(format!("{base}/api/auth/me")).bearer_auth(&token).send().await.unwrap().json().await.unwrap();
        assert_eq!(me["data"]["name"], "ci-bot");
        assert_eq!(me["data"]["role"], "viewer");
        client.put(format!("{base}/api/settings")).bearer_auth(&token).body("{}").send().await.unwrap().status()
    });
    assert_eq!(status, 403);
    assert!(terminate(&mut child).success());
}

#[test]
fn migrate_applies_and_reports() {
    let dir = tempfile::tempdir().unwrap();
    let out = tradeops(dir.path()).arg("migrate").output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("migrations applied"));
    assert!(dir.path().join("tradeops.db").exists());
}

/// A running `tradeops serve` child on its own SQLite file, in DEMO (market 60x).
struct Child_ {
    child: Child,
    base: String,
}

const CRASH_TOKEN: &str = "tro_crash_test_admin_token_0123456789";

fn start_demo(dir: &std::path::Path) -> Child_ {
    let mut child = tradeops(dir)
        .arg("serve")
        .env("TRADEOPS_MODE", "DEMO")
        .env("TRADEOPS_ADMIN_TOKEN", CRASH_TOKEN)
        .env("TRADEOPS_RATE_LIMIT_BURST", "100000")
        .env("TRADEOPS_RATE_LIMIT_PER_SECOND", "100000")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut first).unwrap();
    let base =
        first.split("listening on ").nth(1).and_then(|r| r.split_whitespace().next()).expect("address").to_string();
    Child_ { child, base }
}

async fn call(
    client: &reqwest::Client,
    base: &str,
    method: reqwest::Method,
    path: &str,
    body: Option<serde_json::Value>,
) -> serde_json::Value {
    let mut req = client.request(method, format!("{base}{path}")).bearer_auth(CRASH_TOKEN);
    if let Some(b) = body {
        req = req.json(&b);
    }
    req.send().await.unwrap().json().await.unwrap()
}

/// The facts a crash must not lose.
async fn facts(client: &reqwest::Client, base: &str) -> serde_json::Value {
    use reqwest::Method;
    let orders = call(client, base, Method::GET, "/api/orders?limit=1000", None).await;
    let orders: Vec<_> = orders["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| {
            serde_json::json!([o["client_order_id"], o["status"], o["filled_quantity"], o["symbol"], o["quantity"]])
        })
        .collect();
    let positions = call(client, base, Method::GET, "/api/positions", None).await;
    let positions: Vec<_> = positions["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| serde_json::json!([p["symbol"], p["quantity"], p["average_entry_price"], p["strategy_status"]]))
        .collect();
    let account = call(client, base, Method::GET, "/api/account/summary", None).await;
    let risk = call(client, base, Method::GET, "/api/risk/state", None).await;
    let watch = call(client, base, Method::GET, "/api/watchlist", None).await;
    let watch: Vec<_> = watch["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| serde_json::json!([w["symbol"], w["strategy_status"]]))
        .collect();
    let blocks = call(client, base, Method::GET, "/api/radar/blocks", None).await;
    let blocks: Vec<_> = blocks["data"].as_array().unwrap().iter().map(|b| b["symbol"].clone()).collect();
    serde_json::json!({
        "orders": orders, "positions": positions, "cash": account["data"]["cash"],
        "trading_state": risk["data"]["trading_state"], "trades_today": risk["data"]["trades_today"],
        "watchlist": watch, "blocks": blocks,
    })
}

#[test]
fn a_kill_9_mid_trading_loses_nothing() {
    use reqwest::Method;
    let dir = tempfile::tempdir().unwrap();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let client = reqwest::Client::new();
    let mut running = start_demo(dir.path());
    let before = rt.block_on(async {
        let base = running.base.clone();
        let open = serde_json::json!({"momentum_radar": {"min_percentage_gain": -100, "min_relative_volume": 0,
            "max_float": 100000000000u64, "min_volume": 0, "min_price": 2, "max_price": 50},
            "risk_controls": {"open_position_limit": 10}});
        let set = call(&client, &base, Method::PUT, "/api/settings", Some(open)).await;
        assert_eq!(set["ok"], true, "{set}");
        let mut symbols = Vec::new();
        for _ in 0..100 {
            let radar = call(&client, &base, Method::GET, "/api/radar/momentum?top_n=10", None).await;
            symbols = radar["data"].as_array().unwrap().iter().map(|r| (r["symbol"].as_str().unwrap().to_string(), r["price"].as_f64().unwrap())).collect();
            if symbols.len() >= 5 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        assert!(symbols.len() >= 5, "the radar filled up");
        let mut ids = Vec::new();
        for (s, _) in &symbols[..3] {
            let placed = call(&client, &base, Method::POST, "/api/orders", Some(serde_json::json!({"symbol": s, "side": "BUY", "quantity": 10}))).await;
            ids.push(placed["data"]["client_order_id"].as_str().expect("placed").to_string());
        }
        let (resting, price) = &symbols[3];
        let limit = ((price * 0.97) * 100.0).floor() / 100.0;
        let rest = call(&client, &base, Method::POST, "/api/orders", Some(serde_json::json!({"symbol": resting, "side": "BUY", "quantity": 5, "order_type": "LIMIT", "limit_price": limit, "time_in_force": "GTC"}))).await;
        assert_eq!(rest["ok"], true, "{rest}");
        let watched = call(&client, &base, Method::POST, "/api/radar/watch", Some(serde_json::json!({"symbol": symbols[4].0}))).await;
        assert_eq!(watched["ok"], true, "{watched}");
        let blocked = call(&client, &base, Method::POST, "/api/radar/block", Some(serde_json::json!({"symbol": symbols[0].0, "reason": "crash test", "block_scope": "PERMANENT"}))).await;
        assert_eq!(blocked["ok"], true, "{blocked}");

        for id in &ids {
            for _ in 0..100 {
                let o = call(&client, &base, Method::GET, &format!("/api/orders/{id}"), None).await;
                if o["data"]["status"] == "FILLED" {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
        facts(&client, &base).await
    });
    assert_eq!(before["positions"].as_array().unwrap().len(), 3, "{before}");
    running.child.kill().unwrap(); // SIGKILL: no graceful anything
    running.child.wait().unwrap();

    let mut again = start_demo(dir.path());
    let after = rt.block_on(facts(&client, &again.base));
    assert_eq!(after, before, "state after kill -9 and restart");
    let risk = rt.block_on(call(&client, &again.base, Method::GET, "/api/risk/state", None));
    assert_eq!(risk["data"]["reconciliation_status"], "OK");
    assert!(terminate(&mut again.child).success());
}

#[test]
fn data_import_from_the_command_line() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("bars.csv"), "date,open,high,low,close,volume\n2026-11-17,10,11,9,10.5,1000\n")
        .unwrap();
    let out = tradeops(dir.path())
        .args(["data", "import", "--symbol", "REAL", "--timeframe", "1d", "bars.csv"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("1 1d bars of REAL stored"));
    std::fs::write(dir.path().join("bad.csv"), "date,open,high,low,close,volume\n2026-11-17,10,9,11,10.5,1000\n")
        .unwrap();
    let bad = tradeops(dir.path()).args(["data", "import", "--symbol", "REAL", "bad.csv"]).output().unwrap();
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("line 2"), "{}", String::from_utf8_lossy(&bad.stderr));
}
