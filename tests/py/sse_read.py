"""Read an SSE stream through chainedge with a real SSE client (sseclient-py).
Usage: sse_read.py URL HEADER VALUE COUNT -> one JSON line per event with arrival time."""
import json
import sys
import time

import requests
import sseclient

url, header, value, count = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
start = time.time()
resp = requests.get(url, headers={header: value, "Accept": "text/event-stream"}, stream=True, timeout=10)
assert resp.status_code == 200, resp.status_code
assert resp.headers["Content-Type"].startswith("text/event-stream"), resp.headers
assert "Content-Encoding" not in resp.headers, resp.headers
client = sseclient.SSEClient(resp)
seen = 0
for event in client.events():
    print(json.dumps({"event": event.event, "data": json.loads(event.data), "t": round(time.time() - start, 3)}), flush=True)
    seen += 1
    if seen == count:
        break
resp.close()
