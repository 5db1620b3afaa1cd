//! The runner's books part: how the trading state reaches the database. The halt latch is
//! stored before anything else of its batch; every new order is written ahead (one
//! transaction) before it is sent; a batch's order and position updates and the engine state
//! are saved together once its effects are carried out. A database that cannot take a write
//! (an outage, a full disk, a write past [`WRITE_TIMEOUT`]) never holds the engine: the write is
//! held in memory ([`Unsaved`]) and stored when the database is back. Every write goes through a
//! handle fenced to this engine's term: one refused because a newer engine took over ends the
//! [`Term`], after which the venue sends nothing more.

use super::held::{HeldWrite, Unsaved};
use crate::cluster::Term;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use tradeops_core::engine::Engine;
use tradeops_core::orders::{ClientOrderId, Order};
use tradeops_core::positions::Position;
use tradeops_core::risk::TradingState;
use tradeops_core::time::to_epoch_ms;
use tradeops_core::{Symbol, Timestamp, TradingMode};
use tradeops_store::{Database, EngineStateRecord, StoreError, TradingRepository};

/// The longest the runner waits for one write: a database that stops answering (a frozen
/// server, a partition) never holds the engine, so the emergency halt behind it still acts at
/// once. A write not answered in time is held and written again (writes are idempotent).
pub(super) const WRITE_TIMEOUT: Duration = Duration::from_millis(300);

/// A write bounded by [`WRITE_TIMEOUT`]; past it, [`StoreError::TimedOut`].
pub(super) async fn bounded<T>(
    write: impl std::future::Future<Output = Result<T, StoreError>>,
) -> Result<T, StoreError> {
    match tokio::time::timeout(WRITE_TIMEOUT, write).await {
        Ok(result) => result,
        Err(_) => Err(StoreError::TimedOut(WRITE_TIMEOUT)),
    }
}

/// What one batch of effects writes, and how its writes went.
pub(super) struct BatchWrites {
    pub now: Timestamp,
    /// The trading mode the batch's orders are stored under.
    pub mode: TradingMode,
    /// Once a write finds the database unavailable, the batch's other writes are held in
    /// memory rather than each waiting for it: the halt answers at once during an outage.
    pub reachable: bool,
    pub written_ahead: bool,
    /// Whether the write-ahead failed because the database is unavailable (else: a bug).
    pub unsent_because: Option<bool>,
    /// The write-ahead timed out: it may still land.
    pub ambiguous: bool,
    /// The engine state changed (new orders, a day roll, cash adopted…): saved with the batch.
    pub state_dirty: bool,
    pub orders: BTreeMap<ClientOrderId, Arc<Order>>,
    pub positions: BTreeMap<Symbol, Position>,
}

impl BatchWrites {
    pub fn new(now: Timestamp, mode: TradingMode, reachable: bool) -> BatchWrites {
        BatchWrites {
            now,
            mode,
            reachable,
            written_ahead: true,
            unsent_because: None,
            ambiguous: false,
            state_dirty: false,
            orders: BTreeMap::new(),
            positions: BTreeMap::new(),
        }
    }
}

/// The trading state's storage (see the module's doc).
pub(super) struct Books {
    db: Database,
    /// What the database refused while it was unavailable, written as soon as it is back.
    unsaved: Unsaved,
    term: Arc<Term>,
}

impl Books {
    pub fn new(db: Database, term: Arc<Term>) -> Books {
        Books { db, unsaved: Unsaved::default(), term }
    }

    pub fn db(&self) -> &Database {
        &self.db
    }

    /// Whether the database can be expected to take writes now.
    pub fn is_writable(&self) -> bool {
        self.db.is_writable()
    }

    /// This engine's term is over: it writes and sends nothing more.
    pub fn term_over(&self) -> bool {
        self.term.is_over()
    }

    /// The engine state is stored as it stands (nothing of it held).
    pub fn state_persisted(&self) -> bool {
        !self.unsaved.state
    }

    /// Orders, positions and other writes held in memory.
    pub fn held(&self) -> usize {
        self.unsaved.len()
    }

    /// Stores the trading state first when the batch changes it (the halt latch): held in
    /// memory when the database cannot take it, and written when it is back.
    pub async fn persist_latch(&mut self, engine: &Engine, w: &mut BatchWrites) {
        let saved = match w.reachable {
            true => bounded(self.db.save_engine_state(&state_record(engine, w.now))).await,
            false => Err(StoreError::Unavailable("the database is unavailable".into())),
        };
        if let Err(e) = saved {
            tracing::error!(error = %e, "trading state not persisted yet: held in memory, written when the database is back");
            self.write_failed(&e);
            w.reachable &= !e.is_unavailable();
            self.unsaved.state = true;
            // A later resume that is not stored either takes the halt back: nothing to hand over.
            self.unsaved.halt = engine.trading_state() == TradingState::Halted;
            self.unsaved.outage = true;
        }
    }

    /// The emergency halt in force was answered `persisted: false` and is still not stored:
    /// the engine's term ending now would lose it (see `Runner::hand_over_halt`).
    pub fn halt_unsaved(&self) -> bool {
        self.unsaved.halt
    }

    /// Writes the batch's new orders ahead (one transaction) before any is sent, and notes
    /// whether that worked and, if not, why.
    pub async fn write_ahead(&mut self, engine: &Engine, new_orders: &[Order], w: &mut BatchWrites) {
        w.state_dirty |= !new_orders.is_empty();
        w.written_ahead = match (new_orders.is_empty(), w.reachable) {
            (true, _) => true,
            (false, false) => false,
            (false, true) => {
                let date = engine.calendar().date_of(w.now).to_string();
                match bounded(self.db.save_orders(new_orders, w.mode.as_str(), &date)).await {
                    Ok(()) => true,
                    Err(e) => {
                        tracing::error!(error = %e, orders = new_orders.len(), "orders not written ahead");
                        self.write_failed(&e);
                        w.unsent_because = Some(e.is_unavailable());
                        // A write that did not answer in time may still land: its orders are
                        // rejected (and that stored later) rather than taken back without a trace.
                        w.ambiguous = matches!(e, StoreError::TimedOut(_));
                        w.reachable &= !e.is_unavailable();
                        false
                    }
                }
            }
        };
    }

    /// An emergency halt's exit went to the broker before it could be written ahead: it is
    /// written with the next save.
    pub fn hold_sent_order(&mut self, order: Arc<Order>) {
        self.unsaved.outage = true;
        self.unsaved.orders.insert(order.client_order_id.clone(), order);
    }

    /// Saves the batch's order and position updates and the engine state together (held in
    /// memory while the database cannot take them).
    pub async fn save_batch(&mut self, engine: &Engine, w: &mut BatchWrites) {
        if !w.orders.is_empty() || !w.positions.is_empty() || w.state_dirty {
            self.unsaved.orders.extend(std::mem::take(&mut w.orders));
            self.unsaved.positions.extend(std::mem::take(&mut w.positions));
            self.unsaved.state = true;
        }
        if !self.unsaved.is_empty() && w.reachable {
            self.save_unsaved(engine, w.now, w.mode).await;
        }
    }

    /// Writes what is held, when there is any and the database takes writes again.
    pub async fn retry_held(&mut self, engine: &Engine, now: Timestamp, mode: TradingMode) {
        if !self.unsaved.is_empty() && self.db.is_writable() {
            self.save_unsaved(engine, now, mode).await;
        }
    }

    /// Writes what is held in memory: orders, positions and the engine state in one
    /// transaction (a fill is never stored without its position or its cash), then the other
    /// held writes in order. What fails stays held for the next try.
    async fn save_unsaved(&mut self, engine: &Engine, now: Timestamp, mode: TradingMode) {
        let date = engine.calendar().date_of(now).to_string();
        let orders: Vec<_> = self.unsaved.orders.values().map(|o| Order::clone(o)).collect();
        let positions: Vec<_> = self.unsaved.positions.values().cloned().collect();
        let record = state_record(engine, now);
        if let Err(e) = bounded(self.db.save_batch(&orders, &positions, &record, mode.as_str(), &date)).await {
            tracing::error!(error = %e, orders = orders.len(), positions = positions.len(), "batch not persisted yet: held in memory");
            self.write_failed(&e);
            self.unsaved.outage = true;
            return;
        }
        let held = (orders.len(), positions.len());
        self.unsaved.orders.clear();
        self.unsaved.positions.clear();
        self.unsaved.state = false;
        self.unsaved.halt = false;
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

    /// Writes now while the database takes writes; otherwise (or when this write finds it
    /// unavailable) holds the write for the next save. Writes are kept in order: while any is
    /// held, the next is held behind it.
    pub async fn write_or_hold(&mut self, write: HeldWrite, reachable: &mut bool) {
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

    /// Notes a write that failed: an outage for the database's availability, and a refusal of
    /// this engine's term as the end of this engine.
    fn write_failed(&mut self, e: &StoreError) {
        self.db.writes_failed(e);
        if let StoreError::Fenced { epoch } = e {
            self.fence_lost(*epoch, "its write was refused");
        }
    }

    /// This engine's term `epoch` is over: from now on it sends nothing to the broker, and it
    /// stops after the input at hand.
    fn fence_lost(&mut self, epoch: i64, how: &str) {
        if self.term.end() {
            tracing::error!(
                epoch,
                "a newer engine took over the database ({how}): this engine sends and writes nothing more, and stops"
            );
        }
    }

    /// Asks the database whose term it is: an engine that has nothing to write learns of a
    /// takeover too. A database that cannot answer says nothing.
    pub async fn check_term(&mut self) {
        let Some(ours) = self.db.fence() else { return };
        if let Ok(Ok((current, holder))) = tokio::time::timeout(WRITE_TIMEOUT, self.db.engine_epoch()).await {
            if current != ours {
                let how = format!("term {current} taken by {}", holder.as_deref().unwrap_or("another engine"));
                self.fence_lost(ours, &how);
            }
        }
    }
}

/// The engine state as stored: the trading state and halt latch, cash, the day's counters.
pub(super) fn state_record(e: &Engine, now: Timestamp) -> EngineStateRecord {
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

#[cfg(test)]
mod tests {
    use super::*;
    use rust_decimal::Decimal;
    use tradeops_core::engine::{Command, Event};
    use tradeops_core::market::Side;
    use tradeops_core::trades::fixtures;
    use tradeops_core::{strategy, Settings};
    use tradeops_store::{MarketRepository, ViolationRecord, WatchRecord};

    fn now() -> Timestamp {
        fixtures::t(0)
    }

    async fn database() -> (Database, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(&format!("sqlite://{}/books.db", dir.path().display())).await.unwrap();
        (db, dir)
    }

    fn engine() -> Engine {
        Engine::new(Settings::default(), Decimal::from(100_000), strategy::make)
    }

    fn order(id: &str) -> Order {
        fixtures::order(id, Side::Buy, 10, 0, "entry", None)
    }

    fn violation(rule: &str) -> HeldWrite {
        HeldWrite::Violation(ViolationRecord {
            violation_id: 0,
            ts: to_epoch_ms(&now()),
            rule: rule.into(),
            symbol: Some("ABCD".into()),
            client_order_id: None,
            detail: "{}".into(),
        })
    }

    fn watched(symbol: &str) -> HeldWrite {
        HeldWrite::WatchStarted(WatchRecord {
            symbol: symbol.into(),
            source: "API".into(),
            strategy_id: "momentum_breakout".into(),
            strategy_version: "1".into(),
            strategy_status: "Active".into(),
            polling_status: "POLLING".into(),
            time_added: to_epoch_ms(&now()),
            time_closed: None,
            time_completed: None,
            reason: None,
        })
    }

    fn writes(reachable: bool) -> BatchWrites {
        BatchWrites::new(now(), TradingMode::Paper, reachable)
    }

    async fn stored_orders(db: &Database) -> Vec<String> {
        db.open_orders().await.unwrap().iter().map(|o| o.client_order_id.to_string()).collect()
    }

    #[tokio::test]
    async fn a_batchs_new_orders_are_written_ahead_together() {
        let (db, _dir) = database().await;
        let mut books = Books::new(db.clone(), Arc::default());
        let mut w = writes(true);
        books.write_ahead(&engine(), &[order("c-1"), order("c-2")], &mut w).await;
        assert!(w.written_ahead && w.state_dirty);
        assert_eq!(stored_orders(&db).await, ["c-1", "c-2"]);
    }

    #[tokio::test]
    async fn orders_are_not_written_ahead_once_a_write_found_the_database_unavailable() {
        let (db, _dir) = database().await;
        let mut books = Books::new(db.clone(), Arc::default());
        let mut w = writes(false);
        books.write_ahead(&engine(), &[order("c-1")], &mut w).await;
        assert!(!w.written_ahead, "so the order is not sent");
        assert!(stored_orders(&db).await.is_empty());
    }

    #[tokio::test]
    async fn a_write_refused_for_a_newer_term_ends_this_engines_term() {
        let (db, _dir) = database().await;
        let ours = db.take_engine_epoch("node-a", 0).await.unwrap();
        let term = Arc::new(Term::default());
        let mut books = Books::new(db.fenced(ours), term.clone());
        db.take_engine_epoch("node-b", 1).await.unwrap();
        let mut w = writes(true);
        books.write_ahead(&engine(), &[order("c-1")], &mut w).await;
        assert!(!w.written_ahead);
        assert!(term.is_over() && books.term_over(), "the venue sends nothing more");
        assert!(stored_orders(&db).await.is_empty());
    }

    #[tokio::test]
    async fn an_engine_with_nothing_to_write_learns_of_a_takeover_from_the_term_check() {
        let (db, _dir) = database().await;
        let ours = db.take_engine_epoch("node-a", 0).await.unwrap();
        let mut books = Books::new(db.fenced(ours), Arc::default());
        books.check_term().await;
        assert!(!books.term_over(), "still ours");
        db.take_engine_epoch("node-b", 1).await.unwrap();
        books.check_term().await;
        assert!(books.term_over());
    }

    #[tokio::test]
    async fn writes_held_during_an_outage_are_stored_in_order_when_the_database_is_back() {
        let (db, _dir) = database().await;
        let mut books = Books::new(db.clone(), Arc::default());
        let mut reachable = false;
        books.write_or_hold(violation("MAX_POSITION_SIZE"), &mut reachable).await;
        books.write_or_hold(watched("ABCD"), &mut reachable).await;
        // Reachable again, but a write is held: this one waits behind it, in order.
        let mut reachable = true;
        books.write_or_hold(violation("MAX_DAILY_LOSS"), &mut reachable).await;
        assert_eq!(books.held(), 3);
        assert!(db.violations(10).await.unwrap().is_empty());
        books.retry_held(&engine(), now(), TradingMode::Paper).await;
        assert_eq!(books.held(), 0);
        let rules: Vec<String> = db.violations(10).await.unwrap().into_iter().map(|v| v.rule).collect();
        assert_eq!(rules.len(), 2);
        assert!(rules.contains(&"MAX_POSITION_SIZE".to_string()) && rules.contains(&"MAX_DAILY_LOSS".to_string()));
        assert!(db.watch_row("ABCD").await.unwrap().is_some());
    }

    #[tokio::test]
    async fn a_halt_latch_the_database_could_not_take_is_stored_with_the_next_save() {
        let (db, _dir) = database().await;
        let mut books = Books::new(db.clone(), Arc::default());
        let mut engine = engine();
        let halt = Command::EmergencyHalt { reason: "test".into(), actor: "operator".into() };
        engine.handle(Event::Command(halt), now());
        let mut w = writes(false);
        books.persist_latch(&engine, &mut w).await;
        assert!(!books.state_persisted(), "shown as not persisted");
        assert!(books.halt_unsaved(), "a halt stored nowhere: handed over if the term ends now");
        assert!(db.engine_state().await.unwrap().is_none());
        let mut w = writes(true);
        books.save_batch(&engine, &mut w).await;
        assert!(books.state_persisted());
        assert!(!books.halt_unsaved(), "stored: nothing to hand over");
        assert_eq!(db.engine_state().await.unwrap().map(|s| s.state).as_deref(), Some("HALTED"));
    }

    /// A resume the database could not take either takes the unstored halt back: a term ending
    /// then hands nothing over (a stale halt would undo the operator's resume).
    #[tokio::test]
    async fn an_unstored_halt_then_an_unstored_resume_leave_nothing_to_hand_over() {
        let (db, _dir) = database().await;
        let mut books = Books::new(db.clone(), Arc::default());
        let mut engine = engine();
        let halt = Command::EmergencyHalt { reason: "test".into(), actor: "operator".into() };
        engine.handle(Event::Command(halt), now());
        books.persist_latch(&engine, &mut writes(false)).await;
        assert!(books.halt_unsaved());
        engine.handle(Event::Command(Command::Resume { reason: "checked".into(), actor: "operator".into() }), now());
        books.persist_latch(&engine, &mut writes(false)).await;
        assert!(!books.state_persisted() && !books.halt_unsaved(), "ACTIVE unstored: no halt to hand over");
    }

    #[tokio::test]
    async fn a_halt_exit_sent_before_it_was_written_is_stored_with_the_next_save() {
        let (db, _dir) = database().await;
        let mut books = Books::new(db.clone(), Arc::default());
        books.hold_sent_order(Arc::new(order("halt-1")));
        assert_eq!(books.held(), 1);
        books.save_batch(&engine(), &mut writes(true)).await;
        assert_eq!(books.held(), 0);
        assert_eq!(stored_orders(&db).await, ["halt-1"]);
    }
}
