// Live state the header and several tabs share: the account summary, the risk state and how
// many positions are open (for the liquidation progress).
import { signal } from "@preact/signals";
import { get } from "./api";
import { marketClock } from "./format";
import type { AccountSummary, Position, RiskState } from "./types";
import { notify } from "./ui";

export const account = signal<AccountSummary | null>(null);
export const risk = signal<RiskState | null>(null);
/** Positions still open, for the liquidation progress. */
export const openPositions = signal<number | null>(null);
/** Set when this console asked for the halt, to show progress until flat. */
export const liquidating = signal(false);

export async function loadAccount() {
  try {
    account.value = await get<AccountSummary>("/api/account/summary");
  } catch {
    /* the header keeps the last figures; the stream status shows trouble */
  }
}
export async function loadRisk() {
  try {
    risk.value = await get<RiskState>("/api/risk/state");
  } catch {
    /* as above */
  }
}
export async function loadPositions() {
  try {
    const rows = await get<Position[]>("/api/positions");
    openPositions.value = rows.filter((p) => p.quantity !== 0).length;
    if (openPositions.value === 0 && liquidating.value) {
      liquidating.value = false;
      notify("ok", "Liquidation complete: every position is flat.");
    }
  } catch {
    /* as above */
  }
}


/** The cluster as the `cluster` health component reports it (PostgreSQL only; null otherwise). */
export const cluster = signal<{ role: string; node: string; leader: string | null; epoch: number; members: number } | null>(null);

/** The market's date and time, from the data broker's health detail, and the cluster. */
export async function loadMarketClock() {
  try {
    const components = await get<{ name: string; detail: Record<string, unknown> }[]>("/api/health/components");
    const d = components.find((c) => c.name === "data_broker")?.detail;
    if (d && typeof d.trading_date === "string" && typeof d.market_time === "string") {
      marketClock.value = { date: d.trading_date, time: d.market_time };
    }
    const c = components.find((c) => c.name === "cluster")?.detail;
    cluster.value =
      c && typeof c.node === "string"
        ? {
            role: String(c.role),
            node: c.node,
            leader: typeof c.leader === "string" ? c.leader : null,
            epoch: Number(c.epoch),
            members: Array.isArray(c.members) ? c.members.length : 0,
          }
        : null;
  } catch {
    /* keep the last known */
  }
}
