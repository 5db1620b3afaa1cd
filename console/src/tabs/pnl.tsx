// P&L: one session's profit and loss by symbol (chart and table with totals), the completed
// trades with their statistics and a deep dive per trade, and the recommendations the trade
// history supports. Reloads on fills and position changes (throttled); the open positions'
// unrealized P&L of today's session is refreshed every 10 s.
import "./pnl.css";
import { useEffect, useMemo, useState } from "preact/hooks";
import { get, withQuery } from "../api";
import { ChartView, cssVar } from "../chart";
import { useEvents } from "../events";
import { axisLabel, dateTime, duration, fixed, frac, int, money, pnl, price, shiftDay, sign, time, todayNy } from "../format";
import { route } from "../route";
import { TradeDeepDiveModal, humanize } from "../trade_detail";
import type { Trade } from "../types";
import { Badge, ErrorBanner, Field, Section, Stat, Table, onInput, useLoad, useThrottled, type Column, type Loaded } from "../ui";

interface PerfRow {
  symbol: string;
  realized_pnl: number;
  unrealized_pnl: number;
  /** Orders that opened or added to a position in the session. */
  trades: number;
}

interface Strategy {
  strategy_id: string;
  strategy_version: string;
  description: string;
  live: boolean;
}

interface Recommendation {
  recommendation_id: string;
  scope_type: string;
  scope_value: string;
  recommendation_text: string;
  confidence_score: number;
  sample_size: number;
  win_rate: number;
  baseline_win_rate: number;
  win_rate_interval: [number, number];
  average_net_pnl: number;
}

interface Analytics {
  breakeven_threshold: number;
  min_sample_size: number;
  confidence_level: number;
}

/** `scope_type` values of GET /api/trades/recommendations (openapi ScopeType). */
const SCOPE_TYPES: [string, string][] = [
  ["SYMBOL", "Symbol"],
  ["STRATEGY", "Strategy"],
  ["SECTOR", "Sector"],
  ["TIME_OF_DAY", "Time of day"],
  ["PRICE_BAND", "Price band"],
  ["FLOAT_BAND", "Float band"],
  ["RVOL_BAND", "Relative-volume band"],
  ["GAIN_BAND", "Gain band"],
  ["HOLD_TIME", "Hold time"],
  ["DAY_OF_WEEK", "Day of week"],
];
const scopeLabel = (s: string) => SCOPE_TYPES.find(([k]) => k === s)?.[1] ?? humanize(s);

const DATE_RE = /^\d{4}-\d{2}-\d{2}$/;

/** `value`, once it has stopped changing for `ms`. */
function useDebounced<T>(value: T, ms: number): T {
  const [v, setV] = useState(value);
  useEffect(() => {
    const t = setTimeout(() => setV(value), ms);
    return () => clearTimeout(t);
  }, [value, ms]);
  return v;
}

const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);
const cents = (v: number) => Math.round(v * 100) / 100;

export function PnlTab() {
  const params = route.value.params;
  const initialDate = params.get("date") ?? "";
  const [day, setDay] = useState(DATE_RE.test(initialDate) ? initialDate : todayNy());
  const [symbolText, setSymbolText] = useState((params.get("symbol") ?? "").toUpperCase());
  const [strategy, setStrategy] = useState(params.get("strategy_id") ?? "");
  const [allDates, setAllDates] = useState(false);
  const [scope, setScope] = useState("");
  const [open, setOpen] = useState<string | null>(params.get("trade"));
  const symbol = useDebounced(symbolText.trim().toUpperCase(), 350);
  const today = todayNy();

  const perf = useLoad(() => get<PerfRow[]>(withQuery("/api/account/performance", { date: day })), [day]);
  const trades = useLoad(
    () => get<Trade[]>(withQuery("/api/trades", { date: allDates ? undefined : day, symbol, strategy_id: strategy })),
    [day, allDates, symbol, strategy],
  );
  const strategies = useLoad(() => get<Strategy[]>("/api/strategies"));
  const settings = useLoad(() => get<{ analytics?: Analytics }>("/api/settings"));
  const recs = useLoad(() => get<Recommendation[]>(withQuery("/api/trades/recommendations", { scope_type: scope })), [scope]);

  const reload = useThrottled(() => {
    perf.reload();
    trades.reload();
    recs.reload();
  }, 1000);
  useEvents(["execution.created", "position.updated"], reload);
  const reloadSettings = useThrottled(() => {
    settings.reload();
    recs.reload();
  }, 1000);
  useEvents(["settings.updated"], reloadSettings);

  // Unrealized P&L moves with every print, not only on fills: while today's session has an open
  // position, refresh it on the console's 10-second rhythm.
  const holding = day === today && (perf.data ?? []).some((r) => r.unrealized_pnl !== 0);
  useEffect(() => {
    if (!holding) return;
    const timer = setInterval(perf.reload, 10_000);
    return () => clearInterval(timer);
  }, [holding, perf.reload]);

  const setDate = (v: string) => {
    if (DATE_RE.test(v)) setDay(v);
  };

  const analytics = settings.data?.analytics;
  const symbols = useMemo(() => {
    const s = new Set<string>();
    (perf.data ?? []).forEach((r) => s.add(r.symbol));
    (trades.data ?? []).forEach((r) => s.add(r.symbol));
    return [...s].sort();
  }, [perf.data, trades.data]);

  return (
    <div data-testid="tab-pnl" class="pnl-tab">
      <section class="panel">
        <div class="toolbar pnl-session">
          <Field label="Session (New York date)">
            <input type="date" name="date" value={day} onChange={(e) => setDate(e.currentTarget.value)} required />
          </Field>
          <button class="btn" onClick={() => setDay(shiftDay(day, -1))} title="The day before">
            ‹ Previous
          </button>
          <button class="btn" onClick={() => setDay(shiftDay(day, 1))} title="The day after">
            Next ›
          </button>
          <button class="btn ghost" onClick={() => setDay(todayNy())} disabled={day === today}>
            Today
          </button>
          <span class="note">
            {day === today
              ? "Today's session: figures come from the trading engine and update with every fill."
              : "A past session is recomputed from its fills, assuming it started flat (day trading)."}{" "}
            Times are New York time.
          </span>
        </div>
      </section>

      <Performance day={day} perf={perf} />

      <TradesSection
        day={day}
        allDates={allDates}
        setAllDates={setAllDates}
        symbolText={symbolText}
        setSymbolText={setSymbolText}
        strategy={strategy}
        setStrategy={setStrategy}
        strategies={strategies.data ?? []}
        symbols={symbols}
        trades={trades}
        open={open}
        setOpen={setOpen}
        breakeven={analytics?.breakeven_threshold}
      />

      <Recommendations recs={recs} scope={scope} setScope={setScope} analytics={analytics} settingsError={settings.error} />

      {open && <TradeDeepDiveModal tradeId={open} onClose={() => setOpen(null)} />}
    </div>
  );
}

// ---------------------------------------------------------------------------------------------
// Performance by symbol

type PerfSort = { key: "symbol" | "realized_pnl" | "unrealized_pnl" | "total" | "trades"; desc: boolean };

function Performance({ day, perf }: { day: string; perf: Loaded<PerfRow[]> }) {
  const [order, setOrder] = useState<PerfSort>({ key: "total", desc: true });
  const rows = perf.data ?? [];
  const total = (r: PerfRow) => cents(r.realized_pnl + r.unrealized_pnl);
  const realized = cents(sum(rows.map((r) => r.realized_pnl)));
  const unrealized = cents(sum(rows.map((r) => r.unrealized_pnl)));
  const net = cents(realized + unrealized);
  const entries = sum(rows.map((r) => r.trades));
  const gainers = rows.filter((r) => total(r) > 0).length;
  const losers = rows.filter((r) => total(r) < 0).length;

  const sorted = [...rows].sort((a, b) => {
    const v = (r: PerfRow) => (order.key === "total" ? total(r) : r[order.key]);
    const x = v(a);
    const y = v(b);
    return (x < y ? -1 : x > y ? 1 : 0) * (order.desc ? -1 : 1);
  });
  const byTotal = [...rows].sort((a, b) => total(b) - total(a));

  const head = (key: PerfSort["key"], label: string, num = true, title?: string) => {
    const active = order.key === key;
    return (
      <th
        class={num ? "num" : ""}
        title={title}
        onClick={() => setOrder({ key, desc: active ? !order.desc : num })}
        aria-sort={active ? (order.desc ? "descending" : "ascending") : undefined}
      >
        {label}
        {active ? (order.desc ? " ▾" : " ▴") : ""}
      </th>
    );
  };

  return (
    <Section
      title={
        <>
          Performance by symbol <span class="muted">· session {day}</span>
        </>
      }
      actions={perf.loading && perf.data ? <span class="muted">updating…</span> : null}
    >
      <ErrorBanner error={perf.error} />
      <div class="stats" hidden={!!perf.data && rows.length === 0}>
        <Stat label="Net P&L (realized + unrealized)" value={pnl(perf.data ? net : null)} cls={sign(net)} testid="pnl-net" />
        <Stat label="Realized" value={pnl(perf.data ? realized : null)} cls={sign(realized)} />
        <Stat label="Unrealized" value={pnl(perf.data ? unrealized : null)} cls={sign(unrealized)} />
        <Stat label="Symbols traded" value={perf.data ? `${rows.length} (${gainers} up · ${losers} down)` : "—"} />
        <Stat label="Entries" value={perf.data ? int(entries) : "—"} />
      </div>
      {!perf.data && !perf.error ? (
        <div class="note">Loading the session's P&L…</div>
      ) : rows.length === 0 && perf.data ? (
        <div class="empty-state">
          No symbol was traded in the {day} session. Pick another date above; orders placed from Radar, Orders or by a
          strategy show up here once they fill.
        </div>
      ) : (
        <div class="pnl-perf">
          <div class="pnl-chart-wrap">
            <ChartView
              testid="pnl-chart"
              label={`Net P&L by symbol for ${day}`}
              height={Math.max(160, byTotal.length * 28 + 50)}
              deps={[perf.data]}
              config={() => ({
                type: "bar",
                data: {
                  labels: byTotal.map((r) => r.symbol),
                  datasets: [
                    {
                      label: "Net P&L",
                      data: byTotal.map(total),
                      backgroundColor: byTotal.map((r) => (total(r) >= 0 ? cssVar("--up") : cssVar("--down"))),
                      borderRadius: 3,
                      maxBarThickness: 22,
                    },
                  ],
                },
                options: {
                  indexAxis: "y",
                  scales: {
                    x: { ticks: { callback: axisLabel("money") }, grid: { color: cssVar("--grid") } },
                    y: { grid: { display: false } },
                  },
                  plugins: {
                    legend: { display: false },
                    tooltip: {
                      callbacks: {
                        label: (item) => `Net ${pnl(Number(item.parsed.x))}`,
                        afterLabel: (item) => {
                          const r = byTotal[item.dataIndex];
                          return r ? [`Realized ${pnl(r.realized_pnl)}`, `Unrealized ${pnl(r.unrealized_pnl)}`, `Entries ${r.trades}`] : [];
                        },
                      },
                    },
                  },
                },
              })}
            />
          </div>
          <div class="table-wrap">
            <table data-testid="performance-table">
              <thead>
                <tr>
                  {head("symbol", "Symbol", false)}
                  {head("realized_pnl", "Realized")}
                  {head("unrealized_pnl", "Unrealized")}
                  {head("total", "Net P&L")}
                  {head("trades", "Entries", true, "Orders that opened or added to a position in the session")}
                </tr>
              </thead>
              <tbody>
                {sorted.map((r) => (
                  <tr key={r.symbol} data-key={r.symbol}>
                    <td>
                      <strong>{r.symbol}</strong>
                    </td>
                    <td class={`num ${sign(r.realized_pnl)}`}>{pnl(r.realized_pnl)}</td>
                    <td class={`num ${sign(r.unrealized_pnl)}`}>{pnl(r.unrealized_pnl)}</td>
                    <td class={`num strong ${sign(total(r))}`}>{pnl(total(r))}</td>
                    <td class="num">{int(r.trades)}</td>
                  </tr>
                ))}
              </tbody>
              <tfoot>
                <tr>
                  <td>Total · {rows.length}</td>
                  <td class={`num ${sign(realized)}`}>{pnl(realized)}</td>
                  <td class={`num ${sign(unrealized)}`}>{pnl(unrealized)}</td>
                  <td class={`num ${sign(net)}`}>{pnl(net)}</td>
                  <td class="num">{int(entries)}</td>
                </tr>
              </tfoot>
            </table>
          </div>
        </div>
      )}
    </Section>
  );
}

// ---------------------------------------------------------------------------------------------
// Completed trades

interface TradeStats {
  n: number;
  winners: number;
  losers: number;
  breakeven: number;
  net: number;
  gross: number;
  fees: number;
  avgWin: number | null;
  avgLoss: number | null;
  profitFactor: number | null;
  expectancy: number | null;
  avgR: number | null;
  withR: number;
  avgHold: number | null;
  best: Trade | null;
  worst: Trade | null;
}

function tradeStats(rows: Trade[]): TradeStats {
  const n = rows.length;
  const win = rows.filter((t) => t.winner_loser_label === "WINNER");
  const loss = rows.filter((t) => t.winner_loser_label === "LOSER");
  const profit = sum(rows.filter((t) => t.net_pnl > 0).map((t) => t.net_pnl));
  const lossSum = -sum(rows.filter((t) => t.net_pnl < 0).map((t) => t.net_pnl));
  const withR = rows.filter((t) => t.r_multiple !== null);
  const net = cents(sum(rows.map((t) => t.net_pnl)));
  const byNet = [...rows].sort((a, b) => b.net_pnl - a.net_pnl);
  return {
    n,
    winners: win.length,
    losers: loss.length,
    breakeven: n - win.length - loss.length,
    net,
    gross: cents(sum(rows.map((t) => t.gross_pnl))),
    fees: cents(sum(rows.map((t) => t.fees))),
    avgWin: win.length ? sum(win.map((t) => t.net_pnl)) / win.length : null,
    avgLoss: loss.length ? sum(loss.map((t) => t.net_pnl)) / loss.length : null,
    profitFactor: lossSum > 0 ? profit / lossSum : profit > 0 ? Infinity : null,
    expectancy: n ? net / n : null,
    avgR: withR.length ? sum(withR.map((t) => t.r_multiple as number)) / withR.length : null,
    withR: withR.length,
    avgHold: n ? sum(rows.map((t) => t.hold_seconds)) / n : null,
    best: byNet[0] ?? null,
    worst: byNet[byNet.length - 1] ?? null,
  };
}

function TradesSection(props: {
  day: string;
  allDates: boolean;
  setAllDates: (v: boolean) => void;
  symbolText: string;
  setSymbolText: (v: string) => void;
  strategy: string;
  setStrategy: (v: string) => void;
  strategies: Strategy[];
  symbols: string[];
  trades: Loaded<Trade[]>;
  open: string | null;
  setOpen: (id: string) => void;
  breakeven: number | undefined;
}) {
  const { day, allDates, trades } = props;
  const rows = trades.data ?? [];
  const s = useMemo(() => tradeStats(rows), [trades.data]);
  const when = (iso: string) => (allDates ? dateTime(iso) : time(iso));
  const filtered = props.symbolText.trim() !== "" || props.strategy !== "";
  const scopeWords = `${allDates ? "all dates" : `entered on ${day}`}${props.symbolText.trim() ? ` · ${props.symbolText.trim().toUpperCase()}` : ""}${
    props.strategy ? ` · ${props.strategy === "manual" ? "manual" : props.strategy}` : ""
  }`;

  const columns: Column<Trade>[] = [
    { key: "symbol", label: "Symbol", render: (t) => <strong>{t.symbol}</strong> },
    { key: "strategy_id", label: "Strategy", sortValue: (t) => t.strategy_id ?? "", render: (t) => t.strategy_id ?? <span class="muted">manual</span> },
    { key: "entry_time", label: allDates ? "Entry (NY)" : "Entry", render: (t) => <span class="mono">{when(t.entry_time)}</span> },
    { key: "exit_time", label: allDates ? "Exit (NY)" : "Exit", render: (t) => <span class="mono">{when(t.exit_time)}</span> },
    { key: "quantity", label: "Shares", num: true, title: "Most shares held during the trade", render: (t) => int(t.quantity) },
    { key: "entry_price", label: "Entry px", num: true, title: "Average over every buy fill", render: (t) => price(t.entry_price) },
    { key: "exit_price", label: "Exit px", num: true, title: "Average over every sell fill", render: (t) => price(t.exit_price) },
    { key: "net_pnl", label: "Net P&L", num: true, title: "After fees", render: (t) => <strong>{pnl(t.net_pnl)}</strong>, class: (t) => sign(t.net_pnl) },
    { key: "return_pct", label: "Return", num: true, title: "Net P&L over the entry value", render: (t) => frac(t.return_pct), class: (t) => sign(t.return_pct) },
    {
      key: "r_multiple",
      label: "R",
      num: true,
      title: "Net P&L over the dollars put at risk by the entry's stop (— without a stop)",
      render: (t) => (t.r_multiple === null ? "—" : `${fixed(t.r_multiple, 2)}R`),
      class: (t) => sign(t.r_multiple),
    },
    { key: "hold_seconds", label: "Hold", num: true, render: (t) => duration(t.hold_seconds) },
    { key: "exit_reason", label: "Exit reason", render: (t) => <span title={t.exit_reason}>{humanize(t.exit_reason)}</span> },
    { key: "winner_loser_label", label: "Result", render: (t) => <Badge text={t.winner_loser_label} /> },
  ];

  const empty = filtered
    ? `No completed trade matches these filters (${scopeWords}). Clear the symbol or strategy filter, or tick "All dates".`
    : allDates
      ? "No trade has been completed yet. A trade is a round trip: it is listed once the position is flat again."
      : `No trade entered on ${day} has been completed. Open positions are listed once they are flat again; tick "All dates" to see earlier trades.`;

  return (
    <Section
      title={
        <>
          Completed trades <span class="muted">· {scopeWords}</span>
        </>
      }
      actions={trades.loading && trades.data ? <span class="muted">updating…</span> : null}
    >
      <div class="toolbar">
        <Field label="Symbol">
          <input
            name="symbol"
            list="pnl-symbols"
            placeholder="Any"
            value={props.symbolText}
            onInput={(e) => props.setSymbolText(e.currentTarget.value.toUpperCase())}
            maxLength={12}
            autoComplete="off"
          />
          <datalist id="pnl-symbols">
            {props.symbols.map((x) => (
              <option value={x} key={x} />
            ))}
          </datalist>
        </Field>
        <Field label="Strategy">
          <select name="strategy_id" value={props.strategy} onChange={onInput(props.setStrategy)}>
            <option value="">Any</option>
            {props.strategies.map((x) => (
              <option value={x.strategy_id} key={x.strategy_id}>
                {x.strategy_id}
              </option>
            ))}
            <option value="manual">manual (opened by hand)</option>
          </select>
        </Field>
        <label class="pnl-check">
          <input type="checkbox" name="all_dates" checked={allDates} onChange={(e) => props.setAllDates(e.currentTarget.checked)} />
          All dates
        </label>
        {filtered && (
          <button
            class="btn ghost"
            onClick={() => {
              props.setSymbolText("");
              props.setStrategy("");
            }}
          >
            Clear filters
          </button>
        )}
      </div>
      <ErrorBanner error={trades.error} />
      {rows.length > 0 && (
        <div class="pnl-summary" data-testid="trades-summary">
          <div class="pnl-summary-head">
            Of the {s.n} listed trade{s.n === 1 ? "" : "s"}
            {props.breakeven !== undefined && (
              <span class="muted"> · breakeven is a net result within ±{money(props.breakeven)}</span>
            )}
          </div>
          <div class="stats">
            <Stat label="Trades" value={`${s.n} (${s.winners}W · ${s.losers}L · ${s.breakeven}BE)`} />
            <Stat label="Win rate" value={frac(s.n ? s.winners / s.n : null, 0)} />
            <Stat label="Net P&L" value={pnl(s.net)} cls={sign(s.net)} testid="trades-net-pnl" />
            <Stat label="Gross · fees" value={`${pnl(s.gross)} · ${money(s.fees)}`} />
            <Stat label="Avg winner" value={pnl(s.avgWin)} cls={sign(s.avgWin)} />
            <Stat label="Avg loser" value={pnl(s.avgLoss)} cls={sign(s.avgLoss)} />
            <Stat
              label="Profit factor"
              value={s.profitFactor === null ? "—" : s.profitFactor === Infinity ? "∞ (no losses)" : fixed(s.profitFactor, 2)}
              cls={s.profitFactor === null ? "" : s.profitFactor >= 1 ? "up" : "down"}
            />
            <Stat label="Expectancy / trade" value={pnl(s.expectancy)} cls={sign(s.expectancy)} />
            <Stat label={`Avg R (${s.withR} with a stop)`} value={s.avgR === null ? "—" : `${fixed(s.avgR, 2)}R`} cls={sign(s.avgR)} />
            <Stat label="Avg hold" value={duration(s.avgHold)} />
          </div>
        </div>
      )}
      {!trades.data && !trades.error ? (
        <div class="note">Loading trades…</div>
      ) : (
        <Table
          testid="trades-table"
          columns={columns}
          rows={rows}
          rowKey={(t) => t.trade_id}
          onRowClick={(t) => props.setOpen(t.trade_id)}
          selected={props.open}
          empty={empty}
        />
      )}
      {rows.length > 0 && <div class="note">Click a trade for its deep dive: price chart with fills, market at entry, timeline and rules.</div>}
    </Section>
  );
}

// ---------------------------------------------------------------------------------------------
// Recommendations

function Recommendations({
  recs,
  scope,
  setScope,
  analytics,
  settingsError,
}: {
  recs: Loaded<Recommendation[]>;
  scope: string;
  setScope: (v: string) => void;
  analytics: Analytics | undefined;
  settingsError: unknown;
}) {
  const level = analytics?.confidence_level;
  const rows = recs.data ?? [];
  const columns: Column<Recommendation>[] = [
    {
      key: "scope_type",
      label: "Group",
      sortValue: (r) => `${r.scope_type}:${r.scope_value}`,
      render: (r) => (
        <span class="rec-scope">
          <span class="muted">{scopeLabel(r.scope_type)}</span>
          <strong>{r.scope_value}</strong>
        </span>
      ),
    },
    { key: "recommendation_text", label: "Recommendation", render: (r) => <span class="rec-text">{r.recommendation_text}</span> },
    {
      key: "win_rate",
      label: "Win rate",
      num: true,
      title: `Wins of the group, with its ${level ? frac(level, 0) : ""} Wilson interval, against all trades`,
      render: (r) => (
        <span class="rec-rate">
          <strong class={r.win_rate > r.baseline_win_rate ? "up" : r.win_rate < r.baseline_win_rate ? "down" : ""}>{frac(r.win_rate, 0)}</strong>
          <span class="muted">
            {frac(r.win_rate_interval[0], 0)}–{frac(r.win_rate_interval[1], 0)} · all {frac(r.baseline_win_rate, 0)}
          </span>
        </span>
      ),
    },
    { key: "average_net_pnl", label: "Avg net", num: true, title: "Mean net P&L of the group's trades", render: (r) => pnl(r.average_net_pnl), class: (r) => sign(r.average_net_pnl) },
    { key: "sample_size", label: "Trades", num: true, render: (r) => int(r.sample_size) },
    {
      key: "confidence_score",
      label: "Confidence",
      num: true,
      title: "1 − p-value of a two-proportion z-test of the group against the other trades",
      render: (r) => {
        const significant = level !== undefined && r.confidence_score >= level;
        return (
          <span class="rec-conf" title={significant ? "Significant at the configured confidence level" : "Not yet significant"}>
            <span class="progress">
              <div class={significant ? "sig" : "weak"} style={{ width: `${Math.round(Math.max(0, Math.min(1, r.confidence_score)) * 100)}%` }} />
            </span>
            <span class={significant ? "" : "muted"}>
              {/* One decimal where rounding would make a score just short of the level look like it. */}
              {frac(r.confidence_score, level !== undefined && !significant && Math.round(r.confidence_score * 100) >= Math.round(level * 100) ? 1 : 0)}
            </span>
          </span>
        );
      },
    },
  ];
  return (
    <Section
      title={
        <>
          Recommendations <span class="muted">· from every completed trade</span>
        </>
      }
      actions={
        <select name="scope_type" value={scope} onChange={onInput(setScope)} aria-label="Group by">
          <option value="">All groupings</option>
          {SCOPE_TYPES.map(([k, l]) => (
            <option value={k} key={k}>
              {l}
            </option>
          ))}
        </select>
      }
    >
      <div data-testid="recommendations">
        <ErrorBanner error={recs.error} />
        {!recs.data && !recs.error ? (
          <div class="note">Loading recommendations…</div>
        ) : rows.length === 0 && recs.data ? (
          <RecommendationsEmpty scope={scope} analytics={analytics} settingsError={settingsError} />
        ) : (
          <>
            <Table columns={columns} rows={rows} rowKey={(r) => r.recommendation_id} />
            {level !== undefined && (
              <div class="note">
                Advice is given only at {frac(level, 0)} confidence or more; below it the difference may be chance. Groups
                need at least {analytics?.min_sample_size} trades.
              </div>
            )}
          </>
        )}
      </div>
    </Section>
  );
}

function RecommendationsEmpty({ scope, analytics, settingsError }: { scope: string; analytics: Analytics | undefined; settingsError: unknown }) {
  const all = useLoad(() => get<Trade[]>("/api/trades"));
  const min = analytics?.min_sample_size;
  const n = all.data?.length;
  return (
    <div class="empty-state">
      <p>
        No recommendation{scope ? ` grouped by ${scopeLabel(scope).toLowerCase()}` : ""} yet. A recommendation compares a
        group of trades (a symbol, a strategy, a sector, a time of day, a price band…) with all the others, and a group
        needs at least <strong>{min ?? "analytics.min_sample_size"}</strong> completed trades
        {min === undefined ? "" : " (settings: analytics.min_sample_size)"}; a group holding every trade has nothing to
        be compared with.
      </p>
      {n !== undefined && (
        <p class="muted">
          {n === 0
            ? "No trade has been completed yet."
            : `${n} trade${n === 1 ? " has" : "s have"} been completed so far${min !== undefined && n < min ? `: ${min - n} more are needed before any group can qualify` : ""}.`}
        </p>
      )}
      {settingsError ? <p class="muted">The settings could not be read, so the minimum is not shown.</p> : null}
    </div>
  );
}
