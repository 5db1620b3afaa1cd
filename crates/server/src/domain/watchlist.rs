//! The watchlist and symbol blocks as the API shows them (CONTRACT §4 `radar/watch`, `block`,
//! `unblock`). The semantics — limits, blocks, expiry, violation rows — live in the engine.

use crate::domain::DomainResult;
use serde::Serialize;
use std::sync::Arc;
use tradeops_core::time::{format_ts, from_epoch_ms, to_epoch_ms};
use tradeops_core::{Clock, Symbol};
use tradeops_store::{BlockRecord, MarketRepository, WatchRecord};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "UPPERCASE")]
pub enum WatchSource {
    Manual,
    Radar,
    Api,
}

impl WatchSource {
    pub fn as_str(self) -> &'static str {
        match self {
            WatchSource::Manual => "MANUAL",
            WatchSource::Radar => "RADAR",
            WatchSource::Api => "API",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "UPPERCASE")]
pub enum BlockScope {
    Today,
    Permanent,
}

impl BlockScope {
    pub fn as_str(self) -> &'static str {
        match self {
            BlockScope::Today => "TODAY",
            BlockScope::Permanent => "PERMANENT",
        }
    }
}

/// Result of a watch request.
#[derive(Clone, Debug, Serialize, utoipa::ToSchema)]
pub struct WatchResult {
    #[schema(value_type = String)]
    pub symbol: Symbol,
    /// `WATCHING` or `ALREADY_WATCHING`.
    pub watchlist_status: &'static str,
    pub time_added: String,
}

/// Result of a block request (also the rows of `blocked_symbols`).
#[derive(Clone, Debug, Serialize, utoipa::ToSchema)]
pub struct BlockResult {
    pub symbol: String,
    pub block_scope: String,
    pub effective_from: String,
    /// `null` for `PERMANENT`.
    pub expires_at: Option<String>,
    pub reason: String,
    pub blocked_by: String,
}

/// Reads of the watchlist and blocks. Every change goes through the engine, whose runner
/// persists it: this service only queries. Cheap to clone.
#[derive(Clone)]
pub struct WatchlistService {
    repo: Arc<dyn MarketRepository>,
    clock: Arc<dyn Clock>,
}

impl WatchlistService {
    pub fn new(repo: Arc<dyn MarketRepository>, clock: Arc<dyn Clock>) -> Self {
        WatchlistService { repo, clock }
    }

    pub async fn blocks(&self) -> DomainResult<Vec<BlockResult>> {
        let now = to_epoch_ms(&self.clock.now());
        Ok(self.repo.active_blocks(now).await?.iter().map(block_result).collect())
    }

    pub async fn rows(&self) -> DomainResult<Vec<WatchRecord>> {
        Ok(self.repo.watch_rows().await?)
    }
}

fn block_result(b: &BlockRecord) -> BlockResult {
    BlockResult {
        symbol: b.symbol.clone(),
        block_scope: b.block_scope.clone(),
        effective_from: format_ts(&from_epoch_ms(b.effective_from)),
        expires_at: b.expires_at.map(|t| format_ts(&from_epoch_ms(t))),
        reason: b.reason.clone(),
        blocked_by: b.actor.clone(),
    }
}

/// A block as the engine placed it.
pub fn engine_block_result(symbol: &Symbol, b: &tradeops_core::engine::Block) -> BlockResult {
    BlockResult {
        symbol: symbol.to_string(),
        block_scope: b.scope.clone(),
        effective_from: format_ts(&b.effective_from),
        expires_at: b.expires_at.as_ref().map(format_ts),
        reason: b.reason.clone(),
        blocked_by: b.actor.clone(),
    }
}
