// Parameter sweeps in the browser, as plain functions (Node tests them: tests/sweep_grid.test.mjs):
// a grid axis expanded the way the service expands it, the range a strategy's parameter bounds
// suggest for the sweep form, and the heatmap's cells — for two chosen parameters, the best
// combination run at each pair of their values, placed on a sequential scale of the objective.

/** One parameter's values to try, as `POST /api/backtests/sweeps` takes them. */
export type AxisSpec = { from: number; to: number; step: number } | number[];

/** The service's limits (jobs/sweeps.rs). */
export const MAX_AXIS_VALUES = 1000;
export const MAX_COMBINATIONS = 10_000;

/** Rounds off float noise as the service does for a range's values (to 1e-9). */
const tidy = (v: number) => Math.round(v * 1e9) / 1e9;

/** A value as a map key that float noise does not split (5 and 5.0000000001 are one key). */
export const valueKey = (v: number) => String(tidy(v));

/**
 * An axis's values in the service's order, or null when the service would refuse it: a range
 * includes both ends (`to` when a whole number of steps away), each value rounded to 1e-9.
 */
export function axisValues(spec: unknown): number[] | null {
  if (Array.isArray(spec)) {
    if (spec.length === 0 || spec.length > MAX_AXIS_VALUES || !spec.every((v) => typeof v === "number" && Number.isFinite(v))) return null;
    return spec as number[];
  }
  if (spec && typeof spec === "object") {
    const { from, to, step } = spec as Record<string, unknown>;
    if (typeof from !== "number" || typeof to !== "number" || typeof step !== "number") return null;
    if (!(step > 0) || !Number.isFinite(step) || !Number.isFinite(from) || !Number.isFinite(to) || to < from) return null;
    const count = Math.floor((to - from) / step + 1e-9) + 1;
    if (count > MAX_AXIS_VALUES) return null;
    return Array.from({ length: count }, (_, i) => tidy(from + step * i));
  }
  return null;
}

/** An axis's distinct values, ascending: the heatmap's rows or columns. */
export function axisTicks(spec: unknown): number[] {
  const values = axisValues(spec) ?? [];
  const seen = new Map<string, number>();
  for (const v of values) seen.set(valueKey(v), v);
  return [...seen.values()].sort((a, b) => a - b);
}

/** Combinations a grid makes (the product of its axes' lengths); null when an axis is refused. */
export function combinationCount(grid: Record<string, unknown>): number | null {
  let n = 1;
  for (const spec of Object.values(grid)) {
    const values = axisValues(spec);
    if (!values) return null;
    n *= values.length;
  }
  return n;
}

/** 1, 2, 2.5 or 5 times a power of ten: the round step nearest above `raw`. */
export function niceStep(raw: number): number {
  if (!(raw > 0) || !Number.isFinite(raw)) return 1;
  const power = 10 ** Math.floor(Math.log10(raw));
  const m = raw / power;
  const nice = m <= 1 ? 1 : m <= 2 ? 2 : m <= 2.5 ? 2.5 : m <= 5 ? 5 : 10;
  return tidy(nice * power);
}

/** What the sweep form knows of a parameter (`GET /api/strategies`). */
export interface ParameterBounds {
  kind: string;
  default: number | null;
  minimum: number | null;
  maximum: number | null;
}

/**
 * The range the sweep form starts a parameter with: half to twice its default, in four or five
 * round steps, within its bounds (whole steps for an INTEGER parameter). Without a default, the
 * bottom of its bounds upward.
 */
export function suggestRange(p: ParameterBounds): { from: number; to: number; step: number } {
  const min = p.minimum ?? -Infinity;
  const max = p.maximum ?? Infinity;
  const integer = p.kind === "INTEGER";
  const d = p.default;
  let lo: number;
  let hi: number;
  if (d !== null && d > 0) {
    lo = Math.max(min, d / 2);
    hi = Math.min(max, d * 2);
  } else {
    lo = Number.isFinite(min) ? min : (d ?? 0);
    hi = Math.min(max, lo + (Number.isFinite(max) && max - lo <= 10 ? max - lo : 10));
  }
  if (integer) {
    lo = Math.ceil(lo);
    hi = Math.floor(hi);
  }
  let step = niceStep((hi - lo) / 4);
  if (integer) step = Math.max(1, Math.round(step));
  // Start on a multiple of the step when that stays within the bounds (0.2, not 0.25, for 0.5).
  const snapped = tidy(Math.floor(lo / step) * step);
  const from = snapped >= min ? snapped : lo;
  let to = tidy(from + Math.floor((hi - from) / step + 1e-9) * step);
  if (to < from) to = from;
  return { from: tidy(from), to, step };
}

/** A run's metrics as a sweep keeps them (of the whole range, or of a walk-forward window's part). */
export interface SweepMetrics {
  total_return: number | null;
  sharpe_ratio: number | null;
  max_drawdown: number | null;
  win_rate: number | null;
  profit_factor: number | null;
  win_loss_ratio: number | null;
  trade_count: number | null;
  expectancy: number | null;
  final_equity: number | null;
}

/** A combination's metrics in a sweep's `results` (GET /api/backtests/sweeps/{id}). */
export interface SweepResult extends SweepMetrics {
  parameters: Record<string, number>;
  meets_constraint: boolean;
  /** The strategy's current parameters (its defaults under the operator's settings), run with the grid. */
  baseline?: boolean;
}

/** A result's objective as the service ranks it: a number, or null (ranked last). */
export function score(row: SweepMetrics | SweepResult | null | undefined, objective: string): number | null {
  if (!row) return null;
  const v = (row as unknown as Record<string, unknown>)[objective];
  const n = typeof v === "number" ? v : typeof v === "string" ? Number(v) : NaN;
  return Number.isFinite(n) ? n : null;
}

/** One square of the heatmap. */
export interface HeatCell {
  x: number;
  /** Null when the map has one parameter (a single row). */
  y: number | null;
  /** The best combination run here (the first in the service's ranking), or null: none ran. */
  row: SweepResult | null;
  /** Combinations run here (more than one when other parameters vary). */
  runs: number;
  /** Its objective; null when undefined for it (no trades, say). */
  value: number | null;
  /** Where the value sits between the map's lowest and highest, 0..1; null without a value. */
  level: number | null;
  /** The strategy's current parameters (the baseline row) ran here: shown, or beaten by another. */
  baseline: SweepResult | null;
}

export interface Heatmap {
  xs: number[];
  /** Top row first: highest value at the top. `[null]` for a single row. */
  ys: (number | null)[];
  /** Row-major, `ys.length` rows of `xs.length` cells. */
  cells: HeatCell[][];
  min: number | null;
  max: number | null;
}

/**
 * The heatmap of `x` against `y` (or `x` alone): each cell holds the best of the combinations run
 * at that pair of values — the first of them in `results`, which the service ranks (those meeting
 * the constraint first, then by the objective, highest first) — so when other parameters vary, a
 * cell shows the best over them. Axes are the grid's values and any a result adds; cells no
 * combination ran at (skipped, not sampled, not run yet) stay empty.
 */
export function heatmap(
  results: SweepResult[],
  grid: Record<string, unknown>,
  x: string,
  y: string | null,
  objective: string,
): Heatmap {
  const ticks = (param: string) => {
    const values = new Map<string, number>(axisTicks(grid[param]).map((v) => [valueKey(v), v]));
    for (const r of results) {
      const v = r.parameters[param];
      if (typeof v === "number") values.set(valueKey(v), v);
    }
    return [...values.values()].sort((a, b) => a - b);
  };
  const xs = ticks(x);
  const ys: (number | null)[] = y ? ticks(y).reverse() : [null];
  const at = new Map<string, { row: SweepResult; runs: number; baseline: SweepResult | null }>();
  for (const r of results) {
    const xv = r.parameters[x];
    const yv = y ? r.parameters[y] : null;
    if (typeof xv !== "number" || (y && typeof yv !== "number")) continue;
    const key = `${valueKey(xv)}|${yv === null ? "" : valueKey(yv)}`;
    const seen = at.get(key);
    const baseline = r.baseline ? r : null;
    if (seen) {
      seen.runs += 1;
      seen.baseline ??= baseline;
    } else at.set(key, { row: r, runs: 1, baseline });
  }
  const values = [...at.values()].map((c) => score(c.row, objective)).filter((v): v is number => v !== null);
  const min = values.length ? Math.min(...values) : null;
  const max = values.length ? Math.max(...values) : null;
  const cells = ys.map((yv) =>
    xs.map((xv): HeatCell => {
      const hit = at.get(`${valueKey(xv)}|${yv === null ? "" : valueKey(yv)}`);
      const value = hit ? score(hit.row, objective) : null;
      const level = value === null || min === null || max === null ? null : max > min ? (value - min) / (max - min) : 0.5;
      return { x: xv, y: yv, row: hit?.row ?? null, runs: hit?.runs ?? 0, value, level, baseline: hit?.baseline ?? null };
    }),
  );
  return { xs, ys, cells, min, max };
}

/** What a result breaks of the constraint, in words; empty when it meets it. */
export function breaches(row: SweepResult, constraint: { max_drawdown?: number | null; min_trades?: number | null }): string[] {
  const out: string[] = [];
  const dd = row.max_drawdown ?? 0;
  const trades = row.trade_count ?? 0;
  if (constraint.max_drawdown !== null && constraint.max_drawdown !== undefined && dd > constraint.max_drawdown) {
    out.push(`DD ${tidy(dd * 100).toFixed(2)}% > ${tidy(constraint.max_drawdown * 100).toFixed(2)}%`);
  }
  if (constraint.min_trades !== null && constraint.min_trades !== undefined && trades < constraint.min_trades) {
    out.push(`${trades.toLocaleString("en-US")} trade${trades === 1 ? "" : "s"} < ${constraint.min_trades.toLocaleString("en-US")}`);
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Walk-forward

/** The service's walk-forward limits (jobs/sweeps.rs). */
export const MIN_WINDOWS = 2;
export const MAX_WINDOWS = 20;
export const MIN_IN_SAMPLE = 0.5;
export const MAX_IN_SAMPLE = 0.95;
export const DEFAULT_IN_SAMPLE = 0.7;
/** The most combination × window pairs a walk-forward sweep may have. */
export const MAX_WINDOW_RUNS = 20_000;

/** `walk_forward` as a sweep is asked for it (and as the list echoes it). */
export interface WalkForwardRequest {
  windows: number;
  in_sample_fraction?: number | null;
  anchored?: boolean | null;
}

/** A half-open span `[start, end)` of a window, RFC 3339. */
export interface Span {
  start: string;
  end: string;
}

/** One window of the walk-forward report. */
export interface WalkForwardWindow {
  /** 1-based. */
  window: number;
  in_sample: Span;
  out_of_sample: Span;
  /** The in-sample best (ranked as the table is), or null: none keeps the constraint with an objective. */
  best: {
    parameters: Record<string, number>;
    in_sample: SweepMetrics | null;
    out_of_sample: SweepMetrics | null;
    /** Its rank among the combinations run out of sample (1-based), of `ranked_out_of_sample`. */
    out_of_sample_rank: number | null;
    ranked_out_of_sample: number;
  } | null;
  /** The current parameters' runs in this window; null when they were not run. */
  baseline: { in_sample: SweepMetrics | null; out_of_sample: SweepMetrics | null } | null;
  /** Whether the in-sample best beat the current parameters out of sample; null: a tie, the same parameters, or unknown. */
  beat_baseline: boolean | null;
}

/** `walk_forward` of GET /api/backtests/sweeps/{id} for a walk-forward sweep: the report. */
export interface WalkForwardReport {
  windows: number;
  in_sample_fraction: number;
  anchored: boolean;
  /** Every part has run (before, the figures cover the combinations run so far). */
  complete: boolean;
  objective: string;
  in_sample_objective_mean: number | null;
  out_of_sample_objective_mean: number | null;
  /** Out-of-sample over in-sample objective mean; null when the in-sample mean is not above 0. */
  efficiency: number | null;
  /** The windows' in-sample bests' out-of-sample returns, chained. */
  out_of_sample_return: number | null;
  /** The current parameters' out-of-sample returns, chained. */
  baseline_out_of_sample_return: number | null;
  beat_baseline: { windows: number; of: number; confidence: number };
  most_chosen: { parameters: Record<string, number>; windows: number } | null;
  by_window: WalkForwardWindow[];
}

/**
 * The detail's `walk_forward` is the report for a walk-forward sweep (it has `by_window`); the
 * list echoes the request under the same key, and a detail read without results would too.
 */
export function isWalkForwardReport(wf: unknown): wf is WalkForwardReport {
  return !!wf && typeof wf === "object" && Array.isArray((wf as { by_window?: unknown }).by_window);
}

/** Walk-forward settings in words: `3 rolling windows, 70% in sample`. */
export function walkForwardText(wf: WalkForwardRequest | WalkForwardReport): string {
  const fraction = wf.in_sample_fraction ?? DEFAULT_IN_SAMPLE;
  return `${wf.windows} ${wf.anchored ? "anchored" : "rolling"} window${wf.windows === 1 ? "" : "s"}, ${Math.round(fraction * 100)}% in sample`;
}

/** Runs a combination makes: over the whole range, then each window's two parts. */
export const runsPerCombination = (windows: number) => 1 + 2 * windows;

/** Weekdays in `[start, end)` (YYYY-MM-DD): about the trading days, holidays aside. */
export function weekdaysBetween(start: string, end: string): number | null {
  const a = Date.parse(`${start}T00:00:00Z`);
  const b = Date.parse(`${end}T00:00:00Z`);
  if (!Number.isFinite(a) || !Number.isFinite(b) || b <= a) return null;
  const days = Math.round((b - a) / 86_400_000);
  const first = new Date(a).getUTCDay();
  let n = Math.floor(days / 7) * 5;
  for (let i = 0; i < days % 7; i++) {
    const d = (first + i) % 7;
    if (d !== 0 && d !== 6) n += 1;
  }
  return n;
}

/**
 * The trading days of a window's parts, as the service splits `days` (jobs/sweeps.rs
 * `windows_of`): out-of-sample parts of equal length following one another to the range's end;
 * rolling, every in-sample part the same length; anchored, the first's (later ones grow). Null
 * when the range is too short for that many windows (the service refuses it).
 */
export function walkForwardSplit(days: number, windows: number, fraction: number, anchored: boolean): { in_sample: number; out_of_sample: number } | null {
  if (!(days > 0) || !(windows >= 1) || !(fraction > 0 && fraction < 1)) return null;
  const out = 1 - fraction;
  const step = Math.floor(anchored ? (days * out) / (fraction + windows * out) : (days * out) / (1 + (windows - 1) * out));
  const inSample = days - windows * step;
  if (step <= 0 || inSample <= 0) return null;
  return { in_sample: inSample, out_of_sample: step };
}

/**
 * The geometry of a chart of bars around zero: for each value, the top and height of its bar in
 * a box `height` high, and where zero sits. The scale spans the values and zero; nulls have no bar.
 */
export function barScale(values: (number | null)[], height: number): { zero: number; bars: ({ y: number; h: number } | null)[] } {
  const finite = values.filter((v): v is number => v !== null && Number.isFinite(v));
  const hi = Math.max(0, ...finite);
  const lo = Math.min(0, ...finite);
  const span = hi - lo || 1;
  const at = (v: number) => ((hi - v) / span) * height;
  const zero = at(0);
  return {
    zero,
    bars: values.map((v) => {
      if (v === null || !Number.isFinite(v)) return null;
      const y = Math.min(at(v), zero);
      return { y, h: Math.abs(at(v) - zero) };
    }),
  };
}
