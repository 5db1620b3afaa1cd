//! Orders and executions, positions, and the engine's state row (trading state latch, daily
//! counters, cash). Conversions between rows and domain types live here, in one place.

use crate::db::{Database, StoreError};
use async_trait::async_trait;
use rust_decimal::Decimal;
use sqlx::any::AnyRow;
use sqlx::Row;
use std::str::FromStr;
use tradeops_core::market::Side;
use tradeops_core::orders::{ClientOrderId, Execution, Order, OrderStatus, OrderType, TimeInForce};
use tradeops_core::positions::Position;
use tradeops_core::time::{from_epoch_ms, to_epoch_ms};
use tradeops_core::Symbol;

/// The engine's persisted state besides orders and positions.
#[derive(Clone, Debug, PartialEq)]
pub struct EngineStateRecord {
    /// `ACTIVE`, `REDUCING` or `HALTED`.
    pub state: String,
    pub halted_at: Option<i64>,
    pub halt_reason: Option<String>,
    pub halt_actor: Option<String>,
    pub trading_date: Option<String>,
    pub trades_today: i64,
    pub realized_today: Decimal,
    pub start_equity: Decimal,
    pub peak_equity: Decimal,
    pub cash: Decimal,
    pub updated_at: i64,
}

/// Narrowing of the order list.
#[derive(Clone, Debug, Default)]
pub struct OrderFilter {
    pub trading_date: Option<String>,
    pub status: Option<String>,
    pub symbol: Option<String>,
    /// Orders created before this (epoch ms) and, on ties, with a smaller id: the cursor.
    pub before: Option<(i64, String)>,
    pub limit: u32,
}

#[async_trait]
pub trait TradingRepository: Send + Sync {
    /// Inserts or updates each order and inserts executions not yet stored, in one transaction.
    async fn save_orders(&self, orders: &[Order], mode: &str, trading_date: &str) -> Result<(), StoreError>;
    /// The order with its executions, and the mode it was placed in.
    async fn order(&self, id: &str) -> Result<Option<(Order, String)>, StoreError>;
    /// Orders newest first.
    async fn orders(&self, filter: &OrderFilter) -> Result<Vec<(Order, String)>, StoreError>;
    /// Orders not in a final status (to restore the engine).
    async fn open_orders(&self) -> Result<Vec<Order>, StoreError>;
    /// Every order with its executions and mode, oldest first (trades are built from them).
    async fn all_orders(&self) -> Result<Vec<(Order, String)>, StoreError>;
    /// How many orders and executions exist and the latest order update: changes whenever
    /// anything trades are built from does.
    async fn orders_version(&self) -> Result<(i64, i64, i64), StoreError>;
    /// Order updates, positions and the engine's state row of one batch, in one transaction: a
    /// crash never leaves a fill without its position or its cash.
    async fn save_batch(
        &self,
        orders: &[Order],
        positions: &[Position],
        state: &EngineStateRecord,
        mode: &str,
        trading_date: &str,
    ) -> Result<(), StoreError>;
    async fn positions(&self) -> Result<Vec<Position>, StoreError>;
    async fn save_engine_state(&self, state: &EngineStateRecord) -> Result<(), StoreError>;
    async fn engine_state(&self) -> Result<Option<EngineStateRecord>, StoreError>;
    /// The latest market time anything was persisted with (epoch ms): where a simulated market
    /// resumes so a restart never rewinds it.
    async fn latest_market_time(&self) -> Result<Option<i64>, StoreError>;
}

fn dec(text: &str) -> Result<Decimal, StoreError> {
    Decimal::from_str(text).map_err(|e| StoreError::Corrupt(format!("decimal {text:?}: {e}")))
}

fn opt_dec(text: Option<String>) -> Result<Option<Decimal>, StoreError> {
    text.as_deref().map(dec).transpose()
}

fn enum_text<T: serde::Serialize>(value: &T) -> String {
    serde_json::to_value(value).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default()
}

fn parse_enum<T: serde::de::DeserializeOwned>(text: &str) -> Result<T, StoreError> {
    serde_json::from_value(serde_json::Value::String(text.to_string()))
        .map_err(|e| StoreError::Corrupt(format!("{text:?}: {e}")))
}

const ORDER_COLUMNS: &str = "client_order_id, broker_order_id, symbol, side, order_type, time_in_force, quantity, \
    limit_price, stop_price, status, filled_quantity, filled_notional, fees, reason, strategy_id, reject_reason, mode, \
    trading_date, created_at, updated_at, stop_loss";

fn order_row(r: &AnyRow) -> Result<Order, StoreError> {
    let id: String = r.try_get("client_order_id")?;
    let symbol: String = r.try_get("symbol")?;
    Ok(Order {
        client_order_id: ClientOrderId::parse(&id).map_err(StoreError::Corrupt)?,
        broker_order_id: r.try_get("broker_order_id")?,
        symbol: Symbol::parse(&symbol).map_err(StoreError::Corrupt)?,
        side: parse_enum::<Side>(&r.try_get::<String, _>("side")?)?,
        order_type: parse_enum::<OrderType>(&r.try_get::<String, _>("order_type")?)?,
        time_in_force: parse_enum::<TimeInForce>(&r.try_get::<String, _>("time_in_force")?)?,
        quantity: r.try_get::<i64, _>("quantity")? as u64,
        limit_price: opt_dec(r.try_get("limit_price")?)?,
        stop_price: opt_dec(r.try_get("stop_price")?)?,
        status: parse_enum::<OrderStatus>(&r.try_get::<String, _>("status")?)?,
        filled_quantity: r.try_get::<i64, _>("filled_quantity")? as u64,
        filled_notional: dec(&r.try_get::<String, _>("filled_notional")?)?,
        fees: dec(&r.try_get::<String, _>("fees")?)?,
        executions: Vec::new(),
        reason: r.try_get("reason")?,
        strategy_id: r.try_get("strategy_id")?,
        stop_loss: opt_dec(r.try_get("stop_loss")?)?,
        reject_reason: r.try_get("reject_reason")?,
        created_at: from_epoch_ms(r.try_get("created_at")?),
        updated_at: from_epoch_ms(r.try_get("updated_at")?),
    })
}

impl Database {
    async fn executions_of(&self, order: &mut Order) -> Result<(), StoreError> {
        let rows = sqlx::query(
            "SELECT execution_id, ts, quantity, price, fee FROM executions WHERE client_order_id = $1 ORDER BY ts, execution_id",
        )
        .bind(order.client_order_id.as_str())
        .fetch_all(self.pool()?)
        .await?;
        order.executions = rows
            .iter()
            .map(|r| {
                Ok(Execution {
                    execution_id: r.try_get("execution_id")?,
                    timestamp: from_epoch_ms(r.try_get("ts")?),
                    quantity: r.try_get::<i64, _>("quantity")? as u64,
                    price: dec(&r.try_get::<String, _>("price")?)?,
                    fee: dec(&r.try_get::<String, _>("fee")?)?,
                })
            })
            .collect::<Result<_, StoreError>>()?;
        Ok(())
    }
}

#[async_trait]
impl TradingRepository for Database {
    async fn save_orders(&self, orders: &[Order], mode: &str, trading_date: &str) -> Result<(), StoreError> {
        let mut tx = self.pool()?.begin().await?;
        for o in orders {
            save_order_in(&mut tx, o, mode, trading_date).await?;
        }
        tx.commit().await?;
        Ok(())
    }

    async fn order(&self, id: &str) -> Result<Option<(Order, String)>, StoreError> {
        let row =
            sqlx::query(sqlx::AssertSqlSafe(format!("SELECT {ORDER_COLUMNS} FROM orders WHERE client_order_id = $1")))
                .bind(id)
                .fetch_optional(self.pool()?)
                .await?;
        let Some(row) = row else { return Ok(None) };
        let mut order = order_row(&row)?;
        self.executions_of(&mut order).await?;
        Ok(Some((order, row.try_get("mode")?)))
    }

    async fn orders(&self, f: &OrderFilter) -> Result<Vec<(Order, String)>, StoreError> {
        let (before_at, before_id) = f.before.clone().unzip();
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {ORDER_COLUMNS} FROM orders WHERE ($1 IS NULL OR trading_date = $1) AND ($2 IS NULL OR status = $2) \
             AND ($3 IS NULL OR symbol = $3) AND ($4 IS NULL OR created_at < $4 OR (created_at = $4 AND client_order_id < $5)) \
             ORDER BY created_at DESC, client_order_id DESC LIMIT $6"
        )))
        .bind(&f.trading_date)
        .bind(&f.status)
        .bind(&f.symbol)
        .bind(before_at)
        .bind(before_id)
        .bind(i64::from(f.limit))
        .fetch_all(self.pool()?)
        .await?;
        rows.iter().map(|r| Ok((order_row(r)?, r.try_get::<String, _>("mode")?))).collect()
    }

    async fn all_orders(&self) -> Result<Vec<(Order, String)>, StoreError> {
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {ORDER_COLUMNS} FROM orders ORDER BY created_at, client_order_id"
        )))
        .fetch_all(self.pool()?)
        .await?;
        let mut orders = rows
            .iter()
            .map(|r| Ok((order_row(r)?, r.try_get::<String, _>("mode")?)))
            .collect::<Result<Vec<_>, StoreError>>()?;
        let index: std::collections::HashMap<String, usize> =
            orders.iter().enumerate().map(|(i, (o, _))| (o.client_order_id.as_str().to_string(), i)).collect();
        let executions = sqlx::query(
            "SELECT execution_id, client_order_id, ts, quantity, price, fee FROM executions ORDER BY ts, execution_id",
        )
        .fetch_all(self.pool()?)
        .await?;
        for r in &executions {
            let id: String = r.try_get("client_order_id")?;
            if let Some(&i) = index.get(&id) {
                orders[i].0.executions.push(Execution {
                    execution_id: r.try_get("execution_id")?,
                    timestamp: from_epoch_ms(r.try_get("ts")?),
                    quantity: r.try_get::<i64, _>("quantity")? as u64,
                    price: dec(&r.try_get::<String, _>("price")?)?,
                    fee: dec(&r.try_get::<String, _>("fee")?)?,
                });
            }
        }
        Ok(orders)
    }

    async fn orders_version(&self) -> Result<(i64, i64, i64), StoreError> {
        let row = sqlx::query(
            "SELECT (SELECT COUNT(*) FROM orders) AS n, (SELECT COUNT(*) FROM executions) AS x, \
             (SELECT COALESCE(MAX(updated_at), 0) FROM orders) AS latest",
        )
        .fetch_one(self.pool()?)
        .await?;
        Ok((row.try_get("n")?, row.try_get("x")?, row.try_get("latest")?))
    }

    async fn open_orders(&self) -> Result<Vec<Order>, StoreError> {
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {ORDER_COLUMNS} FROM orders WHERE status IN ('NEW', 'ACCEPTED', 'PARTIALLY_FILLED', 'PENDING_CANCEL') \
             ORDER BY created_at, client_order_id"
        )))
        .fetch_all(self.pool()?)
        .await?;
        let mut orders = Vec::with_capacity(rows.len());
        for row in &rows {
            let mut order = order_row(row)?;
            self.executions_of(&mut order).await?;
            orders.push(order);
        }
        Ok(orders)
    }

    async fn save_batch(
        &self,
        orders: &[Order],
        positions: &[Position],
        state: &EngineStateRecord,
        mode: &str,
        trading_date: &str,
    ) -> Result<(), StoreError> {
        let mut tx = self.pool()?.begin().await?;
        for o in orders {
            save_order_in(&mut tx, o, mode, trading_date).await?;
        }
        for p in positions {
            save_position_in(&mut tx, p).await?;
        }
        save_state_in(&mut tx, state).await?;
        tx.commit().await?;
        Ok(())
    }

    async fn positions(&self) -> Result<Vec<Position>, StoreError> {
        let rows = sqlx::query(
            "SELECT symbol, quantity, cost_basis, realized_pnl, fees, opened_at, updated_at FROM positions ORDER BY symbol",
        )
        .fetch_all(self.pool()?)
        .await?;
        rows.iter()
            .map(|r| {
                let symbol: String = r.try_get("symbol")?;
                Ok(Position {
                    symbol: Symbol::parse(&symbol).map_err(StoreError::Corrupt)?,
                    quantity: r.try_get::<i64, _>("quantity")? as u64,
                    cost_basis: dec(&r.try_get::<String, _>("cost_basis")?)?,
                    realized_pnl: dec(&r.try_get::<String, _>("realized_pnl")?)?,
                    fees: dec(&r.try_get::<String, _>("fees")?)?,
                    opened_at: r.try_get::<Option<i64>, _>("opened_at")?.map(from_epoch_ms),
                    updated_at: r.try_get::<Option<i64>, _>("updated_at")?.map(from_epoch_ms),
                })
            })
            .collect()
    }

    async fn save_engine_state(&self, state: &EngineStateRecord) -> Result<(), StoreError> {
        let mut tx = self.pool()?.begin().await?;
        save_state_in(&mut tx, state).await?;
        tx.commit().await?;
        Ok(())
    }

    async fn latest_market_time(&self) -> Result<Option<i64>, StoreError> {
        let row = sqlx::query(
            "SELECT MAX(t) AS t FROM (SELECT MAX(updated_at) AS t FROM trading_state UNION ALL SELECT MAX(updated_at) FROM orders \
             UNION ALL SELECT MAX(effective_from) FROM symbol_blocks UNION ALL SELECT MAX(time_added) FROM watchlist \
             UNION ALL SELECT MAX(captured_at) FROM radar_rows) AS times",
        )
        .fetch_one(self.pool()?)
        .await?;
        Ok(row.try_get::<Option<i64>, _>("t")?)
    }

    async fn engine_state(&self) -> Result<Option<EngineStateRecord>, StoreError> {
        let row = sqlx::query(
            "SELECT state, halted_at, halt_reason, halt_actor, trading_date, trades_today, realized_today, start_equity, \
             peak_equity, cash, updated_at FROM trading_state WHERE id = 1",
        )
        .fetch_optional(self.pool()?)
        .await?;
        let Some(r) = row else { return Ok(None) };
        Ok(Some(EngineStateRecord {
            state: r.try_get("state")?,
            halted_at: r.try_get("halted_at")?,
            halt_reason: r.try_get("halt_reason")?,
            halt_actor: r.try_get("halt_actor")?,
            trading_date: r.try_get("trading_date")?,
            trades_today: r.try_get("trades_today")?,
            realized_today: dec(&r.try_get::<String, _>("realized_today")?)?,
            start_equity: dec(&r.try_get::<String, _>("start_equity")?)?,
            peak_equity: dec(&r.try_get::<String, _>("peak_equity")?)?,
            cash: dec(&r.try_get::<String, _>("cash")?)?,
            updated_at: r.try_get("updated_at")?,
        }))
    }
}

async fn save_order_in(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    o: &Order,
    mode: &str,
    trading_date: &str,
) -> Result<(), StoreError> {
    sqlx::query(sqlx::AssertSqlSafe(format!(
            "INSERT INTO orders ({ORDER_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21) \
             ON CONFLICT (client_order_id) DO UPDATE SET broker_order_id = $2, status = $10, filled_quantity = $11, \
             filled_notional = $12, fees = $13, reject_reason = $16, updated_at = $20"
        )))
        .bind(o.client_order_id.as_str())
        .bind(o.broker_order_id.as_deref())
        .bind(o.symbol.as_str())
        .bind(o.side.as_str())
        .bind(enum_text(&o.order_type))
        .bind(enum_text(&o.time_in_force))
        .bind(o.quantity as i64)
        .bind(o.limit_price.map(|p| p.to_string()))
        .bind(o.stop_price.map(|p| p.to_string()))
        .bind(o.status.as_str())
        .bind(o.filled_quantity as i64)
        .bind(o.filled_notional.to_string())
        .bind(o.fees.to_string())
        .bind(o.reason.as_deref())
        .bind(o.strategy_id.as_deref())
        .bind(&o.reject_reason)
        .bind(mode)
        .bind(trading_date)
        .bind(to_epoch_ms(&o.created_at))
        .bind(to_epoch_ms(&o.updated_at))
        .bind(o.stop_loss.map(|p| p.to_string()))
        .execute(&mut **tx)
        .await?;
    for e in &o.executions {
        sqlx::query(
                "INSERT INTO executions (execution_id, client_order_id, ts, quantity, price, fee) VALUES ($1, $2, $3, $4, $5, $6) \
                 ON CONFLICT (execution_id) DO NOTHING",
            )
            .bind(&*e.execution_id)
            .bind(o.client_order_id.as_str())
            .bind(to_epoch_ms(&e.timestamp))
            .bind(e.quantity as i64)
            .bind(e.price.to_string())
            .bind(e.fee.to_string())
            .execute(&mut **tx)
            .await?;
    }
    Ok(())
}

async fn save_position_in(tx: &mut sqlx::Transaction<'_, sqlx::Any>, p: &Position) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO positions (symbol, quantity, cost_basis, realized_pnl, fees, opened_at, updated_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (symbol) DO UPDATE SET quantity = $2, cost_basis = $3, \
         realized_pnl = $4, fees = $5, opened_at = $6, updated_at = $7",
    )
    .bind(p.symbol.as_str())
    .bind(p.quantity as i64)
    .bind(p.cost_basis.to_string())
    .bind(p.realized_pnl.to_string())
    .bind(p.fees.to_string())
    .bind(p.opened_at.as_ref().map(to_epoch_ms))
    .bind(p.updated_at.as_ref().map(to_epoch_ms))
    .execute(&mut **tx)
    .await?;
    Ok(())
}

async fn save_state_in(tx: &mut sqlx::Transaction<'_, sqlx::Any>, s: &EngineStateRecord) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO trading_state (id, state, halted_at, halt_reason, halt_actor, trading_date, trades_today, realized_today, \
         start_equity, peak_equity, cash, updated_at) VALUES (1, $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) \
         ON CONFLICT (id) DO UPDATE SET state = $1, halted_at = $2, halt_reason = $3, halt_actor = $4, trading_date = $5, \
         trades_today = $6, realized_today = $7, start_equity = $8, peak_equity = $9, cash = $10, updated_at = $11",
    )
    .bind(&s.state)
    .bind(s.halted_at)
    .bind(&s.halt_reason)
    .bind(&s.halt_actor)
    .bind(&s.trading_date)
    .bind(s.trades_today)
    .bind(s.realized_today.to_string())
    .bind(s.start_equity.to_string())
    .bind(s.peak_equity.to_string())
    .bind(s.cash.to_string())
    .bind(s.updated_at)
    .execute(&mut **tx)
    .await?;
    Ok(())
}
