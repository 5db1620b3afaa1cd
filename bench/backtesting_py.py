"""Benchmark backtesting.py on the classic SmaCross strategy.

Measures the wall time of ``Backtest.run()`` only (CSV loading excluded) for
an SMA(10)/SMA(20) long-only crossover strategy, so the result can be
compared with the Rust backtester on the same bars.

The input CSV (header ``timestamp,open,high,low,close,volume``, RFC 3339 UTC
timestamps) is produced by:

    cargo run --release -p tradeops-sim --example backtest_bench -- \
        sma 1000000 3 /tmp/sma_bars.csv

Run:

    python3 -m venv /tmp/btpy-venv && /tmp/btpy-venv/bin/pip install backtesting \
        && /tmp/btpy-venv/bin/python bench/backtesting_py.py /tmp/sma_bars.csv 3

Usage: backtesting_py.py CSV_PATH [RUNS]   (RUNS defaults to 5)
"""

import inspect
import statistics
import sys
import time
import warnings

import backtesting
import pandas as pd
from backtesting import Backtest, Strategy
from backtesting.lib import crossover


def sma(values, n):
    return pd.Series(values).rolling(n).mean()


class SmaCross(Strategy):
    n1 = 10
    n2 = 20

    def init(self):
        self.sma1 = self.I(sma, self.data.Close, self.n1)
        self.sma2 = self.I(sma, self.data.Close, self.n2)

    def next(self):
        if crossover(self.sma1, self.sma2):
            if not self.position:
                self.buy()
        elif crossover(self.sma2, self.sma1):
            self.position.close()


def load_bars(path):
    df = pd.read_csv(path)
    df.index = pd.DatetimeIndex(pd.to_datetime(df.pop("timestamp"), utc=True))
    return df.rename(columns=str.capitalize)


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    path = sys.argv[1]
    runs = int(sys.argv[2]) if len(sys.argv) == 3 else 5
    warnings.filterwarnings("ignore")

    df = load_bars(path)
    kwargs = dict(cash=100_000, commission=0, trade_on_close=False,
                  exclusive_orders=False)
    if "finalize_trades" in inspect.signature(Backtest).parameters:
        kwargs["finalize_trades"] = True
    bt = Backtest(df, SmaCross, **kwargs)

    times = []
    for _ in range(runs):
        start = time.perf_counter()
        stats = bt.run()
        times.append(time.perf_counter() - start)

    median = statistics.median(times)
    print(f"backtesting.py {backtesting.__version__}")
    print(f"bars={len(df)} trades={stats['# Trades']} "
          f"final_equity={stats['Equity Final [$]']:.2f} "
          f"return_pct={stats['Return [%]']:.4f} "
          f"median_s={median:.3f} bars_per_s={len(df) / median:,.0f}")


if __name__ == "__main__":
    main()
