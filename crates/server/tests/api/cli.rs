//! The `tradeops` binary: start-up output, configuration errors, graceful shutdown, CLI tokens
//! (created and revoked against a running service's database, listed, the last admin kept).

use crate::helpers::{audit_rows, TestDb, ADMIN_TOKEN};
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;
use tokio::time::Instant;

pub(crate) fn tradeops(dir: &std::path::Path) -> Command {
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
    serve_with(tradeops(dir))
}

/// Starts `cmd serve` (see [`serve`]).
fn serve_with(mut cmd: Command) -> (Child, String, Vec<String>) {
    let mut child = cmd.arg("serve").stdout(Stdio::piped()).stderr(Stdio::null()).spawn().unwrap();
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
    // A cluster node (PostgreSQL) forwards to the engine's leader until it leads: wait for that
    // line (its start-up generates the simulated day so far, which takes longer late in the day),
    // then for the lines after it.
    let mut leading = !lines[0].contains("until it leads");
    while let Ok(line) = rx.recv_timeout(if leading { Duration::from_millis(500) } else { Duration::from_secs(30) }) {
        leading |= line.contains("leads the engine");
        lines.push(line);
    }
    let base =
        lines[0].split("listening on ").nth(1).and_then(|r| r.split_whitespace().next()).expect("address").to_string();
    (child, base, lines)
}

pub(crate) fn terminate(child: &mut Child) -> std::process::ExitStatus {
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

/// One service per SQLite file: a second `serve` on it is refused at once with one
/// line naming the first (its pid and address), which goes on serving; once the first is gone,
/// even by `kill -9`, the database starts again.
#[test]
fn a_second_service_on_the_same_sqlite_file_is_refused_naming_the_first() {
    let dir = tempfile::tempdir().unwrap();
    let (mut first, base, _) = serve(dir.path());
    let mut second = tradeops(dir.path()).arg("serve").stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
    let status = (0..100)
        .find_map(|_| second.try_wait().unwrap().or_else(|| (std::thread::sleep(Duration::from_millis(100)), None).1))
        .unwrap_or_else(|| {
            second.kill().unwrap();
            panic!("a second service on the same SQLite file started");
        });
    assert_eq!(status.code(), Some(1));
    let mut err = String::new();
    std::io::Read::read_to_string(&mut second.stderr.take().unwrap(), &mut err).unwrap();
    let address = base.trim_start_matches("http://");
    let holder = format!("tradeops.db is in use by pid {}, listening on {address}", first.id());
    assert!(err.contains(&holder) && err.contains("PostgreSQL"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "one line: {err}");

    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let health = rt.block_on(async { reqwest::get(format!("{base}/api/health")).await.unwrap().status() });
    assert_eq!(health, 200, "the first service goes on serving");

    first.kill().unwrap();
    first.wait().unwrap();
    let (mut again, _, _) = serve(dir.path());
    assert!(terminate(&mut again).success(), "after a kill -9 the file is free again");
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

/// `tradeops` on the test database (SQLite, or PostgreSQL with `TRADEOPS_TEST_DATABASE_URL`),
/// with the configured admin token.
fn tradeops_on(dir: &std::path::Path, url: &str) -> Command {
    let mut cmd = tradeops(dir);
    cmd.env("TRADEOPS_DATABASE_URL", url).env("TRADEOPS_ADMIN_TOKEN", ADMIN_TOKEN);
    cmd
}

/// Runs a CLI command; returns (success, stdout, stderr).
fn run(mut cmd: Command, args: &[&str]) -> (bool, String, String) {
    let out = cmd.args(args).output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Polls `GET /api/auth/me` with `token` until it answers `status` (10 s at most: the service
/// takes well under a second, docs/PERFORMANCE.md); returns how long that took.
async fn until_status(client: &reqwest::Client, base: &str, token: &str, status: u16) -> Duration {
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(10) {
        let reply = client.get(format!("{base}/api/auth/me")).bearer_auth(token).send().await.unwrap();
        if reply.status().as_u16() == status {
            return started.elapsed();
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("the running service never answered {status} for the token");
}

/// The audit rows of the CLI's actions, read from the running service as the admin.
async fn cli_audit(client: &reqwest::Client, base: &str) -> serde_json::Value {
    let reply = client.get(format!("{base}/api/audit?actor=cli")).bearer_auth(ADMIN_TOKEN).send().await.unwrap();
    reply.json().await.unwrap()
}

#[tokio::test]
async fn cli_token_changes_reach_a_running_service_without_restart() {
    let (db, url) = TestDb::new().await;
    let dir = tempfile::tempdir().unwrap();
    let (mut child, base, _) = serve_with(tradeops_on(dir.path(), &url));
    let client = reqwest::Client::new();

    let (ok, out, err) =
        run(tradeops_on(dir.path(), &url), &["token", "create", "--name", "cli-bot", "--role", "viewer"]);
    assert!(ok, "{err}");
    let secret = out.trim().to_string();
    let accepted = until_status(&client, &base, &secret, 200).await;
    let me: serde_json::Value =
        client.get(format!("{base}/api/auth/me")).bearer_auth(&secret).send().await.unwrap().json().await.unwrap();
    assert_eq!((me["data"]["name"].as_str(), me["data"]["role"].as_str()), (Some("cli-bot"), Some("viewer")));

    let (ok, out, err) = run(tradeops_on(dir.path(), &url), &["token", "revoke", "--name", "cli-bot"]);
    assert!(ok, "{err}");
    assert!(out.contains("revoked"), "{out}");
    let refused = until_status(&client, &base, &secret, 401).await;
    eprintln!("CLI token changes reached the running service: created in {accepted:?}, revoked in {refused:?}");
    // The admin token the service started with was never disturbed.
    let settings = client.get(format!("{base}/api/settings")).bearer_auth(ADMIN_TOKEN).send().await.unwrap();
    assert_eq!(settings.status(), 200);

    // Both actions are in the audit log, by the CLI.
    let audit = cli_audit(&client, &base).await;
    assert_eq!(audit_rows(&audit), vec!["token.revoke cli-bot OK", "token.create cli-bot OK"], "{audit}");
    assert!(!audit.to_string().contains(&secret));
    assert!(terminate(&mut child).success());
    drop(db);
}

#[tokio::test]
async fn cli_refuses_revoking_the_last_admin_and_lists_tokens_without_secrets() {
    let (db, url) = TestDb::new().await;
    let dir = tempfile::tempdir().unwrap();
    let (mut child, base, _) = serve_with(tradeops_on(dir.path(), &url));
    let client = reqwest::Client::new();

    let (ok, _, err) = run(tradeops_on(dir.path(), &url), &["token", "revoke", "--name", "admin"]);
    assert!(!ok, "the last active admin token was revoked");
    assert!(err.contains("last active admin token") && err.contains("SETTINGS_UPDATE_BLOCKED"), "{err}");
    // Nothing changed: the admin still signs in (and the list below shows it active).
    let me = client.get(format!("{base}/api/auth/me")).bearer_auth(ADMIN_TOKEN).send().await.unwrap();
    assert_eq!(me.status(), 200);
    let audit = cli_audit(&client, &base).await;
    assert_eq!(audit_rows(&audit), vec!["token.revoke admin SETTINGS_UPDATE_BLOCKED"], "{audit}");
    assert!(audit["data"][0]["role"].is_null(), "{audit}");
    let (ok, _, err) = run(tradeops_on(dir.path(), &url), &["token", "revoke", "--name", "ghost"]);
    assert!(!ok && err.contains("No active token named \"ghost\""), "{err}");

    let (ok, secret, err) =
        run(tradeops_on(dir.path(), &url), &["token", "create", "--name", "night-ops", "--role", "operator"]);
    assert!(ok, "{err}");
    until_status(&client, &base, secret.trim(), 200).await;
    let (ok, _, err) = run(tradeops_on(dir.path(), &url), &["token", "revoke", "--name", "night-ops"]);
    assert!(ok, "{err}");
    // Stopped first: the service records when tokens were last used as it stops.
    assert!(terminate(&mut child).success());
    let (ok, list, err) = run(tradeops_on(dir.path(), &url), &["token", "list"]);
    assert!(ok, "{err}");
    let lines: Vec<Vec<&str>> = list.lines().map(|l| l.split_whitespace().collect()).collect();
    assert_eq!(lines[0], vec!["NAME", "ROLE", "CREATED", "LAST", "USED", "REVOKED"], "{list}");
    assert_eq!(lines.len(), 3, "{list}");
    let (admin, night) = (&lines[1], &lines[2]);
    assert_eq!((admin[0], admin[1], admin[4]), ("admin", "admin", "-"), "active: {list}");
    assert!(admin[2].ends_with('Z') && admin[3].ends_with('Z'), "created and last used: {list}");
    assert_eq!((night[0], night[1], night.len()), ("night-ops", "operator", 5), "{list}");
    assert!(night[2].ends_with('Z') && night[4].ends_with('Z'), "created and revoked: {list}");
    assert!(!list.contains(secret.trim()) && !list.contains(ADMIN_TOKEN), "{list}");
    assert!(!list.contains(&tradeops_server::domain::tokens::hash_token(ADMIN_TOKEN)), "{list}");
    drop(db);
}
