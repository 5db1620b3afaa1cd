import { signal } from "@preact/signals";

// Number and time formatting. Money is shown to the cent, prices to the cent (to 4 places under
// $1), and times in New York, the market's zone, which is what an operator reads on a tape.

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

export const money = (v: N) => (v === null || v === undefined ? "—" : usd.format(v));
/** Money with an explicit sign, for P&L. */
export const pnl = (v: N) => (v === null || v === undefined ? "—" : (v > 0 ? "+" : "") + usd.format(v));
export const price = (v: N) =>
  v === null || v === undefined ? "—" : v < 1 ? `$${v.toFixed(4)}` : `$${v.toFixed(2)}`;
export const int = (v: N) => (v === null || v === undefined ? "—" : num.format(v));
/** A percentage given in percent (4.5 → "+4.50%"). */
export const pct = (v: N, digits = 2) =>
  v === null || v === undefined ? "—" : `${v > 0 ? "+" : ""}${v.toFixed(digits)}%`;
/** A ratio given as a fraction (0.045 → "4.50%"). */
export const frac = (v: N, digits = 2) => (v === null || v === undefined ? "—" : `${(v * 100).toFixed(digits)}%`);
export const fixed = (v: N, digits = 2) => (v === null || v === undefined ? "—" : v.toFixed(digits));

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

/**
 * The market's trading date (YYYY-MM-DD) and time as the service's data broker reports them.
 * In DEMO the simulated market runs faster than the wall clock, so "today" is the market's.
 */
export const marketClock = signal<{ date: string; time: string } | null>(null);

/** Today's trading date: the market's when known, else today in New York. */
export const todayNy = () => marketClock.value?.date ?? nyDate.format(new Date());
