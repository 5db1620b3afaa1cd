//! Notifications in a cluster (CONTRACT §13, with §10): "In a cluster one node sends; a failover
//! neither loses nor repeats a critical notification (record before sending)." Proven with real
//! `tradeops serve` processes on one PostgreSQL database, each configured (through a
//! configuration file) with the same webhook channel, pointed at a receiver run here that records
//! every POST's `X-Tradeops-Event-Id`, its body and the status it answered (switchable between
//! 500 and 200). Skips where no PostgreSQL is given, as the other cluster tests do.

use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::IntoResponse;
use reqwest::Method;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;

/// One POST the receiver was sent, and what it answered.
#[derive(Clone, Debug)]
struct Hit {
    path: String,
    event_id: String,
    body: Value,
    status: u16,
    at: Instant,
}

impl Hit {
    /// A `risk.state_changed` notice telling `HALTED`.
    fn halted(&self) -> bool {
        self.body["kind"] == "risk.state_changed" && self.body["data"]["state"] == "HALTED"
    }
}

/// The webhook's receiver: records each request and answers the status it is set to.
#[derive(Clone)]
struct Receiver {
    base: String,
    hits: Arc<Mutex<Vec<Hit>>>,
    answer: Arc<AtomicU16>,
}

impl Receiver {
    /// Listens on 127.0.0.1:0 on `rt` (a multi-threaded runtime: it answers while the test's
    /// thread waits on the nodes' output).
    fn start(rt: &tokio::runtime::Runtime) -> Receiver {
        let hits = Arc::new(Mutex::new(Vec::new()));
        let answer = Arc::new(AtomicU16::new(200));
        let (h, a) = (hits.clone(), answer.clone());
        let app = axum::Router::new().fallback(move |uri: Uri, headers: HeaderMap, body: Bytes| {
            let (hits, answer) = (h.clone(), a.clone());
            async move {
                let status = answer.load(Ordering::SeqCst);
                let event_id =
                    headers.get("x-tradeops-event-id").and_then(|v| v.to_str().ok()).unwrap_or_default().to_string();
                let body = serde_json::from_slice(&body).unwrap_or(Value::Null);
                let hit = Hit { path: uri.path().to_string(), event_id, body, status, at: Instant::now() };
                hits.lock().unwrap().push(hit);
                (StatusCode::from_u16(status).unwrap(), "{}").into_response()
            }
        });
        let listener = rt.block_on(tokio::net::TcpListener::bind("127.0.0.1:0")).unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        rt.spawn(async move { axum::serve(listener, app).await });
        Receiver { base, hits, answer }
    }

    fn answer(&self, status: u16) {
        self.answer.store(status, Ordering::SeqCst);
    }

    fn hits(&self) -> Vec<Hit> {
        self.hits.lock().unwrap().clone()
    }

    /// The receiver's log, one line a request, for a failure's message.
    fn log(&self) -> String {
        let hits = self.hits();
        let Some(first) = hits.first().map(|h| h.at) else { return "(no request)".into() };
        hits.iter()
            .map(|h| {
                format!(
                    "+{:>6} ms {} {} id={} kind={} state={}",
                    h.at.duration_since(first).as_millis(),
                    h.path,
                    h.status,
                    h.event_id,
                    h.body["kind"],
                    h.body["data"]["state"]
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Waits (up to `secs`) until `what` holds of the requests seen; them then.
    fn wait_until(&self, secs: u64, why: &str, what: impl Fn(&[Hit]) -> bool) -> Vec<Hit> {
        let deadline = Instant::now() + Duration::from_secs(secs);
        loop {
            let hits = self.hits();
            if what(&hits) {
                return hits;
            }
            assert!(Instant::now() < deadline, "{why}; the receiver saw:\n{}", self.log());
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// A `tradeops serve` process, killed when dropped (a failed assertion leaves none running).
struct Node {
    child: std::process::Child,
    lines: std::sync::mpsc::Receiver<String>,
    base: String,
}

impl Node {
    /// `tradeops serve` in DEMO on the database at `url`, with the configuration file `config`,
    /// once it listens (as `cluster.rs` starts its nodes).
    fn serve(dir: &std::path::Path, url: &str, config: &std::path::Path) -> Node {
        let mut child = crate::cli::tradeops(dir)
            .arg("serve")
            .env("TRADEOPS_DATABASE_URL", url)
            .env("TRADEOPS_CONFIG", config)
            .env("TRADEOPS_MODE", "DEMO")
            .env("TRADEOPS_ADMIN_TOKEN", crate::crash::CRASH_TOKEN)
            .env("TRADEOPS_RATE_LIMIT_BURST", "100000")
            .env("TRADEOPS_RATE_LIMIT_PER_SECOND", "100000")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let lines = crate::helpers::output_lines(&mut child);
        let mut node = Node { child, lines, base: String::new() };
        let first = node.lines.recv_timeout(Duration::from_secs(30)).expect("the node listens");
        node.base = first
            .split("listening on ")
            .nth(1)
            .and_then(|r| r.split_whitespace().next())
            .expect("an address")
            .to_string();
        node
    }

    /// Waits for its line saying it leads the engine.
    fn wait_leads(&self) {
        loop {
            let line = self.lines.recv_timeout(Duration::from_secs(30)).expect("the node leads the engine");
            if line.contains("leads the engine") {
                return;
            }
        }
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// `METHOD path` on `base` as the admin: the status, the `X-Tradeops-Leader` header, the body.
async fn call(
    client: &reqwest::Client,
    base: &str,
    method: Method,
    path: &str,
    body: Option<Value>,
) -> (u16, Option<String>, Value) {
    let mut req = client.request(method, format!("{base}{path}")).bearer_auth(crate::crash::CRASH_TOKEN);
    if let Some(body) = body {
        req = req.json(&body);
    }
    let answer = req.send().await.unwrap();
    let leader = answer.headers().get("x-tradeops-leader").and_then(|v| v.to_str().ok()).map(str::to_string);
    (answer.status().as_u16(), leader, answer.json().await.unwrap_or_default())
}

/// The `ops` channel's deliveries as `base` lists them.
fn deliveries(rt: &tokio::runtime::Runtime, client: &reqwest::Client, base: &str) -> Vec<Value> {
    let path = "/api/notifications/deliveries?channel=ops&limit=1000";
    let (status, _, body) = rt.block_on(call(client, base, Method::GET, path, None));
    assert_eq!(status, 200, "{body}");
    body["data"].as_array().unwrap_or_else(|| panic!("{body}")).clone()
}

/// The delivery of `event_id` among `rows`.
fn row<'a>(rows: &'a [Value], event_id: &str) -> Option<&'a Value> {
    rows.iter().find(|r| r["event_id"] == event_id)
}

/// Two nodes on one PostgreSQL database with the same webhook channel. While both run, only
/// the leader sends: a test through the follower reaches the receiver once. An emergency halt
/// (through the follower) is recorded before it is sent and retried by the leader while the
/// receiver answers 500. The leader killed with -9, the other node takes over and sends the
/// `HALTED` notice it finds recorded and unsent, once, after the takeover: no event id is ever
/// answered 200 twice, the halt is not told again under a new id, and the receiver's 200s are
/// exactly the deliveries the API lists `SENT`.
#[test]
fn a_failover_neither_loses_nor_repeats_a_critical_notification() {
    const TEST: &str = "a_failover_neither_loses_nor_repeats_a_critical_notification";
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let Some((_keep, url)) = rt.block_on(crate::cluster::postgres_db(TEST)) else { return };
    let receiver = Receiver::start(&rt);
    let dirs: Vec<_> = (0..2).map(|_| tempfile::tempdir().unwrap()).collect();
    // The same channel on both nodes, with the default events (risk.state_changed among them).
    let config = dirs[0].path().join("notify.toml");
    let toml =
        format!("[[notifications.channels]]\nkind = \"webhook\"\nname = \"ops\"\nurl = \"{}/hook\"\n", receiver.base);
    std::fs::write(&config, toml).unwrap();
    let client = reqwest::Client::new();

    let mut a = Node::serve(dirs[0].path(), &url, &config);
    a.wait_leads();
    let mut b = Node::serve(dirs[1].path(), &url, &config);
    // The second node follows the first (its `cluster` health row says so).
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (_, _, rows) = rt.block_on(call(&client, &b.base, Method::GET, "/api/health/components", None));
        let cluster = rows["data"].as_array().and_then(|r| r.iter().find(|c| c["name"] == "cluster")).cloned();
        let cluster = cluster.unwrap_or_default();
        if cluster["detail"]["role"] == "follower" && cluster["detail"]["leader_url"] == a.base.as_str() {
            break;
        }
        assert!(Instant::now() < deadline, "the second node follows the first: {rows}");
        std::thread::sleep(Duration::from_millis(100));
    }

    // While both run, one node sends: a test through the follower is carried out by the leader
    // and reaches the receiver once.
    let (status, leader, test) =
        rt.block_on(call(&client, &b.base, Method::POST, "/api/notifications/test", Some(json!({"channel": "ops"}))));
    assert_eq!((status, test["data"]["status"].as_str()), (200, Some("SENT")), "{test}");
    assert_eq!(leader.as_deref(), Some(a.base.as_str()), "the follower forwarded the test to the leader");
    let test_id = test["data"]["event_id"].as_str().expect("the test's event id").to_string();
    std::thread::sleep(Duration::from_millis(1500)); // time for a second sender to show itself
    let tests: Vec<Hit> = receiver.hits().into_iter().filter(|h| h.event_id == test_id).collect();
    assert_eq!(tests.len(), 1, "one request for the test; the receiver saw:\n{}", receiver.log());
    assert_eq!((tests[0].path.as_str(), tests[0].status, &tests[0].body["kind"]), ("/hook", 200, &json!("test")));

    // The receiver fails; an emergency halt through the follower. The leader records the
    // HALTED notice and retries it.
    receiver.answer(500);
    let (status, _, halt) = rt.block_on(call(
        &client,
        &b.base,
        Method::POST,
        "/api/risk/emergency-halt",
        Some(json!({"reason": "notify_cluster: halt before the failover"})),
    ));
    assert_eq!((status, &halt["ok"]), (200, &json!(true)), "{halt}");
    let hits = receiver.wait_until(30, "the HALTED notice is tried twice while the receiver fails", |hits| {
        hits.iter().filter(|h| h.halted()).count() >= 2
    });
    let halt_id = hits.iter().find(|h| h.halted()).unwrap().event_id.clone();
    assert!(!halt_id.is_empty(), "the webhook names the event: {}", receiver.log());
    assert!(hits.iter().filter(|h| h.event_id == halt_id).all(|h| h.status == 500 && h.halted()), "{}", receiver.log());
    // Recorded before sending, each failed attempt stored: the follower lists it RETRYING.
    let deadline = Instant::now() + Duration::from_secs(20);
    let recorded = loop {
        let tried = receiver.hits().iter().filter(|h| h.event_id == halt_id).count();
        let rows = deliveries(&rt, &client, &b.base);
        if let Some(r) = row(&rows, &halt_id).filter(|r| r["attempts"].as_u64() == Some(tried as u64)) {
            break r.clone();
        }
        assert!(Instant::now() < deadline, "the attempts are stored: {rows:?}\n{}", receiver.log());
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(
        (recorded["kind"].as_str(), recorded["status"].as_str(), recorded["sent_at"].as_str()),
        (Some("risk.state_changed"), Some("RETRYING"), None),
        "{recorded}"
    );

    // The leader killed with -9 (between two attempts, most likely); only then does the
    // receiver answer 200 again, so any 200 can only be the other node's.
    a.child.kill().unwrap();
    a.child.wait().unwrap();
    let killed_at = Instant::now();
    receiver.answer(200);
    b.wait_leads();

    receiver.wait_until(40, "the new leader sends the HALTED notice", |hits| {
        hits.iter().any(|h| h.event_id == halt_id && h.status == 200)
    });
    let deadline = Instant::now() + Duration::from_secs(20);
    let sent = loop {
        let rows = deliveries(&rt, &client, &b.base);
        if let Some(r) = row(&rows, &halt_id).filter(|r| r["status"] == "SENT") {
            break r.clone();
        }
        assert!(Instant::now() < deadline, "the delivery is SENT: {rows:?}\n{}", receiver.log());
        std::thread::sleep(Duration::from_millis(50));
    };
    std::thread::sleep(Duration::from_secs(2)); // time for a repeat to show itself

    let hits = receiver.hits();
    let log = receiver.log();
    let halts: Vec<&Hit> = hits.iter().filter(|h| h.event_id == halt_id).collect();
    let delivered: Vec<&&Hit> = halts.iter().filter(|h| h.status == 200).collect();
    assert_eq!(delivered.len(), 1, "the HALTED notice delivered once:\n{log}");
    assert!(delivered[0].at > killed_at, "delivered only after the leader was killed:\n{log}");
    assert!(halts.iter().filter(|h| h.at < killed_at).all(|h| h.status == 500), "{log}");
    let told: Vec<&Hit> = hits.iter().filter(|h| h.halted() && h.status == 200).collect();
    assert_eq!(told.len(), 1, "the halt is not told again under another id at the takeover:\n{log}");
    // Each request is an attempt stored: the killed leader's, then the new leader's, which goes
    // on from the stored count (one more request when the kill caught one in flight, unstored).
    let attempts = sent["attempts"].as_u64().unwrap() as usize;
    assert!(
        halts.len() == attempts || halts.len() == attempts + 1,
        "{} requests for {attempts} stored attempts: {sent}\n{log}",
        halts.len()
    );
    assert!(sent["sent_at"].is_string() && sent["error"].is_null(), "{sent}");

    // Over the whole test: no event id answered 200 twice, and the receiver's 200s are
    // exactly the deliveries listed SENT (in the rows and in the channel's count).
    let mut answered: BTreeMap<&str, usize> = BTreeMap::new();
    for hit in hits.iter().filter(|h| h.status == 200) {
        *answered.entry(hit.event_id.as_str()).or_default() += 1;
    }
    assert!(answered.values().all(|n| *n == 1), "an event delivered twice: {answered:?}\n{log}");
    let rows = deliveries(&rt, &client, &b.base);
    let mut listed: Vec<&str> =
        rows.iter().filter(|r| r["status"] == "SENT").map(|r| r["event_id"].as_str().unwrap()).collect();
    listed.sort_unstable();
    assert_eq!(listed, answered.keys().copied().collect::<Vec<_>>(), "{rows:?}\n{log}");
    assert!(listed.contains(&test_id.as_str()) && listed.contains(&halt_id.as_str()), "{rows:?}");
    let (_, _, channels) = rt.block_on(call(&client, &b.base, Method::GET, "/api/notifications/channels", None));
    let ops = channels["data"].as_array().and_then(|c| c.iter().find(|c| c["name"] == "ops")).cloned();
    assert_eq!(ops.as_ref().and_then(|c| c["sent"].as_u64()), Some(answered.len() as u64), "{channels}");

    crate::cli::terminate(&mut b.child);
}
