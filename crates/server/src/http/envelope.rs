//! The response envelope of seed §2.2/§2.3 and CONTRACT §1, and the per-request context
//! (request id, mode, clock) it is built from. The context is a task-local set by the outermost
//! middleware, so every response — handler, fallback, rejection or panic — carries the same
//! `meta` without handlers passing it around.

// The code catalogue (CONTRACT §2) is the domain's: the envelope only carries a code, and the
// code → status table in `http::error` builds on the envelope, not the other way round.
use crate::domain::ErrorCode;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde_json::Value;
use std::sync::Arc;
use tradeops_core::time::format_ts;
use tradeops_core::{Clock, TradingMode};

/// What every response of one request shares.
#[derive(Clone)]
pub struct RequestContext {
    pub request_id: String,
    pub mode: TradingMode,
    pub clock: Arc<dyn Clock>,
}

tokio::task_local! {
    pub static REQUEST: RequestContext;
}

/// `meta` of every envelope.
#[derive(Clone, Debug, Serialize, utoipa::ToSchema)]
pub struct Meta {
    pub mode: TradingMode,
    /// RFC 3339 UTC with milliseconds.
    pub timestamp: String,
    pub request_id: String,
    /// Number of items (list endpoints).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub count: Option<usize>,
    /// Cursor of the next page; `null` on the last page (paginated endpoints).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>)]
    pub next_cursor: Option<Value>,
}

impl Meta {
    /// Meta for the request being handled. Outside a request (never in practice) it still
    /// renders, with a fresh id.
    pub fn current() -> Meta {
        REQUEST
            .try_with(|ctx| Meta {
                mode: ctx.mode,
                timestamp: format_ts(&ctx.clock.now()),
                request_id: ctx.request_id.clone(),
                count: None,
                next_cursor: None,
            })
            .unwrap_or_else(|_| Meta {
                mode: TradingMode::Paper,
                timestamp: String::new(),
                request_id: uuid::Uuid::new_v4().to_string(),
                count: None,
                next_cursor: None,
            })
    }
}

/// The success envelope.
#[derive(Serialize, utoipa::ToSchema)]
pub struct SuccessBody<T> {
    /// Always `true`.
    pub ok: bool,
    pub data: T,
    pub meta: Meta,
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct ErrorPayload {
    pub code: ErrorCode,
    pub message: String,
    /// Extra context: `field`/`reason` for validation, `rule`/`limit`/`current` for risk, …
    #[schema(value_type = Object)]
    pub detail: Value,
}

/// The error envelope.
#[derive(Serialize, utoipa::ToSchema)]
pub struct ErrorBody {
    /// Always `false`.
    pub ok: bool,
    pub error: ErrorPayload,
    pub meta: Meta,
}

/// A successful response: the data, and for lists the count and cursor.
pub struct ApiResponse<T> {
    status: StatusCode,
    data: T,
    count: Option<usize>,
    next_cursor: Option<Value>,
}

impl<T: Serialize> ApiResponse<T> {
    pub fn ok(data: T) -> Self {
        Self { status: StatusCode::OK, data, count: None, next_cursor: None }
    }

    pub fn created(data: T) -> Self {
        Self { status: StatusCode::CREATED, ..Self::ok(data) }
    }

    /// 202: queued for later.
    /// The success envelope with another status (`GET /api/health` answers 503 when `DOWN`).
    pub fn with_status(mut self, status: StatusCode) -> Self {
        self.status = status;
        self
    }

    pub fn accepted(data: T) -> Self {
        Self { status: StatusCode::ACCEPTED, ..Self::ok(data) }
    }
}

impl<T: Serialize> ApiResponse<Vec<T>> {
    pub fn list(items: Vec<T>) -> Self {
        let count = Some(items.len());
        Self { status: StatusCode::OK, data: items, count, next_cursor: None }
    }

    /// A page of a paginated list; `next` is `None` on the last page.
    pub fn page(items: Vec<T>, next: Option<String>) -> Self {
        let next_cursor = Some(next.map(Value::String).unwrap_or(Value::Null));
        Self { next_cursor, ..Self::list(items) }
    }
}

impl<T: Serialize> IntoResponse for ApiResponse<T> {
    fn into_response(self) -> Response {
        let mut meta = Meta::current();
        meta.count = self.count;
        meta.next_cursor = self.next_cursor;
        (self.status, axum::Json(SuccessBody { ok: true, data: self.data, meta })).into_response()
    }
}
