//! Historical data: `POST /api/data/download`, `GET /api/data/downloads`,
//! `GET /api/data/downloads/{request_id}`, `POST /api/data/downloads/{request_id}/cancel`, and `POST /api/data/import` (CSV; the CLI's
//! `tradeops data import` stores through the same [`crate::jobs::downloads::import_bars`]). A job's JSON
//! shape ([`job_json`], the rows and the `download.updated` event) is written here.

use crate::http::auth::Caller;
use crate::http::envelope::{ApiResponse, SuccessBody};
use crate::http::error::{ApiError, ApiResult};
use crate::http::extract::{Path, Query};
use crate::http::guard::{Action, Sensitive, Target};
use crate::http::routes::list_limit;
use crate::http::state::AppState;
use crate::jobs::downloads::ImportError;
use axum::extract::State;
use axum::routing::{get, post};
use axum::Router;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tradeops_core::market::Timeframe;
use tradeops_core::time::from_epoch_ms;
use tradeops_core::{Role, Symbol, Timestamp};
use tradeops_store::{DataRepository, JobRecord, JobStatus};

pub const DATA_DOWNLOAD: Action = Action { name: "data.download", role: Role::Operator };
pub const DATA_DOWNLOAD_CANCEL: Action = Action { name: "data.download_cancel", role: Role::Operator };
pub const DATA_IMPORT: Action = Action { name: "data.import", role: Role::Operator };

/// Largest CSV file accepted.
pub const MAX_IMPORT_BYTES: usize = 50 * 1024 * 1024;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/api/data/download", post(download))
        .route("/api/data/downloads", get(list))
        .route("/api/data/downloads/{request_id}", get(one))
        .route("/api/data/downloads/{request_id}/cancel", post(cancel))
        .route("/api/data/import", post(import).layer(axum::extract::DefaultBodyLimit::max(MAX_IMPORT_BYTES)))
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DownloadRequest {
    pub symbol: Symbol,
    /// RFC 3339, any offset.
    #[serde(with = "tradeops_core::time::serde_ts")]
    #[schema(value_type = String, format = DateTime)]
    pub start: Timestamp,
    /// RFC 3339, after `start` and not in the future; at most 366 days of `1m` bars or 20 years of `1d`.
    #[serde(with = "tradeops_core::time::serde_ts")]
    #[schema(value_type = String, format = DateTime)]
    pub end: Timestamp,
    /// `1m` (default) or `1d`.
    #[schema(nullable = false)]
    pub timeframe: Option<Timeframe>,
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct DownloadAccepted {
    pub request_id: String,
    #[schema(value_type = String)]
    pub status: JobStatus,
}

/// Queues a download of bars from the data broker into the database. A 1m download spans at
/// most 366 days, a 1d one 20 years; the end may not be in the future (a day of slack for time
/// zones), and only bars that have closed by the market's present are stored — the simulated
/// market never hands out its future.
#[utoipa::path(post, path = "/api/data/download", tag = "data", security(("bearer" = [])), request_body = DownloadRequest,
    responses((status = 202, description = "Queued", body = inline(SuccessBody<DownloadAccepted>)),
              (status = 400, description = "VALIDATION_ERROR", body = crate::http::envelope::ErrorBody),
              (status = 404, description = "NOT_FOUND (symbol)", body = crate::http::envelope::ErrorBody)))]
pub async fn download(State(state): State<AppState>, guard: Sensitive) -> ApiResult<ApiResponse<DownloadAccepted>> {
    guard
        .run(DATA_DOWNLOAD, Target::BodyField("symbol"), |caller, req: DownloadRequest| async move {
            let timeframe = req.timeframe.unwrap_or(Timeframe::Minute);
            let job = crate::jobs::downloads::enqueue(
                &state.jobs,
                req.symbol,
                timeframe,
                req.start,
                req.end,
                &caller.principal.name,
            )
            .await?;
            Ok(ApiResponse::accepted(DownloadAccepted { request_id: job.request_id, status: job.status }))
        })
        .await
}

#[derive(Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
pub struct DownloadQuery {
    #[param(minimum = 1, maximum = 1000)]
    pub limit: Option<u32>,
}

/// Download jobs, newest first: `request_id`, `symbol`, `timeframe`, `start`, `end`, `status`,
/// `progress` (0..1), `bars`, `created_at`, `finished_at`, `error`.
#[utoipa::path(get, path = "/api/data/downloads", tag = "data", security(("bearer" = [])), params(DownloadQuery),
    responses((status = 200, description = "Jobs", body = inline(SuccessBody<Vec<Object>>))))]
pub async fn list(
    State(state): State<AppState>,
    _caller: Caller,
    Query(q): Query<DownloadQuery>,
) -> ApiResult<ApiResponse<Vec<Value>>> {
    let repo: &dyn DataRepository = &state.db;
    let jobs = repo.jobs(list_limit(q.limit)?).await?;
    Ok(ApiResponse::list(jobs.iter().map(job_json).collect()))
}

/// One download job.
#[utoipa::path(get, path = "/api/data/downloads/{request_id}", tag = "data", security(("bearer" = [])),
    params(("request_id" = String, Path, description = "Job id")),
    responses((status = 200, description = "Job", body = inline(SuccessBody<Object>)),
              (status = 404, description = "NOT_FOUND", body = crate::http::envelope::ErrorBody)))]
pub async fn one(
    State(state): State<AppState>,
    _caller: Caller,
    Path(id): Path<String>,
) -> ApiResult<ApiResponse<Value>> {
    let repo: &dyn DataRepository = &state.db;
    let job = repo.job(&id).await?.ok_or_else(|| ApiError::not_found(format!("No download {id:?}")))?;
    Ok(ApiResponse::ok(job_json(&job)))
}

/// Cancels a download: a queued one at once, a running one at its next stored day (the days
/// stored before stay). Answers the job, `CANCELED`, and announces it (`download.updated`).
#[utoipa::path(post, path = "/api/data/downloads/{request_id}/cancel", tag = "data", security(("bearer" = [])),
    params(("request_id" = String, Path, description = "Job id")),
    responses((status = 200, description = "Canceled", body = inline(SuccessBody<Object>)),
              (status = 404, description = "NOT_FOUND", body = crate::http::envelope::ErrorBody),
              (status = 409, description = "SETTINGS_UPDATE_BLOCKED with `detail.guard` = `job_final`, `detail.status` \
and `detail.reason`: the job already ended (`COMPLETED`, `FAILED` or `CANCELED`). Audited; nothing changes.",
               body = crate::http::envelope::ErrorBody)))]
pub async fn cancel(
    State(state): State<AppState>,
    Path(id): Path<String>,
    guard: Sensitive,
) -> ApiResult<ApiResponse<Value>> {
    guard
        .run_bodyless(DATA_DOWNLOAD_CANCEL, Target::Value(id.clone()), |_caller| async move {
            let job = crate::jobs::downloads::cancel(&state.jobs, &id).await?;
            Ok(ApiResponse::ok(job_json(&job)))
        })
        .await
}

#[derive(Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
pub struct ImportQuery {
    /// The bars' symbol.
    #[param(value_type = Symbol)]
    pub symbol: String,
    /// `1d` (default) or `1m`.
    pub timeframe: Option<Timeframe>,
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct ImportResult {
    pub symbol: String,
    pub timeframe: Timeframe,
    /// Bars stored.
    pub bars: usize,
}

/// Stores bars from a CSV file (`text/csv`, up to 50 MiB): a header naming a date or timestamp
/// column (or leaving the first column unnamed, as pandas writes an index) and
/// `open,high,low,close,volume`. A bad row is `VALIDATION_ERROR` naming the line
/// (`detail.line`), and nothing of that file is stored.
#[utoipa::path(post, path = "/api/data/import", tag = "data", security(("bearer" = [])), params(ImportQuery),
    request_body(content = String, content_type = "text/csv"),
    responses((status = 200, description = "Stored", body = inline(SuccessBody<ImportResult>)),
              (status = 400, description = "VALIDATION_ERROR (detail.line)", body = crate::http::envelope::ErrorBody),
              (status = 413, description = "PAYLOAD_TOO_LARGE", body = crate::http::envelope::ErrorBody)))]
pub async fn import(
    State(state): State<AppState>,
    Query(q): Query<ImportQuery>,
    guard: Sensitive,
) -> ApiResult<ApiResponse<ImportResult>> {
    let target = Target::Value(q.symbol.clone());
    guard
        .run_csv(DATA_IMPORT, target, |_caller, body| async move {
            let symbol = Symbol::parse(&q.symbol).map_err(|e| ApiError::validation("symbol", e))?;
            let timeframe = q.timeframe.unwrap_or(Timeframe::Day);
            let bars = crate::jobs::downloads::import_bars(&state.db, &symbol, timeframe, &body).await?;
            Ok(ApiResponse::ok(ImportResult { symbol: symbol.to_string(), timeframe, bars }))
        })
        .await
}

/// The refusal of an import: a malformed row is named by its line
/// (`detail.line`).
impl From<ImportError> for ApiError {
    fn from(e: ImportError) -> ApiError {
        match e {
            ImportError::Refused(e) => e.into(),
            ImportError::BadRow(e) => ApiError::validation("body", e.to_string())
                .with_detail(serde_json::json!({"field": "body", "line": e.line, "reason": e.reason})),
        }
    }
}

/// The `download.updated` event and the list row share this shape.
pub fn job_json(j: &JobRecord) -> Value {
    let ts = |ms: i64| tradeops_core::time::format_ts(&from_epoch_ms(ms));
    serde_json::json!({
        "request_id": j.request_id, "symbol": j.symbol, "timeframe": j.timeframe,
        "start": ts(j.start), "end": ts(j.end), "status": j.status, "progress": j.progress, "bars": j.bars,
        "created_at": ts(j.created_at), "finished_at": j.finished_at.map(ts), "error": j.error,
    })
}
