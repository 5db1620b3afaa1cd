//! Durable backtest runs (`POST /api/backtests/run`), jobs of kind [`JobKind::Backtest`]: a
//! row `QUEUED → RUNNING` (with `progress`) `→ COMPLETED` (with the result) or `FAILED`, or
//! `CANCELED`. This module owns what every backtest row shares — the request's rules, queueing
//! ([`queue`]), following a run under its lease ([`follow`]) and cancelling — and the single
//! run itself ([`compute`]): bars come from the database (the trading days missing from it
//! downloaded from the data broker first) and go through `tradeops_core::backtest::run` — the
//! live engine with a manual clock. Desk replays ([`crate::jobs::desk`]) build on it; the worker
//! that runs both kinds is [`crate::jobs::backtest_worker`].

use crate::domain::{DomainError, DomainResult};
use crate::jobs::{CancelError, Halt, Jobs, Leases};
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use tradeops_core::backtest::{self, coverage, fills::FillModel, BacktestSpec, BarHistory, History};
use tradeops_core::calendar::{ny_instant, NyDay};
use tradeops_core::market::Timeframe;
use tradeops_core::time::{format_ts, from_epoch_ms, to_epoch_ms};
use tradeops_core::{Settings, Symbol, Timestamp};
use tradeops_store::{BacktestRecord, BacktestRepository, DataRepository, JobKind, JobStatus};

/// The kind of a single run.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq, Eq, utoipa::ToSchema)]
pub enum SingleKind {
    #[serde(rename = "single")]
    Single,
}

/// `POST /api/backtests/run` (or `POST /api/backtests`): a run of one strategy on one symbol.
#[derive(Clone, Debug, Deserialize, Serialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BacktestRequest {
    /// `single` (the default): one strategy on one symbol (`desk` is a whole-desk replay's).
    #[schema(nullable = false)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<SingleKind>,
    /// A strategy of `GET /api/strategies`.
    pub strategy_id: String,
    pub symbol: Symbol,
    /// RFC 3339: bars starting at or after it.
    #[serde(with = "tradeops_core::time::serde_ts")]
    #[schema(value_type = String, format = DateTime)]
    pub start: Timestamp,
    /// RFC 3339: bars starting before it.
    #[serde(with = "tradeops_core::time::serde_ts")]
    #[schema(value_type = String, format = DateTime)]
    pub end: Timestamp,
    /// `1m` (default) or `1d`.
    #[schema(nullable = false)]
    pub timeframe: Option<Timeframe>,
    /// Strategy parameters (see `GET /api/strategies`); defaults fill what is left out.
    #[schema(value_type = Option<Object>, nullable = false)]
    pub parameters: Option<Map<String, Value>>,
    /// Dollars (default 100,000).
    #[schema(value_type = Option<f64>, nullable = false, minimum = 1, maximum = 1000000000000.0)]
    #[serde(default, with = "rust_decimal::serde::float_option")]
    pub initial_cash: Option<Decimal>,
    /// Fraction of traded value charged on every fill (default 0).
    #[schema(value_type = Option<f64>, nullable = false, minimum = 0, maximum = 0.1)]
    #[serde(default, with = "rust_decimal::serde::float_option")]
    pub commission_rate: Option<Decimal>,
    /// Basis points every fill moves against the order (default 0).
    #[schema(value_type = Option<f64>, nullable = false, minimum = 0, maximum = 1000)]
    #[serde(default, with = "rust_decimal::serde::float_option")]
    pub slippage_bps: Option<Decimal>,
    /// `NEXT_OPEN` (default) or `CLOSE`.
    #[schema(nullable = false)]
    pub fill: Option<FillModel>,
    /// Overrides of the effective settings for this run only, in the shape of a
    /// `PUT /api/settings` body (for example `{"risk_controls": {"max_daily_loss": 5000}}`),
    /// validated the same way. The run otherwise trades under the operator's settings — the same
    /// risk gate as live.
    #[schema(value_type = Option<Object>, nullable = false)]
    pub settings: Option<Map<String, Value>>,
}

/// A validated run, as stored in the row's `request` (a sweep stores one too: its first
/// combination's, every other field shared).
#[derive(Clone, Debug, Deserialize, Serialize)]
pub(crate) struct Stored {
    pub(crate) strategy_id: String,
    pub(crate) strategy_version: String,
    pub(crate) symbol: String,
    #[serde(with = "tradeops_core::time::serde_ts")]
    pub(crate) start: Timestamp,
    #[serde(with = "tradeops_core::time::serde_ts")]
    pub(crate) end: Timestamp,
    pub(crate) timeframe: Timeframe,
    pub(crate) parameters: std::collections::BTreeMap<String, f64>,
    #[serde(with = "rust_decimal::serde::str")]
    pub(crate) initial_cash: Decimal,
    #[serde(with = "rust_decimal::serde::str")]
    pub(crate) commission_rate: Decimal,
    #[serde(with = "rust_decimal::serde::str")]
    pub(crate) slippage_bps: Decimal,
    pub(crate) fill: FillModel,
    pub(crate) settings: Option<Map<String, Value>>,
    /// The settings the run trades under (the operator's at the request, overrides applied).
    pub(crate) effective_settings: Value,
}

/// What `initial_cash` accepts, in the operator's words (the HTTP field table quotes it too).
pub const INITIAL_CASH_RULE: &str = "an amount of dollars from 1 to 1,000,000,000,000";
/// What `commission_rate` accepts.
pub const COMMISSION_RATE_RULE: &str = "a fraction of the traded value from 0 to 0.1";
/// What `slippage_bps` accepts.
pub const SLIPPAGE_BPS_RULE: &str = "basis points from 0 to 1,000";

/// `value` when within `min..=max`; otherwise `field` is refused with what it accepts.
pub(crate) fn bounded(
    field: &'static str,
    rule: &str,
    value: Decimal,
    min: Decimal,
    max: Decimal,
) -> DomainResult<Decimal> {
    if value < min || value > max {
        return Err(DomainError::validation(field, format!("must be {rule}")));
    }
    Ok(value)
}

/// The settings a run trades under: the operator's now, with the request's overrides (refused
/// field by field, as `settings.<field>`).
pub(crate) fn effective_settings(jobs: &Jobs, overrides: Option<&Map<String, Value>>) -> DomainResult<Settings> {
    let current = jobs.current_settings();
    let Some(patch) = overrides else { return Ok((*current).clone()) };
    let applied = current.apply_patch(&Value::Object(patch.clone())).map_err(|errors| {
        DomainError::Validation(
            errors
                .into_iter()
                .map(|mut e| {
                    e.field = format!("settings.{}", e.field);
                    e
                })
                .collect(),
        )
    })?;
    Ok(applied.settings)
}

/// A run's request checked — settings overrides, parameters, range, amounts, the symbol — and
/// normalised as it is stored.
pub(crate) async fn validate(jobs: &Jobs, req: &BacktestRequest) -> DomainResult<Stored> {
    let timeframe = req.timeframe.unwrap_or(Timeframe::Minute);
    let settings = effective_settings(jobs, req.settings.as_ref())?;
    let empty = Map::new();
    let parameters = backtest::validate_parameters(
        &req.strategy_id,
        timeframe,
        req.parameters.as_ref().unwrap_or(&empty),
        &settings,
    )
    .map_err(DomainError::Validation)?;
    crate::jobs::downloads::check_range(jobs.market_clock.now(), timeframe, req.start, req.end, "backtest")?;
    let initial_cash = bounded(
        "initial_cash",
        INITIAL_CASH_RULE,
        req.initial_cash.unwrap_or(Decimal::from(100_000)),
        Decimal::ONE,
        Decimal::from(1_000_000_000_000u64),
    )?;
    let commission_rate = bounded(
        "commission_rate",
        COMMISSION_RATE_RULE,
        req.commission_rate.unwrap_or_default(),
        Decimal::ZERO,
        Decimal::new(1, 1),
    )?;
    let slippage_bps = bounded(
        "slippage_bps",
        SLIPPAGE_BPS_RULE,
        req.slippage_bps.unwrap_or_default(),
        Decimal::ZERO,
        Decimal::from(1000),
    )?;
    let known = jobs.market.instrument(&req.symbol).is_some();
    let repo: &dyn DataRepository = &jobs.db;
    if !known && !repo.has_bars(&req.symbol, timeframe.as_str(), to_epoch_ms(&req.start), to_epoch_ms(&req.end)).await?
    {
        return Err(DomainError::NotFound(format!(
            "{} is not a symbol of the {} market and no {} bars of it are stored in the range",
            req.symbol,
            jobs.market.name(),
            timeframe.as_str()
        )));
    }
    let version = tradeops_core::strategy::make(&req.strategy_id).map(|s| s.version().to_string()).unwrap_or_default();
    let stored = Stored {
        strategy_id: req.strategy_id.clone(),
        strategy_version: version,
        symbol: req.symbol.to_string(),
        start: req.start,
        end: req.end,
        timeframe,
        parameters,
        initial_cash: initial_cash.normalize(),
        commission_rate: commission_rate.normalize(),
        slippage_bps: slippage_bps.normalize(),
        fill: req.fill.unwrap_or_default(),
        settings: req.settings.clone(),
        effective_settings: settings.to_json(),
    };
    Ok(stored)
}

/// Validates and queues a run.
pub async fn enqueue(jobs: &Jobs, req: BacktestRequest, actor: &str) -> DomainResult<BacktestRecord> {
    let stored = validate(jobs, &req).await?;
    let request = serde_json::to_string(&stored).map_err(DomainError::internal)?;
    queue(jobs, &stored.strategy_id, &stored.symbol, request, actor).await
}

/// Stores a run (a single one's or a desk replay's validated `request`) queued, announces it and
/// wakes the workers.
pub(crate) async fn queue(
    jobs: &Jobs,
    strategy_id: &str,
    symbol: &str,
    request: String,
    actor: &str,
) -> DomainResult<BacktestRecord> {
    let record = BacktestRecord {
        backtest_id: format!("bt-{}", uuid::Uuid::new_v4().simple()),
        strategy_id: strategy_id.to_string(),
        symbol: symbol.to_string(),
        status: JobStatus::Queued,
        progress: 0.0,
        request,
        result: None,
        error: None,
        requested_by: actor.to_string(),
        created_at: to_epoch_ms(&jobs.clock.now()),
        started_at: None,
        finished_at: None,
    };
    let runs: &dyn BacktestRepository = &jobs.db;
    runs.insert_backtest(&record).await?;
    publish(jobs, &record);
    jobs.announce(JobKind::Backtest).await;
    Ok(record)
}

/// Announces a run as it is now (stored).
pub(crate) fn publish(jobs: &Jobs, r: &BacktestRecord) {
    jobs.events.publish(crate::events::Event::BacktestUpdated(r.clone()));
}

/// Cancels a run (see [`crate::jobs::cancel`]) and announces it; the run as it is now.
pub async fn cancel(jobs: &Jobs, id: &str) -> DomainResult<BacktestRecord> {
    let refused = |e: CancelError| e.refusal("backtest", id);
    crate::jobs::cancel(&jobs.db, jobs.clock.as_ref(), JobKind::Backtest, id).await.map_err(refused)?;
    let repo: &dyn BacktestRepository = &jobs.db;
    let run = repo.backtest(id).await?.ok_or(CancelError::NotFound).map_err(refused)?;
    publish(jobs, &run);
    Ok(run)
}

/// Runs a single run (a desk replay is [`crate::jobs::desk::compute`]'s): its result, or why it
/// stopped.
pub(crate) async fn compute(jobs: &Jobs, leases: &Leases, run: &mut BacktestRecord) -> Result<Value, Halt> {
    let stored: Stored = serde_json::from_str(&run.request).map_err(|e| format!("unreadable request: {e}"))?;
    let Prepared { settings, symbol, bars, calendar } =
        prepare(jobs, &stored, &format!("backtest {}", run.backtest_id)).await?;
    let history = history_of(jobs, &symbol, calendar, &bars, stored.timeframe);
    let spec = BacktestSpec {
        strategy_id: stored.strategy_id.clone(),
        symbol,
        timeframe: stored.timeframe,
        start: stored.start,
        parameters: stored.parameters.clone(),
        initial_cash: stored.initial_cash,
        commission_rate: stored.commission_rate,
        slippage_bps: stored.slippage_bps,
        fill: stored.fill,
    };
    let (progress_tx, progress_rx) = tokio::sync::watch::channel(0.0_f64);
    let task = tokio::task::spawn_blocking(move || {
        let mut history = history;
        backtest::run(&spec, &settings, &bars, history.as_mut(), &mut |p| {
            progress_tx.send_if_modified(|old| {
                // Every 5%: enough for a progress bar, few writes.
                let changed = p >= *old + 0.05 || (p >= 1.0 && *old < 1.0);
                if changed {
                    *old = p;
                }
                changed
            });
        })
    });
    let output = follow(jobs, leases, run, task, progress_rx).await?;
    Ok(result_json(&output))
}

/// Waits for a run's `task`, writing its progress (as `progress` hears it) under the lease and
/// announcing it; a run canceled or taken over meanwhile stops here (its task is abandoned:
/// nothing of it is written).
pub(crate) async fn follow<T, E: std::fmt::Display>(
    jobs: &Jobs,
    leases: &Leases,
    run: &mut BacktestRecord,
    task: tokio::task::JoinHandle<Result<T, E>>,
    mut progress: tokio::sync::watch::Receiver<f64>,
) -> Result<T, Halt> {
    tokio::pin!(task);
    let repo: &dyn BacktestRepository = &jobs.db;
    loop {
        tokio::select! {
            done = &mut task => {
                return done.map_err(|e| format!("the run panicked: {e}"))?.map_err(|e| e.to_string().into());
            }
            changed = progress.changed() => {
                if changed.is_ok() {
                    run.progress = (*progress.borrow_and_update()).min(0.99);
                    match repo.update_leased_backtest(run, &leases.lease()).await {
                        Ok(true) => publish(jobs, run),
                        Ok(false) => {
                            task.abort();
                            return Err(Halt::Lost);
                        }
                        Err(_) => {}
                    }
                }
            }
        }
    }
}

/// What a run trades on: its settings, symbol and bars, and the calendar its history follows.
pub(crate) struct Prepared {
    pub(crate) settings: Settings,
    pub(crate) symbol: Symbol,
    pub(crate) bars: Vec<tradeops_core::market::Bar>,
    pub(crate) calendar: tradeops_core::calendar::MarketCalendar,
}

/// Reads a stored run's settings and bars; trading days of its range with no stored bar that no
/// completed download already asked for are downloaded first (`by` names who asked), then the
/// bars read again: a run never quietly covers part of its range.
pub(crate) async fn prepare(jobs: &Jobs, stored: &Stored, by: &str) -> Result<Prepared, Halt> {
    let settings = Settings::from_json(&stored.effective_settings)
        .map_err(|e| format!("unreadable settings: {}", e.first().map(|f| f.reason.as_str()).unwrap_or("")))?;
    let symbol = Symbol::parse(&stored.symbol).map_err(|e| format!("bad symbol: {e}"))?;
    let (start, end) = (to_epoch_ms(&stored.start), to_epoch_ms(&stored.end));
    let data: &dyn DataRepository = &jobs.db;
    let tf = stored.timeframe.as_str();
    // Minute bars from the start of the first date: its earlier volume counts toward relative
    // volume (the strategy still starts at `start`).
    let from = match stored.timeframe {
        Timeframe::Minute => ny_instant(NyDay::default().date_of(stored.start), (0, 0)).min(stored.start),
        Timeframe::Day => stored.start,
    };
    let calendar = tradeops_core::calendar::MarketCalendar::new(settings.runtime.market_calendar);
    let from_ms = to_epoch_ms(&from);
    let mut bars = data.bars(&symbol, tf, from_ms, end).await.map_err(|e| e.to_string())?;
    if jobs.market.instrument(&symbol).is_some() {
        let downloaded = data.downloaded_ranges(&symbol, tf, from_ms, end).await.map_err(|e| e.to_string())?;
        let downloaded: Vec<_> = downloaded.into_iter().map(|(a, b)| (from_epoch_ms(a), from_epoch_ms(b))).collect();
        if let Some((a, b)) = coverage::missing_span(&bars, &downloaded, calendar, from, stored.end) {
            crate::jobs::downloads::download_now(jobs, &symbol, stored.timeframe, a, b, by)
                .await
                .map_err(|e| format!("downloading the missing bars failed: {e}"))?;
            bars = data.bars(&symbol, tf, from_ms, end).await.map_err(|e| e.to_string())?;
        }
    }
    if !bars.iter().any(|b| to_epoch_ms(&b.start) >= start) {
        return Err(format!("no {tf} bars of {symbol} are stored in the range").into());
    }
    Ok(Prepared { settings, symbol, bars, calendar })
}

/// A run's history of `symbol` (float, sector, earlier days): the market's, else the imported
/// reference data over its bars.
pub(crate) fn history_of(
    jobs: &Jobs,
    symbol: &Symbol,
    calendar: tradeops_core::calendar::MarketCalendar,
    bars: &[tradeops_core::market::Bar],
    timeframe: Timeframe,
) -> Box<dyn History + Send> {
    match jobs.market.history(symbol, calendar) {
        Some(h) => h,
        None => jobs.reference.history(symbol, Box::new(BarHistory::new(bars, timeframe))),
    }
}

/// The stored result: every metric of CONTRACT §4, the trades (rows as `GET /api/trades`) and
/// the equity curve, plus what explains them.
pub fn result_json(o: &backtest::BacktestOutput) -> Value {
    let m = &o.metrics;
    let trades: Vec<Value> = o.trades.iter().map(crate::domain::trades::trade_row).collect();
    let curve: Vec<Value> = o
        .equity_curve
        .iter()
        .map(|p| json!({"timestamp": format_ts(&p.timestamp), "equity": backtest::dollars(p.equity)}))
        .collect();
    json!({
        "total_return": m.total_return,
        "sharpe_ratio": m.sharpe_ratio,
        "max_drawdown": m.max_drawdown,
        "win_loss_ratio": m.win_loss_ratio,
        "win_rate": m.win_rate,
        "profit_factor": m.profit_factor,
        "trade_count": m.trade_count,
        "expectancy": m.expectancy.map(backtest::dollars),
        "gross_profit": backtest::dollars(m.gross_profit),
        "gross_loss": backtest::dollars(m.gross_loss),
        "sharpe_days": m.days,
        "final_equity": backtest::dollars(o.final_equity),
        "bars": o.bars,
        "orders": o.orders,
        "refusals": o.refusals,
        "trades": trades,
        "equity_curve": curve,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_amount_out_of_bounds_is_refused_with_what_the_field_accepts() {
        let (one, ten) = (Decimal::ONE, Decimal::from(10));
        let refused = bounded("initial_cash", INITIAL_CASH_RULE, Decimal::ZERO, one, ten).unwrap_err();
        assert_eq!(refused.to_string(), "initial_cash must be an amount of dollars from 1 to 1,000,000,000,000");
        assert!(matches!(&refused, DomainError::Validation(fields) if fields[0].field == "initial_cash"));
        assert!(bounded("slippage_bps", SLIPPAGE_BPS_RULE, Decimal::from(11), one, ten).is_err());
        assert_eq!(bounded("slippage_bps", SLIPPAGE_BPS_RULE, ten, one, ten).unwrap(), ten, "bounds included");
    }
}
