"""web3.py against chainedge's /rpc/eth features (issue 21): the response cache across a
reorg and a dead node, hedged reads past a frozen node, per-key usage matching the calls.

Usage: web3_features.py cache EDGE_URL KEY NODE_URL NODE_PID METRICS_URL
           a block read through the edge; anvil_reorg on the node; once the edge has seen
           the reorg (its metric), every read is the new branch's; then the node is killed
           and a finalized block is still served (from the cache).
       web3_features.py hedge EDGE_URL KEY SLOW_PID SECONDS
           the slow node frozen (SIGSTOP) for SECONDS under steady reads: no error, every
           answer fast; the node is resumed at the end.
       web3_features.py usage EDGE_URL KEY KEY_ID ADMIN_URL ADMIN_TOKEN
           calls counted by the client (including failed ones) equal the key's stored usage.
Prints one JSON line of what it measured, then "... passed"."""
import json
import os
import signal
import statistics
import sys
import time
import urllib.request

from web3 import Web3
from web3.types import RPCEndpoint

ACCOUNT = "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266"
OTHER = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8"


def edge(url, key):
    return Web3(Web3.HTTPProvider(url, request_kwargs={"headers": {"x-token": key}, "timeout": 10}))


def metric(url, line_start):
    text = urllib.request.urlopen(url, timeout=5).read().decode()
    for line in text.splitlines():
        if line.startswith(line_start):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def wait(what, f, seconds=15):
    until = time.time() + seconds
    while not f():
        assert time.time() < until, f"timed out waiting for {what}"
        time.sleep(0.05)


def cache(url, key, node_url, node_pid, metrics_url):
    w3 = edge(url, key)
    node = Web3(Web3.HTTPProvider(node_url))
    reorgs = 'chainedge_cache_reorgs_total{pool="eth_el"}'
    finalized = 'chainedge_cache_finalized_block{pool="eth_el"}'
    # Reads that start the tracker, then a finalized block and a recent one, cached.
    w3.eth.get_block(16)
    wait("the finalized block", lambda: metric(metrics_url, finalized) >= 36)
    final_block = w3.eth.get_block(16)
    before = w3.eth.get_block(98)
    assert w3.eth.get_block(98)["hash"] == before["hash"]
    seen = metric(metrics_url, reorgs)
    # Reorg the last three blocks: block 98 gets a transaction it did not have.
    resp = node.provider.make_request(
        RPCEndpoint("anvil_reorg"), [3, [[{"from": ACCOUNT, "to": OTHER, "value": "0x1"}, 0]]]
    )
    assert "error" not in resp, resp
    now = node.eth.get_block(98)
    assert now["hash"] != before["hash"], "anvil reorged block 98"
    wait("the edge to see the reorg", lambda: metric(metrics_url, reorgs) > seen)
    for _ in range(20):
        got = w3.eth.get_block(98)
        assert got["hash"] == now["hash"], "an answer from the orphaned branch was served"
    # The node dies: the finalized block is still served, from the cache.
    os.kill(node_pid, signal.SIGKILL)
    wait("the node to be gone", lambda: not alive(node))
    for _ in range(5):
        assert w3.eth.get_block(16) == final_block
    print(json.dumps({"orphaned_hash": before["hash"].hex(), "served_hash": now["hash"].hex()}))
    print("web3 cache checks passed")


def alive(w3):
    try:
        w3.eth.block_number
        return True
    except Exception:
        return False


def hedge(url, key, slow_pid, seconds):
    w3 = edge(url, key)
    latencies, errors = [], 0
    os.kill(slow_pid, signal.SIGSTOP)
    try:
        until = time.time() + seconds
        while time.time() < until:
            t = time.perf_counter()
            try:
                # `pending`: never cached, so every read goes to a node.
                assert w3.eth.get_balance(ACCOUNT, "pending") > 0
            except Exception as e:  # counted, never expected
                errors += 1
                print("error:", e, file=sys.stderr)
            latencies.append(time.perf_counter() - t)
    finally:
        os.kill(slow_pid, signal.SIGCONT)
    latencies.sort()
    p50 = statistics.median(latencies) * 1000
    p99 = latencies[int(len(latencies) * 0.99) - 1] * 1000
    slowest = latencies[-1] * 1000
    print(json.dumps({"reads": len(latencies), "errors": errors, "p50_ms": round(p50, 2),
                      "p99_ms": round(p99, 2), "slowest_ms": round(slowest, 1)}))
    assert errors == 0, errors
    assert slowest < 1000, f"an answer took {slowest:.0f} ms"
    print("web3 hedge checks passed")


class Counting(Web3.HTTPProvider):
    """An HTTP provider that counts the JSON-RPC calls it sends (a batch: each call)."""

    calls = 0

    def make_request(self, method, params):
        Counting.calls += 1
        return super().make_request(method, params)

    def make_batch_request(self, requests):
        Counting.calls += len(requests)
        return super().make_batch_request(requests)


def usage(url, key, key_id, admin_url, admin_token):
    # No provider-level retries: each call the client makes is sent once (web3.py retries
    # a refused call up to 5 times by default, below `make_request`).
    w3 = Web3(Counting(url, request_kwargs={"headers": {"x-token": key}, "timeout": 10},
                       exception_retry_configuration=None))
    failed = 0
    w3.eth.chain_id
    w3.eth.block_number
    w3.eth.get_balance(OTHER)
    w3.eth.get_block(1)
    w3.eth.get_transaction_count(ACCOUNT)
    with w3.batch_requests() as batch:
        batch.add(w3.eth.get_block_number())
        batch.add(w3.eth.get_balance(ACCOUNT))
        batch.execute()
    # Calls that fail: a method the product refuses, and a node's own error.
    for method, params in [("admin_peers", []), ("eth_getBlockByHash", ["0x12", False])]:
        try:
            resp = w3.provider.make_request(RPCEndpoint(method), params)
            if "error" in resp:
                failed += 1
        except Exception:
            failed += 1
    sent = Counting.calls
    want = {"calls": sent, "errors": failed, "rate_limited": 0}
    got = {}

    def stored():
        nonlocal got
        req = urllib.request.Request(f"{admin_url}?key={key_id}&step=day",
                                     headers={"x-admin-token": admin_token})
        rows = json.load(urllib.request.urlopen(req, timeout=5))["rows"]
        got = {f: sum(r[f] for r in rows) for f in ["calls", "errors", "rate_limited", "compute_units"]}
        return {f: got[f] for f in want} == want

    try:
        wait(f"usage to reach the store ({want})", stored)
    except AssertionError as e:
        raise AssertionError(f"{e}; stored {got}") from None
    assert got["compute_units"] > 0, got
    print(json.dumps({"client_calls": sent, "client_errors": failed, "stored": got}))
    print("web3 usage checks passed")


mode = sys.argv[1]
if mode == "cache":
    cache(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]), sys.argv[6])
elif mode == "hedge":
    hedge(sys.argv[2], sys.argv[3], int(sys.argv[4]), float(sys.argv[5]))
elif mode == "usage":
    usage(*sys.argv[2:7])
else:
    sys.exit(f"unknown mode {mode}")
