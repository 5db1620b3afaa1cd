// Radar: the latest momentum scan, ranked, with watch and block actions; the strategy
// watchlist it feeds; and today's blocks. Refreshes on every `radar.updated` (a new scan, on
// the minute) and `watchlist.updated` event. Scans run in the pre-market and the after-hours
// too (CONTRACT §12): each row's gap and pre-market volume and high, and the scan's session.
import { useMemo, useState } from "preact/hooks";
import { get, post, withQuery } from "../api";
import { useEvents } from "../events";
import { compact, dateTime, fixed, pct, price, sign, time } from "../format";
import { SESSION_SHORT } from "../market_session";
import { href } from "../route";
import { canOperate } from "../session";
import type { Block, RadarRow, WatchlistRow } from "../types";
import { Action, Badge, Confirm, ErrorBanner, Section, Table, onInput, useLoad, useThrottled, type Column } from "../ui";
import { selectedRadar } from "../hotkeys";
import { SymbolLink } from "../symbol_chart";
import { HaltBadge } from "../halt_badge";

type Ask = { kind: "block" | "unblock" | "stop"; symbol: string } | null;

export function RadarTab() {
  const [topN, setTopN] = useState("50");
  const [filter, setFilter] = useState("");
  const [ask, setAsk] = useState<Ask>(null);
  const radar = useLoad(() => get<RadarRow[]>(withQuery("/api/radar/momentum", { top_n: topN })), [topN]);
  const watchlist = useLoad(() => get<WatchlistRow[]>("/api/watchlist"));
  const blocks = useLoad(() => get<Block[]>("/api/radar/blocks"));
  const reloadRadar = useThrottled(radar.reload, 1000);
  const reloadWatch = useThrottled(() => {
    watchlist.reload();
    blocks.reload();
  }, 1000);
  useEvents(["radar.updated"], reloadRadar);
  useEvents(["watchlist.updated"], reloadWatch);

  const watching = useMemo(
    () => new Set((watchlist.data ?? []).filter((w) => w.polling_status !== "STOPPED" && !w.time_completed).map((w) => w.symbol)),
    [watchlist.data],
  );
  const blocked = useMemo(() => new Set((blocks.data ?? []).map((b) => b.symbol)), [blocks.data]);
  const rows = (radar.data ?? []).filter((r) => !filter || r.symbol.includes(filter.toUpperCase()) || (r.sector ?? "").toLowerCase().includes(filter.toLowerCase()));
  const scanAt = radar.data?.[0]?.captured_at;
  const scanSession = radar.data?.[0]?.session;

  const watch = (symbol: string) => async () => {
    await post("/api/radar/watch", { symbol, source: "MANUAL" });
    watchlist.reload();
  };

  const columns: Column<RadarRow>[] = [
    { key: "rank", label: "#", num: true },
    {
      key: "symbol",
      label: "Symbol",
      render: (r) => (
        <>
          <strong>
            <SymbolLink symbol={r.symbol} />
          </strong>{" "}
          <HaltBadge symbol={r.symbol} row={r} />
        </>
      ),
    },
    { key: "price", label: "Price", num: true, render: (r) => price(r.price) },
    { key: "percentage_gain", label: "Gain", num: true, render: (r) => pct(r.percentage_gain, 1), class: () => "up" },
    {
      key: "gap_pct",
      label: "Gap",
      num: true,
      title: "Gap %: the pre-market price, or the day's open, against the previous close (— when unknown)",
      render: (r) => <span data-col="gap">{pct(r.gap_pct, 1)}</span>,
      class: (r) => sign(r.gap_pct),
    },
    { key: "change_1m", label: "1m", num: true, render: (r) => pct(r.change_1m), class: (r) => (r.change_1m >= 0 ? "up" : "down") },
    { key: "change_5m", label: "5m", num: true, render: (r) => pct(r.change_5m), class: (r) => (r.change_5m >= 0 ? "up" : "down") },
    { key: "relative_volume", label: "RVol", num: true, title: "Volume today against the average volume to this time of day", render: (r) => `${fixed(r.relative_volume, 1)}×` },
    { key: "volume", label: "Volume", num: true, render: (r) => compact(r.volume) },
    { key: "average_volume", label: "Avg vol", num: true, render: (r) => compact(r.average_volume) },
    {
      key: "premarket_volume",
      label: "PM vol",
      num: true,
      title: "Shares traded in today's pre-market, 04:00–09:30 NY (— when unknown)",
      render: (r) => <span data-col="pm-volume">{compact(r.premarket_volume)}</span>,
    },
    {
      key: "premarket_high",
      label: "PM high",
      num: true,
      title: "The pre-market's highest trade today (— when unknown)",
      render: (r) => <span data-col="pm-high">{price(r.premarket_high)}</span>,
    },
    { key: "float", label: "Float", num: true, title: "Shares in the float; — when unknown (import reference data)", render: (r) => compact(r.float) },
    { key: "sector", label: "Sector", title: "— when unknown (import reference data)", render: (r) => r.sector ?? "—" },
    {
      key: "actions",
      label: "",
      sortValue: (r) => (watching.has(r.symbol) ? 0 : 1),
      render: (r) =>
        blocked.has(r.symbol) ? (
          <Badge text="Blocked" kind="halted" />
        ) : watching.has(r.symbol) ? (
          <Badge text="Watching" kind="watching" />
        ) : (
          <span class="actions">
            <Action run={watch(r.symbol)} done={`${r.symbol} added to the watchlist`} kind="primary" testid={`watch-${r.symbol}`}>
              Watch
            </Action>{" "}
            {canOperate.value && (
              <button class="btn" data-testid={`block-${r.symbol}`} onClick={(e) => (e.stopPropagation(), setAsk({ kind: "block", symbol: r.symbol }))}>
                Block
              </button>
            )}
          </span>
        ),
    },
  ];

  const watchColumns: Column<WatchlistRow>[] = [
    { key: "symbol", label: "Symbol", render: (w) => <SymbolLink symbol={w.symbol} /> },
    { key: "orders", label: "", render: (w) => <a href={href("orders", { symbol: w.symbol })} class="muted">orders</a> },
    { key: "current_price", label: "Price", num: true, render: (w) => price(w.current_price) },
    { key: "strategy_status", label: "Strategy", render: (w) => <Badge text={w.strategy_status} /> },
    { key: "polling_status", label: "Polling", render: (w) => <Badge text={w.polling_status} /> },
    { key: "strategy_id", label: "Strategy id", render: (w) => `${w.strategy_id} ${w.strategy_version}` },
    { key: "source", label: "Source" },
    { key: "time_added", label: "Added", render: (w) => time(w.time_added) },
    { key: "reason", label: "Note", render: (w) => <span class="muted">{w.reason ?? ""}</span> },
    {
      key: "actions",
      label: "",
      render: (w) =>
        w.polling_status === "STOPPED" ? (
          blocked.has(w.symbol) ? null : (
            <Action run={() => post("/api/watchlist/restart", { symbol: w.symbol })} done={`${w.symbol} restarted`} testid={`restart-${w.symbol}`}>
              Restart
            </Action>
          )
        ) : (
          canOperate.value && (
            <button class="btn" data-testid={`stop-${w.symbol}`} onClick={() => setAsk({ kind: "stop", symbol: w.symbol })}>
              Stop
            </button>
          )
        ),
    },
  ];

  const blockColumns: Column<Block>[] = [
    { key: "symbol", label: "Symbol", render: (b) => <strong>{b.symbol}</strong> },
    { key: "block_scope", label: "Scope" },
    { key: "reason", label: "Reason" },
    { key: "blocked_by", label: "By" },
    { key: "effective_from", label: "From", render: (b) => dateTime(b.effective_from) },
    { key: "expires_at", label: "Expires", render: (b) => dateTime(b.expires_at) },
    {
      key: "actions",
      label: "",
      render: (b) =>
        canOperate.value && (
          <button class="btn" data-testid={`unblock-${b.symbol}`} onClick={() => setAsk({ kind: "unblock", symbol: b.symbol })}>
            Unblock
          </button>
        ),
    },
  ];

  return (
    <div data-testid="tab-radar">
      <Section
        title={
          <>
            Momentum radar{" "}
            <span class="muted">
              · scan {scanAt ? time(scanAt) : "—"} NY{scanSession && scanSession in SESSION_SHORT ? ` (${SESSION_SHORT[scanSession]})` : ""} · {rows.length} symbols
            </span>
          </>
        }
        actions={
          <>
            <input placeholder="Filter symbol or sector" value={filter} onInput={onInput(setFilter)} aria-label="Filter" />
            <select value={topN} onChange={onInput(setTopN)} aria-label="Rows">
              {["25", "50", "100", "200"].map((n) => (
                <option value={n}>Top {n}</option>
              ))}
            </select>
          </>
        }
      >
        <ErrorBanner error={radar.error} />
        <Table
          testid="radar-table"
          columns={columns}
          rows={rows}
          rowKey={(r) => r.symbol}
          onRowClick={(r) => (selectedRadar.value = selectedRadar.value === r.symbol ? null : r.symbol)}
          selected={selectedRadar.value}
          empty="No symbol passes the radar's filters in the latest scan. Scans run on each minute."
        />
      </Section>
      <div class="grid2">
        <Section title={`Watchlist · ${watching.size} active`}>
          <ErrorBanner error={watchlist.error} />
          <Table testid="watchlist-table" columns={watchColumns} rows={watchlist.data ?? []} rowKey={(w) => w.symbol} empty="No symbol is watched. Watch one from the radar." />
        </Section>
        <Section title="Blocked today">
          <ErrorBanner error={blocks.error} />
          <Table testid="blocks-table" columns={blockColumns} rows={blocks.data ?? []} rowKey={(b) => b.symbol} empty="No symbol is blocked." />
        </Section>
      </div>
      {ask && (
        <Confirm
          title={ask.kind === "block" ? `Block ${ask.symbol} for today` : ask.kind === "unblock" ? `Unblock ${ask.symbol}` : `Stop the strategy on ${ask.symbol}`}
          confirmLabel={ask.kind === "block" ? "Block" : ask.kind === "unblock" ? "Unblock" : "Stop"}
          danger={ask.kind !== "unblock"}
          reason
          onClose={() => setAsk(null)}
          onConfirm={async (reason) => {
            const path = ask.kind === "block" ? "/api/radar/block" : ask.kind === "unblock" ? "/api/radar/unblock" : "/api/watchlist/stop";
            await post(path, ask.kind === "block" ? { symbol: ask.symbol, reason, block_scope: "TODAY" } : { symbol: ask.symbol, reason });
            watchlist.reload();
            blocks.reload();
          }}
        >
          <p>
            {ask.kind === "block"
              ? "The symbol leaves the watchlist, and no strategy or operator order may open it until the block ends. Open positions are not closed."
              : ask.kind === "unblock"
                ? "The symbol may be watched and traded again."
                : "The strategy stops placing orders on this symbol. An open position stays open; close it from Positions."}
          </p>
        </Confirm>
      )}
    </div>
  );
}
