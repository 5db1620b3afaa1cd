// The form that queues a parameter sweep (POST /api/backtests/sweeps): a strategy's parameters
// each over a range or a list of values (the range first suggested by its bounds and default, or
// left out at its default), the objective that ranks the combinations, the constraint a ranked one
// must keep, an optional random sample, an optional walk-forward (in-sample / out-of-sample windows)
// and a backtest's simulation inputs. A refusal is shown at the field it names, as the backtest
// form shows its own.
import { useEffect, useState } from "preact/hooks";
import { ApiError, post } from "../api";
import { frac, int, plain } from "../format";
import {
  DEFAULT_IN_SAMPLE,
  MAX_COMBINATIONS,
  MAX_IN_SAMPLE,
  MAX_WINDOWS,
  MAX_WINDOW_RUNS,
  MIN_IN_SAMPLE,
  MIN_WINDOWS,
  combinationCount,
  runsPerCombination,
  suggestRange,
  walkForwardSplit,
  weekdaysBetween,
  type AxisSpec,
} from "../sweep_grid";
import { ErrorBanner, Field, notify, onInput } from "../ui";
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
  toApiError,
  tomorrow,
  useFormErrors,
  type Parameter,
  type RiskControls,
  type Strategy,
} from "./data_form";
import { OBJECTIVES } from "./sweep_detail";

/** How a parameter is swept: over a range, a list of values, or not at all (its default). */
type AxisMode = "range" | "list" | "off";

/** One parameter's row of the form, as typed. */
interface AxisForm {
  mode: AxisMode;
  from: string;
  to: string;
  step: string;
  list: string;
}

/** The form as typed (numbers stay text until sent). */
interface SweepInputs {
  strategy_id: string;
  symbol: string;
  timeframe: string;
  start: string;
  end: string;
  datesTouched: boolean;
  axes: Record<string, AxisForm>;
  objective: string;
  max_drawdown: string;
  min_trades: string;
  sample: string;
  seed: string;
  initial_cash: string;
  commission_rate: string;
  slippage_bps: string;
  fill: string;
  risk: Record<string, string>;
  /** Walk-forward: off unless ticked; its fields as typed. */
  wf: boolean;
  wf_windows: string;
  wf_fraction: string;
  wf_anchored: boolean;
}

/** Each parameter's suggested range; the first two swept, the others left at their defaults. */
function blankAxes(s: Strategy | undefined): Record<string, AxisForm> {
  return Object.fromEntries(
    (s?.parameters ?? []).map((p, i) => {
      const r = suggestRange(p);
      const mode: AxisMode = i < 2 ? "range" : "off";
      return [p.name, { mode, from: String(r.from), to: String(r.to), step: String(r.step), list: [r.from, r.to].map(String).join(", ") }];
    }),
  );
}

function blankForm(s: Strategy | undefined): SweepInputs {
  const tf = s?.timeframes[0] ?? "1m";
  return {
    strategy_id: s?.strategy_id ?? "",
    symbol: "",
    timeframe: tf,
    start: daysAgo(defaultDays(tf)),
    end: tomorrow(),
    datesTouched: false,
    axes: blankAxes(s),
    objective: "sharpe_ratio",
    max_drawdown: "",
    min_trades: "",
    sample: "",
    seed: "",
    initial_cash: "100000",
    commission_rate: "0",
    slippage_bps: "0",
    fill: "NEXT_OPEN",
    risk: {},
    wf: false,
    wf_windows: "4",
    wf_fraction: String(DEFAULT_IN_SAMPLE),
    wf_anchored: false,
  };
}

/** An axis of the form as the API takes it, or why not. */
function axisSpec(a: AxisForm): AxisSpec | string {
  if (a.mode === "list") {
    const items = a.list.split(/[\s,;]+/).filter(Boolean);
    if (items.length === 0) return "Enter one or more values, separated by commas.";
    const values = items.map(Number);
    if (values.some((v) => !Number.isFinite(v))) return "Only numbers, separated by commas.";
    return values;
  }
  const [from, to, step] = [parseNum(a.from), parseNum(a.to), parseNum(a.step)];
  if (from === undefined || to === undefined || step === undefined) return "Enter from, to and step.";
  if ([from, to, step].some((v) => Number.isNaN(v))) return "From, to and step must be numbers.";
  return { from, to, step };
}

/** The values an axis makes, for the count beside it. */
const axisCount = (spec: AxisSpec | string) => (typeof spec === "string" ? null : combinationCount({ x: spec }));

const SWEEP_FIELDS = ["strategy_id", "symbol", "timeframe", "start", "end", "objective", "sample", "seed", "grid", "constraint", "constraint.max_drawdown", "constraint.min_trades", "initial_cash", "commission_rate", "slippage_bps", "fill", "walk_forward", "walk_forward.windows", "walk_forward.in_sample_fraction", "walk_forward.anchored"];

export function SweepForm({ strategies, onQueued }: { strategies: Strategy[]; onQueued: (id: string) => void }) {
  const [f, setF] = useState<SweepInputs>(() => blankForm(strategies[0]));
  const [busy, setBusy] = useState(false);
  const [moreOpen, setMoreOpen] = useState(false);
  const strategy = strategies.find((s) => s.strategy_id === f.strategy_id);
  const params = strategy?.parameters ?? [];
  const errs = useFormErrors(
    (k) =>
      SWEEP_FIELDS.includes(k) ||
      params.some((p) => k === `grid.${p.name}` || k === `parameters.${p.name}`) ||
      RISK_FIELDS.some((r) => `settings.risk_controls.${r.key}` === k),
  );
  const e = errs.fields;

  useEffect(() => {
    if (!f.strategy_id && strategies.length) setF(blankForm(strategies[0]));
  }, [strategies]);

  const set = (k: keyof SweepInputs) => (v: string) => setF((p) => ({ ...p, [k]: v }));
  const setAxis = (name: string, patch: Partial<AxisForm>) => setF((p) => ({ ...p, axes: { ...p.axes, [name]: { ...p.axes[name], ...patch } } }));
  const setTimeframe = (tf: string) =>
    setF((p) => ({ ...p, timeframe: tf, ...(p.datesTouched ? {} : { start: daysAgo(defaultDays(tf)), end: tomorrow() }) }));
  const setStrategy = (id: string) =>
    setF((p) => {
      const s = strategies.find((x) => x.strategy_id === id);
      const tf = s && !s.timeframes.includes(p.timeframe) ? s.timeframes[0] : p.timeframe;
      const dates = tf !== p.timeframe && !p.datesTouched ? { start: daysAgo(defaultDays(tf)), end: tomorrow() } : {};
      return { ...p, strategy_id: id, timeframe: tf, axes: blankAxes(s), ...dates };
    });

  // The grid as it stands, for the count of combinations.
  const specs = params.filter((p) => f.axes[p.name]?.mode !== "off").map((p) => [p.name, axisSpec(f.axes[p.name])] as const);
  const counts = specs.map(([, spec]) => axisCount(spec));
  const total = counts.every((n) => n !== null) && counts.length ? counts.reduce((a, b) => a! * b!, 1) : null;
  const sample = parseNum(f.sample);
  const tried = total === null ? null : sample && sample > 0 ? Math.min(sample, total) : total;
  // Walk-forward: the windows as typed, and about how many trading days each part spans.
  const wfWindows = parseNum(f.wf_windows);
  const wfFraction = parseNum(f.wf_fraction);
  const wfWhole = f.wf && wfWindows !== undefined && Number.isInteger(wfWindows) && wfWindows >= 1;
  const wfReady = wfWhole && wfWindows! >= MIN_WINDOWS && wfWindows! <= MAX_WINDOWS;
  const wfDays = weekdaysBetween(f.start, f.end);
  const wfSplit =
    wfReady && wfDays !== null && wfFraction !== undefined && wfFraction >= MIN_IN_SAMPLE && wfFraction <= MAX_IN_SAMPLE
      ? walkForwardSplit(wfDays, wfWindows!, wfFraction, f.wf_anchored)
      : null;

  const submit = async (ev: Event) => {
    ev.preventDefault();
    const local: Record<string, string> = {};
    const symbol = f.symbol.trim().toUpperCase();
    if (!symbol) local["symbol"] = "Enter a symbol.";
    if (!f.start) local["start"] = "Pick a start day.";
    if (!f.end) local["end"] = "Pick an end day.";
    const grid: Record<string, AxisSpec> = {};
    for (const [name, spec] of specs) {
      if (typeof spec === "string") local[`grid.${name}`] = spec;
      else grid[name] = spec;
    }
    if (specs.length === 0) local["grid"] = "Sweep at least one parameter.";
    const body: Record<string, unknown> = { strategy_id: f.strategy_id, symbol, timeframe: f.timeframe, start: rfc(f.start), end: rfc(f.end), grid, objective: f.objective, fill: f.fill };
    const number = (key: keyof SweepInputs, field: string, put: (v: number) => void) => {
      const v = parseNum(f[key] as string);
      if (v === undefined) return;
      if (Number.isNaN(v)) local[field] = "Not a number.";
      else put(v);
    };
    const constraint: Record<string, number> = {};
    number("max_drawdown", "constraint.max_drawdown", (v) => (constraint.max_drawdown = v));
    number("min_trades", "constraint.min_trades", (v) => (constraint.min_trades = v));
    if (Object.keys(constraint).length) body["constraint"] = constraint;
    number("sample", "sample", (v) => (body["sample"] = v));
    number("seed", "seed", (v) => (body["seed"] = v));
    for (const k of ["initial_cash", "commission_rate", "slippage_bps"] as const) number(k, k, (v) => (body[k] = v));
    const risk: Record<string, number> = {};
    for (const r of RISK_FIELDS) {
      const v = parseNum(f.risk[r.key] ?? "");
      if (v === undefined) continue;
      if (Number.isNaN(v)) local[`settings.risk_controls.${r.key}`] = "Not a number.";
      else risk[r.key] = v;
    }
    if (Object.keys(risk).length) body["settings"] = { risk_controls: risk };
    if (f.wf) {
      const wf: Record<string, unknown> = { anchored: f.wf_anchored };
      number("wf_windows", "walk_forward.windows", (v) => {
        if (Number.isInteger(v)) wf.windows = v;
        else local["walk_forward.windows"] = "A whole number of windows.";
      });
      number("wf_fraction", "walk_forward.in_sample_fraction", (v) => (wf.in_sample_fraction = v));
      if (wf.windows === undefined && !local["walk_forward.windows"]) local["walk_forward.windows"] = `Enter how many windows (${MIN_WINDOWS} to ${MAX_WINDOWS}).`;
      body["walk_forward"] = wf;
    }
    if (Object.keys(local).length) {
      errs.setError(new ApiError(400, "VALIDATION_ERROR", "Check the marked fields.", { errors: Object.entries(local).map(([field, reason]) => ({ field, reason })) }));
      if (Object.keys(local).some((k) => k.startsWith("settings.") || ["initial_cash", "commission_rate", "slippage_bps"].includes(k))) setMoreOpen(true);
      return;
    }
    setBusy(true);
    errs.setError(undefined);
    try {
      const r = await post<{ sweep_id: string; status: string; combinations: number }>("/api/backtests/sweeps", body);
      notify("ok", `Sweep queued: ${int(r.combinations)} combinations of ${f.strategy_id} on ${symbol} (${r.sweep_id}). Its row below follows it.`);
      onQueued(r.sweep_id);
    } catch (err) {
      const ae = toApiError(err);
      errs.setError(ae);
      if (Object.keys(ae.fieldErrors).some((k) => k.startsWith("settings.") || ["initial_cash", "commission_rate", "slippage_bps", "fill"].includes(k))) setMoreOpen(true);
    } finally {
      setBusy(false);
    }
  };

  if (!strategies.length) return <div class="note">Loading strategies…</div>;
  const maxDd = parseNum(f.max_drawdown);
  return (
    <form data-testid="sweep-form" onSubmit={submit} noValidate class="dt-form">
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
        <Field label="Timeframe" error={e["timeframe"]}>
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

      <h3 class="dt-formhead">Parameters to sweep</h3>
      {e["grid"] && (
        <div class="note down" role="alert">
          {e["grid"]}
        </div>
      )}
      <table class="sw-axes" data-testid="sweep-grid">
        <thead>
          <tr>
            <th>Parameter</th>
            <th>Values</th>
            <th colSpan={3}>From · to · step (both ends included) or a list</th>
            <th class="num">Count</th>
          </tr>
        </thead>
        <tbody>
          {params.map((p) => (
            <AxisRow key={p.name} p={p} a={f.axes[p.name]} error={e[`grid.${p.name}`] ?? e[`parameters.${p.name}`]} set={(patch) => setAxis(p.name, patch)} />
          ))}
        </tbody>
      </table>
      <div class={`sw-count ${tried !== null && tried > MAX_COMBINATIONS ? "over" : "muted"}`} data-testid="sweep-count">
        {total === null
          ? specs.length
            ? "Fix the marked parameters to count the combinations."
            : "Sweep at least one parameter."
          : `${counts.join(" × ")} = ${int(total)} combination${total === 1 ? "" : "s"}${tried !== total ? `, a random sample of ${int(tried)}` : ""}${
              tried! > MAX_COMBINATIONS ? `: at most ${int(MAX_COMBINATIONS)} — narrow the grid or draw a sample` : ""
            }. Combinations the strategy refuses${f.strategy_id === "sma_cross" ? " (fast not below slow)" : ""} are skipped; parameters not swept keep their defaults. The strategy's current parameters run too (beside the grid when not in it), to compare with.`}
      </div>

      <h3 class="dt-formhead">Ranking</h3>
      <div class="form-grid">
        <Field label="Objective" error={e["objective"]} hint="What ranks the combinations, highest first.">
          <select name="objective" value={f.objective} onChange={onInput(set("objective"))}>
            {OBJECTIVES.map((o) => (
              <option key={o.key} value={o.key}>
                {o.label}
              </option>
            ))}
          </select>
        </Field>
        <Field
          label="Constraint: max drawdown"
          error={e["constraint.max_drawdown"] ?? e["constraint"]}
          hint={`A fraction, 0 to 1 (0.25 = 25%). Combinations deeper are ranked after the others.${maxDd !== undefined && !Number.isNaN(maxDd) ? ` Now ${frac(maxDd, 1)}.` : ""}`}
        >
          <input type="number" name="max_drawdown" min={0} max={1} step="any" value={f.max_drawdown} onInput={onInput(set("max_drawdown"))} placeholder="none" />
        </Field>
        <Field label="Constraint: min trades" error={e["constraint.min_trades"]} hint="Combinations trading less are ranked after the others.">
          <input type="number" name="min_trades" min={0} step={1} value={f.min_trades} onInput={onInput(set("min_trades"))} placeholder="none" />
        </Field>
        <Field label="Sample (optional)" error={e["sample"]} hint="Try only this many combinations, drawn at random from the grid (1 to 10,000).">
          <input type="number" name="sample" min={1} max={MAX_COMBINATIONS} step={1} value={f.sample} onInput={onInput(set("sample"))} placeholder="every combination" />
        </Field>
        <Field label="Seed" error={e["seed"]} hint="The sample's seed: the same seed draws the same sample.">
          <input type="number" name="seed" min={0} step={1} value={f.seed} onInput={onInput(set("seed"))} placeholder="0" disabled={!f.sample.trim()} />
        </Field>
      </div>

      <fieldset class={`sw-wf ${f.wf ? "on" : ""}`} data-testid="sweep-walk-forward">
        <legend>
          <label>
            <input type="checkbox" name="walk_forward" checked={f.wf} onChange={(ev) => setF((p) => ({ ...p, wf: ev.currentTarget.checked }))} /> Walk-forward{" "}
            <span class="muted">· optional: is the best in-sample still good on the days after?</span>
          </label>
        </legend>
        {f.wf ? (
          <>
            <div class="form-grid">
              <Field label="Windows" error={e["walk_forward.windows"] ?? e["walk_forward"]} hint={`${MIN_WINDOWS} to ${MAX_WINDOWS}. The range is split into this many in-sample / out-of-sample windows.`}>
                <input type="number" name="wf_windows" min={MIN_WINDOWS} max={MAX_WINDOWS} step={1} value={f.wf_windows} onInput={onInput(set("wf_windows"))} />
              </Field>
              <Field
                label="In-sample fraction"
                error={e["walk_forward.in_sample_fraction"]}
                hint={`${MIN_IN_SAMPLE} to ${MAX_IN_SAMPLE}, default ${DEFAULT_IN_SAMPLE}: the share of a window (of the first one when anchored) the best is chosen on.${
                  wfFraction !== undefined && !Number.isNaN(wfFraction) ? ` Now ${frac(wfFraction, 0)} in, ${frac(1 - wfFraction, 0)} out.` : ""
                }`}
              >
                <input type="number" name="wf_fraction" min={MIN_IN_SAMPLE} max={MAX_IN_SAMPLE} step={0.05} value={f.wf_fraction} onInput={onInput(set("wf_fraction"))} placeholder={String(DEFAULT_IN_SAMPLE)} />
              </Field>
              <Field
                label="Windows move"
                error={e["walk_forward.anchored"]}
                hint={f.wf_anchored ? "Anchored: every in-sample part starts at the range's start and grows." : "Rolling: windows of equal length, each starting one out-of-sample part later."}
              >
                <select name="wf_mode" value={f.wf_anchored ? "anchored" : "rolling"} onChange={(ev) => setF((p) => ({ ...p, wf_anchored: ev.currentTarget.value === "anchored" }))}>
                  <option value="rolling">Rolling</option>
                  <option value="anchored">Anchored</option>
                </select>
              </Field>
            </div>
            <div class={`sw-count ${wfWhole && (!wfReady || (tried !== null && tried * wfWindows! > MAX_WINDOW_RUNS)) ? "over" : "muted"}`} data-testid="sweep-wf-runs">
              {wfWhole
                ? `Each combination then runs 1 + 2×${wfWindows} = ${runsPerCombination(wfWindows!)} times: over the whole range, and over each window's in-sample and out-of-sample parts${
                    tried !== null ? ` (${int(tried)} combination${tried === 1 ? "" : "s"}: ${int(tried * runsPerCombination(wfWindows!))} runs)` : ""
                  }.${!wfReady ? ` Windows: ${MIN_WINDOWS} to ${MAX_WINDOWS}.` : ""}${
                    wfReady && tried !== null && tried * wfWindows! > MAX_WINDOW_RUNS ? ` At most ${int(MAX_WINDOW_RUNS)} combinations × windows: fewer windows, or draw a sample.` : ""
                  }${
                    wfSplit ? ` About ${int(wfSplit.in_sample)} trading days in sample and ${int(wfSplit.out_of_sample)} out of sample per window${f.wf_anchored ? " (the first; in-sample parts grow)" : ""}; each part is run afresh, so its indicators warm up inside it.` : ""
                  }`
                : `Each combination then runs 1 + 2×windows times: over the whole range, and over each window's in-sample and out-of-sample parts.`}
            </div>
          </>
        ) : (
          <div class="note muted">
            Off. When on, the range is split into windows: each window's best in sample is traded on the days that follow it, and set beside the strategy's
            current parameters. Each combination then runs 1 + 2×windows times.
          </div>
        )}
      </fieldset>

      <details class="dt-risk" open={moreOpen} onToggle={(ev) => setMoreOpen((ev.currentTarget as HTMLDetailsElement).open)}>
        <summary>
          Simulation and risk overrides <span class="muted">· as for a backtest; the same for every combination</span>
        </summary>
        <div class="form-grid">
          <Field label="Initial cash ($)" error={e["initial_cash"]} hint="Default $100,000.">
            <input type="number" name="initial_cash" min={1} step="any" value={f.initial_cash} onInput={onInput(set("initial_cash"))} placeholder="100000" />
          </Field>
          <Field label="Commission rate" error={e["commission_rate"]} hint="Fraction of traded value per fill, 0 to 0.1.">
            <input type="number" name="commission_rate" min={0} max={0.1} step="any" value={f.commission_rate} onInput={onInput(set("commission_rate"))} placeholder="0" />
          </Field>
          <Field label="Slippage (bps)" error={e["slippage_bps"]}>
            <input type="number" name="slippage_bps" min={0} step="any" value={f.slippage_bps} onInput={onInput(set("slippage_bps"))} placeholder="0" />
          </Field>
          <Field label="Fill" error={e["fill"]}>
            <select name="fill" value={f.fill} onChange={onInput(set("fill"))}>
              {FILLS.map((x) => (
                <option key={x} value={x}>
                  {x}
                </option>
              ))}
            </select>
          </Field>
          {RISK_FIELDS.map((r) => (
            <Field key={r.key} label={r.label} error={e[`settings.risk_controls.${r.key}`]} hint={`${r.hint} Empty: the live value.`}>
              <input
                type="number"
                name={`risk.${r.key}`}
                min={0}
                step={r.integer ? 1 : "any"}
                value={f.risk[r.key] ?? ""}
                onInput={(ev) => {
                  const v = ev.currentTarget.value;
                  setF((prev) => ({ ...prev, risk: { ...prev.risk, [r.key as keyof RiskControls]: v } }));
                }}
              />
            </Field>
          ))}
        </div>
      </details>
      <ErrorBanner error={errs.banner} />
      <FormActions
        testid="run-sweep"
        label="Run sweep"
        busy={busy}
        disabled={!f.strategy_id}
        onReset={() => {
          setF(blankForm(strategy ?? strategies[0]));
          setMoreOpen(false);
          errs.setError(undefined);
        }}
        errs={errs}
        idle="Each combination is a backtest on the live engine; the parts run in parallel in the background."
      />
    </form>
  );
}

function AxisRow({ p, a, error, set }: { p: Parameter; a: AxisForm | undefined; error?: string; set: (patch: Partial<AxisForm>) => void }) {
  if (!a) return null;
  const spec = a.mode === "off" ? null : axisSpec(a);
  const n = spec === null ? null : axisCount(spec);
  const integer = p.kind === "INTEGER";
  const bounds = `${plain(p.minimum)} to ${plain(p.maximum)}${integer ? ", whole" : ""}; default ${plain(p.default)}`;
  const num = (k: "from" | "to" | "step") => (
    <td>
      <input
        type="number"
        name={`grid.${p.name}.${k}`}
        aria-label={`${p.name} ${k}`}
        value={a[k]}
        step={integer ? 1 : "any"}
        min={k === "step" ? 0 : (p.minimum ?? undefined)}
        max={k === "step" ? undefined : (p.maximum ?? undefined)}
        disabled={a.mode === "off"}
        onInput={(ev) => set({ [k]: ev.currentTarget.value })}
      />
    </td>
  );
  return (
    <>
      <tr class={`${a.mode === "off" ? "off" : ""} ${error ? "invalid" : ""}`} data-param={p.name}>
        <td title={p.description}>
          <strong>{p.name}</strong>
          <br />
          <span class="hint">{bounds}</span>
        </td>
        <td>
          <select name={`grid.${p.name}.mode`} value={a.mode} onChange={(ev) => set({ mode: ev.currentTarget.value as AxisMode })} aria-label={`${p.name}: how to sweep`}>
            <option value="range">Range</option>
            <option value="list">List</option>
            <option value="off">Not swept (default {plain(p.default)})</option>
          </select>
        </td>
        {a.mode === "list" ? (
          <td colSpan={3}>
            <input
              class="sw-list"
              name={`grid.${p.name}.list`}
              aria-label={`${p.name} values`}
              value={a.list}
              placeholder="e.g. 5, 10, 20"
              onInput={(ev) => set({ list: ev.currentTarget.value })}
            />
          </td>
        ) : (
          <>
            {num("from")}
            {num("to")}
            {num("step")}
          </>
        )}
        <td class="num">{a.mode === "off" ? <span class="muted">—</span> : n === null ? <span class="down">?</span> : int(n)}</td>
      </tr>
      {error && (
        <tr>
          <td />
          <td colSpan={5}>
            <span class="field-error" role="alert">
              {error}
            </span>
          </td>
        </tr>
      )}
    </>
  );
}
