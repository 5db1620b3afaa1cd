//! The watchlist and symbol blocks (CONTRACT §4 `radar/watch`, `block`, `unblock`): watching
//! creates an `Active`/`POLLING` row for the allocator's strategy; blocking stops it. Refusals by
//! a risk rule are `RISK_BLOCKED` and leave a violation row. Writes are serialised so limits
//! hold under concurrent requests.

use crate::error::{ApiError, ApiResult, ErrorCode};
use crate::market::MarketData;
use serde::Serialize;
use serde_json::json;
use std::sync::Arc;
use tokio::sync::Mutex;
use tradeops_core::calendar::MarketCalendar;
use tradeops_core::settings::strategy_version;
use tradeops_core::time::{format_ts, from_epoch_ms, to_epoch_ms};
use tradeops_core::{Clock, Settings, Symbol};
use tradeops_store::{BlockRecord, MarketRepository, ViolationRecord, WatchRecord};

/// Risk rule names (CONTRACT §5) used here.
pub const SYMBOL_BLOCKED: &str = "SYMBOL_BLOCKED";
pub const ACTIVE_WATCHLIST_LIMIT: &str = "ACTIVE_WATCHLIST_LIMIT";

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "UPPERCASE")]
pub enum WatchSource {
    Manual,
    Radar,
    Api,
}

impl WatchSource {
    fn as_str(self) -> &'static str {
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

pub struct WatchlistService {
    repo: Arc<dyn MarketRepository>,
    market: Arc<dyn MarketData>,
    clock: Arc<dyn Clock>,
    writes: Mutex<()>,
}

impl WatchlistService {
    pub fn new(repo: Arc<dyn MarketRepository>, market: Arc<dyn MarketData>, clock: Arc<dyn Clock>) -> Self {
        WatchlistService { repo, market, clock, writes: Mutex::new(()) }
    }

    fn known(&self, symbol: &Symbol) -> ApiResult<()> {
        match self.market.instrument(symbol) {
            Some(_) => Ok(()),
            None => Err(ApiError::not_found(format!("{symbol} is not a symbol of the {} market", self.market.name()))
                .with_detail(json!({"symbol": symbol}))),
        }
    }

    /// Refuses with `RISK_BLOCKED` and records the violation.
    async fn refuse(
        &self,
        record: bool,
        rule: &str,
        symbol: &Symbol,
        limit: serde_json::Value,
        current: serde_json::Value,
        message: String,
    ) -> ApiError {
        let detail = json!({"rule": rule, "limit": limit, "current": current, "symbol": symbol});
        if !record {
            return ApiError::new(ErrorCode::RiskBlocked, message).with_detail(detail);
        }
        let record = ViolationRecord {
            violation_id: 0,
            ts: to_epoch_ms(&self.clock.now()),
            rule: rule.to_string(),
            symbol: Some(symbol.to_string()),
            client_order_id: None,
            detail: detail.to_string(),
        };
        if let Err(e) = self.repo.insert_violation(&record).await {
            tracing::error!(error = %e, rule, "could not record the risk violation");
        }
        ApiError::new(ErrorCode::RiskBlocked, message).with_detail(detail)
    }

    pub async fn watch(&self, symbol: &Symbol, source: WatchSource, settings: &Settings) -> ApiResult<WatchResult> {
        self.watch_recording(symbol, source, settings, true).await
    }

    /// `record`: whether a refusal leaves a violation row (the allocator's automatic attempts
    /// do not, or a full watchlist would add one every minute).
    async fn watch_recording(
        &self,
        symbol: &Symbol,
        source: WatchSource,
        settings: &Settings,
        record: bool,
    ) -> ApiResult<WatchResult> {
        self.known(symbol)?;
        let _write = self.writes.lock().await;
        let now = self.clock.now();
        let existing = self.repo.watch_row(symbol.as_str()).await?;
        if let Some(row) = existing.as_ref().filter(|r| r.strategy_status != "Closed") {
            return Ok(WatchResult {
                symbol: symbol.clone(),
                watchlist_status: "ALREADY_WATCHING",
                time_added: format_ts(&from_epoch_ms(row.time_added)),
            });
        }
        if let Some(block) = self.repo.active_block(symbol.as_str(), to_epoch_ms(&now)).await? {
            let current = json!({"block_scope": block.block_scope, "reason": block.reason,
                "expires_at": block.expires_at.map(|t| format_ts(&from_epoch_ms(t)))});
            return Err(self
                .refuse(
                    record,
                    SYMBOL_BLOCKED,
                    symbol,
                    json!(null),
                    current,
                    format!("{symbol} is blocked: {}", block.reason),
                )
                .await);
        }
        let limit = settings.risk_controls.active_watchlist_limit;
        let active = self.repo.count_active_watch_rows().await?;
        if active >= i64::from(limit) {
            let message = format!("The active watchlist is full ({active} of {limit})");
            return Err(self
                .refuse(record, ACTIVE_WATCHLIST_LIMIT, symbol, json!(limit), json!(active), message)
                .await);
        }
        let strategy_id = settings.strategy_allocator.default_strategy_id.clone();
        let record = WatchRecord {
            symbol: symbol.to_string(),
            source: source.as_str().to_string(),
            strategy_version: strategy_version(&strategy_id).unwrap_or("unknown").to_string(),
            strategy_id,
            strategy_status: "Active".into(),
            polling_status: "POLLING".into(),
            time_added: to_epoch_ms(&now),
            time_closed: None,
            time_completed: None,
            reason: None,
        };
        self.repo.put_watch_row(&record).await?;
        Ok(WatchResult { symbol: symbol.clone(), watchlist_status: "WATCHING", time_added: format_ts(&now) })
    }

    /// Blocks `symbol` (replacing an active block) and stops any strategy on it.
    pub async fn block(
        &self,
        symbol: &Symbol,
        scope: BlockScope,
        reason: &str,
        actor: &str,
        calendar: MarketCalendar,
    ) -> ApiResult<BlockResult> {
        self.known(symbol)?;
        let _write = self.writes.lock().await;
        let now = self.clock.now();
        let now_ms = to_epoch_ms(&now);
        self.repo.lift_blocks(symbol.as_str(), now_ms, actor, "replaced by a new block").await?;
        let expires_at = match scope {
            BlockScope::Today => Some(to_epoch_ms(&calendar.end_of_trading_day(now))),
            BlockScope::Permanent => None,
        };
        let record = BlockRecord {
            block_id: 0,
            symbol: symbol.to_string(),
            block_scope: match scope {
                BlockScope::Today => "TODAY".into(),
                BlockScope::Permanent => "PERMANENT".into(),
            },
            reason: reason.to_string(),
            actor: actor.to_string(),
            effective_from: now_ms,
            expires_at,
        };
        self.repo.insert_block(&record).await?;
        if let Some(mut row) = self.repo.watch_row(symbol.as_str()).await?.filter(|r| r.strategy_status != "Closed") {
            row.strategy_status = "Closed".into();
            row.polling_status = "STOPPED".into();
            row.time_closed = Some(now_ms);
            row.reason = Some(format!("blocked: {reason}"));
            self.repo.put_watch_row(&row).await?;
        }
        Ok(block_result(&record))
    }

    /// Lifts the active block of `symbol`; `NOT_FOUND` when it has none.
    pub async fn unblock(&self, symbol: &Symbol, reason: &str, actor: &str) -> ApiResult<String> {
        let _write = self.writes.lock().await;
        let now = self.clock.now();
        if self.repo.lift_blocks(symbol.as_str(), to_epoch_ms(&now), actor, reason).await? == 0 {
            return Err(ApiError::not_found(format!("{symbol} is not blocked")).with_detail(json!({"symbol": symbol})));
        }
        Ok(format_ts(&now))
    }

    pub async fn blocks(&self) -> ApiResult<Vec<BlockResult>> {
        let now = to_epoch_ms(&self.clock.now());
        Ok(self.repo.active_blocks(now).await?.iter().map(block_result).collect())
    }

    pub async fn rows(&self) -> ApiResult<Vec<WatchRecord>> {
        Ok(self.repo.watch_rows().await?)
    }

    /// The allocator: watch the top radar symbols (`source: RADAR`) while the active watchlist
    /// has room; blocked symbols are skipped. Returns the symbols newly watched (their
    /// strategies start in the engine).
    pub async fn auto_watch(&self, top: &[Symbol], settings: &Settings) -> Vec<Symbol> {
        let mut watched = Vec::new();
        for symbol in top.iter().take(settings.strategy_allocator.auto_watch_top_n as usize) {
            match self.watch_recording(symbol, WatchSource::Radar, settings, false).await {
                Ok(r) if r.watchlist_status == "WATCHING" => {
                    tracing::info!(%symbol, "allocator watched a radar symbol");
                    watched.push(symbol.clone());
                }
                Ok(_) => {}
                Err(e) if e.code == ErrorCode::RiskBlocked => {}
                Err(e) => tracing::warn!(%symbol, error = %e.message, "allocator could not watch"),
            }
        }
        watched
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
