#!/usr/bin/env bash
# HTTP benchmark: GET /api/health and GET /api/settings under 64 concurrent
# connections (wrk), beside a bare axum handler returning a constant, all release builds on
# this machine in the same run. Also the service's idle resident memory after start.
# Usage: bench/http.sh [seconds-per-run] [runs]   (needs wrk: apt-get install wrk)
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION="${1:-10}"
RUNS="${2:-3}"
CONNS=64
THREADS=2
TOKEN="tro_bench_admin_token_0123456789abcdef"
command -v wrk >/dev/null || { echo "wrk is not installed (apt-get install wrk)"; exit 1; }

cargo build --release --quiet --bin tradeops --example bare_axum
WORK=$(mktemp -d)
cleanup() { kill "${SVC:-}" "${BARE:-}" 2>/dev/null || true; rm -rf "$WORK"; }
trap cleanup EXIT

(cd "$WORK" && TRADEOPS_BIND=127.0.0.1:8090 TRADEOPS_ADMIN_TOKEN="$TOKEN" \
  TRADEOPS_RATE_LIMIT_PER_SECOND=10000000 TRADEOPS_RATE_LIMIT_BURST=10000000 \
  exec "$OLDPWD/target/release/tradeops" serve >"$WORK/svc.log" 2>&1) &
SVC=$!
target/release/examples/bare_axum 127.0.0.1:8091 >"$WORK/bare.log" 2>&1 &
BARE=$!
for _ in $(seq 50); do curl -sf localhost:8090/api/health >/dev/null && curl -sf localhost:8091/ >/dev/null && break; sleep 0.2; done

sleep 5
kill -0 "$SVC" 2>/dev/null || { echo "the service exited:"; cat "$WORK/svc.log"; exit 1; }
IDLE_KB=$(awk '/VmRSS/ {print $2}' "/proc/$SVC/status")
echo "idle resident memory after start: $((IDLE_KB / 1024)) MiB ($IDLE_KB kB)"

# shellcheck source=bench/wrk.sh
. bench/wrk.sh
# Prints "requests/s p50_ms p99_ms" for one wrk run.
run() { wrk_run "$@"; }

# bench NAME ID URL [HEADER]: one table row, median of $RUNS runs; requests/s kept as rps.ID.
bench() {
  local name="$1" id="$2" url="$3" rows=() args=()
  [ -n "${4:-}" ] && args=(-H "$4")
  for _ in $(seq "$RUNS"); do rows+=("$(run "${args[@]}" "$url")"); done
  local rps p50 p99
  rps=$(printf '%s\n' "${rows[@]}" | awk '{print $1}' | median)
  p50=$(printf '%s\n' "${rows[@]}" | awk '{print $2}' | median)
  p99=$(printf '%s\n' "${rows[@]}" | awk '{print $3}' | median)
  printf '| %-34s | %10s | %8s | %8s |\n' "$name" "$rps" "$p50" "$p99"
  echo "$rps" >"$WORK/rps.$id"
}

echo
echo "wrk -t$THREADS -c$CONNS -d${DURATION}s, median of $RUNS runs"
echo "| endpoint                           | requests/s |  p50 ms  |  p99 ms  |"
echo "|------------------------------------|-----------:|---------:|---------:|"
bench "bare axum constant (baseline)" bare http://127.0.0.1:8091/
bench "GET /api/health" health http://127.0.0.1:8090/api/health
bench "GET /api/settings (bearer token)" settings http://127.0.0.1:8090/api/settings "Authorization: Bearer $TOKEN"
base=$(cat "$WORK/rps.bare")
for name in health settings; do
  awk -v a="$(cat "$WORK/rps.$name")" -v b="$base" -v n="$name" 'BEGIN { printf "%s: %.0f%% of the bare handler\n", n, a * 100 / b }'
done
