#!/usr/bin/env bash
# The whole-desk replay's speed (goal: a 500-symbol simulated day in under 1 s):
# a release service on its embedded defaults (the simulated market of 500 symbols, SQLite), then
# POST /api/backtests (kind desk) for a whole simulated day (24 h of market time on the default
# ALWAYS_OPEN calendar: 5,760 steps of 15 s, with the radar scanning every step) with the
# allocator's auto-watch on (top 5), timed from the request to COMPLETED (polled every 5 ms);
# also the job's own time (started_at to finished_at). Median of RUNS.
# Usage: bench/desk_replay.sh BIN [RUNS] [DAY]   (BIN: a release tradeops; DAY: YYYY-MM-DD)
set -euo pipefail
cd "$(dirname "$0")/.."
BIN="$(realpath "$1")"
RUNS="${2:-5}"
DAY="${3:-2026-11-19}"
TOKEN="tro_desk_admin_token_0123456789abcdef"
PORT="${DESK_PORT:-8099}"
WORK=$(mktemp -d)
trap 'kill "${SVC:-}" 2>/dev/null || true; wait "${SVC:-}" 2>/dev/null || true; rm -rf "$WORK"' EXIT
(cd "$WORK" && for v in $(compgen -e | grep '^TRADEOPS_'); do unset "$v"; done &&
  TRADEOPS_BIND="127.0.0.1:$PORT" TRADEOPS_ADMIN_TOKEN="$TOKEN" TRADEOPS_LOG=warn \
  TRADEOPS_RATE_LIMIT_PER_SECOND=100000 TRADEOPS_RATE_LIMIT_BURST=100000 \
  exec "$BIN" serve >"$WORK/svc.log" 2>&1) &
SVC=$!
for _ in $(seq 1 100); do curl -s -o /dev/null "http://127.0.0.1:$PORT/api/health" && break; sleep 0.1; done
python3 - "http://127.0.0.1:$PORT" "$TOKEN" "$RUNS" "$DAY" <<'PY'
import datetime, statistics, sys, time
sys.path.insert(0, "bench")
from api_client import client
base, token, runs, day = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
call = client(base, token)
start = datetime.date.fromisoformat(day)
end = start + datetime.timedelta(days=1)
# New York midnight to midnight (EST in November: UTC-5).
body = {"kind": "desk", "start": f"{start}T05:00:00Z", "end": f"{end}T05:00:00Z",
        "settings": {"strategy_allocator": {"auto_watch": True, "auto_watch_top_n": 5}}}
walls, jobs, last = [], [], None
for _ in range(runs):
    t0 = time.perf_counter()
    queued = call("POST", "/api/backtests", body)
    assert queued.get("ok"), queued
    rid = queued["data"]["backtest_id"]
    while True:
        run = call("GET", f"/api/backtests/{rid}")["data"]
        if run["status"] in ("COMPLETED", "FAILED", "CANCELED"):
            break
        time.sleep(0.005)
    walls.append(time.perf_counter() - t0)
    assert run["status"] == "COMPLETED", run
    ts = lambda s: datetime.datetime.fromisoformat(s.replace("Z", "+00:00"))
    jobs.append((ts(run["finished_at"]) - ts(run["started_at"])).total_seconds())
    last = run
print(f"desk replay of {day} (24 h, {last['steps']} steps, {last['scans']} scans, 500 symbols): "
      f"{len(last['watched'])} watched, {len(last['trades'])} trades, {len(last['violations'])} violations, "
      f"final equity {last['final_equity']:,.2f}")
print(f"request to COMPLETED: median {statistics.median(walls):.3f} s of {[round(w, 3) for w in walls]}")
print(f"the job itself:       median {statistics.median(jobs):.3f} s of {[round(j, 3) for j in jobs]} (goal < 1 s)")
PY
