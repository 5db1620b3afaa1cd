// One parameter sweep (GET /api/backtests/sweeps/{id}): its inputs, progress, the best
// combination and where the strategy's current parameters rank, the walk-forward report (when
// the sweep had one), a heatmap of the objective over two chosen parameters and the ranked result
// table. Shown in a wide dialog from the Data & Backtests tab. Sweeps publish no event, so the
// dialog reads the sweep again every second while it is queued or running.
import "./data.css";
import "./sweeps.css";
import type { ComponentChildren } from "preact";
import { useEffect, useMemo, useState } from "preact/hooks";
import { get } from "../api";
import { anyValue, compact, dateTime, fixed, frac, int, money, plain, pnl, sign } from "../format";
import { canOperate } from "../session";
import {
  barScale,
  breaches,
  heatmap,
  isWalkForwardReport,
  score,
  walkForwardText,
  type AxisSpec,
  type HeatCell,
  type SweepMetrics,
  type SweepResult,
  type WalkForwardReport,
  type WalkForwardRequest,
  type WalkForwardWindow,
} from "../sweep_grid";
import { Badge, ErrorBanner, Modal, Table, onInput, useLoad, type Column } from "../ui";
import { Progress, day, isActive } from "./backtest_detail";
import { signedFrac } from "./backtest_figures";
import type { Status } from "./backtest_types";

// ---------------------------------------------------------------------------------------------
// Types (the API's sweep resources)

export interface Constraint {
  max_drawdown?: number | null;
  min_trades?: number | null;
}

/** Where the strategy's current parameters (its defaults under the operator's settings) rank. */
export interface SweepBaseline {
  parameters: Record<string, number>;
  /** 1-based, in the results' order. */
  rank: number;
  /** False when they are not a point of the grid: run beside it. */
  in_grid: boolean;
}

/** A row of GET /api/backtests/sweeps; with `results` and `best`, GET /api/backtests/sweeps/{id}. */
export interface SweepView {
  sweep_id: string;
  status: Status;
  /** 0..1 */
  progress: number;
  strategy_id: string;
  symbol: string;
  timeframe: string;
  start: string;
  end: string;
  grid: Record<string, AxisSpec>;
  sample: number | null;
  seed: number;
  objective: string;
  constraint: Constraint;
  /** Combinations queued (the grid's or the sample's, less those skipped). */
  combinations: number;
  completed: number;
  /** Combinations the strategy refused. */
  skipped: number;
  parts: number;
  error: string | null;
  requested_by: string;
  created_at: string;
  /** The simulation inputs every combination ran with (as for a backtest). */
  initial_cash?: number;
  commission_rate?: number;
  slippage_bps?: number;
  fill?: string;
  /** The request's settings overrides, or null. */
  settings?: Record<string, Record<string, unknown>> | null;
  /**
   * The request's walk-forward (the list), or — in the detail of a walk-forward sweep — its
   * report (it has `by_window`: tell them apart with `isWalkForwardReport`); null without one.
   */
  walk_forward?: WalkForwardRequest | WalkForwardReport | null;
  /** The detail only: where the current parameters rank; null when they were not run (yet). */
  baseline?: SweepBaseline | null;
  /** Ranked: those meeting the constraint first, then by the objective, highest first. */
  results?: SweepResult[];
  /** The first result when it meets the constraint and has an objective; else null. */
  best?: SweepResult | null;
}

/** What a sweep may rank by, highest first, and how each reads. */
export const OBJECTIVES: { key: string; label: string; abbr: string; show: (v: number | null | undefined) => string; short: (v: number) => string }[] = [
  { key: "sharpe_ratio", label: "Sharpe ratio", abbr: "Sharpe", show: (v) => fixed(v, 2), short: (v) => fixed(v, 2) },
  { key: "total_return", label: "Total return", abbr: "return", show: (v) => signedFrac(v), short: (v) => `${fixed(v * 100, 2)}%` },
  { key: "profit_factor", label: "Profit factor", abbr: "PF", show: (v) => fixed(v, 2), short: (v) => fixed(v, 2) },
  { key: "win_rate", label: "Win rate", abbr: "win rate", show: (v) => frac(v, 1), short: (v) => `${fixed(v * 100, 0)}%` },
  { key: "expectancy", label: "Expectancy ($ per trade)", abbr: "expectancy", show: (v) => pnl(v), short: (v) => compact(v) },
  { key: "final_equity", label: "Final equity", abbr: "equity", show: (v) => money(v), short: (v) => compact(v) },
];
export const objectiveOf = (key: string) =>
  OBJECTIVES.find((o) => o.key === key) ?? { key, label: key, abbr: key, show: (v: number | null | undefined) => fixed(v, 2), short: (v: number) => fixed(v, 2) };

// ---------------------------------------------------------------------------------------------
// Small shared helpers (also used by the list)

/** A grid axis in words: `5→20 by 5` or `[10, 20]`. */
export function axisText(spec: AxisSpec): string {
  if (Array.isArray(spec)) return `[${spec.map(plain).join(", ")}]`;
  return `${plain(spec.from)}→${plain(spec.to)} by ${plain(spec.step)}`;
}

export const gridText = (grid: Record<string, AxisSpec>) =>
  Object.entries(grid)
    .map(([k, v]) => `${k} ${axisText(v)}`)
    .join(" · ");

export function constraintText(c: Constraint): string {
  const parts: string[] = [];
  if (c.max_drawdown !== null && c.max_drawdown !== undefined) parts.push(`max drawdown ${frac(c.max_drawdown, 1)}`);
  if (c.min_trades !== null && c.min_trades !== undefined) parts.push(`at least ${int(c.min_trades)} trades`);
  return parts.join(", ");
}

export const paramsText = (p: Record<string, number>, only?: string[]) =>
  Object.entries(p)
    .filter(([k]) => !only || only.includes(k))
    .map(([k, v]) => `${k} ${plain(v)}`)
    .join(" · ");

const ddText = (v: number | null | undefined) => (v ? `−${frac(v)}` : frac(v));

/** The settings overrides as `group.key value` pairs. */
export const overrideList = (settings: SweepView["settings"]) =>
  Object.entries(settings ?? {}).flatMap(([g, kv]) =>
    kv && typeof kv === "object" ? Object.entries(kv).map(([k, v]) => [`${g}.${k}`, v] as const) : [[g, kv as unknown] as const],
  );

/** A run's headline figures in words, for a cell's or a window's title. */
const metricsLine = (m: SweepMetrics | null | undefined) =>
  m ? `Return ${signedFrac(m.total_return)} · Sharpe ${fixed(m.sharpe_ratio, 2)} · Max DD ${ddText(m.max_drawdown)} · ${int(m.trade_count)} trades` : "Not run (no bars in the part)";

/** The marker of the strategy's current parameters, in the heatmap, tables and lines. */
const CURRENT = "◆ current";

// ---------------------------------------------------------------------------------------------
// Heatmap

/** The colour of a cell at `level` (0..1) on the theme's sequential scale (sweeps.css). */
const heat = (level: number) => `color-mix(in oklab, var(--heat-hi) ${Math.round(10 + level * 90)}%, var(--heat-lo))`;
/** Cells dark (light theme) or bright (dark theme) enough to need the other text colour. */
const HOT = 0.55;

function cellTitle(cell: HeatCell, s: SweepView, x: string, y: string | null, others: string[]): string {
  const where = `${x} ${plain(cell.x)}${y ? ` · ${y} ${plain(cell.y)}` : ""}`;
  if (!cell.row) return `${where}\nNot run: skipped by the strategy, not drawn in the sample, or not finished yet.`;
  const o = objectiveOf(s.objective);
  const r = cell.row;
  const lines = [
    where,
    `${o.label}: ${o.show(cell.value)}${cell.runs > 1 ? ` (best of ${cell.runs} combinations over ${others.join(", ")})` : ""}`,
  ];
  if (others.length && cell.runs > 1) lines.push(`at ${paramsText(r.parameters, others)}`);
  lines.push(metricsLine(r));
  const broken = breaches(r, s.constraint);
  if (!r.meets_constraint) lines.push(`Breaks the constraint${broken.length ? `: ${broken.join(", ")}` : ""}`);
  const b = cell.baseline;
  if (b === r) lines.push(`◆ The strategy's current parameters${s.baseline ? `, rank ${s.baseline.rank}` : ""}`);
  else if (b) {
    lines.push(
      `◆ The current parameters (${paramsText(b.parameters, others)}) ran here too${s.baseline ? `, rank ${s.baseline.rank}` : ""}: ${o.label} ${o.show(score(b, s.objective))}`,
    );
  }
  return lines.join("\n");
}

function Heatmap({ s, results }: { s: SweepView; results: SweepResult[] }) {
  const params = Object.keys(s.grid);
  const varying = params.filter((p) => new Set(results.map((r) => r.parameters[p])).size > 1);
  // The first two grid axes that vary (in the grid's order), else the first two named.
  const defaults = [...varying, ...params.filter((p) => !varying.includes(p))];
  const [x, setX] = useState(defaults[0]);
  const [y, setY] = useState<string>(defaults[1] ?? "");
  const yParam = y && y !== x ? y : null;
  const others = varying.filter((p) => p !== x && p !== yParam);
  const map = useMemo(() => heatmap(results, s.grid, x, yParam, s.objective), [results, s.grid, x, yParam, s.objective]);
  const o = objectiveOf(s.objective);
  const best = s.best;
  // The cell holding the best combination (its own best, as the first ranked).
  const isBest = (c: HeatCell) => !!best && !!c.row && sameParams(c.row.parameters, best.parameters);
  const big = map.xs.length > 14 || map.ys.length > 30;
  const pick = (which: "x" | "y") => (v: string) => {
    // Choosing the other select's parameter swaps the two.
    if (which === "x") {
      if (v === y) setY(x);
      setX(v);
    } else {
      if (v === x) setX(y || x);
      setY(v);
    }
  };
  return (
    <figure class="sw-heat" data-testid="sweep-heatmap">
      <div class="sw-heat-controls">
        <label>
          Columns{" "}
          <select name="heatmap-x" value={x} onChange={onInput(pick("x"))} data-testid="sweep-heatmap-x">
            {params.map((p) => (
              <option key={p} value={p}>
                {p}
              </option>
            ))}
          </select>
        </label>
        {params.length > 1 && (
          <label>
            Rows{" "}
            <select name="heatmap-y" value={y} onChange={onInput(pick("y"))} data-testid="sweep-heatmap-y">
              {params.map((p) => (
                <option key={p} value={p}>
                  {p}
                </option>
              ))}
            </select>
          </label>
        )}
        <span class="muted">
          Colour: {o.label}, {map.min === null ? "no values yet" : `${o.show(map.min)} (lowest) to ${o.show(map.max)} (highest), as in the legend`}
        </span>
      </div>
      <div class="sw-heat-scroll">
        <div
          class={`sw-heat-grid ${big ? "big" : ""}`}
          style={{ gridTemplateColumns: `auto repeat(${map.xs.length}, minmax(${big ? 14 : 46}px, ${big ? "1fr" : "72px"}))` }}
        >
          {map.cells.map((row, i) => [
            <div key={`y${i}`} class="sw-heat-ylab">
              {map.ys[i] === null ? "" : plain(map.ys[i])}
            </div>,
            ...row.map((c, j) => {
              const bestCell = isBest(c);
              const cls = [
                "sw-cell",
                !c.row ? "empty" : c.level === null ? "na" : c.level > HOT ? "hot" : "",
                c.row && !c.row.meets_constraint ? "breaker" : "",
                bestCell ? "best" : "",
                c.baseline ? "current" : "",
              ].join(" ");
              return (
                <div
                  key={`c${i}-${j}`}
                  class={cls}
                  style={c.level !== null ? { background: heat(c.level) } : undefined}
                  title={cellTitle(c, s, x, yParam, others)}
                  data-testid={bestCell ? "sweep-heatmap-best" : "sweep-heatmap-cell"}
                  data-params={c.row ? JSON.stringify(c.row.parameters) : undefined}
                  data-meets={c.row ? String(c.row.meets_constraint) : undefined}
                  data-baseline={c.baseline ? "true" : undefined}
                >
                  {!big && c.row && (
                    <span>
                      {bestCell ? "★ " : ""}
                      {c.baseline ? <span class="sw-mark">◆ </span> : ""}
                      {c.value === null ? "—" : o.short(c.value)}
                    </span>
                  )}
                </div>
              );
            }),
          ])}
          <div class="sw-heat-corner">{yParam ? `${yParam} ↑ · ${x} →` : `${x} →`}</div>
          {map.xs.map((v, j) => (
            <div key={`x${j}`} class="sw-heat-xlab">
              {big && j % Math.ceil(map.xs.length / 14) !== 0 ? "" : plain(v)}
            </div>
          ))}
        </div>
      </div>
      <figcaption class="sw-heat-caption">
        {others.length > 0 ? (
          <>
            <strong>{others.join(", ")}</strong> {others.length === 1 ? "varies" : "vary"} too: each cell shows the best combination over{" "}
            {others.length === 1 ? "it" : "them"} at that {x}
            {yParam ? ` and ${yParam}` : ""} (as ranked: those meeting the constraint first). Hover a cell for which.
          </>
        ) : (
          <>Each cell is one combination; hover it for its figures.</>
        )}
        {s.baseline && !s.baseline.in_grid && (
          <> The current parameters are not on the grid: they ran beside it, so their values add to the axes (the other cells there are empty).</>
        )}
        <span class="sw-legend">
          <span class="sw-swatch sw-ramp" /> {o.label}, low → high
          <span class="sw-swatch sw-cell breaker" style={{ background: heat(0.5) }} /> breaks the constraint
          <span class="sw-swatch sw-cell empty" /> not run (skipped, not sampled or not finished)
          <span class="sw-swatch sw-cell na" /> {o.label} undefined
          {best && (
            <>
              <span class="sw-swatch sw-cell best" style={{ background: heat(1) }} /> the best
            </>
          )}
          {results.some((r) => r.baseline) && (
            <span class="sw-nowrap">
              <span class="sw-swatch sw-cell current" style={{ background: heat(0.3) }} /> ◆ the strategy's current parameters
            </span>
          )}
        </span>
      </figcaption>
    </figure>
  );
}

function sameParams(a: Record<string, number>, b: Record<string, number>): boolean {
  const ka = Object.keys(a);
  return ka.length === Object.keys(b).length && ka.every((k) => a[k] === b[k]);
}

// ---------------------------------------------------------------------------------------------
// Results

interface Ranked extends SweepResult {
  rank: number;
}

function resultColumns(s: SweepView, onBacktest?: (p: Record<string, number>) => void): Column<Ranked>[] {
  const metric = (key: keyof SweepResult, label: string, show: (r: Ranked) => ComponentChildren, cls?: (r: Ranked) => string, title?: string): Column<Ranked> => ({
    key,
    label: key === s.objective ? `${label} ★` : label,
    num: true,
    title: key === s.objective ? `${title ?? label}: the objective` : title,
    render: show,
    class: (r) => `${cls ? cls(r) : ""} ${key === s.objective ? "sw-obj" : ""}`,
  });
  return [
    {
      key: "rank",
      label: "#",
      num: true,
      title: "Rank: by the objective, those breaking the constraint after the others",
      render: (r) =>
        r.baseline ? (
          <span class="sw-rank-current">
            <span class="sw-current" data-testid="sweep-baseline-row" title="The strategy's current parameters (its defaults under the operator's settings)">
              {CURRENT}
            </span>{" "}
            {r.rank}
          </span>
        ) : (
          r.rank
        ),
    },
    ...Object.keys(s.grid).map(
      (p): Column<Ranked> => ({ key: `p.${p}`, label: p, num: true, sortValue: (r) => r.parameters[p], render: (r) => <span class="mono">{plain(r.parameters[p])}</span> }),
    ),
    metric("total_return", "Return", (r) => signedFrac(r.total_return), (r) => sign(r.total_return)),
    metric("sharpe_ratio", "Sharpe", (r) => fixed(r.sharpe_ratio, 2), undefined, "Annualized Sharpe ratio of daily returns"),
    metric("max_drawdown", "Max DD", (r) => ddText(r.max_drawdown), (r) => (r.max_drawdown ? "down" : ""), "Largest fall from a peak"),
    metric("trade_count", "Trades", (r) => int(r.trade_count)),
    metric("win_rate", "Win rate", (r) => frac(r.win_rate, 1)),
    metric("profit_factor", "PF", (r) => fixed(r.profit_factor, 2), undefined, "Profit factor: gross profit / |gross loss|"),
    ...(s.objective === "expectancy" ? [metric("expectancy", "Expectancy", (r) => pnl(r.expectancy), (r) => sign(r.expectancy))] : []),
    metric("final_equity", "Final equity", (r) => money(r.final_equity)),
    {
      key: "meets_constraint",
      label: "Constraint",
      title: constraintText(s.constraint) || "No constraint",
      sortValue: (r) => (r.meets_constraint ? 1 : 0),
      render: (r) =>
        r.meets_constraint ? (
          <span class="muted">{constraintText(s.constraint) ? "meets" : "—"}</span>
        ) : (
          <span class="down" data-testid="sweep-breaker" title={breaches(r, s.constraint).join(", ")}>
            ✕ {breaches(r, s.constraint).join(" · ") || "breaks the constraint"}
          </span>
        ),
    },
    ...(onBacktest && canOperate.value
      ? [
          {
            key: "actions",
            label: "",
            sortValue: () => 0,
            render: (r: Ranked) => (
              <button class="btn" title="Fill the backtest form with these parameters, this symbol, range and simulation inputs" onClick={(ev) => (ev.stopPropagation(), onBacktest(r.parameters))}>
                Backtest
              </button>
            ),
          } as Column<Ranked>,
        ]
      : []),
  ];
}

function Results({ s, results, onBacktest }: { s: SweepView; results: SweepResult[]; onBacktest?: (p: Record<string, number>) => void }) {
  const [all, setAll] = useState(false);
  const ranked: Ranked[] = useMemo(() => results.map((r, i) => ({ ...r, rank: i + 1 })), [results]);
  const LIMIT = 200;
  // The top ones, and the current parameters wherever they rank.
  const shown = all ? ranked : ranked.filter((r, i) => i < LIMIT || r.baseline);
  const breakers = results.filter((r) => !r.meets_constraint).length;
  return (
    <>
      <Table
        testid="sweep-results"
        columns={resultColumns(s, onBacktest)}
        rows={shown}
        rowKey={(r) => String(r.rank)}
        rowClass={(r) => `${r.meets_constraint ? "" : "sw-breaker-row"} ${r.baseline ? "sw-baseline-row" : ""}`}
        sort={{ key: "rank", desc: false }}
        empty={isActive(s.status) ? "No combination has finished yet." : "No combination completed."}
      />
      <div class="note">
        Ranked by {objectiveOf(s.objective).label.toLowerCase()} (★), highest first
        {breakers ? `; the ${int(breakers)} combination${breakers === 1 ? "" : "s"} breaking the constraint come after the others, marked ✕` : ""}
        {ranked.some((r) => r.baseline) ? `; ${CURRENT} marks the strategy's current parameters` : ""}. Click a header to sort by it.
        {ranked.length > LIMIT && (
          <>
            {" "}
            <button class="btn ghost" onClick={() => setAll(!all)}>
              {all ? `Show the top ${LIMIT}` : `Show all ${int(ranked.length)}`}
            </button>
          </>
        )}
      </div>
    </>
  );
}

// ---------------------------------------------------------------------------------------------
// The current parameters

/** Where the strategy's current parameters rank: "Current parameters (fast 10 · slow 20) rank 4 of 9". */
function BaselineLine({ s, results }: { s: SweepView; results: SweepResult[] }) {
  const b = s.baseline;
  if (!b) return null;
  const row = results.find((r) => r.baseline);
  const o = objectiveOf(s.objective);
  const isBest = !!s.best && sameParams(s.best.parameters, b.parameters);
  const value = row ? score(row, s.objective) : null;
  const bestValue = s.best ? score(s.best, s.objective) : null;
  return (
    <div class="sw-baseline" data-testid="sweep-baseline" data-rank={b.rank} data-of={results.length} data-in-grid={String(b.in_grid)}>
      <span class="sw-current">{CURRENT}</span>
      <span>
        Current parameters (<span class="mono">{paramsText(b.parameters, Object.keys(s.grid))}</span>) rank <strong>{int(b.rank)}</strong> of {int(results.length)}
        {b.in_grid ? "" : ", added beside the grid"}
      </span>
      {row && (
        <span>
          {o.label} <strong>{o.show(value)}</strong>
          {isBest ? " — the best" : bestValue !== null ? <span class="muted"> (best {o.show(bestValue)})</span> : ""}
        </span>
      )}
      {row && <span class={sign(row.total_return)}>return {signedFrac(row.total_return)}</span>}
      {row && !row.meets_constraint && <span class="down">breaks the constraint: {breaches(row, s.constraint).join(", ") || "yes"}</span>}
      <span class="muted dt-small">the strategy's defaults under the operator's settings, run with the grid to compare</span>
    </div>
  );
}

// ---------------------------------------------------------------------------------------------
// Walk-forward

function Figure({ label, value, cls, sub, title, testid, data }: { label: string; value: ComponentChildren; cls?: string; sub?: ComponentChildren; title?: string; testid?: string; data?: Record<string, string> }) {
  const attrs = Object.fromEntries(Object.entries(data ?? {}).map(([k, v]) => [`data-${k}`, v]));
  return (
    <div class="dt-metric" title={title} data-testid={testid} {...attrs}>
      <span class="stat-label">{label}</span>
      <span class={`stat-value ${cls ?? ""}`}>{value}</span>
      {sub !== undefined && <span class="dt-sub">{sub}</span>}
    </div>
  );
}

/** A window's span `[start, end)` as dates. */
const spanText = (sp: { start: string; end: string }) => `${day(sp.start)} → ${day(sp.end)}`;
const spanTitle = (sp: { start: string; end: string }) => `${sp.start} to ${sp.end} (end exclusive)`;

/** Per window, the in-sample best's objective in sample and out of sample, as bars around zero. */
function WindowBars({ wf, objective }: { wf: WalkForwardReport; objective: string }) {
  const o = objectiveOf(objective);
  const rows = wf.by_window;
  const isv = rows.map((w) => score(w.best?.in_sample, objective));
  const oos = rows.map((w) => score(w.best?.out_of_sample, objective));
  const base = rows.map((w) => score(w.baseline?.out_of_sample, objective));
  if ([...isv, ...oos].every((v) => v === null)) return null;
  const H = 96;
  const n = rows.length;
  const bar = n > 12 ? 12 : 20;
  const slot = bar * 2 + (n > 12 ? 10 : 22);
  const left = 64;
  const all = [...isv, ...oos, ...base];
  const { zero, bars } = barScale(all, H);
  const finite = all.filter((v): v is number => v !== null);
  const [hi, lo] = [Math.max(0, ...finite), Math.min(0, ...finite)];
  const width = left + n * slot;
  return (
    <figure class="sw-wf-bars" data-testid="wf-bars">
      <svg width={width} height={H + 18} viewBox={`0 0 ${width} ${H + 18}`} role="img" aria-label={`In-sample and out-of-sample ${o.label} of each window's best`}>
        <line class="sw-wf-zero" x1={left - 4} x2={width} y1={zero} y2={zero} />
        <text x={left - 8} y={9} class="sw-wf-lab" text-anchor="end">
          {o.show(hi)}
        </text>
        {lo < 0 && (
          <text x={left - 8} y={H} class="sw-wf-lab" text-anchor="end">
            {o.show(lo)}
          </text>
        )}
        {zero > 14 && zero < H - 10 && (
          <text x={left - 8} y={zero + 4} class="sw-wf-lab" text-anchor="end">
            0
          </text>
        )}
        {rows.map((w, i) => {
          const x = left + i * slot;
          const a = bars[i];
          const b = bars[n + i];
          const c = bars[2 * n + i];
          return (
            <g key={w.window}>
              <title>
                {`Window ${w.window}: in sample ${o.show(isv[i])}, out of sample ${o.show(oos[i])}${base[i] !== null ? `; current parameters out of sample ${o.show(base[i])}` : ""}`}
              </title>
              <rect x={x} y={0} width={slot - 6} height={H} class="sw-wf-hit" />
              {a && <rect class="sw-wf-is" x={x} y={a.y} width={bar} height={Math.max(a.h, 1)} />}
              {b && <rect class={`sw-wf-oos ${oos[i]! < 0 ? "neg" : ""}`} x={x + bar} y={b.y} width={bar} height={Math.max(b.h, 1)} />}
              {c && <line class="sw-wf-base" x1={x + bar - 2} x2={x + 2 * bar + 2} y1={base[i]! >= 0 ? c.y : c.y + c.h} y2={base[i]! >= 0 ? c.y : c.y + c.h} />}
              <text x={x + bar} y={H + 14} class="sw-wf-lab" text-anchor="middle">
                {w.window}
              </text>
            </g>
          );
        })}
      </svg>
      <figcaption class="sw-legend">
        <span class="sw-swatch sw-wf-is" /> in sample
        <span class="sw-swatch sw-wf-oos" /> out of sample: {o.label} of each window's in-sample best, by window
        <span class="sw-swatch sw-wf-base-swatch" /> {CURRENT} out of sample
      </figcaption>
    </figure>
  );
}

function windowColumns(s: SweepView, wf: WalkForwardReport): Column<WalkForwardWindow>[] {
  const objective = wf.objective || s.objective;
  const o = objectiveOf(objective);
  const keys = Object.keys(s.grid);
  const isBaseline = (w: WalkForwardWindow) => !!w.best && !!s.baseline && sameParams(w.best.parameters, s.baseline.parameters);
  const obj = (key: string, label: string, pick: (w: WalkForwardWindow) => SweepMetrics | null | undefined, title: string): Column<WalkForwardWindow> => ({
    key,
    label,
    num: true,
    title,
    sortValue: (w) => score(pick(w), objective),
    render: (w) => {
      const m = pick(w);
      return <span title={metricsLine(m)}>{m ? o.show(score(m, objective)) : "—"}</span>;
    },
  });
  return [
    { key: "window", label: "#", num: true, title: "Window" },
    {
      key: "in_sample",
      label: "In sample",
      sortValue: (w) => w.in_sample.start,
      render: (w) => <span title={spanTitle(w.in_sample)}>{spanText(w.in_sample)}</span>,
    },
    {
      key: "out_of_sample",
      label: "Out of sample",
      sortValue: (w) => w.out_of_sample.start,
      render: (w) => <span title={spanTitle(w.out_of_sample)}>{spanText(w.out_of_sample)}</span>,
    },
    {
      key: "best",
      label: "Best in sample",
      title: "The combination ranked first in sample (as the table ranks: those keeping the constraint first)",
      sortValue: (w) => (w.best ? paramsText(w.best.parameters, keys) : null),
      render: (w) =>
        w.best ? (
          <span>
            <span class="mono">{paramsText(w.best.parameters, keys)}</span>
            {isBaseline(w) && (
              <span class="sw-current" title="The strategy's current parameters">
                {" "}
                ◆
              </span>
            )}
          </span>
        ) : (
          <span class="muted" title="No combination keeps the constraint with an objective in sample (or none has run yet)">
            none
          </span>
        ),
    },
    obj("is_objective", `IS ${o.abbr}`, (w) => w.best?.in_sample, `The best's ${o.label} in sample`),
    obj("oos_objective", `OOS ${o.abbr}`, (w) => w.best?.out_of_sample, `The best's ${o.label} out of sample, on days it was not chosen on`),
    ...(objective === "total_return"
      ? []
      : [
          {
            key: "oos_return",
            label: "OOS return",
            num: true,
            sortValue: (w: WalkForwardWindow) => w.best?.out_of_sample?.total_return ?? null,
            render: (w: WalkForwardWindow) => signedFrac(w.best?.out_of_sample?.total_return),
            class: (w: WalkForwardWindow) => sign(w.best?.out_of_sample?.total_return),
          } as Column<WalkForwardWindow>,
        ]),
    {
      key: "oos_rank",
      label: "OOS rank",
      num: true,
      title: "Where the in-sample best ranks among every combination out of sample (1: it would have been the best there too)",
      sortValue: (w) => w.best?.out_of_sample_rank ?? null,
      render: (w) => (w.best?.out_of_sample_rank ? `${int(w.best.out_of_sample_rank)} of ${int(w.best.ranked_out_of_sample)}` : "—"),
    },
    obj("baseline_oos", `◆ OOS ${o.abbr}`, (w) => w.baseline?.out_of_sample, `◆ The strategy's current parameters: their ${o.label} out of sample`),
    {
      key: "beat_baseline",
      label: "Beat",
      title: "Whether the in-sample best did better out of sample than the current parameters (—: a tie, the same parameters, or a figure unknown)",
      sortValue: (w) => (w.beat_baseline === null ? null : w.beat_baseline ? 1 : 0),
      render: (w) =>
        w.beat_baseline === true ? (
          <span class="up" title="Beat the current parameters out of sample">✓</span>
        ) : w.beat_baseline === false ? (
          <span class="down" title="Did worse than the current parameters out of sample">✗</span>
        ) : (
          <span class="muted" title={isBaseline(w) ? "The best is the current parameters" : "A tie, or a figure unknown: not counted"}>—</span>
        ),
    },
  ];
}

function WalkForwardSection({ s, wf }: { s: SweepView; wf: WalkForwardReport }) {
  const objective = wf.objective || s.objective;
  const o = objectiveOf(objective);
  const n = wf.by_window.length;
  const beat = wf.beat_baseline;
  const most = wf.most_chosen;
  const lost = beat.of - beat.windows;
  const leaning = beat.windows > lost ? "the re-chosen bests did better" : beat.windows < lost ? "the current parameters did better" : "an even split";
  return (
    <section class="sw-wf-report" data-testid="sweep-walk-forward-report">
      <h3 class="dt-h">
        Walk-forward <span class="muted">· {walkForwardText(wf)}</span>
      </h3>
      <p class="note muted sw-wf-explain">
        Each window chooses its best combination in sample, then trades it unchanged on the days that follow: a best that shines in sample but does poorly out of
        sample is overfitting — the grid fitted noise, not an edge.
      </p>
      {!wf.complete && <div class="banner info">Not every part has run: these figures cover the combinations run so far.</div>}
      <div class="dt-metrics sw-wf-figures">
        <Figure
          label="Out-of-sample return, chained"
          testid="wf-oos-return"
          value={signedFrac(wf.out_of_sample_return)}
          cls={sign(wf.out_of_sample_return)}
          sub={
            <>
              {CURRENT}: <span class={sign(wf.baseline_out_of_sample_return)}>{signedFrac(wf.baseline_out_of_sample_return)}</span>
            </>
          }
          title="Each window's in-sample best traded on its out-of-sample days, one window after another (what choosing again every window would have earned), beside the current parameters over the same days"
        />
        <Figure
          label="Efficiency"
          testid="wf-efficiency"
          value={wf.efficiency === null ? "—" : frac(wf.efficiency, 0)}
          cls={wf.efficiency === null ? "" : wf.efficiency < 0.5 ? "down" : ""}
          sub={`OOS mean ${o.show(wf.out_of_sample_objective_mean)} ÷ IS mean ${o.show(wf.in_sample_objective_mean)}`}
          title={`The bests' mean ${o.label} out of sample over their mean in sample: near 100% holds up; far below, the in-sample figures were luck.${
            wf.efficiency === null ? " Undefined when the in-sample mean is not above 0." : ""
          }`}
        />
        <Figure
          label="Beat the current parameters"
          testid="wf-beat"
          data={{ windows: String(beat.windows), of: String(beat.of), confidence: String(beat.confidence) }}
          value={`${int(beat.windows)} of ${int(beat.of)} window${beat.of === 1 ? "" : "s"}`}
          cls={beat.of ? (beat.windows > lost ? "up" : beat.windows < lost ? "down" : "") : ""}
          sub={beat.of ? `${frac(beat.confidence, 0)} confidence it is not chance · ${leaning}` : "no window to compare"}
          title="Out of sample, by the objective. Ties, and windows whose best is the current parameters, are left out. Confidence: 1 − the two-sided sign test's p-value (with few windows it cannot be high: 3 of 3 is 75%)."
        />
        <Figure
          label="Most chosen"
          testid="wf-most-chosen"
          value={most ? <span class="mono">{paramsText(most.parameters, Object.keys(s.grid))}</span> : "—"}
          sub={
            most
              ? `best in sample in ${int(most.windows)} of ${int(n)} windows${most.windows === 1 && n > 1 ? ": none chosen twice" : ""}${
                  s.baseline && sameParams(most.parameters, s.baseline.parameters) ? ` · ${CURRENT}` : ""
                }`
              : "no window has a best"
          }
          title="The combination chosen in sample most often: stable parameters are chosen again and again"
        />
      </div>
      <WindowBars wf={wf} objective={objective} />
      <Table testid="wf-windows" columns={windowColumns(s, wf)} rows={wf.by_window} rowKey={(w) => String(w.window)} sort={{ key: "window", desc: false }} empty="No window." />
      <div class="note">
        IS: in sample, where each window's best is chosen; OOS: out of sample, the days after, unseen when choosing. Each part is run afresh (indicators warm up inside it).
        The heatmap and results below are over the whole range.
      </div>
    </section>
  );
}

// ---------------------------------------------------------------------------------------------
// The dialog

export function SweepDetailModal({
  id,
  onClose,
  onBacktest,
}: {
  id: string;
  onClose: () => void;
  /** Fills the backtest form with a combination of this sweep. */
  onBacktest?: (s: SweepView, parameters: Record<string, number>) => void;
}) {
  const sweep = useLoad(() => get<SweepView>(`/api/backtests/sweeps/${encodeURIComponent(id)}`), [id]);
  const s = sweep.data;
  // No event follows a sweep: read it again while it runs (less often when its table is large).
  useEffect(() => {
    if (!s || !isActive(s.status)) return;
    const t = window.setTimeout(sweep.reload, s.combinations > 2000 ? 3000 : 1000);
    return () => clearTimeout(t);
  }, [s]);
  const results = s?.results ?? [];
  const backtest = onBacktest && s ? (p: Record<string, number>) => onBacktest(s, p) : undefined;
  const o = objectiveOf(s?.objective ?? "");
  const overrides = overrideList(s?.settings);
  const wf = isWalkForwardReport(s?.walk_forward) ? s.walk_forward : null;

  const title = s ? (
    <>
      Sweep of {s.strategy_id} on {s.symbol} · {s.timeframe} · {day(s.start)} → {day(s.end)} <Badge text={s.status} />
    </>
  ) : (
    `Sweep ${id}`
  );
  return (
    <Modal title={title} onClose={onClose} wide testid="sweep-detail">
      <ErrorBanner error={sweep.error} />
      {!s && !sweep.error && <div class="note">Loading the sweep…</div>}
      {s && (
        <div class="dt-detail sw-detail">
          <div class="dt-runinfo">
            <span class="mono" title="Sweep id">{s.sweep_id}</span>
            <span>requested by {s.requested_by}</span>
            <span>created {dateTime(s.created_at)}</span>
            <span>
              {int(s.completed)} of {int(s.combinations)} combinations done{s.skipped ? ` · ${int(s.skipped)} skipped (refused by the strategy)` : ""}
            </span>
            {s.sample !== null && (
              <span>
                a random sample of {int(s.sample)}, seed {s.seed}
              </span>
            )}
          </div>
          <dl class="kv sw-inputs">
            <dt>Grid</dt>
            <dd class="mono">{gridText(s.grid)}</dd>
            <dt>Objective</dt>
            <dd>{o.label}, highest first</dd>
            <dt>Constraint</dt>
            <dd>{constraintText(s.constraint) || "none"}</dd>
            <dt>Simulation</dt>
            <dd data-testid="sweep-simulation">
              {money(s.initial_cash)} initial cash · commission {frac(s.commission_rate, 3)} of traded value · slippage {fixed(s.slippage_bps, 1)} bps · fill{" "}
              {s.fill ?? "—"}
            </dd>
            <dt>Overrides</dt>
            <dd>
              {overrides.length ? (
                overrides.map(([k, v], i) => (
                  <span key={k} class="mono warn">
                    {i ? " · " : ""}
                    {k} {anyValue(v)}
                  </span>
                ))
              ) : (
                <span class="muted">none: the operator's settings at the request</span>
              )}
            </dd>
            <dt>Walk-forward</dt>
            <dd>{s.walk_forward ? walkForwardText(s.walk_forward) : <span class="muted">none</span>}</dd>
          </dl>
          {s.status === "FAILED" && (
            <div class="banner error" role="alert">
              <strong>The sweep failed.</strong> {s.error ?? "The service recorded no reason."} The combinations that completed are shown below.
            </div>
          )}
          {s.status === "CANCELED" && <div class="banner info">Canceled: the combinations that completed before are shown below.</div>}
          {isActive(s.status) && (
            <div class="banner info">
              {s.status === "QUEUED" ? "Waiting for a worker…" : `Running ${int(s.parts)} part${s.parts === 1 ? "" : "s"}…`} <Progress value={s.progress} />
              <div class="muted">Results fill in as each part completes.</div>
            </div>
          )}
          {s.best ? (
            <div class="sw-best" data-testid="sweep-best">
              <span class="stat-label">Best</span>
              <strong class="mono">{paramsText(s.best.parameters, Object.keys(s.grid))}</strong>
              <span>
                {o.label} <strong>{o.show((s.best as unknown as Record<string, number | null>)[s.objective])}</strong>
              </span>
              <span class={sign(s.best.total_return)}>return {signedFrac(s.best.total_return)}</span>
              <span>max DD {ddText(s.best.max_drawdown)}</span>
              <span>{int(s.best.trade_count)} trades</span>
              {backtest && canOperate.value && !isActive(s.status) && (
                <button
                  class="btn"
                  data-testid="backtest-best"
                  onClick={() => backtest(s.best!.parameters)}
                  title="Fill the backtest form with the best parameters, this symbol, range and simulation inputs (cash, commission, slippage, fill, risk overrides)"
                >
                  Backtest these parameters
                </button>
              )}
            </div>
          ) : (
            results.length > 0 && (
              <div class="banner dt-warn">
                No best: {results.every((r) => !r.meets_constraint) ? "every combination breaks the constraint" : `no combination has a ${o.label.toLowerCase()}`}.
              </div>
            )
          )}
          <BaselineLine s={s} results={results} />
          {wf && <WalkForwardSection s={s} wf={wf} />}
          {results.length > 0 && (
            <>
              <h3 class="dt-h">Heatmap{wf ? <span class="muted"> · the whole range</span> : null}</h3>
              <Heatmap key={s.sweep_id} s={s} results={results} />
            </>
          )}
          <h3 class="dt-h">
            Results <span class="muted">· {int(results.length)}</span>
          </h3>
          <Results s={s} results={results} onBacktest={backtest} />
        </div>
      )}
    </Modal>
  );
}
