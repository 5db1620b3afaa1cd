//! `GET /api/market/bars`: a symbol's bars from the data broker, up to the market's present —
//! what the console draws entries and exits over — and `GET /api/market/quote`: its last trade
//! and quote, for the order ticket. Beyond the seed: CONTRACT lists no chart or quote data, and
//! a console that shows an intraday price needs it.
//!
//! `GET /api/market/session`: where the market's present stands in the exchange day (CONTRACT
//! §12), the same data as the `market.session` event.
//!
//! `PUT /api/market/reference` (admin; CSV or JSON rows) imports float and sector per symbol,
//! `GET /api/market/reference/{symbol}` shows what is in use ([`crate::domain::reference`]).

use crate::domain::actions::REFERENCE_IMPORT;
use crate::domain::reference::{parse_csv, parse_json, ImportMode, ImportOutcome, SymbolReference};
use crate::http::auth::Caller;
use crate::http::envelope::{ApiResponse, SuccessBody};
use crate::http::error::{ApiError, ApiResult, ErrorCode};
use crate::http::extract::{Path, Query};
use crate::http::guard::{CsvOrJson, Sensitive, Target};
use crate::http::state::AppState;
use axum::extract::State;
use axum::routing::{get, put};
use axum::Router;
use serde::{Deserialize, Serialize};
use tradeops_brokers::MarketDataError;
use tradeops_core::calendar::{SessionPhase, SessionView};
use tradeops_core::market::{SymbolHalt, Timeframe};
use tradeops_core::{Symbol, Timestamp};

/// Largest reference file accepted (about 100,000 symbols).
pub const MAX_REFERENCE_BYTES: usize = 8 * 1024 * 1024;

/// Most bars one request returns.
pub const MAX_BARS: i64 = 5000;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/api/market/bars", get(bars))
        .route("/api/market/quote", get(quote))
        .route("/api/market/session", get(session))
        .route(
            "/api/market/reference",
            put(import_reference).layer(axum::extract::DefaultBodyLimit::max(MAX_REFERENCE_BYTES)),
        )
        .route("/api/market/reference/{symbol}", get(reference))
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
    // A chart of the symbol: its live bars and trading status follow (a source that streams
    // only some symbols streams it for a while).
    state.market.show(&q.symbol);
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

/// The exchange day at the market's present (CONTRACT §12); also the `market.session` event's
/// data.
#[derive(Clone, Debug, PartialEq, Serialize, utoipa::ToSchema)]
pub struct SessionRow {
    /// `PRE_MARKET` (04:00–09:30 New York), `REGULAR` (09:30–16:00, 13:00 on early-close
    /// days), `AFTER_HOURS` (until 20:00, 17:00 on early-close days) or `CLOSED`. The
    /// simulated market's `ALWAYS_OPEN` calendar is `REGULAR` all day.
    pub session: SessionPhase,
    /// The New York date of the market's present (`YYYY-MM-DD`).
    #[schema(value_type = String, format = Date)]
    pub trading_day: String,
    /// That date's session times (RFC 3339); all null on a date the exchange does not trade.
    pub pre_market_open_at: Option<String>,
    pub regular_open_at: Option<String>,
    pub regular_close_at: Option<String>,
    pub after_hours_close_at: Option<String>,
    /// The session that begins next, and when (RFC 3339).
    pub next_session: SessionPhase,
    pub next_session_at: String,
}

/// `view` as the API shows it.
pub fn session_row(view: &SessionView) -> SessionRow {
    let at = |pick: fn(&tradeops_core::calendar::TradingDay) -> Timestamp| {
        view.day.as_ref().map(|d| tradeops_core::time::format_ts(&pick(d)))
    };
    SessionRow {
        session: view.session,
        trading_day: view.trading_day.to_string(),
        pre_market_open_at: at(|d| d.pre_market_open),
        regular_open_at: at(|d| d.regular_open),
        regular_close_at: at(|d| d.regular_close),
        after_hours_close_at: at(|d| d.after_hours_close),
        next_session: view.next_session,
        next_session_at: tradeops_core::time::format_ts(&view.next_session_at),
    }
}

/// The exchange day now, on the service's calendar (`runtime.market_calendar`: `NYSE` with a
/// real market, `ALWAYS_OPEN` by default on the simulated one) and the market's clock.
#[utoipa::path(get, path = "/api/market/session", tag = "market", security(("bearer" = [])),
    responses((status = 200, description = "The session now and the next change", body = inline(SuccessBody<SessionRow>))))]
pub async fn session(State(state): State<AppState>, _caller: Caller) -> ApiResult<ApiResponse<SessionRow>> {
    let calendar = tradeops_core::calendar::MarketCalendar::new(state.settings.current().runtime.market_calendar);
    Ok(ApiResponse::ok(session_row(&calendar.session(state.market_clock.now()))))
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
    /// Whether the symbol trades now (CONTRACT §11).
    pub trading_status: TradingStatus,
    /// Why and since when it is halted; null while it trades.
    pub halt: Option<HaltView>,
}

/// Whether a symbol trades (CONTRACT §11).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum TradingStatus {
    Trading,
    Halted,
}

/// A trading halt as the API shows it (CONTRACT §11).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct HaltView {
    /// The venue's code: `LUDP` (a LULD volatility pause), `T1` (news pending), or another the
    /// feed relays as sent.
    pub reason_code: String,
    pub reason: String,
    /// When the halt began (RFC 3339).
    pub since: String,
}

/// `TRADING` without a halt, `HALTED` with one.
pub fn trading_status(halt: Option<&SymbolHalt>) -> TradingStatus {
    if halt.is_some() {
        TradingStatus::Halted
    } else {
        TradingStatus::Trading
    }
}

pub fn halt_view(halt: &SymbolHalt) -> HaltView {
    HaltView {
        reason_code: halt.reason_code.to_string(),
        reason: halt.reason.to_string(),
        since: tradeops_core::time::format_ts(&halt.since),
    }
}

/// The last trade and quote of a symbol now, and whether it trades, from the data broker.
#[utoipa::path(get, path = "/api/market/quote", tag = "market", security(("bearer" = [])), params(QuoteQuery),
    responses((status = 200, description = "Last trade and quote", body = inline(SuccessBody<QuoteRow>)),
              (status = 400, description = "VALIDATION_ERROR", body = crate::http::envelope::ErrorBody),
              (status = 404, description = "NOT_FOUND (unknown symbol, or no live data yet)", body = crate::http::envelope::ErrorBody)))]
pub async fn quote(
    State(state): State<AppState>,
    _caller: Caller,
    Query(q): Query<QuoteQuery>,
) -> ApiResult<ApiResponse<QuoteRow>> {
    // Looked at: its quote and trading status stay live (streamed for a while where the source
    // streams only some symbols; CONTRACT §11).
    state.market.show(&q.symbol);
    let snapshot = state
        .market
        .snapshot(&q.symbol)
        .await
        .ok_or_else(|| ApiError::not_found(format!("{} has no quote from the market data broker", q.symbol)))?;
    let halt = state.market.halt(&q.symbol);
    Ok(ApiResponse::ok(QuoteRow {
        trading_status: trading_status(halt.as_ref()),
        halt: halt.as_ref().map(halt_view),
        symbol: q.symbol,
        last: snapshot.last.to_f64(),
        bid: snapshot.quote.bid.to_f64(),
        ask: snapshot.quote.ask.to_f64(),
        bid_size: snapshot.quote.bid_size,
        ask_size: snapshot.quote.ask_size,
        prev_close: snapshot.prev_close.to_f64(),
    }))
}

#[derive(Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
pub struct ReferenceImportQuery {
    /// `replace` (default: afterwards the imported reference data is exactly this file) or
    /// `merge` (this file's symbols are replaced, the others kept).
    pub mode: Option<ImportMode>,
}

/// One row of a JSON import.
// The document's shape of a row only: rows are read as JSON values and checked one by one
// (`domain::reference::parse_json`), so a refusal names the row and field.
#[derive(utoipa::ToSchema)]
#[allow(dead_code)]
pub struct ReferenceRowBody {
    #[schema(value_type = String, pattern = "^[A-Za-z0-9.-]{1,10}$")]
    pub symbol: String,
    /// Shares in the float, a whole number 0..=1000000000000; `null` or absent: not known to
    /// this import (the market source's value, if any, is used).
    #[schema(maximum = 1000000000000u64)]
    pub float: Option<u64>,
    /// `null` or absent: not known to this import. At most 100 characters, no control
    /// characters.
    #[schema(max_length = 100, pattern = "^[^\\u0000-\\u001f\\u007f-\\u009f]*$")]
    pub sector: Option<String>,
}

/// A JSON import: its rows (the same as the CSV's).
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ReferenceImportBody {
    #[schema(value_type = Vec<ReferenceRowBody>)]
    pub rows: serde_json::Value,
}

/// Imports float and sector per symbol (admin; audited as `market.reference_import`): a
/// `text/csv` file with the header `symbol,float,sector` (any order and case; `float` or
/// `sector` may be left out) or JSON `{"rows": [{"symbol", "float", "sector"}]}`, up to 8 MiB.
/// Empty cells (`null`) are unknown to the import: there the market source's value is used.
/// Imported values override the market source's wherever float and sector are read — radar
/// rows from the next scan on, instruments, trade features, backtests. Symbols follow the
/// symbol rules; a float is a whole number of shares. The whole file is checked first: a bad
/// row is `VALIDATION_ERROR` naming it (`detail.line`: its line in the CSV, the header being 1,
/// or its position from 1 in the JSON rows; `detail.field`: `symbol`, `float`, `sector`,
/// `header` or `row`), and nothing is stored — the file is stored in one transaction or not
/// at all.
#[utoipa::path(put, path = "/api/market/reference", tag = "market", security(("bearer" = [])), params(ReferenceImportQuery),
    request_body(content(
        (String = "text/csv", example = "symbol,float,sector\nABCD,5200000,Technology\nEFGH,,Health Care\n"),
        (ReferenceImportBody = "application/json")
    )),
    responses((status = 200, description = "Imported", body = inline(SuccessBody<ImportOutcome>)),
              (status = 400, description = "VALIDATION_ERROR (`detail.line`, `detail.field`, `detail.reason`); nothing stored",
               body = crate::http::envelope::ErrorBody),
              (status = 403, description = "FORBIDDEN (admin only)", body = crate::http::envelope::ErrorBody),
              (status = 413, description = "PAYLOAD_TOO_LARGE", body = crate::http::envelope::ErrorBody)))]
pub async fn import_reference(
    State(state): State<AppState>,
    Query(q): Query<ReferenceImportQuery>,
    guard: Sensitive,
) -> ApiResult<ApiResponse<ImportOutcome>> {
    guard
        .run_csv_or_json(
            REFERENCE_IMPORT,
            Target::Fixed("reference"),
            |_caller, body: CsvOrJson<ReferenceImportBody>| async move {
                let rows = match body {
                    CsvOrJson::Csv(bytes) => parse_csv(&bytes)?,
                    CsvOrJson::Json(body) => parse_json(&body.rows)?,
                };
                let now = state.market_clock.now();
                Ok(ApiResponse::ok(state.reference.import(rows, q.mode.unwrap_or_default(), now).await?))
            },
        )
        .await
}

/// The float and sector in use for a symbol (imported, else the market source's; `null` when
/// neither knows), whether the market lists it, and the imported row (`null` when none).
#[utoipa::path(get, path = "/api/market/reference/{symbol}", tag = "market", security(("bearer" = [])),
    params(("symbol" = String, Path, description = "Symbol", pattern = "^[A-Za-z0-9.-]{1,10}$")),
    responses((status = 200, description = "Reference data", body = inline(SuccessBody<SymbolReference>)),
              (status = 400, description = "VALIDATION_ERROR (symbol)", body = crate::http::envelope::ErrorBody),
              (status = 404, description = "NOT_FOUND (not listed and not imported)", body = crate::http::envelope::ErrorBody)))]
pub async fn reference(
    State(state): State<AppState>,
    _caller: Caller,
    Path(symbol): Path<String>,
) -> ApiResult<ApiResponse<SymbolReference>> {
    let symbol = Symbol::parse(&symbol).map_err(|e| ApiError::validation("symbol", e))?;
    Ok(ApiResponse::ok(state.reference.lookup(&symbol, state.market.as_ref()).await?))
}
