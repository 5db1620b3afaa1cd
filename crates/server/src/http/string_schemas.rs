//! The OpenAPI schemas of request values that are plain strings in Rust but constrained on the
//! wire (a reason, a trading day, a page cursor, a watchlist filter). The routes name them in
//! their `value_type`s and the document lists them among its components, so they live apart from
//! both: a leaf that knows no handler.

use utoipa::openapi::RefOr;

/// The `status` values `GET /api/watchlist` accepts: its schema's enumeration and its validator's
/// list are this one table.
pub const WATCHLIST_STATUSES: &[&str] = &["Active", "Buy", "Hold", "Sell", "Closed", "Halted"];
/// The `sort` values `GET /api/watchlist` accepts (schema and validator alike).
pub const WATCHLIST_SORTS: &[&str] =
    &["time_added_desc", "time_added_asc", "symbol_asc", "symbol_desc", "price_desc", "price_asc"];

/// Schemas of request values that are plain strings in Rust but constrained on the wire: the
/// constraint the validator enforces, stated once for every field that uses it.
macro_rules! string_schema {
    ($(#[$doc:meta])* $name:ident, $build:expr) => {
        $(#[$doc])*
        pub struct $name;

        impl utoipa::PartialSchema for $name {
            fn schema() -> RefOr<utoipa::openapi::schema::Schema> {
                let build: fn() -> utoipa::openapi::schema::ObjectBuilder = $build;
                build().into()
            }
        }

        impl utoipa::ToSchema for $name {}
    };
}

fn text() -> utoipa::openapi::schema::ObjectBuilder {
    utoipa::openapi::schema::ObjectBuilder::new().schema_type(utoipa::openapi::schema::Type::String)
}

fn one_of(values: impl IntoIterator<Item = impl Into<serde_json::Value>>) -> utoipa::openapi::schema::ObjectBuilder {
    text().enum_values(Some(values))
}

string_schema!(
    /// `reason` of an action: 1 to 500 characters, not only spaces
    /// ([`crate::http::routes::radar::require_reason`]). The pattern asks for one character that is not
    /// white space as Rust's `trim` defines it.
    ReasonText,
    || text()
        .min_length(Some(1))
        .max_length(Some(500))
        .pattern(Some("[^\\t-\\r \\u0085\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000]"))
);

string_schema!(
    /// A trading day, `YYYY-MM-DD`.
    TradingDay,
    || text().format(Some(utoipa::openapi::SchemaFormat::KnownFormat(utoipa::openapi::KnownFormat::Date)))
        .pattern(Some("^[0-9]{4}-[0-9]{2}-[0-9]{2}$"))
);

string_schema!(
    /// `next_cursor` of the previous page of a list paged by row id.
    IdCursor,
    || text().pattern(Some("^[+-]?[0-9]{1,18}$"))
);

string_schema!(
    /// `next_cursor` of the previous page of `GET /api/orders`.
    OrderCursor,
    || text().pattern(Some("^[+-]?[0-9]{1,18}~"))
);

string_schema!(
    /// A watchlist row's `strategy_status`.
    WatchlistStatus,
    || one_of(WATCHLIST_STATUSES.iter().copied())
);

string_schema!(
    /// The order of watchlist rows.
    WatchlistSort,
    || one_of(WATCHLIST_SORTS.iter().copied())
);

string_schema!(
    /// A recommendation's scope.
    ScopeTypeName,
    || one_of(tradeops_core::analytics::ScopeType::ALL.iter().map(|s| s.as_str()))
);
