// Charts: a grid of live one-minute candlestick charts — the positions held first, then the
// watchlist, then the radar's leaders — each growing from the `bars.closed` event. A symbol's
// title opens its full chart with fills, stop and target.
import { useMemo, useState } from "preact/hooks";
import { get, withQuery } from "../api";
import { CandleChart } from "../candles";
import { useEvents } from "../events";
import { HaltBadge } from "../halt_badge";
import { SymbolLink } from "../symbol_chart";
import type { Position, RadarRow, WatchlistRow } from "../types";
import { Section, onInput, useLoad, useThrottled } from "../ui";

export function ChartsTab() {
  const [count, setCount] = useState("8");
  const positions = useLoad(() => get<Position[]>("/api/positions"));
  const watchlist = useLoad(() => get<WatchlistRow[]>("/api/watchlist"));
  const radar = useLoad(() => get<RadarRow[]>(withQuery("/api/radar/momentum", { top_n: 50 })));
  // The set of charts changes with what is held and watched, not with each scan.
  const reload = useThrottled(() => (positions.reload(), watchlist.reload()), 2000);
  useEvents(["position.updated", "watchlist.updated"], reload);
  const symbols = useMemo(() => {
    const seen = new Set<string>();
    const add = (s: string) => seen.add(s);
    (positions.data ?? []).filter((p) => p.quantity > 0).forEach((p) => add(p.symbol));
    (watchlist.data ?? []).filter((w) => !w.time_completed).forEach((w) => add(w.symbol));
    (radar.data ?? []).forEach((r) => add(r.symbol));
    return [...seen].slice(0, Number(count));
  }, [positions.data, watchlist.data, radar.data, count]);
  // The row that says whether a chart's symbol is halted: its position's (live), else its scan's.
  const rowOf = (s: string) => positions.data?.find((p) => p.symbol === s && p.quantity > 0) ?? radar.data?.find((r) => r.symbol === s);
  return (
    <div data-testid="tab-charts">
      <Section
        title={
          <>
            Live charts <span class="muted">· positions, then the watchlist, then the radar's leaders · one-minute candles, volume, VWAP</span>
          </>
        }
        actions={
          <select value={count} onChange={onInput(setCount)} aria-label="Charts" name="chart-count">
            {["4", "8", "12", "20"].map((n) => (
              <option value={n}>{n} charts</option>
            ))}
          </select>
        }
      >
        <div class="chart-grid" data-testid="chart-grid">
          {symbols.map((s) => (
            <div class="chart-cell" key={s}>
              <h3>
                <SymbolLink symbol={s} /> <HaltBadge symbol={s} row={rowOf(s)} />
              </h3>
              <CandleChart symbol={s} height={200} live testid="grid-chart" />
            </div>
          ))}
          {symbols.length === 0 && <div class="note">Nothing held, watched or on the radar yet.</div>}
        </div>
      </Section>
    </div>
  );
}
