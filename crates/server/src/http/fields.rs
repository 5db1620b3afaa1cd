//! What each request field accepts, in an operator's words: the one table every refusal of a
//! body field or query parameter is explained from (wrong type, `null`, missing, out of range),
//! so a refusal names the field by its path and says what is allowed — never a parser's
//! vocabulary (`expected u64`, `Decimal type`, `at line 1 column 9`). Enumerations list the
//! values their own serde accepts, read from the type, so the list cannot drift from it.

use crate::http::error::ApiError;
use serde::de::DeserializeOwned;
use tradeops_core::backtest::fills::FillModel;
use tradeops_core::market::{Side, Timeframe};
use tradeops_core::orders::{OrderStatus, OrderType, TimeInForce};
use tradeops_core::settings::expected_names;
use tradeops_core::{FieldError, Role};

use crate::domain::watchlist::{BlockScope, WatchSource};

/// Where a refused field was sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    Body,
    Query,
}

/// What a field accepts: a sentence, or the values of an enumeration.
enum Accepts {
    Text(&'static str),
    OneOf(Vec<String>),
}

impl std::fmt::Display for Accepts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Accepts::Text(text) => f.write_str(text),
            Accepts::OneOf(values) => write!(f, "one of {}", values.join(", ")),
        }
    }
}

/// The table: a request field (its path in a body, or a query parameter) → what it accepts.
/// The ranges are the ones the handlers enforce.
fn accepts(field: &str) -> Option<Accepts> {
    use Accepts::{OneOf, Text};
    Some(match field {
        "symbol" => Text("a symbol of 1 to 10 characters of A-Z, 0-9, '.' and '-'"),
        "side" => OneOf(variants::<Side>()),
        "quantity" => Text("a whole number of shares from 1 to 10,000,000"),
        "order_type" => OneOf(variants::<OrderType>()),
        "time_in_force" => OneOf(variants::<TimeInForce>()),
        "limit_price" | "stop_price" => {
            Text("a price above 0: whole cents at or above $1, at most 4 decimal places below")
        }
        "client_order_id" => Text("1 to 64 characters of A-Z, a-z, 0-9, '_', '-', '.' and ':'"),
        "reason" => Text("text of 1 to 500 characters"),
        "source" => OneOf(variants::<WatchSource>()),
        "block_scope" => OneOf(variants::<BlockScope>()),
        "name" => Text(crate::domain::tokens::TOKEN_NAME_RULE),
        "role" => OneOf(variants::<Role>()),
        "start" | "end" => Text("an RFC 3339 timestamp such as 2026-11-21T14:30:00Z"),
        "timeframe" => OneOf(variants::<Timeframe>()),
        "strategy_id" => Text("the id of a strategy of GET /api/strategies"),
        "parameters" => Text("an object of the strategy's numeric parameters (see GET /api/strategies)"),
        "settings" => Text("an object shaped like a PUT /api/settings body"),
        "initial_cash" => Text(crate::jobs::run::INITIAL_CASH_RULE),
        "commission_rate" => Text(crate::jobs::run::COMMISSION_RATE_RULE),
        "slippage_bps" => Text(crate::jobs::run::SLIPPAGE_BPS_RULE),
        "fill" => OneOf(variants::<FillModel>()),
        "limit" => Text("a whole number from 1 to 1,000"),
        "top_n" => Text("a whole number from 1 to 200"),
        "cursor" => Text("the next_cursor of the previous page"),
        "date" | "session_id" => Text("a trading day as YYYY-MM-DD"),
        "status" => OneOf(variants::<OrderStatus>()),
        _ => return None,
    })
}

/// `must be …` for a field of the table; a field outside it is only said to be invalid.
pub fn must_be(field: &str) -> String {
    match accepts(field) {
        Some(accepts) => format!("must be {accepts}"),
        None => "has a value that is not allowed here".to_string(),
    }
}

/// `VALIDATION_ERROR` for a field whose value is outside what the table says it accepts.
pub fn refuse(field: &str) -> ApiError {
    ApiError::validation(field, must_be(field))
}

/// A body member sent as `null`: optional fields are left out, never `null`.
pub fn null(field: &str) -> FieldError {
    let allowed = accepts(field).map(|a| a.to_string()).unwrap_or_else(|| "a value".to_string());
    FieldError::new(field, format!("must be {allowed}, not null (leave the field out for its default)"))
}

/// Translates a deserialization error at `path` (`.` for the root, `a.b` nested) into the
/// refused field and the operator's reason.
pub fn explain(path: &str, error: &str, source: Source) -> FieldError {
    let error = strip_location(error);
    let join = |name: &str| if path == "." || path.is_empty() { name.to_string() } else { format!("{path}.{name}") };
    if let Some(name) = quoted_after(&error, "missing field ") {
        let field = join(&name);
        let reason = match accepts(&field) {
            Some(accepts) => format!("is required: {accepts}"),
            None => "is required".to_string(),
        };
        return FieldError::new(field, reason);
    }
    if error.starts_with("unknown field ") {
        let known = expected_names(&error);
        let (what, whose) = match source {
            Source::Body => ("a field of this request", "its fields are"),
            Source::Query => ("a parameter of this endpoint", "its parameters are"),
        };
        let field = if path == "." { quoted_after(&error, "unknown field ").unwrap_or_default() } else { path.into() };
        let reason = if known.is_empty() {
            format!("is not {what}; it takes none")
        } else {
            format!("is not {what}; {whose} {}", known.join(", "))
        };
        return FieldError::new(field, reason);
    }
    if path == "." || path.is_empty() {
        let reason = match source {
            Source::Body => "must be a JSON object of the request's fields",
            Source::Query => "is not a valid query string",
        };
        let field = if source == Source::Body { "body" } else { "query" };
        return FieldError::new(field, reason);
    }
    // Wrong type, null, out of range, not a variant, or a newtype's own refusal: what the
    // field accepts says it all, in the same words every time.
    if accepts(path).is_some() {
        return FieldError::new(path, must_be(path));
    }
    // A field outside the table: our own types' refusals are already in words; serde's
    // vocabulary is not passed on.
    let built_in = ["invalid type", "invalid value", "invalid length", "unknown variant", "duplicate field"];
    if built_in.iter().any(|p| error.starts_with(p)) {
        FieldError::new(path, "has the wrong type or an invalid value")
    } else {
        FieldError::new(path, error)
    }
}

/// Serde adapter for a whole number of shares: JSON Schema counts `10.0` as the integer 10, so
/// it is one here too; `10.5`, negatives and non-numbers are refused.
pub mod whole_number {
    use serde::de::Error;
    use serde::{Deserialize, Deserializer};

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
        let n = serde_json::Number::deserialize(d)?;
        n.as_u64()
            .or_else(|| n.as_f64().filter(|f| f.fract() == 0.0 && (0.0..=9.0e15).contains(f)).map(|f| f as u64))
            .ok_or_else(|| D::Error::custom("not a whole number"))
    }

    /// The same for an optional field (with `#[serde(default)]`).
    pub mod option {
        use serde::Deserializer;

        pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
            super::deserialize(d).map(Some)
        }
    }
}

/// The values an enumeration's serde accepts, asked of serde itself.
fn variants<T: DeserializeOwned>() -> Vec<String> {
    match serde_json::from_value::<T>(serde_json::Value::String(String::new())) {
        Err(e) => expected_names(&e.to_string()),
        Ok(_) => Vec::new(),
    }
}

/// The first backquoted name after `prefix` at the start of `message`.
fn quoted_after(message: &str, prefix: &str) -> Option<String> {
    message.strip_prefix(prefix)?.split('`').nth(1).map(str::to_string)
}

/// serde_json appends " at line 1 column 17"; the field path already says where.
fn strip_location(message: &str) -> String {
    match message.rfind(" at line ") {
        Some(i) => message[..i].to_string(),
        None => message.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn enumerations_list_what_their_serde_accepts() {
        assert_eq!(variants::<Side>(), ["BUY", "SELL"]);
        assert_eq!(variants::<OrderType>(), ["MARKET", "LIMIT", "STOP", "STOP_LIMIT"]);
        assert_eq!(variants::<Role>(), ["viewer", "operator", "admin"]);
        assert_eq!(variants::<Timeframe>(), ["1m", "1d"]);
        assert_eq!(variants::<FillModel>(), ["NEXT_OPEN", "CLOSE"]);
    }

    #[test]
    fn explains_in_the_operators_words() {
        let e = explain("side", "invalid type: integer `5`, expected enum Side", Source::Body);
        assert_eq!((e.field.as_str(), e.reason.as_str()), ("side", "must be one of BUY, SELL"));
        let e = explain("quantity", "invalid value: integer `-1`, expected u64 at line 1 column 9", Source::Body);
        assert_eq!(e.reason, "must be a whole number of shares from 1 to 10,000,000");
        let e = explain(".", "missing field `role`", Source::Body);
        assert_eq!((e.field.as_str(), e.reason.as_str()), ("role", "is required: one of viewer, operator, admin"));
        let e = explain("extra", "unknown field `extra`, expected `name` or `role`", Source::Body);
        assert_eq!(e.reason, "is not a field of this request; its fields are name, role");
        let e = explain("x", "unknown field `x`, expected `limit`", Source::Query);
        assert_eq!(e.reason, "is not a parameter of this endpoint; its parameters are limit");
        let e = explain("mystery", "invalid type: string \"a\", expected u32", Source::Body);
        assert!(!e.reason.contains("u32"), "{e:?}");
    }
}
