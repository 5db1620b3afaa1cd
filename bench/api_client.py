"""The benchmarks' HTTP client: JSON calls with a bearer token, returning the envelope whether the
status is a success or a refusal."""
import json
import sys
import time
import urllib.error
import urllib.request


def client(base, token):
    def call(method, path, body=None):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(base + path, data=data, method=method)
        req.add_header("Authorization", "Bearer " + token)
        if data is not None:
            req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req) as resp:
                return json.load(resp)
        except urllib.error.HTTPError as e:
            return json.load(e)

    return call


def open_radar_symbol(call):
    """Opens the radar's filters (any symbol of the market priced 2-50 qualifies) and lifts the
    daily trade count and duplicate window, so a benchmark can trade one symbol many times;
    returns the radar's top symbol once a scan lists one (exits when none comes)."""
    settings = call("PUT", "/api/settings", {
        "momentum_radar": {"min_percentage_gain": -100, "min_relative_volume": 0, "max_float": 100000000000,
                           "min_volume": 0, "min_price": 2, "max_price": 50},
        "risk_controls": {"max_trades_per_day": 100000, "duplicate_order_window_seconds": 0},
    })
    if not settings.get("ok"):
        sys.exit(f"settings refused: {settings}")
    for _ in range(150):  # the warm-up scan, else the next minute boundary's with the open filters
        rows = call("GET", "/api/radar/momentum?top_n=1")["data"]
        if rows:
            return rows[0]["symbol"]
        time.sleep(0.5)
    sys.exit("no symbol on the radar")
