// Unit tests of the console's notifications module (src/notifications.ts), bundled with esbuild
// and run by Node's test runner: a channel's state as a badge and in words (when a retrying
// channel tries again, in New York time; why a failing one fails), the Telegram commands a channel
// takes, a test's outcome as shown beside its button, and an older service's 404.
import { test } from "node:test";
import assert from "node:assert/strict";
import * as esbuild from "esbuild";

const built = await esbuild.build({ entryPoints: ["src/notifications.ts"], bundle: true, format: "esm", write: false, logLevel: "warning" });
const n = await import(`data:text/javascript;base64,${Buffer.from(built.outputFiles[0].text).toString("base64")}`);

// 15:31:05 UTC on a November day is 10:31:05 in New York.
const retryAt = "2026-11-20T15:31:05.000Z";

test("a channel's state is a green, amber or red badge", () => {
  assert.equal(n.stateBadge("OK"), "ok");
  assert.equal(n.stateBadge("RETRYING"), "warning");
  assert.equal(n.stateBadge("FAILING"), "error");
  assert.equal(n.stateBadge("SOMETHING_NEW"), "", "an unknown state is a plain badge");
  assert.deepEqual(["SENT", "RETRYING", "FAILED", "FOLDED"].map(n.deliveryBadge), ["ok", "warning", "error", ""]);
});

test("a retrying channel says when it tries again, a failing one why it fails", () => {
  assert.equal(n.stateWords({ state: "OK", retry_at: null, last_error: "old" }), "", "OK says nothing, whatever failed before");
  assert.equal(n.stateWords({ state: "RETRYING", retry_at: retryAt, last_error: null }), "retrying at 10:31:05");
  assert.equal(n.stateWords({ state: "RETRYING", retry_at: retryAt, last_error: "429 Too Many Requests" }), "retrying at 10:31:05: 429 Too Many Requests");
  assert.equal(n.stateWords({ state: "RETRYING", retry_at: null, last_error: null }), "retrying");
  assert.equal(n.stateWords({ state: "FAILING", retry_at: null, last_error: "401 Unauthorized: bot token revoked" }), "401 Unauthorized: bot token revoked");
  assert.equal(n.stateWords({ state: "FAILING", retry_at: null, last_error: null }), "the last delivery failed");
});

test("only Telegram channels take commands, by their role", () => {
  assert.equal(n.commandsWords({ kind: "telegram", commands_role: "none" }), "no");
  assert.equal(n.commandsWords({ kind: "telegram", commands_role: "viewer" }), "viewer: /status, /positions, /pnl");
  assert.equal(n.commandsWords({ kind: "telegram", commands_role: "operator" }), "operator: /status, /positions, /pnl, /halt");
  assert.equal(n.commandsWords({ kind: "slack", commands_role: "none" }), "—");
  assert.equal(n.kindLabel("ntfy"), "ntfy");
  assert.equal(n.kindLabel("telegram"), "Telegram");
  assert.equal(n.kindLabel("matrix"), "matrix", "an unknown kind is shown as sent");
});

test("a test's outcome reads sent, retrying or failed with the channel's error", () => {
  assert.deepEqual(n.testResult({ status: "SENT", error: null, attempts: 1 }), { kind: "ok", text: "Sent ✓" });
  assert.deepEqual(n.testResult({ status: "RETRYING", error: "429: retry after 3 s", attempts: 1 }), { kind: "warn", text: "Retrying: 429: retry after 3 s" });
  assert.deepEqual(n.testResult({ status: "RETRYING", error: null, attempts: 2 }), { kind: "warn", text: "Retrying: not delivered after 2 attempts, trying again" });
  assert.deepEqual(n.testResult({ status: "RETRYING", error: null, attempts: 0 }), { kind: "warn", text: "Retrying: queued, not tried yet" });
  assert.deepEqual(n.testResult({ status: "FAILED", error: "chat not found", attempts: 3 }), { kind: "error", text: "Failed: chat not found" });
  assert.deepEqual(n.testResult({ status: "FAILED", error: null, attempts: 3 }), { kind: "error", text: "Failed: no reason given" });
  assert.equal(n.testResult({ status: "FOLDED", error: null, attempts: 0 }).kind, "warn");
});

test("a 404 means a service without notifications, any other refusal does not", () => {
  assert.equal(n.notAvailable({ status: 404, code: "NOT_FOUND" }), true);
  assert.equal(n.notAvailable({ status: 404, code: "BAD_RESPONSE" }), true, "an older service's 404 without the envelope");
  assert.equal(n.notAvailable({ status: 400, code: "VALIDATION_ERROR" }), false);
  assert.equal(n.notAvailable({ status: 403, code: "FORBIDDEN" }), false);
  assert.equal(n.notAvailable(undefined), false);
  assert.equal(n.NO_CHANNELS, "No notification channels configured — see docs/operating.md, Notifications.");
});
