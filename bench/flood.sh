#!/usr/bin/env bash
# Flood benchmark: default settings on a fresh SQLite folder; 64 connections
# (wrk) post /api/risk/emergency-halt for SECONDS, half with no token and half with a bad one.
# Measures the growth of the database files (db + -wal + -shm, bytes before and right after
# the flood, and the largest size seen during it), the audit rows written, the flood's own
# throughput, and the latency of an admin's halt during the flood (curl, every 2 s from the 4th
# second; median and max) beside the same halt's latency just before the flood (6 samples: the
# floor the machine's other load sets). Prints one row per run and the medians of the runs.
# Usage: bench/flood.sh [BINARY] [seconds] [runs]
#   BINARY defaults to a fresh release build of this checkout (target/release/tradeops); pass
#   another build (e.g. of an earlier commit) to compare in the same session.
# Needs wrk (apt-get install wrk), curl and sqlite3.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN="${1:-}"
DURATION="${2:-30}"
RUNS="${3:-3}"
PORT=8093
TOKEN="tro_bench_admin_token_0123456789abcdef"
for tool in wrk curl sqlite3; do command -v "$tool" >/dev/null || { echo "$tool is not installed"; exit 1; }; done
if [ -z "$BIN" ]; then
  cargo build --release --quiet --bin tradeops
  BIN="$PWD/target/release/tradeops"
fi
BIN="$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")"

WORK=$(mktemp -d)
cleanup() { kill "${SVC:-}" 2>/dev/null || true; rm -rf "$WORK"; }
trap cleanup EXIT

cat >"$WORK/anonymous.lua" <<'EOF'
wrk.method = "POST"
wrk.body = '{"reason":"flood"}'
wrk.headers["Content-Type"] = "application/json"
EOF
cat >"$WORK/bad_token.lua" <<'EOF'
wrk.method = "POST"
wrk.body = '{"reason":"flood"}'
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer tro_not_a_valid_token_000000000000000000000000000000000000000000000000000"
EOF

# Bytes of the database files in a folder.
db_bytes() { find "$1" -maxdepth 1 -name 'tradeops.db*' -printf '%s\n' 2>/dev/null | awk '{s += $1} END {print s + 0}'; }
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
max() { sort -n | tail -1; }

# An admin halt; appends its latency (ms) to $1 and its status to $2.
admin_halt() {
  curl -s -o /dev/null -w '%{http_code} %{time_total}\n' -X POST "http://127.0.0.1:$PORT/api/risk/emergency-halt" \
    -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' -d '{"reason":"bench: admin halt during a flood"}' \
    | awk -v codes="$2" '{print $1 >> codes; printf "%.1f\n", $2 * 1000}' >>"$1"
}

# One run: prints "growth_bytes peak_bytes audit_rows flood_rps halt_median_ms halt_max_ms
# halt_non200 quiet_median_ms quiet_max_ms halt_samples halt_samples_over_50ms".
run() {
  local dir="$WORK/run.$1"
  mkdir -p "$dir"
  (cd "$dir" && TRADEOPS_BIND=127.0.0.1:$PORT TRADEOPS_ADMIN_TOKEN="$TOKEN" exec "$BIN" serve >"$dir/svc.log" 2>&1) &
  SVC=$!
  for _ in $(seq 100); do curl -sf "localhost:$PORT/api/health" >/dev/null && break; sleep 0.1; done
  sleep 2
  : >"$dir/quiet.ms"
  for _ in $(seq 6); do admin_halt "$dir/quiet.ms" "$dir/quiet.codes"; sleep 0.5; done
  local before peak=0 size
  before=$(db_bytes "$dir/data")
  wrk -t1 -c32 -d"${DURATION}s" -s "$WORK/anonymous.lua" "http://127.0.0.1:$PORT/api/risk/emergency-halt" >"$dir/wrk.a" 2>&1 &
  local wa=$!
  wrk -t1 -c32 -d"${DURATION}s" -s "$WORK/bad_token.lua" "http://127.0.0.1:$PORT/api/risk/emergency-halt" >"$dir/wrk.b" 2>&1 &
  local wb=$!
  sleep 4
  : >"$dir/halt.ms"
  : >"$dir/halt.codes"
  local deadline=$((SECONDS + DURATION - 6))
  while [ "$SECONDS" -lt "$deadline" ]; do
    admin_halt "$dir/halt.ms" "$dir/halt.codes"
    size=$(db_bytes "$dir/data"); [ "$size" -gt "$peak" ] && peak=$size
    sleep 2
  done
  wait "$wa" "$wb"
  local after
  after=$(db_bytes "$dir/data"); [ "$after" -gt "$peak" ] && peak=$after
  local rps
  rps=$(awk '/^Requests\/sec/ {s += $2} END {printf "%.0f", s}' "$dir/wrk.a" "$dir/wrk.b")
  kill -TERM "$SVC"; wait "$SVC" || true
  local rows
  rows=$(sqlite3 "$dir/data/tradeops.db" 'SELECT COUNT(*) FROM audit_log')
  local non200
  non200=$(grep -vc '^200$' "$dir/halt.codes" || true)
  echo "$((after - before)) $((peak - before)) $rows $rps $(median <"$dir/halt.ms") $(max <"$dir/halt.ms") $non200" \
    "$(median <"$dir/quiet.ms") $(max <"$dir/quiet.ms")" \
    "$(wc -l <"$dir/halt.ms") $(awk '$1 >= 50' "$dir/halt.ms" | wc -l)"
  rm -rf "$dir"
}

echo "binary: $BIN"
echo "flood: 64 connections (32 no token, 32 bad token) for ${DURATION}s; admin halt every 2 s during it"
echo "| run | growth MB | peak growth MB | audit rows | flood req/s | halt median ms | halt max ms | halt non-200 | no flood: median ms | max ms | halts ≥ 50 ms |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
for i in $(seq "$RUNS"); do
  row=$(run "$i")
  echo "$row" >>"$WORK/rows"
  echo "$i $row" | awk '{printf "| %s | %.2f | %.2f | %s | %s | %s | %s | %s | %s | %s | %s of %s |\n", $1, $2 / 1e6, $3 / 1e6, $4, $5, $6, $7, $8, $9, $10, $12, $11}'
done
awk '{print $1}' "$WORK/rows" | median >"$WORK/m1"
awk '{print $2}' "$WORK/rows" | median >"$WORK/m2"
awk '{print $3}' "$WORK/rows" | median >"$WORK/m3"
awk '{print $4}' "$WORK/rows" | median >"$WORK/m4"
awk '{print $5}' "$WORK/rows" | median >"$WORK/m5"
awk '{print $6}' "$WORK/rows" | median >"$WORK/m6"
awk '{print $8}' "$WORK/rows" | median >"$WORK/m8"
awk '{print $9}' "$WORK/rows" | median >"$WORK/m9"
paste "$WORK/m1" "$WORK/m2" "$WORK/m3" "$WORK/m4" "$WORK/m5" "$WORK/m6" "$WORK/m8" "$WORK/m9" |
  awk '{printf "| median | %.2f | %.2f | %s | %s | %s | %s | | %s | %s | |\n", $1 / 1e6, $2 / 1e6, $3, $4, $5, $6, $7, $8}'
