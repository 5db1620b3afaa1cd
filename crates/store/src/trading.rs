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
    /// Watched symbols whose strategy the emergency halt stopped, not yet restarted.
    pub halt_stopped: Vec<String>,
    pub trading_date: Option<String>,
    pub trades_today: i64,
    pub realized_today: Decimal,
    pub start_equity: Decimal,
    pub peak_equity: Decimal,
    pub cash: Decimal,
    pub updated_at: i64,
    /// The engine's order counter (see migration 0016).
    pub order_sequence: i64,
}

/// Narrowing of the order list (also the key of a page kept by its caller).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
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
    /// A counter moved by every transaction that writes orders or executions: it changes
    /// whenever anything trades are built from does, and reading it costs one row.
    async fn orders_version(&self) -> Result<i64, StoreError>;
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
    trading_date, created_at, updated_at, stop_loss, legs, extended_hours";

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
        legs: match r.try_get::<Option<String>, _>("legs")? {
            Some(text) => {
                Some(serde_json::from_str(&text).map_err(|e| StoreError::Corrupt(format!("legs {text:?}: {e}")))?)
            }
            None => None,
        },
        extended_hours: r.try_get::<i64, _>("extended_hours")? != 0,
        reject_reason: r.try_get("reject_reason")?,
        created_at: from_epoch_ms(r.try_get("created_at")?),
        updated_at: from_epoch_ms(r.try_get("updated_at")?),
    })
}

/// A bound value of a query built at run time.
enum Arg<'a> {
    Text(&'a str),
    Int(i64),
}

/// The order list's query: only the filters given become conditions, each a plain comparison.
/// `($1 IS NULL OR trading_date = $1)` cannot use an index, so every request scanned and sorted
/// every order ever stored; with the day given, the page is read from `orders_day_page` in
/// order and stops after `limit` rows.
fn orders_query(f: &OrderFilter) -> (String, Vec<Arg<'_>>) {
    let (mut args, mut conditions) = (Vec::new(), Vec::new());
    for (column, value) in [("trading_date", &f.trading_date), ("status", &f.status), ("symbol", &f.symbol)] {
        if let Some(value) = value {
            args.push(Arg::Text(value));
            conditions.push(format!("{column} = ${}", args.len()));
        }
    }
    if let Some((at, id)) = &f.before {
        args.extend([Arg::Int(*at), Arg::Text(id)]);
        conditions.push(format!("(created_at, client_order_id) < (${}, ${})", args.len() - 1, args.len()));
    }
    args.push(Arg::Int(i64::from(f.limit)));
    let filter = if conditions.is_empty() { String::new() } else { format!("WHERE {}", conditions.join(" AND ")) };
    let sql = format!(
        "SELECT {ORDER_COLUMNS} FROM orders {filter} ORDER BY created_at DESC, client_order_id DESC LIMIT ${}",
        args.len()
    );
    (sql, args)
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
        let mut tx = self.begin().await?;
        save_orders_in(&mut tx, orders, mode, trading_date).await?;
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
        let (sql, args) = orders_query(f);
        let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
        for arg in args {
            query = match arg {
                Arg::Text(text) => query.bind(text),
                Arg::Int(n) => query.bind(n),
            };
        }
        let rows = query.fetch_all(self.pool()?).await?;
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

    async fn orders_version(&self) -> Result<i64, StoreError> {
        let row = sqlx::query("SELECT seq FROM orders_changes WHERE id = 1").fetch_one(self.pool()?).await?;
        Ok(row.try_get("seq")?)
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
        let mut tx = self.begin().await?;
        save_orders_in(&mut tx, orders, mode, trading_date).await?;
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
        let mut tx = self.begin().await?;
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
            "SELECT state, halted_at, halt_reason, halt_actor, halt_stopped, trading_date, trades_today, realized_today, start_equity, \
             peak_equity, cash, updated_at, order_sequence FROM trading_state WHERE id = 1",
        )
        .fetch_optional(self.pool()?)
        .await?;
        let Some(r) = row else { return Ok(None) };
        Ok(Some(EngineStateRecord {
            state: r.try_get("state")?,
            halted_at: r.try_get("halted_at")?,
            halt_reason: r.try_get("halt_reason")?,
            halt_actor: r.try_get("halt_actor")?,
            halt_stopped: r
                .try_get::<String, _>("halt_stopped")?
                .split(',')
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .collect(),
            trading_date: r.try_get("trading_date")?,
            trades_today: r.try_get("trades_today")?,
            realized_today: dec(&r.try_get::<String, _>("realized_today")?)?,
            start_equity: dec(&r.try_get::<String, _>("start_equity")?)?,
            peak_equity: dec(&r.try_get::<String, _>("peak_equity")?)?,
            cash: dec(&r.try_get::<String, _>("cash")?)?,
            updated_at: r.try_get("updated_at")?,
            order_sequence: r.try_get("order_sequence")?,
        }))
    }
}

/// Saves the orders and, when there are any, moves the change counter in the same transaction:
/// the counter can never say "unchanged" about orders that were written.
async fn save_orders_in(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    orders: &[Order],
    mode: &str,
    trading_date: &str,
) -> Result<(), StoreError> {
    for o in orders {
        save_order_in(tx, o, mode, trading_date).await?;
    }
    if !orders.is_empty() {
        sqlx::query("UPDATE orders_changes SET seq = seq + 1 WHERE id = 1").execute(&mut **tx).await?;
    }
    Ok(())
}

async fn save_order_in(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    o: &Order,
    mode: &str,
    trading_date: &str,
) -> Result<(), StoreError> {
    sqlx::query(sqlx::AssertSqlSafe(format!(
            "INSERT INTO orders ({ORDER_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23) \
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
        .bind(o.legs.map(|l| serde_json::to_string(&l).expect("legs serialize")))
        .bind(i64::from(o.extended_hours))
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
         start_equity, peak_equity, cash, updated_at, halt_stopped, order_sequence) \
         VALUES (1, $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13) \
         ON CONFLICT (id) DO UPDATE SET state = $1, halted_at = $2, halt_reason = $3, halt_actor = $4, trading_date = $5, \
         trades_today = $6, realized_today = $7, start_equity = $8, peak_equity = $9, cash = $10, updated_at = $11, \
         halt_stopped = $12, order_sequence = $13",
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
    .bind(s.halt_stopped.join(","))
    .bind(s.order_sequence)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tradeops_core::time::from_epoch_ms;

    async fn database() -> (tempfile::TempDir, Database) {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(&format!("sqlite://{}/t.db", dir.path().display())).await.unwrap();
        (dir, db)
    }

    fn order(id: &str, at_ms: i64) -> Order {
        let id = ClientOrderId::parse(id).unwrap();
        let symbol = Symbol::parse("ABC").unwrap();
        Order::new(id, symbol, Side::Buy, OrderType::Market, TimeInForce::Day, 10, None, None, from_epoch_ms(at_ms))
    }

    /// Trades are rebuilt only when the version moves, so it must move on every write — also a
    /// status change of an older order that adds no execution and is not the latest update
    /// (counting rows and taking the latest update missed it).
    #[tokio::test]
    async fn every_write_of_orders_moves_the_version() {
        let (_dir, db) = database().await;
        let (mut older, newer) = (order("o-1", 1_000), order("o-2", 5_000));
        db.save_orders(&[older.clone(), newer], "PAPER", "2026-11-20").await.unwrap();
        let before = db.orders_version().await.unwrap();
        older.status = OrderStatus::Canceled;
        older.updated_at = from_epoch_ms(2_000);
        db.save_orders(&[older], "PAPER", "2026-11-20").await.unwrap();
        assert!(db.orders_version().await.unwrap() > before, "a cancel of an older order is a change");
        let after = db.orders_version().await.unwrap();
        db.save_orders(&[], "PAPER", "2026-11-20").await.unwrap();
        assert_eq!(db.orders_version().await.unwrap(), after, "writing nothing changes nothing");
        db.close().await;
    }

    /// A batch of orders is written whole on both databases: new orders inserted with every
    /// field, stored ones updated (broker id, status, fills, fees, refusal, time), an order twice
    /// in the batch stored as it stands last, and its executions once.
    #[tokio::test]
    async fn a_batch_of_orders_is_written_whole_on_both_databases() {
        use tradeops_core::orders::{ExitLegs, OrderEvent};
        for (db, _dir, admin) in crate::test_databases::databases().await {
            let backend = db.backend().name();
            let at = from_epoch_ms(1_000);
            let mut stored = order("o-1", 1_000);
            stored.reason = Some("PROTECTIVE_STOP: it's \"quoted\"".into());
            stored.limit_price = Some(Decimal::new(12_345, 4));
            stored.legs = Some(ExitLegs { stop_price: Decimal::new(99, 2), stop_limit_price: None, take_profit: None });
            db.save_orders(&[stored.clone()], "PAPER", "2026-11-20").await.unwrap();
            stored.apply(OrderEvent::Accepted { broker_order_id: "b-1".into() }, at).unwrap();
            let fill = Execution {
                execution_id: "e-1".into(),
                timestamp: from_epoch_ms(2_000),
                quantity: 4,
                price: Decimal::new(1_001, 2),
                fee: Decimal::ZERO,
            };
            stored.apply(OrderEvent::Filled(fill), from_epoch_ms(2_000)).unwrap();
            let (mut twice, fresh) = (order("o-2", 1_500), order("o-3", 1_600));
            let first = twice.clone();
            twice.apply(OrderEvent::CancelRequested, from_epoch_ms(3_000)).unwrap();
            db.save_batch(&[stored.clone(), first, fresh.clone(), twice.clone()], &[], &state(), "PAPER", "2026-11-20")
                .await
                .unwrap();
            for expected in [&stored, &fresh, &twice] {
                let (found, mode) = db.order(expected.client_order_id.as_str()).await.unwrap().expect("stored");
                assert_eq!((&found, mode.as_str()), (expected, "PAPER"), "{backend}");
            }
            db.save_orders(&[stored.clone()], "PAPER", "2026-11-20").await.unwrap();
            let (found, _) = db.order("o-1").await.unwrap().unwrap();
            assert_eq!(found.executions.len(), 1, "{backend}: an execution once");
            db.close().await;
            crate::test_databases::drop_postgres(admin).await;
        }
    }

    fn state() -> EngineStateRecord {
        EngineStateRecord {
            state: "ACTIVE".into(),
            halted_at: None,
            halt_reason: None,
            halt_actor: None,
            halt_stopped: Vec::new(),
            trading_date: Some("2026-11-20".into()),
            trades_today: 0,
            realized_today: Decimal::ZERO,
            start_equity: Decimal::from(100_000),
            peak_equity: Decimal::from(100_000),
            cash: Decimal::from(100_000),
            updated_at: 1_000,
            order_sequence: 3,
        }
    }

    /// A day's page of orders is read from the index in page order: neither a scan of every
    /// order ever stored nor a sort, however long the history grows — also the next pages.
    #[tokio::test]
    async fn a_days_page_of_orders_is_read_from_the_index_in_order() {
        let (_dir, db) = database().await;
        let day = OrderFilter { trading_date: Some("2026-11-20".into()), limit: 101, ..Default::default() };
        let next = OrderFilter { before: Some((5_000, "o-9".into())), ..day.clone() };
        let of_symbol = OrderFilter { symbol: Some("ABC".into()), ..next.clone() };
        for filter in [day, next, of_symbol] {
            let (sql, args) = orders_query(&filter);
            let mut query = sqlx::query(sqlx::AssertSqlSafe(format!("EXPLAIN QUERY PLAN {sql}")));
            for arg in args {
                query = match arg {
                    Arg::Text(text) => query.bind(text),
                    Arg::Int(n) => query.bind(n),
                };
            }
            let plan: Vec<String> = query
                .fetch_all(db.pool().unwrap())
                .await
                .unwrap()
                .iter()
                .map(|r| r.try_get("detail").unwrap())
                .collect();
            assert!(plan.iter().any(|step| step.contains("USING INDEX orders_day_page")), "{filter:?}: {plan:?}");
            assert!(!plan.iter().any(|step| step.contains("B-TREE")), "no sort for {filter:?}: {plan:?}");
        }
        db.close().await;
    }
}
