//! Completed trades and what they teach: `GET /api/trades`, `GET /api/trades/{trade_id}`,
//! `GET /api/trades/recommendations` (CONTRACT §4).

use crate::domain::trades::{trade_detail, TradeFilter, TradesService};
use crate::http::auth::Caller;
use crate::http::envelope::{ApiResponse, SuccessBody};
use crate::http::error::{ApiError, ApiResult};
use crate::http::extract::{Path, Query};
use crate::http::state::AppState;
use axum::extract::State;
use axum::routing::get;
use axum::Router;
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value;
use std::sync::Arc;
use tradeops_core::analytics::{recommendations as recommend, Recommendation, ScopeType};
use tradeops_core::Symbol;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/api/trades", get(list))
        .route("/api/trades/recommendations", get(recommendations))
        .route("/api/trades/{trade_id}", get(one))
}

#[derive(Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
pub struct TradeQuery {
    /// `YYYY-MM-DD`: trades entered on that New York date.
    #[param(value_type = Option<crate::http::string_schemas::TradingDay>)]
    pub date: Option<String>,
    /// A strategy id, or `manual` for trades opened by hand.
    pub strategy_id: Option<String>,
    /// A symbol, in any case.
    #[param(value_type = Option<Symbol>)]
    pub symbol: Option<String>,
}

/// Completed round trips (flat → position → flat) of paper and live trading, newest exit first:
/// `trade_id`, `symbol`, `strategy_id`, `entry_time`, `exit_time`, `gross_pnl`, `net_pnl`,
/// `winner_loser_label`, plus `quantity`, `entry_price`, `exit_price`, `fees`, `mode`,
/// `return_pct`, `r_multiple`, `hold_seconds`, `exit_reason`.
#[utoipa::path(get, path = "/api/trades", tag = "trades", security(("bearer" = [])), params(TradeQuery),
    responses((status = 200, description = "Trades", body = inline(SuccessBody<Vec<Object>>)),
              (status = 400, description = "VALIDATION_ERROR", body = crate::http::envelope::ErrorBody)))]
pub async fn list(
    State(state): State<AppState>,
    _caller: Caller,
    Query(q): Query<TradeQuery>,
) -> ApiResult<ApiResponse<Vec<Arc<RawValue>>>> {
    let date = q
        .date
        .as_deref()
        .map(|text| {
            chrono::NaiveDate::parse_from_str(text, "%Y-%m-%d").map_err(|_| crate::http::fields::refuse("date"))
        })
        .transpose()?;
    let symbol = q.symbol.as_deref().map(Symbol::parse).transpose().map_err(|e| ApiError::validation("symbol", e))?;
    let filter = TradeFilter::new(date, q.strategy_id.as_deref(), symbol.as_ref());
    Ok(ApiResponse::list(trades(&state).completed().await?.rows(&filter)))
}

/// The deep dive of one trade: `trade` (the row), `events` (timeline), `features` (market state
/// at entry), `outcomes` (`return_pct`, `r_multiple`, `hold_seconds`, `mfe`, `mae`,
/// `exit_reason`) and `explanations` (`rule`, `text`).
#[utoipa::path(get, path = "/api/trades/{trade_id}", tag = "trades", security(("bearer" = [])),
    params(("trade_id" = String, Path, description = "Trade id")),
    responses((status = 200, description = "Deep dive", body = inline(SuccessBody<Object>)),
              (status = 404, description = "NOT_FOUND", body = crate::http::envelope::ErrorBody)))]
pub async fn one(
    State(state): State<AppState>,
    _caller: Caller,
    Path(id): Path<String>,
) -> ApiResult<ApiResponse<Value>> {
    let completed = trades(&state).completed().await?;
    let trade = completed
        .trades
        .iter()
        .find(|t| t.trade_id == id)
        .ok_or_else(|| ApiError::not_found(format!("No trade {id:?}")))?;
    Ok(ApiResponse::ok(trade_detail(trade)))
}

#[derive(Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
pub struct RecommendationQuery {
    /// `SYMBOL`, `STRATEGY`, `SECTOR`, `TIME_OF_DAY`, `PRICE_BAND`, `FLOAT_BAND`, `RVOL_BAND`,
    /// `GAIN_BAND`, `HOLD_TIME`, `DAY_OF_WEEK`.
    #[param(value_type = Option<crate::http::string_schemas::ScopeTypeName>)]
    pub scope_type: Option<String>,
    pub scope_value: Option<String>,
}

/// Statistics over completed trades by scope: each group of at least
/// `analytics.min_sample_size` trades, its win rate against the overall baseline in a sentence,
/// `confidence_score` (1 − p-value of a two-proportion z-test against the other trades) and
/// `sample_size`, with the Wilson interval at `analytics.confidence_level`. Beside them, under
/// `STRATEGY`, each strategy's latest completed walk-forward sweep: in how many windows
/// re-optimising beat the current parameters out of sample (`sample_size` the windows compared,
/// `confidence_score` 1 − the sign test's p-value, `sweep_id` the sweep).
#[utoipa::path(get, path = "/api/trades/recommendations", tag = "trades", security(("bearer" = [])),
    params(RecommendationQuery),
    responses((status = 200, description = "Recommendations", body = inline(SuccessBody<Vec<Recommendation>>)),
              (status = 400, description = "VALIDATION_ERROR", body = crate::http::envelope::ErrorBody)))]
pub async fn recommendations(
    State(state): State<AppState>,
    _caller: Caller,
    Query(q): Query<RecommendationQuery>,
) -> ApiResult<ApiResponse<Vec<Recommendation>>> {
    let scope = q
        .scope_type
        .as_deref()
        .map(|s| {
            ScopeType::parse(s).ok_or_else(|| {
                let all: Vec<&str> = ScopeType::ALL.iter().map(|s| s.as_str()).collect();
                ApiError::validation("scope_type", format!("must be one of {}", all.join(", ")))
            })
        })
        .transpose()?;
    let analytics = state.settings.current().analytics.clone();
    let mut rows =
        recommend(&trades(&state).completed().await?.trades, analytics.min_sample_size, analytics.confidence_level);
    if scope.is_none_or(|s| s == ScopeType::Strategy) {
        // Walk-forward sweeps' findings beside the strategy groups'.
        rows.extend(crate::jobs::sweeps::recommendations(&state.jobs, analytics.confidence_level).await?);
        rows.sort_by(|a, b| a.scope_type.cmp(&b.scope_type).then(b.confidence_score.total_cmp(&a.confidence_score)));
    }
    let rows = rows
        .into_iter()
        .filter(|r| scope.is_none_or(|s| r.scope_type == s))
        .filter(|r| q.scope_value.as_deref().is_none_or(|v| r.scope_value == v))
        .collect();
    Ok(ApiResponse::list(rows))
}

/// The trades service over this service's stores, market and settings.
fn trades(state: &AppState) -> TradesService<'_> {
    TradesService {
        orders: &state.db,
        audit: &*state.audit,
        market: &*state.market,
        settings: &state.settings,
        cache: &state.trade_cache,
    }
}
