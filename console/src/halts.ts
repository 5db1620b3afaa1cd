// Trading halts of single symbols (CONTRACT §11) — a LULD volatility pause, a news halt — as the
// console words and tracks them. Pure: the badge, the alert, the ticket and the position levers
// all read a halt through here, so they say the same thing. Not the emergency halt, which stops
// the whole desk (the risk state's `trading_state`).
import { time } from "./format";
import type { Halt, SymbolStatus } from "./types";

/** The reason of the codes the contract names, for a feed that relays a code without one. */
const CODE_REASONS: Record<string, string> = {
  LUDP: "Volatility Trading Pause",
  T1: "Halt News Pending",
};

/** "LUDP Volatility Trading Pause since 10:31:05" (New York time, as every time on the console). */
export function haltWords(halt: Halt): string {
  const reason = halt.reason || CODE_REASONS[halt.reason_code] || "";
  return `${[halt.reason_code, reason].filter(Boolean).join(" ")} since ${time(halt.since)}`;
}

/** The alert of a status change: "ABCD halted — LUDP … since 10:31:05" or "ABCD resumed trading". */
export function statusAlertText(s: SymbolStatus): string {
  if (s.trading_status !== "HALTED") return `${s.symbol} resumed trading`;
  return s.halt ? `${s.symbol} halted — ${haltWords(s.halt)}` : `${s.symbol} halted`;
}

/** The HALTED badge's tooltip: what the halt is and what it stops. */
export function haltTooltip(halt: Halt | null): string {
  const what = halt ? `Trading halted: ${haltWords(halt)} NY.` : "Trading halted (the reason is not known yet).";
  return `${what} Market and stop orders and closes wait for the reopen; a limit order is accepted and waits at the venue.`;
}

/**
 * Whether an order of `orderType` is refused in a halted symbol: a market order, or a stop (which
 * becomes one), would fill at whatever price the reopen prints. A limit or stop-limit order
 * carries its own price, so the venue keeps it until the reopen.
 */
export function refusedWhileHalted(orderType: string): boolean {
  return orderType === "MARKET" || orderType === "STOP";
}

/** Why the ticket will not send an order of `orderType` in halted `symbol`; null when it may. */
export function haltRefusal(orderType: string, symbol: string, halt: Halt | null): string | null {
  if (!refusedWhileHalted(orderType)) return null;
  const kind = orderType === "STOP" ? "A stop order" : "A market order";
  const since = halt ? ` (${haltWords(halt)} NY)` : "";
  return `${kind} is refused while ${symbol} is halted${since}: it would fill at the reopen's price. A limit order is accepted and waits for the reopen.`;
}

/** Why a position in halted `symbol` cannot be closed now (the close is a market order). */
export function closeRefusal(symbol: string, halt: Halt | null): string {
  return `${symbol} is halted${halt ? ` (${haltWords(halt)} NY)` : ""}: a close is a market order and is refused until it reopens.`;
}

/** A `SYMBOL_HALTED` refusal's detail in words; null when the detail does not name a halt. */
export function refusalWords(detail: Record<string, unknown>): string | null {
  const { symbol, reason_code, reason, since } = detail;
  if (typeof symbol !== "string" || typeof reason_code !== "string" || typeof since !== "string") return null;
  const halt = { reason_code, reason: typeof reason === "string" ? reason : "", since };
  return `${symbol} is halted — ${haltWords(halt)} NY. Market and stop orders and closes are refused until it reopens; a limit order is accepted.`;
}

// ---------------------------------------------------------------------------------------------
// What the console knows

/** A symbol's status as the latest `symbol.status` event gave it, at the event's time. */
export interface Known {
  halted: boolean;
  halt: Halt | null;
  at: string;
}

/** The status of each symbol a `symbol.status` event has spoken of. */
export type HaltBook = ReadonlyMap<string, Known>;

/** The book after a `symbol.status` event (published at `at`); a new map, the old one untouched. */
export function applyStatus(book: HaltBook, s: SymbolStatus, at: string): HaltBook {
  const next = new Map(book);
  const halted = s.trading_status === "HALTED";
  next.set(s.symbol, { halted, halt: halted ? s.halt : null, at });
  return next;
}

/**
 * Whether `symbol` is halted, from the book and the row that shows it. The event is the news for
 * the symbols the engine follows (held, watched, with working orders); a radar row is as of its
 * scan, so it wins only when the scan is newer than the event — a symbol the engine stopped
 * following sends no event, and its row is then the latest word. A row without a time (a
 * position, read live from the engine) never outdates an event.
 */
export function isHalted(book: HaltBook, symbol: string, row?: { halted?: boolean; captured_at?: string }): boolean {
  const known = book.get(symbol);
  if (!known) return row?.halted ?? false;
  if (row?.captured_at && Date.parse(row.captured_at) > Date.parse(known.at)) return row.halted ?? false;
  return known.halted;
}
