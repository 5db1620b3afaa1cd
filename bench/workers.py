#!/usr/bin/env python3
"""Backtest throughput with 1, 2 and 4 job workers. A service on PostgreSQL that
leaves its jobs to workers (TRADEOPS_JOBS_RUN=false) queues RUNS_PER_ROUND sma_cross backtests
on minute bars (one symbol, about 125 trading days, each with its own parameters); K `tradeops worker`
processes, each running one backtest at a time (TRADEOPS_JOBS_BACKTEST_PARALLEL=1), run them.
The figure is backtests completed per second, from queueing the first to the last completed;
the workers are started and waiting before the clock starts. The bars are downloaded once,
before any timing, so every timed run is compute on bars read from the database.

Usage: workers.py BIN [ROUNDS] [RUNS_PER_ROUND] — BIN is a release `tradeops`; a database of its
own on the PostgreSQL server of TRADEOPS_PG_URL (default postgres://postgres@127.0.0.1:5432/test),
dropped after. Prints every round and the median per worker count. Scaling is bounded by the
machine's cores (os.cpu_count() is printed)."""
import os
import statistics
import subprocess
import sys
import tempfile
import time

from api_client import client, open_radar_symbol

BIN = os.path.realpath(sys.argv[1])
ROUNDS = int(sys.argv[2]) if len(sys.argv) > 2 else 3
RUNS = int(sys.argv[3]) if len(sys.argv) > 3 else 8
ADMIN_URL = os.environ.get("TRADEOPS_PG_URL", "postgres://postgres@127.0.0.1:5432/test")
TOKEN = "tro_bench_admin_token_0123456789abcdef"
PORT = 8311


def psql(sql):
    subprocess.run(["psql", ADMIN_URL, "-q", "-c", sql], check=True, capture_output=True)


def env_for(url):
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRADEOPS_")}
    env.update({
        "TRADEOPS_DATABASE_URL": url, "TRADEOPS_BIND": f"127.0.0.1:{PORT}", "TRADEOPS_ADMIN_TOKEN": TOKEN,
        "TRADEOPS_MODE": "DEMO", "TRADEOPS_RATE_LIMIT_PER_SECOND": "100000", "TRADEOPS_RATE_LIMIT_BURST": "100000",
        "TRADEOPS_JOBS_RUN": "false", "TRADEOPS_JOBS_BACKTEST_PARALLEL": "1", "TRADEOPS_LOG": "warn",
    })
    return env


def start_worker(url, work):
    log = open(os.path.join(work, f"worker-{time.monotonic_ns()}.log"), "w")
    proc = subprocess.Popen([BIN, "worker"], cwd=work, env=env_for(url), stdout=subprocess.PIPE, stderr=log, text=True)
    line = proc.stdout.readline()
    if "started" not in line:
        sys.exit(f"the worker did not start: {line!r}")
    return proc


def until(what, test, seconds=600):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if test():
            return
        time.sleep(0.05)
    sys.exit(f"timed out: {what}")


def request(symbol, n):
    return {"strategy_id": "sma_cross", "symbol": symbol, "timeframe": "1m",
            "start": "2026-05-01T00:00:00Z", "end": "2026-10-27T00:00:00Z",
            "parameters": {"fast": 5 + n % 10, "slow": 20 + n}}


def completed(call, ids):
    return all(call("GET", f"/api/backtests/{i}")["data"]["status"] == "COMPLETED" for i in ids)


name = f"tradeops_workers_{os.getpid()}"
psql(f"CREATE DATABASE {name}")
url = f"{ADMIN_URL.rsplit('/', 1)[0]}/{name}"
work = tempfile.mkdtemp()
service = subprocess.Popen([BIN, "serve"], cwd=work, env=env_for(url),
                           stdout=open(os.path.join(work, "serve.log"), "w"), stderr=subprocess.STDOUT)
call = client(f"http://127.0.0.1:{PORT}", TOKEN)
try:
    def up():
        try:
            return call("GET", "/api/health").get("ok", False)
        except OSError:
            return False
    until("the service", up, 60)
    symbol = open_radar_symbol(call)
    # The bars, once, untimed.
    warm = start_worker(url, work)
    first = call("POST", "/api/backtests/run", request(symbol, 0))["data"]["backtest_id"]
    until("the warm-up run", lambda: completed(call, [first]))
    warm.terminate()
    warm.wait()

    print(f"{os.cpu_count()} cores; {RUNS} backtests a round, each {request(symbol, 0)['timeframe']} bars "
          f"{request(symbol, 0)['start'][:10]}..{request(symbol, 0)['end'][:10]}", flush=True)
    results = {}
    for workers in (1, 2, 4):
        procs = [start_worker(url, work) for _ in range(workers)]
        rates = []
        for r in range(ROUNDS):
            started = time.monotonic()
            ids = [call("POST", "/api/backtests/run", request(symbol, n + 1))["data"]["backtest_id"] for n in range(RUNS)]
            until(f"{workers} workers' round", lambda: completed(call, ids))
            elapsed = time.monotonic() - started
            rates.append(RUNS / elapsed)
            print(f"{workers} worker(s), round {r + 1}: {RUNS} backtests in {elapsed:.2f} s = {rates[-1]:.2f}/s", flush=True)
        for p in procs:
            p.terminate()
            p.wait()
        results[workers] = statistics.median(rates)
    base = results[1]
    for workers, rate in results.items():
        print(f"{workers} worker(s): median {rate:.2f} backtests/s, {rate / base:.2f}x one worker")
finally:
    service.terminate()
    service.wait()
    psql(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
