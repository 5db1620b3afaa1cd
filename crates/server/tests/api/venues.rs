//! Execution venues the API tests trade through in place of the configured broker.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use tradeops_brokers::paper::{PaperBroker, PaperExecution};
use tradeops_brokers::{BrokerError, ExecutionBroker, MarketUpdate};
use tradeops_core::broker::{BrokerLookup, BrokerOpenOrder, BrokerReport};
use tradeops_core::orders::{ClientOrderId, Order};
use tradeops_core::Timestamp;

/// The paper broker (as the service builds it by default) with faults a test switches on, so
/// that what follows meets the service's real paths: `down`, every call fails as unavailable, as
/// an unreachable venue's does; `hide-open-orders`, its open-order listing leaves every order
/// out, so the books disagree (a reconciliation mismatch); anything else, no fault. It counts
/// the orders it was sent.
pub struct Switchable {
    paper: PaperExecution,
    fault: Mutex<String>,
    submits: AtomicUsize,
}

impl Switchable {
    pub fn new(config: &tradeops_server::Config) -> Arc<Switchable> {
        let paper = PaperBroker::new(config.paper.broker_config());
        Arc::new(Switchable {
            paper: PaperExecution::new(paper),
            fault: Mutex::new(String::new()),
            submits: AtomicUsize::new(0),
        })
    }

    /// Switches to `fault` (see the type); `""` for none.
    pub fn set(&self, fault: &str) {
        *self.fault.lock().unwrap() = fault.to_string();
    }

    fn is(&self, fault: &str) -> bool {
        *self.fault.lock().unwrap() == fault
    }

    /// Orders it was sent (reachable or not).
    pub fn submits(&self) -> usize {
        self.submits.load(Ordering::SeqCst)
    }

    fn reachable(&self) -> Result<(), BrokerError> {
        match self.is("down") {
            true => Err(BrokerError::Unavailable { reason: "connection refused".into(), retry_after: None }),
            false => Ok(()),
        }
    }
}

#[async_trait::async_trait]
impl ExecutionBroker for Switchable {
    fn name(&self) -> &'static str {
        "paper"
    }

    async fn submit(&self, order: &Order, now: Timestamp) -> Result<(), BrokerError> {
        self.submits.fetch_add(1, Ordering::SeqCst);
        self.reachable()?;
        self.paper.submit(order, now).await
    }

    async fn cancel(&self, id: &ClientOrderId, now: Timestamp) -> Result<(), BrokerError> {
        self.reachable()?;
        self.paper.cancel(id, now).await
    }

    async fn lookup(&self, id: &ClientOrderId) -> Result<BrokerLookup, BrokerError> {
        self.reachable()?;
        self.paper.lookup(id).await
    }

    async fn open_orders(&self) -> Result<Vec<BrokerOpenOrder>, BrokerError> {
        self.reachable()?;
        match self.is("hide-open-orders") {
            true => Ok(Vec::new()),
            false => self.paper.open_orders().await,
        }
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

    async fn restore(&self, orders: &[Order], now: Timestamp) -> Vec<ClientOrderId> {
        self.paper.restore(orders, now).await
    }
}
