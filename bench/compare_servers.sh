#!/usr/bin/env bash
# Two release builds of the service side by side (the layered server must not be
# slower than the one before it): HTTP throughput of GET /api/health and GET /api/settings
# (wrk, 64 connections), an order's round trip (bench/order_latency.py: POST /api/orders ->
# FILLED visible, PAPER, 100 orders) and the emergency halt through the API (bench/halt_api.py:
# 100 positions, 500 working orders, DEMO, SQLite). The two binaries run alternately, round after
# round, so both see the same machine; each figure is the median over the rounds.
# Usage: bench/compare_servers.sh BASELINE_BIN CANDIDATE_BIN [rounds] [seconds-per-wrk-run]
# (needs wrk: apt-get install wrk)
set -euo pipefail
cd "$(dirname "$0")/.."
BASE_BIN=$(realpath "$1")
CAND_BIN=$(realpath "$2")
ROUNDS="${3:-5}"
DURATION="${4:-10}"
CONNS=64
THREADS=2
TOKEN="tro_bench_admin_token_0123456789abcdef"
command -v wrk >/dev/null || { echo "wrk is not installed (apt-get install wrk)"; exit 1; }
# The service refuses TRADEOPS_* variables it does not know: start it without the caller's.
for v in $(env | awk -F= '/^TRADEOPS_/ {print $1}'); do unset "$v"; done

WORK=$(mktemp -d)
SVC=""
cleanup() { [ -n "$SVC" ] && kill "$SVC" 2>/dev/null; rm -rf "$WORK"; }
trap cleanup EXIT

# shellcheck source=bench/wrk.sh
. bench/wrk.sh

# start BIN PORT DIR [VAR=VALUE...]: starts the service in DIR and waits until it answers.
start() {
  local bin="$1" port="$2" dir="$3"
  shift 3
  mkdir -p "$dir"
  (cd "$dir" && exec env "$@" TRADEOPS_BIND="127.0.0.1:$port" TRADEOPS_ADMIN_TOKEN="$TOKEN" \
    TRADEOPS_RATE_LIMIT_PER_SECOND=10000000 TRADEOPS_RATE_LIMIT_BURST=10000000 \
    "$bin" serve >"$dir/svc.log" 2>&1) &
  SVC=$!
  for _ in $(seq 100); do curl -sf "localhost:$port/api/health" >/dev/null && return 0; sleep 0.1; done
  echo "the service did not start:"; cat "$dir/svc.log"; exit 1
}
stop() { kill "$SVC" 2>/dev/null || true; wait "$SVC" 2>/dev/null || true; SVC=""; }

for round in $(seq "$ROUNDS"); do
  for which in base cand; do
    bin=$BASE_BIN; [ "$which" = cand ] && bin=$CAND_BIN
    start "$bin" 8097 "$WORK/http-$which-$round"
    sleep 2
    wrk_run "http://127.0.0.1:8097/api/health" >>"$WORK/health.$which"
    wrk_run -H "Authorization: Bearer $TOKEN" "http://127.0.0.1:8097/api/settings" >>"$WORK/settings.$which"
    stop
    start "$bin" 8099 "$WORK/orders-$which-$round"
    python3 bench/order_latency.py http://127.0.0.1:8099 "$TOKEN" 100 | tee -a "$WORK/orders.log.$which" |
      awk '{for (i = 1; i <= NF; i++) if ($i == "p50") print $(i+1)}' >>"$WORK/orders.$which"
    stop
    start "$bin" 8098 "$WORK/halt-$which-$round" TRADEOPS_MODE=DEMO
    python3 bench/halt_api.py http://127.0.0.1:8098 "$TOKEN" | tee -a "$WORK/halt.log.$which" |
      awk '{for (i = 1; i <= NF; i++) if ($(i+1) == "ms") print $i}' >>"$WORK/halt.$which"
    stop
  done
  echo "round $round of $ROUNDS done" >&2
done

echo "median of $ROUNDS rounds, alternating the two builds (wrk -t$THREADS -c$CONNS -d${DURATION}s)"
echo "| measure | baseline | candidate |"
echo "|---|---:|---:|"
for m in health settings; do
  for col in 1 2 3; do
    name=$(echo "requests/s p50_ms p99_ms" | cut -d' ' -f"$col")
    b=$(awk -v c="$col" '{print $c}' "$WORK/$m.base" | median)
    c=$(awk -v c="$col" '{print $c}' "$WORK/$m.cand" | median)
    echo "| GET /api/$m $name | $b | $c |"
  done
done
echo "| POST /api/orders -> FILLED visible (PAPER, 100 orders), p50 ms | $(median <"$WORK/orders.base") | $(median <"$WORK/orders.cand") |"
echo "| emergency halt through the API, ms | $(median <"$WORK/halt.base") | $(median <"$WORK/halt.cand") |"
echo "every run: health base [$(awk '{print $1}' "$WORK/health.base" | paste -sd' ')] cand [$(awk '{print $1}' "$WORK/health.cand" | paste -sd' ')]"
echo "           settings base [$(awk '{print $1}' "$WORK/settings.base" | paste -sd' ')] cand [$(awk '{print $1}' "$WORK/settings.cand" | paste -sd' ')]"
echo "           orders p50 ms base [$(paste -sd' ' "$WORK/orders.base")] cand [$(paste -sd' ' "$WORK/orders.cand")]"
echo "           halt ms base [$(paste -sd' ' "$WORK/halt.base")] cand [$(paste -sd' ' "$WORK/halt.cand")]"
