// The figures of a backtest's result, shown alike by the backtest dialog (backtest_detail.tsx)
// and a whole-desk replay's view inside it (desk_detail.tsx): a metric tile, a signed fraction,
// and the equity curve with its drawdown below.
import type { ComponentChildren } from "preact";
import { ChartView, cssVar, timeScale } from "../chart";
import { axisLabel, date, dateTime, fixed, money, pct } from "../format";
import type { BacktestDetail } from "./backtest_types";

/** A fraction with its sign: 0.045 → "+4.50%". */
export const signedFrac = (v: number | null | undefined, digits = 2) => (v === null || v === undefined ? "—" : pct(v * 100, digits));

/** One figure of a result: its label, its value and a line of what it means. */
export function Metric({ label, value, cls, sub, title, testid }: { label: string; value: ComponentChildren; cls?: string; sub?: ComponentChildren; title?: string; testid?: string }) {
  return (
    <div class="dt-metric" title={title} data-testid={testid}>
      <span class="stat-label">{label}</span>
      <span class={`stat-value ${cls ?? ""}`}>{value}</span>
      {sub !== undefined && <span class="dt-sub">{sub}</span>}
    </div>
  );
}

/** A theme colour (#rrggbb) with an alpha, for chart fills (canvas takes no color-mix). */
function alpha(hex: string, a: number): string {
  const m = hex.match(/^#([0-9a-f]{2})([0-9a-f]{2})([0-9a-f]{2})$/i);
  return m ? `rgba(${parseInt(m[1], 16)}, ${parseInt(m[2], 16)}, ${parseInt(m[3], 16)}, ${a})` : hex;
}

/** The equity curve and its drawdown below; `every` names what a point is (a bar, a minute). */
export function EquityCharts({ d, every = "bar" }: { d: BacktestDetail; every?: string }) {
  const curve = d.equity_curve ?? [];
  if (curve.length === 0) return <div class="note">The run produced no equity curve ({every === "bar" ? "no bars in the range" : "nothing was replayed"}).</div>;
  const xs = curve.map((p) => Date.parse(p.timestamp));
  const span = xs[xs.length - 1] - xs[0];
  const xScale = timeScale(xs[0], xs[xs.length - 1]);
  let peak = d.initial_cash;
  const dd = curve.map((p, i) => {
    peak = Math.max(peak, p.equity);
    return { x: xs[i], y: peak > 0 ? (p.equity / peak - 1) * 100 : 0 };
  });
  const tip = (x: number) => (span <= 36 * 3600_000 ? dateTime(new Date(x).toISOString()).slice(0, 16) : date(new Date(x).toISOString()));
  return (
    <>
      <ChartView
        label={`Equity of backtest ${d.backtest_id}`}
        testid="equity-chart"
        height={260}
        deps={[d.backtest_id, curve]}
        config={() => ({
          type: "line",
          data: {
            datasets: [
              {
                label: "Equity",
                data: curve.map((p, i) => ({ x: xs[i], y: p.equity })),
                borderColor: cssVar("--accent"),
                backgroundColor: "transparent",
                borderWidth: 1.6,
                pointRadius: 0,
                tension: 0,
              },
              {
                label: "Initial cash",
                data: [
                  { x: xs[0], y: d.initial_cash },
                  { x: xs[xs.length - 1], y: d.initial_cash },
                ],
                borderColor: cssVar("--muted"),
                borderDash: [4, 4],
                borderWidth: 1,
                pointRadius: 0,
              },
            ],
          },
          options: {
            interaction: { mode: "index", intersect: false },
            scales: { x: xScale, y: { ticks: { callback: axisLabel("money") } } },
            plugins: {
              legend: { display: true, position: "bottom" },
              tooltip: {
                callbacks: {
                  title: (items) => (items.length ? tip(items[0].parsed.x ?? 0) : ""),
                  label: (item) => `${item.dataset.label}: ${money(item.parsed.y)}`,
                },
              },
            },
          },
        })}
      />
      <ChartView
        label={`Drawdown of backtest ${d.backtest_id}`}
        testid="drawdown-chart"
        height={120}
        deps={[d.backtest_id, curve]}
        config={() => ({
          type: "line",
          data: {
            datasets: [
              {
                label: "Drawdown",
                data: dd,
                borderColor: cssVar("--down"),
                backgroundColor: alpha(cssVar("--down"), 0.22),
                fill: "origin",
                borderWidth: 1,
                pointRadius: 0,
                tension: 0,
              },
            ],
          },
          options: {
            interaction: { mode: "index", intersect: false },
            scales: { x: xScale, y: { max: 0, suggestedMin: -1, ticks: { callback: axisLabel("percent"), maxTicksLimit: 4 } } },
            plugins: {
              legend: { display: false },
              tooltip: {
                callbacks: {
                  title: (items) => (items.length ? tip(items[0].parsed.x ?? 0) : ""),
                  label: (item) => `Drawdown: ${fixed(item.parsed.y ?? 0, 2)}%`,
                },
              },
            },
          },
        })}
      />
      <div class="note">
        Drawdown from the running peak of the curve above{curve.length >= 2000 ? ` (sampled to 2,000 points; the max drawdown figure uses every ${every})` : ""}. Times in New York.
      </div>
    </>
  );
}
