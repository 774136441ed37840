"""A beacon node's REST API and event stream (ethereum/beacon-APIs), for a chain whose
slots move with the fleet's clock and whose 64 validators go through the lifecycle.

Served: node syncing / version / health, genesis, block headers (head, finalized,
justified, genesis, a slot or a root), finality checkpoints, one validator (index or
pubkey) or a list, validator balances, and `GET /eth/v1/events` (`head`, `block`,
`finalized_checkpoint`) framed as the spec shows: `event:` and `data:` lines, a blank
line after each, `:` comments to keep the stream alive. Answers are validated against
the vendored spec in `tests/standins/validate.py`.
"""

import hashlib
import json
import re
import time

import light_client
from stub import Answer, empty, error, json_answer, sse

SLOTS_PER_EPOCH = 32
FAR_FUTURE = "18446744073709551615"
VALIDATORS = 64
GENESIS_VALIDATORS_ROOT = "0x" + hashlib.sha256(b"standin genesis").hexdigest()


def root(*parts):
    return "0x" + hashlib.sha256(":".join(str(p) for p in parts).encode()).hexdigest()


def pubkey(i):
    h = hashlib.sha256(f"validator {i}".encode()).hexdigest()
    return "0x" + h + h[:32]


class Beacon:
    def __init__(self, clock, version="standin-beacon/1.0", el_url=None):
        self.clock, self.version = clock, version
        # Light-client data over the execution node's blocks (light_client.py).
        self.light = light_client.LightChain(clock, el_url, GENESIS_VALIDATORS_ROOT) if el_url else None

    def head(self):
        return self.clock.slot()

    def epoch(self):
        return self.head() // SLOTS_PER_EPOCH

    def finalized_epoch(self):
        return max(0, self.epoch() - 2)

    # -- validators -----------------------------------------------------------------
    def validator(self, i):
        """Validator i's record at the head: its lifecycle is a function of i and time."""
        epoch = self.epoch()
        kind = i % 8
        activation, exit_epoch, withdrawable, slashed = "0", FAR_FUTURE, FAR_FUTURE, False
        if kind == 5:  # queued: activates two epochs after it was seen
            activation = FAR_FUTURE
            status = "pending_queued"
        elif kind == 6:  # exiting soon
            exit_epoch, withdrawable = str(epoch + 4), str(epoch + 260)
            status = "active_exiting"
        elif kind == 7 and i % 16 == 15:  # slashed and exited
            exit_epoch, withdrawable, slashed = "1", "8193", True
            status = "exited_slashed" if epoch < 8193 else "withdrawal_possible"
        else:
            status = "active_ongoing"
        effective = 32_000_000_000 if status != "exited_slashed" else 31_000_000_000
        balance = effective + (i * 1_013 + epoch * 9_871 if status.startswith("active") else 0)
        return {
            "index": str(i),
            "balance": str(balance),
            "status": status,
            "validator": {
                "pubkey": pubkey(i),
                "withdrawal_credentials": "0x01" + "00" * 11 + f"{i + 1:040x}",
                "effective_balance": str(effective),
                "slashed": slashed,
                "activation_eligibility_epoch": "0" if activation == "0" else str(epoch),
                "activation_epoch": activation,
                "exit_epoch": exit_epoch,
                "withdrawable_epoch": withdrawable,
            },
        }

    def find(self, vid):
        if re.fullmatch(r"0x[0-9a-fA-F]{96}", vid):
            for i in range(VALIDATORS):
                if pubkey(i) == vid.lower():
                    return self.validator(i)
            return None
        if re.fullmatch(r"[0-9]{1,20}", vid):
            i = int(vid)
            return self.validator(i) if i < VALIDATORS else None
        raise ValueError("Invalid validator ID")

    # -- blocks ---------------------------------------------------------------------
    def slot_of(self, block_id):
        head = self.head()
        named = {
            "head": head,
            "genesis": 0,
            "finalized": self.finalized_epoch() * SLOTS_PER_EPOCH,
            "justified": max(0, self.epoch() - 1) * SLOTS_PER_EPOCH,
        }
        if block_id in named:
            return named[block_id]
        if re.fullmatch(r"[0-9]{1,20}", block_id):
            s = int(block_id)
            return s if s <= head else None
        if re.fullmatch(r"0x[0-9a-fA-F]{64}", block_id):
            # A root of ours names its slot in the last 200 slots.
            for s in range(head, max(-1, head - 200), -1):
                if root("block", s) == block_id.lower():
                    return s
            return None
        raise ValueError("Invalid block ID")

    def header(self, slot):
        return {
            "root": root("block", slot),
            "canonical": True,
            "header": {
                "message": {
                    "slot": str(slot),
                    "proposer_index": str(slot % VALIDATORS),
                    "parent_root": root("block", slot - 1) if slot else "0x" + "00" * 32,
                    "state_root": root("state", slot),
                    "body_root": root("body", slot),
                },
                "signature": "0x" + (hashlib.sha256(b"sig%d" % slot).hexdigest() * 3)[:192],
            },
        }

    def checkpoint(self, epoch):
        return {"epoch": str(epoch), "root": root("block", epoch * SLOTS_PER_EPOCH)}

    def meta(self, slot):
        return {
            "execution_optimistic": False,
            "finalized": slot <= self.finalized_epoch() * SLOTS_PER_EPOCH,
        }

    # -- events ---------------------------------------------------------------------
    def events(self, topics):
        last = self.head()
        last_finalized = self.finalized_epoch()
        yield b": standin beacon events\n\n"
        while True:
            time.sleep(0.2)
            head = self.head()
            if head == last:
                yield b": keepalive\n\n"
                time.sleep(0.8)
                continue
            for slot in range(last + 1, head + 1):
                epoch_transition = slot % SLOTS_PER_EPOCH == 0
                if "block" in topics:
                    data = {"slot": str(slot), "block": root("block", slot), "execution_optimistic": False}
                    yield frame("block", data)
                if "head" in topics:
                    data = {
                        "slot": str(slot),
                        "block": root("block", slot),
                        "state": root("state", slot),
                        "epoch_transition": epoch_transition,
                        "previous_duty_dependent_root": root("block", max(0, slot // 32 * 32 - 33)),
                        "current_duty_dependent_root": root("block", max(0, slot // 32 * 32 - 1)),
                        "execution_optimistic": False,
                    }
                    yield frame("head", data)
            last = head
            fin = self.finalized_epoch()
            if "finalized_checkpoint" in topics and fin != last_finalized:
                data = {
                    "block": root("block", fin * SLOTS_PER_EPOCH),
                    "state": root("state", fin * SLOTS_PER_EPOCH),
                    "epoch": str(fin),
                    "execution_optimistic": False,
                }
                yield frame("finalized_checkpoint", data)
                last_finalized = fin


TOPICS = {"head", "block", "finalized_checkpoint"}


def frame(event, data):
    return f"event: {event}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n".encode()


def metrics(beacon):
    """Lighthouse's names for what a dashboard reads first."""
    head = beacon.head()
    return (
        "# HELP beacon_head_state_slot Slot of the head state\n# TYPE beacon_head_state_slot gauge\n"
        f"beacon_head_state_slot {head}\n"
        "# TYPE beacon_finalized_epoch gauge\n"
        f"beacon_finalized_epoch {beacon.finalized_epoch()}\n"
        "# TYPE libp2p_peers gauge\n"
        f'libp2p_peers{{instance="10.0.4.2:5054"}} {40 + head % 9}\n'
    )


def lc_answer(versioned, ssz_type, ssz):
    """A light-client object as JSON, or as SSZ when asked (`Accept:
    application/octet-stream`), with its fork in `Eth-Consensus-Version` either way."""
    headers = {"Eth-Consensus-Version": versioned["version"]}
    if ssz:
        body = light_client.ssz_of(ssz_type, versioned["data"]).encode_bytes()
        return Answer(200, body, content_type="application/octet-stream", headers=headers)
    return Answer(200, json.dumps(versioned, separators=(",", ":")), headers=headers)


def light_routes(light, req, p):
    """beacon-APIs' light-client routes, and the stand-in's own: the checkpoint and
    network a light client is configured with, and forging (light_client.py)."""
    if light is None:
        return error(404, "light client data is not served: no execution node given")
    if p == "/standin/light_client" and req.method == "POST":
        light.forge = (req.json() or {}).get("forge")
        return json_answer({"ok": True})
    if p == "/standin/light_client/checkpoint":
        cp = light.checkpoint()
        return json_answer({**cp, "network": light.network()}) if cp else error(503, "no block yet")
    ssz = "application/octet-stream" in req.headers.get("accept", "")
    m = re.fullmatch(r"/eth/v1/beacon/light_client/bootstrap/(0x[0-9a-fA-F]{64})", p)
    if m:
        found = light.bootstrap(bytes.fromhex(m.group(1)[2:]))
        if not found:
            return error(404, "LC bootstrap unavailable")
        return lc_answer(found, light_client.LightClientBootstrap, ssz)
    if p.startswith("/eth/v1/beacon/light_client/bootstrap/"):
        return error(400, "Invalid block root")
    if p == "/eth/v1/beacon/light_client/updates":
        try:
            start, count = int(req.query["start_period"]), int(req.query["count"])
        except (KeyError, ValueError):
            return error(400, "start_period and count are required unsigned integers")
        updates = light.updates(start, count)
        if not ssz:
            return json_answer(updates)
        # Each response chunk: its length (8 bytes, little-endian, of what follows), the
        # fork digest, the update's SSZ.
        chunks = b""
        for u in updates:
            body = light.fork_digest() + light_client.ssz_of(light_client.LightClientUpdate, u["data"]).encode_bytes()
            chunks += len(body).to_bytes(8, "little") + body
        return Answer(200, chunks, content_type="application/octet-stream")
    kinds = {"finality_update": light_client.LightClientFinalityUpdate,
             "optimistic_update": light_client.LightClientOptimisticUpdate}
    kind = p.removeprefix("/eth/v1/beacon/light_client/")
    if kind in kinds:
        block = light.signed()
        if block is None or (kind == "finality_update" and block.finalized is None):
            return error(404, "No LightClientUpdate available")
        return lc_answer(light.update(block, finality=kind == "finality_update"), kinds[kind], ssz)
    return error(404, f"no route {req.path}")


def app(beacon):
    def handle(req):
        p = req.path.rstrip("/")
        if p == "/eth/v1/node/syncing":
            return json_answer({"data": {
                "head_slot": str(beacon.head()), "sync_distance": "0", "is_syncing": False,
                "is_optimistic": False, "el_offline": False}})
        if p == "/metrics":
            return Answer(200, metrics(beacon), content_type="text/plain; version=0.0.4")
        if p == "/eth/v1/node/version":
            return json_answer({"data": {"version": beacon.version}})
        if p == "/eth/v1/node/health":
            return empty()
        if p == "/eth/v1/beacon/genesis":
            return json_answer({"data": {
                "genesis_time": str(beacon.clock.slot_time(0)),
                "genesis_validators_root": GENESIS_VALIDATORS_ROOT,
                "genesis_fork_version": "0x00000000"}})
        if p == "/eth/v1/events":
            topics = set(filter(None, req.query.get("topics", "").split(",")))
            if not topics or not topics <= TOPICS:
                return error(400, f"Invalid topics: this node serves {sorted(TOPICS)}")
            return sse(beacon.events(topics))
        if p.startswith("/eth/v1/beacon/light_client/") or p.startswith("/standin/light_client"):
            return light_routes(beacon.light, req, p)
        m = re.fullmatch(r"/eth/v1/beacon/headers/([^/]+)", p)
        if m:
            try:
                slot = beacon.slot_of(m.group(1))
            except ValueError as e:
                return error(400, str(e))
            if slot is None:
                return error(404, "Block header not found")
            return json_answer({**beacon.meta(slot), "data": beacon.header(slot)})
        m = re.fullmatch(r"/eth/v1/beacon/states/([^/]+)/(finality_checkpoints|validators|validator_balances)(?:/([^/]+))?", p)
        if m:
            state, what, vid = m.groups()
            try:
                slot = beacon.slot_of(state)
            except ValueError:
                return error(400, "Invalid state ID")
            if slot is None:
                return error(404, "State not found")
            meta = beacon.meta(slot)
            if what == "finality_checkpoints" and vid is None:
                e = beacon.epoch()
                return json_answer({**meta, "data": {
                    "previous_justified": beacon.checkpoint(max(0, e - 2)),
                    "current_justified": beacon.checkpoint(max(0, e - 1)),
                    "finalized": beacon.checkpoint(beacon.finalized_epoch())}})
            if what == "validators" and vid is not None:
                try:
                    v = beacon.find(vid)
                except ValueError as e:
                    return error(400, str(e))
                if v is None:
                    return error(404, "Validator not found")
                return json_answer({**meta, "data": v})
            if vid is None:
                ids = [i for i in req.query.get("id", "").split(",") if i]
                try:
                    found = [beacon.find(i) for i in ids] if ids else [beacon.validator(i) for i in range(VALIDATORS)]
                except ValueError as e:
                    return error(400, str(e))
                found = [v for v in found if v]
                if what == "validator_balances":
                    found = [{"index": v["index"], "balance": v["balance"]} for v in found]
                return json_answer({**meta, "data": found})
        return error(404, f"no route {req.path}")

    return handle

