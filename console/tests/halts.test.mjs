// Unit tests of the console's trading-halt module (src/halts.ts), bundled with esbuild and run by
// Node's test runner: a halt worded for the badge, the alert and a refusal; which order types a
// halted symbol refuses; and what the console believes is halted as events and rows arrive.
import { test } from "node:test";
import assert from "node:assert/strict";
import * as esbuild from "esbuild";

const built = await esbuild.build({ entryPoints: ["src/halts.ts"], bundle: true, format: "esm", write: false, logLevel: "warning" });
const h = await import(`data:text/javascript;base64,${Buffer.from(built.outputFiles[0].text).toString("base64")}`);

// 15:31:05 UTC on a November day is 10:31:05 in New York.
const luld = { reason_code: "LUDP", reason: "Volatility Trading Pause", since: "2026-11-20T15:31:05.000Z" };

test("a halt is worded with its code, reason and New York time", () => {
  assert.equal(h.haltWords(luld), "LUDP Volatility Trading Pause since 10:31:05");
  assert.equal(h.haltWords({ ...luld, reason_code: "T1", reason: "" }), "T1 Halt News Pending since 10:31:05", "a known code without a reason");
  assert.equal(h.haltWords({ ...luld, reason_code: "H10", reason: "" }), "H10 since 10:31:05", "an unknown code is relayed as sent");
  assert.match(h.haltTooltip(luld), /^Trading halted: LUDP Volatility Trading Pause since 10:31:05 NY\. /);
  assert.match(h.haltTooltip(null), /^Trading halted \(the reason is not known yet\)\. /);
});

test("the alert says halted with the halt, or resumed", () => {
  assert.equal(h.statusAlertText({ symbol: "ABCD", trading_status: "HALTED", halt: luld }), "ABCD halted — LUDP Volatility Trading Pause since 10:31:05");
  assert.equal(h.statusAlertText({ symbol: "ABCD", trading_status: "HALTED", halt: null }), "ABCD halted");
  assert.equal(h.statusAlertText({ symbol: "ABCD", trading_status: "TRADING", halt: null }), "ABCD resumed trading");
});

test("a halted symbol refuses market and stop orders and accepts limits", () => {
  const refused = ["MARKET", "LIMIT", "STOP", "STOP_LIMIT"].filter(h.refusedWhileHalted);
  assert.deepEqual(refused, ["MARKET", "STOP"]);
  assert.equal(h.haltRefusal("LIMIT", "ABCD", luld), null);
  assert.equal(h.haltRefusal("STOP_LIMIT", "ABCD", luld), null);
  assert.match(h.haltRefusal("MARKET", "ABCD", luld), /^A market order is refused while ABCD is halted \(LUDP Volatility Trading Pause since 10:31:05 NY\)/);
  assert.match(h.haltRefusal("STOP", "ABCD", null), /^A stop order is refused while ABCD is halted: /);
  assert.match(h.closeRefusal("ABCD", luld), /^ABCD is halted \(LUDP .* since 10:31:05 NY\): a close is a market order/);
});

test("a SYMBOL_HALTED refusal's detail reads in words", () => {
  const detail = { symbol: "ABCD", ...luld };
  assert.match(h.refusalWords(detail), /^ABCD is halted — LUDP Volatility Trading Pause since 10:31:05 NY\. /);
  assert.equal(h.refusalWords({ rule: "MAX_DAILY_LOSS" }), null, "another refusal's detail");
});

test("events and rows decide what is halted, the newer winning", () => {
  let book = new Map();
  // Nothing heard yet: the row says.
  assert.equal(h.isHalted(book, "ABCD", { halted: true }), true);
  assert.equal(h.isHalted(book, "ABCD"), false);

  book = h.applyStatus(book, { symbol: "ABCD", trading_status: "HALTED", halt: luld }, "2026-11-20T15:31:05.000Z");
  assert.equal(h.isHalted(book, "ABCD"), true);
  assert.deepEqual(book.get("ABCD").halt, luld);
  // A position row (no time) and a scan from before the halt do not outdate the event.
  assert.equal(h.isHalted(book, "ABCD", { halted: false }), true);
  assert.equal(h.isHalted(book, "ABCD", { halted: false, captured_at: "2026-11-20T15:31:00.000Z" }), true);

  const before = book;
  book = h.applyStatus(book, { symbol: "ABCD", trading_status: "TRADING", halt: null }, "2026-11-20T15:36:05.000Z");
  assert.equal(h.isHalted(book, "ABCD"), false);
  assert.equal(h.isHalted(before, "ABCD"), true, "the earlier book is left as it was");
  assert.equal(book.get("ABCD").halt, null);

  // A scan after the last event is the latest word (a symbol the engine no longer follows).
  assert.equal(h.isHalted(book, "ABCD", { halted: true, captured_at: "2026-11-20T15:40:00.000Z" }), true);
  assert.equal(h.isHalted(book, "OTHER", { halted: false, captured_at: "2026-11-20T15:40:00.000Z" }), false);
});
