//! Notifications to the operator's phone and team chat (CONTRACT §13): Telegram, Discord, Slack,
//! ntfy and signed webhooks, with Telegram commands.
//!
//! - [`kinds`] (the configuration's): the notice kinds, which are critical, the default set.
//! - [`message`]: what each event becomes, read in one glance on a phone.
//! - [`channel`]: a channel's bounded queue, rate limit, retries and digest, on its own task.
//! - [`wire`]: each service's HTTP wire format, one request and its classified answer.
//! - [`telegram`]: `/status`, `/positions`, `/pnl` and a confirmed `/halt` from the chats.
//!
//! The [`Notifier`] runs with the engine's term (the one node that leads sends, and polls
//! Telegram): its intake reads the event bus (never slowing a publisher: it only falls behind and
//! catches up from the bus's buffer), turns events into notices, records each delivery before
//! queueing it (on a handle fenced to the term, so a deposed leader records and sends nothing),
//! and on start queues what an earlier term recorded and did not send — a failover loses nothing
//! recorded and repeats nothing sent.

pub mod channel;
pub mod message;
pub mod telegram;
pub mod wire;

/// The notice kinds are the configuration's (`events = [...]`).
pub use crate::config::notice_kinds as kinds;

use crate::config::NotificationsConfig;
use crate::domain::settings::SettingsService;
use crate::engine::EngineHandle;
use crate::events::{Event, EventBus, StoredEvent};
use channel::{Channel, DeliveryState, Pending, Queued, Sender, Stats};
use message::{dollars, mode_label, Notice, Tracker};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::broadcast::error::RecvError;
use tokio::task::JoinHandle;
use tradeops_core::calendar::{MarketCalendar, SessionPhase, SessionView, TradingDay};
use tradeops_core::time::format_ts;
use tradeops_core::Clock;
use tradeops_store::{AuditRepository, Database, DeliveryRecord, NewDelivery, StoreError, TradingRepository};

/// How long a request to a channel may take before it counts as unanswered.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// How long `POST /api/notifications/test` waits for the test's outcome.
pub const TEST_WAIT: Duration = Duration::from_secs(5);
/// Deliveries an earlier term left unsent that a new one queues at start.
const RESUMED_AT_MOST: i64 = 1000;
/// A delivery left unsent longer than this after its event is given up rather than sent late.
const RESUMED_WITHIN: Duration = Duration::from_secs(6 * 3600);

/// Why a notification request was refused.
#[derive(Debug, thiserror::Error)]
pub enum NotifyError {
    #[error("no notification channel is named {0:?}")]
    UnknownChannel(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// A channel as `GET /api/notifications/channels` shows it.
#[derive(Clone, Debug)]
pub struct ChannelView {
    pub name: String,
    pub kind: &'static str,
    pub events: Vec<kinds::NoticeKind>,
    pub queued: usize,
    pub stats: Stats,
    pub commands_role: Option<tradeops_core::Role>,
}

/// What the notifier reads of the service.
pub struct NotifierDeps {
    pub events: Arc<EventBus>,
    pub engine: EngineHandle,
    pub settings: Arc<SettingsService>,
    /// The audit log as actions write it (Telegram commands are audited like the console's).
    pub audit: Arc<dyn AuditRepository>,
    pub market_clock: Arc<dyn Clock>,
}

pub struct Notifier {
    channels: Vec<Arc<Channel>>,
    /// Fenced to the engine's term.
    db: Database,
    clock: Arc<dyn Clock>,
    wire: Arc<wire::Wire>,
    console_url: String,
    tests: AtomicU64,
    /// The engine's term this node holds: nothing is sent, nor a command read, once it passed.
    term: Arc<crate::cluster::Term>,
    /// Whether what earlier runs left unsent is queued: nothing new is recorded before, so the
    /// read of what is left unsent cannot take a new notice for an old one and send it twice.
    resumed: tokio::sync::watch::Sender<bool>,
}

impl Notifier {
    /// The configured channels, recorded through `db` (fenced to the engine's `term`), with
    /// links to `console_url`.
    pub fn new(
        config: &NotificationsConfig,
        console_url: String,
        db: Database,
        term: Arc<crate::cluster::Term>,
        clock: Arc<dyn Clock>,
    ) -> Arc<Notifier> {
        Arc::new(Notifier {
            channels: config.channels.iter().cloned().map(Channel::new).collect(),
            db,
            clock,
            wire: Arc::new(wire::Wire::new(REQUEST_TIMEOUT)),
            console_url: config.console_url.clone().unwrap_or(console_url),
            tests: AtomicU64::new(0),
            term,
            resumed: tokio::sync::watch::channel(false).0,
        })
    }

    fn channel(&self, name: &str) -> Option<&Arc<Channel>> {
        self.channels.iter().find(|c| c.config.name == name)
    }

    /// Every channel, as configured, with its queue and counts.
    pub fn channels(&self) -> Vec<ChannelView> {
        self.channels
            .iter()
            .map(|c| ChannelView {
                name: c.config.name.clone(),
                kind: c.config.kind(),
                events: c.config.events.clone(),
                queued: c.queued(),
                stats: c.stats(),
                commands_role: match &c.config.target {
                    crate::config::ChannelTarget::Telegram { commands_role, .. } => *commands_role,
                    _ => None,
                },
            })
            .collect()
    }

    /// One page of deliveries, newest first (a channel no longer configured keeps its history).
    pub async fn deliveries(
        &self,
        channel: Option<&str>,
        before_id: Option<i64>,
        limit: i64,
    ) -> Result<Vec<DeliveryRecord>, NotifyError> {
        Ok(self.db.deliveries(channel, before_id, limit).await?)
    }

    /// Sends a `test` notice to `name` and waits up to [`TEST_WAIT`] for its outcome.
    pub async fn test(
        &self,
        name: &str,
        mode: tradeops_core::TradingMode,
        actor: &str,
    ) -> Result<DeliveryState, NotifyError> {
        let channel = self.channel(name).ok_or_else(|| NotifyError::UnknownChannel(name.to_string()))?.clone();
        let now = self.clock.now();
        let n = self.tests.fetch_add(1, Ordering::Relaxed);
        let notice = Notice {
            event_id: format!("test-{}-{n}", now.timestamp_millis()),
            kind: kinds::NoticeKind::Test.as_str().into(),
            critical: false,
            mode: mode.as_str().into(),
            title: format!("{} · test from tradeops", mode_label(mode)),
            text: format!("Sent by {actor} to the {name} channel: notifications reach you here."),
            link: Some(format!("{}/#/settings", self.console_url)),
            symbol: None,
            at: format_ts(&now),
            data: serde_json::json!({"actor": actor}),
        };
        let event_id = notice.event_id.clone();
        self.record_and_queue(Arc::new(notice), Some(&channel)).await?;
        let settled = channel.settle(&event_id, TEST_WAIT).await;
        let mut state = settled.unwrap_or(DeliveryState {
            event_id: event_id.clone(),
            kind: "test".into(),
            channel: name.to_string(),
            status: "RETRYING",
            attempts: 0,
            created_at: None,
            sent_at: None,
            error: None,
        });
        state.created_at = Some(now);
        Ok(state)
    }

    /// Records the deliveries of `notice` (to `only`, or to every channel that wants it) and
    /// queues those newly recorded. A database that cannot be reached does not stop a notice:
    /// it is queued unrecorded (the moment the database goes down is one the operator must
    /// hear of); a term that has passed does (another node leads and sends).
    async fn record_and_queue(&self, notice: Arc<Notice>, only: Option<&Arc<Channel>>) -> Result<(), NotifyError> {
        let targets: Vec<&Arc<Channel>> = match only {
            Some(channel) => vec![channel],
            None => self.channels.iter().filter(|c| notice.wanted_by(&c.config.events)).collect(),
        };
        if targets.is_empty() {
            return Ok(());
        }
        let mut resumed = self.resumed.subscribe();
        if tokio::time::timeout(TEST_WAIT, resumed.wait_for(|done| *done)).await.is_err() {
            tracing::warn!("the notifier has not started: a notice is recorded before the unsent ones are read");
        }
        let message = serde_json::to_string(notice.as_ref()).expect("a notice serialises");
        let created_at = self.clock.now().timestamp_millis();
        // Decided before recording: a notice the full queue folds is recorded `FOLDED` at once.
        let folds: Vec<bool> = targets.iter().map(|c| c.folds(&notice)).collect();
        let rows: Vec<NewDelivery> = targets
            .iter()
            .zip(&folds)
            .map(|(c, folds)| NewDelivery {
                event_id: notice.event_id.clone(),
                channel: c.config.name.clone(),
                kind: notice.kind.clone(),
                critical: notice.critical,
                status: if *folds { "FOLDED" } else { "RETRYING" }.into(),
                message: message.clone(),
                created_at,
            })
            .collect();
        let recorded = match self.db.record_deliveries(&rows).await {
            Ok(ids) => ids.into_iter().map(|(id, inserted)| inserted.then_some(Some(id))).collect(),
            Err(e @ StoreError::Fenced { .. }) => return Err(NotifyError::Store(e)),
            Err(e) => {
                tracing::warn!(error = %e, kind = %notice.kind, "could not record a notification; sending it unrecorded");
                vec![Some(None); targets.len()]
            }
        };
        for ((channel, recorded), folds) in targets.into_iter().zip(recorded).zip(folds) {
            // `None`: recorded before (a summary already sent, say): not sent again.
            let Some(delivery_id) = recorded else { continue };
            let pending = Pending { delivery_id, notice: notice.clone(), attempts: 0, throttled: 0, done: 0 };
            match folds {
                true => channel.fold(&pending.notice),
                false => {
                    channel.push(pending);
                }
            }
        }
        Ok(())
    }

    /// Starts the channels' tasks, the intake and the Telegram command pollers. The intake
    /// queues first what an earlier term recorded and did not send; it reads the events from
    /// this call on.
    pub fn start(self: &Arc<Self>, deps: NotifierDeps) -> Vec<JoinHandle<()>> {
        if self.channels.is_empty() {
            return Vec::new();
        }
        // What the tracker starts from is read right as the events are subscribed to, before
        // anything is awaited: a change made meanwhile (a halt while earlier deliveries are
        // read back) is in the stream and not yet in this picture, so it is told.
        let after = deps.events.last_id();
        let (_, events) = deps.events.subscribe(None);
        let engine = deps.engine.view();
        let mut tasks: Vec<JoinHandle<()>> = self
            .channels
            .iter()
            .map(|channel| {
                let sender = Sender {
                    channel: channel.clone(),
                    term: self.term.clone(),
                    wire: self.wire.clone(),
                    db: self.db.clone(),
                    clock: self.clock.clone(),
                };
                tokio::spawn(sender.run())
            })
            .collect();
        let deps = Arc::new(deps);
        tasks.extend(telegram::spawn_pollers(self, &deps));
        let notifier = self.clone();
        tasks.push(tokio::spawn(async move {
            notifier.resume().await;
            notifier.resumed.send_replace(true);
            notifier.intake(deps, events, engine, after).await
        }));
        tasks
    }

    /// Queues the deliveries an earlier term recorded and did not finish, and takes the counts
    /// stored so far.
    async fn resume(&self) {
        match self.db.delivery_counts().await {
            Ok(counts) => {
                for c in counts {
                    if let Some(channel) = self.channel(&c.channel) {
                        let last_sent_at = c.last_sent_at.and_then(chrono::DateTime::from_timestamp_millis);
                        channel.seed_stats(c.sent as u64, c.failed as u64, c.folded as u64, last_sent_at, c.last_error);
                    }
                }
            }
            Err(e) => tracing::warn!(error = %e, "could not read the notifications' counts"),
        }
        let pending = match self.db.pending_deliveries(RESUMED_AT_MOST).await {
            Ok(pending) => pending,
            Err(e) => return tracing::warn!(error = %e, "could not read the notifications left unsent"),
        };
        let now = self.clock.now().timestamp_millis();
        for row in pending {
            let give_up = |why: &str| (row.delivery_id, why.to_string());
            let unsendable = match (self.channel(&row.channel), serde_json::from_str::<Notice>(&row.message)) {
                (None, _) => Some(give_up("the channel is no longer configured")),
                (_, Err(_)) => Some(give_up("the recorded message cannot be read")),
                _ if now - row.created_at > RESUMED_WITHIN.as_millis() as i64 => {
                    Some(give_up("not sent within 6 hours of its event: too old to send now"))
                }
                (Some(channel), Ok(notice)) => {
                    tracing::info!(channel = %row.channel, kind = %row.kind, "sending a notification an earlier run left unsent");
                    let pending = Pending {
                        delivery_id: Some(row.delivery_id),
                        notice: Arc::new(notice),
                        attempts: row.attempts.max(0) as u32,
                        throttled: 0,
                        done: 0,
                    };
                    if channel.push(pending) == Queued::Folded {
                        self.mark(row.delivery_id, "FOLDED", row.attempts, None).await;
                    }
                    None
                }
            };
            if let Some((id, why)) = unsendable {
                self.mark(id, "FAILED", row.attempts, Some(&why)).await;
            }
        }
    }

    async fn mark(&self, delivery_id: i64, status: &str, attempts: i64, error: Option<&str>) {
        if let Err(e) = self.db.update_delivery(delivery_id, status, attempts, None, error).await {
            tracing::warn!(error = %e, "could not store a notification's delivery");
        }
    }

    /// Reads the event bus until the service stops: every event the tracker makes notices of is
    /// recorded and queued. Falling behind the bus's broadcast resumes from its buffer.
    async fn intake(
        self: Arc<Self>,
        deps: Arc<NotifierDeps>,
        mut rx: tokio::sync::broadcast::Receiver<Arc<StoredEvent>>,
        view: Arc<crate::engine_view::EngineView>,
        // The last event published before `rx` was subscribed: a catch-up replays from it.
        mut last: u64,
    ) {
        let held = view
            .positions
            .iter()
            .filter(|p| p.position.quantity > 0)
            .map(|p| (p.position.symbol.clone(), p.position.quantity, p.protection.clone(), p.levels));
        let mut tracker = Tracker::new(self.console_url.clone(), held, view.trading_state);
        let calendar = MarketCalendar::new(deps.settings.current().runtime.market_calendar);
        let mut trading_day = calendar.session(deps.market_clock.now()).day;
        let mut tick = tokio::time::interval(Duration::from_millis(500));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let batch: Vec<Arc<StoredEvent>> = tokio::select! {
                received = rx.recv() => match received {
                    Ok(event) => vec![event],
                    Err(RecvError::Lagged(_)) => {
                        let (replay, resumed) = deps.events.subscribe(Some(last));
                        rx = resumed;
                        replay
                    }
                    Err(RecvError::Closed) => return,
                },
                _ = tick.tick() => {
                    for notice in tracker.flush_stale_fills() {
                        if self.send_notice(notice).await.is_err() {
                            return;
                        }
                    }
                    continue;
                }
            };
            for event in batch {
                last = last.max(event.id);
                let mut notices = tracker.observe(&event);
                if let Event::MarketSession(view) = &event.event {
                    if let Some(date) = day_ended(view, trading_day.as_ref()) {
                        notices.extend(self.day_summary(date, &deps, event.mode).await);
                    }
                    trading_day = view.day;
                }
                for notice in notices {
                    if self.send_notice(notice).await.is_err() {
                        return;
                    }
                }
            }
        }
    }

    /// Records and queues one notice; an error only when this node's term has passed.
    async fn send_notice(&self, notice: Notice) -> Result<(), ()> {
        match self.record_and_queue(Arc::new(notice), None).await {
            Err(NotifyError::Store(StoreError::Fenced { .. })) => {
                tracing::info!("another node leads the engine: it sends the notifications from now on");
                Err(())
            }
            _ => Ok(()),
        }
    }

    /// `session.summary` of `date`: the day's P&L, its trades and their win rate, what is still
    /// held. Its id names the date and mode: a day is summed up once per channel, whatever
    /// restarts or failovers happen.
    async fn day_summary(
        &self,
        date: chrono::NaiveDate,
        deps: &NotifierDeps,
        mode: tradeops_core::TradingMode,
    ) -> Option<Notice> {
        if !self.channels.iter().any(|c| c.config.wants(kinds::NoticeKind::SessionSummary)) {
            return None;
        }
        let settings = deps.settings.current();
        let orders = match self.db.all_orders().await {
            Ok(orders) => orders,
            Err(e) => {
                tracing::warn!(error = %e, "could not read the day's trades for its summary");
                Vec::new()
            }
        };
        let trades = crate::domain::trades::build(&orders, settings.analytics.breakeven_threshold);
        let filter = crate::domain::trades::TradeFilter::new(Some(date), None, None);
        let today: Vec<_> = trades.iter().filter(|t| t.mode == mode.as_str() && filter.matches(t)).collect();
        let net: rust_decimal::Decimal = today.iter().map(|t| t.net_pnl).sum();
        let winners = today.iter().filter(|t| t.winner_loser_label == tradeops_core::trades::Label::Winner).count();
        let engine = deps.engine.view();
        let held: Vec<String> = engine
            .positions
            .iter()
            .filter(|p| p.position.quantity > 0)
            .map(|p| format!("{} {}", p.position.symbol, p.position.quantity))
            .collect();
        if today.is_empty() && held.is_empty() {
            // A day without a trade and flat at its end is not news.
            return None;
        }
        let win_rate = if today.is_empty() { "—".to_string() } else { format!("{}%", winners * 100 / today.len()) };
        let best =
            today.iter().max_by_key(|t| t.net_pnl).map(|t| format!("best {} {}", t.symbol, dollars(t.net_pnl, true)));
        let worst =
            today.iter().min_by_key(|t| t.net_pnl).map(|t| format!("worst {} {}", t.symbol, dollars(t.net_pnl, true)));
        let mut text = format!(
            "{} trades · win rate {win_rate} · realized {}\nday P&L {} (with what is still open)",
            today.len(),
            dollars(net, true),
            dollars(engine.daily_pnl, true)
        );
        if let (Some(best), Some(worst)) = (best, worst) {
            text.push_str(&format!("\n{best} · {worst}"));
        }
        text.push_str(&match held.is_empty() {
            true => "\nFlat overnight.".to_string(),
            false => format!("\nHeld overnight: {}", held.join(", ")),
        });
        Some(Notice {
            event_id: format!("summary-{date}-{}", mode.as_str()),
            kind: kinds::NoticeKind::SessionSummary.as_str().into(),
            critical: false,
            mode: mode.as_str().into(),
            title: format!("{} · day summary {date}: {}", mode_label(mode), dollars(net, true)),
            text,
            link: Some(format!("{}/#/pnl?date={date}", self.console_url)),
            symbol: None,
            at: format_ts(&deps.market_clock.now()),
            data: serde_json::json!({"date": date.to_string(), "trades": today.len(), "winners": winners,
                                     "net_pnl": net.round_dp(2).to_string(),
                                     "daily_pnl": engine.daily_pnl.round_dp(2).to_string(), "held": held}),
        })
    }
}

/// The trading day that `view` (a `market.session` event) says has ended: the day's last session
/// closed (20:00 New York, 17:00 on an early close), or the date moved on from `before`, the
/// trading day of the view before (a calendar that is open all day, as the simulated market's
/// is, has no close but midnight).
fn day_ended(view: &SessionView, before: Option<&TradingDay>) -> Option<chrono::NaiveDate> {
    if let Some(day) = view.day {
        if view.session == SessionPhase::Closed && view.next_session_at > day.after_hours_close {
            return Some(day.date);
        }
    }
    before.filter(|b| b.date != view.trading_day).map(|b| b.date)
}
