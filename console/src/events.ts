// The live event stream (CONTRACT §7) over fetch, so the token travels in the Authorization
// header rather than in a URL. One connection serves the whole console; views subscribe by
// kind. On a drop it reconnects with Last-Event-ID, so nothing published meanwhile is missed.
import { signal } from "@preact/signals";
import { useEffect } from "preact/hooks";
import { authHeaders, mode, signOut, token } from "./api";

export interface StreamEvent<T = any> {
  id: number;
  kind: string;
  timestamp: string;
  mode: string;
  data: T;
}

/** `connecting`, `live` or `down` (retrying). */
export const streamStatus = signal<"connecting" | "live" | "down">("connecting");
/** The latest event received, of any kind (for the header's "last event" hint). */
export const lastEventAt = signal<string>("");

type Listener = (e: StreamEvent) => void;
const listeners = new Map<string, Set<Listener>>();

export function subscribe(kinds: string[], fn: Listener): () => void {
  for (const k of kinds) {
    if (!listeners.has(k)) listeners.set(k, new Set());
    listeners.get(k)!.add(fn);
  }
  return () => kinds.forEach((k) => listeners.get(k)?.delete(fn));
}

/** Calls `fn` for each event of these kinds while the component is mounted. */
export function useEvents(kinds: string[], fn: Listener) {
  useEffect(() => subscribe(kinds, fn), [kinds.join(","), fn]);
}

/** When the last event of each kind arrived (performance.now()), for the speed figures. */
const arrivals: Record<string, number> = {};
(window as any).__eventAt = arrivals;

function dispatch(e: StreamEvent) {
  arrivals[e.kind] = performance.now();
  if (e.mode) mode.value = e.mode;
  lastEventAt.value = e.timestamp;
  listeners.get(e.kind)?.forEach((fn) => {
    try {
      fn(e);
    } catch (err) {
      console.error("event listener failed", e.kind, err);
    }
  });
}

let lastId: string | null = null;
let controller: AbortController | null = null;

/** Parses one SSE message block (lines up to a blank line). */
function parseBlock(block: string): StreamEvent | null {
  let id = "";
  let data = "";
  for (const line of block.split("\n")) {
    if (line.startsWith(":")) continue; // heartbeat
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
    if (field === "id") id = value;
    else if (field === "data") data += (data ? "\n" : "") + value;
  }
  if (!data) return null;
  if (id) lastId = id;
  try {
    const body = JSON.parse(data);
    return { id: Number(id), kind: body.kind, timestamp: body.timestamp, mode: body.mode, data: body.data };
  } catch {
    return null;
  }
}

async function runOnce(signal: AbortSignal) {
  const headers: Record<string, string> = { ...authHeaders(), Accept: "text/event-stream" };
  if (lastId) headers["Last-Event-ID"] = lastId;
  const res = await fetch("/api/events", { headers, signal });
  if (res.status === 401) {
    signOut("Your token is no longer valid.");
    return;
  }
  if (!res.ok || !res.body) throw new Error(`event stream answered ${res.status}`);
  streamStatus.value = "live";
  const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += value.replace(/\r\n?/g, "\n");
    let end: number;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const e = parseBlock(block);
      if (e) dispatch(e);
    }
  }
}

/** Starts the stream (again); runs until `stopStream` or sign-out. */
export function startStream() {
  stopStream();
  const c = new AbortController();
  controller = c;
  (async () => {
    let delay = 500;
    while (!c.signal.aborted && token.value) {
      streamStatus.value = "connecting";
      try {
        await runOnce(c.signal);
        delay = 500;
      } catch {
        if (c.signal.aborted) return;
      }
      if (c.signal.aborted || !token.value) return;
      streamStatus.value = "down";
      await new Promise((r) => setTimeout(r, delay));
      delay = Math.min(delay * 2, 10_000);
    }
  })();
}

export function stopStream() {
  controller?.abort();
  controller = null;
}
