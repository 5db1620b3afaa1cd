// One backtest run (GET /api/backtests/{id}): every metric, the refusals of the risk gate, the
// equity curve with its drawdown, the trades, and the parameters and settings it ran under.
// Shown in a wide dialog from the Data & Backtests tab; follows `backtest.updated` while the run
// is queued or running. A whole-desk replay (`kind: "desk"`, symbol `*`) is a backtest row too:
// its header says whose prints it traded (the simulated market's, or downloaded days' and which
// symbols), its result reads like a trading day (desk_detail.tsx), and no bars of `*` are ever
// asked for. The resources' types are in backtest_types.ts, and the figures this dialog shares
// with the desk replay's view (metric tiles, the equity curve) in backtest_figures.tsx.
import { Fragment } from "preact";
import { useCallback } from "preact/hooks";
import { get, post } from "../api";
import { CandleChart, type Mark } from "../candles";
import { useEvents, type StreamEvent } from "../events";
import { anyValue, date, dateTime, duration, fixed, frac, int, marketClock, money, pnl, price, sign } from "../format";
import { canOperate } from "../session";
import type { Trade } from "../types";
import { Action, Badge, ErrorBanner, Modal, Table, useLoad, useThrottled, type Column } from "../ui";
import { EquityCharts, Metric, signedFrac } from "./backtest_figures";
import type { BacktestDetail, BacktestRow, Status } from "./backtest_types";
import { DeskDetail, DeskSourceTag, DeskSymbolList, deskRange } from "./desk_detail";

// ---------------------------------------------------------------------------------------------
// Rows

/** Whether a row is a whole-desk replay's (symbol `*`: no bars of its own). */
export const isDesk = (r: Pick<BacktestRow, "kind" | "symbol">) => r.kind === "desk" || r.symbol === "*";

export const isActive = (s: Status) => s === "QUEUED" || s === "RUNNING";

// ---------------------------------------------------------------------------------------------
// Small shared helpers (also used by the tab)

/**
 * A range bound as the operator entered it: midnight UTC (what the console sends) shows as that
 * calendar day, midnight New York as the New York day, anything else as a New York time.
 */
export function day(iso: string | null | undefined): string {
  if (!iso) return "—";
  if (/T00:00:00(\.0+)?Z$/.test(iso)) return iso.slice(0, 10);
  const ny = dateTime(iso);
  return ny.endsWith(" 00:00:00") ? ny.slice(0, 10) : ny.slice(0, 16);
}

/** A progress bar with its percentage, for queued and running jobs. */
export function Progress({ value, label }: { value: number; label?: string }) {
  const p = Math.max(0, Math.min(1, value || 0));
  return (
    <span class="dt-progress" title={label ?? `${frac(p, 0)} done`}>
      <span class="progress" role="progressbar" aria-valuemin={0} aria-valuemax={100} aria-valuenow={Math.round(p * 100)}>
        <div style={{ width: frac(p, 1) }} />
      </span>
      <span class="muted">{frac(p, 0)}</span>
    </span>
  );
}

/** Status badge, with the progress bar while the job is queued or running. */
export function StatusCell({ status, progress }: { status: Status; progress: number }) {
  return (
    <span class="dt-status">
      <Badge text={status} />
      {isActive(status) && <Progress value={progress} />}
    </span>
  );
}

// ---------------------------------------------------------------------------------------------
// Risk refusals: which override lets the run past which rule

// Entries are sized down to what these limits allow; a refusal means not one share fitted.
const RULES: Record<string, { what: string; fix: string }> = {
  MAX_POSITION_SIZE: { what: "the position already held the maximum shares", fix: "raise max position size in the risk overrides" },
  MAX_ORDER_VALUE: { what: "one share cost more than the maximum order value", fix: "raise max order value in the risk overrides" },
  MAX_DAILY_LOSS: { what: "the day's loss had reached the maximum daily loss", fix: "raise max daily loss in the risk overrides" },
  MAX_TRADES_PER_DAY: { what: "the day's trade count had reached its limit", fix: "raise max trades per day in the risk overrides" },
  BUYING_POWER: { what: "the cash available did not buy one share", fix: "raise the initial cash, or lower market buy buffer pct in the risk overrides" },
  PRICE_COLLAR: { what: "the order's price was too far from the market", fix: "price_collar_pct is an operator setting (Settings tab)" },
  OPEN_POSITION_LIMIT: { what: "too many positions were open", fix: "open_position_limit is an operator setting (Settings tab)" },
  SYMBOL_BLOCKED: { what: "the symbol was blocked", fix: "unblock it on the Radar tab" },
  ACTIVE_WATCHLIST_LIMIT: { what: "the watchlist was full", fix: "active_watchlist_limit is an operator setting (Settings tab)" },
};

function Refusals({ refusals, orders }: { refusals: Record<string, number>; orders: number | null | undefined }) {
  const entries = Object.entries(refusals).filter(([, n]) => n > 0).sort((a, b) => b[1] - a[1]);
  if (entries.length === 0) return null;
  const total = entries.reduce((s, [, n]) => s + n, 0);
  return (
    <div class="banner dt-warn dt-refusals" role="note" data-testid="backtest-refusals">
      <strong>
        The risk gate refused {int(total)} order{total === 1 ? "" : "s"}
      </strong>{" "}
      ({int(orders ?? 0)} placed). A backtest trades through the same risk checks as live trading, under the settings shown
      below; a refused order never reached the simulated market, so the figures above leave those trades out.
      <ul>
        {entries.map(([rule, n]) => (
          <li key={rule}>
            <code>{rule}</code> × {int(n)} — {RULES[rule]?.what ?? "refused by this rule"}
            {RULES[rule] && <span class="muted"> · to test without it, {RULES[rule].fix}</span>}
          </li>
        ))}
      </ul>
      <span class="muted">Risk overrides apply to that run only: the live settings do not change.</span>
    </div>
  );
}

// ---------------------------------------------------------------------------------------------
// Coverage: a run replays the bars stored in its range, downloading only when none are stored

function Coverage({ d }: { d: BacktestDetail }) {
  const c = d.equity_curve ?? [];
  if (c.length === 0) return null;
  const first = Date.parse(c[0].timestamp);
  const last = Date.parse(c[c.length - 1].timestamp);
  const slack = (d.timeframe === "1d" ? 5 : 3) * 86_400_000;
  const late = first - Date.parse(d.start) > slack;
  const early = Date.parse(d.end) - last > slack && Date.parse(d.end) <= (marketClock.value ? Date.parse(marketClock.value.time) : Date.now());
  if (!late && !early) return null;
  return (
    <div class="banner dt-warn" role="note" data-testid="backtest-coverage">
      <strong>Part of the range was not tested.</strong> The stored {d.timeframe} bars of {d.symbol} cover {date(c[0].timestamp)} →{" "}
      {date(c[c.length - 1].timestamp)} of the requested {day(d.start)} → {day(d.end)}: a backtest downloads bars only when none of its range
      is stored. Download the whole range, then run it again.{" "}
      <Action
        run={() => post("/api/data/download", { symbol: d.symbol, timeframe: d.timeframe, start: d.start, end: d.end })}
        done={`Download of ${d.symbol} ${d.timeframe} bars queued; its progress shows under Downloads.`}
        testid="download-range"
      >
        Download {day(d.start)} → {day(d.end)}
      </Action>
    </div>
  );
}

// ---------------------------------------------------------------------------------------------
// Metrics

/** "—" with why the metric is undefined (docs/research.md, Metrics). */
const undef = (v: unknown, why: string) => (v === null || v === undefined ? why : undefined);

function Metrics({ d }: { d: BacktestDetail }) {
  const net = d.final_equity !== null && d.final_equity !== undefined ? d.final_equity - d.initial_cash : null;
  return (
    <div class="dt-metrics" data-testid="backtest-metrics">
      <Metric label="Total return" value={signedFrac(d.total_return)} cls={sign(d.total_return)} sub={`${pnl(net)} on ${money(d.initial_cash)}`} title="(final equity − initial cash) / initial cash" />
      <Metric label="Final equity" value={money(d.final_equity)} sub={`started ${money(d.initial_cash)}`} />
      <Metric label="Max drawdown" value={d.max_drawdown ? `−${frac(d.max_drawdown)}` : frac(d.max_drawdown)} cls={d.max_drawdown ? "down" : ""} sub="largest fall from a peak, every bar" title="max over the curve of 1 − equity / running peak" />
      <Metric
        label="Sharpe ratio"
        value={fixed(d.sharpe_ratio, 2)}
        cls={sign(d.sharpe_ratio)}
        sub={undef(d.sharpe_ratio, "needs two or more unequal daily returns") ?? `annualized, over ${int(d.sharpe_days)} daily return${d.sharpe_days === 1 ? "" : "s"}`}
        title="mean / standard deviation of daily returns × √252, risk-free rate 0"
      />
      <Metric label="Trades" value={int(d.trade_count)} sub={`${int(d.orders)} orders over ${int(d.bars)} ${d.timeframe} bars`} />
      <Metric label="Win rate" value={frac(d.win_rate, 1)} sub={undef(d.win_rate, "no trades") ?? "trades with P&L > 0"} />
      <Metric label="Profit factor" value={fixed(d.profit_factor, 2)} cls={d.profit_factor === null || d.profit_factor === undefined ? "" : d.profit_factor >= 1 ? "up" : "down"} sub={undef(d.profit_factor, d.trade_count ? "no losing trade" : "no trades") ?? "gross profit / |gross loss|"} />
      <Metric label="Win/loss ratio" value={fixed(d.win_loss_ratio, 2)} sub={undef(d.win_loss_ratio, "needs a win and a loss") ?? "average win / |average loss|"} />
      <Metric label="Expectancy" value={pnl(d.expectancy)} cls={sign(d.expectancy)} sub={undef(d.expectancy, "no trades") ?? "average net P&L per trade"} />
      <Metric label="Gross profit" value={money(d.gross_profit)} cls={d.gross_profit ? "up" : ""} sub="sum of winning trades" />
      <Metric label="Gross loss" value={money(d.gross_loss)} cls={d.gross_loss ? "down" : ""} sub="sum of losing trades" />
      <Metric label="Bars" value={int(d.bars)} sub={`${d.timeframe} bars replayed`} />
    </div>
  );
}

// ---------------------------------------------------------------------------------------------
// Trades

const tradeColumns: Column<Trade>[] = [
  { key: "symbol", label: "Symbol", render: (t) => <strong>{t.symbol}</strong> },
  { key: "entry_time", label: "Entry (NY)", render: (t) => <span title={t.entry_time}>{dateTime(t.entry_time).slice(0, 16)}</span> },
  { key: "exit_time", label: "Exit (NY)", render: (t) => <span title={t.exit_time}>{dateTime(t.exit_time).slice(0, 16)}</span> },
  { key: "hold_seconds", label: "Held", num: true, render: (t) => duration(t.hold_seconds) },
  { key: "quantity", label: "Qty", num: true, render: (t) => int(t.quantity) },
  { key: "entry_price", label: "Entry", num: true, render: (t) => price(t.entry_price) },
  { key: "exit_price", label: "Exit", num: true, render: (t) => price(t.exit_price) },
  { key: "fees", label: "Fees", num: true, render: (t) => money(t.fees) },
  { key: "net_pnl", label: "Net P&L", num: true, render: (t) => pnl(t.net_pnl), class: (t) => sign(t.net_pnl) },
  { key: "return_pct", label: "Return", num: true, render: (t) => signedFrac(t.return_pct), class: (t) => sign(t.return_pct) },
  { key: "r_multiple", label: "R", num: true, title: "P&L as a multiple of the risk taken at entry", render: (t) => (t.r_multiple === null ? "—" : `${fixed(t.r_multiple, 2)}R`), class: (t) => sign(t.r_multiple) },
  { key: "exit_reason", label: "Exit reason", render: (t) => <code>{t.exit_reason}</code> },
  { key: "winner_loser_label", label: "Label", render: (t) => <Badge text={t.winner_loser_label} /> },
];

// ---------------------------------------------------------------------------------------------
// Parameters and settings

const show = anyValue;

function Settings({ d }: { d: BacktestDetail }) {
  const overrides = d.settings ?? {};
  const eff = d.effective_settings ?? {};
  const overridden = (group: string, key: string) => overrides[group] && key in overrides[group];
  const overrideList = Object.entries(overrides).flatMap(([g, kv]) => Object.entries(kv ?? {}).map(([k, v]) => [`${g}.${k}`, v] as const));
  const desk = isDesk(d);
  return (
    <details class="dt-details" data-testid="backtest-settings">
      <summary>
        {desk ? "Settings" : "Parameters and settings"}{" "}
        <span class="muted">
          · {desk ? "" : `${Object.keys(d.parameters ?? {}).length} parameter${Object.keys(d.parameters ?? {}).length === 1 ? "" : "s"} · `}
          {overrideList.length ? `${overrideList.length} override${overrideList.length === 1 ? "" : "s"} for this run` : "operator's settings, no override"}
        </span>
      </summary>
      <div class="dt-settings">
        {desk ? (
          <div>
            <h3>Replay</h3>
            <dl class="kv">
              <dt>Market time</dt>
              <dd>{deskRange(d.start, d.end)}</dd>
              <dt>Prints</dt>
              <dd>
                {d.source === "downloaded" ? (
                  <>
                    the stored minute bars of downloaded (or imported) days
                    {d.symbols?.length ? <DeskSymbolList symbols={d.symbols} /> : null}
                  </>
                ) : (
                  "the simulated market's, regenerated as the live feed made them"
                )}
              </dd>
              <dt>Initial cash</dt>
              <dd>{money(d.initial_cash)}, a flat book</dd>
              <dt>Fills</dt>
              <dd>the paper broker's model: its latencies, slippage and fees (the service's [paper] configuration)</dd>
              <dt>Strategy</dt>
              <dd>{d.strategy_id}, on every symbol the allocator watches</dd>
            </dl>
            <OverrideList list={overrideList} />
          </div>
        ) : (
          <div>
            <h3>Strategy parameters</h3>
            <dl class="kv">
              {Object.entries(d.parameters ?? {}).map(([k, v]) => (
                <Fragment key={k}>
                  <dt>{k}</dt>
                  <dd class="mono">{show(v)}</dd>
                </Fragment>
              ))}
            </dl>
            <h3>Simulation</h3>
            <dl class="kv">
              <dt>Initial cash</dt>
              <dd>{money(d.initial_cash)}</dd>
              <dt>Commission</dt>
              <dd>{frac(d.commission_rate, 3)} of traded value</dd>
              <dt>Slippage</dt>
              <dd>{fixed(d.slippage_bps, 1)} bps</dd>
              <dt>Fill</dt>
              <dd>{d.fill === "NEXT_OPEN" ? "NEXT_OPEN (next bar's open)" : d.fill === "CLOSE" ? "CLOSE (signal bar's close)" : d.fill}</dd>
              <dt>Market buy buffer</dt>
              <dd title="Market entries are sized at their fill price, valued this much above it for buying power (risk_controls.market_buy_buffer_pct); 0 buys as many shares as the cash takes, as backtesting.py does">
                {d.market_buy_buffer_pct === undefined ? "—" : `${fixed(d.market_buy_buffer_pct, 2)}% above the fill price`}
              </dd>
            </dl>
            <OverrideList list={overrideList} />
          </div>
        )}
        <div>
          <h3>Effective settings</h3>
          {Object.keys(eff).length === 0 && <p class="note">Not recorded.</p>}
          {Object.entries(eff).map(([group, kv]) => (
            <div key={group}>
              <div class="dt-group">{group}</div>
              <dl class="kv">
                {Object.entries(kv ?? {}).map(([k, v]) => (
                  <Fragment key={k}>
                    <dt>{k}</dt>
                    <dd class={`mono ${overridden(group, k) ? "warn" : ""}`} title={overridden(group, k) ? "Overridden for this run" : undefined}>
                      {show(v)}
                      {overridden(group, k) ? " (override)" : ""}
                    </dd>
                  </Fragment>
                ))}
              </dl>
            </div>
          ))}
        </div>
      </div>
    </details>
  );
}

function OverrideList({ list }: { list: (readonly [string, unknown])[] }) {
  return (
    <>
      <h3>Overrides for this run</h3>
      {list.length ? (
        <dl class="kv">
          {list.map(([k, v]) => (
            <Fragment key={k}>
              <dt>{k}</dt>
              <dd class="mono warn">{show(v)}</dd>
            </Fragment>
          ))}
        </dl>
      ) : (
        <p class="note">None: the run traded under the operator's settings of the time.</p>
      )}
    </>
  );
}

// ---------------------------------------------------------------------------------------------
// The dialog

export function BacktestDetailModal({
  id,
  onClose,
  onRerun,
}: {
  id: string;
  onClose: () => void;
  /** Copies the run's inputs into the run form. */
  onRerun?: (run: BacktestDetail) => void;
}) {
  const run = useLoad(() => get<BacktestDetail>(`/api/backtests/${encodeURIComponent(id)}`), [id]);
  const reload = useThrottled(run.reload, 1000);
  const onEvent = useCallback(
    (e: StreamEvent<BacktestRow>) => {
      if (e.data?.backtest_id === id) reload();
    },
    [id, reload],
  );
  useEvents(["backtest.updated"], onEvent);
  const d = run.data;
  const desk = d ? isDesk(d) : false;

  const title = d && desk ? (
    <>
      Desk replay <span class="muted">· {d.strategy_id} on every watched symbol</span> · {deskRange(d.start, d.end)} · <DeskSourceTag d={d} testid="desk-source" /> <Badge text={d.status} />
    </>
  ) : d ? (
    <>
      {d.strategy_id} <span class="muted">{d.strategy_version}</span> on {d.symbol} · {d.timeframe} · {day(d.start)} → {day(d.end)}{" "}
      <Badge text={d.status} />
    </>
  ) : (
    `Backtest ${id}`
  );

  return (
    <Modal title={title} onClose={onClose} wide testid="backtest-detail">
      <ErrorBanner error={run.error} />
      {!d && !run.error && <div class="note">Loading the run…</div>}
      {d && (
        <div class="dt-detail">
          <div class="dt-runinfo">
            <span class="mono" title="Run id">{d.backtest_id}</span>
            <span>requested by {d.requested_by}</span>
            <span>created {dateTime(d.created_at)}</span>
            {d.started_at && d.finished_at && <span>ran {duration((Date.parse(d.finished_at) - Date.parse(d.started_at)) / 1000)}</span>}
            {d.started_at && !d.finished_at && <span>started {dateTime(d.started_at)}</span>}
            <span style={{ flex: 1 }} />
            {onRerun && canOperate.value && !isActive(d.status) && (
              <button
                class="btn"
                data-testid="rerun-backtest"
                onClick={() => onRerun(d)}
                title={desk ? "Copy this replay's range, cash and overrides into the desk replay form" : "Copy this run's inputs into the run form to change and run again"}
              >
                {desk ? <>Edit &amp; replay again</> : <>Edit &amp; run again</>}
              </button>
            )}
          </div>
          {d.status === "FAILED" && (
            <div class="banner error" role="alert" data-testid="backtest-error">
              <strong>The run failed.</strong> {d.error ?? "The service recorded no reason."}
            </div>
          )}
          {isActive(d.status) && (
            <div class="banner info">
              {d.status === "QUEUED" ? "Waiting for the backtest worker…" : desk ? "Replaying the desk's market time…" : "Replaying bars…"} <Progress value={d.progress} />
              <div class="muted">Results appear here when the run completes.</div>
            </div>
          )}
          {d.status === "COMPLETED" && desk && <DeskDetail d={d} />}
          {d.status === "COMPLETED" && !desk && (
            <>
              <Metrics d={d} />
              <Coverage d={d} />
              <Refusals refusals={d.refusals ?? {}} orders={d.orders} />
              <h3 class="dt-h">
                Price <span class="muted">· {d.timeframe} candles, volume, VWAP; ▲ entries, ▼ exits</span>
              </h3>
              <CandleChart
                symbol={d.symbol}
                from={d.start}
                to={d.end}
                timeframe={d.timeframe === "1d" ? "1d" : "1m"}
                marks={tradeMarks(d.trades ?? [])}
                height={300}
                testid="backtest-price-chart"
              />
              <h3 class="dt-h">Equity</h3>
              <EquityCharts d={d} />
              <h3 class="dt-h">
                Trades <span class="muted">· {int(d.trades?.length ?? 0)}</span>
              </h3>
              <Table
                testid="backtest-trades"
                columns={tradeColumns}
                rows={d.trades ?? []}
                rowKey={(t) => t.trade_id}
                sort={{ key: "entry_time", desc: false }}
                empty={
                  (d.refusals && Object.values(d.refusals).some((n) => n > 0))
                    ? "No completed trade: the risk gate refused the orders (see above)."
                    : (d.orders ?? 0) > 0
                      ? "Orders were placed, but no position was closed within the range."
                      : "The strategy's entry conditions never met in this range. Try a longer range, another symbol or other parameters."
                }
              />
            </>
          )}
          <Settings d={d} />
        </div>
      )}
    </Modal>
  );
}

/** A backtest's trades as entries and exits on its chart. */
function tradeMarks(trades: Trade[]): Mark[] {
  return trades.flatMap((t) => [
    { time: t.entry_time, price: t.entry_price, side: "BUY" as const, label: `B ${int(t.quantity)} @ ${price(t.entry_price)}` },
    { time: t.exit_time, price: t.exit_price, side: "SELL" as const, label: `S @ ${price(t.exit_price)}` },
  ]);
}
