// Notifications (CONTRACT §13): the channels that carry alerts to the operator's phone and team
// chat. On the Health tab, each channel's state (OK, RETRYING and when, FAILING and why), its
// queue and counts, when it last delivered and which Telegram commands it takes; read every 15 s
// with the components, on `health.changed`, and just after a retrying channel's retry is due. On
// the Settings tab, a test message per channel with its outcome inline and the channel's recent
// deliveries. Channels come from the configuration file (they hold secrets), so nothing here edits
// them. A service built before notifications answers 404: both places say so and carry on.
import "./notifications.css";
import { useEffect, useState } from "preact/hooks";
import { ApiError, call, get, post, withQuery } from "../api";
import { useEvents } from "../events";
import { ago, dateTime, int, time } from "../format";
import { NO_CHANNELS, NOT_AVAILABLE, commandsWords, deliveryBadge, kindLabel, notAvailable, stateBadge, stateWords, testResult } from "../notifications";
import { canOperate, me } from "../session";
import type { NotificationChannel, NotificationDelivery } from "../types";
import { Badge, ErrorBanner, Section, Table, refusalText, useLoad, useThrottled, type Column } from "../ui";

const CHANNELS = "/api/notifications/channels";
const POLL_MS = 15_000;

/** "3 channels · 1 failing · 1 retrying" */
function summary(rows: NotificationChannel[]): string {
  const failing = rows.filter((c) => c.state === "FAILING").length;
  const retrying = rows.filter((c) => c.state === "RETRYING").length;
  const parts = [`${rows.length} channel${rows.length === 1 ? "" : "s"}`];
  if (failing) parts.push(`${failing} failing`);
  if (retrying) parts.push(`${retrying} retrying`);
  return parts.join(" · ");
}

function StateCell({ ch }: { ch: NotificationChannel }) {
  const words = stateWords(ch);
  return (
    <span class="notify-state" data-testid={`notify-state-${ch.name}`} data-state={ch.state}>
      <Badge text={ch.state} kind={stateBadge(ch.state)} />
      {words && (
        <span class={`wrap ${ch.state === "FAILING" ? "down" : "warn"}`} title={ch.retry_at ? `Next attempt ${dateTime(ch.retry_at)} NY` : undefined}>
          {words}
        </span>
      )}
    </span>
  );
}

// ---------------------------------------------------------------------------------------------
// Health tab

/** The Health tab's section: every channel with its state, counts and last delivery. */
export function NotificationChannels() {
  const list = useLoad(() => call<NotificationChannel[]>("GET", CHANNELS));
  const missing = notAvailable(list.error);
  const reload = useThrottled(list.reload, 1000);
  useEvents(["health.changed"], reload);
  // Counts and ages move with every alert sent; an older service has nothing to poll.
  useEffect(() => {
    if (missing) return;
    const timer = setInterval(reload, POLL_MS);
    return () => clearInterval(timer);
  }, [reload, missing]);

  const rows = list.data?.data ?? [];
  const serverNow = list.data?.meta.timestamp;
  // A retrying channel tries again at `retry_at`: read the outcome a second after, when that
  // comes before the next poll (never again for a retry already past, so this cannot spin).
  const nextRetry = rows
    .filter((c) => c.state === "RETRYING" && c.retry_at)
    .map((c) => Date.parse(c.retry_at!))
    .sort((a, b) => a - b)[0];
  useEffect(() => {
    if (nextRetry === undefined) return;
    const wait = nextRetry - (serverNow ? Date.parse(serverNow) : Date.now()) + 1000;
    if (wait <= 0 || wait >= POLL_MS) return;
    const timer = setTimeout(reload, Math.max(1000, wait));
    return () => clearTimeout(timer);
  }, [nextRetry, serverNow, reload]);

  const columns: Column<NotificationChannel>[] = [
    {
      key: "name",
      label: "Channel",
      render: (c) => (
        <span class="notify-name">
          <strong>{c.name}</strong> <span class="muted">{kindLabel(c.kind)}</span>
        </span>
      ),
    },
    { key: "state", label: "State", render: (c) => <StateCell ch={c} /> },
    { key: "queued", label: "Queued", num: true, title: "Notices waiting to be sent", render: (c) => <span class={c.queued > 0 ? "warn" : ""}>{int(c.queued)}</span> },
    { key: "sent", label: "Sent", num: true, render: (c) => int(c.sent) },
    { key: "failed", label: "Failed", num: true, title: "Deliveries that failed for good", render: (c) => <span class={c.failed > 0 ? "down" : ""}>{int(c.failed)}</span> },
    {
      key: "dropped",
      label: "Folded",
      num: true,
      title: "Routine notices folded into a digest when the queue was full (risk, stop-outs, halts and health are never folded)",
      render: (c) => <span class={c.dropped > 0 ? "warn" : ""}>{int(c.dropped)}</span>,
    },
    {
      key: "last_sent_at",
      label: "Last sent",
      sortValue: (c) => c.last_sent_at ?? "",
      render: (c) =>
        c.last_sent_at ? (
          <span title={`${dateTime(c.last_sent_at)} NY`}>
            {time(c.last_sent_at)} <span class="muted">{ago(c.last_sent_at, serverNow)}</span>
          </span>
        ) : (
          <span class="muted">never</span>
        ),
    },
    { key: "commands_role", label: "Telegram commands", title: "Commands the channel takes from its chats (Telegram only)", render: (c) => commandsWords(c) },
    { key: "events", label: "Events", sortValue: (c) => c.events.length, render: (c) => <span class="wrap notify-events">{c.events.join(", ") || "—"}</span> },
  ];

  return (
    <Section
      title={
        <>
          Notifications {list.data && <span class="muted">· {summary(rows)}</span>}
        </>
      }
      actions={
        !missing && (
          <button class="btn" onClick={reload} disabled={list.loading}>
            {list.loading ? "Loading…" : "Refresh"}
          </button>
        )
      }
    >
      {missing ? (
        <p class="note" data-testid="notifications-unavailable">
          {NOT_AVAILABLE}
        </p>
      ) : (
        <>
          <ErrorBanner error={list.error} />
          <Table
            testid="notification-channels"
            columns={columns}
            rows={rows}
            rowKey={(c) => c.name}
            rowClass={(c) => `notify-${c.state.toLowerCase()}`}
            empty={list.loading && !list.data ? "Loading…" : list.error ? "The channels could not be read." : NO_CHANNELS}
          />
        </>
      )}
    </Section>
  );
}

// ---------------------------------------------------------------------------------------------
// Settings tab

/** The Settings tab's block: each channel with a test button and its recent deliveries. */
export function NotificationTests() {
  const list = useLoad(() => get<NotificationChannel[]>(CHANNELS));
  const missing = notAvailable(list.error);
  const rows = list.data ?? [];
  return (
    <section class="panel settings-group notify-settings" data-testid="settings-notifications">
      <div class="panel-head">
        <div>
          <h2>Notifications</h2>
          <p class="group-about">
            Where alerts go: phone and team chat. Channels and their secrets are set in the configuration file, not here. A test sends a message to
            one channel now and is recorded in the audit log.
          </p>
        </div>
        <div class="panel-actions">
          {!missing && (
            <button type="button" class="btn" onClick={list.reload} disabled={list.loading}>
              {list.loading ? "Loading…" : "Refresh"}
            </button>
          )}
        </div>
      </div>
      {missing ? (
        <p class="note" data-testid="notifications-unavailable">
          {NOT_AVAILABLE}
        </p>
      ) : (
        <>
          <ErrorBanner error={list.error} />
          {me.value && !canOperate.value && rows.length > 0 && <p class="note">Sending a test needs an operator or admin token.</p>}
          {list.data && rows.length === 0 && <p class="note">{NO_CHANNELS}</p>}
          {!list.data && list.loading && <p class="note">Loading the channels…</p>}
          {rows.length > 0 && (
            <ul class="notify-list">
              {rows.map((c) => (
                <ChannelTest key={c.name} ch={c} onSent={list.reload} />
              ))}
            </ul>
          )}
        </>
      )}
    </section>
  );
}

function ChannelTest({ ch, onSent }: { ch: NotificationChannel; onSent: () => void }) {
  const [busy, setBusy] = useState(false);
  const [result, setResult] = useState<ReturnType<typeof testResult> | null>(null);
  const [refusal, setRefusal] = useState<ApiError | undefined>();
  const [open, setOpen] = useState(false);
  const [sentCount, setSentCount] = useState(0);

  const send = async () => {
    setBusy(true);
    setResult(null);
    setRefusal(undefined);
    try {
      // In LIVE, a refusal for want of X-Confirm-Live asks the operator and sends again (api.ts).
      const d = await post<NotificationDelivery>("/api/notifications/test", { channel: ch.name });
      setResult(testResult(d));
      setSentCount((n) => n + 1);
      onSent();
    } catch (e) {
      setRefusal(e instanceof ApiError ? e : new ApiError(0, "CLIENT", String(e)));
    } finally {
      setBusy(false);
    }
  };

  return (
    <li class="notify-item" data-channel={ch.name}>
      <div class="notify-row">
        <span class="notify-name">
          <strong>{ch.name}</strong> <span class="muted">{kindLabel(ch.kind)}</span>
        </span>
        <StateCell ch={ch} />
        <span class="notify-actions">
          {canOperate.value && (
            <button
              type="button"
              class="btn"
              onClick={send}
              disabled={busy}
              title="Send a test message to this channel now (recorded in the audit log)"
              data-testid={`notify-test-${ch.name}`}
            >
              {busy ? "Sending…" : "Send a test"}
            </button>
          )}
          <button type="button" class="btn ghost" onClick={() => setOpen(!open)} aria-expanded={open} data-testid={`notify-recent-${ch.name}`}>
            {open ? "▾" : "▸"} Recent deliveries
          </button>
        </span>
      </div>
      {(result || refusal) && (
        <p class={`notify-result ${refusal ? "error" : result!.kind}`} role={refusal || result!.kind === "error" ? "alert" : "status"} data-testid={`notify-result-${ch.name}`}>
          {refusal ? (
            notAvailable(refusal) ? (
              NOT_AVAILABLE
            ) : (
              <>
                <strong>{refusal.code}</strong> {refusalText(refusal)}
              </>
            )
          ) : (
            result!.text
          )}
        </p>
      )}
      {open && <Deliveries channel={ch.name} reloadKey={sentCount} />}
    </li>
  );
}

const RECENT = 10;

/** The channel's last deliveries, newest first. */
function Deliveries({ channel, reloadKey }: { channel: string; reloadKey: number }) {
  const list = useLoad(() => get<NotificationDelivery[]>(withQuery("/api/notifications/deliveries", { channel, limit: RECENT })), [channel, reloadKey]);
  const columns: Column<NotificationDelivery>[] = [
    { key: "created_at", label: "Created (NY)", render: (d) => dateTime(d.created_at) },
    { key: "kind", label: "Event", render: (d) => <span class="mono">{d.kind}</span> },
    { key: "status", label: "Status", render: (d) => <Badge text={d.status} kind={deliveryBadge(d.status)} /> },
    { key: "attempts", label: "Attempts", num: true, render: (d) => int(d.attempts) },
    { key: "sent_at", label: "Sent", render: (d) => (d.sent_at ? <span title={`${dateTime(d.sent_at)} NY`}>{time(d.sent_at)}</span> : <span class="muted">—</span>) },
    { key: "error", label: "Error", render: (d) => (d.error ? <span class="wrap down">{d.error}</span> : <span class="muted">—</span>) },
  ];
  if (notAvailable(list.error)) return <p class="note">{NOT_AVAILABLE}</p>;
  return (
    <div class="notify-deliveries">
      <ErrorBanner error={list.error} />
      <Table
        testid={`notify-deliveries-${channel}`}
        columns={columns}
        rows={list.data ?? []}
        rowKey={(d) => (d.delivery_id != null ? String(d.delivery_id) : `${d.event_id}-${d.created_at ?? ""}`)}
        empty={list.loading ? "Loading…" : list.error ? "The deliveries could not be read." : `Nothing has been sent to ${channel} yet.`}
      />
      {(list.data?.length ?? 0) >= RECENT && <p class="note">The last {RECENT} deliveries.</p>}
    </div>
  );
}
