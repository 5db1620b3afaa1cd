#!/usr/bin/env python3
"""A black-holed notification endpoint: accepts every TCP connection on 127.0.0.1, reads what
it is sent and never answers, keeping each socket open until the peer closes it.
Usage: black_hole.py STATS_FILE. Prints its port on the first line of stdout; STATS_FILE is
rewritten at each connection and every second: `connections N open N bytes N answered 0`."""
import asyncio
import os
import signal
import sys

stats_file = sys.argv[1]
connections = 0
open_now = 0
received = 0


def write_stats():
    with open(stats_file + ".tmp", "w") as f:
        f.write(f"connections {connections} open {open_now} bytes {received} answered 0\n")
    os.replace(stats_file + ".tmp", stats_file)


async def swallow(reader, writer):
    global connections, open_now, received
    connections += 1
    open_now += 1
    write_stats()
    try:
        while True:
            data = await reader.read(65536)
            if not data:  # the peer gave up (its timeout) and closed: so do we
                break
            received += len(data)
    except ConnectionError:
        pass
    finally:
        open_now -= 1
        writer.close()


async def main():
    server = await asyncio.start_server(swallow, "127.0.0.1", 0, backlog=1024)
    print(server.sockets[0].getsockname()[1], flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    write_stats()
    while not stop.is_set():
        try:
            await asyncio.wait_for(stop.wait(), 1.0)
        except asyncio.TimeoutError:
            write_stats()
    write_stats()
    server.close()


asyncio.run(main())
