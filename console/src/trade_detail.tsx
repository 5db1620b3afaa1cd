// The deep dive of one completed trade (GET /api/trades/{trade_id}): headline figures, the
// intraday price from 30 minutes before the entry to 30 minutes after the exit with every fill
// marked, the market at entry, the outcomes, the timeline and the rules that explain it.
//
// Fill marks come from the orders' executions (exact time, price, quantity and side), not from
// the timeline's FILL sentences. Self-contained: other tabs may import `TradeDeepDive` (inline)
// or `TradeDeepDiveModal` (the wide dialog, data-testid="trade-detail"); `TradeRowDive` shows a
// trade known by its row alone (a whole-desk replay's), with the average entry and exit marked.
import "./tabs/pnl.css";
import { useMemo } from "preact/hooks";
import { Fragment, type ComponentChildren } from "preact";
import { call, get, withQuery, type Envelope } from "./api";
import { compact, date, dateTime, duration, fixed, frac, int, money, pct, pnl, price, sign, time } from "./format";
import { CandleChart, planFromReason, type Mark } from "./candles";
import type { Order, OrderDetail, Trade, TradeDetail } from "./types";
import { Badge, ErrorBanner, Modal, Stat, useLoad } from "./ui";

/** One execution of an order that belongs to the trade. */
export interface TradeFill {
  execution_id: string;
  client_order_id: string;
  side: "BUY" | "SELL";
  order_type: string;
  timestamp: string;
  quantity: number;
  price: number;
  fee: number;
  reason: string | null;
}

const MINUTE = 60_000;
/** Most orders whose executions are read for one trade (a guard against odd data). */
const MAX_ORDERS = 60;

/** "MANUAL_CLOSE" → "Manual close". */
export function humanize(code: string | null | undefined): string {
  if (!code) return "—";
  const s = code.replace(/_/g, " ").toLowerCase();
  return (s.charAt(0).toUpperCase() + s.slice(1)).replace(/\b(vwap|eod|api|sma|ema|rvol)\b/gi, (w) => w.toUpperCase());
}

/** The New York dates from `from` to `to` inclusive (at most 7). */
function nyDates(from: string, to: string): string[] {
  const out: string[] = [];
  const end = date(to);
  let t = Date.parse(from);
  for (let i = 0; i < 7; i++) {
    const d = date(new Date(t).toISOString());
    if (!out.includes(d)) out.push(d);
    if (d >= end) break;
    t += 86_400_000;
  }
  if (!out.includes(end)) out.push(end);
  return out;
}

/**
 * The executions that make up `trade`: every fill of the symbol's orders of the trade's New York
 * dates whose time lies within the trade (entry = first fill, exit = last fill).
 */
export async function loadTradeFills(trade: Trade): Promise<TradeFill[]> {
  const entry = Date.parse(trade.entry_time);
  const exit = Date.parse(trade.exit_time);
  const orders: Order[] = [];
  for (const d of nyDates(trade.entry_time, trade.exit_time)) {
    let cursor: string | null | undefined = undefined;
    do {
      const env: Envelope<Order[]> = await call<Order[]>(
        "GET",
        withQuery("/api/orders", { symbol: trade.symbol, date: d, limit: 1000, cursor }),
      );
      orders.push(...env.data);
      cursor = env.meta.next_cursor;
    } while (cursor);
  }
  const relevant = orders
    .filter((o) => o.filled_quantity > 0 && Date.parse(o.submitted_at) <= exit)
    .slice(0, MAX_ORDERS);
  const details = await Promise.all(relevant.map((o) => get<OrderDetail>(`/api/orders/${encodeURIComponent(o.client_order_id)}`)));
  const fills: TradeFill[] = [];
  for (const o of details) {
    for (const e of o.executions) {
      const at = Date.parse(e.timestamp);
      if (at < entry || at > exit) continue;
      fills.push({
        execution_id: e.execution_id,
        client_order_id: o.client_order_id,
        side: o.side,
        order_type: o.order_type,
        timestamp: e.timestamp,
        quantity: e.quantity,
        price: e.price,
        fee: e.fee,
        reason: o.reason,
      });
    }
  }
  fills.sort((a, b) => Date.parse(a.timestamp) - Date.parse(b.timestamp));
  return fills;
}

/** Whether the fills found account for the trade: as many shares sold as bought, at its averages. */
function reconcile(trade: Trade, fills: TradeFill[]): string | null {
  const sum = (side: string) => fills.filter((f) => f.side === side).reduce((a, f) => a + f.quantity, 0);
  const avg = (side: string) => {
    const q = sum(side);
    return q ? fills.filter((f) => f.side === side).reduce((a, f) => a + f.quantity * f.price, 0) / q : null;
  };
  const bought = sum("BUY");
  const sold = sum("SELL");
  if (bought === 0 || sold === 0) return "The orders found do not include both the entry and the exit fills.";
  if (bought !== sold) return `The orders found bought ${int(bought)} and sold ${int(sold)} shares; the trade is flat at both ends, so some fills are missing or belong elsewhere.`;
  const eb = avg("BUY")!;
  const es = avg("SELL")!;
  if (Math.abs(eb - trade.entry_price) > 0.005 || Math.abs(es - trade.exit_price) > 0.005) {
    return `The fills average ${price(eb)} in and ${price(es)} out; the trade reports ${price(trade.entry_price)} and ${price(trade.exit_price)}.`;
  }
  return null;
}

// ---------------------------------------------------------------------------------------------
// Features at entry

interface FeatureView {
  label: string;
  value: string;
  cls?: string;
  title?: string;
}

/** 95 → "1h 35m"; 36 → "36 min". */
function minutes(m: number): string {
  const h = Math.floor(m / 60);
  return h ? `${h}h ${String(Math.round(m % 60)).padStart(2, "0")}m` : `${Math.round(m)} min`;
}

const num = (v: unknown): v is number => typeof v === "number" && Number.isFinite(v);

/** Formats the market state at entry; known fields first, in a reading order, then any others. */
function featureRows(features: Record<string, number | string | null>): FeatureView[] {
  const f = features;
  const rows: FeatureView[] = [];
  const known = new Set<string>();
  const add = (key: string, label: string, fmt: (v: any) => string, opts: { cls?: (v: any) => string; title?: string } = {}) => {
    known.add(key);
    if (!(key in f)) return;
    const v = f[key];
    rows.push({ label, value: v === null || v === undefined ? "—" : fmt(v), cls: v !== null && opts.cls ? opts.cls(v) : undefined, title: opts.title });
  };
  add("price", "Entry price", (v) => (num(v) ? price(v) : String(v)), { title: "Average entry price" });
  add("percentage_gain", "Gain on the day", (v) => (num(v) ? pct(v, 1) : String(v)), { cls: sign, title: "Versus the previous close" });
  add("relative_volume", "Relative volume", (v) => (num(v) ? `${fixed(v, 1)}×` : String(v)), { title: "Volume today against the average to this time of day" });
  add("float", "Float", (v) => (num(v) ? `${compact(v)} shares` : String(v)));
  add("change_1m", "Change, last minute", (v) => (num(v) ? pct(v) : String(v)), { cls: sign, title: "Over the last completed minute before entry" });
  add("change_5m", "Change, last 5 minutes", (v) => (num(v) ? pct(v) : String(v)), { cls: sign, title: "Over the last five completed minutes before entry" });
  add("minutes_since_open", "Time of entry", (v) => (num(v) ? `${minutes(Math.abs(v))} ${v >= 0 ? "after" : "before"} the 09:30 open` : String(v)));
  add("distance_from_high_pct", "Below the day's high", (v) => (num(v) ? (v <= 0 ? "at a new high" : `${fixed(v, 2)}% below`) : String(v)));
  add("distance_from_vwap_pct", "Versus VWAP", (v) => (num(v) ? `${fixed(Math.abs(v), 2)}% ${v >= 0 ? "above" : "below"}` : String(v)), {
    cls: (v) => (num(v) ? sign(v) : ""),
  });
  add("sector", "Sector", (v) => String(v));
  for (const [key, v] of Object.entries(f)) {
    if (known.has(key)) continue;
    const isPct = key.endsWith("_pct");
    rows.push({
      label: humanize(key.replace(/_pct$/, "")),
      value: v === null ? "—" : num(v) ? (isPct ? pct(v) : Number.isInteger(v) ? int(v) : fixed(v, 4)) : String(v),
    });
  }
  return rows;
}

// ---------------------------------------------------------------------------------------------
// The deep dive

interface Loaded {
  detail: TradeDetail;
  fills: TradeFill[];
  fillsError: string | null;
}

async function loadAll(tradeId: string): Promise<Loaded> {
  const detail = await get<TradeDetail>(`/api/trades/${encodeURIComponent(tradeId)}`);
  try {
    const fills = await loadTradeFills(detail.trade);
    return { detail, fills, fillsError: null };
  } catch (e) {
    return { detail, fills: [], fillsError: e instanceof Error ? e.message : String(e) };
  }
}

/** The deep dive of one trade, inline. */
export function TradeDeepDive({ tradeId, testid }: { tradeId: string; testid?: string }) {
  const res = useLoad(() => loadAll(tradeId), [tradeId]);
  return (
    <div class="trade-detail" data-testid={testid}>
      <ErrorBanner error={res.error} />
      {!res.data && !res.error && <div class="note">Loading trade {tradeId}…</div>}
      {res.data && <DeepDiveBody data={res.data} />}
    </div>
  );
}

/** The deep dive in a wide dialog (data-testid="trade-detail"). */
export function TradeDeepDiveModal({ tradeId, onClose }: { tradeId: string; onClose: () => void }) {
  return (
    <Modal wide title={<>Trade {tradeId}</>} onClose={onClose} testid="trade-detail">
      <TradeDeepDive tradeId={tradeId} />
    </Modal>
  );
}

/** A trade's headline: symbol, label, strategy, times, and its figures. */
function TradeHeadline({ t }: { t: Trade }) {
  const when = (iso: string) => (date(t.entry_time) === date(t.exit_time) ? time(iso) : dateTime(iso));
  return (
    <div class={`trade-headline ${t.winner_loser_label.toLowerCase()}`}>
      <div class="trade-title">
        <span class="trade-symbol">{t.symbol}</span>
        <Badge text={t.winner_loser_label} />
        <span class="muted">
          {t.strategy_id ?? "manual (operator)"} · {t.mode} · {date(t.entry_time)} {time(t.entry_time)} → {when(t.exit_time)} NY
        </span>
      </div>
      <div class="stats">
        <Stat label="Net P&L" value={pnl(t.net_pnl)} cls={sign(t.net_pnl)} testid="trade-net-pnl" />
        <Stat label="Return" value={frac(t.return_pct)} cls={sign(t.return_pct)} />
        <Stat label="R multiple" value={t.r_multiple === null ? "—" : `${t.r_multiple > 0 ? "+" : ""}${fixed(t.r_multiple, 2)}R`} cls={sign(t.r_multiple)} />
        <Stat label="Hold" value={duration(t.hold_seconds)} />
        <Stat label="Shares (max held)" value={int(t.quantity)} />
        <Stat label="Entry → exit" value={`${price(t.entry_price)} → ${price(t.exit_price)}`} />
        <Stat label="Gross P&L" value={pnl(t.gross_pnl)} cls={sign(t.gross_pnl)} />
        <Stat label="Fees" value={money(t.fees)} />
        <Stat label="Exit reason" value={humanize(t.exit_reason)} />
      </div>
    </div>
  );
}

/** The stop a trade's R multiple implies: entry − (exit − entry) / R; null without one. */
const impliedStop = (t: Trade) => (t.r_multiple ? t.entry_price - (t.exit_price - t.entry_price) / t.r_multiple : null);

/**
 * A trade known by its row only (a whole-desk replay's: its orders, fills and timeline stayed in
 * the replay's own database, removed after the run), inline: the headline and the data broker's
 * one-minute bars around it, with the average entry and exit marked and the stop its R multiple
 * implies. `note` says where the row comes from.
 */
export function TradeRowDive({ trade: t, note, testid }: { trade: Trade; note?: ComponentChildren; testid?: string }) {
  const from = new Date(Date.parse(t.entry_time) - 30 * MINUTE).toISOString();
  const to = new Date(Date.parse(t.exit_time) + 30 * MINUTE).toISOString();
  const marks: Mark[] = [
    { time: t.entry_time, price: t.entry_price, side: "BUY", label: `B ${int(t.quantity)} @ ${price(t.entry_price)}` },
    { time: t.exit_time, price: t.exit_price, side: "SELL", label: `S @ ${price(t.exit_price)}` },
  ];
  return (
    <div class="trade-detail" data-testid={testid} data-trade={t.trade_id}>
      <TradeHeadline t={t} />
      <section class="dd-block">
        <h3>
          Price {time(from)}–{time(to)} NY <span class="muted">· one-minute candles, volume, VWAP; ▲ average entry, ▼ average exit; the stop the R multiple implies</span>
        </h3>
        <CandleChart symbol={t.symbol} from={from} to={to} marks={marks} levels={{ stop: impliedStop(t) }} height={280} testid="desk-trade-chart" />
        {note && <div class="note muted dd-note">{note}</div>}
      </section>
    </div>
  );
}

function DeepDiveBody({ data }: { data: Loaded }) {
  const { detail, fills, fillsError } = data;
  const t = detail.trade;
  const o = detail.outcomes;
  const entryMs = Date.parse(t.entry_time);
  const exitMs = Date.parse(t.exit_time);
  const sameDay = date(t.entry_time) === date(t.exit_time);
  const when = (iso: string) => (sameDay ? time(iso) : dateTime(iso));
  const from = new Date(entryMs - 30 * MINUTE).toISOString();
  const to = new Date(exitMs + 30 * MINUTE).toISOString();
  const exact = fills.length > 0;
  const marks = useMemo<Mark[]>(
    () =>
      exact
        ? fills.map((f) => ({ time: f.timestamp, price: f.price, side: f.side, label: `${f.side} ${f.quantity}` }))
        : [
            { time: t.entry_time, price: t.entry_price, side: "BUY", label: "average entry" },
            { time: t.exit_time, price: t.exit_price, side: "SELL", label: "average exit" },
          ],
    [fills, t.trade_id],
  );
  const mismatch = exact ? reconcile(t, fills) : null;
  // The plan: the entry order's stated stop and target; else the stop the R multiple implies.
  const levels = useMemo(() => {
    const plan = planFromReason(fills.find((f) => f.side === "BUY" && f.reason)?.reason);
    return { stop: plan.stop ?? impliedStop(t), target: plan.target };
  }, [fills, t.trade_id]);
  const features = detail.features ? featureRows(detail.features) : [];

  return (
    <>
      <TradeHeadline t={t} />

      <section class="dd-block">
        <h3>
          Price {time(from)}–{time(to)} NY <span class="muted">· one-minute candles, volume, VWAP; ▲ buys, ▼ sells; stop and target</span>
        </h3>
        <CandleChart symbol={t.symbol} from={from} to={to} marks={marks} levels={levels} height={320} testid="price-chart" />
        {!exact && (
          <div class="note warn">
            {fillsError
              ? `The fills could not be read from the orders (${fillsError}); the marks show the trade's average entry and exit.`
              : "No fills of this trade were found among the orders; the marks show the trade's average entry and exit."}
          </div>
        )}
        {mismatch && <div class="note warn">{mismatch}</div>}
        {exact && (
          <div class="table-wrap dd-fills">
            <table data-testid="trade-fills">
              <thead>
                <tr>
                  <th>Time (NY)</th>
                  <th>Side</th>
                  <th class="num">Shares</th>
                  <th class="num">Price</th>
                  <th class="num">Value</th>
                  <th class="num">Fee</th>
                  <th>Order</th>
                  <th>Order reason</th>
                </tr>
              </thead>
              <tbody>
                {fills.map((f) => (
                  <tr key={f.execution_id}>
                    <td class="mono">{when(f.timestamp)}</td>
                    <td>
                      <Badge text={f.side} />
                    </td>
                    <td class="num">{int(f.quantity)}</td>
                    <td class="num">{price(f.price)}</td>
                    <td class="num">{money(f.quantity * f.price)}</td>
                    <td class="num">{money(f.fee)}</td>
                    <td class="mono muted">
                      {f.client_order_id} · {f.order_type}
                    </td>
                    <td class="muted dd-reason" title={f.reason ?? undefined}>
                      {f.reason ?? ""}
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        )}
      </section>

      <div class="grid2 dd-grid">
        <section class="dd-block">
          <h3>Market at entry</h3>
          {features.length === 0 ? (
            <div class="note">No market data covered the entry, so no features were recorded.</div>
          ) : (
            <dl class="kv" data-testid="trade-features">
              {features.map((r) => (
                <Fragment key={r.label}>
                  <dt title={r.title}>{r.label}</dt>
                  <dd class={r.cls}>{r.value}</dd>
                </Fragment>
              ))}
            </dl>
          )}
        </section>
        <section class="dd-block">
          <h3>Outcome</h3>
          <dl class="kv" data-testid="trade-outcomes">
            <dt>Return</dt>
            <dd class={sign(o.return_pct)}>{frac(o.return_pct)} of the entry value</dd>
            <dt>R multiple</dt>
            <dd class={sign(o.r_multiple)}>{o.r_multiple === null ? "— (the entry had no planned stop)" : `${fixed(o.r_multiple, 2)}R`}</dd>
            <dt>Hold</dt>
            <dd>{duration(o.hold_seconds)}</dd>
            <dt title="Maximum favourable excursion: the best price reached while open, over the entry price">Best move (MFE)</dt>
            <dd class={o.mfe ? "up" : ""}>
              {o.mfe === null ? "— (no bars cover the trade)" : `+${frac(o.mfe)} · best ${price(t.entry_price * (1 + o.mfe))}`}
            </dd>
            <dt title="Maximum adverse excursion: the worst price reached while open, below the entry price">Worst move (MAE)</dt>
            <dd class={o.mae ? "down" : ""}>
              {o.mae === null ? "— (no bars cover the trade)" : `−${frac(o.mae)} · worst ${price(t.entry_price * (1 - o.mae))}`}
            </dd>
            <dt>Exit reason</dt>
            <dd>
              {humanize(o.exit_reason)} <span class="mono muted">{o.exit_reason}</span>
            </dd>
          </dl>
        </section>
      </div>

      <div class="grid2 dd-grid">
        <section class="dd-block">
          <h3>Timeline</h3>
          {detail.events.length === 0 ? (
            <div class="note">No events were recorded for this trade.</div>
          ) : (
            <ul class="timeline" data-testid="trade-events">
              {detail.events.map((e, i) => (
                <li key={i}>
                  <span class="mono">{when(e.timestamp)}</span>
                  <span class={`badge ev-${e.kind.toLowerCase()}`}>{humanize(e.kind)}</span>
                  <span class="wrap">{e.detail}</span>
                </li>
              ))}
            </ul>
          )}
        </section>
        <section class="dd-block">
          <h3>Why it was entered and exited</h3>
          {detail.explanations.length === 0 ? (
            <div class="note">No rule explains this trade.</div>
          ) : (
            <ul class="dd-explanations" data-testid="trade-explanations">
              {detail.explanations.map((x, i) => (
                <li key={i}>
                  <span class="muted">{i === 0 ? "Entry" : "Exit"}</span>
                  <code>{x.rule}</code>
                  <span class="wrap">{x.text}</span>
                </li>
              ))}
            </ul>
          )}
        </section>
      </div>
    </>
  );
}
