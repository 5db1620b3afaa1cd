// Audit: every write anyone made through the API, refusals included, newest first; filtered by
// actor, action and outcome, paged with the service's cursor. A row opens the request as it was
// sent. Reloads when the tab opens, on Refresh, and (at most every 2 s) after the events that
// follow actions: orders, watchlist, risk state and settings changes.
import "./audit.css";
import { useEffect, useMemo, useRef, useState } from "preact/hooks";
import { ApiError, call, withQuery } from "../api";
import { useEvents } from "../events";
import { dateTime } from "../format";
import { Badge, ErrorBanner, Modal, Section, Table, notify, onInput, useThrottled, type Column } from "../ui";

interface AuditRow {
  audit_id: number;
  timestamp: string;
  actor: string;
  role: string | null;
  action: string;
  target: string;
  request: unknown;
  outcome: string;
  mode: string;
  request_id: string;
}

interface Filters {
  actor: string;
  action: string;
  outcome: string;
}

const PAGE = 100;

/** The audited actions of the service (the list grows with what the log shows). */
const KNOWN_ACTIONS = [
  "backtest.run",
  "data.download",
  "data.import",
  "order.cancel",
  "order.create",
  "position.close",
  "position.halt",
  "radar.block",
  "radar.unblock",
  "radar.watch",
  "risk.emergency_halt",
  "risk.resume",
  "settings.update",
  "token.create",
  "token.revoke",
  "watchlist.restart",
  "watchlist.stop",
];

/** Outcomes a write can have: OK or the contract's error codes. */
const KNOWN_OUTCOMES = [
  "VALIDATION_ERROR",
  "FORBIDDEN",
  "NOT_FOUND",
  "POSITION_NOT_FOUND",
  "ORDER_NOT_CANCELLABLE",
  "DUPLICATE_ORDER_BLOCKED",
  "MARKET_CLOSED",
  "EMERGENCY_HALT_ACTIVE",
  "SETTINGS_UPDATE_BLOCKED",
  "RISK_BLOCKED",
  "CONFIRMATION_REQUIRED",
  "RATE_LIMITED",
  "PAYLOAD_TOO_LARGE",
  "BROKER_UNAVAILABLE",
  "INTERNAL_ERROR",
];

function copy(text: string, what: string) {
  navigator.clipboard?.writeText(text).then(
    () => notify("ok", `${what} copied`),
    () => notify("error", `${what} could not be copied; select it instead`),
  );
}

function pretty(v: unknown): string {
  if (typeof v === "string") {
    try {
      return JSON.stringify(JSON.parse(v), null, 2);
    } catch {
      return v;
    }
  }
  return JSON.stringify(v, null, 2) ?? "null";
}

function Detail({ row, onClose, onFilter }: { row: AuditRow; onClose: () => void; onFilter: (f: Partial<Filters>) => void }) {
  const ok = row.outcome === "OK";
  const body = pretty(row.request);
  const empty = row.request === null || (typeof row.request === "object" && Object.keys(row.request as object).length === 0);
  return (
    <Modal title={<>Audit #{row.audit_id} · {row.action}</>} onClose={onClose} wide testid="audit-detail">
      <div class={`audit-outcome ${ok ? "ok" : "refused"}`}>
        <Badge text={row.outcome} kind={ok ? "ok" : "error"} />
        <span>{ok ? "The action was carried out." : "The service refused the action with this code; nothing changed."}</span>
      </div>
      <dl class="kv audit-kv">
        <dt>Time (NY)</dt>
        <dd>{dateTime(row.timestamp)}</dd>
        <dt>Actor</dt>
        <dd>
          {row.actor} <span class="muted">· {row.role ?? "no role"}</span>{" "}
          <button class="btn ghost small" onClick={() => onFilter({ actor: row.actor })}>
            Only this actor
          </button>
        </dd>
        <dt>Action</dt>
        <dd>
          <span class="mono">{row.action}</span>{" "}
          <button class="btn ghost small" onClick={() => onFilter({ action: row.action })}>
            Only this action
          </button>
        </dd>
        <dt>Target</dt>
        <dd>{row.target || <span class="muted">—</span>}</dd>
        <dt>Mode</dt>
        <dd>
          <span class={`mode-pill ${row.mode}`}>{row.mode}</span>
        </dd>
        <dt>Request id</dt>
        <dd>
          <span class="mono">{row.request_id}</span>{" "}
          <button class="btn ghost small" onClick={() => copy(row.request_id, "Request id")}>
            Copy
          </button>
        </dd>
      </dl>
      <div class="audit-body-head">
        <h3>Request body</h3>
        {!empty && (
          <button class="btn ghost small" onClick={() => copy(body, "Request body")}>
            Copy JSON
          </button>
        )}
      </div>
      {empty ? <p class="note">The request had no body.</p> : <pre class="json" data-testid="audit-request">{body}</pre>}
      <div class="modal-actions">
        <button class="btn" onClick={onClose}>
          Close
        </button>
      </div>
    </Modal>
  );
}

export function AuditTab() {
  // What the toolbar shows, and what the list was loaded with (text filters apply after a pause).
  const [form, setForm] = useState<Filters>({ actor: "", action: "", outcome: "" });
  const [filters, setFilters] = useState<Filters>(form);
  const [rows, setRows] = useState<AuditRow[]>([]);
  const [next, setNext] = useState<string | null>(null);
  const [loading, setLoading] = useState(true);
  const [more, setMore] = useState(false);
  const [error, setError] = useState<ApiError | undefined>();
  const [open, setOpen] = useState<AuditRow | null>(null);
  const [fresh, setFresh] = useState<Set<number>>(new Set());
  const rowsRef = useRef(rows);
  rowsRef.current = rows;
  const seq = useRef(0);
  const freshTimer = useRef<number | undefined>(undefined);
  useEffect(() => () => clearTimeout(freshTimer.current), []);

  const query = (f: Filters, cursor?: string | null) =>
    withQuery("/api/audit", { actor: f.actor.trim(), action: f.action.trim(), outcome: f.outcome, limit: PAGE, cursor });

  /** Loads the newest page; `keep` keeps older pages already loaded (a refresh, not a new filter). */
  const load = async (f: Filters, keep: boolean) => {
    const n = ++seq.current;
    setLoading(true);
    try {
      const env = await call<AuditRow[]>("GET", query(f));
      if (n !== seq.current) return;
      const old = rowsRef.current;
      const known = old.length ? Math.max(...old.map((r) => r.audit_id)) : null;
      if (keep && old.length > env.data.length) {
        const oldest = env.data.length ? env.data[env.data.length - 1].audit_id : Infinity;
        setRows([...env.data, ...old.filter((r) => r.audit_id < oldest)]);
      } else {
        setRows(env.data);
        setNext(env.meta.next_cursor ?? null);
      }
      if (keep && known !== null) {
        const added = new Set(env.data.filter((r) => r.audit_id > known).map((r) => r.audit_id));
        if (added.size) {
          setFresh(added);
          clearTimeout(freshTimer.current);
          freshTimer.current = window.setTimeout(() => setFresh(new Set()), 4000);
        }
      }
      setError(undefined);
    } catch (e) {
      if (n !== seq.current) return;
      setError(e instanceof ApiError ? e : new ApiError(0, "CLIENT", String(e)));
    } finally {
      if (n === seq.current) setLoading(false);
    }
  };

  // A new filter starts from the newest page.
  useEffect(() => {
    rowsRef.current = [];
    load(filters, false);
  }, [filters.actor, filters.action, filters.outcome]);

  // Typing in the text filters applies after a short pause; the outcome applies at once.
  useEffect(() => {
    if (form.actor === filters.actor && form.action === filters.action && form.outcome === filters.outcome) return;
    const t = setTimeout(() => setFilters(form), form.outcome !== filters.outcome ? 0 : 400);
    return () => clearTimeout(t);
  }, [form.actor, form.action, form.outcome]);

  // The service publishes an action's event before it writes the action's audit row, so the
  // reload waits a moment after the event; bursts reload at most every 2 s.
  const refresh = useThrottled(() => load(filters, true), 2000);
  const pending = useRef<number | undefined>(undefined);
  useEffect(() => () => clearTimeout(pending.current), []);
  const afterAction = useMemo(
    () => () => {
      if (pending.current !== undefined) return;
      pending.current = window.setTimeout(() => {
        pending.current = undefined;
        refresh();
      }, 750);
    },
    [refresh],
  );
  useEvents(["order.updated", "watchlist.updated", "risk.state_changed", "settings.updated"], afterAction);

  const loadMore = async () => {
    if (!next) return;
    setMore(true);
    try {
      const env = await call<AuditRow[]>("GET", query(filters, next));
      setRows((old) => [...old, ...env.data.filter((r) => !old.some((o) => o.audit_id === r.audit_id))]);
      setNext(env.meta.next_cursor ?? null);
    } catch (e) {
      setError(e instanceof ApiError ? e : new ApiError(0, "CLIENT", String(e)));
    } finally {
      setMore(false);
    }
  };

  const applyFilter = (f: Partial<Filters>) => {
    const nextForm = { ...form, ...f };
    setForm(nextForm);
    setFilters(nextForm);
    setOpen(null);
  };
  const clear = () => applyFilter({ actor: "", action: "", outcome: "" });
  const filtered = Boolean(filters.actor || filters.action || filters.outcome);

  const actions = useMemo(() => [...new Set([...KNOWN_ACTIONS, ...rows.map((r) => r.action)])].sort(), [rows]);
  const actors = useMemo(() => [...new Set(rows.map((r) => r.actor))].sort(), [rows]);
  const outcomes = useMemo(() => [...new Set([...KNOWN_OUTCOMES, ...rows.map((r) => r.outcome)])].filter((o) => o !== "OK").sort(), [rows]);
  const refused = rows.filter((r) => r.outcome !== "OK").length;

  const columns: Column<AuditRow>[] = [
    { key: "timestamp", label: "Time (NY)", sortValue: (r) => r.audit_id, render: (r) => dateTime(r.timestamp) },
    { key: "actor", label: "Actor", render: (r) => <strong>{r.actor}</strong> },
    { key: "role", label: "Role", render: (r) => <span class="muted">{r.role ?? "—"}</span> },
    { key: "action", label: "Action", render: (r) => <span class="mono">{r.action}</span> },
    { key: "target", label: "Target", render: (r) => r.target || <span class="muted">—</span> },
    { key: "outcome", label: "Outcome", render: (r) => <Badge text={r.outcome} kind={r.outcome === "OK" ? "ok" : "error"} /> },
    { key: "mode", label: "Mode", render: (r) => <span class={`mode-pill ${r.mode}`}>{r.mode}</span> },
    { key: "request_id", label: "Request id", render: (r) => <span class="mono muted">{r.request_id}</span> },
  ];

  return (
    <div data-testid="tab-audit" class="audit-tab">
      <Section
        title={
          <>
            Audit log{" "}
            <span class="muted">
              · {rows.length} row{rows.length === 1 ? "" : "s"} loaded{refused ? ` · ${refused} refused` : ""}
              {next ? " · more available" : ""}
            </span>
          </>
        }
        actions={
          <button class="btn" onClick={() => load(filters, true)} disabled={loading} data-testid="audit-refresh">
            {loading ? "Loading…" : "Refresh"}
          </button>
        }
      >
        <form class="toolbar audit-toolbar" onSubmit={(e) => (e.preventDefault(), setFilters(form))}>
          <label class="field">
            <span class="label">Actor</span>
            <input name="actor" list="audit-actors" value={form.actor} onInput={onInput((v) => setForm({ ...form, actor: v }))} placeholder="token name" autoComplete="off" />
            <datalist id="audit-actors">
              {actors.map((a) => (
                <option key={a} value={a} />
              ))}
            </datalist>
          </label>
          <label class="field">
            <span class="label">Action</span>
            <input name="action" list="audit-actions" value={form.action} onInput={onInput((v) => setForm({ ...form, action: v }))} placeholder="e.g. order.create" autoComplete="off" />
            <datalist id="audit-actions">
              {actions.map((a) => (
                <option key={a} value={a} />
              ))}
            </datalist>
          </label>
          <label class="field">
            <span class="label">Outcome</span>
            <select name="outcome" value={form.outcome} onChange={onInput((v) => setForm({ ...form, outcome: v }))}>
              <option value="">All outcomes</option>
              <option value="OK">OK (carried out)</option>
              <optgroup label="Refused">
                {outcomes.map((o) => (
                  <option key={o} value={o}>
                    {o}
                  </option>
                ))}
              </optgroup>
            </select>
          </label>
          {filtered && (
            <button type="button" class="btn ghost" onClick={clear}>
              Clear filters
            </button>
          )}
          <span class="note audit-hint">Filters match exactly. Click a row to see the request as it was sent.</span>
        </form>
        <ErrorBanner error={error} />
        <Table
          testid="audit-table"
          columns={columns}
          rows={rows}
          rowKey={(r) => String(r.audit_id)}
          onRowClick={setOpen}
          selected={open ? String(open.audit_id) : null}
          rowClass={(r) => `${r.outcome === "OK" ? "" : "refused"} ${fresh.has(r.audit_id) ? "fresh" : ""}`}
          empty={
            loading
              ? "Loading…"
              : filtered
                ? "No audit row matches these filters. Filters match exactly: check the spelling, or clear them."
                : "Nothing has been audited yet. Every write through the API (orders, blocks, settings, halts…) is recorded here, refusals included."
          }
        />
        {next && (
          <div class="load-more">
            <button class="btn" onClick={loadMore} disabled={more} data-testid="audit-more">
              {more ? "Loading…" : `Load ${PAGE} more`}
            </button>
          </div>
        )}
      </Section>
      {open && <Detail row={open} onClose={() => setOpen(null)} onFilter={applyFilter} />}
    </div>
  );
}
