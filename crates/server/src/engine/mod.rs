//! The live side of the trading engine: [`EngineHandle`] sends commands to the runner (the only
//! writer of trading state) and waits for the reply, and follows the [`EngineView`] the runner
//! publishes after every batch of events (the view itself is the leaf [`crate::engine_view`], so
//! the event bus can carry it without knowing the engine).

mod runner;

use runner::Input;
pub use runner::{replay_desk, spawn_engine, CrashPoint, DeskOutcome};

use crate::engine_view::EngineView;
use crate::events::EventBus;
use rust_decimal::Decimal;
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot, watch};
use tradeops_brokers::{ExecutionBroker, MarketData};
use tradeops_core::engine::{Command, CommandError, ManualOrder, OrderPreview, Reply};
use tradeops_core::{Clock, Settings};
use tradeops_store::Database;

/// What the engine runner is built from (the composition root, [`crate::app`], gathers it).
pub struct EngineDeps {
    /// The trading state's storage: restored from at start, written ahead and after every batch;
    /// fenced to this engine's term ([`Database::fenced`]), whose end stops the engine.
    pub db: Database,
    /// The settings in effect; the engine is restored with the current ones and follows changes.
    pub settings: watch::Receiver<Arc<Settings>>,
    /// Where the runner publishes what operators are told, once each batch is saved.
    pub events: Arc<EventBus>,
    /// Market time: the wall clock in PAPER, faster in DEMO.
    pub market_clock: Arc<dyn Clock>,
    /// The paper account's cash when nothing is stored yet.
    pub initial_cash: Decimal,
    /// Where a crash test stops the process inside an emergency halt (never set in operation).
    pub crash_point: Option<CrashPoint>,
    /// The `execution_broker` adapter, owned by the runner.
    pub broker: Arc<dyn ExecutionBroker>,
    /// The `data_broker` adapter, which marks positions and prices orders.
    pub market: Arc<dyn MarketData>,
    /// This engine's term as its election keeps it ([`crate::cluster::Term`]): the venue sends
    /// nothing while it is not valid, and the books end it when a write is refused for a newer
    /// term.
    pub term: Arc<crate::cluster::Term>,
    /// This service's name in the cluster: a halt its engine could not store before its term
    /// ended is handed to the next leader under it.
    pub node: String,
}

/// Sends commands to the engine runner.
#[derive(Clone)]
pub struct EngineHandle {
    tx: mpsc::Sender<Input>,
    view: watch::Receiver<Arc<EngineView>>,
}

/// The engine runner stopped (shutting down).
#[derive(Debug)]
pub struct EngineGone;

impl EngineHandle {
    /// A handle to no engine, for a service that does not run one (a cluster node waiting for
    /// the engine's term, answering reads from the database meanwhile): every command finds the
    /// engine gone ([`EngineGone`]), and the view is an empty book.
    pub fn detached() -> EngineHandle {
        let (tx, _) = mpsc::channel(1);
        let (_, view) = watch::channel(Arc::new(EngineView::default()));
        EngineHandle { tx, view }
    }

    pub async fn send(&self, command: Command) -> Result<Result<Reply, CommandError>, EngineGone> {
        let (reply, answer) = oneshot::channel();
        self.tx.send(Input::Command(command, reply)).await.map_err(|_| EngineGone)?;
        answer.await.map_err(|_| EngineGone)
    }

    /// The risk gate's verdict on `order` were it sent now, without placing it (the order
    /// ticket's preview): the runner reads the engine and changes nothing.
    pub async fn preview(&self, order: ManualOrder) -> Result<Result<OrderPreview, CommandError>, EngineGone> {
        let (reply, answer) = oneshot::channel();
        self.tx.send(Input::Preview(order, reply)).await.map_err(|_| EngineGone)?;
        answer.await.map_err(|_| EngineGone)
    }

    /// A round trip through the runner to the execution broker: how long a command waits to be
    /// taken up and answered, and the broker's count of working orders.
    pub async fn probe(&self) -> Result<(std::time::Duration, usize), EngineGone> {
        let started = tokio::time::Instant::now();
        let (reply, answer) = oneshot::channel();
        self.tx.send(Input::Probe(reply)).await.map_err(|_| EngineGone)?;
        let open = answer.await.map_err(|_| EngineGone)?;
        Ok((started.elapsed(), open))
    }

    pub fn view(&self) -> Arc<EngineView> {
        self.view.borrow().clone()
    }

    pub fn subscribe(&self) -> watch::Receiver<Arc<EngineView>> {
        self.view.clone()
    }

    /// The market feed is about to print its step at `before`: returns once the broker's
    /// reports due before it are delivered (at their own times, against the market as it
    /// stands), so a live day's acks meet the same prints as its replay's.
    pub async fn deliver_due(&self, before: tradeops_core::Timestamp) -> Result<(), EngineGone> {
        let (reply, done) = oneshot::channel();
        self.tx.send(Input::Due(before, reply)).await.map_err(|_| EngineGone)?;
        done.await.map_err(|_| EngineGone)
    }

    /// The market feed stepped to `at` (`bar_closed`: a minute just completed). Waits for room
    /// in the runner's queue, not for the step to be handled.
    pub async fn market_step(&self, at: tradeops_core::Timestamp, bar_closed: bool) -> Result<(), EngineGone> {
        self.tx.send(Input::MarketStep { at, bar_closed }).await.map_err(|_| EngineGone)
    }
}
