// The whole trading day (CONTRACT §12) as the console words it: the header's session badge with
// the time to the next change, the warning before the close that the stops resting at the
// broker are left to the engine after it, what the venue takes outside the regular session (a
// LIMIT DAY order marked extended hours) with the limit the ticket prefills there, and an
// OUTSIDE_REGULAR_SESSION refusal in words. Times are the market's, never the wall clock's (in
// DEMO the market runs 60× ahead): every function takes the market's present as `now` (epoch
// ms), which `marketNow` reads from the header's clock. Free of the DOM, so Node's test runner
// checks it (tests/market_session.test.mjs).
import { date, marketClock, time } from "./format";
import type { MarketSession, Position, SessionPhase } from "./types";

const MINUTE = 60_000;

export const SESSION_SHORT: Record<SessionPhase, string> = { PRE_MARKET: "PRE", REGULAR: "REG", AFTER_HOURS: "AH", CLOSED: "CLOSED" };

/** The session in words, as a sentence names it ("in the pre-market"). */
const SESSION_NAME: Record<SessionPhase, string> = {
  PRE_MARKET: "the pre-market",
  REGULAR: "the regular session",
  AFTER_HOURS: "the after-hours session",
  CLOSED: "the closed market",
};

const isPhase = (v: unknown): v is SessionPhase => typeof v === "string" && v in SESSION_SHORT;

/** The market's present (epoch ms) as the header's clock has it; null before its first reading. */
export function marketNow(): number | null {
  const t = marketClock.value ? Date.parse(marketClock.value.time) : NaN;
  return Number.isFinite(t) ? t : null;
}

/**
 * A session view from `GET /api/market/session` or a `market.session` event, read leniently: a
 * field missing or of another type is null. Null when it names no session the contract knows.
 */
export function parseSession(v: unknown): MarketSession | null {
  if (!v || typeof v !== "object") return null;
  const o = v as Record<string, unknown>;
  if (!isPhase(o.session)) return null;
  const text = (k: string) => (typeof o[k] === "string" && o[k] !== "" ? (o[k] as string) : null);
  return {
    session: o.session,
    trading_day: text("trading_day"),
    pre_market_open_at: text("pre_market_open_at"),
    regular_open_at: text("regular_open_at"),
    regular_close_at: text("regular_close_at"),
    after_hours_close_at: text("after_hours_close_at"),
    next_session: isPhase(o.next_session) ? o.next_session : null,
    next_session_at: text("next_session_at"),
  };
}

/** "09:30": an instant's New York time to the minute. */
const hm = (iso: string) => time(iso).slice(0, 5).replace(/^24/, "00");
const ms = (iso: string | null) => (iso ? Date.parse(iso) : NaN);

/**
 * The time to a change, counted to the minute it is reached, as the header's clock shows whole
 * minutes (at 14:48 the 16:00 close is "1h 12m" away): "23m", "1h 12m", "2d 7h"; "now" once due.
 */
export function countdown(millis: number): string {
  if (!(millis > 0)) return "now";
  const m = Math.ceil(millis / MINUTE);
  if (m < 60) return `${m}m`;
  const h = Math.floor(m / 60);
  if (h < 24) return `${h}h ${String(m % 60).padStart(2, "0")}m`;
  return `${Math.floor(h / 24)}d ${h % 24}h`;
}

/** The simulated market's calendar (ALWAYS_OPEN): regular all day, "changing" only at midnight. */
const allDay = (s: MarketSession) => s.session === "REGULAR" && s.next_session === "REGULAR";

/** The next change, as the badge says it after its countdown's verb ("closes in"). */
function verb(s: MarketSession): string {
  const next = s.next_session;
  if (next === "REGULAR") return "opens in";
  if (s.session === "REGULAR" || next === "CLOSED") return "closes in";
  if (next === "PRE_MARKET") return "pre-market in";
  if (next === "AFTER_HOURS") return "after-hours in";
  return "changes in";
}

/** The next change as a sentence begins it ("The regular session opens"). */
function nextWords(s: MarketSession): string {
  switch (s.next_session) {
    case "REGULAR":
      return "The regular session opens";
    case "AFTER_HOURS":
      return s.session === "REGULAR" ? "The regular session closes (after-hours trading begins)" : "After-hours trading begins";
    case "CLOSED":
      return "Extended-hours trading ends";
    case "PRE_MARKET":
      return "The pre-market opens";
    default:
      return "The session changes";
  }
}

/** The header's session badge: its short name, the text with the countdown, its class and tooltip. */
export interface SessionBadgeView {
  short: string;
  text: string;
  cls: string;
  title: string;
  /** The next change's time has passed on the market's clock: the view is stale, read it again. */
  due: boolean;
}

export function sessionBadge(s: MarketSession, now: number | null): SessionBadgeView {
  const short = SESSION_SHORT[s.session];
  const cls = s.session.toLowerCase().replace("_", "-");
  const nextAt = ms(s.next_session_at);
  const until = now !== null && Number.isFinite(nextAt) ? nextAt - now : null;
  const due = until !== null && until <= 0;
  const when = (iso: string) => `${hm(iso)} NY${s.trading_day && date(iso) !== s.trading_day ? ` on ${date(iso)}` : ""}`;

  if (allDay(s)) {
    const turn = s.next_session_at ? ` The next trading day begins at ${when(s.next_session_at)}${until !== null && until > 0 ? `, in ${countdown(until)}` : ""}.` : "";
    return { short, text: `${short} · all day`, cls, title: `The simulated market's calendar (ALWAYS_OPEN): the regular session all day.${turn}`, due };
  }
  // Due: the event of the change is on its way (or missed: the view is read again).
  const text = until === null ? short : due ? `${short} · ${verb(s).replace(/ in$/, "")} now` : `${short} · ${verb(s)} ${countdown(until)}`;
  const next = s.next_session_at ? ` ${nextWords(s)} at ${when(s.next_session_at)}${until !== null && until > 0 ? `, in ${countdown(until)}` : ""} (market time).` : "";
  const day = dayWords(s);
  return { short, text, cls, title: `Now: ${SESSION_NAME[s.session]}.${next}${day ? ` ${day}` : ""}`, due };
}

/** The trading day's sessions in New York time, or that the exchange does not trade that day. */
function dayWords(s: MarketSession): string {
  const { pre_market_open_at: pre, regular_open_at: open, regular_close_at: close, after_hours_close_at: end } = s;
  if (!pre || !open || !close || !end) return s.trading_day && s.session === "CLOSED" ? `No trading on ${s.trading_day}.` : "";
  return `${s.trading_day ?? "Today"}: pre-market ${hm(pre)}–${hm(open)}, regular ${hm(open)}–${hm(close)}, after-hours ${hm(close)}–${hm(end)} NY.`;
}

// ---------------------------------------------------------------------------------------------
// The close: stops left to the engine

/** How long before the regular close the console warns of the stops the engine alone will hold. */
export const CLOSE_WARNING_MS = 15 * MINUTE;

type Held = Pick<Position, "quantity" | "protection" | "stop_loss">;

/**
 * Open positions with a stop: after the close the venue triggers none, so the engine alone
 * holds it. A row without `protection` (an older service) counts when it has a stop level.
 */
export function stopsLeftToEngine(rows: Held[]): number {
  return rows.filter((p) => p.quantity !== 0 && (p.protection ? p.protection !== "NONE" : p.stop_loss !== null && p.stop_loss !== undefined)).length;
}

export interface CloseWarning {
  count: number;
  /** The regular close, New York time ("16:00"; "13:00" on an early-close day). */
  closeAt: string;
  text: string;
}

/**
 * In the last 15 minutes of the regular session (on the market's clock), the positions whose
 * stop only the engine will hold after the close; null outside that window, with none, or on the
 * simulated market's calendar (regular all day: its stops stay at the broker).
 */
export function closeWarning(s: MarketSession | null, now: number | null, rows: Held[]): CloseWarning | null {
  if (!s || now === null || s.session !== "REGULAR" || allDay(s)) return null;
  const closeIso = s.regular_close_at ?? s.next_session_at;
  const left = ms(closeIso) - now;
  if (!closeIso || !(left > 0) || left > CLOSE_WARNING_MS) return null;
  const count = stopsLeftToEngine(rows);
  if (count === 0) return null;
  const closeAt = hm(closeIso);
  return { count, closeAt, text: `${count} position${count === 1 ? "" : "s"} will be protected by the engine only after ${closeAt}` };
}

// ---------------------------------------------------------------------------------------------
// Orders outside the regular session

/** Whether the venue takes this order outside the regular session: a LIMIT DAY marked extended hours. */
export const extendedHoursOrder = (orderType: string, tif: string, extended: boolean) => orderType === "LIMIT" && tif === "DAY" && extended;

/** Ten-thousandths of a dollar in a dollar: the finest price the contract allows. */
const TICKS = 10_000;

/**
 * The limit the ticket prefills outside the regular session: `pct` percent above the ask for a
 * BUY, below the bid for a SELL (the last trade when that side is not quoted), to the nearest
 * increment — a cent from $1, a hundredth of a cent under. Exact: in whole ten-thousandths of a
 * dollar and millionths of a percent, never binary floats. Null when there is nothing to go on.
 */
export function extendedHoursLimit(side: string, quote: { bid: number; ask: number; last: number } | null, pct: number | null): number | null {
  if (!quote || pct === null || !(pct >= 0) || pct >= 100) return null;
  const quoted = side === "BUY" ? quote.ask : quote.bid;
  const base = quoted > 0 ? quoted : quote.last > 0 ? quote.last : null;
  if (base === null) return null;
  const ONE = 100_000_000n; // 100% in millionths of a percent
  const factor = side === "BUY" ? ONE + BigInt(Math.round(pct * 1_000_000)) : ONE - BigInt(Math.round(pct * 1_000_000));
  // The limit in ten-thousandths × ONE, rounded once to its increment (never to a tick first).
  const scaled = BigInt(Math.round(base * TICKS)) * factor;
  const inc = scaled / ONE >= BigInt(TICKS) ? 100n : 1n;
  const unit = ONE * inc;
  const t = Number(((scaled + unit / 2n) / unit) * inc);
  return t > 0 ? t / TICKS : null;
}

/** "in the pre-market", "after hours", "while the market is closed". */
const DURING: Record<SessionPhase, string> = {
  PRE_MARKET: "in the pre-market",
  REGULAR: "in the regular session",
  AFTER_HOURS: "after hours",
  CLOSED: "while the market is closed",
};

/** The session as a phrase of time ("in the pre-market"), for an order's option in the ticket. */
export const duringSession = (s: SessionPhase) => DURING[s];

/** When the next regular session opens, in words: " at 09:30 NY, in 23m". */
function opensWords(openIso: string | null, now: number | null, today: string | null): string {
  const open = ms(openIso);
  if (!openIso || !Number.isFinite(open)) return "";
  const day = today && date(openIso) !== today ? ` on ${date(openIso)}` : "";
  return ` at ${hm(openIso)} NY${day}${now !== null && open > now ? `, in ${countdown(open - now)}` : ""}`;
}

/** The regular session's next opening: today's when it is still ahead, else the next change's. */
function nextRegularOpen(s: MarketSession, now: number | null): string | null {
  if (s.regular_open_at && (now === null || ms(s.regular_open_at) > now)) return s.regular_open_at;
  return s.next_session === "REGULAR" ? s.next_session_at : null;
}

/**
 * Why the ticket's order would be refused in the session now; null when it would not (the
 * regular session, or an extended-hours limit outside it). The service decides; this says so
 * before sending. A closed market takes no order at all (MARKET_CLOSED).
 */
export function sessionRefusal(s: MarketSession | null, now: number | null, orderType: string, tif: string, extended: boolean): string | null {
  if (!s || s.session === "REGULAR") return null;
  if (s.session === "CLOSED") {
    const pre = s.next_session === "PRE_MARKET" && s.next_session_at ? ` until the pre-market opens${opensWords(s.next_session_at, now, s.trading_day)}` : "";
    return `The market is closed: no order is taken${pre}.`;
  }
  if (extendedHoursOrder(orderType, tif, extended)) return null;
  const what =
    orderType !== "LIMIT"
      ? `A ${orderType.replace("_", " ").toLowerCase()} order`
      : !extended
        ? "A limit order not marked extended hours"
        : `A ${tif} limit order`;
  const opens = opensWords(nextRegularOpen(s, now), now, s.trading_day);
  return `${what} is refused ${DURING[s.session]}: only a LIMIT DAY order marked extended hours is taken until the regular session opens${opens}.`;
}

/** What an OUTSIDE_REGULAR_SESSION refusal's `detail.allowed` says is taken, in words. */
export function allowedWords(v: unknown): string {
  if (typeof v === "string" && v.trim() !== "") return v;
  if (Array.isArray(v) && v.length > 0) return v.map(allowedWords).join(" or ");
  if (v && typeof v === "object") {
    const o = v as Record<string, unknown>;
    const list = (x: unknown) => (Array.isArray(x) ? x.join("/") : typeof x === "string" ? x : "");
    const kind = [list(o.order_type ?? o.order_types), list(o.time_in_force)].filter(Boolean).join(" ");
    if (kind) return `a ${kind} order${o.extended_hours === true ? " marked extended hours" : ""}`;
  }
  return "a LIMIT DAY order marked extended hours";
}

/**
 * An OUTSIDE_REGULAR_SESSION refusal in words: the session it was made in, what is taken
 * (`detail.allowed`) and when the regular session opens (`detail.regular_open_at`), with the
 * time left on the market's clock.
 */
export function outsideSessionWords(detail: Record<string, unknown>, now: number | null): string {
  const session = isPhase(detail.session) ? detail.session : null;
  const open = typeof detail.regular_open_at === "string" ? detail.regular_open_at : null;
  const today = now !== null ? date(new Date(now).toISOString()) : null;
  const opens = opensWords(open, now, today);
  const taken = `only ${allowedWords(detail.allowed)} is taken outside the regular session.`;
  return `${session ? `Refused ${DURING[session]}: ${taken}` : taken.charAt(0).toUpperCase() + taken.slice(1)}${opens ? ` The regular session opens${opens}.` : ""}`;
}
