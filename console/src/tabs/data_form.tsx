// The form pieces the Data tab's run forms share (a backtest, a parameter sweep, a download):
// the strategy catalogue's types, the date range with its presets, number parsing, and refusals
// shown at the fields they name.
import type { ComponentChildren } from "preact";
import { useState } from "preact/hooks";
import { ApiError } from "../api";
import { shiftDay, todayNy } from "../format";
import { Field } from "../ui";
import { day } from "./backtest_detail";

export interface Parameter {
  name: string;
  kind: "NUMBER" | "INTEGER" | string;
  default: number | null;
  minimum: number | null;
  maximum: number | null;
  description: string;
}

export interface Strategy {
  strategy_id: string;
  strategy_version: string;
  description: string;
  live: boolean;
  timeframes: string[];
  parameters: Parameter[];
}

export interface RiskControls {
  max_order_value?: number;
  max_daily_loss?: number;
  max_position_size?: number;
  max_trades_per_day?: number;
}

/** Bar timeframes a run may replay, and how its market orders fill. */
export const TIMEFRAMES = ["1m", "1d"];
export const FILLS = ["NEXT_OPEN", "CLOSE"];

/** The risk controls a run may override, in the order shown. */
export const RISK_FIELDS: { key: keyof RiskControls; label: string; integer: boolean; money: boolean; hint: string }[] = [
  { key: "max_order_value", label: "Max order value ($)", integer: false, money: true, hint: "Largest value of one order." },
  { key: "max_daily_loss", label: "Max daily loss ($)", integer: false, money: true, hint: "Loss in a day after which orders are refused." },
  { key: "max_position_size", label: "Max position size (shares)", integer: true, money: false, hint: "Most shares held in the symbol." },
  { key: "max_trades_per_day", label: "Max trades per day", integer: true, money: false, hint: "Entries allowed in a day." },
];

/** Any failure as the contract's error, for the refusal banners. */
export const toApiError = (e: unknown) => (e instanceof ApiError ? e : new ApiError(0, "CLIENT", String(e)));

/** N days before the market's trading date (negative: after it). */
export const daysAgo = (n: number) => shiftDay(todayNy(), -n);
/** A date input's value as the API's RFC 3339 timestamp. */
export const rfc = (d: string) => `${d}T00:00:00Z`;
/** A stored range bound back to a date input's value. */
export const toInput = (iso: string) => {
  const d = day(iso);
  return /^\d{4}-\d{2}-\d{2}$/.test(d.slice(0, 10)) ? d.slice(0, 10) : "";
};

/** Ranges through today: from N days ago to tomorrow 00:00 UTC (the end is exclusive). */
export const PRESETS: { label: string; days: number }[] = [
  { label: "Today", days: 0 },
  { label: "5 days", days: 5 },
  { label: "1 month", days: 30 },
  { label: "6 months", days: 182 },
  { label: "1 year", days: 365 },
];
export const tomorrow = () => daysAgo(-1);
/** The range a timeframe starts with: a trading week of minutes, half a year of days. */
export const defaultDays = (tf: string) => (tf === "1m" ? 5 : 182);

/** A job id short enough for a table cell (the whole id in its title). */
export const shortId = (id: string) => (id.length > 14 ? `${id.slice(0, 11)}…` : id);

/** Parses a number input: undefined when empty, NaN when not a number. */
export function parseNum(v: string): number | undefined {
  const t = v.trim();
  if (t === "") return undefined;
  return Number(t);
}

/** Date-range inputs with presets; `touched` is false while the range is still a default. */
export function RangeFields({
  start,
  end,
  setRange,
  errors,
  timeframe,
}: {
  start: string;
  end: string;
  setRange: (start: string, end: string, touched: boolean) => void;
  errors: Record<string, string>;
  timeframe: string;
}) {
  return (
    <>
      <Field label="Start (00:00 UTC)" error={errors["start"]} hint="Bars starting on or after this day.">
        <input type="date" name="start" value={start} max={end || undefined} onInput={(e) => setRange(e.currentTarget.value, end, true)} required />
      </Field>
      <Field
        label="End (00:00 UTC, exclusive)"
        error={errors["end"]}
        hint={`Bars before this day: tomorrow includes today. ${timeframe === "1m" ? "1m: at most 366 days." : "1d: up to 20 years."}`}
      >
        <input type="date" name="end" value={end} min={start || undefined} onInput={(e) => setRange(start, e.currentTarget.value, true)} required />
      </Field>
      <div class="field dt-presets">
        <span class="label">Quick range, through today</span>
        <span>
          {PRESETS.filter((p) => (timeframe === "1m" ? p.days <= 365 : p.days > 0)).map((p) => (
            <button type="button" class="btn ghost" key={p.label} onClick={() => setRange(daysAgo(p.days), tomorrow(), true)}>
              {p.label}
            </button>
          ))}
        </span>
      </div>
    </>
  );
}

/** Shows a refusal at the fields it names, and in a banner when it names none of them. */
/**
 * A run form's last row: its submit button, Reset, and the refusal that named no field of the
 * form ("Not queued: …"), else `idle` (what happens once queued).
 */
export function FormActions({
  testid,
  label,
  busy,
  disabled,
  onReset,
  errs,
  idle,
}: {
  testid: string;
  label: string;
  busy: boolean;
  disabled?: boolean;
  onReset: () => void;
  errs: Pick<ReturnType<typeof useFormErrors>, "error" | "banner">;
  idle: ComponentChildren;
}) {
  return (
    <div class="dt-actions">
      <button type="submit" class="btn primary" data-testid={testid} disabled={busy || disabled}>
        {busy ? "Queuing…" : label}
      </button>
      <button type="button" class="btn ghost" onClick={onReset}>
        Reset
      </button>
      {errs.error && !errs.banner ? (
        <span class="down" role="alert">
          Not queued: {errs.error.message}
        </span>
      ) : (
        <span class="muted">{idle}</span>
      )}
    </div>
  );
}

export function useFormErrors(known: (field: string) => boolean) {
  const [error, setError] = useState<ApiError | undefined>();
  const fields = error?.fieldErrors ?? {};
  const atField = Object.keys(fields).some(known);
  return {
    error,
    setError,
    fields: atField ? fields : {},
    banner: error && !atField ? error : undefined,
  };
}
