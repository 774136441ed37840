"""An HTTPS webhook receiver, as a customer's endpoint would be: it answers every POST
with 200 and appends what it got (path, signature headers, body) to a JSON-lines file,
so the demo shows watchlist and transaction pushes arriving, signed.
"""

import json
import threading

from stub import json_answer


def app(log_path):
    lock = threading.Lock()

    def handle(req):
        if req.method != "POST":
            return json_answer({"receiver": "chainedge demo webhooks", "log": str(log_path)})
        record = {
            "path": req.path,
            "headers": {k: v for k, v in req.headers.items() if k.startswith("x-") or k == "content-type"},
            "body": req.json(),
        }
        with lock, open(log_path, "a") as f:
            f.write(json.dumps(record, separators=(",", ":")) + "\n")
        return json_answer({"ok": True})

    return handle

