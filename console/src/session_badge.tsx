// The market's session on the console (CONTRACT §12): the header's badge — PRE, REG, AH or
// CLOSED with the time to the next change on the market's clock ("REG · closes in 1h 12m"),
// its tooltip the day's session times — and the Positions tab's warning in the last 15 minutes
// of the regular session that the venue will trigger none of the stops resting there after the
// close. Live from `market.session` and the header's clock (store.ts); the words are in
// market_session.ts.
import { closeWarning, marketNow, sessionBadge } from "./market_session";
import { marketSession } from "./store";
import type { Position } from "./types";

/** The header's session stat; nothing from a service that has no sessions. */
export function SessionStat() {
  const s = marketSession.value;
  if (!s) return null;
  const b = sessionBadge(s, marketNow());
  return (
    <div class="stat session-stat" data-testid="stat-session" data-session={s.session} title={b.title}>
      <span class="stat-label">Session</span>
      <span class="stat-value">
        <span class={`session-badge ${b.cls}`}>{b.short}</span>
        {b.text.slice(b.short.length)}
      </span>
    </div>
  );
}

/** In the last 15 minutes of the regular session: the positions whose stops the engine alone will hold. */
export function CloseWarningBanner({ rows }: { rows: Position[] }) {
  const w = closeWarning(marketSession.value, marketNow(), rows);
  if (!w) return null;
  return (
    <div class="banner close-warning" role="alert" data-testid="close-engine-warning" data-count={w.count}>
      ⚠ <strong>{w.text}.</strong> The venue triggers no stops outside the regular session: from {w.closeAt} the engine holds each stop and fires it as an
      extended-hours limit when the last trade crosses it — only while tradeops runs. Close now what should not rely on the engine overnight.
    </div>
  );
}
