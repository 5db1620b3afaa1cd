//! `GET /api/market/bars`: a symbol's bars from the data broker, up to the market's present —
//! what the console draws entries and exits over — and `GET /api/market/quote`: its last trade
//! and quote, for the order ticket. Beyond the seed: CONTRACT lists no chart or quote data, and
//! a console that shows an intraday price needs it.

use crate::http::auth::Caller;
use crate::http::envelope::{ApiResponse, SuccessBody};
use crate::http::error::{ApiError, ApiResult, ErrorCode};
use crate::http::extract::Query;
use crate::http::state::AppState;
use axum::extract::State;
use axum::routing::get;
use axum::Router;
use serde::{Deserialize, Serialize};
use tradeops_brokers::MarketDataError;
use tradeops_core::market::Timeframe;
use tradeops_core::{Symbol, Timestamp};

/// Most bars one request returns.
pub const MAX_BARS: i64 = 5000;

pub fn router() -> Router<AppState> {
    Router::new().route("/api/market/bars", get(bars)).route("/api/market/quote", get(quote))
}

#[derive(Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
pub struct BarsQuery {
    pub symbol: Symbol,
    /// RFC 3339; default: the start of the market's current day (New York midnight).
    #[param(format = DateTime)]
    pub start: Option<String>,
    /// RFC 3339; default and latest: the market's present.
    #[param(format = DateTime)]
    pub end: Option<String>,
    /// `1m` (default) or `1d`.
    pub timeframe: Option<Timeframe>,
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct BarRow {
    /// Start of the bar.
    pub timestamp: String,
    pub open: f64,
    pub high: f64,
    pub low: f64,
    pub close: f64,
    pub volume: u64,
}

fn parse_time(field: &str, text: Option<&str>) -> ApiResult<Option<Timestamp>> {
    text.map(|t| tradeops_core::time::parse_ts(t).map_err(|_| crate::http::fields::refuse(field))).transpose()
}

/// Bars whose start lies in `[start, end)`, oldest first; only closed bars of the market's
/// present are returned (never a bar from the simulated future). At most 5,000 bars.
#[utoipa::path(get, path = "/api/market/bars", tag = "market", security(("bearer" = [])), params(BarsQuery),
    responses((status = 200, description = "Bars, oldest first", body = inline(SuccessBody<Vec<BarRow>>)),
              (status = 400, description = "VALIDATION_ERROR (start, end, timeframe, range too long)", body = crate::http::envelope::ErrorBody),
              (status = 404, description = "NOT_FOUND (unknown symbol)", body = crate::http::envelope::ErrorBody)))]
pub async fn bars(
    State(state): State<AppState>,
    _caller: Caller,
    Query(q): Query<BarsQuery>,
) -> ApiResult<ApiResponse<Vec<BarRow>>> {
    let timeframe = q.timeframe.unwrap_or(Timeframe::Minute);
    let now = state.market_clock.now();
    let calendar = tradeops_core::calendar::MarketCalendar::new(state.settings.current().runtime.market_calendar);
    let start = match parse_time("start", q.start.as_deref())? {
        Some(t) => t,
        None => tradeops_core::calendar::ny_instant(calendar.date_of(now), (0, 0)),
    };
    let end = parse_time("end", q.end.as_deref())?.unwrap_or(now).min(now);
    if start >= end {
        return Err(ApiError::validation("start", "must be before end (and before the market's present)"));
    }
    let step = tradeops_brokers::market::bar_span(timeframe).num_seconds();
    if (end - start).num_seconds() / step > MAX_BARS {
        return Err(ApiError::validation("end", format!("at most {MAX_BARS} bars per request; shorten the range")));
    }
    let bars = state.market.bars(&q.symbol, timeframe, start, end).await.map_err(|e| match e {
        MarketDataError::UnknownSymbol(s) => {
            ApiError::not_found(format!("{s} is not a symbol of the market data broker"))
        }
        MarketDataError::Unavailable(m) => ApiError::new(ErrorCode::BrokerUnavailable, m),
    })?;
    // A bar is shown once it has closed: its end is at or before the present.
    let rows = tradeops_brokers::market::closed_bars(bars, timeframe, now)
        .into_iter()
        .map(|b| BarRow {
            timestamp: tradeops_core::time::format_ts(&b.start),
            open: b.open.to_f64(),
            high: b.high.to_f64(),
            low: b.low.to_f64(),
            close: b.close.to_f64(),
            volume: b.volume,
        })
        .collect();
    Ok(ApiResponse::list(rows))
}

#[derive(Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
pub struct QuoteQuery {
    pub symbol: Symbol,
}

/// A symbol's last trade and current quote.
#[derive(Serialize, utoipa::ToSchema)]
pub struct QuoteRow {
    pub symbol: Symbol,
    pub last: f64,
    pub bid: f64,
    pub ask: f64,
    pub bid_size: u64,
    pub ask_size: u64,
    /// The previous regular session's close.
    pub prev_close: f64,
}

/// The last trade and quote of a symbol now, from the data broker.
#[utoipa::path(get, path = "/api/market/quote", tag = "market", security(("bearer" = [])), params(QuoteQuery),
    responses((status = 200, description = "Last trade and quote", body = inline(SuccessBody<QuoteRow>)),
              (status = 400, description = "VALIDATION_ERROR", body = crate::http::envelope::ErrorBody),
              (status = 404, description = "NOT_FOUND (unknown symbol, or no live data yet)", body = crate::http::envelope::ErrorBody)))]
pub async fn quote(
    State(state): State<AppState>,
    _caller: Caller,
    Query(q): Query<QuoteQuery>,
) -> ApiResult<ApiResponse<QuoteRow>> {
    let snapshot = state
        .market
        .snapshot(&q.symbol)
        .await
        .ok_or_else(|| ApiError::not_found(format!("{} has no quote from the market data broker", q.symbol)))?;
    Ok(ApiResponse::ok(QuoteRow {
        symbol: q.symbol,
        last: snapshot.last.to_f64(),
        bid: snapshot.quote.bid.to_f64(),
        ask: snapshot.quote.ask.to_f64(),
        bid_size: snapshot.quote.bid_size,
        ask_size: snapshot.quote.ask_size,
        prev_close: snapshot.prev_close.to_f64(),
    }))
}
