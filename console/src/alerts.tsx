// Alerts: what a trader must not miss, from the event stream — a fill, a rejected order, a risk
// violation, trading REDUCING or HALTED, the broker or the stream disconnected, a reconciliation
// mismatch, a symbol the engine follows halted by its venue or trading again — and, from the
// market's clock, the last 15 minutes of the regular session with positions whose stops only the
// engine will hold after the close. Each goes to the alert log; sound and desktop notifications are opt-in per kind
// (kept in this browser). The same kind and symbol alerts at most once per 10 s.
import { effect, signal, untracked } from "@preact/signals";
import { useState } from "preact/hooks";
import { streamStatus, subscribe } from "./events";
import { int, price, time } from "./format";
import { statusAlertText } from "./halts";
import { closeWarning, marketNow } from "./market_session";
import { marketSession, positionRows } from "./store";
import type { SymbolStatus } from "./types";

export type AlertKind = "fill" | "rejection" | "violation" | "trading" | "disconnect" | "reconciliation" | "halt" | "close";

export const ALERT_KINDS: [AlertKind, string][] = [
  ["fill", "Fills"],
  ["rejection", "Rejected orders"],
  ["violation", "Risk violations"],
  ["trading", "Trading REDUCING or HALTED"],
  ["disconnect", "Broker or stream down or disconnected"],
  ["reconciliation", "Reconciliation mismatch"],
  ["halt", "A symbol halted or trading again"],
  ["close", "15 min before the close: stops the engine alone will hold after it"],
];

export interface Alert {
  id: number;
  at: string;
  kind: AlertKind;
  symbol: string;
  text: string;
}

/** The alert log, newest first (the last 200). */
export const alerts = signal<Alert[]>([]);
/** Alerts not yet seen in the open log. */
export const unseen = signal(0);

type Prefs = Record<AlertKind, { sound: boolean; desktop: boolean }>;
const PREFS_KEY = "tradeops.alerts";
const off = (): Prefs => Object.fromEntries(ALERT_KINDS.map(([k]) => [k, { sound: false, desktop: false }])) as Prefs;
function loadPrefs(): Prefs {
  try {
    return { ...off(), ...JSON.parse(localStorage.getItem(PREFS_KEY) ?? "{}") };
  } catch {
    return off();
  }
}
export const prefs = signal<Prefs>(loadPrefs());
export function setPref(kind: AlertKind, channel: "sound" | "desktop", on: boolean) {
  prefs.value = { ...prefs.value, [kind]: { ...prefs.value[kind], [channel]: on } };
  localStorage.setItem(PREFS_KEY, JSON.stringify(prefs.value));
  if (channel === "desktop" && on && "Notification" in window && Notification.permission === "default") Notification.requestPermission();
}

/** Once per 10 s per kind and symbol. */
export const REPEAT_MS = 10_000;
const lastRaised = new Map<string, number>();
let nextId = 1;

/** Counts of sounds played and desktop notifications shown (read by the browser test). */
const counters = { sounds: 0, notifications: 0, suppressed: 0 };
(window as any).__alerts = counters;

let audio: AudioContext | null = null;
function beep(kind: AlertKind) {
  counters.sounds++;
  try {
    audio ??= new AudioContext();
    const osc = audio.createOscillator();
    const gain = audio.createGain();
    osc.frequency.value = kind === "fill" ? 880 : 440;
    gain.gain.value = 0.08;
    osc.connect(gain).connect(audio.destination);
    osc.start();
    osc.stop(audio.currentTime + 0.15);
  } catch {
    /* no audio device: the log still has it */
  }
}

/**
 * Raises an alert unless the same kind and symbol did within the last 10 s; `repeat`, when
 * given, is what counts as the same instead of the symbol.
 */
export function raise(kind: AlertKind, symbol: string, text: string, now = Date.now(), repeat = symbol) {
  const key = `${kind}:${repeat}`;
  const last = lastRaised.get(key);
  if (last !== undefined && now - last < REPEAT_MS) {
    counters.suppressed++;
    return false;
  }
  lastRaised.set(key, now);
  alerts.value = [{ id: nextId++, at: new Date(now).toISOString(), kind, symbol, text }, ...alerts.value].slice(0, 200);
  unseen.value++;
  const p = prefs.value[kind];
  if (p?.sound) beep(kind);
  if (p?.desktop && "Notification" in window && Notification.permission === "granted") {
    counters.notifications++;
    try {
      new Notification(`tradeops · ${symbol || kind}`, { body: text, tag: key });
    } catch {
      /* not allowed here */
    }
  }
  return true;
}

(window as any).__raiseAlert = (kind: AlertKind, symbol: string, text: string) => raise(kind, symbol, text);

/** Starts listening (once, by the shell); returns the stop. */
export function startAlerts(): () => void {
  const stops = [
    subscribe(["execution.created"], (e) => {
      const d = e.data;
      raise("fill", d.symbol, `${d.side} ${int(d.quantity)} ${d.symbol} filled @ ${price(d.price)}`);
    }),
    subscribe(["order.updated"], (e) => {
      const d = e.data;
      if (d.status === "REJECTED") raise("rejection", d.symbol, `${d.side} ${int(d.quantity)} ${d.symbol} rejected: ${d.reject_reason ?? "no reason given"}`);
    }),
    subscribe(["risk.violation"], (e) => {
      const d = e.data;
      raise("violation", d.symbol ?? "", `${d.rule} ${d.symbol ?? ""}: ${d.detail?.message ?? ""}`.trim());
    }),
    subscribe(["risk.state_changed"], (e) => {
      const s = e.data?.trading_state;
      if ((s === "REDUCING" || s === "HALTED") && !e.data.liquidation) {
        raise("trading", "", s === "HALTED" ? `Trading HALTED: ${e.data.halt?.reason ?? ""}` : "Trading REDUCING: the daily loss limit was reached");
      }
    }),
    subscribe(["health.changed"], (e) => {
      const d = e.data;
      if (d.component !== "execution_broker" && d.component !== "data_broker") return;
      if (d.to === "DEGRADED" && d.detail?.reconciliation_status === "MISMATCH") {
        raise("reconciliation", "", `Reconciliation mismatch: ${d.detail.reconciliation_detail ?? ""}`);
      } else if (d.to === "DOWN" || d.to === "DEGRADED") {
        // Unreachable, its stream disconnected, or whatever else its health says (the reason).
        const why = d.detail?.reason;
        raise("disconnect", d.component, `${d.component.replace("_", " ")} is ${d.to}${why ? `: ${why}` : ""}`);
      }
    }),
    subscribe(["symbol.status"], (e) => {
      const d = e.data as SymbolStatus;
      // A pause can end within seconds: its reopen is not a repeat of the halt.
      raise("halt", d.symbol, statusAlertText(d), Date.now(), `${d.symbol}:${d.trading_status}`);
    }),
  ];
  // The close drawing near with stops the venue will not trigger after it: once a trading day,
  // and again if more positions are left to the engine.
  let warned = { day: "", count: 0 };
  const stopCloseWatch = effect(() => {
    const s = marketSession.value;
    const w = closeWarning(s, marketNow(), positionRows.value);
    if (!w) return;
    const day = s?.trading_day ?? "";
    if (day === warned.day && w.count <= warned.count) return;
    warned = { day, count: w.count };
    const text = `${w.text}: the venue triggers no stops after the close; the engine fires them as extended-hours limits while tradeops runs`;
    untracked(() => raise("close", "", text));
  });
  // The stream itself dropping.
  let was = streamStatus.value;
  const stopStream = streamStatus.subscribe((s) => {
    if (s === "down" && was === "live") raise("disconnect", "stream", "The live event stream disconnected; reconnecting…");
    was = s;
  });
  return () => {
    stops.forEach((f) => f());
    stopStream();
    stopCloseWatch();
  };
}

/** The alert log with the per-kind opt-ins (a panel under the header). */
export function AlertLog({ onClose }: { onClose: () => void }) {
  const [, redraw] = useState(0);
  unseen.value = 0;
  return (
    <section class="panel alert-log" data-testid="alert-log">
      <div class="panel-head">
        <h2>Alerts</h2>
        <span style={{ flex: 1 }} />
        <button class="btn ghost" onClick={() => ((alerts.value = []), redraw((n) => n + 1))}>
          Clear
        </button>
        <button class="btn ghost" onClick={onClose} aria-label="Close the alert log">
          ✕
        </button>
      </div>
      <div class="panel-body alert-body">
        <table class="alert-prefs" data-testid="alert-prefs">
          <thead>
            <tr>
              <th>Kind</th>
              <th>Sound</th>
              <th>Desktop</th>
            </tr>
          </thead>
          <tbody>
            {ALERT_KINDS.map(([k, label]) => (
              <tr key={k}>
                <td>{label}</td>
                <td>
                  <input type="checkbox" name={`sound-${k}`} checked={prefs.value[k].sound} onChange={(e) => setPref(k, "sound", e.currentTarget.checked)} />
                </td>
                <td>
                  <input type="checkbox" name={`desktop-${k}`} checked={prefs.value[k].desktop} onChange={(e) => setPref(k, "desktop", e.currentTarget.checked)} />
                </td>
              </tr>
            ))}
          </tbody>
        </table>
        <ol class="alert-list" data-testid="alert-list">
          {alerts.value.length === 0 && <li class="muted">No alert yet.</li>}
          {alerts.value.map((a) => (
            <li key={a.id} data-kind={a.kind} data-symbol={a.symbol}>
              <span class="mono muted">{time(a.at)}</span> <span class={`alert-kind ${a.kind}`}>{a.kind}</span> {a.text}
            </li>
          ))}
        </ol>
      </div>
    </section>
  );
}
