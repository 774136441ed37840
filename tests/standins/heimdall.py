"""A heimdall node of either generation. heimdall-v2: its Cosmos LCD (the gRPC gateway of 0xPolygon/heimdall-v2,
`client/docs/swagger-ui/swagger.yaml`) on one port, and CometBFT's RPC on another.

LCD: checkpoints (one acknowledged every `checkpoint_secs`, each covering 256 bor
blocks), spans (span 0 is blocks 0-255, then 6,400 blocks each; a new one every
`span_secs`), milestones, the validator set of five, counts, params. Errors are the
gateway's `{code, message, details}` with gRPC codes (5 NotFound as HTTP 404,
3 InvalidArgument as HTTP 400). CometBFT RPC: `/status`, `/health`, `/abci_info`, and
the same as JSON-RPC POSTed to `/`; Prometheus text at `/metrics`.

Heimdall v1 (maticnetwork/heimdall, `server/swagger-ui/swagger.yaml`; `lcd_v1`): the same
chain through v1's REST server. Every answer is cosmos-sdk's `{"height": "<n>", "result":
...}` with numbers as JSON numbers and bytes as 0x-hex; errors are `{"error": "..."}`
carrying the ABCI query's log, with v1's own statuses: a missing checkpoint is a 400, a
missing span a 500 (its querier reports `span N does not exist` as an internal error), a
missing validator a 400, an unknown path gorilla/mux's plain-text 404.
"""

import base64
import hashlib
import json
import re
import time

from stub import Answer, json_answer

BOR_CHAIN_ID = "137"
CHAIN_ID = "heimdall-137"
VALIDATORS = 5


def b64(data):
    return base64.b64encode(data).decode()


def address(i):
    return "0x" + hashlib.sha256(f"heimdall validator {i}".encode()).hexdigest()[:40]


def validator(i, now_epoch):
    key = b"\x04" + hashlib.sha256(b"pk%d" % i).digest() + hashlib.sha256(b"pk2%d" % i).digest()
    return {
        "val_id": str(i + 1),
        "start_epoch": "0",
        "end_epoch": "0",
        "nonce": str(1 + i % 3),
        "voting_power": str(10_000 * (i + 1)),
        "pub_key": b64(key),
        "signer": address(i),
        "last_updated": str(now_epoch * 100 + i),
        "jailed": False,
        "proposer_priority": str((i * 7_919) % 20_000 - 10_000),
    }


def grpc_error(status, code, message):
    return json_answer({"code": code, "message": message, "details": []}, status)


class Heimdall:
    def __init__(self, start, checkpoint_secs=10.0, span_secs=60.0, block_secs=1.0):
        self.start = start
        self.checkpoint_secs, self.span_secs, self.block_secs = checkpoint_secs, span_secs, block_secs

    def elapsed(self):
        return max(0.0, time.time() - self.start)

    def height(self):
        return 1_000 + int(self.elapsed() / self.block_secs)

    def checkpoints(self):
        return 1 + int(self.elapsed() / self.checkpoint_secs)

    def latest_span(self):
        return 1 + int(self.elapsed() / self.span_secs)

    def validators(self):
        epoch = self.checkpoints()
        return [validator(i, epoch) for i in range(VALIDATORS)]

    def validator_set(self):
        vals = self.validators()
        return {
            "validators": vals,
            "proposer": vals[self.checkpoints() % VALIDATORS],
            "total_voting_power": str(sum(int(v["voting_power"]) for v in vals)),
        }

    def checkpoint(self, n):
        return {
            "id": str(n),
            "proposer": address(n % VALIDATORS),
            "start_block": str((n - 1) * 256),
            "end_block": str(n * 256 - 1),
            "root_hash": b64(hashlib.sha256(b"checkpoint %d" % n).digest()),
            "bor_chain_id": BOR_CHAIN_ID,
            "timestamp": str(int(self.start + (n - 1) * self.checkpoint_secs)),
        }

    def span(self, n):
        start = 0 if n == 0 else 256 + (n - 1) * 6_400
        end = 255 if n == 0 else start + 6_399
        vset = self.validator_set()
        return {
            "id": str(n),
            "start_block": str(start),
            "end_block": str(end),
            "validator_set": vset,
            "selected_producers": [vset["validators"][n % VALIDATORS]],
            "bor_chain_id": BOR_CHAIN_ID,
        }

    def milestone(self):
        n = self.height() // 4
        return {
            "proposer": address(n % VALIDATORS),
            "start_block": str(n * 16),
            "end_block": str(n * 16 + 15),
            "hash": b64(hashlib.sha256(b"milestone %d" % n).digest()),
            "bor_chain_id": BOR_CHAIN_ID,
            "milestone_id": f"{hashlib.sha256(b'mid%d' % n).hexdigest()} - {address(n % VALIDATORS)}",
            "timestamp": str(int(time.time())),
            "total_difficulty": str(n * 16 * 7),
        }


def lcd(h):
    def number(raw, kind):
        if not re.fullmatch(r"[0-9]{1,19}", raw):
            return None, grpc_error(400, 3, f"type mismatch, parameter: {kind}, error: strconv.ParseUint: parsing {raw!r}: invalid syntax")
        return int(raw), None

    def handle(req):
        p = req.path.rstrip("/")
        if req.method != "GET":
            return grpc_error(405, 12, "Method Not Allowed")
        if p == "/checkpoints/latest":
            return json_answer({"checkpoint": h.checkpoint(h.checkpoints())})
        if p == "/checkpoints/count":
            return json_answer({"ack_count": str(h.checkpoints())})
        if p == "/bor/spans/latest":
            return json_answer({"span": h.span(h.latest_span())})
        if p == "/stake/validators-set":
            return json_answer({"validator_set": h.validator_set()})
        if p == "/stake/total-power":
            return json_answer({"total_power": h.validator_set()["total_voting_power"]})
        if p == "/milestones/latest":
            return json_answer({"milestone": h.milestone()})
        if p == "/milestones/count":
            return json_answer({"count": str(h.height() // 4)})
        # One object by number: (path, parameter name, object's name, lowest, highest, object).
        by_number = [
            (r"/checkpoints/([^/]+)", "number", "checkpoint", 1, h.checkpoints, lambda n: {"checkpoint": h.checkpoint(n)}),
            (r"/bor/spans/([^/]+)", "id", "span", 0, h.latest_span, lambda n: {"span": h.span(n)}),
            (r"/stake/validator/([^/]+)", "id", "validator", 1, lambda: VALIDATORS, lambda n: {"validator": h.validators()[n - 1]}),
        ]
        for pattern, param, what, lowest, highest, answer in by_number:
            m = re.fullmatch(pattern, p)
            if not m:
                continue
            n, bad = number(m.group(1), param)
            if bad:
                return bad
            if not lowest <= n <= highest():
                return grpc_error(404, 5, f"{what} {n} not found")
            return json_answer(answer(n))
        return grpc_error(404, 5, "Not Found")  # grpc-gateway's answer to an unknown path

    return handle


def v1_validator(v):
    """A v2 validator as v1 writes it (types/validator.go)."""
    return {
        "ID": int(v["val_id"]), "startEpoch": int(v["start_epoch"]), "endEpoch": int(v["end_epoch"]),
        "nonce": int(v["nonce"]), "power": int(v["voting_power"]),
        "pubKey": "0x" + base64.b64decode(v["pub_key"]).hex(), "signer": v["signer"],
        "last_updated": v["last_updated"], "jailed": v["jailed"], "accum": int(v["proposer_priority"]),
    }


def v1_validator_set(vset):
    """types/validator-set.go: the validators and the proposer (the total is unexported)."""
    return {"validators": [v1_validator(v) for v in vset["validators"]], "proposer": v1_validator(vset["proposer"])}


def v1_checkpoint(c):
    """types/header.go `CheckpointWithID`."""
    return {
        "id": int(c["id"]), "proposer": c["proposer"], "start_block": int(c["start_block"]),
        "end_block": int(c["end_block"]), "root_hash": "0x" + base64.b64decode(c["root_hash"]).hex(),
        "bor_chain_id": c["bor_chain_id"], "timestamp": int(c["timestamp"]),
    }


def v1_span(sp):
    """types/span.go."""
    return {
        "span_id": int(sp["id"]), "start_block": int(sp["start_block"]), "end_block": int(sp["end_block"]),
        "validator_set": v1_validator_set(sp["validator_set"]),
        "selected_producers": [v1_validator(v) for v in sp["selected_producers"]],
        "bor_chain_id": sp["bor_chain_id"],
    }


def lcd_v1(h):
    def ok(result):
        return json_answer({"height": str(h.height()), "result": result})

    def error(status, message, code=1):
        log = json.dumps({"codespace": "sdk", "code": code, "message": message}, separators=(",", ":"))
        return json_answer({"error": log}, status)

    # One object by number: (path, lowest, highest, object, its answer when missing).
    by_number = [
        (r"/checkpoints/([^/]+)", 1, h.checkpoints, lambda n: v1_checkpoint(h.checkpoint(n)),
         lambda n: error(400, f"could not fetch checkpoint by index {n}; Invalid checkpoint Index")),
        (r"/bor/span/([^/]+)", 0, h.latest_span, lambda n: v1_span(h.span(n)),
         lambda n: error(500, f"span {n} does not exist")),
        (r"/staking/validator/([^/]+)", 1, lambda: VALIDATORS, lambda n: v1_validator(h.validators()[n - 1]),
         lambda n: error(400, "No validator found", code=6)),
    ]

    def handle(req):
        p = req.path
        if req.method != "GET":
            return Answer(405, "", content_type="text/plain; charset=utf-8")
        if p == "/checkpoints/latest":
            return ok(v1_checkpoint(h.checkpoint(h.checkpoints())))
        if p == "/checkpoints/count":
            return ok({"result": h.checkpoints()})
        if p == "/bor/latest-span":
            return ok(v1_span(h.span(h.latest_span())))
        if p == "/staking/validator-set":
            return ok(v1_validator_set(h.validator_set()))
        if p == "/staking/totalpower":
            return ok({"result": int(h.validator_set()["total_voting_power"])})
        for pattern, lowest, highest, answer, missing in by_number:
            m = re.fullmatch(pattern, p)
            if not m:
                continue
            raw = m.group(1)
            if not re.fullmatch(r"[0-9]{1,19}", raw) or int(raw) >= 1 << 64:
                return json_answer({"error": f"'{raw}' is not a valid uint64"}, 400)
            n = int(raw)
            return ok(answer(n)) if lowest <= n <= highest() else missing(n)
        return Answer(404, "404 page not found\n", content_type="text/plain; charset=utf-8")

    return handle


def cometbft(h):
    """CometBFT RPC (0.38): URI GETs and JSON-RPC POSTed to `/`, answers in its envelope."""

    def status():
        height = h.height()
        return {
            "node_info": {
                "protocol_version": {"p2p": "8", "block": "11", "app": "0"},
                "id": hashlib.sha256(b"node").hexdigest()[:40],
                "listen_addr": "tcp://0.0.0.0:26656",
                "network": CHAIN_ID,
                "version": "0.38.17",
                "channels": "40202122233038606100",
                "moniker": "standin",
                "other": {"tx_index": "on", "rpc_address": "tcp://0.0.0.0:26657"},
            },
            "sync_info": {
                "latest_block_hash": hashlib.sha256(b"b%d" % height).hexdigest().upper(),
                "latest_app_hash": hashlib.sha256(b"a%d" % height).hexdigest().upper(),
                "latest_block_height": str(height),
                "latest_block_time": time.strftime("%Y-%m-%dT%H:%M:%S.000000000Z", time.gmtime()),
                "earliest_block_hash": hashlib.sha256(b"b0").hexdigest().upper(),
                "earliest_app_hash": hashlib.sha256(b"a0").hexdigest().upper(),
                "earliest_block_height": "1",
                "earliest_block_time": time.strftime("%Y-%m-%dT%H:%M:%S.000000000Z", time.gmtime(h.start)),
                "catching_up": False,
            },
            "validator_info": {
                "address": hashlib.sha256(b"val").hexdigest()[:40].upper(),
                "pub_key": {"type": "tendermint/PubKeySecp256k1", "value": b64(b"\x02" + hashlib.sha256(b"v").digest())},
                "voting_power": "10000",
            },
        }

    methods = {
        "status": lambda p: status(),
        "health": lambda p: {},
        "abci_info": lambda p: {"response": {
            "data": "heimdall", "version": "0.2.0", "app_version": "1",
            "last_block_height": str(h.height()),
            "last_block_app_hash": b64(hashlib.sha256(b"a%d" % h.height()).digest())}},
    }

    def call(method, params, rid):
        fn = methods.get(method)
        if fn is None:
            return {"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "Method not found", "data": ""}}
        try:
            return {"jsonrpc": "2.0", "id": rid, "result": fn(params if isinstance(params, dict) else {})}
        except (LookupError, ValueError) as e:
            return {"jsonrpc": "2.0", "id": rid, "error": {"code": -32603, "message": "Internal error", "data": str(e)}}

    def handle(req):
        if req.method == "GET" and req.path == "/metrics":
            height = h.height()
            text = (
                "# TYPE cometbft_consensus_height gauge\n"
                f'cometbft_consensus_height{{chain_id="{CHAIN_ID}"}} {height}\n'
                "# TYPE cometbft_p2p_peers gauge\n"
                f'cometbft_p2p_peers{{chain_id="{CHAIN_ID}",instance="10.0.5.9:26660"}} 12\n'
            )
            return Answer(200, text, content_type="text/plain; version=0.0.4")
        if req.method == "POST" and req.path in ("", "/"):
            body = req.json()
            if not isinstance(body, dict):
                return json_answer({"jsonrpc": "2.0", "id": -1, "error": {"code": -32700, "message": "Parse error. Invalid JSON", "data": ""}}, 500)
            return json_answer(call(body.get("method", ""), body.get("params") or {}, body.get("id", -1)))
        method = req.path.strip("/")
        if method not in methods:
            return Answer(404, "404 page not found\n", content_type="text/plain; charset=utf-8")
        answer = call(method, req.query, -1)
        return json_answer(answer, 500 if "error" in answer else 200)

    return handle
