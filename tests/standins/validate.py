#!/usr/bin/env python3
"""Hold every stand-in to its system's official spec (vendored under `vendor/`, see its
README): start each one, ask it what the edge asks, and check status and body against
the spec's schema for that operation and status.

Stricter than the schemas alone: an object key the spec does not declare is an error
(a stand-in must not invent fields the edge could come to rely on), and swagger 2.0's
`uint64` / `int64` / `byte` formats are checked as the gRPC gateway writes them.
Event streams: beacon events must name a topic of the spec's enum and carry exactly the
fields of the spec's example for it, with the same JSON types; MEV-Share hints must
match `vendor/mev-share/hint.schema.json`, transcribed from the spec's event scheme.
Heimdall v1's swagger is go-swagger output from annotations, and three of its shapes
disagree with the Go types that write the answers; there the types win (`heimdall_v1_doc`).
The DAS API is checked against its OpenRPC document's result schemas.
Prometheus text is checked by `promtool check metrics`.

    validate.py            prints one line per check, exits 1 on any failure
"""

import hashlib
import json
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import jsonschema_rs
import yaml

HERE = Path(__file__).resolve().parent
VENDOR = HERE / "vendor"
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "py"))  # base58_codec, for the Solana stand-ins

import base58_codec as b58  # noqa: E402
import beacon  # noqa: E402
import das  # noqa: E402
import heimdall  # noqa: E402
import mev  # noqa: E402
import node_front  # noqa: E402
from stub import Clock, serve  # noqa: E402

_files = {}


def load(path):
    path = path.resolve()
    if path not in _files:
        _files[path] = yaml.safe_load(path.read_text())
    return _files[path]


def pointer(doc, frag):
    for part in filter(None, frag.split("/")):
        doc = doc[part.replace("~1", "/").replace("~0", "~")]
    return doc


def inline(node, base, depth=0):
    """The schema with every `$ref` (file-relative or local) replaced by its target, and
    OpenAPI's `nullable` made JSON Schema."""
    if depth > 60:
        raise RecursionError("schema nests too deep")
    if isinstance(node, list):
        return [inline(n, base, depth + 1) for n in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        ref = node["$ref"]
        file, _, frag = ref.partition("#")
        target_file = (base.parent / file) if file else base
        return inline(pointer(load(target_file), frag), target_file, depth + 1)
    out = {k: inline(v, base, depth + 1) for k, v in node.items() if k not in ("example", "examples")}
    if out.pop("nullable", False) and "type" in out:
        out["type"] = [out["type"], "null"] if isinstance(out["type"], str) else out["type"] + ["null"]
    return out


def swagger2(node):
    """Swagger 2.0's formats as the gRPC gateway writes them, as patterns."""
    if isinstance(node, list):
        return [swagger2(n) for n in node]
    if not isinstance(node, dict):
        return node
    out = {k: swagger2(v) for k, v in node.items()}
    fmt = {"uint64": r"^[0-9]+$", "int64": r"^-?[0-9]+$", "byte": r"^[A-Za-z0-9+/]*={0,2}$"}
    if out.get("type") == "string" and out.get("format") in fmt:
        out["pattern"] = fmt[out["format"]]
    return out


def undeclared(schema, value, where="$"):
    """Keys of `value` that `schema` does not declare at their place."""
    if not isinstance(schema, dict):
        return []
    if "allOf" in schema:
        return undeclared(flatten(schema), value, where)
    for key in ("oneOf", "anyOf"):
        if key in schema:
            fits = [s for s in schema[key] if jsonschema_rs.is_valid(s, value)]
            return undeclared(fits[0], value, where) if fits else []
    if isinstance(value, dict) and "properties" in schema:
        extra = schema.get("additionalProperties")
        found = [] if extra not in (None, False) else [f"{where}.{k}" for k in value if k not in schema["properties"]]
        for k, v in value.items():
            if k in schema["properties"]:
                found += undeclared(schema["properties"][k], v, f"{where}.{k}")
        return found
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [x for i, v in enumerate(value) for x in undeclared(schema["items"], v, f"{where}[{i}]")]
    return []


def flatten(schema):
    """An `allOf`'s parts as one object schema: their properties (and items) together."""
    if "allOf" in schema:
        merged = {"properties": {}}
        for part in schema["allOf"]:
            f = flatten(part)
            merged["properties"].update(f.get("properties", {}))
            if "items" in f:
                merged["items"] = f["items"]
        return merged
    return schema


def check(schema, value):
    errors = [e.message for e in jsonschema_rs.validator_for(schema).iter_errors(value)]
    return errors + [f"{k} is not in the spec" for k in undeclared(schema, value)]


# -- the specs' operations ------------------------------------------------------------------

def oapi3(root_file, path, status, method="get"):
    """The response schema of an OpenAPI 3 operation, for a status."""
    root = VENDOR / root_file
    ops = load(root)["paths"][path]
    base = root
    if "$ref" in ops:
        file, _, frag = ops["$ref"].partition("#")
        base = (root.parent / file) if file else root
        ops = pointer(load(base), frag) if frag else load(base)
    response = ops[method]["responses"][str(status)]
    if "$ref" in response:
        file, _, frag = response["$ref"].partition("#")
        target = (base.parent / file) if file else base
        response, base = pointer(load(target), frag), target
    return inline(response["content"]["application/json"]["schema"], base)


def heimdall_op(path, status="200"):
    doc = load(VENDOR / "heimdall-v2/swagger.yaml")
    responses = doc["paths"][path]["get"]["responses"]
    return swagger2(inline(responses.get(status, responses["default"])["schema"], VENDOR / "heimdall-v2/swagger.yaml"))


def heimdall_v1_doc():
    """maticnetwork/heimdall's swagger, where it disagrees with what heimdall writes
    corrected to the Go types: a checkpoint by id is `types.CheckpointWithID`
    (types/header.go, with `id`); a span's producers are `selected_producers`
    (types/span.go; the swagger says `selected_producer`); the validator set is
    `types.ValidatorSet` (types/validator-set.go, with `proposer`)."""
    doc = load(VENDOR / "heimdall-v1/swagger.yaml")
    defs = doc["definitions"]
    defs["checkpoint"]["properties"].setdefault("id", {"type": "integer", "format": "int64"})
    span = defs["span"]["properties"]
    if "selected_producer" in span:
        span["selected_producers"] = span.pop("selected_producer")
    defs["validators"]["properties"].setdefault("proposer", {"$ref": "#/definitions/validator"})
    return doc


def heimdall_v1_op(path):
    """The 200 schema of a v1 REST path (the swagger declares no other status)."""
    doc = heimdall_v1_doc()
    response = inline(doc["paths"][path]["get"]["responses"]["200"], VENDOR / "heimdall-v1/swagger.yaml")
    return response["schema"]


# cosmos-sdk's `rest.ErrorResponse` (heimdall's types/rest/rest.go), which v1 writes for
# every error: the swagger declares no error body.
HEIMDALL_V1_ERROR = {"type": "object", "required": ["error"], "additionalProperties": False,
                     "properties": {"code": {"type": "integer"}, "error": {"type": "string"}}}


def das_result(method):
    return das.spec_method(method)["result"]["schema"]


def cometbft(name):
    return inline({"$ref": f"#/components/schemas/{name}"}, VENDOR / "cometbft/openapi.yaml")


# -- running the stand-ins ------------------------------------------------------------------

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(port, path, method="GET", body=None, headers=None):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", body, headers or {}, method=method)
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            return r.status, r.read(), r.headers.get("content-type", "")
    except urllib.error.HTTPError as e:
        return e.code, e.read(), e.headers.get("content-type", "")


def events(port, path, count, accept="text/event-stream", within=20):
    """The first `count` events of a stream: (event name or None, data)."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=within)
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nAccept: {accept}\r\n\r\n".encode())
    buf, out, end = b"", [], time.time() + within
    while len(out) < count and time.time() < end:
        chunk = sock.recv(65536)
        if not chunk:
            break
        buf += chunk
        head, sep, rest = buf.partition(b"\r\n\r\n")
        if not sep:
            continue
        blocks = rest.split(b"\n\n")
        out = []
        for block in blocks[:-1]:
            lines = block.decode().split("\n")
            fields = [ln.split(":", 1) for ln in lines if ln and not ln.startswith(":")]
            if fields:
                d = dict((k, v.lstrip(" ")) for k, v in fields)
                out.append((d.get("event"), d.get("data")))
    sock.close()
    return out[:count]


class Report:
    def __init__(self):
        self.failed = 0

    def __call__(self, name, problems):
        if problems:
            self.failed += 1
            print(f"FAIL {name}")
            for p in problems[:10]:
                print(f"     {p}")
        else:
            print(f"ok   {name}")


def json_case(report, name, port, path, schema, want_status=200, **kw):
    status, body, _ = get(port, path, **kw)
    if status != want_status:
        return report(name, [f"status {status}, want {want_status}: {body[:200]!r}"])
    try:
        value = json.loads(body)
    except ValueError:
        return report(name, ["body is not JSON"])
    report(name, check(schema, value))


def selftest(report):
    """The checks themselves: answers a stand-in once gave, or could, must fail."""
    oapi = "beacon-APIs/beacon-node-oapi.yaml"
    validator = oapi3(oapi, "/eth/v1/beacon/states/{state_id}/validators/{validator_id}", 200)
    good = {"execution_optimistic": False, "finalized": False, "data": beacon.Beacon(Clock(0, 1)).validator(1)}
    bad_cases = {
        "a validator without status": {**good, "data": {k: v for k, v in good["data"].items() if k != "status"}},
        "a validator with an invented field": {**good, "extra": 1},
        "a balance as a number": {**good, "data": {**good["data"], "balance": 32}},
    }
    problems = [] if not check(validator, good) else ["a good validator fails"]
    problems += [f"{name} passes" for name, v in bad_cases.items() if not check(validator, v)]
    delivered = oapi3("relay-specs/relay-oapi.yaml", "/relay/v1/data/bidtraces/proposer_payload_delivered", 200)
    old_fixture = [{"slot": "8000000", "parent_hash": "0x00", "block_hash": "0x01", "builder_pubkey": "0xb0",
                    "proposer_pubkey": "0xa0", "proposer_fee_recipient": "0xfe", "gas_limit": "30000000",
                    "gas_used": "12000000", "value": "42", "num_tx": "100", "block_number": "19000000"}]
    problems += [] if check(delivered, old_fixture) else ["a bid trace with 1-byte hashes passes"]
    checkpoint = heimdall_op("/checkpoints/{number}")
    v1 = {"checkpoint": {"id": 1, "proposer": "0xa1", "start_block": 0, "end_block": 255, "root_hash": "0x" + "ab" * 32, "bor_chain_id": "137", "timestamp": 1}}
    problems += [] if check(checkpoint, v1) else ["heimdall v1's numbers and hex pass as v2"]
    v2 = {"height": "100", "result": {"id": "1", "proposer": "0xa1", "start_block": "0", "end_block": "255",
                                      "root_hash": "q80=", "bor_chain_id": "137", "timestamp": "1"}}
    problems += [] if check(heimdall_v1_op("/checkpoints/{id}"), v2) else ["heimdall v2's strings pass as v1"]
    asset = {"interface": "V1_NFT", "id": "x", "burnt": False, "mutable": True, "compression": {"compressed": True}}
    problems += [] if check(das_result("getAsset"), asset) else ["a DAS asset without its compression fields passes"]
    report("the checks refuse what the specs refuse", problems)


def main():
    report = Report()
    selftest(report)
    clock = Clock(time.time() - 3 * 64 * 0.5, 0.5, 9_000_000)
    ports = {n: free_port() for n in ("beacon", "lcd", "lcd-v1", "rpc", "relay", "front", "mev-share", "builder", "mev-cache", "sol")}
    hints = mev.Hints()
    hd = heimdall.Heimdall(time.time() - 65, checkpoint_secs=10, span_secs=30)
    serve(beacon.app(beacon.Beacon(clock)), ports["beacon"])
    serve(heimdall.lcd(hd), ports["lcd"])
    serve(heimdall.lcd_v1(hd), ports["lcd-v1"])
    serve(heimdall.cometbft(hd), ports["rpc"])
    serve(mev.relay_app(mev.Relay(clock, 9_000_000)), ports["relay"])
    serve(mev.builder_app(None, hints), ports["builder"])
    serve(mev.mev_share_app(hints, ping_secs=1, idle_hint_secs=0.3), ports["mev-share"])
    serve(mev.mev_cache_app("c", 100), ports["mev-cache"])
    start_sol_node(ports["sol"])
    serve(node_front.app(node_front.Front("front-1", ports["front"], "http://127.0.0.1:9", [("front-1", ports["front"])])), ports["front"])

    # beacon-APIs
    b = ports["beacon"]
    oapi = "beacon-APIs/beacon-node-oapi.yaml"
    json_case(report, "beacon /eth/v1/node/syncing", b, "/eth/v1/node/syncing", oapi3(oapi, "/eth/v1/node/syncing", 200))
    json_case(report, "beacon /eth/v1/node/version", b, "/eth/v1/node/version", oapi3(oapi, "/eth/v1/node/version", 200))
    json_case(report, "beacon /eth/v1/beacon/genesis", b, "/eth/v1/beacon/genesis", oapi3(oapi, "/eth/v1/beacon/genesis", 200))
    for block in ("head", "finalized", "9000001"):
        json_case(report, f"beacon headers/{block}", b, f"/eth/v1/beacon/headers/{block}", oapi3(oapi, "/eth/v1/beacon/headers/{block_id}", 200))
    json_case(report, "beacon headers/<unknown root> 404", b, "/eth/v1/beacon/headers/0x" + "ab" * 32, oapi3(oapi, "/eth/v1/beacon/headers/{block_id}", 404), 404)
    json_case(report, "beacon headers/<bad id> 400", b, "/eth/v1/beacon/headers/nope", oapi3(oapi, "/eth/v1/beacon/headers/{block_id}", 400), 400)
    json_case(report, "beacon finality_checkpoints", b, "/eth/v1/beacon/states/head/finality_checkpoints", oapi3(oapi, "/eth/v1/beacon/states/{state_id}/finality_checkpoints", 200))
    one = "/eth/v1/beacon/states/{state_id}/validators/{validator_id}"
    for vid in ["0", "5", "6", "15", beacon.pubkey(3)]:
        json_case(report, f"beacon validator {vid[:12]}", b, f"/eth/v1/beacon/states/head/validators/{vid}", oapi3(oapi, one, 200))
    json_case(report, "beacon validator 999 404", b, "/eth/v1/beacon/states/head/validators/999", oapi3(oapi, one, 404), 404)
    json_case(report, "beacon validator abc 400", b, "/eth/v1/beacon/states/head/validators/abc", oapi3(oapi, one, 400), 400)
    json_case(report, "beacon validators", b, "/eth/v1/beacon/states/head/validators?id=1,2", oapi3(oapi, "/eth/v1/beacon/states/{state_id}/validators", 200))
    json_case(report, "beacon validator_balances", b, "/eth/v1/beacon/states/head/validator_balances?id=1", oapi3(oapi, "/eth/v1/beacon/states/{state_id}/validator_balances", 200))
    event_spec = load(VENDOR / "beacon-APIs/apis/eventstream/index.yaml")["get"]
    topics = event_spec["parameters"][0]["schema"]["items"]["enum"]
    examples = event_spec["responses"]["200"]["content"]["text/event-stream"]["examples"]
    got = events(b, "/eth/v1/events?topics=head,block,finalized_checkpoint", 6)
    problems = [] if len(got) == 6 else [f"{len(got)} events in 20 s"]
    for name, data in got:
        if name not in topics:
            problems.append(f"event {name!r} is not a topic of the spec")
            continue
        example = examples[name]["value"].split("data:", 1)[1].strip()
        problems += same_shape(json.loads(example), json.loads(data), name)
    report("beacon /eth/v1/events framing and fields", problems)
    status, body, _ = get(b, "/eth/v1/events?topics=nope")
    if len(sys.argv) > 2 and sys.argv[1] == "--el":
        light_client_cases(report, Clock(time.time(), 1, 9_000_000), sys.argv[2])
    report("beacon /eth/v1/events unknown topic 400", check(oapi3(oapi, "/eth/v1/events", 400), json.loads(body)) if status == 400 else [f"status {status}"])

    # flashbots/relay-specs data API
    r = ports["relay"]
    rel = "relay-specs/relay-oapi.yaml"
    delivered = "/relay/v1/data/bidtraces/proposer_payload_delivered"
    received = "/relay/v1/data/bidtraces/builder_blocks_received"
    json_case(report, "relay payloads delivered", r, delivered + "?limit=5", oapi3(rel, delivered, 200))
    status, body, _ = get(r, delivered + "?limit=3")
    page = json.loads(body)
    cursor = int(page[-1]["slot"]) - 1
    status, body, _ = get(r, f"{delivered}?limit=3&cursor={cursor}")
    nxt = json.loads(body)
    report("relay cursor pages back from the slot given", [] if nxt and int(nxt[0]["slot"]) <= cursor and len(nxt) == 3 else [f"{nxt[:1]}"])
    json_case(report, "relay payloads order_by=-value", r, delivered + "?limit=10&order_by=-value", oapi3(rel, delivered, 200))
    json_case(report, "relay limit 201 400", r, delivered + "?limit=201", oapi3(rel, delivered, 400), 400)
    json_case(report, "relay bad block_hash 400", r, delivered + "?block_hash=0x12", oapi3(rel, delivered, 400), 400)
    json_case(report, "relay blocks received", r, f"{received}?slot={clock.slot()}", oapi3(rel, received, 200))
    json_case(report, "relay blocks received needs a filter", r, received + "?limit=5", oapi3(rel, received, 400), 400)
    reg = "/relay/v1/data/validator_registration"
    json_case(report, "relay validator registration", r, f"{reg}?pubkey={mev.pubkey('proposer', 2)}", oapi3(rel, reg, 200))
    status, _, _ = get(r, "/eth/v1/builder/status")
    spec_status = load(VENDOR / "builder-specs/apis/builder/status.yaml")["get"]["responses"]
    report("relay /eth/v1/builder/status (builder-specs)", [] if str(status) in spec_status else [f"status {status}"])

    # heimdall-v2 LCD (swagger 2.0)
    lcd = ports["lcd"]
    for path, op in [("/checkpoints/1", "/checkpoints/{number}"), ("/checkpoints/latest", "/checkpoints/latest"),
                     ("/checkpoints/count", "/checkpoints/count"), ("/bor/spans/0", "/bor/spans/{id}"),
                     ("/bor/spans/2", "/bor/spans/{id}"), ("/bor/spans/latest", "/bor/spans/latest"),
                     ("/stake/validators-set", "/stake/validators-set"), ("/stake/total-power", "/stake/total-power"),
                     ("/stake/validator/2", "/stake/validator/{id}"), ("/milestones/latest", "/milestones/latest"),
                     ("/milestones/count", "/milestones/count")]:
        json_case(report, f"heimdall {path}", lcd, path, heimdall_op(op))
    json_case(report, "heimdall /checkpoints/99999 404", lcd, "/checkpoints/99999", heimdall_op("/checkpoints/{number}", "default"), 404)
    json_case(report, "heimdall unknown path 404", lcd, "/0", heimdall_op("/checkpoints/{number}", "default"), 404)
    json_case(report, "heimdall /bor/spans/x 400", lcd, "/bor/spans/x", heimdall_op("/bor/spans/{id}", "default"), 400)

    # heimdall v1 REST (maticnetwork/heimdall swagger 2.0, corrected to its Go types)
    v1 = ports["lcd-v1"]
    for path, op in [("/checkpoints/1", "/checkpoints/{id}"), ("/checkpoints/latest", "/checkpoints/latest"),
                     ("/checkpoints/count", "/checkpoints/count"), ("/bor/span/0", "/bor/span/{id}"),
                     ("/bor/span/2", "/bor/span/{id}"), ("/bor/latest-span", "/bor/latest-span"),
                     ("/staking/validator-set", "/staking/validator-set"), ("/staking/totalpower", "/staking/totalpower"),
                     ("/staking/validator/2", "/staking/validator/{id}")]:
        json_case(report, f"heimdall v1 {path}", v1, path, heimdall_v1_op(op))
    json_case(report, "heimdall v1 /checkpoints/99999 400", v1, "/checkpoints/99999", HEIMDALL_V1_ERROR, 400)
    json_case(report, "heimdall v1 /bor/span/99999 500", v1, "/bor/span/99999", HEIMDALL_V1_ERROR, 500)
    json_case(report, "heimdall v1 /bor/span/x 400", v1, "/bor/span/x", HEIMDALL_V1_ERROR, 400)
    status, body, ctype = get(v1, "/bor/spans/1")
    report("heimdall v1 unknown path: mux's plain 404", [] if (status, body, ctype.split(";")[0]) == (404, b"404 page not found\n", "text/plain") else [f"{status} {ctype} {body[:80]!r}"])

    # Metaplex DAS (OpenRPC), served by the LiteSVM node
    sol = ports["sol"]
    owner, nobody = sol_address(1), sol_address(2)
    for name in ("Leaf A", "Leaf B"):
        rpc_call(sol, "shim_mintCompressedNft", [owner, name])
    page = rpc_call(sol, "getAssetsByOwner", {"ownerAddress": owner, "page": 1, "limit": 1000})
    report("das getAssetsByOwner", check(das_result("getAssetsByOwner"), page.get("result")) if "result" in page else [str(page)])
    items = page.get("result", {}).get("items", [])
    report("das getAssetsByOwner finds both leaves", [] if len(items) == 2 else [f"{len(items)} items"])
    empty = rpc_call(sol, "getAssetsByOwner", {"ownerAddress": nobody})
    report("das getAssetsByOwner, nothing owned", check(das_result("getAssetsByOwner"), empty.get("result")) if "result" in empty else [str(empty)])
    if items:
        one = rpc_call(sol, "getAsset", {"id": items[0]["id"]})
        report("das getAsset", check(das_result("getAsset"), one.get("result")) if "result" in one else [str(one)])
    bad = rpc_call(sol, "getAssetsByOwner", {"ownerAddress": owner, "pageSize": 5})
    report("das refuses a parameter the spec does not have", [] if bad.get("error", {}).get("code") == -32602 else [str(bad)[:200]])

    # CometBFT RPC (v0.38.x openapi)
    rpc = ports["rpc"]
    json_case(report, "cometbft /status", rpc, "/status", cometbft("StatusResponse"))
    json_case(report, "cometbft POST status", rpc, "/", cometbft("StatusResponse"), method="POST",
              body=b'{"jsonrpc":"2.0","id":1,"method":"status","params":{}}', headers={"content-type": "application/json"})
    json_case(report, "cometbft /abci_info", rpc, "/abci_info", cometbft("ABCIInfoResponse"))

    # MEV-Share events (flashbots/mev-share specs/events/v0.1.md)
    hint_schema = json.loads((VENDOR / "mev-share/hint.schema.json").read_text())
    tx = "0x02f86b01808459682f008459682f0e825208940000000000000000000000000000000000000001880de0b6b3a764000080c080a0" + "11" * 32 + "a0" + "22" * 32
    get(ports["builder"], "/", "POST", json.dumps({"jsonrpc": "2.0", "id": 1, "method": "eth_sendBundle", "params": [{"txs": [tx], "blockNumber": "0x10"}]}).encode(), {"content-type": "application/json"})
    got = events(ports["mev-share"], "/", 3)
    problems = [] if len(got) == 3 else [f"{len(got)} hints"]
    for name, data in got:
        problems += ([f"event name {name}"] if name else []) + check(hint_schema, json.loads(data))
    report("mev-share hints", problems)

    # Prometheus exposition format: promtool
    promtool = shutil.which("promtool")
    for name, port, path in [("beacon", b, "/metrics"), ("cometbft", rpc, "/metrics"), ("mev-cache", ports["mev-cache"], "/metrics")]:
        status, body, ctype = get(port, path)
        if not promtool:
            report(f"{name} metrics (promtool missing)", ["promtool not installed"])
            continue
        p = subprocess.run([promtool, "check", "metrics"], input=body, capture_output=True)
        lint = [ln for ln in p.stderr.decode().splitlines() if "error" in ln.lower()]
        report(f"{name} metrics: promtool", lint + ([] if ctype.startswith("text/plain") else [f"content-type {ctype}"]))

    print(f"{report.failed} failed")
    sys.exit(1 if report.failed else 0)


def light_client_cases(report, clock, el_url):
    """The light-client routes of a beacon stand-in following the execution node at
    `el_url`, once it has a few blocks (Lodestar checks their signatures and branches:
    tests/light_client.rs)."""
    port = free_port()
    node = beacon.Beacon(clock, el_url=el_url)
    serve(beacon.app(node), port)
    deadline = time.time() + 15
    while time.time() < deadline and len(node.light.blocks) < 3:
        time.sleep(0.2)
    lc = "/eth/v1/beacon/light_client"
    root = "0x" + node.light.blocks[0].root.hex()

    def oapi3(oapi, path, status):
        # beacon-APIs writes a sync committee's size for the mainnet preset (512); the
        # stand-in's chain is the minimal preset's (32): only that bound is read so.
        return minimal_preset(globals()["oapi3"](oapi, path, status))

    oapi = "beacon-APIs/beacon-node-oapi.yaml"
    period = node.light.blocks[0].slot // 64
    json_case(report, "beacon light_client bootstrap", port, f"{lc}/bootstrap/{root}", oapi3(oapi, f"{lc}/bootstrap/{{block_root}}", 200))
    json_case(report, "beacon light_client bootstrap unknown 404", port, f"{lc}/bootstrap/0x{'ab' * 32}", oapi3(oapi, f"{lc}/bootstrap/{{block_root}}", 404), 404)
    json_case(report, "beacon light_client bootstrap bad root 400", port, f"{lc}/bootstrap/nope", oapi3(oapi, f"{lc}/bootstrap/{{block_root}}", 400), 400)
    json_case(report, "beacon light_client updates", port, f"{lc}/updates?start_period={period}&count=2", oapi3(oapi, f"{lc}/updates", 200))
    json_case(report, "beacon light_client updates bad query 400", port, f"{lc}/updates?start_period=x", oapi3(oapi, f"{lc}/updates", 400), 400)
    json_case(report, "beacon light_client finality_update", port, f"{lc}/finality_update", oapi3(oapi, f"{lc}/finality_update", 200))
    json_case(report, "beacon light_client optimistic_update", port, f"{lc}/optimistic_update", oapi3(oapi, f"{lc}/optimistic_update", 200))


def minimal_preset(schema):
    if isinstance(schema, dict):
        return {k: (32 if k in ("minItems", "maxItems") and v == 512 else minimal_preset(v)) for k, v in schema.items()}
    if isinstance(schema, list):
        return [minimal_preset(v) for v in schema]
    return schema


def start_sol_node(port):
    """The LiteSVM node (sol_node.py), which serves the DAS API, in this process."""
    import threading
    from http.server import ThreadingHTTPServer

    import sol_node

    server = ThreadingHTTPServer(("127.0.0.1", port), sol_node.handler_for(sol_node.Chain(32)))
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()


def rpc_call(port, method, params):
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).encode()
    _, answer, _ = get(port, "/", "POST", body, {"content-type": "application/json"})
    return json.loads(answer)


def sol_address(i):
    """A Solana address nobody holds a key to (any 32 bytes will do for an owner)."""
    return b58.encode(hashlib.sha256(b"das owner %d" % i).digest())


def same_shape(example, value, where):
    """`value` has exactly `example`'s keys, each with the same JSON type, recursively."""
    if isinstance(example, dict):
        if not isinstance(value, dict):
            return [f"{where}: not an object"]
        out = [f"{where}.{k} missing" for k in example if k not in value]
        out += [f"{where}.{k} is not in the spec's example" for k in value if k not in example]
        for k in example:
            if k in value:
                out += same_shape(example[k], value[k], f"{where}.{k}")
        return out
    if type(example) is not type(value):
        return [f"{where}: {type(value).__name__}, the spec has {type(example).__name__}"]
    if isinstance(example, str) and re.fullmatch(r"0x[0-9a-f]+", example) and len(example) != len(value):
        return [f"{where}: {len(value)} characters, the spec has {len(example)}"]
    return []


if __name__ == "__main__":
    main()
