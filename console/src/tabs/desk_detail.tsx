// A whole-desk replay's result (GET /api/backtests/{id} of a `kind: "desk"` row), read like a
// trading day: whose prints it traded (the simulated market's, or the stored minute bars of
// downloaded days, with the symbols replayed), the day's figures with the risk gate's state at
// the end (REDUCING stands out), the equity curve, the trades (one opens inline with its price
// chart), the performance of each symbol, the watchlist the allocator built and the orders the
// risk gate refused. Shown inside the backtest dialog (backtest_detail.tsx) in place of a single
// run's metrics and price chart: a replay's symbol is `*`, whose bars are never asked for.
import "./desk.css";
import { useState } from "preact/hooks";
import { isoToNyLocal, nextDay } from "../desk_time";
import { dateTime, duration, fixed, frac, int, money, pnl, price, sign, time } from "../format";
import { TradeRowDive, humanize } from "../trade_detail";
import type { Trade } from "../types";
import { Badge, Table, type Column } from "../ui";
import { EquityCharts, Metric, signedFrac } from "./backtest_figures";
import type { BacktestDetail, DeskSymbol, DeskViolation, DeskWatch } from "./backtest_types";
import { TRADING_STATE_WORDS, VIOLATION_DETAIL_COLUMNS, VIOLATION_RULE_COLUMN } from "./health";

/** A replay's prints in words: "simulated market" (also rows from before `source`), "downloaded days: 12 symbols". */
export function deskSourceText(d: { source?: string | null; symbols?: string[] | null }): string {
  if (d.source !== "downloaded") return "simulated market";
  const n = d.symbols?.length ?? 0;
  return n ? `downloaded days: ${int(n)} symbol${n === 1 ? "" : "s"}` : "downloaded days";
}

/** The symbols a replay of downloaded days replayed, for a title (the first 100, then how many more). */
function symbolsTitle(symbols: string[]): string {
  const more = symbols.length - 100;
  return `${symbols.slice(0, 100).join(", ")}${more > 0 ? ` … and ${int(more)} more` : ""}`;
}

/** A replay's prints, in a header: the symbols replayed in its title. */
export function DeskSourceTag({ d, testid }: { d: { source?: string | null; symbols?: string[] | null }; testid?: string }) {
  const downloaded = d.source === "downloaded";
  return (
    <span
      class="desk-source"
      data-testid={testid}
      data-source={downloaded ? "downloaded" : "simulated"}
      title={
        downloaded
          ? `The stored minute bars of downloaded (or imported) days${d.symbols?.length ? `: ${symbolsTitle(d.symbols)}` : ""}`
          : "The simulated market's prints of that time, regenerated as the live feed made them"
      }
    >
      {deskSourceText(d)}
    </span>
  );
}

/** The symbols a replay of downloaded days replayed, folded. */
export function DeskSymbolList({ symbols, testid }: { symbols: string[]; testid?: string }) {
  return (
    <details class="desk-symbols" data-testid={testid}>
      <summary>
        {int(symbols.length)} symbol{symbols.length === 1 ? "" : "s"} replayed
      </summary>
      <div class="mono">{symbols.join(" ")}</div>
    </details>
  );
}

/**
 * A replay's market time in New York words: "2026-11-19, whole day", "2026-11-19 09:30–11:30",
 * or "2026-11-19 09:30 → 2026-11-20 16:00".
 */
export function deskRange(start: string, end: string): string {
  const a = isoToNyLocal(start);
  const b = isoToNyLocal(end);
  if (!a || !b) return `${start} → ${end}`;
  const [ad, at] = a.split("T");
  const [bd, bt] = b.split("T");
  if (at === "00:00" && bt === "00:00" && nextDay(ad) === bd) return `${ad}, whole day NY`;
  if (ad === bd) return `${ad} ${at}–${bt} NY`;
  return `${ad} ${at} → ${bd} ${bt} NY`;
}

const tradeColumns: Column<Trade>[] = [
  { key: "symbol", label: "Symbol", render: (t) => <strong>{t.symbol}</strong> },
  { key: "entry_time", label: "Entry (NY)", render: (t) => <span title={`${dateTime(t.entry_time)} NY`}>{time(t.entry_time)}</span> },
  { key: "exit_time", label: "Exit (NY)", render: (t) => <span title={`${dateTime(t.exit_time)} NY`}>{time(t.exit_time)}</span> },
  { key: "hold_seconds", label: "Held", num: true, render: (t) => duration(t.hold_seconds) },
  { key: "quantity", label: "Qty", num: true, title: "Most shares held", render: (t) => int(t.quantity) },
  { key: "entry_price", label: "Entry", num: true, title: "Average price of the buys", render: (t) => price(t.entry_price) },
  { key: "exit_price", label: "Exit", num: true, title: "Average price of the sells", render: (t) => price(t.exit_price) },
  { key: "net_pnl", label: "Net P&L", num: true, render: (t) => pnl(t.net_pnl), class: (t) => sign(t.net_pnl) },
  { key: "return_pct", label: "Return", num: true, render: (t) => signedFrac(t.return_pct), class: (t) => sign(t.return_pct) },
  { key: "r_multiple", label: "R", num: true, title: "P&L as a multiple of the risk taken at entry", render: (t) => (t.r_multiple === null ? "—" : `${fixed(t.r_multiple, 2)}R`), class: (t) => sign(t.r_multiple) },
  { key: "exit_reason", label: "Exit reason", render: (t) => <span title={t.exit_reason}>{humanize(t.exit_reason)}</span> },
  { key: "winner_loser_label", label: "Label", render: (t) => <Badge text={t.winner_loser_label} /> },
];

const violationColumns: Column<DeskViolation>[] = [
  { key: "timestamp", label: "Time (NY)", render: (v) => <span title={`${dateTime(v.timestamp)} NY`}>{time(v.timestamp)}</span> },
  VIOLATION_RULE_COLUMN,
  { key: "symbol", label: "Symbol", render: (v) => v.symbol ?? <span class="muted">—</span> },
  ...VIOLATION_DETAIL_COLUMNS,
];

export function DeskDetail({ d }: { d: BacktestDetail }) {
  const [picked, setPicked] = useState<string | null>(null);
  const trades = d.trades ?? [];
  const bySymbol = d.by_symbol ?? [];
  const watched = d.watched ?? [];
  const violations = d.violations ?? [];
  // Refusals have no id of their own (two may share a time, rule and symbol): keyed by position.
  const violationKey = new Map(violations.map((v, i) => [v, `${i}`]));
  const net = d.final_equity === null || d.final_equity === undefined ? null : d.final_equity - d.initial_cash;
  const wins = trades.filter((t) => t.net_pnl > 0).length;
  const losses = trades.filter((t) => t.net_pnl < 0).length;
  const state = d.trading_state ?? null;
  const reducing = state === "REDUCING";
  const maxLoss = (d.effective_settings?.["risk_controls"] as Record<string, unknown> | undefined)?.["max_daily_loss"];
  const lossRefusals = violations.filter((v) => v.rule === "MAX_DAILY_LOSS");
  const tradesOf = new Map(bySymbol.map((s) => [s.symbol, s.trades]));
  const watchedAt = new Map(watched.map((w) => [w.symbol, w.time_added]));
  const autoWatch = (d.effective_settings?.["strategy_allocator"] as Record<string, unknown> | undefined)?.["auto_watch"];
  const pickedTrade = trades.find((t) => t.trade_id === picked);
  const byRule = Object.entries(
    violations.reduce<Record<string, number>>((acc, v) => ((acc[v.rule] = (acc[v.rule] ?? 0) + 1), acc), {}),
  ).sort((a, b) => b[1] - a[1]);

  const symbolColumns: Column<DeskSymbol>[] = [
    { key: "symbol", label: "Symbol", render: (s) => <strong>{s.symbol}</strong> },
    { key: "trades", label: "Trades", num: true, render: (s) => int(s.trades) },
    { key: "wins", label: "Won", num: true, render: (s) => int(s.wins) },
    { key: "win_rate", label: "Win rate", num: true, sortValue: (s) => (s.trades ? s.wins / s.trades : null), render: (s) => (s.trades ? frac(s.wins / s.trades, 0) : "—") },
    { key: "net_pnl", label: "Net P&L", num: true, render: (s) => pnl(s.net_pnl), class: (s) => sign(s.net_pnl) },
    { key: "watched", label: "Watched from (NY)", sortValue: (s) => watchedAt.get(s.symbol) ?? null, render: (s) => (watchedAt.has(s.symbol) ? time(watchedAt.get(s.symbol)) : <span class="muted">—</span>) },
  ];
  const watchColumns: Column<DeskWatch>[] = [
    { key: "symbol", label: "Symbol", render: (w) => <strong>{w.symbol}</strong> },
    { key: "time_added", label: "Added (NY)", render: (w) => <span title={`${dateTime(w.time_added)} NY`}>{time(w.time_added)}</span> },
    { key: "source", label: "By", render: (w) => (w.source === "RADAR" ? <span title="The allocator's auto-watch of the radar's top rows">radar</span> : w.source.toLowerCase()) },
    { key: "strategy_status", label: "Strategy at the end", render: (w) => <span title={w.strategy_id}>{w.strategy_status}</span> },
    { key: "trades", label: "Trades", num: true, sortValue: (w) => tradesOf.get(w.symbol) ?? 0, render: (w) => (tradesOf.get(w.symbol) ? int(tradesOf.get(w.symbol)) : <span class="muted">0</span>) },
  ];

  return (
    <div class="desk-day" data-testid="desk-detail">
      <div class="desk-line muted">
        {deskRange(d.start, d.end)} · <DeskSourceTag d={d} /> · {int(d.steps)} market steps of 15 s · {int(d.scans)} radar scans · {int(watched.length)} symbol{watched.length === 1 ? "" : "s"} watched
      </div>
      {d.source === "downloaded" && (d.symbols?.length ?? 0) > 0 && <DeskSymbolList symbols={d.symbols!} testid="desk-symbols" />}
      <div class="dt-metrics desk-metrics" data-testid="desk-metrics">
        <Metric label="Net P&L" value={pnl(net)} cls={sign(net)} sub={`on ${money(d.initial_cash)}, a flat book at the start`} testid="desk-net-pnl" title="Final equity − initial cash: closed trades and any position still open at the end" />
        <Metric label="Return" value={signedFrac(d.total_return)} cls={sign(d.total_return)} sub={`final equity ${money(d.final_equity)}`} />
        <Metric label="Trades" value={int(d.trade_count)} sub={trades.length ? `${int(wins)} won · ${int(losses)} lost · ${int(bySymbol.length)} symbol${bySymbol.length === 1 ? "" : "s"}` : "no round trip completed"} testid="desk-trade-count" />
        <Metric label="Win rate" value={frac(d.win_rate, 1)} sub={d.win_rate === null || d.win_rate === undefined ? "no trades" : "trades with net P&L > 0"} />
        <Metric label="Max drawdown" value={d.max_drawdown ? `−${frac(d.max_drawdown)}` : frac(d.max_drawdown)} cls={d.max_drawdown ? "down" : ""} sub="largest fall from a peak, every minute" />
        <div class={`dt-metric desk-state ${reducing ? "desk-reducing" : state === "HALTED" ? "desk-halted" : ""}`} data-testid="desk-state" data-state={state ?? ""} title={state ? TRADING_STATE_WORDS[state] : undefined}>
          <span class="stat-label">Trading at the end</span>
          <span class="stat-value">{state ? <Badge text={state} kind={reducing ? "warning" : undefined} /> : "—"}</span>
          <span class="dt-sub">{reducing ? `the day's loss reached ${typeof maxLoss === "number" ? money(maxLoss) : "the limit"}: no new entries` : state === "ACTIVE" ? "no loss limit reached" : state === "HALTED" ? "halted" : ""}</span>
        </div>
        <Metric label="Profit factor" value={fixed(d.profit_factor, 2)} cls={d.profit_factor === null || d.profit_factor === undefined ? "" : d.profit_factor >= 1 ? "up" : "down"} sub={d.profit_factor === null || d.profit_factor === undefined ? (trades.length ? "no losing trade" : "no trades") : "gross profit / |gross loss|"} />
        <Metric label="Expectancy" value={pnl(d.expectancy)} cls={sign(d.expectancy)} sub={d.expectancy === null || d.expectancy === undefined ? "no trades" : "average net P&L per trade"} />
        <Metric label="Gross profit" value={money(d.gross_profit)} cls={d.gross_profit ? "up" : ""} sub="sum of winning trades" />
        <Metric label="Gross loss" value={money(d.gross_loss)} cls={d.gross_loss ? "down" : ""} sub="sum of losing trades" />
        <Metric label="Watched" value={int(watched.length)} sub={watched.length ? `symbols the allocator took from the radar, ${int(bySymbol.length)} traded` : autoWatch === false ? "auto-watch was off" : "no radar row passed its filters"} />
        <Metric label="Refused orders" value={int(violations.length)} cls={violations.length ? "warn" : ""} sub={violations.length ? byRule.map(([r, n]) => `${r} × ${n}`).join(", ") : "by the risk gate: none"} />
      </div>
      {reducing && (
        <div class="banner dt-warn desk-reducing-banner" role="note" data-testid="desk-reducing">
          <strong>Trading was REDUCING at the end.</strong> The day's loss reached the max daily loss
          {typeof maxLoss === "number" ? ` (${money(maxLoss)})` : ""}: from then on the risk gate let only orders that reduce a position through, as it
          would live.
          {lossRefusals.length > 0 && ` ${int(lossRefusals.length)} order${lossRefusals.length === 1 ? " was" : "s were"} refused for it, the first at ${time(lossRefusals[0].timestamp)} NY.`}
        </div>
      )}

      <h3 class="dt-h">
        Equity <span class="muted">· the engine's equity every minute, and its drawdown</span>
      </h3>
      <EquityCharts d={d} every="minute" />

      <h3 class="dt-h">
        Trades <span class="muted">· {int(trades.length)} · click one for its price chart</span>
      </h3>
      <Table
        testid="desk-trades"
        columns={tradeColumns}
        rows={trades}
        rowKey={(t) => t.trade_id}
        onRowClick={(t) => setPicked((p) => (p === t.trade_id ? null : t.trade_id))}
        selected={picked}
        sort={{ key: "entry_time", desc: false }}
        empty={
          watched.length === 0
            ? autoWatch === false
              ? "No trade: auto-watch was off, so nothing was watched and no strategy ran. Replay with auto-watch on."
              : "No trade: the allocator watched nothing (no radar row passed its filters in this time)."
            : lossRefusals.length
              ? "No completed trade: the risk gate refused the entries (see the refused orders below)."
              : "No completed trade: the watched symbols' entry conditions never met, or no position was closed before the end."
        }
      />
      {pickedTrade && (
        <div class="desk-trade">
          <div class="desk-trade-bar">
            <span class="muted">Trade {pickedTrade.trade_id}</span>
            <button class="btn ghost" onClick={() => setPicked(null)} aria-label="Close the trade">
              ✕
            </button>
          </div>
          <TradeRowDive
            trade={pickedTrade}
            testid="desk-trade"
            note={
              <>
                A replay keeps its trades' rows: their orders, fills, market features and timeline stayed in the replay's own database, removed when
                it ended.{" "}
                {d.source === "downloaded"
                  ? "The bars are the data broker's of those minutes; the replay traded on the stored minute bars of the downloaded (or imported) days."
                  : "The bars are the data broker's, the simulated market's prints that the replay traded on."}
              </>
            }
          />
        </div>
      )}

      <div class="grid2 desk-grid">
        <div>
          <h3 class="dt-h">
            By symbol <span class="muted">· {int(bySymbol.length)} traded</span>
          </h3>
          <Table
            testid="desk-by-symbol"
            columns={symbolColumns}
            rows={bySymbol}
            rowKey={(s) => s.symbol}
            sort={{ key: "net_pnl", desc: true }}
            empty="No symbol was traded."
          />
        </div>
        <div>
          <h3 class="dt-h">
            Watchlist the allocator built <span class="muted">· {int(watched.length)}</span>
          </h3>
          <Table
            testid="desk-watched"
            columns={watchColumns}
            rows={watched}
            rowKey={(w) => `${w.symbol}-${w.time_added}`}
            sort={{ key: "time_added", desc: false }}
            empty={autoWatch === false ? "Nothing: auto-watch was off for this replay." : "Nothing: no radar row passed the allocator's filters."}
          />
        </div>
      </div>

      <h3 class="dt-h">
        Refused by the risk gate <span class="muted">· {int(violations.length)} order{violations.length === 1 ? "" : "s"}</span>
      </h3>
      <Table
        testid="desk-violations"
        columns={violationColumns}
        rows={violations}
        rowKey={(v) => violationKey.get(v)!}
        sort={{ key: "timestamp", desc: false }}
        empty="No order was refused by a risk rule."
      />
    </div>
  );
}
