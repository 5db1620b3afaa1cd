// Unit tests of the whole-desk replay form's New York times (src/desk_time.ts), bundled with
// esbuild and run by Node's test runner: `node --test tests/desk_time.test.mjs` (or `npm test`).
// A New York wall time is sent as the instant it is, on both sides of a daylight-saving change,
// the default day is the weekday before the market's date, and typed symbols read as the list a
// replay of downloaded days is sent.
import { test } from "node:test";
import assert from "node:assert/strict";
import * as esbuild from "esbuild";

const built = await esbuild.build({ entryPoints: ["src/desk_time.ts"], bundle: true, format: "esm", write: false, logLevel: "warning" });
const t = await import(`data:text/javascript;base64,${Buffer.from(built.outputFiles[0].text).toString("base64")}`);

test("New York wall times are sent as their instants, in winter and in summer", () => {
  assert.equal(t.nyLocalToIso("2026-11-19T09:30"), "2026-11-19T14:30:00Z", "EST: 5 hours behind");
  assert.equal(t.nyLocalToIso("2026-07-15T09:30"), "2026-07-15T13:30:00Z", "EDT: 4 hours behind");
  assert.equal(t.nyLocalToIso("2026-11-20T00:00"), "2026-11-20T05:00:00Z");
  assert.equal(t.nyLocalToIso("2026-11-19T11:30:15"), "2026-11-19T16:30:15Z", "seconds kept");
  // The changes of 2026: 8 March (02:00 → 03:00) and 1 November (02:00 → 01:00).
  assert.equal(t.nyLocalToIso("2026-03-08T01:30"), "2026-03-08T06:30:00Z");
  assert.equal(t.nyLocalToIso("2026-03-08T03:30"), "2026-03-08T07:30:00Z");
  assert.equal(t.nyLocalToIso("2026-03-08T02:30"), "2026-03-08T07:30:00Z", "a skipped wall time: an hour later");
  assert.equal(t.nyLocalToIso("2026-11-01T01:30"), "2026-11-01T05:30:00Z", "a repeated wall time: the first");
  assert.equal(t.nyLocalToIso("2026-11-01T03:00"), "2026-11-01T08:00:00Z");
  for (const bad of ["", "2026-11-19", "09:30", "2026-11-19 09:30x", "yesterday"]) assert.equal(t.nyLocalToIso(bad), null, bad);
});

test("instants read back as the New York wall times the inputs show", () => {
  for (const local of ["2026-11-19T09:30", "2026-07-15T16:00", "2026-11-20T00:00", "2026-03-08T03:30"]) {
    assert.equal(t.isoToNyLocal(t.nyLocalToIso(local)), local);
  }
  assert.equal(t.isoToNyLocal("2026-11-19T14:30:00Z"), "2026-11-19T09:30");
  assert.equal(t.isoToNyLocal("not a time"), "");
});

test("the default replay is the weekday before the market's date, whole", () => {
  assert.equal(t.previousTradingDay("2026-11-20"), "2026-11-19", "Friday → Thursday");
  assert.equal(t.previousTradingDay("2026-11-23"), "2026-11-20", "Monday → Friday");
  assert.equal(t.previousTradingDay("2026-11-22"), "2026-11-20", "Sunday → Friday");
  assert.equal(t.previousTradingDay("2026-03-01"), "2026-02-27", "across a month");
  assert.deepEqual(t.wholeDay("2026-11-19"), { start: "2026-11-19T00:00", end: "2026-11-20T00:00" });
  assert.deepEqual(t.sessionOf("2026-11-19"), { start: "2026-11-19T09:30", end: "2026-11-19T16:00" });
  assert.equal(t.spanMs("2026-11-19T09:30", "2026-11-19T11:30"), 2 * 3_600_000);
  assert.equal(t.spanMs("2026-03-07T12:00", "2026-03-08T12:00"), 23 * 3_600_000, "the spring day is 23 hours");
  assert.equal(t.spanMs("x", "2026-11-19T11:30"), null);
});

test("typed symbols read as the list sent, uppercased, repeats found", () => {
  assert.deepEqual(t.parseSymbols(" aapl, msft  nvda;brk.b\n"), ["AAPL", "MSFT", "NVDA", "BRK.B"]);
  assert.deepEqual(t.parseSymbols(" , ;  "), [], "nothing named: every stored symbol");
  assert.deepEqual(t.parseSymbols(""), []);
  assert.equal(t.duplicateAt(t.parseSymbols("AAPL msft aapl MSFT")), 2, "the first repeat");
  assert.equal(t.duplicateAt(["AAPL", "MSFT"]), -1);
  assert.equal(t.duplicateAt([]), -1);
});
