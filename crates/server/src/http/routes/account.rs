//! Account and dashboard: `GET /api/dashboard/summary`, `GET /api/account/summary`,
//! `GET /api/account/performance`.

use crate::domain::account::{figure as f, AccountSummary};
use crate::events::HealthStatus;
use crate::health::HealthMonitor;
use crate::http::auth::Caller;
use crate::http::envelope::{ApiResponse, SuccessBody};
use crate::http::error::{ApiError, ApiResult};
use crate::http::extract::Query;
use crate::http::state::AppState;
use axum::extract::State;
use axum::routing::get;
use axum::Router;
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use tradeops_core::positions::{Position, PositionFill};
use tradeops_store::{OrderFilter, TradingRepository};

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/api/dashboard/summary", get(dashboard))
        .route("/api/account/summary", get(summary))
        .route("/api/account/performance", get(performance))
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct DashboardSummary {
    pub buying_power: f64,
    pub equity: f64,
    pub realized_pnl: f64,
    pub unrealized_pnl: f64,
    pub system_health: HealthStatus,
}

/// The header of the console: buying power, equity, P&L today and overall health.
#[utoipa::path(get, path = "/api/dashboard/summary", tag = "account", security(("bearer" = [])),
    responses((status = 200, description = "Summary", body = inline(SuccessBody<DashboardSummary>))))]
pub async fn dashboard(State(state): State<AppState>, _caller: Caller) -> ApiResult<ApiResponse<DashboardSummary>> {
    let v = state.engine().view();
    let health = HealthMonitor::overall(state.health.statuses().into_iter().map(|(_, s)| s));
    let (_, equity, buying_power, _) = v.account_figures();
    Ok(ApiResponse::ok(DashboardSummary {
        buying_power: f(buying_power),
        equity: f(equity),
        realized_pnl: f(v.realized_today),
        unrealized_pnl: f(v.unrealized),
        system_health: health,
    }))
}

/// The paper broker account (persisted: a restart loses nothing).
#[utoipa::path(get, path = "/api/account/summary", tag = "account", security(("bearer" = [])),
    responses((status = 200, description = "Account", body = inline(SuccessBody<AccountSummary>))))]
pub async fn summary(State(state): State<AppState>, _caller: Caller) -> ApiResult<ApiResponse<AccountSummary>> {
    let calendar = tradeops_core::calendar::MarketCalendar::new(state.settings.current().runtime.market_calendar);
    let session = calendar.phase(state.market_clock.now());
    Ok(ApiResponse::ok(AccountSummary::of(&state.engine().view(), session)))
}

#[derive(Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
pub struct PerformanceQuery {
    /// A session is one trading day: `YYYY-MM-DD`.
    #[param(value_type = Option<crate::http::string_schemas::TradingDay>)]
    pub session_id: Option<String>,
    /// Same as `session_id`.
    #[param(value_type = Option<crate::http::string_schemas::TradingDay>)]
    pub date: Option<String>,
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct SymbolPerformance {
    pub symbol: String,
    pub realized_pnl: f64,
    pub unrealized_pnl: f64,
    /// Orders that opened or added to a position in the session.
    pub trades: u32,
}

/// P&L by symbol for a session (default: today). The current session comes from the engine;
/// a past one is recomputed from its fills, assuming it started flat (day trading).
#[utoipa::path(get, path = "/api/account/performance", tag = "account", security(("bearer" = [])), params(PerformanceQuery),
    responses((status = 200, description = "Rows by symbol", body = inline(SuccessBody<Vec<SymbolPerformance>>)),
              (status = 400, description = "VALIDATION_ERROR (session_id, date)", body = crate::http::envelope::ErrorBody)))]
pub async fn performance(
    State(state): State<AppState>,
    _caller: Caller,
    Query(q): Query<PerformanceQuery>,
) -> ApiResult<ApiResponse<Vec<SymbolPerformance>>> {
    let v = state.engine().view();
    let requested = match (q.session_id.as_deref(), q.date.as_deref()) {
        (Some(a), Some(b)) if a != b => {
            return Err(ApiError::validation("date", "must be the same day as session_id when both are given"))
        }
        (Some(text), _) | (None, Some(text)) => Some(
            chrono::NaiveDate::parse_from_str(text, "%Y-%m-%d")
                .map_err(|_| crate::http::fields::refuse(if q.session_id.is_some() { "session_id" } else { "date" }))?,
        ),
        (None, None) => None,
    };
    if requested.is_none() || requested == v.session {
        let mut rows: BTreeMap<String, SymbolPerformance> = v
            .by_symbol
            .iter()
            .map(|(s, pnl, n)| {
                (
                    s.to_string(),
                    SymbolPerformance { symbol: s.to_string(), realized_pnl: f(*pnl), unrealized_pnl: 0.0, trades: *n },
                )
            })
            .collect();
        for p in &v.positions {
            let row = rows.entry(p.position.symbol.to_string()).or_insert_with(|| SymbolPerformance {
                symbol: p.position.symbol.to_string(),
                realized_pnl: 0.0,
                unrealized_pnl: 0.0,
                trades: 0,
            });
            row.unrealized_pnl = f(p.position.unrealized_pnl(p.mark));
        }
        return Ok(ApiResponse::list(rows.into_values().collect()));
    }
    let date = requested.expect("checked above");
    let repo: &dyn TradingRepository = &state.db;
    let orders = repo
        .orders(&OrderFilter { trading_date: Some(date.to_string()), limit: 100_000, ..Default::default() })
        .await?;
    let mut fills = Vec::new();
    for (order, _) in &orders {
        if order.filled_quantity > 0 {
            if let Some((full, _)) = repo.order(order.client_order_id.as_str()).await? {
                fills.extend(
                    full.executions
                        .iter()
                        .map(|e| (e.timestamp, e.execution_id.clone(), full.symbol.clone(), full.side, e.clone())),
                );
            }
        }
    }
    fills.sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
    let mut books: BTreeMap<String, (Position, Decimal, u32)> = BTreeMap::new();
    for (_, _, symbol, side, e) in fills {
        let (position, realized, _) =
            books.entry(symbol.to_string()).or_insert_with(|| (Position::new(symbol.clone()), Decimal::ZERO, 0));
        let fill = PositionFill { side, quantity: e.quantity, price: e.price, fee: e.fee, at: e.timestamp };
        if let Ok(r) = position.apply(&fill) {
            *realized += r - e.fee;
        }
    }
    for (order, _) in &orders {
        if order.side == tradeops_core::market::Side::Buy {
            if let Some(book) = books.get_mut(order.symbol.as_str()) {
                book.2 += 1;
            }
        }
    }
    let rows = books
        .into_iter()
        .map(|(symbol, (_, realized, trades))| SymbolPerformance {
            symbol,
            realized_pnl: f(realized),
            unrealized_pnl: 0.0,
            trades,
        })
        .collect();
    Ok(ApiResponse::list(rows))
}
