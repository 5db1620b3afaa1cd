// Orders: the order blotter of a trading day, filtered by status and symbol, paged with the
// contract's cursor, and kept current by the stream (order.updated carries the full row, so
// rows change in place). A row opens the order with its executions; operators cancel working
// orders and enter manual orders through the same risk gate the strategies pass. An order that
// may fill outside the regular session carries an EXT badge (CONTRACT §12).
import "./orders.css";
import type { ComponentChildren } from "preact";
import { useCallback, useEffect, useMemo, useRef, useState } from "preact/hooks";
import { ApiError, call, get, post, withQuery } from "../api";
import { useEvents, type StreamEvent } from "../events";
import { date as nyDate, dateTime, int, money, price, time, todayNy } from "../format";
import { href, route } from "../route";
import { canOperate } from "../session";
import { openTicket, placedOrder } from "../ticket";
import { SymbolLink, openChart } from "../symbol_chart";
import { OPEN_STATUSES, type Order, type OrderDetail } from "../types";
import { Badge, Confirm, ErrorBanner, Field, Modal, Section, Stat, Table, notify, onInput, useLoad, useThrottled, type Column } from "../ui";

const STATUSES = ["NEW", "ACCEPTED", "PARTIALLY_FILLED", "FILLED", "PENDING_CANCEL", "CANCELED", "REJECTED", "EXPIRED"];
const PAGE = 100;

const isOpen = (o: Order) => OPEN_STATUSES.includes(o.status);
const byNewest = (a: Order, b: Order) => Date.parse(b.submitted_at) - Date.parse(a.submitted_at);
const pathOf = (id: string) => `/api/orders/${encodeURIComponent(id)}`;

interface Filters {
  date: string;
  status: string;
  symbol: string;
}

function filtersFromRoute(): Filters {
  const p = route.value.params;
  const status = (p.get("status") ?? "").toUpperCase();
  return {
    date: /^\d{4}-\d{2}-\d{2}$/.test(p.get("date") ?? "") ? p.get("date")! : "",
    status: STATUSES.includes(status) ? status : "",
    symbol: (p.get("symbol") ?? "").trim().toUpperCase(),
  };
}

/** Whether an order (from an event) belongs in the list the filters ask for. */
function matches(o: Order, f: Filters): boolean {
  if (f.status && o.status !== f.status) return false;
  if (f.symbol && o.symbol.toUpperCase() !== f.symbol) return false;
  // No date: the current session, which is where every live update happens.
  if (f.date && nyDate(o.submitted_at) !== f.date) return false;
  return true;
}

/** Only the fields of a list row (an event carries the whole detail). */
function rowOf(o: Order): Order {
  const { submitted_at, status, symbol, side, quantity, filled_quantity, order_type, price, broker_name, client_order_id, broker_order_id, reason, strategy_id, mode, extended_hours } = o;
  return { submitted_at, status, symbol, side, quantity, filled_quantity, order_type, price, broker_name, client_order_id, broker_order_id, reason, strategy_id, mode, extended_hours };
}

/** The EXT badge of an order that may fill outside the regular session; nothing for another. */
function ExtBadge({ order }: { order: Pick<Order, "extended_hours"> }) {
  if (!order.extended_hours) return null;
  return (
    <span class="badge ord-ext" data-testid="order-ext" title="Extended hours: a LIMIT DAY order the venue works from 04:00 to 20:00 New York, not only in the regular session">
      EXT
    </span>
  );
}

export function OrdersTab() {
  const initial = useMemo(filtersFromRoute, []);
  const [date, setDate] = useState(initial.date);
  const [status, setStatus] = useState(initial.status);
  const [symbolText, setSymbolText] = useState(initial.symbol);
  const [symbol, setSymbol] = useState(initial.symbol);
  const filters = useMemo<Filters>(() => ({ date, status, symbol }), [date, status, symbol]);

  const [rows, setRows] = useState<Order[] | undefined>(undefined);
  /**
   * The newest full row seen per order (from the stream or a submit's answer), with when it
   * arrived: an answer or a list fetched before it must not put an older state back (the
   * broker's ACCEPTED often arrives before the submit's own NEW answer).
   */
  const latest = useRef(new Map<string, { row: Order; updated: string; at: number }>());
  /** Rows of a list fetched at `started`, with newer rows the stream delivered meanwhile. */
  const fresher = (list: Order[], started: number) =>
    list.map((o) => {
      const seen = latest.current.get(o.client_order_id);
      return seen && seen.at > started ? seen.row : o;
    });
  const [cursor, setCursor] = useState<string | null>(null);
  const [pages, setPages] = useState(0);
  const [loading, setLoading] = useState(false);
  const [error, setError] = useState<ApiError | undefined>();
  const [flash, setFlash] = useState<Set<string>>(new Set());
  const [detail, setDetail] = useState<string | null>(null);
  const [cancel, setCancel] = useState<Order | null>(null);
  const seq = useRef(0);

  // A typed symbol filters after a short pause rather than on each key.
  useEffect(() => {
    const t = setTimeout(() => setSymbol(symbolText.trim().toUpperCase()), 350);
    return () => clearTimeout(t);
  }, [symbolText]);

  // Another link into the tab (#/orders?symbol=…) while it is open.
  const routeValue = route.value;
  const firstRoute = useRef(true);
  useEffect(() => {
    if (firstRoute.current) {
      firstRoute.current = false;
      return;
    }
    if (routeValue.tab !== "orders") return;
    const f = filtersFromRoute();
    setDate(f.date);
    setStatus(f.status);
    setSymbolText(f.symbol);
    setSymbol(f.symbol);
  }, [routeValue]);

  // Keep the address in step with the filters, so the view can be bookmarked or shared.
  useEffect(() => {
    if (route.value.tab !== "orders") return;
    const params: Record<string, string> = {};
    if (date) params.date = date;
    if (status) params.status = status;
    if (symbol) params.symbol = symbol;
    const target = href("orders", params);
    if (location.hash !== target) history.replaceState(null, "", target);
  }, [date, status, symbol]);

  const query = (f: Filters, after?: string | null) =>
    withQuery("/api/orders", { date: f.date, status: f.status, symbol: f.symbol, limit: PAGE, cursor: after ?? undefined });

  /** First page for the filters, replacing the list. */
  const load = useCallback(() => {
    const n = ++seq.current;
    const started = performance.now();
    setLoading(true);
    call<Order[]>("GET", query(filters)).then(
      (env) => {
        if (n !== seq.current) return;
        setRows(fresher(env.data, started));
        setCursor(env.meta.next_cursor ?? null);
        setPages(1);
        setError(undefined);
        setLoading(false);
      },
      (e) => {
        if (n !== seq.current) return;
        setError(e instanceof ApiError ? e : new ApiError(0, "CLIENT", String(e)));
        setLoading(false);
      },
    );
  }, [filters]);
  useEffect(() => {
    setRows(undefined);
    load();
  }, [load]);

  /** Fetches the first page again and merges it, keeping the older pages already loaded. */
  const refresh = useCallback(() => {
    const n = seq.current;
    const started = performance.now();
    call<Order[]>("GET", query(filters)).then(
      (env) => {
        if (n !== seq.current) return;
        setError(undefined);
        const data = fresher(env.data, started);
        if (pages <= 1) {
          setRows(data);
          setCursor(env.meta.next_cursor ?? null);
          return;
        }
        setRows((prev) => {
          const fresh = new Set(data.map((o) => o.client_order_id));
          const oldest = data.length ? Date.parse(data[data.length - 1].submitted_at) : Infinity;
          const older = (prev ?? []).filter((o) => !fresh.has(o.client_order_id) && Date.parse(o.submitted_at) <= oldest);
          return [...data, ...older];
        });
      },
      () => {
        /* the next event or a manual refresh tries again */
      },
    );
  }, [filters, pages]);

  const more = () => {
    if (!cursor) return;
    const n = seq.current;
    setLoading(true);
    call<Order[]>("GET", query(filters, cursor)).then(
      (env) => {
        if (n !== seq.current) return;
        setRows((prev) => {
          const have = new Set((prev ?? []).map((o) => o.client_order_id));
          return [...(prev ?? []), ...env.data.filter((o) => !have.has(o.client_order_id))];
        });
        setCursor(env.meta.next_cursor ?? null);
        setPages((p) => p + 1);
        setLoading(false);
      },
      (e) => {
        if (n !== seq.current) return;
        setError(e instanceof ApiError ? e : new ApiError(0, "CLIENT", String(e)));
        setLoading(false);
      },
    );
  };

  const highlight = (id: string) => {
    setFlash((s) => new Set(s).add(id));
    setTimeout(
      () =>
        setFlash((s) => {
          const next = new Set(s);
          next.delete(id);
          return next;
        }),
      1600,
    );
  };

  /** Puts a full order row in place, in or out of the list as the filters say. */
  const upsert = useCallback(
    (o: Order) => {
      const row = rowOf(o);
      const updated = (o as Partial<OrderDetail>).updated_at ?? "";
      const seen = latest.current.get(row.client_order_id);
      if (seen && updated && seen.updated > updated) return; // an older state, arriving late
      latest.current.set(row.client_order_id, { row, updated, at: performance.now() });
      setRows((prev) => {
        if (!prev) return prev;
        const i = prev.findIndex((x) => x.client_order_id === row.client_order_id);
        if (!matches(row, filters)) return i < 0 ? prev : prev.filter((_, j) => j !== i);
        if (i >= 0) return prev.map((x, j) => (j === i ? row : x));
        return [row, ...prev].sort(byNewest);
      });
      highlight(row.client_order_id);
    },
    [filters],
  );

  const reload = useThrottled(refresh, 1000);
  useEvents(
    ["order.updated"],
    useCallback(
      (e: StreamEvent<Order>) => {
        if (e.data && typeof e.data.client_order_id === "string" && typeof e.data.status === "string") upsert(e.data);
        else reload();
      },
      [upsert, reload],
    ),
  );
  useEvents(["execution.created"], reload);
  // An order placed from the ticket shows at once, before its event.
  useEffect(() => {
    if (placedOrder.value) upsert(placedOrder.value);
  }, [placedOrder.value]);

  const list = rows ?? [];
  const openCount = list.filter(isOpen).length;
  const filled = list.filter((o) => o.status === "FILLED").length;
  const refused = list.filter((o) => o.status === "REJECTED").length;
  const bought = list.filter((o) => o.side === "BUY" && o.price !== null).reduce((s, o) => s + o.filled_quantity * (o.price ?? 0), 0);
  const sold = list.filter((o) => o.side === "SELL" && o.price !== null).reduce((s, o) => s + o.filled_quantity * (o.price ?? 0), 0);
  const anyFilter = !!(date || status || symbol);
  const multiDay = !date;

  const askCancel = (o: Order) => (e: Event) => {
    e.stopPropagation();
    setCancel(o);
  };

  const columns: Column<Order>[] = [
    {
      key: "submitted_at",
      label: "Submitted",
      sortValue: (o) => Date.parse(o.submitted_at),
      render: (o) => <span title={dateTime(o.submitted_at)}>{multiDay && nyDate(o.submitted_at) !== todayNy() ? dateTime(o.submitted_at) : time(o.submitted_at)}</span>,
    },
    { key: "symbol", label: "Symbol", render: (o) => <strong><SymbolLink symbol={o.symbol} /></strong> },
    { key: "side", label: "Side", render: (o) => <Badge text={o.side} kind={`ord-side ${o.side.toLowerCase()}`} /> },
    {
      key: "order_type",
      label: "Type",
      title: "EXT: an extended-hours order, working in the pre-market and the after-hours too",
      render: (o) => (
        <span class="ord-type">
          {o.order_type.replace("_", " ")} <ExtBadge order={o} />
        </span>
      ),
    },
    { key: "quantity", label: "Qty", num: true, render: (o) => int(o.quantity) },
    {
      key: "filled_quantity",
      label: "Filled",
      num: true,
      sortValue: (o) => (o.quantity ? o.filled_quantity / o.quantity : 0),
      render: (o) => <FillBar filled={o.filled_quantity} quantity={o.quantity} />,
    },
    { key: "price", label: "Price", num: true, title: "Limit price, else the average fill price", render: (o) => price(o.price) },
    { key: "status", label: "Status", render: (o) => <StatusBadge status={o.status} /> },
    {
      key: "reason",
      label: "Reason",
      render: (o) =>
        o.reason ? (
          <span class="ord-reason" title={o.reason}>
            {o.reason}
          </span>
        ) : (
          <span class="muted">—</span>
        ),
    },
    { key: "strategy_id", label: "Strategy", sortValue: (o) => o.strategy_id ?? "", render: (o) => (o.strategy_id ? o.strategy_id : <span class="muted">manual</span>) },
    { key: "client_order_id", label: "Client order id", render: (o) => <span class="mono">{o.client_order_id}</span> },
    { key: "broker_order_id", label: "Broker order id", render: (o) => (o.broker_order_id ? <span class="mono">{o.broker_order_id}</span> : <span class="muted">—</span>) },
    { key: "broker_name", label: "Broker" },
  ];
  if (canOperate.value) {
    columns.push({
      key: "actions",
      label: "",
      sortValue: (o) => (isOpen(o) ? 0 : 1),
      render: (o) =>
        isOpen(o) ? (
          <button
            class="btn danger"
            data-testid={`cancel-${o.client_order_id}`}
            disabled={o.status === "PENDING_CANCEL"}
            title={o.status === "PENDING_CANCEL" ? "Cancel requested; waiting for the broker" : "Cancel this order"}
            onClick={askCancel(o)}
          >
            {o.status === "PENDING_CANCEL" ? "Cancelling…" : "Cancel"}
          </button>
        ) : null,
    });
  }

  const dayLabel = date ? date : "current session";
  return (
    <div data-testid="tab-orders">
      <Section
        title={
          <>
            Orders{" "}
            <span class="muted">
              · {dayLabel} · {rows ? `${int(list.length)}${cursor ? "+" : ""} shown` : "…"}
            </span>
          </>
        }
        actions={
          <>
            <button class="btn ghost" onClick={load} disabled={loading} title="Reload from the first page">
              {loading ? "Loading…" : "↻ Refresh"}
            </button>
            {canOperate.value && (
              <button class="btn primary" data-testid="new-order" onClick={() => openTicket(symbol)}>
                + New order
              </button>
            )}
          </>
        }
      >
        <div class="toolbar ord-toolbar" role="search" aria-label="Filters">
          <Field label="Trading day (NY)">
            <input type="date" name="date" value={date} max={todayNy()} title="Empty: the current session" onInput={onInput(setDate)} />
          </Field>
          <Field label="Status">
            <select name="status" value={status} onChange={onInput(setStatus)}>
              <option value="">All statuses</option>
              {STATUSES.map((s) => (
                <option value={s}>{s.replace("_", " ")}</option>
              ))}
            </select>
          </Field>
          <Field label="Symbol">
            <input
              type="text"
              name="symbol"
              value={symbolText}
              placeholder="All"
              autoComplete="off"
              spellcheck={false}
              class="ord-symbol-input"
              onInput={(e) => setSymbolText(e.currentTarget.value.toUpperCase())}
            />
          </Field>
          {anyFilter && (
            <button
              type="button"
              class="btn ghost"
              onClick={() => {
                setDate("");
                setStatus("");
                setSymbolText("");
                setSymbol("");
              }}
            >
              Clear filters
            </button>
          )}
        </div>
        <div class="stats">
          <Stat label="Shown" value={rows ? `${int(list.length)}${cursor ? "+" : ""}` : "…"} />
          <Stat label="Open" value={int(openCount)} cls={openCount ? "warn" : ""} testid="stat-open-orders" />
          <Stat label="Filled" value={int(filled)} />
          <Stat label="Rejected" value={int(refused)} cls={refused ? "down" : ""} />
          <Stat label="Bought" value={money(bought)} />
          <Stat label="Sold" value={money(sold)} />
        </div>
        <ErrorBanner error={error} />
        {!rows && !error ? (
          <div class="note">Loading orders…</div>
        ) : (
          <Table
            testid="orders-table"
            columns={columns}
            rows={list}
            rowKey={(o) => o.client_order_id}
            sort={{ key: "submitted_at", desc: true }}
            onRowClick={(o) => setDetail(o.client_order_id)}
            selected={detail}
            rowClass={(o) => `${flash.has(o.client_order_id) ? "ord-flash" : ""} ${o.status === "REJECTED" ? "ord-rejected" : isOpen(o) ? "ord-open" : ""}`}
            empty={
              anyFilter
                ? `No order matches these filters${date ? ` on ${date}` : " in the current session"}. Clear a filter to see more.`
                : `No order in the current session yet. Strategies place them from the watchlist; ${canOperate.value ? "“New order” places one by hand." : "an operator can place one by hand."}`
            }
          />
        )}
        {cursor && (
          <div class="ord-more">
            <button class="btn" onClick={more} disabled={loading} data-testid="load-more">
              {loading ? "Loading…" : `Load ${PAGE} more`}
            </button>
          </div>
        )}
        {rows && !cursor && pages > 1 && <div class="note">All {int(list.length)} orders loaded.</div>}
      </Section>

      {detail && <OrderDetailModal id={detail} onClose={() => setDetail(null)} onCancel={(o) => setCancel(o)} />}
      {cancel && (
        <Confirm
          title={`Cancel ${cancel.side} ${int(cancel.quantity)} ${cancel.symbol}`}
          confirmLabel="Request cancel"
          danger
          testid="confirm"
          onClose={() => setCancel(null)}
          onConfirm={async () => {
            const started = performance.now();
            const r = await post<{ client_order_id: string; status: string }>("/api/orders/cancel", { client_order_id: cancel.client_order_id });
            notify("ok", `Cancel requested for ${r.client_order_id}: ${r.status}.`);
            // The stream may already have brought the outcome (CANCELED); don't put PENDING_CANCEL back.
            if (!((latest.current.get(r.client_order_id)?.at ?? 0) > started)) {
              setRows((prev) => prev?.map((o) => (o.client_order_id === r.client_order_id ? { ...o, status: r.status } : o)));
            }
          }}
        >
          <p>
            Asks the broker to cancel <span class="mono">{cancel.client_order_id}</span> ({cancel.order_type.replace("_", " ")}
            {cancel.price !== null ? ` @ ${price(cancel.price)}` : ""}, {cancel.status.replace("_", " ")}).{" "}
            {cancel.filled_quantity > 0 ? `The ${int(cancel.filled_quantity)} of ${int(cancel.quantity)} shares already filled stay filled. ` : "Nothing has filled yet. "}
            The order shows PENDING CANCEL until the broker confirms; a fill may still arrive meanwhile.
          </p>
        </Confirm>
      )}
    </div>
  );
}

function StatusBadge({ status }: { status: string }) {
  return <Badge text={status.replace("_", " ")} kind={`ord-status ${status.toLowerCase()}`} />;
}

function FillBar({ filled, quantity }: { filled: number; quantity: number }) {
  const ratio = quantity ? Math.min(1, filled / quantity) : 0;
  return (
    <span class="ord-fill" title={`${int(filled)} of ${int(quantity)} filled`}>
      <span class={filled === 0 ? "muted" : ""}>
        {int(filled)}/{int(quantity)}
      </span>
      <span class="ord-fill-bar">
        <span style={{ width: `${ratio * 100}%` }} class={ratio >= 1 ? "full" : ""} />
      </span>
    </span>
  );
}

// ---------------------------------------------------------------------------------------------
// Detail

function OrderDetailModal({ id, onClose, onCancel }: { id: string; onClose: () => void; onCancel: (o: Order) => void }) {
  const d = useLoad(() => get<OrderDetail>(pathOf(id)), [id]);
  const reload = useThrottled(d.reload, 1000);
  useEvents(
    ["order.updated"],
    useCallback(
      (e: StreamEvent<OrderDetail>) => {
        if (e.data?.client_order_id !== id) return;
        if (Array.isArray(e.data.executions)) d.set(e.data);
        else reload();
      },
      [id, reload],
    ),
  );
  useEvents(
    ["execution.created"],
    useCallback((e: StreamEvent) => e.data?.client_order_id === id && reload(), [id, reload]),
  );

  const o = d.data;
  const execColumns: Column<OrderDetail["executions"][number]>[] = [
    { key: "timestamp", label: "Time", sortValue: (x) => Date.parse(x.timestamp), render: (x) => <span title={dateTime(x.timestamp)}>{time(x.timestamp)}</span> },
    { key: "quantity", label: "Qty", num: true, render: (x) => int(x.quantity) },
    { key: "price", label: "Price", num: true, render: (x) => price(x.price) },
    { key: "notional", label: "Notional", num: true, sortValue: (x) => x.price * x.quantity, render: (x) => money(x.price * x.quantity) },
    { key: "fee", label: "Fee", num: true, render: (x) => money(x.fee) },
    { key: "execution_id", label: "Execution id", render: (x) => <span class="mono">{x.execution_id}</span> },
  ];
  const notional = o?.executions.reduce((s, x) => s + x.price * x.quantity, 0) ?? 0;

  return (
    <Modal
      wide
      testid="order-detail"
      onClose={onClose}
      title={
        o ? (
          <>
            <Badge text={o.side} kind={`ord-side ${o.side.toLowerCase()}`} /> {int(o.quantity)} {o.symbol} {o.order_type.replace("_", " ")} <ExtBadge order={o} />{" "}
            <StatusBadge status={o.status} />
          </>
        ) : (
          <span class="mono">{id}</span>
        )
      }
    >
      <ErrorBanner error={d.error} />
      {!o && !d.error && <div class="note">Loading the order…</div>}
      {o && (
        <>
          {o.status === "REJECTED" && o.reject_reason && (
            <div class="banner error">
              <strong>Rejected</strong> {o.reject_reason}
            </div>
          )}
          <div class="ord-detail-grid">
            <dl class="kv">
              <Kv k="Client order id">
                <span class="mono">{o.client_order_id}</span>
              </Kv>
              <Kv k="Broker order id">{o.broker_order_id ? <span class="mono">{o.broker_order_id}</span> : <span class="muted">not yet acknowledged</span>}</Kv>
              <Kv k="Broker">{o.broker_name}</Kv>
              <Kv k="Mode">
                <span class={`mode-badge ${o.mode}`}>{o.mode}</span>
              </Kv>
              <Kv k="Strategy">{o.strategy_id ?? <span class="muted">manual</span>}</Kv>
              <Kv k="Submitted">{dateTime(o.submitted_at)} NY</Kv>
              <Kv k="Updated">{dateTime(o.updated_at)} NY</Kv>
            </dl>
            <dl class="kv">
              <Kv k="Side">{o.side}</Kv>
              <Kv k="Type">{o.order_type.replace("_", " ")}</Kv>
              <Kv k="Time in force">{o.time_in_force}</Kv>
              {o.extended_hours !== undefined && (
                <Kv k="Extended hours">
                  <span data-testid="order-extended-hours">{o.extended_hours ? "yes: may fill 04:00–20:00 NY" : "no: the regular session only"}</span>
                </Kv>
              )}
              <Kv k="Quantity">{int(o.quantity)}</Kv>
              <Kv k="Filled">
                {int(o.filled_quantity)} of {int(o.quantity)}
                {o.quantity > 0 && <span class="muted"> ({Math.round((o.filled_quantity / o.quantity) * 100)}%)</span>}
              </Kv>
              <Kv k="Limit price">{price(o.limit_price)}</Kv>
              <Kv k="Stop price">{price(o.stop_price)}</Kv>
              {o.side === "BUY" && (
                <Kv k="Exit legs">
                  <span data-testid="order-legs">
                    {o.stop_loss ? (
                      <>
                        stop {price(o.stop_loss.stop_price)}
                        {o.stop_loss.limit_price !== null ? ` (limit ${price(o.stop_loss.limit_price)})` : ""}
                        {o.take_profit ? ` · take-profit ${price(o.take_profit.limit_price)}` : ""}
                      </>
                    ) : (
                      <span class="muted">none</span>
                    )}
                  </span>
                </Kv>
              )}
              <Kv k="Avg fill price">{price(o.average_fill_price)}</Kv>
              <Kv k="Filled value">{money(notional)}</Kv>
              <Kv k="Fees">{money(o.fees)}</Kv>
              <Kv k="Reject reason">{o.reject_reason ?? <span class="muted">—</span>}</Kv>
            </dl>
          </div>
          {o.reason && (
            <div class="ord-reason-full">
              <h3>Reason</h3>
              <p>{o.reason}</p>
            </div>
          )}
          <h3 class="ord-subhead">Executions · {o.executions.length}</h3>
          <Table
            testid="executions-table"
            columns={execColumns}
            rows={o.executions}
            rowKey={(x) => x.execution_id}
            sort={{ key: "timestamp", desc: false }}
            empty={isOpen(o) ? "No fill yet: the order is working." : "This order never filled."}
          />
          <div class="modal-actions">
            <a class="btn ghost" href={href("positions", { symbol: o.symbol })} onClick={onClose}>
              {o.symbol} position
            </a>
            <button class="btn ghost" data-testid="detail-chart" onClick={() => (onClose(), openChart(o.symbol))}>
              {o.symbol} chart
            </button>
            {isOpen(o) && canOperate.value && (
              <button class="btn danger" data-testid="detail-cancel" disabled={o.status === "PENDING_CANCEL"} onClick={() => onCancel(o)}>
                {o.status === "PENDING_CANCEL" ? "Cancel requested…" : "Cancel order"}
              </button>
            )}
            <button class="btn" onClick={onClose}>
              Close
            </button>
          </div>
        </>
      )}
    </Modal>
  );
}

function Kv({ k, children }: { k: string; children: ComponentChildren }) {
  return (
    <>
      <dt>{k}</dt>
      <dd>{children}</dd>
    </>
  );
}
