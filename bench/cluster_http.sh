#!/usr/bin/env bash
# The cost of a follower: two release nodes on one PostgreSQL database (a fresh one),
# the first leading, the second following; GET /api/health and GET /api/settings under 64
# concurrent connections (wrk) against the leader and through the follower (forwarded to the
# leader), and POST /api/orders' round trip (p50 of 30) both ways.
# Usage: bench/cluster_http.sh BIN [seconds-per-run] [runs]   (needs wrk and psql)
set -euo pipefail
cd "$(dirname "$0")/.."
BIN="$(realpath "$1")"
DURATION="${2:-10}"
RUNS="${3:-3}"
CONNS=64
THREADS=2
TOKEN="tro_bench_admin_token_0123456789abcdef"
ADMIN_URL="${TRADEOPS_PG_URL:-postgres://postgres@127.0.0.1:5432/test}"
DB="tradeops_cluster_http_$$"
command -v wrk >/dev/null || { echo "wrk is not installed (apt-get install wrk)"; exit 1; }
psql "$ADMIN_URL" -q -c "CREATE DATABASE $DB"
URL="${ADMIN_URL%/*}/$DB"
WORK=$(mktemp -d)
cleanup() {
  kill "${LEADER:-}" "${FOLLOWER:-}" 2>/dev/null || true
  wait 2>/dev/null || true
  psql "$ADMIN_URL" -q -c "DROP DATABASE IF EXISTS $DB WITH (FORCE)" || true
  [ -n "${KEEP_WORK:-}" ] && echo "kept $WORK" || rm -rf "$WORK"
}
trap cleanup EXIT
node() {
  (cd "$WORK" && exec env -i PATH="$PATH" TRADEOPS_DATABASE_URL="$URL" TRADEOPS_BIND="127.0.0.1:$1" TRADEOPS_ADMIN_TOKEN="$TOKEN" \
    TRADEOPS_RATE_LIMIT_PER_SECOND=10000000 TRADEOPS_RATE_LIMIT_BURST=10000000 TRADEOPS_LOG=warn \
    "$BIN" serve >"$WORK/node-$1.log" 2>&1) &
}
node 8321; LEADER=$!
for _ in $(seq 100); do grep -q "leads the engine" "$WORK/node-8321.log" 2>/dev/null && break; sleep 0.1; done
node 8322; FOLLOWER=$!
for _ in $(seq 100); do curl -sf localhost:8322/api/health >/dev/null && break; sleep 0.1; done
sleep 3

# shellcheck source=bench/wrk.sh
. bench/wrk.sh
bench() {
  local name="$1" url="$2" rows=() args=()
  [ -n "${3:-}" ] && args=(-H "$3")
  for _ in $(seq "$RUNS"); do rows+=("$(wrk_run "${args[@]}" "$url")"); done
  printf '| %-44s | %10s | %8s | %8s |\n' "$name" \
    "$(printf '%s\n' "${rows[@]}" | awk '{print $1}' | median)" \
    "$(printf '%s\n' "${rows[@]}" | awk '{print $2}' | median)" \
    "$(printf '%s\n' "${rows[@]}" | awk '{print $3}' | median)"
}
echo "wrk -t$THREADS -c$CONNS -d${DURATION}s, median of $RUNS runs"
echo "| request                                      | requests/s |  p50 ms  |  p99 ms  |"
echo "|----------------------------------------------|-----------:|---------:|---------:|"
bench "GET /api/health, leader" http://127.0.0.1:8321/api/health
bench "GET /api/health, through the follower" http://127.0.0.1:8322/api/health
bench "GET /api/settings, leader" http://127.0.0.1:8321/api/settings "Authorization: Bearer $TOKEN"
bench "GET /api/settings, through the follower" http://127.0.0.1:8322/api/settings "Authorization: Bearer $TOKEN"
cd bench && echo "order round trip, leader:" && python3 order_latency.py http://127.0.0.1:8321 "$TOKEN" 30 \
  && echo "order round trip, through the follower:" && python3 order_latency.py http://127.0.0.1:8322 "$TOKEN" 30
