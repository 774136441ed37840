"""The node alone serving blocks with their receipts, asked as the indexer asks them:
batches of `batch` blocks (`eth_getBlockByNumber(n, true)` + `eth_getBlockReceipts(n)`),
`inflight` batches at once on as many keep-alive connections, every answer read whole.

    python3 bench/node_blocks.py PORT HEAD BATCH INFLIGHT   -> seconds for blocks 0..HEAD
"""
import http.client
import json
import sys
import threading
import time

port, head, batch, inflight = (int(a) for a in sys.argv[1:5])
starts = list(range(0, head + 1, batch))
lock = threading.Lock()


def worker():
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    while True:
        with lock:
            if not starts:
                return
            first = starts.pop(0)
        calls = []
        for n in range(first, min(first + batch, head + 1)):
            calls.append({"jsonrpc": "2.0", "id": len(calls), "method": "eth_getBlockByNumber", "params": [hex(n), True]})
            calls.append({"jsonrpc": "2.0", "id": len(calls), "method": "eth_getBlockReceipts", "params": [hex(n)]})
        conn.request("POST", "/", json.dumps(calls), {"content-type": "application/json"})
        answer = conn.getresponse().read()
        assert answer.count(b'"result"') == len(calls), "the node did not answer every call"


began = time.time()
threads = [threading.Thread(target=worker) for _ in range(inflight)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(f"{time.time() - began:.3f}")
