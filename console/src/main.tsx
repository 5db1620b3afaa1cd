// The operator console: sign-in (also by a sign-in link opened in a tab already open), the header
// (account metrics, trading state, market clock and session, mode badge, theme, emergency control), the
// halted banner, the offer to restart the strategies a halt stopped, and the tabs. Data arrives
// through the event stream: the header follows `account.updated`; the only timer is the radar's
// scan rhythm.
import "./styles.css";
import { render } from "preact";
import { signal } from "@preact/signals";
import { useEffect, useState } from "preact/hooks";
import { ApiError, checkToken, get, mode, post, setConfirmLive, signIn, signOut, signOutReason, token } from "./api";
import { startStream, stopStream, streamStatus, useEvents, type StreamEvent } from "./events";
import { money, pnl, sign, dateTime, marketClock, time, todayNy } from "./format";
import { route } from "./route";
import { canOperate, me, theme, toggleTheme, type Role } from "./session";
import { Confirm, ErrorBanner, Field, Modal, Stat, Toasts, notify, describe, useThrottled } from "./ui";
import { account, cluster, liquidating, loadAccount, loadMarketClock, loadMarketSession, loadPositions, loadRisk, openPositions, risk, trackHalts, trackSession } from "./store";
import { SessionStat } from "./session_badge";
import type { AccountSummary } from "./types";
import { AlertLog, startAlerts, unseen } from "./alerts";
import { Hotkeys, emergencyAsked } from "./hotkeys";
import { ChartDialog } from "./symbol_chart";
import { OrderTicket } from "./ticket";
import { RadarTab } from "./tabs/radar";
import { ChartsTab } from "./tabs/charts";
import { PositionsTab } from "./tabs/positions";
import { OrdersTab } from "./tabs/orders";
import { PnlTab } from "./tabs/pnl";
import { HealthTab } from "./tabs/health";
import { SettingsTab } from "./tabs/settings";
import { AccountTab } from "./tabs/account";
import { DataTab } from "./tabs/data";
import { AuditTab } from "./tabs/audit";

// A sign-in link (`/#token=…`, printed by the service on its first start) signs in, whether it
// opens a new tab or is pasted into a console already open (hashchange). The token leaves the
// address bar at once; it is checked before it replaces the session, and a refused one says so.
async function takeSignInLink() {
  const m = location.hash.match(/^#token=([^&]+)/);
  if (!m) return;
  const secret = decodeURIComponent(m[1]);
  history.replaceState(null, "", location.pathname + location.search + "#/radar");
  window.dispatchEvent(new HashChangeEvent("hashchange")); // the router reads the new route
  try {
    await checkToken(secret);
    signIn(secret);
  } catch (err) {
    const why = err instanceof ApiError ? `${err.code}: ${err.message}` : String(err);
    const text = `The sign-in link was refused (${why}). Ask an admin for a new link or token.`;
    if (token.value) notify("error", `${text} You are still signed in as before.`);
    else signOutReason.value = text;
  }
}
takeSignInLink();
window.addEventListener("hashchange", () => {
  if (location.hash.startsWith("#token=")) takeSignInLink();
});

interface Tab {
  id: string;
  label: string;
  view: () => preact.JSX.Element;
  /** Least role that sees the tab (default: every role). */
  role?: "operator";
}

const TABS: Tab[] = [
  { id: "radar", label: "Radar", view: RadarTab },
  { id: "charts", label: "Charts", view: ChartsTab },
  { id: "positions", label: "Positions", view: PositionsTab },
  { id: "orders", label: "Orders", view: OrdersTab },
  { id: "pnl", label: "P&L", view: PnlTab },
  { id: "health", label: "Health", view: HealthTab },
  { id: "settings", label: "Settings", view: SettingsTab },
  { id: "account", label: "Account", view: AccountTab },
  { id: "data", label: "Data & Backtests", view: DataTab },
  { id: "audit", label: "Audit", view: AuditTab, role: "operator" },
];

// ---------------------------------------------------------------------------------------------
// Sign-in

function SignIn() {
  const [secret, setSecret] = useState("");
  const [error, setError] = useState<ApiError | undefined>();
  const [busy, setBusy] = useState(false);
  const submit = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setError(undefined);
    try {
      await checkToken(secret.trim());
      signIn(secret.trim());
    } catch (err) {
      setError(err instanceof ApiError ? err : new ApiError(0, "CLIENT", String(err)));
      setBusy(false);
    }
  };
  return (
    <div class="signin">
      <section class="panel">
        <div class="panel-head">
          <h2>tradeops — sign in</h2>
        </div>
        <form class="panel-body" onSubmit={submit}>
          <p>
            Paste an API token. On its first start the service prints a link that signs you in directly; an admin can
            create more with <code>tradeops token create</code>.
          </p>
          {signOutReason.value && !error && (
            <div class="banner info" data-testid="signout-reason">
              {signOutReason.value}
            </div>
          )}
          <ErrorBanner error={error} />
          <Field label="Token">
            <input
              type="password"
              name="token"
              autoComplete="current-password"
              value={secret}
              onInput={(e) => setSecret(e.currentTarget.value)}
              autoFocus
              required
            />
          </Field>
          <button class="btn primary" type="submit" disabled={busy || !secret.trim()}>
            Sign in
          </button>
        </form>
      </section>
    </div>
  );
}

// ---------------------------------------------------------------------------------------------
// Header

function ModeBadge() {
  const m = mode.value || "…";
  return (
    <span class={`mode-badge ${m}`} data-testid="mode-badge" title={m === "LIVE" ? "Real money: orders go to the broker" : "No real money"}>
      {m === "LIVE" ? "● LIVE TRADING" : m}
    </span>
  );
}

function EmergencyControl() {
  // Also opened by the Shift+H shortcut.
  const asking = emergencyAsked.value;
  const setAsking = (v: boolean) => (emergencyAsked.value = v);
  if (!canOperate.value) return null;
  const halted = risk.value?.trading_state === "HALTED";
  if (halted) return null; // the banner below the header offers Resume
  return (
    <>
      <button class="btn emergency" data-testid="emergency" onClick={() => setAsking(true)}>
        Emergency Liquidate &amp; Halt
      </button>
      {asking && (
        <Confirm
          title="Emergency Liquidate & Halt"
          confirmLabel="Liquidate everything and halt"
          danger
          reason
          testid="emergency-confirm"
          onClose={() => setAsking(false)}
          onConfirm={async (reason) => {
            const r = await post<{ halted: boolean; liquidation_requested: boolean }>("/api/risk/emergency-halt", { reason });
            liquidating.value = r.liquidation_requested;
            notify("info", r.liquidation_requested ? "Halted. Closing every position…" : "Halted. No position was open.");
            await Promise.all([loadRisk(), loadPositions()]);
          }}
        >
          <p>
            This cancels every open order, sells every position at market, and stops all strategies until someone
            resumes trading. {mode.value === "LIVE" && <strong>Trading is LIVE: these are real orders.</strong>}
          </p>
        </Confirm>
      )}
    </>
  );
}

function HaltedBanner() {
  const [asking, setAsking] = useState(false);
  const r = risk.value;
  if (r?.trading_state !== "HALTED") return null;
  const open = openPositions.value;
  return (
    <div class="halted-banner" role="alert" data-testid="halted-banner">
      <strong>TRADING HALTED</strong>
      <span>
        {dateTime(r.halted_at)} by {r.halted_by ?? "the risk manager"}: {r.halt_reason ?? "no reason given"}
      </span>
      <span data-testid="liquidation-progress">
        {open === null ? "" : open === 0 ? "All positions flat." : `Liquidating: ${open} position${open === 1 ? "" : "s"} still open…`}
      </span>
      <span style={{ flex: 1 }} />
      {canOperate.value && (
        <button class="btn" data-testid="resume" onClick={() => setAsking(true)}>
          Resume trading
        </button>
      )}
      {asking && (
        <Confirm
          title="Resume trading"
          confirmLabel="Resume"
          reason
          testid="resume-confirm"
          onClose={() => setAsking(false)}
          onConfirm={async (reason) => {
            await post("/api/risk/resume", { reason });
            notify("ok", "Trading resumed.");
            await loadRisk();
          }}
        >
          <p>
            New orders are allowed again. The strategies the halt stopped stay stopped: restart them afterwards with one
            action, or one by one from the watchlist.
          </p>
        </Confirm>
      )}
    </div>
  );
}

/** After a resume: the strategies the halt stopped, and the one action that restarts them. */
function HaltStoppedBanner() {
  const [asking, setAsking] = useState(false);
  const r = risk.value;
  const stopped = r?.stopped_by_halt ?? [];
  if (!r || r.trading_state === "HALTED" || stopped.length === 0) return null;
  const list = stopped.join(", ");
  return (
    <div class="banner info halt-stopped" role="status" data-testid="stopped-by-halt-banner">
      <span>
        The emergency halt stopped {stopped.length === 1 ? "the strategy" : `${stopped.length} strategies`} on{" "}
        <strong data-testid="stopped-by-halt-list">{list}</strong>; resuming left {stopped.length === 1 ? "it" : "them"} stopped.
      </span>
      {canOperate.value && (
        <button class="btn" data-testid="restart-halted" onClick={() => setAsking(true)}>
          Restart the strategies the halt stopped
        </button>
      )}
      {asking && (
        <Confirm
          title="Restart the strategies the halt stopped"
          confirmLabel={`Restart ${stopped.length}`}
          reason
          testid="restart-halted-confirm"
          onClose={() => setAsking(false)}
          onConfirm={async (reason) => {
            const res = await post<{ restarted: { symbol: string }[]; skipped: { symbol: string; reason: string }[] }>(
              "/api/risk/resume-strategies",
              { reason },
            );
            const done = res.restarted.map((x) => x.symbol).join(", ");
            notify("ok", res.restarted.length ? `Restarted: ${done}.` : "No strategy was restarted.");
            for (const s of res.skipped) notify("info", `Not restarted: ${s.symbol} — ${s.reason}.`);
            await loadRisk();
          }}
        >
          <p>
            Starts the strategy again on <strong>{list}</strong>. A symbol blocked or taken off the watchlist since is skipped,
            and you are told why. {mode.value === "LIVE" && <strong>Trading is LIVE: these strategies place real orders.</strong>}
          </p>
        </Confirm>
      )}
    </div>
  );
}

/** How much of the daily loss limit today's loss has used, as a bar: the distance to REDUCING. */
function LossBar() {
  const a = account.value;
  const limit = risk.value?.max_daily_loss;
  if (!a || !limit) return <Stat label="To loss limit" value="—" testid="stat-loss-limit" />;
  const loss = Math.max(0, -a.day_pnl);
  const used = Math.min(1, loss / limit);
  const left = Math.max(0, limit - loss);
  const level = used >= 1 ? "breached" : used >= 0.75 ? "critical" : used >= 0.5 ? "warning" : "ok";
  return (
    <div class="stat loss-bar" data-testid="stat-loss-limit" data-used={used.toFixed(4)} data-left={left.toFixed(2)} title={`Today's loss ${money(loss)} of the ${money(limit)} limit: trading turns REDUCING at the limit`}>
      <span class="stat-label">To loss limit</span>
      <span class={`stat-value ${level === "ok" ? "" : "down"}`}>{money(left)}</span>
      <span class={`bar ${level}`}>
        <span style={{ width: `${(used * 100).toFixed(1)}%` }} />
      </span>
    </div>
  );
}

function Header({ onAlerts }: { onAlerts: () => void }) {
  const a = account.value;
  const live = mode.value === "LIVE";
  return (
    <>
      {live && <div class="live-stripe" />}
      <header class={`top ${live ? "live" : ""}`}>
        <div class="brand">
          <span>tradeops</span>
          <ModeBadge />
        </div>
        <div class="header-stats" data-testid="header-stats">
          <Stat label="Equity" value={money(a?.equity)} testid="stat-equity" />
          <Stat label="Day P&L" value={pnl(a?.day_pnl)} cls={sign(a?.day_pnl)} testid="stat-day-pnl" />
          <Stat label="Open risk" value={money(a?.open_risk)} testid="stat-open-risk" />
          <LossBar />
          <Stat label="Buying power" value={money(a?.buying_power)} />
          <Stat label="Realized" value={pnl(a?.realized_pnl)} cls={sign(a?.realized_pnl)} />
          <Stat label="Unrealized" value={pnl(a?.unrealized_pnl)} cls={sign(a?.unrealized_pnl)} />
          <Stat
            label="Trading"
            value={risk.value?.trading_state ?? "—"}
            cls={risk.value?.trading_state === "ACTIVE" ? "up" : risk.value ? "down" : ""}
            testid="stat-trading"
          />
          <Stat label="Market (NY)" value={marketClock.value ? `${marketClock.value.date.slice(5)} ${time(marketClock.value.time).slice(0, 5)}` : "—"} testid="stat-market" />
          <SessionStat />
          {cluster.value && (
            <span
              title={`Answered by ${cluster.value.node} (${cluster.value.role}). Engine leader: ${cluster.value.leader ?? "none"}, epoch ${cluster.value.epoch}; ${cluster.value.members} member(s).`}
            >
              <Stat
                label="Engine leader"
                value={`${cluster.value.leader ?? "none"} · e${cluster.value.epoch}`}
                cls={cluster.value.leader ? "up" : "down"}
                testid="stat-leader"
              />
            </span>
          )}
        </div>
        <div class="header-right">
          <span class="stream" title="Live updates" data-testid="stream-status">
            <span class={`dot ${streamStatus.value}`} />
            {streamStatus.value === "live" ? "live" : streamStatus.value === "connecting" ? "connecting…" : "reconnecting…"}
          </span>
          <button class="btn ghost" onClick={onAlerts} data-testid="alerts-toggle" title="Alert log and notifications">
            Alerts{unseen.value > 0 ? ` (${unseen.value})` : ""}
          </button>
          <button class="btn ghost" onClick={() => window.dispatchEvent(new KeyboardEvent("keydown", { key: "?" }))} title="Keyboard shortcuts (?)">
            ?
          </button>
          <button class="btn ghost" onClick={toggleTheme} data-testid="theme-toggle" title="Light or dark theme">
            {theme.value === "dark" ? "☀ Light" : "☾ Dark"}
          </button>
          <span class="muted" data-testid="whoami">
            {me.value ? `${me.value.name} · ${me.value.role}` : ""}
          </span>
          <button class="btn ghost" onClick={() => signOut("Signed out.")}>
            Sign out
          </button>
          <EmergencyControl />
        </div>
      </header>
    </>
  );
}

// ---------------------------------------------------------------------------------------------
// LIVE confirmation for guarded writes

const livePrompt = signal<{ message: string; resolve: (ok: boolean) => void } | null>(null);
setConfirmLive((message) => new Promise((resolve) => (livePrompt.value = { message, resolve })));

function LivePrompt() {
  const p = livePrompt.value;
  if (!p) return null;
  const answer = (ok: boolean) => {
    livePrompt.value = null;
    p.resolve(ok);
  };
  return (
    <Modal title="Confirm a LIVE action" onClose={() => answer(false)} testid="live-confirm">
      <p>
        <span class="mode-badge LIVE">LIVE</span> {p.message}
      </p>
      <p>This acts on the real brokerage account.</p>
      <div class="modal-actions">
        <button class="btn ghost" onClick={() => answer(false)}>
          Cancel
        </button>
        <button class="btn danger" onClick={() => answer(true)}>
          Confirm LIVE action
        </button>
      </div>
    </Modal>
  );
}

// ---------------------------------------------------------------------------------------------
// Shell

/** `account.updated`: the account summary with the trading state and the market clock. */
function onAccountUpdated(e: StreamEvent<AccountSummary & { trading_state: string; market_time: string; trading_date: string | null }>) {
  const { trading_state, market_time, trading_date, ...summary } = e.data;
  account.value = summary;
  marketClock.value = { date: trading_date ?? todayNy(), time: market_time };
  if (risk.value && risk.value.trading_state !== trading_state) {
    risk.value = { ...risk.value, trading_state };
    loadRisk(); // the halt's who, when and why
  }
}

function Shell() {
  const [error, setError] = useState<ApiError | undefined>();
  useEffect(() => {
    get<{ name: string; role: Role }>("/api/auth/me").then(
      (who) => (me.value = { name: who.name, role: who.role }),
      (e) => setError(e),
    );
    loadAccount();
    loadRisk();
    loadPositions();
    loadMarketClock();
    loadMarketSession();
    const stopAlerts = startAlerts();
    const stopHalts = trackHalts();
    const stopSession = trackSession();
    startStream();
    return () => (stopStream(), stopAlerts(), stopHalts(), stopSession());
  }, []);
  const [alertsOpen, setAlertsOpen] = useState(false);
  useEvents(["settings.updated"], loadRisk);
  // The header's figures, trading state and market clock, as they change (at most once a second).
  useEvents(["account.updated"], onAccountUpdated);
  // A fill moves the header's figures at once (within 1 s of the event), not at the next
  // coalesced account update.
  const refresh = useThrottled(() => {
    loadAccount();
    loadPositions();
  }, 250);
  useEvents(["execution.created", "position.updated"], refresh);
  useEvents(["risk.state_changed"], () => {
    loadRisk();
    loadPositions();
  });
  useEffect(() => {
    document.title = `${mode.value === "LIVE" ? "● LIVE — " : ""}tradeops`;
  }, [mode.value]);

  const visible = TABS.filter((t) => !t.role || canOperate.value);
  const current = visible.find((t) => t.id === route.value.tab) ?? visible[0];
  const View = current.view;
  return (
    <>
      <Header onAlerts={() => setAlertsOpen(!alertsOpen)} />
      {alertsOpen && <AlertLog onClose={() => setAlertsOpen(false)} />}
      <HaltedBanner />
      <HaltStoppedBanner />
      <nav class="tabs" role="tablist">
        {visible.map((t) => (
          <a key={t.id} href={`#/${t.id}`} role="tab" aria-selected={t.id === current.id} class={t.id === current.id ? "active" : ""} data-tab={t.id}>
            {t.label}
          </a>
        ))}
      </nav>
      <main>
        <ErrorBanner error={error} />
        <View key={current.id} />
      </main>
      <OrderTicket />
      <ChartDialog />
      <Hotkeys />
    </>
  );
}

/** With authentication off (loopback only), the service answers without a token: no sign-in. */
async function signInIfAuthIsOff() {
  try {
    const res = await fetch("/api/auth/me", { headers: { Accept: "application/json" } });
    const body = await res.json();
    if (res.ok && body?.data?.auth_enabled === false) signIn("local");
  } catch {
    /* the sign-in screen stays */
  }
}

function App() {
  useEffect(() => {
    if (!token.value) signInIfAuthIsOff();
  }, []);
  return (
    <>
      {token.value ? <Shell key={token.value} /> : <SignIn />}
      <Toasts />
      <LivePrompt />
    </>
  );
}

render(<App />, document.getElementById("app")!);

// Surface unexpected failures rather than failing silently.
window.addEventListener("unhandledrejection", (e) => notify("error", describe(e.reason)));
