//! The broker adapters chosen by configuration (`[brokers]`, `TRADEOPS_EXECUTION_BROKER`,
//! `TRADEOPS_MARKET_DATA`): the choice reaches the health components and, once, the audit log;
//! `alpaca` and unknown adapters are refused at start with one clear line.

use crate::cli::{terminate, tradeops};
use crate::helpers::{audit_rows, spawn_app, spawn_app_with, TestApp, ADMIN_TOKEN};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::time::Duration;
use tradeops_core::settings::{ExecutionBrokerKind, MarketDataBrokerKind};
use tradeops_server::config::BrokersConfig;

/// `detail.broker` of the `data_broker` and `execution_broker` components.
fn brokers_of(components: &Value) -> (Value, Value) {
    let rows = components.as_array().expect("components");
    let broker = |name: &str| rows.iter().find(|c| c["name"] == name).expect(name)["detail"]["broker"].clone();
    (broker("data_broker"), broker("execution_broker"))
}

async fn choice_rows(app: &TestApp) -> Value {
    app.get("/api/audit?action=brokers.configured").await.assert_ok(200).clone()
}

#[tokio::test]
async fn the_default_adapters_are_named_in_health_and_not_audited() {
    let app = spawn_app().await;
    let components = app.get("/api/health/components").await;
    assert_eq!(brokers_of(components.data()), (json!("simulated"), json!("paper")));
    assert_eq!(choice_rows(&app).await, json!([]), "nothing was configured");
}

#[tokio::test]
async fn a_configured_choice_reaches_health_and_is_audited_once() {
    let app = spawn_app_with(|c| {
        c.brokers = BrokersConfig {
            execution: Some(ExecutionBrokerKind::Paper),
            market_data: Some(MarketDataBrokerKind::Simulated),
        }
    })
    .await;
    let components = app.get("/api/health/components").await;
    assert_eq!(brokers_of(components.data()), (json!("simulated"), json!("paper")));
    let rows = choice_rows(&app).await;
    assert_eq!(rows.as_array().unwrap().len(), 1, "{rows}");
    assert_eq!(rows[0]["actor"], "config");
    assert_eq!(rows[0]["target"], "brokers");
    assert_eq!(rows[0]["outcome"], "OK");
    assert_eq!(rows[0]["request"], json!({"execution": "paper", "market_data": "simulated"}));

    // The same choice at the next start is not recorded again.
    let app = app.restart().await;
    assert_eq!(choice_rows(&app).await.as_array().unwrap().len(), 1);
}

/// Runs `tradeops serve` in `dir` with `env`, asks for the health components and the audit
/// log, and stops it.
fn serve_and_read(dir: &std::path::Path, env: &[(&str, &str)]) -> (Value, Value) {
    let mut cmd = tradeops(dir);
    cmd.env("TRADEOPS_ADMIN_TOKEN", ADMIN_TOKEN);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.arg("serve").stdout(Stdio::piped()).stderr(Stdio::null()).spawn().unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut first).unwrap();
    let base = first.split("listening on ").nth(1).and_then(|r| r.split_whitespace().next()).expect("address");
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let read = |path: String| {
        rt.block_on(async {
            let client = reqwest::Client::builder().timeout(Duration::from_secs(10)).build().unwrap();
            let reply = client.get(path).bearer_auth(ADMIN_TOKEN).send().await.unwrap();
            reply.json::<Value>().await.unwrap()
        })
    };
    let components = read(format!("{base}/api/health/components"));
    let audit = read(format!("{base}/api/audit?action=brokers.configured"));
    assert!(terminate(&mut child).success());
    (components, audit)
}

#[test]
fn the_environment_and_the_config_file_choose_the_adapters() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("brokers.toml"), "[brokers]\nmarket_data = \"simulated\"\n").unwrap();
    let (components, audit) =
        serve_and_read(dir.path(), &[("TRADEOPS_CONFIG", "brokers.toml"), ("TRADEOPS_EXECUTION_BROKER", "paper")]);
    assert_eq!(brokers_of(&components["data"]), (json!("simulated"), json!("paper")), "{components}");
    assert_eq!(audit_rows(&audit), vec!["brokers.configured brokers OK"], "{audit}");
    assert_eq!(audit["data"][0]["request"], json!({"execution": "paper", "market_data": "simulated"}));
}

/// `tradeops serve` with `env`: it must not start; what it printed on stderr.
fn refused(env: &[(&str, &str)]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = tradeops(dir.path());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.arg("serve").output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn alpaca_and_unknown_adapters_are_refused_at_start() {
    let err = refused(&[("TRADEOPS_EXECUTION_BROKER", "alpaca")]);
    let line = err.lines().find(|l| l.contains("brokers.execution")).unwrap_or_else(|| panic!("{err}"));
    assert!(line.contains("Alpaca adapter is not built yet") && line.contains("paper"), "{line}");

    let err = refused(&[("TRADEOPS_MARKET_DATA", "bloomberg")]);
    let line = err.lines().find(|l| l.contains("brokers.market_data")).unwrap_or_else(|| panic!("{err}"));
    assert!(line.contains("\"bloomberg\"") && line.contains("simulated"), "{line}");
}
