//! Orders: `POST /api/orders` (manual entry), `POST /api/orders/preview` (its risk preview),
//! `GET /api/orders`, `GET /api/orders/{id}`, `POST /api/orders/cancel`.

use crate::domain::trading::TradingService;
use crate::domain::{DomainError, ErrorCode};
use crate::http::auth::Caller;
use crate::http::envelope::{ApiResponse, SuccessBody};
use crate::http::error::{ApiError, ApiResult};
use crate::http::extract::{Json, Path, Query};
use crate::http::guard::{Action, Sensitive, Target};
use crate::http::order_pages::OrderPage;
use crate::http::routes::list_limit;
use crate::http::state::AppState;
use axum::extract::State;
use axum::routing::{get, post};
use axum::Router;
use rust_decimal::prelude::ToPrimitive;
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::Value;
use std::sync::Arc;
use tradeops_core::engine::{CommandError, ManualOrder};
use tradeops_core::market::Side;
use tradeops_core::orders::{ClientOrderId, Execution, ExitLegs, Order, OrderStatus, OrderType, TimeInForce};
use tradeops_core::risk::{Refusal, RiskFigure, RiskRule};
use tradeops_core::time::{format_ts, to_epoch_ms};
use tradeops_core::{Role, Symbol};
use tradeops_store::{OrderFilter, TradingRepository};

/// Most shares one order may ask for (a face check; the risk gate bounds it further).
pub const MAX_ORDER_QUANTITY: u64 = 10_000_000;

pub const ORDER_CREATE: Action = Action { name: "order.create", role: Role::Operator };
pub const ORDER_CANCEL: Action = Action { name: "order.cancel", role: Role::Operator };

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/api/orders", get(list).post(create))
        .route("/api/orders/cancel", post(cancel))
        .route("/api/orders/preview", post(preview))
        .route("/api/orders/{client_order_id}", get(detail))
}

fn money(d: Decimal) -> f64 {
    d.to_f64().unwrap_or(0.0)
}

/// An order list row (seed §2.4 plus CONTRACT §4's additions).
#[derive(Serialize, utoipa::ToSchema)]
pub struct OrderRow {
    pub submitted_at: String,
    pub status: OrderStatus,
    pub symbol: String,
    pub side: Side,
    pub quantity: u64,
    pub filled_quantity: u64,
    pub order_type: OrderType,
    /// Limit price, else the average fill price.
    pub price: Option<f64>,
    pub broker_name: &'static str,
    pub client_order_id: String,
    pub broker_order_id: Option<String>,
    pub reason: Option<String>,
    pub strategy_id: Option<String>,
    pub mode: String,
    /// Worked in the extended sessions too (CONTRACT §12): an operator's extended-hours limit,
    /// or an exit sent outside 09:30–16:00 as an extended-hours marketable limit.
    pub extended_hours: bool,
}

/// Order detail: the row plus prices, times and executions.
#[derive(Serialize, utoipa::ToSchema)]
pub struct OrderDetail {
    #[serde(flatten)]
    pub row: OrderRow,
    pub time_in_force: TimeInForce,
    pub limit_price: Option<f64>,
    pub stop_price: Option<f64>,
    pub average_fill_price: Option<f64>,
    pub fees: f64,
    pub reject_reason: Option<String>,
    pub updated_at: String,
    pub executions: Vec<ExecutionRow>,
    /// The stop leg: on a `BUY`, the one placed at the broker when it fills; on a protective
    /// order, its own (CONTRACT §11). `null` for any other order.
    pub stop_loss: Option<StopLossView>,
    /// The take-profit leg, as `stop_loss`.
    pub take_profit: Option<TakeProfitView>,
}

/// A stop leg as an order shows it.
#[derive(Serialize, utoipa::ToSchema)]
pub struct StopLossView {
    pub stop_price: f64,
    /// Set for a stop-limit leg.
    pub limit_price: Option<f64>,
}

/// A take-profit leg as an order shows it.
#[derive(Serialize, utoipa::ToSchema)]
pub struct TakeProfitView {
    pub limit_price: f64,
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct ExecutionRow {
    pub execution_id: String,
    pub timestamp: String,
    pub quantity: u64,
    pub price: f64,
    pub fee: f64,
}

/// One order as the lists show it. `broker` is the execution broker the service runs (brokers
/// are chosen at start, and changed only with nothing open): an order of an earlier run under
/// another broker shows this one's name.
pub fn order_row(o: &Order, mode: &str, broker: &'static str) -> OrderRow {
    OrderRow {
        submitted_at: format_ts(&o.created_at),
        status: o.status,
        symbol: o.symbol.to_string(),
        side: o.side,
        quantity: o.quantity,
        filled_quantity: o.filled_quantity,
        order_type: o.order_type,
        price: o.limit_price.or(o.average_fill_price()).map(money),
        broker_name: broker,
        client_order_id: o.client_order_id.to_string(),
        broker_order_id: o.broker_order_id.as_deref().map(str::to_string),
        reason: o.reason.as_deref().map(str::to_string),
        strategy_id: o.strategy_id.as_deref().map(str::to_string),
        mode: mode.to_string(),
        extended_hours: o.extended_hours,
    }
}

pub fn order_detail(o: &Order, mode: &str, broker: &'static str) -> OrderDetail {
    OrderDetail {
        row: order_row(o, mode, broker),
        time_in_force: o.time_in_force,
        limit_price: o.limit_price.map(money),
        stop_price: o.stop_price.map(money),
        average_fill_price: o.average_fill_price().map(money),
        fees: money(o.fees),
        reject_reason: o.reject_reason.clone(),
        updated_at: format_ts(&o.updated_at),
        executions: o.executions.iter().map(execution_row).collect(),
        stop_loss: o
            .legs
            .map(|l| StopLossView { stop_price: money(l.stop_price), limit_price: l.stop_limit_price.map(money) }),
        take_profit: o.legs.and_then(|l| l.take_profit).map(|t| TakeProfitView { limit_price: money(t) }),
    }
}

fn execution_row(e: &Execution) -> ExecutionRow {
    ExecutionRow {
        execution_id: e.execution_id.to_string(),
        timestamp: format_ts(&e.timestamp),
        quantity: e.quantity,
        price: money(e.price),
        fee: money(e.fee),
    }
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateOrder {
    pub symbol: Symbol,
    pub side: Side,
    /// Whole shares.
    #[schema(minimum = 1, maximum = 10000000)]
    #[serde(deserialize_with = "crate::http::fields::whole_number::deserialize")]
    pub quantity: u64,
    /// `MARKET` (default), `LIMIT`, `STOP`, `STOP_LIMIT`.
    #[schema(nullable = false)]
    pub order_type: Option<OrderType>,
    /// Required by `LIMIT` and `STOP_LIMIT`. Whole cents at or above $1, at most 4 decimal places below.
    #[schema(value_type = Option<f64>, nullable = false, minimum = 0.0001)]
    #[serde(default, with = "rust_decimal::serde::float_option")]
    pub limit_price: Option<Decimal>,
    /// Required by `STOP` and `STOP_LIMIT`; the tick rule of `limit_price`.
    #[schema(value_type = Option<f64>, nullable = false, minimum = 0.0001)]
    #[serde(default, with = "rust_decimal::serde::float_option")]
    pub stop_price: Option<Decimal>,
    /// `DAY` (default), `GTC`, `IOC`.
    #[schema(nullable = false)]
    pub time_in_force: Option<TimeInForce>,
    /// Generated when absent.
    #[schema(nullable = false)]
    pub client_order_id: Option<ClientOrderId>,
    #[schema(nullable = false)]
    pub reason: Option<String>,
    /// A `BUY`'s stop leg, held at the broker from the moment the order fills (CONTRACT §11).
    #[schema(nullable = false)]
    pub stop_loss: Option<StopLossLeg>,
    /// A `BUY`'s take-profit leg, one-cancels-other with the stop; needs `stop_loss`.
    #[schema(nullable = false)]
    pub take_profit: Option<TakeProfitLeg>,
    /// Work the order in the pre-market (04:00–09:30 New York) and the after-hours (16:00–20:00)
    /// too; default false. Only a `LIMIT` `DAY` order may be (CONTRACT §12). Outside the
    /// regular session every other order is refused `OUTSIDE_REGULAR_SESSION`. Its stop leg, if
    /// any, is held by the engine until 09:30 and then placed at the broker.
    #[schema(nullable = false)]
    pub extended_hours: Option<bool>,
}

/// A stop leg: below the entry's reference price; the tick rule of `limit_price`.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct StopLossLeg {
    #[schema(value_type = f64, minimum = 0.0001)]
    #[serde(with = "rust_decimal::serde::float")]
    pub stop_price: Decimal,
    /// Makes the stop a stop-limit: a sell limit at or below `stop_price`.
    #[schema(value_type = Option<f64>, nullable = false, minimum = 0.0001)]
    #[serde(default, with = "rust_decimal::serde::float_option")]
    pub limit_price: Option<Decimal>,
}

/// A take-profit leg: a sell limit above the entry's reference price.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TakeProfitLeg {
    #[schema(value_type = f64, minimum = 0.0001)]
    #[serde(with = "rust_decimal::serde::float")]
    pub limit_price: Decimal,
}

fn check_price(field: &'static str, price: Option<Decimal>) -> ApiResult<()> {
    match price {
        Some(p) if p <= Decimal::ZERO => Err(ApiError::validation(field, "must be greater than zero")),
        Some(p) if p >= Decimal::ONE && p.normalize().scale() > 2 => {
            Err(ApiError::validation(field, "must be a whole cent at or above $1"))
        }
        Some(p) if p.normalize().scale() > 4 => Err(ApiError::validation(field, "at most 4 decimal places")),
        _ => Ok(()),
    }
}

/// The checks of an order's face, shared by the order and its preview.
fn manual_order(req: CreateOrder) -> ApiResult<ManualOrder> {
    check_price("limit_price", req.limit_price)?;
    check_price("stop_price", req.stop_price)?;
    let legs = match (&req.stop_loss, &req.take_profit) {
        (None, None) => None,
        (None, Some(_)) => {
            return Err(ApiError::validation(
                "take_profit.limit_price",
                "needs a stop_loss: the take-profit rests one-cancels-other with the stop",
            ))
        }
        (Some(stop), target) => {
            check_price("stop_loss.stop_price", Some(stop.stop_price))?;
            check_price("stop_loss.limit_price", stop.limit_price)?;
            check_price("take_profit.limit_price", target.as_ref().map(|t| t.limit_price))?;
            Some(ExitLegs {
                stop_price: stop.stop_price,
                stop_limit_price: stop.limit_price,
                take_profit: target.as_ref().map(|t| t.limit_price),
            })
        }
    };
    if req.quantity == 0 || req.quantity > MAX_ORDER_QUANTITY {
        return Err(crate::http::fields::refuse("quantity"));
    }
    Ok(ManualOrder {
        client_order_id: req.client_order_id,
        symbol: req.symbol,
        side: req.side,
        quantity: req.quantity,
        order_type: req.order_type.unwrap_or(OrderType::Market),
        limit_price: req.limit_price,
        stop_price: req.stop_price,
        time_in_force: req.time_in_force.unwrap_or(TimeInForce::Day),
        reason: req.reason,
        legs,
        extended_hours: req.extended_hours.unwrap_or(false),
    })
}

/// Manual order entry. Passes the same risk gate as strategy orders; persisted before it is
/// sent. A `BUY` of a symbol no strategy watches is managed by hand (`Halted`).
#[utoipa::path(post, path = "/api/orders", tag = "orders", security(("bearer" = [])), request_body = CreateOrder,
    responses((status = 201, description = "Accepted for sending (status NEW)", body = inline(SuccessBody<OrderDetail>)),
              (status = 400, description = "VALIDATION_ERROR", body = crate::http::envelope::ErrorBody),
              (status = 404, description = "NOT_FOUND (not a symbol of the market)", body = crate::http::envelope::ErrorBody),
              (status = 409, description = "DUPLICATE_ORDER_BLOCKED, MARKET_CLOSED, OUTSIDE_REGULAR_SESSION (outside 09:30-16:00, anything but a LIMIT DAY order with extended_hours), SYMBOL_HALTED (a MARKET or STOP order in a halted symbol), EMERGENCY_HALT_ACTIVE", body = crate::http::envelope::ErrorBody),
              (status = 422, description = "RISK_BLOCKED", body = crate::http::envelope::ErrorBody)))]
pub async fn create(State(state): State<AppState>, guard: Sensitive) -> ApiResult<ApiResponse<OrderDetail>> {
    guard
        .run(ORDER_CREATE, Target::BodyField("symbol"), |_caller, req: CreateOrder| async move {
            let order = TradingService::new(state.engine()).place_order(manual_order(req)?).await?;
            Ok(ApiResponse::created(order_detail(&order, state.settings.mode().as_str(), state.execution_broker)))
        })
        .await
}

#[derive(Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
pub struct OrderQuery {
    /// Trading day `YYYY-MM-DD` (America/New_York); default the current session.
    #[param(value_type = Option<crate::http::string_schemas::TradingDay>)]
    pub date: Option<String>,
    pub status: Option<OrderStatus>,
    #[param(value_type = Option<Symbol>)]
    pub symbol: Option<String>,
    #[param(minimum = 1, maximum = 1000)]
    pub limit: Option<u32>,
    #[param(value_type = Option<crate::http::string_schemas::OrderCursor>)]
    pub cursor: Option<String>,
}

/// Orders of a trading day, newest first, paginated.
#[utoipa::path(get, path = "/api/orders", tag = "orders", security(("bearer" = [])), params(OrderQuery),
    responses((status = 200, description = "Order rows", body = inline(SuccessBody<Vec<OrderRow>>)),
              (status = 400, description = "VALIDATION_ERROR", body = crate::http::envelope::ErrorBody)))]
pub async fn list(
    State(state): State<AppState>,
    _caller: Caller,
    Query(q): Query<OrderQuery>,
) -> ApiResult<ApiResponse<Vec<Arc<RawValue>>>> {
    let limit = list_limit(q.limit)?;
    let date = match &q.date {
        Some(text) => {
            chrono::NaiveDate::parse_from_str(text, "%Y-%m-%d").map_err(|_| crate::http::fields::refuse("date"))?
        }
        None => {
            let calendar =
                tradeops_core::calendar::MarketCalendar::new(state.settings.current().runtime.market_calendar);
            calendar.date_of(state.market_clock.now())
        }
    };
    let symbol = q.symbol.as_deref().map(Symbol::parse).transpose().map_err(|e| ApiError::validation("symbol", e))?;
    let before = q
        .cursor
        .as_deref()
        .map(|c| {
            c.split_once('~')
                .and_then(|(at, id)| Some((at.parse::<i64>().ok()?, id.to_string())))
                .ok_or_else(|| crate::http::fields::refuse("cursor"))
        })
        .transpose()?;
    let filter = OrderFilter {
        trading_date: Some(date.to_string()),
        status: q.status.map(|s| s.as_str().to_string()),
        symbol: symbol.map(|s| s.to_string()),
        before,
        limit: limit + 1,
    };
    let repo: &dyn TradingRepository = &state.db;
    // The version first: a page read after it is at least as new as the version it is kept under.
    let version = repo.orders_version().await?;
    let page = match state.order_pages.get(version, &filter) {
        Some(page) => page,
        None => {
            let mut rows = repo.orders(&filter).await?;
            let more = rows.len() > limit as usize;
            rows.truncate(limit as usize);
            let next = if more {
                rows.last().map(|(o, _)| format!("{}~{}", to_epoch_ms(&o.created_at), o.client_order_id))
            } else {
                None
            };
            let rows = rows.iter().map(|(o, mode)| raw_row(&order_row(o, mode, state.execution_broker))).collect();
            state.order_pages.put(version, filter, Arc::new(OrderPage { rows, next }))
        }
    };
    Ok(ApiResponse::page(page.rows.clone(), page.next.clone()))
}

fn raw_row(row: &OrderRow) -> Arc<RawValue> {
    Arc::from(serde_json::value::to_raw_value(row).expect("an order row serialises"))
}

/// One order with its executions.
#[utoipa::path(get, path = "/api/orders/{client_order_id}", tag = "orders", security(("bearer" = [])),
    params(("client_order_id" = String, Path, description = "Client order id")),
    responses((status = 200, description = "Order detail", body = inline(SuccessBody<OrderDetail>)),
              (status = 404, description = "NOT_FOUND", body = crate::http::envelope::ErrorBody)))]
pub async fn detail(
    State(state): State<AppState>,
    _caller: Caller,
    Path(id): Path<String>,
) -> ApiResult<ApiResponse<OrderDetail>> {
    let repo: &dyn TradingRepository = &state.db;
    let not_found = || ApiError::not_found(format!("No order {id:?}"));
    if ClientOrderId::parse(&id).is_err() {
        return Err(not_found());
    }
    let (order, mode) = repo.order(&id).await?.ok_or_else(not_found)?;
    Ok(ApiResponse::ok(order_detail(&order, &mode, state.execution_broker)))
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CancelOrder {
    pub client_order_id: ClientOrderId,
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct CancelResult {
    pub client_order_id: String,
    /// `PENDING_CANCEL` until the broker confirms.
    pub status: OrderStatus,
}

/// Requests the cancel of a working order.
///
/// For an order already `PENDING_CANCEL` its cancel is sent to the broker again (a cancel
/// whose answer was lost is never stuck), answered `ORDER_NOT_CANCELLABLE` with
/// `detail.status: PENDING_CANCEL` and `detail.cancel_sent_again: true` as CONTRACT §2 says;
/// like every cancel it is audited.
#[utoipa::path(post, path = "/api/orders/cancel", tag = "orders", security(("bearer" = [])), request_body = CancelOrder,
    responses((status = 200, description = "Cancel requested", body = inline(SuccessBody<CancelResult>)),
              (status = 404, description = "NOT_FOUND", body = crate::http::envelope::ErrorBody),
              (status = 409, description = "ORDER_NOT_CANCELLABLE: the order has ended, or is already PENDING_CANCEL (its cancel is then sent again)", body = crate::http::envelope::ErrorBody)))]
pub async fn cancel(State(state): State<AppState>, guard: Sensitive) -> ApiResult<ApiResponse<CancelResult>> {
    guard
        .run(ORDER_CANCEL, Target::BodyField("client_order_id"), |_caller, req: CancelOrder| async move {
            let cancelled = TradingService::new(state.engine()).cancel_order(req.client_order_id).await?;
            Ok(ApiResponse::ok(CancelResult {
                client_order_id: cancelled.client_order_id.to_string(),
                status: cancelled.status,
            }))
        })
        .await
}

/// Why the risk gate would refuse a previewed order: the code the order would be refused with
/// and, for a risk rule, its rule, limit and current value (as `RISK_BLOCKED`'s `detail`).
#[derive(Serialize, utoipa::ToSchema)]
pub struct PreviewVerdict {
    /// `RISK_BLOCKED`, `EMERGENCY_HALT_ACTIVE` or `DUPLICATE_ORDER_BLOCKED`.
    pub code: ErrorCode,
    /// The risk rule (`RISK_BLOCKED` only).
    pub rule: Option<RiskRule>,
    /// The rule's limit: dollars, a percentage, a count or shares; `null` when the rule has none.
    #[schema(value_type = serde_json::Value)]
    pub limit: Value,
    /// The value the order would reach (or the symbol, or its block); `null` when none.
    #[schema(value_type = serde_json::Value)]
    pub current: Value,
    /// The refusal in words, as the order's error message would say it.
    pub message: String,
    /// The earlier order a duplicate repeats.
    pub existing_client_order_id: Option<String>,
}

/// The risk preview of an order.
#[derive(Serialize, utoipa::ToSchema)]
pub struct OrderPreviewResult {
    /// Whether the risk gate would let the order leave now.
    pub approved: bool,
    /// Why not, when refused; `null` when approved.
    pub verdict: Option<PreviewVerdict>,
    /// What the order is valued at: its limit, else its stop, else the last trade.
    pub reference_price: Option<f64>,
    /// Quantity × reference price.
    pub estimated_cost: Option<f64>,
    /// Buying power now, after what working buy orders reserve.
    pub buying_power: f64,
    /// Buying power once the order works: a buy reserves its cost (a market buy with the market
    /// buy buffer); a sell adds its proceeds.
    pub buying_power_after: f64,
    /// What the order loses if its stop leg fills: quantity × (reference − stop); `null`
    /// without a stop leg.
    pub risk_to_stop: Option<f64>,
    /// What it gains if its take-profit leg fills: quantity × (target − reference); `null`
    /// without one.
    pub reward_to_target: Option<f64>,
}

fn preview_verdict(refusal: Refusal) -> PreviewVerdict {
    let json = |figure: &RiskFigure| serde_json::to_value(figure).unwrap_or(Value::Null);
    let (rule, limit, current, existing) = match &refusal {
        Refusal::Risk(r) => (Some(r.rule), json(&r.limit), json(&r.current), None),
        Refusal::Duplicate { existing, .. } => (None, Value::Null, Value::Null, Some(existing.to_string())),
        Refusal::Halted | Refusal::Invalid { .. } => (None, Value::Null, Value::Null, None),
    };
    let error = DomainError::from(CommandError::from(refusal));
    PreviewVerdict {
        code: error.code(),
        rule,
        limit,
        current,
        message: error.to_string(),
        existing_client_order_id: existing,
    }
}

/// Risk preview of an order (the order ticket's): the body of `POST /api/orders`, checked the
/// same way and by the same risk gate, with the same snapshot, but not placed — no order, no
/// violation row, no audit row. `200` with the verdict either way; a closed market, an unknown
/// symbol or an unsound order is refused with the error an order would meet.
#[utoipa::path(post, path = "/api/orders/preview", tag = "orders", security(("bearer" = [])), request_body = CreateOrder,
    responses((status = 200, description = "The gate's verdict and the order's estimated cost", body = inline(SuccessBody<OrderPreviewResult>)),
              (status = 400, description = "VALIDATION_ERROR", body = crate::http::envelope::ErrorBody),
              (status = 403, description = "FORBIDDEN (viewer)", body = crate::http::envelope::ErrorBody),
              (status = 404, description = "NOT_FOUND (not a symbol of the market)", body = crate::http::envelope::ErrorBody),
              (status = 409, description = "MARKET_CLOSED, OUTSIDE_REGULAR_SESSION, SYMBOL_HALTED", body = crate::http::envelope::ErrorBody)))]
pub async fn preview(
    State(state): State<AppState>,
    Caller(caller): Caller,
    Json(req): Json<CreateOrder>,
) -> ApiResult<ApiResponse<OrderPreviewResult>> {
    caller.require(Role::Operator)?;
    let preview = TradingService::new(state.engine()).preview_order(manual_order(req)?).await?;
    Ok(ApiResponse::ok(OrderPreviewResult {
        approved: preview.verdict.is_ok(),
        verdict: preview.verdict.err().map(preview_verdict),
        reference_price: preview.reference_price.map(money),
        estimated_cost: preview.estimated_cost.map(money),
        buying_power: money(preview.buying_power),
        buying_power_after: money(preview.buying_power_after),
        risk_to_stop: preview.risk_to_stop.map(money),
        reward_to_target: preview.reward_to_target.map(money),
    }))
}
