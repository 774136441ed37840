"""The MEV side of a chain: a relay's data API (flashbots/relay-specs), a block builder
and a private-transaction RPC (Flashbots-style JSON-RPC), and a MEV-Share event stream
(flashbots/mev-share specs/events/v0.1.md).

Relay: one delivered payload per slot of the fleet's clock (every seventh slot missed),
three builder bids per slot, 16 registered validators; the data API's filters, `cursor`
(the highest slot returned) and `limit` (1-200) as the spec and mev-boost-relay do.
Builder and private RPC: the transactions they take are forwarded to the execution node
(`forward`), so a bundle or private transaction lands for real; each is also a MEV-Share
hint. MEV-Share: `GET /` with `Accept: text/event-stream`, one `data:` event per hint,
`:ping` when quiet for `ping_secs`.
"""

import hashlib
import json
import queue
import re
import threading
import time
import urllib.request

from eth_utils import keccak
from stub import RpcError, empty, error, json_answer, jsonrpc, sse

MAX_LIMIT = 200
BUILDERS = 3
HISTORY = 2_000


def h32(*parts):
    return "0x" + hashlib.sha256(":".join(str(p) for p in parts).encode()).hexdigest()


def pubkey(kind, i):
    d = hashlib.sha256(f"{kind} {i}".encode()).hexdigest()
    return "0x" + d + d[:32]


def fee_recipient(i):
    return "0x" + hashlib.sha256(f"fee {i}".encode()).hexdigest()[:40]


class Relay:
    def __init__(self, clock, block_offset=0):
        self.clock, self.block_offset = clock, block_offset

    def delivered(self, slot):
        if slot % 7 == 3:
            return None
        best = max(range(BUILDERS), key=lambda b: self.bid_value(slot, b))
        return {**self.bid(slot, best), "block_number": str(slot - self.block_offset), "num_tx": str(40 + slot % 90)}

    def bid_value(self, slot, b):
        return 10**16 + (int(h32("value", slot, b)[2:10], 16) % 10**6) * 10**11

    def bid(self, slot, b):
        return {
            "slot": str(slot),
            "parent_hash": h32("block", slot - 1),
            "block_hash": h32("block", slot, b),
            "builder_pubkey": pubkey("builder", b),
            "proposer_pubkey": pubkey("proposer", slot % 16),
            "proposer_fee_recipient": fee_recipient(slot % 16),
            "gas_limit": "30000000",
            "gas_used": str(10_000_000 + slot % 5_000_000),
            "value": str(self.bid_value(slot, b)),
        }

    def received(self, slot, b):
        t = self.clock.slot_time(slot) * 1000 + 400 + 150 * b
        return {
            **self.bid(slot, b),
            "block_number": str(slot - self.block_offset),
            "num_tx": str(40 + (slot + b) % 90),
            "timestamp": str(t // 1000),
            "timestamp_ms": str(t),
        }


def uint(q, name):
    raw = q.get(name)
    if raw is None:
        return None
    if not re.fullmatch(r"[0-9]{1,20}", raw):
        raise ValueError(f"invalid {name} argument")
    return int(raw)


def relay_app(relay):
    def matches(item, q):
        for field in ("block_hash", "proposer_pubkey", "builder_pubkey"):
            if q.get(field) and item[field] != q[field].lower():
                return False
        if q.get("block_number") and item["block_number"] != q["block_number"]:
            return False
        return True

    def handle(req):
        p, q = req.path.rstrip("/"), req.query
        if p == "/eth/v1/builder/status":
            return empty()
        try:
            slot, cursor, limit = uint(q, "slot"), uint(q, "cursor"), uint(q, "limit")
        except ValueError as e:
            return error(400, str(e))
        for field, pattern in (("block_hash", r"0x[0-9a-fA-F]{64}"), ("proposer_pubkey", r"0x[0-9a-fA-F]{96}"), ("builder_pubkey", r"0x[0-9a-fA-F]{96}")):
            if q.get(field) and not re.fullmatch(pattern, q[field]):
                return error(400, f"invalid {field} argument")
        if limit is not None and limit > MAX_LIMIT:
            return error(400, f"maximum limit is {MAX_LIMIT}")
        head = relay.clock.slot()
        if p == "/relay/v1/data/bidtraces/proposer_payload_delivered":
            if slot is not None and cursor is not None:
                return error(400, "cannot specify both slot and cursor")
            if q.get("order_by") not in (None, "value", "-value"):
                return error(400, "invalid order_by argument")
            top = min(head, slot if slot is not None else cursor if cursor is not None else head)
            low = slot if slot is not None else max(0, head - HISTORY)
            items = [relay.delivered(s) for s in range(top, low - 1, -1)]
            items = [i for i in items if i and matches(i, q)]
            if q.get("order_by"):
                items.sort(key=lambda i: int(i["value"]), reverse=q["order_by"] == "-value")
            return json_answer(items[: limit or MAX_LIMIT])
        if p == "/relay/v1/data/bidtraces/builder_blocks_received":
            if not any(q.get(f) for f in ("slot", "block_hash", "block_number", "builder_pubkey")):
                return error(400, "need a query argument: slot, block_hash, block_number or builder_pubkey")
            if slot is not None and cursor is not None:
                return error(400, "cannot specify both slot and cursor")
            slots = [slot] if slot is not None else range(head, max(-1, head - 64), -1)
            items = [relay.received(s, b) for s in slots if 0 <= s <= head for b in range(BUILDERS)]
            items = [i for i in items if matches(i, q)]
            return json_answer(items[: limit or MAX_LIMIT])
        if p == "/relay/v1/data/validator_registration":
            key = (q.get("pubkey") or "").lower()
            if not re.fullmatch(r"0x[0-9a-f]{96}", key):
                return error(400, "invalid pubkey argument")
            for i in range(16):
                if pubkey("proposer", i) == key:
                    return json_answer({
                        "message": {"fee_recipient": fee_recipient(i), "gas_limit": "30000000",
                                    "timestamp": str(relay.clock.slot_time(0) + i), "pubkey": key},
                        "signature": "0x" + (hashlib.sha256(key.encode()).hexdigest() * 3)[:192],
                    })
            return error(404, "no registration found for validator " + key)
        return error(404, f"no route {req.path}")

    return handle


class Hints:
    """MEV-Share's hint stream: every subscriber's queue, bounded; a slow one loses hints."""

    def __init__(self):
        self.lock = threading.Lock()
        self.queues = []

    def publish(self, hint):
        with self.lock:
            for q in self.queues:
                try:
                    q.put_nowait(hint)
                except queue.Full:
                    pass

    def subscribe(self):
        q = queue.Queue(maxsize=1_000)
        with self.lock:
            self.queues.append(q)
        return q

    def leave(self, q):
        with self.lock:
            self.queues.remove(q)


def hint_of(raw_hex):
    """A transaction's hint as MEV-Share shares it by default: hash, recipient, selector."""
    raw = bytes.fromhex(raw_hex[2:])
    tx = {}
    try:
        import rlp

        body = raw[1:] if raw[0] < 0x7F else raw
        fields = rlp.decode(body)
        to_index = {0x02: 5, 0x01: 4}.get(raw[0], 3)
        to, data = fields[to_index], fields[to_index + 2]
        if to:
            tx["to"] = "0x" + to.hex()
        if len(data) >= 4:
            tx["functionSelector"] = "0x" + data[:4].hex()
    except Exception:
        pass
    return {"hash": "0x" + keccak(raw).hex(), "logs": None, "txs": [tx], "mevGasPrice": None, "gasUsed": None}


def forward(url, raw_hex):
    """eth_sendRawTransaction on the execution node; its error is the caller's."""
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "eth_sendRawTransaction", "params": [raw_hex]}).encode()
    req = urllib.request.Request(url, body, {"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=5) as r:
        answer = json.loads(r.read())
    if "error" in answer:
        raise RpcError(answer["error"].get("code", -32000), answer["error"].get("message", "rejected"))
    return answer["result"]


def raw_tx(v):
    if not isinstance(v, str) or not re.fullmatch(r"0x([0-9a-fA-F]{2})+", v):
        raise RpcError(-32602, "invalid params: a transaction is 0x-prefixed hex bytes")
    return v


def builder_app(node_url, hints):
    bundles = {}

    def send_bundle(params):
        b = params[0]
        txs = [raw_tx(t) for t in b["txs"]]
        if not txs:
            raise RpcError(-32602, "invalid params: empty bundle")
        if not re.fullmatch(r"0x[0-9a-fA-F]+", b.get("blockNumber", "")):
            raise RpcError(-32602, "invalid params: blockNumber is a hex quantity")
        hashes = b"".join(keccak(bytes.fromhex(t[2:])) for t in txs)
        bundle_hash = "0x" + keccak(hashes).hex()
        bundles[bundle_hash] = txs
        for t in txs:
            hints.publish(hint_of(t))
            if node_url:
                try:
                    forward(node_url, t)
                except (RpcError, OSError):
                    pass  # a builder drops a bundle that no longer applies, silently
        return {"bundleHash": bundle_hash}

    def mev_send_bundle(params):
        body = params[0]
        txs = [raw_tx(item["tx"]) for item in body["body"] if "tx" in item]
        inclusion = body["inclusion"]
        return send_bundle([{"txs": txs, "blockNumber": inclusion["block"]}])

    def send_raw(params):
        t = raw_tx(params[0])
        hints.publish(hint_of(t))
        return forward(node_url, t) if node_url else "0x" + keccak(bytes.fromhex(t[2:])).hex()

    methods = {
        "eth_sendBundle": send_bundle,
        "mev_sendBundle": mev_send_bundle,
        "eth_cancelBundle": lambda p: None,
        "eth_sendRawTransaction": send_raw,
    }
    return rpc_app(methods)


def private_app(node_url, hints):
    pending = set()

    def send(raw):
        t = raw_tx(raw)
        hints.publish(hint_of(t))
        tx_hash = forward(node_url, t) if node_url else "0x" + keccak(bytes.fromhex(t[2:])).hex()
        pending.add(tx_hash)
        return tx_hash

    methods = {
        "eth_sendPrivateTransaction": lambda p: send(p[0]["tx"]),
        "eth_sendPrivateRawTransaction": lambda p: send(p[0]),
        "eth_sendRawTransaction": lambda p: send(p[0]),
        "eth_cancelPrivateTransaction": lambda p: p[0]["txHash"] in pending,
    }
    return rpc_app(methods)


def rpc_app(methods):
    def handle(req):
        if req.method != "POST":
            return error(405, "POST a JSON-RPC call") if req.path not in ("", "/") else empty()
        body = req.json()
        if body is None:
            return json_answer({"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "parse error"}})
        return json_answer(jsonrpc(body, methods))

    return handle


def mev_share_app(hints, ping_secs=15.0, idle_hint_secs=0.0):
    """`idle_hint_secs` > 0 adds a hint of a made-up transaction when nothing was shared
    for that long, so a demo with no order flow still shows the stream moving."""
    counter = [0]

    def stream():
        q = hints.subscribe()
        try:
            quiet_since = time.time()
            while True:
                try:
                    hint = q.get(timeout=0.5)
                except queue.Empty:
                    now = time.time()
                    if idle_hint_secs and now - quiet_since >= idle_hint_secs:
                        counter[0] += 1
                        hint = {"hash": h32("idle hint", counter[0]), "logs": None,
                                "txs": [{"to": "0x" + "00" * 19 + "01", "functionSelector": "0xa9059cbb", "callData": None}],
                                "mevGasPrice": None, "gasUsed": None}
                    elif now - quiet_since >= ping_secs:
                        quiet_since = now
                        yield b":ping\n\n"
                        continue
                    else:
                        continue
                quiet_since = time.time()
                yield f"data: {json.dumps(hint, separators=(',', ':'))}\n\n".encode()
        finally:
            hints.leave(q)

    def handle(req):
        if req.path in ("", "/") and "text/event-stream" in req.headers.get("accept", ""):
            return sse(stream())
        return error(404, "the event stream is GET / with Accept: text/event-stream")

    return handle


def mev_cache_app(name, hits_per_sec):
    """A Solana MEV-cache host's Prometheus metrics: its hits counter grows with time."""
    started = time.time()

    def handle(req):
        if req.path != "/metrics":
            return empty()
        hits = int((time.time() - started) * hits_per_sec)
        text = (
            "# HELP mev_cache_hits_total Hits served from the cache\n# TYPE mev_cache_hits_total counter\n"
            f'mev_cache_hits_total{{cache="bundles"}} {hits // 2}\n'
            f'mev_cache_hits_total{{cache="tips"}} {hits - hits // 2}\n'
            "# TYPE mev_cache_entries gauge\n"
            f'mev_cache_entries{{upstream="10.9.8.7:8899",host="{name}"}} {500 + hits % 97}\n'
        )
        from stub import Answer

        return Answer(200, text, content_type="text/plain; version=0.0.4")

    return handle
