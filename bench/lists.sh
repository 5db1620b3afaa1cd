#!/usr/bin/env bash
# List endpoints under load: GET /api/orders?limit=100 and GET /api/trades?date=TODAY
# under 64 concurrent connections (wrk, 2 threads), on a release server. Its fresh database holds
# 200 orders of today making 100 completed trades (placed through the API by
# bench/lists_seed.py, so both answers are 100-row pages) and, as a service that has traded for
# a while, HISTORY_DAYS (default 30) earlier days of the same (copied in SQL with the service
# stopped; it is started again before measuring, so every cache starts cold). `GET /api/trades`
# has no `limit`: the console asks for a day's trades, 100 here.
# SQLite always; PostgreSQL too with --pg or TRADEOPS_BENCH_PG_URL (an admin URL of the local
# server, default postgres://postgres@127.0.0.1:5432/postgres), on a database created for the run
# and dropped afterwards.
# Usage: bench/lists.sh [--pg] [seconds-per-run] [runs]   (needs wrk, sqlite3, psql)
# TRADEOPS_BENCH_BIN=path measures that tradeops binary instead of building this checkout (a
# baseline build of an earlier commit, in the same session).
set -euo pipefail
cd "$(dirname "$0")/.."
PG_URL="${TRADEOPS_BENCH_PG_URL:-}"
if [ "${1:-}" = "--pg" ]; then
  PG_URL="${PG_URL:-postgres://postgres@127.0.0.1:5432/postgres}"
  shift
fi
DURATION="${1:-10}"
RUNS="${2:-3}"
HISTORY_DAYS="${HISTORY_DAYS:-30}"
CONNS=64
THREADS=2
PORT="${TRADEOPS_BENCH_PORT:-18431}"
TOKEN="tro_bench_admin_token_0123456789abcdef"
command -v wrk >/dev/null || { echo "wrk is not installed (apt-get install wrk)"; exit 1; }

BIN="${TRADEOPS_BENCH_BIN:-}"
if [ -z "$BIN" ]; then
  cargo build --release --quiet --bin tradeops
  BIN="$PWD/target/release/tradeops"
fi
WORK=$(mktemp -d)
PG_DB=""
cleanup() {
  kill "${SVC:-}" 2>/dev/null || true
  wait "${SVC:-}" 2>/dev/null || true
  if [ -n "$PG_DB" ]; then psql -q "$PG_URL" -c "DROP DATABASE IF EXISTS $PG_DB WITH (FORCE)" >/dev/null || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT

# shellcheck source=bench/wrk.sh
. bench/wrk.sh
# Prints "requests/s p50_ms p99_ms" for one wrk run.
run() { wrk_run -H "Authorization: Bearer $TOKEN" "$1"; }

# bench NAME URL: one table row, medians of $RUNS runs (each run's figures listed after it).
bench() {
  local name="$1" url="$2" rows=()
  for _ in $(seq "$RUNS"); do rows+=("$(run "$url")"); done
  local rps p50 p99
  rps=$(printf '%s\n' "${rows[@]}" | awk '{print $1}' | median)
  p50=$(printf '%s\n' "${rows[@]}" | awk '{print $2}' | median)
  p99=$(printf '%s\n' "${rows[@]}" | awk '{print $3}' | median)
  printf '| %-36s | %10s | %8s | %8s |  runs: %s\n' "$name" "$rps" "$p50" "$p99" "$(printf '%s; ' "${rows[@]}")"
}

# sql BACKEND DATABASE_URL: runs SQL from stdin on the database.
sql() {
  case "$1" in
    sqlite) sqlite3 -cmd ".timeout 5000" "${2#sqlite://}" ;;
    postgres) psql -q -tA -v ON_ERROR_STOP=1 "$2" ;;
  esac
}

# history TODAY DAYS: SQL copying today's orders and executions to each of DAYS earlier days.
history() {
  local today="$1" days="$2" cols="broker_order_id, symbol, side, order_type, time_in_force, quantity, \
limit_price, stop_price, status, filled_quantity, filled_notional, fees, reason, strategy_id, reject_reason, mode"
  echo "BEGIN;"
  for k in $(seq "$days"); do
    local day ms=$((k * 86400000))
    day=$(date -u -d "$today - $k days" +%F)
    echo "INSERT INTO orders (client_order_id, $cols, trading_date, created_at, updated_at, stop_loss)
      SELECT client_order_id || '-h$k', $cols, '$day', created_at - $ms, updated_at - $ms, stop_loss
      FROM orders WHERE trading_date = '$today';"
    echo "INSERT INTO executions (execution_id, client_order_id, ts, quantity, price, fee)
      SELECT e.execution_id || '-h$k', e.client_order_id || '-h$k', e.ts - $ms, e.quantity, e.price, e.fee
      FROM executions e JOIN orders o ON o.client_order_id = e.client_order_id WHERE o.trading_date = '$today';"
  done
  echo "COMMIT;"
}

serve() {
  local backend="$1" url="$2"
  # The service refuses TRADEOPS_* variables it does not know: the bench's own are left out.
  (cd "$WORK" && exec env -u TRADEOPS_BENCH_BIN -u TRADEOPS_BENCH_PG_URL -u TRADEOPS_BENCH_PORT TRADEOPS_DATABASE_URL="$url" TRADEOPS_BIND="127.0.0.1:$PORT" TRADEOPS_ADMIN_TOKEN="$TOKEN" \
    TRADEOPS_RATE_LIMIT_PER_SECOND=10000000 TRADEOPS_RATE_LIMIT_BURST=10000000 \
    "$BIN" serve >>"$WORK/svc-$backend.log" 2>&1) &
  SVC=$!
  for _ in $(seq 100); do curl -sf "http://127.0.0.1:$PORT/api/health" >/dev/null && break; sleep 0.2; done
  kill -0 "$SVC" 2>/dev/null || { echo "the service exited:"; cat "$WORK/svc-$backend.log"; exit 1; }
}

stop() {
  kill "$SVC"
  wait "$SVC" 2>/dev/null || true
  SVC=""
}

# measure BACKEND DATABASE_URL: serve, seed today and the history, serve again, check the pages,
# then wrk.
measure() {
  local backend="$1" url="$2" base="http://127.0.0.1:$PORT"
  serve "$backend" "$url"
  python3 bench/lists_seed.py "$base" "$TOKEN" 100
  stop
  local today
  today=$(echo "SELECT MAX(trading_date) FROM orders;" | sql "$backend" "$url")
  history "$today" "$HISTORY_DAYS" | sql "$backend" "$url" >/dev/null
  echo "history: $(echo "SELECT COUNT(*) FROM orders;" | sql "$backend" "$url") orders in all, $HISTORY_DAYS earlier days"
  serve "$backend" "$url"
  local orders trades
  orders=$(curl -s -H "Authorization: Bearer $TOKEN" "$base/api/orders?limit=100" | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["data"]))')
  trades=$(curl -s -H "Authorization: Bearer $TOKEN" "$base/api/trades?date=$today" | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["data"]))')
  [ "$orders" = 100 ] && [ "$trades" = 100 ] || { echo "pages hold $orders orders and $trades trades, not 100"; exit 1; }
  echo
  echo "$backend: wrk -t$THREADS -c$CONNS -d${DURATION}s --latency, median of $RUNS runs ($BIN)"
  echo "| endpoint ($backend)                  | requests/s |  p50 ms  |  p99 ms  |"
  echo "|--------------------------------------|-----------:|---------:|---------:|"
  bench "GET /api/orders?limit=100" "$base/api/orders?limit=100"
  bench "GET /api/trades?date=$today" "$base/api/trades?date=$today"
  stop
  if grep -q "UNIQUE constraint\|duplicate key" "$WORK/svc-$backend.log"; then
    echo "the restart logged a duplicate insert:"; grep "UNIQUE constraint\|duplicate key" "$WORK/svc-$backend.log" | head -3
  fi
}

measure sqlite "sqlite://$WORK/tradeops.db"
if [ -n "$PG_URL" ]; then
  PG_DB="tradeops_bench_lists_$$"
  psql -q "$PG_URL" -c "CREATE DATABASE $PG_DB" >/dev/null
  measure postgres "${PG_URL%/*}/$PG_DB"
fi
