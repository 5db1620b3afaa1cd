// Charts, drawn by Chart.js (tree-shaken to the parts used). Time axes are linear in epoch
// milliseconds and labelled in New York time, so no date adapter is needed.
import {
  BarController,
  BarElement,
  CategoryScale,
  Chart,
  Filler,
  Legend,
  LinearScale,
  LineController,
  LineElement,
  PointElement,
  ScatterController,
  Tooltip,
  type ChartConfiguration,
} from "chart.js";
import { useEffect, useRef } from "preact/hooks";
import { theme } from "./session";

Chart.register(
  BarController,
  BarElement,
  CategoryScale,
  Filler,
  Legend,
  LinearScale,
  LineController,
  LineElement,
  PointElement,
  ScatterController,
  Tooltip,
);

/** A colour of the current theme (CSS custom property). */
export function cssVar(name: string): string {
  return getComputedStyle(document.documentElement).getPropertyValue(name).trim();
}

const nyHm = new Intl.DateTimeFormat("en-US", { timeZone: "America/New_York", hour: "2-digit", minute: "2-digit", hour12: false });
const nyMd = new Intl.DateTimeFormat("en-US", { timeZone: "America/New_York", month: "short", day: "numeric" });

/** Tick label for an epoch-ms axis: time of day within one day, else the date. */
export function timeTick(spanMs: number) {
  return (v: number | string) => {
    const d = new Date(Number(v));
    return spanMs <= 36 * 3600_000 ? nyHm.format(d) : nyMd.format(d);
  };
}

/** Draws `config()` on a canvas; rebuilt when `deps` or the theme change. */
export function ChartView({
  config,
  deps,
  height = 260,
  testid,
  label,
}: {
  config: () => ChartConfiguration;
  deps: unknown[];
  height?: number;
  testid?: string;
  label: string;
}) {
  const canvas = useRef<HTMLCanvasElement>(null);
  useEffect(() => {
    if (!canvas.current) return;
    Chart.defaults.color = cssVar("--muted");
    Chart.defaults.borderColor = cssVar("--grid");
    Chart.defaults.font.family = getComputedStyle(document.body).fontFamily;
    const cfg = config();
    cfg.options = { responsive: true, maintainAspectRatio: false, animation: false, ...cfg.options };
    const chart = new Chart(canvas.current, cfg);
    return () => chart.destroy();
  }, [...deps, theme.value]);
  return (
    <div class="chart" style={{ height: `${height}px` }} data-testid={testid}>
      <canvas ref={canvas} role="img" aria-label={label} />
    </div>
  );
}
