//! The engine runner: restores the engine from the database, then serialises every input —
//! operator commands, market steps, the execution broker's reports — through `Engine::handle`,
//! and carries out the effects in order ([`batch`]): the trading state is persisted first, an
//! order is persisted before it is sent (write-ahead), and the reply goes back only after its
//! effects (an emergency halt's as soon as its cancels and exits are with the broker, before
//! the orders' new states are saved). What operators are told is published as typed events
//! once the batch is saved ([`view`]).
//!
//! The runner owns the engine and three parts, each with its own state:
//! - [`venue`]: every call to the execution broker, bounded in time and behind the one check of
//!   this engine's term; orders whose submit went unanswered, a venue that is down;
//! - [`books`]: every write — the halt latch, the write-ahead, the batch's save, writes held
//!   through a database outage, and fencing (a write refused for a newer term ends this one);
//! - [`reconcile`]: the engine's book against the broker's — unconfirmed orders looked up by
//!   client order id before any resend, orders and positions that disagree, foreign orders and
//!   positions adopted.

mod batch;
mod books;
mod desk;
mod held;
mod preview;
mod reconcile;
mod venue;
mod view;

pub use desk::{replay_desk, DeskOutcome};

use super::{EngineDeps, EngineHandle};
use crate::engine_view::EngineView;
use crate::events::EventBus;
use batch::Request;
use books::{Books, WRITE_TIMEOUT};
use reconcile::Reconciliation;
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot, watch};
use tradeops_brokers::{MarketData, MarketUpdate};
use tradeops_core::broker::BrokerReport;
use tradeops_core::engine::{
    Command, CommandError, Engine, Event, Halt, ManualOrder, OrderPreview, Reply, Restored, SavedState, StrategyStatus,
    Watched,
};
use tradeops_core::orders::ClientOrderId;
use tradeops_core::risk::TradingState;
use tradeops_core::time::{from_epoch_ms, to_epoch_ms};
use tradeops_core::{strategy, Clock, Settings, Symbol, Timestamp, TradingMode};
use tradeops_store::{MarketRepository, TradingRepository};
use venue::Venue;

/// What the runner takes in.
pub(super) enum Input {
    Command(Command, oneshot::Sender<Result<Reply, CommandError>>),
    /// The feed stepped to `at`; `bar_closed` when a minute just completed.
    MarketStep {
        at: Timestamp,
        bar_closed: bool,
    },
    /// The market feed is about to print the step at `before`: the broker's reports due before
    /// it are delivered first, each at its own time and against the market as it stands (answered
    /// once done), as a desk replay delivers them.
    Due(Timestamp, oneshot::Sender<()>),
    /// The health probe: answered with the execution broker's count of working orders as soon
    /// as the runner reaches it (the round trip every command and order takes).
    Probe(oneshot::Sender<usize>),
    /// The order ticket's risk preview: the gate's verdict on an order, nothing placed.
    Preview(ManualOrder, oneshot::Sender<Result<OrderPreview, CommandError>>),
}

/// The only writer of trading state: the input loop that owns the [`Engine`] and the parts that
/// carry out its effects — the venue (every broker call), the books (every write) and
/// reconciliation (the engine's book against the broker's).
struct Runner {
    engine: Engine,
    /// The execution broker, behind the one check of this engine's term.
    venue: Venue,
    /// Where trading state is stored (orders written ahead, the halt latch, positions).
    books: Books,
    /// What reconciliation found, and when it last looked.
    reconciliation: Reconciliation,
    /// The settings in effect, applied to the engine as they change.
    settings: watch::Receiver<Arc<Settings>>,
    /// Where what operators are told is published.
    events: Arc<EventBus>,
    /// Market time: what every command, step and write is stamped with.
    market_clock: Arc<dyn Clock>,
    /// The `data_broker`, which marks positions and prices orders.
    market: Arc<dyn MarketData>,
    view: watch::Sender<Arc<EngineView>>,
    anomalies: Vec<String>,
    /// When the current trading session ends (DAY orders expire then).
    session_end: Option<Timestamp>,
    /// Open positions and orders last published during a halt.
    last_progress: Option<(usize, usize)>,
    /// The fill being applied, published as `execution.created` right after its order's update.
    pending_fill: Option<(ClientOrderId, tradeops_core::orders::Execution)>,
    /// Where a crash test stops the process inside an emergency halt (see [`CrashPoint`]).
    crash_point: Option<CrashPoint>,
    /// This service's name in the cluster (see [`Runner::hand_over_halt`]).
    node: String,
    /// Where the command being carried out is answered. An emergency halt takes it as soon as
    /// its cancels and exits are with the broker (see [`Runner::answer_halt`]); every other
    /// command is answered after its batch is saved.
    answer: Option<oneshot::Sender<Result<Reply, CommandError>>>,
}

/// A point inside the emergency halt at which the crash tests end the process as `kill -9`
/// would (`std::process::abort`: no destructor, no flush), chosen with the environment variable
/// `TRADEOPS_TEST_CRASH_POINT`. Never set in operation; the configuration ignores `TRADEOPS_TEST_*`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CrashPoint {
    /// `HALTED` is persisted; no cancel or exit has been written or sent.
    HaltLatched,
    /// The halt's exits are written ahead; no cancel or exit has reached the broker.
    HaltWrittenAhead,
    /// The halt was answered with every cancel and exit at the broker; the orders' new states
    /// are not stored.
    HaltAnswered,
}

impl CrashPoint {
    /// The point `TRADEOPS_TEST_CRASH_POINT` names, if any.
    pub fn from_env() -> Option<CrashPoint> {
        match std::env::var("TRADEOPS_TEST_CRASH_POINT").ok()?.as_str() {
            "halt-latched" => Some(CrashPoint::HaltLatched),
            "halt-written-ahead" => Some(CrashPoint::HaltWrittenAhead),
            "halt-answered" => Some(CrashPoint::HaltAnswered),
            other => {
                tracing::warn!(point = other, "TRADEOPS_TEST_CRASH_POINT: unknown point, ignored");
                None
            }
        }
    }

    fn crash_if(me: Option<CrashPoint>, here: CrashPoint) {
        if me == Some(here) {
            eprintln!("TRADEOPS_TEST_CRASH_POINT: stopping the process at {here:?}");
            std::process::abort();
        }
    }
}

/// How often the runner reconciles its book with the broker's and, while `HALTED`, checks that
/// the halt is complete (no working order at the broker, every position flat).
const RECONCILE_EVERY: Duration = Duration::from_secs(1);

/// Restores the engine from `deps.db` and starts its runner, trading through `deps.broker` and
/// marking through `deps.market`; returns the handle commands go through.
pub async fn spawn_engine(deps: EngineDeps) -> anyhow::Result<(EngineHandle, tokio::task::JoinHandle<()>)> {
    let (tx, rx) = mpsc::channel(1024);
    let (view_tx, view_rx) = watch::channel(Arc::new(EngineView::default()));
    let (mut runner, unsent) = restore(deps, view_tx).await?;
    let now = runner.market_clock.now();
    // What an earlier term sent and could not write is recorded at the broker's truth first:
    // the halt's exits and every order after it count the shares really held.
    runner.catch_up(now).await;
    // A halt another node accepted while no engine could act on it comes before anything else.
    runner.apply_halt_requests(now).await;
    runner.recover(unsent, now).await;
    runner.publish();
    let handle = EngineHandle { tx, view: view_rx };
    let task = tokio::spawn(async move { runner.run(rx).await });
    Ok((handle, task))
}

/// Rebuilds the engine and the broker's book from the database. Returns the runner and the
/// orders written ahead that the broker may never have received (see [`Runner::recover`]).
async fn restore(
    deps: EngineDeps,
    view: watch::Sender<Arc<EngineView>>,
) -> anyhow::Result<(Runner, Vec<ClientOrderId>)> {
    let EngineDeps {
        db,
        settings,
        events,
        market_clock,
        initial_cash,
        crash_point,
        broker,
        market: market_data,
        term,
        node,
    } = deps;
    let repo: &dyn TradingRepository = &db;
    let now = market_clock.now();
    let current = settings.borrow().as_ref().clone();
    let saved = repo.engine_state().await?.map(|s| SavedState {
        cash: s.cash,
        trading_state: match s.state.as_str() {
            "HALTED" => TradingState::Halted,
            "REDUCING" => TradingState::Reducing,
            _ => TradingState::Active,
        },
        halt: s.halted_at.map(|at| Halt {
            at: from_epoch_ms(at),
            reason: s.halt_reason.unwrap_or_default(),
            actor: s.halt_actor.unwrap_or_default(),
        }),
        halt_stopped: s.halt_stopped.iter().filter_map(|s| Symbol::parse(s).ok()).collect(),
        trading_date: s.trading_date.as_deref().and_then(|d| d.parse().ok()),
        trades_today: s.trades_today as u32,
        realized_today: s.realized_today,
        start_equity: s.start_equity,
        peak_equity: s.peak_equity,
        order_sequence: s.order_sequence.max(0) as u64,
    });
    let positions = repo.positions().await?;
    let open = repo.open_orders().await?;
    let market: &dyn MarketRepository = &db;
    let mut blocks = Vec::new();
    for b in market.active_blocks(to_epoch_ms(&now)).await? {
        if let Ok(symbol) = Symbol::parse(&b.symbol) {
            let block = tradeops_core::engine::Block {
                scope: b.block_scope,
                reason: b.reason,
                actor: b.actor,
                effective_from: from_epoch_ms(b.effective_from),
                expires_at: b.expires_at.map(from_epoch_ms),
            };
            blocks.push((symbol, block));
        }
    }
    let mut watched = Vec::new();
    for row in market.watch_rows().await? {
        let Ok(symbol) = Symbol::parse(&row.symbol) else { continue };
        watched.push(Watched {
            symbol,
            status: status_of(&row.strategy_status),
            added_at: from_epoch_ms(row.time_added),
        });
    }
    let restored = Restored { state: saved, positions, open_orders: open.clone(), blocks, watched };
    let engine = Engine::restore(current, initial_cash, strategy::make, restored, now);
    // An order being cancelled is taken back working, as the broker last knew it: the
    // reconciliation that follows finds its cancel missing and sends it again.
    let held: Vec<(Symbol, u64)> =
        engine.positions().values().filter(|p| !p.is_flat()).map(|p| (p.symbol.clone(), p.quantity)).collect();
    let mut venue = Venue::new(broker, term.clone(), 0);
    let unsent = venue.restore(&open, &held, now).await;
    venue.count_open_orders().await;
    let session_end = Some(engine.calendar().end_of_trading_day(now));
    let mut runner = Runner {
        engine,
        venue,
        books: Books::new(db, term),
        reconciliation: Reconciliation::default(),
        settings,
        events,
        market_clock,
        market: market_data,
        view,
        anomalies: Vec::new(),
        session_end,
        last_progress: None,
        pending_fill: None,
        crash_point,
        node,
        answer: None,
    };
    runner.anomalies.clear();
    tracing::info!(open_orders = open.len(), positions = runner.engine.positions().len(), "engine restored");
    Ok((runner, unsent))
}

/// How long the engine waits for the market source's snapshot of a symbol (a remote source may
/// go to REST, and wait for its request budget): past it, the symbol is left for the next step
/// rather than every command waiting behind it.
const MARKET_TIMEOUT: Duration = Duration::from_millis(500);

/// A market-source read bounded by [`MARKET_TIMEOUT`]: nothing this time when it is slower.
async fn market_now<T>(read: impl std::future::Future<Output = Option<T>>) -> Option<T> {
    tokio::time::timeout(MARKET_TIMEOUT, read).await.unwrap_or_else(|_| {
        tracing::debug!("the market source did not answer within {MARKET_TIMEOUT:?}: left for the next step");
        None
    })
}

/// Resolves when the venue says reports are waiting; never for a venue that does not say.
async fn reports_arrived(waiting: Option<&tokio::sync::Notify>) {
    match waiting {
        Some(notify) => notify.notified().await,
        None => std::future::pending().await,
    }
}

/// Commands an operator expects to outlast a restart (orders, closes, the watchlist, blocks,
/// resuming) are refused while the database cannot be written, before the engine sees them, so
/// a refusal changes nothing (no trade counted, no client order id taken). Cancels and the
/// emergency halt act regardless (they reduce risk) and are stored when the database is back.
fn needs_storage(command: &Command) -> bool {
    matches!(
        command,
        Command::PlaceOrder(_)
            | Command::ClosePosition { .. }
            | Command::Watch { .. }
            | Command::StopWatch { .. }
            | Command::Restart { .. }
            | Command::RestartHaltStopped
            | Command::Block { .. }
            | Command::Unblock { .. }
            | Command::HaltPosition { .. }
            | Command::Resume { .. }
    )
}

fn status_of(text: &str) -> StrategyStatus {
    match text {
        "Active" => StrategyStatus::Active,
        "Buy" => StrategyStatus::Buy,
        "Hold" => StrategyStatus::Hold,
        "Sell" => StrategyStatus::Sell,
        "Halted" => StrategyStatus::Halted,
        _ => StrategyStatus::Closed,
    }
}

impl Runner {
    /// The trading mode of the settings in effect (what orders and state are stored under).
    fn mode(&self) -> TradingMode {
        self.settings.borrow().runtime.trading_mode
    }

    /// Carries out an operator's (or the allocator's) command at market time `now`: the
    /// broker's due reports first, then the engine's decision, written ahead and sent.
    async fn command(&mut self, command: Command, now: Timestamp) -> Result<Reply, CommandError> {
        if needs_storage(&command) && !self.books.is_writable() {
            let reason = "the database is unavailable: this change could not be stored, so it was not made";
            return Err(CommandError::NotPersisted { reason: reason.into(), unavailable: true });
        }
        self.broker_reports(now).await;
        let request = match command {
            Command::PlaceOrder(_) | Command::ClosePosition { .. } => Request::Order,
            Command::CancelOrder { .. } => Request::Cancel,
            _ => Request::None,
        };
        if let (Request::Order, Some(refusal)) = (request, self.venue.term_refusal()) {
            // This engine may not send now (its term's window passed, or the term is over):
            // nothing is written or counted.
            return Err(refusal);
        }
        if let (Request::Order, Some((reason, retry_after))) = (request, self.venue.down()) {
            // Nothing is written or counted: the refusal changes nothing.
            return Err(CommandError::BrokerUnavailable {
                reason: reason.clone(),
                retry_after: *retry_after,
                client_order_id: None,
            });
        }
        if let Command::ClosePosition { symbol, .. } = &command {
            self.halt_status(symbol, now).await;
        }
        if let Command::PlaceOrder(order) = &command {
            // The engine values orders at the last trade: mark the symbol first.
            if self.market.instrument(&order.symbol).is_none() {
                let unknown = format!("{} is not a symbol of the {} market", order.symbol, self.market.name());
                return Err(CommandError::NotFound(unknown));
            }
            self.halt_status(&order.symbol, now).await;
            if let Some(snapshot) = market_now(self.market.snapshot(&order.symbol)).await {
                let fx = self.engine.handle(
                    Event::Mark {
                        symbol: order.symbol.clone(),
                        price: snapshot.last.to_decimal(),
                        bid: Some(snapshot.quote.bid.to_decimal()),
                    },
                    now,
                );
                self.apply(fx, now).await;
            }
        }
        let fx = self.engine.handle(Event::Command(command), now);
        let answer = self.apply_for(fx, now, request).await;
        self.final_answer(answer)
    }

    /// What a command's batch answers: `EngineStopped` when the term was taken over meanwhile
    /// (what was left of the command was neither stored nor sent).
    fn final_answer(&self, answer: Option<Result<Reply, CommandError>>) -> Result<Reply, CommandError> {
        match answer {
            _ if self.books.term_over() => Err(CommandError::EngineStopped),
            Some(answer) => answer,
            None => Err(CommandError::NotFound("no reply".into())),
        }
    }

    async fn run(&mut self, mut rx: mpsc::Receiver<Input>) {
        // Changes from now on: the engine was restored with the settings in effect.
        let mut settings = self.settings.clone();
        settings.borrow_and_update();
        let mut tick = tokio::time::interval(Duration::from_millis(20));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut check = tokio::time::interval(RECONCILE_EVERY);
        check.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let waiting = self.venue.reports_waiting();
        loop {
            tokio::select! {
                input = rx.recv() => match input {
                    Some(Input::Command(command, reply)) => {
                        let now = self.market_clock.now();
                        self.answer = Some(reply);
                        let answer = self.command(command, now).await;
                        // Unless an emergency halt was answered early.
                        if let Some(reply) = self.answer.take() {
                            let _ = reply.send(answer);
                        }
                        self.publish();
                    }
                    Some(Input::Due(before, reply)) => {
                        if self.deliver_due(before, false).await {
                            self.publish();
                        }
                        let _ = reply.send(());
                    }
                    Some(Input::MarketStep { at, bar_closed }) => {
                        self.market_step(at, bar_closed).await;
                        self.publish();
                    }
                    Some(Input::Preview(order, reply)) => {
                        let changed = self.halt_status(&order.symbol, self.market_clock.now()).await;
                        let _ = reply.send(self.preview(&order).await);
                        if changed {
                            self.publish();
                        }
                    }
                    Some(Input::Probe(reply)) => {
                        let _ = reply.send(self.venue.probe().await);
                    }
                    None => return,
                },
                _ = tick.tick() => {
                    let now = self.market_clock.now();
                    // Reports an in-process broker scheduled are stamped with their due time,
                    // whenever the tick finds them (a replay and a live day agree).
                    let due = self.deliver_due(now, true).await;
                    if self.broker_reports(now).await || due {
                        self.publish();
                    }
                }
                _ = reports_arrived(waiting.as_deref()) => {
                    // A remote venue's reports are applied as they arrive, not at the next tick.
                    let now = self.market_clock.now();
                    if self.broker_reports(now).await {
                        self.publish();
                    }
                }
                _ = check.tick() => {
                    let now = self.market_clock.now();
                    self.books.check_term().await;
                    self.apply_halt_requests(now).await;
                    let mode = self.mode();
                    self.books.retry_held(&self.engine, now, mode).await;
                    self.broker_reports(now).await;
                    self.reconcile(now).await;
                    self.publish();
                }
                changed = settings.changed() => {
                    if changed.is_err() { return; }
                    let next = (**settings.borrow_and_update()).clone();
                    let now = self.market_clock.now();
                    let fx = self.engine.handle(Event::Command(Command::UpdateSettings(Box::new(next))), now);
                    self.apply(fx, now).await;
                }
            }
            if self.books.term_over() {
                tracing::error!("the trading engine stopped: its term is over");
                self.hand_over_halt().await;
                return;
            }
        }
    }

    /// An emergency halt this engine acted on but could not store before its term ended (its
    /// link to the database was cut while it still reached the broker: answered
    /// `persisted: false`) is handed to whoever leads next, stored as a halt request the way a
    /// follower stores one: the next leader applies it before anything else at its start, and
    /// within [`RECONCILE_EVERY`] while it leads (docs/ARCHITECTURE.md, "The emergency halt
    /// under a partition"). The request is not fenced: it asks the leader, whoever it is. Tried
    /// until the database answers; a cluster node waits for this before it exits.
    async fn hand_over_halt(&mut self) {
        let db = self.books.db().clone();
        if !self.books.halt_unsaved() || db.backend() != tradeops_store::Backend::Postgres {
            return;
        }
        let Some(halt) = self.engine.halt() else { return };
        let (reason, actor, at) = (halt.reason.clone(), halt.actor.clone(), to_epoch_ms(&halt.at));
        let request_ref = "handed over when the term ended";
        loop {
            match tokio::time::timeout(WRITE_TIMEOUT, db.request_halt(&reason, &actor, &self.node, request_ref, at))
                .await
            {
                Ok(Ok(id)) => {
                    tracing::warn!(
                        request = id,
                        "the emergency halt this engine could not store is handed to the next leader"
                    );
                    return;
                }
                Ok(Err(e)) => {
                    tracing::warn!(error = %e, "the unstored emergency halt is not handed over yet: trying again")
                }
                Err(_) => {
                    tracing::warn!("the unstored emergency halt is not handed over yet (no answer): trying again")
                }
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// Applies the emergency halts another node of a cluster accepted and stored
    /// (`halt_requests`) — at start, before anything else, and every [`RECONCILE_EVERY`] — then
    /// marks them applied by this term. PostgreSQL only: on SQLite no other node accepts any.
    /// A database that cannot answer is asked again at the next check.
    async fn apply_halt_requests(&mut self, now: Timestamp) {
        let db = self.books.db().clone();
        let Some(epoch) = db.fence() else { return };
        if db.backend() != tradeops_store::Backend::Postgres || self.books.term_over() {
            return;
        }
        let pending = match tokio::time::timeout(WRITE_TIMEOUT, db.pending_halts()).await {
            Ok(Ok(pending)) => pending,
            _ => return,
        };
        let Some(last) = pending.last().map(|r| r.request_id) else { return };
        for request in pending {
            tracing::warn!(
                node = %request.node_id,
                actor = %request.actor,
                request = %request.request_ref,
                "applying an emergency halt another node accepted"
            );
            let halt = Command::EmergencyHalt { reason: request.reason, actor: request.actor };
            let fx = self.engine.handle(Event::Command(halt), now);
            self.apply(fx, now).await;
        }
        if !self.books.term_over() {
            if let Err(e) = db.mark_halts_applied(last, epoch, to_epoch_ms(&now)).await {
                tracing::warn!(error = %e, "halt requests applied but not marked: applied again at the next check (a halt repeats safely)");
            }
        }
        self.publish();
    }

    /// Delivers due acks and cancels and expires DAY orders at the end of the trading day. An
    /// order just acknowledged meets the current quote at once (quotes are continuous; prints
    /// come every 15 market seconds).
    async fn broker_reports(&mut self, now: Timestamp) -> bool {
        let mut reports = self.venue.reports(now).await;
        let acked: BTreeSet<Symbol> = reports
            .iter()
            .filter_map(|r| match r {
                BrokerReport::Accepted { client_order_id, .. } => {
                    self.engine.order(client_order_id).map(|o| o.symbol.clone())
                }
                _ => None,
            })
            .collect();
        for symbol in &acked {
            if let Some(snapshot) = market_now(self.market.snapshot(symbol)).await {
                let update = MarketUpdate {
                    symbol,
                    at: now,
                    last: snapshot.last,
                    quote: snapshot.quote,
                    bar: None,
                    halted: self.engine.halt_of(symbol).is_some(),
                    session: self.engine.calendar().phase(now),
                };
                reports.extend(self.venue.on_market(&update).await);
            }
        }
        // DAY orders expire when the trading session ends (NYSE: the after-hours close).
        let calendar = self.engine.calendar();
        if self.session_end.is_some_and(|end| now >= end) {
            reports.extend(self.venue.expire_day_orders(now).await);
        }
        if self.session_end.is_none_or(|end| now >= end) {
            self.session_end = Some(calendar.end_of_trading_day(now));
        }
        let any = !reports.is_empty();
        if any && !self.venue.is_remote() {
            self.venue.count_open_orders().await;
        }
        self.reports(reports, now).await;
        any
    }

    async fn reports(&mut self, reports: Vec<BrokerReport>, now: Timestamp) {
        for report in reports {
            let id = report.client_order_id();
            if self.engine.order(id).is_none() && id.is_engines() {
                // An order of ours the database lacks: an earlier term sent it and could not
                // write it. Recorded as it was sent, this report and those after it carry it
                // to the broker's truth; while the broker cannot say, the report waits.
                match self.record_earlier_order(&id.clone(), now).await {
                    reconcile::Earlier::Apply => {}
                    reconcile::Earlier::Drop => continue,
                    reconcile::Earlier::Wait => {
                        self.venue.owe(report);
                        continue;
                    }
                }
            } else if self.engine.order(id).is_none() && self.adopt_foreign_order(&id.clone(), now).await {
                // An order placed at the broker by someone else: adopted as the broker has it
                // now, which already holds what this report says.
                continue;
            }
            if self.venue.is_unconfirmed(id) {
                if let BrokerReport::CancelRejected { reason, .. } = &report {
                    // The broker cannot cancel what it may never have received: reconciliation
                    // looks the order up (never sent and cancelling: it is not sent).
                    tracing::info!(client_order_id = %id, %reason, "cancel of an order the broker never confirmed: reconciliation looks it up");
                    continue;
                }
                // Any other report of the order says the broker has it.
                self.venue.confirmed(&id.clone());
            }
            if let BrokerReport::Filled { client_order_id, execution } = &report {
                self.pending_fill = Some((client_order_id.clone(), execution.clone()));
            }
            let fx = self.engine.handle(Event::Broker(report), now);
            self.apply(fx, now).await;
            self.pending_fill = None;
        }
    }

    /// Delivers the reports the broker scheduled (paper acks and cancels) due before `until`
    /// (`through`: at or before it), each at its own due time; whether there were any.
    async fn deliver_due(&mut self, until: Timestamp, through: bool) -> bool {
        let (mut any, mut last) = (false, None);
        let in_time = |d: &Timestamp| if through { *d <= until } else { *d < until };
        while let Some(due) = self.venue.next_due().filter(|d| in_time(d) && Some(*d) != last) {
            last = Some(due);
            any |= self.broker_reports(due).await;
        }
        any
    }

    /// Symbols the engine cares about: watched with a strategy, held, or with working orders.
    fn relevant(&self) -> BTreeSet<Symbol> {
        let mut symbols: BTreeSet<Symbol> =
            self.engine.slots().iter().filter(|(_, s)| s.strategy.is_some()).map(|(k, _)| k.clone()).collect();
        symbols.extend(self.engine.positions().values().filter(|p| !p.is_flat()).map(|p| p.symbol.clone()));
        symbols.extend(self.engine.orders().values().filter(|o| !o.status.is_final()).map(|o| o.symbol.clone()));
        symbols
    }

    /// Tells the engine which of the symbols it follows (and those it still holds as halted)
    /// the market-data source says are halted now, before the step's prints and bars: an order
    /// decided on this step already knows (CONTRACT §11).
    async fn trading_status(&mut self, relevant: &BTreeSet<Symbol>, at: Timestamp) {
        let stale: Vec<Symbol> = self.engine.halts().keys().filter(|s| !relevant.contains(*s)).cloned().collect();
        for symbol in relevant.iter().chain(&stale) {
            self.halt_status(symbol, at).await;
        }
    }

    /// Tells the engine whether `symbol` is halted as the market-data source says now, if that
    /// changed; whether it did. The source is the one halt state (CONTRACT §11): the quote and
    /// the radar read it directly, so an order, a close or a preview reads it here first —
    /// never the engine's copy of the last market step — and what the operator sees is what
    /// the gate does, followed symbol or not.
    async fn halt_status(&mut self, symbol: &Symbol, at: Timestamp) -> bool {
        let halt = self.market.halt(symbol);
        if halt.as_ref() == self.engine.halt_of(symbol) {
            return false;
        }
        let fx = self.engine.handle(Event::Status { symbol: symbol.clone(), halt }, at);
        self.apply(fx, at).await;
        true
    }

    async fn market_step(&mut self, at: Timestamp, bar_closed: bool) {
        self.broker_reports(at).await;
        let relevant = self.relevant();
        self.trading_status(&relevant, at).await;
        for symbol in relevant {
            let Some(snapshot) = market_now(self.market.snapshot(&symbol)).await else { continue };
            let closed = if bar_closed { market_now(self.market.last_closed_bar(&symbol)).await } else { None };
            let bar = closed.map(|c| c.bar);
            let update = MarketUpdate {
                symbol: &symbol,
                at,
                last: snapshot.last,
                quote: snapshot.quote,
                bar: bar.as_ref(),
                halted: self.engine.halt_of(&symbol).is_some(),
                session: self.engine.calendar().phase(at),
            };
            let reports = self.venue.on_market(&update).await;
            if !reports.is_empty() {
                self.venue.count_open_orders().await;
            }
            self.reports(reports, at).await;
            let fx = self.engine.handle(
                Event::Mark {
                    symbol: symbol.clone(),
                    price: snapshot.last.to_decimal(),
                    bid: Some(snapshot.quote.bid.to_decimal()),
                },
                at,
            );
            self.apply(fx, at).await;
            if let Some(closed) = closed {
                let event = Event::Bar {
                    symbol: symbol.clone(),
                    bar: closed.bar,
                    prev_close: snapshot.prev_close.to_decimal(),
                    relative_volume: closed.relative_volume,
                };
                let fx = self.engine.handle(event, at);
                self.apply(fx, at).await;
            }
        }
    }
}
