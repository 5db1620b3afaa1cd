// The API client: bearer token, the contract's envelopes, and errors carrying the contract's
// code, message and detail so every refusal can be shown as the service worded it.
import { signal } from "@preact/signals";

const TOKEN_KEY = "tradeops.token";

/** The signed-in token (null: show the sign-in screen). */
export const token = signal<string | null>(localStorage.getItem(TOKEN_KEY));
/** The trading mode of the latest response or event: PAPER, DEMO or LIVE. */
export const mode = signal<string>("");
/** Why the operator was signed out, shown on the sign-in screen. */
export const signOutReason = signal<string>("");

export function signIn(secret: string) {
  localStorage.setItem(TOKEN_KEY, secret);
  signOutReason.value = "";
  token.value = secret;
}

/** Asks the service who `secret` belongs to, without signing in with it. */
export async function checkToken(secret: string): Promise<{ name: string; role: string }> {
  let res: Response;
  try {
    res = await fetch("/api/auth/me", { headers: { Authorization: `Bearer ${secret}`, Accept: "application/json" } });
  } catch {
    throw new ApiError(0, "NETWORK", "The service cannot be reached. Is it running?");
  }
  const env = (await res.json().catch(() => null)) as Envelope<{ name: string; role: string }> | null;
  if (!env) throw new ApiError(res.status, "BAD_RESPONSE", `The service answered ${res.status} without a JSON body`);
  if (!res.ok || !env.ok) {
    const e = env.error ?? { code: "UNKNOWN", message: `HTTP ${res.status}` };
    throw new ApiError(res.status, e.code, e.message, e.detail ?? {});
  }
  return env.data;
}

export function signOut(reason = "") {
  localStorage.removeItem(TOKEN_KEY);
  signOutReason.value = reason;
  token.value = null;
}

/** A refusal: the contract's error envelope. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly detail: Record<string, unknown> = {},
  ) {
    super(message);
  }
  /** The field a VALIDATION_ERROR names first, if any. */
  get field(): string | undefined {
    const f = this.detail["field"];
    return typeof f === "string" ? f : undefined;
  }
  /** Every field a VALIDATION_ERROR names, with its reason (`detail.errors`). */
  get fieldErrors(): Record<string, string> {
    const out: Record<string, string> = {};
    const list = this.detail["errors"];
    if (Array.isArray(list)) {
      for (const e of list) if (e && typeof e.field === "string") out[e.field] = String(e.reason ?? "");
    } else if (this.field) {
      out[this.field] = String(this.detail["reason"] ?? this.message);
    }
    return out;
  }
}

export interface Envelope<T> {
  ok: boolean;
  data: T;
  meta: { mode: string; timestamp: string; request_id: string; next_cursor?: string | null };
  error?: { code: string; message: string; detail?: Record<string, unknown> };
}

export function authHeaders(): Record<string, string> {
  return token.value ? { Authorization: `Bearer ${token.value}` } : {};
}

/**
 * Asked before repeating a write that LIVE trading refused for want of `X-Confirm-Live`; the
 * console shows it as a dialog. Resolves true to send the write again, confirmed.
 */
export let confirmLive: (message: string) => Promise<boolean> = async () => false;
export function setConfirmLive(fn: (message: string) => Promise<boolean>) {
  confirmLive = fn;
}

/** Whether a refusal only wants the LIVE confirmation header. */
function wantsLiveConfirmation(e: ApiError): boolean {
  return e.code === "CONFIRMATION_REQUIRED" || (e.code === "SETTINGS_UPDATE_BLOCKED" && e.detail["guard"] === "X-Confirm-Live");
}

/** A request body that is not JSON (a CSV file, say), with its content type. */
export interface RawBody {
  raw: BodyInit;
  contentType: string;
}

/** Calls the API; resolves to the whole envelope, or throws an ApiError. */
export async function call<T>(method: string, path: string, body?: unknown | RawBody): Promise<Envelope<T>> {
  try {
    return await send<T>(method, path, body, false);
  } catch (e) {
    if (e instanceof ApiError && wantsLiveConfirmation(e) && (await confirmLive(e.message))) {
      return send<T>(method, path, body, true);
    }
    throw e;
  }
}

function isRaw(body: unknown): body is RawBody {
  return typeof body === "object" && body !== null && "raw" in body && "contentType" in body;
}

async function send<T>(method: string, path: string, body: unknown, confirmed: boolean): Promise<Envelope<T>> {
  const headers: Record<string, string> = { ...authHeaders(), Accept: "application/json" };
  let payload: BodyInit | undefined;
  if (isRaw(body)) {
    headers["Content-Type"] = body.contentType;
    payload = body.raw;
  } else if (body !== undefined) {
    headers["Content-Type"] = "application/json";
    payload = JSON.stringify(body);
  }
  if (confirmed) headers["X-Confirm-Live"] = "true";
  let res: Response;
  try {
    res = await fetch(path, { method, headers, body: payload });
  } catch {
    throw new ApiError(0, "NETWORK", "The service cannot be reached. Is it running?");
  }
  let env: Envelope<T>;
  try {
    env = await res.json();
  } catch {
    throw new ApiError(res.status, "BAD_RESPONSE", `The service answered ${res.status} without a JSON body`);
  }
  if (env.meta?.mode) mode.value = env.meta.mode;
  if (!res.ok || !env.ok) {
    const e = env.error ?? { code: "UNKNOWN", message: `HTTP ${res.status}` };
    if (res.status === 401) signOut(e.message);
    throw new ApiError(res.status, e.code, e.message, e.detail ?? {});
  }
  return env;
}

export const get = async <T>(path: string) => (await call<T>("GET", path)).data;
export const post = async <T>(path: string, body: unknown = {}) => (await call<T>("POST", path, body)).data;
export const put = async <T>(path: string, body: unknown) => (await call<T>("PUT", path, body)).data;
export const del = async <T>(path: string) => (await call<T>("DELETE", path)).data;

/** `path?k=v&…`, leaving out empty values. */
export function withQuery(path: string, q: Record<string, string | number | undefined | null>): string {
  const p = new URLSearchParams();
  for (const [k, v] of Object.entries(q)) if (v !== undefined && v !== null && v !== "") p.set(k, String(v));
  const s = p.toString();
  return s ? `${path}?${s}` : path;
}
