// The API's resources as the console reads them (see /api/openapi.json for the full schemas).

export interface AccountSummary {
  buying_power: number;
  equity: number;
  cash: number;
  margin_available: number;
  day_pnl: number;
  realized_pnl: number;
  unrealized_pnl: number;
  broker_name: string;
  account_status: string;
  /** What the open positions stand to lose: down to each strategy's stop, or the whole value without one. */
  open_risk: number;
}

export interface RiskState {
  trading_state: "ACTIVE" | "HALTED" | string;
  max_daily_loss: number;
  current_daily_loss: number;
  max_position_size: number;
  max_trades_per_day: number;
  trades_today: number;
  active_watchlist_limit: number;
  open_position_limit: number;
  open_positions: number;
  /** Today's blocks (the same rows as GET /api/radar/blocks). */
  blocked_symbols: Block[];
  drawdown: number;
  reconciliation_status: string;
  reconciliation_detail: string;
  halted_at: string | null;
  halt_reason: string | null;
  halted_by: string | null;
  /** Watched symbols whose strategy the emergency halt stopped and nobody has restarted. */
  stopped_by_halt: string[];
}

export interface RadarRow {
  rank: number;
  symbol: string;
  price: number;
  percentage_gain: number;
  change_1m: number;
  change_5m: number;
  volume: number;
  average_volume: number;
  relative_volume: number;
  /** Shares in the float; null when unknown (not imported, and the market source has none). */
  float: number | null;
  /** Null when unknown (not imported, and the market source has none). */
  sector: string | null;
  captured_at: string;
  /** Its trading was halted when the scan was published (CONTRACT §11). */
  halted: boolean;
  /** The session the scan ran in (CONTRACT §12); absent from an older service. */
  session?: SessionPhase;
  /** Percent from the previous close to the pre-market price, or the day's open; null when unknown. */
  gap_pct?: number | null;
  /** Shares traded in today's pre-market; null when unknown. */
  premarket_volume?: number | null;
  /** The pre-market's highest trade; null when unknown. */
  premarket_high?: number | null;
}

export interface Block {
  symbol: string;
  block_scope: string;
  effective_from: string;
  expires_at: string | null;
  reason: string;
  blocked_by: string;
}

export interface WatchlistRow {
  symbol: string;
  current_price: number | null;
  time_added: string;
  time_closed: string | null;
  time_completed: string | null;
  strategy_status: string;
  strategy_id: string;
  strategy_version: string;
  polling_status: string;
  source: string;
  reason: string | null;
}

export interface Position {
  symbol: string;
  market_price: number;
  average_entry_price: number;
  quantity: number;
  unrealized_pnl: number;
  realized_pnl: number;
  strategy_status: string;
  opened_at: string;
  alert_level: "NORMAL" | "WARNING" | "CRITICAL" | string;
  /** The protective stop its strategy manages it with; null when no strategy manages it. */
  stop_loss: number | null;
  /** Where its strategy takes profit; null once it has, or when no strategy manages it. */
  target: number | null;
  /** Its symbol's trading is halted: a close is refused until the reopen (CONTRACT §11). */
  halted: boolean;
  /**
   * What protects it (CONTRACT §11): `BROKER` (a stop for the whole quantity rests at the
   * broker), `ENGINE` (the engine watches the level), `NONE`.
   */
  protection: Protection;
  /** The `client_order_id` of the stop resting at the broker; null without one. */
  protective_order_id: string | null;
}

export type Protection = "BROKER" | "ENGINE" | "NONE";

/** Where the market's present falls in the exchange day (CONTRACT §12). */
export type SessionPhase = "PRE_MARKET" | "REGULAR" | "AFTER_HOURS" | "CLOSED";

/**
 * `GET /api/market/session` and the `market.session` event's data (CONTRACT §12). The session
 * times are RFC 3339 UTC instants, all null on a date the exchange does not trade.
 */
export interface MarketSession {
  session: SessionPhase;
  /** The New York date of the market's present (YYYY-MM-DD). */
  trading_day: string | null;
  pre_market_open_at: string | null;
  regular_open_at: string | null;
  regular_close_at: string | null;
  after_hours_close_at: string | null;
  /** The session that begins next, and when. */
  next_session: SessionPhase | null;
  next_session_at: string | null;
}

/** A trading halt of one symbol (CONTRACT §11). */
export interface Halt {
  /** The venue's code: `LUDP` (a LULD volatility pause), `T1` (news pending), or another as sent. */
  reason_code: string;
  reason: string;
  /** When the halt began. */
  since: string;
}

/** Whether a symbol trades: the `symbol.status` event's data, and part of the quote. */
export interface SymbolStatus {
  symbol: string;
  trading_status: "TRADING" | "HALTED" | string;
  /** Null while it trades. */
  halt: Halt | null;
}

/** The last trade and quote of a symbol now (`GET /api/market/quote`). */
export interface Quote extends SymbolStatus {
  last: number;
  bid: number;
  ask: number;
  prev_close: number;
}

export interface Execution {
  execution_id: string;
  timestamp: string;
  quantity: number;
  price: number;
  fee: number;
}

export interface Order {
  submitted_at: string;
  status: string;
  symbol: string;
  side: "BUY" | "SELL";
  quantity: number;
  filled_quantity: number;
  order_type: string;
  price: number | null;
  broker_name: string;
  client_order_id: string;
  broker_order_id: string | null;
  reason: string | null;
  strategy_id: string | null;
  mode: string;
  /** A LIMIT DAY order that may fill outside the regular session (CONTRACT §12); absent from an older service. */
  extended_hours?: boolean;
}

export interface OrderDetail extends Order {
  time_in_force: string;
  limit_price: number | null;
  stop_price: number | null;
  average_fill_price: number | null;
  fees: number;
  reject_reason: string | null;
  updated_at: string;
  /** A BUY's stop leg, held at the broker once it fills (CONTRACT §11); null without one. */
  stop_loss: { stop_price: number; limit_price: number | null } | null;
  /** A BUY's take-profit leg; null without one. */
  take_profit: { limit_price: number } | null;
  executions: Execution[];
}

export interface Trade {
  trade_id: string;
  symbol: string;
  strategy_id: string | null;
  entry_time: string;
  exit_time: string;
  gross_pnl: number;
  net_pnl: number;
  winner_loser_label: "WINNER" | "LOSER" | "BREAKEVEN" | string;
  quantity: number;
  entry_price: number;
  exit_price: number;
  fees: number;
  mode: string;
  return_pct: number;
  r_multiple: number | null;
  hold_seconds: number;
  exit_reason: string;
}

export interface TradeDetail {
  trade: Trade;
  events: { timestamp: string; kind: string; detail: string }[];
  features: Record<string, number | string | null>;
  outcomes: {
    return_pct: number;
    r_multiple: number | null;
    hold_seconds: number;
    mfe: number | null;
    mae: number | null;
    exit_reason: string;
  };
  explanations: { rule: string; text: string }[];
}

/** Where a notification channel delivers (CONTRACT §13). */
export type ChannelKind = "telegram" | "discord" | "slack" | "ntfy" | "webhook";

/**
 * How a channel's deliveries go: `OK` (the last went through, or none yet), `RETRYING` (one waits
 * for a retry or a 429's `retry_after`), `FAILING` (the last failed for good).
 */
export type ChannelState = "OK" | "RETRYING" | "FAILING";

/** A notification channel of the configuration (`GET /api/notifications/channels`); never its secrets. */
export interface NotificationChannel {
  name: string;
  kind: ChannelKind;
  /** The event kinds it is sent (`order.filled`, `risk.violation`, `test`…). */
  events: string[];
  queued: number;
  sent: number;
  failed: number;
  /** Routine notices folded into a digest when its queue was full. */
  dropped: number;
  last_sent_at: string | null;
  last_error: string | null;
  state: ChannelState;
  /** When a `RETRYING` channel tries again; null otherwise. */
  retry_at: string | null;
  /** Which Telegram commands it takes from its chats: `none`, `viewer` (/status, /positions, /pnl), `operator` (also /halt). */
  commands_role: "none" | "viewer" | "operator";
}

/** One notification sent (or being sent) to one channel (`GET /api/notifications/deliveries`, `POST /api/notifications/test`). */
export interface NotificationDelivery {
  /** The stored row's id, what the list pages by; null for a test answered before it was stored. */
  delivery_id?: number | null;
  event_id: string;
  /** The event kind (`test` for a test). */
  kind: string;
  channel: string;
  /** `FOLDED`: folded into a digest when the channel's queue was full. */
  /** `RETRYING`: not delivered yet (queued with `attempts` 0, or waiting for its next attempt). */
  status: "SENT" | "RETRYING" | "FAILED" | "FOLDED";
  attempts: number;
  created_at: string | null;
  sent_at: string | null;
  error: string | null;
}

/** Open-order statuses: the ones that can still be cancelled. */
export const OPEN_STATUSES = ["NEW", "ACCEPTED", "PARTIALLY_FILLED", "PENDING_CANCEL"];
