#!/usr/bin/env bash
# Market benchmarks: history generation (minute bars/s, one core), radar scan of the
# whole universe, feed work per minute, and the service's resident memory with the universe
# live (DEMO at 60x, so scans come every real second) with the radar's latency after each
# minute boundary. Usage: bench/market.sh [symbols]
set -euo pipefail
cd "$(dirname "$0")/.."
SYMBOLS="${1:-10000}"
TOKEN="tro_bench_admin_token_0123456789abcdef"
cargo build --release --quiet -p tradeops-sim --example sim_bench
cargo build --release --quiet --bin tradeops --example radar_bench
target/release/examples/sim_bench 500 20 5 2>/dev/null
target/release/examples/radar_bench "$SYMBOLS" 30

WORK=$(mktemp -d)
trap 'kill "${SVC:-}" 2>/dev/null || true; rm -rf "$WORK"' EXIT
(cd "$WORK" && TRADEOPS_MODE=DEMO TRADEOPS_SIM_SYMBOLS="$SYMBOLS" TRADEOPS_BIND=127.0.0.1:8097 \
  TRADEOPS_ADMIN_TOKEN="$TOKEN" exec "$OLDPWD/target/release/tradeops" serve >"$WORK/svc.log" 2>&1) &
SVC=$!
sleep 30
echo "service with $SYMBOLS symbols live (DEMO 60x), after 30 s: $(awk '/VmRSS/ {print int($2/1024) " MiB resident"}' "/proc/$SVC/status")"
for _ in $(seq 15); do
  curl -s -H "Authorization: Bearer $TOKEN" localhost:8097/api/health/components |
    python3 -c "import json,sys; d=[c for c in json.load(sys.stdin)['data'] if c['name']=='data_broker'][0]['detail']; print(d['radar_captured_at'], d['radar_latency_ms'])"
  sleep 2.1
done | sort -u | awk '{print $2}' | sort -n | awk '{a[NR]=$1} END {printf "radar published after the minute boundary: median %.1f ms, max %.1f ms (%d scans)\n", a[int((NR+1)/2)], a[NR], NR}'
