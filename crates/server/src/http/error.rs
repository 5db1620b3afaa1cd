//! The HTTP edge of errors: [`ApiError`], the only error type handlers return, rendered as the
//! contract's error envelope (CONTRACT §2); the code → HTTP status table; and the one mapping
//! of the domain's [`DomainError`] to a code, message, `detail` and `Retry-After`. Internal
//! errors are logged once here, with the request id, and never leak to the client.

pub use crate::domain::ErrorCode;
use crate::domain::{DomainError, GuardSubject};
use crate::http::envelope::{ErrorBody, Meta};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};
use tradeops_core::orders::OrderStatus;
use tradeops_core::FieldError;

impl ErrorCode {
    /// The whole code → HTTP status table.
    pub fn status(self) -> StatusCode {
        use ErrorCode::*;
        match self {
            ValidationError => StatusCode::BAD_REQUEST,
            Unauthorized => StatusCode::UNAUTHORIZED,
            Forbidden => StatusCode::FORBIDDEN,
            NotFound | PositionNotFound => StatusCode::NOT_FOUND,
            MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            OrderNotCancellable
            | DuplicateOrderBlocked
            | MarketClosed
            | OutsideRegularSession
            | SymbolHalted
            | EmergencyHaltActive
            | SettingsUpdateBlocked => StatusCode::CONFLICT,
            PayloadTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            RiskBlocked => StatusCode::UNPROCESSABLE_ENTITY,
            ConfirmationRequired => StatusCode::PRECONDITION_REQUIRED,
            RateLimited => StatusCode::TOO_MANY_REQUESTS,
            InternalError => StatusCode::INTERNAL_SERVER_ERROR,
            BrokerUnavailable | ServiceUnavailable => StatusCode::SERVICE_UNAVAILABLE,
        }
    }
}

/// A refusal or failure, rendered as the error envelope. Boxed: errors travel through every
/// `Result` of the request path, which should stay small.
#[derive(Debug)]
pub struct ApiError(Box<ErrorParts>);

#[derive(Debug)]
pub struct ErrorParts {
    pub code: ErrorCode,
    pub message: String,
    pub detail: Value,
    /// Seconds for a `Retry-After` header.
    pub retry_after: Option<u64>,
    /// The cause of an internal error: logged, never sent.
    internal: Option<String>,
}

pub type ApiResult<T> = Result<T, ApiError>;

impl std::ops::Deref for ApiError {
    type Target = ErrorParts;

    fn deref(&self) -> &ErrorParts {
        &self.0
    }
}

impl ApiError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self(Box::new(ErrorParts {
            code,
            message: message.into(),
            detail: json!({}),
            retry_after: None,
            internal: None,
        }))
    }

    pub fn with_detail(mut self, detail: Value) -> Self {
        self.0.detail = detail;
        self
    }

    pub fn with_retry_after(mut self, seconds: u64) -> Self {
        self.0.retry_after = Some(seconds);
        self
    }

    /// `VALIDATION_ERROR` naming one field.
    pub fn validation(field: impl Into<String>, reason: impl Into<String>) -> Self {
        Self::fields(vec![FieldError::new(field, reason)])
    }

    /// `VALIDATION_ERROR` for several fields: `detail.field`/`detail.reason` name the first,
    /// `detail.errors` lists them all.
    pub fn fields(errors: Vec<FieldError>) -> Self {
        DomainError::Validation(errors).into()
    }

    pub fn not_found(what: impl Into<String>) -> Self {
        Self::new(ErrorCode::NotFound, what)
    }

    /// A bug or an unexpected failure: the cause is logged, the client sees a generic message.
    pub fn internal(cause: impl std::fmt::Display) -> Self {
        let mut e = Self::new(ErrorCode::InternalError, "Internal error; the request id identifies it in the logs");
        e.0.internal = Some(cause.to_string());
        e
    }
}

/// Seconds a client is told to wait before retrying while the database is unavailable.
pub const DATABASE_RETRY_AFTER: u64 = 2;

/// Seconds a client is told to wait before retrying while the broker is unavailable and the
/// venue named no wait of its own (the runner checks the venue again every second).
pub const BROKER_RETRY_AFTER: u64 = 5;

impl ApiError {
    /// `SERVICE_UNAVAILABLE`: the database cannot be reached (or cannot write) now.
    pub fn database_unavailable() -> Self {
        DomainError::Unavailable { reason: None }.into()
    }
}

impl From<tradeops_store::StoreError> for ApiError {
    fn from(e: tradeops_store::StoreError) -> Self {
        DomainError::from(e).into()
    }
}

impl From<DomainError> for ApiError {
    fn from(e: DomainError) -> Self {
        if let DomainError::Internal(cause) = e {
            return ApiError::internal(cause);
        }
        let refusal = ApiError::new(e.code(), e.to_string()).with_detail(detail(&e));
        match e {
            DomainError::Unavailable { .. } | DomainError::EngineStopped => {
                refusal.with_retry_after(DATABASE_RETRY_AFTER)
            }
            DomainError::BrokerUnavailable { retry_after, .. } => refusal.with_retry_after(
                retry_after.map(|d| d.as_secs_f64().ceil() as u64).filter(|s| *s > 0).unwrap_or(BROKER_RETRY_AFTER),
            ),
            _ => refusal,
        }
    }
}

/// The envelope's `detail` of a refusal: the keys the contract names for its code.
fn detail(e: &DomainError) -> Value {
    match e {
        DomainError::Validation(errors) => {
            let first = errors.first().cloned().unwrap_or_else(|| FieldError::new("", "invalid request"));
            json!({"field": first.field, "reason": first.reason, "errors": errors})
        }
        DomainError::BadRow { line, field, reason } => json!({"field": field, "line": line, "reason": reason}),
        DomainError::PositionNotFound(symbol) => json!({"symbol": symbol}),
        DomainError::Forbidden { role, required, .. } => json!({"required_role": required, "role": role}),
        DomainError::Risk(r) => json!({"rule": r.rule, "limit": r.limit, "current": r.current}),
        DomainError::DuplicateOrder { existing, .. } => json!({"existing_client_order_id": existing}),
        DomainError::NotCancellable { status: status @ OrderStatus::PendingCancel } => {
            json!({"status": status, "cancel_sent_again": true})
        }
        DomainError::NotCancellable { status } => json!({"status": status}),
        DomainError::MarketClosed { next_open } => {
            json!({"next_open": tradeops_core::time::format_ts(next_open)})
        }
        DomainError::OutsideRegularSession { session, regular_open } => json!({
            "session": session,
            "regular_open_at": tradeops_core::time::format_ts(regular_open),
            "allowed": {"order_type": "LIMIT", "time_in_force": "DAY", "extended_hours": true},
        }),
        DomainError::SymbolHalted { symbol, halt } => json!({
            "symbol": symbol,
            "reason_code": halt.reason_code,
            "reason": halt.reason,
            "since": tradeops_core::time::format_ts(&halt.since),
        }),
        DomainError::GuardRefused { guard, reason, subject: GuardSubject::Fields(fields) } => {
            json!({"guard": guard, "reason": reason, "fields": fields})
        }
        DomainError::GuardRefused { guard, reason, subject: GuardSubject::Token(name) } => {
            json!({"guard": guard, "reason": reason, "name": name})
        }
        DomainError::GuardRefused { guard, reason, subject: GuardSubject::Job { status } } => {
            json!({"guard": guard, "status": status, "reason": reason})
        }
        DomainError::Unavailable { reason: Some(reason) } => json!({"reason": reason}),
        DomainError::BrokerUnavailable { reason, client_order_id: None, .. } => json!({"reason": reason}),
        DomainError::BrokerUnavailable { reason, client_order_id: Some(id), .. } => {
            json!({"reason": reason, "client_order_id": id})
        }
        DomainError::NotFound(_)
        | DomainError::EmergencyHaltActive
        | DomainError::Unavailable { reason: None }
        | DomainError::EngineStopped
        | DomainError::Internal(_) => json!({}),
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let meta = Meta::current();
        if let Some(cause) = &self.internal {
            tracing::error!(request_id = %meta.request_id, error = %cause, "internal error");
        }
        let status = self.code.status();
        let retry_after = self.retry_after;
        let body = ErrorBody {
            ok: false,
            error: crate::http::envelope::ErrorPayload {
                code: self.0.code,
                message: self.0.message,
                detail: self.0.detail,
            },
            meta,
        };
        let mut response = (status, axum::Json(body)).into_response();
        if let Some(seconds) = retry_after {
            if let Ok(value) = HeaderValue::from_str(&seconds.to_string()) {
                response.headers_mut().insert(header::RETRY_AFTER, value);
            }
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_table_follows_contract() {
        use ErrorCode::*;
        let table = [
            (ValidationError, 400),
            (Unauthorized, 401),
            (Forbidden, 403),
            (NotFound, 404),
            (PositionNotFound, 404),
            (MethodNotAllowed, 405),
            (OrderNotCancellable, 409),
            (DuplicateOrderBlocked, 409),
            (MarketClosed, 409),
            (OutsideRegularSession, 409),
            (SymbolHalted, 409),
            (EmergencyHaltActive, 409),
            (SettingsUpdateBlocked, 409),
            (PayloadTooLarge, 413),
            (RiskBlocked, 422),
            (ConfirmationRequired, 428),
            (RateLimited, 429),
            (InternalError, 500),
            (BrokerUnavailable, 503),
            (ServiceUnavailable, 503),
        ];
        for (code, status) in table {
            assert_eq!(code.status().as_u16(), status, "{code:?}");
            assert_eq!(serde_json::to_value(code).unwrap(), code.as_str(), "{code:?}");
        }
    }

    /// The domain → envelope table: every [`DomainError`] variant's code, status, message,
    /// `detail` keys and `Retry-After`, as the contract's responses carry them.
    #[test]
    fn every_domain_error_maps_to_its_envelope() {
        use crate::domain::{DomainError as D, GuardSubject};
        use tradeops_core::orders::ClientOrderId;
        use tradeops_core::risk::{RiskRefusal, RiskRule};
        use tradeops_core::{Role, Symbol};

        let symbol = Symbol::parse("ABCD").unwrap();
        let next_open = tradeops_core::time::parse_ts("2026-11-23T14:30:00Z").unwrap();
        let refusal = RiskRefusal {
            rule: RiskRule::MaxTradesPerDay,
            limit: tradeops_core::risk::RiskFigure::Count(3),
            current: tradeops_core::risk::RiskFigure::Count(3),
            message: "3 trades today: the limit is 3".into(),
        };
        /// A domain error and its envelope: status, code, message, detail, `Retry-After`.
        type Row = (D, u16, &'static str, &'static str, Value, Option<u64>);
        #[rustfmt::skip]
        let table: Vec<Row> = vec![
            (D::validation("quantity", "must be a whole number"), 400, "VALIDATION_ERROR",
                "quantity must be a whole number",
                json!({"field": "quantity", "reason": "must be a whole number",
                       "errors": [{"field": "quantity", "reason": "must be a whole number"}]}), None),
            (D::Validation(vec![FieldError::new("side", "unknown"), FieldError::new("quantity", "is required")]),
                400, "VALIDATION_ERROR", "Invalid value for side: unknown",
                json!({"field": "side", "reason": "unknown", "errors": [
                    {"field": "side", "reason": "unknown"}, {"field": "quantity", "reason": "is required"}]}), None),
            (D::Validation(vec![]), 400, "VALIDATION_ERROR", "Invalid request: invalid request",
                json!({"field": "", "reason": "invalid request", "errors": []}), None),
            (D::BadRow { line: 3, field: "float".into(), reason: "\"-5\" is not a whole number".into() }, 400,
                "VALIDATION_ERROR", "Line 3, float: \"-5\" is not a whole number",
                json!({"field": "float", "line": 3, "reason": "\"-5\" is not a whole number"}), None),
            (D::NotFound("No order \"x\"".into()), 404, "NOT_FOUND", "No order \"x\"", json!({}), None),
            (D::PositionNotFound(symbol.clone()), 404, "POSITION_NOT_FOUND", "No open position in ABCD",
                json!({"symbol": "ABCD"}), None),
            (D::Forbidden { name: "bot".into(), role: Role::Viewer, required: Role::Operator }, 403, "FORBIDDEN",
                "This action needs the operator role; token \"bot\" has viewer",
                json!({"required_role": "operator", "role": "viewer"}), None),
            (D::EmergencyHaltActive, 409, "EMERGENCY_HALT_ACTIVE",
                "Emergency halt is active: nothing new until an operator resumes (POST /api/risk/resume)",
                json!({}), None),
            (D::Risk(Box::new(refusal)), 422, "RISK_BLOCKED", "3 trades today: the limit is 3",
                json!({"rule": "MAX_TRADES_PER_DAY", "limit": 3, "current": 3}), None),
            (D::DuplicateOrder { existing: ClientOrderId::parse("c-1").unwrap(), message: "Same order".into() },
                409, "DUPLICATE_ORDER_BLOCKED", "Same order", json!({"existing_client_order_id": "c-1"}), None),
            (D::NotCancellable { status: OrderStatus::Filled }, 409, "ORDER_NOT_CANCELLABLE",
                "The order is FILLED and cannot be cancelled", json!({"status": "FILLED"}), None),
            (D::NotCancellable { status: OrderStatus::PendingCancel }, 409, "ORDER_NOT_CANCELLABLE",
                "The order is already PENDING_CANCEL: its cancel was sent to the broker again",
                json!({"status": "PENDING_CANCEL", "cancel_sent_again": true}), None),
            (D::MarketClosed { next_open }, 409, "MARKET_CLOSED",
                "The market is closed; it next opens at 2026-11-23T14:30:00.000Z",
                json!({"next_open": "2026-11-23T14:30:00.000Z"}), None),
            (D::OutsideRegularSession { session: tradeops_core::calendar::SessionPhase::PreMarket,
                    regular_open: next_open }, 409, "OUTSIDE_REGULAR_SESSION",
                "The market is in its PRE_MARKET session: only a LIMIT DAY order with extended_hours true trades \
                 until the regular session opens at 2026-11-23T14:30:00.000Z",
                json!({"session": "PRE_MARKET", "regular_open_at": "2026-11-23T14:30:00.000Z",
                       "allowed": {"order_type": "LIMIT", "time_in_force": "DAY", "extended_hours": true}}), None),
            (D::SymbolHalted { symbol: symbol.clone(),
                    halt: tradeops_core::market::SymbolHalt::luld_pause(next_open) }, 409, "SYMBOL_HALTED",
                "ABCD is halted (LUDP Volatility Trading Pause) since 2026-11-23T14:30:00.000Z: a market or stop \
                 order would fill at the reopen's price; a limit order waits at the venue",
                json!({"symbol": "ABCD", "reason_code": "LUDP", "reason": "Volatility Trading Pause",
                       "since": "2026-11-23T14:30:00.000Z"}), None),
            (D::GuardRefused { guard: "X-Confirm-Live", reason: "needs the header".into(),
                    subject: GuardSubject::Fields(vec!["runtime.trading_mode".into()]) },
                409, "SETTINGS_UPDATE_BLOCKED", "needs the header",
                json!({"guard": "X-Confirm-Live", "reason": "needs the header", "fields": ["runtime.trading_mode"]}),
                None),
            (D::GuardRefused { guard: "last_admin_token", reason: "last admin".into(),
                    subject: GuardSubject::Token("root".into()) },
                409, "SETTINGS_UPDATE_BLOCKED", "last admin",
                json!({"guard": "last_admin_token", "reason": "last admin", "name": "root"}), None),
            (D::GuardRefused { guard: "job_final", reason: "already COMPLETED".into(),
                    subject: GuardSubject::Job { status: tradeops_store::JobStatus::Completed } },
                409, "SETTINGS_UPDATE_BLOCKED", "already COMPLETED",
                json!({"guard": "job_final", "status": "COMPLETED", "reason": "already COMPLETED"}), None),
            (D::BrokerUnavailable { reason: "Alpaca timed out".into(), retry_after: None, client_order_id: None },
                503, "BROKER_UNAVAILABLE", "The broker is unavailable: Alpaca timed out; retry shortly",
                json!({"reason": "Alpaca timed out"}), Some(BROKER_RETRY_AFTER)),
            (D::BrokerUnavailable { reason: "429 rate limit exceeded".into(),
                    retry_after: Some(std::time::Duration::from_millis(7_200)),
                    client_order_id: Some(ClientOrderId::parse("c-9").unwrap()) }, 503,
                "BROKER_UNAVAILABLE", "The broker is unavailable: 429 rate limit exceeded; retry shortly",
                json!({"reason": "429 rate limit exceeded", "client_order_id": "c-9"}), Some(8)),
            (D::Unavailable { reason: None }, 503, "SERVICE_UNAVAILABLE",
                "The database is unavailable; retry shortly", json!({}), Some(DATABASE_RETRY_AFTER)),
            (D::Unavailable { reason: Some("order not written".into()) }, 503, "SERVICE_UNAVAILABLE",
                "The database is unavailable; retry shortly", json!({"reason": "order not written"}),
                Some(DATABASE_RETRY_AFTER)),
            (D::EngineStopped, 503, "SERVICE_UNAVAILABLE",
                "The trading engine is not running in this service; retry shortly", json!({}),
                Some(DATABASE_RETRY_AFTER)),
            (D::internal("disk on fire"), 500, "INTERNAL_ERROR",
                "Internal error; the request id identifies it in the logs", json!({}), None),
        ];
        for (error, status, code, message, detail, retry_after) in table {
            let what = format!("{error:?}");
            assert_eq!(error.code().as_str(), code, "{what}");
            let api = ApiError::from(error);
            assert_eq!(api.code.status().as_u16(), status, "{what}");
            assert_eq!(api.code.as_str(), code, "{what}");
            assert_eq!(api.message, message, "{what}");
            // Keys in order: the envelope is serialised as built.
            assert_eq!(serde_json::to_string(&api.detail).unwrap(), detail.to_string(), "{what}");
            assert_eq!(api.retry_after, retry_after, "{what}");
        }
    }

    /// The cause of an internal error is kept for the log, never put in the response.
    #[test]
    fn internal_cause_is_logged_not_sent() {
        let api = ApiError::from(crate::domain::DomainError::internal("disk on fire"));
        assert_eq!(api.internal.as_deref(), Some("disk on fire"));
        assert!(!api.message.contains("disk"));
    }
}
