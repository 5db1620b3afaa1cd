#!/usr/bin/env bash
# A notification channel that never answers does not slow trading (CONTRACT §13): the order
# round trip (bench/order_latency.py: POST /api/orders -> FILLED visible, PAPER) on fresh
# services on the embedded defaults (SQLite in a temp dir, paper broker, simulated market)
#   a  no notification channels
#   b  a webhook channel sent every event kind, its URL a black hole (bench/black_hole.py: accepts
#      the connection, reads, never answers, keeps the socket open)
#   c  a Telegram channel (bot_token "1:bench", chat_ids [1]) whose api_url is the black hole
# alternating a, b, c round after round; then, once per service, the answer time of
# POST /api/risk/emergency-halt. Prints the median of the p50s and of the p99s per
# configuration with every run, and for b and c what GET /api/notifications/channels and
# /api/notifications/deliveries say at the end (queued, folded, RETRYING, timed out).
# Usage: bench/notifications.sh [ORDERS] [ROUNDS]   (default 300 orders, 5 rounds)
# TRADEOPS_BENCH_BIN=path measures that tradeops binary instead of building this checkout.
set -euo pipefail
cd "$(dirname "$0")/.."
ORDERS="${1:-300}"
ROUNDS="${2:-5}"
TOKEN="tro_bench_admin_token_0123456789abcdef"
BIN="${TRADEOPS_BENCH_BIN:-}"
# The service refuses TRADEOPS_* variables it does not know: start it without the caller's.
for v in $(env | awk -F= '/^TRADEOPS_/ {print $1}'); do unset "$v"; done

if [ -z "$BIN" ]; then
  cargo build --release --quiet -p tradeops-server --bin tradeops
  BIN="target/release/tradeops"
fi
BIN=$(realpath "$BIN")

WORK=$(mktemp -d)
SVC=""
HOLE=""
stop() {
  if [ -n "$SVC" ]; then kill "$SVC" 2>/dev/null || true; wait "$SVC" 2>/dev/null || true; fi
  SVC=""
}
cleanup() {
  stop
  if [ -n "$HOLE" ]; then kill "$HOLE" 2>/dev/null || true; wait "$HOLE" 2>/dev/null || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT

median() { sort -g | awk '{v[NR] = $1} END {if (NR == 0) print "-"; else if (NR % 2) print v[(NR + 1) / 2]; else printf "%.1f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
range() { sort -g | awk 'NR == 1 {lo = $1} {hi = $1} END {print lo "–" hi}'; }
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# The black hole, shared by every service of the run.
python3 bench/black_hole.py "$WORK/hole.stats" >"$WORK/hole.port" 2>"$WORK/hole.log" &
HOLE=$!
for _ in $(seq 50); do [ -s "$WORK/hole.port" ] && break; sleep 0.1; done
HOLE_PORT=$(head -1 "$WORK/hole.port")
[ -n "$HOLE_PORT" ] || { echo "the black hole did not start:"; cat "$WORK/hole.log"; exit 1; }

EVENTS='["order.filled", "order.rejected", "position.closed", "position.stopped_out", "risk.violation", "risk.state_changed", "symbol.halted", "symbol.resumed", "health.changed", "session.summary"]'
cat >"$WORK/b.toml" <<EOF
[[notifications.channels]]
kind = "webhook"
name = "black-hole"
url = "http://127.0.0.1:$HOLE_PORT/hook"
events = $EVENTS
EOF
cat >"$WORK/c.toml" <<EOF
[[notifications.channels]]
kind = "telegram"
name = "black-hole-telegram"
bot_token = "1:bench"
chat_ids = [1]
api_url = "http://127.0.0.1:$HOLE_PORT"
events = $EVENTS
EOF

# start CONFIG DIR: a fresh service in DIR (CONFIG a: the embedded defaults alone), waits until
# it answers; sets SVC and URL.
start() {
  local cfg="$1" dir="$2" port
  port=$(free_port)
  mkdir -p "$dir"
  local args=(serve)
  if [ "$cfg" != a ]; then args=(--config "$WORK/$cfg.toml" serve); fi
  (cd "$dir" && exec env TRADEOPS_BIND="127.0.0.1:$port" TRADEOPS_ADMIN_TOKEN="$TOKEN" \
    TRADEOPS_RATE_LIMIT_PER_SECOND=10000000 TRADEOPS_RATE_LIMIT_BURST=10000000 \
    "$BIN" "${args[@]}" >"$dir/svc.log" 2>&1) &
  SVC=$!
  URL="http://127.0.0.1:$port"
  for _ in $(seq 150); do curl -sf "$URL/api/health" >/dev/null && return 0; sleep 0.1; done
  echo "the service did not start:"; cat "$dir/svc.log"; exit 1
}

# The emergency halt's answer time, ms.
halt() {
  PYTHONPATH=bench python3 - "$URL" "$TOKEN" <<'EOF'
import sys, time
from api_client import client
call = client(sys.argv[1], sys.argv[2])
started = time.perf_counter()
halt = call("POST", "/api/risk/emergency-halt", {"reason": "bench"})
elapsed = (time.perf_counter() - started) * 1000
assert halt.get("ok"), halt
print(f"{elapsed:.2f}")
EOF
}

# What the service says of its channels, and its deliveries counted by status.
channels() {
  PYTHONPATH=bench python3 - "$URL" "$TOKEN" <<'EOF'
import collections, sys
from api_client import client
call = client(sys.argv[1], sys.argv[2])
for c in call("GET", "/api/notifications/channels")["data"]:
    print(f"  {c['name']} ({c['kind']}): queued {c['queued']}, sent {c['sent']}, failed {c['failed']}, "
          f"dropped (folded) {c['dropped']}, state {c['state']}, retry_at {c['retry_at']}, "
          f"last_error {c['last_error']!r}")
    statuses, kinds, cursor = collections.Counter(), collections.Counter(), None
    while True:
        page = call("GET", f"/api/notifications/deliveries?channel={c['name']}&limit=1000"
                           + (f"&cursor={cursor}" if cursor else ""))
        for d in page["data"]:
            statuses[d["status"]] += 1
            kinds[d["kind"]] += 1
        cursor = page.get("meta", {}).get("next_cursor")
        if not cursor:
            break
    print(f"    deliveries by status: {dict(sorted(statuses.items()))}; by kind: {dict(sorted(kinds.items()))}")
EOF
}

CONFIGS="a b c"
for round in $(seq "$ROUNDS"); do
  for cfg in $CONFIGS; do
    start "$cfg" "$WORK/$cfg-$round"
    line=$(python3 bench/order_latency.py "$URL" "$TOKEN" "$ORDERS")
    echo "round $round $cfg: $line" >&2
    awk '{for (i = 1; i <= NF; i++) if ($i == "p50") print $(i+1)}' <<<"$line" >>"$WORK/p50.$cfg"
    awk '{for (i = 1; i <= NF; i++) if ($i == "p99") print $(i+1)}' <<<"$line" >>"$WORK/p99.$cfg"
    if [ "$cfg" != a ]; then channels >"$WORK/channels-before-halt.$cfg"; fi
    ms=$(halt)
    echo "$ms" >>"$WORK/halt.$cfg"
    echo "round $round $cfg: emergency halt answered in $ms ms; black hole: $(cat "$WORK/hole.stats")" >&2
    if [ "$cfg" != a ]; then
      sleep 1 # the halt's risk.state_changed reaches the channel's queue
      { echo "before the halt:"; cat "$WORK/channels-before-halt.$cfg"; echo "after the halt:"; channels; } >"$WORK/channels.$cfg"
    fi
    stop
  done
done

name() { case "$1" in a) echo "a: no channel";; b) echo "b: webhook, black-holed";; c) echo "c: telegram, black-holed";; esac; }
echo
echo "POST /api/orders -> FILLED visible, PAPER, $ORDERS orders a run, $ROUNDS rounds alternating a, b, c"
echo "| configuration | p50 ms: median (range) | p99 ms: median (range) | emergency halt ms: median (range) |"
echo "|---|---:|---:|---:|"
for cfg in $CONFIGS; do
  echo "| $(name "$cfg") | $(median <"$WORK/p50.$cfg") ($(range <"$WORK/p50.$cfg")) | $(median <"$WORK/p99.$cfg") ($(range <"$WORK/p99.$cfg")) | $(median <"$WORK/halt.$cfg") ($(range <"$WORK/halt.$cfg")) |"
done
for cfg in b c; do
  echo "difference $cfg - a: p50 $(echo "$(median <"$WORK/p50.$cfg") $(median <"$WORK/p50.a")" | awk '{printf "%+.1f", $1 - $2}') ms," \
    "p99 $(echo "$(median <"$WORK/p99.$cfg") $(median <"$WORK/p99.a")" | awk '{printf "%+.1f", $1 - $2}') ms," \
    "halt $(echo "$(median <"$WORK/halt.$cfg") $(median <"$WORK/halt.a")" | awk '{printf "%+.2f", $1 - $2}') ms"
done
for cfg in $CONFIGS; do
  echo "every run $cfg: p50 [$(paste -sd' ' "$WORK/p50.$cfg")] p99 [$(paste -sd' ' "$WORK/p99.$cfg")] halt [$(paste -sd' ' "$WORK/halt.$cfg")]"
done
for cfg in b c; do
  echo "GET /api/notifications/channels at the end of the last $(name "$cfg") run:"
  cat "$WORK/channels.$cfg"
done
echo "black hole: $(cat "$WORK/hole.stats")"
