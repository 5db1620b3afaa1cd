// New York wall times for the whole-desk replay's form (POST /api/backtests with `kind: "desk"`
// takes RFC 3339 instants; an operator thinks of a trading day in New York time): a
// `datetime-local` value read as New York time and back, and the trading day before a date; and
// the symbols typed for a replay of downloaded days, as the list the API takes. Free of the DOM,
// so Node's test runner checks them (tests/desk_time.test.mjs), daylight-saving changes included.

import { nyWall, shiftDay } from "./format";

const LOCAL = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})(?::(\d{2}))?$/;

/**
 * A `datetime-local` value ("2026-11-19T09:30") read as New York time, as the API's RFC 3339
 * instant ("2026-11-19T14:30:00Z"); null when it is not such a value. A wall time the spring
 * change skips reads as the instant an hour later; one the autumn change repeats, as the first.
 */
export function nyLocalToIso(local: string): string | null {
  const m = LOCAL.exec(local.trim());
  if (!m) return null;
  const [y, mo, d, h, mi, s] = m.slice(1).map((x) => Number(x ?? 0));
  const wall = Date.UTC(y, mo - 1, d, h, mi, s);
  if (Number.isNaN(wall)) return null;
  // New York is 4 or 5 hours behind UTC: start from the earlier offset, step to the wall time.
  let t = wall + 4 * 3_600_000;
  for (let i = 0; i < 3; i++) {
    const off = wall - nyWall(t);
    if (off === 0) break;
    t += off;
  }
  return new Date(t).toISOString().replace(/\.000Z$/, "Z");
}

/** An instant as a `datetime-local` value in New York time ("2026-11-19T09:30"). */
export function isoToNyLocal(iso: string): string {
  const ms = Date.parse(iso);
  if (Number.isNaN(ms)) return "";
  return new Date(nyWall(ms)).toISOString().slice(0, 16);
}

const weekday = (day: string) => new Date(`${day}T12:00:00Z`).getUTCDay();

/** The weekday before `day` (YYYY-MM-DD): the previous trading day, holidays aside. */
export function previousTradingDay(day: string): string {
  let d = shiftDay(day, -1);
  while (weekday(d) === 0 || weekday(d) === 6) d = shiftDay(d, -1);
  return d;
}

/** The day after `day` (YYYY-MM-DD). */
export const nextDay = (day: string) => shiftDay(day, 1);

/** A New York day whole, as `datetime-local` values: its midnight to the next one. */
export const wholeDay = (day: string) => ({ start: `${day}T00:00`, end: `${nextDay(day)}T00:00` });

/** A New York day's regular session, 09:30 to 16:00, as `datetime-local` values. */
export const sessionOf = (day: string) => ({ start: `${day}T09:30`, end: `${day}T16:00` });

/** Milliseconds from one `datetime-local` New York value to another; null unless both read. */
export function spanMs(start: string, end: string): number | null {
  const a = nyLocalToIso(start);
  const b = nyLocalToIso(end);
  return a && b ? Date.parse(b) - Date.parse(a) : null;
}

/**
 * Symbols typed for a replay of downloaded days ("aapl, msft  nvda") as the API's list, in the
 * order typed, uppercased: commas, semicolons and spaces separate them. Repeats are kept (the
 * service refuses them at `symbols[i]`; duplicateAt finds the first). Empty: none named.
 */
export function parseSymbols(text: string): string[] {
  return text
    .split(/[\s,;]+/)
    .map((s) => s.trim().toUpperCase())
    .filter((s) => s !== "");
}

/** The index of the first symbol that repeats an earlier one, or -1. */
export function duplicateAt(symbols: string[]): number {
  const seen = new Set<string>();
  for (let i = 0; i < symbols.length; i++) {
    if (seen.has(symbols[i])) return i;
    seen.add(symbols[i]);
  }
  return -1;
}
