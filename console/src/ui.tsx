// Shared building blocks: data loading, tables, dialogs, notices and form fields.
import type { ComponentChildren, JSX } from "preact";
import { signal } from "@preact/signals";
import { useCallback, useEffect, useLayoutEffect, useRef, useState } from "preact/hooks";
import { ApiError } from "./api";
import { refusalWords } from "./halts";
import { marketNow, outsideSessionWords } from "./market_session";
import { canOperate } from "./session";

// ---------------------------------------------------------------------------------------------
// Loading

export interface Loaded<T> {
  data: T | undefined;
  error: ApiError | undefined;
  loading: boolean;
  reload: () => void;
  set: (v: T) => void;
}

/** Loads `fn()` now and whenever `deps` change; `reload()` loads again without clearing. */
export function useLoad<T>(fn: () => Promise<T>, deps: unknown[] = []): Loaded<T> {
  const [data, setData] = useState<T | undefined>(undefined);
  const [error, setError] = useState<ApiError | undefined>(undefined);
  const [loading, setLoading] = useState(true);
  const seq = useRef(0);
  const run = useCallback(() => {
    const n = ++seq.current;
    setLoading(true);
    fn().then(
      (v) => {
        if (n !== seq.current) return;
        setData(v);
        setError(undefined);
        setLoading(false);
      },
      (e) => {
        if (n !== seq.current) return;
        setError(e instanceof ApiError ? e : new ApiError(0, "CLIENT", String(e)));
        setLoading(false);
      },
    );
  }, deps);
  useEffect(run, [run]);
  return { data, error, loading, reload: run, set: setData };
}

/** Calls `fn` at most once per `ms`, trailing: for reloading on bursts of events. */
export function useThrottled(fn: () => void, ms: number): () => void {
  const last = useRef(0);
  const timer = useRef<number | undefined>(undefined);
  const latest = useRef(fn);
  latest.current = fn;
  useEffect(() => () => clearTimeout(timer.current), []);
  return useCallback(() => {
    const wait = last.current + ms - Date.now();
    if (wait <= 0) {
      last.current = Date.now();
      latest.current();
    } else if (timer.current === undefined) {
      timer.current = window.setTimeout(() => {
        timer.current = undefined;
        last.current = Date.now();
        latest.current();
      }, wait);
    }
  }, [ms]);
}

// ---------------------------------------------------------------------------------------------
// Notices

interface Toast {
  id: number;
  kind: "ok" | "error" | "info";
  text: string;
}
export const toasts = signal<Toast[]>([]);
let toastId = 0;

export function notify(kind: Toast["kind"], text: string) {
  const t = { id: ++toastId, kind, text };
  toasts.value = [...toasts.value, t];
  setTimeout(() => (toasts.value = toasts.value.filter((x) => x.id !== t.id)), kind === "error" ? 9000 : 4000);
}

/**
 * A refusal's message as the operator reads it: the service's, except where the detail says it
 * better (a halt's reason and start in New York time, not an RFC 3339 stamp; what the venue takes
 * outside the regular session, and when it opens on the market's clock).
 */
export function refusalText(e: ApiError): string {
  if (e.code === "OUTSIDE_REGULAR_SESSION") return outsideSessionWords(e.detail, marketNow());
  return (e.code === "SYMBOL_HALTED" && refusalWords(e.detail)) || e.message;
}

/** The contract's wording of a refusal: "CODE: message". */
export function describe(e: unknown): string {
  if (e instanceof ApiError) return `${e.code}: ${refusalText(e)}`;
  return String(e);
}

export function Toasts() {
  return (
    <div class="toasts" role="status" aria-live="polite">
      {toasts.value.map((t) => (
        <div key={t.id} class={`toast ${t.kind}`} data-testid="toast">
          {t.text}
        </div>
      ))}
    </div>
  );
}

export function ErrorBanner({ error }: { error: ApiError | undefined }) {
  if (!error) return null;
  return (
    <div class="banner error" role="alert">
      <strong>{error.code}</strong> {refusalText(error)}
    </div>
  );
}

// ---------------------------------------------------------------------------------------------
// Buttons

interface ActionProps {
  /** The action; its refusal is shown with the contract's message. */
  run: () => Promise<unknown>;
  /** Shown on success. */
  done?: string;
  kind?: "primary" | "danger" | "ghost" | "";
  title?: string;
  disabled?: boolean;
  children: ComponentChildren;
  testid?: string;
  /** Leave it visible to viewers (only for actions every role may take). */
  everyone?: boolean;
}

/** A button for a write: hidden from viewers, busy while running, refusals shown as toasts. */
export function Action({ run, done, kind = "", title, disabled, children, testid, everyone }: ActionProps) {
  const [busy, setBusy] = useState(false);
  if (!everyone && !canOperate.value) return null;
  const click = async (ev: Event) => {
    ev.stopPropagation();
    setBusy(true);
    try {
      await run();
      if (done) notify("ok", done);
    } catch (e) {
      notify("error", describe(e));
    } finally {
      setBusy(false);
    }
  };
  return (
    <button class={`btn ${kind}`} onClick={click} disabled={busy || disabled} title={title} data-testid={testid}>
      {busy ? "…" : children}
    </button>
  );
}

// ---------------------------------------------------------------------------------------------
// Tables

export interface Column<T> {
  key: string;
  label: string;
  render?: (row: T) => ComponentChildren;
  /** Value used for sorting (default: row[key]). */
  sortValue?: (row: T) => number | string | null | undefined;
  num?: boolean;
  class?: (row: T) => string;
  title?: string;
}

interface TableProps<T> {
  columns: Column<T>[];
  rows: T[];
  rowKey: (row: T) => string;
  onRowClick?: (row: T) => void;
  empty?: string;
  /** Initial sort column and direction. */
  sort?: { key: string; desc: boolean };
  rowClass?: (row: T) => string;
  testid?: string;
  selected?: string | null;
}

export function Table<T>({ columns, rows, rowKey, onRowClick, empty, sort, rowClass, testid, selected }: TableProps<T>) {
  const [order, setOrder] = useState(sort ?? null);
  let shown = rows;
  if (order) {
    const col = columns.find((c) => c.key === order.key);
    const val = col?.sortValue ?? ((r: T) => (r as any)[order.key]);
    shown = [...rows].sort((a, b) => {
      const x = val(a);
      const y = val(b);
      if (x === y) return 0;
      if (x === null || x === undefined) return 1;
      if (y === null || y === undefined) return -1;
      return (x < y ? -1 : 1) * (order.desc ? -1 : 1);
    });
  }
  const head = (c: Column<T>) => {
    const active = order?.key === c.key;
    const next = () => setOrder({ key: c.key, desc: active ? !order!.desc : c.num ?? false });
    return (
      <th key={c.key} class={c.num ? "num" : ""} title={c.title} onClick={next} aria-sort={active ? (order!.desc ? "descending" : "ascending") : undefined}>
        {c.label}
        {active ? (order!.desc ? " ▾" : " ▴") : ""}
      </th>
    );
  };
  return (
    <div class="table-wrap">
      <table class={onRowClick ? "clickable" : ""} data-testid={testid}>
        <thead>
          <tr>{columns.map(head)}</tr>
        </thead>
        <tbody>
          {shown.length === 0 ? (
            <tr>
              <td class="empty" colSpan={columns.length}>
                {empty ?? "Nothing to show."}
              </td>
            </tr>
          ) : (
            shown.map((r) => {
              const key = rowKey(r);
              return (
                <tr
                  key={key}
                  data-key={key}
                  class={`${rowClass ? rowClass(r) : ""} ${selected === key ? "selected" : ""}`}
                  onClick={onRowClick ? () => onRowClick(r) : undefined}
                >
                  {columns.map((c) => (
                    <td key={c.key} class={`${c.num ? "num" : ""} ${c.class ? c.class(r) : ""}`}>
                      {c.render ? c.render(r) : String((r as any)[c.key] ?? "—")}
                    </td>
                  ))}
                </tr>
              );
            })
          )}
        </tbody>
      </table>
    </div>
  );
}

// ---------------------------------------------------------------------------------------------
// Dialogs

export function Modal({
  title,
  onClose,
  children,
  wide,
  testid,
}: {
  title: ComponentChildren;
  onClose: () => void;
  children: ComponentChildren;
  wide?: boolean;
  testid?: string;
}) {
  // Escape closes the dialog from the moment it shows: the listener is added with the dialog's
  // DOM (a layout effect, not an effect deferred until after the next paint, which a key
  // pressed as soon as the dialog appears could beat), once, reading the latest `onClose`
  // (callers pass a new one on each render).
  const close = useRef(onClose);
  close.current = onClose;
  useLayoutEffect(() => {
    const key = (e: KeyboardEvent) => e.key === "Escape" && close.current();
    window.addEventListener("keydown", key);
    return () => window.removeEventListener("keydown", key);
  }, []);
  return (
    <div class="overlay" onClick={onClose}>
      <div class={`modal ${wide ? "wide" : ""}`} role="dialog" aria-modal="true" data-testid={testid} onClick={(e) => e.stopPropagation()}>
        <div class="modal-head">
          <h2>{title}</h2>
          <button class="btn ghost" onClick={onClose} aria-label="Close">
            ✕
          </button>
        </div>
        <div class="modal-body">{children}</div>
      </div>
    </div>
  );
}

/**
 * Asks before a dangerous action, optionally for a reason, and shows the refusal inside the
 * dialog (with the contract's message) so the operator can correct and retry.
 */
export function Confirm({
  title,
  children,
  confirmLabel,
  danger,
  reason,
  onConfirm,
  onClose,
  testid,
}: {
  title: string;
  children?: ComponentChildren;
  confirmLabel: string;
  danger?: boolean;
  /** Ask for a reason (required when true). */
  reason?: boolean;
  onConfirm: (reason: string) => Promise<unknown>;
  onClose: () => void;
  testid?: string;
}) {
  const [text, setText] = useState("");
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<ApiError | undefined>();
  const submit = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setError(undefined);
    try {
      await onConfirm(text.trim());
      onClose();
    } catch (err) {
      setError(err instanceof ApiError ? err : new ApiError(0, "CLIENT", String(err)));
    } finally {
      setBusy(false);
    }
  };
  return (
    <Modal title={title} onClose={onClose} testid={testid ?? "confirm"}>
      <form onSubmit={submit}>
        {children}
        {reason && (
          <Field label="Reason (recorded in the audit log)">
            <input
              name="reason"
              value={text}
              onInput={(e) => setText((e.target as HTMLInputElement).value)}
              autoFocus
              required
              maxLength={500}
            />
          </Field>
        )}
        <ErrorBanner error={error} />
        <div class="modal-actions">
          <button type="button" class="btn ghost" onClick={onClose}>
            Cancel
          </button>
          <button type="submit" class={`btn ${danger ? "danger" : "primary"}`} disabled={busy || (reason && !text.trim())}>
            {busy ? "Working…" : confirmLabel}
          </button>
        </div>
      </form>
    </Modal>
  );
}

// ---------------------------------------------------------------------------------------------
// Forms and layout

export function Field({ label, error, hint, children }: { label: string; error?: string; hint?: string; children: ComponentChildren }) {
  return (
    <label class={`field ${error ? "invalid" : ""}`}>
      <span class="label">{label}</span>
      {children}
      {error ? <span class="field-error" role="alert">{error}</span> : hint ? <span class="hint">{hint}</span> : null}
    </label>
  );
}

export function Stat({ label, value, cls, testid }: { label: string; value: ComponentChildren; cls?: string; testid?: string }) {
  return (
    <div class="stat" data-testid={testid}>
      <span class="stat-label">{label}</span>
      <span class={`stat-value ${cls ?? ""}`}>{value}</span>
    </div>
  );
}

export function Badge({ text, kind }: { text: string; kind?: string }) {
  return <span class={`badge ${kind ?? text.toLowerCase()}`}>{text}</span>;
}

export function Section({ title, actions, children }: { title: ComponentChildren; actions?: ComponentChildren; children: ComponentChildren }) {
  return (
    <section class="panel">
      <div class="panel-head">
        <h2>{title}</h2>
        <div class="panel-actions">{actions}</div>
      </div>
      {children}
    </section>
  );
}

export const onInput =
  (set: (v: string) => void) =>
  (e: JSX.TargetedEvent<HTMLInputElement | HTMLSelectElement | HTMLTextAreaElement, Event>) =>
    set(e.currentTarget.value);
