#!/usr/bin/env bash
# The console's speed goals, measured by the browser test run alone (nothing else
# competing for the cores) with the goals asserted: first render and the radar's first rows
# < 1 s on the loopback, the header within 1 s of a fill's event, 20 live charts at 60× market
# speed at 30 fps or more. Prints the figures of each run; RUNS (default 3) runs.
set -euo pipefail
cd "$(dirname "$0")/.."
runs="${RUNS:-3}"
cargo test -q -p tradeops-server --test api --no-run
for i in $(seq 1 "$runs"); do
  echo "== run $i of $runs"
  TRADEOPS_CONSOLE_TIMING_GOALS=assert TRADEOPS_REQUIRE_BROWSER=1 \
    cargo test -q -p tradeops-server --test api -- --exact browser::the_console_works_in_a_browser --nocapture 2>&1 |
    grep -E '^\[browser\] (figures|FAIL)' || { echo "run $i failed"; exit 1; }
done
