#!/usr/bin/env python3
"""A beacon-node events endpoint for the benchmark: `GET /eth/v1/events` answers
`text/event-stream` and keeps every stream open, sending a `:` keep-alive comment every
10 s, as beacon nodes do; `/eth/v1/node/syncing` answers as a synced node (health checks). `sse_upstream.py PORT`; runs until killed."""
import asyncio
import sys


async def serve(reader, writer):
    try:
        head = await reader.readuntil(b"\r\n\r\n")
        path = head.split(b" ", 2)[1]
        if path.startswith(b"/eth/v1/node/syncing"):
            body = b'{"data":{"head_slot":"100","sync_distance":"0","is_syncing":false}}'
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                         b"connection: close\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body))
            await writer.drain()
            return
        if not path.startswith(b"/eth/v1/events"):
            writer.write(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n")
            await writer.drain()
            return
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                     b"cache-control: no-cache\r\ntransfer-encoding: chunked\r\n\r\n")
        while True:
            writer.write(b"3\r\n:\n\n\r\n")
            await writer.drain()
            await asyncio.sleep(10)
    except (ConnectionError, asyncio.IncompleteReadError):
        pass
    finally:
        writer.close()


async def main(port):
    server = await asyncio.start_server(serve, "127.0.0.1", port, backlog=4096)
    async with server:
        await server.serve_forever()


asyncio.run(main(int(sys.argv[1])))
