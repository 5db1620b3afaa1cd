// The order ticket, open from anywhere (the Orders tab's button, a chart, the `b`/`s` hotkeys):
// symbol, side, shares or a dollar amount, type, limit/stop, time in force; the live last, bid
// and ask; and, before sending, the risk preview — `POST /api/orders/preview` runs the same risk
// gate as the order without placing it, and answers with the verdict (approved, or the rule,
// its limit and the current value that would refuse it), the estimated cost and the buying
// power left. A refusal after sending names the rule in words too. A symbol its venue halted
// (the quote says HALTED) takes limit orders only: a market or stop order is not sent.
// A BUY carries exit legs held at the broker (ticket_legs.tsx): a stop prefilled from the risk
// settings, an optional take-profit, and a "size by risk" mode that buys the shares losing a
// dollar amount down to the stop; the chart of the symbol shows entry, stop and target before
// the order is sent. Outside the regular session (CONTRACT §12) the venue takes only a LIMIT DAY
// order marked extended hours: the ticket opens as one there, its limit prefilled past the ask
// (a buy) or the bid (a sell) by `risk_controls.extended_hours_entry_offset_pct`; its "Extended
// hours" box forces LIMIT and DAY; and it says before sending which order the session refuses.
import { signal } from "@preact/signals";
import { useEffect, useRef, useState } from "preact/hooks";
import { ApiError, get, mode, post, withQuery } from "./api";
import { useEvents } from "./events";
import { LEG_FIELDS, legErrors, legNumber, orderBody, prefillStop, sharesForRisk } from "./bracket";
import { int, inputNumber, money, price } from "./format";
import { haltRefusal, haltWords, refusalWords, refusedWhileHalted } from "./halts";
import { SESSION_SHORT, duringSession, extendedHoursLimit, extendedHoursOrder, marketNow, outsideSessionWords, sessionRefusal } from "./market_session";
import { canOperate } from "./session";
import { account, loadMarketSession, marketSession, risk } from "./store";
import type { OrderDetail, Position, Quote, SymbolStatus } from "./types";
import { Badge, Field, Modal, notify, refusalText, useLoad } from "./ui";
import { LegFields, RiskReward, TicketChart, useTicketSettings } from "./ticket_legs";

export const ORDER_TYPES = ["MARKET", "LIMIT", "STOP", "STOP_LIMIT"];
export const TIFS: Record<string, string> = {
  DAY: "Works until the session closes",
  GTC: "Works until filled or cancelled",
  IOC: "Fills what it can at once; the rest is cancelled",
};

/** The ticket open now, with the symbol and side it opened with. */
export const ticket = signal<{ symbol: string; side: "BUY" | "SELL" } | null>(null);
/** Orders placed from the ticket, for views that show them at once. */
export const placedOrder = signal<OrderDetail | null>(null);

export function openTicket(symbol = "", side: "BUY" | "SELL" = "BUY") {
  if (!canOperate.value) return;
  ticket.value = { symbol, side };
}

/** The risk rules, in words. */
export const RULE_WORDS: Record<string, string> = {
  MAX_DAILY_LOSS: "Daily loss limit",
  MAX_POSITION_SIZE: "Maximum position size",
  MAX_TRADES_PER_DAY: "Maximum trades per day",
  ACTIVE_WATCHLIST_LIMIT: "Active watchlist limit",
  OPEN_POSITION_LIMIT: "Open position limit",
  SYMBOL_BLOCKED: "Symbol blocked",
  BUYING_POWER: "Buying power",
  PRICE_COLLAR: "Price collar (distance from the last trade)",
  MAX_ORDER_VALUE: "Maximum order value",
  FILL_WHILE_HALTED: "Fill while halted",
  BROKER_STOP_MISSING: "Stop not resting at the broker",
};

/** A risk figure as the rule means it: money, a percentage, a count or shares. */
export function figure(rule: string | null | undefined, v: unknown): string {
  if (v === null || v === undefined) return "—";
  if (typeof v === "object") {
    const b = v as { block_scope?: string; reason?: string };
    return b.block_scope ? `blocked ${b.block_scope}: ${b.reason ?? ""}` : JSON.stringify(v);
  }
  if (typeof v !== "number") return String(v);
  switch (rule) {
    case "MAX_DAILY_LOSS":
    case "BUYING_POWER":
    case "MAX_ORDER_VALUE":
      return money(v);
    case "PRICE_COLLAR":
      return `${v}%`;
    case "MAX_POSITION_SIZE":
      return `${int(v)} sh`;
    default:
      return int(v);
  }
}

interface Verdict {
  code: string;
  rule: string | null;
  limit: unknown;
  current: unknown;
  message: string;
  existing_client_order_id: string | null;
}

export interface Preview {
  approved: boolean;
  verdict: Verdict | null;
  reference_price: number | null;
  estimated_cost: number | null;
  buying_power: number;
  buying_power_after: number;
  /** Quantity × (reference − stop) with a stop leg; null without legs. */
  risk_to_stop: number | null;
  /** Quantity × (target − reference) with a take-profit leg; null without one. */
  reward_to_target: number | null;
}

/**
 * The refusal of an order, with its rule in words and the figures the contract gives. One made
 * outside the regular session says what is taken and when the session opens, and offers to make
 * the order the extended-hours limit the venue takes (`onExtended`).
 */
export function Refusal({ error, onExtended }: { error: ApiError; onExtended?: () => void }) {
  const d = error.detail;
  if (error.code === "OUTSIDE_REGULAR_SESSION") {
    return (
      <div class="banner error" role="alert" data-testid="order-refusal" data-code={error.code}>
        <strong>{error.code}</strong> <span data-testid="refusal-session">{outsideSessionWords(d, marketNow())}</span> Nothing was sent to the broker.
        {onExtended && (
          <div class="ord-refusal-detail">
            <button type="button" class="btn" data-testid="make-extended" onClick={onExtended}>
              Make it an extended-hours limit
            </button>
          </div>
        )}
      </div>
    );
  }
  const halted = error.code === "SYMBOL_HALTED" ? refusalWords(d) : null;
  if (halted) {
    return (
      <div class="banner error" role="alert" data-testid="order-refusal" data-code={error.code}>
        <strong>{error.code}</strong> {halted}
      </div>
    );
  }
  const rule = typeof d["rule"] === "string" ? d["rule"] : null;
  const extra = Object.entries(d).filter(([k, v]) => !["field", "reason", "errors", "rule", "limit", "current"].includes(k) && (typeof v === "string" || typeof v === "number"));
  return (
    <div class="banner error" role="alert" data-testid="order-refusal" data-code={error.code}>
      <strong>{error.code}</strong> {error.message}
      {(rule || extra.length > 0) && (
        <div class="ord-refusal-detail">
          {rule && (
            <span data-testid="refusal-rule">
              {RULE_WORDS[rule] ?? rule} <span class="mono muted">{rule}</span>
            </span>
          )}
          {rule && "limit" in d && (
            <span>
              limit <strong>{figure(rule, d["limit"])}</strong>
            </span>
          )}
          {rule && "current" in d && (
            <span>
              current <strong>{figure(rule, d["current"])}</strong>
            </span>
          )}
          {extra.map(([k, v]) => (
            <span>
              {k} <strong>{String(v)}</strong>
            </span>
          ))}
        </div>
      )}
    </div>
  );
}

function PreviewPanel({ preview, error, pending, blocked }: { preview: Preview | null; error: ApiError | null; pending: boolean; blocked: string | null }) {
  if (blocked) {
    return (
      <div class="risk-preview refused" data-testid="risk-preview" data-approved="halted">
        <strong>Not sendable</strong> {blocked}
      </div>
    );
  }
  if (error) {
    return (
      <div class="risk-preview refused" data-testid="risk-preview" data-approved="invalid">
        <strong>Not sendable</strong> {refusalText(error)}
      </div>
    );
  }
  if (!preview) return <div class="risk-preview muted" data-testid="risk-preview" data-approved="">{pending ? "Checking with the risk gate…" : "Fill in the order to see the risk gate's verdict."}</div>;
  const v = preview.verdict;
  return (
    <div class={`risk-preview ${preview.approved ? "approved" : "refused"}`} data-testid="risk-preview" data-approved={String(preview.approved)} data-rule={v?.rule ?? ""}>
      {preview.approved ? (
        <strong>✓ The risk gate would approve this order.</strong>
      ) : (
        <>
          <strong>✕ {v?.code === "OUTSIDE_REGULAR_SESSION" ? "Refused outside the regular session" : `The risk gate would refuse it: ${v?.rule ? RULE_WORDS[v.rule] ?? v.rule : v?.code.replaceAll("_", " ").toLowerCase()}`}</strong>
          {v?.rule && (
            <span>
              {" "}
              — limit <strong data-testid="preview-limit">{figure(v.rule, v.limit)}</strong>, this order <strong data-testid="preview-current">{figure(v.rule, v.current)}</strong>
            </span>
          )}
          <div class="muted">{v?.message}</div>
        </>
      )}
    </div>
  );
}

const FIELDS = ["symbol", "side", "quantity", "order_type", "limit_price", "stop_price", "time_in_force", "extended_hours", "reason", ...Object.values(LEG_FIELDS)];

/** How the ticket sizes the order: shares typed, a dollar amount, or dollars risked down to the stop. */
type Sizing = "shares" | "dollars" | "risk";

/** The ticket, when open (rendered once, by the shell). */
export function OrderTicket() {
  const t = ticket.value;
  if (!t) return null;
  return <TicketForm key={`${t.symbol}-${t.side}`} initialSymbol={t.symbol} initialSide={t.side} onClose={() => (ticket.value = null)} />;
}

function TicketForm({ initialSymbol, initialSide, onClose }: { initialSymbol: string; initialSide: "BUY" | "SELL"; onClose: () => void }) {
  const [symbol, setSymbol] = useState(initialSymbol);
  const [side, setSide] = useState<"BUY" | "SELL">(initialSide);
  const [sizing, setSizing] = useState<Sizing>("shares");
  const [quantity, setQuantity] = useState("");
  const [amount, setAmount] = useState("");
  const [riskAmount, setRiskAmount] = useState("");
  // null: the stop follows the suggestion (the setting's distance below the reference) until
  // the operator types one; an empty string then means no legs at all.
  const [legStop, setLegStop] = useState<string | null>(null);
  const [legStopLimit, setLegStopLimit] = useState("");
  const [legTarget, setLegTarget] = useState("");
  const { stopDistance: distance, extendedOffset } = useTicketSettings();
  // Opened outside the regular session: the order the venue takes there, a LIMIT DAY marked
  // extended hours, its limit following the quote (null) until one is typed.
  const [outsideAtOpen] = useState(() => !!marketSession.value && marketSession.value.session !== "REGULAR");
  const [orderType, setOrderType] = useState(outsideAtOpen ? "LIMIT" : "MARKET");
  const [extended, setExtended] = useState(outsideAtOpen);
  const [limit, setLimit] = useState<string | null>(outsideAtOpen ? null : "");
  const [stop, setStop] = useState("");
  const [tif, setTif] = useState("DAY");
  const [reason, setReason] = useState("");
  const [tried, setTried] = useState(false);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<ApiError | undefined>();
  const [quote, setQuote] = useState<Quote | null>(null);
  const [preview, setPreview] = useState<Preview | null>(null);
  const [previewError, setPreviewError] = useState<ApiError | null>(null);
  const [pending, setPending] = useState(false);
  const positions = useLoad(() => get<Position[]>("/api/positions"));

  const needsLimit = orderType === "LIMIT" || orderType === "STOP_LIMIT";
  const needsStop = orderType === "STOP" || orderType === "STOP_LIMIT";
  const sym = symbol.trim().toUpperCase();
  // The quote of the symbol typed (never one of the symbol typed before).
  const quoted = quote?.symbol === sym ? quote : null;
  const session = marketSession.value;
  const outside = !!session && session.session !== "REGULAR";
  const suggestedLimit = extended ? extendedHoursLimit(side, quoted, extendedOffset) : null;
  const limitText = limit ?? (suggestedLimit !== null ? inputNumber(suggestedLimit) : "");
  const lim = Number(limitText);
  const stp = Number(stop);
  const held = positions.data?.find((p) => p.symbol === sym && p.quantity > 0);
  const buy = side === "BUY";
  // What a share is valued at: the order's own price, else the side of the quote it meets.
  const ref = needsLimit && lim > 0 ? lim : needsStop && stp > 0 ? stp : quote ? (side === "BUY" ? quote.ask || quote.last : quote.bid || quote.last) : held ? held.market_price : null;
  // What the server checks the legs against and measures the risk from: the order's own price,
  // else the last trade of this symbol.
  const legRef = needsLimit && lim > 0 ? lim : needsStop && stp > 0 ? stp : quoted && quoted.last > 0 ? quoted.last : null;
  const suggested = buy ? prefillStop(legRef, distance) : null;
  const legs = { stop: legStop ?? (suggested !== null ? inputNumber(suggested) : ""), stopLimit: legStopLimit, target: legTarget };
  const legStopPrice = buy ? legNumber(legs.stop) : null;
  const legTargetPrice = buy && legStopPrice !== null ? legNumber(legs.target) : null;
  // Sizing by risk is for a BUY (the stop is below its entry); a SELL is sized in shares or dollars.
  const sizeBy: Sizing = !buy && sizing === "risk" ? "shares" : sizing;
  const risked = Number(riskAmount);
  // Entry for the risk sizing: the ticket's valuation (the ask for a market buy), at or above
  // the last trade the server measures from, so the preview's risk never exceeds the amount.
  const qty =
    sizeBy === "shares"
      ? Number(quantity)
      : sizeBy === "dollars"
        ? ref && Number(amount) > 0
          ? Math.floor(Number(amount) / ref)
          : NaN
        : sharesForRisk(risked, ref, legStopPrice) || NaN;

  const local: Record<string, string> = {};
  if (!sym) local.symbol = "Enter a symbol.";
  if (sizeBy === "shares") {
    if (quantity.trim() === "") local.quantity = "Enter a quantity.";
    else if (!Number.isInteger(qty) || qty < 1) local.quantity = "Whole shares, at least 1.";
  } else if (sizeBy === "risk") {
    if (riskAmount.trim() === "" || !(risked > 0)) local.quantity = "Enter the dollars to risk down to the stop.";
    else if (legStopPrice === null) local.quantity = "Enter a stop: the shares are the risk ÷ (entry − stop).";
    else if (!ref) local.quantity = "No price yet to size from.";
    else if (legStopPrice >= ref) local.quantity = `The stop must be below the entry ${price(ref)}.`;
    else if (!(qty >= 1)) local.quantity = `Less than one share: ${price(ref - legStopPrice)} a share to the stop.`;
  } else if (amount.trim() === "" || !(Number(amount) > 0)) local.quantity = "Enter a dollar amount.";
  else if (!ref) local.quantity = "No price yet to turn dollars into shares.";
  else if (!(qty >= 1)) local.quantity = `Less than one share at ${price(ref)}.`;
  if (needsLimit && (limitText.trim() === "" || !(lim > 0))) local.limit_price = "A positive limit price is required.";
  if (needsStop && (stop.trim() === "" || !(stp > 0))) local.stop_price = "A positive stop price is required.";
  const legLocal = legErrors(side, legs, legRef);
  Object.assign(local, legLocal);
  // The quote of the symbol typed says whether its venue halted it; while it does, only an
  // order with its own price may be sent (it waits at the venue for the reopen).
  const symHalted = quote?.symbol === sym && quote.trading_status === "HALTED";
  const haltBlock = symHalted ? haltRefusal(orderType, sym, quote.halt) : null;
  const sendable = Object.keys(local).length === 0 && !haltBlock;
  // What the session now refuses (the service decides; the ticket says so before sending).
  const sessionNote = sessionRefusal(session, marketNow(), orderType, tif, extended);

  const server = error?.code === "VALIDATION_ERROR" ? error.fieldErrors : {};
  const previewFields = previewError?.code === "VALIDATION_ERROR" ? previewError.fieldErrors : {};
  const fieldError = (f: string) => server[f] ?? (f === "order_type" && haltBlock ? haltBlock : tried ? local[f] : undefined);
  // A leg's problem shows at once (the stop is prefilled, so an order can be unsendable before
  // anything is typed), and so does the preview's refusal of a leg.
  const legError = (f: string) => server[f] ?? previewFields[f] ?? legLocal[f];
  const unplaced = Object.keys(server).filter((f) => !FIELDS.includes(f));
  const showBanner = error && (error.code !== "VALIDATION_ERROR" || Object.keys(server).length === 0 || unplaced.length > 0);

  const body = () =>
    orderBody({
      symbol: sym,
      side,
      quantity: qty,
      order_type: orderType,
      time_in_force: tif,
      limit_price: needsLimit ? lim : undefined,
      stop_price: needsStop ? stp : undefined,
      reason: reason.trim() || undefined,
      extended_hours: extended,
      legs,
    });

  // The live quote: at once, every 2 s while open, and on each closed minute.
  const quoteFor = useRef(sym);
  quoteFor.current = sym;
  const loadQuote = () => {
    const s = quoteFor.current;
    if (!/^[A-Z][A-Z0-9.]{0,9}$/.test(s)) return setQuote(null);
    get<Quote>(withQuery("/api/market/quote", { symbol: s })).then(
      (q) => quoteFor.current === s && setQuote(q),
      () => quoteFor.current === s && setQuote(null),
    );
  };
  useEffect(() => {
    const first = setTimeout(loadQuote, 150);
    const every = setInterval(loadQuote, 2000);
    return () => (clearTimeout(first), clearInterval(every));
  }, [sym]);
  useEvents(["bars.closed"], loadQuote);
  // A halt or a reopen changes what may be sent at once, not at the next poll.
  useEvents(["symbol.status"], (e: { data: SymbolStatus }) => e.data.symbol === quoteFor.current && loadQuote());

  // The risk preview, a moment after the order stops changing.
  const key = JSON.stringify(sendable ? body() : null);
  useEffect(() => {
    if (!sendable) {
      setPreview(null);
      setPreviewError(null);
      return;
    }
    setPending(true);
    let current = true;
    const timer = setTimeout(() => {
      post<Preview>("/api/orders/preview", body()).then(
        (p) => current && (setPreview(p), setPreviewError(null), setPending(false)),
        (e) => current && (setPreview(null), setPreviewError(e instanceof ApiError ? e : new ApiError(0, "CLIENT", String(e))), setPending(false)),
      );
    }, 250);
    return () => {
      current = false;
      clearTimeout(timer);
    };
  }, [key]);

  const change = (set: (v: string) => void, field: string) => (e: { currentTarget: { value: string } }) => {
    set(e.currentTarget.value);
    if (error && (error.code !== "VALIDATION_ERROR" || server[field])) setError(undefined);
  };
  const changeLeg = (leg: string, value: string) => {
    const set = { stop: setLegStop, stopLimit: setLegStopLimit, target: setLegTarget }[leg as "stop" | "stopLimit" | "target"];
    change(set, LEG_FIELDS[leg as keyof typeof LEG_FIELDS])({ currentTarget: { value } });
  };
  /** Extended hours on forces LIMIT and DAY, its limit following the quote until one is typed. */
  const setExtendedHours = (on: boolean) => {
    setExtended(on);
    if (on) {
      setOrderType("LIMIT");
      setTif("DAY");
      if (limit !== null && limit.trim() === "") setLimit(null);
    } else if (limit === null) setLimit(limitText); // the price shown stays
    if (error && (error.code !== "VALIDATION_ERROR" || server["extended_hours"])) setError(undefined);
  };
  /** Another type than LIMIT, or another time in force than DAY, is no extended-hours order. */
  const dropExtended = () => {
    if (!extended) return;
    setExtended(false);
    if (limit === null) setLimit(limitText);
  };
  const changeOrderType = (v: string) => {
    setOrderType(v);
    if (v !== "LIMIT") dropExtended();
  };
  const changeTif = (v: string) => {
    setTif(v);
    if (v !== "DAY") dropExtended();
  };
  /** The refusal's offer: the order as the venue takes it outside the regular session. */
  const makeExtended = () => {
    setExtendedHours(true);
    setLimit(null);
    setError(undefined);
  };

  const submit = async (e: Event) => {
    e.preventDefault();
    setTried(true);
    if (!sendable) return; // a halt's refusal included: it is shown, not sent
    setBusy(true);
    setError(undefined);
    try {
      const placed = await post<OrderDetail>("/api/orders", body());
      placedOrder.value = placed;
      notify("ok", `${placed.side} ${int(placed.quantity)} ${placed.symbol} ${placed.order_type.replace("_", " ")} placed: ${placed.status} (${placed.client_order_id}).`);
      onClose();
    } catch (err) {
      setError(err instanceof ApiError ? err : new ApiError(0, "CLIENT", String(err)));
      // Halted since the last quote: read it again so the ticket says so and holds the order.
      if (err instanceof ApiError && err.code === "SYMBOL_HALTED") loadQuote();
      // Refused for the session: the console's view of it may be behind the service's.
      if (err instanceof ApiError && (err.code === "OUTSIDE_REGULAR_SESSION" || err.code === "MARKET_CLOSED")) loadMarketSession();
    } finally {
      setBusy(false);
    }
  };

  const estimate = preview?.estimated_cost ?? (ref !== null && qty > 0 ? ref * qty : null);
  const powerAfter = preview?.buying_power_after ?? (account.value && estimate !== null ? account.value.buying_power + (side === "BUY" ? -estimate : estimate) : null);
  const halted = risk.value?.trading_state === "HALTED";
  const quotedSide = quoted ? (buy ? quoted.ask || quoted.last : quoted.bid || quoted.last) : null;
  const limitHint =
    extended && limit === null && suggestedLimit !== null && quotedSide !== null
      ? `${buy ? "Ask" : "Bid"} ${price(quotedSide)} ${buy ? "+" : "−"} ${extendedOffset}% (the risk setting); follows the quote until typed`
      : buy
        ? "Highest price paid"
        : "Lowest price accepted";
  return (
    <Modal title="Order ticket" onClose={onClose} testid="new-order-dialog">
      <form onSubmit={submit} noValidate class="ord-form">
        {mode.value === "LIVE" && (
          <div class="banner error">
            <strong>LIVE</strong> This order goes to the real brokerage account.
          </div>
        )}
        {halted && <div class="banner info">Trading is halted: the risk manager refuses new orders until trading resumes (closing positions is still allowed from Positions).</div>}
        {symHalted && (
          <div class="banner error" data-testid="ticket-halted">
            <strong>{sym} HALTED</strong> {quote.halt ? `${haltWords(quote.halt)} NY. ` : ""}Market and stop orders are refused until it reopens; a limit
            order is accepted and waits at the venue.
          </div>
        )}
        {session && outside && (
          <div class={`banner ticket-session ${sessionNote ? "error" : "info"}`} data-testid="ticket-session" data-session={session.session}>
            <span class={`session-badge ${session.session.toLowerCase().replace("_", "-")}`}>{SESSION_SHORT[session.session]}</span>
            <span>
              {sessionNote ??
                `An extended-hours LIMIT DAY order: the venue takes no other ${duringSession(session.session)}, and triggers no stop until the regular session.`}
            </span>
          </div>
        )}
        <div class="ticket-quote" data-testid="ticket-quote" data-last={quote?.last ?? ""}>
          <span>
            Last <strong>{quote ? price(quote.last) : "—"}</strong>
          </span>
          <span>
            Bid <strong class="down">{quote ? price(quote.bid) : "—"}</strong>
          </span>
          <span>
            Ask <strong class="up">{quote ? price(quote.ask) : "—"}</strong>
          </span>
          <span class="muted">Buying power {money(preview?.buying_power ?? account.value?.buying_power)}</span>
        </div>
        <div class="ord-form-grid">
          <Field label="Symbol" error={fieldError("symbol")}>
            <input name="symbol" value={symbol} onInput={change((v) => setSymbol(v.toUpperCase()), "symbol")} autoComplete="off" spellcheck={false} autoFocus={!initialSymbol} required />
          </Field>
          <Field label="Side" error={fieldError("side")}>
            <select name="side" value={side} onChange={change((v) => setSide(v as "BUY" | "SELL"), "side")} class={`ord-side-select ${side.toLowerCase()}`}>
              <option value="BUY">BUY</option>
              <option value="SELL">SELL</option>
            </select>
          </Field>
          <Field label="Size in">
            <select name="sizing" value={sizeBy} onChange={(e) => setSizing(e.currentTarget.value as Sizing)}>
              <option value="shares">Shares</option>
              <option value="dollars">Dollars</option>
              <option value="risk" disabled={!buy}>
                Risk to stop ($)
              </option>
            </select>
          </Field>
          {sizeBy === "risk" ? (
            <Field
              label="Risk (dollars to the stop)"
              error={fieldError("quantity")}
              hint={Number.isInteger(qty) && qty > 0 && ref && legStopPrice !== null ? `${int(qty)} shares: ${price(ref)} entry − ${price(legStopPrice)} stop` : "Shares = risk ÷ (entry − stop)"}
            >
              <input name="risk_amount" type="number" inputMode="decimal" min={0} step="1" value={riskAmount} onInput={change(setRiskAmount, "quantity")} required />
            </Field>
          ) : sizeBy === "shares" ? (
            <Field
              label="Quantity (shares)"
              error={fieldError("quantity")}
              hint={
                held
                  ? side === "SELL" && Number.isInteger(qty) && qty > held.quantity
                    ? `More than the ${int(held.quantity)} held: trading is long only.`
                    : `Position: ${int(held.quantity)} @ ${price(held.average_entry_price)}`
                  : side === "SELL" && sym && positions.data
                    ? `No open ${sym} position: a sell must reduce one (long only).`
                    : undefined
              }
            >
              <input name="quantity" type="number" inputMode="numeric" min={1} step={1} value={quantity} onInput={change(setQuantity, "quantity")} autoFocus={!!initialSymbol} required />
            </Field>
          ) : (
            <Field label="Amount (dollars)" error={fieldError("quantity")} hint={Number.isInteger(qty) && qty > 0 ? `${int(qty)} shares at ${price(ref)}` : undefined}>
              <input name="amount" type="number" inputMode="decimal" min={0} step="0.01" value={amount} onInput={change(setAmount, "quantity")} required />
            </Field>
          )}
          <Field label="Order type" error={fieldError("order_type")}>
            <select name="order_type" value={orderType} onChange={change(changeOrderType, "order_type")}>
              {ORDER_TYPES.map((o) => (
                <option value={o}>
                  {o.replace("_", " ")}
                  {symHalted && refusedWhileHalted(o) ? " — refused while halted" : outside && session && o !== "LIMIT" ? ` — refused in ${SESSION_SHORT[session.session]}` : ""}
                </option>
              ))}
            </select>
          </Field>
          {needsStop && (
            <Field label="Stop price" error={fieldError("stop_price")} hint={orderType === "STOP" ? "Becomes a market order when traded through" : "Becomes a limit order when traded through"}>
              <input name="stop_price" type="number" inputMode="decimal" min={0} step="0.01" value={stop} onInput={change(setStop, "stop_price")} required />
            </Field>
          )}
          {needsLimit && (
            <Field label="Limit price" error={fieldError("limit_price")} hint={limitHint}>
              <input name="limit_price" type="number" inputMode="decimal" min={0} step="0.01" value={limitText} onInput={change(setLimit, "limit_price")} required />
            </Field>
          )}
          <Field label="Time in force" error={fieldError("time_in_force")} hint={TIFS[tif]}>
            <select name="time_in_force" value={tif} onChange={change(changeTif, "time_in_force")}>
              {Object.keys(TIFS).map((o) => (
                <option value={o}>{o}</option>
              ))}
            </select>
          </Field>
          <Field
            label="Extended hours"
            error={fieldError("extended_hours")}
            hint={extended ? "LIMIT DAY: may also fill 04:00–09:30 and 16:00–20:00 NY" : "A LIMIT DAY order that may also fill in the pre-market and after-hours"}
          >
            <span class="ticket-ext">
              <input type="checkbox" name="extended_hours" data-testid="extended-hours" checked={extended} onChange={(e) => setExtendedHours(e.currentTarget.checked)} />
              <span>{extended ? "On" : "Off"}</span>
              {extended && limit !== null && suggestedLimit !== null && (
                <button type="button" class="linklike" data-testid="limit-reset" onClick={() => setLimit(null)}>
                  limit back to {side === "BUY" ? "ask +" : "bid −"} {extendedOffset}%
                </button>
              )}
            </span>
          </Field>
        </div>
        {buy && (
          <LegFields
            legs={legs}
            suggested={legStop === null ? suggested : null}
            distance={distance}
            reference={legRef}
            onChange={changeLeg}
            onResetStop={legStop !== null && suggested !== null ? () => setLegStop(null) : null}
            error={legError}
            note={
              outside && legStopPrice !== null
                ? "Outside the regular session the entry is sent alone: the engine holds this stop (firing it as an extended-hours limit) until the regular session opens, when it is placed at the broker."
                : null
            }
          />
        )}
        {buy && quoted && <TicketChart symbol={sym} levels={{ entry: ref, stop: legStopPrice, target: legTargetPrice }} />}
        <Field label="Reason (recorded with the order)" error={fieldError("reason")}>
          <input name="reason" value={reason} onInput={change(setReason, "reason")} maxLength={500} placeholder="Why this order" />
        </Field>
        <div class="ord-summary" data-testid="order-summary">
          <Badge text={side} kind={`ord-side ${side.toLowerCase()}`} /> {Number.isInteger(qty) && qty > 0 ? int(qty) : "—"} {sym || "—"} {orderType.replace("_", " ")}
          {needsStop && stp > 0 ? ` stop ${price(stp)}` : ""}
          {needsLimit && lim > 0 ? ` limit ${price(lim)}` : ""} · {tif}
          {extended ? " · extended hours" : ""}
          {legStopPrice !== null ? ` · exit stop ${price(legStopPrice)}` : ""}
          {legTargetPrice !== null ? `, target ${price(legTargetPrice)}` : ""}
          <span class="muted" data-testid="ticket-cost">
            {" "}
            · est. {side === "BUY" ? "cost" : "proceeds"} {money(estimate)} · buying power after {money(powerAfter)}
          </span>
        </div>
        {legStopPrice !== null && <RiskReward risk={preview?.risk_to_stop} reward={preview?.reward_to_target} pending={pending} />}
        <PreviewPanel preview={preview} error={previewError} pending={pending} blocked={haltBlock ? `while ${sym} is halted: a limit order is accepted and waits at the venue for the reopen.` : null} />
        {showBanner && error && <Refusal error={error} onExtended={extendedHoursOrder(orderType, tif, extended) ? undefined : makeExtended} />}
        <div class="modal-actions">
          <button type="button" class="btn ghost" onClick={onClose}>
            Cancel
          </button>
          <button type="submit" class={`btn ${side === "SELL" ? "danger" : "primary"}`} data-testid="submit-order" disabled={busy || !!haltBlock} title={haltBlock ?? undefined}>
            {busy ? "Placing…" : `Place ${side}`}
          </button>
        </div>
      </form>
    </Modal>
  );
}
