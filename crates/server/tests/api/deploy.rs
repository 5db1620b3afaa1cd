//! The deployment example in `deploy/` (docs/operating.md, "Deployment example"), started as
//! written: two `tradeops serve` nodes and one `tradeops worker` on PostgreSQL and Redis, each
//! process from its systemd unit's `ExecStart` and `EnvironmentFile` lines and the environment
//! files beside them. A newcomer who copies the files gets the cluster this test checks.
//!
//! What the test replaces, and nothing else:
//! - `ExecStart`'s binary path (`/usr/local/bin/tradeops`) by the `tradeops` cargo built;
//! - `/etc/tradeops/` (where the units read their environment files) by `deploy/`;
//! - `WorkingDirectory` by a temporary folder;
//! - `TRADEOPS_DATABASE_URL` by a fresh database on `TRADEOPS_TEST_DATABASE_URL`'s server, and
//!   `TRADEOPS_REDIS_URL` by `TRADEOPS_TEST_REDIS_URL`;
//! - each service's `TRADEOPS_BIND` and `TRADEOPS_ADVERTISE_URL` by a free port on 127.0.0.1;
//! - and it adds `TRADEOPS_CONFIG`, a file setting a cache key prefix of the test's own, so the
//!   cluster shares Redis with no other test.
//!
//! The admin token is the example's own. Needs PostgreSQL and Redis: without them the test says
//! it is skipped (and fails where `TRADEOPS_REQUIRE_SERVICES=1` promised them).

use crate::helpers::*;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::Receiver;
use std::time::Duration;
use tradeops_store::{Database, JobKind};

const TEST: &str = "the_documented_cluster_of_two_services_and_a_worker_works";

/// Where the units read their environment files from.
const ETC: &str = "/etc/tradeops/";

fn deploy_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy")
}

/// An environment file as systemd's `EnvironmentFile=` reads it: `KEY=value` lines, comments
/// and blank lines skipped.
fn env_file(path: &Path) -> BTreeMap<String, String> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
        .map(|line| {
            let (key, value) =
                line.split_once('=').unwrap_or_else(|| panic!("{}: not KEY=value: {line}", path.display()));
            (key.trim().to_string(), value.trim().trim_matches('"').to_string())
        })
        .collect()
}

/// What the test reads of a systemd unit.
struct Unit {
    /// `ExecStart`, split into words.
    exec: Vec<String>,
    /// Every `EnvironmentFile`, in order (a later file wins).
    env_files: Vec<String>,
}

fn unit(name: &str) -> Unit {
    let path = deploy_dir().join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let values = |key: &str| -> Vec<String> {
        text.lines().filter_map(|l| l.trim().strip_prefix(key)?.strip_prefix('=')).map(str::to_string).collect()
    };
    let exec: Vec<String> =
        values("ExecStart").first().expect("ExecStart").split_whitespace().map(str::to_string).collect();
    let env_files = values("EnvironmentFile");
    assert!(!env_files.is_empty(), "{name} reads an environment file");
    assert_eq!(values("WorkingDirectory").len(), 1, "{name} sets its working directory");
    Unit { exec, env_files }
}

/// The environment `unit`'s instance `instance` runs with: its environment files read from
/// `deploy/`, then `replace` over them (each replaced variable must be one the files set).
fn environment(unit: &Unit, instance: &str, replace: &[(&str, String)]) -> BTreeMap<String, String> {
    let mut env = BTreeMap::new();
    for file in &unit.env_files {
        let file = file.trim_start_matches('-').replace("%i", instance);
        let name = file.strip_prefix(ETC).unwrap_or_else(|| panic!("{file}: the example's files live in {ETC}"));
        env.extend(env_file(&deploy_dir().join(name)));
    }
    for (key, value) in replace {
        assert!(env.contains_key(*key), "the example sets {key} for {instance}: {env:?}");
        env.insert(key.to_string(), value.clone());
    }
    env
}

/// Starts `unit` as systemd would, in `dir`, with `env` and `TRADEOPS_CONFIG`; its output lines
/// as they come.
fn start(unit: &Unit, env: &BTreeMap<String, String>, config: &Path, dir: &Path) -> (Child, Receiver<String>) {
    let (program, args) = unit.exec.split_first().expect("a command");
    assert!(program.ends_with("/tradeops"), "ExecStart runs tradeops: {program}");
    let mut child = Command::new(env!("CARGO_BIN_EXE_tradeops"))
        .args(args)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .envs(env)
        .env("TRADEOPS_CONFIG", config)
        .current_dir(dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let rx = crate::helpers::output_lines(&mut child);
    (child, rx)
}

/// The processes this test started: killed if the test ends before it stops them.
struct Started(Vec<Child>);

impl Drop for Started {
    fn drop(&mut self) {
        for child in &mut self.0 {
            if matches!(child.try_wait(), Ok(None)) {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// The example's two services and worker: both services answer `/api/health`, one leads the
/// engine and the other follows it (the `cluster` health row), all three are members, a command
/// sent to the follower is carried out by the leader, and a backtest queued through a service is
/// run to completion by the worker (the services run no jobs: `TRADEOPS_JOBS_RUN=false`).
#[test]
fn the_documented_cluster_of_two_services_and_a_worker_works() {
    let Some(redis) = std::env::var("TRADEOPS_TEST_REDIS_URL").ok().filter(|u| !u.is_empty()) else {
        return skip(TEST, "the example's cluster shares Redis: TRADEOPS_TEST_REDIS_URL is not set", REQUIRE_SERVICES);
    };
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let Some((_db, url)) = rt.block_on(crate::cluster::postgres_db(TEST)) else { return };
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("test.toml");
    let prefix = format!("tradeops-test-{}:", uuid::Uuid::new_v4().simple());
    std::fs::write(&config, format!("[cache]\nkey_prefix = \"{prefix}\"\n")).unwrap();

    let serve = unit("tradeops-serve@.service");
    let worker = unit("tradeops-worker@.service");
    assert_eq!(&serve.exec[1..], ["serve"]);
    assert_eq!(&worker.exec[1..], ["worker"]);
    let shared = [("TRADEOPS_DATABASE_URL", url.clone()), ("TRADEOPS_REDIS_URL", redis)];
    let mut started = Started(Vec::new());
    let mut nodes = Vec::new();
    let mut token = String::new();
    for instance in ["serve-1", "serve-2"] {
        let port = free_port();
        let base = format!("http://127.0.0.1:{port}");
        let mut replace = shared.to_vec();
        replace.push(("TRADEOPS_BIND", format!("127.0.0.1:{port}")));
        replace.push(("TRADEOPS_ADVERTISE_URL", base.clone()));
        let env = environment(&serve, instance, &replace);
        assert_eq!(env.get("TRADEOPS_JOBS_RUN").map(String::as_str), Some("false"), "jobs are the workers'");
        token = env["TRADEOPS_ADMIN_TOKEN"].clone();
        let node_dir = dir.path().join(instance);
        std::fs::create_dir(&node_dir).unwrap();
        let (child, lines) = start(&serve, &env, &config, &node_dir);
        started.0.push(child);
        nodes.push((base, lines));
    }
    let env = environment(&worker, "1", &shared);
    let (child, worker_lines) = start(&worker, &env, &config, dir.path());
    started.0.push(child);
    let line = worker_lines.recv_timeout(Duration::from_secs(30)).expect("the worker starts");
    let worker_name =
        line.strip_prefix("worker ").and_then(|r| r.strip_suffix(" started")).expect("worker NAME started");

    // One of the two takes the engine's term and leads; the other follows it.
    let leads = crate::cluster::which_leads(&[&nodes[0].1, &nodes[1].1]);
    let (leader, follower) = (nodes[leads].0.clone(), nodes[1 - leads].0.clone());
    let client = reqwest::Client::new();
    let get = |base: &str, path: &str| {
        let request = client.get(format!("{base}{path}")).bearer_auth(&token);
        async move { request.send().await.unwrap() }
    };
    rt.block_on(async {
        for base in [&leader, &follower] {
            let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
            loop {
                let status = get(base, "/api/health").await.status();
                if status == 200 {
                    break;
                }
                assert!(tokio::time::Instant::now() < deadline, "{base}/api/health answers 200, not {status}");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }

        // The `cluster` row: who leads, who follows, and every process a member.
        let cluster_row = |base: String| async move {
            let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
            loop {
                let rows: Value = get(&base, "/api/health/components").await.json().await.unwrap();
                let row = rows["data"].as_array().unwrap().iter().find(|r| r["name"] == "cluster").cloned();
                let row = row.unwrap_or_else(|| panic!("a cluster row on PostgreSQL: {rows}"));
                if row["detail"]["members"].as_array().is_some_and(|m| m.len() == 3) {
                    return row;
                }
                assert!(tokio::time::Instant::now() < deadline, "two services and a worker are members: {row}");
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
        };
        let at_leader = cluster_row(leader.clone()).await;
        assert_eq!(at_leader["detail"]["role"], "leader", "{at_leader}");
        assert_eq!(at_leader["detail"]["node"], at_leader["detail"]["leader"], "{at_leader}");
        let kinds: Vec<&str> =
            at_leader["detail"]["members"].as_array().unwrap().iter().filter_map(|m| m["kind"].as_str()).collect();
        assert_eq!(kinds.iter().filter(|k| **k == "serve").count(), 2, "{at_leader}");
        assert_eq!(kinds.iter().filter(|k| **k == "worker").count(), 1, "{at_leader}");
        let at_follower = cluster_row(follower.clone()).await;
        assert_eq!(at_follower["detail"]["role"], "follower", "{at_follower}");
        assert_eq!(at_follower["detail"]["leader_url"], leader.as_str(), "the leader's advertised address");

        // A command sent to the follower is carried out by the leader.
        let config = tradeops_server::Config::default();
        let universe = tradeops_sim::Universe::generate(config.sim.seed, config.sim.symbols as usize);
        let symbol = universe.symbols[0].symbol.to_string();
        let watch = client
            .post(format!("{follower}/api/radar/watch"))
            .bearer_auth(&token)
            .json(&json!({"symbol": symbol}))
            .send()
            .await
            .unwrap();
        assert_eq!(watch.headers()["x-tradeops-leader"].to_str().unwrap(), leader, "forwarded to the leader");
        let status = watch.status();
        let body: Value = watch.json().await.unwrap();
        assert_eq!(status, 200, "{body}");
        let watchlist: Value = get(&leader, "/api/watchlist").await.json().await.unwrap();
        let watched = watchlist["data"].as_array().unwrap().iter().any(|row| row["symbol"] == symbol.as_str());
        assert!(watched, "the leader watches {symbol}: {watchlist}");

        // A backtest queued through a service is run by the worker (its missing bars downloaded
        // first, by the worker too).
        let request = json!({"strategy_id": "sma_cross", "symbol": symbol, "timeframe": "1m",
            "start": "2026-10-05T00:00:00Z", "end": "2026-10-10T00:00:00Z", "parameters": {"fast": 5, "slow": 20}});
        let queued: Value = client
            .post(format!("{follower}/api/backtests/run"))
            .bearer_auth(&token)
            .json(&request)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let id = queued["data"]["backtest_id"].as_str().unwrap_or_else(|| panic!("queued: {queued}")).to_string();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(180);
        let run = loop {
            let run: Value = get(&leader, &format!("/api/backtests/{id}")).await.json().await.unwrap();
            match run["data"]["status"].as_str() {
                Some("COMPLETED") => break run,
                Some("FAILED" | "CANCELED") => panic!("the backtest ended: {run}"),
                _ => {}
            }
            assert!(tokio::time::Instant::now() < deadline, "the worker completes the backtest: {run}");
            tokio::time::sleep(Duration::from_millis(250)).await;
        };
        assert!(run["data"]["bars"].as_u64().is_some_and(|bars| bars > 0), "{run}");
        let db = Database::open(&url).await.unwrap();
        let holder = db.job_holder(JobKind::Backtest, &id).await.unwrap();
        assert_eq!(holder.as_deref(), Some(worker_name), "run by the worker");
        db.close().await;
    });

    // Stopped as systemd stops them (SIGTERM), the worker, the follower, then the leader: each
    // exits 0.
    for i in [2, 1 - leads, leads] {
        assert!(crate::cli::terminate(&mut started.0[i]).success(), "a graceful stop exits 0");
    }
}
