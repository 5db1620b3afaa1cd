// Unit tests of the console's sweep grid module (src/sweep_grid.ts), bundled with esbuild and run
// by Node's test runner: `node --test tests/sweep_grid.test.mjs` (or `npm test`). Axes expand as
// the service expands them, the form's suggested ranges stay within a parameter's bounds, and the
// heatmap shows, per pair of values, the best combination in the service's ranking.
import { test } from "node:test";
import assert from "node:assert/strict";
import * as esbuild from "esbuild";

const built = await esbuild.build({ entryPoints: ["src/sweep_grid.ts"], bundle: true, format: "esm", write: false, logLevel: "warning" });
const g = await import(`data:text/javascript;base64,${Buffer.from(built.outputFiles[0].text).toString("base64")}`);

test("axes expand as the service expands them", () => {
  assert.deepEqual(g.axisValues({ from: 5, to: 15, step: 5 }), [5, 10, 15]);
  assert.deepEqual(g.axisValues({ from: 0.1, to: 0.3, step: 0.1 }), [0.1, 0.2, 0.3], "float steps land on their decimals");
  assert.deepEqual(g.axisValues({ from: 5, to: 17, step: 5 }), [5, 10, 15], "to is included only a whole number of steps away");
  assert.deepEqual(g.axisValues([20, 10, 20]), [20, 10, 20], "a list is taken as it is");
  assert.deepEqual(g.axisTicks([20, 10, 20]), [10, 20], "the map's ticks are distinct and ascending");
  for (const bad of [{ from: 5, to: 1, step: 1 }, { from: 1, to: 5, step: 0 }, { from: 1, to: 5 }, [], "5", { from: 0, to: 100000, step: 1 }]) {
    assert.equal(g.axisValues(bad), null, JSON.stringify(bad));
  }
  assert.equal(g.combinationCount({ fast: { from: 5, to: 15, step: 5 }, slow: [20, 30, 40] }), 9);
  assert.equal(g.combinationCount({ fast: { from: 5, to: 1, step: 1 } }), null);
});

test("suggested ranges are round steps around the default, within the bounds", () => {
  assert.deepEqual(g.suggestRange({ kind: "INTEGER", default: 10, minimum: 1, maximum: 9999 }), { from: 5, to: 20, step: 5 });
  assert.deepEqual(g.suggestRange({ kind: "INTEGER", default: 20, minimum: 2, maximum: 10000 }), { from: 10, to: 40, step: 10 });
  assert.deepEqual(g.suggestRange({ kind: "NUMBER", default: 0.5, minimum: 0, maximum: 1 }), { from: 0.2, to: 1, step: 0.2 });
  assert.deepEqual(g.suggestRange({ kind: "INTEGER", default: 2, minimum: 2, maximum: 3 }), { from: 2, to: 3, step: 1 });
  const r = g.suggestRange({ kind: "NUMBER", default: 2, minimum: 0.5, maximum: 20 });
  assert(r.from >= 0.5 && r.to <= 20 && r.step > 0, JSON.stringify(r));
  const none = g.suggestRange({ kind: "NUMBER", default: null, minimum: 0, maximum: 1 });
  assert(none.from === 0 && none.to <= 1, JSON.stringify(none));
  for (const raw of [0.3, 3.75, 7.5, 12, 40]) assert(g.niceStep(raw) >= raw, `${raw} -> ${g.niceStep(raw)}`);
});

const row = (fast, slow, extra, sharpe, meets = true) => ({
  parameters: { fast, slow, extra },
  meets_constraint: meets,
  sharpe_ratio: sharpe,
  total_return: 0,
  max_drawdown: 0.1,
  win_rate: null,
  profit_factor: null,
  win_loss_ratio: null,
  trade_count: 3,
  expectancy: null,
  final_equity: 100000,
});

test("each cell holds the best combination run there, in the service's ranking; cells not run stay empty", () => {
  // Ranked as the service ranks: meeting the constraint first, then sharpe highest first.
  const results = [row(5, 20, 1, 1.5), row(10, 20, 2, 1.2), row(5, 20, 2, 0.9), row(10, 30, 1, 2.5, false), row(10, 30, 2, null)];
  const grid = { fast: { from: 5, to: 15, step: 5 }, slow: [20, 30], extra: [1, 2] };
  const m = g.heatmap(results, grid, "fast", "slow", "sharpe_ratio");
  assert.deepEqual(m.xs, [5, 10, 15]);
  assert.deepEqual(m.ys, [30, 20], "the highest value on top");
  const cell = (x, y) => m.cells[m.ys.indexOf(y)][m.xs.indexOf(x)];
  assert.equal(cell(5, 20).row, results[0], "the best over the other parameter");
  assert.equal(cell(5, 20).runs, 2);
  assert.equal(cell(10, 30).row, results[3], "a constraint breaker is shown, marked by its row");
  assert.equal(cell(10, 30).row.meets_constraint, false);
  assert.equal(cell(15, 20).row, null, "not run");
  assert.equal(cell(5, 30).runs, 0);
  assert.deepEqual([m.min, m.max], [1.2, 2.5]);
  assert.equal(cell(10, 30).level, 1);
  assert.equal(cell(10, 20).level, 0);
  // One parameter: a single row.
  const strip = g.heatmap(results, grid, "slow", null, "sharpe_ratio");
  assert.deepEqual(strip.ys, [null]);
  assert.equal(strip.cells[0][0].row, results[0]);
  assert.equal(strip.cells[0][0].runs, 3);
});

test("what a combination breaks is said in words", () => {
  const r = { ...row(5, 20, 1, 1), max_drawdown: 0.3, trade_count: 1 };
  assert.deepEqual(g.breaches(r, { max_drawdown: 0.25, min_trades: 2 }), ["DD 30.00% > 25.00%", "1 trade < 2"]);
  assert.deepEqual(g.breaches(r, {}), []);
  assert.deepEqual(g.breaches({ ...r, trade_count: 1200 }, { min_trades: 5000 }), ["1,200 trades < 5,000"]);
});
