//! `GET /api/events`: the live event stream (Server-Sent Events).

use crate::auth::Caller;
use crate::error::{ApiError, ApiResult};
use crate::events::{StoredEvent, KINDS};
use crate::extract::Query;
use crate::state::AppState;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::routing::get;
use axum::Router;
use futures::{Stream, StreamExt};
use serde::Deserialize;
use std::collections::BTreeSet;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::broadcast::error::RecvError;

pub fn router() -> Router<AppState> {
    Router::new().route("/api/events", get(events))
}

#[derive(Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
pub struct EventQuery {
    /// Comma-separated kinds to receive (default: all): order.updated, execution.created,
    /// position.updated, radar.updated, watchlist.updated, risk.state_changed, risk.violation,
    /// settings.updated, download.updated, backtest.updated, health.changed, account.updated.
    pub kinds: Option<String>,
}

fn message(e: &StoredEvent) -> Event {
    Event::default().id(e.id.to_string()).event(e.kind).data(serde_json::to_string(e).unwrap_or_default())
}

/// Server-Sent Events: `id` (monotonic), `event` (the kind), `data` = `{kind, timestamp, mode,
/// data, wall_time}` (`timestamp` market time — the simulated market's in DEMO —, `wall_time`
/// the wall clock's). `Last-Event-ID` resumes from a buffer of the last 10,000 events. A comment line is
/// sent every 15 s as a heartbeat. A client too slow to keep up is disconnected (it can resume).
#[utoipa::path(get, path = "/api/events", tag = "events", security(("bearer" = [])), params(EventQuery),
    responses((status = 200, description = "text/event-stream"),
              (status = 400, description = "VALIDATION_ERROR (kinds, Last-Event-ID)", body = crate::envelope::ErrorBody),
              (status = 401, description = "UNAUTHORIZED", body = crate::envelope::ErrorBody)))]
pub async fn events(
    State(state): State<AppState>,
    _caller: Caller,
    headers: HeaderMap,
    Query(q): Query<EventQuery>,
) -> ApiResult<Sse<impl Stream<Item = Result<Event, Infallible>>>> {
    let kinds: Option<BTreeSet<String>> = match &q.kinds {
        None => None,
        Some(text) => {
            let wanted: BTreeSet<String> =
                text.split(',').map(|k| k.trim().to_string()).filter(|k| !k.is_empty()).collect();
            if let Some(bad) = wanted.iter().find(|k| !KINDS.contains(&k.as_str())) {
                return Err(ApiError::validation(
                    "kinds",
                    format!("unknown event kind {bad:?}; known: {}", KINDS.join(", ")),
                ));
            }
            Some(wanted)
        }
    };
    let after = match headers.get("last-event-id").map(|v| v.to_str().ok().and_then(|t| t.trim().parse::<u64>().ok())) {
        None => None,
        Some(Some(id)) => Some(id),
        Some(None) => return Err(ApiError::validation("Last-Event-ID", "must be an event id from this stream")),
    };
    let (replay, live) = state.events.subscribe(after);
    let wanted = move |e: &Arc<StoredEvent>| kinds.as_ref().is_none_or(|k| k.contains(e.kind));
    let live = futures::stream::unfold(live, |mut rx| async move {
        match rx.recv().await {
            Ok(e) => Some((e, rx)),
            // Too slow (or shutting down): end the stream; the client resumes with Last-Event-ID.
            Err(RecvError::Lagged(_)) | Err(RecvError::Closed) => None,
        }
    });
    let stream = futures::stream::iter(replay)
        .chain(live)
        .filter(move |e| futures::future::ready(wanted(e)))
        .map(|e| Ok::<_, Infallible>(message(&e)));
    Ok(Sse::new(stream).keep_alive(KeepAlive::new().interval(Duration::from_secs(15)).text("heartbeat")))
}
