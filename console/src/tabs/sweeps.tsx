// Parameter sweeps on the Data & Backtests tab: the form that queues one (sweep_form.tsx), the
// list of sweeps and the dialog of one (sweep_detail.tsx). Sweeps publish no event: the list is
// read again every second while a sweep is queued or running, and no longer once none is (or the
// tab is left).
import "./sweeps.css";
import { useCallback, useEffect, useRef, useState } from "preact/hooks";
import { ApiError, get, post, withQuery } from "../api";
import { dateTime, int } from "../format";
import { navigate, route } from "../route";
import { canOperate } from "../session";
import { walkForwardText, type SweepResult } from "../sweep_grid";
import { Action, ErrorBanner, Section, Table, onInput, type Column } from "../ui";
import { StatusCell, day, isActive } from "./backtest_detail";
import { shortId, toApiError, type Strategy } from "./data_form";
import { SweepDetailModal, constraintText, gridText, objectiveOf, paramsText, type SweepView } from "./sweep_detail";
import { SweepForm } from "./sweep_form";

// ---------------------------------------------------------------------------------------------
// The list

/**
 * GET /api/backtests/sweeps, read again a second after each answer while any sweep is queued or
 * running; stops when none is, or when the tab unmounts. Also read when the page becomes visible
 * again, and on the Refresh button: nothing tells the console of a sweep queued elsewhere.
 */
function useSweepList() {
  const [rows, setRows] = useState<SweepView[] | undefined>(undefined);
  const [error, setError] = useState<ApiError | undefined>(undefined);
  const [answers, setAnswers] = useState(0);
  const seq = useRef(0);
  const load = useCallback(() => {
    const n = ++seq.current;
    get<SweepView[]>(withQuery("/api/backtests/sweeps", { limit: 100 })).then(
      (r) => {
        if (n !== seq.current) return;
        setRows(r);
        setError(undefined);
        setAnswers((a) => a + 1);
      },
      (e) => {
        if (n !== seq.current) return;
        setError(toApiError(e));
        setAnswers((a) => a + 1);
      },
    );
  }, []);
  useEffect(load, [load]);
  // Sweeps queued elsewhere send no event either: read the list again when the page is looked at.
  useEffect(() => {
    const back = () => document.visibilityState === "visible" && load();
    document.addEventListener("visibilitychange", back);
    return () => document.removeEventListener("visibilitychange", back);
  }, [load]);
  const active = (rows ?? []).some((r) => isActive(r.status));
  useEffect(() => {
    if (!active) return;
    const t = window.setTimeout(load, 1000);
    return () => clearTimeout(t);
  }, [active, answers]);
  return { rows, error, reload: load };
}

/** Sweeps whose best the list shows: the newest ended ones (the list leaves results out). */
const BEST_OF_NEWEST = 10;

/**
 * The best combination of each of the newest ended sweeps, read one sweep at a time from
 * GET /api/backtests/sweeps/{id} (an ended sweep does not change, so each is read once).
 */
function useBests(rows: SweepView[] | undefined) {
  const [bests, setBests] = useState<Record<string, SweepResult | null>>({});
  const busy = useRef(false);
  const alive = useRef(true);
  useEffect(() => () => void (alive.current = false), []);
  useEffect(() => {
    if (busy.current || !rows) return;
    const next = rows
      .filter((r) => !isActive(r.status) && r.completed > 0)
      .slice(0, BEST_OF_NEWEST)
      .find((r) => !(r.sweep_id in bests));
    if (!next) return;
    busy.current = true;
    get<SweepView>(`/api/backtests/sweeps/${encodeURIComponent(next.sweep_id)}`)
      .then(
        (s) => s.best ?? null,
        () => null,
      )
      .then((best) => {
        busy.current = false;
        if (alive.current) setBests((b) => ({ ...b, [next.sweep_id]: best }));
      });
  }, [rows, bests]);
  return bests;
}

function sweepColumns(bests: Record<string, SweepResult | null>, reload: () => void): Column<SweepView>[] {
  return [
    { key: "sweep_id", label: "Sweep", render: (r) => <span class="mono" title={r.sweep_id}>{shortId(r.sweep_id)}</span> },
    {
      key: "strategy_id",
      label: "Strategy",
      render: (r) => (
        <span class="dt-two">
          <span>{r.strategy_id}</span>
          <span class="muted dt-small dt-clip mono" title={gridText(r.grid)}>
            {gridText(r.grid)}
          </span>
        </span>
      ),
    },
    {
      key: "symbol",
      label: "Symbol",
      render: (r) => (
        <span class="dt-two">
          <strong>{r.symbol}</strong>
          <span class="muted dt-small">{r.timeframe}</span>
        </span>
      ),
    },
    { key: "start", label: "Range", render: (r) => <span title={`${r.start} to ${r.end} (end exclusive)`}>{day(r.start)} → {day(r.end)}</span> },
    {
      key: "objective",
      label: "Objective",
      render: (r) => (
        <span class="dt-two">
          <span>{objectiveOf(r.objective).label}</span>
          {constraintText(r.constraint) && <span class="muted dt-small">{constraintText(r.constraint)}</span>}
          {r.walk_forward && (
            <span class="muted dt-small" data-testid="sweep-row-wf" title="Walk-forward: each window's in-sample best traded out of sample">
              walk-forward: {walkForwardText(r.walk_forward)}
            </span>
          )}
        </span>
      ),
    },
    {
      key: "status",
      label: "Status",
      render: (r) => (
        <span class="dt-two">
          <StatusCell status={r.status} progress={r.progress} />
          {r.status === "FAILED" && r.error && (
            <span class="down dt-small dt-clip" title={r.error}>
              {r.error}
            </span>
          )}
        </span>
      ),
    },
    {
      key: "combinations",
      label: "Combinations",
      num: true,
      title: "Completed of those queued; skipped: refused by the strategy",
      render: (r) => (
        <span class="dt-two">
          <span>
            {r.completed === r.combinations ? int(r.combinations) : `${int(r.completed)} / ${int(r.combinations)}`}
          </span>
          {(r.skipped > 0 || r.sample !== null) && (
            <span class="muted dt-small">
              {r.sample !== null ? `sample of ${int(r.sample)}` : ""}
              {r.sample !== null && r.skipped > 0 ? " · " : ""}
              {r.skipped > 0 ? `${int(r.skipped)} skipped` : ""}
            </span>
          )}
        </span>
      ),
    },
    {
      key: "best",
      label: "Best",
      sortValue: (r) => {
        const b = bests[r.sweep_id];
        return b ? ((b as unknown as Record<string, number | null>)[r.objective] ?? null) : null;
      },
      render: (r) => {
        if (isActive(r.status)) return <span class="muted">when done</span>;
        if (!(r.sweep_id in bests)) return <span class="muted" title="Open the sweep for its results">{r.completed ? "…" : "—"}</span>;
        const b = bests[r.sweep_id];
        if (!b) return <span class="muted" title="No combination meets the constraint with an objective">none</span>;
        const o = objectiveOf(r.objective);
        return (
          <span class="dt-two" data-testid="sweep-row-best">
            <span>{o.show((b as unknown as Record<string, number | null>)[r.objective])}</span>
            <span class="muted dt-small mono">{paramsText(b.parameters, Object.keys(r.grid))}</span>
          </span>
        );
      },
    },
    {
      key: "created_at",
      label: "Created (NY)",
      render: (r) => (
        <span class="dt-two">
          <span>{dateTime(r.created_at)}</span>
          <span class="muted dt-small">by {r.requested_by}</span>
        </span>
      ),
    },
    {
      key: "actions",
      label: "",
      sortValue: () => 0,
      render: (r) =>
        isActive(r.status) ? (
          <Action
            run={() => post(`/api/backtests/sweeps/${encodeURIComponent(r.sweep_id)}/cancel`).finally(reload)}
            done={`Sweep ${r.sweep_id} canceled: its queued parts at once, running ones at their next progress point.`}
            testid="cancel-sweep"
            title="Cancel the combinations not run yet; those completed keep their results"
          >
            Cancel
          </Action>
        ) : null,
    },
  ];
}

// ---------------------------------------------------------------------------------------------
// The sections

/** The combination of a sweep the backtest form is filled with. */
export interface SweepPick {
  sweep: SweepView;
  parameters: Record<string, number>;
}

export function Sweeps({
  strategies,
  strategiesError,
  onBacktest,
}: {
  strategies: Strategy[] | undefined;
  strategiesError: ApiError | undefined;
  onBacktest: (pick: SweepPick) => void;
}) {
  const list = useSweepList();
  const bests = useBests(list.rows);
  const [highlight, setHighlight] = useState<string | null>(null);
  const [filter, setFilter] = useState("");
  const openId = route.value.params.get("sweep");
  const close = () => navigate("data");
  const rows = (list.rows ?? []).filter((r) => {
    if (!filter) return true;
    const q = filter.toLowerCase();
    return r.symbol.toLowerCase().includes(q) || r.strategy_id.toLowerCase().includes(q) || r.sweep_id.includes(q) || r.requested_by.toLowerCase().includes(q);
  });
  const active = (list.rows ?? []).filter((r) => isActive(r.status)).length;
  return (
    <>
      {canOperate.value && (
        <Section
          title={
            <>
              Run a parameter sweep <span class="muted">· a strategy's parameters over a grid, each combination a backtest, ranked</span>
            </>
          }
        >
          <ErrorBanner error={strategiesError} />
          {strategies === undefined ? (
            !strategiesError && <div class="note">Loading strategies…</div>
          ) : strategies.length === 0 ? (
            <div class="note">The service offers no strategy to sweep.</div>
          ) : (
            <SweepForm
              strategies={strategies}
              onQueued={(id) => {
                setHighlight(id);
                list.reload();
              }}
            />
          )}
        </Section>
      )}
      <Section
        title={
          <>
            Parameter sweeps{" "}
            <span class="muted">
              · {int(list.rows?.length ?? 0)} sweeps{active ? ` · ${active} queued or running` : ""}
            </span>
          </>
        }
        actions={
          <>
            <input placeholder="Filter symbol, strategy, id, user" value={filter} onInput={onInput(setFilter)} aria-label="Filter sweeps" />
            <button class="btn" onClick={list.reload} data-testid="refresh-sweeps" title="Read the list again (sweeps queued elsewhere show on refresh while none here runs)">
              Refresh
            </button>
          </>
        }
      >
        <ErrorBanner error={list.error} />
        {!list.rows && !list.error ? (
          <div class="note">Loading sweeps…</div>
        ) : (
          <Table
            testid="sweeps-table"
            columns={sweepColumns(bests, list.reload)}
            rows={rows}
            rowKey={(r) => r.sweep_id}
            onRowClick={(r) => {
              setHighlight(r.sweep_id);
              navigate("data", { sweep: r.sweep_id });
            }}
            selected={openId ?? highlight}
            sort={{ key: "created_at", desc: true }}
            empty={
              list.rows?.length
                ? "No sweep matches the filter."
                : canOperate.value
                  ? "No sweep yet. Pick a strategy, a symbol and the parameters to vary above."
                  : "No sweep yet. An operator can run one from this tab."
            }
          />
        )}
        {rows.length > 0 && (
          <div class="note">
            Click a sweep for its heatmap and ranked results. The best column covers the {BEST_OF_NEWEST} newest ended sweeps; the list refreshes every
            second while a sweep is queued or running.
          </div>
        )}
      </Section>
      {openId && (
        <SweepDetailModal
          id={openId}
          onClose={close}
          onBacktest={(sweep, parameters) => {
            close();
            onBacktest({ sweep, parameters });
          }}
        />
      )}
    </>
  );
}
