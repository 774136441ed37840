"""What every stand-in shares: a threaded HTTP server, answers (JSON, text, SSE), and the
one control every stand-in takes (`POST /standin/mode`) so a test can make it fail or
stall the way a real node does.

A stand-in is a function `(Request) -> Answer`. An SSE answer carries a generator of
byte chunks; the server writes each as it comes and stops when the client goes.
"""

import json
import ssl
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

MAX_BODY = 1 << 20


class Request:
    def __init__(self, method, target, headers, body):
        parts = urlsplit(target)
        self.method = method
        self.path = parts.path
        self.query = {k: v[-1] for k, v in parse_qs(parts.query, keep_blank_values=True).items()}
        self.raw_query = parts.query
        self.headers = {k.lower(): v for k, v in headers.items()}
        self.body = body

    def json(self):
        try:
            return json.loads(self.body or b"null")
        except ValueError:
            return None


class Answer:
    def __init__(self, status=200, body=b"", content_type="application/json", stream=None, headers=None):
        self.status = status
        self.body = body if isinstance(body, bytes) else body.encode()
        self.content_type = content_type
        self.stream = stream
        self.headers = headers or {}


def json_answer(value, status=200):
    return Answer(status, json.dumps(value, separators=(",", ":")))


def empty(status=200):
    return Answer(status, b"", content_type="text/plain")


def error(status, message):
    """The beacon/builder/relay APIs' error body: `{code, message}`."""
    return json_answer({"code": status, "message": message}, status)


def sse(chunks):
    return Answer(200, content_type="text/event-stream", stream=chunks)


def jsonrpc(call, methods):
    """Answer one JSON-RPC call (or a batch) from `methods`: name -> fn(params) -> result.
    A method raises `RpcError` to answer an error object."""
    if isinstance(call, list):
        if not call:
            return {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "empty batch"}}
        return [jsonrpc(c, methods) for c in call]
    if not isinstance(call, dict) or not isinstance(call.get("method"), str):
        return {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "invalid request"}}
    out = {"jsonrpc": "2.0", "id": call.get("id")}
    fn = methods.get(call["method"])
    if fn is None:
        out["error"] = {"code": -32601, "message": f"the method {call['method']} does not exist"}
        return out
    try:
        out["result"] = fn(call.get("params", []))
    except RpcError as e:
        out["error"] = {"code": e.code, "message": e.message}
    except (KeyError, IndexError, TypeError, ValueError) as e:
        out["error"] = {"code": -32602, "message": f"invalid params: {e}"}
    return out


class RpcError(Exception):
    def __init__(self, code, message):
        super().__init__(message)
        self.code, self.message = code, message


class Mode:
    """Faults a test can switch on: every answer `fail` (a status), or `stall_ms` first."""

    def __init__(self):
        self.fail = None
        self.stall_ms = 0
        self.hits = 0
        self.lock = threading.Lock()

    def set(self, v):
        with self.lock:
            self.fail = v.get("fail")
            self.stall_ms = int(v.get("stall_ms") or 0)


class QuietServer(ThreadingHTTPServer):
    """A threading HTTP server that reports a failed connection (a client gone mid-answer,
    a TLS handshake refused) as one line on stderr, not socketserver's traceback: a demo
    whose gateway restarts or a test that kills clients leaves a readable log."""

    daemon_threads = True
    allow_reuse_address = True

    def handle_error(self, request, client_address):
        kind, err, _ = sys.exc_info()
        name = kind.__name__ if kind else "error"
        print(f"standin: {client_address[0]}:{client_address[1]}: {name}: {err}", file=sys.stderr, flush=True)


def serve(app, port, host="127.0.0.1", tls=None):
    """Serve `app` on `port` in a daemon thread; returns the server. `tls`: (cert, key)
    files to serve HTTPS with."""
    mode = Mode()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "standin"

        def log_message(self, *args):
            pass

        def handle_one(self, method):
            length = int(self.headers.get("content-length") or 0)
            if length > MAX_BODY:
                return self.write(error(413, "body too large"))
            body = self.rfile.read(length) if length else b""
            req = Request(method, self.path, self.headers, body)
            if req.path == "/standin/mode" and method == "POST":
                mode.set(req.json() or {})
                return self.write(json_answer({"ok": True}))
            if req.path == "/standin/hits":
                return self.write(json_answer({"hits": mode.hits}))
            with mode.lock:
                mode.hits += 1
                fail, stall = mode.fail, mode.stall_ms
            if stall:
                time.sleep(stall / 1000)
            if fail:
                return self.write(error(fail, "stand-in told to fail"))
            try:
                answer = app(req)
            except Exception as e:  # a stand-in bug is a 500, as a node's would be
                answer = error(500, f"stand-in error: {e!r}")
            self.write(answer)

        def write(self, answer):
            self.send_response(answer.status)
            self.send_header("content-type", answer.content_type)
            for name, value in answer.headers.items():
                self.send_header(name, value)
            if answer.stream is None:
                self.send_header("content-length", str(len(answer.body)))
                self.end_headers()
                self.wfile.write(answer.body)
                return
            self.send_header("cache-control", "no-cache")
            self.send_header("connection", "close")
            self.end_headers()
            self.close_connection = True
            try:
                for chunk in answer.stream:
                    self.wfile.write(chunk if isinstance(chunk, bytes) else chunk.encode())
                    self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError, OSError):
                pass

        def do_GET(self):
            self.handle_one("GET")

        def do_POST(self):
            self.handle_one("POST")

        def do_HEAD(self):
            self.handle_one("HEAD")

    server = QuietServer((host, port), Handler)
    if tls:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(*tls)
        # The handshake happens in the connection's own thread, not in accept().
        server.socket = ctx.wrap_socket(server.socket, server_side=True, do_handshake_on_connect=False)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


class Clock:
    """Slots from a genesis time: every stand-in of one fleet shares it, so the beacon
    node, the relay's bid traces and heimdall's checkpoints move together."""

    def __init__(self, genesis, slot_secs, first_slot=0):
        self.genesis, self.slot_secs, self.first_slot = genesis, slot_secs, first_slot

    def slot(self):
        return self.first_slot + max(0, int((time.time() - self.genesis) // self.slot_secs))

    def slot_time(self, slot):
        return int(self.genesis + (slot - self.first_slot) * self.slot_secs)
