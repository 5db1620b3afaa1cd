// Unit tests of the order ticket's exit legs (src/bracket.ts), bundled with esbuild and run by
// Node's test runner: the stop prefilled the setting's distance below the reference and rounded
// down to the price increment, the shares a dollar risk buys down to the stop (exactly, not in
// binary floats), the checks of the legs, and the request body (legs only on a BUY, and a
// take-profit only with a stop).
import { test } from "node:test";
import assert from "node:assert/strict";
import * as esbuild from "esbuild";

const built = await esbuild.build({ entryPoints: ["src/bracket.ts"], bundle: true, format: "esm", write: false, logLevel: "warning" });
const b = await import(`data:text/javascript;base64,${Buffer.from(built.outputFiles[0].text).toString("base64")}`);

test("the stop is prefilled the setting's percent below the reference, rounded down to the cent", () => {
  assert.equal(b.prefillStop(10, 3), 9.7);
  assert.equal(b.prefillStop(10.37, 3), 10.05, "10.0589 rounds down, never up towards the entry");
  assert.equal(b.prefillStop(25.5, 2.5), 24.86, "24.8625");
  assert.equal(b.prefillStop(4.99, 0.75), 4.95, "4.952575");
  assert.equal(b.prefillStop(100, 3), 97, "a round result stays whole");
  assert.equal(b.prefillStop(1.031, 3), 1, "1.00007: from $1 the increment is a cent");
});

test("under $1 the prefilled stop keeps four decimals", () => {
  assert.equal(b.prefillStop(0.8523, 3), 0.8267, "0.826731");
  assert.equal(b.prefillStop(1.02, 3), 0.9894, "a reference above $1 whose stop falls under it");
  assert.equal(b.prefillStop(0.0012, 10), 0.001, "0.00108");
});

test("nothing is prefilled without a reference or a distance", () => {
  assert.equal(b.prefillStop(null, 3), null);
  assert.equal(b.prefillStop(0, 3), null);
  assert.equal(b.prefillStop(10, null), null);
  assert.equal(b.prefillStop(10, 0), null);
  assert.equal(b.prefillStop(0.0001, 3), null, "nothing left above zero");
});

test("sizing by risk buys floor(risk ÷ (entry − stop)) whole shares, exactly", () => {
  assert.equal(b.sharesForRisk(100, 10, 9.5), 200);
  assert.equal(b.sharesForRisk(30, 10, 9.7), 100, "0.30 a share exactly: binary floats give 99");
  assert.equal(b.sharesForRisk(100, 5.3, 5.2), 1000);
  assert.equal(b.sharesForRisk(250, 12.34, 11.97), 675, "250 ÷ 0.37 = 675.67");
  assert.equal(b.sharesForRisk(50, 0.8523, 0.8267), 1953, "sub-dollar prices to the hundredth of a cent");
  assert.equal(b.sharesForRisk(0.2, 10, 9.7), 0, "less than one share");
});

test("sizing by risk needs a stop below the entry", () => {
  assert.equal(b.sharesForRisk(100, 10, 10), 0);
  assert.equal(b.sharesForRisk(100, 10, 10.5), 0);
  assert.equal(b.sharesForRisk(100, 10, null), 0);
  assert.equal(b.sharesForRisk(100, null, 9), 0);
  assert.equal(b.sharesForRisk(0, 10, 9), 0);
  assert.equal(b.sharesForRisk(-5, 10, 9), 0);
});

test("prices sit on whole cents from $1 and four decimals under", () => {
  assert.equal(b.onIncrement(9.7), true);
  assert.equal(b.onIncrement(0.1 + 0.2), true, "float drift is not an extra decimal");
  assert.equal(b.onIncrement(9.705), false);
  assert.equal(b.onIncrement(0.8267), true);
  assert.equal(b.onIncrement(0.82675), false);
});

test("legs are checked against the reference before the server is asked", () => {
  const legs = (stop, target = "", stopLimit = "") => ({ stop, stopLimit, target });
  assert.deepEqual(b.legErrors("BUY", legs("9.70", "11.00"), 10), {});
  assert.deepEqual(b.legErrors("BUY", legs(""), 10), {}, "no legs at all");
  assert.deepEqual(Object.keys(b.legErrors("BUY", legs("10.00"), 10)), ["stop_loss.stop_price"]);
  assert.match(b.legErrors("BUY", legs("10.50"), 10)["stop_loss.stop_price"], /below the entry's reference price \$10\.00/);
  assert.deepEqual(Object.keys(b.legErrors("BUY", legs("9.70", "10.00"), 10)), ["take_profit.limit_price"]);
  assert.deepEqual(Object.keys(b.legErrors("BUY", legs("9.70", "", "9.80"), 10)), ["stop_loss.limit_price"], "a sell stop-limit's limit is at or below its stop");
  assert.deepEqual(b.legErrors("BUY", legs("9.70", "", "9.65"), 10), {});
  assert.deepEqual(Object.keys(b.legErrors("BUY", legs("", "11.00"), 10)), ["take_profit.limit_price"], "a take-profit needs a stop");
  assert.match(b.legErrors("BUY", legs("9.705"), 10)["stop_loss.stop_price"], /Whole cents/);
  assert.deepEqual(Object.keys(b.legErrors("BUY", legs("abc"), 10)), ["stop_loss.stop_price"]);
  assert.deepEqual(b.legErrors("BUY", legs("9.70", "11.00"), null), {}, "no reference yet: the server checks the sides");
  assert.deepEqual(b.legErrors("SELL", legs("10.50", "9.00"), 10), {}, "a sell takes no legs, so none is checked");
});

test("the body carries the legs on a BUY with a stop, and only then", () => {
  const order = {
    symbol: "ABCD",
    side: "BUY",
    quantity: 100,
    order_type: "LIMIT",
    time_in_force: "DAY",
    limit_price: 10,
    reason: "breakout",
    legs: { stop: "9.70", stopLimit: "", target: "11.00" },
  };
  assert.deepEqual(b.orderBody(order), {
    symbol: "ABCD",
    side: "BUY",
    quantity: 100,
    order_type: "LIMIT",
    time_in_force: "DAY",
    limit_price: 10,
    reason: "breakout",
    stop_loss: { stop_price: 9.7 },
    take_profit: { limit_price: 11 },
  });
  assert.deepEqual(b.orderBody({ ...order, legs: { stop: "9.70", stopLimit: "9.65", target: "" } }).stop_loss, { stop_price: 9.7, limit_price: 9.65 });
  assert.equal("take_profit" in b.orderBody({ ...order, legs: { stop: "9.70", stopLimit: "", target: "" } }), false, "no target typed");

  const noStop = b.orderBody({ ...order, legs: { stop: "", stopLimit: "9.65", target: "11.00" } });
  assert.equal("stop_loss" in noStop, false);
  assert.equal("take_profit" in noStop, false, "a take-profit only with a stop");

  const sell = b.orderBody({ ...order, side: "SELL", legs: { stop: "9.70", stopLimit: "", target: "11.00" } });
  assert.equal("stop_loss" in sell, false, "a sell takes no legs");
  assert.equal("take_profit" in sell, false);

  const market = b.orderBody({ symbol: "ABCD", side: "BUY", quantity: 5, order_type: "MARKET", time_in_force: "DAY", legs: { stop: "9.70", stopLimit: "", target: "" } });
  assert.deepEqual(Object.keys(market), ["symbol", "side", "quantity", "order_type", "time_in_force", "stop_loss"], "no price fields a market order does not take, no empty reason");
});

test("an extended-hours order says so in its body; any other leaves the field out", () => {
  const order = { symbol: "ABCD", side: "BUY", quantity: 100, order_type: "LIMIT", time_in_force: "DAY", limit_price: 10.05, legs: { stop: "9.70", stopLimit: "", target: "" } };
  const ext = b.orderBody({ ...order, extended_hours: true });
  assert.equal(ext.extended_hours, true);
  assert.deepEqual(ext.stop_loss, { stop_price: 9.7 }, "the stop goes with it: the engine holds it until the regular session opens");
  // Left out rather than false: a service that predates the field refuses unknown fields.
  assert.equal("extended_hours" in b.orderBody({ ...order, extended_hours: false }), false);
  assert.equal("extended_hours" in b.orderBody(order), false);
});
