//! Parameter sweeps: `POST /api/backtests/sweeps`, `GET /api/backtests/sweeps[/{sweep_id}]`,
//! `POST /api/backtests/sweeps/{sweep_id}/cancel`. Sweeps are durable jobs of
//! [`crate::jobs::sweeps`], which answers in plain types ([`SweepReport`] and what it holds);
//! their JSON shape and its schema ([`SweepView`] and the views it nests) are written here,
//! each converted from its job type with `From`.

use crate::http::auth::Caller;
use crate::http::envelope::{ApiResponse, SuccessBody};
use crate::http::error::{ApiError, ApiResult};
use crate::http::extract::{Path, Query};
use crate::http::guard::{Action, Sensitive, Target};
use crate::http::routes::backtests::BacktestQuery;
use crate::http::routes::list_limit;
use crate::http::runs::{Constraint, Objective, SweepRequest, WalkForward};
use crate::http::state::AppState;
use crate::jobs::sweeps::{
    BaselineRank, Metrics, MostChosen, RankedCombination, Span, SweepReport, WalkForwardReport, WindowBest,
    WindowReport, WindowRuns,
};
use axum::extract::State;
use axum::routing::{get, post};
use axum::Router;
use serde::Serialize;
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use tradeops_core::backtest::fills::FillModel;
use tradeops_core::time::format_ts;
use tradeops_core::Role;
use tradeops_store::JobStatus;

pub const SWEEP_RUN: Action = Action { name: "backtest.sweep", role: Role::Operator };
pub const SWEEP_CANCEL: Action = Action { name: "backtest.sweep_cancel", role: Role::Operator };

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/api/backtests/sweeps", post(sweep).get(sweeps))
        .route("/api/backtests/sweeps/{sweep_id}", get(one_sweep))
        .route("/api/backtests/sweeps/{sweep_id}/cancel", post(cancel_sweep))
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct SweepAccepted {
    pub sweep_id: String,
    #[schema(value_type = String)]
    pub status: JobStatus,
    /// Combinations queued (the grid's, or the sample's, less those skipped).
    pub combinations: i64,
}

/// Queues a parameter sweep: the strategy's parameters tried over a grid (or a random sample of
/// it) on one symbol and range, each combination a backtest as `POST /api/backtests/run` runs
/// one, in parts that run in parallel on every process that runs jobs. Follow it with
/// `GET /api/backtests/sweeps/{sweep_id}`: its results ranked by the `objective`.
#[utoipa::path(post, path = "/api/backtests/sweeps", tag = "backtests", security(("bearer" = [])),
    request_body = SweepRequest,
    responses((status = 202, description = "Queued", body = inline(SuccessBody<SweepAccepted>)),
              (status = 400, description = "VALIDATION_ERROR (fields named in detail: `grid.<parameter>`, `sample`, …)", body = crate::http::envelope::ErrorBody),
              (status = 404, description = "NOT_FOUND (no such symbol nor stored bars)", body = crate::http::envelope::ErrorBody)))]
pub async fn sweep(State(state): State<AppState>, guard: Sensitive) -> ApiResult<ApiResponse<SweepAccepted>> {
    guard
        .run(SWEEP_RUN, Target::BodyField("symbol"), |caller, req: SweepRequest| async move {
            let record = crate::jobs::sweeps::enqueue(&state.jobs, req.into(), &caller.principal.name).await?;
            Ok(ApiResponse::accepted(SweepAccepted {
                sweep_id: record.sweep_id,
                status: JobStatus::Queued,
                combinations: record.combinations,
            }))
        })
        .await
}

/// Sweeps, newest first, without their results.
#[utoipa::path(get, path = "/api/backtests/sweeps", tag = "backtests", security(("bearer" = [])), params(BacktestQuery),
    responses((status = 200, description = "Sweeps", body = inline(SuccessBody<Vec<SweepView>>))))]
pub async fn sweeps(
    State(state): State<AppState>,
    _caller: Caller,
    Query(q): Query<BacktestQuery>,
) -> ApiResult<ApiResponse<Vec<SweepView>>> {
    let repo: &dyn tradeops_store::SweepRepository = &state.db;
    let mut rows = Vec::new();
    for sweep in repo.sweeps(list_limit(q.limit)?).await? {
        rows.push(crate::jobs::sweeps::view(&state.jobs, &sweep, false).await?.into());
    }
    Ok(ApiResponse::list(rows))
}

/// One sweep: its request, `status` and `progress` (read from its parts), `completed` and
/// `skipped` combinations, and every completed combination's metrics (`results`), ranked by the
/// objective, highest first — those breaking the constraint after the others
/// (`meets_constraint` false) — with the `best`.
#[utoipa::path(get, path = "/api/backtests/sweeps/{sweep_id}", tag = "backtests", security(("bearer" = [])),
    params(("sweep_id" = String, Path, description = "Sweep id")),
    responses((status = 200, description = "Sweep", body = inline(SuccessBody<SweepView>)),
              (status = 404, description = "NOT_FOUND", body = crate::http::envelope::ErrorBody)))]
pub async fn one_sweep(
    State(state): State<AppState>,
    _caller: Caller,
    Path(id): Path<String>,
) -> ApiResult<ApiResponse<SweepView>> {
    let repo: &dyn tradeops_store::SweepRepository = &state.db;
    let sweep = repo.sweep(&id).await?.ok_or_else(|| ApiError::not_found(format!("No sweep {id:?}")))?;
    Ok(ApiResponse::ok(crate::jobs::sweeps::view(&state.jobs, &sweep, true).await?.into()))
}

/// Cancels a sweep: its queued parts at once, running ones at their next progress point
/// (combinations already completed keep their results). Answers the sweep as
/// `GET /api/backtests/sweeps/{sweep_id}` does.
#[utoipa::path(post, path = "/api/backtests/sweeps/{sweep_id}/cancel", tag = "backtests", security(("bearer" = [])),
    params(("sweep_id" = String, Path, description = "Sweep id")),
    responses((status = 200, description = "Canceled", body = inline(SuccessBody<SweepView>)),
              (status = 404, description = "NOT_FOUND", body = crate::http::envelope::ErrorBody),
              (status = 409, description = "SETTINGS_UPDATE_BLOCKED with `detail.guard` = `job_final`: every part had already ended. Audited; nothing changes.",
               body = crate::http::envelope::ErrorBody)))]
pub async fn cancel_sweep(
    State(state): State<AppState>,
    Path(id): Path<String>,
    guard: Sensitive,
) -> ApiResult<ApiResponse<SweepView>> {
    guard
        .run_bodyless(SWEEP_CANCEL, Target::Value(id.clone()), |_caller| async move {
            crate::jobs::sweeps::cancel(&state.jobs, &id).await?;
            let repo: &dyn tradeops_store::SweepRepository = &state.db;
            let sweep = repo.sweep(&id).await?.ok_or_else(|| ApiError::not_found(format!("No sweep {id:?}")))?;
            Ok(ApiResponse::ok(crate::jobs::sweeps::view(&state.jobs, &sweep, true).await?.into()))
        })
        .await
}

/// A parameter sweep as `GET /api/backtests/sweeps/{sweep_id}` returns it (the list leaves out
/// `results` and `best`).
#[derive(Serialize, utoipa::ToSchema)]
pub struct SweepView {
    pub sweep_id: String,
    /// `QUEUED`, `RUNNING`, `COMPLETED`, `FAILED` or `CANCELED`.
    #[schema(value_type = String)]
    pub status: JobStatus,
    /// 0..1.
    pub progress: f64,
    pub strategy_id: String,
    pub symbol: String,
    pub timeframe: String,
    pub start: String,
    pub end: String,
    #[schema(value_type = Object)]
    pub grid: Map<String, Value>,
    /// Dollars.
    pub initial_cash: f64,
    pub commission_rate: f64,
    pub slippage_bps: f64,
    pub fill: FillModel,
    #[schema(value_type = Option<Object>)]
    pub settings: Option<Map<String, Value>>,
    /// The walk-forward as asked; with the results of a walk-forward sweep, its report.
    pub walk_forward: Option<SweepWalkForward>,
    pub sample: Option<u32>,
    pub seed: u64,
    pub objective: Objective,
    pub constraint: Constraint,
    /// Combinations queued.
    pub combinations: i64,
    /// Combinations completed.
    pub completed: i64,
    /// Combinations the strategy refused (not run).
    pub skipped: i64,
    /// Parts the combinations were split into (each a job).
    pub parts: i64,
    pub error: Option<String>,
    pub requested_by: String,
    pub created_at: String,
    /// When the first part began running; null while every part is queued.
    pub started_at: Option<String>,
    /// When the last part ended, once the sweep is `COMPLETED`, `FAILED` or `CANCELED`; null
    /// before. With `created_at`, the service's own time for the sweep, whoever watches it.
    pub finished_at: Option<String>,
    /// With the results: where the strategy's current parameters rank (null when they did not
    /// run or have not completed).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<SweepBaseline>)]
    pub baseline: Option<Option<SweepBaseline>>,
    /// The first ranked combination that meets the constraint and has the objective defined.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<SweepCombination>)]
    pub best: Option<Option<SweepCombination>>,
    /// Each completed combination, ranked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub results: Option<Vec<SweepCombination>>,
}

impl From<SweepReport> for SweepView {
    fn from(r: SweepReport) -> SweepView {
        let results = r.results;
        let walk_forward = match results.as_ref().and_then(|x| x.walk_forward.clone()) {
            Some(report) => Some(SweepWalkForward::Report(report.into())),
            None => r.walk_forward.map(|asked| SweepWalkForward::Request(asked.into())),
        };
        let (baseline, best, ranked) = match results {
            Some(x) => (
                Some(x.baseline.map(SweepBaseline::from)),
                Some(x.best.map(SweepCombination::from)),
                Some(x.ranked.into_iter().map(SweepCombination::from).collect()),
            ),
            None => (None, None, None),
        };
        SweepView {
            sweep_id: r.sweep_id,
            status: r.status,
            progress: r.progress,
            strategy_id: r.strategy_id,
            symbol: r.symbol,
            timeframe: r.timeframe.as_str().to_string(),
            start: format_ts(&r.start),
            end: format_ts(&r.end),
            grid: r.grid,
            initial_cash: r.initial_cash,
            commission_rate: r.commission_rate,
            slippage_bps: r.slippage_bps,
            fill: r.fill,
            settings: r.settings,
            walk_forward,
            sample: r.sample,
            seed: r.seed,
            objective: r.objective.into(),
            constraint: r.constraint.into(),
            combinations: r.combinations,
            completed: r.completed as i64,
            skipped: r.skipped as i64,
            parts: r.parts as i64,
            error: r.error,
            requested_by: r.requested_by,
            created_at: format_ts(&r.created_at),
            started_at: r.started_at.as_ref().map(format_ts),
            finished_at: r.finished_at.as_ref().map(format_ts),
            baseline,
            best,
            results: ranked,
        }
    }
}

/// A sweep's `walk_forward`: as asked, or — with the results of a walk-forward sweep — its
/// report.
#[derive(Serialize, utoipa::ToSchema)]
#[serde(untagged)]
pub enum SweepWalkForward {
    Report(SweepWalkForwardReport),
    Request(WalkForward),
}

/// What a sweep keeps of a run (of the whole range, or of a walk-forward window's part).
#[derive(Serialize, utoipa::ToSchema)]
pub struct SweepMetrics {
    pub total_return: f64,
    pub sharpe_ratio: Option<f64>,
    pub max_drawdown: f64,
    pub win_rate: Option<f64>,
    pub profit_factor: Option<f64>,
    pub win_loss_ratio: Option<f64>,
    pub trade_count: u64,
    /// Dollars.
    pub expectancy: Option<f64>,
    /// Dollars.
    pub final_equity: f64,
}

impl From<Metrics> for SweepMetrics {
    fn from(m: Metrics) -> SweepMetrics {
        SweepMetrics {
            total_return: m.total_return,
            sharpe_ratio: m.sharpe_ratio,
            max_drawdown: m.max_drawdown,
            win_rate: m.win_rate,
            profit_factor: m.profit_factor,
            win_loss_ratio: m.win_loss_ratio,
            trade_count: m.trade_count,
            expectancy: m.expectancy,
            final_equity: m.final_equity,
        }
    }
}

/// A completed combination as ranked: its metrics over the whole range, its `parameters`,
/// whether it meets the constraint and whether it is the strategy's current parameters.
#[derive(Serialize, utoipa::ToSchema)]
pub struct SweepCombination {
    pub total_return: f64,
    pub sharpe_ratio: Option<f64>,
    pub max_drawdown: f64,
    pub win_rate: Option<f64>,
    pub profit_factor: Option<f64>,
    pub win_loss_ratio: Option<f64>,
    pub trade_count: u64,
    /// Dollars.
    pub expectancy: Option<f64>,
    /// Dollars.
    pub final_equity: f64,
    #[schema(value_type = Object)]
    pub parameters: BTreeMap<String, f64>,
    pub meets_constraint: bool,
    pub baseline: bool,
}

impl From<RankedCombination> for SweepCombination {
    fn from(r: RankedCombination) -> SweepCombination {
        let m = r.metrics;
        SweepCombination {
            total_return: m.total_return,
            sharpe_ratio: m.sharpe_ratio,
            max_drawdown: m.max_drawdown,
            win_rate: m.win_rate,
            profit_factor: m.profit_factor,
            win_loss_ratio: m.win_loss_ratio,
            trade_count: m.trade_count,
            expectancy: m.expectancy,
            final_equity: m.final_equity,
            parameters: r.parameters,
            meets_constraint: r.meets_constraint,
            baseline: r.baseline,
        }
    }
}

/// Where the strategy's current parameters rank among the combinations.
#[derive(Serialize, utoipa::ToSchema)]
pub struct SweepBaseline {
    #[schema(value_type = Object)]
    pub parameters: BTreeMap<String, f64>,
    /// 1 is first.
    pub rank: usize,
    /// Whether they are a point of the grid (else run beside it).
    pub in_grid: bool,
}

impl From<BaselineRank> for SweepBaseline {
    fn from(b: BaselineRank) -> SweepBaseline {
        SweepBaseline { parameters: b.parameters, rank: b.rank, in_grid: b.in_grid }
    }
}

/// A walk-forward sweep's report: per window the in-sample best and how it did out of sample
/// beside the baseline, then the whole.
#[derive(Serialize, utoipa::ToSchema)]
pub struct SweepWalkForwardReport {
    pub windows: usize,
    pub in_sample_fraction: f64,
    pub anchored: bool,
    /// Every part has run (before, the figures cover the combinations run so far).
    pub complete: bool,
    pub objective: Objective,
    pub in_sample_objective_mean: Option<f64>,
    pub out_of_sample_objective_mean: Option<f64>,
    /// Out-of-sample over in-sample objective (returns per day); null for `final_equity`.
    pub efficiency: Option<f64>,
    /// The windows' bests' out-of-sample parts chained.
    pub out_of_sample_return: Option<f64>,
    /// The baseline's out-of-sample parts chained over the same windows.
    pub baseline_out_of_sample_return: Option<f64>,
    pub beat_baseline: SweepBeatBaseline,
    pub most_chosen: Option<SweepMostChosen>,
    pub by_window: Vec<SweepWindow>,
}

impl From<WalkForwardReport> for SweepWalkForwardReport {
    fn from(w: WalkForwardReport) -> SweepWalkForwardReport {
        SweepWalkForwardReport {
            windows: w.windows,
            in_sample_fraction: w.in_sample_fraction,
            anchored: w.anchored,
            complete: w.complete,
            objective: w.objective.into(),
            in_sample_objective_mean: w.in_sample_objective_mean,
            out_of_sample_objective_mean: w.out_of_sample_objective_mean,
            efficiency: w.efficiency,
            out_of_sample_return: w.out_of_sample_return,
            baseline_out_of_sample_return: w.baseline_out_of_sample_return,
            beat_baseline: SweepBeatBaseline {
                windows: w.beat_baseline.windows,
                of: w.beat_baseline.of,
                confidence: w.beat_baseline.confidence,
            },
            most_chosen: w.most_chosen.map(SweepMostChosen::from),
            by_window: w.by_window.into_iter().map(SweepWindow::from).collect(),
        }
    }
}

/// In how many windows the in-sample best beat the baseline out of sample, of how many
/// compared, with the sign test's confidence.
#[derive(Serialize, utoipa::ToSchema)]
pub struct SweepBeatBaseline {
    pub windows: u64,
    pub of: u64,
    pub confidence: f64,
}

/// The parameters most often best in sample, and in how many windows.
#[derive(Serialize, utoipa::ToSchema)]
pub struct SweepMostChosen {
    #[schema(value_type = Object)]
    pub parameters: BTreeMap<String, f64>,
    pub windows: usize,
}

impl From<MostChosen> for SweepMostChosen {
    fn from(m: MostChosen) -> SweepMostChosen {
        SweepMostChosen { parameters: m.parameters, windows: m.windows }
    }
}

/// One walk-forward window.
#[derive(Serialize, utoipa::ToSchema)]
pub struct SweepWindow {
    /// 1 is first.
    pub window: usize,
    pub in_sample: SweepSpan,
    pub out_of_sample: SweepSpan,
    pub best: Option<SweepWindowBest>,
    pub baseline: Option<SweepWindowRuns>,
    /// Whether the best beat the baseline out of sample (null: not compared).
    pub beat_baseline: Option<bool>,
}

impl From<WindowReport> for SweepWindow {
    fn from(w: WindowReport) -> SweepWindow {
        SweepWindow {
            window: w.window,
            in_sample: w.in_sample.into(),
            out_of_sample: w.out_of_sample.into(),
            best: w.best.map(SweepWindowBest::from),
            baseline: w.baseline.map(SweepWindowRuns::from),
            beat_baseline: w.beat_baseline,
        }
    }
}

/// A part of a window: `[start, end)`, RFC 3339.
#[derive(Serialize, utoipa::ToSchema)]
pub struct SweepSpan {
    pub start: String,
    pub end: String,
}

impl From<Span> for SweepSpan {
    fn from(s: Span) -> SweepSpan {
        SweepSpan { start: format_ts(&s.start), end: format_ts(&s.end) }
    }
}

/// A window's in-sample best and how it did out of sample.
#[derive(Serialize, utoipa::ToSchema)]
pub struct SweepWindowBest {
    #[schema(value_type = Object)]
    pub parameters: BTreeMap<String, f64>,
    pub in_sample: Option<SweepMetrics>,
    pub out_of_sample: Option<SweepMetrics>,
    /// Its rank among the combinations out of sample.
    pub out_of_sample_rank: Option<usize>,
    /// How many combinations were ranked out of sample.
    pub ranked_out_of_sample: usize,
}

impl From<WindowBest> for SweepWindowBest {
    fn from(b: WindowBest) -> SweepWindowBest {
        SweepWindowBest {
            parameters: b.parameters,
            in_sample: b.in_sample.map(SweepMetrics::from),
            out_of_sample: b.out_of_sample.map(SweepMetrics::from),
            out_of_sample_rank: b.out_of_sample_rank,
            ranked_out_of_sample: b.ranked_out_of_sample,
        }
    }
}

/// A combination's runs over a window's two parts (null: no bar in that part).
#[derive(Serialize, utoipa::ToSchema)]
pub struct SweepWindowRuns {
    pub in_sample: Option<SweepMetrics>,
    pub out_of_sample: Option<SweepMetrics>,
}

impl From<WindowRuns> for SweepWindowRuns {
    fn from(w: WindowRuns) -> SweepWindowRuns {
        SweepWindowRuns {
            in_sample: w.in_sample.map(SweepMetrics::from),
            out_of_sample: w.out_of_sample.map(SweepMetrics::from),
        }
    }
}
