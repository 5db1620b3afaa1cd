// Live state the header and several tabs share: the account summary, the risk state, the open
// positions (how many, for the liquidation progress; their stops, for the warning before the
// close), which symbols are halted, and the market's session.
import { effect, signal, untracked } from "@preact/signals";
import { get, withQuery } from "./api";
import { subscribe } from "./events";
import { marketClock } from "./format";
import { applyStatus, type HaltBook } from "./halts";
import { marketNow, parseSession, sessionBadge } from "./market_session";
import type { AccountSummary, Halt, MarketSession, Position, Quote, RiskState, SymbolStatus } from "./types";
import { notify } from "./ui";

export const account = signal<AccountSummary | null>(null);
export const risk = signal<RiskState | null>(null);
/** Positions still open, for the liquidation progress. */
export const openPositions = signal<number | null>(null);
/** Set when this console asked for the halt, to show progress until flat. */
export const liquidating = signal(false);
/** The positions as last read (the header's alerts count the stops left to the engine at the close). */
export const positionRows = signal<Position[]>([]);

export async function loadAccount() {
  try {
    account.value = await get<AccountSummary>("/api/account/summary");
  } catch {
    /* the header keeps the last figures; the stream status shows trouble */
  }
}
export async function loadRisk() {
  try {
    risk.value = await get<RiskState>("/api/risk/state");
  } catch {
    /* as above */
  }
}
export async function loadPositions() {
  try {
    const rows = await get<Position[]>("/api/positions");
    positionRows.value = rows;
    openPositions.value = rows.filter((p) => p.quantity !== 0).length;
    if (openPositions.value === 0 && liquidating.value) {
      liquidating.value = false;
      notify("ok", "Liquidation complete: every position is flat.");
    }
  } catch {
    /* as above */
  }
}


/** The cluster as the `cluster` health component reports it (PostgreSQL only; null otherwise). */
export const cluster = signal<{ role: string; node: string; leader: string | null; epoch: number; members: number } | null>(null);

/** The market's date and time, from the data broker's health detail, and the cluster. */
export async function loadMarketClock() {
  try {
    const components = await get<{ name: string; detail: Record<string, unknown> }[]>("/api/health/components");
    const d = components.find((c) => c.name === "data_broker")?.detail;
    if (d && typeof d.trading_date === "string" && typeof d.market_time === "string") {
      marketClock.value = { date: d.trading_date, time: d.market_time };
    }
    const c = components.find((c) => c.name === "cluster")?.detail;
    cluster.value =
      c && typeof c.node === "string"
        ? {
            role: String(c.role),
            node: c.node,
            leader: typeof c.leader === "string" ? c.leader : null,
            epoch: Number(c.epoch),
            members: Array.isArray(c.members) ? c.members.length : 0,
          }
        : null;
  } catch {
    /* keep the last known */
  }
}

/** What the `symbol.status` events said of each symbol they spoke of (CONTRACT §11). */
export const haltBook = signal<HaltBook>(new Map());
/** Halts read from quotes: the reason of a halt a row flagged before any event worded it. */
export const quotedHalts = signal<ReadonlyMap<string, Halt>>(new Map());

/** Keeps `haltBook` as the events say (started once, by the shell); returns the stop. */
export function trackHalts(): () => void {
  return subscribe(["symbol.status"], (e) => {
    const s = e.data as SymbolStatus;
    haltBook.value = applyStatus(haltBook.value, s, e.timestamp);
    // The event words the halt itself: a quoted one of before is no longer needed.
    asked.delete(s.symbol);
    if (quotedHalts.value.has(s.symbol)) {
      const next = new Map(quotedHalts.value);
      next.delete(s.symbol);
      quotedHalts.value = next;
    }
  });
}

/** When each symbol's quote was last asked for its halt (a symbol is asked again after a while). */
const asked = new Map<string, number>();
const ASK_AGAIN_MS = 30_000;

/**
 * Reads the halt of `symbol` from its quote, for a badge whose row says halted without why: at
 * most every 30 s, so the reason of a halt that ended and began again is not the old one's.
 */
export function lookUpHalt(symbol: string) {
  const last = asked.get(symbol);
  if (last !== undefined && Date.now() - last < ASK_AGAIN_MS) return;
  asked.set(symbol, Date.now());
  get<Quote>(withQuery("/api/market/quote", { symbol })).then(
    (q) => {
      const next = new Map(quotedHalts.value);
      if (q.halt) next.set(symbol, q.halt);
      else next.delete(symbol);
      quotedHalts.value = next;
    },
    () => {
      /* the badge says halted without the reason; asked again later */
    },
  );
}

/**
 * Where the market's present stands in the exchange day (CONTRACT §12): `GET /api/market/session`,
 * then the `market.session` events. Null until read, and from a service that has no sessions.
 */
export const marketSession = signal<MarketSession | null>(null);

/** When the session was last asked for (wall ms): a stale view is asked again at most every 5 s. */
let sessionAskedAt = 0;
const ASK_SESSION_AGAIN_MS = 5_000;

export async function loadMarketSession() {
  sessionAskedAt = Date.now();
  try {
    const s = parseSession(await get<unknown>("/api/market/session"));
    if (s) marketSession.value = s;
  } catch {
    /* an older service has no sessions: the header shows none and the ticket keeps its defaults */
  }
}

function askSessionAgain() {
  if (Date.now() - sessionAskedAt >= ASK_SESSION_AGAIN_MS) loadMarketSession();
}

/**
 * Keeps `marketSession` as the events say (started once, by the shell); returns the stop. The
 * view is read again when the market's clock passes its next change without an event, and when
 * an `account.updated` names another session than the one held (both: a change missed).
 */
export function trackSession(): () => void {
  const stops = [
    subscribe(["market.session"], (e) => {
      const s = parseSession(e.data);
      if (s) marketSession.value = s;
    }),
    subscribe(["account.updated"], (e) => {
      const named = e.data?.session;
      const held = marketSession.value;
      if (held && typeof named === "string" && named !== held.session) askSessionAgain();
    }),
    effect(() => {
      // Runs again when either the view or the market's clock (read by marketNow) moves.
      const s = marketSession.value;
      if (s && sessionBadge(s, marketNow()).due) untracked(askSessionAgain);
    }),
  ];
  return () => stops.forEach((stop) => stop());
}
