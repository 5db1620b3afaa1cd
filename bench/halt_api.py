#!/usr/bin/env python3
"""Emergency halt through the API: with 100 open positions and 500 working orders on
the paper broker, the time of POST /api/risk/emergency-halt — which answers once the latch is
stored, every exit written ahead, and every cancel and exit handed to the broker (the orders' new
states are stored right after the answer). Usage: halt_api.py BASE TOKEN"""
import sys
import time

from api_client import client

base, token = sys.argv[1], sys.argv[2]
call = client(base, token)

ok = call("PUT", "/api/settings", {
    "momentum_radar": {"min_percentage_gain": -100, "min_relative_volume": 0, "max_float": 100000000000,
                       "min_volume": 0, "min_price": 2, "max_price": 50},
    "risk_controls": {"open_position_limit": 500, "max_trades_per_day": 100000, "duplicate_order_window_seconds": 0,
                      "price_collar_pct": 25},
})
assert ok["ok"], ok
rows = []
for _ in range(150):
    rows = call("GET", "/api/radar/momentum?top_n=200")["data"]
    if len(rows) >= 100:
        break
    time.sleep(0.5)
symbols = [(r["symbol"], r["price"]) for r in rows[:100]]
assert len(symbols) == 100, f"only {len(symbols)} symbols on the radar"
ids = []
for s, _ in symbols:
    placed = call("POST", "/api/orders", {"symbol": s, "side": "BUY", "quantity": 10})
    assert placed["ok"], placed
    ids.append(placed["data"]["client_order_id"])
for i in ids:
    while call("GET", f"/api/orders/{i}")["data"]["status"] != "FILLED":
        time.sleep(0.01)
for n in range(500):
    s, price = symbols[n % 100]
    limit = round(price * 0.90 - 0.01 * (n // 100), 2)
    placed = call("POST", "/api/orders", {"symbol": s, "side": "BUY", "quantity": 1 + n // 100,
                                          "order_type": "LIMIT", "limit_price": limit, "time_in_force": "GTC"})
    assert placed["ok"], placed
positions = call("GET", "/api/positions")["meta"]["count"]
started = time.perf_counter()
halt = call("POST", "/api/risk/emergency-halt", {"reason": "benchmark"})
elapsed = (time.perf_counter() - started) * 1000
assert halt["ok"] and halt["data"]["liquidation_requested"], halt
print(f"emergency halt through the API: {elapsed:.1f} ms for {positions} positions and 500 working orders "
      f"(latch stored, {positions} exits written ahead, 500 cancels and the exits handed to the paper broker)")
