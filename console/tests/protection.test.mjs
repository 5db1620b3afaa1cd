// Unit tests of the positions table's protection badge (src/protection.tsx), bundled with esbuild
// (Preact's JSX) and run by Node's test runner: the badge each protection renders (BROKER,
// ENGINE — worded for outside the regular session too — and NONE as a warning on an open
// position), the count of open positions nothing protects, and a `position.updated` event laid
// over the rows.
import { test } from "node:test";
import assert from "node:assert/strict";
import * as esbuild from "esbuild";

const built = await esbuild.build({
  entryPoints: ["src/protection.tsx"],
  bundle: true,
  format: "esm",
  write: false,
  logLevel: "warning",
  jsx: "automatic",
  jsxImportSource: "preact",
});
const p = await import(`data:text/javascript;base64,${Buffer.from(built.outputFiles[0].text).toString("base64")}`);

const row = (over = {}) => ({
  symbol: "ABCD",
  quantity: 100,
  stop_loss: 9.7,
  target: 11,
  protection: "BROKER",
  protective_order_id: "to-abc-stop",
  ...over,
});

/** The badge as rendered: the element Preact would draw, its class, data attributes, title and text. */
function render(position) {
  const vnode = p.ProtectionBadge({ position });
  const children = [vnode.props.children].flat().join("");
  return { tag: vnode.type, cls: vnode.props.class, kind: vnode.props["data-protection"], testid: vnode.props["data-testid"], title: vnode.props.title, text: children };
}

test("a stop at the broker renders a calm BROKER badge naming the order", () => {
  const b = render(row());
  assert.equal(b.tag, "span");
  assert.equal(b.cls, "badge protection broker");
  assert.equal(b.kind, "BROKER");
  assert.equal(b.testid, "position-protection");
  assert.equal(b.text, "BROKER");
  assert.match(b.title, /^A stop at \$9\.70 for all 100 shares rests at the broker \(to-abc-stop\): it protects the position even while tradeops is down\.$/);
});

test("the engine's watch renders ENGINE and says it holds only while tradeops runs", () => {
  const b = render(row({ protection: "ENGINE", protective_order_id: null }));
  assert.equal(b.cls, "badge protection engine");
  assert.equal(b.text, "ENGINE");
  assert.match(b.title, /^The engine watches the stop at \$9\.70 .* only while tradeops runs\.$/);
});

test("outside the regular session the ENGINE badge says the venue triggers no stops then", () => {
  const position = row({ protection: "ENGINE", protective_order_id: null });
  for (const session of ["PRE_MARKET", "AFTER_HOURS", "CLOSED"]) {
    const vnode = p.ProtectionBadge({ position, session });
    assert.equal(vnode.props.class, "badge protection engine");
    assert.equal(
      vnode.props.title,
      "Engine-held stop: the venue triggers no stops outside 09:30–16:00; the engine fires it as an extended-hours limit when the last trade crosses $9.70. It protects the position only while tradeops runs.",
      session,
    );
  }
  // In the regular session, or with the session unknown, the engine's watch reads as before.
  assert.match(p.ProtectionBadge({ position, session: "REGULAR" }).props.title, /^The engine watches the stop at \$9\.70 /);
  assert.match(p.ProtectionBadge({ position, session: null }).props.title, /^The engine watches the stop/);
  assert.match(p.protectionView({ ...position, stop_loss: null }, "PRE_MARKET").title, /extended-hours limit\. It protects/);
  // A stop at the broker is the broker's whatever the session says (the service decides).
  assert.equal(p.protectionView(row(), "PRE_MARKET").text, "BROKER");
});

test("an open position nothing protects renders NONE as a warning", () => {
  const b = render(row({ protection: "NONE", protective_order_id: null, stop_loss: null, target: null }));
  assert.equal(b.cls, "badge protection none");
  assert.equal(b.kind, "NONE");
  assert.equal(b.text, "⚠ NONE");
  assert.match(b.title, /^Nothing protects this position/);
  assert.equal(p.protectionView(row({ protection: "NONE" })).warn, true);
  assert.equal(p.protectionView(row()).warn, false);
  assert.equal(p.protectionView(row({ protection: "ENGINE" })).warn, false);
});

test("a flat row, or a service that reports no protection, renders a dash and no warning", () => {
  for (const position of [row({ quantity: 0, protection: "NONE" }), row({ protection: undefined })]) {
    const b = render(position);
    assert.equal(b.cls, "muted");
    assert.equal(b.text, "—");
    assert.equal(b.kind, "");
    assert.equal(p.protectionView(position), null);
  }
});

test("the count of unprotected positions counts open rows with NONE only", () => {
  const rows = [row(), row({ symbol: "B", protection: "NONE" }), row({ symbol: "C", protection: "ENGINE" }), row({ symbol: "D", protection: "NONE", quantity: 0 }), row({ symbol: "E", protection: "NONE" })];
  assert.equal(p.unprotected(rows), 2);
  assert.equal(p.unprotected([]), 0);
});

test("a position.updated event's protection and levels are laid over its row", () => {
  const rows = [row({ protection: "ENGINE", protective_order_id: null }), row({ symbol: "OTHER", protection: "NONE" })];
  const next = p.withPositionUpdate(rows, { symbol: "ABCD", quantity: 100, protection: "BROKER", protective_order_id: "to-xyz-stop", stop_loss: 9.8, target: null });
  assert.equal(next[0].protection, "BROKER");
  assert.equal(next[0].protective_order_id, "to-xyz-stop");
  assert.equal(next[0].stop_loss, 9.8);
  assert.equal(next[0].target, null, "a target taken is cleared");
  assert.equal(next[1], rows[1], "another symbol's row is left as it was");
  assert.equal(rows[0].protection, "ENGINE", "the rows given are not changed");
  // Fields the event leaves out keep the row's values; an unknown symbol waits for the reload.
  assert.equal(p.withPositionUpdate(rows, { symbol: "ABCD", quantity: 50 })[0].protection, "ENGINE");
  assert.equal(p.withPositionUpdate(rows, { symbol: "NEW", protection: "NONE" }), rows);
});
