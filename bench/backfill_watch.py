"""Time an edge's backfill from the first block it is seen to have committed until
`chainedge_index_head` reaches HEAD, and the CPU the edge and the node used meanwhile.

    python3 bench/backfill_watch.py METRICS_PORT HEAD EDGE_PID NODE_PID [STORE_PID]
        -> "<blocks> <seconds> <edge CPU seconds> <node CPU seconds> <store CPU seconds>"

STORE_PID is a PostgreSQL postmaster: its CPU and its children's (the backends, the WAL
writer, the checkpointer) are the store's; without it (SQLite, inside the edge) 0.

One process polling over one keep-alive connection: a shell loop of curl, awk and date
every 20 ms took 0.4 of a core on this box (forks and execs), CPU the node alone row
never had to share. Every 10 ms until the first commit is seen; after it, the wait is
half the time the pace so far gives for the blocks left (at most 250 ms, at least 10
ms), so the end is still seen within 10 ms but a five-second backfill takes some 40 polls
instead of 500 (each a Prometheus page the edge renders: 2-3% of the box's CPU taken
from the node, measured with `perf record -a`).
"""
import http.client
import os
import re
import sys
import time

port, head, edge, node = (int(a) for a in sys.argv[1:5])
store = int(sys.argv[5]) if len(sys.argv) > 5 else None
HEAD_LINE = re.compile(rb'^chainedge_index_head\{chain="eth"\} (\d+)', re.M)
TICK = os.sysconf("SC_CLK_TCK")


def cpu(pid):
    """User + system CPU seconds of a process, all its threads."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def cpu_tree(pid):
    """CPU seconds of a process and its children now alive (0 without one)."""
    if pid is None:
        return 0.0
    with open(f"/proc/{pid}/task/{pid}/children") as f:
        children = [int(c) for c in f.read().split()]
    total = cpu(pid)
    for c in children:
        try:
            total += cpu(c)
        except OSError:  # exited since listed
            pass
    return total


def indexed(conn):
    conn.request("GET", "/metrics")
    m = HEAD_LINE.search(conn.getresponse().read())
    return int(m.group(1)) if m else None


conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
first = None
while True:
    if not os.path.exists(f"/proc/{edge}"):
        sys.exit("the edge exited before it indexed the chain")
    try:
        h = indexed(conn)
    except (OSError, http.client.HTTPException):
        conn.close()
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        h = None
    now = time.monotonic()
    if h is not None and first is None:
        first = (h, now, cpu(edge), cpu(node), cpu_tree(store))
    if h == head:
        break
    wait = 0.01
    if first is not None and h is not None and h > first[0]:
        pace = (h - first[0]) / (now - first[1])
        wait = min(0.25, max(0.01, (head - h) / pace / 2))
    time.sleep(wait)
blocks, began, edge0, node0, store0 = first
store_cpu = cpu_tree(store) - store0
print(f"{head - blocks} {now - began:.3f} {cpu(edge) - edge0:.2f} {cpu(node) - node0:.2f} {store_cpu:.2f}")
