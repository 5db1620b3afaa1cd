//! What every run shares, whichever kind it is — a single backtest
//! ([`crate::jobs::backtests`]), a sweep's combinations ([`crate::jobs::sweeps`]) or a desk
//! replay ([`crate::jobs::desk`]): the fields a run is asked with ([`RunRequest`]), their rules
//! and their validated, stored form ([`StoredRun`], with [`validate`], [`bounded`] and
//! [`effective_settings`]); queueing a backtest row ([`queue`]) and following a running one under
//! its lease ([`follow`]); and the steps before a run computes: [`ensure_bars`] (the trading days
//! of its range missing from the database downloaded from the data broker, an explicit step of
//! the caller rather than a side effect of reading), then [`prepare`] (its settings, symbol,
//! bars and calendar) and [`history_of`]. Nothing here knows a run's result or HTTP.

use crate::domain::{DomainError, DomainResult};
use crate::jobs::{Halt, Jobs, Leases};
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use tradeops_core::backtest::{self, coverage, fills::FillModel, BarHistory, History};
use tradeops_core::calendar::{ny_instant, MarketCalendar, NyDay};
use tradeops_core::market::{Bar, Timeframe};
use tradeops_core::time::{from_epoch_ms, to_epoch_ms};
use tradeops_core::{Settings, Symbol, Timestamp};
use tradeops_store::{BacktestRecord, BacktestRepository, DataRepository, JobKind, JobStatus};

/// The fields every run is asked with, whatever else its request carries (a backtest's
/// `kind`, a sweep's grid): what [`validate`] checks and normalises into a [`StoredRun`].
#[derive(Clone, Debug)]
pub struct RunRequest {
    pub strategy_id: String,
    pub symbol: Symbol,
    pub start: Timestamp,
    pub end: Timestamp,
    pub timeframe: Option<Timeframe>,
    pub parameters: Option<Map<String, Value>>,
    pub initial_cash: Option<Decimal>,
    pub commission_rate: Option<Decimal>,
    pub slippage_bps: Option<Decimal>,
    pub fill: Option<FillModel>,
    pub settings: Option<Map<String, Value>>,
}

/// A validated run, as stored in the row's `request` (a sweep stores one too: its first
/// combination's, every other field shared).
#[derive(Clone, Debug, Deserialize, Serialize)]
pub(crate) struct StoredRun {
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

/// A run's starting cash: $100,000 unless asked, from $1 to $1,000,000,000,000 (every kind of
/// run alike).
pub(crate) fn initial_cash(asked: Option<Decimal>) -> DomainResult<Decimal> {
    bounded(
        "initial_cash",
        INITIAL_CASH_RULE,
        asked.unwrap_or(Decimal::from(100_000)),
        Decimal::ONE,
        Decimal::from(1_000_000_000_000u64),
    )
}

/// A run's request checked — settings overrides, parameters, range, amounts, the symbol — and
/// normalised as it is stored.
pub(crate) async fn validate(jobs: &Jobs, req: &RunRequest) -> DomainResult<StoredRun> {
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
    let initial_cash = initial_cash(req.initial_cash)?;
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
    let stored = StoredRun {
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
    pub(crate) bars: Vec<Bar>,
    pub(crate) calendar: MarketCalendar,
}

/// The bars a stored run trades on, made sure of first: trading days of its range with no
/// stored bar that no completed download already asked for are downloaded from the data broker
/// (`by` names who asked), then the bars read again, so a run never quietly covers part of its
/// range. Callers invoke it before [`prepare`], which takes what it returns.
pub(crate) async fn ensure_bars(jobs: &Jobs, stored: &StoredRun, by: &str) -> Result<Vec<Bar>, Halt> {
    let settings = settings_of(stored)?;
    let symbol = symbol_of(stored)?;
    let data: &dyn DataRepository = &jobs.db;
    let tf = stored.timeframe.as_str();
    let from = first_bar_from(stored);
    let (from_ms, end) = (to_epoch_ms(&from), to_epoch_ms(&stored.end));
    let mut bars = data.bars(&symbol, tf, from_ms, end).await.map_err(|e| e.to_string())?;
    if jobs.market.instrument(&symbol).is_some() {
        let calendar = MarketCalendar::new(settings.runtime.market_calendar);
        let downloaded = data.downloaded_ranges(&symbol, tf, from_ms, end).await.map_err(|e| e.to_string())?;
        let downloaded: Vec<_> = downloaded.into_iter().map(|(a, b)| (from_epoch_ms(a), from_epoch_ms(b))).collect();
        if let Some((a, b)) = coverage::missing_span(&bars, &downloaded, calendar, from, stored.end) {
            crate::jobs::downloads::download_now(jobs, &symbol, stored.timeframe, a, b, by)
                .await
                .map_err(|e| format!("downloading the missing bars failed: {e}"))?;
            bars = data.bars(&symbol, tf, from_ms, end).await.map_err(|e| e.to_string())?;
        }
    }
    Ok(bars)
}

/// A stored run ready to compute on `bars` (what [`ensure_bars`] returned): its settings,
/// symbol and calendar; refused when no bar starts within its range.
pub(crate) fn prepare(stored: &StoredRun, bars: Vec<Bar>) -> Result<Prepared, Halt> {
    let settings = settings_of(stored)?;
    let symbol = symbol_of(stored)?;
    let calendar = MarketCalendar::new(settings.runtime.market_calendar);
    let start = to_epoch_ms(&stored.start);
    if !bars.iter().any(|b| to_epoch_ms(&b.start) >= start) {
        return Err(format!("no {} bars of {symbol} are stored in the range", stored.timeframe.as_str()).into());
    }
    Ok(Prepared { settings, symbol, bars, calendar })
}

/// The settings a stored run trades under.
fn settings_of(stored: &StoredRun) -> Result<Settings, Halt> {
    Settings::from_json(&stored.effective_settings)
        .map_err(|e| format!("unreadable settings: {}", e.first().map(|f| f.reason.as_str()).unwrap_or("")).into())
}

fn symbol_of(stored: &StoredRun) -> Result<Symbol, Halt> {
    Symbol::parse(&stored.symbol).map_err(|e| format!("bad symbol: {e}").into())
}

/// Where a run's bars are read from: minute bars from the start of the first date, its
/// earlier volume counting toward relative volume (the strategy still starts at `start`).
fn first_bar_from(stored: &StoredRun) -> Timestamp {
    match stored.timeframe {
        Timeframe::Minute => ny_instant(NyDay::default().date_of(stored.start), (0, 0)).min(stored.start),
        Timeframe::Day => stored.start,
    }
}

/// A run's history of `symbol` (float, sector, earlier days): the market's, else the imported
/// reference data over its bars' history, which `bars` gives (built only when needed; a sweep's
/// threads share one built once, [`BarHistory`]'s clones sharing its facts).
pub(crate) fn history_of(
    jobs: &Jobs,
    symbol: &Symbol,
    calendar: MarketCalendar,
    bars: impl FnOnce() -> BarHistory,
) -> Box<dyn History + Send> {
    match jobs.market.history(symbol, calendar) {
        Some(h) => h,
        None => jobs.reference.history(symbol, Box::new(bars())),
    }
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
