//! The broker adapters chosen by configuration (`[brokers]`, `TRADEOPS_EXECUTION_BROKER`,
//! `TRADEOPS_MARKET_DATA`): the choice reaches the health components and, once, the audit log;
//! `alpaca` and unknown adapters are refused at start with one clear line. And how the engine
//! runner answers an execution broker that refuses an order or cannot be reached.

use crate::cli::{terminate, tradeops};
use crate::helpers::{audit_rows, spawn_app, spawn_app_with, test_config, TestApp, TestDb, ADMIN_TOKEN, MARKET_START};
use serde_json::{json, Value};
use std::collections::VecDeque;
use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tradeops_brokers::paper::{PaperBroker, PaperConfig, PaperExecution};
use tradeops_brokers::{BrokerError, ExecutionBroker, MarketUpdate};
use tradeops_core::broker::{BrokerLookup, BrokerOpenOrder, BrokerReport};
use tradeops_core::orders::{ClientOrderId, Order};
use tradeops_core::settings::{ExecutionBrokerKind, MarketDataBrokerKind};
use tradeops_core::{Clock, ManualClock, Timestamp};
use tradeops_server::app::{Application, Overrides};
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
fn alpaca_without_credentials_and_unknown_adapters_are_refused_at_start() {
    let err = refused(&[("TRADEOPS_EXECUTION_BROKER", "alpaca")]);
    let line = err.lines().find(|l| l.contains("alpaca:")).unwrap_or_else(|| panic!("{err}"));
    assert!(line.contains("needs credentials") && line.contains("TRADEOPS_ALPACA_KEY_ID"), "{line}");

    let err = refused(&[("TRADEOPS_MARKET_DATA", "bloomberg")]);
    let line = err.lines().find(|l| l.contains("brokers.market_data")).unwrap_or_else(|| panic!("{err}"));
    assert!(line.contains("\"bloomberg\"") && line.contains("simulated"), "{line}");
}

/// The paper broker behind a venue that fails submits and cancels on cue (each queued answer is
/// used by one call; `None` passes it on) and logs the calls the runner makes. `lost_replies`
/// are errors returned *after* the order reached the venue: the reply was lost on the way back.
struct Flaky {
    paper: PaperExecution,
    submits: Mutex<VecDeque<Option<BrokerError>>>,
    lost_replies: Mutex<VecDeque<Option<BrokerError>>>,
    cancels: Mutex<VecDeque<Option<BrokerError>>>,
    calls: Mutex<Vec<String>>,
    /// Listing open orders fails as unavailable while set (the venue is down).
    open_orders_down: std::sync::atomic::AtomicBool,
}

impl Flaky {
    fn new(submits: Vec<Option<BrokerError>>) -> Arc<Flaky> {
        Flaky::with(submits, Vec::new(), Vec::new())
    }

    fn with(
        submits: Vec<Option<BrokerError>>,
        lost_replies: Vec<Option<BrokerError>>,
        cancels: Vec<Option<BrokerError>>,
    ) -> Arc<Flaky> {
        Arc::new(Flaky {
            paper: PaperExecution::new(PaperBroker::new(PaperConfig::default())),
            submits: Mutex::new(submits.into()),
            lost_replies: Mutex::new(lost_replies.into()),
            cancels: Mutex::new(cancels.into()),
            calls: Mutex::new(Vec::new()),
            open_orders_down: Default::default(),
        })
    }

    fn log(&self, call: String) {
        self.calls.lock().unwrap().push(call);
    }

    fn fail_open_orders(&self, down: bool) {
        self.open_orders_down.store(down, std::sync::atomic::Ordering::SeqCst);
    }

    /// Submits the venue was sent so far.
    fn submits_made(&self) -> usize {
        self.calls.lock().unwrap().iter().filter(|c| c.starts_with("submit ")).count()
    }

    /// The submits, cancels and lookups of order `id`, in order.
    fn calls_of(&self, id: &str) -> Vec<String> {
        self.calls.lock().unwrap().iter().filter(|c| c.ends_with(&format!(" {id}"))).cloned().collect()
    }
}

#[async_trait::async_trait]
impl ExecutionBroker for Flaky {
    fn name(&self) -> &'static str {
        "flaky"
    }

    async fn submit(&self, order: &Order, now: Timestamp) -> Result<(), BrokerError> {
        self.log(format!("submit {}", order.client_order_id));
        let answer = self.submits.lock().unwrap().pop_front().flatten();
        match answer {
            Some(error) => Err(error),
            None => {
                self.paper.submit(order, now).await?;
                let lost = self.lost_replies.lock().unwrap().pop_front().flatten();
                match lost {
                    Some(lost) => Err(lost),
                    None => Ok(()),
                }
            }
        }
    }

    async fn cancel(&self, id: &ClientOrderId, now: Timestamp) -> Result<(), BrokerError> {
        self.log(format!("cancel {id}"));
        let answer = self.cancels.lock().unwrap().pop_front().flatten();
        match answer {
            Some(error) => Err(error),
            None => self.paper.cancel(id, now).await,
        }
    }

    async fn lookup(&self, id: &ClientOrderId) -> Result<BrokerLookup, BrokerError> {
        self.log(format!("lookup {id}"));
        self.paper.lookup(id).await
    }

    async fn open_orders(&self) -> Result<Vec<BrokerOpenOrder>, BrokerError> {
        if self.open_orders_down.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(BrokerError::Unavailable { reason: "connection refused".into(), retry_after: None });
        }
        self.paper.open_orders().await
    }

    async fn poll(&self, now: Timestamp) -> Vec<BrokerReport> {
        self.paper.poll(now).await
    }

    async fn on_market(&self, update: &MarketUpdate<'_>) -> Vec<BrokerReport> {
        self.paper.on_market(update).await
    }

    async fn expire_day_orders(&self, now: Timestamp) -> Vec<BrokerReport> {
        self.paper.expire_day_orders(now).await
    }
}

/// The service trading through `venue`, stopped when the returned sender is dropped.
struct VenueApp {
    base: String,
    market: ManualClock,
    client: reqwest::Client,
    _db: TestDb,
    _stop: tokio::sync::oneshot::Sender<()>,
}

impl VenueApp {
    async fn start(venue: Arc<Flaky>) -> VenueApp {
        let (db, url) = TestDb::new().await;
        let market = ManualClock::new(tradeops_core::time::parse_ts(MARKET_START).unwrap());
        let overrides = Overrides {
            market_clock: Some(Arc::new(market.clone())),
            extra_routes: axum::Router::new(),
            ..Default::default()
        };
        let clock: Arc<dyn Clock> = Arc::new(tradeops_server::clock::SystemClock);
        let app =
            Application::build_with_execution(test_config(url), clock, overrides, venue).await.expect("app builds");
        let base = format!("http://{}", app.local_addr());
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(app.run_until_stopped(async {
            let _ = stopped.await;
        }));
        VenueApp { base, market, client: reqwest::Client::new(), _db: db, _stop: stop }
    }

    async fn call(&self, request: reqwest::RequestBuilder) -> Value {
        request.bearer_auth(ADMIN_TOKEN).send().await.unwrap().json().await.unwrap()
    }

    /// Places a market buy of one share of the simulated universe's first symbol; its id.
    async fn buy_one(&self) -> String {
        let (status, _, placed) = self.place_one().await;
        assert_eq!((status, &placed["data"]["status"]), (201, &json!("NEW")), "{placed}");
        placed["data"]["client_order_id"].as_str().unwrap().to_string()
    }

    /// Places a market buy of one share: the status, `Retry-After` and body of the answer.
    async fn place_one(&self) -> (u16, Option<String>, Value) {
        let sim = test_config(String::new()).sim;
        let universe = tradeops_sim::Universe::generate(sim.seed, sim.symbols as usize);
        let symbol = universe.symbols[0].symbol.to_string();
        let body = json!({"symbol": symbol, "side": "BUY", "quantity": 1});
        let answer = self
            .client
            .post(format!("{}/api/orders", self.base))
            .json(&body)
            .bearer_auth(ADMIN_TOKEN)
            .send()
            .await
            .unwrap();
        let status = answer.status().as_u16();
        let retry = answer.headers().get("retry-after").map(|v| v.to_str().unwrap().to_string());
        (status, retry, answer.json().await.unwrap())
    }

    /// Every order id the service lists.
    async fn order_ids(&self) -> Vec<String> {
        let list = self.call(self.client.get(format!("{}/api/orders?limit=100", self.base))).await;
        list["data"].as_array().unwrap().iter().map(|o| o["client_order_id"].as_str().unwrap().to_string()).collect()
    }

    /// Moves market time on until order `id` is in one of `statuses` (reconciliation runs
    /// every second of real time).
    async fn wait_for(&self, id: &str, statuses: &[&str]) -> Value {
        for _ in 0..200 {
            self.market.advance(chrono::Duration::milliseconds(100));
            let order = self.call(self.client.get(format!("{}/api/orders/{id}", self.base))).await;
            if statuses.iter().any(|s| order["data"]["status"] == *s) {
                return order["data"].clone();
            }
            tokio::time::sleep(Duration::from_millis(30)).await;
        }
        panic!("order {id} never reached {statuses:?}");
    }
}

/// CONTRACT §10: a broker that cannot be reached answers new orders with `BROKER_UNAVAILABLE`
/// (503, `Retry-After`). The order written ahead is looked up by client order id, never sent
/// again, and marked `REJECTED` when the venue never received it; while the venue is down a new
/// order is refused before anything is written; once it answers again, orders are taken.
#[tokio::test]
async fn an_unreachable_broker_answers_503_and_the_order_is_looked_up_never_resent() {
    let unavailable =
        BrokerError::Unavailable { reason: "503 from the venue".into(), retry_after: Some(Duration::from_secs(3)) };
    let venue = Flaky::new(vec![Some(unavailable)]);
    let app = VenueApp::start(venue.clone()).await;
    let (status, retry_after, refused) = app.place_one().await;
    assert_eq!((status, retry_after.as_deref()), (503, Some("3")), "{refused}");
    assert_eq!(refused["error"]["code"], "BROKER_UNAVAILABLE", "{refused}");
    let id = refused["error"]["detail"]["client_order_id"].as_str().expect("the order written ahead").to_string();
    assert!(refused["error"]["detail"]["reason"].as_str().unwrap().starts_with("503 from the venue"), "{refused}");

    let order = app.wait_for(&id, &["REJECTED", "ACCEPTED", "FILLED"]).await;
    assert_eq!(order["status"], "REJECTED", "{order}");
    let reason = order["reject_reason"].as_str().unwrap_or_default();
    assert!(reason.starts_with("never sent") && reason.contains("answered BROKER_UNAVAILABLE"), "{order}");
    assert_eq!(
        venue.calls_of(&id),
        vec![format!("submit {id}"), format!("lookup {id}")],
        "looked up by client order id, and never sent again: the operator was told it failed"
    );

    // The venue answered the lookup: it is back, and the next order is taken.
    let next = app.buy_one().await;
    app.wait_for(&next, &["ACCEPTED", "PARTIALLY_FILLED", "FILLED"]).await;
}

/// While the last call found the venue unavailable, a new order is refused at once: nothing
/// is written, nothing reaches the venue; health says why.
#[tokio::test]
async fn while_the_broker_is_down_new_orders_are_refused_before_anything_is_written() {
    let down = || BrokerError::Unavailable { reason: "connection refused".into(), retry_after: None };
    let venue = Flaky::new(vec![Some(down())]);
    venue.fail_open_orders(true);
    let app = VenueApp::start(venue.clone()).await;
    // Reconciliation (every second) finds the venue down too.
    let (status, _, first) = app.place_one().await;
    assert_eq!(status, 503, "{first}");
    let before = app.order_ids().await;
    let submits = venue.submits_made();
    let (status, retry_after, second) = app.place_one().await;
    assert_eq!((status, retry_after.as_deref()), (503, Some("5")), "{second}");
    assert_eq!(second["error"]["code"], "BROKER_UNAVAILABLE");
    assert!(second["error"]["detail"].get("client_order_id").is_none(), "nothing was written: {second}");
    assert_eq!(app.order_ids().await, before, "a refused order changes nothing");
    assert_eq!(venue.submits_made(), submits, "nothing reached the venue");
    let components = app.call(app.client.get(format!("{}/api/health/components", app.base))).await;
    let execution =
        components["data"].as_array().unwrap().iter().find(|c| c["name"] == "execution_broker").unwrap().clone();
    assert_eq!(execution["status"], "DEGRADED", "{execution}");
    assert!(execution["detail"]["reason"].as_str().unwrap().contains("connection refused"), "{execution}");

    // Recovery without a restart: the venue answers reconciliation again.
    venue.fail_open_orders(false);
    let mut last = Value::Null;
    for _ in 0..100 {
        app.market.advance(chrono::Duration::milliseconds(200));
        tokio::time::sleep(Duration::from_millis(50)).await;
        let (status, _, answer) = app.place_one().await;
        if status == 201 {
            return;
        }
        last = answer;
    }
    panic!("orders were never taken again once the venue answered: {last}");
}

#[tokio::test]
async fn an_order_the_broker_refuses_is_rejected_with_its_reason() {
    let refused = BrokerError::rejected("the venue does not trade this symbol");
    let venue = Flaky::new(vec![Some(refused)]);
    let app = VenueApp::start(venue.clone()).await;
    let id = app.buy_one().await;
    let order = app.wait_for(&id, &["REJECTED"]).await;
    assert_eq!(order["reject_reason"], "the venue does not trade this symbol", "{order}");
    assert_eq!(venue.calls_of(&id), vec![format!("submit {id}")], "a refusal is final: never sent again");
}

#[tokio::test]
async fn an_order_whose_reply_was_lost_is_never_sent_twice() {
    let lost = BrokerError::Unavailable { reason: "timed out reading the reply".into(), retry_after: None };
    let venue = Flaky::with(vec![None], vec![Some(lost)], Vec::new());
    let app = VenueApp::start(venue.clone()).await;
    let (status, _, answer) = app.place_one().await;
    assert_eq!(status, 503, "whether it landed is unknown when the answer is given: {answer}");
    let id = answer["error"]["detail"]["client_order_id"].as_str().unwrap().to_string();
    let order = app.wait_for(&id, &["ACCEPTED", "PARTIALLY_FILLED", "FILLED"]).await;
    assert!(order["broker_order_id"].is_string(), "the venue had it, and it works: {order}");
    for _ in 0..20 {
        app.market.advance(chrono::Duration::milliseconds(100));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let calls = venue.calls_of(&id);
    assert_eq!(
        calls.iter().filter(|c| c.starts_with("submit")).count(),
        1,
        "the venue had it: never sent again ({calls:?})"
    );
}

#[tokio::test]
async fn an_order_cancelled_before_the_broker_ever_got_it_is_never_sent() {
    let unavailable = BrokerError::Unavailable { reason: "connection refused".into(), retry_after: None };
    let venue = Flaky::with(vec![Some(unavailable)], Vec::new(), Vec::new());
    let app = VenueApp::start(venue.clone()).await;
    let (status, _, answer) = app.place_one().await;
    assert_eq!(status, 503, "{answer}");
    let id = answer["error"]["detail"]["client_order_id"].as_str().unwrap().to_string();
    let body = json!({"client_order_id": id});
    let cancelled = app.call(app.client.post(format!("{}/api/orders/cancel", app.base)).json(&body)).await;
    assert_eq!(cancelled["data"]["status"], "PENDING_CANCEL", "{cancelled}");
    let order = app.wait_for(&id, &["REJECTED", "CANCELED"]).await;
    assert_eq!(order["status"], "REJECTED", "{order}");
    let reason = order["reject_reason"].as_str().unwrap_or_default();
    assert!(reason.starts_with("never sent") && reason.contains("its cancel was requested"), "{order}");
    assert_eq!(
        venue.calls_of(&id),
        vec![format!("submit {id}"), format!("cancel {id}"), format!("lookup {id}")],
        "looked up, and not sent: the operator had cancelled it"
    );
}
