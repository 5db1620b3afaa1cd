#!/usr/bin/env python3
"""Failover time: two services on one PostgreSQL database, the second a hot standby
(it waits, not yet listening, while the first holds the engine's term). The one running the
engine is killed with SIGKILL; the figure is the time from the kill until the standby answers
POST /api/orders with 201 (it took the term over, restored the engine and trades; until then it
listens as a follower, forwarding to the first).

Usage: failover.py BIN [RUNS] — BIN is a release `tradeops`; each run has a database of its own on
the PostgreSQL server of TRADEOPS_PG_URL (default postgres://postgres@127.0.0.1:5432/test), dropped
after. Prints every run and the median; the goal is <= 5 s, the stretch <= 1 s."""
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error

from api_client import client, open_radar_symbol

BIN = os.path.realpath(sys.argv[1])
RUNS = int(sys.argv[2]) if len(sys.argv) > 2 else 10
ADMIN_URL = os.environ.get("TRADEOPS_PG_URL", "postgres://postgres@127.0.0.1:5432/test")
TOKEN = "tro_bench_admin_token_0123456789abcdef"


def psql(sql):
    subprocess.run(["psql", ADMIN_URL, "-q", "-c", sql], check=True, capture_output=True)


def start(url, port, work):
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRADEOPS_")}
    env.update({
        "TRADEOPS_DATABASE_URL": url, "TRADEOPS_BIND": f"127.0.0.1:{port}", "TRADEOPS_ADMIN_TOKEN": TOKEN,
        "TRADEOPS_MODE": "DEMO", "TRADEOPS_RATE_LIMIT_PER_SECOND": "100000", "TRADEOPS_RATE_LIMIT_BURST": "100000",
    })
    log = open(os.path.join(work, f"svc-{port}.log"), "w")
    return subprocess.Popen([BIN, "serve"], cwd=work, env=env, stdout=log, stderr=log)


def answers(call):
    try:
        return call("GET", "/api/health").get("ok", False)
    except (urllib.error.URLError, ConnectionError, OSError):
        return False


def until(what, test, seconds=60):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if test():
            return
        time.sleep(0.02)
    sys.exit(f"timed out: {what}")


figures = []
base_url = ADMIN_URL.rsplit("/", 1)[0]
for run in range(1, RUNS + 1):
    name = f"tradeops_failover_{os.getpid()}_{run}"
    psql(f"CREATE DATABASE {name}")
    url = f"{base_url}/{name}"
    work = tempfile.mkdtemp()
    first = start(url, 8301, work)
    call_first = client("http://127.0.0.1:8301", TOKEN)
    until("the first service", lambda: answers(call_first))
    symbol = open_radar_symbol(call_first)
    placed = call_first("POST", "/api/orders", {"symbol": symbol, "side": "BUY", "quantity": 1})
    assert placed["ok"], placed
    standby = start(url, 8302, work)
    call_standby = client("http://127.0.0.1:8302", TOKEN)
    until("the standby, a follower, to answer through the first", lambda: answers(call_standby))
    time.sleep(1)  # the standby is waiting for the term

    first.send_signal(signal.SIGKILL)
    killed = time.monotonic()
    first.wait()

    def trades():
        try:
            return call_standby("POST", "/api/orders", {"symbol": symbol, "side": "BUY", "quantity": 1}).get("ok", False)
        except (urllib.error.URLError, ConnectionError, OSError):
            return False

    until("the standby to trade", trades)
    figures.append(time.monotonic() - killed)
    print(f"run {run}: failover {figures[-1]:.2f} s", flush=True)
    standby.terminate()
    standby.wait()
    psql(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")

print(f"failover after kill -9, kill to the standby's first order taken: median {statistics.median(figures):.2f} s, "
      f"min {min(figures):.2f} s, max {max(figures):.2f} s over {len(figures)} runs (goal <= 5 s, stretch <= 1 s)")
