// The order ticket's exit legs (CONTRACT §11): the stop loss (prefilled from the risk setting
// `default_stop_distance_pct`), its optional stop limit and the optional take-profit of a BUY,
// held at the broker once the entry fills (outside the regular session the engine holds the stop
// until it opens, CONTRACT §12); the risk settings the ticket prefills from; what the preview
// says the legs risk and stand to gain; and the symbol's chart with the entry, stop and target
// drawn before the order is sent. The arithmetic is in bracket.ts.
import { get } from "./api";
import { LEG_FIELDS, type LegInput } from "./bracket";
import { CandleChart, type Levels } from "./candles";
import { useEvents } from "./events";
import { money, price } from "./format";
import { Field, useLoad } from "./ui";

/** What the ticket prefills from the risk settings. */
export interface TicketSettings {
  /**
   * `risk_controls.default_stop_distance_pct` (null until read, or when the settings cannot be
   * read: then no stop is prefilled rather than a distance nobody chose).
   */
  stopDistance: number | null;
  /**
   * `risk_controls.extended_hours_entry_offset_pct`: how far past the ask (a buy) or the bid (a
   * sell) an extended-hours limit is prefilled (CONTRACT §12); 0.5, its default, until read.
   */
  extendedOffset: number;
}

/** The risk settings the ticket prefills from, as they are now. */
export function useTicketSettings(): TicketSettings {
  const settings = useLoad(() => get<{ risk_controls?: { default_stop_distance_pct?: number; extended_hours_entry_offset_pct?: number } }>("/api/settings"));
  useEvents(["settings.updated"], settings.reload);
  const rc = settings.data?.risk_controls;
  const stop = rc?.default_stop_distance_pct;
  const offset = rc?.extended_hours_entry_offset_pct;
  return { stopDistance: typeof stop === "number" && stop > 0 ? stop : null, extendedOffset: typeof offset === "number" && offset >= 0 ? offset : 0.5 };
}

type Change = (field: string, value: string) => void;

export function LegFields({
  legs,
  suggested,
  distance,
  reference,
  onChange,
  onResetStop,
  error,
  note,
}: {
  legs: LegInput;
  /** The stop prefilled now; null when the stop field holds what the operator typed. */
  suggested: number | null;
  distance: number | null;
  reference: number | null;
  onChange: Change;
  onResetStop: (() => void) | null;
  error: (field: string) => string | undefined;
  /** What happens to the legs in the session now, when it is not the regular one. */
  note?: string | null;
}) {
  const input = (field: string) => (e: { currentTarget: { value: string } }) => onChange(field, e.currentTarget.value);
  const stopHint =
    suggested !== null && distance !== null && reference !== null
      ? `${distance}% below ${price(reference)} (the risk setting); empty sends no legs`
      : legs.stop.trim() === ""
        ? "None: the position is not protected at the broker"
        : "Sell stop held at the broker once the entry fills";
  return (
    <fieldset class="ticket-legs" data-testid="ticket-legs">
      <legend>
        Exit legs at the broker{" "}
        {onResetStop && distance !== null && (
          <button type="button" class="linklike" data-testid="stop-reset" onClick={onResetStop}>
            stop back to {distance}% below
          </button>
        )}
      </legend>
      <div class="ord-form-grid">
        <Field label="Stop loss" error={error(LEG_FIELDS.stop)} hint={stopHint}>
          <input name="stop_loss" type="number" inputMode="decimal" min={0} step="0.01" value={legs.stop} onInput={input("stop")} />
        </Field>
        <Field label="Stop limit (optional)" error={error(LEG_FIELDS.stopLimit)} hint="Empty: the stop sells at market">
          <input name="stop_loss_limit" type="number" inputMode="decimal" min={0} step="0.01" value={legs.stopLimit} onInput={input("stopLimit")} />
        </Field>
        <Field label="Take profit (optional)" error={error(LEG_FIELDS.target)} hint="Limit sell; either leg filling cancels the other">
          <input name="take_profit" type="number" inputMode="decimal" min={0} step="0.01" value={legs.target} onInput={input("target")} />
        </Field>
      </div>
      {note && (
        <p class="note ticket-legs-note" data-testid="ticket-legs-session">
          {note}
        </p>
      )}
    </fieldset>
  );
}

/** What the preview says the legs risk and stand to gain (the server's figures, not the ticket's). */
export function RiskReward({ risk, reward, pending }: { risk: number | null | undefined; reward: number | null | undefined; pending: boolean }) {
  const known = (v: number | null | undefined): v is number => typeof v === "number";
  return (
    <div class="ticket-rr" data-testid="ticket-risk-reward" data-risk={known(risk) ? String(risk) : ""} data-reward={known(reward) ? String(reward) : ""}>
      <span>
        Risk to stop <strong class="down">{known(risk) ? money(risk) : pending ? "…" : "—"}</strong>
      </span>
      <span>
        Reward to target <strong class="up">{known(reward) ? money(reward) : "—"}</strong>
      </span>
      {known(risk) && known(reward) && risk > 0 && (
        <span class="muted" title="Reward to target ÷ risk to stop">
          {(reward / risk).toFixed(2)} R
        </span>
      )}
    </div>
  );
}

/**
 * The symbol's live chart with the order's entry, stop and target drawn as the chart draws a
 * position's levels: what the order will look like, before it is sent.
 */
export function TicketChart({ symbol, levels }: { symbol: string; levels: Levels }) {
  // The chart's holder carries the levels drawn (data-entry, data-stop, data-target).
  return (
    <div class="ticket-chart">
      <CandleChart symbol={symbol} levels={levels} height={180} testid="ticket-chart" />
    </div>
  );
}
