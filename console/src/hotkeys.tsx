// Keyboard shortcuts (listed by `?`): `/` symbol search, `b`/`s` the order ticket (buy/sell) for
// the selected symbol, `Esc` closes a dialog, `w` watches the selected radar row, `c` closes the
// selected position (after a confirm), `Shift+H` the emergency halt (with the typed reason its
// button asks for). None fires while typing in a field or with a dialog open (but `Esc`).
import { signal } from "@preact/signals";
import { useEffect, useRef, useState } from "preact/hooks";
import { post } from "./api";
import { symbolHalt } from "./halt_badge";
import { closeRefusal } from "./halts";
import { canOperate } from "./session";
import { loadPositions } from "./store";
import { chartSymbol, openChart } from "./symbol_chart";
import { openTicket, ticket } from "./ticket";
import { Confirm, Modal, notify } from "./ui";

/** The radar row selected (by a click), which `w` watches and `b`/`s` trade. */
export const selectedRadar = signal<string | null>(null);
/** The position selected on the Positions tab, which `c` closes. */
export const selectedPosition = signal<string | null>(null);
/** Set by `Shift+H`: the header's emergency control opens its confirm. */
export const emergencyAsked = signal(false);

const help = signal(false);
const searching = signal(false);
const closing = signal<string | null>(null);

export const HOTKEYS: [string, string][] = [
  ["?", "Show these shortcuts"],
  ["/", "Search a symbol (Enter opens its chart)"],
  ["b", "Order ticket: buy the selected symbol"],
  ["s", "Order ticket: sell the selected symbol"],
  ["Esc", "Close the dialog"],
  ["w", "Watch the selected radar row"],
  ["c", "Close the selected position (asks first)"],
  ["Shift+H", "Emergency liquidate & halt (asks for a typed reason)"],
];

/** Whether the key press belongs to a field being typed in. */
function typing(e: KeyboardEvent): boolean {
  const t = e.target as HTMLElement | null;
  if (!t) return false;
  return t.isContentEditable || ["INPUT", "TEXTAREA", "SELECT"].includes(t.tagName);
}

const dialogOpen = () => !!document.querySelector('[role="dialog"]');

/** The symbol a shortcut acts on: the open chart's, the selected position's or radar row's. */
const currentSymbol = () => chartSymbol.value ?? selectedPosition.value ?? selectedRadar.value ?? "";

function onKey(e: KeyboardEvent) {
  if (e.ctrlKey || e.metaKey || e.altKey || typing(e) || e.defaultPrevented) return;
  if (e.key === "?") {
    e.preventDefault();
    help.value = true;
    return;
  }
  // Shortcuts below act from the page itself, not over a dialog.
  if (dialogOpen() && e.key !== "Escape") return;
  const operate = canOperate.value;
  switch (e.key) {
    case "/":
      e.preventDefault();
      searching.value = true;
      break;
    case "b":
    case "s":
      if (!operate) return;
      e.preventDefault();
      openTicket(currentSymbol(), e.key === "b" ? "BUY" : "SELL");
      break;
    case "w": {
      const symbol = selectedRadar.value;
      if (!operate || !symbol) return;
      e.preventDefault();
      post("/api/radar/watch", { symbol, source: "MANUAL" }).then(
        () => notify("ok", `${symbol} added to the watchlist`),
        (err) => notify("error", `${symbol} was not watched: ${err.code ?? ""} ${err.message ?? err}`),
      );
      break;
    }
    case "c": {
      const symbol = selectedPosition.value;
      if (!operate || !symbol) return;
      e.preventDefault();
      const { halted, halt } = symbolHalt(symbol);
      if (halted) notify("error", closeRefusal(symbol, halt));
      else closing.value = symbol;
      break;
    }
    case "H":
      if (!operate || !e.shiftKey) return;
      e.preventDefault();
      emergencyAsked.value = true;
      break;
  }
}

function Search() {
  const [text, setText] = useState("");
  const input = useRef<HTMLInputElement>(null);
  useEffect(() => input.current?.focus(), []);
  const close = () => (searching.value = false);
  return (
    <Modal title="Symbol" onClose={close} testid="symbol-search">
      <form
        onSubmit={(e) => {
          e.preventDefault();
          const symbol = text.trim().toUpperCase();
          if (!symbol) return;
          close();
          openChart(symbol);
        }}
      >
        <input ref={input} name="symbol" value={text} onInput={(e) => setText(e.currentTarget.value.toUpperCase())} placeholder="Symbol, then Enter" autoComplete="off" spellcheck={false} />
      </form>
    </Modal>
  );
}

/** The shortcuts' listener and dialogs (rendered once, by the shell). */
export function Hotkeys() {
  useEffect(() => {
    window.addEventListener("keydown", onKey);
    return () => window.removeEventListener("keydown", onKey);
  }, []);
  const symbol = closing.value;
  return (
    <>
      {help.value && (
        <Modal title="Keyboard shortcuts" onClose={() => (help.value = false)} testid="hotkeys-help">
          <table class="hotkeys">
            <tbody>
              {HOTKEYS.map(([k, what]) => (
                <tr key={k}>
                  <td>
                    <kbd>{k}</kbd>
                  </td>
                  <td>{what}</td>
                </tr>
              ))}
            </tbody>
          </table>
          <p class="muted">Shortcuts do nothing while you type in a field.</p>
        </Modal>
      )}
      {searching.value && <Search />}
      {symbol && (
        <Confirm
          title={`Close ${symbol}`}
          confirmLabel="Sell all at market"
          danger
          onClose={() => (closing.value = null)}
          onConfirm={async () => {
            const r = await post<{ close_order_client_order_id: string; status: string }>("/api/positions/close", { symbol });
            notify("ok", `Close order for ${symbol} sent (${r.close_order_client_order_id}, ${r.status}).`);
            loadPositions();
          }}
        >
          <p>
            Sells the whole <strong>{symbol}</strong> position at market. The strategy stops managing it.
          </p>
        </Confirm>
      )}
    </>
  );
}

/** Whether the ticket is open (for the shell). */
export const ticketOpen = () => ticket.value !== null;
