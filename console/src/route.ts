// Hash routes: `#/tab?key=value`. `#token=…` (the sign-in link the service prints) is taken
// by main.tsx before routing starts.
import { signal } from "@preact/signals";

export interface Route {
  tab: string;
  params: URLSearchParams;
}

function parse(): Route {
  const h = location.hash.replace(/^#\/?/, "");
  const [tab, query] = h.split("?");
  return { tab: tab || "radar", params: new URLSearchParams(query ?? "") };
}

export const route = signal<Route>(parse());
window.addEventListener("hashchange", () => (route.value = parse()));

export function navigate(tab: string, params: Record<string, string> = {}) {
  const q = new URLSearchParams(params).toString();
  location.hash = `#/${tab}${q ? `?${q}` : ""}`;
}

export function href(tab: string, params: Record<string, string> = {}) {
  const q = new URLSearchParams(params).toString();
  return `#/${tab}${q ? `?${q}` : ""}`;
}
