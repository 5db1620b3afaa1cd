// Unit tests of the whole trading day as the console words it (src/market_session.ts), bundled
// with esbuild and run by Node's test runner: the header's session badge and its countdown on the
// market's clock, the session view read leniently, the warning in the last 15 minutes that stops
// will be left to the engine after the close, the limit the ticket prefills outside the regular
// session (exact, to the cent or the hundredth of a cent), and the OUTSIDE_REGULAR_SESSION
// refusal in words.
import { test } from "node:test";
import assert from "node:assert/strict";
import * as esbuild from "esbuild";

const built = await esbuild.build({ entryPoints: ["src/market_session.ts"], bundle: true, format: "esm", write: false, logLevel: "warning" });
const m = await import(`data:text/javascript;base64,${Buffer.from(built.outputFiles[0].text).toString("base64")}`);

// Friday 20 November 2026, New York on EST (UTC−5).
const DAY = {
  trading_day: "2026-11-20",
  pre_market_open_at: "2026-11-20T09:00:00.000Z",
  regular_open_at: "2026-11-20T14:30:00.000Z",
  regular_close_at: "2026-11-20T21:00:00.000Z",
  after_hours_close_at: "2026-11-21T01:00:00.000Z",
};
const pre = { ...DAY, session: "PRE_MARKET", next_session: "REGULAR", next_session_at: DAY.regular_open_at };
const regular = { ...DAY, session: "REGULAR", next_session: "AFTER_HOURS", next_session_at: DAY.regular_close_at };
const after = { ...DAY, session: "AFTER_HOURS", next_session: "CLOSED", next_session_at: DAY.after_hours_close_at };
/** Saturday: no session times; the pre-market opens on Monday. */
const weekend = {
  session: "CLOSED",
  trading_day: "2026-11-21",
  pre_market_open_at: null,
  regular_open_at: null,
  regular_close_at: null,
  after_hours_close_at: null,
  next_session: "PRE_MARKET",
  next_session_at: "2026-11-23T09:00:00.000Z",
};
/** The simulated market's ALWAYS_OPEN calendar: regular all day, the next day at midnight. */
const alwaysOpen = {
  session: "REGULAR",
  trading_day: "2026-11-20",
  pre_market_open_at: "2026-11-20T05:00:00.000Z",
  regular_open_at: "2026-11-20T05:00:00.000Z",
  regular_close_at: "2026-11-21T05:00:00.000Z",
  after_hours_close_at: "2026-11-21T05:00:00.000Z",
  next_session: "REGULAR",
  next_session_at: "2026-11-21T05:00:00.000Z",
};
const at = (iso) => Date.parse(iso);

test("the countdown counts to the minute the change is reached, as the header's clock reads", () => {
  assert.equal(m.countdown(72 * 60_000), "1h 12m");
  assert.equal(m.countdown(71 * 60_000 + 59_700), "1h 12m", "at 14:48:00.3 the 16:00 close is 1h 12m away");
  assert.equal(m.countdown(23 * 60_000), "23m");
  assert.equal(m.countdown(1_000), "1m");
  assert.equal(m.countdown(65 * 60_000), "1h 05m");
  assert.equal(m.countdown(24 * 3_600_000), "1d 0h");
  assert.equal(m.countdown((2 * 24 + 7) * 3_600_000), "2d 7h");
  assert.equal(m.countdown(0), "now");
  assert.equal(m.countdown(-5_000), "now");
});

test("the badge says the session and the time to its next change, on the market's clock", () => {
  const b = m.sessionBadge(regular, at("2026-11-20T19:48:00.300Z")); // 14:48 NY
  assert.equal(b.text, "REG · closes in 1h 12m");
  assert.equal(b.short, "REG");
  assert.equal(b.cls, "regular");
  assert.equal(b.due, false);
  assert.match(b.title, /^Now: the regular session\. The regular session closes \(after-hours trading begins\) at 16:00 NY, in 1h 12m \(market time\)\./);
  assert.match(b.title, /pre-market 04:00–09:30, regular 09:30–16:00, after-hours 16:00–20:00 NY\.$/);

  assert.equal(m.sessionBadge(pre, at("2026-11-20T14:07:00Z")).text, "PRE · opens in 23m");
  assert.equal(m.sessionBadge(pre, at("2026-11-20T14:07:00Z")).cls, "pre-market");
  assert.equal(m.sessionBadge(after, at("2026-11-20T23:30:00Z")).text, "AH · closes in 1h 30m");
  const closed = m.sessionBadge(weekend, at("2026-11-21T17:00:00Z")); // Saturday noon NY
  assert.equal(closed.text, "CLOSED · pre-market in 1d 16h");
  assert.match(closed.title, /The pre-market opens at 04:00 NY on 2026-11-23, in 1d 16h .*No trading on 2026-11-21\.$/);
});

test("without the market's time the badge names the session alone; a passed change is due", () => {
  assert.equal(m.sessionBadge(regular, null).text, "REG");
  assert.equal(m.sessionBadge(regular, null).due, false);
  const late = m.sessionBadge(pre, at("2026-11-20T14:30:05Z"));
  assert.equal(late.text, "PRE · opens now");
  assert.equal(late.due, true);
});

test("the simulated market's calendar is regular all day", () => {
  const b = m.sessionBadge(alwaysOpen, at("2026-11-20T23:50:00Z"));
  assert.equal(b.text, "REG · all day");
  assert.match(b.title, /ALWAYS_OPEN.*The next trading day begins at 00:00 NY on 2026-11-21, in 5h 10m\./);
});

test("a session view is read leniently: missing or odd fields are null, an unknown session none", () => {
  assert.deepEqual(m.parseSession(regular), regular);
  assert.deepEqual(m.parseSession({ session: "PRE_MARKET" }), {
    session: "PRE_MARKET",
    trading_day: null,
    pre_market_open_at: null,
    regular_open_at: null,
    regular_close_at: null,
    after_hours_close_at: null,
    next_session: null,
    next_session_at: null,
  });
  assert.equal(m.parseSession({ ...regular, next_session: "LUNCH", next_session_at: 5 }).next_session_at, null);
  for (const bad of [null, undefined, "REGULAR", {}, { session: "OPEN" }]) assert.equal(m.parseSession(bad), null, JSON.stringify(bad));
});

const position = (over = {}) => ({ quantity: 100, protection: "BROKER", stop_loss: 9.7, ...over });

test("in the last 15 minutes of the regular session, the stops the engine alone will hold are counted", () => {
  const rows = [
    position(),
    position({ protection: "ENGINE" }),
    position({ protection: "NONE", stop_loss: null }),
    position({ quantity: 0 }),
    position({ protection: undefined, stop_loss: 4.2 }), // an older service: a stop level counts
    position({ protection: undefined, stop_loss: null }),
  ];
  assert.equal(m.stopsLeftToEngine(rows), 3);
  const w = m.closeWarning(regular, at("2026-11-20T20:50:00Z"), rows); // 15:50 NY
  assert.deepEqual(w, { count: 3, closeAt: "16:00", text: "3 positions will be protected by the engine only after 16:00" });
  assert.equal(m.closeWarning(regular, at("2026-11-20T20:45:00Z"), rows)?.count, 3, "from 15:45");
  assert.equal(m.closeWarning(regular, at("2026-11-20T20:44:59Z"), rows), null, "not before");
  assert.equal(m.closeWarning(regular, at("2026-11-20T21:00:00Z"), rows), null, "not once closed");
  assert.equal(m.closeWarning(regular, at("2026-11-20T20:50:00Z"), [position()]).text, "1 position will be protected by the engine only after 16:00");
  assert.equal(m.closeWarning(regular, at("2026-11-20T20:50:00Z"), [position({ protection: "NONE" })]), null, "no stop: nothing to warn of here");
});

test("the close warning keeps an early close's time, and is silent elsewhere", () => {
  const early = { ...regular, regular_close_at: "2026-11-27T18:00:00.000Z", next_session_at: "2026-11-27T18:00:00.000Z", trading_day: "2026-11-27" };
  assert.equal(m.closeWarning(early, at("2026-11-27T17:50:00Z"), [position()]).closeAt, "13:00");
  assert.equal(m.closeWarning(after, at("2026-11-20T23:00:00Z"), [position()]), null, "after hours");
  assert.equal(m.closeWarning(alwaysOpen, at("2026-11-21T04:50:00Z"), [position()]), null, "the simulated market never closes");
  assert.equal(m.closeWarning(null, at("2026-11-20T20:50:00Z"), [position()]), null, "an older service");
  assert.equal(m.closeWarning(regular, null, [position()]), null, "no market time yet");
});

test("outside the regular session the limit is the ask plus the offset for a buy, the bid less it for a sell, exactly", () => {
  const q = { bid: 9.98, ask: 10, last: 9.99 };
  assert.equal(m.extendedHoursLimit("BUY", q, 0.5), 10.05);
  assert.equal(m.extendedHoursLimit("SELL", q, 0.5), 9.93, "9.9301");
  assert.equal(m.extendedHoursLimit("BUY", { bid: 4.1, ask: 4.13, last: 4.12 }, 0.5), 4.15, "4.15065 to the nearest cent");
  assert.equal(m.extendedHoursLimit("BUY", { bid: 2.1, ask: 2.11, last: 2.1 }, 0.5), 2.12, "2.12055");
  assert.equal(m.extendedHoursLimit("BUY", { bid: 1.99, ask: 2.01, last: 2 }, 0.5), 2.02, "2.02005 to the nearest cent");
  assert.equal(m.extendedHoursLimit("BUY", { bid: 0.5, ask: 0.5123, last: 0.51 }, 0.5), 0.5149, "0.5148615: a hundredth of a cent under $1");
  assert.equal(m.extendedHoursLimit("BUY", { bid: 0.99, ask: 0.9975, last: 0.99 }, 0.5), 1, "1.0024875 crosses $1: a cent");
  assert.equal(m.extendedHoursLimit("BUY", { bid: 10, ask: 0, last: 10.2 }, 1), 10.3, "no ask: the last trade");
  assert.equal(m.extendedHoursLimit("BUY", q, 0), 10);
});

test("no limit is prefilled without a quote or an offset", () => {
  assert.equal(m.extendedHoursLimit("BUY", null, 0.5), null);
  assert.equal(m.extendedHoursLimit("BUY", { bid: 0, ask: 0, last: 0 }, 0.5), null);
  assert.equal(m.extendedHoursLimit("BUY", { bid: 1, ask: 1, last: 1 }, null), null);
  assert.equal(m.extendedHoursLimit("SELL", { bid: 1, ask: 1, last: 1 }, 100), null);
});

test("outside the regular session only a LIMIT DAY marked extended hours is taken; the ticket says why before sending", () => {
  const now = at("2026-11-20T14:07:00Z"); // 09:07 NY
  assert.equal(m.extendedHoursOrder("LIMIT", "DAY", true), true);
  assert.equal(m.extendedHoursOrder("LIMIT", "GTC", true), false);
  assert.equal(m.sessionRefusal(regular, now, "MARKET", "DAY", false), null, "the regular session takes every type");
  assert.equal(m.sessionRefusal(null, now, "MARKET", "DAY", false), null, "an older service: the service decides");
  assert.equal(m.sessionRefusal(pre, now, "LIMIT", "DAY", true), null);
  assert.equal(
    m.sessionRefusal(pre, now, "MARKET", "DAY", false),
    "A market order is refused in the pre-market: only a LIMIT DAY order marked extended hours is taken until the regular session opens at 09:30 NY, in 23m.",
  );
  assert.match(m.sessionRefusal(pre, now, "STOP_LIMIT", "DAY", false), /^A stop limit order is refused in the pre-market/);
  assert.match(m.sessionRefusal(pre, now, "LIMIT", "DAY", false), /^A limit order not marked extended hours is refused/);
  // After hours the next regular session is the next trading day's.
  const evening = { ...after, next_session: "CLOSED" };
  assert.match(m.sessionRefusal(evening, at("2026-11-20T23:00:00Z"), "STOP", "DAY", false), /^A stop order is refused after hours: .* until the regular session opens\.$/);
  assert.equal(
    m.sessionRefusal(weekend, at("2026-11-21T17:00:00Z"), "LIMIT", "DAY", true),
    "The market is closed: no order is taken until the pre-market opens at 04:00 NY on 2026-11-23, in 1d 16h.",
  );
});

test("an OUTSIDE_REGULAR_SESSION refusal reads in words: the session, what is taken, when the regular session opens", () => {
  const now = at("2026-11-20T14:07:00Z");
  const detail = { session: "PRE_MARKET", regular_open_at: "2026-11-20T14:30:00.000Z", allowed: { order_type: "LIMIT", time_in_force: "DAY", extended_hours: true } };
  assert.equal(
    m.outsideSessionWords(detail, now),
    "Refused in the pre-market: only a LIMIT DAY order marked extended hours is taken outside the regular session. The regular session opens at 09:30 NY, in 23m.",
  );
  assert.equal(
    m.outsideSessionWords({ session: "AFTER_HOURS", regular_open_at: "2026-11-23T14:30:00.000Z", allowed: "LIMIT DAY with extended_hours: true" }, at("2026-11-20T23:00:00Z")),
    "Refused after hours: only LIMIT DAY with extended_hours: true is taken outside the regular session. The regular session opens at 09:30 NY on 2026-11-23, in 2d 15h.",
  );
  assert.equal(m.outsideSessionWords({}, null), "Only a LIMIT DAY order marked extended hours is taken outside the regular session.", "a detail without fields");
  assert.equal(m.allowedWords([{ order_type: "LIMIT", time_in_force: "DAY", extended_hours: true }]), "a LIMIT DAY order marked extended hours");
  assert.equal(m.allowedWords({ order_types: ["LIMIT"], time_in_force: ["DAY"] }), "a LIMIT DAY order");
});
