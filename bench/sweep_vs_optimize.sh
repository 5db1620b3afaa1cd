#!/usr/bin/env bash
# A sweep against backtesting.py's Backtest.optimize: the environment and service
# as bench/backtesting_py_parity.sh makes them, then bench/sweep_vs_optimize.py.
# Usage: bench/sweep_vs_optimize.sh BIN [RUNS]   (BIN: a release tradeops)
set -euo pipefail
cd "$(dirname "$0")/.."
BIN="$(realpath "$1")"
RUNS="${2:-3}"
VENV="${BTPY_VENV:-${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/tradeops/backtesting-py-0.6.6}"
if ! "$VENV/bin/python" -c 'import backtesting, sys; sys.exit(backtesting.__version__ != "0.6.6")' 2>/dev/null; then
  rm -rf "$VENV"
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install --quiet --disable-pip-version-check backtesting==0.6.6
fi
TOKEN="tro_sweep_admin_token_0123456789abcdef"
PORT="${SWEEP_PORT:-8098}"
WORK=$(mktemp -d)
trap 'kill "${SVC:-}" 2>/dev/null || true; wait "${SVC:-}" 2>/dev/null || true; rm -rf "$WORK"' EXIT
(cd "$WORK" && for v in $(compgen -e | grep '^TRADEOPS_'); do unset "$v"; done &&
  TRADEOPS_BIND="127.0.0.1:$PORT" TRADEOPS_ADMIN_TOKEN="$TOKEN" TRADEOPS_LOG=warn \
  TRADEOPS_RATE_LIMIT_PER_SECOND=100000 TRADEOPS_RATE_LIMIT_BURST=100000 exec "$BIN" serve >"$WORK/svc.log" 2>&1) &
SVC=$!
for _ in $(seq 1 100); do curl -s -o /dev/null "http://127.0.0.1:$PORT/api/health" && break; sleep 0.1; done
"$VENV/bin/python" bench/sweep_vs_optimize.py "http://127.0.0.1:$PORT" "$TOKEN" "$RUNS"
