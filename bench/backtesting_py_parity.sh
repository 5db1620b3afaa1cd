#!/usr/bin/env bash
# sma_cross parity with backtesting.py 0.6.6: installs backtesting.py from PyPI in a
# virtual environment (kept between runs), starts the service on a fresh SQLite database, and
# compares a backtest run through its API with backtesting.py's own run on its bundled GOOG bars,
# trade by trade (bench/backtesting_py_parity.py). Exits non-zero on any difference.
#
# Usage: bench/backtesting_py_parity.sh   (BTPY_VENV overrides where the environment lives;
# PARITY_SERVICE_BIN names a prebuilt service binary, else the debug build is made)
set -euo pipefail
cd "$(dirname "$0")/.."
STARTED=$(date +%s.%N)
VENV="${BTPY_VENV:-${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/tradeops/backtesting-py-0.6.6}"
if ! "$VENV/bin/python" -c 'import backtesting, sys; sys.exit(backtesting.__version__ != "0.6.6")' 2>/dev/null; then
  rm -rf "$VENV"
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install --quiet --disable-pip-version-check backtesting==0.6.6
fi
BIN="${PARITY_SERVICE_BIN:-}"
if [ -z "$BIN" ]; then
  cargo build --quiet --bin tradeops
  BIN="$PWD/target/debug/tradeops"
fi

TOKEN="tro_parity_admin_token_0123456789abcdef"
PORT="${PARITY_PORT:-8097}"
WORK=$(mktemp -d)
trap 'kill "${SVC:-}" 2>/dev/null || true; wait "${SVC:-}" 2>/dev/null || true; rm -rf "$WORK"' EXIT
# The service refuses TRADEOPS_* variables it does not know (CI exports test URLs): it starts
# with none but its own.
(cd "$WORK" && for v in $(compgen -e | grep '^TRADEOPS_'); do unset "$v"; done &&
  TRADEOPS_BIND="127.0.0.1:$PORT" TRADEOPS_ADMIN_TOKEN="$TOKEN" exec "$BIN" serve >"$WORK/svc.log" 2>&1) &
SVC=$!
for _ in $(seq 1 100); do
  curl -s -o /dev/null "http://127.0.0.1:$PORT/api/health" && break
  if ! kill -0 "$SVC" 2>/dev/null; then
    echo "the service did not start:" >&2
    cat "$WORK/svc.log" >&2
    exit 1
  fi
  sleep 0.1
done
if ! "$VENV/bin/python" bench/backtesting_py_parity.py "http://127.0.0.1:$PORT" "$TOKEN" \
  crates/core/src/backtest/goog_daily.csv; then
  echo "--- service log" >&2
  tail -n 20 "$WORK/svc.log" >&2
  exit 1
fi
echo "whole comparison (environment, service start, both runs): $(echo "$(date +%s.%N) - $STARTED" | bc) s"
