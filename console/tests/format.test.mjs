// Unit tests of the console's formatting module (src/format.ts), bundled with esbuild and run
// by Node's test runner: `node --test tests/format.test.mjs` (the Rust API test
// `browser::the_console_formats_figures_and_axes` runs it). Figures are rounded for display from
// exact decimals without binary float drift; chart axes get distinct, rounded labels.
import { test } from "node:test";
import assert from "node:assert/strict";
import * as esbuild from "esbuild";

const built = await esbuild.build({ entryPoints: ["src/format.ts"], bundle: true, format: "esm", write: false, logLevel: "warning" });
const f = await import(`data:text/javascript;base64,${Buffer.from(built.outputFiles[0].text).toString("base64")}`);

test("figures are rounded from exact decimals, never showing float drift", () => {
  const drift = 0.1 + 0.2; // 0.30000000000000004
  assert.equal(f.money(drift), "$0.30");
  assert.equal(f.pnl(drift), "+$0.30");
  assert.equal(f.pnl(-0.004), "$0.00", "a loss that rounds to nothing has no sign");
  assert.equal(f.pct(drift), "+0.30%");
  assert.equal(f.frac(0.1 + 0.7), "80.00%");
  assert.equal(f.fixed(1.005, 2), "1.01", "half away from zero, as decimals round");
  assert.equal(f.price(0.1 + 0.2), "$0.3000");
  assert.equal(f.plain(drift), "0.3");
  assert.equal(f.plain(1234567.125), "1,234,567.125");
  assert.equal(f.inputNumber(drift), "0.3", "an input field shows what was stored, not its float");
  assert.equal(f.anyValue({ block_scope: "TODAY", reason: "news", limit: drift }), "block scope: TODAY, reason: news, limit: 0.3");
  assert.equal(f.anyValue(null), "—");
});

test("value axes label each tick distinctly, rounded to the step", () => {
  const ticks = (values) => values.map((value) => ({ value }));
  const label = (kind, values) => values.map((v, i, all) => f.axisLabel(kind)(v, i, ticks(all)));
  // An equity curve that barely moves: $100.0K five times before.
  const flat = [99999.8, 99999.9, 100000, 100000.1, 100000.2].map((v) => Number(v.toFixed(1)));
  assert.deepEqual(label("money", flat), ["$99,999.80", "$99,999.90", "$100,000.00", "$100,000.10", "$100,000.20"]);
  assert.deepEqual(label("money", [100000, 100050, 100100]), ["$100,000", "$100,050", "$100,100"]);
  assert.deepEqual(label("money", [98000, 100000, 102000]), ["$98K", "$100K", "$102K"]);
  assert.deepEqual(label("money", [-500, 0, 500]), ["-$500", "$0", "$500"]);
  assert.deepEqual(label("percent", [-0.30000000000000004, -0.2, -0.1, 0]), ["-0.3%", "-0.2%", "-0.1%", "0.0%"]);
  assert.deepEqual(label("money", [0.5, 0.5005, 0.501]), ["$0.5000", "$0.5005", "$0.5010"]);
});

test("time axes tick on round times with distinct labels", () => {
  const at = (iso) => Date.parse(iso);
  const cases = [
    [at("2026-11-20T14:31:00Z"), at("2026-11-20T20:59:00Z")], // one session of minute bars
    [at("2026-11-18T14:30:00Z"), at("2026-11-20T21:00:00Z")], // three days of minute bars
    [at("2026-11-02T14:30:00Z"), at("2026-11-20T14:30:00Z")], // weeks of daily bars
    [at("2026-03-02T14:30:00Z"), at("2026-11-20T14:30:00Z")], // months of daily bars
    [at("2004-08-19T13:30:00Z"), at("2013-03-01T14:30:00Z")], // years
  ];
  for (const [min, max] of cases) {
    const axis = f.timeAxis(min, max);
    const labels = axis.ticks.map(axis.label);
    assert(axis.ticks.length >= 2 && axis.ticks.length <= 8, `${labels}`);
    assert(axis.ticks.every((t) => t >= min && t <= max), `${labels}`);
    assert.equal(new Set(labels).size, labels.length, `repeated labels: ${labels}`);
  }
  const session = f.timeAxis(at("2026-11-20T14:31:00Z"), at("2026-11-20T20:59:00Z"));
  assert.deepEqual(session.ticks.map(session.label), ["10:00", "11:00", "12:00", "13:00", "14:00", "15:00"]);
});

test("ages are measured against the server's clock", () => {
  const now = "2026-11-20T15:31:05.000Z";
  assert.equal(f.ago(null, now), "never");
  assert.equal(f.ago("2026-11-20T15:31:04.500Z", now), "just now");
  assert.equal(f.ago("2026-11-20T15:30:53.000Z", now), "12s ago");
  assert.equal(f.ago("2026-11-20T14:29:05.000Z", now), "1h 02m ago");
  assert.equal(f.ago("2026-11-20T15:31:09.000Z", now), "just now", "a stamp ahead of the server's clock is now");
});
