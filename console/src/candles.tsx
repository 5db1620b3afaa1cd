// Candlestick charts of one-minute (or daily) bars, drawn by TradingView's lightweight-charts
// (Apache-2.0, bundled: nothing is fetched at run time): candles, volume, the session VWAP, the
// day's high and low, entries and exits as markers, and the strategy's stop and target as
// price lines. A live chart grows from the `bars.closed` event (one event a market minute with
// the bars of the symbols held, watched or at the top of the radar): no request per chart.
import {
  CandlestickSeries,
  ColorType,
  HistogramSeries,
  LineSeries,
  LineStyle,
  createChart,
  createSeriesMarkers,
  type IChartApi,
  type IPriceLine,
  type ISeriesApi,
  type SeriesMarker,
  type Time,
  type UTCTimestamp,
} from "lightweight-charts";
import { useEffect, useRef, useState } from "preact/hooks";
import { get, withQuery } from "./api";
import { subscribe } from "./events";
import { price as fmtPrice, time as nyTime, date as nyDate } from "./format";
import { cssVar } from "./chart";
import { dayRange, vwap, type Bar, type Levels } from "./bars";
import { theme } from "./session";
import { ErrorBanner } from "./ui";
import type { ApiError } from "./api";

export type { Bar, Levels } from "./bars";
export { planFromReason } from "./bars";

/** An entry or exit drawn on the chart. */
export interface Mark {
  time: string;
  price: number;
  side: "BUY" | "SELL";
  label?: string;
}

// ---------------------------------------------------------------------------------------------
// Live bars: one subscription to `bars.closed`, fanned out by symbol.

type BarListener = (bar: Bar) => void;
const barListeners = new Map<string, Set<BarListener>>();
let unsubscribeBars: (() => void) | null = null;

// One minute closes for every chart at once: the redraws are spread over the next frames, a
// few charts a frame, so twenty live charts never stall one frame (DEMO runs the market 60×).
const PER_FRAME = 3;
const queued: (() => void)[] = [];
let draining = false;
function drain() {
  for (const f of queued.splice(0, PER_FRAME)) f();
  if (queued.length) requestAnimationFrame(drain);
  else draining = false;
}

function onBars(symbol: string, fn: BarListener): () => void {
  if (!barListeners.has(symbol)) barListeners.set(symbol, new Set());
  barListeners.get(symbol)!.add(fn);
  if (!unsubscribeBars) {
    unsubscribeBars = subscribe(["bars.closed"], (e) => {
      for (const b of (e.data?.bars ?? []) as (Bar & { symbol: string })[]) {
        const fns = barListeners.get(b.symbol);
        if (fns) fns.forEach((f) => queued.push(() => f(b)));
      }
      if (queued.length && !draining) {
        draining = true;
        requestAnimationFrame(drain);
      }
    });
  }
  return () => {
    barListeners.get(symbol)?.delete(fn);
    if (barListeners.get(symbol)?.size === 0) barListeners.delete(symbol);
  };
}

const secs = (iso: string) => Math.floor(Date.parse(iso) / 1000) as UTCTimestamp;

/** The start of the bar a time falls in: the latest bar starting at or before it. */
function barTime(bars: Bar[], iso: string): UTCTimestamp | null {
  const t = Date.parse(iso);
  let lo = 0;
  let hi = bars.length - 1;
  let found = -1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    if (Date.parse(bars[mid].timestamp) <= t) {
      found = mid;
      lo = mid + 1;
    } else hi = mid - 1;
  }
  return found < 0 ? null : secs(bars[found].timestamp);
}

// ---------------------------------------------------------------------------------------------
// The chart

interface Drawn {
  chart: IChartApi;
  candles: ISeriesApi<"Candlestick">;
  volume: ISeriesApi<"Histogram">;
  vwap: ISeriesApi<"Line">;
  lines: IPriceLine[];
}

/** Bars a live chart shows at first. */
const LIVE_WINDOW = 120;

/** Live charts on the page, for the speed figures (`window.__charts`). */
const live = new Set<string>();

function colors() {
  return {
    up: cssVar("--up") || "#16a34a",
    down: cssVar("--down") || "#dc2626",
    text: cssVar("--muted") || "#666",
    grid: cssVar("--grid") || "#eee",
    bg: cssVar("--panel") || cssVar("--bg") || "#fff",
    accent: cssVar("--accent") || "#2563eb",
    warn: cssVar("--warn") || "#d97706",
  };
}

export interface CandleChartProps {
  symbol: string;
  /** Bars from (default: the start of the market's day) and to (default: now, and live). */
  from?: string;
  to?: string;
  timeframe?: "1m" | "1d";
  marks?: Mark[];
  levels?: Levels;
  height?: number;
  /** Grows from the event stream (default: when `to` is not given). */
  live?: boolean;
  testid?: string;
  /** Bars given rather than loaded (a backtest's). */
  bars?: Bar[];
}

/**
 * A candlestick chart of `symbol`. The holder carries `data-bars` (bars drawn), `data-last` (the
 * last bar's start), `data-day-high`/`data-day-low`, `data-vwap` and the levels drawn
 * (`data-entry`, `data-stop`, `data-target`): what the operator reads off the canvas, there for
 * tests and assistive tools.
 */
export function CandleChart({ symbol, from, to, timeframe = "1m", marks = [], levels = {}, height = 320, live: isLive, testid = "candle-chart", bars: given }: CandleChartProps) {
  const holder = useRef<HTMLDivElement>(null);
  const drawn = useRef<Drawn | null>(null);
  const data = useRef<Bar[]>([]);
  const [error, setError] = useState<ApiError | undefined>();
  const [empty, setEmpty] = useState(false);
  const growing = isLive ?? (to === undefined && !given);
  // Marks and levels change often (a fill, a stop moved): they are redrawn on the chart as it
  // stands, never a reason to build it and load its bars again.
  const marksNow = useRef(marks);
  const levelsNow = useRef(levels);
  marksNow.current = marks;
  levelsNow.current = levels;
  const redrawMarks = useRef<(() => void) | null>(null);

  // Builds the chart (again when the theme changes) and loads its bars.
  useEffect(() => {
    const el = holder.current;
    if (!el) return;
    const c = colors();
    const chart = createChart(el, {
      autoSize: true,
      layout: { background: { type: ColorType.Solid, color: c.bg }, textColor: c.text, fontSize: 11, attributionLogo: false },
      grid: { vertLines: { color: c.grid }, horzLines: { color: c.grid } },
      rightPriceScale: { borderVisible: false },
      timeScale: {
        borderVisible: false,
        timeVisible: timeframe === "1m",
        secondsVisible: false,
        tickMarkFormatter: (t: Time) => {
          const iso = new Date(Number(t) * 1000).toISOString();
          return timeframe === "1m" ? nyTime(iso).slice(0, 5) : nyDate(iso).slice(5);
        },
      },
      localization: {
        timeFormatter: (t: Time) => {
          const iso = new Date(Number(t) * 1000).toISOString();
          return timeframe === "1m" ? `${nyDate(iso)} ${nyTime(iso).slice(0, 5)} NY` : nyDate(iso);
        },
        priceFormatter: (p: number) => fmtPrice(p),
      },
      crosshair: { mode: 0 },
    });
    const candles = chart.addSeries(CandlestickSeries, {
      upColor: c.up,
      downColor: c.down,
      wickUpColor: c.up,
      wickDownColor: c.down,
      borderVisible: false,
    });
    candles.priceScale().applyOptions({ scaleMargins: { top: 0.08, bottom: 0.25 } });
    const volume = chart.addSeries(HistogramSeries, { priceFormat: { type: "volume" }, priceScaleId: "", lastValueVisible: false, priceLineVisible: false });
    volume.priceScale().applyOptions({ scaleMargins: { top: 0.8, bottom: 0 } });
    const vw = chart.addSeries(LineSeries, { color: c.accent, lineWidth: 1, priceLineVisible: false, lastValueVisible: false, crosshairMarkerVisible: false, title: "VWAP" });
    drawn.current = { chart, candles, volume, vwap: vw, lines: [] };
    const markers = createSeriesMarkers(candles, []);
    let stop = () => {};
    let cancelled = false;

    const volumeBar = (b: Bar) => ({ time: secs(b.timestamp), value: b.volume, color: (b.close >= b.open ? c.up : c.down) + "66" });
    const candle = (b: Bar) => ({ time: secs(b.timestamp), open: b.open, high: b.high, low: b.low, close: b.close });
    const expose = () => {
      const bars = data.current;
      const range = dayRange(bars);
      const w = vwap(bars);
      const last = w.length ? w[w.length - 1] : null;
      el.dataset.bars = String(bars.length);
      el.dataset.last = bars.length ? bars[bars.length - 1].timestamp : "";
      el.dataset.dayHigh = range ? String(range.high) : "";
      el.dataset.dayLow = range ? String(range.low) : "";
      el.dataset.vwap = last === null ? "" : String(last);
    };
    const drawLevels = () => {
      const d = drawn.current;
      if (!d) return;
      d.lines.forEach((l) => d.candles.removePriceLine(l));
      d.lines = [];
      const range = timeframe === "1m" ? dayRange(data.current) : null;
      const line = (p: number | null | undefined, title: string, color: string, style: LineStyle) => {
        if (p === null || p === undefined || !Number.isFinite(p)) return;
        d.lines.push(d.candles.createPriceLine({ price: p, color, lineWidth: 1, lineStyle: style, axisLabelVisible: true, title }));
      };
      line(range?.high, "Day high", c.text, LineStyle.Dotted);
      line(range?.low, "Day low", c.text, LineStyle.Dotted);
      const levels = levelsNow.current;
      line(levels.entry, "Entry", c.accent, LineStyle.Dashed);
      line(levels.stop, "Stop", c.down, LineStyle.Dashed);
      line(levels.target, "Target", c.up, LineStyle.Dashed);
      el.dataset.entry = levels.entry == null ? "" : String(levels.entry);
      el.dataset.stop = levels.stop == null ? "" : String(levels.stop);
      el.dataset.target = levels.target == null ? "" : String(levels.target);
    };
    const drawMarks = () => {
      const bars = data.current;
      const m: SeriesMarker<Time>[] = marksNow.current
        .map((mk) => ({ mk, t: barTime(bars, mk.time) }))
        .filter((x) => x.t !== null)
        .sort((a, b) => a.t! - b.t!)
        .map(({ mk, t }) => ({
          time: t!,
          position: mk.side === "BUY" ? "belowBar" : "aboveBar",
          shape: mk.side === "BUY" ? "arrowUp" : "arrowDown",
          color: mk.side === "BUY" ? c.up : c.down,
          text: mk.label ?? `${mk.side === "BUY" ? "B" : "S"} ${fmtPrice(mk.price)}`,
        }));
      markers.setMarkers(m);
    };
    redrawMarks.current = () => {
      if (!cancelled && data.current.length) {
        drawMarks();
        drawLevels();
      }
    };
    const drawAll = () => {
      const bars = data.current;
      candles.setData(bars.map(candle));
      volume.setData(bars.map(volumeBar));
      const w = vwap(bars);
      vw.setData(bars.flatMap((b, i) => (w[i] === null ? [] : [{ time: secs(b.timestamp), value: w[i]! }])));
      drawMarks();
      drawLevels();
      // A live chart shows the last two hours (the quiet night before is a scroll away); a
      // range asked for shows whole.
      if (growing && bars.length > LIVE_WINDOW) chart.timeScale().setVisibleLogicalRange({ from: bars.length - LIVE_WINDOW, to: bars.length + 2 });
      else chart.timeScale().fitContent();
      expose();
    };
    const grow = (b: Bar) => {
      const bars = data.current;
      const last = bars[bars.length - 1];
      if (last && Date.parse(b.timestamp) < Date.parse(last.timestamp)) return;
      if (last && last.timestamp === b.timestamp) bars[bars.length - 1] = b;
      else bars.push(b);
      candles.update(candle(b));
      volume.update(volumeBar(b));
      const w = vwap(bars);
      const v = w[w.length - 1];
      if (v !== null && v !== undefined) vw.update({ time: secs(b.timestamp), value: v });
      drawLevels();
      expose();
    };

    if (given) {
      data.current = given.slice();
      setEmpty(given.length === 0);
      drawAll();
    } else {
      // Live bars that arrive while the history loads are kept and merged after it.
      const early: Bar[] = [];
      // A bar queued for a redraw may arrive after this chart was disposed (the effect ran
      // again, say for new levels, and `drawn` now holds the next chart): it is dropped.
      if (growing) stop = onBars(symbol, (b) => void (cancelled || (drawn.current && data.current.length ? grow(b) : early.push(b))));
      get<Bar[]>(withQuery("/api/market/bars", { symbol, start: from, end: to, timeframe })).then(
        (bars) => {
          if (cancelled) return;
          data.current = bars.slice();
          setEmpty(bars.length === 0 && !growing);
          drawAll();
          for (const b of early) grow(b);
        },
        (e) => !cancelled && setError(e),
      );
    }
    const id = `${symbol}-${Math.random()}`;
    if (growing) live.add(id);
    (window as any).__charts = live.size;
    return () => {
      cancelled = true;
      stop();
      live.delete(id);
      (window as any).__charts = live.size;
      drawn.current = null;
      redrawMarks.current = null;
      chart.remove();
    };
  }, [symbol, from, to, timeframe, given, theme.value]);
  useEffect(() => redrawMarks.current?.(), [JSON.stringify(marks), JSON.stringify(levels)]);

  return (
    <div class="candle-wrap">
      {error && <ErrorBanner error={error} />}
      {empty && <div class="note">No {symbol} bars in this range.</div>}
      <div
        ref={holder}
        class="candle-chart"
        style={{ height: `${height}px` }}
        data-testid={testid}
        data-symbol={symbol}
        role="img"
        aria-label={`${symbol} candlesticks with volume, VWAP, the day's high and low, entries, exits, stop and target`}
      />
    </div>
  );
}
