//! One channel's delivery (CONTRACT §13): its queue, bounded for routine notices (folded into a
//! digest when full) and never dropping a critical one; its own task sending in order, keeping
//! the service's rate limit and a `429`'s `retry_after`, retrying with backoff; each delivery's
//! record kept up to date. Nothing here is on the trading path: the engine publishes events,
//! the notifier's intake records and queues them, and this task alone waits on the channel.

use super::message::Notice;
use super::wire::{NtfyMessage, Outcome, Wire};
use crate::config::{ChannelConfig, ChannelTarget};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{watch, Notify};
use tokio::time::Instant;
use tradeops_core::time::format_ts;
use tradeops_core::{Clock, Timestamp};
use tradeops_store::Database;

/// Routine notices a channel queues before folding the next ones into a digest.
pub const ROUTINE_QUEUE: usize = 32;
/// Attempts of a routine notice (or a test) that failed before it is `FAILED`; as many again
/// answered `429`. A critical notice is tried until it is delivered or refused for good
/// (CONTRACT §13: never dropped).
const ROUTINE_ATTEMPTS: u32 = 5;
/// The longest pause between attempts.
const MAX_BACKOFF: Duration = Duration::from_secs(60);
/// The longest `retry_after` obeyed: a channel asking for more is asked again after this.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(600);
/// Delivery outcomes kept in memory for `POST /api/notifications/test` to wait on.
const OUTCOMES_KEPT: usize = 64;

/// A notice waiting to be sent on this channel.
#[derive(Clone, Debug)]
pub struct Pending {
    /// Its delivery row (`None`: it could not be recorded — the database was unavailable —
    /// and is sent all the same).
    pub delivery_id: Option<i64>,
    pub notice: Arc<Notice>,
    pub attempts: u32,
    /// Of `attempts`, those answered `429`.
    pub throttled: u32,
    /// Requests of [`steps`] already answered `Sent` (a retry resumes after them: a chat that
    /// got the first part of a split message is not sent it again).
    pub done: usize,
}

/// A delivery as the API shows it (`GET /api/notifications/deliveries`).
#[derive(Clone, Debug, PartialEq)]
pub struct DeliveryState {
    pub event_id: String,
    pub kind: String,
    pub channel: String,
    pub status: &'static str,
    pub attempts: u32,
    pub created_at: Option<Timestamp>,
    pub sent_at: Option<Timestamp>,
    pub error: Option<String>,
}

/// What `GET /api/notifications/channels` shows of a channel.
#[derive(Clone, Debug, Default)]
pub struct Stats {
    pub sent: u64,
    pub failed: u64,
    /// Routine notices folded into a digest.
    pub dropped: u64,
    pub last_sent_at: Option<Timestamp>,
    pub last_error: Option<String>,
    /// `OK`, `RETRYING` or `FAILING`.
    pub state: &'static str,
    /// When a `RETRYING` channel tries again.
    pub retry_at: Option<Timestamp>,
}

/// Routine notices folded while the queue was full, told in one message once it has room.
#[derive(Default)]
struct Digest {
    first_event: Option<String>,
    by_kind: BTreeMap<String, u32>,
    symbols: Vec<String>,
    mode: String,
    link: Option<String>,
}

#[derive(Default)]
struct Queues {
    critical: VecDeque<Pending>,
    routine: VecDeque<Pending>,
    digest: Digest,
    stats: Stats,
    outcomes: VecDeque<DeliveryState>,
}

/// What a push did with a notice.
#[derive(Debug, PartialEq)]
pub enum Queued {
    Queued,
    /// Folded into the digest: its record is to be marked `FOLDED`.
    Folded,
}

pub struct Channel {
    pub config: ChannelConfig,
    queues: Mutex<Queues>,
    wake: Notify,
    /// Bumped at each delivery outcome (tests of the channel wait on it).
    changed: watch::Sender<u64>,
}

impl Channel {
    pub fn new(config: ChannelConfig) -> Arc<Channel> {
        let queues = Queues { stats: Stats { state: "OK", ..Stats::default() }, ..Queues::default() };
        Arc::new(Channel { config, queues: Mutex::new(queues), wake: Notify::new(), changed: watch::channel(0).0 })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Queues> {
        self.queues.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queues `pending`: a critical notice (or a test) always; a routine one while fewer than
    /// [`ROUTINE_QUEUE`] wait, else folded into the digest.
    pub fn push(&self, pending: Pending) -> Queued {
        let mut q = self.lock();
        let queued = if pending.notice.critical || pending.notice.kind == "test" {
            q.critical.push_back(pending);
            Queued::Queued
        } else if q.routine.len() < ROUTINE_QUEUE {
            q.routine.push_back(pending);
            Queued::Queued
        } else {
            drop(q);
            self.fold(&pending.notice);
            return Queued::Folded;
        };
        drop(q);
        self.wake.notify_one();
        queued
    }

    /// Folds a routine notice into the digest, sent once the queue has drained.
    pub fn fold(&self, n: &Notice) {
        let mut q = self.lock();
        let digest = &mut q.digest;
        digest.first_event.get_or_insert_with(|| n.event_id.clone());
        *digest.by_kind.entry(n.kind.clone()).or_default() += 1;
        if let Some(symbol) = &n.symbol {
            if !digest.symbols.contains(symbol) {
                digest.symbols.push(symbol.clone());
            }
        }
        digest.mode = n.mode.clone();
        digest.link = digest.link.take().or_else(|| n.link.clone());
        q.stats.dropped += 1;
        drop(q);
        self.wake.notify_one();
    }

    /// Puts an unfinished notice back at the head of its queue.
    fn put_back(&self, pending: Pending, critical: bool) {
        let mut q = self.lock();
        match critical {
            true => q.critical.push_front(pending),
            false => q.routine.push_front(pending),
        }
    }

    /// Whether a routine `notice` pushed now would be folded into the digest (its record is
    /// then written `FOLDED` at once: one write, not two, in the floods that fill a queue).
    pub fn folds(&self, notice: &Notice) -> bool {
        !(notice.critical || notice.kind == "test") && self.lock().routine.len() >= ROUTINE_QUEUE
    }

    /// Notices waiting.
    pub fn queued(&self) -> usize {
        let q = self.lock();
        q.critical.len() + q.routine.len()
    }

    pub fn stats(&self) -> Stats {
        self.lock().stats.clone()
    }

    /// Counts already stored (a restart or a new leader goes on from them).
    pub fn seed_stats(
        &self,
        sent: u64,
        failed: u64,
        dropped: u64,
        last_sent_at: Option<Timestamp>,
        last_error: Option<String>,
    ) {
        let mut q = self.lock();
        q.stats.sent += sent;
        q.stats.failed += failed;
        q.stats.dropped += dropped;
        q.stats.last_sent_at = q.stats.last_sent_at.max(last_sent_at);
        if q.stats.last_error.is_none() {
            q.stats.last_error = last_error;
        }
    }

    /// The latest outcome of `event_id` on this channel, while kept in memory.
    pub fn outcome(&self, event_id: &str) -> Option<DeliveryState> {
        self.lock().outcomes.iter().rev().find(|o| o.event_id == event_id).cloned()
    }

    /// Waits until `event_id` is `SENT` or `FAILED`, or `wait` passed; its state then.
    pub async fn settle(&self, event_id: &str, wait: Duration) -> Option<DeliveryState> {
        let mut changed = self.changed.subscribe();
        let deadline = Instant::now() + wait;
        loop {
            let now = self.outcome(event_id);
            if now.as_ref().is_some_and(|o| o.status != "RETRYING") {
                return now;
            }
            if tokio::time::timeout_at(deadline, changed.changed()).await.is_err() {
                return now;
            }
        }
    }

    fn record_outcome(&self, state: DeliveryState) {
        let mut q = self.lock();
        if q.outcomes.len() == OUTCOMES_KEPT {
            q.outcomes.pop_front();
        }
        q.outcomes.push_back(state);
        drop(q);
        self.changed.send_modify(|n| *n += 1);
    }

    /// The next notice to send: critical ones first, then routine ones, then the digest of what
    /// was folded once the routine queue is empty.
    fn next(&self, clock: &dyn Clock) -> Option<(Pending, bool)> {
        let mut q = self.lock();
        if let Some(p) = q.critical.pop_front() {
            return Some((p, true));
        }
        if let Some(p) = q.routine.pop_front() {
            return Some((p, false));
        }
        let digest = std::mem::take(&mut q.digest);
        let first = digest.first_event?;
        let total: u32 = digest.by_kind.values().sum();
        let kinds = digest.by_kind.iter().map(|(k, n)| format!("{n} {k}")).collect::<Vec<_>>().join(", ");
        let mut symbols = digest.symbols.iter().take(12).cloned().collect::<Vec<_>>().join(", ");
        if digest.symbols.len() > 12 {
            symbols.push_str(", …");
        }
        let label = digest.mode.parse().map(super::message::mode_label).unwrap_or(digest.mode.as_str());
        let notice = Notice {
            event_id: format!("digest-{first}"),
            kind: "digest".into(),
            critical: false,
            mode: digest.mode.clone(),
            title: format!("{label} · {total} more notices, folded while this channel was busy"),
            text: if symbols.is_empty() { kinds.clone() } else { format!("{kinds}\n{symbols}") },
            link: digest.link.clone(),
            symbol: None,
            at: format_ts(&clock.now()),
            data: serde_json::json!({"folded": digest.by_kind, "symbols": digest.symbols}),
        };
        Some((Pending { delivery_id: None, notice: Arc::new(notice), attempts: 0, throttled: 0, done: 0 }, false))
    }

    fn set_state(&self, state: &'static str, retry_at: Option<Timestamp>, error: Option<String>) {
        let mut q = self.lock();
        q.stats.state = state;
        q.stats.retry_at = retry_at;
        if error.is_some() {
            q.stats.last_error = error;
        }
    }
}

/// A sliding window per lane (a Telegram chat; one lane for the other kinds): at most `max`
/// requests in any `per`.
struct Limiter {
    max: usize,
    per: Duration,
    lanes: HashMap<i64, VecDeque<Instant>>,
}

impl Limiter {
    /// The channel's published limits (CONTRACT §13): Telegram one message a second per chat
    /// (groups, whose ids are negative, 20 a minute), Discord 5 per 2 seconds per webhook,
    /// Slack one a second; ntfy 5 per 5 seconds; webhooks 10 a second.
    fn of(target: &ChannelTarget) -> Limiter {
        let (max, per) = match target {
            ChannelTarget::Telegram { .. } => (1, Duration::from_secs(1)),
            ChannelTarget::Discord { .. } => (5, Duration::from_secs(2)),
            ChannelTarget::Slack { .. } => (1, Duration::from_secs(1)),
            ChannelTarget::Ntfy { .. } => (5, Duration::from_secs(5)),
            ChannelTarget::Webhook { .. } => (10, Duration::from_secs(1)),
        };
        Limiter { max, per, lanes: HashMap::new() }
    }

    /// Waits until a request on `lane` keeps the limit, and counts it.
    async fn take(&mut self, lane: i64, telegram_group: bool) {
        let (max, per) = if telegram_group { (20, Duration::from_secs(60)) } else { (self.max, self.per) };
        let sent = self.lanes.entry(lane).or_default();
        loop {
            let now = Instant::now();
            while sent.front().is_some_and(|at| now.duration_since(*at) >= per) {
                sent.pop_front();
            }
            match sent.front() {
                Some(oldest) if sent.len() >= max => tokio::time::sleep_until(*oldest + per).await,
                _ => break,
            }
        }
        sent.push_back(Instant::now());
    }
}

/// One request of a delivery.
enum Step {
    Telegram { chat_id: i64, text: String },
    Discord(String),
    Slack(String),
    Ntfy,
    Webhook(Vec<u8>),
}

/// Telegram's longest message.
pub const TELEGRAM_LIMIT: usize = 4096;
/// Discord's longest message.
pub const DISCORD_LIMIT: usize = 2000;

/// The requests that deliver `notice` on `target`, in order: a message per chat (Telegram),
/// split where it is longer than the service takes.
fn steps(target: &ChannelTarget, notice: &Notice) -> Vec<Step> {
    match target {
        ChannelTarget::Telegram { chat_ids, .. } => {
            let parts = split(&notice.plain(), TELEGRAM_LIMIT);
            chat_ids
                .iter()
                .flat_map(|chat| parts.iter().map(move |text| Step::Telegram { chat_id: *chat, text: text.clone() }))
                .collect()
        }
        ChannelTarget::Discord { .. } => {
            let text = format!("**{}**\n{}", notice.title, notice.plain_body());
            split(&text, DISCORD_LIMIT).into_iter().map(Step::Discord).collect()
        }
        // The wire escapes Slack's `&`, `<` and `>`: a bare link is still a link.
        ChannelTarget::Slack { .. } => vec![Step::Slack(format!("*{}*\n{}", notice.title, notice.plain_body()))],
        ChannelTarget::Ntfy { .. } => vec![Step::Ntfy],
        ChannelTarget::Webhook { .. } => {
            vec![Step::Webhook(serde_json::to_vec(notice).expect("a notice serialises"))]
        }
    }
}

/// `text` in pieces of at most `limit` characters (counted in UTF-16 units, as Telegram counts
/// them), cut at a line break where one is near, never inside a character.
pub fn split(text: &str, limit: usize) -> Vec<String> {
    let mut parts = Vec::new();
    let mut rest = text;
    while rest.encode_utf16().count() > limit {
        let mut units = 0;
        let mut cut = 0;
        for (i, c) in rest.char_indices() {
            if units + c.len_utf16() > limit {
                break;
            }
            units += c.len_utf16();
            cut = i + c.len_utf8();
        }
        // A line break in the last quarter of the piece is a better place to cut.
        if let Some(nl) = rest[..cut].rfind('\n').filter(|nl| *nl >= cut * 3 / 4) {
            cut = nl + 1;
        }
        parts.push(rest[..cut].trim_end_matches('\n').to_string());
        rest = &rest[cut..];
    }
    if !rest.is_empty() || parts.is_empty() {
        parts.push(rest.to_string());
    }
    parts
}

/// What the channel's task is given.
pub struct Sender {
    pub channel: Arc<Channel>,
    /// The engine's term this node holds: nothing is sent once it has passed.
    pub term: Arc<crate::cluster::Term>,
    pub wire: Arc<Wire>,
    /// Fenced to the engine's term: a deposed leader's records are refused.
    pub db: Database,
    pub clock: Arc<dyn Clock>,
}

impl Sender {
    /// Sends the channel's notices until the service stops.
    pub async fn run(self) {
        let mut limiter = Limiter::of(&self.channel.config.target);
        loop {
            let Some((mut pending, critical)) = self.channel.next(self.clock.as_ref()) else {
                self.channel.wake.notified().await;
                continue;
            };
            if pending.notice.kind == "digest" && pending.delivery_id.is_none() {
                pending.delivery_id = self.record_digest(&pending.notice).await;
            }
            if let Delivered::TermOver = self.deliver(&mut limiter, pending, critical).await {
                tracing::info!(channel = %self.channel.config.name, "this node no longer leads: it sends no more notifications");
                return;
            }
        }
    }

    async fn record_digest(&self, notice: &Notice) -> Option<i64> {
        let row = tradeops_store::NewDelivery {
            event_id: notice.event_id.clone(),
            channel: self.channel.config.name.clone(),
            kind: notice.kind.clone(),
            critical: false,
            status: "RETRYING".into(),
            message: serde_json::to_string(notice).expect("a notice serialises"),
            created_at: self.clock.now().timestamp_millis(),
        };
        match self.db.record_deliveries(&[row]).await {
            Ok(ids) => ids.first().map(|(id, _)| *id),
            Err(e) => {
                tracing::warn!(channel = %self.channel.config.name, error = %e, "could not record a digest; sending it all the same");
                None
            }
        }
    }

    /// Sends one notice to the end: `SENT`, or `FAILED` after its attempts (or at once when the
    /// service refuses it for good).
    async fn deliver(&self, limiter: &mut Limiter, mut pending: Pending, critical: bool) -> Delivered {
        let name = self.channel.config.name.clone();
        let steps = steps(&self.channel.config.target, &pending.notice);
        // Chats that refused it for good (a bot removed from one chat must not keep the others
        // from the message): their remaining parts are skipped.
        let mut refused: Vec<(i64, String)> = Vec::new();
        loop {
            let mut failure = None;
            while pending.done < steps.len() {
                let step = &steps[pending.done];
                let (lane, group) = match step {
                    Step::Telegram { chat_id, .. } => (*chat_id, *chat_id < 0),
                    _ => (0, false),
                };
                if refused.iter().any(|(chat, _)| *chat == lane) {
                    pending.done += 1;
                    continue;
                }
                limiter.take(lane, group).await;
                // A node whose term has passed sends nothing more: the next leader sends what
                // is left (its record says so).
                // Within the lease's window only (as every venue call): a renewal answered late
                // waits here; a term taken over ends this sender.
                loop {
                    match self.term.valid(Instant::now()) {
                        Ok(_) => break,
                        Err(crate::cluster::NotValid::Over) => {
                            self.channel.put_back(pending, critical);
                            return Delivered::TermOver;
                        }
                        Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
                    }
                }
                match self.send(step, &pending.notice).await {
                    Outcome::Sent => pending.done += 1,
                    Outcome::Failed(error) if matches!(step, Step::Telegram { .. }) => {
                        refused.push((lane, error));
                        pending.done += 1;
                    }
                    other => {
                        failure = Some(other);
                        break;
                    }
                }
            }
            pending.attempts += 1;
            let state = |status: &'static str, sent_at: Option<Timestamp>, error: Option<String>, attempts: u32| {
                DeliveryState {
                    event_id: pending.notice.event_id.clone(),
                    kind: pending.notice.kind.clone(),
                    channel: name.clone(),
                    status,
                    attempts,
                    created_at: None,
                    sent_at,
                    error,
                }
            };
            let failure = match failure {
                None if refused.is_empty() => {
                    let now = self.clock.now();
                    self.update(&pending, "SENT", Some(now), None).await;
                    {
                        let mut q = self.channel.lock();
                        q.stats.sent += 1;
                        q.stats.last_sent_at = Some(now);
                    }
                    self.channel.set_state("OK", None, None);
                    self.channel.record_outcome(state("SENT", Some(now), None, pending.attempts));
                    return Delivered::Done;
                }
                None => {
                    let chats = refused.iter().map(|(chat, e)| format!("chat {chat}: {e}")).collect::<Vec<_>>();
                    Outcome::Failed(chats.join("; "))
                }
                Some(failure) => failure,
            };
            let persistent = pending.notice.critical;
            let (pause, error) = match failure {
                // A `429` is waited out (up to a bound); a routine notice as many times again as
                // it may fail, a critical one always.
                Outcome::RetryAfter(pause, error) if persistent || pending.throttled < ROUTINE_ATTEMPTS => {
                    pending.throttled += 1;
                    (Some(pause.min(MAX_RETRY_AFTER)), error)
                }
                Outcome::Retry(error) if persistent || pending.attempts - pending.throttled < ROUTINE_ATTEMPTS => {
                    (Some(backoff(pending.attempts - pending.throttled)), error)
                }
                Outcome::RetryAfter(_, error) | Outcome::Retry(error) | Outcome::Failed(error) => (None, error),
                Outcome::Sent => unreachable!("a failure"),
            };
            match pause {
                Some(pause) => {
                    let retry_at = self.clock.now() + chrono::Duration::milliseconds(pause.as_millis() as i64);
                    tracing::info!(channel = %name, attempts = pending.attempts, error = %error, "notification will be retried");
                    self.update(&pending, "RETRYING", None, Some(&error)).await;
                    self.channel.set_state("RETRYING", Some(retry_at), Some(error.clone()));
                    self.channel.record_outcome(state("RETRYING", None, Some(error), pending.attempts));
                    tokio::time::sleep(pause).await;
                }
                None => {
                    tracing::warn!(channel = %name, attempts = pending.attempts, error = %error, "notification failed");
                    self.update(&pending, "FAILED", None, Some(&error)).await;
                    self.channel.lock().stats.failed += 1;
                    self.channel.set_state("FAILING", None, Some(error.clone()));
                    self.channel.record_outcome(state("FAILED", None, Some(error), pending.attempts));
                    return Delivered::Done;
                }
            }
        }
    }

    async fn send(&self, step: &Step, notice: &Notice) -> Outcome {
        let wire = &self.wire;
        match (&self.channel.config.target, step) {
            (ChannelTarget::Telegram { bot_token, api_url, .. }, Step::Telegram { chat_id, text }) => {
                wire.telegram_send(api_url, bot_token.expose(), *chat_id, text, None).await
            }
            (ChannelTarget::Discord { webhook_url }, Step::Discord(text)) => {
                wire.discord(webhook_url.expose(), text).await
            }
            (ChannelTarget::Slack { webhook_url }, Step::Slack(text)) => wire.slack(webhook_url.expose(), text).await,
            (ChannelTarget::Ntfy { url, token }, Step::Ntfy) => {
                let tags: &[&str] = if notice.critical { &["rotating_light"] } else { &[] };
                let priority = match (notice.critical, notice.mode.as_str()) {
                    (true, "LIVE") => 5,
                    (true, _) => 4,
                    _ => 3,
                };
                let message = NtfyMessage {
                    title: &notice.title,
                    body: &notice.text,
                    priority,
                    tags,
                    click: notice.link.as_deref(),
                };
                wire.ntfy(url.expose(), token.as_ref().map(|t| t.expose()), &message).await
            }
            (ChannelTarget::Webhook { url, secret }, Step::Webhook(body)) => {
                wire.webhook(url.expose(), secret.as_ref().map(|s| s.expose()), &notice.event_id, body).await
            }
            _ => Outcome::Failed("a step of another channel kind".into()),
        }
    }

    async fn update(&self, pending: &Pending, status: &str, sent_at: Option<Timestamp>, error: Option<&str>) {
        let Some(id) = pending.delivery_id else { return };
        let sent_at = sent_at.map(|t| t.timestamp_millis());
        if let Err(e) = self.db.update_delivery(id, status, pending.attempts as i64, sent_at, error).await {
            tracing::warn!(channel = %self.channel.config.name, error = %e, "could not store a notification's delivery");
        }
    }
}

/// How a delivery ended on this node.
enum Delivered {
    /// Sent, or given up.
    Done,
    /// This node's term has passed: the notice is back in its queue, for the record's sake,
    /// and the next leader sends it.
    TermOver,
}

/// The pause before attempt `attempts + 1`: 1 s, 2 s, 4 s, … up to a minute.
fn backoff(attempts: u32) -> Duration {
    Duration::from_secs(1u64 << attempts.saturating_sub(1).min(6)).min(MAX_BACKOFF)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Telegram takes 4,096 characters: a longer message goes in parts, none longer, nothing
    /// lost, cut at a line break where one is near.
    #[test]
    fn long_messages_are_split_not_lost() {
        let line = "x".repeat(99);
        let text = vec![line.as_str(); 100].join("\n");
        let parts = split(&text, TELEGRAM_LIMIT);
        assert_eq!(parts.len(), 3);
        assert!(parts.iter().all(|p| p.encode_utf16().count() <= TELEGRAM_LIMIT));
        assert_eq!(parts.join("\n"), text, "nothing lost");
        let emoji = "🔴".repeat(3000);
        let parts = split(&emoji, TELEGRAM_LIMIT);
        assert!(parts.iter().all(|p| p.encode_utf16().count() <= TELEGRAM_LIMIT));
        assert_eq!(parts.concat(), emoji);
        assert_eq!(split("short", TELEGRAM_LIMIT), ["short"]);
    }

    fn notice(id: usize, kind: &str, critical: bool) -> Pending {
        let notice = Notice {
            event_id: id.to_string(),
            kind: kind.into(),
            critical,
            mode: "LIVE".into(),
            title: format!("n{id}"),
            text: String::new(),
            link: None,
            symbol: Some(format!("S{}", id % 3)),
            at: String::new(),
            data: serde_json::Value::Null,
        };
        Pending { delivery_id: Some(id as i64), notice: Arc::new(notice), attempts: 0, throttled: 0, done: 0 }
    }

    /// A full queue folds routine notices into one digest, sent once the queue has drained;
    /// critical ones are never folded and go first.
    #[test]
    fn a_full_queue_folds_routine_notices_and_never_a_critical_one() {
        let config = crate::config::ChannelConfig {
            name: "c".into(),
            events: super::super::kinds::NoticeKind::DEFAULT.to_vec(),
            target: ChannelTarget::Slack { webhook_url: crate::config::Secret::new("http://x") },
        };
        let channel = Channel::new(config);
        let clock = tradeops_core::ManualClock::new(tradeops_core::time::parse_ts("2026-11-20T21:00:00Z").unwrap());
        for i in 0..ROUTINE_QUEUE + 10 {
            let queued = channel.push(notice(i, "order.filled", false));
            assert_eq!(queued, if i < ROUTINE_QUEUE { Queued::Queued } else { Queued::Folded }, "notice {i}");
        }
        for i in 100..150 {
            assert_eq!(channel.push(notice(i, "position.stopped_out", true)), Queued::Queued, "critical {i}");
        }
        assert_eq!(channel.queued(), ROUTINE_QUEUE + 50);
        assert_eq!(channel.stats().dropped, 10);
        let order: Vec<(String, bool)> = std::iter::from_fn(|| channel.next(&clock))
            .map(|(p, critical)| (p.notice.event_id.clone(), critical))
            .collect();
        assert_eq!(order.len(), 50 + ROUTINE_QUEUE + 1, "every queued notice and one digest");
        assert!(order[..50].iter().all(|(_, critical)| *critical), "critical first");
        let (digest, _) = order.last().unwrap();
        assert_eq!(digest, &format!("digest-{ROUTINE_QUEUE}"));
        assert!(channel.next(&clock).is_none(), "the digest is sent once");
    }

    /// Discord's 5 per 2 seconds is a window, not a bucket: the sixth post waits for the first to
    /// leave it; a Telegram group gets 20 a minute.
    #[tokio::test(start_paused = true)]
    async fn the_limits_are_windows() {
        let discord = ChannelTarget::Discord { webhook_url: crate::config::Secret::new("http://x") };
        let mut limiter = Limiter::of(&discord);
        let start = Instant::now();
        let mut at = Vec::new();
        for _ in 0..11 {
            limiter.take(0, false).await;
            at.push(start.elapsed().as_millis() / 100);
        }
        assert_eq!(at, [0, 0, 0, 0, 0, 20, 20, 20, 20, 20, 40], "tenths of a second");
        let telegram = ChannelTarget::Telegram {
            bot_token: crate::config::Secret::new("1:x"),
            chat_ids: vec![-5],
            api_url: String::new(),
            commands_role: None,
        };
        let mut limiter = Limiter::of(&telegram);
        let start = Instant::now();
        for _ in 0..21 {
            limiter.take(-5, true).await;
        }
        assert_eq!(start.elapsed().as_secs(), 60, "the 21st message to a group waits a minute");
        let start = Instant::now();
        limiter.take(7, false).await;
        limiter.take(7, false).await;
        assert_eq!(start.elapsed().as_secs(), 1, "a private chat: one a second");
    }

    #[test]
    fn backoff_doubles_up_to_a_minute() {
        let pauses: Vec<u64> = (1..=9).map(|a| backoff(a).as_secs()).collect();
        assert_eq!(pauses, [1, 2, 4, 8, 16, 32, 60, 60, 60]);
    }
}
