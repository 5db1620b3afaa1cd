//! Whole-desk replays (`POST /api/backtests` with `kind: "desk"`): trading days
//! replayed through the radar, the allocator's auto-watch, every strategy, the risk gate and the
//! paper broker's fill model — the live engine runner itself ([`crate::engine::replay_desk`]) on
//! a manual clock, over a database of its own (a temporary SQLite file, removed after) and a
//! market of its own: either the simulated market regenerated (the service's universe, same seed
//! and size, so a day replays exactly the prints the live feed made), or the stored minute bars
//! of downloaded (or imported) days, printed the same way ([`tradeops_brokers::stored`]). A
//! replay is a backtest row (`kind: "desk"`, symbol `*`), queued, leased and run like one; its
//! result has the shape of live analytics: the
//! completed trades with features and outcomes (built by the trades service from the replay's
//! orders, as live trades are), the risk violations, the watchlist the allocator built, the
//! equity curve and its metrics, and performance per symbol.

use crate::domain::settings::SettingsService;
use crate::domain::trades::{TradeCache, TradesService};
use crate::domain::{DomainError, DomainResult};
use crate::engine::{replay_desk, EngineDeps};
use crate::events::EventBus;
use crate::jobs::results::{
    CurvePoint, DeskResult, Headline, ReplayViolation, ReplayWatch, ReplayedTrade, SymbolPerformance,
};
use crate::jobs::run::{effective_settings, initial_cash};
use crate::jobs::{Halt, Jobs, Leases};
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::sync::Arc;
use tradeops_brokers::paper::{PaperBroker, PaperConfig, PaperExecution};
use tradeops_brokers::reference::WithReference;
use tradeops_brokers::simulated::live::LiveMarket;
use tradeops_brokers::simulated::SimulatedMarket;
use tradeops_brokers::stored::{StoredDays, StoredMarket};
use tradeops_brokers::MarketData;
use tradeops_core::clock::ManualClock;
use tradeops_core::metrics::EquityPoint;
use tradeops_core::time::{from_epoch_ms, to_epoch_ms};
use tradeops_core::{Clock, Settings, Timestamp};
use tradeops_store::{BacktestRecord, DataRepository, Database, MarketRepository, SettingsRepository, SettingsVersion};

/// The most market time one replay covers.
pub const MAX_DAYS: i64 = 5;

/// The most symbols a replay of downloaded days trades.
pub const MAX_SYMBOLS: usize = 2_000;
/// Calendar days of daily bars read before a replay's start (the radar's average volume spans
/// 20 trading days), and of minute bars (a previous close where no daily bar is stored).
const DAILY_LOOKBACK_DAYS: i64 = 45;
const MINUTE_LOOKBACK_DAYS: i64 = 5;

/// What replays run on in this process: the paper broker's fill model, and the simulated market
/// a `simulated` replay regenerates.
#[derive(Clone, Debug)]
pub struct DeskSource {
    /// The service's simulated market, when it is the data broker.
    pub simulated: Option<SimulatedSource>,
    /// The paper broker's latencies, slippage and fees (`[paper]`).
    pub paper: PaperConfig,
}

/// The service's simulated market.
#[derive(Clone, Debug)]
pub struct SimulatedSource {
    pub seed: u64,
    pub symbols: usize,
    /// Whether the universe's float and sector are known (`sim.reference_data`).
    pub reference_data: bool,
}

/// Whose prints a replay trades.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum ReplaySource {
    /// The simulated market's, regenerated (where it is the data broker).
    Simulated,
    /// The stored minute bars of downloaded or imported days.
    Downloaded,
}

/// A replay as asked (`POST /api/backtests` with `kind: "desk"` reads it at the HTTP edge).
#[derive(Clone, Debug)]
pub struct ReplaySpec {
    /// Whose prints; by default the simulated market's where it is the data broker, else the
    /// downloaded days'.
    pub source: Option<ReplaySource>,
    /// `Downloaded` only: the symbols the radar scans (default: every symbol with stored minute
    /// bars in the range).
    pub symbols: Option<Vec<tradeops_core::Symbol>>,
    /// Market time the replay trades from, and until.
    pub start: Timestamp,
    pub end: Timestamp,
    /// The book's cash at the start (default $100,000).
    pub initial_cash: Option<Decimal>,
    /// Overrides of the effective settings, in the shape of a `PUT /api/settings` body.
    pub settings: Option<Map<String, Value>>,
}

/// A replay as its row's `request` stores it.
#[derive(Clone, Debug, Deserialize, Serialize)]
pub(crate) struct StoredDesk {
    /// `desk`: what tells a replay's row from a single run's.
    kind: String,
    /// `simulated` or `downloaded` (rows before it was asked: `simulated`).
    #[serde(default = "simulated")]
    source: ReplaySource,
    /// `downloaded`: the symbols replayed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    symbols: Option<Vec<String>>,
    /// The allocator's strategy (what auto-watched symbols trade), its version and parameters,
    /// and `*`: every symbol.
    strategy_id: String,
    strategy_version: String,
    symbol: String,
    parameters: BTreeMap<String, f64>,
    /// The replay trades minute bars (printed four times a minute).
    timeframe: tradeops_core::market::Timeframe,
    /// The paper broker's fills: `PAPER`, its slippage in basis points, no commission rate
    /// (its fee per share is in the trades' fees).
    fill: String,
    #[serde(with = "rust_decimal::serde::str")]
    slippage_bps: Decimal,
    #[serde(with = "rust_decimal::serde::str")]
    commission_rate: Decimal,
    #[serde(with = "tradeops_core::time::serde_ts")]
    start: Timestamp,
    #[serde(with = "tradeops_core::time::serde_ts")]
    end: Timestamp,
    #[serde(with = "rust_decimal::serde::str")]
    initial_cash: Decimal,
    settings: Option<Map<String, Value>>,
    effective_settings: Value,
}

fn simulated() -> ReplaySource {
    ReplaySource::Simulated
}

/// Whether a run's stored request is a desk replay's.
pub(crate) fn is_desk(request: &str) -> bool {
    serde_json::from_str::<Value>(request).is_ok_and(|v| v["kind"] == "desk")
}

/// Validates and queues a replay.
pub async fn enqueue(jobs: &Jobs, req: ReplaySpec, actor: &str) -> DomainResult<BacktestRecord> {
    let source = req.source.unwrap_or(if jobs.desk.simulated.is_some() {
        ReplaySource::Simulated
    } else {
        ReplaySource::Downloaded
    });
    if source == ReplaySource::Simulated {
        if jobs.desk.simulated.is_none() {
            return Err(DomainError::validation(
                "source",
                "a simulated replay regenerates the simulated market: this service's data broker is not the simulated market (replay downloaded days: `downloaded`)",
            ));
        }
        if req.symbols.is_some() {
            return Err(DomainError::validation(
                "symbols",
                "a simulated replay scans the simulated market's whole universe; symbols are for `downloaded`",
            ));
        }
    }
    if req.settings.as_ref().is_some_and(|patch| patch.contains_key("runtime")) {
        return Err(DomainError::validation(
            "settings.runtime",
            "a replay trades the simulated market's own calendar in the service's mode: not overridable",
        ));
    }
    let settings = effective_settings(jobs, req.settings.as_ref())?;
    if req.end <= req.start {
        return Err(DomainError::validation("end", "must be after start"));
    }
    if req.end - req.start > chrono::Duration::days(MAX_DAYS) {
        return Err(DomainError::validation("end", format!("at most {MAX_DAYS} days after start")));
    }
    if req.end > jobs.market_clock.now() {
        return Err(DomainError::validation("end", "must not be in the future (market time)"));
    }
    let symbols = match source {
        ReplaySource::Simulated => None,
        ReplaySource::Downloaded => Some(stored_symbols(jobs, &req).await?),
    };
    let initial_cash = initial_cash(req.initial_cash)?;
    let strategy_id = settings.strategy_allocator.default_strategy_id.clone();
    let timeframe = tradeops_core::market::Timeframe::Minute;
    let parameters = tradeops_core::backtest::validate_parameters(&strategy_id, timeframe, &Map::new(), &settings)
        .unwrap_or_default();
    let stored = StoredDesk {
        kind: "desk".into(),
        source,
        symbols,
        strategy_version: tradeops_core::strategy::make(&strategy_id)
            .map(|s| s.version().to_string())
            .unwrap_or_default(),
        strategy_id,
        symbol: "*".into(),
        parameters,
        timeframe,
        fill: "PAPER".into(),
        slippage_bps: Decimal::try_from(jobs.desk.paper.slippage_bps).unwrap_or_default().normalize(),
        commission_rate: Decimal::ZERO,
        start: req.start,
        end: req.end,
        initial_cash: initial_cash.normalize(),
        settings: req.settings.clone(),
        effective_settings: settings.to_json(),
    };
    let request = serde_json::to_string(&stored).map_err(DomainError::internal)?;
    crate::jobs::run::queue(jobs, &stored.strategy_id, &stored.symbol, request, actor).await
}

/// The symbols a replay of downloaded days trades: those asked for, each with stored minute bars
/// in the range, or every symbol with some.
async fn stored_symbols(jobs: &Jobs, req: &ReplaySpec) -> DomainResult<Vec<String>> {
    let repo: &dyn DataRepository = &jobs.db;
    let (start, end) = (to_epoch_ms(&req.start), to_epoch_ms(&req.end));
    let symbols = match &req.symbols {
        Some(asked) => {
            if asked.is_empty() || asked.len() > MAX_SYMBOLS {
                return Err(DomainError::validation("symbols", format!("1 to {MAX_SYMBOLS} symbols")));
            }
            // One look-up of what is stored, not one a symbol.
            let stored: std::collections::BTreeSet<String> =
                repo.bar_symbols("1m", start, end).await?.into_iter().collect();
            let mut symbols: Vec<String> = Vec::with_capacity(asked.len());
            for (i, symbol) in asked.iter().enumerate() {
                if symbols.iter().any(|s| s == symbol.as_str()) {
                    return Err(DomainError::validation(format!("symbols[{i}]"), "is given more than once"));
                }
                if !stored.contains(symbol.as_str()) {
                    return Err(DomainError::NotFound(format!(
                        "{symbol} has no stored minute bars between start and end: download them first (POST /api/data/download)"
                    )));
                }
                symbols.push(symbol.to_string());
            }
            symbols
        }
        None => repo.bar_symbols("1m", start, end).await?,
    };
    if symbols.is_empty() {
        return Err(DomainError::NotFound(
            "no minute bars are stored between start and end: download the days first (POST /api/data/download)".into(),
        ));
    }
    if symbols.len() > MAX_SYMBOLS {
        return Err(DomainError::validation(
            "symbols",
            format!("{} symbols have stored minute bars in the range; name at most {MAX_SYMBOLS}", symbols.len()),
        ));
    }
    Ok(symbols)
}

/// The stored days a replay of downloaded days prints: its symbols' minute bars from a few days
/// before its start (previous closes) and daily bars from 45 days before (average volumes), and
/// the halts stored with them.
async fn load_stored(jobs: &Jobs, stored: &StoredDesk) -> Result<StoredDays, String> {
    let repo: &dyn DataRepository = &jobs.db;
    let minute_from = to_epoch_ms(&(stored.start - chrono::Duration::days(MINUTE_LOOKBACK_DAYS)));
    let daily_from = to_epoch_ms(&(stored.start - chrono::Duration::days(DAILY_LOOKBACK_DAYS)));
    let end = to_epoch_ms(&stored.end);
    let mut days = StoredDays::default();
    for symbol in stored.symbols.iter().flatten() {
        let symbol = tradeops_core::Symbol::parse(symbol).map_err(|e| format!("unreadable symbol {symbol}: {e}"))?;
        let read = |e: tradeops_store::StoreError| format!("the stored bars of {symbol}: {e}");
        let minute = repo.bars(&symbol, "1m", minute_from, end).await.map_err(read)?;
        let daily = repo.bars(&symbol, "1d", daily_from, end).await.map_err(read)?;
        let halts = repo.halts(&symbol, minute_from, end).await.map_err(read)?;
        days.add(symbol.clone(), minute, daily);
        days.add_halts(&symbol, halts);
    }
    Ok(days)
}

/// Runs a queued replay (the backtest worker hands it over) on a thread of its own, with a
/// runtime of its own: generating 500 symbols' prints is work the service's runtime (the live
/// engine, the feed, HTTP) must not wait behind. Its database lives in a temporary folder,
/// removed whatever happens (the thread runs to its end even when the run was canceled).
pub(crate) async fn compute(jobs: &Jobs, leases: &Leases, run: &mut BacktestRecord) -> Result<DeskResult, Halt> {
    let stored: StoredDesk = serde_json::from_str(&run.request).map_err(|e| format!("unreadable request: {e}"))?;
    let source = jobs.desk.clone();
    let market = match stored.source {
        ReplaySource::Simulated => {
            Market::Simulated(source.simulated.clone().ok_or("this process has no simulated market to replay")?)
        }
        ReplaySource::Downloaded => Market::Stored(Arc::new(load_stored(jobs, &stored).await?)),
    };
    let settings = Settings::from_json(&stored.effective_settings)
        .map_err(|e| format!("unreadable settings: {}", e.first().map(|f| f.reason.as_str()).unwrap_or("")))?;
    let reference = jobs.reference.clone();
    let (progress_tx, progress_rx) = tokio::sync::watch::channel(0.0_f64);
    let task = tokio::task::spawn_blocking(move || -> Result<DeskResult, String> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("a runtime for the replay: {e}"))?;
        let folder = TempFolder::new()?;
        runtime.block_on(async {
            let db = Database::open(&format!("sqlite://{}/desk.db", folder.0.display()))
                .await
                .map_err(|e| format!("the replay's database: {e}"))?;
            let result = replay(&stored, settings, market, source.paper, reference, db.clone(), progress_tx).await;
            db.close().await;
            result
        })
    });
    crate::jobs::run::follow(jobs, leases, run, task, progress_rx).await
}

/// A folder of the replay's own under the system's temporary folder, removed when dropped.
struct TempFolder(std::path::PathBuf);

impl TempFolder {
    fn new() -> Result<TempFolder, String> {
        let path = std::env::temp_dir().join(format!("tradeops-desk-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&path).map_err(|e| format!("a folder for the replay's database: {e}"))?;
        Ok(TempFolder(path))
    }
}

impl Drop for TempFolder {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The market a replay prints.
enum Market {
    Simulated(SimulatedSource),
    Stored(Arc<StoredDays>),
}

async fn replay(
    stored: &StoredDesk,
    settings: Settings,
    source: Market,
    paper: PaperConfig,
    reference: Arc<tradeops_brokers::reference::ReferenceData>,
    db: Database,
    progress: tokio::sync::watch::Sender<f64>,
) -> Result<DeskResult, String> {
    let clock = Arc::new(ManualClock::new(stored.start));
    let market_clock: Arc<dyn Clock> = clock.clone();
    let store = |e: tradeops_store::StoreError| format!("the replay's database: {e}");
    SettingsRepository::append_settings(
        &db,
        &SettingsVersion {
            version: 1,
            settings: settings.to_json().to_string(),
            updated: "[]".into(),
            actor: "replay".into(),
            created_at: to_epoch_ms(&stored.start),
        },
    )
    .await
    .map_err(store)?;
    let settings_service = SettingsService::load(Arc::new(db.clone()), market_clock.clone(), false)
        .await
        .map_err(|e| format!("the replay's settings: {e}"))?;
    let (live, market): (Arc<LiveMarket>, Arc<dyn MarketData>) = match source {
        // The service's universe, regenerated: the same prints the live feed made.
        Market::Simulated(source) => {
            let mut simulated = SimulatedMarket::new(source.seed, source.symbols);
            let mut live = LiveMarket::new(simulated.universe.clone(), 1.0, market_clock.clone())
                .with_reference(reference.clone());
            if !source.reference_data {
                simulated = simulated.without_reference_data();
                live = live.without_reference_data();
            }
            let live = Arc::new(live);
            (live.clone(), Arc::new(simulated.with_live(live)))
        }
        // The stored days, printed as the simulated market's are.
        Market::Stored(days) => {
            let live = Arc::new(
                LiveMarket::over_stored(days.clone(), 1.0, market_clock.clone()).with_reference(reference.clone()),
            );
            (live.clone(), Arc::new(StoredMarket::new(days, live)))
        }
    };
    let market: Arc<dyn MarketData> = Arc::new(WithReference::new(market, reference.clone()));
    let events = Arc::new(EventBus::new(market_clock.clone(), market_clock.clone(), settings_service.subscribe()));
    let deps = EngineDeps {
        db: db.clone(),
        settings: settings_service.subscribe(),
        events,
        market_clock: market_clock.clone(),
        initial_cash: stored.initial_cash,
        crash_point: None,
        broker: Arc::new(PaperExecution::new(PaperBroker::new(paper))),
        market: market.clone(),
        // A replay's own database and broker: nobody else can take its term.
        term: Arc::new(crate::cluster::Term::sole()),
        node: "desk replay".into(),
    };
    let outcome = replay_desk(deps, live, clock, stored.start, stored.end, &mut move |p| {
        progress.send_replace(p);
    })
    .await
    .map_err(|e| e.to_string())?;
    // What live analytics show, from the replay's own records.
    let trades = TradesService {
        orders: &db,
        audit: &db,
        market: market.as_ref(),
        settings: &settings_service,
        cache: &TradeCache::default(),
    }
    .completed()
    .await
    .map_err(|e| format!("the replay's trades: {e}"))?;
    let trades = &trades.trades;
    let violations: Vec<ReplayViolation> = MarketRepository::violations(&db, 10_000)
        .await
        .map_err(store)?
        .into_iter()
        .rev()
        .map(|v| ReplayViolation {
            rule: v.rule,
            symbol: v.symbol,
            client_order_id: v.client_order_id,
            detail: serde_json::from_str::<Value>(&v.detail).unwrap_or(Value::Null),
            timestamp: from_epoch_ms(v.ts),
        })
        .collect();
    let watched: Vec<ReplayWatch> = MarketRepository::watch_rows(&db)
        .await
        .map_err(store)?
        .into_iter()
        .map(|w| ReplayWatch {
            symbol: w.symbol,
            source: w.source,
            strategy_id: w.strategy_id,
            strategy_status: w.strategy_status,
            time_added: from_epoch_ms(w.time_added),
        })
        .collect();
    let curve: Vec<EquityPoint> =
        outcome.equity.iter().map(|(at, equity)| EquityPoint { timestamp: *at, equity: *equity }).collect();
    let pnl: Vec<Decimal> = trades.iter().map(|t| t.net_pnl).collect();
    let m = tradeops_core::metrics::compute(stored.initial_cash, &curve, &pnl);
    let mut by_symbol: BTreeMap<String, SymbolPerformance> = BTreeMap::new();
    for t in trades.iter() {
        let symbol = t.symbol.to_string();
        let entry =
            by_symbol.entry(symbol.clone()).or_insert_with(|| SymbolPerformance { symbol, ..Default::default() });
        entry.trades += 1;
        entry.wins += u64::from(t.net_pnl > Decimal::ZERO);
        entry.net_pnl += t.net_pnl;
    }
    // At most MAX_CURVE_POINTS points, the last of each stretch (metrics used every minute).
    let stride = curve.len().div_ceil(tradeops_core::backtest::MAX_CURVE_POINTS).max(1);
    let points: Vec<CurvePoint> = curve
        .iter()
        .enumerate()
        .filter(|(i, _)| (i + 1) % stride == 0 || i + 1 == curve.len())
        .map(|(_, p)| CurvePoint::from(p))
        .collect();
    Ok(DeskResult {
        kind: "desk",
        headline: Headline::from(&m),
        final_equity: tradeops_core::backtest::dollars(outcome.final_equity),
        trading_state: outcome.trading_state,
        steps: outcome.steps,
        scans: outcome.scans,
        trades: trades.iter().map(ReplayedTrade::from).collect(),
        violations,
        watched,
        by_symbol: by_symbol.into_values().collect(),
        equity_curve: points,
    })
}
