// Data & Backtests: run a strategy over stored bars and read the results; replay the whole desk
// over a past stretch of the simulated market or of downloaded days (desk_form.tsx,
// desk_detail.tsx); sweep a strategy's parameters (sweeps.tsx); download bars from the data
// broker; import bars from a CSV file.
// Downloads and backtests run in the background; their rows follow the `download.updated` and
// `backtest.updated` events, which carry the whole list row, so the tables update in place
// without polling (sweeps publish no event: their list polls while one runs).
import "./data.css";
import { useCallback, useEffect, useMemo, useRef, useState } from "preact/hooks";
import { ApiError, call, get, post, withQuery } from "../api";
import { useEvents, type StreamEvent } from "../events";
import { dateTime, fixed, frac, inputNumber, int, money, plain } from "../format";
import { navigate, route } from "../route";
import { canOperate } from "../session";
import type { RadarRow } from "../types";
import { Badge, ErrorBanner, Field, Section, Table, notify, onInput, useLoad, useThrottled, type Column } from "../ui";
import { BacktestDetailModal, StatusCell, day, isActive, isDesk } from "./backtest_detail";
import { signedFrac } from "./backtest_figures";
import type { BacktestDetail, BacktestRow } from "./backtest_types";
import {
  FILLS,
  FormActions,
  RISK_FIELDS,
  RangeFields,
  TIMEFRAMES,
  daysAgo,
  defaultDays,
  parseNum,
  rfc,
  shortId,
  toApiError,
  toInput,
  tomorrow,
  useFormErrors,
  type RiskControls,
  type Strategy,
} from "./data_form";
import { deskRange, deskSourceText } from "./desk_detail";
import { DeskForm, deskFormFrom, type DeskSeed } from "./desk_form";
import { overrideList } from "./sweep_detail";
import { Sweeps, type SweepPick } from "./sweeps";

// ---------------------------------------------------------------------------------------------
// Types

interface DownloadJob {
  request_id: string;
  symbol: string;
  timeframe: string;
  start: string;
  end: string;
  status: string;
  /** 0..1 */
  progress: number;
  bars: number;
  created_at: string;
  finished_at: string | null;
  error: string | null;
}

const MAX_IMPORT_BYTES = 50 * 1024 * 1024;

// ---------------------------------------------------------------------------------------------
// Helpers

const num = plain;

function upsert<T>(rows: T[], row: T, key: (r: T) => string): T[] {
  const k = key(row);
  const i = rows.findIndex((r) => key(r) === k);
  if (i < 0) return [row, ...rows];
  const next = rows.slice();
  next[i] = row;
  return next;
}

/**
 * A list that follows its event: each event carries a whole row, which replaces the row of the
 * same key (or is added). Rows arriving while a reload is in flight are laid over its answer.
 */
function useLiveRows<T>(path: string, kind: string, key: (r: T) => string) {
  const [rows, setRows] = useState<T[] | undefined>(undefined);
  const [error, setError] = useState<ApiError | undefined>(undefined);
  const seq = useRef(0);
  const pending = useRef(new Map<string, T>());
  const load = useCallback(() => {
    const n = ++seq.current;
    pending.current = new Map();
    get<T[]>(path).then(
      (r) => {
        if (n !== seq.current) return;
        let merged = r;
        pending.current.forEach((row) => (merged = upsert(merged, row, key)));
        pending.current = new Map();
        setRows(merged);
        setError(undefined);
      },
      (e) => n === seq.current && setError(toApiError(e)),
    );
  }, [path]);
  useEffect(load, [load]);
  const reload = useThrottled(load, 1000);
  const onEvent = useCallback(
    (e: StreamEvent) => {
      const row = e.data as T | undefined;
      const k = row && typeof row === "object" ? key(row) : undefined;
      if (!k) return reload(); // not a whole row: reload the list
      pending.current.set(k, row!);
      setRows((prev) => (prev ? upsert(prev, row!, key) : prev));
    },
    [reload],
  );
  useEvents([kind], onEvent);
  return { rows, error, reload };
}

const backtestKey = (r: BacktestRow) => r.backtest_id;
const downloadKey = (r: DownloadJob) => r.request_id;

// ---------------------------------------------------------------------------------------------
// Backtest run form

interface RunForm {
  strategy_id: string;
  symbol: string;
  timeframe: string;
  start: string;
  end: string;
  datesTouched: boolean;
  initial_cash: string;
  commission_rate: string;
  slippage_bps: string;
  fill: string;
  params: Record<string, string>;
  risk: Record<string, string>;
}

/** A fill of the run form from elsewhere in the tab; `n` changes on each. */
interface Seed {
  n: number;
  form: Partial<RunForm>;
  openRisk?: boolean;
}

const paramDefaults = (s: Strategy | undefined) =>
  Object.fromEntries((s?.parameters ?? []).map((p) => [p.name, p.default === null || p.default === undefined ? "" : String(p.default)]));

function blankForm(s: Strategy | undefined): RunForm {
  const tf = s?.timeframes[0] ?? "1m";
  return {
    strategy_id: s?.strategy_id ?? "",
    symbol: "",
    timeframe: tf,
    start: daysAgo(defaultDays(tf)),
    end: tomorrow(),
    datesTouched: false,
    initial_cash: "100000",
    commission_rate: "0",
    slippage_bps: "0",
    fill: "NEXT_OPEN",
    params: paramDefaults(s),
    risk: {},
  };
}

/** A form filled from an earlier run, for "Edit & run again". */
function formFromRun(r: BacktestDetail): RunForm {
  const rc = (r.settings?.["risk_controls"] ?? {}) as Record<string, unknown>;
  return {
    strategy_id: r.strategy_id,
    symbol: r.symbol,
    timeframe: r.timeframe,
    start: toInput(r.start),
    end: toInput(r.end),
    datesTouched: true,
    initial_cash: String(r.initial_cash ?? ""),
    commission_rate: String(r.commission_rate ?? ""),
    slippage_bps: String(r.slippage_bps ?? ""),
    fill: r.fill ?? "NEXT_OPEN",
    params: Object.fromEntries(Object.entries(r.parameters ?? {}).map(([k, v]) => [k, typeof v === "number" ? inputNumber(v) : String(v)])),
    risk: Object.fromEntries(RISK_FIELDS.filter((f) => rc[f.key] !== undefined && rc[f.key] !== null).map((f) => [f.key, String(rc[f.key])])),
  };
}

function BacktestForm({
  strategies,
  seed,
  live,
  onQueued,
}: {
  strategies: Strategy[];
  seed: Seed | null;
  live: RiskControls | undefined;
  onQueued: (id: string) => void;
}) {
  const [f, setF] = useState<RunForm>(() => blankForm(strategies[0]));
  const [busy, setBusy] = useState(false);
  const [riskOpen, setRiskOpen] = useState(false);
  const box = useRef<HTMLFormElement>(null);
  const strategy = strategies.find((s) => s.strategy_id === f.strategy_id);
  const errs = useFormErrors(
    (k) =>
      ["strategy_id", "symbol", "timeframe", "start", "end", "initial_cash", "commission_rate", "slippage_bps", "fill"].includes(k) ||
      (k.startsWith("parameters.") && !!strategy?.parameters.some((p) => `parameters.${p.name}` === k)) ||
      RISK_FIELDS.some((r) => `settings.risk_controls.${r.key}` === k),
  );
  const e = errs.fields;

  // Strategies arrive after the first render.
  useEffect(() => {
    if (!f.strategy_id && strategies.length) setF(blankForm(strategies[0]));
  }, [strategies]);

  // "Edit & run again" and "Backtest these bars" fill the form.
  useEffect(() => {
    if (!seed) return;
    setF((prev) => {
      const next = { ...prev, ...seed.form };
      const s = strategies.find((x) => x.strategy_id === next.strategy_id);
      // A new strategy starts from its defaults; the same one keeps the values entered.
      if (!seed.form.params && next.strategy_id !== prev.strategy_id) next.params = paramDefaults(s);
      if (s && !s.timeframes.includes(next.timeframe)) next.timeframe = s.timeframes[0];
      return next;
    });
    if (seed.openRisk || (seed.form.risk && Object.keys(seed.form.risk).length)) setRiskOpen(true);
    errs.setError(undefined);
    box.current?.scrollIntoView({ behavior: "smooth", block: "start" });
  }, [seed?.n]);

  const set = (k: keyof RunForm) => (v: string) => setF((p) => ({ ...p, [k]: v }));
  const setTimeframe = (tf: string) =>
    setF((p) => ({ ...p, timeframe: tf, ...(p.datesTouched ? {} : { start: daysAgo(defaultDays(tf)), end: tomorrow() }) }));
  const setStrategy = (id: string) =>
    setF((p) => {
      const s = strategies.find((x) => x.strategy_id === id);
      const tf = s && !s.timeframes.includes(p.timeframe) ? s.timeframes[0] : p.timeframe;
      const dates = tf !== p.timeframe && !p.datesTouched ? { start: daysAgo(defaultDays(tf)), end: tomorrow() } : {};
      return { ...p, strategy_id: id, timeframe: tf, params: paramDefaults(s), ...dates };
    });

  const submit = async (ev: Event) => {
    ev.preventDefault();
    const local: Record<string, string> = {};
    const symbol = f.symbol.trim().toUpperCase();
    if (!symbol) local["symbol"] = "Enter a symbol.";
    if (!f.start) local["start"] = "Pick a start day.";
    if (!f.end) local["end"] = "Pick an end day.";
    const body: Record<string, unknown> = { strategy_id: f.strategy_id, symbol, timeframe: f.timeframe, start: rfc(f.start), end: rfc(f.end), fill: f.fill };
    for (const k of ["initial_cash", "commission_rate", "slippage_bps"] as const) {
      const v = parseNum(f[k]);
      if (v === undefined) continue;
      if (Number.isNaN(v)) local[k] = "Not a number.";
      else body[k] = v;
    }
    const params: Record<string, number> = {};
    for (const p of strategy?.parameters ?? []) {
      const v = parseNum(f.params[p.name] ?? "");
      if (v === undefined) continue;
      if (Number.isNaN(v)) local[`parameters.${p.name}`] = "Not a number.";
      else params[p.name] = v;
    }
    if (Object.keys(params).length) body["parameters"] = params;
    const risk: Record<string, number> = {};
    for (const r of RISK_FIELDS) {
      const v = parseNum(f.risk[r.key] ?? "");
      if (v === undefined) continue;
      if (Number.isNaN(v)) local[`settings.risk_controls.${r.key}`] = "Not a number.";
      else risk[r.key] = v;
    }
    if (Object.keys(risk).length) body["settings"] = { risk_controls: risk };
    if (Object.keys(local).length) {
      errs.setError(new ApiError(400, "VALIDATION_ERROR", "Check the marked fields.", { errors: Object.entries(local).map(([field, reason]) => ({ field, reason })) }));
      if (Object.keys(local).some((k) => k.startsWith("settings."))) setRiskOpen(true);
      return;
    }
    setBusy(true);
    errs.setError(undefined);
    try {
      const r = await post<{ backtest_id: string; status: string }>("/api/backtests/run", body);
      notify("ok", `Backtest queued: ${f.strategy_id} on ${symbol} (${r.backtest_id}). Its row below follows the run.`);
      onQueued(r.backtest_id);
    } catch (err) {
      const ae = toApiError(err);
      errs.setError(ae);
      if (Object.keys(ae.fieldErrors).some((k) => k.startsWith("settings."))) setRiskOpen(true);
    } finally {
      setBusy(false);
    }
  };

  if (!strategies.length) return <div class="note">Loading strategies…</div>;
  const riskCount = RISK_FIELDS.filter((r) => (f.risk[r.key] ?? "").trim() !== "").length;

  return (
    <form ref={box} data-testid="backtest-form" onSubmit={submit} noValidate class="dt-form">
      <div class="form-grid">
        <Field label="Strategy" error={e["strategy_id"]}>
          <select name="strategy_id" value={f.strategy_id} onChange={onInput(setStrategy)}>
            {strategies.map((s) => (
              <option key={s.strategy_id} value={s.strategy_id}>
                {s.strategy_id} ({s.timeframes.join(", ")})
              </option>
            ))}
          </select>
        </Field>
        <Field label="Symbol" error={e["symbol"]} hint="Bars are downloaded first when none are stored.">
          <input name="symbol" list="dt-symbols" value={f.symbol} onInput={(ev) => set("symbol")(ev.currentTarget.value.toUpperCase())} placeholder="e.g. XEX" autoComplete="off" required />
        </Field>
        <Field label="Timeframe" error={e["timeframe"]} hint={strategy && strategy.timeframes.length === 1 ? `${strategy.strategy_id} runs on ${strategy.timeframes[0]} only.` : undefined}>
          <select name="timeframe" value={f.timeframe} onChange={onInput(setTimeframe)}>
            {(strategy?.timeframes ?? TIMEFRAMES).map((t) => (
              <option key={t} value={t}>
                {t === "1m" ? "1m — one-minute bars" : t === "1d" ? "1d — daily bars" : t}
              </option>
            ))}
          </select>
        </Field>
        <RangeFields start={f.start} end={f.end} timeframe={f.timeframe} errors={e} setRange={(start, end, touched) => setF((p) => ({ ...p, start, end, datesTouched: touched }))} />
      </div>
      {strategy && (
        <p class="note dt-desc">
          <strong>{strategy.strategy_id}</strong> {strategy.live ? <Badge text="may trade live" kind="active" /> : <Badge text="backtest only" />} {strategy.description}
        </p>
      )}
      {strategy && strategy.parameters.length > 0 && (
        <>
          <h3 class="dt-formhead">Strategy parameters</h3>
          <div class="form-grid">
            {strategy.parameters.map((p) => (
              <Field
                key={p.name}
                label={p.name}
                error={e[`parameters.${p.name}`]}
                hint={`${p.description} Default ${num(p.default)}; ${num(p.minimum)} to ${num(p.maximum)}${p.kind === "INTEGER" ? ", whole" : ""}.`}
              >
                <input
                  type="number"
                  name={`param.${p.name}`}
                  value={f.params[p.name] ?? ""}
                  step={p.kind === "INTEGER" ? 1 : "any"}
                  min={p.minimum ?? undefined}
                  max={p.maximum ?? undefined}
                  placeholder={num(p.default)}
                  onInput={(ev) => {
                    const v = ev.currentTarget.value;
                    setF((prev) => ({ ...prev, params: { ...prev.params, [p.name]: v } }));
                  }}
                />
              </Field>
            ))}
          </div>
        </>
      )}
      <h3 class="dt-formhead">Simulation</h3>
      <div class="form-grid">
        <Field label="Initial cash ($)" error={e["initial_cash"]} hint="Default $100,000.">
          <input type="number" name="initial_cash" min={1} step="any" value={f.initial_cash} onInput={onInput(set("initial_cash"))} placeholder="100000" />
        </Field>
        <Field label="Commission rate" error={e["commission_rate"]} hint={`Fraction of traded value per fill (0.001 = 0.1%), 0 to 0.1.${parseNum(f.commission_rate) ? ` Now ${frac(parseNum(f.commission_rate), 3)}.` : ""}`}>
          <input type="number" name="commission_rate" min={0} max={0.1} step="any" value={f.commission_rate} onInput={onInput(set("commission_rate"))} placeholder="0" />
        </Field>
        <Field label="Slippage (bps)" error={e["slippage_bps"]} hint="Basis points each fill moves against the order.">
          <input type="number" name="slippage_bps" min={0} step="any" value={f.slippage_bps} onInput={onInput(set("slippage_bps"))} placeholder="0" />
        </Field>
        <Field label="Fill" error={e["fill"]} hint={f.fill === "NEXT_OPEN" ? "Market orders fill at the next bar's open." : "Market orders fill at the signal bar's close."}>
          <select name="fill" value={f.fill} onChange={onInput(set("fill"))}>
            {FILLS.map((x) => (
              <option key={x} value={x}>
                {x}
              </option>
            ))}
          </select>
        </Field>
      </div>
      <details class="dt-risk" open={riskOpen} onToggle={(ev) => setRiskOpen((ev.currentTarget as HTMLDetailsElement).open)} data-testid="risk-overrides">
        <summary>
          Risk overrides for this run <span class="muted">· {riskCount ? `${riskCount} set` : "none: the run trades under the operator's risk settings"}</span>
        </summary>
        <p class="note">
          The backtest goes through the same risk gate as live trading. Raise these when the gate refuses the strategy's orders (a
          run's detail lists the refusals). They apply to this run only; leave a field empty to keep the live value.
        </p>
        <div class="form-grid">
          {RISK_FIELDS.map((r) => {
            const current = live?.[r.key];
            return (
              <Field key={r.key} label={r.label} error={e[`settings.risk_controls.${r.key}`]} hint={`${r.hint} Live: ${current === undefined ? "—" : num(current)}.`}>
                <input
                  type="number"
                  name={`risk.${r.key}`}
                  min={0}
                  step={r.integer ? 1 : "any"}
                  value={f.risk[r.key] ?? ""}
                  placeholder={current === undefined ? "" : `live ${num(current)}`}
                  onInput={(ev) => {
                    const v = ev.currentTarget.value;
                    setF((prev) => ({ ...prev, risk: { ...prev.risk, [r.key]: v } }));
                  }}
                />
              </Field>
            );
          })}
        </div>
      </details>
      <ErrorBanner error={errs.banner} />
      <FormActions
        testid="run-backtest"
        label="Run backtest"
        busy={busy}
        disabled={!f.strategy_id}
        onReset={() => {
          setF(blankForm(strategy ?? strategies[0]));
          setRiskOpen(false);
          errs.setError(undefined);
        }}
        errs={errs}
        idle="Runs execute in the background; each row below shows its progress live."
      />
    </form>
  );
}

// ---------------------------------------------------------------------------------------------
// Backtests list

function paramSummary(p: Record<string, number> | null | undefined): string {
  return Object.entries(p ?? {})
    .map(([k, v]) => `${k} ${num(v)}`)
    .join(" · ");
}

/** A desk replay's overrides in words, for its row: "auto-watch top 5 · max daily loss $500". */
function deskSummary(o: BacktestRow["settings"]): string {
  const alloc = (o?.["strategy_allocator"] ?? {}) as Record<string, unknown>;
  const risk = (o?.["risk_controls"] ?? {}) as Record<string, unknown>;
  const parts: string[] = [];
  if (alloc["auto_watch"] === false) parts.push("auto-watch off");
  else if (alloc["auto_watch"] === true) parts.push(typeof alloc["auto_watch_top_n"] === "number" ? `auto-watch top ${alloc["auto_watch_top_n"]}` : "auto-watch on");
  if (typeof risk["max_daily_loss"] === "number") parts.push(`max daily loss ${money(risk["max_daily_loss"])}`);
  return parts.length ? parts.join(" · ") : "the live settings";
}

function backtestColumns(): Column<BacktestRow>[] {
  return [
    { key: "backtest_id", label: "Run", render: (r) => <span class="mono" title={r.backtest_id}>{shortId(r.backtest_id)}</span> },
    {
      key: "strategy_id",
      label: "Strategy",
      render: (r) => (
        <span class="dt-two">
          <span>
            {r.strategy_id}
            {r.settings && Object.keys(r.settings).length > 0 && (
              <span class="dt-flag" title={`Overrides for this run: ${JSON.stringify(r.settings)}`}>
                {" "}
                overrides
              </span>
            )}
          </span>
          {isDesk(r) ? (
            <span class="muted dt-small dt-clip" title={deskSummary(r.settings)}>
              {deskSummary(r.settings)}
            </span>
          ) : (
            <span class="muted dt-small dt-clip" title={paramSummary(r.parameters)}>
              {paramSummary(r.parameters)}
            </span>
          )}
        </span>
      ),
    },
    {
      key: "symbol",
      label: "Symbol",
      sortValue: (r) => (isDesk(r) ? "" : r.symbol),
      render: (r) =>
        isDesk(r) ? (
          <span class="desk-tag" data-testid="desk-row-tag" title={`A whole-desk replay of the ${deskSourceText(r)}: every symbol the allocator watched, traded as the live desk would have`}>
            Desk replay
          </span>
        ) : (
          <strong>{r.symbol}</strong>
        ),
    },
    { key: "timeframe", label: "TF", render: (r) => (isDesk(r) ? <span class="muted" title="The live feed's 15-second prints">15s</span> : r.timeframe) },
    {
      key: "start",
      label: "Range",
      render: (r) =>
        isDesk(r) ? (
          <span title={`${r.start} to ${r.end}, market time`}>{deskRange(r.start, r.end)}</span>
        ) : (
          <span title={`${r.start} to ${r.end} (end exclusive)`}>
            {day(r.start)} → {day(r.end)}
          </span>
        ),
    },
    {
      key: "status",
      label: "Status",
      render: (r) => (
        <span class="dt-two">
          <StatusCell status={r.status} progress={r.progress} />
          {r.status === "FAILED" && r.error && (
            <span class="down dt-small dt-clip" title={r.error}>
              {r.error}
            </span>
          )}
        </span>
      ),
    },
    { key: "total_return", label: "Return", num: true, render: (r) => signedFrac(r.total_return), class: (r) => (r.total_return ? (r.total_return > 0 ? "up" : "down") : "") },
    { key: "sharpe_ratio", label: "Sharpe", num: true, title: "Annualized Sharpe ratio of daily returns", render: (r) => fixed(r.sharpe_ratio, 2) },
    { key: "max_drawdown", label: "Max DD", num: true, title: "Largest fall from a peak", render: (r) => (r.max_drawdown ? `−${frac(r.max_drawdown)}` : frac(r.max_drawdown)), class: (r) => (r.max_drawdown ? "down" : "") },
    { key: "win_rate", label: "Win rate", num: true, render: (r) => frac(r.win_rate, 1) },
    { key: "profit_factor", label: "PF", num: true, title: "Profit factor: gross profit / |gross loss|", render: (r) => fixed(r.profit_factor, 2) },
    {
      key: "trade_count",
      label: "Trades",
      num: true,
      title: "Trades, and orders the risk gate refused (by rule on hover)",
      render: (r) => {
        const refused = Object.entries(r.refusals ?? {}).filter(([, n]) => n > 0);
        if (refused.length === 0) return int(r.trade_count);
        const total = refused.reduce((s, [, n]) => s + n, 0);
        return (
          <span title={refused.map(([rule, n]) => `${rule} × ${n}`).join(", ")} data-testid="backtest-row-refusals">
            {int(r.trade_count)} <span class="warn">· {int(total)} refused</span>
          </span>
        );
      },
    },
    { key: "requested_by", label: "By" },
    { key: "created_at", label: "Created (NY)", render: (r) => dateTime(r.created_at) },
  ];
}

// ---------------------------------------------------------------------------------------------
// Downloads

function DownloadForm({ onQueued }: { onQueued: (id: string) => void }) {
  const [symbol, setSymbol] = useState("");
  const [timeframe, setTf] = useState("1d");
  const [range, setRangeState] = useState({ start: daysAgo(defaultDays("1d")), end: tomorrow(), touched: false });
  const [busy, setBusy] = useState(false);
  const errs = useFormErrors((k) => ["symbol", "timeframe", "start", "end"].includes(k));
  const submit = async (ev: Event) => {
    ev.preventDefault();
    const s = symbol.trim().toUpperCase();
    setBusy(true);
    errs.setError(undefined);
    try {
      const r = await post<{ request_id: string; status: string }>("/api/data/download", { symbol: s, timeframe, start: rfc(range.start), end: rfc(range.end) });
      notify("ok", `Download of ${s} ${timeframe} bars queued (${r.request_id}).`);
      onQueued(r.request_id);
    } catch (err) {
      errs.setError(toApiError(err));
    } finally {
      setBusy(false);
    }
  };
  return (
    <form data-testid="download-form" onSubmit={submit} noValidate>
      <div class="form-grid">
        <Field label="Symbol" error={errs.fields["symbol"]}>
          <input name="symbol" list="dt-symbols" value={symbol} onInput={(ev) => setSymbol(ev.currentTarget.value.toUpperCase())} placeholder="e.g. XEX" autoComplete="off" required />
        </Field>
        <Field label="Timeframe" error={errs.fields["timeframe"]}>
          <select
            name="timeframe"
            value={timeframe}
            onChange={(ev) => {
              const tf = ev.currentTarget.value;
              setTf(tf);
              if (!range.touched) setRangeState({ start: daysAgo(defaultDays(tf)), end: tomorrow(), touched: false });
            }}
          >
            <option value="1d">1d — daily bars</option>
            <option value="1m">1m — one-minute bars</option>
          </select>
        </Field>
        <RangeFields start={range.start} end={range.end} timeframe={timeframe} errors={errs.fields} setRange={(start, end, touched) => setRangeState({ start, end, touched })} />
      </div>
      <ErrorBanner error={errs.banner} />
      <div class="dt-actions">
        <button type="submit" class="btn primary" data-testid="download-submit" disabled={busy || !symbol.trim()}>
          {busy ? "Queuing…" : "Download bars"}
        </button>
        <span class="muted">Bars already stored for the range are replaced by the broker's.</span>
      </div>
    </form>
  );
}

// ---------------------------------------------------------------------------------------------
// CSV import

interface CsvIssue {
  line: number;
  reason: string;
}

type ImportOutcome =
  | { ok: true; file: string; symbol: string; timeframe: string; bars: number }
  | { ok: false; file: string; error: ApiError; line?: number; reason?: string; excerpt: { n: number; text: string }[]; others: CsvIssue[] };

/** POST /api/data/import: the file as `text/csv`. */
async function sendCsv(symbol: string, timeframe: string, file: Blob): Promise<{ symbol: string; timeframe: string; bars: number }> {
  const path = withQuery("/api/data/import", { symbol, timeframe });
  return (await call<{ symbol: string; timeframe: string; bars: number }>("POST", path, { raw: file, contentType: "text/csv" })).data;
}

const DECIMAL = /^[+-]?(\d+\.?\d*|\.\d+)$/;

/**
 * The other rows a refused file would be refused for, checked in the browser with the
 * service's rules (docs: csv_bars): field count, positive prices with at most 4 decimals, high
 * and low bracketing open and close, whole volumes, no repeated time. A guide for fixing the
 * file in one pass; the service's verdict is the line it names.
 */
function scanCsv(text: string, limit = 25): CsvIssue[] {
  const lines = text.split("\n").map((l) => l.replace(/\r$/, ""));
  const out: CsvIssue[] = [];
  let i = lines.findIndex((l) => l.trim() !== "");
  if (i < 0) return out;
  const names = lines[i].replace(/^\uFEFF/, "").split(",").map((h) => h.trim().toLowerCase());
  const time = ["timestamp", "datetime", "date", "time"].map((n) => names.indexOf(n)).find((x) => x >= 0);
  const idx = ["open", "high", "low", "close", "volume"].map((n) => names.indexOf(n));
  if (time === undefined || idx.some((x) => x < 0)) return out;
  const seen = new Set<string>();
  for (i = i + 1; i < lines.length && out.length < limit; i++) {
    const row = lines[i];
    if (row.trim() === "") continue;
    const line = i + 1;
    const cells = row.split(",").map((c) => c.trim());
    if (cells.length !== names.length) {
      out.push({ line, reason: `${cells.length} fields where the header has ${names.length}` });
      continue;
    }
    const bad = (reason: string) => out.push({ line, reason });
    const prices: number[] = [];
    let ok = true;
    for (const [j, name] of ["open", "high", "low", "close"].entries()) {
      const c = cells[idx[j]];
      if (!DECIMAL.test(c)) {
        bad(`${name} "${c}" is not a number`);
        ok = false;
        break;
      }
      const v = Number(c);
      if (v <= 0) {
        bad(`${name} must be positive`);
        ok = false;
        break;
      }
      const dec = c.includes(".") ? c.split(".")[1].replace(/0+$/, "").length : 0;
      if (dec > 4) {
        bad(`${name} has more than 4 decimal places`);
        ok = false;
        break;
      }
      prices.push(v);
    }
    if (!ok) continue;
    const vol = cells[idx[4]];
    if (!DECIMAL.test(vol) || Number(vol) < 0 || !Number.isInteger(Number(vol))) {
      bad(`volume "${vol}" is not a whole number of shares`);
      continue;
    }
    const [o, h, l, c] = prices;
    if (h < Math.max(o, c, l) || l > Math.min(o, c, h)) {
      bad("high and low must bracket open and close");
      continue;
    }
    if (seen.has(cells[time])) bad(`a second bar for ${cells[time]}`);
    seen.add(cells[time]);
  }
  return out;
}

function ImportForm() {
  const [file, setFile] = useState<File | null>(null);
  const [symbol, setSymbol] = useState("");
  const [timeframe, setTf] = useState("1d");
  const [busy, setBusy] = useState(false);
  const [outcome, setOutcome] = useState<ImportOutcome | null>(null);
  const [localError, setLocalError] = useState<Record<string, string>>({});
  const fileInput = useRef<HTMLInputElement>(null);

  const pick = (f: File | null) => {
    setFile(f);
    setOutcome(null);
    setLocalError({});
    // "XEX.csv", "xex_1d.csv" → XEX when no symbol is entered yet.
    const guess = f?.name.match(/^([A-Za-z0-9.-]{1,10}?)(?:[_ -].*)?\.csv$/i)?.[1];
    if (guess && !symbol.trim()) setSymbol(guess.toUpperCase());
    if (f && /(^|[_ .-])1m([_ .-]|$)/i.test(f.name)) setTf("1m");
  };

  const submit = async (ev: Event) => {
    ev.preventDefault();
    const local: Record<string, string> = {};
    if (!file) local["file"] = "Choose a CSV file.";
    else if (file.size > MAX_IMPORT_BYTES) local["file"] = `The file is ${fixed(file.size / 1048576, 1)} MiB; the service takes at most 50 MiB.`;
    if (!symbol.trim()) local["symbol"] = "Enter the bars' symbol.";
    setLocalError(local);
    if (Object.keys(local).length || !file) return;
    setBusy(true);
    setOutcome(null);
    const s = symbol.trim().toUpperCase();
    try {
      const r = await sendCsv(s, timeframe, file);
      setOutcome({ ok: true, file: file.name, symbol: r.symbol, timeframe: r.timeframe, bars: r.bars });
      notify("ok", `Stored ${int(r.bars)} ${r.timeframe} bars of ${r.symbol}.`);
    } catch (err) {
      const error = toApiError(err);
      const line = typeof error.detail["line"] === "number" ? (error.detail["line"] as number) : undefined;
      const reason = typeof error.detail["reason"] === "string" ? (error.detail["reason"] as string) : undefined;
      let excerpt: { n: number; text: string }[] = [];
      let others: CsvIssue[] = [];
      if (line !== undefined) {
        try {
          const text = await file.text();
          const lines = text.split("\n").map((l) => l.replace(/\r$/, ""));
          const from = Math.max(1, line - 2);
          const to = Math.min(lines.length, line + 2);
          if (from > 1) excerpt.push({ n: 1, text: lines[0] });
          for (let n = from; n <= to; n++) excerpt.push({ n, text: lines[n - 1] ?? "" });
          others = scanCsv(text).filter((i) => i.line !== line);
        } catch {
          excerpt = [];
        }
      }
      setOutcome({ ok: false, file: file.name, error, line, reason, excerpt, others });
    } finally {
      setBusy(false);
    }
  };

  const fieldErr = (k: string) => localError[k] ?? (outcome && !outcome.ok && outcome.line === undefined ? outcome.error.fieldErrors[k] : undefined);

  return (
    <form data-testid="import-form" onSubmit={submit} noValidate>
      <div class="form-grid">
        <Field label="CSV file" error={fieldErr("file") ?? fieldErr("content-type")} hint={file ? `${file.name} · ${fixed(file.size / 1024, 1)} KiB` : "Up to 50 MiB."}>
          <input ref={fileInput} type="file" name="file" accept=".csv,text/csv" onChange={(ev) => pick(ev.currentTarget.files?.[0] ?? null)} />
        </Field>
        <Field label="Symbol" error={fieldErr("symbol")}>
          <input name="symbol" value={symbol} onInput={(ev) => setSymbol(ev.currentTarget.value.toUpperCase())} placeholder="e.g. XEX" autoComplete="off" required />
        </Field>
        <Field label="Timeframe" error={fieldErr("timeframe")}>
          <select name="timeframe" value={timeframe} onChange={onInput(setTf)}>
            <option value="1d">1d — daily bars</option>
            <option value="1m">1m — one-minute bars</option>
          </select>
        </Field>
      </div>
      <p class="note">
        A header row naming a <code>date</code> (YYYY-MM-DD, that day's New York session) or <code>timestamp</code> (RFC 3339) column and{" "}
        <code>open,high,low,close,volume</code>, in any order. The whole file is checked first: one bad row and nothing is stored. Stored
        bars of the same times are replaced.
      </p>
      {outcome?.ok && (
        <div class="banner info dt-ok" role="status" data-testid="import-result">
          Stored <strong>{int(outcome.bars)}</strong> {outcome.timeframe} bars of <strong>{outcome.symbol}</strong> from {outcome.file}. Backtests of{" "}
          {outcome.symbol} on {outcome.timeframe} now use them.
        </div>
      )}
      {outcome && !outcome.ok && (
        <div class="banner error" role="alert" data-testid="import-error">
          {outcome.line !== undefined ? (
            <>
              <strong>{outcome.file} was refused at line {outcome.line}:</strong> {outcome.reason ?? outcome.error.message}. Nothing from this file was
              stored; fix the row and import it again.
              {outcome.excerpt.length > 0 && (
                <pre class="dt-csv" data-testid="import-bad-rows">
                  {outcome.excerpt.map((l) => (
                    <div key={l.n} class={l.n === outcome.line ? "bad" : ""}>
                      <span class="ln">{l.n}</span>
                      {l.text || " "}
                    </div>
                  ))}
                </pre>
              )}
              {outcome.others.length > 0 && (
                <details class="dt-others">
                  <summary>
                    {outcome.others.length}
                    {outcome.others.length >= 24 ? "+" : ""} other row{outcome.others.length === 1 ? "" : "s"} look wrong too (checked in the browser with the same rules)
                  </summary>
                  <ul>
                    {outcome.others.map((i) => (
                      <li key={i.line}>
                        line {i.line}: {i.reason}
                      </li>
                    ))}
                  </ul>
                </details>
              )}
            </>
          ) : (
            <>
              <strong>{outcome.error.code}</strong> {outcome.error.message}
            </>
          )}
        </div>
      )}
      <div class="dt-actions">
        <button type="submit" class="btn primary" data-testid="import-submit" disabled={busy || !file}>
          {busy ? "Importing…" : "Import bars"}
        </button>
      </div>
    </form>
  );
}

// ---------------------------------------------------------------------------------------------
// The tab

export function DataTab() {
  const strategies = useLoad(() => get<Strategy[]>("/api/strategies"));
  const settings = useLoad(() =>
    get<{ risk_controls?: RiskControls; strategy_allocator?: { auto_watch?: boolean; auto_watch_top_n?: number }; runtime?: { market_data_broker?: string } }>("/api/settings"),
  );
  const radar = useLoad(() => get<RadarRow[]>(withQuery("/api/radar/momentum", { top_n: 25 })));
  const backtests = useLiveRows<BacktestRow>(withQuery("/api/backtests", { limit: 200 }), "backtest.updated", backtestKey);
  const downloads = useLiveRows<DownloadJob>(withQuery("/api/data/downloads", { limit: 100 }), "download.updated", downloadKey);
  useEvents(["settings.updated"], settings.reload);

  const [seed, setSeed] = useState<Seed | null>(null);
  const [deskSeed, setDeskSeed] = useState<DeskSeed | null>(null);
  const [btFilter, setBtFilter] = useState("");
  const [btStatus, setBtStatus] = useState("");
  const [dlFilter, setDlFilter] = useState("");
  const [highlight, setHighlight] = useState<string | null>(null);
  const mine = useRef(new Set<string>());

  const openId = route.value.params.get("backtest");
  const open = (id: string) => navigate("data", { backtest: id });
  const close = () => navigate("data");

  // Tell the operator when a run or download they started here finishes.
  useEvents(
    ["backtest.updated"],
    useCallback((e: StreamEvent<BacktestRow>) => {
      const r = e.data;
      if (!r || !mine.current.has(r.backtest_id) || isActive(r.status)) return;
      mine.current.delete(r.backtest_id);
      if (isDesk(r)) {
        if (r.status === "COMPLETED")
          notify("ok", `Desk replay of ${deskRange(r.start, r.end)} completed: ${signedFrac(r.total_return)}, ${int(r.trade_count)} trades. Click its row for the day.`);
        else notify("error", `Desk replay of ${deskRange(r.start, r.end)} ${r.status}: ${r.error ?? "no reason given"}`);
        return;
      }
      if (r.status === "COMPLETED")
        notify("ok", `Backtest ${r.strategy_id} on ${r.symbol} completed: ${signedFrac(r.total_return)}, ${int(r.trade_count)} trades. Click its row for the detail.`);
      else notify("error", `Backtest ${r.strategy_id} on ${r.symbol} ${r.status}: ${r.error ?? "no reason given"}`);
    }, []),
  );
  useEvents(
    ["download.updated"],
    useCallback((e: StreamEvent<DownloadJob>) => {
      const r = e.data;
      if (!r || !mine.current.has(r.request_id) || isActive(r.status)) return;
      mine.current.delete(r.request_id);
      if (r.status === "COMPLETED") notify("ok", `Downloaded ${int(r.bars)} ${r.timeframe} bars of ${r.symbol}.`);
      else notify("error", `Download of ${r.symbol} ${r.status}: ${r.error ?? "no reason given"}`);
    }, []),
  );

  const symbols = useMemo(() => {
    const s = new Set<string>();
    (downloads.rows ?? []).forEach((d) => d.status === "COMPLETED" && s.add(d.symbol));
    (backtests.rows ?? []).forEach((b) => isDesk(b) || s.add(b.symbol));
    (radar.data ?? []).forEach((r) => s.add(r.symbol));
    return [...s].sort();
  }, [downloads.rows, backtests.rows, radar.data]);

  const strategyList = strategies.data ?? [];
  const rerun = (d: BacktestDetail) => {
    close();
    if (isDesk(d)) {
      const { form, dropped } = deskFormFrom(d);
      if (dropped.length) notify("info", `The desk replay form has no field for the override${dropped.length === 1 ? "" : "s"} ${dropped.join(", ")}: not carried.`);
      setDeskSeed((p) => ({ n: (p?.n ?? 0) + 1, form }));
      return;
    }
    // Refusals by a rule the overrides cover: open the overrides to raise them.
    const gated = Object.entries(d.refusals ?? {}).some(([rule, n]) => n > 0 && RISK_FIELDS.some((r) => r.key.toUpperCase() === rule));
    setSeed((p) => ({ n: (p?.n ?? 0) + 1, form: formFromRun(d), openRisk: gated }));
  };
  const backtestCombination = ({ sweep, parameters }: SweepPick) => {
    // The sweep's simulation inputs and the risk overrides the form has fields for; any other
    // override is named, as the form cannot carry it.
    const rc = (sweep.settings?.["risk_controls"] ?? {}) as Record<string, unknown>;
    const risk = Object.fromEntries(RISK_FIELDS.filter((f) => typeof rc[f.key] === "number").map((f) => [f.key, inputNumber(rc[f.key] as number)]));
    const left = overrideList(sweep.settings)
      .map(([k]) => k)
      .filter((k) => !RISK_FIELDS.some((f) => `risk_controls.${f.key}` === k));
    if (left.length) notify("info", `The backtest form has no field for the sweep's override${left.length === 1 ? "" : "s"} ${left.join(", ")}: not carried.`);
    const num = (v: number | undefined, blank: string) => (typeof v === "number" ? inputNumber(v) : blank);
    setSeed((p) => ({
      n: (p?.n ?? 0) + 1,
      form: {
        strategy_id: sweep.strategy_id,
        symbol: sweep.symbol,
        timeframe: sweep.timeframe,
        start: toInput(sweep.start),
        end: toInput(sweep.end),
        datesTouched: true,
        params: Object.fromEntries(Object.entries(parameters).map(([k, v]) => [k, inputNumber(v)])),
        initial_cash: num(sweep.initial_cash, "100000"),
        commission_rate: num(sweep.commission_rate, "0"),
        slippage_bps: num(sweep.slippage_bps, "0"),
        fill: sweep.fill ?? "NEXT_OPEN",
        risk,
      },
    }));
  };
  const backtestBars = (j: DownloadJob) => {
    const fits = strategyList.find((s) => s.timeframes.includes(j.timeframe));
    setSeed((p) => ({
      n: (p?.n ?? 0) + 1,
      form: { symbol: j.symbol, timeframe: j.timeframe, start: toInput(j.start), end: toInput(j.end), datesTouched: true, ...(fits ? { strategy_id: fits.strategy_id } : {}) },
    }));
  };

  const btRows = (backtests.rows ?? []).filter((r) => {
    if (btStatus && r.status !== btStatus) return false;
    if (!btFilter) return true;
    const q = btFilter.toLowerCase();
    if (isDesk(r) && "desk replay".includes(q)) return true;
    return r.symbol.toLowerCase().includes(q) || r.strategy_id.toLowerCase().includes(q) || r.backtest_id.includes(q) || r.requested_by.toLowerCase().includes(q);
  });
  const running = (backtests.rows ?? []).filter((r) => isActive(r.status)).length;
  const dlRows = (downloads.rows ?? []).filter((r) => !dlFilter || r.symbol.includes(dlFilter.toUpperCase()));
  const dlRunning = (downloads.rows ?? []).filter((r) => isActive(r.status)).length;

  const downloadColumns: Column<DownloadJob>[] = [
    { key: "request_id", label: "Request", render: (r) => <span class="mono" title={r.request_id}>{shortId(r.request_id)}</span> },
    { key: "symbol", label: "Symbol", render: (r) => <strong>{r.symbol}</strong> },
    { key: "timeframe", label: "TF" },
    { key: "start", label: "Start", render: (r) => <span title={r.start}>{day(r.start)}</span> },
    { key: "end", label: "End", render: (r) => <span title={`${r.end} (exclusive)`}>{day(r.end)}</span> },
    { key: "status", label: "Status", render: (r) => <StatusCell status={r.status} progress={r.progress} /> },
    { key: "bars", label: "Bars", num: true, render: (r) => int(r.bars) },
    { key: "created_at", label: "Created (NY)", render: (r) => dateTime(r.created_at) },
    { key: "finished_at", label: "Finished (NY)", render: (r) => dateTime(r.finished_at) },
    { key: "error", label: "Error", render: (r) => (r.error ? <span class="down dt-clip" title={r.error}>{r.error}</span> : <span class="muted">—</span>) },
    {
      key: "actions",
      label: "",
      sortValue: () => 0,
      render: (r) =>
        canOperate.value && r.status === "COMPLETED" && r.bars > 0 ? (
          <button class="btn" title="Fill the backtest form with these bars" onClick={(ev) => (ev.stopPropagation(), backtestBars(r))}>
            Backtest these bars
          </button>
        ) : null,
    },
  ];

  return (
    <div data-testid="tab-data" class="dt">
      {!canOperate.value && (
        <div class="banner info">
          You can read every download, backtest and parameter sweep here. Running backtests and sweeps, downloading and importing bars take the
          operator role.
        </div>
      )}
      {canOperate.value && (
        <Section
          title={
            <>
              Run a backtest <span class="muted">· the live engine, strategy and risk gate replayed over stored bars</span>
            </>
          }
        >
          <ErrorBanner error={strategies.error} />
          {strategies.data && strategies.data.length === 0 ? (
            <div class="note">The service offers no strategy to backtest.</div>
          ) : (
            <BacktestForm
              strategies={strategyList}
              seed={seed}
              live={settings.data?.risk_controls}
              onQueued={(id) => {
                mine.current.add(id);
                setHighlight(id);
              }}
            />
          )}
        </Section>
      )}

      {canOperate.value && (
        <Section
          title={
            <>
              Replay the desk <span class="muted">· a past stretch of the simulated market or of downloaded days, traded as the live desk would have traded it</span>
            </>
          }
        >
          <DeskForm
            live={
              settings.data
                ? { ...settings.data.strategy_allocator, max_daily_loss: settings.data.risk_controls?.max_daily_loss, market_data_broker: settings.data.runtime?.market_data_broker }
                : undefined
            }
            seed={deskSeed}
            onQueued={(id) => {
              mine.current.add(id);
              setHighlight(id);
            }}
          />
        </Section>
      )}

      <Section
        title={
          <>
            Backtests{" "}
            <span class="muted">
              · {int(backtests.rows?.length ?? 0)} runs{running ? ` · ${running} queued or running` : ""}
            </span>
          </>
        }
        actions={
          <>
            <input placeholder="Filter symbol, strategy, id, user, desk" value={btFilter} onInput={onInput(setBtFilter)} aria-label="Filter backtests" />
            <select value={btStatus} onChange={onInput(setBtStatus)} aria-label="Status">
              <option value="">Any status</option>
              {["QUEUED", "RUNNING", "COMPLETED", "FAILED"].map((s) => (
                <option key={s} value={s}>
                  {s}
                </option>
              ))}
            </select>
          </>
        }
      >
        <ErrorBanner error={backtests.error} />
        {!backtests.rows && !backtests.error ? (
          <div class="note">Loading backtests…</div>
        ) : (
          <Table
            testid="backtests-table"
            columns={backtestColumns()}
            rows={btRows}
            rowKey={backtestKey}
            rowClass={(r) => (isDesk(r) ? "dt-desk-row" : "")}
            onRowClick={(r) => {
              setHighlight(r.backtest_id);
              open(r.backtest_id);
            }}
            selected={openId ?? highlight}
            sort={{ key: "created_at", desc: true }}
            empty={
              backtests.rows?.length
                ? "No run matches the filter."
                : canOperate.value
                  ? "No backtest yet. Pick a strategy and a symbol above and run one; bars are downloaded first when none are stored."
                  : "No backtest yet. An operator can run one from this tab."
            }
          />
        )}
        {btRows.length > 0 && <div class="note">Click a run for its metrics, equity curve, trades and the settings it ran under; a desk replay for its day. Ratios are fractions of the initial cash shown as percentages.</div>}
      </Section>

      <Sweeps strategies={strategies.data} strategiesError={strategies.error} onBacktest={backtestCombination} />

      {canOperate.value && (
        <div class="grid2">
          <Section
            title={
              <>
                Download bars <span class="muted">· from the data broker into the database</span>
              </>
            }
          >
            <DownloadForm onQueued={(id) => mine.current.add(id)} />
          </Section>
          <Section
            title={
              <>
                Import bars from CSV <span class="muted">· your own data</span>
              </>
            }
          >
            <ImportForm />
          </Section>
        </div>
      )}

      <Section
        title={
          <>
            Downloads <span class="muted">· {int(downloads.rows?.length ?? 0)} jobs{dlRunning ? ` · ${dlRunning} queued or running` : ""}</span>
          </>
        }
        actions={<input placeholder="Filter symbol" value={dlFilter} onInput={onInput(setDlFilter)} aria-label="Filter downloads" />}
      >
        <ErrorBanner error={downloads.error} />
        {!downloads.rows && !downloads.error ? (
          <div class="note">Loading downloads…</div>
        ) : (
          <Table
            testid="downloads-table"
            columns={downloadColumns}
            rows={dlRows}
            rowKey={downloadKey}
            sort={{ key: "created_at", desc: true }}
            empty={
              downloads.rows?.length
                ? "No download matches the filter."
                : "No download yet. Download bars above, or just run a backtest: it fetches the bars it needs."
            }
          />
        )}
      </Section>

      <datalist id="dt-symbols">
        {symbols.map((s) => (
          <option key={s} value={s} />
        ))}
      </datalist>
      {openId && <BacktestDetailModal id={openId} onClose={close} onRerun={rerun} />}
    </div>
  );
}
