import { signal } from "@preact/signals";

// Number and time formatting, the one place the console turns numbers and times into text.
// Money is shown to the cent, prices to the cent (to 4 places under $1), and times in New York,
// the market's zone, which is what an operator reads on a tape. The service keeps money in exact
// decimals and sends JSON numbers; every figure is rounded here for display, after the binary
// float drift of its arithmetic is removed (0.1 + 0.2 shows as 0.3, never 0.30000000000000004).
// Chart axes get labels from here too: rounded to the tick step, so no two ticks read the same.

const usd = new Intl.NumberFormat("en-US", { style: "currency", currency: "USD" });
const num = new Intl.NumberFormat("en-US");
const nyTime = new Intl.DateTimeFormat("en-US", {
  timeZone: "America/New_York",
  hour: "2-digit",
  minute: "2-digit",
  second: "2-digit",
  hour12: false,
});
const nyDateTime = new Intl.DateTimeFormat("en-CA", {
  timeZone: "America/New_York",
  year: "numeric",
  month: "2-digit",
  day: "2-digit",
  hour: "2-digit",
  minute: "2-digit",
  second: "2-digit",
  hour12: false,
});
const nyDate = new Intl.DateTimeFormat("en-CA", {
  timeZone: "America/New_York",
  year: "numeric",
  month: "2-digit",
  day: "2-digit",
});

type N = number | null | undefined;

/** `v` without binary float drift: the nearest number of 12 significant digits. */
export const clean = (v: number) => (Number.isFinite(v) ? Number(v.toPrecision(12)) : v);

/** `v` rounded to `digits` decimals (half away from zero), drift removed first; never -0. */
export function round(v: number, digits = 2): number {
  const f = 10 ** digits;
  const c = clean(v);
  const r = (Math.sign(c) * Math.round(clean(Math.abs(c) * f))) / f;
  return r === 0 ? 0 : r;
}

const fixedText = (v: number, digits: number) => round(v, digits).toFixed(digits);

export const money = (v: N) => (v === null || v === undefined ? "—" : usd.format(round(v, 2)));
/** Money with an explicit sign, for P&L. */
export const pnl = (v: N) => {
  if (v === null || v === undefined) return "—";
  const r = round(v, 2);
  return (r > 0 ? "+" : "") + usd.format(r);
};
export const price = (v: N) =>
  v === null || v === undefined ? "—" : Math.abs(v) < 1 ? `$${fixedText(v, 4)}` : `$${fixedText(v, 2)}`;
export const int = (v: N) => (v === null || v === undefined ? "—" : num.format(round(v, 0)));
/** A percentage given in percent (4.5 → "+4.50%"). */
export const pct = (v: N, digits = 2) => {
  if (v === null || v === undefined) return "—";
  const r = round(v, digits);
  return `${r > 0 ? "+" : ""}${r.toFixed(digits)}%`;
};
/** A ratio given as a fraction (0.045 → "4.50%"). */
export const frac = (v: N, digits = 2) => (v === null || v === undefined ? "—" : `${fixedText(v * 100, digits)}%`);
export const fixed = (v: N, digits = 2) => (v === null || v === undefined ? "—" : fixedText(v, digits));

const plainFormat = new Intl.NumberFormat("en-US", { maximumFractionDigits: 6 });
/** A number as it is, grouped, up to 6 decimals, without float drift (settings, parameters). */
export const plain = (v: N) => (v === null || v === undefined ? "—" : plainFormat.format(clean(v)));
/** A number as an input field shows it: no grouping, no float drift. */
export const inputNumber = (v: number) => String(clean(v));

/** A value of any JSON type in words: numbers via {@link plain}, objects as `key: value` pairs. */
export function anyValue(v: unknown): string {
  if (v === null || v === undefined) return "—";
  if (typeof v === "number") return plain(v);
  if (typeof v === "boolean") return v ? "yes" : "no";
  if (Array.isArray(v)) return v.length ? v.map(anyValue).join(", ") : "none";
  if (typeof v === "object") {
    return Object.entries(v as Record<string, unknown>)
      .map(([k, x]) => `${k.replace(/_/g, " ")}: ${anyValue(x)}`)
      .join(", ");
  }
  return String(v);
}

// ---------------------------------------------------------------------------------------------
// Chart axes

/** Decimals that show a tick step exactly (0.25 → 2, 5 → 0), at most 6. */
export function stepDigits(step: number): number {
  // Six significant digits: a step is a round number, the difference of two ticks need not be.
  const s = String(Number(Math.abs(step).toPrecision(6)));
  if (s.includes("e-")) return 6;
  const dot = s.indexOf(".");
  return dot < 0 ? 0 : Math.min(6, s.length - dot - 1);
}

/** The smallest gap between consecutive ticks (Chart.js passes every tick to a label callback). */
function tickStep(ticks: { value: number }[]): number {
  let step = Infinity;
  for (let i = 1; i < ticks.length; i++) {
    const d = Math.abs(ticks[i].value - ticks[i - 1].value);
    if (d > 0) step = Math.min(step, d);
  }
  return Number.isFinite(step) ? step : 0;
}

/**
 * A Chart.js tick label callback for a value axis: money, percent (given in percent) or a plain
 * number, rounded to the tick step so that distinct ticks read differently ($100,050 and
 * $100,100 — not $100.1K twice). Large money steps are shown in thousands or millions.
 */
export function axisLabel(kind: "money" | "percent" | "number") {
  return (value: number | string, _index: number, ticks: { value: number }[]): string => {
    const v = Number(value);
    const step = tickStep(ticks);
    if (kind === "percent") return `${fixedText(v, stepDigits(step))}%`;
    if (kind === "number") return num.format(round(v, stepDigits(step)));
    const scaled = (unit: number, suffix: string) => {
      const digits = stepDigits(step / unit);
      return `${v < 0 ? "-" : ""}$${num.format(round(Math.abs(v) / unit, digits))}${suffix}`;
    };
    if (step >= 1e6) return scaled(1e6, "M");
    if (step >= 1e3) return scaled(1e3, "K");
    const digits = stepDigits(step) === 0 ? 0 : Math.max(2, stepDigits(step));
    const r = round(v, digits);
    return `${r < 0 ? "-" : ""}$${Math.abs(r).toLocaleString("en-US", { minimumFractionDigits: digits, maximumFractionDigits: digits })}`;
  };
}

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;
/** Tick steps a time axis may use, each a whole number of a familiar unit. */
const TIME_STEPS = [1, 2, 5, 10, 15, 30].map((m) => m * MINUTE).concat([1, 2, 3, 6, 12].map((h) => h * HOUR), [1, 2, 7, 14].map((d) => d * DAY));
const MONTH_STEPS = [1, 2, 3, 6, 12, 24, 60];

const nyHm = new Intl.DateTimeFormat("en-US", { timeZone: "America/New_York", hour: "2-digit", minute: "2-digit", hour12: false });
const nyMd = new Intl.DateTimeFormat("en-US", { timeZone: "America/New_York", month: "short", day: "numeric" });
const nyMy = new Intl.DateTimeFormat("en-US", { timeZone: "America/New_York", month: "short", year: "numeric" });

/** A time axis: tick values (epoch ms) at round times, at most `maxTicks`, and their labels. */
export interface TimeAxis {
  ticks: number[];
  label: (ms: number) => string;
}

/**
 * Ticks for a time axis from `min` to `max` (epoch ms): on whole minutes, hours, days or months,
 * spaced by the smallest familiar step that keeps to `maxTicks`; labelled by that step (times of
 * day within a day, the date with the time across days, dates, months), so no two ticks share a label.
 */
export function timeAxis(min: number, max: number, maxTicks = 8): TimeAxis {
  const span = Math.max(0, max - min);
  const step = TIME_STEPS.find((s) => span / s <= maxTicks - 1);
  if (step === undefined) {
    // Months: the first of a month, every `months` months.
    const months = MONTH_STEPS.find((m) => span / (m * 30.44 * DAY) <= maxTicks - 1) ?? 120;
    const start = new Date(min);
    let y = start.getUTCFullYear();
    let m = start.getUTCMonth();
    const ticks: number[] = [];
    for (;;) {
      const t = Date.UTC(y, m, 1, 16); // the 1st, late morning in New York
      if (t > max) break;
      const due = months < 12 ? m % months === 0 : m === 0 && y % (months / 12) === 0;
      if (t >= min && due) ticks.push(t);
      m += 1;
      if (m === 12) {
        m = 0;
        y += 1;
      }
    }
    return { ticks, label: (ms) => nyMy.format(new Date(ms)) };
  }
  if (step >= DAY) {
    // Noon UTC of each day: in New York that is the morning of the same date.
    const first = Math.ceil((min - 12 * HOUR) / DAY) * DAY + 12 * HOUR;
    const ticks: number[] = [];
    for (let t = first; t <= max; t += step) ticks.push(t);
    return { ticks, label: (ms) => nyMd.format(new Date(ms)) };
  }
  const ticks: number[] = [];
  for (let t = Math.ceil(min / step) * step; t <= max; t += step) ticks.push(t);
  const acrossDays = nyMd.format(new Date(min)) !== nyMd.format(new Date(max));
  return {
    ticks,
    label: acrossDays ? (ms) => `${nyMd.format(new Date(ms))} ${nyHm.format(new Date(ms))}` : (ms) => nyHm.format(new Date(ms)),
  };
}

/** 1_234_567 → "1.23M". */
export function compact(v: N): string {
  if (v === null || v === undefined) return "—";
  const a = Math.abs(v);
  if (a >= 1e9) return `${(v / 1e9).toFixed(2)}B`;
  if (a >= 1e6) return `${(v / 1e6).toFixed(2)}M`;
  if (a >= 1e3) return `${(v / 1e3).toFixed(1)}K`;
  return num.format(v);
}

/** CSS class for a signed value. */
export const sign = (v: N) => (v === null || v === undefined || v === 0 ? "" : v > 0 ? "up" : "down");

export const time = (iso: string | null | undefined) => (iso ? nyTime.format(new Date(iso)) : "—");
export const dateTime = (iso: string | null | undefined) =>
  iso ? nyDateTime.format(new Date(iso)).replace(",", "") : "—";
export const date = (iso: string | null | undefined) => (iso ? nyDate.format(new Date(iso)) : "—");

/** The New York wall clock at `ms` (epoch ms), as if it were a UTC time: for arithmetic on NY times. */
export function nyWall(ms: number): number {
  const p: Record<string, number> = {};
  for (const x of nyDateTime.formatToParts(new Date(ms))) if (x.type !== "literal") p[x.type] = Number(x.value);
  // `hour12: false` reads midnight as 24 in some engines.
  return Date.UTC(p.year, p.month - 1, p.day, p.hour % 24, p.minute, p.second);
}

/** `YYYY-MM-DD` moved by `days` (negative: back). */
export function shiftDay(day: string, days: number): string {
  const [y, m, d] = day.split("-").map(Number);
  return new Date(Date.UTC(y, m - 1, d + days)).toISOString().slice(0, 10);
}

/** 3725 s → "1h 02m". */
export function duration(seconds: N): string {
  if (seconds === null || seconds === undefined) return "—";
  const s = Math.round(seconds);
  if (s < 60) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m ${String(s % 60).padStart(2, "0")}s`;
  const h = Math.floor(m / 60);
  if (h < 48) return `${h}h ${String(m % 60).padStart(2, "0")}m`;
  return `${Math.floor(h / 24)}d ${h % 24}h`;
}

/** "12s ago" measured against the server's clock (a response's `meta.timestamp`), or the browser's without one. */
export function ago(iso: string | null | undefined, serverNow?: string): string {
  if (!iso) return "never";
  const now = serverNow ? Date.parse(serverNow) : Date.now();
  const s = Math.max(0, (now - Date.parse(iso)) / 1000);
  if (s < 2) return "just now";
  return `${duration(s)} ago`;
}

/**
 * The market's trading date (YYYY-MM-DD) and time as the service's data broker reports them.
 * In DEMO the simulated market runs faster than the wall clock, so "today" is the market's.
 */
export const marketClock = signal<{ date: string; time: string } | null>(null);

/** Today's trading date: the market's when known, else today in New York. */
export const todayNy = () => marketClock.value?.date ?? nyDate.format(new Date());
