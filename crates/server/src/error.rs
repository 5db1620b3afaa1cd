//! The error catalogue of CONTRACT §2 in one table, and [`ApiError`], the only error type
//! handlers return. Its response is always the contract's error envelope; internal errors are
//! logged once here, with the request id, and never leak to the client.

use crate::envelope::{ErrorBody, Meta};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde_json::{json, Value};
use tradeops_core::FieldError;

/// Every error code of the contract.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ErrorCode {
    ValidationError,
    Unauthorized,
    Forbidden,
    NotFound,
    PositionNotFound,
    MethodNotAllowed,
    OrderNotCancellable,
    DuplicateOrderBlocked,
    MarketClosed,
    EmergencyHaltActive,
    SettingsUpdateBlocked,
    PayloadTooLarge,
    RiskBlocked,
    ConfirmationRequired,
    RateLimited,
    InternalError,
    BrokerUnavailable,
    ServiceUnavailable,
}

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

    pub fn as_str(self) -> &'static str {
        use ErrorCode::*;
        match self {
            ValidationError => "VALIDATION_ERROR",
            Unauthorized => "UNAUTHORIZED",
            Forbidden => "FORBIDDEN",
            NotFound => "NOT_FOUND",
            PositionNotFound => "POSITION_NOT_FOUND",
            MethodNotAllowed => "METHOD_NOT_ALLOWED",
            OrderNotCancellable => "ORDER_NOT_CANCELLABLE",
            DuplicateOrderBlocked => "DUPLICATE_ORDER_BLOCKED",
            MarketClosed => "MARKET_CLOSED",
            EmergencyHaltActive => "EMERGENCY_HALT_ACTIVE",
            SettingsUpdateBlocked => "SETTINGS_UPDATE_BLOCKED",
            PayloadTooLarge => "PAYLOAD_TOO_LARGE",
            RiskBlocked => "RISK_BLOCKED",
            ConfirmationRequired => "CONFIRMATION_REQUIRED",
            RateLimited => "RATE_LIMITED",
            InternalError => "INTERNAL_ERROR",
            BrokerUnavailable => "BROKER_UNAVAILABLE",
            ServiceUnavailable => "SERVICE_UNAVAILABLE",
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
        let first = errors.first().cloned().unwrap_or_else(|| FieldError::new("", "invalid request"));
        let message = if first.field.is_empty() {
            format!("Invalid request: {}", first.reason)
        } else if ["must ", "is ", "may "].iter().any(|p| first.reason.starts_with(p)) {
            // Reasons in the operator's words read as a sentence: "quantity must be …".
            format!("{} {}", first.field, first.reason)
        } else {
            format!("Invalid value for {}: {}", first.field, first.reason)
        };
        Self::new(ErrorCode::ValidationError, message)
            .with_detail(json!({"field": first.field, "reason": first.reason, "errors": errors}))
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

impl ApiError {
    /// `SERVICE_UNAVAILABLE`: the database cannot be reached (or cannot write) now.
    pub fn database_unavailable() -> Self {
        ApiError::new(ErrorCode::ServiceUnavailable, "The database is unavailable; retry shortly")
            .with_retry_after(DATABASE_RETRY_AFTER)
    }
}

impl From<tradeops_store::StoreError> for ApiError {
    fn from(e: tradeops_store::StoreError) -> Self {
        if e.is_unavailable() {
            tracing::warn!(error = %e, "refused: the database is unavailable");
            return ApiError::database_unavailable();
        }
        ApiError::internal(e)
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
            error: crate::envelope::ErrorPayload { code: self.0.code, message: self.0.message, detail: self.0.detail },
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
}
