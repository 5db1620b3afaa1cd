// The API's backtest resources as the console reads them (GET /api/backtests, GET
// /api/backtests/{id}, `backtest.updated`): a single run's row and result, and what a
// whole-desk replay's result adds. Types only, below every view that shows them (the backtest
// dialog, a desk replay's view, the tab's lists and forms).
import type { Trade } from "../types";
import type { Violation } from "./health";

export type Status = "QUEUED" | "RUNNING" | "COMPLETED" | "FAILED" | string;

/** A row of GET /api/backtests, and the payload of `backtest.updated`. */
export interface BacktestRow {
  backtest_id: string;
  /** `desk` for a whole-desk replay (POST /api/backtests with `kind: "desk"`); absent for a single run. */
  kind?: string;
  /** A desk replay's prints: `simulated` (also when absent, on older rows) or `downloaded`. */
  source?: string;
  /** A replay of downloaded days: the symbols it replayed. */
  symbols?: string[];
  status: Status;
  /** 0..1 */
  progress: number;
  strategy_id: string;
  strategy_version: string;
  /** `*` for a desk replay: every symbol. */
  symbol: string;
  start: string;
  end: string;
  /** Absent on a desk replay's row, as are parameters, commission, slippage and fill. */
  timeframe: string;
  parameters: Record<string, number>;
  initial_cash: number;
  commission_rate: number;
  slippage_bps: number;
  fill: string;
  settings: Record<string, Record<string, unknown>> | null;
  requested_by: string;
  created_at: string;
  started_at: string | null;
  finished_at: string | null;
  error: string | null;
  /** Fractions (docs/research.md, Metrics): 0.12 = +12%. Null until COMPLETED. */
  total_return: number | null;
  sharpe_ratio: number | null;
  max_drawdown: number | null;
  win_loss_ratio: number | null;
  win_rate: number | null;
  profit_factor: number | null;
  trade_count: number | null;
  /** Orders the risk gate refused, by rule; null until COMPLETED. */
  refusals: Record<string, number> | null;
  /** risk_controls.market_buy_buffer_pct the run traded under. */
  market_buy_buffer_pct?: number;
}

/** GET /api/backtests/{id}: the row, the effective settings and, once COMPLETED, the result. */
export interface BacktestDetail extends BacktestRow {
  effective_settings?: Record<string, Record<string, unknown>>;
  expectancy?: number | null;
  gross_profit?: number | null;
  gross_loss?: number | null;
  sharpe_days?: number | null;
  final_equity?: number | null;
  bars?: number | null;
  orders?: number | null;
  trades?: Trade[] | null;
  equity_curve?: { timestamp: string; equity: number }[] | null;
  /** A desk replay's: the risk gate's state at the end (ACTIVE, REDUCING, HALTED). */
  trading_state?: string | null;
  /** A desk replay's 15-second market steps and radar scans. */
  steps?: number | null;
  scans?: number | null;
  violations?: DeskViolation[] | null;
  watched?: DeskWatch[] | null;
  by_symbol?: DeskSymbol[] | null;
}

/** A symbol the allocator watched during the replay (`watched`). */
export interface DeskWatch {
  symbol: string;
  /** `RADAR` for the allocator's auto-watch. */
  source: string;
  strategy_id: string;
  /** The strategy's state of the symbol at the end. */
  strategy_status: string;
  time_added: string;
}

/** An order the risk gate refused during the replay (`violations`, as GET /api/risk/violations). */
export type DeskViolation = Violation;

/** Whose prints a replay trades (`source`): the simulated market's, regenerated, or the stored minute bars of downloaded days. */
export type DeskSource = "simulated" | "downloaded";

/** One symbol's trades in the replay (`by_symbol`). */
export interface DeskSymbol {
  symbol: string;
  trades: number;
  wins: number;
  net_pnl: number;
}
