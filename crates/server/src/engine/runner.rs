//! The engine runner: restores the engine from the database, then serialises every input —
//! operator commands, market steps, the execution broker's reports — through `Engine::handle`,
//! and carries out the effects in order: the trading state is persisted first, an order is
//! persisted before it is sent (write-ahead), and the reply goes back only after its effects.
//! It trades through the [`ExecutionBroker`] and marks through the [`MarketData`] it is given;
//! a broker that refuses an order or a cancel answers the engine with the matching report, and
//! one that cannot be reached leaves the order to reconciliation, which looks it up by client
//! order id before sending it again.
//! What operators are told is published as typed events once the batch is saved.

mod desk;
mod preview;

pub use desk::{replay_desk, DeskOutcome};

use super::held::{self, HeldWrite};
use super::{EngineDeps, EngineHandle};
use crate::engine_view::{EngineView, PositionView};
use crate::events::{Event as Published, EventBus, RiskChange, Violation, WatchlistChange};
use rust_decimal::Decimal;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot, watch};
use tradeops_brokers::{BrokerError, ExecutionBroker, MarketData, MarketUpdate, Rejection};
use tradeops_core::broker::{BrokerLookup, BrokerReport};
use tradeops_core::engine::{
    is_liquidation, Command, CommandError, Effect, Engine, Event, Halt, ManualOrder, OrderPreview, Reply, Restored,
    SavedState, StrategyStatus, Watched,
};
use tradeops_core::market::Side;
use tradeops_core::orders::{ClientOrderId, Order, OrderStatus, TimeInForce};
use tradeops_core::positions::Position;
use tradeops_core::reconcile::Discrepancy;
use tradeops_core::risk::{RiskFigure, RiskRefusal, RiskRule, TradingState};
use tradeops_core::time::{from_epoch_ms, to_epoch_ms};
use tradeops_core::{strategy, Clock, Settings, Symbol, Timestamp, TradingMode};
use tradeops_store::{Database, StoreError};
use tradeops_store::{EngineStateRecord, MarketRepository, TradingRepository, ViolationRecord};

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
    /// once done), as a desk replay delivers them (issue 26.2).
    Due(Timestamp, oneshot::Sender<()>),
    /// The health probe: answered with the execution broker's count of working orders as soon
    /// as the runner reaches it (the round trip every command and order takes).
    Probe(oneshot::Sender<usize>),
    /// The order ticket's risk preview: the gate's verdict on an order, nothing placed.
    Preview(ManualOrder, oneshot::Sender<Result<OrderPreview, CommandError>>),
}

struct Runner {
    /// Where trading state is persisted (orders written ahead, the halt latch, positions).
    db: Database,
    /// The settings in effect, applied to the engine as they change.
    settings: watch::Receiver<Arc<Settings>>,
    /// Where what operators are told is published.
    events: Arc<EventBus>,
    /// Market time: what every command, step and write is stamped with.
    market_clock: Arc<dyn Clock>,
    engine: Engine,
    broker: Arc<dyn ExecutionBroker>,
    market: Arc<dyn MarketData>,
    /// The broker's count of working orders, as of its last report or order taken (what the
    /// published view shows).
    broker_open_orders: usize,
    /// The broker's answers owed to the engine: refusals of a submit or a cancel, delivered
    /// with the next reports.
    answers: Vec<BrokerReport>,
    /// Orders whose submit found the broker unavailable: reconciliation looks each up by client
    /// order id and sends it again only if the broker never received it.
    unconfirmed: BTreeMap<ClientOrderId, Timestamp>,
    /// A submit went out since the broker's working orders were last counted.
    recount: bool,
    view: watch::Sender<Arc<EngineView>>,
    anomalies: Vec<String>,
    /// When the current trading session ends (DAY orders expire then).
    session_end: Option<Timestamp>,
    /// Open positions and orders last published during a halt.
    last_progress: Option<(usize, usize)>,
    /// The fill being applied, published as `execution.created` right after its order's update.
    pending_fill: Option<(tradeops_core::orders::ClientOrderId, tradeops_core::orders::Execution)>,
    /// What the last reconciliation pass found wrong (and corrected), in words.
    mismatches: Vec<String>,
    /// The last disagreement corrected, and when: shown once the books agree again.
    last_corrected: Option<(Timestamp, String)>,
    /// Where a crash test stops the process inside an emergency halt (see [`CrashPoint`]).
    crash_point: Option<CrashPoint>,
    /// What the database refused while it was unavailable, written as soon as it is back.
    unsaved: held::Unsaved,
    /// The execution broker's last call failed as unavailable (why, and the venue's own wait):
    /// new operator orders are answered `BROKER_UNAVAILABLE` until a call succeeds again
    /// (reconciliation asks every second, so recovery needs no restart).
    venue_down: Option<(String, Option<Duration>)>,
    /// The command being carried out is an operator's new order (an order or a close): the
    /// broker's answer to its submit becomes the command's answer.
    operator_order: bool,
    /// The command being carried out is an operator's cancel: the broker's refusal of it
    /// (an order it can no longer cancel) becomes the command's answer.
    operator_cancel: bool,
    /// A remote venue (one with an event connection): its requests count against its limit,
    /// so its open orders are listed by reconciliation every [`REMOTE_LISTING_EVERY`] only, not
    /// after every batch nor for every health probe.
    remote: bool,
    /// When a remote venue's open orders were last listed.
    listed_at: Option<tokio::time::Instant>,
    /// When positions and cash were last reconciled with a venue that keeps its own (market
    /// time); `None`: not yet since start.
    account_checked_at: Option<Timestamp>,
    /// What the last positions-and-cash pass found wrong and could not correct, in words.
    account_mismatches: Vec<String>,
    /// The venue's own account figures as last read (a real broker's), with the engine's cash
    /// at that moment.
    venue_account: Option<(tradeops_brokers::VenueAccount, Decimal)>,
    /// This engine's term is over (issue 25: a newer engine took over the database, and its
    /// writes are refused): it sends nothing more to the broker and stops after the input at
    /// hand.
    fenced: bool,
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
}

impl CrashPoint {
    /// The point `TRADEOPS_TEST_CRASH_POINT` names, if any.
    pub fn from_env() -> Option<CrashPoint> {
        match std::env::var("TRADEOPS_TEST_CRASH_POINT").ok()?.as_str() {
            "halt-latched" => Some(CrashPoint::HaltLatched),
            "halt-written-ahead" => Some(CrashPoint::HaltWrittenAhead),
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

/// How often a remote venue's open orders are listed (its request budget is shared with
/// orders: Alpaca allows 200 a minute). While its last call found it unavailable they are
/// listed at every reconciliation instead: that listing is what finds it back, and new orders
/// are refused until it does.
const REMOTE_LISTING_EVERY: Duration = Duration::from_secs(3);

/// How often positions and cash are reconciled with a venue that keeps its own (issue 23: at
/// start and every minute), in market time.
const ACCOUNT_RECONCILE_EVERY: chrono::Duration = chrono::Duration::seconds(60);

/// Restores the engine from `deps.db` and starts its runner, trading through `deps.broker` and
/// marking through `deps.market`; returns the handle commands go through.
pub async fn spawn_engine(deps: EngineDeps) -> anyhow::Result<(EngineHandle, tokio::task::JoinHandle<()>)> {
    let (tx, rx) = mpsc::channel(1024);
    let (view_tx, view_rx) = watch::channel(Arc::new(EngineView::default()));
    let (mut runner, unsent) = restore(deps, view_tx).await?;
    let now = runner.market_clock.now();
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
    let EngineDeps { db, settings, events, market_clock, initial_cash, crash_point, broker, market: market_data } =
        deps;
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
    let remote = broker.connection().is_some();
    let restored = Restored { state: saved, positions, open_orders: open.clone(), blocks, watched };
    let engine = Engine::restore(current, initial_cash, strategy::make, restored, now);
    // An order being cancelled is taken back working, as the broker last knew it: the
    // reconciliation that follows finds its cancel missing and sends it again.
    let unsent = broker.restore(&open, now).await;
    let broker_open_orders = broker.open_orders().await.map(|o| o.len()).unwrap_or_default();
    let session_end = Some(engine.calendar().end_of_trading_day(now));
    let mut runner = Runner {
        db,
        settings,
        events,
        market_clock,
        engine,
        broker,
        market: market_data,
        broker_open_orders,
        answers: Vec::new(),
        unconfirmed: BTreeMap::new(),
        venue_down: None,
        fenced: false,
        operator_order: false,
        operator_cancel: false,
        remote,
        listed_at: None,
        account_checked_at: None,
        account_mismatches: Vec::new(),
        venue_account: None,
        recount: false,
        view,
        anomalies: Vec::new(),
        session_end,
        last_progress: None,
        pending_fill: None,
        mismatches: Vec::new(),
        last_corrected: None,
        crash_point,
        unsaved: held::Unsaved::default(),
    };
    runner.anomalies.clear();
    tracing::info!(open_orders = open.len(), positions = runner.engine.positions().len(), "engine restored");
    Ok((runner, unsent))
}

/// The longest the runner waits for one write: a database that stops answering (a frozen
/// server, a partition) never holds the engine, so the emergency halt behind it still acts at
/// once. A write not answered in time is held and written again (writes are idempotent).
const WRITE_TIMEOUT: Duration = Duration::from_millis(300);

/// A write bounded by [`WRITE_TIMEOUT`]; past it, [`StoreError::TimedOut`].
async fn bounded<T>(write: impl std::future::Future<Output = Result<T, StoreError>>) -> Result<T, StoreError> {
    match tokio::time::timeout(WRITE_TIMEOUT, write).await {
        Ok(result) => result,
        Err(_) => Err(StoreError::TimedOut(WRITE_TIMEOUT)),
    }
}

/// The longest the runner waits for one call to the execution broker: a venue that stops
/// answering never holds the engine (the emergency halt, the health probe and every command
/// wait behind it). A call not answered in time counts as the broker being unavailable.
const BROKER_TIMEOUT: Duration = Duration::from_secs(2);

/// How long an order whose submit found the broker unavailable waits before it is looked up by
/// client order id (and sent again only if the broker does not have it): the venue may still be
/// taking the submit whose reply was lost. Longer when the venue asked for it (`retry_after`).
const RESEND_AFTER: Duration = Duration::from_secs(2);

fn resend_wait(e: &BrokerError) -> chrono::Duration {
    let wait = match e {
        BrokerError::Unavailable { retry_after: Some(after), .. } => (*after).max(RESEND_AFTER),
        _ => RESEND_AFTER,
    };
    chrono::Duration::from_std(wait).unwrap_or(chrono::Duration::seconds(2))
}

/// A broker call bounded by [`BROKER_TIMEOUT`]; past it, [`BrokerError::Unavailable`].
async fn venue<T>(call: impl std::future::Future<Output = Result<T, BrokerError>>) -> Result<T, BrokerError> {
    match tokio::time::timeout(BROKER_TIMEOUT, call).await {
        Ok(answer) => answer,
        Err(_) => {
            Err(BrokerError::Unavailable { reason: format!("no answer within {BROKER_TIMEOUT:?}"), retry_after: None })
        }
    }
}

/// The note an operator's order carries (as its `reject_reason`, while it is looked up) once
/// placing it was answered `BROKER_UNAVAILABLE`: it is never sent again.
const UNANSWERED: &str = "placing it was answered BROKER_UNAVAILABLE: looked up at the broker, never sent again";

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

/// A broker's reports, bounded by [`BROKER_TIMEOUT`]: none this time when it does not answer.
async fn venue_reports(call: impl std::future::Future<Output = Vec<BrokerReport>>) -> Vec<BrokerReport> {
    tokio::time::timeout(BROKER_TIMEOUT, call).await.unwrap_or_else(|_| {
        tracing::warn!("the execution broker did not report within {BROKER_TIMEOUT:?}");
        Vec::new()
    })
}

/// What the operator is answered when the venue (`broker`, by name) refuses `order` for good:
/// a refusal for buying power or shares is `RISK_BLOCKED` under the contract's `BUYING_POWER`
/// rule with the venue's figures (its buying power against the order's cost; or the shares it
/// holds available against those sold); a field it will not take is `VALIDATION_ERROR` naming
/// it (`order` when it named none it could be matched to); anything else is no refusal of the
/// command: the order is answered as placed and reads `REJECTED` with the venue's reason.
fn venue_refusal(order: &Order, reason: &str, kind: Rejection, broker: &str) -> Option<CommandError> {
    let money = |d: Option<Decimal>| d.map(RiskFigure::Money).unwrap_or(RiskFigure::None);
    let shares = |d: Option<Decimal>| {
        d.and_then(|d| rust_decimal::prelude::ToPrimitive::to_u64(&d.trunc()))
            .map(RiskFigure::Shares)
            .unwrap_or(RiskFigure::None)
    };
    let risk = |limit, current| {
        CommandError::Risk(Box::new(RiskRefusal {
            rule: RiskRule::BuyingPower,
            limit,
            current,
            message: format!("The broker ({broker}) refused the order: {reason}"),
        }))
    };
    match kind {
        Rejection::BuyingPower { available, required } => Some(risk(money(available), money(required))),
        Rejection::SharesAvailable { available, requested } => {
            let requested = requested.or(Some(Decimal::from(order.quantity)));
            Some(risk(shares(available), shares(requested)))
        }
        Rejection::Invalid { field } => Some(CommandError::Invalid {
            field: field.unwrap_or("order"),
            reason: format!("refused by the broker ({broker}): {reason}"),
        }),
        Rejection::NotCancellable { .. } | Rejection::Other => None,
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

/// One batch of effects being carried out: what the write-ahead found, and what is left for
/// the batch's end (the reply, the updates to save together, the events to publish once they
/// are saved, the orders refused for want of the write-ahead).
struct Batch {
    now: Timestamp,
    /// The trading mode the batch's orders are stored under.
    mode: TradingMode,
    /// Once a write finds the database unavailable, the batch's other writes are held in
    /// memory rather than each waiting for it: the halt answers at once during an outage.
    reachable: bool,
    written_ahead: bool,
    /// Whether the write-ahead failed because the database is unavailable (else: a bug).
    unsent_because: Option<bool>,
    /// The write-ahead timed out: it may still land.
    ambiguous: bool,
    answers_command: bool,
    /// An operator's order was taken back because it could not be written ahead.
    withdrawn: bool,
    /// The broker's refusal of the operator's order or cancel this batch answers (unavailable,
    /// a risk refusal at the venue, a field it will not take, an order it cannot cancel).
    broker_refusal: Option<CommandError>,
    reply: Option<Result<Reply, CommandError>>,
    state_dirty: bool,
    /// Published after the batch commits: operators see only what is persisted.
    events: Vec<Published>,
    updated_orders: BTreeMap<ClientOrderId, Arc<Order>>,
    updated_positions: BTreeMap<Symbol, Position>,
    refused: Vec<BrokerReport>,
}

impl Batch {
    fn new(fx: &[Effect], now: Timestamp, mode: TradingMode, reachable: bool) -> Batch {
        Batch {
            now,
            mode,
            reachable,
            written_ahead: true,
            unsent_because: None,
            ambiguous: false,
            answers_command: fx.iter().any(|f| matches!(f, Effect::Reply(_))),
            withdrawn: false,
            broker_refusal: None,
            reply: None,
            state_dirty: false,
            events: Vec::new(),
            updated_orders: BTreeMap::new(),
            updated_positions: BTreeMap::new(),
            refused: Vec::new(),
        }
    }

    /// The command's reply: a success becomes `NotPersisted` when any of its orders could not
    /// be written ahead (and so was never sent).
    fn reply(&mut self) -> Option<Result<Reply, CommandError>> {
        let mut reply = self.reply.take();
        if !self.refused.is_empty() || self.withdrawn {
            if let Some(Ok(_)) = reply {
                let unavailable = self.unsent_because.unwrap_or(true);
                let reason = match unavailable {
                    true => "the order could not be written ahead: the database is unavailable, and nothing was sent",
                    false => "the order could not be written ahead, and nothing was sent",
                };
                reply = Some(Err(CommandError::NotPersisted { reason: reason.into(), unavailable }));
            }
        }
        if let (Some(Ok(_)), Some(refusal)) = (&reply, self.broker_refusal.take()) {
            reply = Some(Err(refusal));
        }
        reply
    }
}

impl Runner {
    /// The trading mode of the settings in effect (what orders and state are stored under).
    fn mode(&self) -> TradingMode {
        self.settings.borrow().runtime.trading_mode
    }

    /// Drives every order that was not final at the last stop: an order written ahead that the
    /// broker does not know is sent now, or — while `HALTED`, or when its cancel was already
    /// requested — marked as never sent (`REJECTED`, never sent at all). The books are then
    /// reconciled (a cancel that never reached the broker is sent again), and a standing halt
    /// applied again.
    async fn recover(&mut self, unsent: Vec<ClientOrderId>, now: Timestamp) {
        let halted = self.engine.trading_state() == TradingState::Halted;
        let never_sent = self.send_unknown(unsent, "the service stopped before sending it", now).await;
        if !never_sent.is_empty() {
            tracing::warn!(orders = never_sent.len(), "orders written ahead were never sent; marked REJECTED");
        }
        self.reports(never_sent, now).await;
        // Reconcile first, so what the broker still works against our book is reported as a
        // mismatch (and corrected) before the halt, applied again, cancels it anyway.
        self.reconcile(now).await;
        if halted {
            let (fx, progress) = self.engine.reassert_halt(now);
            tracing::warn!(
                open_orders = progress.open_orders,
                open_positions = progress.open_positions,
                "trading is HALTED: the halt is applied again"
            );
            self.apply(fx, now).await;
        }
    }

    /// Looks up each order by client order id and sends the ones the broker never received,
    /// unless they can no longer be sent: those are returned as `Rejected` reports (never sent,
    /// because of `cause`). An order the broker has is left to its reports; one it cannot be
    /// asked about now stays unconfirmed for the next reconciliation.
    async fn send_unknown(&mut self, ids: Vec<ClientOrderId>, cause: &str, now: Timestamp) -> Vec<BrokerReport> {
        let halted = self.engine.trading_state() == TradingState::Halted;
        let mut never_sent = Vec::new();
        for id in ids {
            let Some(order) = self.engine.order(&id).cloned() else { continue };
            if order.status.is_final() {
                continue;
            }
            let found = venue(self.broker.lookup(&id)).await;
            self.note_venue(&found);
            match found {
                Ok(BrokerLookup::Unknown) => {}
                Ok(_) => continue, // the broker has it: its reports follow
                Err(e) => {
                    tracing::warn!(client_order_id = %id, error = %e, "cannot ask the broker about an order written ahead; asked again later");
                    self.unconfirmed.insert(id, now + resend_wait(&e));
                    continue;
                }
            }
            let calendar = self.engine.calendar();
            let answered_unavailable = order.reject_reason.as_deref() == Some(UNANSWERED);
            let why = if halted {
                Some("trading is HALTED")
            } else if order.status == tradeops_core::orders::OrderStatus::PendingCancel {
                Some("its cancel was requested")
            } else if answered_unavailable {
                Some("placing it was answered BROKER_UNAVAILABLE")
            } else if order.time_in_force == TimeInForce::Ioc {
                Some("an immediate-or-cancel order cannot be sent later")
            } else if order.time_in_force == TimeInForce::Day
                && calendar.date_of(order.created_at) != calendar.date_of(now)
            {
                Some("its trading day has ended")
            } else {
                None
            };
            match why {
                Some(why) => never_sent.push(BrokerReport::Rejected {
                    client_order_id: id,
                    reason: format!("never sent: {cause}, and {why}"),
                    at: now,
                }),
                None => {
                    tracing::info!(client_order_id = %id, "order written ahead but never acknowledged: sending it");
                    let _ = self.send(&order, now).await;
                }
            }
        }
        never_sent
    }

    /// Sends an order to the broker. A refusal becomes the order's rejection (delivered with the
    /// next reports; a refusal for buying power or shares is also a violation row); an
    /// unreachable broker leaves the order as written ahead, for reconciliation to look up and
    /// send again. Returns the broker's refusal, which answers an operator's order.
    async fn send(&mut self, order: &Order, now: Timestamp) -> Option<CommandError> {
        let id = &order.client_order_id;
        if self.fenced {
            return Some(CommandError::EngineStopped);
        }
        self.recount = true;
        let sent = venue(self.broker.submit(order, now)).await;
        self.note_venue(&sent);
        match sent {
            Ok(()) => {
                self.unconfirmed.remove(id);
                None
            }
            Err(BrokerError::AlreadyReceived(_)) => {
                tracing::info!(client_order_id = %id, "the broker already has the order: its reports follow");
                self.unconfirmed.remove(id);
                None
            }
            Err(BrokerError::Unavailable { reason, retry_after }) => {
                tracing::warn!(client_order_id = %id, %reason, "the broker is unavailable: the order stays written ahead for reconciliation");
                let e = BrokerError::Unavailable { reason: reason.clone(), retry_after };
                self.unconfirmed.insert(id.clone(), now + resend_wait(&e));
                let reason = format!(
                    "{reason} (order {id} is looked up: it is marked REJECTED unless the broker received it, and never sent again)"
                );
                Some(CommandError::BrokerUnavailable { reason, retry_after, client_order_id: Some(id.clone()) })
            }
            Err(e @ (BrokerError::Rejected { .. } | BrokerError::UnknownOrder(_))) => {
                tracing::warn!(client_order_id = %id, error = %e, "the broker refused the order");
                self.unconfirmed.remove(id);
                let (reason, kind) = match e {
                    BrokerError::Rejected { reason, kind } => (reason, kind),
                    other => (other.to_string(), Rejection::Other),
                };
                let refusal = venue_refusal(order, &reason, kind, self.broker.name());
                if let Some(CommandError::Risk(risk)) = &refusal {
                    self.venue_violation(order, risk, now).await;
                }
                self.answers.push(BrokerReport::Rejected { client_order_id: id.clone(), reason, at: now });
                refusal
            }
        }
    }

    /// Records the venue's risk refusal of `order` as a violation row (and its event), as the
    /// engine's own gate records its refusals.
    async fn venue_violation(&mut self, order: &Order, refusal: &RiskRefusal, now: Timestamp) {
        let violation = Effect::Violation {
            rule: refusal.rule,
            symbol: order.symbol.clone(),
            client_order_id: Some(order.client_order_id.clone()),
            detail: tradeops_core::risk::ViolationDetail::of(refusal),
        };
        Box::pin(self.apply(vec![violation], now)).await;
    }

    /// Notes a write that failed: an outage for the database's availability, and a refusal of
    /// this engine's term (see [`Runner::fenced`]) as the end of this engine.
    fn write_failed(&mut self, e: &StoreError) {
        self.db.writes_failed(e);
        if let StoreError::Fenced { epoch } = e {
            self.fence_lost(*epoch, "its write was refused");
        }
    }

    /// This engine's term `epoch` is over: from now on it sends nothing to the broker, and it
    /// stops after the input at hand.
    fn fence_lost(&mut self, epoch: i64, how: &str) {
        if !self.fenced {
            tracing::error!(
                epoch,
                "a newer engine took over the database ({how}): this engine sends and writes nothing more, and stops"
            );
        }
        self.fenced = true;
    }

    /// Notes whether the execution broker answered: a call that found it unavailable marks it
    /// down (new operator orders are refused until a call succeeds); any answer marks it up.
    fn note_venue<T>(&mut self, answer: &Result<T, BrokerError>) {
        match answer {
            Err(BrokerError::Unavailable { reason, retry_after }) => {
                if self.venue_down.is_none() {
                    tracing::warn!(%reason, "the execution broker is unavailable: new orders are refused until it answers");
                }
                self.venue_down = Some((reason.clone(), *retry_after));
            }
            _ => {
                if self.venue_down.take().is_some() {
                    tracing::info!("the execution broker answers again: new orders are taken");
                }
            }
        }
    }

    /// Asks the broker to cancel an order. A refusal becomes a `CancelRejected` report; an
    /// unreachable broker leaves the cancel to reconciliation, which finds it missing and sends
    /// it again. A broker that does not know an order whose submit it never confirmed says
    /// nothing yet: the order stays cancelling, and reconciliation looks it up — never sent, it
    /// is then marked so and never sent.
    async fn cancel_at_broker(&mut self, id: &ClientOrderId, now: Timestamp) -> Option<CommandError> {
        if self.fenced {
            return Some(CommandError::EngineStopped);
        }
        let answer = venue(self.broker.cancel(id, now)).await;
        self.note_venue(&answer);
        match answer {
            Ok(()) => None,
            Err(e) if e.is_retryable() => {
                tracing::warn!(client_order_id = %id, error = %e, "cancel not sent: reconciliation sends it again");
                None
            }
            Err(BrokerError::UnknownOrder(_)) if self.unconfirmed.contains_key(id) => {
                tracing::info!(client_order_id = %id, "cancel of an order the broker never confirmed: reconciliation looks it up");
                None
            }
            Err(e) => {
                tracing::warn!(client_order_id = %id, error = %e, "the broker refused the cancel");
                let (reason, refusal) = match e {
                    BrokerError::Rejected { reason, kind: Rejection::NotCancellable { filled } } => {
                        let status = match (filled, self.engine.order(id)) {
                            (true, _) => OrderStatus::Filled,
                            (false, Some(order)) => order.status,
                            (false, None) => OrderStatus::Canceled,
                        };
                        (reason, Some(CommandError::NotCancellable { status }))
                    }
                    BrokerError::Rejected { reason, .. } => (reason, None),
                    other => (other.to_string(), None),
                };
                self.answers.push(BrokerReport::CancelRejected { client_order_id: id.clone(), reason, at: now });
                refusal
            }
        }
    }

    /// Brings the count of the broker's working orders up to date (kept when it cannot be read).
    async fn count_broker_orders(&mut self) {
        self.recount = false;
        let open = venue(self.broker.open_orders()).await;
        self.note_venue(&open);
        if let Ok(open) = open {
            self.broker_open_orders = open.len();
        }
    }

    /// Compares the broker's open orders with the engine's and corrects what disagrees: a
    /// working broker order the engine holds cancelled (or ended), or is cancelling with no
    /// cancel on its way, is cancelled at the broker. While `HALTED`, an incomplete halt is
    /// applied again (orders cancelled, exits sent) until nothing is open.
    async fn reconcile(&mut self, now: Timestamp) {
        // Orders whose submit found the broker unavailable, once their wait is over (the venue
        // may still be taking a submit whose reply was lost).
        let due: Vec<ClientOrderId> =
            self.unconfirmed.iter().filter(|(_, after)| **after <= now).map(|(id, _)| id.clone()).collect();
        if !due.is_empty() {
            for id in &due {
                self.unconfirmed.remove(id);
            }
            let unconfirmed = due;
            let cause = "the broker could not be reached when it was sent";
            let never_sent = self.send_unknown(unconfirmed, cause, now).await;
            self.reports(never_sent, now).await;
        }
        let listing_due = !self.remote
            || self.venue_down.is_some()
            || self.listed_at.is_none_or(|at| at.elapsed() >= REMOTE_LISTING_EVERY);
        if listing_due {
            self.listed_at = Some(tokio::time::Instant::now());
            self.reconcile_orders(now).await;
        }
        if self.account_checked_at.is_none_or(|at| now - at >= ACCOUNT_RECONCILE_EVERY) {
            self.reconcile_account(now).await;
        }
        if self.engine.trading_state() == TradingState::Halted && !self.engine.halt_progress().is_complete() {
            let (fx, _) = self.engine.reassert_halt(now);
            if !fx.is_empty() {
                self.apply(fx, now).await;
            }
        }
    }

    /// Compares the broker's open orders with the engine's and corrects what disagrees (see
    /// [`Runner::reconcile`]).
    async fn reconcile_orders(&mut self, now: Timestamp) {
        let open = venue(self.broker.open_orders()).await;
        self.note_venue(&open);
        match open {
            Ok(open) => {
                self.broker_open_orders = open.len();
                let found = tradeops_core::reconcile::compare(self.engine.orders(), &open);
                let described: Vec<String> = found.iter().map(Discrepancy::describe).collect();
                let mut adopted = Vec::new();
                for (d, text) in found.iter().zip(&described) {
                    // Logged when first found, not at every pass while it lasts.
                    if !self.mismatches.contains(text) {
                        tracing::warn!(client_order_id = %d.client_order_id(), "reconciliation: {text}");
                    }
                    match d {
                        Discrepancy::LiveButEnded { client_order_id, .. }
                        | Discrepancy::CancelNotSent { client_order_id } => {
                            self.cancel_at_broker(client_order_id, now).await;
                            self.last_corrected = Some((now, text.clone()));
                        }
                        Discrepancy::Unknown { client_order_id } => {
                            if self.adopt_foreign_order(client_order_id, now).await {
                                adopted.push(text.clone());
                            }
                        }
                        Discrepancy::Missing { .. } => {}
                    }
                }
                self.mismatches = described.into_iter().filter(|t| !adopted.contains(t)).collect();
            }
            Err(e) => tracing::warn!(error = %e, "reconciliation skipped: the broker's open orders could not be read"),
        }
    }

    /// Adopts a working broker order the engine does not know (CONTRACT §10: reason "adopted
    /// from broker", no strategy); whether it was.
    async fn adopt_foreign_order(&mut self, id: &ClientOrderId, now: Timestamp) -> bool {
        let found = venue(self.broker.foreign_order(id)).await;
        if !matches!(found, Ok(None)) {
            self.note_venue(&found);
        }
        match found {
            Ok(Some(order)) => {
                let (symbol, side, quantity) = (order.symbol.clone(), order.side, order.quantity);
                let fx = self.engine.adopt_order(order);
                if fx.is_empty() {
                    return false;
                }
                tracing::warn!(client_order_id = %id, %symbol, ?side, quantity, "reconciliation: adopted a broker order tradeops did not place");
                self.apply(fx, now).await;
                self.recount = true;
                self.last_corrected = Some((now, format!("order {id} working at the broker was adopted")));
                true
            }
            Ok(None) => false,
            Err(e) => {
                tracing::warn!(client_order_id = %id, error = %e, "a broker order tradeops did not place could not be read");
                false
            }
        }
    }

    /// Reconciles positions and cash with a venue that keeps its own (a real broker; the paper
    /// broker keeps none, and nothing is done). The account is read first, then the positions:
    /// - a position held at the broker and not here is adopted (managed by hand, `Halted`);
    /// - a quantity that differs is a mismatch shown until it agrees (symbols with orders in
    ///   flight are left alone: their fills may be on their way);
    /// - when every holding agrees (ours counted the broker's fills up to the positions read,
    ///   hence up to the account read before it) and no submit is unconfirmed, the broker's cash
    ///   is taken for the engine's: its fees and transfers reach no fill.
    ///
    /// The venue's account figures are kept for the account screen.
    async fn reconcile_account(&mut self, now: Timestamp) {
        let account = match venue(self.broker.account()).await {
            // A venue without books of its own: nothing to reconcile, now or later (and no
            // answer from it, so nothing learned about whether it is reachable).
            Ok(None) => {
                self.account_checked_at = Some(now);
                return;
            }
            Ok(Some(account)) => {
                self.note_venue(&Ok::<(), BrokerError>(()));
                account
            }
            Err(e) => {
                self.note_venue(&Err::<(), BrokerError>(e.clone()));
                tracing::warn!(error = %e, "positions and cash not reconciled: the broker's account could not be read");
                return;
            }
        };
        let positions = match venue(self.broker.positions()).await {
            Ok(positions) => {
                self.note_venue(&Ok::<(), BrokerError>(()));
                positions.unwrap_or_default()
            }
            Err(e) => {
                self.note_venue(&Err::<(), BrokerError>(e.clone()));
                tracing::warn!(error = %e, "positions not reconciled: the broker's positions could not be read");
                return;
            }
        };
        self.account_checked_at = Some(now);
        let in_flight: BTreeSet<Symbol> = self
            .engine
            .orders()
            .values()
            .filter(|o| !o.status.is_final() || self.unconfirmed.contains_key(&o.client_order_id))
            .map(|o| o.symbol.clone())
            .collect();
        let theirs: BTreeMap<Symbol, &tradeops_brokers::VenuePosition> =
            positions.iter().map(|p| (p.symbol.clone(), p)).collect();
        let mut symbols: BTreeSet<Symbol> = theirs.keys().cloned().collect();
        symbols.extend(self.engine.positions().values().filter(|p| !p.is_flat()).map(|p| p.symbol.clone()));
        let mut mismatches = Vec::new();
        let mut all_agree = true;
        for symbol in symbols {
            let ours = self.engine.positions().get(&symbol).map(|p| p.quantity).unwrap_or(0);
            let (quantity, price) = theirs.get(&symbol).map(|p| (p.quantity, p.average_price)).unwrap_or_default();
            if quantity >= 0 && quantity as u64 == ours {
                continue;
            }
            if in_flight.contains(&symbol) {
                all_agree = false;
                continue;
            }
            match quantity {
                q if q < 0 => mismatches.push(format!(
                    "{symbol}: short {} shares at the broker; tradeops trades long only (manage it at the broker)",
                    -q
                )),
                // Adopted: the holdings agree from now on.
                q if ours == 0 => {
                    let fx = self.engine.adopt_position(&symbol, q as u64, price, now);
                    tracing::warn!(%symbol, shares = q, %price, "reconciliation: adopted a position tradeops did not open");
                    self.apply(fx, now).await;
                    self.last_corrected =
                        Some((now, format!("{symbol}: {q} shares held at the broker were adopted (managed by hand)")));
                }
                q => mismatches.push(format!("{symbol}: {ours} shares here, {q} at the broker")),
            }
        }
        for text in mismatches.iter().filter(|t| !self.account_mismatches.contains(t)) {
            tracing::warn!("reconciliation: {text}");
        }
        if all_agree && mismatches.is_empty() && self.unconfirmed.is_empty() {
            let fx = self.engine.adopt_cash(account.cash);
            self.apply(fx, now).await;
        }
        self.account_mismatches = mismatches;
        self.venue_account = Some((account, self.engine.cash()));
    }

    /// Carries out an operator's (or the allocator's) command at market time `now`: the
    /// broker's due reports first, then the engine's decision, written ahead and sent.
    async fn command(&mut self, command: Command, now: Timestamp) -> Result<Reply, CommandError> {
        if needs_storage(&command) && !self.db.is_writable() {
            let reason = "the database is unavailable: this change could not be stored, so it was not made";
            return Err(CommandError::NotPersisted { reason: reason.into(), unavailable: true });
        }
        self.broker_reports(now).await;
        let places = matches!(command, Command::PlaceOrder(_) | Command::ClosePosition { .. });
        let cancels = matches!(command, Command::CancelOrder { .. });
        if let (true, Some((reason, retry_after))) = (places, &self.venue_down) {
            // Nothing is written or counted: the refusal changes nothing.
            return Err(CommandError::BrokerUnavailable {
                reason: reason.clone(),
                retry_after: *retry_after,
                client_order_id: None,
            });
        }
        if let Command::PlaceOrder(order) = &command {
            // The engine values orders at the last trade: mark the symbol first.
            if self.market.instrument(&order.symbol).is_none() {
                let unknown = format!("{} is not a symbol of the {} market", order.symbol, self.market.name());
                return Err(CommandError::NotFound(unknown));
            }
            if let Some(snapshot) = market_now(self.market.snapshot(&order.symbol)).await {
                let fx = self
                    .engine
                    .handle(Event::Mark { symbol: order.symbol.clone(), price: snapshot.last.to_decimal() }, now);
                self.apply(fx, now).await;
            }
        }
        let fx = self.engine.handle(Event::Command(command), now);
        (self.operator_order, self.operator_cancel) = (places, cancels);
        let answer = self.apply(fx, now).await;
        (self.operator_order, self.operator_cancel) = (false, false);
        // Taken over meanwhile: what was left of the command was neither stored nor sent.
        let answer = if self.fenced { Some(Err(CommandError::EngineStopped)) } else { answer };
        answer.unwrap_or(Err(CommandError::NotFound("no reply".into())))
    }

    async fn run(&mut self, mut rx: mpsc::Receiver<Input>) {
        // Changes from now on: the engine was restored with the settings in effect.
        let mut settings = self.settings.clone();
        settings.borrow_and_update();
        let mut tick = tokio::time::interval(Duration::from_millis(20));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut check = tokio::time::interval(RECONCILE_EVERY);
        check.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let waiting = self.broker.reports_waiting();
        loop {
            tokio::select! {
                input = rx.recv() => match input {
                    Some(Input::Command(command, reply)) => {
                        let now = self.market_clock.now();
                        let _ = reply.send(self.command(command, now).await);
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
                        let _ = reply.send(self.preview(&order).await);
                    }
                    Some(Input::Probe(reply)) if self.remote => {
                        // Reconciliation's last listing: a probe spends none of the venue's budget.
                        let _ = reply.send(self.broker_open_orders);
                    }
                    Some(Input::Probe(reply)) => {
                        let open = venue(self.broker.open_orders()).await;
                        self.note_venue(&open);
                        let open = open.map(|o| o.len());
                        let _ = reply.send(open.unwrap_or(self.broker_open_orders));
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
                    self.check_term().await;
                    self.apply_halt_requests(now).await;
                    if !self.unsaved.is_empty() && self.db.is_writable() {
                        self.save_unsaved(now).await;
                    }
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
            if self.fenced {
                tracing::error!("the trading engine stopped: its term is over");
                return;
            }
        }
    }

    /// Applies the emergency halts another node of a cluster accepted and stored
    /// (`halt_requests`) — at start, before anything else, and every [`RECONCILE_EVERY`] — then
    /// marks them applied by this term. PostgreSQL only: on SQLite no other node accepts any.
    /// A database that cannot answer is asked again at the next check.
    async fn apply_halt_requests(&mut self, now: Timestamp) {
        let Some(epoch) = self.db.fence() else { return };
        if self.db.backend() != tradeops_store::Backend::Postgres || self.fenced {
            return;
        }
        let pending = match tokio::time::timeout(WRITE_TIMEOUT, self.db.pending_halts()).await {
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
        if !self.fenced {
            if let Err(e) = self.db.mark_halts_applied(last, epoch, to_epoch_ms(&now)).await {
                tracing::warn!(error = %e, "halt requests applied but not marked: applied again at the next check (a halt repeats safely)");
            }
        }
        self.publish();
    }

    /// Asks the database whose term it is (every [`RECONCILE_EVERY`]): an engine that has
    /// nothing to write learns of a takeover too. A database that cannot answer says nothing.
    async fn check_term(&mut self) {
        let Some(ours) = self.db.fence() else { return };
        if let Ok(Ok((current, holder))) = tokio::time::timeout(WRITE_TIMEOUT, self.db.engine_epoch()).await {
            if current != ours {
                let how = format!("term {current} taken by {}", holder.as_deref().unwrap_or("another engine"));
                self.fence_lost(ours, &how);
            }
        }
    }

    /// Delivers due acks and cancels and expires DAY orders at the end of the trading day. An
    /// order just acknowledged meets the current quote at once (quotes are continuous; prints
    /// come every 15 market seconds).
    async fn broker_reports(&mut self, now: Timestamp) -> bool {
        let mut reports = std::mem::take(&mut self.answers);
        reports.extend(venue_reports(self.broker.poll(now)).await);
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
                let update = MarketUpdate { symbol, at: now, last: snapshot.last, quote: snapshot.quote, bar: None };
                reports.extend(venue_reports(self.broker.on_market(&update)).await);
            }
        }
        // DAY orders expire when the trading session ends (NYSE: the after-hours close).
        let calendar = self.engine.calendar();
        if self.session_end.is_some_and(|end| now >= end) {
            reports.extend(venue_reports(self.broker.expire_day_orders(now)).await);
        }
        if self.session_end.is_none_or(|end| now >= end) {
            self.session_end = Some(calendar.end_of_trading_day(now));
        }
        let any = !reports.is_empty();
        if any && !self.remote {
            self.count_broker_orders().await;
        }
        self.reports(reports, now).await;
        any
    }

    async fn reports(&mut self, reports: Vec<BrokerReport>, now: Timestamp) {
        for report in reports {
            let id = report.client_order_id();
            if self.engine.order(id).is_none() && self.adopt_foreign_order(&id.clone(), now).await {
                // An order placed at the broker by someone else: adopted as the broker has it
                // now, which already holds what this report says.
                continue;
            }
            if self.unconfirmed.contains_key(id) {
                if let BrokerReport::CancelRejected { reason, .. } = &report {
                    // The broker cannot cancel what it may never have received: reconciliation
                    // looks the order up (never sent and cancelling: it is not sent).
                    tracing::info!(client_order_id = %id, %reason, "cancel of an order the broker never confirmed: reconciliation looks it up");
                    continue;
                }
                // Any other report of the order says the broker has it.
                self.unconfirmed.remove(&id.clone());
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
        while let Some(due) = self.broker.next_due().filter(|d| in_time(d) && Some(*d) != last) {
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

    async fn market_step(&mut self, at: Timestamp, bar_closed: bool) {
        self.broker_reports(at).await;
        for symbol in self.relevant() {
            let Some(snapshot) = market_now(self.market.snapshot(&symbol)).await else { continue };
            let closed = if bar_closed { market_now(self.market.last_closed_bar(&symbol)).await } else { None };
            let bar = closed.map(|c| c.bar);
            let update =
                MarketUpdate { symbol: &symbol, at, last: snapshot.last, quote: snapshot.quote, bar: bar.as_ref() };
            let reports = venue_reports(self.broker.on_market(&update)).await;
            if !reports.is_empty() {
                self.count_broker_orders().await;
            }
            self.reports(reports, at).await;
            let fx = self.engine.handle(Event::Mark { symbol: symbol.clone(), price: snapshot.last.to_decimal() }, at);
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

    /// Carries out effects in order; returns the command's reply when there is one.
    ///
    /// The trading state latch is persisted first; every new order of the batch is persisted
    /// (one transaction) before any is sent; broker calls then follow the effects' order (an
    /// emergency halt's cancels go out before its exits); order and position updates are saved
    /// together at the end of the batch, and only then are the batch's events published.
    async fn apply(&mut self, fx: Vec<Effect>, now: Timestamp) -> Option<Result<Reply, CommandError>> {
        let mut batch = Batch::new(&fx, now, self.mode(), self.db.is_writable());
        let halting = fx.iter().any(|f| matches!(f, Effect::TradingStateChanged { state: TradingState::Halted, .. }));
        self.persist_latch(&fx, &mut batch).await;
        if halting {
            CrashPoint::crash_if(self.crash_point, CrashPoint::HaltLatched);
        }
        self.write_ahead(&fx, &mut batch).await;
        if halting {
            CrashPoint::crash_if(self.crash_point, CrashPoint::HaltWrittenAhead);
        }
        for effect in fx {
            self.carry_out(effect, &mut batch).await;
        }
        self.save_batch(&mut batch).await;
        if self.recount && !self.remote {
            self.count_broker_orders().await;
        }
        let reply = batch.reply();
        if !self.fenced {
            self.publish_events(std::mem::take(&mut batch.events));
        } else {
            // Taken over: what the batch changed is the new engine's to tell, from what was stored.
            batch.events.clear();
        }
        for report in batch.refused {
            let more = self.engine.handle(Event::Broker(report), now);
            Box::pin(self.apply(more, now)).await;
        }
        reply
    }

    /// Persists the trading state first when the batch changes it (the halt latch): held in
    /// memory when the database cannot take it, and written when it is back.
    async fn persist_latch(&mut self, fx: &[Effect], batch: &mut Batch) {
        let (now, reachable) = (batch.now, batch.reachable);
        let repo: &dyn TradingRepository = &self.db;
        if fx.iter().any(|f| matches!(f, Effect::TradingStateChanged { .. })) {
            let saved = match reachable {
                true => bounded(repo.save_engine_state(&self.state_record(now))).await,
                false => Err(StoreError::Unavailable("the database is unavailable".into())),
            };
            if let Err(e) = saved {
                tracing::error!(error = %e, "trading state not persisted yet: held in memory, written when the database is back");
                self.write_failed(&e);
                batch.reachable &= !e.is_unavailable();
                self.unsaved.state = true;
                self.unsaved.outage = true;
            }
        }
    }

    /// Writes the batch's new orders ahead (one transaction) before any is sent, and notes
    /// whether that worked and, if not, why.
    async fn write_ahead(&mut self, fx: &[Effect], batch: &mut Batch) {
        let (now, mode) = (batch.now, batch.mode.as_str());
        let date = self.engine.calendar().date_of(now).to_string();
        let repo: &dyn TradingRepository = &self.db;
        let new_orders: Vec<_> = fx
            .iter()
            .filter_map(|f| if let Effect::Submit(o) = f { Some(tradeops_core::orders::Order::clone(o)) } else { None })
            .collect();
        batch.state_dirty = !new_orders.is_empty();
        batch.written_ahead = match (new_orders.is_empty(), batch.reachable) {
            (true, _) => true,
            (false, false) => false,
            (false, true) => match bounded(repo.save_orders(&new_orders, mode, &date)).await {
                Ok(()) => true,
                Err(e) => {
                    tracing::error!(error = %e, orders = new_orders.len(), "orders not written ahead");
                    self.write_failed(&e);
                    batch.unsent_because = Some(e.is_unavailable());
                    // A write that did not answer in time may still land: its orders are
                    // rejected (and that stored later) rather than taken back without a trace.
                    batch.ambiguous = matches!(e, StoreError::TimedOut(_));
                    batch.reachable &= !e.is_unavailable();
                    false
                }
            },
        };
    }

    /// Carries out one effect: broker calls at once, writes at once (or held), events and
    /// order and position updates kept in `batch` for its end.
    async fn carry_out(&mut self, effect: Effect, batch: &mut Batch) {
        let now = batch.now;
        match effect {
            Effect::TradingStateChanged { state, halt } => {
                tracing::warn!(?state, "trading state changed");
                batch.events.push(Published::RiskStateChanged(RiskChange::TradingState { state, halt }));
            }
            Effect::Submit(order) => self.submit(order, batch).await,
            Effect::Cancel(id) => {
                let refusal = self.cancel_at_broker(&id, now).await;
                if self.operator_cancel && batch.answers_command {
                    batch.broker_refusal = batch.broker_refusal.take().or(refusal);
                }
            }
            Effect::OrderUpdated(order) => {
                batch.events.push(Published::OrderUpdated {
                    order: order.clone(),
                    mode: batch.mode,
                    broker: self.broker.name(),
                });
                if let Some((_, e)) = self.pending_fill.take_if(|(id, _)| *id == order.client_order_id) {
                    batch.events.push(Published::ExecutionCreated {
                        client_order_id: order.client_order_id.clone(),
                        symbol: order.symbol.clone(),
                        side: order.side,
                        execution: e,
                    });
                }
                batch.updated_orders.insert(order.client_order_id.clone(), order);
            }
            Effect::PositionUpdated { position, status } => {
                let levels = self.engine.position_levels(&position.symbol);
                batch.events.push(Published::PositionUpdated { position: position.clone(), status, levels });
                batch.updated_positions.insert(position.symbol.clone(), position);
            }
            Effect::WatchUpdated { symbol, status, reason } => {
                let change = WatchlistChange::Status { symbol: symbol.clone(), status, reason: reason.clone() };
                batch.events.push(Published::WatchlistUpdated(change));
                let write = HeldWrite::WatchStatus { symbol, status, reason, at: now };
                self.write_or_hold(write, &mut batch.reachable).await;
            }
            Effect::WatchStarted { symbol, source, strategy_id, strategy_version, at } => {
                let change = WatchlistChange::Started { symbol: symbol.clone(), source: source.clone(), at };
                batch.events.push(Published::WatchlistUpdated(change));
                let row = tradeops_store::WatchRecord {
                    symbol: symbol.to_string(),
                    source,
                    strategy_id,
                    strategy_version,
                    strategy_status: StrategyStatus::Active.as_str().into(),
                    polling_status: "POLLING".into(),
                    time_added: to_epoch_ms(&at),
                    time_closed: None,
                    time_completed: None,
                    reason: None,
                };
                self.write_or_hold(HeldWrite::WatchStarted(row), &mut batch.reachable).await;
            }
            Effect::BlockPlaced { symbol, block } => {
                let change = RiskChange::Blocked { symbol: symbol.clone(), block: block.clone() };
                batch.events.push(Published::RiskStateChanged(change));
                let record = tradeops_store::BlockRecord {
                    block_id: 0,
                    symbol: symbol.to_string(),
                    block_scope: block.scope.clone(),
                    reason: block.reason.clone(),
                    actor: block.actor.clone(),
                    effective_from: to_epoch_ms(&block.effective_from),
                    expires_at: block.expires_at.as_ref().map(to_epoch_ms),
                };
                self.write_or_hold(HeldWrite::Block { record, at: now }, &mut batch.reachable).await;
            }
            Effect::BlockLifted { symbol, reason, actor } => {
                let change =
                    RiskChange::Unblocked { symbol: symbol.clone(), reason: reason.clone(), actor: actor.clone() };
                batch.events.push(Published::RiskStateChanged(change));
                self.write_or_hold(HeldWrite::Unblock { symbol, reason, actor, at: now }, &mut batch.reachable).await;
            }
            Effect::Violation { rule, symbol, client_order_id, detail } => {
                let record = ViolationRecord {
                    violation_id: 0,
                    ts: to_epoch_ms(&now),
                    rule: rule.as_str().to_string(),
                    symbol: Some(symbol.to_string()),
                    client_order_id: client_order_id.as_ref().map(|c| c.to_string()),
                    detail: serde_json::to_string(&detail).unwrap_or_default(),
                };
                batch.events.push(Published::RiskViolation(Violation {
                    rule,
                    symbol,
                    client_order_id,
                    detail,
                    at: now,
                }));
                self.write_or_hold(HeldWrite::Violation(record), &mut batch.reachable).await;
            }
            Effect::Decision { symbol, rule, text } => tracing::info!(%symbol, rule, "{text}"),
            Effect::DayRolled { date } => {
                tracing::info!(%date, "trading day rolled");
                batch.state_dirty = true;
            }
            Effect::HaltStoppedChanged { symbols } => {
                batch.events.push(Published::RiskStateChanged(RiskChange::StoppedByHalt { symbols }));
                batch.state_dirty = true;
            }
            Effect::CashAdopted { cash, what } => {
                tracing::info!(%cash, "reconciliation: {what}");
                batch.state_dirty = true;
                self.last_corrected = Some((now, what));
            }
            Effect::Anomaly(message) => {
                tracing::warn!("{message}");
                self.anomalies.push(message);
            }
            Effect::Reply(r) => batch.reply = Some(r),
        }
    }

    /// Sends a new order when it was written ahead. When it could not be: an emergency halt's
    /// exit is sent anyway, an operator's order taken back, a strategy's rejected.
    async fn submit(&mut self, order: Arc<Order>, batch: &mut Batch) {
        let now = batch.now;
        match order {
            order if batch.written_ahead => {
                let refusal = self.send(&order, now).await;
                if let Some(refusal) = refusal.filter(|_| self.operator_order && batch.answers_command) {
                    if matches!(refusal, CommandError::BrokerUnavailable { .. }) {
                        // Stored with the order: looked up, never sent again, even after a restart.
                        for effect in self.engine.note_unanswered(&order.client_order_id, UNANSWERED) {
                            Box::pin(self.carry_out(effect, batch)).await;
                        }
                    }
                    batch.broker_refusal = Some(refusal);
                }
                let order = self.engine.order(&order.client_order_id).cloned().unwrap_or(order);
                batch.events.push(Published::OrderUpdated { order, mode: batch.mode, broker: self.broker.name() });
            }
            order if is_liquidation(&order) => {
                // The emergency halt's exits go out even when they cannot be written ahead:
                // a halt acts at once, whatever the database. Written when it is back.
                tracing::warn!(client_order_id = %order.client_order_id, "halt exit sent before it could be written");
                self.unsaved.outage = true;
                let _ = self.send(&order, now).await;
                self.unsaved.orders.insert(order.client_order_id.clone(), order);
            }
            // An operator's order (the batch answers a command) is taken back, so the 503
            // changes nothing; a strategy's is rejected, which its strategy sees.
            order
                if batch.answers_command && !batch.ambiguous && self.engine.withdraw_unsent(&order.client_order_id) =>
            {
                batch.withdrawn = true;
            }
            order => batch.refused.push(BrokerReport::Rejected {
                client_order_id: order.client_order_id.clone(),
                reason: "not sent: it could not be written ahead (the database is unavailable)".into(),
                at: now,
            }),
        }
    }

    /// Saves the batch's order and position updates and the engine state together (held in
    /// memory while the database cannot take them).
    async fn save_batch(&mut self, batch: &mut Batch) {
        if !batch.updated_orders.is_empty() || !batch.updated_positions.is_empty() || batch.state_dirty {
            self.unsaved.orders.extend(std::mem::take(&mut batch.updated_orders));
            self.unsaved.positions.extend(std::mem::take(&mut batch.updated_positions));
            self.unsaved.state = true;
        }
        if !self.unsaved.is_empty() && batch.reachable {
            self.save_unsaved(batch.now).await;
        }
    }

    /// Publishes the engine's view, then the batch's events, then the halt's progress:
    /// operators see a change only once it is persisted.
    fn publish_events(&mut self, events: Vec<Published>) {
        self.publish();
        for event in events {
            self.events.publish(event);
        }
        self.halt_progress();
    }

    /// Writes what is held in memory: orders, positions and the engine state in one
    /// transaction (a fill is never stored without its position or its cash), then the other
    /// held writes in order. What fails stays held for the next try.
    async fn save_unsaved(&mut self, now: Timestamp) {
        let mode = self.mode().as_str();
        let date = self.engine.calendar().date_of(now).to_string();
        let repo: &dyn TradingRepository = &self.db;
        let orders: Vec<_> = self.unsaved.orders.values().map(|o| tradeops_core::orders::Order::clone(o)).collect();
        let positions: Vec<_> = self.unsaved.positions.values().cloned().collect();
        if let Err(e) = bounded(repo.save_batch(&orders, &positions, &self.state_record(now), mode, &date)).await {
            tracing::error!(error = %e, orders = orders.len(), positions = positions.len(), "batch not persisted yet: held in memory");
            self.write_failed(&e);
            self.unsaved.outage = true;
            return;
        }
        let held = (orders.len(), positions.len());
        self.unsaved.orders.clear();
        self.unsaved.positions.clear();
        self.unsaved.state = false;
        while let Some(write) = self.unsaved.writes.front() {
            if let Err(e) = bounded(write.write(&self.db)).await {
                tracing::error!(error = %e, "held writes not stored yet");
                self.write_failed(&e);
                return;
            }
            self.unsaved.writes.pop_front();
        }
        if std::mem::take(&mut self.unsaved.dropped) > 0 {
            tracing::error!("writes beyond the held bound during the outage were not kept");
        }
        if std::mem::take(&mut self.unsaved.outage) {
            tracing::warn!(
                orders = held.0,
                positions = held.1,
                "the writes held during the database outage are stored"
            );
        }
    }

    fn state_record(&self, now: Timestamp) -> EngineStateRecord {
        let e = &self.engine;
        EngineStateRecord {
            state: serde_json::to_value(e.trading_state())
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default(),
            halted_at: e.halt().map(|h| to_epoch_ms(&h.at)),
            halt_reason: e.halt().map(|h| h.reason.clone()),
            halt_actor: e.halt().map(|h| h.actor.clone()),
            halt_stopped: e.halt_stopped().iter().map(|s| s.to_string()).collect(),
            trading_date: e.day().date.map(|d| d.to_string()),
            trades_today: e.day().trades_today.into(),
            realized_today: e.day().realized_today,
            start_equity: e.day().start_equity,
            peak_equity: e.day().peak_equity,
            cash: e.cash(),
            updated_at: to_epoch_ms(&now),
            order_sequence: e.order_sequence() as i64,
        }
    }

    /// Writes now while the database takes writes; otherwise (or when this write finds it
    /// unavailable) holds the write for [`Runner::save_unsaved`]. Writes are kept in order:
    /// while any is held, the next is held behind it.
    async fn write_or_hold(&mut self, write: HeldWrite, reachable: &mut bool) {
        if *reachable && self.unsaved.writes.is_empty() {
            match bounded(write.write(&self.db)).await {
                Ok(()) => return,
                Err(e) if e.is_unavailable() => {
                    tracing::error!(error = %e, "write held until the database is back");
                    self.write_failed(&e);
                    *reachable = false;
                }
                Err(e) => {
                    tracing::error!(error = %e, ?write, "write failed");
                    self.write_failed(&e);
                    return;
                }
            }
        }
        self.unsaved.hold(write);
    }

    /// While halted, each change of what is still open is published, until flat.
    fn halt_progress(&mut self) {
        if self.engine.trading_state() != TradingState::Halted {
            self.last_progress = None;
            return;
        }
        let positions = self.engine.positions().values().filter(|p| !p.is_flat()).count();
        let orders = self.engine.orders().values().filter(|o| !o.status.is_final()).count();
        if self.last_progress == Some((positions, orders)) {
            return;
        }
        self.last_progress = Some((positions, orders));
        let progress = RiskChange::Liquidation { open_positions: positions, open_orders: orders };
        self.events.publish(Published::RiskStateChanged(progress));
    }

    fn publish(&self) {
        let e = &self.engine;
        let limits = &e.settings().risk_controls;
        let positions = e
            .positions()
            .values()
            .filter(|p| !p.is_flat())
            .map(|p| {
                let mark = e
                    .market()
                    .get(&p.symbol)
                    .map(|m| m.last)
                    .filter(|m| *m > Decimal::ZERO)
                    .or(p.average_entry_price())
                    .unwrap_or_default();
                PositionView {
                    alert_level: p.alert_level(mark, limits),
                    status: e.position_status(&p.symbol),
                    levels: e.position_levels(&p.symbol),
                    mark,
                    position: p.clone(),
                }
            })
            .collect();
        let reserved: Decimal = e
            .orders()
            .values()
            .filter(|o| !o.status.is_final() && o.side == Side::Buy)
            .map(|o| Decimal::from(o.remaining()) * o.limit_price.or(o.stop_price).unwrap_or_default())
            .sum();
        let broker_open_orders = self.broker_open_orders;
        let (status, detail) = if let Some(anomaly) = self.anomalies.last() {
            ("MISMATCH", anomaly.clone())
        } else if !self.mismatches.is_empty() || !self.account_mismatches.is_empty() {
            let all: Vec<&str> = self.mismatches.iter().chain(&self.account_mismatches).map(String::as_str).collect();
            ("MISMATCH", all.join("; "))
        } else {
            let mut detail = format!("{broker_open_orders} open orders match the {} broker's book", self.broker.name());
            if let Some((at, what)) = &self.last_corrected {
                detail
                    .push_str(&format!("; last mismatch corrected at {}: {what}", tradeops_core::time::format_ts(at)));
            }
            ("OK", detail)
        };
        let view = EngineView {
            trading_state: e.trading_state(),
            halt: e.halt().cloned(),
            halt_stopped: e.halt_stopped().iter().cloned().collect(),
            positions,
            cash: e.cash(),
            equity: e.equity(),
            buying_power: (e.cash() - reserved).max(Decimal::ZERO),
            realized_today: e.day().realized_today,
            unrealized: e.unrealized_pnl(),
            daily_pnl: e.daily_pnl(),
            drawdown: e.drawdown(),
            start_equity: e.day().start_equity,
            trades_today: e.day().trades_today,
            session: e.day().date,
            by_symbol: e.day().by_symbol.iter().map(|(s, (pnl, n))| (s.clone(), *pnl, *n)).collect(),
            open_orders: e.orders().values().filter(|o| !o.status.is_final()).count(),
            broker_open_orders,
            state_persisted: !self.unsaved.state,
            unsaved_writes: self.unsaved.len(),
            reconciliation_status: status,
            reconciliation_detail: detail,
            venue_unavailable: self.venue_down.as_ref().map(|(reason, _)| reason.clone()),
            followed: self.relevant().into_iter().collect(),
            broker: self.broker.name(),
            venue_account: self.venue_account.clone(),
        };
        self.view.send_replace(Arc::new(view));
    }
}
