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

test("the current parameters are marked in their cell, shown or beaten there, and beside the grid add to the axes", () => {
  const base = { ...row(10, 20, 1, 0.5), baseline: true };
  const results = [row(10, 20, 2, 1.5), row(5, 20, 1, 1.0), base, row(5, 30, 1, 0.2)];
  const grid = { fast: [5, 10], slow: [20, 30], extra: [1, 2] };
  const m = g.heatmap(results, grid, "fast", "slow", "sharpe_ratio");
  const cell = (x, y) => m.cells[m.ys.indexOf(y)][m.xs.indexOf(x)];
  assert.equal(cell(10, 20).row, results[0], "the cell shows the best over `extra`");
  assert.equal(cell(10, 20).baseline, base, "and knows the current parameters ran there");
  assert.equal(cell(5, 20).baseline, null);
  const alone = g.heatmap([base], grid, "fast", "slow", "sharpe_ratio");
  assert.equal(alone.cells[alone.ys.indexOf(20)][alone.xs.indexOf(10)].row, base, "shown when it is the best there");
  // Beside the grid: their values join the axes.
  const beside = g.heatmap([row(5, 30, 1, 1), { ...row(12, 26, 1, 0.4), baseline: true }], { fast: [5, 10], slow: [20, 30] }, "fast", "slow", "sharpe_ratio");
  assert.deepEqual(beside.xs, [5, 10, 12]);
  assert.deepEqual(beside.ys, [30, 26, 20]);
  assert.equal(beside.cells[1][2].baseline.parameters.fast, 12);
});

test("walk-forward: the report told from the request, its settings in words, the runs and window lengths the service makes", () => {
  assert.equal(g.isWalkForwardReport({ windows: 3, in_sample_fraction: null, anchored: null }), false, "the request, as the list echoes it");
  assert.equal(g.isWalkForwardReport(null), false);
  assert.equal(g.isWalkForwardReport({ windows: 3, by_window: [] }), true);
  assert.equal(g.walkForwardText({ windows: 3 }), "3 rolling windows, 70% in sample");
  assert.equal(g.walkForwardText({ windows: 4, in_sample_fraction: 0.75, anchored: true }), "4 anchored windows, 75% in sample");
  assert.equal(g.runsPerCombination(3), 7);
  // As the service's test: 100 days, 4 windows of 75% in sample: 14 days out of sample each, 44 in.
  assert.deepEqual(g.walkForwardSplit(100, 4, 0.75, false), { in_sample: 44, out_of_sample: 14 });
  const anchored = g.walkForwardSplit(100, 4, 0.75, true);
  assert.equal(anchored.in_sample + 4 * anchored.out_of_sample <= 100, true);
  assert.equal(g.walkForwardSplit(3, 20, 0.95, false), null, "too few days for the windows");
  // Weekdays of [start, end): about the trading days.
  assert.equal(g.weekdaysBetween("2026-11-16", "2026-11-23"), 5, "Monday to Monday");
  assert.equal(g.weekdaysBetween("2026-11-20", "2026-11-24"), 2, "Friday, the weekend, Monday");
  assert.equal(g.weekdaysBetween("2026-01-01", "2027-01-01"), 261);
  assert.equal(g.weekdaysBetween("2026-11-20", "2026-11-20"), null);
});

test("bars around zero: heights to scale, negative values below the line, nulls without a bar", () => {
  const { zero, bars } = g.barScale([2, -1, null, 0], 90);
  assert.equal(zero, 60, "zero two thirds of the way down (2 above it, 1 below)");
  assert.deepEqual(bars[0], { y: 0, h: 60 });
  assert.deepEqual(bars[1], { y: 60, h: 30 });
  assert.equal(bars[2], null);
  assert.deepEqual(bars[3], { y: 60, h: 0 });
  const positive = g.barScale([1, 3], 30);
  assert.equal(positive.zero, 30, "zero at the bottom when nothing is negative");
  assert.deepEqual(positive.bars[1], { y: 0, h: 30 });
  assert.equal(g.barScale([null], 30).zero, 0, "no values: a flat line");
});
