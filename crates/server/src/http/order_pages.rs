//! The cache of `GET /api/orders` pages as served ([`OrderPages`]): each page's rows kept as
//! JSON text under the store's change counter of orders, so an unchanged list is answered
//! without reading or serialising orders again.

use serde_json::value::RawValue;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tradeops_store::OrderFilter;

/// One page of `GET /api/orders` as served: its rows as JSON text, and the next page's cursor.
pub struct OrderPage {
    pub rows: Vec<Arc<RawValue>>,
    pub next: Option<String>,
}

/// Pages of `GET /api/orders` as served, by filter, while the store's change counter of orders
/// stays where it was when they were read: a console polling the list costs a one-row read, not
/// reading and serialising a page of orders. Every write of orders or executions moves the
/// counter in its own transaction, so a page is never served once the orders it shows changed.
#[derive(Default)]
pub struct OrderPages {
    pages: Mutex<(i64, HashMap<OrderFilter, Arc<OrderPage>>)>,
}

impl OrderPages {
    /// Distinct filters kept for one version (dates, statuses, symbols, cursors): enough for
    /// every console's pages; beyond it pages are simply read again.
    const MAX_PAGES: usize = 256;

    pub fn get(&self, version: i64, filter: &OrderFilter) -> Option<Arc<OrderPage>> {
        let pages = self.pages.lock().unwrap_or_else(|e| e.into_inner());
        (pages.0 == version).then(|| pages.1.get(filter).cloned()).flatten()
    }

    /// Keeps `page`, read at `version`, and returns it. Pages of an earlier version are dropped;
    /// a page of an earlier version than those kept is not kept.
    pub fn put(&self, version: i64, filter: OrderFilter, page: Arc<OrderPage>) -> Arc<OrderPage> {
        let mut pages = self.pages.lock().unwrap_or_else(|e| e.into_inner());
        if version > pages.0 {
            *pages = (version, HashMap::new());
        }
        if version == pages.0 && pages.1.len() < Self::MAX_PAGES {
            pages.1.insert(filter, page.clone());
        }
        page
    }
}
