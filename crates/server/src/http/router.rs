//! The whole HTTP surface as one router: the API's routes, the OpenAPI document and its viewer,
//! the console's files and `/metrics`, under the middleware every request passes (body limit,
//! panic envelope, database deadline, tracing, request context). [`crate::app`] serves it.

use crate::http::extract::MAX_BODY_BYTES;
use crate::http::state::AppState;
use crate::http::{self, openapi, routes};
use axum::extract::{DefaultBodyLimit, State};
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::trace::TraceLayer;
use utoipa_swagger_ui::SwaggerUi;

/// The whole HTTP surface under its middleware.
pub fn router(state: AppState, extra: Router<AppState>) -> Router {
    let docs: Router<AppState> =
        Router::from(SwaggerUi::new("/api/docs").url("/api/openapi.json", openapi::document()))
            .layer(axum::middleware::map_response(http::middleware::envelope_not_found));
    Router::new()
        .merge(routes::api())
        .merge(extra)
        .merge(docs)
        .merge(crate::http::console::router())
        .route("/metrics", get(metrics))
        .fallback(http::middleware::not_found)
        .method_not_allowed_fallback(http::middleware::method_not_allowed)
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(CatchPanicLayer::custom(http::middleware::panic_response))
        .layer(axum::middleware::from_fn_with_state(state.clone(), crate::http::deadline::database_deadline))
        .layer(TraceLayer::new_for_http().make_span_with(http::middleware::make_span))
        .layer(axum::middleware::from_fn_with_state(state.clone(), http::middleware::request_context))
        .with_state(state)
}

/// The surface of a cluster node that does not lead, for the reads [`crate::http::front`]
/// answers from the database: the same routes and middleware over a state whose engine is
/// [`crate::engine::EngineHandle::detached`]. Before each request the settings and tokens are
/// read again when the database holds newer ones (the leader changes them), so a read answers
/// what the database holds, as the leader's would.
pub fn database_reads(state: AppState) -> Router {
    router(state.clone(), Router::new())
        .layer(axum::middleware::from_fn_with_state(state, http::middleware::follow_the_database))
}

async fn metrics(State(state): State<AppState>) -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "application/openmetrics-text; version=1.0.0; charset=utf-8")], state.metrics.encode())
}
