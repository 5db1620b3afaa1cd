#!/usr/bin/env python3
"""Token propagation: how long a token created or revoked by the `tradeops token`
CLI takes to be accepted (create -> 200) or refused (revoke -> 401) by a `tradeops serve`
already running on the same database, without a restart.

Usage: bench/token_propagation.py [DATABASE_URL] [ROUNDS]
  DATABASE_URL  sqlite://... (default, or "": a fresh SQLite file) or postgres://... (a fresh,
                empty database: the service migrates it)
  ROUNDS        create/revoke pairs (default 20)
The binary is $TRADEOPS_BIN, default target/release/tradeops (built when missing).

Each time runs from the moment the CLI command exits (its write committed) to the first answer
of GET /api/auth/me with the new status, polled every 5 ms; the CLI's own run time (process
start, connect, migrate check, write) is reported beside it. A random pause (0-300 ms) before
each command spreads the writes over the poll's phase. Prints medians and maxima."""
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ADMIN = "tro_bench_admin_token_0123456789abcdef"


def binary():
    path = os.path.abspath(os.environ.get("TRADEOPS_BIN", os.path.join(ROOT, "target/release/tradeops")))
    if not os.path.exists(path):
        subprocess.run(["cargo", "build", "--release", "--quiet", "--bin", "tradeops"], cwd=ROOT, check=True)
    return path


def status(base, token):
    req = urllib.request.Request(base + "/api/auth/me")
    req.add_header("Authorization", "Bearer " + token)
    try:
        with urllib.request.urlopen(req) as resp:
            return resp.status
    except urllib.error.HTTPError as e:
        return e.code


def until(base, token, want, bound=10.0):
    started = time.perf_counter()
    while time.perf_counter() - started < bound:
        if status(base, token) == want:
            return time.perf_counter() - started
        time.sleep(0.005)
    sys.exit(f"the service never answered {want} within {bound} s")


def main():
    work = tempfile.mkdtemp(prefix="token-propagation-")
    url = (sys.argv[1] if len(sys.argv) > 1 else "") or f"sqlite://{work}/tradeops.db"
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 20
    tradeops = binary()
    env = {k: v for k, v in os.environ.items() if k != "TRADEOPS_BIN"}  # the service refuses unknown TRADEOPS_*
    env.update(TRADEOPS_DATABASE_URL=url, TRADEOPS_BIND="127.0.0.1:0", TRADEOPS_ADMIN_TOKEN=ADMIN, TRADEOPS_LOG="warn")
    log = open(os.path.join(work, "serve.log"), "w+")
    service = subprocess.Popen([tradeops, "serve"], cwd=work, env=env, stdout=subprocess.PIPE,
                               stderr=log, text=True)
    try:
        first = service.stdout.readline()
        if "listening on " not in first:
            service.wait(timeout=30)
            log.seek(0)
            sys.exit(f"the service did not start: {first}{log.read()}")
        base = first.split("listening on ")[1].split()[0]

        def cli(*args):
            started = time.perf_counter()
            out = subprocess.run([tradeops, "token", *args], cwd=work, env=env, capture_output=True, text=True)
            if out.returncode != 0:
                sys.exit(f"tradeops token {' '.join(args)}: {out.stderr}")
            return out.stdout.strip(), time.perf_counter() - started

        created, revoked, cli_times = [], [], []
        rng = random.Random(21)
        for n in range(rounds):
            name = f"bench-{n}"
            # A random pause first, so the writes land at every phase of the service's poll
            # (back to back, each would land just after the poll that saw the previous one).
            time.sleep(rng.uniform(0, 0.3))
            secret, took = cli("create", "--name", name, "--role", "viewer")
            created.append(until(base, secret, 200))
            time.sleep(rng.uniform(0, 0.3))
            _, took2 = cli("revoke", "--name", name)
            revoked.append(until(base, secret, 401))
            cli_times += [took, took2]
        ms = lambda xs: f"median {statistics.median(xs) * 1000:.0f} ms, max {max(xs) * 1000:.0f} ms"
        backend = "postgresql" if url.startswith("postgres") else "sqlite"
        print(f"{backend}, {rounds} rounds")
        print(f"  create -> accepted: {ms(created)}")
        print(f"  revoke -> refused:  {ms(revoked)}")
        print(f"  CLI command itself: {ms(cli_times)}")
    finally:
        service.terminate()
        service.wait(timeout=30)


if __name__ == "__main__":
    main()
