// Intraday price of one symbol (one-minute closes from GET /api/market/bars) with entries and
// exits marked: green triangles up for buys, red triangles down for sells.
import { get, withQuery } from "./api";
import { ChartView, cssVar, timeScale } from "./chart";
import { axisLabel, price as fmtPrice, time } from "./format";
import { ErrorBanner, useLoad } from "./ui";

export interface Bar {
  timestamp: string;
  open: number;
  high: number;
  low: number;
  close: number;
  volume: number;
}

export interface Mark {
  time: string;
  price: number;
  side: "BUY" | "SELL";
  label?: string;
}

/** Bars of `symbol` from `from` to `to` (default: now), with `marks` drawn over them. */
export function PriceChart({ symbol, from, to, marks, height = 280 }: { symbol: string; from: string; to?: string; marks: Mark[]; height?: number }) {
  const bars = useLoad(() => get<Bar[]>(withQuery("/api/market/bars", { symbol, start: from, end: to, timeframe: "1m" })), [symbol, from, to]);
  if (bars.error) return <ErrorBanner error={bars.error} />;
  if (!bars.data) return <div class="note">Loading {symbol} prices…</div>;
  if (bars.data.length === 0) return <div class="note">No {symbol} bars in this range.</div>;
  const data = bars.data;
  const xs = [...data.map((b) => Date.parse(b.timestamp)), ...marks.map((m) => Date.parse(m.time))];
  const x = timeScale(Math.min(...xs), Math.max(...xs));
  return (
    <ChartView
      label={`${symbol} one-minute closes with entries and exits`}
      testid="price-chart"
      height={height}
      deps={[data, marks]}
      config={() => ({
        type: "line",
        data: {
          datasets: [
            {
              label: `${symbol} close`,
              data: data.map((b) => ({ x: Date.parse(b.timestamp), y: b.close })),
              borderColor: cssVar("--accent"),
              borderWidth: 1.5,
              pointRadius: 0,
              tension: 0,
            },
            {
              type: "scatter",
              label: "Buys",
              data: marks.filter((m) => m.side === "BUY").map((m) => ({ x: Date.parse(m.time), y: m.price })),
              pointStyle: "triangle",
              pointRadius: 7,
              backgroundColor: cssVar("--up"),
              borderColor: cssVar("--up"),
            },
            {
              type: "scatter",
              label: "Sells",
              data: marks.filter((m) => m.side === "SELL").map((m) => ({ x: Date.parse(m.time), y: m.price })),
              pointStyle: "triangle",
              rotation: 180,
              pointRadius: 7,
              backgroundColor: cssVar("--down"),
              borderColor: cssVar("--down"),
            },
          ],
        },
        options: {
          interaction: { mode: "nearest", intersect: false },
          scales: {
            x,
            y: { ticks: { callback: axisLabel("money") } },
          },
          plugins: {
            legend: { display: true, position: "bottom" },
            tooltip: {
              callbacks: {
                title: (items) => (items.length ? time(new Date(items[0].parsed.x ?? 0).toISOString()) : ""),
                label: (item) => `${item.dataset.label}: ${fmtPrice(item.parsed.y)}`,
              },
            },
          },
        },
      })}
    />
  );
}
