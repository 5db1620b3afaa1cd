//! One batch of the engine's effects carried out, in order: the trading state latch stored
//! first, the batch's new orders written ahead (one transaction) before any is sent, broker
//! calls in the effects' order (an emergency halt's cancels before its exits), order and
//! position updates saved together at the batch's end, and only then its events published —
//! operators see only what is stored. [`Batch`] is what the batch carries to its end: the
//! writes (the books part's [`BatchWrites`]), the command's reply, and which operator request,
//! if any, the broker's refusal answers.

use super::books::BatchWrites;
use super::held::HeldWrite;
use super::venue::UNANSWERED;
use super::{CrashPoint, Runner};
use crate::events::{Event as Published, RiskChange, Violation, WatchlistChange};
use std::sync::Arc;
use tradeops_core::broker::BrokerReport;
use tradeops_core::engine::{is_liquidation, CommandError, Effect, Event, Reply, StrategyStatus};
use tradeops_core::orders::Order;
use tradeops_core::positions::Position;
use tradeops_core::risk::{RiskRefusal, TradingState};
use tradeops_core::time::to_epoch_ms;
use tradeops_core::{Timestamp, TradingMode};
use tradeops_store::ViolationRecord;

/// The operator request a batch answers, for what the broker's answer to it means.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Request {
    /// No operator request (a market step, a report, reconciliation), or one that sends
    /// nothing of its own: the broker's refusals become the orders' reports only.
    None,
    /// A new order or a close: the broker's refusal of its submit answers the command.
    Order,
    /// A cancel: the broker's refusal of it (an order it can no longer cancel) answers the
    /// command.
    Cancel,
}

/// One batch of effects being carried out (see the module's doc).
pub(super) struct Batch {
    pub writes: BatchWrites,
    pub request: Request,
    pub answers_command: bool,
    /// An operator's order was taken back because it could not be written ahead.
    pub withdrawn: bool,
    /// The broker's refusal of the operator's order or cancel this batch answers (unavailable,
    /// a risk refusal at the venue, a field it will not take, an order it cannot cancel).
    pub broker_refusal: Option<CommandError>,
    pub reply: Option<Result<Reply, CommandError>>,
    /// Published after the batch commits: operators see only what is persisted.
    pub events: Vec<Published>,
    /// Orders refused for want of the write-ahead: their rejections, handled after the batch.
    pub refused: Vec<BrokerReport>,
}

impl Batch {
    pub fn new(fx: &[Effect], now: Timestamp, mode: TradingMode, reachable: bool, request: Request) -> Batch {
        Batch {
            writes: BatchWrites::new(now, mode, reachable),
            request,
            answers_command: fx.iter().any(|f| matches!(f, Effect::Reply(_))),
            withdrawn: false,
            broker_refusal: None,
            reply: None,
            events: Vec::new(),
            refused: Vec::new(),
        }
    }

    /// The command's reply: a success becomes `NotPersisted` when any of its orders could not
    /// be written ahead (and so was never sent), or the broker's refusal of the request.
    pub fn reply(&mut self) -> Option<Result<Reply, CommandError>> {
        let mut reply = self.reply.take();
        if !self.refused.is_empty() || self.withdrawn {
            if let Some(Ok(_)) = reply {
                let unavailable = self.writes.unsent_because.unwrap_or(true);
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
    /// Carries out effects that answer no operator request; returns the reply when there is one.
    pub(super) async fn apply(&mut self, fx: Vec<Effect>, now: Timestamp) -> Option<Result<Reply, CommandError>> {
        self.apply_for(fx, now, Request::None).await
    }

    /// Carries out effects in order (see the module's doc); returns the command's reply when
    /// there is one.
    pub(super) async fn apply_for(
        &mut self,
        fx: Vec<Effect>,
        now: Timestamp,
        request: Request,
    ) -> Option<Result<Reply, CommandError>> {
        let mut batch = Batch::new(&fx, now, self.mode(), self.books.is_writable(), request);
        let halting = fx.iter().any(|f| matches!(f, Effect::TradingStateChanged { state: TradingState::Halted, .. }));
        if fx.iter().any(|f| matches!(f, Effect::TradingStateChanged { .. })) {
            self.books.persist_latch(&self.engine, &mut batch.writes).await;
        }
        if halting {
            CrashPoint::crash_if(self.crash_point, CrashPoint::HaltLatched);
        }
        let new_orders: Vec<Order> =
            fx.iter().filter_map(|f| if let Effect::Submit(o) = f { Some(Order::clone(o)) } else { None }).collect();
        self.books.write_ahead(&self.engine, &new_orders, &mut batch.writes).await;
        if halting {
            CrashPoint::crash_if(self.crash_point, CrashPoint::HaltWrittenAhead);
        }
        for effect in fx {
            self.carry_out(effect, &mut batch).await;
        }
        if halting {
            self.answer_halt(&mut batch).await;
        }
        self.books.save_batch(&self.engine, &mut batch.writes).await;
        if self.venue.needs_recount() && !self.venue.is_remote() {
            self.venue.count_open_orders().await;
        }
        let reply = batch.reply();
        if !self.books.term_over() {
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

    /// Answers an emergency halt once everything the operator must be able to rely on is done:
    /// `HALTED` stored (or, the database unavailable, answered `persisted: false`), every exit
    /// written ahead, and every cancel and exit handed to the broker. The batch's save that
    /// follows (the orders' new states: `PENDING_CANCEL`, the exits' acknowledgements) is not
    /// waited for: a crash before it loses nothing, as reconciliation after a restart finds
    /// the exits by their client order ids and the cancels at the broker, and sends again any
    /// cancel the broker did not take. The view is published first, so the answer's
    /// `persisted` reads this batch's latch.
    async fn answer_halt(&mut self, batch: &mut Batch) {
        if !batch.answers_command {
            return;
        }
        let Some(reply) = self.answer.take() else { return };
        let answer = self.final_answer(batch.reply());
        self.publish();
        let _ = reply.send(answer);
        // The answer's handler (woken on this worker) runs next, up to its audit row's write:
        // on SQLite one write goes at a time, and that row goes before this batch's save
        // (hundreds of orders) rather than waiting for it.
        tokio::task::yield_now().await;
        if self.crash_point == Some(CrashPoint::HaltAnswered) {
            // The answer is on its way: the server writes it before the process stops.
            tokio::time::sleep(std::time::Duration::from_millis(300)).await;
            CrashPoint::crash_if(self.crash_point, CrashPoint::HaltAnswered);
        }
    }

    /// Sends an order to the broker; a refusal for buying power or shares is also a violation
    /// row, as the engine's own gate records its refusals. Returns the broker's refusal, which
    /// answers an operator's order.
    pub(super) async fn send(&mut self, order: &Order, now: Timestamp) -> Option<CommandError> {
        let refusal = self.venue.submit(order, now).await;
        if let Some(CommandError::Risk(risk)) = &refusal {
            self.venue_violation(order, risk, now).await;
        }
        refusal
    }

    /// Records the venue's risk refusal of `order` as a violation row (and its event).
    async fn venue_violation(&mut self, order: &Order, refusal: &RiskRefusal, now: Timestamp) {
        let violation = Effect::Violation {
            rule: refusal.rule,
            symbol: order.symbol.clone(),
            client_order_id: Some(order.client_order_id.clone()),
            detail: tradeops_core::risk::ViolationDetail::of(refusal),
        };
        Box::pin(self.apply(vec![violation], now)).await;
    }

    /// Sends a new order when it was written ahead. When it could not be: an emergency halt's
    /// exit is sent anyway, an operator's order taken back, a strategy's rejected.
    async fn submit(&mut self, order: Arc<Order>, batch: &mut Batch) {
        let now = batch.writes.now;
        match order {
            order if batch.writes.written_ahead => {
                let refusal = self.send(&order, now).await;
                if let Some(refusal) = refusal.filter(|_| batch.request == Request::Order && batch.answers_command) {
                    if matches!(refusal, CommandError::BrokerUnavailable { .. }) {
                        // Stored with the order: looked up, never sent again, even after a restart.
                        for effect in self.engine.note_unanswered(&order.client_order_id, UNANSWERED) {
                            Box::pin(self.carry_out(effect, batch)).await;
                        }
                    }
                    batch.broker_refusal = Some(refusal);
                }
                let order = self.engine.order(&order.client_order_id).cloned().unwrap_or(order);
                batch.events.push(Published::OrderUpdated {
                    order,
                    mode: batch.writes.mode,
                    broker: self.venue.name(),
                });
            }
            order if is_liquidation(&order) => {
                // The emergency halt's exits go out even when they cannot be written ahead:
                // a halt acts at once, whatever the database. Written when it is back.
                tracing::warn!(client_order_id = %order.client_order_id, "halt exit sent before it could be written");
                let _ = self.send(&order, now).await;
                self.books.hold_sent_order(order);
            }
            // An operator's order (the batch answers a command) is taken back, so the 503
            // changes nothing; a strategy's is rejected, which its strategy sees.
            order
                if batch.answers_command
                    && !batch.writes.ambiguous
                    && self.engine.withdraw_unsent(&order.client_order_id) =>
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

    /// `position.updated` for `position` as the engine stands: its levels and whether its
    /// symbol is halted.
    fn position_updated(&self, position: Position, status: StrategyStatus) -> Published {
        let symbol = &position.symbol;
        let (levels, halted) = (self.engine.position_levels(symbol), self.engine.halt_of(symbol).is_some());
        let protection = self.engine.protection(symbol);
        Published::PositionUpdated { position, status, levels, halted, protection }
    }

    /// Carries out one effect: broker calls at once, writes at once (or held), events and
    /// order and position updates kept in `batch` for its end.
    async fn carry_out(&mut self, effect: Effect, batch: &mut Batch) {
        let now = batch.writes.now;
        match effect {
            Effect::TradingStateChanged { state, halt } => {
                tracing::warn!(?state, "trading state changed");
                batch.events.push(Published::RiskStateChanged(RiskChange::TradingState { state, halt }));
            }
            Effect::Submit(order) => self.submit(order, batch).await,
            Effect::Cancel(id) => {
                let status = self.engine.order(&id).map(|o| o.status);
                let refusal = self.venue.cancel(&id, status, now).await;
                if batch.request == Request::Cancel && batch.answers_command {
                    batch.broker_refusal = batch.broker_refusal.take().or(refusal);
                }
            }
            Effect::OrderUpdated(order) => {
                batch.events.push(Published::OrderUpdated {
                    order: order.clone(),
                    mode: batch.writes.mode,
                    broker: self.venue.name(),
                });
                if let Some((_, e)) = self.pending_fill.take_if(|(id, _)| *id == order.client_order_id) {
                    batch.events.push(Published::ExecutionCreated {
                        client_order_id: order.client_order_id.clone(),
                        symbol: order.symbol.clone(),
                        side: order.side,
                        execution: e,
                    });
                }
                batch.writes.orders.insert(order.client_order_id.clone(), order);
            }
            Effect::PositionUpdated { position, status } => {
                batch.events.push(self.position_updated(position.clone(), status));
                batch.writes.positions.insert(position.symbol.clone(), position);
            }
            Effect::SymbolStatus { symbol, halt } => {
                match &halt {
                    Some(h) => tracing::warn!(%symbol, reason_code = %h.reason_code, "trading halted"),
                    None => tracing::info!(%symbol, "trading resumed"),
                }
                // A held position's row says whether it can trade: published again with it.
                if let Some(position) = self.engine.positions().get(&symbol).filter(|p| !p.is_flat()) {
                    let status = self.engine.position_status(&symbol);
                    batch.events.push(self.position_updated(position.clone(), status));
                }
                batch.events.push(Published::SymbolStatus { symbol, halt });
            }
            Effect::WatchUpdated { symbol, status, reason } => {
                let change = WatchlistChange::Status { symbol: symbol.clone(), status, reason: reason.clone() };
                batch.events.push(Published::WatchlistUpdated(change));
                let write = HeldWrite::WatchStatus { symbol, status, reason, at: now };
                self.books.write_or_hold(write, &mut batch.writes.reachable).await;
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
                self.books.write_or_hold(HeldWrite::WatchStarted(row), &mut batch.writes.reachable).await;
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
                self.books.write_or_hold(HeldWrite::Block { record, at: now }, &mut batch.writes.reachable).await;
            }
            Effect::BlockLifted { symbol, reason, actor } => {
                let change =
                    RiskChange::Unblocked { symbol: symbol.clone(), reason: reason.clone(), actor: actor.clone() };
                batch.events.push(Published::RiskStateChanged(change));
                self.books
                    .write_or_hold(HeldWrite::Unblock { symbol, reason, actor, at: now }, &mut batch.writes.reachable)
                    .await;
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
                self.books.write_or_hold(HeldWrite::Violation(record), &mut batch.writes.reachable).await;
            }
            Effect::Decision { symbol, rule, text } => tracing::info!(%symbol, rule, "{text}"),
            Effect::DayRolled { date } => {
                tracing::info!(%date, "trading day rolled");
                batch.writes.state_dirty = true;
            }
            Effect::HaltStoppedChanged { symbols } => {
                batch.events.push(Published::RiskStateChanged(RiskChange::StoppedByHalt { symbols }));
                batch.writes.state_dirty = true;
            }
            Effect::CashAdopted { cash, what } => {
                tracing::info!(%cash, "reconciliation: {what}");
                batch.writes.state_dirty = true;
                self.reconciliation.corrected(now, what);
            }
            Effect::Anomaly(message) => {
                tracing::warn!("{message}");
                self.anomalies.push(message);
            }
            Effect::Reply(r) => batch.reply = Some(r),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tradeops_core::orders::{ClientOrderId, OrderStatus};
    use tradeops_core::time::parse_ts;

    fn batch(request: Request) -> Batch {
        let id = ClientOrderId::parse("c-1").unwrap();
        let fx = [Effect::Reply(Ok(Reply::Cancel { client_order_id: id, status: OrderStatus::PendingCancel }))];
        let mut batch = Batch::new(&fx, parse_ts("2026-11-20T15:00:00Z").unwrap(), TradingMode::Paper, true, request);
        let [Effect::Reply(reply)] = fx else { unreachable!() };
        batch.reply = Some(reply);
        batch
    }

    #[test]
    fn a_batch_answers_a_command_only_when_it_carries_its_reply() {
        assert!(batch(Request::Order).answers_command);
        let now = parse_ts("2026-11-20T15:00:00Z").unwrap();
        assert!(!Batch::new(&[], now, TradingMode::Paper, true, Request::None).answers_command);
    }

    #[test]
    fn a_success_whose_order_was_not_written_ahead_is_answered_not_persisted() {
        let mut b = batch(Request::Order);
        b.withdrawn = true;
        b.writes.unsent_because = Some(true);
        let Some(Err(CommandError::NotPersisted { unavailable, reason })) = b.reply() else { panic!() };
        assert!(unavailable && reason.contains("database is unavailable"), "{reason}");

        let mut b = batch(Request::Order);
        b.refused.push(BrokerReport::Rejected {
            client_order_id: ClientOrderId::parse("c-2").unwrap(),
            reason: "not sent".into(),
            at: b.writes.now,
        });
        b.writes.unsent_because = Some(false);
        let Some(Err(CommandError::NotPersisted { unavailable, .. })) = b.reply() else { panic!() };
        assert!(!unavailable, "a write that failed for another reason is an internal error");
    }

    #[test]
    fn the_brokers_refusal_of_the_request_replaces_its_success_not_an_earlier_refusal() {
        let mut b = batch(Request::Cancel);
        b.broker_refusal = Some(CommandError::NotCancellable { status: OrderStatus::Filled });
        assert_eq!(b.reply(), Some(Err(CommandError::NotCancellable { status: OrderStatus::Filled })));

        let mut b = batch(Request::Cancel);
        b.reply = Some(Err(CommandError::Halted));
        b.broker_refusal = Some(CommandError::EngineStopped);
        assert_eq!(b.reply(), Some(Err(CommandError::Halted)));
    }
}
