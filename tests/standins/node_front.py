"""What anvil lacks and a geth node has, in front of anvil: geth's `admin_nodeInfo` and
`admin_peers` (the peer graph's source) and its Prometheus metrics at
`/debug/metrics/prometheus`; every other JSON-RPC call goes to the anvil behind it.

The fronts of one fleet peer with each other (a front's `admin_peers` lists the other
fronts, by node id, and a few outside peers), so the peer graph has a known shape.
"""

import hashlib
import json
import time
import urllib.error
import urllib.request

from stub import Answer, error, json_answer


def node_id(name):
    return hashlib.sha256(f"node {name}".encode()).hexdigest() * 2


def enode(name, port):
    return f"enode://{node_id(name)}@127.0.0.1:{port}"


def node_info(name, port):
    return {
        "id": hashlib.sha256(node_id(name).encode()).hexdigest(),
        "name": f"Geth/v1.14.12-stable/linux-amd64/go1.23.4 ({name})",
        "enode": enode(name, port),
        "enr": "enr:-" + hashlib.sha256(name.encode()).hexdigest(),
        "ip": "127.0.0.1",
        "ports": {"discovery": port, "listener": port},
        "listenAddr": f"[::]:{port}",
        "protocols": {"eth": {"network": 1, "difficulty": 0, "genesis": "0x" + "00" * 32, "config": {"chainId": 1}, "head": "0x" + "00" * 32}, "snap": {}},
    }


def peer(name, port, inbound):
    info = node_info(name, port)
    return {
        "enode": info["enode"],
        "id": info["id"],
        "name": info["name"],
        "caps": ["eth/68", "snap/1"],
        "network": {
            "localAddress": "127.0.0.1:30303",
            "remoteAddress": f"127.0.0.1:{port}",
            "inbound": inbound,
            "trusted": False,
            "static": not inbound,
        },
        "protocols": {"eth": {"version": 68}, "snap": {"version": 1}},
    }


class Front:
    def __init__(self, name, port, node_url, fleet):
        """`fleet`: (name, port) of every front, this one included."""
        self.name, self.port, self.node_url, self.fleet = name, port, node_url, fleet
        self.started = time.time()
        self.calls = 0

    def peers(self):
        others = [(n, p) for n, p in self.fleet if n != self.name]
        outside = [(f"{self.name}-outside-{i}", 30400 + i) for i in range(3)]
        return [peer(n, p, inbound=i % 2 == 1) for i, (n, p) in enumerate(others + outside)]

    def answer(self, call):
        method = call.get("method") if isinstance(call, dict) else None
        if method == "admin_nodeInfo":
            return {"jsonrpc": "2.0", "id": call.get("id"), "result": node_info(self.name, self.port)}
        if method == "admin_peers":
            return {"jsonrpc": "2.0", "id": call.get("id"), "result": self.peers()}
        return None

    def metrics(self):
        up = time.time() - self.started
        lines = [
            "# TYPE chain_head_block gauge",
            f"chain_head_block {self.head()}",
            "# TYPE p2p_peers gauge",
            f"p2p_peers {len(self.peers())}",
            "# TYPE rpc_requests counter",
            f"rpc_requests {self.calls}",
            "# TYPE txpool_pending gauge",
            "txpool_pending 0",
            "# TYPE system_cpu_sysload gauge",
            f'system_cpu_sysload{{instance="10.0.3.7:6060",host="{self.name}.internal"}} {up % 7:.2f}',
        ]
        return "\n".join(lines) + "\n"

    def head(self):
        try:
            out = self.forward(b'{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber","params":[]}')
            return int(json.loads(out)["result"], 16)
        except (OSError, ValueError, KeyError):
            return 0

    def forward(self, body):
        req = urllib.request.Request(self.node_url, body, {"content-type": "application/json"})
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.read()


def app(front):
    def handle(req):
        if req.method == "GET" and req.path == "/debug/metrics/prometheus":
            return Answer(200, front.metrics(), content_type="text/plain; version=0.0.4")
        if req.method != "POST":
            return error(405, "POST a JSON-RPC call")
        front.calls += 1
        body = req.json()
        calls = body if isinstance(body, list) else [body]
        mine = [front.answer(c) for c in calls]
        if all(a is not None for a in mine):
            return json_answer(mine if isinstance(body, list) else mine[0])
        if any(a is not None for a in mine):
            rest = [c for c, a in zip(calls, mine) if a is None]
            theirs = json.loads(front.forward(json.dumps(rest).encode()))
            it = iter(theirs)
            merged = [a if a is not None else next(it) for a in mine]
            return json_answer(merged)
        try:
            return Answer(200, front.forward(req.body))
        except urllib.error.HTTPError as e:
            return Answer(e.code, e.read())
        except OSError as e:
            return error(502, f"node unreachable: {e}")

    return handle
