#!/usr/bin/env python3
"""Open N client connections to 127.0.0.1:PORT, send one GET on each and read the answer's
head, then hold them all open (idle keep-alive, or a stream being received) until stdin
closes. Prints "held N" once every connection got its answer.

  hold_conns.py PORT PATH N [Header: value ...]"""
import asyncio
import sys


async def one(port, request, ready):
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(request)
    await writer.drain()
    head = await reader.readuntil(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    if status != 200:
        raise RuntimeError(f"status {status}")
    ready.append(1)
    return reader, writer


async def main():
    port, path, n = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    headers = "".join(f"{h}\r\n" for h in sys.argv[4:])
    request = f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{headers}\r\n".encode()
    ready = []
    conns = []
    # Open in batches so the listen backlog is never the limit being measured.
    for start in range(0, n, 500):
        batch = [one(port, request, ready) for _ in range(start, min(n, start + 500))]
        conns += await asyncio.gather(*batch)
    print(f"held {len(conns)}", flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    for _, w in conns:
        w.close()


asyncio.run(main())
