// Charts, drawn by Chart.js (tree-shaken to the parts used). Time axes are linear in epoch
// milliseconds with ticks on round times labelled in New York time (format.ts), so no date
// adapter is needed.
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
import { timeAxis } from "./format";
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

/**
 * An x axis in epoch milliseconds from `min` to `max`: ticks on round times with distinct labels
 * (see `timeAxis` in format.ts). `label` also titles tooltips.
 */
export function timeScale(min: number, max: number) {
  const axis = timeAxis(min, max);
  return {
    type: "linear" as const,
    min,
    max,
    afterBuildTicks: (scale: { ticks: { value: number }[] }) => {
      scale.ticks = axis.ticks.map((value) => ({ value }));
    },
    ticks: { callback: (v: number | string) => axis.label(Number(v)), autoSkip: false, maxRotation: 0 },
    label: axis.label,
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
    // The axes' labels as drawn, on the chart's element (`data-ticks`): what an operator reads,
    // there for tests and assistive tools (a canvas has no text).
    const holder = canvas.current.parentElement;
    const exposeTicks = {
      id: "exposeTicks",
      afterUpdate: (chart: Chart) => {
        const ticks = Object.fromEntries(Object.entries(chart.scales).map(([id, scale]) => [id, scale.ticks.map((t) => String(t.label ?? ""))]));
        if (holder) holder.dataset.ticks = JSON.stringify(ticks);
      },
    };
    cfg.plugins = [...(cfg.plugins ?? []), exposeTicks];
    const chart = new Chart(canvas.current, cfg);
    return () => chart.destroy();
  }, [...deps, theme.value]);
  return (
    <div class="chart" style={{ height: `${height}px` }} data-testid={testid}>
      <canvas ref={canvas} role="img" aria-label={label} />
    </div>
  );
}
