// The form that queues a whole-desk replay (POST /api/backtests with `kind: "desk"`): whose
// prints it trades — the simulated market's, regenerated (only where the simulated market is the
// data broker, and then the default), or the stored minute bars of downloaded days (the default
// elsewhere), of every stored symbol or of those named — a stretch of past market time in New
// York time (by default the previous trading day, whole), the book's cash, and the overrides that
// matter most for one — the allocator's auto-watch and how many radar rows it takes, and the max
// daily loss — sent in the shape of PUT /api/settings. A refusal is shown at the field it names
// (`symbols[i]` at the symbols), as the other forms of the tab show theirs; one that names none
// (404: nothing stored in the range) in the form's banner.
import { useEffect, useRef, useState } from "preact/hooks";
import { ApiError, post } from "../api";
import { duplicateAt, isoToNyLocal, nyLocalToIso, parseSymbols, previousTradingDay, sessionOf, spanMs, wholeDay } from "../desk_time";
import { duration, inputNumber, marketClock, money, todayNy } from "../format";
import { ErrorBanner, Field, notify, onInput } from "../ui";
import type { BacktestDetail, DeskSource } from "./backtest_types";
import { FormActions, parseNum, toApiError, useFormErrors } from "./data_form";
import { deskRange, deskSourceText } from "./desk_detail";

/** The most market time one replay covers (the service's `desk::MAX_DAYS`). */
export const MAX_DESK_DAYS = 5;
/** The most symbols a replay of downloaded days trades (the service's `desk::MAX_SYMBOLS`). */
export const MAX_DESK_SYMBOLS = 2000;

/** The live settings the form starts from. */
export interface DeskLive {
  auto_watch?: boolean;
  auto_watch_top_n?: number;
  max_daily_loss?: number;
  /** `simulated`, or another data broker (only downloaded days replay there). */
  market_data_broker?: string;
}

/** The form as typed; times are `datetime-local` values in New York time. */
export interface DeskInputs {
  /** Whose prints the replay trades. */
  source: DeskSource;
  /** Downloaded days only: symbols as typed; empty = every symbol stored in the range. */
  symbols: string;
  start: string;
  end: string;
  /** False while the range is still the default (it follows the market's date). */
  touched: boolean;
  initial_cash: string;
  auto_watch: boolean;
  top_n: string;
  max_daily_loss: string;
}

/** A fill of the form from elsewhere (a replay's "Edit & replay again"); `n` changes on each. */
export interface DeskSeed {
  n: number;
  form: Partial<DeskInputs>;
}

const FIELDS = ["source", "symbols", "symbols[i]", "start", "end", "initial_cash", "settings", "settings.strategy_allocator.auto_watch", "settings.strategy_allocator.auto_watch_top_n", "settings.risk_controls.max_daily_loss"];

/** Whether the form shows a refusal at the field it names (`symbols[3]` as `symbols[i]`). */
const known = (k: string) => FIELDS.includes(k.replace(/^symbols\[\d+\]$/, "symbols[i]"));

const defaultRange = () => wholeDay(previousTradingDay(todayNy()));

/** Whether the service's market is not the simulated one (unknown until the settings arrive). */
const notSimulatedMarket = (live: DeskLive | undefined) => live?.market_data_broker !== undefined && live.market_data_broker !== "simulated";
/** The service's default: the simulated market where it is the data broker, downloaded days elsewhere. */
const defaultSource = (live: DeskLive | undefined): DeskSource => (notSimulatedMarket(live) ? "downloaded" : "simulated");

function blank(live: DeskLive | undefined): DeskInputs {
  return {
    source: defaultSource(live),
    symbols: "",
    ...defaultRange(),
    touched: false,
    initial_cash: "100000",
    auto_watch: true,
    top_n: String(live?.auto_watch_top_n ?? 5),
    max_daily_loss: "",
  };
}

/** The form filled from an earlier replay; overrides it has no field for are named. */
export function deskFormFrom(d: BacktestDetail): { form: DeskInputs; dropped: string[] } {
  const o = (d.settings ?? {}) as Record<string, Record<string, unknown>>;
  const alloc = o["strategy_allocator"] ?? {};
  const risk = o["risk_controls"] ?? {};
  const eff = (d.effective_settings ?? {}) as Record<string, Record<string, unknown>>;
  const dropped = Object.entries(o).flatMap(([g, kv]) =>
    Object.keys(kv ?? {})
      .map((k) => `${g}.${k}`)
      .filter((k) => !["strategy_allocator.auto_watch", "strategy_allocator.auto_watch_top_n", "risk_controls.max_daily_loss"].includes(k)),
  );
  const n = (v: unknown) => (typeof v === "number" ? inputNumber(v) : "");
  const downloaded = d.source === "downloaded";
  return {
    form: {
      source: downloaded ? "downloaded" : "simulated",
      symbols: downloaded ? (d.symbols ?? []).join(" ") : "",
      start: isoToNyLocal(d.start),
      end: isoToNyLocal(d.end),
      touched: true,
      initial_cash: n(d.initial_cash) || "100000",
      auto_watch: (alloc["auto_watch"] ?? eff["strategy_allocator"]?.["auto_watch"]) === true,
      top_n: n(alloc["auto_watch_top_n"] ?? eff["strategy_allocator"]?.["auto_watch_top_n"]) || "5",
      max_daily_loss: n(risk["max_daily_loss"]),
    },
    dropped,
  };
}

export function DeskForm({ live, seed, onQueued }: { live: DeskLive | undefined; seed: DeskSeed | null; onQueued: (id: string) => void }) {
  const [f, setF] = useState<DeskInputs>(() => blank(live));
  const [topTouched, setTopTouched] = useState(false);
  const [sourceTouched, setSourceTouched] = useState(false);
  const [busy, setBusy] = useState(false);
  const box = useRef<HTMLFormElement>(null);
  /** The symbols last checked or sent, which a refusal at `symbols[i]` indexes. */
  const sent = useRef<string[]>([]);
  const errs = useFormErrors(known);
  const e = errs.fields;
  const marketDate = marketClock.value?.date;
  const notSimulated = notSimulatedMarket(live);

  // The default range follows the market's date (known a moment after the first render).
  useEffect(() => {
    setF((p) => (p.touched ? p : { ...p, ...defaultRange() }));
  }, [marketDate]);
  // The live top N, once the settings arrive, unless typed over.
  useEffect(() => {
    if (!topTouched && live?.auto_watch_top_n !== undefined) setF((p) => ({ ...p, top_n: String(live.auto_watch_top_n) }));
  }, [live?.auto_watch_top_n]);
  // The service's default source, once its data broker is known, unless chosen; never the
  // simulated market where it is not the data broker.
  useEffect(() => {
    setF((p) => (notSimulated ? { ...p, source: "downloaded" } : sourceTouched ? p : { ...p, source: defaultSource(live) }));
  }, [live?.market_data_broker]);
  // "Edit & replay again" (a simulated replay's range, where the market is no longer simulated,
  // as downloaded days).
  useEffect(() => {
    if (!seed) return;
    setF((p) => ({ ...p, ...seed.form, ...(notSimulated && seed.form.source === "simulated" ? { source: "downloaded" as const } : {}) }));
    setTopTouched(true);
    setSourceTouched(true);
    errs.setError(undefined);
    box.current?.scrollIntoView({ behavior: "smooth", block: "start" });
  }, [seed?.n]);

  const set = (k: keyof DeskInputs) => (v: string) => setF((p) => ({ ...p, [k]: v }));
  const setRange = (r: { start: string; end: string }) => setF((p) => ({ ...p, ...r, touched: true }));
  const baseDay = /^\d{4}-\d{2}-\d{2}/.test(f.start) ? f.start.slice(0, 10) : previousTradingDay(todayNy());
  const span = spanMs(f.start, f.end);

  const submit = async (ev: Event) => {
    ev.preventDefault();
    const local: Record<string, string> = {};
    const start = nyLocalToIso(f.start);
    const end = nyLocalToIso(f.end);
    if (!start) local["start"] = "Pick the New York date and time the replay starts at.";
    if (!end) local["end"] = "Pick the New York date and time it stops at.";
    if (start && end && Date.parse(end) <= Date.parse(start)) local["end"] = "Must be after the start.";
    const body: Record<string, unknown> = { kind: "desk", source: f.source, start, end };
    if (f.source === "simulated" && notSimulated) local["source"] = `The market data comes from ${live!.market_data_broker}: only downloaded days replay here.`;
    if (f.source === "downloaded") {
      const symbols = parseSymbols(f.symbols);
      const dup = duplicateAt(symbols);
      sent.current = symbols;
      if (symbols.length > MAX_DESK_SYMBOLS) local["symbols"] = `At most ${MAX_DESK_SYMBOLS.toLocaleString("en-US")} symbols; ${symbols.length.toLocaleString("en-US")} named.`;
      else if (dup >= 0) local[`symbols[${dup}]`] = "is given more than once";
      if (symbols.length) body["symbols"] = symbols;
    }
    const cash = parseNum(f.initial_cash);
    if (cash !== undefined) {
      if (Number.isNaN(cash)) local["initial_cash"] = "Not a number.";
      else body["initial_cash"] = cash;
    }
    const allocator: Record<string, unknown> = { auto_watch: f.auto_watch };
    if (f.auto_watch) {
      const n = parseNum(f.top_n);
      if (n === undefined) local["settings.strategy_allocator.auto_watch_top_n"] = "How many of the radar's top rows to watch.";
      else if (Number.isNaN(n)) local["settings.strategy_allocator.auto_watch_top_n"] = "Not a number.";
      else allocator["auto_watch_top_n"] = n;
    }
    const settings: Record<string, unknown> = { strategy_allocator: allocator };
    const loss = parseNum(f.max_daily_loss);
    if (loss !== undefined) {
      if (Number.isNaN(loss)) local["settings.risk_controls.max_daily_loss"] = "Not a number.";
      else settings["risk_controls"] = { max_daily_loss: loss };
    }
    body["settings"] = settings;
    if (Object.keys(local).length) {
      errs.setError(new ApiError(400, "VALIDATION_ERROR", "Check the marked fields.", { errors: Object.entries(local).map(([field, reason]) => ({ field, reason })) }));
      return;
    }
    setBusy(true);
    errs.setError(undefined);
    try {
      const r = await post<{ backtest_id: string; status: string }>("/api/backtests", body);
      notify("ok", `Desk replay queued: ${deskRange(start!, end!)}, ${deskSourceText(body as { source?: string; symbols?: string[] })} (${r.backtest_id}). Its row below follows it.`);
      onQueued(r.backtest_id);
    } catch (err) {
      errs.setError(toApiError(err));
    } finally {
      setBusy(false);
    }
  };

  const topErr = e["settings.strategy_allocator.auto_watch_top_n"];
  const downloaded = f.source === "downloaded";
  const typed = downloaded ? parseSymbols(f.symbols) : [];
  // A repeat named by its index in the list sent (`symbols[3]`), shown at the symbols with its name.
  const dupKey = Object.keys(e).find((k) => /^symbols\[\d+\]$/.test(k));
  const symbolsErr = e["symbols"] ?? (dupKey ? `${sent.current[Number(dupKey.slice(8, -1))] ?? dupKey}: ${e[dupKey].replace(/\.$/, "")}.` : undefined);
  return (
    <form ref={box} data-testid="desk-form" onSubmit={submit} noValidate class="dt-form desk-form">
      <p class="note muted desk-about">
        The live engine runner replays the prints of that time through the radar, the allocator's auto-watch, the strategies, the risk gate and the
        paper broker's fills, on a database of its own from a flat book — live and replay trade identically, and the live desk is not touched. The
        prints are the simulated market's, regenerated as the live feed made them, or the stored minute bars of downloaded (or imported) days,
        printed the same way.
      </p>
      {notSimulated && (
        <div class="banner dt-warn desk-unavailable" role="note" data-testid="desk-unavailable">
          This service's market data comes from <strong>{live!.market_data_broker}</strong>, not the simulated market: simulated replays are
          unavailable here. Downloaded days can be replayed — download their 1m bars first (Download bars, below; 1d bars of the weeks before give
          the radar its average volumes).
        </div>
      )}
      <div class="form-grid">
        <Field
          label="Prints"
          error={e["source"]}
          hint={downloaded ? "The stored minute bars of the range: download (or import) the days first." : "The simulated market's prints of that time, as the live feed made them."}
        >
          <select
            name="source"
            value={f.source}
            onChange={(ev) => {
              setSourceTouched(true);
              setF((p) => ({ ...p, source: ev.currentTarget.value as DeskSource }));
            }}
          >
            <option value="simulated" disabled={notSimulated}>
              Simulated market (regenerated){notSimulated ? " — unavailable here" : ""}
            </option>
            <option value="downloaded">Downloaded days (stored minute bars)</option>
          </select>
        </Field>
        {downloaded && (
          <Field
            label="Symbols (optional)"
            error={symbolsErr}
            hint={
              typed.length
                ? `${typed.length.toLocaleString("en-US")} symbol${typed.length === 1 ? "" : "s"}, each with stored minute bars in the range; at most ${MAX_DESK_SYMBOLS.toLocaleString("en-US")}.`
                : "Empty: every symbol with stored minute bars in the range. Separate them with commas or spaces."
            }
          >
            <input
              name="symbols"
              value={f.symbols}
              onInput={(ev) => set("symbols")(ev.currentTarget.value.toUpperCase())}
              placeholder="every stored symbol, or e.g. AAPL MSFT NVDA"
              autoComplete="off"
              spellcheck={false}
            />
          </Field>
        )}
        <Field label="Start (New York time)" error={e["start"]} hint="Trading starts here; the day's earlier minutes are printed to no one, not traded.">
          <input type="datetime-local" name="start" value={f.start} max={f.end || undefined} onInput={(ev) => setRange({ start: ev.currentTarget.value, end: f.end })} required />
        </Field>
        <Field
          label="End (New York time)"
          error={e["end"]}
          hint={`${span !== null && span > 0 ? `${duration(span / 1000)} of market time. ` : ""}At most ${MAX_DESK_DAYS} days after the start, not in the market's future.`}
        >
          <input type="datetime-local" name="end" value={f.end} min={f.start || undefined} onInput={(ev) => setRange({ start: f.start, end: ev.currentTarget.value })} required />
        </Field>
        <div class="field dt-presets">
          <span class="label">Quick range</span>
          <span>
            <button type="button" class="btn ghost" onClick={() => setRange(defaultRange())} title="The weekday before the market's date, midnight to midnight New York">
              Previous trading day
            </button>
            <button type="button" class="btn ghost" onClick={() => setRange(sessionOf(baseDay))} title={`${baseDay}, 09:30 to 16:00 New York`}>
              Its session
            </button>
            <button type="button" class="btn ghost" onClick={() => setRange({ start: `${baseDay}T09:30`, end: `${baseDay}T11:30` })} title={`${baseDay}, 09:30 to 11:30 New York`}>
              First two hours
            </button>
          </span>
        </div>
        <Field label="Initial cash ($)" error={e["initial_cash"]} hint="The book's cash at the start. Default $100,000.">
          <input type="number" name="initial_cash" min={1} step="any" value={f.initial_cash} onInput={onInput(set("initial_cash"))} placeholder="100000" />
        </Field>
        <Field
          label="Auto-watch"
          error={e["settings.strategy_allocator.auto_watch"]}
          hint={f.auto_watch ? "The allocator watches the radar's top rows at each scan; its strategy trades them." : "Off: the replay starts with an empty watchlist, so nothing trades."}
        >
          <span class="desk-toggle">
            <input type="checkbox" name="auto_watch" checked={f.auto_watch} onChange={(ev) => setF((p) => ({ ...p, auto_watch: ev.currentTarget.checked }))} /> Watch the radar's top rows
          </span>
        </Field>
        <Field label="Top N" error={topErr} hint={`Radar rows auto-watch considers at each scan, 1 to 200.${live?.auto_watch_top_n !== undefined ? ` Live: ${live.auto_watch_top_n}.` : ""}`}>
          <input
            type="number"
            name="auto_watch_top_n"
            min={1}
            max={200}
            step={1}
            value={f.top_n}
            disabled={!f.auto_watch}
            onInput={(ev) => {
              setTopTouched(true);
              set("top_n")(ev.currentTarget.value);
            }}
          />
        </Field>
        <Field
          label="Max daily loss ($, optional)"
          error={e["settings.risk_controls.max_daily_loss"]}
          hint={`At this loss the risk gate turns REDUCING: no new entries. Empty: the live value${live?.max_daily_loss !== undefined ? `, ${money(live.max_daily_loss)}` : ""}.`}
        >
          <input type="number" name="max_daily_loss" min={0} step="any" value={f.max_daily_loss} onInput={onInput(set("max_daily_loss"))} placeholder={live?.max_daily_loss !== undefined ? String(live.max_daily_loss) : "live value"} />
        </Field>
      </div>
      <ErrorBanner error={errs.banner ?? (e["settings"] ? new ApiError(400, "VALIDATION_ERROR", e["settings"]) : undefined)} />
      <FormActions
        testid="run-desk"
        label="Replay the desk"
        busy={busy}
        disabled={notSimulated && !downloaded}
        onReset={() => {
          setF(blank(live));
          setTopTouched(false);
          setSourceTouched(false);
          errs.setError(undefined);
        }}
        errs={errs}
        idle="A replay is a backtest row: it runs in the background, its row below shows its progress."
      />
    </form>
  );
}
