//! One router per domain module; this assembles them.

pub mod account;
pub mod audit;
pub mod auth;
pub mod backtests;
pub mod data;
pub mod events;
pub mod health;
pub mod market;
pub mod notifications;
pub mod orders;
pub mod positions;
pub mod radar;
pub mod risk;
pub mod settings;
pub mod strategies;
pub mod sweeps;
pub mod system;
pub mod trades;
pub mod watchlist;

use crate::http::state::AppState;
use axum::Router;

/// Every `/api` route.
pub fn api() -> Router<AppState> {
    Router::new()
        .merge(health::router())
        .merge(settings::router())
        .merge(auth::router())
        .merge(audit::router())
        .merge(system::router())
        .merge(radar::router())
        .merge(watchlist::router())
        .merge(orders::router())
        .merge(positions::router())
        .merge(risk::router())
        .merge(account::router())
        .merge(events::router())
        .merge(data::router())
        .merge(strategies::router())
        .merge(backtests::router())
        .merge(sweeps::router())
        .merge(trades::router())
        .merge(market::router())
        .merge(notifications::router())
}

/// `limit` of list endpoints: default 100, 1..=1000 (CONTRACT §8).
pub fn list_limit(limit: Option<u32>) -> crate::http::error::ApiResult<u32> {
    match limit.unwrap_or(100) {
        n @ 1..=1000 => Ok(n),
        _ => Err(crate::http::fields::refuse("limit")),
    }
}

/// Cursors are the id of the last row of the previous page.
pub fn parse_cursor(cursor: Option<&str>) -> crate::http::error::ApiResult<Option<i64>> {
    cursor.map(|c| c.parse::<i64>().map_err(|_| crate::http::fields::refuse("cursor"))).transpose()
}

/// Turns rows fetched with `limit + 1` into a page: at most `limit` rows, and the cursor of the
/// next page (the id of the last row kept) when there was more.
pub fn page<T>(mut rows: Vec<T>, limit: u32, id: impl Fn(&T) -> i64) -> (Vec<T>, Option<String>) {
    let more = rows.len() > limit as usize;
    rows.truncate(limit as usize);
    let next = if more { rows.last().map(|r| id(r).to_string()) } else { None };
    (rows, next)
}
