// A symbol's chart of the day, as a dialog open from any row that names a symbol (radar,
// watchlist, position, order) or the `/` search: live candles with the day's fills as entries and
// exits, and as levels the position's entry price with the stop and target its strategy manages
// it with now (the position's `stop_loss` and `target`, which follow a stop moved to breakeven);
// with no position, the plan the latest strategy entry stated in its reason.
import { signal } from "@preact/signals";
import { useEffect, useState } from "preact/hooks";
import { get, withQuery } from "./api";
import { CandleChart, planFromReason, type Levels, type Mark } from "./candles";
import { useEvents, type StreamEvent } from "./events";
import { int, money, price } from "./format";
import { QuotedHaltBadge, useQuotedStatus } from "./halt_badge";
import { canOperate } from "./session";
import { openTicket } from "./ticket";
import type { Order, OrderDetail, Position } from "./types";
import { Modal } from "./ui";

/** The symbol whose chart is open. */
export const chartSymbol = signal<string | null>(null);

export function openChart(symbol: string) {
  chartSymbol.value = symbol;
}

/** Entries and exits of `symbol` today, and the plan of its latest strategy entry. */
async function fillsAndPlan(symbol: string): Promise<{ marks: Mark[]; levels: Levels }> {
  const orders = await get<Order[]>(withQuery("/api/orders", { symbol, limit: 100 }));
  const filled = orders.filter((o) => o.filled_quantity > 0).slice(0, 20);
  const details = await Promise.all(filled.map((o) => get<OrderDetail>(`/api/orders/${encodeURIComponent(o.client_order_id)}`).catch(() => null)));
  const marks: Mark[] = [];
  for (const d of details) {
    if (!d) continue;
    for (const e of d.executions) marks.push({ time: e.timestamp, price: e.price, side: d.side, label: `${d.side === "BUY" ? "B" : "S"} ${int(e.quantity)} @ ${price(e.price)}` });
  }
  const entry = orders.find((o) => o.side === "BUY" && o.strategy_id && o.reason);
  return { marks, levels: planFromReason(entry?.reason) };
}

/** A held position's levels: its entry, and its strategy's stop and target (none when no strategy manages it). */
function positionLevels(p: Position): Levels {
  return { entry: p.average_entry_price ?? null, stop: p.stop_loss, target: p.target };
}

export function SymbolChart({ symbol, height = 380 }: { symbol: string; height?: number }) {
  const [marks, setMarks] = useState<Mark[]>([]);
  const [levels, setLevels] = useState<Levels>({});
  const [position, setPosition] = useState<Position | null>(null);
  const loadPosition = () =>
    get<Position[]>("/api/positions").then(
      (ps) => setPosition(ps.find((p) => p.symbol === symbol && p.quantity > 0) ?? null),
      () => {},
    );
  const load = () => {
    fillsAndPlan(symbol).then(
      (r) => (setMarks(r.marks), setLevels(r.levels)),
      () => {},
    );
    loadPosition();
  };
  useEffect(load, [symbol]);
  // A fill of this symbol adds its mark at once.
  useEvents(["execution.created"], (e: StreamEvent<{ symbol: string; side: "BUY" | "SELL"; timestamp: string; price: number; quantity: number }>) => {
    if (e.data.symbol !== symbol) return;
    setMarks((m) => [...m, { time: e.data.timestamp, price: e.data.price, side: e.data.side, label: `${e.data.side === "BUY" ? "B" : "S"} ${int(e.data.quantity)} @ ${price(e.data.price)}` }]);
    load();
  });
  // Its position changing otherwise (a stop moved, the strategy stopped managing it) redraws its levels.
  useEvents(["position.updated"], (e: StreamEvent<{ symbol: string }>) => {
    if (e.data.symbol === symbol) loadPosition();
  });
  return (
    <div class="symbol-chart">
      {position && (
        <div class="muted" data-testid="chart-position">
          Holding {int(position.quantity)} @ {price(position.average_entry_price)} · unrealized {money(position.unrealized_pnl)}
        </div>
      )}
      <CandleChart symbol={symbol} marks={marks} levels={position ? positionLevels(position) : levels} height={height} />
    </div>
  );
}

/** The chart dialog (rendered once, by the shell). */
export function ChartDialog() {
  const symbol = chartSymbol.value;
  if (!symbol) return null;
  return <ChartDialogOf symbol={symbol} />;
}

function ChartDialogOf({ symbol }: { symbol: string }) {
  const status = useQuotedStatus(symbol);
  const close = () => (chartSymbol.value = null);
  return (
    <Modal
      title={
        <>
          {symbol} · one-minute bars, VWAP, day high/low <QuotedHaltBadge status={status} />
        </>
      }
      onClose={close}
      wide
      testid="chart-dialog"
    >
      <SymbolChart symbol={symbol} />
      {canOperate.value && (
        <div class="modal-actions">
          <button class="btn primary" onClick={() => (close(), openTicket(symbol, "BUY"))}>
            Buy {symbol}
          </button>
          <button class="btn danger" onClick={() => (close(), openTicket(symbol, "SELL"))}>
            Sell {symbol}
          </button>
        </div>
      )}
    </Modal>
  );
}

/** A symbol that opens its chart. */
export function SymbolLink({ symbol }: { symbol: string }) {
  return (
    <button
      type="button"
      class="linklike symbol-link"
      data-testid={`chart-${symbol}`}
      title={`${symbol}: chart`}
      onClick={(e) => {
        e.stopPropagation();
        openChart(symbol);
      }}
    >
      {symbol}
    </button>
  );
}
