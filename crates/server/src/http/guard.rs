//! The guard every sensitive action goes through, in one call per handler:
//! authenticate → role check → LIVE confirmation → parse the body → act → audit row.
//! Every outcome, refusals included, is audited (CONTRACT §6): one row per action of an
//! identified caller; refusals before that (no or an invalid token, a spent rate budget) are
//! counted per source and minute into one row ([`crate::refusals`]), so a flood of them cannot
//! fill the disk.
//!
//! ```text
//! async fn update(guard: Sensitive) -> ApiResult<ApiResponse<Out>> {
//!     guard.run(SETTINGS_UPDATE, Target::Fixed("settings"), |caller, patch: Value| async move { … }).await
//! }
//! ```

pub use crate::domain::actions::Action;
use crate::domain::tokens::Principal;
use crate::http::auth::{identify, spend};
use crate::http::client_limit::ClientAddr;
use crate::http::envelope::REQUEST;
use crate::http::error::{ApiError, ApiResult, ErrorCode};
use crate::http::extract::{body_rejection, is_json_type, parse_json};
use crate::http::state::AppState;
use crate::refusals::RefusalKey;
use axum::extract::{FromRequest, Request};
use axum::http::HeaderMap;
use bytes::Bytes;
use futures::FutureExt;
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use tradeops_core::TradingMode;
use tradeops_store::AuditEntry;

/// Header that confirms a sensitive action while trading `LIVE`.
pub const CONFIRM_LIVE_HEADER: &str = "x-confirm-live";

/// What the audit row names as the action's target.
pub enum Target {
    Fixed(&'static str),
    /// A field of the JSON body (`symbol`, `name`, …), read even when the body is refused.
    BodyField(&'static str),
    Value(String),
}

/// The request as a sensitive action sees it. Never rejects: refusals are decided (and
/// audited) in [`Sensitive::run`].
pub struct Sensitive {
    state: AppState,
    caller: ApiResult<Principal>,
    /// Where the request came from: the source of an aggregated refusal.
    client: ClientAddr,
    confirmed_live: bool,
    body: ApiResult<Bytes>,
    /// The request's content type, lowercased, without parameters.
    content_type: String,
}

/// Whether the request carries `X-Confirm-Live: true`.
pub fn live_confirmed(headers: &HeaderMap) -> bool {
    headers.get(CONFIRM_LIVE_HEADER).and_then(|v| v.to_str().ok()).is_some_and(|v| v.eq_ignore_ascii_case("true"))
}

impl FromRequest<AppState> for Sensitive {
    type Rejection = std::convert::Infallible;

    async fn from_request(req: Request, state: &AppState) -> Result<Self, Self::Rejection> {
        let (parts, body) = req.into_parts();
        let caller = identify(state, &parts);
        let client = ClientAddr::of_request(&parts, state.config.auth.trust_forwarded_for);
        let confirmed_live = live_confirmed(&parts.headers);
        let content_type = parts
            .headers
            .get(axum::http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.split(';').next())
            .map(|m| m.trim().to_ascii_lowercase())
            .unwrap_or_default();
        let body = Bytes::from_request(Request::from_parts(parts, body), state).await.map_err(body_rejection);
        Ok(Sensitive { state: state.clone(), caller, client, confirmed_live, body, content_type })
    }
}

/// A body sent as CSV or as JSON ([`Sensitive::run_csv_or_json`]).
pub enum CsvOrJson<B> {
    Csv(Bytes),
    Json(B),
}

/// What a guarded action learns about its caller.
pub struct Authorized {
    pub principal: Principal,
    pub confirmed_live: bool,
}

impl Sensitive {
    /// An action that takes no request body (a revocation, a job's cancel): none is read; one
    /// sent all the same must still be JSON, so that what is audited is what was sent.
    pub async fn run_bodyless<T, F, Fut>(self, action: Action, target: Target, act: F) -> ApiResult<T>
    where
        F: FnOnce(Authorized) -> Fut,
        Fut: Future<Output = ApiResult<T>>,
    {
        let decode = |body: &[u8], content_type: &str| {
            if body.is_empty() {
                return Ok(());
            }
            if !is_json_type(content_type) {
                return Err(ApiError::validation("content-type", "request bodies must be sent as application/json"));
            }
            parse_json::<Value>(body).map(|_| ())
        };
        self.run_with(action, target, decode, false, |caller, ()| act(caller)).await
    }

    /// A JSON body (`application/json`), required (`{}` for a request of no fields).
    pub async fn run<B, T, F, Fut>(self, action: Action, target: Target, act: F) -> ApiResult<T>
    where
        B: DeserializeOwned,
        F: FnOnce(Authorized, B) -> Fut,
        Fut: Future<Output = ApiResult<T>>,
    {
        let decode = |body: &[u8], content_type: &str| {
            if !is_json_type(content_type) && !body.iter().all(u8::is_ascii_whitespace) {
                return Err(ApiError::validation("content-type", "request bodies must be sent as application/json"));
            }
            parse_json(body)
        };
        self.run_with(action, target, decode, false, act).await
    }

    /// A CSV body (`text/csv`); the audit row keeps its size, not the file.
    pub async fn run_csv<T, F, Fut>(self, action: Action, target: Target, act: F) -> ApiResult<T>
    where
        F: FnOnce(Authorized, Bytes) -> Fut,
        Fut: Future<Output = ApiResult<T>>,
    {
        let decode = |body: &[u8], content_type: &str| {
            if !matches!(content_type, "text/csv" | "application/csv") {
                return Err(ApiError::validation("content-type", "the body must be sent as text/csv"));
            }
            Ok(Bytes::copy_from_slice(body))
        };
        self.run_with(action, target, decode, true, act).await
    }

    /// A file sent either as CSV (`text/csv`) or as JSON (`application/json`, read into `B`);
    /// the audit row keeps its content type and size, not the file.
    pub async fn run_csv_or_json<B, T, F, Fut>(self, action: Action, target: Target, act: F) -> ApiResult<T>
    where
        B: DeserializeOwned,
        F: FnOnce(Authorized, CsvOrJson<B>) -> Fut,
        Fut: Future<Output = ApiResult<T>>,
    {
        let decode = |body: &[u8], content_type: &str| match content_type {
            "text/csv" | "application/csv" => Ok(CsvOrJson::Csv(Bytes::copy_from_slice(body))),
            t if is_json_type(t) => parse_json(body).map(CsvOrJson::Json),
            _ => Err(ApiError::validation("content-type", "the body must be sent as text/csv or application/json")),
        };
        self.run_with(action, target, decode, true, act).await
    }

    async fn run_with<B, T, D, F, Fut>(
        self,
        action: Action,
        target: Target,
        decode: D,
        summarize: bool,
        act: F,
    ) -> ApiResult<T>
    where
        D: FnOnce(&[u8], &str) -> ApiResult<B>,
        F: FnOnce(Authorized, B) -> Fut,
        Fut: Future<Output = ApiResult<T>>,
    {
        let Sensitive { state, caller, client, confirmed_live, body, content_type } = self;
        let mode = REQUEST.try_with(|c| c.mode).unwrap_or_default();
        // Refused before the caller is known, or over its budget: counted, not a row each.
        let caller = match caller {
            Ok(principal) => match spend(&state, &principal.name) {
                Ok(()) => Ok(principal),
                Err(refusal) => Err((Some(principal), refusal)),
            },
            Err(refusal) => Err((None, refusal)),
        };
        let principal = match caller {
            Ok(principal) => principal,
            Err((known, refusal)) => {
                record_refusal(&state, action, client, mode, known.as_ref(), &refusal).await;
                return Err(refusal);
            }
        };
        let size = body.as_ref().map(|b| b.len()).unwrap_or(0);
        let raw = match (&body, summarize) {
            (Ok(b), false) => String::from_utf8_lossy(b).into_owned(),
            _ => String::new(),
        };
        let raw_json: Option<Value> = serde_json::from_str(&raw).ok();
        let target = match target {
            Target::Fixed(t) => t.to_string(),
            Target::Value(t) => t,
            Target::BodyField(field) => raw_json
                .as_ref()
                .and_then(|v| v.get(field))
                .map(|v| v.as_str().map(str::to_string).unwrap_or_else(|| v.to_string()))
                .unwrap_or_default(),
        };
        // Control characters (NUL is refused by PostgreSQL) never reach the audit log.
        let target: String =
            target.chars().take(200).map(|c| if c.is_control() { char::REPLACEMENT_CHARACTER } else { c }).collect();
        let actor = principal.clone();

        let outcome = async {
            principal.require(action.role)?;
            if mode == TradingMode::Live && !confirmed_live {
                return Err(ApiError::new(
                    ErrorCode::ConfirmationRequired,
                    "Trading is LIVE: repeat this action with header X-Confirm-Live: true",
                )
                .with_detail(serde_json::json!({"header": "X-Confirm-Live", "action": action.name})));
            }
            let parsed: B = decode(&body?, &content_type)?;
            // A panic inside the action is still an audited outcome.
            AssertUnwindSafe(act(Authorized { principal, confirmed_live }, parsed)).catch_unwind().await.unwrap_or_else(
                |panic| Err(ApiError::internal(format!("{} panicked: {}", action.name, panic_message(&*panic)))),
            )
        }
        .await;

        let entry = AuditEntry {
            ts: state.market_clock.now().timestamp_millis(),
            wall_ts: state.clock.now().timestamp_millis(),
            actor: actor.name,
            role: Some(actor.role.as_str().to_string()),
            action: action.name.to_string(),
            target,
            request: if summarize {
                serde_json::json!({"content_type": content_type, "bytes": size}).to_string()
            } else {
                audited_request(raw_json, raw, outcome.is_ok())
            },
            outcome: match &outcome {
                Ok(_) => "OK".to_string(),
                Err(e) => e.code.as_str().to_string(),
            },
            mode: mode.as_str().to_string(),
            request_id: REQUEST.try_with(|c| c.request_id.clone()).unwrap_or_default(),
        };
        if let Err(e) = state.audit.append_audit(&entry).await {
            tracing::error!(error = %e, action = action.name, "could not write the audit row");
        }
        outcome
    }
}

/// Counts a refusal of `action` before it was considered; the first of its source's minute
/// writes the aggregate row, the others only count in memory.
async fn record_refusal(
    state: &AppState,
    action: Action,
    client: ClientAddr,
    mode: TradingMode,
    known: Option<&Principal>,
    refusal: &ApiError,
) {
    let key = RefusalKey {
        actor: known.map(|p| p.name.clone()).unwrap_or_else(|| "anonymous".into()),
        role: known.map(|p| p.role.as_str().to_string()),
        source: client.to_string(),
        action: action.name,
        outcome: refusal.code.as_str(),
    };
    let request_id = REQUEST.try_with(|c| c.request_id.clone()).unwrap_or_default();
    let (now_ms, market_ms) = (state.clock.now().timestamp_millis(), state.market_clock.now().timestamp_millis());
    if let Some((entry, ticket)) = state.refusals.record(key, now_ms, market_ms, mode.as_str(), &request_id) {
        let written = state.audit_store.append_audit(&entry).await;
        if let Err(e) = &written {
            tracing::error!(error = %e, action = action.name, "could not write the audit row");
        }
        state.refusals.inserted(ticket, written.ok());
    }
}

/// Refused requests are kept up to this many bytes, so refusals cannot fill the database.
const REFUSED_REQUEST_KEPT: usize = 4096;

/// The request as the audit row stores it: the JSON body, or the text when it was not JSON;
/// a refused request over [`REFUSED_REQUEST_KEPT`] bytes is cut, saying so.
fn audited_request(json: Option<Value>, raw: String, accepted: bool) -> String {
    if !accepted && raw.len() > REFUSED_REQUEST_KEPT {
        let mut cut = REFUSED_REQUEST_KEPT;
        while !raw.is_char_boundary(cut) {
            cut -= 1;
        }
        return serde_json::json!({"truncated": true, "bytes": raw.len(), "prefix": &raw[..cut]}).to_string();
    }
    json.map(|v| v.to_string()).unwrap_or_else(|| Value::String(raw).to_string())
}

pub fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "unknown panic".into())
}
