"""A parameter sweep against backtesting.py's ``Backtest.optimize``, through the
real server: the ``sma_cross`` grid fast 5..50 step 5 × slow 10..100 step 10 (fast below slow:
75 combinations) on backtesting.py's bundled GOOG daily bars, ranked by final equity (the
objective both compute the same way: parity of every trade is ``bench/backtesting_py_parity.py``).

backtesting.py: ``optimize(n1=range(5, 51, 5), n2=range(10, 101, 10), constraint=n1 < n2,
maximize="Equity Final [$]", return_heatmap=True)``, timed alone (median of RUNS). tradeops:
``POST /api/backtests/sweeps`` with the same grid and the parity run's settings, timed from the
request to ``COMPLETED`` seen by polling every SWEEP_POLL_MS (default 2 ms; median of RUNS;
the bars imported once before), and the service's own time, ``created_at`` to ``finished_at``
of the sweep (millisecond stamps; the poller's requests share the two cores with it).
Compared: the best parameters, and every combination's final equity (within 0.01).

Usage: sweep_vs_optimize.py BASE_URL TOKEN [RUNS]. Exits 1 on any difference.
"""

import os
import statistics
import sys
import time
import urllib.request
import warnings
from datetime import datetime

import backtesting
import pandas as pd
from backtesting import Backtest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from api_client import client  # noqa: E402
from backtesting_py import SmaCross  # noqa: E402

CASH = 100_000
SYMBOL = "GOOG"
GRID = {"fast": {"from": 5, "to": 50, "step": 5}, "slow": {"from": 10, "to": 100, "step": 10}}


def reference(df, runs):
    warnings.filterwarnings("ignore")
    times, heatmap, best = [], None, None
    for _ in range(runs):
        bt = Backtest(df, SmaCross, cash=CASH, commission=0, trade_on_close=False, exclusive_orders=False,
                      finalize_trades=False)
        started = time.perf_counter()
        stats, heatmap = bt.optimize(n1=range(5, 51, 5), n2=range(10, 101, 10), constraint=lambda p: p.n1 < p.n2,
                                     maximize="Equity Final [$]", return_heatmap=True)
        times.append(time.perf_counter() - started)
        best = (int(stats._strategy.n1), int(stats._strategy.n2), float(stats["Equity Final [$]"]))
    equity = {(int(a), int(b)): float(v) for (a, b), v in heatmap.items()}
    return statistics.median(times), times, best, equity


def ours(call, base, token, csv_bytes, df, runs):
    req = urllib.request.Request(f"{base}/api/data/import?symbol={SYMBOL}&timeframe=1d", data=csv_bytes,
                                 method="POST")
    req.add_header("Authorization", "Bearer " + token)
    req.add_header("Content-Type", "text/csv")
    urllib.request.urlopen(req).read()
    lifted = {"risk_controls": {"max_daily_loss": 1e9, "max_order_value": 1e9, "max_position_size": 10_000_000,
                                "market_buy_buffer_pct": 0}}
    body = {"strategy_id": "sma_cross", "symbol": SYMBOL, "timeframe": "1d",
            "start": df.index[0].strftime("%Y-%m-%dT00:00:00Z"),
            "end": (df.index[-1] + pd.Timedelta(days=1)).strftime("%Y-%m-%dT00:00:00Z"),
            "grid": GRID, "objective": "final_equity", "initial_cash": CASH, "settings": lifted}
    times, service, sweep = [], [], None
    poll = float(os.environ.get("SWEEP_POLL_MS", "2")) / 1000
    for _ in range(runs):
        started = time.perf_counter()
        queued = call("POST", "/api/backtests/sweeps", body)
        if not queued.get("ok"):
            sys.exit(f"sweep refused: {queued}")
        sweep_id = queued["data"]["sweep_id"]
        while True:
            sweep = call("GET", f"/api/backtests/sweeps/{sweep_id}")["data"]
            if sweep["status"] in ("COMPLETED", "FAILED", "CANCELED"):
                break
            time.sleep(poll)
        times.append(time.perf_counter() - started)
        stamp = lambda key: datetime.fromisoformat(sweep[key].replace("Z", "+00:00"))  # noqa: E731
        service.append((stamp("finished_at") - stamp("created_at")).total_seconds())
        if sweep["status"] != "COMPLETED":
            sys.exit(f"sweep {sweep_id}: {sweep['status']} {sweep.get('error')}")
    best = sweep["best"]
    equity = {(int(r["parameters"]["fast"]), int(r["parameters"]["slow"])): float(r["final_equity"])
              for r in sweep["results"]}
    return statistics.median(times), times, (int(best["parameters"]["fast"]), int(best["parameters"]["slow"]),
                                             float(best["final_equity"])), equity, sweep, service


def main():
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    base, token = sys.argv[1].rstrip("/"), sys.argv[2]
    runs = int(sys.argv[3]) if len(sys.argv) == 4 else 3
    path = os.path.join(os.path.dirname(backtesting.__file__), "test", "GOOG.csv")
    with open(path, "rb") as f:
        csv_bytes = f.read()
    df = pd.read_csv(path, index_col=0, parse_dates=True)
    theirs_time, theirs_times, theirs_best, theirs_equity = reference(df, runs)
    our_time, our_times, our_best, our_equity, sweep, service = ours(client(base, token), base, token, csv_bytes, df, runs)
    print(f"backtesting.py {backtesting.__version__} optimize: {len(theirs_equity)} combinations, median "
          f"{theirs_time * 1000:.0f} ms of {[round(t * 1000) for t in theirs_times]}; best n1={theirs_best[0]} "
          f"n2={theirs_best[1]} final equity {theirs_best[2]:,.2f}")
    print(f"tradeops sweep: {sweep['combinations']} combinations in {sweep['parts']} parts, median "
          f"{our_time * 1000:.0f} ms of {[round(t * 1000) for t in our_times]}; best fast={our_best[0]} "
          f"slow={our_best[1]} final equity {our_best[2]:,.2f}")
    service_time = statistics.median(service)
    print(f"  the service's own time (created_at to finished_at): median {service_time * 1000:.0f} ms of "
          f"{[round(t * 1000) for t in service]}")
    print(f"speed-up: {theirs_time / our_time:.1f}x (goal 100x); by the service's own time "
          f"{theirs_time / max(service_time, 0.001):.1f}x")
    cores = os.cpu_count() or 1
    per_second = sweep["combinations"] / max(service_time, 0.001)
    print(f"combinations a second by the service's own time: {per_second:,.0f} on {cores} cores "
          f"({per_second / cores:,.0f} a core; vectorbt publishes about 1,000 dual-SMA combinations a second), "
          f"{sweep['combinations'] * len(df) / max(service_time, 0.001) / cores / 1e6:.2f} M bar steps a second a core")
    differences = 0
    if theirs_best[:2] != our_best[:2] or abs(theirs_best[2] - our_best[2]) > 0.01:
        differences += 1
        print(f"best differs: backtesting.py {theirs_best} tradeops {our_best}")
    if set(theirs_equity) != set(our_equity):
        differences += 1
        print(f"combinations differ: {sorted(set(theirs_equity) ^ set(our_equity))}")
    for key in sorted(set(theirs_equity) & set(our_equity)):
        if abs(theirs_equity[key] - our_equity[key]) > 0.01:
            differences += 1
            print(f"{key}: backtesting.py {theirs_equity[key]:,.2f} tradeops {our_equity[key]:,.2f}")
    if differences:
        sys.exit(f"NOT identical: {differences} difference(s)")
    print(f"identical: the best parameters and all {len(our_equity)} combinations' final equity")


if __name__ == "__main__":
    main()
