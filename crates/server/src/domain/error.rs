//! What the domain services refuse, as one typed error: [`DomainError`], with [`ErrorCode`],
//! the contract's catalogue of codes each refusal is known by (CONTRACT §2). Nothing here knows
//! HTTP: statuses, headers and the error envelope's `detail` are built from these variants at
//! the HTTP edge ([`crate::http::error`]), in one place.

use serde::Serialize;
use tradeops_core::engine::CommandError;
use tradeops_core::orders::{ClientOrderId, OrderStatus};
use tradeops_core::risk::RiskRefusal;
use tradeops_core::{FieldError, Role, Symbol, Timestamp};

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
    OutsideRegularSession,
    SymbolHalted,
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
            OutsideRegularSession => "OUTSIDE_REGULAR_SESSION",
            SymbolHalted => "SYMBOL_HALTED",
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

/// What a guarded change was about, beside the guard and its reason.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GuardSubject {
    /// The settings fields the change touched.
    Fields(Vec<String>),
    /// The token a revoke named.
    Token(String),
    /// The job a cancel named, and the status it had already ended with.
    Job { status: tradeops_store::JobStatus },
}

/// A refusal or failure of a domain service. The message of each variant is the one the
/// operator reads (the envelope's `message`), except [`DomainError::Internal`], whose text is
/// the cause: logged, never shown.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum DomainError {
    /// Refused fields, the first one named in the message.
    #[error("{}", validation_message(.0))]
    Validation(Vec<FieldError>),
    /// A row of an imported file refused: its line (1-based, the header being line 1) and field.
    #[error("Line {line}, {field}: {reason}")]
    BadRow { line: usize, field: String, reason: String },
    /// What was asked for does not exist; the message says what.
    #[error("{0}")]
    NotFound(String),
    #[error("No open position in {0}")]
    PositionNotFound(Symbol),
    #[error("This action needs the {required} role; token {name:?} has {role}")]
    Forbidden { name: String, role: Role, required: Role },
    #[error("Emergency halt is active: nothing new until an operator resumes (POST /api/risk/resume)")]
    EmergencyHaltActive,
    #[error("{}", .0.message)]
    Risk(Box<RiskRefusal>),
    #[error("{message}")]
    DuplicateOrder { existing: ClientOrderId, message: String },
    #[error("{}", not_cancellable_message(*.status))]
    NotCancellable { status: OrderStatus },
    #[error("The market is closed; it next opens at {}", tradeops_core::time::format_ts(.next_open))]
    MarketClosed { next_open: Timestamp },
    /// Outside 09:30–16:00 only a `LIMIT` `DAY` order marked `extended_hours` trades
    /// (CONTRACT §12); nothing was sent.
    #[error("The market is in its {} session: only a LIMIT DAY order with extended_hours true trades until the regular session opens at {}", .session.as_str(), tradeops_core::time::format_ts(.regular_open))]
    OutsideRegularSession { session: tradeops_core::calendar::SessionPhase, regular_open: Timestamp },
    /// A market or stop order, or a close, in a symbol whose trading is halted (CONTRACT §11).
    #[error("{symbol} is halted ({} {}) since {}: a market or stop order would fill at the reopen's price; a limit order waits at the venue", .halt.reason_code, .halt.reason, tradeops_core::time::format_ts(&.halt.since))]
    SymbolHalted { symbol: Symbol, halt: tradeops_core::market::SymbolHalt },
    /// A change a guard refuses in the current state (role, confirmation, exposure, …).
    #[error("{reason}")]
    GuardRefused { guard: &'static str, reason: String, subject: GuardSubject },
    /// The database cannot be reached (or cannot write) now; `reason` says what was not stored.
    #[error("The database is unavailable; retry shortly")]
    Unavailable { reason: Option<String> },
    /// The trading engine does not run in this service (its term was taken over by a newer
    /// engine, or it stopped): nothing was done.
    #[error("The trading engine is not running in this service; retry shortly")]
    EngineStopped,
    /// The execution broker cannot be reached: a new order is not placed. `reason` says what
    /// failed; `retry_after` is the venue's own wait when it gave one.
    #[error("The broker is unavailable: {reason}; retry shortly")]
    BrokerUnavailable {
        reason: String,
        retry_after: Option<std::time::Duration>,
        client_order_id: Option<ClientOrderId>,
    },
    /// A bug or an unexpected failure.
    #[error("{0}")]
    Internal(String),
}

pub type DomainResult<T> = Result<T, DomainError>;

impl DomainError {
    /// A refusal naming one field.
    pub fn validation(field: impl Into<String>, reason: impl Into<String>) -> Self {
        DomainError::Validation(vec![FieldError::new(field, reason)])
    }

    pub fn internal(cause: impl std::fmt::Display) -> Self {
        DomainError::Internal(cause.to_string())
    }

    /// The contract's code for this refusal (what the audit log records as the outcome).
    pub fn code(&self) -> ErrorCode {
        match self {
            DomainError::Validation(_) | DomainError::BadRow { .. } => ErrorCode::ValidationError,
            DomainError::NotFound(_) => ErrorCode::NotFound,
            DomainError::PositionNotFound(_) => ErrorCode::PositionNotFound,
            DomainError::Forbidden { .. } => ErrorCode::Forbidden,
            DomainError::EmergencyHaltActive => ErrorCode::EmergencyHaltActive,
            DomainError::Risk(_) => ErrorCode::RiskBlocked,
            DomainError::DuplicateOrder { .. } => ErrorCode::DuplicateOrderBlocked,
            DomainError::NotCancellable { .. } => ErrorCode::OrderNotCancellable,
            DomainError::MarketClosed { .. } => ErrorCode::MarketClosed,
            DomainError::OutsideRegularSession { .. } => ErrorCode::OutsideRegularSession,
            DomainError::SymbolHalted { .. } => ErrorCode::SymbolHalted,
            DomainError::GuardRefused { .. } => ErrorCode::SettingsUpdateBlocked,
            DomainError::Unavailable { .. } | DomainError::EngineStopped => ErrorCode::ServiceUnavailable,
            DomainError::BrokerUnavailable { .. } => ErrorCode::BrokerUnavailable,
            DomainError::Internal(_) => ErrorCode::InternalError,
        }
    }
}

/// The first refused field, in the operator's words.
fn validation_message(errors: &[FieldError]) -> String {
    let Some(first) = errors.first() else { return "Invalid request: invalid request".to_string() };
    if first.field.is_empty() {
        format!("Invalid request: {}", first.reason)
    } else if ["must ", "is ", "may "].iter().any(|p| first.reason.starts_with(p)) {
        // Reasons in the operator's words read as a sentence: "quantity must be …".
        format!("{} {}", first.field, first.reason)
    } else {
        format!("Invalid value for {}: {}", first.field, first.reason)
    }
}

fn not_cancellable_message(status: OrderStatus) -> String {
    if status == OrderStatus::PendingCancel {
        "The order is already PENDING_CANCEL: its cancel was sent to the broker again".to_string()
    } else {
        format!("The order is {status} and cannot be cancelled")
    }
}

impl From<CommandError> for DomainError {
    fn from(e: CommandError) -> Self {
        match e {
            CommandError::Halted => DomainError::EmergencyHaltActive,
            CommandError::Risk(r) => DomainError::Risk(r),
            CommandError::Duplicate { existing, message } => DomainError::DuplicateOrder { existing, message },
            CommandError::Invalid { field, reason } => DomainError::validation(field, reason),
            CommandError::NotFound(what) => DomainError::NotFound(what),
            CommandError::PositionNotFound(symbol) => DomainError::PositionNotFound(symbol),
            CommandError::NotCancellable { status } => DomainError::NotCancellable { status },
            CommandError::NotPersisted { reason, unavailable: true } => {
                DomainError::Unavailable { reason: Some(reason) }
            }
            CommandError::NotPersisted { reason, unavailable: false } => DomainError::Internal(reason),
            CommandError::EngineStopped => DomainError::EngineStopped,
            CommandError::MarketClosed { next_open } => DomainError::MarketClosed { next_open },
            CommandError::OutsideRegularSession { session, regular_open } => {
                DomainError::OutsideRegularSession { session, regular_open }
            }
            CommandError::SymbolHalted { symbol, halt } => DomainError::SymbolHalted { symbol, halt },
            CommandError::BrokerUnavailable { reason, retry_after, client_order_id } => {
                DomainError::BrokerUnavailable { reason, retry_after, client_order_id }
            }
        }
    }
}

impl From<tradeops_store::StoreError> for DomainError {
    fn from(e: tradeops_store::StoreError) -> Self {
        if e.is_unavailable() {
            tracing::warn!(error = %e, "refused: the database is unavailable");
            return DomainError::Unavailable { reason: None };
        }
        DomainError::internal(e)
    }
}
