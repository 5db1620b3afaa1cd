// The HALTED badge of a symbol whose trading the venue halted (CONTRACT §11), beside its name on
// the radar, the positions and the charts, with the halt's code, reason and start as its tooltip.
// Live from the `symbol.status` events and the rows' `halted` flags (see halts.ts for which wins).
import { useEffect, useRef, useState } from "preact/hooks";
import { get, withQuery } from "./api";
import { useEvents, type StreamEvent } from "./events";
import { haltTooltip, isHalted } from "./halts";
import { haltBook, lookUpHalt, quotedHalts } from "./store";
import type { Halt, Quote, SymbolStatus } from "./types";

/** What a row says of its symbol: halted, as of its scan when it has one. */
export type HaltRow = { halted?: boolean; captured_at?: string };

/** Whether `symbol` is halted now and, when known, its halt (a component reading it redraws with it). */
export function symbolHalt(symbol: string, row?: HaltRow): { halted: boolean; halt: Halt | null } {
  const book = haltBook.value;
  const halted = isHalted(book, symbol, row);
  return { halted, halt: halted ? (book.get(symbol)?.halt ?? quotedHalts.value.get(symbol) ?? null) : null };
}

export function HaltBadge({ symbol, row }: { symbol: string; row?: HaltRow }) {
  const { halted, halt } = symbolHalt(symbol, row);
  // A halt no event worded (it began before this console connected, or the engine does not
  // follow the symbol): its reason is read from the quote.
  const worded = !!haltBook.value.get(symbol)?.halt;
  useEffect(() => {
    if (halted && !worded) lookUpHalt(symbol);
  });
  return halted ? <HaltedBadge symbol={symbol} halt={halt} /> : null;
}

function HaltedBadge({ symbol, halt }: { symbol: string; halt: Halt | null }) {
  return (
    <span class="badge halted symbol-halted" data-testid="symbol-halted" data-symbol={symbol} title={haltTooltip(halt)}>
      HALTED
    </span>
  );
}

/**
 * A symbol's trading as its quote says, read when shown, on each closed minute and on its
 * `symbol.status` events: for views without a row that flags it (the chart dialog).
 */
export function useQuotedStatus(symbol: string): SymbolStatus | null {
  const [status, setStatus] = useState<SymbolStatus | null>(null);
  const shown = useRef(symbol);
  shown.current = symbol;
  const load = () =>
    get<Quote>(withQuery("/api/market/quote", { symbol })).then(
      (q) => shown.current === symbol && setStatus({ symbol, trading_status: q.trading_status, halt: q.halt }),
      () => shown.current === symbol && setStatus(null),
    );
  useEffect(() => {
    setStatus(null);
    load();
  }, [symbol]);
  useEvents(["bars.closed"], load);
  useEvents(["symbol.status"], (e: StreamEvent<SymbolStatus>) => e.data.symbol === symbol && load());
  return status;
}

/** The HALTED badge from a quoted status (the chart dialog's title). */
export function QuotedHaltBadge({ status }: { status: SymbolStatus | null }) {
  return status?.trading_status === "HALTED" ? <HaltedBadge symbol={status.symbol} halt={status.halt} /> : null;
}
