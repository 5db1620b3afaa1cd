// Settings: the five groups of runtime settings as forms, each saved on its own with only the
// fields that changed (PUT /api/settings, a partial body). Refusals are shown where they belong:
// validation errors at the field, guards and permissions in the group's banner. Switching to
// LIVE asks first. Changes made elsewhere (settings.updated) refresh the untouched fields and
// never overwrite unsaved edits. Then the notification channels, each with a test to send
// (tabs/notifications.tsx). Below, every persisted version with what it changed.
import "./settings.css";
import { Fragment, type ComponentChildren } from "preact";
import { useEffect, useMemo, useRef, useState } from "preact/hooks";
import { ApiError, call, get, put, withQuery } from "../api";
import { useEvents, type StreamEvent } from "../events";
import { anyValue, dateTime, inputNumber } from "../format";
import { canOperate, isAdmin, me } from "../session";
import { Confirm, ErrorBanner, Field, Section, Table, useLoad, useThrottled, type Column } from "../ui";
import { NotificationTests } from "./notifications";

// ---------------------------------------------------------------------------------------------
// The form's description of every group and field

type Kind = "bool" | "enum" | "strategy" | "int" | "number" | "money" | "symbols";

interface FieldSpec {
  key: string;
  label: string;
  kind: Kind;
  hint: string;
  options?: { value: string; label: string }[];
  min?: number;
  max?: number;
  step?: number;
  /** Shown after the label: "$", "%", "shares"… */
  unit?: string;
  /** Shown only when the service's settings have it (a field newer than some services). */
  optional?: boolean;
}

interface GroupSpec {
  id: string;
  title: string;
  about: string;
  fields: FieldSpec[];
}

const GROUPS: GroupSpec[] = [
  {
    id: "runtime",
    title: "Runtime",
    about: "How the service trades: the mode, where prices come from, where orders go, and the market hours it keeps.",
    fields: [
      {
        key: "trading_mode",
        label: "Trading mode",
        kind: "enum",
        options: [
          { value: "PAPER", label: "PAPER — simulated money" },
          { value: "DEMO", label: "DEMO — fast simulated market" },
          { value: "LIVE", label: "LIVE — real money" },
        ],
        hint: "PAPER trades simulated money; DEMO runs the simulated market faster than real time; LIVE sends real orders to the broker.",
      },
      {
        key: "market_data_broker",
        label: "Market data source",
        kind: "enum",
        options: [{ value: "simulated", label: "simulated" }],
        hint: "Where prices come from. Changing it needs an admin and no open positions or orders.",
      },
      {
        key: "execution_broker",
        label: "Execution broker",
        kind: "enum",
        options: [{ value: "paper", label: "paper" }],
        hint: "Where orders are sent. The paper broker fills against simulated prices; it cannot trade LIVE.",
      },
      {
        key: "market_calendar",
        label: "Market calendar",
        kind: "enum",
        options: [
          { value: "ALWAYS_OPEN", label: "Always open" },
          { value: "NYSE", label: "NYSE hours" },
        ],
        hint: "When the market trades: any time (the simulator), or the NYSE calendar — pre-market 04:00–09:30, regular 09:30–16:00, after-hours 16:00–20:00 New York, with early closes and holidays.",
      },
      {
        key: "flatten_minutes_before_close",
        label: "Flatten before close",
        unit: "min",
        kind: "int",
        min: 0,
        max: 390,
        step: 1,
        hint: "Strategies close their positions this many minutes before the close. 0 turns it off.",
      },
    ],
  },
  {
    id: "momentum_radar",
    title: "Momentum radar",
    about: "Which stocks the radar ranks on each scan. A stock must pass every filter.",
    fields: [
      { key: "enabled", label: "Radar scanning", kind: "bool", hint: "Off: no new scans, so nothing new is ranked or auto-watched." },
      { key: "scan_on_minute_boundary", label: "Scan on the minute", kind: "bool", hint: "Scan at :00 of each minute so scans line up with 1-minute bars." },
      { key: "min_price", label: "Minimum price", unit: "$", kind: "number", min: 0.0001, step: 0.01, hint: "Stocks cheaper than this are ignored (up to 4 decimals)." },
      { key: "max_price", label: "Maximum price", unit: "$", kind: "number", min: 0.0001, step: 0.01, hint: "Stocks dearer than this are ignored; must be above the minimum price." },
      { key: "min_percentage_gain", label: "Minimum gain", unit: "%", kind: "number", min: -100, max: 10000, step: 0.5, hint: "Gain since yesterday's close, in percent: 10 means up at least 10%." },
      { key: "min_relative_volume", label: "Minimum relative volume", unit: "×", kind: "number", min: 0, max: 1000, step: 0.5, hint: "Volume today against the usual volume by this time of day: 5 means five times normal." },
      { key: "max_float", label: "Maximum float", unit: "shares", kind: "int", min: 1, step: 1000000, hint: "Largest float (shares available to trade) a stock may have; small floats move fastest." },
      { key: "min_volume", label: "Minimum volume", unit: "shares", kind: "int", min: 0, step: 10000, hint: "Shares traded today, at least." },
      { key: "universe", label: "Universe", kind: "symbols", hint: "Only these symbols may appear, separated by commas. Leave empty to scan every symbol the data source has." },
    ],
  },
  {
    id: "strategy_allocator",
    title: "Strategy allocator",
    about: "Which strategy trades watched symbols, whether the radar's leaders are watched automatically, and how positions are sized.",
    fields: [
      { key: "default_strategy_id", label: "Default strategy", kind: "strategy", hint: "Strategy that trades each newly watched symbol. Only strategies that may trade live can be chosen." },
      { key: "auto_watch", label: "Auto-watch", kind: "bool", hint: "Add the radar's top symbols to the watchlist on each scan, without an operator." },
      { key: "auto_watch_top_n", label: "Auto-watch top N", kind: "int", min: 1, max: 200, step: 1, hint: "How many of the radar's top symbols auto-watch considers on each scan (1–200)." },
      { key: "risk_per_trade", label: "Risk per trade", unit: "$", kind: "money", min: 0.01, step: 1, hint: "Dollars lost if a trade hits its stop. Shares bought = this ÷ (entry − stop)." },
      { key: "max_position_value", label: "Max position value", unit: "$", kind: "money", min: 0.01, step: 100, hint: "Most one position may cost at entry, whatever the risk sizing says." },
      { key: "reward_multiple", label: "Reward multiple", unit: "R", kind: "number", min: 0.5, max: 20, step: 0.25, hint: "Profit target as a multiple of the risk: 2 takes profit at twice the stop distance (0.5–20)." },
      { key: "scale_out_fraction", label: "Scale-out fraction", kind: "number", min: 0, max: 1, step: 0.05, hint: "Share of the position sold at the target: 0.5 sells half, 1 sells all (0–1)." },
      {
        key: "trade_extended_hours",
        label: "Trade extended hours",
        kind: "bool",
        optional: true,
        hint: "Strategies may enter in the pre-market and the after-hours with extended-hours limits; the engine holds their stops until 09:30. Off: the regular session only.",
      },
    ],
  },
  {
    id: "risk_controls",
    title: "Risk controls",
    about: "Limits every order is checked against before it leaves. A refused order appears under Health → Risk violations.",
    fields: [
      { key: "max_daily_loss", label: "Max daily loss", unit: "$", kind: "money", min: 0.01, step: 50, hint: "Loss today (realized + unrealized) at which trading turns REDUCING: no new buys until tomorrow." },
      { key: "max_position_size", label: "Max position size", unit: "shares", kind: "int", min: 1, max: 10000000, step: 100, hint: "Most shares one position may hold." },
      { key: "max_trades_per_day", label: "Max trades per day", kind: "int", min: 1, max: 100000, step: 1, hint: "Most orders that open or add to a position in one trading day." },
      { key: "active_watchlist_limit", label: "Watchlist limit", unit: "symbols", kind: "int", min: 1, max: 500, step: 1, hint: "Most symbols that may be watched at once." },
      { key: "open_position_limit", label: "Open position limit", unit: "symbols", kind: "int", min: 1, max: 500, step: 1, hint: "Most symbols that may be held at once." },
      { key: "duplicate_order_window_seconds", label: "Duplicate order window", unit: "s", kind: "int", min: 0, max: 86400, step: 1, hint: "A repeat of the same symbol, side and quantity within this many seconds is refused. 0 turns the check off." },
      { key: "max_order_value", label: "Max order value", unit: "$", kind: "money", min: 0.01, step: 100, hint: "Largest value of one order." },
      { key: "market_buy_buffer_pct", label: "Market buy buffer", unit: "%", kind: "number", min: 0, max: 50, step: 0.5, hint: "A market buy is valued this much above the last trade for buying power, since its fill price is not known when it leaves; entries that buy with all the cash keep this margin. Lowering it loosens a limit." },
      { key: "price_collar_pct", label: "Price collar", unit: "%", kind: "number", min: 0.01, max: 100, step: 0.5, hint: "A limit or stop price further than this from the last trade is refused, as a likely typo." },
      { key: "alert_warning_loss_pct", label: "Warning at loss", unit: "%", kind: "number", min: 0.01, max: 100, step: 0.5, hint: "A position down this much (percent of its cost) is flagged WARNING." },
      { key: "alert_critical_loss_pct", label: "Critical at loss", unit: "%", kind: "number", min: 0.01, max: 100, step: 0.5, hint: "A position down this much is flagged CRITICAL; must be above the warning level." },
      { key: "default_stop_distance_pct", label: "Default stop distance", unit: "%", kind: "number", min: 0.1, max: 50, step: 0.5, hint: "The order ticket's stop is prefilled this far below the entry's price (0.1–50)." },
      { key: "require_broker_stop", label: "Require the stop at the broker", kind: "bool", hint: "A strategy position whose stop the broker refused, or that is not resting at the broker 5 seconds after the entry filled, is sold at market (violation BROKER_STOP_MISSING)." },
      {
        key: "extended_hours_entry_offset_pct",
        label: "Extended-hours entry offset",
        unit: "%",
        kind: "number",
        min: 0,
        max: 20,
        step: 0.1,
        optional: true,
        hint: "Outside the regular session the order ticket prefills its limit this far above the ask for a buy, below the bid for a sell (0–20).",
      },
      {
        key: "extended_hours_exit_slippage_pct",
        label: "Extended-hours exit slippage",
        unit: "%",
        kind: "number",
        min: 0,
        max: 20,
        step: 0.1,
        optional: true,
        hint: "An exit outside the regular session (a close, a stop the engine fires, the emergency halt) is a limit this far under the bid, re-priced while it does not fill (0–20).",
      },
    ],
  },
  {
    id: "analytics",
    title: "Analytics",
    about: "Thresholds of the trade analytics and the recommendations on the P&L tab.",
    fields: [
      { key: "breakeven_threshold", label: "Breakeven threshold", unit: "$", kind: "money", min: 0, step: 0.5, hint: "Trades whose net P&L is within this many dollars of zero count as BREAKEVEN." },
      { key: "min_sample_size", label: "Minimum sample size", unit: "trades", kind: "int", min: 1, max: 1000000, step: 1, hint: "Fewest completed trades a group needs before a recommendation is made about it." },
      { key: "confidence_level", label: "Confidence level", kind: "number", min: 0.5, max: 0.999, step: 0.01, hint: "Confidence of the intervals behind recommendations: 0.95 means 95% (0.5–0.999)." },
    ],
  },
];

const GUARD_ADVICE: Record<string, string> = {
  admin_role: "Only an admin token may make this change. Ask an admin, or sign in with an admin token.",
  "X-Confirm-Live": "This change needs the LIVE confirmation; it was not given.",
  no_open_exposure: "Close every position and cancel every open order first (Positions and Orders tabs), then save again.",
  live_capable_broker: "LIVE needs an execution broker that can route real orders; this service has none configured.",
  authentication: "LIVE needs authentication switched on (TRADEOPS_AUTH_ENABLED).",
};

// ---------------------------------------------------------------------------------------------
// Types and value handling

type Values = Record<string, unknown>;
type SettingsDoc = Record<string, Values>;
type Draft = Record<string, string | boolean>;

interface Strategy {
  strategy_id: string;
  strategy_version: string;
  description: string;
  live: boolean;
}

interface HistoryRow {
  version: number;
  updated: string[];
  actor: string;
  created_at: string;
  settings: SettingsDoc;
}

interface Saved {
  updated: string[];
  effective_settings: SettingsDoc;
  version: number;
}

/** The text an input shows for a stored value. */
function toInput(f: FieldSpec, v: unknown): string | boolean {
  if (f.kind === "bool") return Boolean(v);
  if (f.kind === "symbols") return Array.isArray(v) ? v.join(", ") : "";
  if (v === null || v === undefined) return "";
  return typeof v === "number" ? inputNumber(v) : String(v);
}

function parseSymbols(text: string): string[] {
  return text
    .split(/[\s,;]+/)
    .map((s) => s.trim().toUpperCase())
    .filter(Boolean);
}

/** The value to send for an input, or the reason it cannot be sent. */
function parse(f: FieldSpec, raw: string | boolean): { value?: unknown; error?: string } {
  if (f.kind === "bool") return { value: Boolean(raw) };
  const text = String(raw).trim();
  if (f.kind === "enum" || f.kind === "strategy") return { value: text };
  if (f.kind === "symbols") return { value: parseSymbols(text) };
  if (text === "") return { error: "Enter a value" };
  const n = Number(text);
  if (!Number.isFinite(n)) return { error: "Enter a number" };
  if (f.kind === "int" && !Number.isInteger(n)) return { error: "Enter a whole number" };
  return { value: n };
}

const same = (a: unknown, b: unknown) => JSON.stringify(a) === JSON.stringify(b);

/** A stored value in words, for the history. */
function show(v: unknown): string {
  if (v === undefined) return "?";
  if (Array.isArray(v)) return v.length ? v.join(", ") : "(all)";
  if (typeof v === "boolean") return v ? "on" : "off";
  return anyValue(v);
}

/** `risk_controls.max_daily_loss` or `momentum_radar.universe[1]` → field key within `group`. */
function fieldOf(group: string, path: string): { key: string; index?: number } | null {
  if (!path.startsWith(`${group}.`)) return null;
  const rest = path.slice(group.length + 1);
  const m = rest.match(/^([a-z0-9_]+)(?:\[(\d+)\])?/);
  return m ? { key: m[1], index: m[2] === undefined ? undefined : Number(m[2]) } : null;
}

const labelOf = (path: string) => {
  const [g, k] = path.split(".");
  const spec = GROUPS.find((x) => x.id === g)?.fields.find((f) => f.key === k?.replace(/\[.*$/, ""));
  return spec ? `${GROUPS.find((x) => x.id === g)!.title} › ${spec.label}` : path;
};

// ---------------------------------------------------------------------------------------------
// One group's form

interface ExternalChange {
  seq: number;
  version: number | null;
  actor: string;
  updated: string[];
}

function GroupForm({
  spec,
  values,
  mode,
  strategies,
  external,
  onSaved,
}: {
  spec: GroupSpec;
  values: Values;
  mode: string;
  strategies: Strategy[] | undefined;
  external: ExternalChange | null;
  onSaved: (s: Saved) => void;
}) {
  const [draft, setDraft] = useState<Draft>({});
  const [fieldErrors, setFieldErrors] = useState<Record<string, string>>({});
  const [error, setError] = useState<ApiError | undefined>();
  const [saved, setSaved] = useState<string>("");
  const [busy, setBusy] = useState(false);
  const [asking, setAsking] = useState(false);
  const [notice, setNotice] = useState<ExternalChange | null>(null);
  const saving = useRef(false);
  const editable = canOperate.value;

  // What would be sent: only touched fields whose value differs from the effective one.
  const { changes, clientErrors } = useMemo(() => {
    const changes: Values = {};
    const clientErrors: Record<string, string> = {};
    for (const f of spec.fields) {
      if (!(f.key in draft)) continue;
      const p = parse(f, draft[f.key]);
      if (p.error) clientErrors[f.key] = p.error;
      else if (!same(p.value, values[f.key])) changes[f.key] = p.value;
    }
    return { changes, clientErrors };
  }, [draft, values, spec]);
  const dirty = Object.keys(changes).length > 0 || Object.keys(clientErrors).length > 0;
  const dirtyRef = useRef(dirty);
  dirtyRef.current = dirty;

  // A change saved elsewhere to this group while it has unsaved edits: keep them, say so.
  useEffect(() => {
    if (!external || saving.current || !dirtyRef.current) return;
    if (external.updated.some((p) => p.startsWith(`${spec.id}.`))) setNotice(external);
  }, [external?.seq]);

  const edit = (key: string, v: string | boolean) => {
    setDraft((d) => ({ ...d, [key]: v }));
    setSaved("");
    setFieldErrors((e) => {
      if (!(key in e)) return e;
      const { [key]: _gone, ...rest } = e;
      return rest;
    });
  };

  const reset = () => {
    setDraft({});
    setFieldErrors({});
    setError(undefined);
    setNotice(null);
    setSaved("");
  };

  const goingLive = spec.id === "runtime" && changes["trading_mode"] === "LIVE" && values["trading_mode"] !== "LIVE";

  const save = async () => {
    if (Object.keys(clientErrors).length > 0) {
      setFieldErrors(clientErrors);
      setError(undefined);
      return;
    }
    setBusy(true);
    saving.current = true;
    setError(undefined);
    setFieldErrors({});
    try {
      const r = await put<Saved>("/api/settings", { [spec.id]: changes });
      dirtyRef.current = false;
      setDraft({});
      setNotice(null);
      setSaved(r.updated.length ? `Saved (version ${r.version})` : `No change: already in effect (version ${r.version})`);
      onSaved(r);
    } catch (e) {
      const err = e instanceof ApiError ? e : new ApiError(0, "CLIENT", String(e));
      if (err.code === "VALIDATION_ERROR") {
        const at: Record<string, string> = {};
        const elsewhere: string[] = [];
        for (const [path, reason] of Object.entries(err.fieldErrors)) {
          const hit = fieldOf(spec.id, path);
          const f = hit && spec.fields.find((x) => x.key === hit.key);
          if (!hit || !f) {
            elsewhere.push(`${path}: ${reason}`);
            continue;
          }
          let text = reason;
          if (f.kind === "symbols" && hit.index !== undefined) {
            const list = Array.isArray(changes[f.key]) ? (changes[f.key] as string[]) : [];
            text = `“${list[hit.index] ?? `#${hit.index + 1}`}” ${reason}`;
          }
          at[hit.key] = at[hit.key] ? `${at[hit.key]}; ${text}` : text;
        }
        setFieldErrors(at);
        if (elsewhere.length) setError(new ApiError(err.status, err.code, elsewhere.join(" · "), err.detail));
      } else {
        setError(err);
      }
    } finally {
      saving.current = false;
      setBusy(false);
    }
  };

  const submit = (e: Event) => {
    e.preventDefault();
    if (!editable || !dirty || busy) return;
    if (goingLive) setAsking(true);
    else save();
  };

  const guard = error?.code === "SETTINGS_UPDATE_BLOCKED" ? String(error.detail["guard"] ?? "") : "";
  const guardFields = error?.code === "SETTINGS_UPDATE_BLOCKED" && Array.isArray(error.detail["fields"]) ? (error.detail["fields"] as string[]) : [];
  const errorCount = Object.keys(fieldErrors).length;

  const input = (f: FieldSpec) => {
    const name = `${spec.id}.${f.key}`;
    const current = toInput(f, values[f.key]);
    const shown = f.key in draft ? draft[f.key] : current;
    const changed = f.key in changes || f.key in clientErrors;
    const cls = changed ? "changed" : "";
    const disabled = !editable || busy;
    switch (f.kind) {
      case "bool":
        return (
          <span class={`switch-row ${cls}`}>
            <input type="checkbox" name={name} checked={Boolean(shown)} disabled={disabled} onChange={(e) => edit(f.key, e.currentTarget.checked)} />
            <span>{shown ? "On" : "Off"}</span>
          </span>
        );
      case "enum":
      case "strategy": {
        let options = f.options ?? [];
        if (f.kind === "strategy") {
          options = (strategies ?? []).map((s) => ({
            value: s.strategy_id,
            label: `${s.strategy_id} ${s.strategy_version}${s.live ? "" : " (backtest only)"}`,
          }));
        }
        const known = options.some((o) => o.value === shown);
        return (
          <select name={name} class={cls} value={String(shown)} disabled={disabled} onChange={(e) => edit(f.key, e.currentTarget.value)}>
            {!known && <option value={String(shown)}>{String(shown)}</option>}
            {options.map((o) => (
              <option
                key={o.value}
                value={o.value}
                disabled={f.kind === "strategy" && strategies?.find((s) => s.strategy_id === o.value)?.live === false}
              >
                {o.label}
              </option>
            ))}
          </select>
        );
      }
      case "symbols":
        return (
          <input
            type="text"
            name={name}
            class={cls}
            value={String(shown)}
            disabled={disabled}
            placeholder="All symbols"
            autoComplete="off"
            spellcheck={false}
            onInput={(e) => edit(f.key, e.currentTarget.value)}
          />
        );
      default:
        return (
          <input
            type="number"
            name={name}
            class={cls}
            value={String(shown)}
            min={f.min}
            max={f.max}
            step={f.kind === "int" ? f.step ?? 1 : "any"}
            disabled={disabled}
            inputMode={f.kind === "int" ? "numeric" : "decimal"}
            onInput={(e) => edit(f.key, e.currentTarget.value)}
          />
        );
    }
  };

  const liveNow = mode === "LIVE";
  return (
    <form class={`panel settings-group ${dirty ? "dirty" : ""}`} data-testid={`settings-${spec.id}`} onSubmit={submit} noValidate>
      <div class="panel-head">
        <div>
          <h2>
            {spec.title} {dirty && <span class="unsaved-dot" title="Unsaved changes">● unsaved</span>}
          </h2>
          <p class="group-about">{spec.about}</p>
        </div>
        <div class="panel-actions">
          {saved && !dirty && (
            <span class="saved-note" data-testid={`saved-${spec.id}`}>
              ✓ {saved}
            </span>
          )}
          {editable && (
            <>
              <button type="button" class="btn" onClick={reset} disabled={!dirty || busy} data-testid={`reset-${spec.id}`}>
                Reset
              </button>
              <button type="submit" class={`btn ${goingLive ? "danger" : "primary"}`} disabled={!dirty || busy} data-testid={`save-${spec.id}`}>
                {busy ? "Saving…" : goingLive ? "Save: switch to LIVE" : "Save"}
              </button>
            </>
          )}
        </div>
      </div>
      {notice && (
        <div class="banner info changed-elsewhere" role="status">
          <strong>Changed elsewhere.</strong> {notice.actor} saved {notice.updated.filter((p) => p.startsWith(`${spec.id}.`)).map(labelOf).join(", ")}
          {notice.version ? ` (version ${notice.version})` : ""}. Your unsaved edits are kept; fields you did not touch already show the new values.{" "}
          <button type="button" class="btn ghost" onClick={reset}>
            Discard my edits
          </button>
        </div>
      )}
      {error && (
        <>
          <ErrorBanner error={error} />
          {(guard || guardFields.length > 0) && (
            <p class="note guard-note">
              {GUARD_ADVICE[guard] ?? ""} {guardFields.length > 0 && <span>Field{guardFields.length > 1 ? "s" : ""}: {guardFields.map(labelOf).join(", ")}.</span>}
            </p>
          )}
        </>
      )}
      {errorCount > 0 && !error && (
        <p class="note field-summary" role="alert">
          Not saved: correct the {errorCount === 1 ? "field" : `${errorCount} fields`} marked in red.
        </p>
      )}
      {spec.id === "risk_controls" && liveNow && editable && (
        <p class="note live-note">Trading is LIVE: loosening any limit needs an admin token, the LIVE confirmation, and no open positions or orders.</p>
      )}
      {spec.id === "runtime" && editable && !isAdmin.value && (
        <p class="note">Switching to LIVE and changing a broker need an admin token; the service will refuse them for {me.value?.role ?? "this role"}s.</p>
      )}
      <div class="form-grid settings-grid">
        {spec.fields.filter((f) => !f.optional || f.key in values).map((f) => (
          <div key={f.key} class={`setting ${f.kind === "symbols" ? "wide" : ""}`}>
            <Field label={f.unit ? `${f.label} (${f.unit})` : f.label} error={fieldErrors[f.key]} hint={f.hint}>
              {input(f)}
            </Field>
            {spec.id === "runtime" && f.key === "trading_mode" && goingLive && (
              <p class="live-warning" role="alert" data-testid="live-warning">
                ⚠ LIVE sends real orders with real money to the broker. Saving asks you to confirm, needs an admin token, and is refused while any
                position or order is open.
              </p>
            )}
            {spec.id === "runtime" && f.key === "trading_mode" && liveNow && !goingLive && <p class="live-warning">● Trading is LIVE now: orders use real money.</p>}
          </div>
        ))}
      </div>
      {asking && (
        <Confirm
          title="Switch trading to LIVE"
          confirmLabel="Switch to LIVE"
          danger
          testid="live-switch-confirm"
          onClose={() => setAsking(false)}
          onConfirm={save}
        >
          <p>
            <span class="mode-badge LIVE">LIVE</span> From the moment this is saved, strategies and operators send <strong>real orders with real money</strong>{" "}
            to the broker.
          </p>
          <p>
            Check the risk controls first: max daily loss, position size and order value apply to real money. Refusals, if any, are shown in the Runtime
            section.
          </p>
        </Confirm>
      )}
    </form>
  );
}

// ---------------------------------------------------------------------------------------------
// History

const PAGE = 25;

function History({ reloadKey }: { reloadKey: number }) {
  const [rows, setRows] = useState<HistoryRow[]>([]);
  const [next, setNext] = useState<string | null>(null);
  const [error, setError] = useState<ApiError | undefined>();
  const [loading, setLoading] = useState(true);
  const [more, setMore] = useState(false);
  const rowsRef = useRef(rows);
  rowsRef.current = rows;

  const first = async () => {
    setLoading(true);
    try {
      const env = await call<HistoryRow[]>("GET", withQuery("/api/settings/history", { limit: PAGE }));
      const old = rowsRef.current;
      if (old.length <= PAGE) {
        setRows(env.data);
        setNext(env.meta.next_cursor ?? null);
      } else {
        // Keep the pages loaded further down (and their cursor); put the newest page on top.
        const oldest = env.data.length ? env.data[env.data.length - 1].version : Infinity;
        setRows([...env.data, ...old.filter((r) => r.version < oldest)]);
      }
      setError(undefined);
    } catch (e) {
      setError(e instanceof ApiError ? e : new ApiError(0, "CLIENT", String(e)));
    } finally {
      setLoading(false);
    }
  };
  useEffect(() => {
    first();
  }, [reloadKey]);

  const loadMore = async () => {
    if (!next) return;
    setMore(true);
    try {
      const env = await call<HistoryRow[]>("GET", withQuery("/api/settings/history", { limit: PAGE, cursor: next }));
      setRows((old) => [...old, ...env.data.filter((r) => !old.some((o) => o.version === r.version))]);
      setNext(env.meta.next_cursor ?? null);
    } catch (e) {
      setError(e instanceof ApiError ? e : new ApiError(0, "CLIENT", String(e)));
    } finally {
      setMore(false);
    }
  };

  const byVersion = useMemo(() => new Map(rows.map((r) => [r.version, r])), [rows]);

  const changeList = (r: HistoryRow): ComponentChildren => {
    if (r.updated.length === 0) return <span class="muted">Initial settings</span>;
    const prev = byVersion.get(r.version - 1);
    return (
      <span class="changes">
        {r.updated.map((path) => {
          const [g, k] = path.split(".");
          const after = r.settings?.[g]?.[k];
          const before = prev?.settings?.[g]?.[k];
          return (
            <span key={path} class="change" title={path}>
              <span class="change-field">{labelOf(path)}</span>{" "}
              {prev ? (
                <>
                  <span class="muted">{show(before)}</span> → <strong>{show(after)}</strong>
                </>
              ) : (
                <>
                  → <strong>{show(after)}</strong>
                </>
              )}
            </span>
          );
        })}
      </span>
    );
  };

  const columns: Column<HistoryRow>[] = [
    { key: "version", label: "Version", num: true, render: (r) => <strong>v{r.version}</strong> },
    { key: "created_at", label: "When (NY)", render: (r) => dateTime(r.created_at) },
    { key: "actor", label: "Actor", render: (r) => (r.actor === "system" || r.actor === "config" ? <span class="muted">{r.actor}</span> : r.actor) },
    { key: "updated", label: "What changed", sortValue: (r) => r.updated.join(","), render: changeList },
  ];

  return (
    <Section
      title={
        <>
          Settings history <span class="muted">· {rows.length} version{rows.length === 1 ? "" : "s"} shown</span>
        </>
      }
      actions={
        <button class="btn" onClick={first} disabled={loading}>
          {loading ? "Loading…" : "Refresh"}
        </button>
      }
    >
      <ErrorBanner error={error} />
      <Table
        testid="settings-history"
        columns={columns}
        rows={rows}
        rowKey={(r) => String(r.version)}
        sort={{ key: "version", desc: true }}
        empty={loading ? "Loading…" : "No settings version is recorded yet."}
      />
      {next && (
        <div class="load-more">
          <button class="btn" onClick={loadMore} disabled={more} data-testid="settings-history-more">
            {more ? "Loading…" : "Load more"}
          </button>
        </div>
      )}
    </Section>
  );
}

// ---------------------------------------------------------------------------------------------
// The tab

export function SettingsTab() {
  const settings = useLoad(() => get<SettingsDoc>("/api/settings"));
  const strategies = useLoad(() => get<Strategy[]>("/api/strategies"));
  const [external, setExternal] = useState<ExternalChange | null>(null);
  const [historyKey, setHistoryKey] = useState(0);
  const [version, setVersion] = useState<number | null>(null);
  const seq = useRef(0);

  // The version in effect: the newest in the history.
  useEffect(() => {
    get<HistoryRow[]>(withQuery("/api/settings/history", { limit: 1 })).then(
      (r) => r[0] && setVersion((v) => Math.max(v ?? 0, r[0].version)),
      () => undefined,
    );
  }, [historyKey]);

  const reload = useThrottled(() => {
    settings.reload();
    setHistoryKey((k) => k + 1);
  }, 1000);
  useEvents(
    ["settings.updated"],
    useMemo(
      () => (e: StreamEvent) => {
        const d = e.data ?? {};
        setExternal({
          seq: ++seq.current,
          version: typeof d.version === "number" ? d.version : null,
          actor: typeof d.actor === "string" ? d.actor : "someone",
          updated: Array.isArray(d.updated) ? d.updated : [],
        });
        if (typeof d.version === "number") setVersion((v) => Math.max(v ?? 0, d.version));
        reload();
      },
      [reload],
    ),
  );

  const onSaved = (s: Saved) => {
    settings.set(s.effective_settings);
    setVersion((v) => Math.max(v ?? 0, s.version));
    setHistoryKey((k) => k + 1);
  };

  const doc = settings.data;
  const mode = String(doc?.runtime?.trading_mode ?? "");
  return (
    <div data-testid="tab-settings" class="settings-tab">
      <div class="settings-top">
        <div>
          <h2>Settings</h2>
          <p class="muted">
            Changes apply at once, without a restart, and each save is a new version recorded below and in the audit log.
            {version !== null && (
              <>
                {" "}
                In effect: <strong data-testid="settings-version">version {version}</strong>.
              </>
            )}
          </p>
        </div>
        <nav class="settings-jump" aria-label="Groups">
          {GROUPS.map((g) => (
            <a key={g.id} href={`#/settings`} onClick={(e) => (e.preventDefault(), document.querySelector(`[data-testid="settings-${g.id}"]`)?.scrollIntoView({ behavior: "smooth" }))}>
              {g.title}
            </a>
          ))}
          <a href={`#/settings`} onClick={(e) => (e.preventDefault(), document.querySelector(`[data-testid="settings-notifications"]`)?.scrollIntoView({ behavior: "smooth" }))}>
            Notifications
          </a>
        </nav>
      </div>
      {me.value && !canOperate.value && (
        <div class="banner info" data-testid="settings-readonly">
          Read-only: your role ({me.value.role}) can see the settings but not change them. An operator or admin can.
        </div>
      )}
      <ErrorBanner error={settings.error} />
      {strategies.error && <div class="banner info">The strategy list could not be read ({strategies.error.message}); the default strategy shows its current value only.</div>}
      {!doc ? (
        settings.loading && <p class="note">Loading the settings…</p>
      ) : (
        GROUPS.map((g) => (
          <Fragment key={g.id}>
            <GroupForm spec={g} values={doc[g.id] ?? {}} mode={mode} strategies={strategies.data} external={external} onSaved={onSaved} />
          </Fragment>
        ))
      )}
      <NotificationTests />
      <History reloadKey={historyKey} />
    </div>
  );
}
