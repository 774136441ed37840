#!/usr/bin/env python3
"""Hold N WebSocket JSON-RPC clients on URL: idle (one eth_chainId each, then quiet) or
subscribed to newHeads. Prints "held N" once all are ready, then, for `subscribe`, counts
the heads every client receives until stdin closes and prints "heads H in S s" (H summed
over clients, S from the first head to the last).

  ws_clients.py URL N idle|subscribe [Header: value ...]"""
import asyncio
import json
import sys
import time

import websockets


async def one(url, headers, mode, ready, counts, times):
    ws = await websockets.connect(url, additional_headers=headers, max_size=None, ping_interval=None)
    if mode == "subscribe":
        await ws.send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "eth_subscribe", "params": ["newHeads"]}))
    else:
        await ws.send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "eth_chainId", "params": []}))
    answer = json.loads(await ws.recv())
    if "result" not in answer:
        raise RuntimeError(answer)
    ready.append(1)
    return ws


async def count(ws, counts, times):
    try:
        async for msg in ws:
            if '"eth_subscription"' in msg:
                counts[0] += 1
                now = time.monotonic()
                times[0] = times[0] or now
                times[1] = now
    except websockets.ConnectionClosed:
        pass


async def main():
    url, n, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    headers = [tuple(h.split(": ", 1)) for h in sys.argv[4:]]
    ready, counts, times = [], [0], [0.0, 0.0]
    conns = []
    for start in range(0, n, 200):
        batch = [one(url, headers, mode, ready, counts, times) for _ in range(start, min(n, start + 200))]
        conns += await asyncio.gather(*batch)
    print(f"held {len(conns)}", flush=True)
    readers = [asyncio.create_task(count(ws, counts, times)) for ws in conns]
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    print(f"heads {counts[0]} in {times[1] - times[0]:.3f} s", flush=True)
    for ws in conns:
        await ws.close()
    for r in readers:
        r.cancel()


asyncio.run(main())
