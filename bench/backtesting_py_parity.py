"""sma_cross parity with backtesting.py, trade by trade, through the real server.

Imports backtesting.py's bundled GOOG daily bars (the CSV inside the installed package) with
``POST /api/data/import``, runs ``sma_cross`` 10/20 with ``POST /api/backtests/run`` (all in, no
commission, the desk's limits lifted and no market buy buffer through the request's settings),
fetches the run's trades and compares each with backtesting.py's own run of its ``SmaCross``
example (``bench/backtesting_py.py``) on the same file: entry and exit bar, size, entry and exit
price equal, final equity within 0.01.

backtesting.py leaves a position still open at the end open (or, with ``finalize_trades``,
closes it at the last bar's *open*); the contract closes it at the last *close*, so that one step
is patched here: the open trade is closed at the last close, which is backtesting.py's own final
equity (it marks the open position at the last close).

Run by ``bench/backtesting_py_parity.sh`` (which makes the virtual environment and starts the
server). Usage: backtesting_py_parity.py BASE_URL TOKEN [FIXTURE_CSV]. Exits 1 on any difference.
"""

import os
import sys
import time
import warnings
import urllib.request

import backtesting
import pandas as pd
from backtesting import Backtest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from api_client import client  # noqa: E402
from backtesting_py import SmaCross  # noqa: E402

CASH = 100_000
SYMBOL = "GOOG"


def reference(df):
    """backtesting.py's trades as (entry bar, exit bar, size, entry price, exit price), the open
    one closed at the last close, and its final equity."""
    warnings.filterwarnings("ignore")
    bt = Backtest(df, SmaCross, cash=CASH, commission=0, trade_on_close=False, exclusive_orders=False,
                  finalize_trades=False)
    stats = bt.run()
    rows = [(int(t.EntryBar), int(t.ExitBar), int(t.Size), float(t.EntryPrice), float(t.ExitPrice))
            for t in stats._trades.itertuples()]
    last, last_close = len(df) - 1, float(df.Close.iloc[-1])
    still_open = list(stats._strategy.trades)
    for t in still_open:  # the patched step: the final exit at the last close
        rows.append((int(t.entry_bar), last, int(t.size), float(t.entry_price), last_close))
    return rows, float(stats["Equity Final [$]"]), len(still_open)


def ours(call, base, token, csv_bytes, df):
    req = urllib.request.Request(f"{base}/api/data/import?symbol={SYMBOL}&timeframe=1d", data=csv_bytes,
                                 method="POST")
    req.add_header("Authorization", "Bearer " + token)
    req.add_header("Content-Type", "text/csv")
    with urllib.request.urlopen(req) as resp:
        imported = resp.read().decode()
    if f'"bars":{len(df)}' not in imported.replace(" ", ""):
        sys.exit(f"import: {imported}")
    lifted = {"risk_controls": {"max_daily_loss": 1e9, "max_order_value": 1e9, "max_position_size": 10_000_000,
                                "market_buy_buffer_pct": 0}}
    queued = call("POST", "/api/backtests/run", {
        "strategy_id": "sma_cross", "symbol": SYMBOL, "timeframe": "1d",
        "start": df.index[0].strftime("%Y-%m-%dT00:00:00Z"),
        "end": (df.index[-1] + pd.Timedelta(days=1)).strftime("%Y-%m-%dT00:00:00Z"),
        "parameters": {"fast": SmaCross.n1, "slow": SmaCross.n2}, "initial_cash": CASH, "settings": lifted,
    })
    if not queued.get("ok"):
        sys.exit(f"run refused: {queued}")
    run_id = queued["data"]["backtest_id"]
    for _ in range(1200):
        run = call("GET", f"/api/backtests/{run_id}")["data"]
        if run["status"] in ("COMPLETED", "FAILED"):
            break
        time.sleep(0.05)
    if run["status"] != "COMPLETED":
        sys.exit(f"run {run_id}: {run['status']} {run.get('error')}")
    bar_of = {d.strftime("%Y-%m-%d"): i for i, d in enumerate(df.index)}
    rows = [(bar_of[t["entry_time"][:10]], bar_of[t["exit_time"][:10]], t["quantity"], t["entry_price"],
             t["exit_price"]) for t in run["trades"]]
    return rows, run["final_equity"], run


def main():
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    base, token = sys.argv[1].rstrip("/"), sys.argv[2]
    started = time.perf_counter()
    path = os.path.join(os.path.dirname(backtesting.__file__), "test", "GOOG.csv")
    with open(path, "rb") as f:
        csv_bytes = f.read()
    if len(sys.argv) == 4:
        with open(sys.argv[3], "rb") as f:
            if f.read() != csv_bytes:
                sys.exit(f"{sys.argv[3]} differs from backtesting.py's {path}")
    df = pd.read_csv(path, index_col=0, parse_dates=True)
    expected, expected_equity, still_open = reference(df)
    got, equity, run = ours(client(base, token), base, token, csv_bytes, df)

    print(f"backtesting.py {backtesting.__version__}: {len(df)} GOOG bars {df.index[0]:%Y-%m-%d} -> "
          f"{df.index[-1]:%Y-%m-%d}, {len(expected)} trades ({still_open} closed at the last close), "
          f"final equity {expected_equity:,.2f}")
    print(f"tradeops {run['strategy_id']} {run['strategy_version']}: {len(got)} trades, final equity {equity:,.2f}, "
          f"refusals {run['refusals']}")
    differences = 0
    for i in range(max(len(expected), len(got))):
        a = expected[i] if i < len(expected) else None
        b = got[i] if i < len(got) else None
        same = a is not None and b is not None and a[:3] == tuple(b[:3]) \
            and round(a[3], 4) == round(b[3], 4) and round(a[4], 4) == round(b[4], 4)
        if not same:
            differences += 1
            print(f"trade {i + 1}: backtesting.py {a} tradeops {b}")
    if abs(equity - expected_equity) > 0.01:
        differences += 1
        print(f"final equity differs: {expected_equity:.2f} vs {equity:.2f}")
    elapsed = time.perf_counter() - started
    if differences:
        sys.exit(f"NOT identical: {differences} difference(s) ({elapsed:.1f} s)")
    print(f"trades identical: {len(got)} of {len(expected)} (entry/exit bar, size, prices); final equity "
          f"{equity:,.2f} vs {expected_equity:,.2f}; compared in {elapsed:.1f} s")


if __name__ == "__main__":
    main()
