// The exit legs of a manual BUY (CONTRACT §11) as the order ticket builds them, kept free of the
// DOM so Node's test runner checks them (tests/bracket.test.mjs): the stop prefilled from
// `risk_controls.default_stop_distance_pct`, the shares that risk a dollar amount down to the
// stop, the checks a leg must pass before it is worth asking the server, and the request body.
//
// Prices are compared and divided in whole ten-thousandths of a dollar (the finest price the
// contract allows), so 10.00 − 9.70 is 0.30 exactly and a risk of $30 buys 100 shares, not the
// 99 that binary floats would give.
import { price as fmtPrice } from "./format";

/** Ten-thousandths of a dollar in a dollar. */
const TICKS = 10_000;
const ticks = (dollars: number) => Math.round(dollars * TICKS);

/** The increment a price must sit on, in ten-thousandths: a cent from $1, a hundredth of a cent below. */
const increment = (t: number) => (t >= TICKS ? 100 : 1);

/** Whether `p` sits on its increment (whole cents from $1, hundredths of a cent below). */
export function onIncrement(p: number): boolean {
  const t = ticks(p);
  return Math.abs(p * TICKS - t) < 1e-6 && t % increment(t) === 0;
}

/**
 * The stop the ticket suggests: `pct` percent below `reference`, rounded down to the increment
 * (so it is never closer to the entry than the setting asks); null when there is nothing to go on.
 */
export function prefillStop(reference: number | null | undefined, pct: number | null | undefined): number | null {
  if (!reference || !(reference > 0) || !pct || !(pct > 0) || pct >= 100) return null;
  // The percentage in millionths of a percent, so a setting such as 2.5 or 0.75 stays exact.
  const ONE = 100_000_000n;
  const raw = (BigInt(ticks(reference)) * (ONE - BigInt(Math.round(pct * 1_000_000)))) / ONE;
  const t = Number(raw);
  const stop = t - (t % increment(t));
  return stop > 0 ? stop / TICKS : null;
}

/**
 * Whole shares that lose `risk` dollars if bought at `entry` and sold at `stop`:
 * floor(risk ÷ (entry − stop)), as DAS Trader's risk hotkeys size. 0 when it cannot be sized.
 */
export function sharesForRisk(risk: number, entry: number | null | undefined, stop: number | null | undefined): number {
  if (!(risk > 0) || !entry || !(entry > 0) || !stop || !(stop > 0)) return 0;
  const perShare = ticks(entry) - ticks(stop);
  if (perShare <= 0) return 0;
  return Math.floor(ticks(risk) / perShare);
}

/** The three leg fields as typed (empty: not given). */
export interface LegInput {
  stop: string;
  stopLimit: string;
  target: string;
}

/** The API's names of the leg fields: a local check and a server refusal land at the same field. */
export const LEG_FIELDS = { stop: "stop_loss.stop_price", stopLimit: "stop_loss.limit_price", target: "take_profit.limit_price" } as const;

/** A leg field's number, or null when empty or not a number. */
export const legNumber = (s: string): number | null => (s.trim() === "" || !Number.isFinite(Number(s)) ? null : Number(s));

/**
 * What is wrong with the legs of an order on `side` valued at `reference` (the order's own
 * price, else the last trade: what the server checks them against), keyed by the API's field
 * names. A SELL takes no legs, so nothing of them is checked.
 */
export function legErrors(side: string, legs: LegInput, reference: number | null): Record<string, string> {
  const out: Record<string, string> = {};
  if (side !== "BUY") return out;
  const price = (field: string, s: string): number | null => {
    const v = legNumber(s);
    if (v === null || !(v > 0)) out[field] = "A positive price is required.";
    else if (!onIncrement(v)) out[field] = v >= 1 ? "Whole cents from $1." : "At most four decimals under $1.";
    else return v;
    return null;
  };
  const hasStop = legs.stop.trim() !== "";
  if (!hasStop) {
    if (legs.target.trim() !== "") out[LEG_FIELDS.target] = "A take-profit goes with a stop loss: enter the stop too.";
    if (legs.stopLimit.trim() !== "") out[LEG_FIELDS.stopLimit] = "A stop limit needs the stop price.";
    return out;
  }
  const stop = price(LEG_FIELDS.stop, legs.stop);
  if (stop !== null && reference && ticks(stop) >= ticks(reference)) out[LEG_FIELDS.stop] = `Must be below the entry's reference price ${fmtPrice(reference)}.`;
  if (legs.stopLimit.trim() !== "") {
    const limit = price(LEG_FIELDS.stopLimit, legs.stopLimit);
    if (limit !== null && stop !== null && ticks(limit) > ticks(stop)) out[LEG_FIELDS.stopLimit] = "At or below the stop price (a sell stop-limit).";
  }
  if (legs.target.trim() !== "") {
    const target = price(LEG_FIELDS.target, legs.target);
    if (target !== null && reference && ticks(target) <= ticks(reference)) out[LEG_FIELDS.target] = `Must be above the entry's reference price ${fmtPrice(reference)}.`;
  }
  return out;
}

/** The order as the ticket holds it, numbers parsed. */
export interface TicketOrder {
  symbol: string;
  side: "BUY" | "SELL";
  quantity: number;
  order_type: string;
  time_in_force: string;
  /** Sent only for the order types that take it. */
  limit_price?: number;
  stop_price?: number;
  reason?: string;
  /** A LIMIT DAY order that may fill outside the regular session (CONTRACT §12). */
  extended_hours?: boolean;
  legs: LegInput;
}

/**
 * The body of `POST /api/orders` and `/api/orders/preview`. The legs go only on a BUY with a
 * stop: the server refuses legs on a SELL, and a take-profit without a stop. `extended_hours`
 * goes only when set, so a service that predates it (and refuses unknown fields) takes the rest.
 */
export function orderBody(o: TicketOrder): Record<string, unknown> {
  const b: Record<string, unknown> = { symbol: o.symbol, side: o.side, quantity: o.quantity, order_type: o.order_type, time_in_force: o.time_in_force };
  if (o.limit_price !== undefined) b.limit_price = o.limit_price;
  if (o.stop_price !== undefined) b.stop_price = o.stop_price;
  if (o.reason) b.reason = o.reason;
  if (o.extended_hours) b.extended_hours = true;
  const stop = legNumber(o.legs.stop);
  if (o.side === "BUY" && stop !== null) {
    const stopLimit = legNumber(o.legs.stopLimit);
    b.stop_loss = stopLimit === null ? { stop_price: stop } : { stop_price: stop, limit_price: stopLimit };
    const target = legNumber(o.legs.target);
    if (target !== null) b.take_profit = { limit_price: target };
  }
  return b;
}
