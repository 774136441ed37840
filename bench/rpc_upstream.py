#!/usr/bin/env python3
"""A JSON-RPC node for bench/rpc.sh that counts what it is asked.

    rpc_upstream.py PORT

eth_getBalance takes 50 ms (a node under load: long enough for a herd to pile up);
eth_getLogs has one log in every tenth block up to block 2,000,000 and refuses an answer
of more than 1,000 logs with -32005, as providers do; GET /stats gives the calls served
per method.
"""

import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HEAD = 2_000_000
CAP = 1_000
calls = {}
lock = threading.Lock()


def block_hex(n):
    return "0x%x" % n


def answer(call):
    method = call.get("method", "")
    with lock:
        calls[method] = calls.get(method, 0) + 1
    params = call.get("params") or []
    if method == "eth_getBalance":
        time.sleep(0.05)
        return {"result": "0x1"}
    if method == "eth_blockNumber":
        return {"result": block_hex(HEAD)}
    if method == "eth_chainId":
        return {"result": "0x1"}
    if method == "eth_syncing":
        return {"result": False}
    if method == "eth_getBlockByNumber":
        return {"result": {"number": block_hex(HEAD), "hash": "0x%064x" % HEAD, "parentHash": "0x%064x" % (HEAD - 1)}}
    if method == "eth_getLogs":
        f = params[0] if params else {}

        def end(k):
            v = f.get(k)
            return int(v, 16) if isinstance(v, str) and v.startswith("0x") else HEAD

        lo, hi = end("fromBlock"), end("toBlock")
        first = (lo + 9) // 10 * 10
        count = max(0, (hi - first) // 10 + 1) if hi >= first else 0
        if count > CAP:
            return {"error": {"code": -32005, "message": "query returned more than %d results" % CAP}}
        logs = [
            {"address": "0x" + "11" * 20, "blockNumber": block_hex(b), "logIndex": "0x0", "data": "0x", "topics": []}
            for b in range(first, hi + 1, 10)
        ]
        return {"result": logs}
    return {"result": None}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_GET(self):
        with lock:
            body = json.dumps(calls).encode()
        self.reply(body)

    def do_POST(self):
        n = int(self.headers.get("Content-Length", "0"))
        req = json.loads(self.rfile.read(n) or b"null")
        if isinstance(req, list):
            out = [dict({"jsonrpc": "2.0", "id": c.get("id")}, **answer(c)) for c in req]
        else:
            out = dict({"jsonrpc": "2.0", "id": req.get("id")}, **answer(req))
        self.reply(json.dumps(out).encode())

    def reply(self, body):
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class Server(ThreadingHTTPServer):
    # A herd of 200 connects at once: the default backlog (5) would reset most of them.
    request_queue_size = 1024


if __name__ == "__main__":
    server = Server(("127.0.0.1", int(sys.argv[1])), Handler)
    server.daemon_threads = True
    server.serve_forever()
