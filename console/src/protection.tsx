// What protects each position (CONTRACT §11), as a badge on the positions table: BROKER (a stop
// for the whole quantity rests at the broker, so it holds while tradeops, its machine or its
// network is down), ENGINE (the engine watches the level and sends the exit itself: only while
// it runs), NONE (nothing: a warning on an open position). Outside the regular session every
// stop is the engine's (CONTRACT §12: the venue triggers none then), and the badge says so. Rows
// come from `GET /api/positions` and are patched at once by `position.updated` events, which
// carry the same fields.
import { int, price } from "./format";
import type { Position, SessionPhase } from "./types";

/** How a position's protection reads: its words, its badge class and whether it is a warning. */
export interface ProtectionView {
  text: string;
  cls: string;
  title: string;
  warn: boolean;
}

type Row = Pick<Position, "quantity" | "protection" | "protective_order_id" | "stop_loss">;

/** Why the engine holds every stop outside the regular session (the badge's title then). */
export const ENGINE_OUTSIDE_SESSION =
  "Engine-held stop: the venue triggers no stops outside 09:30–16:00; the engine fires it as an extended-hours limit";

/**
 * The badge of `p`'s protection; null for a flat row, which has nothing to protect. `session`:
 * the market's session now (CONTRACT §12), when known.
 */
export function protectionView(p: Row, session?: SessionPhase | null): ProtectionView | null {
  if (p.quantity === 0) return null;
  switch (p.protection) {
    case "BROKER":
      return {
        text: "BROKER",
        cls: "broker",
        title: `A stop${p.stop_loss !== null ? ` at ${price(p.stop_loss)}` : ""} for all ${int(p.quantity)} shares rests at the broker${p.protective_order_id ? ` (${p.protective_order_id})` : ""}: it protects the position even while tradeops is down.`,
        warn: false,
      };
    case "ENGINE":
      if (session && session !== "REGULAR") {
        return {
          text: "ENGINE",
          cls: "engine",
          title: `${ENGINE_OUTSIDE_SESSION}${p.stop_loss !== null ? ` when the last trade crosses ${price(p.stop_loss)}` : ""}. It protects the position only while tradeops runs.`,
          warn: false,
        };
      }
      return {
        text: "ENGINE",
        cls: "engine",
        title: `The engine watches the stop${p.stop_loss !== null ? ` at ${price(p.stop_loss)}` : ""} and sends the exit when it is crossed: nothing rests at the broker, so it protects the position only while tradeops runs.`,
        warn: false,
      };
    case "NONE":
      return { text: "⚠ NONE", cls: "none", title: "Nothing protects this position: no stop rests at the broker and the engine watches none. Close it or protect it.", warn: true };
    default:
      // A service that does not report protection yet: say nothing rather than guess.
      return null;
  }
}

export function ProtectionBadge({ position, session }: { position: Row; session?: SessionPhase | null }) {
  const v = protectionView(position, session);
  if (!v) return <span class="muted" data-testid="position-protection" data-protection="">—</span>;
  return (
    <span class={`badge protection ${v.cls}`} data-testid="position-protection" data-protection={position.protection} title={v.title}>
      {v.text}
    </span>
  );
}

/** Open positions that nothing protects. */
export const unprotected = (rows: Row[]) => rows.filter((p) => protectionView(p)?.warn).length;

/**
 * The rows with a `position.updated` event's fields laid over its symbol's row, so a protection
 * that changed shows before the next reload; an event for a symbol not listed waits for it.
 */
export function withPositionUpdate(rows: Position[], update: Partial<Position> & { symbol: string }): Position[] {
  if (!rows.some((p) => p.symbol === update.symbol)) return rows;
  return rows.map((p) => {
    if (p.symbol !== update.symbol) return p;
    const next = { ...p };
    // Only what the event carries: a field it leaves out keeps the row's value.
    if (update.protection !== undefined) next.protection = update.protection;
    if (update.protective_order_id !== undefined) next.protective_order_id = update.protective_order_id;
    if (update.stop_loss !== undefined) next.stop_loss = update.stop_loss;
    if (update.target !== undefined) next.target = update.target;
    if (update.quantity !== undefined) next.quantity = update.quantity;
    return next;
  });
}
