#!/usr/bin/env bash
# Trading engine benchmarks: risk gate per check, engine events/s with 50 watched
# symbols, the emergency halt with 100 positions and 500 open orders, and the order round trip
# POST /api/orders -> FILLED on a release server in PAPER mode.
set -euo pipefail
cd "$(dirname "$0")/.."
TOKEN="tro_bench_admin_token_0123456789abcdef"
cargo build --release --quiet -p tradeops-core --example risk_bench
cargo build --release --quiet --bin tradeops --example engine_bench --example halt_bench
target/release/examples/risk_bench
target/release/examples/engine_bench 50 5
target/release/examples/halt_bench 21

WORK=$(mktemp -d)
trap 'kill "${SVC:-}" 2>/dev/null || true; rm -rf "$WORK"' EXIT
(cd "$WORK" && TRADEOPS_BIND=127.0.0.1:8096 TRADEOPS_ADMIN_TOKEN="$TOKEN" TRADEOPS_RATE_LIMIT_PER_SECOND=100000 \
  TRADEOPS_RATE_LIMIT_BURST=100000 exec "$OLDPWD/target/release/tradeops" serve >"$WORK/svc.log" 2>&1) &
SVC=$!
sleep 2
python3 bench/order_latency.py http://127.0.0.1:8096 "$TOKEN" "${1:-100}"
kill "$SVC" 2>/dev/null || true

# The emergency halt through the API needs its own server (the halt latches): DEMO, so the
# radar fills with 100 symbols quickly.
WORK2=$(mktemp -d)
(cd "$WORK2" && TRADEOPS_MODE=DEMO TRADEOPS_BIND=127.0.0.1:8094 TRADEOPS_ADMIN_TOKEN="$TOKEN" \
  TRADEOPS_RATE_LIMIT_PER_SECOND=100000 TRADEOPS_RATE_LIMIT_BURST=100000 \
  exec "$OLDPWD/target/release/tradeops" serve >"$WORK2/svc.log" 2>&1) &
SVC=$!
sleep 2
python3 bench/halt_api.py http://127.0.0.1:8094 "$TOKEN"
