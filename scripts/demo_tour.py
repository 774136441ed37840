#!/usr/bin/env python3
"""Walk every SPEC item on a running `make demo` and check each answers with data:
the expected status (never a 5xx) and the fields SPEC names. Exit status 1 on any miss.

    .venv/bin/python scripts/demo_tour.py [EDGE_URL] [DEMO_DIR] [NODE_PORT]
    (defaults: http://127.0.0.1:8080 .demo 18545, as scripts/demo.sh)

A check that misses is tried again for up to `--patience` seconds (40): right after
the demo starts, the indexer, the stake snapshot and the MEV-cache sampler are still
taking their first rounds. Uses fresh wallets only (funded on the local nodes).
"""

import base64
import http.cookiejar
import json
import re
import socket
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests/py"))

from eth_account import Account  # noqa: E402
from eth_account.messages import encode_defunct  # noqa: E402

args = [a for a in sys.argv[1:] if not a.startswith("--")]
EDGE = args[0] if args else "http://127.0.0.1:8080"
DEMO = Path(args[1] if len(args) > 1 else ROOT / ".demo")
NODE = int(args[2]) if len(args) > 2 else 18545
PATIENCE = float(next((a.split("=")[1] for a in sys.argv if a.startswith("--patience=")), 40))
KEYS = json.loads((DEMO / "keys.json").read_text())
ALICE = "0x00000000000000000000000000000000000a11ce"
RECEIVER = f"https://localhost:{NODE + 18}"
ALICE_CHECKSUMMED = "0x00000000000000000000000000000000000A11cE"


class Client:
    """Keeps cookies, like the console's browser; sends the CSRF header on writes."""

    def __init__(self):
        self.jar = http.cookiejar.CookieJar()
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.jar))

    def call(self, method, path, body=None, headers=None, raw=None):
        data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
        req = urllib.request.Request(EDGE + path, data=data, method=method)
        req.add_header("Content-Type", "application/json")
        csrf = next((c.value for c in self.jar if c.name == "nl_csrf"), None)
        if csrf and method not in ("GET", "HEAD"):
            req.add_header("X-CSRF-Token", csrf)
        for k, v in (headers or {}).items():
            req.add_header(k, v)
        try:
            with self.opener.open(req, timeout=15) as r:
                return r.status, r.read(), dict(r.headers)
        except urllib.error.HTTPError as e:
            return e.code, e.read(), dict(e.headers)


def node(port, method, params):
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}", body, {"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.load(r).get("result")


class Tour:
    def __init__(self):
        self.client = Client()
        self.missed = []
        self.seen = 0

    def check(self, name, method, path, plan="scale", body=None, want=200, fields=(), raw=None, headers=None, client=None):
        """One item: `want` status and each of `fields` (dotted, on the JSON answer)."""
        hdrs = dict(headers or {})
        if plan:
            hdrs["x-token"] = KEYS[plan]
        deadline = time.time() + PATIENCE
        while True:
            status, data, resp_headers = (client or self.client).call(method, path, body, hdrs, raw)
            problem = self.judge(status, data, want, fields)
            if not problem or time.time() > deadline:
                break
            time.sleep(1)
        self.record(name, f"{status} {method} {path[:90]}", problem)
        try:
            return json.loads(data)
        except ValueError:
            return data

    def anchored(self, name, path, body, plan="scale"):
        """One proven read: answered by proof against a block the beacon light client
        trusts (`x-chainedge-anchor: ...; by=light-client`; it syncs in a few slots)."""
        hdrs = {"x-token": KEYS[plan]}
        deadline = time.time() + PATIENCE
        while True:
            status, data, got = self.client.call("POST", path, body, hdrs)
            got = {k.lower(): v for k, v in got.items()}
            anchor = got.get("x-chainedge-anchor", "")
            problem = self.judge(status, data, 200, ["result"])
            if not problem and (got.get("x-chainedge-verified") != "proof" or not anchor.endswith("by=light-client")):
                problem = f"verified {got.get('x-chainedge-verified')!r}, anchor {anchor!r}"
            if not problem or time.time() > deadline:
                break
            time.sleep(1)
        self.record(name, f"{status} POST {path} {anchor}", problem)

    def record(self, name, what, problem):
        """One item's line: ok or MISS, what was asked, and what was wrong."""
        self.seen += 1
        print(f"{'ok  ' if not problem else 'MISS'} {what}  ({name}){'  ' + problem if problem else ''}", flush=True)
        if problem:
            self.missed.append(name)

    @staticmethod
    def judge(status, data, want, fields):
        if status >= 500 or status != want:
            return f"status {status}, want {want}: {data[:160]!r}"
        if not fields:
            return ""
        try:
            value = json.loads(data)
        except ValueError:
            return "not JSON"
        for f in fields:
            v = value
            for part in f.split("."):
                v = v[int(part)] if isinstance(v, list) and part.isdigit() and int(part) < len(v) else (v.get(part) if isinstance(v, dict) else None)
            if v in (None, [], {}):
                return f"{f} is empty"
        return ""

    def stream(self, name, path, plan="scale", headers=None, want_events=1):
        """SSE: the first event (`data:` line) within the patience."""
        hdrs = {"Accept": "text/event-stream", **(headers or {})}
        if plan:
            hdrs["x-token"] = KEYS[plan]
        problem = first_event(path, hdrs)
        self.record(name, f"SSE {path}", problem)

    def delivered(self, name, path, needle, poke=None):
        """A push reached the demo's HTTPS receiver: a signed POST to `path` naming `needle`
        (`poke`, when given, makes the change again every few seconds until it does)."""
        deadline, problem = time.time() + PATIENCE, "nothing arrived"
        log = DEMO / "webhooks.jsonl"
        poked = 0.0
        while time.time() < deadline:
            if poke and time.time() - poked > 4:
                poke()
                poked = time.time()
            for line in (log.read_text().splitlines() if log.exists() else []):
                hit = json.loads(line)
                if hit["path"] == path and needle in json.dumps(hit["body"]):
                    signed = [h for h in hit["headers"] if "signature" in h]
                    problem = "" if signed else f"unsigned: {sorted(hit['headers'])}"
                    break
            if problem != "nothing arrived":
                break
            time.sleep(0.5)
        self.record(name, f"HOOK {path}", problem)

    def websocket(self, name, path, plan="scale", token=None, send=None, want_message=True):
        from websockets.sync.client import connect

        url = EDGE.replace("http", "ws", 1) + path
        hdrs = {"x-token": KEYS[plan]} if plan else {}
        if token:
            hdrs = {"Authorization": f"Bearer {token}"}
        problem = ""
        try:
            with connect(url, additional_headers=hdrs, open_timeout=10) as ws:
                if send:
                    ws.send(json.dumps(send))
                if want_message:
                    msg = ws.recv(timeout=PATIENCE)
                    if not msg:
                        problem = "empty message"
        except Exception as e:  # a refused upgrade or no message in time
            problem = f"{type(e).__name__}: {str(e)[:160]}"
        self.record(name, f"WS  {path}", problem)


def first_event(path, headers):
    host, port = EDGE.split("//")[1].split(":")
    sock = socket.create_connection((host, int(port)), timeout=PATIENCE)
    lines = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: {host}\r\n{lines}\r\n".encode())
    buf, end = b"", time.time() + PATIENCE
    try:
        while time.time() < end:
            chunk = sock.recv(65536)
            if not chunk:
                break
            buf += chunk
            if not buf.startswith(b"HTTP/1.1 200"):
                if b"\r\n\r\n" in buf:
                    return buf.split(b"\r\n")[0].decode()
                continue
            if b"\ndata:" in buf:
                return ""
        return "no event in time"
    except OSError as e:
        return str(e)
    finally:
        sock.close()


def sign_in(tour):
    """An EVM wallet signs in (EIP-4361) and an email address signs in with the code
    from the demo's outbox: both console sign-ins SPEC names."""
    acct = Account.create()
    ch = tour.check("wallet challenge", "POST", "/v1/auth/wallet/evm/challenge", None, {"address": acct.address}, fields=["message", "nonce"])
    sig = Account.sign_message(encode_defunct(text=ch["message"]), acct.key).signature.hex()
    sig = sig if sig.startswith("0x") else "0x" + sig
    tour.check("wallet verify", "POST", "/v1/auth/wallet/evm/verify", None, {"message": ch["message"], "signature": sig}, fields=["user.id"])
    email = f"tour-{int(time.time() * 1000)}@example.org"
    mail = Client()
    tour.check("email start", "POST", "/v1/auth/email/start", None, {"email": email}, want=202, client=mail)
    code = None
    for _ in range(50):
        for line in (DEMO / "outbox.jsonl").read_text().splitlines()[::-1]:
            m = json.loads(line)
            found = re.search(r"code is (\d{6})", m.get("body", ""))
            if m.get("to") == email and found:
                code = found.group(1)
                break
        if code:
            break
        time.sleep(0.1)
    tour.check("email verify", "POST", "/v1/auth/email/verify", None, {"email": email, "code": code or "000000"}, fields=["user.id"], client=mail)


def console(tour):
    tour.check("me", "GET", "/v1/auth/me", None, fields=["user.id", "default_key", "plan.name"])
    key = tour.check("create key", "POST", "/v1/keys", None, {"name": "tour", "scopes": ["rpc:read"]}, want=201, fields=["id", "raw"])
    kid = key.get("id", "none") if isinstance(key, dict) else "none"
    tour.check("list keys", "GET", "/v1/keys", None, fields=["keys"])
    rotated = tour.check("rotate key", "POST", f"/v1/keys/{kid}/rotate", None, {}, fields=["id", "raw"])
    kid = rotated.get("id", "none") if isinstance(rotated, dict) else "none"
    tour.check("key usage", "GET", f"/v1/keys/{kid}/usage", None)
    tour.check("key transactions", "GET", f"/v1/keys/{kid}/txs", None)
    tour.check("revoke key", "DELETE", f"/v1/keys/{kid}", None, want=204)
    limits = {"allowed_methods": ["eth_blockNumber"], "max_rps": 5}
    narrow = tour.check("restricted key", "POST", "/v1/keys", None, {"name": "narrow", "restrictions": limits}, want=201, fields=["id", "raw", "restrictions.allowed_methods"])
    chain_id = {"jsonrpc": "2.0", "id": 1, "method": "eth_chainId", "params": []}
    tour.check("restriction enforced", "POST", "/rpc/eth", None, chain_id, want=403, fields=["error.data.restriction"], headers={"x-token": narrow["raw"]})
    tour.check("key request log", "GET", f"/v1/keys/{narrow['id']}/requests", None, fields=["requests.0.error"])
    tour.check("change restrictions", "PATCH", f"/v1/keys/{narrow['id']}", None, {"restrictions": {}}, fields=["id"])
    tour.check("plans", "GET", "/v1/plans", None, fields=["plans.0.name"])
    tour.check("plan request", "GET", "/v1/plan/request", None)
    tour.check("account usage", "GET", "/v1/usage?window=1h", None, fields=["totals.calls", "latency_ms", "by_method"])
    mate = f"mate-{int(time.time() * 1000)}@example.org"
    tour.check("team invite", "POST", "/v1/team/invites", None, {"email": mate, "role": "viewer"}, want=201, fields=["id", "expires_at"])
    tour.check("team", "GET", "/v1/team", None, fields=["members.0.role", "invites.0.email"])
    tour.check("audit log", "GET", "/v1/audit", None, fields=["events.0.action"])
    tour.check("sign-in ways", "GET", "/v1/auth/providers", None, fields=["wallet_evm"])
    tour.check("console page", "GET", "/console/", None)
    tour.check("openapi", "GET", "/openapi.json", None, fields=["paths"])
    tour.check("logout", "POST", "/v1/auth/logout", None, {}, want=204)


def ethereum(tour):
    rpc = {"jsonrpc": "2.0", "id": 1, "method": "eth_blockNumber", "params": []}
    tour.check("JSON-RPC", "POST", "/rpc/eth", "free", rpc, fields=["result"])
    balance = {"jsonrpc": "2.0", "id": 1, "method": "eth_getBalance",
               "params": ["0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266", "latest"]}
    tour.anchored("proven read, rooted by the beacon light client", "/rpc/eth", balance)
    tour.websocket("JSON-RPC over WebSocket", "/rpc/eth", "free", send=rpc)
    tour.check("balance", "GET", f"/v1/eth/wallet/{ALICE}/balance", "free", fields=["wei", "block"])
    tour.check("ERC-20 balances", "GET", f"/v1/eth/wallet/{ALICE}/tokens", "basic", fields=["tokens"])
    tour.check("NFTs", "GET", f"/v1/eth/wallet/{ALICE}/nfts", "basic", fields=["items"])
    tour.check("history", "GET", f"/v1/eth/wallet/{ALICE}/history?limit=5", "basic", fields=["items"])
    tour.check("mempool snapshot", "GET", "/v1/eth/mempool/snapshot", "pro")
    tour.check("mempool stats", "GET", "/v1/eth/mempool/stats", "pro")
    tour.check("validator", "GET", "/v1/eth/intel/validator/1", "business", fields=["pubkey", "status"])
    tour.check("validator series", "GET", "/v1/eth/intel/validator/series", "business")
    tour.check("peer graph", "GET", "/v1/eth/intel/peer-graph", "enterprise", fields=["edges.0.from_host"])
    tour.check("peer graph host", "GET", "/v1/eth/intel/peer-graph/host/el-geth-1", "enterprise", fields=["peers"])
    tour.check("EL metrics mirror", "GET", "/v1/eth/metrics/el-geth-1/el-geth", "scale")
    tour.check("CL metrics mirror", "GET", "/v1/eth/metrics/cl-lighthouse-1/cl-lighthouse", "scale")
    tour.check("beacon proxy", "GET", "/rpc/eth-beacon/eth/v1/node/syncing", "basic", fields=["data.head_slot"])
    tour.stream("beacon events", "/rpc/eth-beacon/eth/v1/events?topics=head", "basic")
    tour.check("relay data", "GET", "/v1/eth/mev/relay/relay/v1/data/bidtraces/proposer_payload_delivered?limit=3", "pro", fields=["0.slot"])
    tour.stream("MEV-Share hints", "/sse/eth-mev-share", None, headers={"Authorization": f"Bearer {KEYS['scale']}"})
    tour.check("mesh health", "GET", "/v1/eth/mesh/health", None, fields=["blocks"])
    tour.check("mesh hosts", "GET", "/v1/eth/mesh/hosts", None)
    tour.check("per-host JSON-RPC", "POST", "/v1/eth/mesh/rpc/el-anvil-1", "enterprise", rpc, fields=["result"])

    # A fresh wallet, funded on both EL nodes, sends for real through each way in.
    acct = Account.create()
    for port in (NODE, NODE + 1):
        node(port, "anvil_setBalance", [acct.address, hex(10**20)])
    chain = node(NODE, "eth_chainId", [])
    fees = {"maxFeePerGas": 30 * 10**9, "maxPriorityFeePerGas": 10**9, "gas": 21_000, "chainId": int(chain, 16)}

    def signed(nonce):
        tx = {"to": ALICE_CHECKSUMMED, "value": 1, "nonce": nonce, "type": 2, **fees}
        raw = acct.sign_transaction(tx).raw_transaction.hex()
        return raw if raw.startswith("0x") else "0x" + raw

    hook = tour.check("transaction webhook", "POST", "/v1/tx/hooks", "scale", {"callback_url": f"{RECEIVER}/tx-hooks"}, want=201, fields=["id", "signing_secret"])
    sent = tour.check("raw sender", "POST", "/v1/eth/sender/raw", "scale", {"raw_tx": signed(0)}, fields=["tx_hash"])
    tx_hash = sent.get("tx_hash", "0x" + "00" * 32) if isinstance(sent, dict) else "0x" + "00" * 32
    tour.check("transaction status", "GET", f"/v1/eth/tx/{tx_hash}", "scale", fields=["status"])
    tour.check("bundle", "POST", "/v1/eth/sender/bundle", "scale", {"txs": [signed(1)], "block_number": int(node(NODE, "eth_blockNumber", []), 16) + 1}, fields=["bundle_hash"])
    private = {"jsonrpc": "2.0", "id": 1, "method": "eth_sendPrivateTransaction", "params": [{"tx": signed(2)}]}
    tour.check("private RPC", "POST", "/v1/eth/mev/private-rpc", "scale", private, fields=["result"])
    builder = {"jsonrpc": "2.0", "id": 1, "method": "eth_sendBundle", "params": [{"txs": [signed(3)], "blockNumber": "0xffffff"}]}
    tour.check("builder RPC", "POST", "/v1/eth/mev/builder", "scale", builder, fields=["result.bundleHash"])
    tour.websocket("transaction channel", "/ws/txs?since=0", "scale")
    tour.check("transaction webhooks", "GET", "/v1/tx/hooks", "scale", fields=["0.callback_url"])
    tour.delivered("transaction pushed to the webhook", "/tx-hooks", tx_hash)
    if isinstance(hook, dict) and "id" in hook:
        tour.check("transaction webhook delete", "DELETE", f"/v1/tx/hooks/{hook['id']}", "scale", want=204)


def polygon(tour):
    tour.check("balance (no key)", "GET", f"/v1/polygon/wallet/balance/{ALICE}", None, fields=["wei", "block"])
    tour.check("tokens", "GET", f"/v1/polygon/wallet/tokens/{ALICE}", "basic", fields=["tokens"])
    tour.check("NFTs", "GET", f"/v1/polygon/wallet/nfts/{ALICE}", "basic", fields=["items"])
    tour.check("history", "GET", f"/v1/polygon/wallet/history/{ALICE}", "basic", fields=["items"])
    tour.check("mempool snapshot", "GET", "/v1/polygon/mempool/snapshot", "pro")
    tour.check("mempool stats", "GET", "/v1/polygon/mempool/stats", "pro")
    tour.check("validators", "GET", "/v1/polygon/validators/current", "basic", fields=["validators"])
    tour.check("checkpoint", "GET", "/v1/polygon/checkpoints/1", "basic", fields=["root_hash"])
    tour.check("span", "GET", "/v1/polygon/spans/1", "basic", fields=["selected_producers"])
    tour.check("heimdall LCD proxy", "GET", "/v1/polygon/heimdall/checkpoints/latest", "pro", fields=["checkpoint.id"])
    tour.check("heimdall RPC proxy", "GET", "/v1/polygon/heimdall/status", "pro", fields=["result.sync_info"])
    tour.check("bor metrics", "GET", "/v1/polygon/metrics/bor-anvil-1/bor", "scale")
    tour.check("heimdall metrics", "GET", "/v1/polygon/metrics/heimdall-1/heimdall", "scale")
    tour.check("mesh health", "GET", "/v1/polygon/mesh/health", None)
    acct = Account.create()
    node(NODE + 2, "anvil_setBalance", [acct.address, hex(10**20)])
    tx = {"to": ALICE_CHECKSUMMED, "value": 1, "nonce": 0, "type": 2, "maxFeePerGas": 100 * 10**9, "maxPriorityFeePerGas": 30 * 10**9, "gas": 21_000, "chainId": 137}
    raw = acct.sign_transaction(tx).raw_transaction.hex()
    raw = raw if raw.startswith("0x") else "0x" + raw
    sent = tour.check("raw sender", "POST", "/v1/polygon/sender/raw", "scale", {"raw_tx": raw}, fields=["tx_hash"])
    tx_hash = sent.get("tx_hash", "0x" + "00" * 32) if isinstance(sent, dict) else "0x" + "00" * 32
    tour.check("transaction status", "GET", f"/v1/polygon/tx/{tx_hash}", "scale", fields=["status"])
    tour.check("trace replay", "POST", "/v1/polygon/trace/replay-tx", "pro", {"tx_hash": tx_hash}, fields=["trace.0.action", "source"])
    call = {"tx": {"from": acct.address, "to": ALICE, "value": "0x1"}, "block": "latest"}
    tour.check("trace call", "POST", "/v1/polygon/trace/call", "pro", call, fields=["trace.0.result", "source"])
    for channel in ("logs", "mempool"):
        info = tour.check(f"firehose {channel}", "GET", f"/v1/polygon/firehose/{channel}", "business", fields=["token", "url"])
        token = info.get("token") if isinstance(info, dict) else None
        tour.websocket(f"firehose {channel} channel", f"/ws/polygon/{channel}", None, token=token, want_message=False)


def solana(tour):
    from solders.keypair import Keypair
    from solders.system_program import TransferParams, transfer

    import sol_client

    sol_port = NODE + 4
    chain = json.loads((DEMO / "sol.json").read_text())
    wallet, vote, stake = chain["wallet"], chain["vote1"], chain["stakes_v1"][0]
    tour.check("balance", "GET", f"/v1/sol/wallet/{wallet}/balance", "free", fields=["lamports"])
    tour.check("tokens", "GET", f"/v1/sol/wallet/{wallet}/tokens", "free", fields=["tokens"])
    tour.check("NFTs", "GET", f"/v1/sol/wallet/{wallet}/nfts", "basic", fields=["nfts.0.mint", "compressed.items.0.id"])
    tour.check("history", "GET", f"/v1/sol/wallet/{wallet}/history", "basic", fields=["items"])
    tour.check("account snapshot", "GET", f"/v1/sol/snapshot/account/{wallet}", "basic", fields=["lamports"])
    latest = tour.check("stake snapshot", "GET", "/v1/sol/snapshot/stake/latest", "scale", fields=["accounts"])
    epoch = latest.get("epoch", 0) if isinstance(latest, dict) else 0
    tour.check("stake by epoch", "GET", f"/v1/sol/snapshot/stake/epoch/{epoch}", "scale", fields=["accounts"])
    tour.check("stake by voter", "GET", f"/v1/sol/snapshot/stake/by-voter/{vote}", "scale", fields=["accounts"])
    tour.check("stake history", "GET", f"/v1/sol/snapshot/stake/account/{stake}/history", "scale", fields=["history.0.voter"])
    tour.check("MEV-cache hosts", "GET", "/v1/sol/mev-cache/hosts", "pro", fields=["hosts"])
    tour.check("MEV-cache leaderboard", "GET", "/v1/sol/mev-cache/leaderboard", "pro", fields=["items"])
    tour.check("MEV-cache host metrics", "GET", "/v1/sol/mev-cache/hosts/mev-cache-1/metrics", "pro")
    tour.check("MEV-cache host series", "GET", "/v1/sol/mev-cache/hosts/mev-cache-1/series", "pro", fields=["points.0.hits_per_sec"])
    solnode = sol_client.Node(f"http://127.0.0.1:{sol_port}")
    payer = Keypair()
    solnode.call("requestAirdrop", [str(payer.pubkey()), 10**10])
    time.sleep(1)

    def signed_transfer(lamports):
        ix = transfer(TransferParams(from_pubkey=payer.pubkey(), to_pubkey=Keypair().pubkey(), lamports=lamports))
        return base64.b64encode(bytes(solnode.sign([ix], payer, [payer]))).decode()

    sent = tour.check("sender", "POST", "/v1/sol/sender/tx", "scale", {"transaction": signed_transfer(5_000_000), "encoding": "base64"}, fields=["signature"])
    sig = sent.get("signature", "1" * 88) if isinstance(sent, dict) else "1" * 88
    tour.check("transaction status", "GET", f"/v1/sol/tx/{sig}", "scale", fields=["status"])
    tour.check("bundle", "POST", "/v1/sol/sender/bundle", "scale", {"transactions": [signed_transfer(6_000_000)], "encoding": "base64"}, fields=["bundle_id"])
    tour.check("mempool snapshot", "GET", "/v1/sol/mempool/snapshot", "pro")
    tour.check("mempool stats", "GET", "/v1/sol/mempool/stats", "pro")
    watched = tour.check("watchlist create", "POST", "/v1/sol/watchlist", "scale", {"pubkey": wallet, "callback_type": "ws", "callback_url": "tour"}, want=201, fields=["id"])
    receiver = Keypair().pubkey()
    hooked = tour.check("watchlist webhook", "POST", "/v1/sol/watchlist", "scale",
                        {"pubkey": str(receiver), "callback_type": "webhook", "callback_url": f"{RECEIVER}/sol-watch"}, want=201, fields=["id", "signing_secret"])

    def pay_receiver():
        # The watcher subscribes to a new entry's account on its next round: a change
        # before then is not pushed, so the tour changes the account again while it waits.
        ix = transfer(TransferParams(from_pubkey=payer.pubkey(), to_pubkey=receiver, lamports=7_000_000 + int(time.time()) % 1000))
        wire = base64.b64encode(bytes(solnode.sign([ix], payer, [payer]))).decode()
        Client().call("POST", "/v1/sol/sender/tx", {"transaction": wire, "encoding": "base64"}, {"x-token": KEYS["scale"]})

    tour.delivered("account change pushed to the webhook", "/sol-watch", str(receiver), poke=pay_receiver)
    if isinstance(hooked, dict) and "id" in hooked:
        tour.check("watchlist webhook delete", "DELETE", f"/v1/sol/watchlist/{hooked['id']}", "scale", want=204)
    wid = watched.get("id", "none") if isinstance(watched, dict) else "none"
    tour.check("watchlist", "GET", "/v1/sol/watchlist", "scale", fields=["0.pubkey"])
    tour.check("watchlist entry", "GET", f"/v1/sol/watchlist/{wid}", "scale", fields=["pubkey"])
    tour.websocket("watchlist channel", "/ws/sol/watchlist?client=tour", "scale", want_message=False)
    tour.check("watchlist delete", "DELETE", f"/v1/sol/watchlist/{wid}", "scale", want=204)


def main():
    tour = Tour()
    sign_in(tour)
    console(tour)
    ethereum(tour)
    polygon(tour)
    solana(tour)
    print(f"{tour.seen} items, {len(tour.missed)} missed" + (": " + ", ".join(tour.missed) if tour.missed else ""))
    sys.exit(1 if tour.missed else 0)


if __name__ == "__main__":
    main()
