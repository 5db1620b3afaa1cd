#!/usr/bin/env python3
"""POST /api/orders -> FILLED visible in GET /api/orders/{id}, on the paper broker.
Usage: order_latency.py BASE_URL TOKEN [ORDERS]. Alternates buys and sells of one symbol so the
position stays small; prints p50/p99 in milliseconds."""
import sys
import time

from api_client import client, open_radar_symbol

base, token = sys.argv[1], sys.argv[2]
count = int(sys.argv[3]) if len(sys.argv) > 3 else 100
call = client(base, token)

symbol = open_radar_symbol(call)

latencies = []
for i in range(count):
    side = "BUY" if i % 2 == 0 else "SELL"
    started = time.perf_counter()
    placed = call("POST", "/api/orders", {"symbol": symbol, "side": side, "quantity": 10})
    if not placed.get("ok"):
        sys.exit(f"order refused: {placed}")
    order_id = placed["data"]["client_order_id"]
    while True:
        order = call("GET", f"/api/orders/{order_id}")["data"]
        if order["status"] == "FILLED":
            break
        if order["status"] in ("REJECTED", "CANCELED", "EXPIRED"):
            sys.exit(f"order ended {order['status']}")
        time.sleep(0.002)
    latencies.append((time.perf_counter() - started) * 1000)

latencies.sort()
p = lambda q: latencies[min(len(latencies) - 1, int(q * len(latencies)))]
print(f"POST /api/orders -> FILLED visible: p50 {p(0.5):.1f} ms, p99 {p(0.99):.1f} ms over {count} orders "
      f"({symbol}, paper broker ack latency 50 ms)")
