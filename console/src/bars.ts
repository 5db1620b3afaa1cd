// Figures the charts derive from one-minute bars, kept free of the DOM so Node's test runner
// checks them (tests/bars.test.mjs): the session VWAP, the day's high and low, and the plan a
// strategy's entry reason states.
import { date as nyDate } from "./format";

export interface Bar {
  timestamp: string;
  open: number;
  high: number;
  low: number;
  close: number;
  volume: number;
}

/** Price levels drawn across a chart (the strategy's plan, the position's entry). */
export interface Levels {
  stop?: number | null;
  target?: number | null;
  entry?: number | null;
}

const nyDay = (iso: string) => nyDate(iso);

/** The session VWAP after each bar: Σ typical price × volume / Σ volume, restarting each New York day. */
export function vwap(bars: Bar[]): (number | null)[] {
  let day = "";
  let pv = 0;
  let v = 0;
  return bars.map((b) => {
    const d = nyDay(b.timestamp);
    if (d !== day) {
      day = d;
      pv = 0;
      v = 0;
    }
    pv += ((b.high + b.low + b.close) / 3) * b.volume;
    v += b.volume;
    return v > 0 ? pv / v : null;
  });
}

/** The high and low of the last bar's New York day. */
export function dayRange(bars: Bar[]): { high: number; low: number } | null {
  if (bars.length === 0) return null;
  const day = nyDay(bars[bars.length - 1].timestamp);
  let high = -Infinity;
  let low = Infinity;
  for (let i = bars.length - 1; i >= 0 && nyDay(bars[i].timestamp) === day; i--) {
    high = Math.max(high, bars[i].high);
    low = Math.min(low, bars[i].low);
  }
  return { high, low };
}

/** The stop and target a strategy's entry reason states ("… with a stop at 4.90 … target 5.50"). */
export function planFromReason(reason: string | null | undefined): Levels {
  const at = (word: RegExp) => {
    const m = reason?.match(word);
    return m ? Number(m[1]) : null;
  };
  return { stop: at(/stop (?:at |loss )?\$?(\d+(?:\.\d+)?)/i), target: at(/target \$?(\d+(?:\.\d+)?)/i) };
}
