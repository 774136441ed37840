#!/usr/bin/env python3
"""Start stand-ins for the upstreams no real node serves here, in one process: what the
demo runs beside its anvil and LiteSVM nodes, and what the tests start one at a time.

    fleet.py --port beacon=18551 --port relay=18554 ... [--node el-1=http://127.0.0.1:18545]
             [--slot-secs 2] [--mev-share-idle-secs 3]

Stand-ins, by the name given to `--port`:
  beacon                  beacon node REST + events + metrics (beacon.py)
  heimdall-lcd            heimdall-v2 Cosmos LCD (heimdall.py)
  heimdall-rpc            heimdall-v2 CometBFT RPC + metrics
  heimdall-v1-lcd         heimdall v1's REST server, on the same chain (heimdall.py)
  relay                   relay data API (mev.py)
  builder, private-rpc    bundle and private-transaction JSON-RPC; forward to `--node el-1`
  mev-share               MEV-Share hint stream (hints of what builder / private-rpc took)
  mev-cache-1, mev-cache-2  Solana MEV-cache hosts' metrics
  front-el-1, front-el-2, front-bor
                          geth's admin_* and metrics in front of `--node el-1` / `el-2` / `bor`
  webhooks                an HTTPS webhook receiver (`--tls CERT,KEY`), logging to `--webhook-log`

Prints `standins: up <name>=<port> ...` once every one listens; runs until killed.
Every stand-in also takes `POST /standin/mode {"fail": 500, "stall_ms": 0}`.
"""

import argparse
import signal
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import beacon  # noqa: E402
import heimdall  # noqa: E402
import mev  # noqa: E402
import node_front  # noqa: E402
import webhooks  # noqa: E402
from stub import Clock, serve  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", action="append", default=[], help="NAME=PORT")
    ap.add_argument("--node", action="append", default=[], help="el-1|el-2|bor=URL")
    ap.add_argument("--slot-secs", type=float, default=2.0)
    ap.add_argument("--first-slot", type=int, default=9_000_000)
    ap.add_argument("--mev-share-ping-secs", type=float, default=15.0)
    ap.add_argument("--mev-share-idle-secs", type=float, default=0.0)
    ap.add_argument("--tls", help="CERT,KEY for the webhooks receiver")
    ap.add_argument("--webhook-log", default="webhooks.jsonl")
    args = ap.parse_args()
    ports = dict(p.split("=", 1) for p in args.port)
    nodes = dict(n.split("=", 1) for n in args.node)
    now = time.time()
    clock = Clock(now, args.slot_secs, args.first_slot)
    hints = mev.Hints()
    fronts = [(n, int(p)) for n, p in ports.items() if n.startswith("front-")]
    shared_heimdall = heimdall.Heimdall(now)
    # Each stand-in's app, by the name given to --port (a front also needs its own name).
    apps = {
        "beacon": lambda name: beacon.app(beacon.Beacon(clock, el_url=nodes.get("el-1"))),
        "heimdall-lcd": lambda name: heimdall.lcd(shared_heimdall),
        "heimdall-rpc": lambda name: heimdall.cometbft(shared_heimdall),
        "heimdall-v1-lcd": lambda name: heimdall.lcd_v1(shared_heimdall),
        "relay": lambda name: mev.relay_app(mev.Relay(clock, block_offset=args.first_slot)),
        "builder": lambda name: mev.builder_app(nodes.get("el-1"), hints),
        "private-rpc": lambda name: mev.private_app(nodes.get("el-1"), hints),
        "mev-share": lambda name: mev.mev_share_app(hints, args.mev_share_ping_secs, args.mev_share_idle_secs),
        "mev-cache-1": lambda name: mev.mev_cache_app(name, 900),
        "mev-cache-2": lambda name: mev.mev_cache_app(name, 350),
        "webhooks": lambda name: webhooks.app(args.webhook_log),
    }
    for side in ("el-1", "el-2", "bor"):
        apps[f"front-{side}"] = lambda name: node_front.app(
            node_front.Front(name, int(ports[name]), nodes[name.removeprefix("front-")], fronts))
    for name, port in ports.items():
        if name not in apps:
            sys.exit(f"fleet.py: no stand-in named {name}")
        tls = tuple(args.tls.split(",")) if name == "webhooks" and args.tls else None
        serve(apps[name](name), int(port), tls=tls)
    print("standins: up " + " ".join(f"{n}={p}" for n, p in ports.items()), flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    stop.wait()


if __name__ == "__main__":
    main()
