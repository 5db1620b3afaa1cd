//! Middleware every request passes: request id and mode (the envelope's `meta`), response
//! headers `X-Request-Id` and `X-Trading-Mode`, metrics, request spans, and panics turned into
//! the `INTERNAL_ERROR` envelope; and, on a cluster node that does not lead, the settings and
//! tokens read again from the database before its reads ([`follow_the_database`]).

use crate::http::envelope::{RequestContext, REQUEST};
use crate::http::error::{ApiError, ErrorCode};
use crate::http::state::AppState;
use axum::extract::{MatchedPath, Request, State};
use axum::http::{HeaderName, HeaderValue};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::any::Any;
use tokio::time::Instant;

pub const REQUEST_ID_HEADER: HeaderName = HeaderName::from_static("x-request-id");
pub const MODE_HEADER: HeaderName = HeaderName::from_static("x-trading-mode");

/// A caller's own request id is kept when it is sane (1–64 of `A-Za-z0-9-_.`), so ids can be
/// followed across systems; otherwise a fresh UUID.
pub fn request_id(req: &Request) -> String {
    req.headers()
        .get(&REQUEST_ID_HEADER)
        .and_then(|v| v.to_str().ok())
        .filter(|v| !v.is_empty() && v.len() <= 64 && v.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c)))
        .map(str::to_string)
        .unwrap_or_else(|| uuid::Uuid::new_v4().to_string())
}

pub async fn request_context(State(state): State<AppState>, mut req: Request, next: Next) -> Response {
    let ctx = RequestContext { request_id: request_id(&req), mode: state.settings.mode(), clock: state.clock.clone() };
    let route = req.extensions().get::<MatchedPath>().map(|p| p.as_str().to_owned());
    let method = req.method().as_str().to_owned();
    req.extensions_mut().insert(ctx.clone());
    let (request_id, mode) = (ctx.request_id.clone(), ctx.mode);

    state.metrics.start();
    let started = Instant::now();
    let mut response = REQUEST.scope(ctx, next.run(req)).await;
    let route = route.as_deref().unwrap_or("unmatched");
    state.metrics.finish(&method, route, response.status().as_u16(), started.elapsed());

    let headers = response.headers_mut();
    if let Ok(v) = HeaderValue::from_str(&request_id) {
        headers.insert(REQUEST_ID_HEADER, v);
    }
    headers.insert(MODE_HEADER, HeaderValue::from_static(mode.as_str()));
    response
}

/// The request span: method, path and request id.
pub fn make_span(req: &Request) -> tracing::Span {
    let request_id = req.extensions().get::<RequestContext>().map(|c| c.request_id.as_str()).unwrap_or("-");
    tracing::info_span!("request", method = %req.method(), path = %req.uri().path(), request_id = %request_id)
}

/// A panic becomes `INTERNAL_ERROR`; its message is logged, never sent.
pub fn panic_response(panic: Box<dyn Any + Send + 'static>) -> Response {
    ApiError::internal(format!("handler panicked: {}", crate::http::guard::panic_message(&*panic))).into_response()
}

pub async fn not_found(req: Request) -> ApiError {
    ApiError::not_found(format!("No route for {} {}", req.method(), req.uri().path()))
        .with_detail(serde_json::json!({"path": req.uri().path()}))
}

pub async fn method_not_allowed(req: Request) -> ApiError {
    ApiError::new(ErrorCode::MethodNotAllowed, format!("{} is not allowed on {}", req.method(), req.uri().path()))
        .with_detail(serde_json::json!({"method": req.method().as_str(), "path": req.uri().path()}))
}

/// The documentation router answers unknown paths with an empty 404; give it the envelope.
pub async fn envelope_not_found(response: Response) -> Response {
    if response.status() == axum::http::StatusCode::NOT_FOUND {
        return ApiError::not_found("No documentation page at this path").into_response();
    }
    response
}

/// Takes the settings and tokens the database holds when they are newer than this process's
/// (a node that does not lead follows the leader's changes this way); a database that cannot be
/// read leaves them as they are, and the request itself says so.
pub async fn follow_the_database(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let _ = state.settings.reload_if_newer().await;
    let _ = state.tokens.refresh().await;
    next.run(req).await
}
