#!/usr/bin/env python3
"""A Solana JSON-RPC node for the tests: LiteSVM (solders) behind the real wire format.

No validator installs here, but LiteSVM executes transactions for real: signatures are
verified, and the System, Vote, Stake, SPL Token and Token-2022 programs run. This shim
puts Solana's JSON-RPC in front of it, and serves what LiteSVM has no notion of (slots
moving, signatures by address, token accounts by owner) from what it tracks itself.

    sol_node.py --port N [--ws-port M] [--slot-ms 200] [--slots-per-epoch 32]

POST / is the node's JSON-RPC; POST /api/v1/bundles is a Jito-style block engine on the
same chain (`sendBundle`: 1 to 5 signed transactions, all or none, in order). The PubSub
WebSocket is on port M (N + 1 by default, as on a validator): `accountSubscribe` / `accountUnsubscribe`,
an `accountNotification` whenever a transaction changes a watched account.

The DAS read API (`getAssetsByOwner`, `getAsset`) is served on the same endpoint, as
RPC providers serve it (das.py).

Test controls (methods no real node has): `shim_mintCompressedNft [owner, name]`
(das.py), `shim_setHealthy [bool]` (getHealth answers -32005 "Node is unhealthy" while
false), `shim_warpEpochs [n]`, `shim_stats []` (calls served per method, subscriptions
included), `shim_dropWs []` (close every PubSub connection, as a node restart would).
"""

import argparse
import asyncio
import base64
import hashlib
import json
import struct
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "py"))

import base58_codec as b58  # noqa: E402
import das  # noqa: E402
from solders.account import Account
from solders.clock import Clock  # noqa: F401  (the type set_clock takes)
from solders.epoch_schedule import EpochSchedule
from solders.litesvm import LiteSVM
from solders.pubkey import Pubkey
from solders.transaction import VersionedTransaction

TOKEN = "TokenkegQfeZyiNwAJbNbGKPFXCWuBvf9Ss623VQ5DA"
TOKEN_2022 = "TokenzQdBNbLqP5VEhdkAS6EPFLC1PHnBqCXEpPxuEb"
SYSTEM = "11111111111111111111111111111111"
STAKE = "Stake11111111111111111111111111111111111111"
VOTE = "Vote111111111111111111111111111111111111111"
MAX_SIGNATURES = 1000
# Jito's tip accounts are mainnet addresses; any fixed set serves the tests.
TIP_ACCOUNTS = ["96gYZGLnJYVFmbjzopPSU6QiEV5fGqZNyN9nmNhvrZU5"]


class RpcError(Exception):
    def __init__(self, code, message, data=None):
        super().__init__(message)
        self.code, self.message, self.data = code, message, data


class Chain:
    """The LiteSVM instance and what the shim tracks beside it, behind one lock."""

    def __init__(self, slots_per_epoch):
        self.lock = threading.RLock()
        self.svm = LiteSVM().with_sigverify(True)
        self.spe = slots_per_epoch
        self.svm.set_epoch_schedule(EpochSchedule.custom(slots_per_epoch, slots_per_epoch, False))
        self.slot = 0
        self.healthy = True
        self.by_address = {}  # address -> [record], oldest first
        self.by_signature = {}  # signature -> record
        self.bundles = {}  # bundle id -> "Landed" | "Failed"
        # sendTransaction calls still to be answered but never executed (a leader that
        # never got the transaction), and the blockhashes expired by shim_expireBlockhash.
        self.drop_sends = 0
        self.expired = set()
        self.calls = {}
        # PubSub: subscription id -> [websocket, pubkey, encoding, last state sent]
        self.subs = {}
        self.next_sub = 1
        self.loop = None
        self.set_slot(1)

    def notify(self, keys):
        """An accountNotification to every subscription on `keys` whose account changed."""
        for sid, sub in list(self.subs.items()):
            ws, pubkey, enc, last = sub
            if pubkey not in keys:
                continue
            a = self.account(pubkey)
            state = None if a is None else (a.lamports, bytes(a.data), str(a.owner))
            if state == last:
                continue
            sub[3] = state
            value = encode_account(a, enc) if a is not None else {
                "data": ["", "base64"], "executable": False, "lamports": 0, "owner": SYSTEM,
                "rentEpoch": 0, "space": 0}
            msg = json.dumps({"jsonrpc": "2.0", "method": "accountNotification", "params": {
                "result": {"context": {"slot": self.slot}, "value": value}, "subscription": sid}})
            asyncio.run_coroutine_threadsafe(send_quietly(ws, msg), self.loop)

    def set_slot(self, slot):
        self.slot = slot
        c = self.svm.get_clock()
        c.slot = slot
        c.epoch = slot // self.spe
        c.leader_schedule_epoch = c.epoch + 1
        c.unix_timestamp = int(time.time())
        self.svm.set_clock(c)

    def tick(self):
        with self.lock:
            self.set_slot(self.slot + 1)

    def epoch(self):
        return self.slot // self.spe

    def context(self, value):
        return {"context": {"apiVersion": "2.2.0", "slot": self.slot}, "value": value}

    def account(self, address):
        a = self.svm.get_account(Pubkey.from_string(address))
        if a is None or (a.lamports == 0 and not bytes(a.data)):
            return None
        return a

    def record(self, tx, raw, meta, err):
        sig = str(tx.signatures[0])
        keys = [str(k) for k in tx.message.account_keys]
        rec = {
            "signature": sig,
            "slot": self.slot,
            "err": err,
            "blockTime": int(time.time()),
            "raw": raw,
            "keys": keys,
            "logs": list(meta.logs()) if meta is not None else [],
            "fee": 5000 * len(tx.signatures),
        }
        self.by_signature[sig] = rec
        for k in set(keys):
            self.by_address.setdefault(k, []).append(rec)
        return sig

    def execute(self, raw):
        """Run one wire transaction: its signature, or RpcError as a node's preflight."""
        try:
            tx = VersionedTransaction.from_bytes(raw)
        except Exception as e:  # noqa: BLE001 - any decode failure is the caller's
            raise RpcError(-32602, f"failed to deserialize VersionedTransaction: {e}")
        if str(tx.message.recent_blockhash) in self.expired:
            raise RpcError(-32002, "Transaction simulation failed: Blockhash not found",
                           {"err": "BlockhashNotFound", "logs": []})
        if str(tx.signatures[0]) in self.by_signature:
            raise RpcError(-32002, "Transaction simulation failed: This transaction has already been processed",
                           {"err": "AlreadyProcessed", "logs": []})
        r = self.svm.send_transaction(tx)
        if type(r).__name__ == "FailedTransactionMetadata":
            err = str(r.err())
            if "SignatureFailure" in err:
                raise RpcError(-32003, "Transaction signature verification failure")
            raise RpcError(-32002, f"Transaction simulation failed: {err}",
                           {"err": err, "logs": list(r.meta().logs())})
        sig = self.record(tx, raw, r, None)
        self.notify({str(k) for k in tx.message.account_keys})
        return tx, sig


def decode_tx(data, opts):
    enc = (opts or {}).get("encoding", "base58")
    try:
        if enc == "base64":
            return base64.b64decode(data, validate=True)
        if enc == "base58":
            return b58.decode(data)
    except Exception:  # noqa: BLE001
        raise RpcError(-32602, f"invalid transaction: failed to decode {enc} string")
    raise RpcError(-32602, f"unsupported encoding: {enc}")


def encode_account(a, enc):
    data = bytes(a.data)
    if enc == "base58":
        d = [b58.encode(data), "base58"]
    else:
        d = [base64.b64encode(data).decode(), "base64"]
    return {"data": d, "executable": a.executable, "lamports": a.lamports, "owner": str(a.owner),
            "rentEpoch": 18446744073709551615, "space": len(data)}


def parsed_token_account(chain, address, a):
    """jsonParsed of an SPL token account, as Agave's account decoder gives it."""
    data = bytes(a.data)
    mint = str(Pubkey.from_bytes(data[0:32]))
    owner = str(Pubkey.from_bytes(data[32:64]))
    amount = struct.unpack_from("<Q", data, 64)[0]
    state = {0: "uninitialized", 1: "initialized", 2: "frozen"}.get(data[108], "initialized")
    m = chain.account(mint)
    decimals = bytes(m.data)[44] if m is not None else 0
    program = "spl-token-2022" if str(a.owner) == TOKEN_2022 else "spl-token"
    ui = amount / 10 ** decimals
    ui_str = f"{amount // 10 ** decimals}" + (
        ("." + f"{amount % 10 ** decimals:0{decimals}d}".rstrip("0")) if decimals and amount % 10 ** decimals else "")
    acc = encode_account(a, "base64")
    acc["data"] = {
        "program": program,
        "parsed": {"info": {"isNative": False, "mint": mint, "owner": owner, "state": state,
                            "tokenAmount": {"amount": str(amount), "decimals": decimals,
                                            "uiAmount": ui, "uiAmountString": ui_str}},
                   "type": "account"},
        "space": len(data),
    }
    return {"pubkey": address, "account": acc}


def matches(data, filters):
    for f in filters or []:
        if "dataSize" in f:
            if len(data) != f["dataSize"]:
                return False
        elif "memcmp" in f:
            m = f["memcmp"]
            want = base64.b64decode(m["bytes"]) if m.get("encoding") == "base64" else b58.decode(m["bytes"])
            off = m.get("offset", 0)
            if data[off:off + len(want)] != want:
                return False
        else:
            raise RpcError(-32602, "Invalid params: unsupported filter")
    return True


def rpc(chain, method, params):
    if method in das.METHODS:
        try:
            return das.call(chain, method, params)
        except das.DasError as e:
            raise RpcError(e.code, e.message)
    p = params or []
    if method == "getHealth":
        if not chain.healthy:
            raise RpcError(-32005, "Node is unhealthy", {"numSlotsBehind": None})
        return "ok"
    if method == "getSlot" or method == "getBlockHeight":
        return chain.slot
    if method == "getVersion":
        return {"solana-core": "2.2.0", "feature-set": 0}
    if method == "getEpochInfo":
        return {"absoluteSlot": chain.slot, "blockHeight": chain.slot, "epoch": chain.epoch(),
                "slotIndex": chain.slot % chain.spe, "slotsInEpoch": chain.spe,
                "transactionCount": len(chain.by_signature)}
    if method == "getEpochSchedule":
        return {"firstNormalEpoch": 0, "firstNormalSlot": 0, "leaderScheduleSlotOffset": chain.spe,
                "slotsPerEpoch": chain.spe, "warmup": False}
    if method == "getLatestBlockhash":
        return chain.context({"blockhash": str(chain.svm.latest_blockhash()),
                              "lastValidBlockHeight": chain.slot + 150})
    if method == "getMinimumBalanceForRentExemption":
        return chain.svm.minimum_balance_for_rent_exemption(int(p[0]))
    if method == "getBalance":
        a = chain.account(address_param(p))
        return chain.context(a.lamports if a else 0)
    if method == "getAccountInfo":
        a = chain.account(address_param(p))
        enc = opts(p, 1).get("encoding", "base58")
        if a is not None and enc == "jsonParsed" and str(a.owner) in (TOKEN, TOKEN_2022) and len(bytes(a.data)) >= 165:
            return chain.context(parsed_token_account(chain, p[0], a)["account"])
        return chain.context(encode_account(a, enc) if a else None)
    if method == "getMultipleAccounts":
        enc = opts(p, 1).get("encoding", "base58")
        out = []
        for address in p[0][:100]:
            a = chain.account(address)
            out.append(encode_account(a, enc) if a else None)
        return chain.context(out)
    if method == "requestAirdrop":
        to, lamports = Pubkey.from_string(address_param(p)), int(p[1])
        r = chain.svm.airdrop(to, lamports)
        if type(r).__name__ == "FailedTransactionMetadata":
            # The same airdrop again is the same transaction under one blockhash: a real
            # faucet signs each with a fresh one.
            chain.svm.expire_blockhash()
            r = chain.svm.airdrop(to, lamports)
            if type(r).__name__ == "FailedTransactionMetadata":
                raise RpcError(-32002, f"airdrop failed: {r.err()}")
        chain.notify({p[0]})
        return b58.encode(hashlib.sha512(f"airdrop{time.time_ns()}".encode()).digest()[:64])
    if method == "getProgramAccounts":
        program = address_param(p)
        o = opts(p, 1)
        out = []
        for address, a in chain.svm.get_program_accounts(Pubkey.from_string(program)):
            data = bytes(a.data)
            if matches(data, o.get("filters")):
                out.append({"pubkey": str(address), "account": encode_account(a, o.get("encoding", "base58"))})
        out.sort(key=lambda x: x["pubkey"])
        return chain.context(out) if o.get("withContext") else out
    if method == "getTokenAccountsByOwner":
        owner = address_param(p)
        sel = p[1] if len(p) > 1 and isinstance(p[1], dict) else None
        if not sel or not ({"mint", "programId"} & set(sel)):
            raise RpcError(-32602, "Invalid params: expected mint or programId")
        programs = [sel["programId"]] if "programId" in sel else [TOKEN, TOKEN_2022]
        if any(x not in (TOKEN, TOKEN_2022) for x in programs):
            raise RpcError(-32602, "Invalid param: unrecognized Token program id")
        enc = opts(p, 2).get("encoding", "base58")
        out = []
        for program in programs:
            for address, a in chain.svm.get_program_accounts(Pubkey.from_string(program)):
                data = bytes(a.data)
                if len(data) < 165 or str(Pubkey.from_bytes(data[32:64])) != owner:
                    continue
                if "mint" in sel and str(Pubkey.from_bytes(data[0:32])) != sel["mint"]:
                    continue
                if enc == "jsonParsed":
                    out.append(parsed_token_account(chain, str(address), a))
                else:
                    out.append({"pubkey": str(address), "account": encode_account(a, enc)})
        return chain.context(out)
    if method == "getVoteAccounts":
        current = []
        stakes = {}
        for _, a in chain.svm.get_program_accounts(Pubkey.from_string(STAKE)):
            d = bytes(a.data)
            if len(d) == 200 and struct.unpack_from("<I", d, 0)[0] == 2:
                voter = str(Pubkey.from_bytes(d[124:156]))
                stakes[voter] = stakes.get(voter, 0) + struct.unpack_from("<Q", d, 156)[0]
        for address, a in chain.svm.get_program_accounts(Pubkey.from_string(VOTE)):
            d = bytes(a.data)
            current.append({"votePubkey": str(address), "nodePubkey": str(Pubkey.from_bytes(d[4:36])),
                            "activatedStake": stakes.get(str(address), 0), "epochVoteAccount": True,
                            "commission": 5, "lastVote": chain.slot, "rootSlot": max(chain.slot - 32, 0),
                            "epochCredits": []})
        return {"current": sorted(current, key=lambda v: v["votePubkey"]), "delinquent": []}
    if method == "getSignaturesForAddress":
        address = address_param(p)
        o = opts(p, 1)
        limit = int(o.get("limit", MAX_SIGNATURES))
        if not 1 <= limit <= MAX_SIGNATURES:
            raise RpcError(-32602, "Invalid limit; max 1000")
        recs = list(reversed(chain.by_address.get(address, [])))
        if o.get("before"):
            idx = next((i for i, r in enumerate(recs) if r["signature"] == o["before"]), None)
            recs = recs[idx + 1:] if idx is not None else []
        if o.get("until"):
            idx = next((i for i, r in enumerate(recs) if r["signature"] == o["until"]), None)
            recs = recs[:idx] if idx is not None else recs
        return [{"signature": r["signature"], "slot": r["slot"], "err": r["err"], "memo": None,
                 "blockTime": r["blockTime"], "confirmationStatus": "finalized"} for r in recs[:limit]]
    if method == "getSignatureStatuses":
        out = []
        for s in p[0][:256]:
            r = chain.by_signature.get(s)
            out.append(None if r is None else {"slot": r["slot"], "confirmations": None, "err": r["err"],
                                               "status": {"Ok": None}, "confirmationStatus": "finalized"})
        return chain.context(out)
    if method == "getTransaction":
        r = chain.by_signature.get(p[0])
        if r is None:
            return None
        return {"slot": r["slot"], "blockTime": r["blockTime"], "version": "legacy",
                "transaction": [base64.b64encode(r["raw"]).decode(), "base64"],
                "meta": {"err": r["err"], "fee": r["fee"], "logMessages": r["logs"], "status": {"Ok": None},
                         "preBalances": [], "postBalances": [], "innerInstructions": [],
                         "preTokenBalances": [], "postTokenBalances": [], "rewards": []}}
    if method == "sendTransaction":
        raw = decode_tx(p[0] if p else "", opts(p, 1))
        if chain.drop_sends > 0:
            chain.drop_sends -= 1
            return str(VersionedTransaction.from_bytes(raw).signatures[0])
        _, sig = chain.execute(raw)
        return sig
    if method == "isBlockhashValid":
        return chain.context(bool(p) and p[0] not in chain.expired)
    if method == "shim_dropSends":
        chain.drop_sends = int(p[0]) if p else 1
        return chain.drop_sends
    if method == "shim_expireBlockhash":
        chain.expired.add(str(chain.svm.latest_blockhash()))
        chain.svm.expire_blockhash()
        return str(chain.svm.latest_blockhash())
    if method == "shim_setHealthy":
        chain.healthy = bool(p[0]) if p else True
        return chain.healthy
    if method == "shim_warpEpochs":
        n = int(p[0]) if p else 1
        chain.set_slot((chain.epoch() + n) * chain.spe)
        return chain.epoch()
    if method == "shim_stats":
        return chain.calls
    if method == "shim_dropWs":
        dropped = {id(sub[0]): sub[0] for sub in chain.subs.values()}
        chain.subs.clear()
        for ws in dropped.values():
            asyncio.run_coroutine_threadsafe(ws.close(1001, "node restarting"), chain.loop)
        return len(dropped)
    raise RpcError(-32601, "Method not found")


def bundle_rpc(chain, method, params):
    """The block engine: Jito's JSON-RPC (`sendBundle`, statuses, tip accounts)."""
    p = params or []
    if method == "getTipAccounts":
        return TIP_ACCOUNTS
    if method == "getInflightBundleStatuses" or method == "getBundleStatuses":
        return chain.context([{"bundle_id": b, "status": chain.bundles.get(b, "Invalid"), "landed_slot": None}
                              for b in (p[0] if p else [])[:5]])
    if method != "sendBundle":
        raise RpcError(-32601, "Method not found")
    txs = p[0] if p and isinstance(p[0], list) else None
    if not txs or len(txs) > 5:
        raise RpcError(-32602, "bundle must contain 1 to 5 transactions")
    raws = [decode_tx(t, opts(p, 1)) for t in txs]
    parsed = []
    for raw in raws:
        try:
            parsed.append(VersionedTransaction.from_bytes(raw))
        except Exception as e:  # noqa: BLE001
            raise RpcError(-32602, f"bundle transaction failed to deserialize: {e}")
    bundle_id = hashlib.sha256(b"".join(bytes(t.signatures[0]) for t in parsed)).hexdigest()
    # All or none: keep the accounts every transaction names; put them back on a failure.
    keys = {str(k) for t in parsed for k in t.message.account_keys}
    before = {k: chain.svm.get_account(Pubkey.from_string(k)) for k in keys}
    landed = []
    try:
        for raw in raws:
            tx, sig = chain.execute(raw)
            landed.append(sig)
        chain.bundles[bundle_id] = "Landed"
    except RpcError:
        for k, a in before.items():
            chain.svm.set_account(Pubkey.from_string(k), a or Account(0, b"", Pubkey.from_string(SYSTEM)))
        chain.notify(keys)
        for sig in landed:
            rec = chain.by_signature.pop(sig)
            for k in set(rec["keys"]):
                chain.by_address[k] = [r for r in chain.by_address.get(k, []) if r is not rec]
        chain.bundles[bundle_id] = "Failed"
    return bundle_id


def address_param(p):
    if not p or not isinstance(p[0], str):
        raise RpcError(-32602, "Invalid params: expected an address")
    try:
        Pubkey.from_string(p[0])
    except Exception:  # noqa: BLE001
        raise RpcError(-32602, "Invalid param: Invalid")
    return p[0]


def opts(p, i):
    return p[i] if len(p) > i and isinstance(p[i], dict) else {}


def answer(chain, call, engine):
    if not isinstance(call, dict) or not isinstance(call.get("method"), str):
        return {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "Invalid request"}}
    cid = call.get("id")
    method = call["method"]
    try:
        with chain.lock:
            chain.calls[method] = chain.calls.get(method, 0) + 1
            result = (bundle_rpc if engine else rpc)(chain, method, call.get("params"))
        return {"jsonrpc": "2.0", "id": cid, "result": result}
    except RpcError as e:
        err = {"code": e.code, "message": e.message}
        if e.data is not None:
            err["data"] = e.data
        return {"jsonrpc": "2.0", "id": cid, "error": err}
    except (ValueError, TypeError, KeyError, IndexError) as e:
        return {"jsonrpc": "2.0", "id": cid, "error": {"code": -32602, "message": f"Invalid params: {e}"}}


def handler_for(chain):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def do_POST(self):
            n = int(self.headers.get("Content-Length", "0"))
            body = self.rfile.read(n)
            engine = self.path.rstrip("/").endswith("/api/v1/bundles")
            try:
                req = json.loads(body)
            except ValueError:
                out = {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error"}}
            else:
                if isinstance(req, list):
                    out = [answer(chain, c, engine) for c in req]
                else:
                    out = answer(chain, req, engine)
            data = json.dumps(out).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return Handler


async def send_quietly(ws, msg):
    try:
        await ws.send(msg)
    except Exception:  # noqa: BLE001 - a closed client simply misses it
        pass


async def pubsub(chain, ws):
    """One PubSub connection: account subscriptions, as Agave's RPC PubSub serves them."""
    mine = set()
    try:
        async for text in ws:
            try:
                call = json.loads(text)
            except ValueError:
                await ws.send(json.dumps({"jsonrpc": "2.0", "id": None,
                                          "error": {"code": -32700, "message": "Parse error"}}))
                continue
            method, p, cid = call.get("method"), call.get("params") or [], call.get("id")
            with chain.lock:
                chain.calls[method] = chain.calls.get(method, 0) + 1
                if method == "accountSubscribe":
                    try:
                        Pubkey.from_string(p[0])
                    except Exception:  # noqa: BLE001
                        out = {"code": -32602, "message": "Invalid Request: Invalid pubkey"}
                    else:
                        sid = chain.next_sub
                        chain.next_sub += 1
                        a = chain.account(p[0])
                        state = None if a is None else (a.lamports, bytes(a.data), str(a.owner))
                        chain.subs[sid] = [ws, p[0], opts(p, 1).get("encoding", "base58"), state]
                        mine.add(sid)
                        out = sid
                elif method == "accountUnsubscribe":
                    sid = p[0] if p else None
                    out = chain.subs.pop(sid, None) is not None
                    mine.discard(sid)
                else:
                    out = {"code": -32601, "message": "Method not found"}
            key = "error" if isinstance(out, dict) else "result"
            await ws.send(json.dumps({"jsonrpc": "2.0", "id": cid, key: out}))
    except Exception:  # noqa: BLE001 - the connection ended
        pass
    finally:
        with chain.lock:
            for sid in mine:
                chain.subs.pop(sid, None)


def start_pubsub(chain, port):
    """The PubSub server on `port`, listening before this returns; a port another socket
    holds ends the process (the harness then starts the node on other ports)."""
    import websockets.asyncio.server as wss

    loop = asyncio.new_event_loop()
    chain.loop = loop
    bound = threading.Event()
    failed = []

    async def run():
        try:
            server = await wss.serve(lambda ws: pubsub(chain, ws), "127.0.0.1", port)
        except OSError as e:
            failed.append(e)
            bound.set()
            return
        bound.set()
        async with server:
            await asyncio.Future()

    threading.Thread(target=lambda: loop.run_until_complete(run()), daemon=True).start()
    bound.wait()
    if failed:
        print(f"sol_node: PubSub port {port}: {failed[0]}", file=sys.stderr, flush=True)
        sys.exit(1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--ws-port", type=int, help="PubSub port (default: --port + 1)")
    ap.add_argument("--slot-ms", type=int, default=200)
    ap.add_argument("--slots-per-epoch", type=int, default=32)
    args = ap.parse_args()
    chain = Chain(args.slots_per_epoch)
    start_pubsub(chain, args.ws_port or args.port + 1)
    from stub import QuietServer

    server = QuietServer(("127.0.0.1", args.port), handler_for(chain))

    def ticker():
        while True:
            time.sleep(args.slot_ms / 1000)
            chain.tick()

    if args.slot_ms > 0:
        threading.Thread(target=ticker, daemon=True).start()
    print(f"sol_node listening on {args.port}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        sys.exit(0)


if __name__ == "__main__":
    main()
