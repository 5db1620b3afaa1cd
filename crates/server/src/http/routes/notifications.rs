//! Notifications (CONTRACT §13): `GET /api/notifications/channels` (each channel's queue and
//! counts), `POST /api/notifications/test` (operator, audited: a `test` message to a channel),
//! `GET /api/notifications/deliveries` (what was sent where, newest first). Channels are
//! configured in the configuration file only: nothing here shows a token, a webhook URL or a
//! secret.

use crate::domain::actions::Action;
use crate::domain::DomainError;
use crate::http::auth::Caller;
use crate::http::envelope::{ApiResponse, SuccessBody};
use crate::http::error::{ApiError, ApiResult};
use crate::http::extract::Query;
use crate::http::guard::{Sensitive, Target};
use crate::http::routes::{list_limit, page, parse_cursor};
use crate::http::state::AppState;
use crate::notify::channel::DeliveryState;
use crate::notify::kinds::NoticeKind;
use crate::notify::NotifyError;
use axum::extract::State;
use axum::routing::{get, post};
use axum::Router;
use serde::{Deserialize, Serialize};
use tradeops_core::time::{format_ts, from_epoch_ms};
use tradeops_core::Role;

pub const NOTIFICATIONS_TEST: Action = Action { name: "notifications.test", role: Role::Operator };

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/api/notifications/channels", get(channels))
        .route("/api/notifications/test", post(test))
        .route("/api/notifications/deliveries", get(deliveries))
}

// A channel's delivery state; no doc comment: it would change the OpenAPI document.
#[derive(Serialize, utoipa::ToSchema)]
#[serde(rename_all = "UPPERCASE")]
pub enum ChannelState {
    Ok,
    Retrying,
    Failing,
}

#[derive(Serialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum ChannelKind {
    Telegram,
    Discord,
    Slack,
    Ntfy,
    Webhook,
}

#[derive(Serialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum CommandsRole {
    None,
    Viewer,
    Operator,
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct ChannelRow {
    pub name: String,
    pub kind: ChannelKind,
    /// The kinds of notice it is sent (a `test` goes to any channel).
    pub events: Vec<NoticeKind>,
    /// Notices waiting to be sent.
    pub queued: usize,
    pub sent: u64,
    /// Deliveries given up: refused for good by the service, or still failing after their
    /// retries.
    pub failed: u64,
    /// Routine notices folded into a digest message while the queue was full (critical kinds
    /// never are).
    pub dropped: u64,
    pub last_sent_at: Option<String>,
    pub last_error: Option<String>,
    /// Beyond the contract: `OK` (the last delivery went through, or none yet), `RETRYING` (a
    /// delivery waits for its next attempt or a `429`'s `retry_after`), `FAILING` (the last
    /// delivery failed for good).
    pub state: ChannelState,
    /// Beyond the contract: when a `RETRYING` channel tries again.
    pub retry_at: Option<String>,
    /// Beyond the contract: who may command the service from a Telegram channel's chats.
    pub commands_role: CommandsRole,
}

/// The notification channels of the configuration, with their queues and counts (sent, failed
/// and dropped count every delivery stored, across restarts).
#[utoipa::path(get, path = "/api/notifications/channels", tag = "notifications", security(("bearer" = [])),
    responses((status = 200, description = "Channels", body = inline(SuccessBody<Vec<ChannelRow>>))))]
pub async fn channels(
    State(state): State<AppState>,
    Caller(caller): Caller,
) -> ApiResult<ApiResponse<Vec<ChannelRow>>> {
    caller.require(Role::Viewer)?;
    let rows = state
        .notifier
        .channels()
        .into_iter()
        .map(|c| ChannelRow {
            name: c.name,
            kind: match c.kind {
                "telegram" => ChannelKind::Telegram,
                "discord" => ChannelKind::Discord,
                "slack" => ChannelKind::Slack,
                "ntfy" => ChannelKind::Ntfy,
                _ => ChannelKind::Webhook,
            },
            events: c.events,
            queued: c.queued,
            sent: c.stats.sent,
            failed: c.stats.failed,
            dropped: c.stats.dropped,
            last_sent_at: c.stats.last_sent_at.as_ref().map(format_ts),
            last_error: c.stats.last_error,
            state: match c.stats.state {
                "RETRYING" => ChannelState::Retrying,
                "FAILING" => ChannelState::Failing,
                _ => ChannelState::Ok,
            },
            retry_at: c.stats.retry_at.as_ref().map(format_ts),
            commands_role: match c.commands_role {
                None => CommandsRole::None,
                Some(Role::Viewer) => CommandsRole::Viewer,
                Some(_) => CommandsRole::Operator,
            },
        })
        .collect();
    Ok(ApiResponse::list(rows))
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TestRequest {
    /// The channel's `name`.
    pub channel: String,
}

#[derive(Serialize, utoipa::ToSchema)]
#[serde(rename_all = "UPPERCASE")]
pub enum DeliveryStatus {
    Sent,
    Retrying,
    Failed,
    Folded,
}

fn status(s: &str) -> DeliveryStatus {
    match s {
        "SENT" => DeliveryStatus::Sent,
        "FAILED" => DeliveryStatus::Failed,
        "FOLDED" => DeliveryStatus::Folded,
        _ => DeliveryStatus::Retrying,
    }
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct DeliveryRow {
    /// Beyond the contract: the row's id, what `cursor` pages by (`null` for a test answered
    /// from memory).
    pub delivery_id: Option<i64>,
    /// The notice: the event's id on the stream (`GET /api/events`), or `test-…`,
    /// `summary-<date>-<mode>`, `digest-…`.
    pub event_id: String,
    /// The notice kind, or `digest` (routine notices folded while the queue was full).
    pub kind: String,
    pub channel: String,
    /// `RETRYING`: not delivered yet (queued, or waiting for its next attempt; `attempts` 0
    /// while it waits its first turn).
    pub status: DeliveryStatus,
    pub attempts: u32,
    pub created_at: Option<String>,
    pub sent_at: Option<String>,
    /// Why the last attempt failed (never a token or a URL).
    pub error: Option<String>,
}

impl From<DeliveryState> for DeliveryRow {
    fn from(d: DeliveryState) -> DeliveryRow {
        DeliveryRow {
            delivery_id: None,
            event_id: d.event_id,
            kind: d.kind,
            channel: d.channel,
            status: status(d.status),
            attempts: d.attempts,
            created_at: d.created_at.as_ref().map(format_ts),
            sent_at: d.sent_at.as_ref().map(format_ts),
            error: d.error,
        }
    }
}

/// Sends a `test` message to a channel, ahead of its routine notices, and answers with its
/// delivery as it stands after at most 5 seconds (`SENT`; `RETRYING` with the error while the
/// channel is failing or rate-limited; `FAILED` when refused for good). Audited.
#[utoipa::path(post, path = "/api/notifications/test", tag = "notifications", security(("bearer" = [])),
    request_body = TestRequest,
    responses((status = 200, description = "The test's delivery", body = inline(SuccessBody<DeliveryRow>)),
              (status = 404, description = "NOT_FOUND (no channel of that name is configured)", body = crate::http::envelope::ErrorBody)))]
pub async fn test(State(state): State<AppState>, guard: Sensitive) -> ApiResult<ApiResponse<DeliveryRow>> {
    guard
        .run(NOTIFICATIONS_TEST, Target::BodyField("channel"), |caller, req: TestRequest| async move {
            let mode = state.settings.current().runtime.trading_mode;
            match state.notifier.test(&req.channel, mode, &caller.principal.name).await {
                Ok(delivery) => Ok(ApiResponse::ok(DeliveryRow::from(delivery))),
                // A channel named in the body that is not configured, like a symbol that is not
                // on the watchlist: NOT_FOUND, listing the channels there are.
                Err(NotifyError::UnknownChannel(name)) => Err(ApiError::from(DomainError::NotFound(format!(
                    "no notification channel is named {name:?} (configured: {})",
                    state.notifier.channels().iter().map(|c| c.name.as_str()).collect::<Vec<_>>().join(", ")
                )))),
                Err(NotifyError::Store(e)) => Err(e.into()),
            }
        })
        .await
}

#[derive(Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
pub struct DeliveriesQuery {
    /// Only this channel's.
    pub channel: Option<String>,
    /// Page size, 1..=1000 (default 100).
    #[param(minimum = 1, maximum = 1000)]
    pub limit: Option<u32>,
    /// `next_cursor` of the previous page.
    #[param(value_type = Option<crate::http::string_schemas::IdCursor>)]
    pub cursor: Option<String>,
}

/// Deliveries of notices to channels, newest first, paginated. Each is recorded before it is
/// sent, so a restart or a failover goes on with what was left unsent.
#[utoipa::path(get, path = "/api/notifications/deliveries", tag = "notifications", security(("bearer" = [])),
    params(DeliveriesQuery),
    responses((status = 200, description = "Deliveries", body = inline(SuccessBody<Vec<DeliveryRow>>))))]
pub async fn deliveries(
    State(state): State<AppState>,
    Caller(caller): Caller,
    Query(q): Query<DeliveriesQuery>,
) -> ApiResult<ApiResponse<Vec<DeliveryRow>>> {
    caller.require(Role::Viewer)?;
    let limit = list_limit(q.limit)?;
    let before = parse_cursor(q.cursor.as_deref())?;
    let records = match state.notifier.deliveries(q.channel.as_deref(), before, limit as i64 + 1).await {
        Ok(records) => records,
        Err(NotifyError::Store(e)) => return Err(e.into()),
        Err(e) => return Err(ApiError::validation("channel", e.to_string())),
    };
    let (records, next) = page(records, limit, |r| r.delivery_id);
    let rows = records
        .into_iter()
        .map(|r| DeliveryRow {
            delivery_id: Some(r.delivery_id),
            event_id: r.event_id,
            kind: r.kind,
            channel: r.channel,
            status: status(&r.status),
            attempts: r.attempts.max(0) as u32,
            created_at: Some(format_ts(&from_epoch_ms(r.created_at))),
            sent_at: r.sent_at.map(|t| format_ts(&from_epoch_ms(t))),
            error: r.error,
        })
        .collect();
    Ok(ApiResponse::page(rows, next))
}
