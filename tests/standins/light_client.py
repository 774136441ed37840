"""A beacon chain's light-client data over a real execution node's blocks: what the
beacon stand-in serves at `/eth/v1/beacon/light_client/{bootstrap/ROOT, updates,
finality_update, optimistic_update}` (ethereum/beacon-APIs), Electra's layout, the
minimal preset (sync committees of 32).

Each time the execution node (anvil) has a new head, the chain gets a beacon block at
the current slot carrying that block's execution payload header. A block's state is a
Merkle tree holding what the light client proves against it (the current and next
sync committees, the finalized checkpoint's root, the slot); its body holds the
execution payload header. Hash tree roots by remerkleable, BLS signatures by py_ecc
(each aggregate signed once with the sum of the signers' secret keys: the same point
as the aggregate of their signatures). Independent of the edge's Rust code, and held
to Lodestar's light client by `tests/light_client.rs`.

`POST /standin/light_client {"forge": ...}` serves forged updates from then on:
`signature` (signed by keys not in the committee), `participants` (20 of 32 sign),
`branch` (a finality branch that leads elsewhere), `execution` (an execution header
that is not the block's), or null.
"""

import hashlib
import json
import threading
import time
import urllib.request

from py_ecc.bls import G2ProofOfPossession as bls
from py_ecc.optimized_bls12_381 import curve_order as CURVE_ORDER
from remerkleable.basic import uint64, uint256
from remerkleable.bitfields import Bitvector
from remerkleable.byte_arrays import ByteList, ByteVector, Bytes32, Bytes48, Bytes96
from remerkleable.complex import Container, Vector

COMMITTEE = 32
SLOTS_PER_EPOCH = 8
EPOCHS_PER_PERIOD = 8
SLOTS_PER_PERIOD = SLOTS_PER_EPOCH * EPOCHS_PER_PERIOD
# Electra's generalized indices (consensus-specs electra/light-client/sync-protocol.md).
CURRENT_COMMITTEE, NEXT_COMMITTEE, FINALIZED_ROOT, STATE_SLOT = 86, 87, 169, 66
EXECUTION_PAYLOAD = 25
DOMAIN_SYNC_COMMITTEE = bytes([7, 0, 0, 0])
FORKS = {"deneb": (0, "0x04000064"), "electra": (0, "0x05000064")}
KEPT = 4096


class BeaconBlockHeader(Container):
    slot: uint64
    proposer_index: uint64
    parent_root: Bytes32
    state_root: Bytes32
    body_root: Bytes32


class ExecutionPayloadHeader(Container):
    parent_hash: Bytes32
    fee_recipient: ByteVector[20]
    state_root: Bytes32
    receipts_root: Bytes32
    logs_bloom: ByteVector[256]
    prev_randao: Bytes32
    block_number: uint64
    gas_limit: uint64
    gas_used: uint64
    timestamp: uint64
    extra_data: ByteList[32]
    base_fee_per_gas: uint256
    block_hash: Bytes32
    transactions_root: Bytes32
    withdrawals_root: Bytes32
    blob_gas_used: uint64
    excess_blob_gas: uint64


class SyncCommittee(Container):
    pubkeys: Vector[Bytes48, COMMITTEE]
    aggregate_pubkey: Bytes48


class LightClientHeader(Container):
    beacon: BeaconBlockHeader
    execution: ExecutionPayloadHeader
    execution_branch: Vector[Bytes32, 4]


class SyncAggregate(Container):
    sync_committee_bits: Bitvector[COMMITTEE]
    sync_committee_signature: Bytes96


class LightClientBootstrap(Container):
    header: LightClientHeader
    current_sync_committee: SyncCommittee
    current_sync_committee_branch: Vector[Bytes32, 6]


class LightClientUpdate(Container):
    attested_header: LightClientHeader
    next_sync_committee: SyncCommittee
    next_sync_committee_branch: Vector[Bytes32, 6]
    finalized_header: LightClientHeader
    finality_branch: Vector[Bytes32, 7]
    sync_aggregate: SyncAggregate
    signature_slot: uint64


class LightClientFinalityUpdate(Container):
    attested_header: LightClientHeader
    finalized_header: LightClientHeader
    finality_branch: Vector[Bytes32, 7]
    sync_aggregate: SyncAggregate
    signature_slot: uint64


class LightClientOptimisticUpdate(Container):
    attested_header: LightClientHeader
    sync_aggregate: SyncAggregate
    signature_slot: uint64


def ssz_of(typ, value):
    """A beacon-APIs JSON value as the SSZ view of `typ` (numbers are decimal strings,
    bytes 0x hex, a bit vector's bits in its bytes)."""
    if issubclass(typ, Container):
        return typ(**{name: ssz_of(ftype, value[name]) for name, ftype in typ.fields().items()})
    if issubclass(typ, Bitvector):
        return typ.decode_bytes(bytes.fromhex(value[2:]))
    if issubclass(typ, Vector):
        return typ(*(ssz_of(typ.element_cls(), v) for v in value))
    if issubclass(typ, (ByteVector, ByteList)):
        return typ(bytes.fromhex(value[2:]))
    return typ(int(value))


def sha(data):
    return hashlib.sha256(data).digest()


def tree(leaves):
    """A sparse Merkle tree with `leaves` ({gindex: 32 bytes}; zero elsewhere): its root
    and each leaf's branch."""
    nodes = dict(leaves)
    pending = set(nodes)
    while any(g > 1 for g in pending):
        g = max(pending)
        pending -= {g, g ^ 1}
        left, right = nodes.get(g & ~1, bytes(32)), nodes.get(g | 1, bytes(32))
        nodes[g // 2] = sha(left + right)
        pending.add(g // 2)
    branches = {}
    for g in leaves:
        branch, at = [], g
        while at > 1:
            branch.append(nodes.get(at ^ 1, bytes(32)))
            at //= 2
        branches[g] = branch
    return nodes.get(1, bytes(32)), branches


def hx(b):
    return "0x" + bytes(b).hex()


class Committee:
    def __init__(self, period, salt=""):
        self.secret = [int.from_bytes(sha(f"committee{salt} {period} {i}".encode()), "big") % CURVE_ORDER or 1
                       for i in range(COMMITTEE)]
        self.pubkeys = [bls.SkToPk(k) for k in self.secret]
        self.aggregate = bls._AggregatePKs(self.pubkeys)
        self.view = SyncCommittee(pubkeys=[Bytes48(p) for p in self.pubkeys], aggregate_pubkey=Bytes48(self.aggregate))
        self.root = bytes(self.view.hash_tree_root())

    def json(self):
        return {"pubkeys": [hx(p) for p in self.pubkeys], "aggregate_pubkey": hx(self.aggregate)}

    def sign(self, message, signers):
        secret = sum(self.secret[i] for i in signers) % CURVE_ORDER
        return bls.Sign(secret, message)


class Block:
    """A beacon block: its slot, header, state leaves and branches, execution header."""

    def __init__(self, chain, slot, execution, parent_root, finalized):
        self.slot, self.execution, self.finalized = slot, execution, finalized
        period = slot // SLOTS_PER_PERIOD
        self.payload = payload_view(execution)
        body_root, body_branches = tree({EXECUTION_PAYLOAD: bytes(self.payload.hash_tree_root())})
        self.execution_branch = body_branches[EXECUTION_PAYLOAD]
        state = {
            CURRENT_COMMITTEE: chain.committee(period).root,
            NEXT_COMMITTEE: chain.committee(period + 1).root,
            FINALIZED_ROOT: finalized.root if finalized else bytes(32),
            STATE_SLOT: slot.to_bytes(8, "little") + bytes(24),
        }
        state_root, self.branches = tree(state)
        self.beacon = BeaconBlockHeader(slot=slot, proposer_index=slot % 64, parent_root=parent_root,
                                        state_root=state_root, body_root=body_root)
        self.root = bytes(self.beacon.hash_tree_root())

    def header_json(self, execution=None):
        b = self.beacon
        return {
            "beacon": {"slot": str(b.slot), "proposer_index": str(b.proposer_index), "parent_root": hx(b.parent_root),
                       "state_root": hx(b.state_root), "body_root": hx(b.body_root)},
            "execution": execution or self.execution,
            "execution_branch": [hx(x) for x in self.execution_branch],
        }


def payload_view(e):
    b = bytes.fromhex
    return ExecutionPayloadHeader(
        parent_hash=b(e["parent_hash"][2:]), fee_recipient=b(e["fee_recipient"][2:]),
        state_root=b(e["state_root"][2:]), receipts_root=b(e["receipts_root"][2:]),
        logs_bloom=b(e["logs_bloom"][2:]), prev_randao=b(e["prev_randao"][2:]),
        block_number=int(e["block_number"]), gas_limit=int(e["gas_limit"]), gas_used=int(e["gas_used"]),
        timestamp=int(e["timestamp"]), extra_data=b(e["extra_data"][2:]),
        base_fee_per_gas=int(e["base_fee_per_gas"]), block_hash=b(e["block_hash"][2:]),
        transactions_root=b(e["transactions_root"][2:]), withdrawals_root=b(e["withdrawals_root"][2:]),
        blob_gas_used=int(e["blob_gas_used"]), excess_blob_gas=int(e["excess_blob_gas"]))


def execution_header(block):
    """An execution node's block as the beacon chain's `ExecutionPayloadHeader` (the
    CL's transactions and withdrawals roots are SSZ roots; the stand-in hashes the EL's
    instead: the light client proves the header, not what it says of them)."""
    q = lambda k, d="0x0": str(int(block.get(k) or d, 16))
    return {
        "parent_hash": block["parentHash"], "fee_recipient": block["miner"],
        "state_root": block["stateRoot"], "receipts_root": block["receiptsRoot"],
        "logs_bloom": block["logsBloom"], "prev_randao": block.get("mixHash") or hx(bytes(32)),
        "block_number": q("number"), "gas_limit": q("gasLimit"), "gas_used": q("gasUsed"),
        "timestamp": q("timestamp"), "extra_data": block.get("extraData") or "0x",
        "base_fee_per_gas": q("baseFeePerGas"), "block_hash": block["hash"],
        "transactions_root": hx(sha(bytes.fromhex(block["transactionsRoot"][2:]))),
        "withdrawals_root": hx(sha(bytes.fromhex((block.get("withdrawalsRoot") or "0x" + "00" * 32)[2:]))),
        "blob_gas_used": q("blobGasUsed"), "excess_blob_gas": q("excessBlobGas"),
    }


class LightChain:
    def __init__(self, clock, el_url, genesis_validators_root):
        self.clock, self.el_url = clock, el_url
        self.gvr = bytes.fromhex(genesis_validators_root[2:])
        self.blocks, self.by_root, self.committees = [], {}, {}
        self.forge, self.lock, self.checked_at = None, threading.Lock(), 0.0
        # The chain grows whether or not anyone asks, as a beacon node's does.
        threading.Thread(target=self.grow, daemon=True).start()

    def grow(self):
        while True:
            self.follow()
            time.sleep(0.25)

    def committee(self, period):
        if period not in self.committees:
            self.committees[period] = Committee(period)
        return self.committees[period]

    def genesis_time(self):
        return self.clock.slot_time(0)

    def domain(self, slot):
        version = max((v for e, v in FORKS.values() if e <= slot // SLOTS_PER_EPOCH), key=lambda v: v)
        fork_data_root = sha(bytes.fromhex(version[2:]) + bytes(28) + self.gvr)
        return DOMAIN_SYNC_COMMITTEE + fork_data_root[:28]

    def follow(self):
        """A new beacon block when the execution node's head moved (checked at most
        every 200 ms, at most one block a slot)."""
        with self.lock:
            now = time.time()
            if now - self.checked_at < 0.2:
                return
            self.checked_at = now
            req = urllib.request.Request(self.el_url, data=json.dumps({
                "jsonrpc": "2.0", "id": 1, "method": "eth_getBlockByNumber", "params": ["latest", False]}).encode(),
                headers={"content-type": "application/json"})
            try:
                head = json.load(urllib.request.urlopen(req, timeout=2))["result"]
            except Exception:
                return
            slot = self.clock.slot()
            last = self.blocks[-1] if self.blocks else None
            if last and (last.execution["block_hash"] == head["hash"] or last.slot >= slot):
                return
            block = Block(self, slot, execution_header(head), last.root if last else bytes(32), self.finalized_for(slot))
            self.blocks.append(block)
            self.by_root[block.root] = block
            if len(self.blocks) > KEPT:
                self.by_root.pop(self.blocks.pop(0).root, None)

    def finalized_for(self, slot):
        """The newest block at or before the start of the epoch two before `slot`'s."""
        boundary = max(0, (slot // SLOTS_PER_EPOCH - 2) * SLOTS_PER_EPOCH)
        older = [b for b in self.blocks if b.slot <= boundary]
        return older[-1] if older else (self.blocks[0] if self.blocks else None)

    def signed(self):
        """The newest block a later slot has come for: what sync committees signed."""
        self.follow()
        now = self.clock.slot()
        ready = [b for b in self.blocks if b.slot < now]
        return ready[-1] if ready else None

    # -- answers --------------------------------------------------------------------
    def bootstrap(self, root):
        self.follow()
        block = self.by_root.get(root)
        if block is None:
            return None
        period = block.slot // SLOTS_PER_PERIOD
        return {"version": "electra", "data": {
            "header": block.header_json(),
            "current_sync_committee": self.committee(period).json(),
            "current_sync_committee_branch": [hx(x) for x in block.branches[CURRENT_COMMITTEE]]}}

    def update(self, block, finality=True, committee=False):
        signature_slot = block.slot + 1
        signers = list(range(20 if self.forge == "participants" else COMMITTEE))
        period = signature_slot // SLOTS_PER_PERIOD
        signing_root = sha(bytes(block.beacon.hash_tree_root()) + self.domain(signature_slot - 1))
        by = Committee(period, salt="-stranger") if self.forge == "signature" else self.committee(period)
        bits = bytearray(COMMITTEE // 8)
        for i in signers:
            bits[i // 8] |= 1 << (i % 8)
        execution = None
        if self.forge == "execution":
            execution = dict(block.execution, state_root=hx(sha(b"forged state")))
        data = {"attested_header": block.header_json(execution)}
        if committee:
            data["next_sync_committee"] = self.committee(block.slot // SLOTS_PER_PERIOD + 1).json()
            data["next_sync_committee_branch"] = [hx(x) for x in block.branches[NEXT_COMMITTEE]]
        if finality and block.finalized is not None:
            fin = block.finalized
            branch = [hx(x) for x in block.branches[FINALIZED_ROOT]]
            if self.forge == "branch":
                branch[0] = hx(sha(b"elsewhere"))
            data["finalized_header"] = fin.header_json()
            data["finality_branch"] = branch
        data["sync_aggregate"] = {"sync_committee_bits": hx(bits),
                                  "sync_committee_signature": hx(by.sign(signing_root, signers))}
        data["signature_slot"] = str(signature_slot)
        return {"version": "electra", "data": data}

    def updates(self, start, count):
        self.follow()
        now = self.clock.slot()
        out = []
        for period in range(start, start + min(count, 128)):
            inside = [b for b in self.blocks
                      if b.slot // SLOTS_PER_PERIOD == period and b.slot + 1 <= now
                      and (b.slot + 1) // SLOTS_PER_PERIOD == period]
            if not inside:
                break
            out.append(self.update(inside[-1], finality=True, committee=True))
        return out

    def fork_digest(self):
        """`compute_fork_digest` of the fork in force (Electra here), for SSZ chunks."""
        return sha(bytes.fromhex(FORKS["electra"][1][2:]) + bytes(28) + self.gvr)[:4]

    def checkpoint(self):
        self.follow()
        first = self.blocks[0] if self.blocks else None
        return {"root": hx(first.root), "slot": str(first.slot)} if first else None

    def network(self):
        """The chain's constants, as the edge's `network:` takes them."""
        return {"name": "standin", "preset": "minimal", "genesis_time": self.genesis_time(),
                "seconds_per_slot": int(self.clock.slot_secs), "genesis_validators_root": hx(self.gvr),
                "forks": {name: {"epoch": e, "version": v} for name, (e, v) in FORKS.items()}}
