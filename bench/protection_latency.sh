#!/usr/bin/env bash
# From an entry's fill to its protective stop resting at the broker (CONTRACT §11), p50 and p99,
# on the paper broker (over a market-data stand-in) and on the Alpaca stand-in: the entry's
# order.updated FILLED to the stop's order.updated ACCEPTED, as an event-stream client sees them.
# And after the close (CONTRACT §12), from the trade through a stop the engine holds to the exit
# acknowledged by the broker (the broker's copy of the stop cancelled first).
# Usage: bench/protection_latency.sh [TRIALS]   (default 50 per venue; goal: p99 under 250 ms)
set -euo pipefail
cd "$(dirname "$0")/.."
export TRADEOPS_BENCH_TRIALS="${1:-50}"
cargo test --release -p tradeops-server --test api -- --ignored --nocapture --test-threads 1 \
  bench_fill_to_stop_resting bench_engine_stop_to_exit 2>&1 | grep -E "^fill to stop resting|^trade through|test result"
