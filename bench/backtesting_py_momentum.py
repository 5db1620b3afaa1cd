"""Benchmark backtesting.py on a port of our ``momentum_breakout`` strategy.

Runs every ``<SYMBOL>.csv`` of a directory through one ``Backtest.run()`` each
and measures the wall time of the whole set (``Backtest.run()`` only; CSV
loading excluded), so the result can be compared with the Rust backtester's
``momentum`` benchmark on the same bars (one year of minute bars, 50 symbols).

The CSVs (header ``timestamp,open,high,low,close,volume,prev_close,
relative_volume``, RFC 3339 UTC timestamps; ``prev_close`` and
``relative_volume`` are what the Rust run feeds the engine with each bar,
empty when unknown) are produced by:

    cargo build --release -p tradeops-sim --example backtest_bench
    target/release/examples/backtest_bench momentum 50 1 1 /tmp/momentum_csv

Run:

    python3 -m venv /tmp/btpy-venv && /tmp/btpy-venv/bin/pip install backtesting \
        && /tmp/btpy-venv/bin/python bench/backtesting_py_momentum.py /tmp/momentum_csv 1

Usage: backtesting_py_momentum.py CSV_DIR [RUNS]   (RUNS defaults to 3)

The port follows crates/core/src/strategy/momentum_breakout.rs rule for rule,
with the engine's context (crates/core/src/engine/strategies.rs) and settings
of the Rust benchmark (risk $50 per trade, positions up to $10,000, target 2R,
scale out half, flatten 5 minutes before the close, 5% price collar), in
integer ticks of $0.0001 as the Rust strategy is exact in decimals. It differs
where backtesting.py's order semantics do:

- a buy stop-limit triggered inside a bar fills at its stop price (ours: at
  max(open, stop), the open when the bar gaps through the stop, or at the limit
  when the bar opened above the limit and came back down to it); only the fill
  price differs, which moves the breakeven stop after a scale-out;
- a scale-out (``self.sell(size=...)``) splits backtesting.py's trade in two,
  so its ``# Trades`` counts a scaled-out round trip twice; ``round_trips``
  (distinct entries) is what compares with our trade count;
- ``next()`` is not called on the first bar of the data (00:00 New York,
  hours before any entry; ours sees it).

On the bench data (50 simulated symbols) the first difference never comes
into play: per symbol, round trips and final equity equal the Rust run's.

The protective stop, like ours, is a rule on the bar's close (low touched the
stop: sell everything at the next open), not a resting stop order, so there is
no ``sl=`` on the entry.
"""

import datetime
import glob
import inspect
import math
import os
import statistics
import sys
import time
import warnings
from fractions import Fraction
from zoneinfo import ZoneInfo

import backtesting
import numpy as np
import pandas as pd
from backtesting import Backtest, Strategy

NEW_YORK = ZoneInfo("America/New_York")
TICKS = 10_000  # ticks of $0.0001 per dollar, as tradeops_core::market::Price
CENT = 100  # ticks

FLAT, WORKING, IN_POSITION = 0, 1, 2


def nyse_early_close(date):
    """13:00 close: July 3, the day after Thanksgiving, December 24, when a
    weekday that is not a holiday (crates/core/src/calendar.rs)."""
    if date.weekday() >= 5:
        return False
    y = date.year
    if (date.month, date.day) == (7, 3):
        # Not when it is the observed Independence Day (July 4 on a Saturday).
        return datetime.date(y, 7, 4).weekday() != 5
    if (date.month, date.day) == (12, 24):
        # Not when it is the observed Christmas (December 25 on a Saturday).
        return datetime.date(y, 12, 25).weekday() != 5
    if date.month == 11:
        thanksgiving = 1 + (3 - datetime.date(y, 11, 1).weekday()) % 7 + 21
        return date.day == thanksgiving + 1
    return False


def session_minutes(index):
    """Per bar, as the engine computes them at the bar's end: its New York
    date (per-day state rolls with it), and the whole minutes (truncated toward
    zero) since that date's 09:30 open and to its 16:00 (13:00) close."""
    end = index.as_unit("s").asi8 + 60
    local = (index + pd.Timedelta(minutes=1)).tz_convert(NEW_YORK).tz_localize(None)
    days, day_of_bar = np.unique(local.normalize().as_unit("s").asi8, return_inverse=True)
    opens, closes = [], []
    for seconds in days:
        date = datetime.date(1970, 1, 1) + datetime.timedelta(days=int(seconds) // 86_400)
        close = (13, 0) if nyse_early_close(date) else (16, 0)
        for times, (hour, minute) in ((opens, (9, 30)), (closes, close)):
            at = datetime.datetime.combine(date, datetime.time(hour, minute), tzinfo=NEW_YORK)
            times.append(int(at.timestamp()))
    since_open = end - np.array(opens, dtype=np.int64)[day_of_bar]
    to_close = np.array(closes, dtype=np.int64)[day_of_bar] - end
    return day_of_bar, whole_minutes(since_open), whole_minutes(to_close)


def whole_minutes(seconds):
    """Truncated toward zero, as Rust's integer division."""
    return np.sign(seconds) * (np.abs(seconds) // 60)


def ticks(values):
    return np.rint(np.nan_to_num(np.asarray(values, dtype=float)) * TICKS).astype(np.int64).tolist()


class MomentumBreakout(Strategy):
    # Settings of the Rust benchmark (Settings::default().strategy_allocator, runtime and
    # risk_controls.price_collar_pct).
    risk_per_trade = 50
    max_position_value = 10_000
    reward_multiple = 2.0
    scale_out_fraction = 0.5
    flatten_minutes_before_close = 5
    price_collar_pct = 5

    # momentum_breakout's constants.
    PATTERN_BARS = 6
    MAX_PULLBACK_BARS = 3
    ENTRY_WINDOW_END_MINUTES = 150
    MIN_RELATIVE_VOLUME = 2.0
    ENTRY_VALID_BARS = 2
    REENTRY_COOLDOWN_MINUTES = 10

    def init(self):
        d = self.data
        self.h, self.l, self.c = (ticks(x) for x in (d.High, d.Low, d.Close))
        self.v = np.nan_to_num(np.asarray(d.Volume, dtype=float)).astype(np.int64).tolist()
        self.prev = ticks(d.PrevClose)  # unknown → 0, as the engine's unwrap_or(ZERO)
        self.rvol = np.asarray(d.RelativeVolume, dtype=float).tolist()  # unknown → NaN
        day, since_open, to_close = session_minutes(d.index)
        self.day, self.since_open, self.to_close = day.tolist(), since_open.tolist(), to_close.tolist()
        self.reward = Fraction(str(self.reward_multiple))
        self.scale_fraction = Fraction(str(self.scale_out_fraction))
        self.entry_order = None
        self.current_day = None

    def reset_day(self, i):
        self.current_day = self.day[i]
        self.first_bar = i  # the day's first bar seen: the 6-bar window starts here
        self.hlc_volume = 0  # Σ (h + l + c) × v from the regular open, ticks
        self.volume = 0
        self.high_of_day = None
        self.phase = FLAT
        self.plan = None  # (stop_price, stop_loss, target)
        self.bars_waited = 0
        self.holding = None  # [entry_price, initial_stop, stop, target, scaled_out]
        self.last_exit_minute = None
        self.cooldown_until = None

    def next(self):
        i = len(self.data) - 1
        if self.day[i] != self.current_day:
            # The engine rolls the day with the bar's end; a DAY entry still working would
            # expire before the next bar fills.
            if self.entry_order is not None:
                self.entry_order.cancel()
                self.entry_order = None
            self.reset_day(i)
        position = self.position.size

        # Fill report (before the bar reaches the strategy, as in the engine).
        working = False
        if self.entry_order is not None:
            if self.entry_order in self.orders:
                working = True
            else:
                self.entry_order = None
                if position > 0 and self.phase == WORKING:
                    stop_price, stop_loss, target = self.plan
                    price = round(self.trades[-1].entry_price * TICKS)
                    self.holding = [price, stop_loss, stop_loss, target, False]
                    self.phase = IN_POSITION

        # observe(): VWAP and high of day from the regular open.
        minute = self.since_open[i]
        if minute >= 0:
            h = self.h[i]
            self.hlc_volume += (h + self.l[i] + self.c[i]) * self.v[i]
            self.volume += self.v[i]
            if self.high_of_day is None or h > self.high_of_day:
                self.high_of_day = h

        if self.phase == IN_POSITION:
            if position > 0:
                return self.manage_position(i, position, working)
            # Flat again: the cooldown runs from the last exit sent.
            exited = self.last_exit_minute if self.last_exit_minute is not None else minute
            self.cooldown_until = exited + self.REENTRY_COOLDOWN_MINUTES
            self.phase = FLAT
        elif self.phase == WORKING:
            if working:
                return self.manage_entry(i)
            self.phase = FLAT  # ended without a fill (refused, cancelled or expired)
        if position == 0 and not working:
            self.entry(i, minute)

    def below_vwap(self, price):
        """price < VWAP (False while VWAP is unknown), exact."""
        return self.volume > 0 and 3 * price * self.volume < self.hlc_volume

    def entry(self, i, minute):
        if self.cooldown_until is not None and minute < self.cooldown_until:
            return
        if not 0 <= minute <= self.ENTRY_WINDOW_END_MINUTES:
            return
        close, prev = self.c[i], self.prev[i]
        # Up at least 10% on the day.
        if prev <= 0 or 10 * (close - prev) < prev:
            return
        rvol = self.rvol[i]
        if not self.MIN_RELATIVE_VOLUME <= rvol < math.inf:
            return
        # Close above VWAP.
        if self.volume == 0 or 3 * close * self.volume <= self.hlc_volume:
            return
        # The impulse leg and 1–3 bars of lower highs ending at this bar, in the day's last 6 bars.
        first = i - self.PATTERN_BARS + 1
        if first < self.first_bar:
            return
        highs = self.h
        pullback_bars = 0
        j = i
        while j > first and highs[j] < highs[j - 1]:
            pullback_bars += 1
            j -= 1
        if pullback_bars == 0 or pullback_bars > self.MAX_PULLBACK_BARS:
            return
        peak = i - pullback_bars
        leg_high = highs[peak]
        if max(highs[first:peak]) > leg_high:  # the pullback follows the leg's high
            return
        leg_low = min(self.l[first:peak + 1])
        pullback_low = min(self.l[peak + 1:i + 1])
        run_up = leg_high - leg_low
        # Leg of at least 3%; pullback above VWAP giving back at most half of it.
        if leg_low <= 0 or 100 * run_up < 3 * leg_low:
            return
        if 3 * pullback_low * self.volume <= self.hlc_volume or 2 * (leg_high - pullback_low) > run_up:
            return

        stop_price = highs[i] + CENT
        # round_cent(stop + min(1% of stop, $0.10)), half away from zero.
        limit_price = (100 * stop_price + min(stop_price, 100 * 10 * CENT) + 50 * CENT) // (100 * CENT) * CENT
        stop_loss = pullback_low - CENT
        risk = stop_price - stop_loss
        # Risk per share at most max($0.50, 5% of the price).
        if risk <= 0 or (risk > 50 * CENT and 20 * risk > stop_price):
            return
        if self.reward <= 0:
            return
        target = math.floor((stop_price + self.reward * risk) / CENT + Fraction(1, 2)) * CENT
        quantity = min(self.risk_per_trade * TICKS // risk, self.max_position_value * TICKS // limit_price)
        if quantity == 0:
            return
        self.plan = (stop_price, stop_loss, target)
        self.phase = WORKING
        self.bars_waited = 0
        # The engine's risk gate: stop and limit within the price collar of the last trade,
        # and buying power for the limit value; a refused entry leaves nothing working.
        collar = self.price_collar_pct
        if any(100 * abs(p - close) > collar * close for p in (limit_price, stop_price)):
            return
        if quantity * limit_price > self.equity * TICKS:
            return
        self.entry_order = self.buy(size=quantity, stop=stop_price / TICKS, limit=limit_price / TICKS)

    def cancel_entry(self):
        if self.entry_order is not None:
            self.entry_order.cancel()
            self.entry_order = None

    def manage_entry(self, i):
        self.bars_waited += 1
        # SETUP_FAILED: a close below VWAP; ENTRY_EXPIRED: two bars without a fill.
        if self.below_vwap(self.c[i]) or self.bars_waited >= self.ENTRY_VALID_BARS:
            self.cancel_entry()
            self.phase = FLAT

    def manage_position(self, i, position, working):
        # Exits are market orders filled at the next open, before the strategy's next bar:
        # none is ever still working here, so every share held is sellable.
        h = self.holding  # [entry_price, initial_stop, stop, target, scaled_out]
        flatten = self.flatten_minutes_before_close
        scale_out = 0 if h[4] or self.h[i] < h[3] else self.scale_out_quantity(position)
        if self.l[i] <= h[2]:
            quantity = position  # STOP_LOSS
        elif flatten > 0 and self.to_close[i] <= flatten:
            quantity = position  # FLATTEN_BEFORE_CLOSE
        elif scale_out > 0:
            quantity = scale_out  # SCALE_OUT_TARGET: the stop moves to breakeven
            h[2], h[4] = h[0], True
        elif self.below_vwap(self.c[i]):
            quantity = position  # LOST_VWAP
        else:
            return
        self.last_exit_minute = self.since_open[i]
        if quantity == position:
            if working:
                self.cancel_entry()  # the rest of a partly filled entry (never, here)
            self.position.close()
        else:
            self.sell(size=quantity)

    def scale_out_quantity(self, position):
        """floor(position × fraction), at least 1 when more than one share is held."""
        if self.scale_fraction <= 0:
            return 0
        quantity = min(math.floor(position * self.scale_fraction), position)
        return max(quantity, 1) if position > 1 else quantity


def load_bars(path):
    df = pd.read_csv(path)
    df.index = pd.DatetimeIndex(pd.to_datetime(df.pop("timestamp"), utc=True))
    return df.rename(columns={
        "open": "Open", "high": "High", "low": "Low", "close": "Close", "volume": "Volume",
        "prev_close": "PrevClose", "relative_volume": "RelativeVolume",
    })


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    directory = sys.argv[1]
    runs = int(sys.argv[2]) if len(sys.argv) == 3 else 3
    warnings.filterwarnings("ignore")

    paths = sorted(glob.glob(os.path.join(directory, "*.csv")))
    if not paths:
        sys.exit(f"no CSV files in {directory}")
    kwargs = dict(cash=100_000, commission=0, trade_on_close=False,
                  exclusive_orders=False, hedging=False)
    if "finalize_trades" in inspect.signature(Backtest).parameters:
        kwargs["finalize_trades"] = True
    tests = []
    for path in paths:
        symbol = os.path.splitext(os.path.basename(path))[0]
        df = load_bars(path)
        tests.append((symbol, len(df), Backtest(df, MomentumBreakout, **kwargs)))
    bars = sum(n for _, n, _ in tests)

    times = []
    for _ in range(runs):
        results = []
        total = 0.0
        for symbol, _, bt in tests:
            start = time.perf_counter()
            stats = bt.run()
            total += time.perf_counter() - start
            results.append((symbol, stats))
        times.append(total)

    print(f"backtesting.py {backtesting.__version__}")
    trades = round_trips = 0
    for symbol, stats in results:
        t = stats["_trades"]
        n, entries = len(t), t["EntryBar"].nunique()
        trades += n
        round_trips += entries
        if entries:
            print(f"  {symbol}: round_trips={entries} trades={n} "
                  f"final_equity={stats['Equity Final [$]']:.2f}")
    median = statistics.median(times)
    print(f"symbols={len(tests)} bars={bars} trades={trades} round_trips={round_trips} "
          f"median_s={median:.3f} bars_per_s={bars / median:,.0f} (over {runs} runs)")


if __name__ == "__main__":
    main()
