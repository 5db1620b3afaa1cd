//! The bodies that ask for a run, with their OpenAPI schemas: a backtest ([`BacktestRequest`],
//! `POST /api/backtests/run`), a parameter sweep ([`SweepRequest`], `POST /api/backtests/sweeps`)
//! and a whole-desk replay ([`DeskRequest`], `POST /api/backtests` with `kind: "desk"`). Each
//! becomes the jobs' own typed request at this edge ([`RunRequest`], [`SweepSpec`],
//! [`ReplaySpec`]); the jobs never see these types nor their schemas. The values a request
//! shares with a sweep's stored form and its report ([`Objective`], [`Constraint`],
//! [`WalkForward`]) and a replay's [`ReplaySource`] have their wire form here too, converted with
//! `From`, so the API's schema and the stored rows change only on purpose.
//!
//! A backtest and a sweep share the fields of one strategy on one symbol ([`RunFields`]); each
//! embeds them and adds its own (a backtest's `kind` and `parameters`, a sweep's grid). The body
//! is still one flat object, so the embedding is read by [`read_composed`] rather than serde's
//! `flatten`: `flatten` buffers the body and reads the shared fields after it, out of their
//! place, so a refused `symbol` or `start` would be reported as the whole body, and an unknown
//! field would be refused without the list of the fields the request takes (CONTRACT §2:
//! `detail.field` names the refused field). [`inline_composed`] renders each composed request
//! in the served document as the one object its body is.

use crate::jobs::desk::{self, ReplaySpec};
use crate::jobs::run::RunRequest;
use crate::jobs::sweeps::{self, SweepSpec};
use rust_decimal::Decimal;
use serde::de::{DeserializeSeed, Error as _, IntoDeserializer, MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value};
use tradeops_core::backtest::fills::FillModel;
use tradeops_core::market::Timeframe;
use tradeops_core::{Symbol, Timestamp};
use utoipa::openapi::schema::{AdditionalProperties, ObjectBuilder, Schema, Type};
use utoipa::openapi::{Components, RefOr};

/// The fields of a run of one strategy on one symbol, a backtest's and a sweep's alike (a sweep
/// asks for a grid of parameters where a backtest asks for one set).
#[derive(Clone, Debug, Deserialize, Serialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RunFields {
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
    /// Overrides of the effective settings for this run only (for each run of a sweep), in the
    /// shape of a `PUT /api/settings` body (for example
    /// `{"risk_controls": {"max_daily_loss": 5000}}`), validated the same way. The run otherwise
    /// trades under the operator's settings — the same risk gate as live.
    #[schema(value_type = Option<Object>, nullable = false)]
    pub settings: Option<Map<String, Value>>,
}

impl RunFields {
    /// The jobs' request of a run of these fields with `parameters`.
    fn into_run(self, parameters: Option<Map<String, Value>>) -> RunRequest {
        RunRequest {
            strategy_id: self.strategy_id,
            symbol: self.symbol,
            start: self.start,
            end: self.end,
            timeframe: self.timeframe,
            parameters,
            initial_cash: self.initial_cash,
            commission_rate: self.commission_rate,
            slippage_bps: self.slippage_bps,
            fill: self.fill,
            settings: self.settings,
        }
    }
}

/// The kind of a single run.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq, Eq, utoipa::ToSchema)]
pub enum SingleKind {
    #[serde(rename = "single")]
    Single,
}

/// `POST /api/backtests/run` (or `POST /api/backtests`): a run of one strategy on one symbol.
#[derive(Clone, Debug, Serialize, utoipa::ToSchema)]
pub struct BacktestRequest {
    /// `single` (the default): one strategy on one symbol (`desk` is a whole-desk replay's).
    #[schema(nullable = false)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<SingleKind>,
    #[serde(flatten)]
    pub run: RunFields,
    /// Strategy parameters (see `GET /api/strategies`); defaults fill what is left out.
    #[schema(value_type = Option<Object>, nullable = false)]
    pub parameters: Option<Map<String, Value>>,
}

/// Every field of a [`BacktestRequest`], in the order a refusal of an unknown one lists them.
const BACKTEST_FIELDS: &[&str] = &[
    "kind",
    "strategy_id",
    "symbol",
    "start",
    "end",
    "timeframe",
    "parameters",
    "initial_cash",
    "commission_rate",
    "slippage_bps",
    "fill",
    "settings",
];

/// A [`BacktestRequest`]'s own fields.
#[derive(Default)]
struct BacktestOwn {
    kind: Option<SingleKind>,
    parameters: Option<Map<String, Value>>,
}

impl OwnFields for BacktestOwn {
    fn read<'de, A: MapAccess<'de>>(&mut self, key: &str, map: &mut A) -> Result<bool, A::Error> {
        match key {
            "kind" => self.kind = map.next_value()?,
            "parameters" => self.parameters = map.next_value()?,
            _ => return Ok(false),
        }
        Ok(true)
    }
}

impl<'de> Deserialize<'de> for BacktestRequest {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let (run, own) = read_composed::<D, BacktestOwn>(d, BACKTEST_FIELDS)?;
        Ok(BacktestRequest { kind: own.kind, run, parameters: own.parameters })
    }
}

impl From<BacktestRequest> for RunRequest {
    fn from(req: BacktestRequest) -> RunRequest {
        req.run.into_run(req.parameters)
    }
}

/// `POST /api/backtests/sweeps`: a backtest's fields, with a grid of parameters instead of one
/// set, what to rank by and what a combination must not break.
#[derive(Clone, Debug, Serialize, utoipa::ToSchema)]
pub struct SweepRequest {
    #[serde(flatten)]
    pub run: RunFields,
    /// Per parameter, the values to try: a range `{"from": 5, "to": 50, "step": 5}` (both ends
    /// included) or a list `[5, 10, 20]`; at most 1,000 values each and 10,000 combinations in
    /// all. Parameters left out keep their defaults. Combinations the strategy refuses (for
    /// `sma_cross`, `fast` not below `slow`) are skipped and counted.
    #[schema(value_type = Object)]
    pub grid: Map<String, Value>,
    /// Try only this many combinations, drawn at random from the grid (reproducibly, by `seed`).
    #[schema(nullable = false, minimum = 1, maximum = 10000)]
    pub sample: Option<u32>,
    /// The random sample's seed (default 0).
    #[schema(nullable = false)]
    pub seed: Option<u64>,
    /// What ranks the combinations, highest first (default `sharpe_ratio`).
    #[schema(nullable = false)]
    pub objective: Option<Objective>,
    /// What a combination must not break to be ranked with the others.
    #[schema(nullable = false)]
    pub constraint: Option<Constraint>,
    /// Also split the range into in-sample / out-of-sample windows: every combination runs on
    /// each window's two parts, and the report shows how each window's in-sample best did out
    /// of sample.
    #[schema(nullable = false)]
    pub walk_forward: Option<WalkForward>,
}

/// Every field of a [`SweepRequest`], in the order a refusal of an unknown one lists them.
const SWEEP_FIELDS: &[&str] = &[
    "strategy_id",
    "symbol",
    "start",
    "end",
    "timeframe",
    "grid",
    "sample",
    "seed",
    "objective",
    "constraint",
    "initial_cash",
    "commission_rate",
    "slippage_bps",
    "fill",
    "settings",
    "walk_forward",
];

/// A [`SweepRequest`]'s own fields.
#[derive(Default)]
struct SweepOwn {
    grid: Option<Map<String, Value>>,
    sample: Option<u32>,
    seed: Option<u64>,
    objective: Option<Objective>,
    constraint: Option<Constraint>,
    walk_forward: Option<WalkForward>,
}

impl OwnFields for SweepOwn {
    fn read<'de, A: MapAccess<'de>>(&mut self, key: &str, map: &mut A) -> Result<bool, A::Error> {
        match key {
            "grid" => self.grid = Some(map.next_value()?),
            "sample" => self.sample = map.next_value()?,
            "seed" => self.seed = map.next_value()?,
            "objective" => self.objective = map.next_value()?,
            "constraint" => self.constraint = map.next_value()?,
            "walk_forward" => self.walk_forward = map.next_value()?,
            _ => return Ok(false),
        }
        Ok(true)
    }
}

impl<'de> Deserialize<'de> for SweepRequest {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let (run, own) = read_composed::<D, SweepOwn>(d, SWEEP_FIELDS)?;
        Ok(SweepRequest {
            run,
            grid: own.grid.ok_or_else(|| D::Error::missing_field("grid"))?,
            sample: own.sample,
            seed: own.seed,
            objective: own.objective,
            constraint: own.constraint,
            walk_forward: own.walk_forward,
        })
    }
}

impl From<SweepRequest> for SweepSpec {
    fn from(req: SweepRequest) -> SweepSpec {
        SweepSpec {
            run: req.run.into_run(None),
            grid: req.grid,
            sample: req.sample,
            seed: req.seed,
            objective: req.objective.map(Into::into),
            constraint: req.constraint.map(Into::into),
            walk_forward: req.walk_forward.map(Into::into),
        }
    }
}

/// Walk-forward windows over a sweep's range, counted in trading days of the market calendar.
/// Rolling (the default): windows of equal length, each starting where the previous one's
/// out-of-sample part starts, so the out-of-sample parts follow one another to the range's end.
/// Anchored: every in-sample part starts at the range's start and grows by one out-of-sample
/// part per window.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct WalkForward {
    /// How many windows (2 to 20).
    #[schema(minimum = 2, maximum = 20)]
    pub windows: u32,
    /// The in-sample share of a window (of the first window when anchored): 0.5 to 0.95,
    /// default 0.7.
    #[schema(nullable = false, minimum = 0.5, maximum = 0.95)]
    pub in_sample_fraction: Option<f64>,
    /// In-sample parts all start at the range's start (default false: rolling).
    #[schema(nullable = false)]
    pub anchored: Option<bool>,
}

impl From<WalkForward> for sweeps::WalkForward {
    fn from(w: WalkForward) -> sweeps::WalkForward {
        sweeps::WalkForward { windows: w.windows, in_sample_fraction: w.in_sample_fraction, anchored: w.anchored }
    }
}

impl From<sweeps::WalkForward> for WalkForward {
    fn from(w: sweeps::WalkForward) -> WalkForward {
        WalkForward { windows: w.windows, in_sample_fraction: w.in_sample_fraction, anchored: w.anchored }
    }
}

/// The metric a sweep ranks by, highest first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Objective {
    SharpeRatio,
    TotalReturn,
    ProfitFactor,
    WinRate,
    Expectancy,
    FinalEquity,
}

impl From<Objective> for sweeps::Objective {
    fn from(o: Objective) -> sweeps::Objective {
        match o {
            Objective::SharpeRatio => sweeps::Objective::SharpeRatio,
            Objective::TotalReturn => sweeps::Objective::TotalReturn,
            Objective::ProfitFactor => sweeps::Objective::ProfitFactor,
            Objective::WinRate => sweeps::Objective::WinRate,
            Objective::Expectancy => sweeps::Objective::Expectancy,
            Objective::FinalEquity => sweeps::Objective::FinalEquity,
        }
    }
}

impl From<sweeps::Objective> for Objective {
    fn from(o: sweeps::Objective) -> Objective {
        match o {
            sweeps::Objective::SharpeRatio => Objective::SharpeRatio,
            sweeps::Objective::TotalReturn => Objective::TotalReturn,
            sweeps::Objective::ProfitFactor => Objective::ProfitFactor,
            sweeps::Objective::WinRate => Objective::WinRate,
            sweeps::Objective::Expectancy => Objective::Expectancy,
            sweeps::Objective::FinalEquity => Objective::FinalEquity,
        }
    }
}

/// Limits a ranked combination keeps.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Constraint {
    /// The deepest drawdown allowed, a fraction (0.25: 25 %).
    #[schema(nullable = false, minimum = 0, maximum = 1)]
    pub max_drawdown: Option<f64>,
    /// The fewest trades a combination must make.
    #[schema(nullable = false, minimum = 0, maximum = 1000000)]
    pub min_trades: Option<u64>,
}

impl From<Constraint> for sweeps::Constraint {
    fn from(c: Constraint) -> sweeps::Constraint {
        sweeps::Constraint { max_drawdown: c.max_drawdown, min_trades: c.min_trades }
    }
}

impl From<sweeps::Constraint> for Constraint {
    fn from(c: sweeps::Constraint) -> Constraint {
        Constraint { max_drawdown: c.max_drawdown, min_trades: c.min_trades }
    }
}

/// Whose prints a replay trades.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq, Eq, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum ReplaySource {
    /// The simulated market's, regenerated (where it is the data broker).
    Simulated,
    /// The stored minute bars of downloaded or imported days.
    Downloaded,
}

impl From<ReplaySource> for desk::ReplaySource {
    fn from(source: ReplaySource) -> desk::ReplaySource {
        match source {
            ReplaySource::Simulated => desk::ReplaySource::Simulated,
            ReplaySource::Downloaded => desk::ReplaySource::Downloaded,
        }
    }
}

/// A whole-desk replay's kind.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq, Eq, utoipa::ToSchema)]
pub enum DeskKind {
    #[serde(rename = "desk")]
    Desk,
}

// A replay trades the allocator's strategy on every symbol the radar finds: it has no strategy
// nor symbol of its own, so it embeds no `RunFields`, and its range, cash and overrides are
// documented as a desk's.
/// `POST /api/backtests` (or `/api/backtests/run`) with `kind: "desk"`.
#[derive(Clone, Debug, Deserialize, Serialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DeskRequest {
    /// `desk`.
    pub kind: DeskKind,
    /// `simulated` (the default where the simulated market is the data broker): the simulated
    /// market's days, regenerated; or `downloaded` (the default elsewhere): the stored minute bars
    /// of downloaded or imported days (`POST /api/data/download`), with the previous closes and
    /// average volumes the stored days before them give.
    #[schema(nullable = false)]
    pub source: Option<ReplaySource>,
    /// `downloaded` only: the symbols the radar scans and the desk may trade (default: every
    /// symbol with stored minute bars in the range); at most 2,000, each with stored minute bars
    /// in the range.
    #[schema(nullable = false, max_items = 2000)]
    pub symbols: Option<Vec<Symbol>>,
    /// RFC 3339 market time the replay starts trading at (the day's earlier minutes are
    /// generated, as the live feed generates them when it starts, not traded).
    #[serde(with = "tradeops_core::time::serde_ts")]
    #[schema(value_type = String, format = DateTime)]
    pub start: Timestamp,
    /// RFC 3339 market time it stops at: after `start`, at most 5 days later, not in the future.
    #[serde(with = "tradeops_core::time::serde_ts")]
    #[schema(value_type = String, format = DateTime)]
    pub end: Timestamp,
    /// The book's cash at the start, dollars (default 100,000): a flat book.
    #[schema(value_type = Option<f64>, nullable = false, minimum = 1, maximum = 1000000000000.0)]
    #[serde(default, with = "rust_decimal::serde::float_option")]
    pub initial_cash: Option<Decimal>,
    /// Overrides of the effective settings for this replay only (the allocator's auto-watch,
    /// the risk limits, the radar's filters...), in the shape of a `PUT /api/settings` body.
    #[schema(value_type = Option<Object>, nullable = false)]
    pub settings: Option<Map<String, Value>>,
}

impl From<DeskRequest> for ReplaySpec {
    fn from(req: DeskRequest) -> ReplaySpec {
        ReplaySpec {
            source: req.source.map(Into::into),
            symbols: req.symbols,
            start: req.start,
            end: req.end,
            initial_cash: req.initial_cash,
            settings: req.settings,
        }
    }
}

/// A composed request's own fields, beside its [`RunFields`].
trait OwnFields: Default {
    /// Reads the value of `key` from `map` when `key` is one of these fields; `false` when not.
    fn read<'de, A: MapAccess<'de>>(&mut self, key: &str, map: &mut A) -> Result<bool, A::Error>;
}

/// Reads a body of [`RunFields`] and `O`'s fields in one pass, each value in its place under its
/// own key, so a refusal names the field by its path as a derived struct's would; a key of
/// neither is refused as an unknown field listing `fields`.
fn read_composed<'de, D: Deserializer<'de>, O: OwnFields>(
    d: D,
    fields: &'static [&'static str],
) -> Result<(RunFields, O), D::Error> {
    d.deserialize_map(Composed { fields, own: std::marker::PhantomData::<O> })
}

struct Composed<O> {
    fields: &'static [&'static str],
    own: std::marker::PhantomData<O>,
}

impl<'de, O: OwnFields> Visitor<'de> for Composed<O> {
    type Value = (RunFields, O);

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON object of the request's fields")
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        let mut split = Split { map, own: O::default(), fields: self.fields };
        let run = RunFields::deserialize(serde::de::value::MapAccessDeserializer::new(&mut split))?;
        Ok((run, split.own))
    }
}

/// The body as [`RunFields`] reads it: the own fields' keys are read into `own` on the way, so
/// only the shared ones reach it.
struct Split<A, O> {
    map: A,
    own: O,
    fields: &'static [&'static str],
}

impl<'de, A: MapAccess<'de>, O: OwnFields> MapAccess<'de> for Split<A, O> {
    type Error = A::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>, A::Error> {
        while let Some(key) = self.map.next_key::<String>()? {
            if self.own.read(&key, &mut self.map)? {
                continue;
            }
            // `RunFields` refuses a key it does not take; the refusal lists the whole request's.
            let name: serde::de::value::StrDeserializer<A::Error> = key.as_str().into_deserializer();
            return seed.deserialize(name).map(Some).map_err(|_| A::Error::unknown_field(&key, self.fields));
        }
        Ok(None)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, A::Error> {
        self.map.next_value_seed(seed)
    }
}

/// The composed requests' schemas as the one object their bodies are. utoipa renders an
/// embedded struct as `allOf` of the shared schema and the own fields, which says nothing of
/// unknown fields (each part's `additionalProperties: false` would refuse the other's fields);
/// the merged object states it as the derived requests' schemas do, so a generated body is never
/// refused for a field the document allows. The shared schema, then referenced by no one, is
/// left out of the document.
pub(crate) fn inline_composed(components: &mut Components) {
    let shared = match components.schemas.remove("RunFields") {
        Some(RefOr::T(Schema::Object(shared))) => shared,
        _ => panic!("RunFields is an object schema"),
    };
    for name in ["BacktestRequest", "SweepRequest"] {
        let Some(RefOr::T(Schema::AllOf(all_of))) = components.schemas.get(name) else {
            panic!("{name} embeds RunFields")
        };
        let mut merged = ObjectBuilder::new()
            .schema_type(Type::Object)
            .description(all_of.description.clone())
            .additional_properties(Some(AdditionalProperties::<Schema>::FreeForm(false)))
            .build();
        for part in std::iter::once(&shared).chain(all_of.items.iter().filter_map(|item| match item {
            RefOr::T(Schema::Object(own)) => Some(own),
            _ => None,
        })) {
            merged.properties.extend(part.properties.clone());
            merged.required.extend(part.required.iter().cloned());
        }
        components.schemas.insert(name.into(), RefOr::T(Schema::Object(merged)));
    }
}

#[cfg(test)]
mod tests;
