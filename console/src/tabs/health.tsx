// Health: every component of the service with its status, probe latency (or why it has none),
// last healthy time and what its probe reported; the risk manager's state (trading state, limits
// and how much of each is used, reconciliation, blocks); and the risk refusals with rule, limit
// and current value. The trading state shown anywhere here is the service's one source (the
// engine, read when asked): components reload on `health.changed` and `risk.state_changed`, the
// risk state on risk and fill events, violations on `risk.violation`; component details also
// refresh every 15 s so ages and latencies stay current. The execution broker's count of
// positions only the engine protects (CONTRACT §12) stands beside its latency when reported.
// Last, the notification channels (CONTRACT §13; tabs/notifications.tsx), read with the components.
import "./health.css";
import { Fragment, type ComponentChildren } from "preact";
import { useEffect, useMemo, useState } from "preact/hooks";
import { call, get, withQuery } from "../api";
import { useEvents, type StreamEvent } from "../events";
import { ago, anyValue, dateTime, duration, int, money, plain, round, time } from "../format";
import { href } from "../route";
import type { Block, RiskState } from "../types";
import { Badge, ErrorBanner, Section, Table, useLoad, useThrottled, type Column } from "../ui";
import { NotificationChannels } from "./notifications";

// ---------------------------------------------------------------------------------------------
// Types (the shapes of /api/health, /api/health/components, /api/risk/state, /api/risk/violations)

type HealthStatus = "HEALTHY" | "DEGRADED" | "DOWN" | "DISABLED" | string;

interface Overall {
  status: HealthStatus;
  mode: string;
  trading_state: string | null;
  components: Record<string, HealthStatus>;
}

interface ComponentRow {
  name: string;
  status: HealthStatus;
  latency_ms: number | null;
  unprobed_reason: string | null;
  last_ok_at: string | null;
  detail: Record<string, unknown>;
}

type BlockRow = Block;

type RiskStateRow = RiskState;

/** An order the risk gate refused (GET /api/risk/violations; a desk replay's `violations`). */
export interface Violation {
  rule: string;
  symbol: string | null;
  client_order_id: string | null;
  detail: { message?: string; limit?: unknown; current?: unknown; [k: string]: unknown } | null;
  timestamp: string;
}

interface HealthChange {
  at: string;
  component: string;
  from: string;
  to: string;
}

// ---------------------------------------------------------------------------------------------
// Wording

const COMPONENT_LABELS: Record<string, { label: string; about: string }> = {
  api: { label: "API server", about: "Serves the console and the REST API." },
  data_broker: { label: "Market data", about: "Feeds prices to the radar and the strategies." },
  execution_broker: { label: "Execution broker", about: "Receives orders; its book is reconciled with ours." },
  risk_manager: { label: "Risk manager", about: "Checks every order against the limits before it leaves." },
  cache: { label: "Cache", about: "Holds quotes and recent state in memory." },
  database: { label: "Database", about: "Stores orders, fills, settings and the audit log." },
};

const STATUS_WORDS: Record<string, string> = {
  HEALTHY: "Everything is working.",
  DEGRADED: "Working, but slow or partly impaired.",
  DOWN: "Not working.",
  DISABLED: "Switched off in this configuration.",
};

export const TRADING_STATE_WORDS: Record<string, string> = {
  ACTIVE: "Strategies and operators may open new positions within the limits below.",
  REDUCING: "The daily loss limit was reached: only orders that reduce a position are allowed until the next trading day.",
  HALTED: "Emergency halt: no new orders until someone resumes trading. Closing positions is still allowed.",
};

export const RULE_WORDS: Record<string, string> = {
  MAX_DAILY_LOSS: "Daily loss limit",
  MAX_POSITION_SIZE: "Position size",
  MAX_TRADES_PER_DAY: "Trades per day",
  ACTIVE_WATCHLIST_LIMIT: "Watchlist size",
  OPEN_POSITION_LIMIT: "Open positions",
  SYMBOL_BLOCKED: "Symbol blocked",
  BUYING_POWER: "Buying power",
  PRICE_COLLAR: "Price collar",
  MAX_ORDER_VALUE: "Order value",
};

const statusKind = (s: string) => (s === "HEALTHY" ? "healthy" : s === "DEGRADED" ? "degraded" : s === "DISABLED" ? "" : "down");

// ---------------------------------------------------------------------------------------------
// Formatting a probe's detail: keys in words, values with their units.

const ISO_RE = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}/;
const MONEY_KEYS = /(^|_)(loss|value|pnl|equity|cash|buying_power|threshold)$/;

function humanize(key: string): string {
  const k = key.replace(/_(ms|micros|seconds|pct)$/, "");
  const words = k.replace(/_/g, " ");
  return words.charAt(0).toUpperCase() + words.slice(1);
}

const plainNumber = (v: number) => plain(round(v, 3));

function formatValue(key: string, v: unknown): ComponentChildren {
  if (v === null || v === undefined) return <span class="muted">—</span>;
  if (typeof v === "boolean") return v ? "yes" : "no";
  if (typeof v === "number") {
    if (key.endsWith("_ms")) return `${plainNumber(v)} ms`;
    if (key.endsWith("_micros")) return `${plainNumber(v)} µs`;
    if (key.endsWith("_seconds")) return duration(v);
    if (key.endsWith("_pct")) return `${plainNumber(v)}%`;
    if (key === "speed") return `${plainNumber(v)}×`;
    if (MONEY_KEYS.test(key)) return money(v);
    return plainNumber(v);
  }
  if (typeof v === "string") {
    if (ISO_RE.test(v)) return dateTime(v);
    if (key.endsWith("_status") || key === "trading_state") return <Badge text={v} kind={v === "OK" || v === "ACTIVE" ? "ok" : v === "HALTED" ? "halted" : "warning"} />;
    return v;
  }
  if (Array.isArray(v)) return v.length === 0 ? <span class="muted">none</span> : anyValue(v);
  if (typeof v === "object") return <DetailList detail={v as Record<string, unknown>} nested />;
  return String(v);
}

function DetailList({ detail, nested }: { detail: Record<string, unknown>; nested?: boolean }) {
  const entries = Object.entries(detail ?? {});
  if (entries.length === 0) return <p class="note">The probe reported no detail.</p>;
  return (
    <dl class={`kv health-kv ${nested ? "nested" : ""}`}>
      {entries.map(([k, v]) => (
        <Fragment key={k}>
          {v !== null && typeof v === "object" && !Array.isArray(v) ? (
            <>
              <dt class="full" title={k}>
                {humanize(k)}
              </dt>
              <dd class="full">{formatValue(k, v)}</dd>
            </>
          ) : (
            <>
              <dt title={k}>{humanize(k)}</dt>
              <dd>{formatValue(k, v)}</dd>
            </>
          )}
        </Fragment>
      ))}
    </dl>
  );
}

/** Positions whose stop only the engine holds (`detail.engine_protected` of the execution broker). */
function EngineProtected({ count }: { count: number }) {
  return (
    <span title="Open positions whose stop only the engine holds: the venue triggers no stops outside 09:30–16:00, so the engine fires them as extended-hours limits when crossed. They are protected only while tradeops runs.">
      <span class="stat-label">Engine-protected</span>
      <span class={`stat-value ${count > 0 ? "warn" : ""}`} data-testid="engine-protected" data-count={count}>
        {count === 0 ? "none" : `${int(count)} position${count === 1 ? "" : "s"}`}
      </span>
    </span>
  );
}

// ---------------------------------------------------------------------------------------------
// Gauges

/** How full a limit is: green, amber from `warnAt`, red from `dangerAt` (fractions of the limit). */
function Gauge({
  label,
  used,
  limit,
  show,
  warnAt,
  dangerAt,
  hint,
  testid,
}: {
  label: string;
  used: number;
  limit: number;
  show: (v: number) => string;
  warnAt: number;
  dangerAt: number;
  hint: string;
  testid?: string;
}) {
  const ratio = limit > 0 ? used / limit : used > 0 ? 1 : 0;
  const level = ratio >= dangerAt ? "danger" : ratio >= warnAt ? "warn" : "ok";
  const pctText = limit > 0 ? `${Math.round(ratio * 100)}%` : "no limit";
  return (
    <div class={`gauge ${level}`} data-testid={testid} title={hint}>
      <div class="gauge-head">
        <span class="gauge-label">{label}</span>
        <span class="gauge-figure">
          <strong>{show(used)}</strong> <span class="muted">of {show(limit)}</span> <span class={`gauge-pct ${level}`}>{pctText}</span>
        </span>
      </div>
      <div class="progress gauge-bar" role="progressbar" aria-valuemin={0} aria-valuemax={limit} aria-valuenow={used} aria-label={label}>
        <div style={{ width: `${Math.min(100, Math.max(0, ratio * 100))}%` }} />
      </div>
      <span class="gauge-hint">{hint}</span>
    </div>
  );
}

// ---------------------------------------------------------------------------------------------
// Sections

function Components() {
  const overall = useLoad(() => get<Overall>("/api/health"));
  const components = useLoad(() => call<ComponentRow[]>("GET", "/api/health/components"));
  const [changes, setChanges] = useState<HealthChange[]>([]);
  const reload = useThrottled(() => {
    overall.reload();
    components.reload();
  }, 1000);
  useEvents(
    ["health.changed", "risk.state_changed"],
    useMemo(
      () => (e: StreamEvent) => {
        const d = e.data ?? {};
        if (typeof d.component === "string") {
          setChanges((list) => [{ at: e.timestamp, component: d.component, from: String(d.from ?? "?"), to: String(d.to ?? "?") }, ...list].slice(0, 20));
        }
        reload();
      },
      [reload],
    ),
  );
  // Ages, latencies and counters move continuously; the probes themselves run in the background.
  useEffect(() => {
    const timer = setInterval(reload, 15_000);
    return () => clearInterval(timer);
  }, [reload]);

  const rows = components.data?.data ?? [];
  const serverNow = components.data?.meta.timestamp;
  const status = overall.data?.status;
  const unhealthy = rows.filter((c) => c.status !== "HEALTHY" && c.status !== "DISABLED");
  return (
    <Section
      title={
        <span class="health-title">
          Components
          {status && (
            <span class={`overall ${statusKind(status)}`} data-testid="overall-status">
              <span class={`dot ${status}`} /> {status}
            </span>
          )}
          {overall.data?.trading_state && (
            <span class="health-trading" data-testid="health-trading-state" data-state={overall.data.trading_state}>
              trading <Badge text={overall.data.trading_state} kind={overall.data.trading_state === "ACTIVE" ? "ok" : overall.data.trading_state === "HALTED" ? "halted" : "warning"} />
            </span>
          )}
          <span class="muted health-sub">
            {status ? (unhealthy.length ? `${unhealthy.length} of ${rows.length} need attention` : `all ${rows.length} healthy`) : ""}
            {serverNow ? ` · checked ${time(serverNow)} NY` : ""}
          </span>
        </span>
      }
      actions={
        <button class="btn" onClick={reload} disabled={components.loading} title="Read the latest probe results">
          {components.loading ? "Loading…" : "Refresh"}
        </button>
      }
    >
      <ErrorBanner error={components.error ?? overall.error} />
      {status && status !== "HEALTHY" && (
        <div class={`banner ${status === "DEGRADED" ? "health-warn" : "error"}`} role="alert">
          <strong>Service {status.toLowerCase()}.</strong>{" "}
          {unhealthy.map((c) => `${COMPONENT_LABELS[c.name]?.label ?? c.name}: ${c.status.toLowerCase()}`).join(" · ")}
        </div>
      )}
      <div class="components" data-testid="components">
        {components.loading && !components.data ? (
          <p class="note">Loading the probe results…</p>
        ) : rows.length === 0 && !components.error ? (
          <p class="note">No component has been probed yet. Probes run a few seconds after the service starts; press Refresh.</p>
        ) : (
          rows.map((c) => {
            const about = COMPONENT_LABELS[c.name];
            const { engine_protected: engineProtected, ...detail } = c.detail ?? {};
            return (
              <article key={c.name} class={`component-card ${statusKind(c.status)}`} data-component={c.name} data-status={c.status}>
                <header>
                  <span class={`dot ${c.status}`} />
                  <div class="component-name">
                    <strong>{about?.label ?? humanize(c.name)}</strong>
                    <span class="muted mono">{c.name}</span>
                  </div>
                  <Badge text={c.status} kind={statusKind(c.status)} />
                </header>
                <div class="component-stats">
                  <span title="Latency of the last probe">
                    <span class="stat-label">Latency</span>
                    <span class="stat-value" data-testid={`latency-${c.name}`}>
                      {c.latency_ms === null ? (
                        <span class="muted" title={c.unprobed_reason ?? "Not measured"}>
                          not measured: {c.unprobed_reason ?? "no reason given"}
                        </span>
                      ) : (
                        `${plainNumber(c.latency_ms)} ms`
                      )}
                    </span>
                  </span>
                  <span title={c.last_ok_at ? dateTime(c.last_ok_at) + " NY" : "Never seen healthy"}>
                    <span class="stat-label">Last OK</span>
                    <span class={`stat-value ${c.status !== "HEALTHY" ? "down" : ""}`}>
                      {c.last_ok_at ? time(c.last_ok_at) : "never"} <span class="muted ago">{ago(c.last_ok_at, serverNow)}</span>
                    </span>
                  </span>
                  {typeof engineProtected === "number" && <EngineProtected count={engineProtected} />}
                </div>
                <p class="component-about">{c.status === "HEALTHY" ? about?.about ?? STATUS_WORDS.HEALTHY : STATUS_WORDS[c.status] ?? c.status}</p>
                <DetailList detail={typeof engineProtected === "number" ? detail : c.detail} />
              </article>
            );
          })
        )}
      </div>
      {changes.length > 0 && (
        <div class="health-changes">
          <h3>Status changes seen since this page opened</h3>
          <ul class="timeline">
            {changes.map((ch, i) => (
              <li key={i}>
                <span class="mono">{time(ch.at)}</span>
                <span>
                  {COMPONENT_LABELS[ch.component]?.label ?? ch.component}: <Badge text={ch.from} kind={statusKind(ch.from)} /> → <Badge text={ch.to} kind={statusKind(ch.to)} />
                </span>
              </li>
            ))}
          </ul>
        </div>
      )}
    </Section>
  );
}

function RiskState() {
  const state = useLoad(() => get<RiskStateRow>("/api/risk/state"));
  const reload = useThrottled(state.reload, 1000);
  useEvents(["risk.state_changed", "execution.created", "position.updated"], reload);
  const r = state.data;

  const blockColumns: Column<BlockRow>[] = [
    { key: "symbol", label: "Symbol", render: (b) => <a href={href("orders", { symbol: b.symbol })}>{b.symbol}</a> },
    { key: "block_scope", label: "Scope", render: (b) => <Badge text={b.block_scope} kind="" /> },
    { key: "reason", label: "Reason", render: (b) => <span class="wrap">{b.reason}</span> },
    { key: "blocked_by", label: "By" },
    { key: "effective_from", label: "From", render: (b) => dateTime(b.effective_from) },
    { key: "expires_at", label: "Expires", render: (b) => (b.expires_at ? dateTime(b.expires_at) : "never") },
  ];

  const tradingKind = r?.trading_state === "ACTIVE" ? "ok" : r?.trading_state === "HALTED" ? "danger" : "warn";
  return (
    <Section
      title="Risk state"
      actions={
        <button class="btn" onClick={state.reload} disabled={state.loading}>
          {state.loading ? "Loading…" : "Refresh"}
        </button>
      }
    >
      <ErrorBanner error={state.error} />
      <div data-testid="risk-state">
        {!r ? (
          state.loading ? <p class="note">Loading the risk state…</p> : <p class="note">The risk state could not be read.</p>
        ) : (
          <>
            <div class={`trading-state ${tradingKind}`} data-testid="trading-state" data-state={r.trading_state}>
              <div class="trading-state-main">
                <span class="stat-label">Trading state</span>
                <span class="trading-state-value">{r.trading_state}</span>
              </div>
              <div class="trading-state-text">
                <p>{TRADING_STATE_WORDS[r.trading_state] ?? ""}</p>
                {r.trading_state === "HALTED" && (
                  <p data-testid="halt-detail">
                    Halted {r.halted_at ? `${dateTime(r.halted_at)} NY` : "(time not recorded)"} by <strong>{r.halted_by ?? "the risk manager"}</strong>:{" "}
                    <em>{r.halt_reason || "no reason given"}</em>. Resume from the banner at the top of the page.
                  </p>
                )}
              </div>
            </div>
            <div class="gauges">
              <Gauge
                label="Daily loss"
                used={r.current_daily_loss}
                limit={r.max_daily_loss}
                show={money}
                warnAt={0.5}
                dangerAt={0.8}
                hint="Realized plus unrealized loss today. At the limit, trading turns REDUCING: no new buys."
                testid="gauge-daily-loss"
              />
              <Gauge
                label="Trades today"
                used={r.trades_today}
                limit={r.max_trades_per_day}
                show={int}
                warnAt={0.75}
                dangerAt={0.95}
                hint="Orders that opened or added to a position today. At the limit, new buys are refused."
                testid="gauge-trades"
              />
              <Gauge
                label="Open positions"
                used={r.open_positions}
                limit={r.open_position_limit}
                show={int}
                warnAt={0.67}
                dangerAt={1}
                hint="Symbols held now. At the limit, no new symbol may be bought."
                testid="gauge-positions"
              />
            </div>
            <dl class="kv risk-kv">
              <dt>Max position size</dt>
              <dd>{int(r.max_position_size)} shares</dd>
              <dt>Watchlist limit</dt>
              <dd>{int(r.active_watchlist_limit)} symbols</dd>
              <dt>Drawdown today</dt>
              <dd class={r.drawdown > 0 ? "down" : ""} title="Peak-to-current equity today">
                {money(r.drawdown)}
              </dd>
              <dt>Reconciliation</dt>
              <dd data-testid="reconciliation">
                <Badge text={r.reconciliation_status} kind={r.reconciliation_status === "OK" ? "ok" : "error"} />{" "}
                <span class={r.reconciliation_status === "OK" ? "muted" : "down"}>{r.reconciliation_detail}</span>
              </dd>
            </dl>
            <h3 class="sub-head">Blocked symbols · {r.blocked_symbols.length}</h3>
            <Table
              testid="risk-blocks"
              columns={blockColumns}
              rows={r.blocked_symbols}
              rowKey={(b) => `${b.symbol}-${b.effective_from}`}
              empty="No symbol is blocked. Block one from the Radar tab to keep strategies and operators off it."
            />
          </>
        )}
      </div>
    </Section>
  );
}

/**
 * A violation's limit or current value in the rule's unit. `SYMBOL_BLOCKED` has no number: its
 * limit is that a blocked symbol may not be traded, its current value the block (scope, reason).
 */
export function ruleValue(rule: string, v: unknown, which: "limit" | "current"): string {
  if (rule === "SYMBOL_BLOCKED") {
    if (which === "limit") return "no trading";
    if (v !== null && typeof v === "object" && !Array.isArray(v)) {
      const b = v as { block_scope?: unknown; reason?: unknown };
      return `blocked${b.block_scope ? ` ${String(b.block_scope)}` : ""}${b.reason ? `: ${String(b.reason)}` : ""}`;
    }
    return typeof v === "string" ? `${v} blocked` : anyValue(v);
  }
  if (v === null || v === undefined) return "—";
  if (typeof v !== "number") return anyValue(v);
  switch (rule) {
    case "MAX_DAILY_LOSS":
    case "BUYING_POWER":
    case "MAX_ORDER_VALUE":
      return money(v);
    case "PRICE_COLLAR":
      return `${plainNumber(v)}%`;
    case "MAX_POSITION_SIZE":
      return `${int(v)} sh`;
    default:
      return plainNumber(v);
  }
}

const detailNumber = (v: unknown) => (typeof v === "number" ? v : null);

/** A violation's rule and what it says: the columns every table of refusals shows. */
export const VIOLATION_RULE_COLUMN: Column<Violation> = {
  key: "rule",
  label: "Rule",
  render: (v) => (
    <span title={RULE_WORDS[v.rule] ?? ""}>
      <Badge text={v.rule} kind="error" />
    </span>
  ),
};
export const VIOLATION_DETAIL_COLUMNS: Column<Violation>[] = [
  { key: "message", label: "What happened", sortValue: (v) => v.detail?.message ?? "", render: (v) => <span class="wrap">{v.detail?.message ?? "—"}</span> },
  { key: "limit", label: "Limit", num: true, sortValue: (v) => detailNumber(v.detail?.limit), render: (v) => <span data-col="limit">{ruleValue(v.rule, v.detail?.limit, "limit")}</span> },
  { key: "current", label: "Current", num: true, sortValue: (v) => detailNumber(v.detail?.current), render: (v) => <span class="down" data-col="current">{ruleValue(v.rule, v.detail?.current, "current")}</span> },
];

function Violations() {
  const [rule, setRule] = useState("");
  const list = useLoad(() => get<Violation[]>(withQuery("/api/risk/violations", { limit: 100 })));
  const reload = useThrottled(list.reload, 1000);
  useEvents(["risk.violation"], reload);
  const all = list.data ?? [];
  const rules = useMemo(() => [...new Set(all.map((v) => v.rule))].sort(), [all]);
  const rows = rule ? all.filter((v) => v.rule === rule) : all;

  const columns: Column<Violation>[] = [
    { key: "timestamp", label: "Time", render: (v) => <span title={`${dateTime(v.timestamp)} NY`}>{dateTime(v.timestamp)}</span> },
    VIOLATION_RULE_COLUMN,
    { key: "symbol", label: "Symbol", render: (v) => (v.symbol ? <a href={href("orders", { symbol: v.symbol })}>{v.symbol}</a> : <span class="muted">—</span>) },
    { key: "client_order_id", label: "Client order id", render: (v) => <span class="mono">{v.client_order_id ?? "—"}</span> },
    ...VIOLATION_DETAIL_COLUMNS,
  ];

  return (
    <Section
      title={
        <>
          Risk violations <span class="muted">· {rows.length === all.length ? `${all.length} latest` : `${rows.length} of ${all.length}`}</span>
        </>
      }
      actions={
        <>
          <select value={rule} onChange={(e) => setRule(e.currentTarget.value)} aria-label="Rule">
            <option value="">All rules</option>
            {rules.map((r) => (
              <option value={r}>{RULE_WORDS[r] ? `${RULE_WORDS[r]} (${r})` : r}</option>
            ))}
          </select>
          <button class="btn" onClick={list.reload} disabled={list.loading}>
            {list.loading ? "Loading…" : "Refresh"}
          </button>
        </>
      }
    >
      <ErrorBanner error={list.error} />
      <Table
        testid="violations-table"
        columns={columns}
        rows={rows}
        rowKey={(v) => `${v.timestamp}-${v.rule}-${v.client_order_id ?? v.symbol ?? ""}`}
        sort={{ key: "timestamp", desc: true }}
        empty={list.loading ? "Loading…" : "No order has been refused by a risk rule. Refusals appear here as they happen, with the limit and the value that broke it."}
      />
    </Section>
  );
}

export function HealthTab() {
  return (
    <div data-testid="tab-health" class="health-tab">
      <Components />
      <RiskState />
      <Violations />
      <NotificationChannels />
    </div>
  );
}
