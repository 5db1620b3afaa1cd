// One parameter sweep (GET /api/backtests/sweeps/{id}): its inputs, progress, the best
// combination, a heatmap of the objective over two chosen parameters and the ranked result
// table. Shown in a wide dialog from the Data & Backtests tab. Sweeps publish no event, so the
// dialog reads the sweep again every second while it is queued or running.
import "./data.css";
import "./sweeps.css";
import type { ComponentChildren } from "preact";
import { useEffect, useMemo, useState } from "preact/hooks";
import { get } from "../api";
import { compact, dateTime, fixed, frac, int, money, plain, pnl, sign } from "../format";
import { canOperate } from "../session";
import { breaches, heatmap, type AxisSpec, type HeatCell, type SweepResult } from "../sweep_grid";
import { Badge, ErrorBanner, Modal, Table, onInput, useLoad, type Column } from "../ui";
import { Progress, day, isActive, signedFrac, type Status } from "./backtest_detail";

// ---------------------------------------------------------------------------------------------
// Types (the API's sweep resources)

export interface Constraint {
  max_drawdown?: number | null;
  min_trades?: number | null;
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
  /** Ranked: those meeting the constraint first, then by the objective, highest first. */
  results?: SweepResult[];
  /** The first result when it meets the constraint and has an objective; else null. */
  best?: SweepResult | null;
}

/** What a sweep may rank by, highest first, and how each reads. */
export const OBJECTIVES: { key: string; label: string; show: (v: number | null | undefined) => string; short: (v: number) => string }[] = [
  { key: "sharpe_ratio", label: "Sharpe ratio", show: (v) => fixed(v, 2), short: (v) => fixed(v, 2) },
  { key: "total_return", label: "Total return", show: (v) => signedFrac(v), short: (v) => `${fixed(v * 100, 2)}%` },
  { key: "profit_factor", label: "Profit factor", show: (v) => fixed(v, 2), short: (v) => fixed(v, 2) },
  { key: "win_rate", label: "Win rate", show: (v) => frac(v, 1), short: (v) => `${fixed(v * 100, 0)}%` },
  { key: "expectancy", label: "Expectancy ($ per trade)", show: (v) => pnl(v), short: (v) => compact(v) },
  { key: "final_equity", label: "Final equity", show: (v) => money(v), short: (v) => compact(v) },
];
export const objectiveOf = (key: string) => OBJECTIVES.find((o) => o.key === key) ?? { key, label: key, show: (v: number | null | undefined) => fixed(v, 2), short: (v: number) => fixed(v, 2) };

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
  lines.push(`Return ${signedFrac(r.total_return)} · Sharpe ${fixed(r.sharpe_ratio, 2)} · Max DD ${ddText(r.max_drawdown)} · ${int(r.trade_count)} trades`);
  const broken = breaches(r, s.constraint);
  if (!r.meets_constraint) lines.push(`Breaks the constraint${broken.length ? `: ${broken.join(", ")}` : ""}`);
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
                >
                  {!big && c.row && (
                    <span>
                      {bestCell ? "★ " : ""}
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
    { key: "rank", label: "#", num: true, title: "Rank: by the objective, those breaking the constraint after the others" },
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
              <button class="btn" title="Fill the backtest form with these parameters, this symbol and range" onClick={(ev) => (ev.stopPropagation(), onBacktest(r.parameters))}>
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
  const shown = all ? ranked : ranked.slice(0, LIMIT);
  const breakers = results.filter((r) => !r.meets_constraint).length;
  return (
    <>
      <Table
        testid="sweep-results"
        columns={resultColumns(s, onBacktest)}
        rows={shown}
        rowKey={(r) => String(r.rank)}
        rowClass={(r) => (r.meets_constraint ? "" : "sw-breaker-row")}
        sort={{ key: "rank", desc: false }}
        empty={isActive(s.status) ? "No combination has finished yet." : "No combination completed."}
      />
      <div class="note">
        Ranked by {objectiveOf(s.objective).label.toLowerCase()} (★), highest first
        {breakers ? `; the ${int(breakers)} combination${breakers === 1 ? "" : "s"} breaking the constraint come after the others, marked ✕` : ""}. Click a
        header to sort by it.
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
                <button class="btn" data-testid="backtest-best" onClick={() => backtest(s.best!.parameters)} title="Fill the backtest form with the best parameters, this symbol and range">
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
          {results.length > 0 && (
            <>
              <h3 class="dt-h">Heatmap</h3>
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
