// Who is signed in, what they may do, and the console's theme.
import { computed, signal } from "@preact/signals";

export type Role = "viewer" | "operator" | "admin";
export const me = signal<{ name: string; role: Role } | null>(null);

/** Operators and admins act; viewers only read, and see no action buttons. */
export const canOperate = computed(() => me.value?.role === "operator" || me.value?.role === "admin");
export const isAdmin = computed(() => me.value?.role === "admin");

export const theme = signal<string>(document.documentElement.dataset.theme || "light");
export function toggleTheme() {
  theme.value = theme.value === "dark" ? "light" : "dark";
  document.documentElement.dataset.theme = theme.value;
  localStorage.setItem("tradeops.theme", theme.value);
}
