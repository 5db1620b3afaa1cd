#!/usr/bin/env python3
"""Seeds a fresh service for bench/lists.sh through the API, as an operator would trade: TRADES
round trips (a market buy of 10 shares, filled, then a market sell of 10, filled) of one symbol
on the paper broker, so GET /api/orders holds 2 x TRADES orders of today and GET /api/trades
TRADES completed trades. Usage: lists_seed.py BASE_URL TOKEN [TRADES]"""
import sys
import time

from api_client import client, open_radar_symbol

base, token = sys.argv[1], sys.argv[2]
count = int(sys.argv[3]) if len(sys.argv) > 3 else 100
call = client(base, token)

symbol = open_radar_symbol(call)


def filled(side):
    placed = call("POST", "/api/orders", {"symbol": symbol, "side": side, "quantity": 10, "reason": "bench seed"})
    if not placed.get("ok"):
        sys.exit(f"order refused: {placed}")
    order_id = placed["data"]["client_order_id"]
    while True:
        status = call("GET", f"/api/orders/{order_id}")["data"]["status"]
        if status == "FILLED":
            return
        if status in ("REJECTED", "CANCELED", "EXPIRED"):
            sys.exit(f"order {order_id} ended {status}")
        time.sleep(0.005)


for _ in range(count):
    filled("BUY")
    filled("SELL")

orders = call("GET", "/api/orders?limit=1000")["meta"]["count"]
trades = call("GET", "/api/trades")["meta"]["count"]
if orders != 2 * count or trades != count:
    sys.exit(f"seeded {orders} orders and {trades} trades, expected {2 * count} and {count}")
print(f"seeded {orders} orders and {trades} completed trades of {symbol}")
