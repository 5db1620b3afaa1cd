// Account: the broker account's figures (refreshed on fills and position changes, and every
// 10 s as prices move), who is signed in and what their role may do, and — for admins only —
// the API tokens: list, create (the secret is shown once) and revoke. The service's version last.
import "./account.css";
import { useEffect, useRef, useState } from "preact/hooks";
import { ApiError, call, get, mode, post } from "../api";
import { useEvents } from "../events";
import { dateTime, frac, money, pnl, sign, time } from "../format";
import { isAdmin, me, type Role } from "../session";
import { account } from "../store";
import type { AccountSummary } from "../types";
import { Badge, Confirm, ErrorBanner, Field, Modal, Section, Stat, Table, notify, useLoad, useThrottled, type Column } from "../ui";

interface Me {
  name: string;
  role: Role;
  auth_enabled: boolean;
}

interface TokenRow {
  name: string;
  role: string;
  created_at: string;
  created_by: string;
  last_used_at: string | null;
}

interface CreatedToken {
  name: string;
  role: Role;
  created_at: string;
  token: string;
}

interface Version {
  service: string;
  version: string;
  api_version: string;
}

const ROLES: { role: Role; title: string; may: string[]; not?: string }[] = [
  {
    role: "viewer",
    title: "Viewer",
    may: ["Read every tab: radar, positions, orders, P&L and trades, health, settings, data and backtests", "Follow the live event stream"],
    not: "Cannot place or cancel orders, close positions, watch or block symbols, halt or resume trading, change settings, download data or run backtests; does not see the audit log or the API tokens.",
  },
  {
    role: "operator",
    title: "Operator",
    may: [
      "Everything a viewer may",
      "Place and cancel orders, close positions, stop and restart strategies",
      "Watch, block and unblock symbols",
      "Emergency liquidate & halt, and resume trading",
      "Change settings (except the admin guards below), download and import data, run backtests",
      "Read the audit log",
    ],
  },
  {
    role: "admin",
    title: "Admin",
    may: [
      "Everything an operator may",
      "Create and revoke API tokens",
      "Pass the settings guards: switch to LIVE, change a broker, raise a risk limit while LIVE",
    ],
  },
];

const ROLE_HINT: Record<Role, string> = {
  viewer: "Reads everything except the audit log and the tokens; cannot act.",
  operator: "Trades, halts and resumes, changes settings, reads the audit log.",
  admin: "Also manages tokens and passes the LIVE and broker guards.",
};

const TOKEN_NAME_RE = /^[A-Za-z0-9_.-]{1,64}$/;

export function AccountTab() {
  return (
    <div data-testid="tab-account" class="account-tab">
      <AccountSummaryPanel />
      <WhoAmI />
      {isAdmin.value && <Tokens />}
      <VersionLine />
    </div>
  );
}

// ---------------------------------------------------------------------------------------------
// Account summary

function AccountSummaryPanel() {
  const summary = useLoad(() => get<AccountSummary>("/api/account/summary"));
  const [at, setAt] = useState<string | null>(null);
  const reload = useThrottled(summary.reload, 1000);
  useEvents(["execution.created", "position.updated", "risk.state_changed"], reload);
  useEffect(() => {
    const timer = setInterval(summary.reload, 10_000);
    return () => clearInterval(timer);
  }, [summary.reload]);
  useEffect(() => {
    if (!summary.data) return;
    setAt(new Date().toISOString());
    account.value = summary.data; // the header shows the same figures
  }, [summary.data]);

  const a = summary.data;
  const startEquity = a ? a.equity - a.day_pnl : null;
  const halted = a?.account_status === "TRADING_HALTED";
  return (
    <Section
      title={
        <>
          Account <span class="muted">· {a ? `${a.broker_name} broker` : "…"}</span>
        </>
      }
      actions={<span class="muted">{at ? `updated ${time(at)} NY · refreshes on fills and every 10 s` : ""}</span>}
    >
      <ErrorBanner error={summary.error} />
      {!a && !summary.error && <div class="note">Loading the account…</div>}
      {a && (
        <>
          {halted && (
            <div class="banner error">
              <strong>Trading halted.</strong> The account accepts no new entries until an operator resumes trading.
            </div>
          )}
          <div class="account-groups" data-testid="account-summary">
            <div class="account-group">
              <h3>Balances</h3>
              <div class="account-cards">
                <Stat label="Equity" value={money(a.equity)} testid="account-equity" />
                <Stat label="Cash" value={money(a.cash)} testid="account-cash" />
                <Stat label="Buying power" value={money(a.buying_power)} testid="account-buying-power" />
                <Stat label="Margin available" value={money(a.margin_available)} testid="account-margin" />
              </div>
            </div>
            <div class="account-group">
              <h3>Profit &amp; loss</h3>
              <div class="account-cards">
                <Stat
                  label="Day P&L"
                  value={
                    <>
                      {pnl(a.day_pnl)}
                      {startEquity !== null && startEquity > 0 && (
                        <span class="stat-sub">{(a.day_pnl >= 0 ? "+" : "") + frac(a.day_pnl / startEquity)}</span>
                      )}
                    </>
                  }
                  cls={sign(a.day_pnl)}
                  testid="account-day-pnl"
                />
                <Stat label="Realized P&L" value={pnl(a.realized_pnl)} cls={sign(a.realized_pnl)} testid="account-realized" />
                <Stat label="Unrealized P&L" value={pnl(a.unrealized_pnl)} cls={sign(a.unrealized_pnl)} testid="account-unrealized" />
              </div>
            </div>
            <div class="account-group">
              <h3>Broker</h3>
              <div class="account-cards narrow">
                <Stat label="Broker" value={a.broker_name} testid="account-broker" />
                <Stat
                  label="Account status"
                  value={<Badge text={a.account_status} kind={halted ? "halted" : a.account_status === "ACTIVE" ? "active" : ""} />}
                  testid="account-status"
                />
              </div>
            </div>
          </div>
          <div class="note">
            Day P&L is equity now minus equity at the start of the session ({money(startEquity)}); the percentage is of that
            starting equity. {a.margin_available === a.buying_power ? "A cash account: margin available equals the buying power." : ""}
          </div>
        </>
      )}
    </Section>
  );
}

// ---------------------------------------------------------------------------------------------
// Who am I

function WhoAmI() {
  const who = useLoad(() => get<Me>("/api/auth/me"));
  const w = who.data;
  return (
    <Section title="Signed in as">
      <ErrorBanner error={who.error} />
      {!w && !who.error && <div class="note">Loading…</div>}
      {w && (
        <>
          <div class="stats" data-testid="whoami-panel">
            <Stat label="Token name" value={<span class="mono">{w.name}</span>} />
            <Stat label="Role" value={<span class={`badge role-${w.role}`}>{w.role}</span>} />
            <Stat label="Authentication" value={w.auth_enabled ? "enabled" : <span class="warn">disabled</span>} />
          </div>
          {!w.auth_enabled && (
            <div class="banner info">
              Authentication is disabled (allowed only when the service listens on loopback): every caller is{" "}
              <code>local</code> with the admin role.
            </div>
          )}
          <div class="role-grid">
            {ROLES.map((r) => (
              <div key={r.role} class={`role-card ${r.role === w.role ? "current" : ""}`}>
                <div class="role-card-head">
                  <span class={`badge role-${r.role}`}>{r.role}</span>
                  {r.role === w.role && <span class="muted">your role</span>}
                </div>
                <ul>
                  {r.may.map((m) => (
                    <li key={m}>{m}</li>
                  ))}
                </ul>
                {r.not && <p class="muted">{r.not}</p>}
              </div>
            ))}
          </div>
        </>
      )}
    </Section>
  );
}

// ---------------------------------------------------------------------------------------------
// API tokens (admins)

function Tokens() {
  const tokens = useLoad(() => get<TokenRow[]>("/api/auth/tokens"));
  const [created, setCreated] = useState<CreatedToken | null>(null);
  const [revoking, setRevoking] = useState<TokenRow | null>(null);
  const rows = tokens.data ?? [];
  const myName = me.value?.name;
  const admins = rows.filter((t) => t.role === "admin").length;

  const columns: Column<TokenRow>[] = [
    {
      key: "name",
      label: "Name",
      render: (t) => (
        <span>
          <span class="mono">{t.name}</span> {t.name === myName && <span class="badge you">you</span>}
        </span>
      ),
    },
    { key: "role", label: "Role", render: (t) => <span class={`badge role-${t.role}`}>{t.role}</span> },
    { key: "created_at", label: "Created (NY)", render: (t) => <span class="mono">{dateTime(t.created_at)}</span> },
    { key: "created_by", label: "Created by", render: (t) => <span class="mono">{t.created_by}</span> },
    {
      key: "last_used_at",
      label: "Last used (NY)",
      sortValue: (t) => t.last_used_at ?? "",
      render: (t) => (t.last_used_at ? <span class="mono">{dateTime(t.last_used_at)}</span> : <span class="muted">never</span>),
    },
    {
      key: "actions",
      label: "",
      sortValue: () => 0,
      render: (t) => (
        <button
          class="btn danger"
          data-testid={`revoke-${t.name}`}
          disabled={t.role === "admin" && admins <= 1}
          title={
            t.role === "admin" && admins <= 1
              ? "The last admin token cannot be revoked: create another admin token first"
              : undefined
          }
          onClick={(e) => {
            e.stopPropagation();
            setRevoking(t);
          }}
        >
          Revoke
        </button>
      ),
    },
  ];

  return (
    <Section
      title={
        <>
          API tokens <span class="muted">· admins only · {rows.length} active</span>
        </>
      }
    >
      <CreateTokenForm
        onCreated={(t) => {
          setCreated(t);
          tokens.reload();
        }}
      />
      <ErrorBanner error={tokens.error} />
      <Table
        testid="tokens-table"
        columns={columns}
        rows={rows}
        rowKey={(t) => t.name}
        sort={{ key: "created_at", desc: false }}
        empty={tokens.loading ? "Loading tokens…" : "No active token. Create one above."}
      />
      <div class="note">
        Secrets are never listed: only a hash is stored. Revoking takes effect at once — the token's next request is
        refused. The last admin token cannot be revoked (the service refuses it): create another admin token first.
        Tokens can also be managed on the server with <code>tradeops token create</code>, <code>revoke</code> and{" "}
        <code>list</code>; a running service picks those changes up within a second.
      </div>
      {created && <SecretDialog token={created} onClose={() => setCreated(null)} />}
      {revoking && (
        <Confirm
          title={`Revoke the token "${revoking.name}"`}
          confirmLabel="Revoke"
          danger
          reason
          testid="revoke-confirm"
          onClose={() => setRevoking(null)}
          onConfirm={async (reason) => {
            // The reason travels in the body, which the audit row records with the action.
            await call("DELETE", `/api/auth/tokens/${encodeURIComponent(revoking.name)}`, { reason });
            notify("ok", `Token "${revoking.name}" revoked.`);
            tokens.reload();
          }}
        >
          <p>
            Whoever uses this <strong>{revoking.role}</strong> token is refused from their next request on. This cannot be
            undone: a new token must be created instead.
          </p>
          {revoking.name === myName && (
            <div class="banner error">This is the token you are signed in with: the console will sign you out.</div>
          )}
        </Confirm>
      )}
    </Section>
  );
}

function CreateTokenForm({ onCreated }: { onCreated: (t: CreatedToken) => void }) {
  const [name, setName] = useState("");
  const [role, setRole] = useState<Role>("viewer");
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<ApiError | undefined>();
  const fieldErrors = error?.fieldErrors ?? {};
  const trimmed = name.trim();
  const nameLooksBad = trimmed !== "" && !TOKEN_NAME_RE.test(trimmed);

  const submit = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setError(undefined);
    try {
      const t = await post<CreatedToken>("/api/auth/tokens", { name: trimmed, role });
      setName("");
      setRole("viewer");
      onCreated(t);
    } catch (err) {
      setError(err instanceof ApiError ? err : new ApiError(0, "CLIENT", String(err)));
    } finally {
      setBusy(false);
    }
  };
  // Errors the fields show themselves are not repeated in the banner.
  const shownAtField = error && Object.keys(fieldErrors).some((f) => f === "name" || f === "role");
  return (
    <form class="token-form" data-testid="create-token" onSubmit={submit}>
      <Field
        label="New token name"
        error={fieldErrors["name"] ?? (nameLooksBad ? "1 to 64 characters of A–Z, a–z, 0–9, '_', '.', '-'" : undefined)}
        hint="Who or what uses it, e.g. alice-laptop or grafana"
      >
        <input
          name="name"
          value={name}
          onInput={(e) => {
            setName(e.currentTarget.value);
            setError(undefined);
          }} maxLength={64} autoComplete="off" spellcheck={false} required />
      </Field>
      <Field label="Role" error={fieldErrors["role"]} hint={ROLE_HINT[role]}>
        <select
          name="role"
          value={role}
          onChange={(e) => {
            setRole(e.currentTarget.value as Role);
            setError(undefined);
          }}
        >
          <option value="viewer">viewer — read only</option>
          <option value="operator">operator — trades and settings</option>
          <option value="admin">admin — also tokens and guards</option>
        </select>
      </Field>
      <div class="token-form-submit">
        <button class="btn primary" type="submit" disabled={busy || !trimmed || nameLooksBad}>
          {busy ? "Creating…" : "Create token"}
        </button>
      </div>
      {error && !shownAtField && (
        <div class="token-form-error">
          <ErrorBanner error={error} />
        </div>
      )}
    </form>
  );
}

async function copyText(text: string): Promise<boolean> {
  try {
    await navigator.clipboard.writeText(text);
    return true;
  } catch {
    // Not a secure context, or the permission was refused: fall back to a selection copy.
    const area = document.createElement("textarea");
    area.value = text;
    area.style.position = "fixed";
    area.style.opacity = "0";
    document.body.appendChild(area);
    area.select();
    let ok = false;
    try {
      ok = document.execCommand("copy");
    } catch {
      ok = false;
    }
    area.remove();
    return ok;
  }
}

function CopyRow({ label, value, testid }: { label: string; value: string; testid: string }) {
  const input = useRef<HTMLInputElement>(null);
  const [copied, setCopied] = useState(false);
  const copy = async () => {
    const ok = await copyText(value);
    if (ok) {
      setCopied(true);
      setTimeout(() => setCopied(false), 2000);
    } else {
      input.current?.select();
      notify("error", "Copying was refused by the browser: the text is selected, press Ctrl+C.");
    }
  };
  return (
    <Field label={label}>
      <div class="copy-row">
        <input ref={input} class="mono" readOnly value={value} data-testid={testid} onFocus={(e) => e.currentTarget.select()} />
        <button type="button" class="btn" onClick={copy} data-testid={`${testid}-copy`}>
          {copied ? "Copied ✓" : "Copy"}
        </button>
      </div>
    </Field>
  );
}

function SecretDialog({ token, onClose }: { token: CreatedToken; onClose: () => void }) {
  const link = `${location.origin}/#token=${encodeURIComponent(token.token)}`;
  return (
    <Modal title={`Token "${token.name}" created`} onClose={onClose} testid="token-secret">
      <div class="banner error">
        <strong>Shown only now.</strong> The secret is not stored and cannot be shown again. Copy it, or the sign-in link,
        before closing this dialog; if it is lost, revoke the token and create another.
      </div>
      <p>
        Role <span class={`badge role-${token.role}`}>{token.role}</span> · created {dateTime(token.created_at)} NY
        {mode.value === "LIVE" && (
          <>
            {" "}
            · <strong class="down">trading is LIVE</strong>
          </>
        )}
      </p>
      <CopyRow label="Secret (send as Authorization: Bearer …)" value={token.token} testid="token-secret-value" />
      <CopyRow label="Sign-in link (opens the console signed in as this token)" value={link} testid="token-signin-link" />
      <p class="muted">Share it over a private channel: anyone holding it acts with the {token.role} role.</p>
      <div class="modal-actions">
        <button class="btn primary" onClick={onClose}>
          I have stored it — close
        </button>
      </div>
    </Modal>
  );
}

// ---------------------------------------------------------------------------------------------
// Version

function VersionLine() {
  const v = useLoad(() => get<Version>("/api/version"));
  return (
    <div class="version-line" data-testid="version">
      {v.data ? (
        <>
          {v.data.service} <span class="mono">{v.data.version}</span> · API contract <span class="mono">{v.data.api_version}</span>
          {mode.value && <> · mode {mode.value}</>}
        </>
      ) : v.error ? (
        <span class="down">Version unavailable: {v.error.code} {v.error.message}</span>
      ) : (
        "…"
      )}
    </div>
  );
}
