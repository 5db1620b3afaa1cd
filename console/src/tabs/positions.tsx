// Positions: every open position marked to the last trade, with its alert level up front, the
// book's totals, and the operator's levers (close all, close part, halt the strategy). Selecting
// a row opens its intraday chart with today's fills marked. Reloads on fills and position
// changes from the stream, and every 10 s for the marks. Each row says what protects it (a stop
// at the broker, the engine, or nothing: a warning), patched at once by `position.updated`; in
// the last 15 minutes of the regular session a banner counts the stops the engine alone will
// hold after the close (the venue triggers none outside it).
import "./positions.css";
import { useEffect, useMemo, useRef, useState } from "preact/hooks";
import { ApiError, get, mode, post, withQuery } from "../api";
import { useEvents, type StreamEvent } from "../events";
import { dateTime, int, money, pct, pnl, price, sign, time, todayNy } from "../format";
import { CandleChart, type Mark } from "../candles";
import { SymbolLink } from "../symbol_chart";
import { HaltBadge, symbolHalt } from "../halt_badge";
import { ENGINE_OUTSIDE_SESSION, ProtectionBadge, unprotected, withPositionUpdate } from "../protection";
import { CloseWarningBanner } from "../session_badge";
import { closeRefusal } from "../halts";
import { selectedPosition } from "../hotkeys";
import { href, route } from "../route";
import { canOperate } from "../session";
import { loadAccount, marketSession, risk } from "../store";
import type { Order, OrderDetail, Position } from "../types";
import { Badge, Confirm, ErrorBanner, Field, Modal, Section, Stat, Table, notify, useLoad, useThrottled, type Column } from "../ui";

/** Severity rank of an alert level (the contract lists NONE; NORMAL is accepted as the same). */
const SEVERITY: Record<string, number> = { CRITICAL: 2, WARNING: 1 };
const severity = (p: Position) => SEVERITY[p.alert_level] ?? 0;

const costBasis = (p: Position) => (p.average_entry_price === null || p.average_entry_price === undefined ? null : p.average_entry_price * p.quantity);
const marketValue = (p: Position) => p.market_price * p.quantity;
/** Unrealized P&L in percent of the cost basis. */
const unrealizedPct = (p: Position) => {
  const basis = costBasis(p);
  return basis ? (p.unrealized_pnl / basis) * 100 : null;
};

/** Time of day when the stamp is today (New York), else date and time. */
const stamp = (iso: string | null | undefined) => (!iso ? "—" : dateTime(iso).startsWith(todayNy()) ? time(iso) : dateTime(iso));

type Ask = { kind: "close" | "partial" | "halt"; position: Position } | null;

export function PositionsTab() {
  const positions = useLoad(() => get<Position[]>("/api/positions"));
  const [selected, setSelected] = useState<string | null>(() => route.value.params.get("symbol")?.toUpperCase() || null);
  const [ask, setAsk] = useState<Ask>(null);
  // The selected position is what the `c` hotkey closes: set with the selection, at once.
  const select = (symbol: string | null) => {
    selectedPosition.value = symbol;
    setSelected(symbol);
  };
  useEffect(() => {
    selectedPosition.value = selected;
    return () => (selectedPosition.value = null);
  }, []);

  const reload = useThrottled(positions.reload, 1000);
  useEvents(["position.updated", "execution.created", "order.updated"], reload);
  // The event carries the row's protection and levels: shown now, not after the throttled reload.
  const loaded = useRef(positions.data);
  loaded.current = positions.data;
  useEvents(
    ["position.updated"],
    useMemo(
      () => (e: StreamEvent<Partial<Position> & { symbol: string }>) => {
        if (loaded.current) positions.set(withPositionUpdate(loaded.current, e.data));
      },
      [positions.set],
    ),
  );
  // Market prices move between fills: re-mark the book on the radar's 10 s rhythm.
  useEffect(() => {
    const timer = setInterval(() => positions.reload(), 10_000);
    return () => clearInterval(timer);
  }, [positions.reload]);

  const rows = positions.data ?? [];
  const open = rows.filter((p) => p.quantity !== 0);
  const exposure = open.reduce((s, p) => s + marketValue(p), 0);
  const basis = open.reduce((s, p) => s + (costBasis(p) ?? 0), 0);
  const unrealized = rows.reduce((s, p) => s + p.unrealized_pnl, 0);
  const realized = rows.reduce((s, p) => s + p.realized_pnl, 0);
  const critical = rows.filter((p) => p.alert_level === "CRITICAL").length;
  const warning = rows.filter((p) => p.alert_level === "WARNING").length;
  const bare = unprotected(rows);
  // A service that does not report protection yet leaves the count unknown, not "none".
  const reported = open.every((p) => p.protection !== undefined);
  const selectedRow = rows.find((p) => p.symbol === selected) ?? null;
  const session = marketSession.value?.session ?? null;

  const act = (kind: "close" | "partial" | "halt", p: Position) => (e: Event) => {
    e.stopPropagation();
    setAsk({ kind, position: p });
  };

  const columns: Column<Position>[] = [
    {
      key: "symbol",
      label: "Symbol",
      render: (p) => (
        <strong class="pos-symbol">
          {p.alert_level === "CRITICAL" ? <span class="pos-alert-dot critical" /> : p.alert_level === "WARNING" ? <span class="pos-alert-dot warning" /> : null}
          <SymbolLink symbol={p.symbol} /> <HaltBadge symbol={p.symbol} row={p} />
        </strong>
      ),
    },
    { key: "quantity", label: "Qty", num: true, render: (p) => int(p.quantity) },
    { key: "average_entry_price", label: "Avg entry", num: true, render: (p) => price(p.average_entry_price) },
    { key: "market_price", label: "Market", num: true, render: (p) => price(p.market_price) },
    {
      key: "stop_loss",
      label: "Stop",
      num: true,
      title: "The stop its strategy manages it with (— when no strategy manages it)",
      render: (p) => <span data-testid="position-stop">{price(p.stop_loss)}</span>,
    },
    {
      key: "target",
      label: "Target",
      num: true,
      title: "Where its strategy takes profit (— once it has, or when no strategy manages it)",
      render: (p) => <span data-testid="position-target">{price(p.target)}</span>,
    },
    {
      key: "protection",
      label: "Protection",
      title: `BROKER: a stop for the whole quantity rests at the broker · ENGINE: the engine watches the stop (${ENGINE_OUTSIDE_SESSION.replace("Engine-held stop: ", "")}) · NONE: nothing protects it`,
      // Unprotected first when sorted descending, as the alert column sorts.
      sortValue: (p) => (p.quantity === 0 ? -1 : p.protection === "NONE" ? 2 : p.protection === "ENGINE" ? 1 : 0),
      render: (p) => <ProtectionBadge position={p} session={session} />,
    },
    {
      key: "market_value",
      label: "Value",
      num: true,
      title: "Quantity × market price",
      sortValue: marketValue,
      render: (p) => money(marketValue(p)),
    },
    {
      key: "unrealized_pnl",
      label: "Unrealized",
      num: true,
      class: (p) => `${sign(p.unrealized_pnl)} strong`,
      render: (p) => pnl(p.unrealized_pnl),
    },
    {
      key: "unrealized_pct",
      label: "Unr. %",
      num: true,
      title: "Unrealized P&L against the cost basis",
      sortValue: unrealizedPct,
      class: (p) => sign(p.unrealized_pnl),
      render: (p) => pct(unrealizedPct(p)),
    },
    { key: "realized_pnl", label: "Realized", num: true, title: "Realized since the position opened", class: (p) => sign(p.realized_pnl), render: (p) => pnl(p.realized_pnl) },
    { key: "strategy_status", label: "Strategy", render: (p) => <Badge text={p.strategy_status} kind={`strategy-${p.strategy_status.toLowerCase()}`} /> },
    { key: "opened_at", label: "Opened", render: (p) => <span title={dateTime(p.opened_at)}>{stamp(p.opened_at)}</span> },
    {
      key: "alert_level",
      label: "Alert",
      sortValue: severity,
      render: (p) => <AlertBadge level={p.alert_level} />,
    },
  ];
  if (canOperate.value) {
    columns.push({
      key: "actions",
      label: "",
      sortValue: () => 0,
      render: (p) => {
        if (p.quantity === 0) return <span class="muted">flat</span>;
        // A close is a market order: refused while its symbol is halted. Halting the strategy is not.
        const { halted, halt } = symbolHalt(p.symbol, p);
        const refused = halted ? closeRefusal(p.symbol, halt) : null;
        return (
          <span class="pos-actions">
            <button class="btn danger" data-testid={`close-${p.symbol}`} disabled={halted} title={refused ?? `Sell all ${p.quantity} at market`} onClick={act("close", p)}>
              Close
            </button>
            <button
              class="btn"
              data-testid={`partial-${p.symbol}`}
              disabled={halted || p.quantity < 2}
              title={refused ?? (p.quantity < 2 ? "One share: use Close" : "Sell part of the position at market")}
              onClick={act("partial", p)}
            >
              Partial
            </button>
            <button
              class="btn"
              data-testid={`halt-${p.symbol}`}
              title={p.strategy_status === "Halted" ? "Already managed by hand; halting again cancels its working orders" : "Stop the strategy managing this position"}
              onClick={act("halt", p)}
            >
              Halt
            </button>
          </span>
        );
      },
    });
  }

  return (
    <div data-testid="tab-positions">
      <Section
        title={
          <>
            Open positions{" "}
<span class="muted">· {open.length} open · marked to the last trade</span>
          </>
        }
        actions={
          <button class="btn ghost" onClick={positions.reload} title="Marks refresh every 10 s and on every fill; reload now">
            ↻ Refresh
          </button>
        }
      >
        <div class="stats" data-testid="positions-stats">
          <Stat label="Open" value={int(open.length)} testid="stat-open-positions" />
          <Stat label="Exposure" value={money(exposure)} testid="stat-exposure" />
          <Stat label="Cost basis" value={money(basis)} />
          <Stat label="Unrealized" value={pnl(unrealized)} cls={sign(unrealized)} testid="stat-unrealized" />
          <Stat label="Unrealized %" value={pct(basis ? (unrealized / basis) * 100 : null)} cls={sign(unrealized)} />
          <Stat label="Realized (open positions)" value={pnl(realized)} cls={sign(realized)} />
          <Stat
            label="Alerts"
            value={critical + warning === 0 ? <span class="up">none</span> : <>{critical > 0 && <span class="down">{critical} critical</span>}{critical > 0 && warning > 0 && " · "}{warning > 0 && <span class="warn">{warning} warning</span>}</>}
            testid="stat-alerts"
          />
          <Stat
            label="Unprotected"
            value={
              !reported ? "—" : bare === 0 ? <span class="up">none</span> : <span class="warn">⚠ {int(bare)} open without a stop</span>
            }
            testid="stat-unprotected"
          />
        </div>
        <CloseWarningBanner rows={rows} />
        {risk.value?.trading_state === "HALTED" && (
          <div class="banner info">Trading is halted. Positions can still be closed; strategies place no new orders until trading resumes.</div>
        )}
        <ErrorBanner error={positions.error} />
        {!positions.data && !positions.error ? (
          <div class="note">Loading positions…</div>
        ) : (
          <Table
            testid="positions-table"
            columns={columns}
            rows={rows}
            rowKey={(p) => p.symbol}
            sort={{ key: "alert_level", desc: true }}
            rowClass={(p) => (p.alert_level === "CRITICAL" ? "pos-critical" : p.alert_level === "WARNING" ? "pos-warning" : "")}
            onRowClick={(p) => select(selected === p.symbol ? null : p.symbol)}
            selected={selected}
            empty="No open positions. Strategies open them from the watchlist (Radar tab), or place a BUY from the Orders tab."
          />
        )}
        {rows.length > 0 && !selected && <div class="note">Select a position to see its chart and today's fills.</div>}
      </Section>

      {selected && (
        <PositionDetail
          symbol={selected}
          position={selectedRow}
          loaded={!!positions.data}
          onClose={() => select(null)}
          onAct={(kind, p) => setAsk({ kind, position: p })}
        />
      )}

      {ask?.kind === "close" && (
        <Confirm
          title={`Close ${ask.position.symbol}`}
          confirmLabel={`Sell ${int(ask.position.quantity)} at market`}
          danger
          onClose={() => setAsk(null)}
          onConfirm={async () => {
            const r = await post<{ close_order_client_order_id: string; status: string }>("/api/positions/close", { symbol: ask.position.symbol });
            notify("ok", `Close order for ${ask.position.symbol} sent (${r.close_order_client_order_id}, ${r.status}).`);
            positions.reload();
            loadAccount();
          }}
        >
          <CloseSummary p={ask.position} qty={ask.position.quantity} />
        </Confirm>
      )}
      {ask?.kind === "partial" && <PartialClose p={ask.position} onClose={() => setAsk(null)} onDone={positions.reload} />}
      {ask?.kind === "halt" && (
        <Confirm
          title={`Halt the strategy on ${ask.position.symbol}`}
          confirmLabel="Halt strategy"
          danger
          reason
          onClose={() => setAsk(null)}
          onConfirm={async (reason) => {
            const r = await post<{ symbol: string; strategy_status: string }>("/api/positions/halt", { symbol: ask.position.symbol, reason });
            notify("ok", `${r.symbol}: strategy ${r.strategy_status}. The position stays open and is yours to manage.`);
            positions.reload();
          }}
        >
          {ask.position.strategy_status === "Halted" && (
            <div class="banner info">{ask.position.symbol} is already managed by hand (Halted). Halting again cancels any of its working orders.</div>
          )}
          <p>
            The strategy stops managing <strong>{ask.position.symbol}</strong>: its working orders (stops, targets) are cancelled and it will not exit
            the position. The <strong>{int(ask.position.quantity)} shares stay open</strong> (worth {money(marketValue(ask.position))}, unrealized{" "}
            <span class={sign(ask.position.unrealized_pnl)}>{pnl(ask.position.unrealized_pnl)}</span>) until you close them.
          </p>
        </Confirm>
      )}
    </div>
  );
}

function AlertBadge({ level }: { level: string }) {
  const kind = level === "CRITICAL" ? "critical" : level === "WARNING" ? "warning" : "normal";
  return (
    <span class={`badge pos-alert ${kind}`} data-testid="alert-level" title={kind === "normal" ? `No alert (${level})` : `${level}: check the stop and the loss limit`}>
      {kind === "critical" ? "▲ " : kind === "warning" ? "● " : ""}
      {kind === "normal" ? "NORMAL" : level}
    </span>
  );
}

function LiveNote() {
  return mode.value === "LIVE" ? (
    <div class="banner error">
      <strong>LIVE</strong> This sends a real order to the broker.
    </div>
  ) : null;
}

/** What a market sell of `qty` shares would do, at the last mark. */
function CloseSummary({ p, qty }: { p: Position; qty: number }) {
  const proceeds = qty * p.market_price;
  const est = p.average_entry_price === null ? null : (p.market_price - p.average_entry_price) * qty;
  return (
    <>
      <p>
        Sells <strong>{int(qty)}</strong> of {int(p.quantity)} {p.symbol} shares <strong>at market</strong>. The fill price may differ from the last mark.
      </p>
      <dl class="kv pos-kv-tight">
        <dt>Last mark</dt>
        <dd>{price(p.market_price)}</dd>
        <dt>Average entry</dt>
        <dd>{price(p.average_entry_price)}</dd>
        <dt>Proceeds at the mark</dt>
        <dd>{money(proceeds)}</dd>
        <dt>P&amp;L realized at the mark</dt>
        <dd class={sign(est)}>{pnl(est)}</dd>
        {qty < p.quantity && (
          <>
            <dt>Left open</dt>
            <dd>{int(p.quantity - qty)} shares</dd>
          </>
        )}
      </dl>
      <LiveNote />
    </>
  );
}

function PartialClose({ p, onClose, onDone }: { p: Position; onClose: () => void; onDone: () => void }) {
  const half = Math.max(1, Math.floor(p.quantity / 2));
  const [qty, setQty] = useState(String(half));
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<ApiError | undefined>();
  const n = Number(qty);
  const valid = qty.trim() !== "" && Number.isInteger(n) && n >= 1 && n <= p.quantity - 1;
  const localError =
    qty.trim() === "" ? "Enter a quantity." : !Number.isInteger(n) ? "Whole shares only." : n < 1 ? "At least 1 share." : n > p.quantity - 1 ? `At most ${p.quantity - 1}: to sell all ${p.quantity}, use Close.` : undefined;
  const serverField = error?.fieldErrors["quantity"];
  const otherError = error && !serverField ? error : undefined;
  const submit = async (e: Event) => {
    e.preventDefault();
    if (!valid) return;
    setBusy(true);
    setError(undefined);
    try {
      const r = await post<{ close_order_client_order_id: string; status: string }>("/api/positions/close", { symbol: p.symbol, quantity: n });
      notify("ok", `Sell ${n} ${p.symbol} sent (${r.close_order_client_order_id}, ${r.status}).`);
      onDone();
      loadAccount();
      onClose();
    } catch (err) {
      setError(err instanceof ApiError ? err : new ApiError(0, "CLIENT", String(err)));
    } finally {
      setBusy(false);
    }
  };
  return (
    <Modal title={`Partially close ${p.symbol}`} onClose={onClose} testid="partial-close">
      <form onSubmit={submit} noValidate>
        <Field label={`Shares to sell (1 – ${int(p.quantity - 1)} of ${int(p.quantity)})`} error={serverField ?? localError}>
          <input
            name="quantity"
            type="number"
            inputMode="numeric"
            min={1}
            max={p.quantity - 1}
            step={1}
            value={qty}
            onInput={(e) => {
              setQty(e.currentTarget.value);
              setError(undefined);
            }}
            autoFocus
            required
          />
        </Field>
        <div class="pos-quick">
          {[0.25, 0.5, 0.75].map((f) => {
            const q = Math.floor(p.quantity * f);
            return q >= 1 && q <= p.quantity - 1 ? (
              <button type="button" class="btn ghost" onClick={() => setQty(String(q))}>
                {f * 100}% ({int(q)})
              </button>
            ) : null;
          })}
        </div>
        {valid && <CloseSummary p={p} qty={n} />}
        <ErrorBanner error={otherError} />
        <div class="modal-actions">
          <button type="button" class="btn ghost" onClick={onClose}>
            Cancel
          </button>
          <button type="submit" class="btn danger" disabled={busy || !valid}>
            {busy ? "Working…" : valid ? `Sell ${int(n)} at market` : "Sell at market"}
          </button>
        </div>
      </form>
    </Modal>
  );
}

// ---------------------------------------------------------------------------------------------
// Detail: chart and today's fills

interface Fill {
  execution_id: string;
  timestamp: string;
  price: number;
  quantity: number;
  fee: number;
  side: "BUY" | "SELL";
  client_order_id: string;
}

const TERMINAL = new Set(["FILLED", "CANCELED", "REJECTED", "EXPIRED"]);

function PositionDetail({
  symbol,
  position,
  loaded,
  onClose,
  onAct,
}: {
  symbol: string;
  position: Position | null;
  loaded: boolean;
  onClose: () => void;
  onAct: (kind: "close" | "partial" | "halt", p: Position) => void;
}) {
  // Keep the last figures of a position that has just closed, so the chart stays in view.
  const last = useRef<Position | null>(null);
  if (position) last.current = position;
  const p = position ?? (last.current?.symbol === symbol ? last.current : null);

  // Executions of finished orders never change: fetch each once.
  const cache = useRef(new Map<string, OrderDetail>());
  const fills = useLoad(async (): Promise<Fill[]> => {
    const orders = await get<Order[]>(withQuery("/api/orders", { symbol, date: todayNy(), limit: 100 }));
    const details = await Promise.all(
      orders
        .filter((o) => o.filled_quantity > 0)
        .map(async (o) => {
          const hit = cache.current.get(o.client_order_id);
          if (hit && hit.filled_quantity === o.filled_quantity && TERMINAL.has(hit.status)) return hit;
          const d = await get<OrderDetail>(`/api/orders/${encodeURIComponent(o.client_order_id)}`);
          cache.current.set(o.client_order_id, d);
          return d;
        }),
    );
    return details
      .flatMap((d) => d.executions.map((x) => ({ ...x, side: d.side, client_order_id: d.client_order_id })))
      .sort((a, b) => Date.parse(a.timestamp) - Date.parse(b.timestamp));
  }, [symbol]);
  const reloadFills = useThrottled(fills.reload, 1000);
  useEvents(
    ["execution.created"],
    useMemo(() => (e: StreamEvent) => e.data?.symbol === symbol && reloadFills(), [symbol, reloadFills]),
  );

  const marks = useMemo<Mark[]>(
    () => (fills.data ?? []).map((f) => ({ time: f.timestamp, price: f.price, side: f.side, label: `${f.side} ${f.quantity} @ ${price(f.price)}` })),
    [fills.data],
  );

  // The day's bars, live; the position's entry price as a level.
  const from = p?.opened_at ? undefined : null;

  // A close is a market order: refused while the symbol is halted.
  const { halted, halt } = symbolHalt(symbol, position ?? undefined);
  const refused = halted ? closeRefusal(symbol, halt) : null;

  const bought = (fills.data ?? []).filter((f) => f.side === "BUY").reduce((s, f) => s + f.quantity, 0);
  const sold = (fills.data ?? []).filter((f) => f.side === "SELL").reduce((s, f) => s + f.quantity, 0);
  const fees = (fills.data ?? []).reduce((s, f) => s + f.fee, 0);

  const fillColumns: Column<Fill>[] = [
    { key: "timestamp", label: "Time", render: (f) => <span title={dateTime(f.timestamp)}>{time(f.timestamp)}</span> },
    { key: "side", label: "Side", render: (f) => <Badge text={f.side} /> },
    { key: "quantity", label: "Qty", num: true, render: (f) => int(f.quantity) },
    { key: "price", label: "Price", num: true, render: (f) => price(f.price) },
    { key: "notional", label: "Notional", num: true, sortValue: (f) => f.price * f.quantity, render: (f) => money(f.price * f.quantity) },
    { key: "fee", label: "Fee", num: true, render: (f) => money(f.fee) },
    { key: "client_order_id", label: "Order", render: (f) => <span class="mono">{f.client_order_id}</span> },
  ];

  return (
    <Section
      title={
        <>
          {symbol} <span class="muted">· since {p?.opened_at ? stamp(p.opened_at) : "—"} NY</span>
          {p && (
            <>
              {" "}
              <AlertBadge level={p.alert_level} /> <HaltBadge symbol={symbol} row={p} />
            </>
          )}
        </>
      }
      actions={
        <>
          <a class="btn" href={href("orders", { symbol })} data-testid="position-orders-link">
            {symbol} orders →
          </a>
          {p && position && position.quantity > 0 && canOperate.value && (
            <>
              <button class="btn danger" disabled={halted} title={refused ?? undefined} onClick={() => onAct("close", position)}>
                Close
              </button>
              {position.quantity > 1 && (
                <button class="btn" disabled={halted} title={refused ?? undefined} onClick={() => onAct("partial", position)}>
                  Partial
                </button>
              )}
            </>
          )}
          <button class="btn ghost" onClick={onClose} aria-label="Close the detail">
            ✕
          </button>
        </>
      }
    >
      <div data-testid="position-detail">
        {loaded && !position && <div class="banner info">{symbol} is no longer open{p ? "; the figures below are its last." : "."}</div>}
        {position && refused && (
          <div class="banner info" data-testid="position-halted">
            {refused} Its strategy can still be halted, and an emergency halt's exit waits at the venue for the reopen.
          </div>
        )}
        {p && (
          <div class="stats">
            <Stat label="Quantity" value={int(p.quantity)} />
            <Stat label="Avg entry" value={price(p.average_entry_price)} />
            <Stat label="Market" value={price(p.market_price)} />
            <Stat label="Value" value={money(marketValue(p))} />
            <Stat label="Unrealized" value={`${pnl(p.unrealized_pnl)} (${pct(unrealizedPct(p))})`} cls={sign(p.unrealized_pnl)} />
            <Stat label="Realized" value={pnl(p.realized_pnl)} cls={sign(p.realized_pnl)} />
            <Stat label="Strategy" value={<Badge text={p.strategy_status} kind={`strategy-${p.strategy_status.toLowerCase()}`} />} />
          </div>
        )}
        <div class="pos-chart">
          {from !== null ? (
            <CandleChart symbol={symbol} marks={marks} levels={{ entry: p?.average_entry_price ?? null }} height={320} testid="price-chart" />
          ) : (
            <div class="note">{loaded ? `No opening time for ${symbol}: cannot place the chart.` : "Loading…"}</div>
          )}
        </div>
        <h3 class="pos-subhead">
          Fills today{" "}
          <span class="muted pos-subnote">
            {fills.data && fills.data.length > 0 ? `· bought ${int(bought)} · sold ${int(sold)} · fees ${money(fees)}` : ""}
          </span>
        </h3>
        <ErrorBanner error={fills.error} />
        {!fills.data && !fills.error ? (
          <div class="note">Loading fills…</div>
        ) : (
          <Table
            testid="position-fills"
            columns={fillColumns}
            rows={fills.data ?? []}
            rowKey={(f) => f.execution_id}
            sort={{ key: "timestamp", desc: true }}
            empty={`No ${symbol} fills today; the position was opened on an earlier session.`}
          />
        )}
      </div>
    </Section>
  );
}
