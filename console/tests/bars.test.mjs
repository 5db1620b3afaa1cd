// Unit tests of what the charts derive from bars (src/bars.ts), bundled with esbuild and run by
// Node's test runner (the Rust API test `browser::the_console_formats_figures_and_axes` runs it):
// the session VWAP restarts each New York day, the day's high and low are the last day's, and the
// stop and target are read from a strategy's entry reason.
import { test } from "node:test";
import assert from "node:assert/strict";
import * as esbuild from "esbuild";

const built = await esbuild.build({ entryPoints: ["src/bars.ts"], bundle: true, format: "esm", write: false, logLevel: "warning" });
const b = await import(`data:text/javascript;base64,${Buffer.from(built.outputFiles[0].text).toString("base64")}`);

const bar = (timestamp, high, low, close, volume) => ({ timestamp, open: close, high, low, close, volume });

test("the VWAP weighs each bar's typical price by its volume and restarts each New York day", () => {
  const bars = [
    bar("2026-11-19T20:59:00Z", 11, 9, 10, 100), // 15:59 NY, the day before
    bar("2026-11-20T14:30:00Z", 4, 2, 3, 100), // typical 3
    bar("2026-11-20T14:31:00Z", 7, 5, 6, 200), // typical 6
    bar("2026-11-20T14:32:00Z", 6, 6, 6, 0), // no volume: unchanged
  ];
  assert.deepEqual(b.vwap(bars), [10, 3, 5, 5]);
  assert.deepEqual(b.vwap([bar("2026-11-20T14:30:00Z", 1, 1, 1, 0)]), [null]);
});

test("the day's high and low are the last bar's New York day's", () => {
  const bars = [bar("2026-11-19T20:59:00Z", 50, 1, 10, 1), bar("2026-11-20T14:30:00Z", 4, 2, 3, 1), bar("2026-11-20T14:31:00Z", 7, 3, 6, 1)];
  assert.deepEqual(b.dayRange(bars), { high: 7, low: 2 });
  assert.equal(b.dayRange([]), null);
});

test("the stop and target come from the entry reason as the strategy words it", () => {
  const reason =
    "FIRST_PULLBACK_BREAKOUT: Up 35.2% on 12.1x relative volume …; buying the break of 5.10 (limit 5.15) with a stop at 4.90 (risk 0.20/share), target 5.50 (2R), 100 shares.";
  assert.deepEqual(b.planFromReason(reason), { stop: 4.9, target: 5.5 });
  assert.deepEqual(b.planFromReason("manual close of 5 ABCD"), { stop: null, target: null });
  assert.deepEqual(b.planFromReason(null), { stop: null, target: null });
});
