//! Partitions, Jepsen-style: schedules of faults over a cluster of real `tradeops serve`
//! processes on a PostgreSQL of the test's own ([`OwnPostgres`]), trading a broker stand-in
//! ([`StandIn`], Alpaca's wire format) while orders, cancels and halts flow through every node.
//! Each process reaches PostgreSQL and the broker through its own [`Link`] (a TCP proxy that
//! cuts, delays and heals), and enters the stand-in through its own door, so the stand-in's
//! record of trading requests says which process sent each.
//!
//! Faults: `kill -9` of the leader, `SIGSTOP` past the lease then `SIGCONT`, the leader's link
//! to PostgreSQL black-holed (with an emergency halt sent to a follower, or straight to the cut
//! leader, meanwhile), the leader's link to the broker black-holed, the followers' link to the
//! leader black-holed (each node is advertised to the others through a link of its own; with a
//! halt through a follower meanwhile), PostgreSQL restarted. After every schedule, with
//! every link healed and every process running, the invariants are checked from the stand-in's
//! own record ([`check`]):
//! - no two terms' requests interleave: once a process's trading request follows another
//!   process's, the earlier one sends nothing more (a process holds one term at most: it exits
//!   when its term is taken);
//! - no sell exceeds the shares held when it arrives (no accidental short);
//! - every order a node acknowledged (201) exists exactly once at the broker and in the
//!   database, and every order of ours at the broker is in the database;
//! - a halt a node accepted holds: the leader is `HALTED` and the broker ends flat; a halt
//!   answered durable (`persisted: true`) also has no buy arriving after its answer (one a cut
//!   leader answered `persisted: false` is handed to the next leader once its database link
//!   heals, so the new leader may trade until then);
//! - the books balance: the leader's positions and cash are the broker's.
//!
//! A short fixed set of schedules runs in CI's PostgreSQL pass; a longer randomized run:
//! `TRADEOPS_PARTITION_SCHEDULES=200 TRADEOPS_PARTITION_SEED=7 cargo test -p tradeops-server
//! --test api partitions_random -- --nocapture` (docs/operating.md, "Partitions").

use crate::alpaca::{StandIn, KEY_ID, SECRET};
use crate::crash::CRASH_TOKEN;
use crate::outage::OwnPostgres;
use crate::proxy::{Link, LinkState};
use rust_decimal::Decimal;
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::process::{Child, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;

/// One step of a schedule.
#[derive(Clone, Debug)]
enum Step {
    /// Orders and cancels only, for this long.
    Trade(Duration),
    /// The leader killed (`kill -9`); restarted as a follower once another leads.
    KillLeader,
    /// The leader paused (`SIGSTOP`) this long, then resumed.
    PauseLeader(Duration),
    /// The leader's link to PostgreSQL black-holed this long, with an emergency halt sent
    /// right after the cut through `halt`, if any.
    CutLeaderDb { hold: Duration, halt: Via },
    /// The followers' link to the leader black-holed this long (they cannot forward to it);
    /// `halt`: an emergency halt sent to a follower meanwhile.
    CutLeaderInbound { hold: Duration, halt: bool },
    /// The leader's link to the broker black-holed this long.
    CutLeaderBroker(Duration),
    /// The leader's link to PostgreSQL reset (connections closed, refused) this long.
    ResetLeaderDb(Duration),
    /// PostgreSQL stopped and started again.
    RestartDb,
    /// An emergency halt sent to a follower (the leader when alone).
    Halt,
}

/// Where a step's emergency halt is sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Via {
    Nobody,
    Follower,
    Leader,
}

/// A small deterministic generator (xorshift64*), so a seed names a schedule.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn secs(&mut self, from: u64, to: u64) -> Duration {
        Duration::from_millis(from * 1000 + self.below((to - from) * 1000 + 1))
    }
}

/// Whether `step` sends an emergency halt (nothing after it would trade).
fn halts(step: &Step) -> bool {
    matches!(
        step,
        Step::Halt
            | Step::CutLeaderDb { halt: Via::Follower | Via::Leader, .. }
            | Step::CutLeaderInbound { halt: true, .. }
    )
}

/// A random schedule: 2–3 nodes, 2–4 faults separated by trading, a halt last in one of four.
fn random_schedule(rng: &mut Rng) -> (usize, Vec<Step>) {
    let nodes = 2 + rng.below(2) as usize;
    let mut steps = vec![Step::Trade(rng.secs(1, 2))];
    for _ in 0..2 + rng.below(3) {
        steps.push(match rng.below(8) {
            0 => Step::KillLeader,
            1 => Step::PauseLeader(rng.secs(4, 6)),
            2 => {
                let halt = match rng.below(6) {
                    0 => Via::Follower,
                    1 => Via::Leader,
                    _ => Via::Nobody,
                };
                Step::CutLeaderDb { hold: rng.secs(2, 6), halt }
            }
            3 => Step::CutLeaderBroker(rng.secs(1, 4)),
            4 => Step::ResetLeaderDb(rng.secs(1, 4)),
            5 => Step::RestartDb,
            6 => Step::CutLeaderInbound { hold: rng.secs(1, 4), halt: rng.below(3) == 0 },
            _ => Step::Trade(rng.secs(1, 3)),
        });
        steps.push(Step::Trade(rng.secs(1, 2)));
        if steps.iter().any(halts) {
            break;
        }
    }
    if rng.below(4) == 0 && !steps.iter().any(halts) {
        steps.push(Step::Halt);
        steps.push(Step::Trade(rng.secs(1, 2)));
    }
    (nodes, steps)
}

/// One `tradeops serve` process and its links.
struct Node {
    name: String,
    child: Child,
    lines: std::sync::mpsc::Receiver<String>,
    base: String,
    db: Link,
    broker: Link,
    /// How the other nodes reach it (the address it advertises).
    inbound: Link,
    _dir: tempfile::TempDir,
    /// It said it leads the engine.
    leads: bool,
    paused: bool,
}

impl Node {
    fn signal(&self, sig: &str) {
        let done = std::process::Command::new("kill").args([sig, &self.child.id().to_string()]).status().unwrap();
        assert!(done.success(), "kill {sig} {}", self.name);
    }

    /// Reads what it printed since; whether it is still running.
    fn poll(&mut self) -> bool {
        while let Ok(line) = self.lines.try_recv() {
            if line.contains("leads the engine") {
                self.leads = true;
            }
        }
        self.child.try_wait().unwrap().is_none()
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        if self.paused {
            let _ = std::process::Command::new("kill").args(["-CONT", &self.child.id().to_string()]).status();
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What the workload and the steps recorded, for the checks.
#[derive(Default)]
struct Record {
    /// Orders a node answered 201: their client order ids.
    acknowledged: BTreeSet<String>,
    /// Resting orders acknowledged, to cancel.
    resting: Vec<String>,
    /// For each halt a node accepted (200): the stand-in's count of trading requests then, and
    /// whether it was answered durable (`persisted`).
    halts: Vec<(usize, bool)>,
    /// Replies by status, for the report.
    statuses: BTreeMap<u16, usize>,
    /// After a durable halt sent to a leader cut from the database: the node that took over
    /// and its `trading_state` read at once, from its takeover on.
    takeovers: Vec<(String, String)>,
}

/// A cluster under test.
struct Cluster {
    /// First: the processes stop before their database does.
    nodes: Vec<Node>,
    pg: OwnPostgres,
    alpaca: Arc<StandIn>,
    started: usize,
    symbols: Vec<(String, Decimal)>,
    record: Arc<Mutex<Record>>,
    client: reqwest::Client,
}

impl Cluster {
    async fn start(pg: OwnPostgres, size: usize) -> Cluster {
        let clock: Arc<dyn tradeops_core::Clock> = Arc::new(tradeops_server::clock::SystemClock);
        let alpaca = Arc::new(StandIn::start_on(Decimal::from(100_000), clock).await);
        let client = reqwest::Client::builder().timeout(Duration::from_secs(5)).build().unwrap();
        let mut cluster =
            Cluster { pg, alpaca, nodes: Vec::new(), started: 0, symbols: Vec::new(), record: Arc::default(), client };
        cluster.spawn().await;
        cluster.wait_leader().await;
        for _ in 1..size {
            cluster.spawn().await;
        }
        let base = cluster.nodes[0].base.clone();
        let found = crate::crash::radar_symbols(&cluster.client, &base, 3).await;
        for (symbol, price) in found.into_iter().take(3) {
            let price = Decimal::try_from(price).unwrap().round_dp(2);
            cluster.alpaca.set_price(&symbol, price);
            cluster.symbols.push((symbol, price));
        }
        cluster
    }

    /// Starts one more process (a new door, new links), waits until it listens.
    async fn spawn(&mut self) {
        self.started += 1;
        let name = format!("p{}", self.started);
        let door = self.alpaca.door(&name).await;
        let (db, db_url) = Link::to_url(&self.pg.url());
        let (broker, broker_url) = Link::to_url(&door);
        // Its own address is chosen here, so the one it advertises can be a link to it.
        let bind = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
        let inbound = Link::start(bind);
        let dir = tempfile::tempdir().unwrap();
        let mut child = crate::cli::tradeops(dir.path())
            .arg("serve")
            .env("TRADEOPS_DATABASE_URL", &db_url)
            .env("TRADEOPS_BIND", bind.to_string())
            .env("TRADEOPS_ADVERTISE_URL", format!("http://{}", inbound.addr))
            .env("TRADEOPS_MODE", "PAPER")
            .env("TRADEOPS_EXECUTION_BROKER", "alpaca")
            .env("TRADEOPS_ALPACA_KEY_ID", KEY_ID)
            .env("TRADEOPS_ALPACA_SECRET_KEY", SECRET)
            .env("TRADEOPS_ALPACA_TRADING_URL", &broker_url)
            .env("TRADEOPS_ADMIN_TOKEN", CRASH_TOKEN)
            .env("TRADEOPS_RATE_LIMIT_BURST", "100000")
            .env("TRADEOPS_RATE_LIMIT_PER_SECOND", "100000")
            .stdout(Stdio::piped())
            .stderr(match std::env::var("TRADEOPS_PARTITION_LOGS") {
                // Each process's log in that folder, to read what a failed schedule did.
                Ok(logs) => Stdio::from(std::fs::File::create(format!("{logs}/{name}.log")).unwrap()),
                Err(_) => Stdio::null(),
            })
            .spawn()
            .unwrap();
        let lines = crate::helpers::output_lines(&mut child);
        let first = wait_line(&lines, Duration::from_secs(60)).await.unwrap_or_else(|| panic!("{name} listens"));
        let base = first
            .split("listening on ")
            .nth(1)
            .and_then(|r| r.split_whitespace().next())
            .unwrap_or_else(|| panic!("{name}: {first}"))
            .to_string();
        self.nodes.push(Node { name, child, lines, base, db, broker, inbound, _dir: dir, leads: false, paused: false });
    }

    /// The running process that leads, waiting (up to a minute) for one to.
    async fn wait_leader(&mut self) -> usize {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            self.reap();
            if let Some(i) = self.nodes.iter().position(|n| n.leads) {
                return i;
            }
            assert!(Instant::now() < deadline, "no process leads the engine");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Forgets processes that exited (a leader whose term was taken exits), starting a new one
    /// in each one's place.
    fn reap(&mut self) -> usize {
        let before = self.nodes.len();
        self.nodes.retain_mut(|n| n.poll());
        before - self.nodes.len()
    }

    async fn replace_exited(&mut self, size: usize) {
        self.reap();
        while self.nodes.len() < size {
            self.spawn().await;
        }
    }

    fn bases(&self) -> Vec<String> {
        self.nodes.iter().filter(|n| !n.paused).map(|n| n.base.clone()).collect()
    }

    /// A follower's address (the leader's when alone).
    fn follower(&self, leader: usize) -> String {
        let i = (0..self.nodes.len()).find(|i| *i != leader && !self.nodes[*i].paused).unwrap_or(leader);
        self.nodes[i].base.clone()
    }

    async fn halt(&self, base: &str, why: &str) {
        let reply = post(&self.client, base, "/api/risk/emergency-halt", json!({"reason": why})).await;
        eprintln!("partitions: halt through {base}: {reply:?}");
        if let Some((200, body)) = reply {
            assert_eq!(body["data"]["halted"], true, "{body}");
            let durable = body["data"]["persisted"] == true;
            let now = self.alpaca.sent().len();
            self.record.lock().unwrap().halts.push((now, durable));
        }
    }

    /// For `hold`, while `cut` (the leader cut from the database) may have its term taken over:
    /// the moment another node says it leads, its `trading_state` is read (through its own
    /// address) and recorded: a halt answered durable must hold there from its takeover on.
    async fn watch_takeover(&mut self, cut: usize, hold: Duration) {
        let until = Instant::now() + hold;
        let mut read = false;
        while Instant::now() < until {
            for node in self.nodes.iter_mut() {
                node.poll();
            }
            let next = (0..self.nodes.len()).find(|j| *j != cut && self.nodes[*j].leads);
            if let (Some(j), false) = (next, read) {
                let state = get(&self.client, &self.nodes[j].base, "/api/risk/state").await;
                let trading = state.map_or("no answer".to_string(), |(status, body)| {
                    body["data"]["trading_state"].as_str().map_or(format!("{status} {body}"), str::to_string)
                });
                eprintln!("partitions: {} took over from the cut leader: {trading}", self.nodes[j].name);
                self.record.lock().unwrap().takeovers.push((self.nodes[j].name.clone(), trading));
                read = true;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    async fn run(&mut self, size: usize, steps: &[Step]) {
        let stop = Arc::new(AtomicBool::new(false));
        let bases = Arc::new(Mutex::new(self.bases()));
        let workload = tokio::spawn(workload(
            self.client.clone(),
            bases.clone(),
            self.symbols.clone(),
            self.record.clone(),
            stop.clone(),
        ));
        for step in steps {
            *bases.lock().unwrap() = self.bases();
            eprintln!("partitions: {step:?}");
            let leader = self.wait_leader().await;
            match step {
                Step::Trade(d) => tokio::time::sleep(*d).await,
                Step::KillLeader => {
                    self.nodes[leader].child.kill().unwrap();
                    let _ = self.nodes[leader].child.wait();
                    self.reap();
                    self.wait_leader().await;
                }
                Step::PauseLeader(d) => {
                    self.nodes[leader].signal("-STOP");
                    self.nodes[leader].paused = true;
                    tokio::time::sleep(*d).await;
                    self.nodes[leader].signal("-CONT");
                    self.nodes[leader].paused = false;
                }
                Step::CutLeaderDb { hold, halt } => {
                    self.nodes[leader].db.set(LinkState::BlackHole);
                    match halt {
                        Via::Nobody => {}
                        Via::Follower => {
                            let follower = self.follower(leader);
                            self.halt(&follower, "the leader is cut from the database").await;
                        }
                        Via::Leader => {
                            let base = self.nodes[leader].base.clone();
                            self.halt(&base, "sent to the leader cut from the database").await;
                        }
                    }
                    let durable = self.record.lock().unwrap().halts.last().is_some_and(|(_, durable)| *durable);
                    if *halt == Via::Leader && durable {
                        self.watch_takeover(leader, *hold).await;
                    } else {
                        tokio::time::sleep(*hold).await;
                    }
                    self.nodes[leader].db.set(LinkState::Open);
                }
                Step::CutLeaderInbound { hold, halt } => {
                    self.nodes[leader].inbound.set(LinkState::BlackHole);
                    if *halt {
                        let follower = self.follower(leader);
                        self.halt(&follower, "the followers are cut from the leader").await;
                    }
                    tokio::time::sleep(*hold).await;
                    self.nodes[leader].inbound.set(LinkState::Open);
                }
                Step::CutLeaderBroker(d) => {
                    self.nodes[leader].broker.set(LinkState::BlackHole);
                    tokio::time::sleep(*d).await;
                    self.nodes[leader].broker.set(LinkState::Open);
                }
                Step::ResetLeaderDb(d) => {
                    self.nodes[leader].db.set(LinkState::Reset);
                    tokio::time::sleep(*d).await;
                    self.nodes[leader].db.set(LinkState::Open);
                }
                Step::RestartDb => {
                    let pg = &self.pg;
                    tokio::task::block_in_place(|| {
                        pg.ctl_stop();
                        std::thread::sleep(Duration::from_millis(500));
                        pg.ctl_start();
                    });
                }
                Step::Halt => {
                    let follower = self.follower(leader);
                    self.halt(&follower, "a halt in the schedule").await;
                }
            }
            // A process whose term was taken exits: started again, it follows.
            let deadline = Instant::now() + Duration::from_secs(2);
            while Instant::now() < deadline {
                self.reap();
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            self.replace_exited(size).await;
        }
        stop.store(true, Ordering::Release);
        let _ = workload.await;
    }
}

/// Orders, resting orders and their cancels through any running node, until `stop`.
async fn workload(
    client: reqwest::Client,
    bases: Arc<Mutex<Vec<String>>>,
    symbols: Vec<(String, Decimal)>,
    record: Arc<Mutex<Record>>,
    stop: Arc<AtomicBool>,
) {
    let mut rng = Rng::new(symbols.len() as u64 + 11);
    while !stop.load(Ordering::Acquire) {
        let bases = bases.lock().unwrap().clone();
        if bases.is_empty() {
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        }
        let base = &bases[rng.below(bases.len() as u64) as usize];
        let (symbol, price) = &symbols[rng.below(symbols.len() as u64) as usize];
        let quantity = 1 + rng.below(3);
        let (path, body, resting) = match rng.below(6) {
            0..=2 => ("/api/orders", json!({"symbol": symbol, "side": "BUY", "quantity": quantity}), false),
            3 => {
                let limit = (price * Decimal::new(5, 1)).round_dp(2);
                let body = json!({"symbol": symbol, "side": "BUY", "quantity": 1, "order_type": "LIMIT",
                    "limit_price": limit.to_string().parse::<f64>().unwrap(), "time_in_force": "GTC"});
                ("/api/orders", body, true)
            }
            4 => ("/api/orders", json!({"symbol": symbol, "side": "SELL", "quantity": 1}), false),
            _ => {
                let id = record.lock().unwrap().resting.pop();
                match id {
                    Some(id) => ("/api/orders/cancel", json!({"client_order_id": id}), false),
                    None => continue,
                }
            }
        };
        if let Some((status, body)) = post(&client, base, path, body).await {
            let mut r = record.lock().unwrap();
            *r.statuses.entry(status).or_default() += 1;
            if status == 201 {
                let id = body["data"]["client_order_id"].as_str().unwrap().to_string();
                r.acknowledged.insert(id.clone());
                if resting {
                    r.resting.push(id);
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn post(client: &reqwest::Client, base: &str, path: &str, body: Value) -> Option<(u16, Value)> {
    let answer = client.post(format!("{base}{path}")).bearer_auth(CRASH_TOKEN).json(&body).send().await.ok()?;
    let status = answer.status().as_u16();
    Some((status, answer.json().await.unwrap_or_default()))
}

async fn get(client: &reqwest::Client, base: &str, path: &str) -> Option<(u16, Value)> {
    let answer = client.get(format!("{base}{path}")).bearer_auth(CRASH_TOKEN).send().await.ok()?;
    let status = answer.status().as_u16();
    Some((status, answer.json().await.unwrap_or_default()))
}

async fn wait_line(lines: &std::sync::mpsc::Receiver<String>, within: Duration) -> Option<String> {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if let Ok(line) = lines.try_recv() {
            return Some(line);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    None
}

/// Shares per symbol, and cash in cents.
type Books = (BTreeMap<String, i64>, i64);

fn cents(d: Decimal) -> i64 {
    (d * Decimal::from(100)).round().try_into().unwrap()
}

async fn service_books(client: &reqwest::Client, base: &str) -> Option<Books> {
    let (200, positions) = get(client, base, "/api/positions").await? else { return None };
    let held = positions["data"]
        .as_array()?
        .iter()
        .filter(|p| p["quantity"].as_i64() != Some(0))
        .map(|p| (p["symbol"].as_str().unwrap().to_string(), p["quantity"].as_i64().unwrap()))
        .collect();
    let (200, account) = get(client, base, "/api/account/summary").await? else { return None };
    let cash = Decimal::try_from(account["data"]["cash"].as_f64()?).ok()?;
    Some((held, cents(cash)))
}

fn broker_books(alpaca: &StandIn) -> Books {
    let held = alpaca.positions().into_iter().map(|(s, (q, _))| (s, q)).collect();
    (held, cents(alpaca.cash()))
}

/// The invariants (see the module's doc), once every link is healed and a leader runs.
async fn check(cluster: &mut Cluster, label: &str) -> Record {
    for node in &cluster.nodes {
        node.db.set(LinkState::Open);
        node.broker.set(LinkState::Open);
        node.inbound.set(LinkState::Open);
    }
    let leader = cluster.wait_leader().await;
    let base = cluster.nodes[leader].base.clone();
    let client = cluster.client.clone();
    let record = std::mem::take(&mut *cluster.record.lock().unwrap());
    let halted = !record.halts.is_empty();

    // The books balance (and, after a halt, the broker ends flat), waited for: the leader may
    // still be recording what an earlier term left at the broker.
    let deadline = Instant::now() + Duration::from_secs(60);
    let (ours, theirs) = loop {
        let ours = service_books(&client, &base).await;
        let theirs = broker_books(&cluster.alpaca);
        let flat = !halted || (theirs.0.is_empty() && cluster.alpaca.open_orders().is_empty());
        if ours.as_ref() == Some(&theirs) && flat {
            break (ours, theirs);
        }
        if Instant::now() >= deadline {
            break (ours, theirs);
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    let sent = cluster.alpaca.sent();
    eprintln!(
        "partitions [{label}]: {} trading requests from {} processes, {} orders acknowledged, replies {:?}, halts {}",
        sent.len(),
        sent.iter().map(|s| &s.door).collect::<BTreeSet<_>>().len(),
        record.acknowledged.len(),
        record.statuses,
        record.halts.len()
    );
    assert_eq!(
        ours.as_ref(),
        Some(&theirs),
        "[{label}] the books balance: the leader's (shares, cash) vs the broker's"
    );
    if halted {
        assert!(theirs.0.is_empty(), "[{label}] after the halt the broker is flat: {:?}", theirs.0);
    }

    // No two terms' requests interleave.
    let mut runs: Vec<&str> = Vec::new();
    for s in &sent {
        if runs.last() != Some(&s.door.as_str()) {
            assert!(
                !runs.contains(&s.door.as_str()),
                "[{label}] {} sent again after {} took over: {runs:?} then {s:?}",
                s.door,
                runs.last().unwrap()
            );
            runs.push(&s.door);
        }
    }
    // No sell exceeds the shares held.
    for s in sent.iter().filter(|s| s.kind == "submit" && s.side == "sell") {
        let (id, qty, symbol, held) = (&s.client_order_id, s.qty, &s.symbol, s.held);
        assert!(qty <= held, "[{label}] sell {id} of {qty} {symbol} with {held} held, from {}", s.door);
    }
    // Every acknowledged order once at the broker and in the database; every order of ours at
    // the broker in the database.
    let at_broker: BTreeMap<String, usize> = cluster.alpaca.orders().iter().fold(BTreeMap::new(), |mut m, o| {
        *m.entry(o["client_order_id"].as_str().unwrap_or_default().to_string()).or_default() += 1;
        m
    });
    for id in &record.acknowledged {
        assert_eq!(at_broker.get(id), Some(&1), "[{label}] acknowledged order {id} once at the broker");
    }
    for id in at_broker.keys().filter(|id| id.starts_with("to-")) {
        let found = get(&client, &base, &format!("/api/orders/{id}")).await;
        assert_eq!(found.map(|f| f.0), Some(200), "[{label}] order {id} at the broker is in the database");
    }
    // A halt accepted holds; after one answered durable, no buy arrives.
    if halted {
        let state = get(&client, &base, "/api/risk/state").await.expect("the risk state");
        assert_eq!(state.1["data"]["trading_state"], "HALTED", "[{label}] the halt holds: {}", state.1);
    }
    for (node, trading) in &record.takeovers {
        assert_eq!(trading, "HALTED", "[{label}] {node} took over from the cut leader HALTED, the halt a peer kept");
    }
    if let Some(first) = record.halts.iter().filter(|(_, durable)| *durable).map(|(at, _)| *at).min() {
        let buys: Vec<_> = sent[first..].iter().filter(|s| s.kind == "submit" && s.side == "buy").collect();
        assert!(buys.is_empty(), "[{label}] no buy after the durable halt was answered: {buys:?}");
    }
    record
}

/// Runs one schedule on a fresh cluster; what it recorded (`None`: skipped).
async fn schedule(test: &str, label: &str, size: usize, steps: &[Step]) -> Option<Record> {
    if std::env::var("TRADEOPS_TEST_DATABASE_URL").is_err() {
        crate::helpers::skip(
            test,
            "the partition schedules run in the PostgreSQL pass (TRADEOPS_TEST_DATABASE_URL is not set)",
            crate::helpers::REQUIRE_SERVICES,
        );
        return None;
    }
    let pg = OwnPostgres::start(test)?;
    let started = Instant::now();
    let mut cluster = Cluster::start(pg, size).await;
    cluster.run(size, steps).await;
    let record = check(&mut cluster, label).await;
    eprintln!("partitions [{label}]: {size} nodes, {steps:?}: passed in {:?}", started.elapsed());
    Some(record)
}

/// A partition: the leader's link to PostgreSQL black-holed while it still reaches the
/// broker, and an emergency halt sent to the follower meanwhile — the halt holds through the
/// takeover, and what the cut leader sent (the halt's exits) is recorded by the new one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partitions_a_leader_cut_from_the_database_and_a_halt_through_the_follower() {
    let steps = [
        Step::Trade(Duration::from_secs(3)),
        Step::CutLeaderDb { hold: Duration::from_secs(6), halt: Via::Follower },
        Step::Trade(Duration::from_secs(1)),
    ];
    schedule("partitions_a_leader_cut_from_the_database_and_a_halt_through_the_follower", "db-cut+halt", 2, &steps)
        .await;
}

/// A halt sent straight to a leader cut from PostgreSQL acts at the broker in memory and is
/// handed to the follower, which stores it for whoever leads next: answered durable
/// (`persisted: true`, `kept_by` the follower), no buy arrives after it, and the follower that
/// takes the term over is `HALTED` from its takeover on, without waiting for the cut leader's
/// link to heal. Before that, the followers' link to the leader is cut while a halt-free
/// workload flows through them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partitions_a_halt_sent_to_a_leader_cut_from_the_database_is_handed_over() {
    let steps = [
        Step::Trade(Duration::from_secs(2)),
        Step::CutLeaderInbound { hold: Duration::from_secs(3), halt: false },
        Step::Trade(Duration::from_secs(1)),
        Step::CutLeaderDb { hold: Duration::from_secs(6), halt: Via::Leader },
        Step::Trade(Duration::from_secs(1)),
    ];
    let test = "partitions_a_halt_sent_to_a_leader_cut_from_the_database_is_handed_over";
    let Some(record) = schedule(test, "leader-halt", 2, &steps).await else { return };
    assert_eq!(record.halts.iter().map(|(_, durable)| *durable).collect::<Vec<_>>(), [true], "answered durable");
    assert_eq!(
        record.takeovers.len(),
        1,
        "the follower took over during the cut, and was read: {:?}",
        record.takeovers
    );
}

/// Kill -9, a pause past the lease, the leader's broker link cut, PostgreSQL restarted, the
/// leader's database link reset: orders flow throughout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partitions_kill_pause_broker_cut_and_a_database_restart() {
    let steps = [
        Step::Trade(Duration::from_secs(2)),
        Step::KillLeader,
        Step::Trade(Duration::from_secs(1)),
        Step::PauseLeader(Duration::from_secs(5)),
        Step::Trade(Duration::from_secs(1)),
        Step::CutLeaderBroker(Duration::from_secs(3)),
        Step::RestartDb,
        Step::Trade(Duration::from_secs(1)),
        Step::ResetLeaderDb(Duration::from_secs(2)),
        Step::Trade(Duration::from_secs(1)),
    ];
    schedule("partitions_kill_pause_broker_cut_and_a_database_restart", "mixed", 2, &steps).await;
}

/// The randomized run, behind `TRADEOPS_PARTITION_SCHEDULES` (how many schedules) and
/// `TRADEOPS_PARTITION_SEED` (the first schedule's seed; schedule `i` uses `seed + i`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partitions_random() {
    let Some(count) = std::env::var("TRADEOPS_PARTITION_SCHEDULES").ok().and_then(|n| n.parse::<u64>().ok()) else {
        eprintln!("partitions_random: set TRADEOPS_PARTITION_SCHEDULES (and TRADEOPS_PARTITION_SEED) to run it");
        return;
    };
    let seed: u64 = std::env::var("TRADEOPS_PARTITION_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(1);
    let started = Instant::now();
    for i in 0..count {
        let mut rng = Rng::new(seed + i);
        let (size, steps) = random_schedule(&mut rng);
        let label = format!("seed {}", seed + i);
        if schedule("partitions_random", &label, size, &steps).await.is_none() {
            return;
        }
        eprintln!("partitions_random: {} of {count} schedules passed in {:?}", i + 1, started.elapsed());
    }
}
