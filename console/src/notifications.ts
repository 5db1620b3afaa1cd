// Notification channels and deliveries (CONTRACT §13) in words: the badge of a channel's state
// and what it says, which Telegram commands a channel takes, a test's outcome as the Settings tab
// shows it, and whether a refusal only means the service predates notifications. Pure, so Node
// tests it; the Health and Settings tabs render it (tabs/notifications.tsx).
import { time } from "./format";
import type { ChannelKind, NotificationChannel, NotificationDelivery } from "./types";

/** Shown where the service answers 404: it was built before notifications. */
export const NOT_AVAILABLE = "Notifications: not available on this server.";

/** Shown for an empty channel list. */
export const NO_CHANNELS = "No notification channels configured — see docs/operating.md, Notifications.";

/**
 * Whether a refusal of a notifications endpoint means the service has none: their paths name no
 * resource, so a 404 (NOT_FOUND, or a body that is not the envelope) is an older service's
 * unknown route.
 */
export function notAvailable(e: { status: number } | undefined): boolean {
  return e !== undefined && e.status === 404;
}

export const KIND_LABELS: Record<ChannelKind, string> = {
  telegram: "Telegram",
  discord: "Discord",
  slack: "Slack",
  ntfy: "ntfy",
  webhook: "Webhook",
};

export const kindLabel = (kind: string) => KIND_LABELS[kind as ChannelKind] ?? kind;

/** The badge class of a channel's state: OK green, RETRYING amber, FAILING red. */
export function stateBadge(state: string): string {
  return state === "OK" ? "ok" : state === "RETRYING" ? "warning" : state === "FAILING" ? "error" : "";
}

/** The badge class of a delivery's status. */
export function deliveryBadge(status: string): string {
  return status === "SENT" ? "ok" : status === "RETRYING" ? "warning" : status === "FAILED" ? "error" : "";
}

/** What a channel's state means now: when it retries, or why it fails; empty when OK. */
export function stateWords(ch: Pick<NotificationChannel, "state" | "retry_at" | "last_error">): string {
  switch (ch.state) {
    case "OK":
      return "";
    case "RETRYING": {
      const at = ch.retry_at ? `retrying at ${time(ch.retry_at)}` : "retrying";
      return ch.last_error ? `${at}: ${ch.last_error}` : at;
    }
    case "FAILING":
      return ch.last_error ?? "the last delivery failed";
    default:
      return ch.last_error ?? "";
  }
}

/** Which commands a channel takes from its chats (only Telegram reads commands). */
export function commandsWords(ch: Pick<NotificationChannel, "kind" | "commands_role">): string {
  if (ch.commands_role === "viewer") return "viewer: /status, /positions, /pnl";
  if (ch.commands_role === "operator") return "operator: /status, /positions, /pnl, /halt";
  return ch.kind === "telegram" ? "no" : "—";
}

/** A test's outcome as shown beside its button: `ok` (sent), `warn` (retrying, folded), `error`. */
export function testResult(d: Pick<NotificationDelivery, "status" | "error" | "attempts">): { kind: "ok" | "warn" | "error"; text: string } {
  switch (d.status) {
    case "SENT":
      return { kind: "ok", text: "Sent ✓" };
    case "RETRYING":
      if (d.error) return { kind: "warn", text: `Retrying: ${d.error}` };
      if (d.attempts === 0) return { kind: "warn", text: "Retrying: queued, not tried yet" };
      return { kind: "warn", text: `Retrying: not delivered after ${d.attempts} attempt${d.attempts === 1 ? "" : "s"}, trying again` };
    case "FAILED":
      return { kind: "error", text: `Failed: ${d.error ?? "no reason given"}` };
    case "FOLDED":
      return { kind: "warn", text: "Folded into a digest: the channel's queue is full" };
    default:
      return { kind: "warn", text: `${d.status}${d.error ? `: ${d.error}` : ""}` };
  }
}
