//! Requests never hang on a database that stopped answering (a frozen server, a network
//! partition): a request still running after [`DEADLINE`] while the database probe finds the
//! database unavailable is answered 503 `SERVICE_UNAVAILABLE` with `Retry-After`, and its
//! handler dropped. A request that is merely slow while the database answers (an import, a
//! large page) is left alone. The emergency halt is bounded on its own (the runner's writes
//! and the audit row wait a fraction of this), so it answers before the deadline.

use crate::http::error::ApiError;
use crate::http::state::AppState;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::time::Duration;

/// How long a request may wait on an unavailable database.
pub const DEADLINE: Duration = Duration::from_millis(900);
const CHECK_EVERY: Duration = Duration::from_millis(100);

pub async fn database_deadline(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let handler = next.run(req);
    tokio::pin!(handler);
    // Most requests (the engine's view, settings, health) answer on their first poll: they
    // need no timer, and registering one per request was a good part of their cost.
    if let std::task::Poll::Ready(response) = futures::poll!(&mut handler) {
        return response;
    }
    let started = tokio::time::Instant::now();
    let mut check = tokio::time::interval_at(started + DEADLINE, CHECK_EVERY);
    loop {
        tokio::select! {
            response = &mut handler => return response,
            _ = check.tick() => {
                if !state.db.is_available() {
                    tracing::warn!(waited = ?started.elapsed(), "request answered 503: the database stopped answering");
                    return ApiError::database_unavailable().into_response();
                }
            }
        }
    }
}
