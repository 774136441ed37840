#!/usr/bin/env python3
"""A Solana wallet for the tests, speaking JSON-RPC to a node (tests/standins/sol_node.py).

    sol_client.py fixture URL          build a chain state with real transactions; print it
    sol_client.py transfer URL SECRET TO LAMPORTS [--corrupt]
                                       print a signed transfer (base64), not sent
    sol_client.py deactivate URL SECRET STAKE
                                       deactivate a stake account (sent)

Every answer the fixture reads is parsed by solders' RPC response types, so the node's
wire shapes are checked by a real client library as a side effect.
"""

import base64
import json
import struct
import sys
import urllib.request

from solders.hash import Hash
from solders.instruction import AccountMeta, Instruction
from solders.keypair import Keypair
from solders.message import Message
from solders.pubkey import Pubkey
from solders.rpc import responses as R
from solders.system_program import CreateAccountParams, TransferParams, create_account, transfer
from solders.transaction import VersionedTransaction

TOKEN = Pubkey.from_string("TokenkegQfeZyiNwAJbNbGKPFXCWuBvf9Ss623VQ5DA")
TOKEN_2022 = Pubkey.from_string("TokenzQdBNbLqP5VEhdkAS6EPFLC1PHnBqCXEpPxuEb")
VOTE = Pubkey.from_string("Vote111111111111111111111111111111111111111")
STAKE = Pubkey.from_string("Stake11111111111111111111111111111111111111")
RENT = Pubkey.from_string("SysvarRent111111111111111111111111111111111")
CLOCK = Pubkey.from_string("SysvarC1ock11111111111111111111111111111111")
HISTORY = Pubkey.from_string("SysvarStakeHistory1111111111111111111111111")
STAKE_CONFIG = Pubkey.from_string("StakeConfig11111111111111111111111111111111")
SOL = 1_000_000_000


class Node:
    def __init__(self, url):
        self.url = url
        self.n = 0

    def raw(self, method, params):
        self.n += 1
        body = json.dumps({"jsonrpc": "2.0", "id": self.n, "method": method, "params": params}).encode()
        req = urllib.request.Request(self.url, body, {"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.read().decode()

    def call(self, method, params, parser=None):
        text = self.raw(method, params)
        if parser is not None:
            parsed = parser.from_json(text)
            if not hasattr(parsed, "value") and not hasattr(parsed, "result"):
                raise SystemExit(f"{method}: {text}")
        v = json.loads(text)
        if "error" in v:
            raise SystemExit(f"{method}: {v['error']}")
        return v["result"]

    def blockhash(self):
        return Hash.from_string(self.call("getLatestBlockhash", [], R.GetLatestBlockhashResp)["value"]["blockhash"])

    def sign(self, ixs, payer, signers):
        msg = Message.new_with_blockhash(ixs, payer.pubkey(), self.blockhash())
        return VersionedTransaction(msg, signers)

    def send(self, ixs, payer, signers):
        tx = self.sign(ixs, payer, signers)
        wire = base64.b64encode(bytes(tx)).decode()
        return self.call("sendTransaction", [wire, {"encoding": "base64"}], R.SendTransactionResp)


def create(node, payer, new, space, owner):
    lamports = node.call("getMinimumBalanceForRentExemption", [space])
    return create_account(CreateAccountParams(from_pubkey=payer.pubkey(), to_pubkey=new.pubkey(),
                                              lamports=lamports, space=space, owner=owner))


def mint(node, payer, program, decimals):
    m = Keypair()
    init = Instruction(program, bytes([20, decimals]) + bytes(payer.pubkey()) + b"\0",
                       [AccountMeta(m.pubkey(), False, True)])
    node.send([create(node, payer, m, 82, program), init], payer, [payer, m])
    return m.pubkey()


def token_account(node, payer, program, mint_key, owner, amount):
    a = Keypair()
    init = Instruction(program, bytes([18]) + bytes(owner),
                       [AccountMeta(a.pubkey(), False, True), AccountMeta(mint_key, False, False)])
    mint_to = Instruction(program, bytes([7]) + struct.pack("<Q", amount),
                          [AccountMeta(mint_key, False, True), AccountMeta(a.pubkey(), False, True),
                           AccountMeta(payer.pubkey(), True, False)])
    node.send([create(node, payer, a, 165, program), init, mint_to], payer, [payer, a])
    return a.pubkey()


def vote_account(node, payer):
    v, identity = Keypair(), Keypair()
    init = Instruction(VOTE, struct.pack("<I", 0) + bytes(identity.pubkey()) + bytes(v.pubkey())
                       + bytes(payer.pubkey()) + bytes([5]),
                       [AccountMeta(v.pubkey(), False, True), AccountMeta(RENT, False, False),
                        AccountMeta(CLOCK, False, False), AccountMeta(identity.pubkey(), True, False)])
    node.send([create(node, payer, v, 3762, VOTE), init], payer, [payer, v, identity])
    return v.pubkey()


def stake_account(node, payer, vote, lamports):
    s = Keypair()
    make = create_account(CreateAccountParams(from_pubkey=payer.pubkey(), to_pubkey=s.pubkey(),
                                              lamports=lamports, space=200, owner=STAKE))
    init = Instruction(STAKE, struct.pack("<I", 0) + bytes(payer.pubkey()) + bytes(payer.pubkey())
                       + struct.pack("<qQ", 0, 0) + bytes(32),
                       [AccountMeta(s.pubkey(), False, True), AccountMeta(RENT, False, False)])
    delegate = Instruction(STAKE, struct.pack("<I", 2),
                           [AccountMeta(s.pubkey(), False, True), AccountMeta(vote, False, False),
                            AccountMeta(CLOCK, False, False), AccountMeta(HISTORY, False, False),
                            AccountMeta(STAKE_CONFIG, False, False), AccountMeta(payer.pubkey(), True, False)])
    node.send([make, init, delegate], payer, [payer, s])
    return s.pubkey()


def deactivate(node, payer, stake):
    ix = Instruction(STAKE, struct.pack("<I", 5),
                     [AccountMeta(stake, False, True), AccountMeta(CLOCK, False, False),
                      AccountMeta(payer.pubkey(), True, False)])
    return node.send([ix], payer, [payer])


def fixture(url):
    node = Node(url)
    payer, wallet = Keypair(), Keypair()
    node.call("requestAirdrop", [str(payer.pubkey()), 1000 * SOL])
    for lamports in (2 * SOL, 3 * SOL, SOL // 2):
        node.send([transfer(TransferParams(from_pubkey=payer.pubkey(), to_pubkey=wallet.pubkey(),
                                           lamports=lamports))], payer, [payer])
    m = mint(node, payer, TOKEN, 6)
    token_account(node, payer, TOKEN, m, wallet.pubkey(), 1_500_000)
    m22 = mint(node, payer, TOKEN_2022, 2)
    token_account(node, payer, TOKEN_2022, m22, wallet.pubkey(), 12_345)
    nft = mint(node, payer, TOKEN, 0)
    token_account(node, payer, TOKEN, nft, wallet.pubkey(), 1)
    for name in ("Demo leaf 1", "Demo leaf 2"):  # compressed, in the node's DAS index
        node.call("shim_mintCompressedNft", [str(wallet.pubkey()), name])
    v1, v2 = vote_account(node, payer), vote_account(node, payer)
    stakes_v1 = [stake_account(node, payer, v1, (10 + i) * SOL) for i in range(3)]
    stake_v2 = stake_account(node, payer, v2, 7 * SOL)
    # Shapes as a client library reads them.
    node.call("getBalance", [str(wallet.pubkey())], R.GetBalanceResp)
    node.call("getAccountInfo", [str(wallet.pubkey()), {"encoding": "base64"}], R.GetAccountInfoResp)
    node.call("getTokenAccountsByOwner", [str(wallet.pubkey()), {"programId": str(TOKEN)}, {"encoding": "jsonParsed"}],
              R.GetTokenAccountsByOwnerJsonParsedResp)
    node.call("getSignaturesForAddress", [str(wallet.pubkey()), {"limit": 10}], R.GetSignaturesForAddressResp)
    node.call("getEpochInfo", [], R.GetEpochInfoResp)
    print(json.dumps({
        "payer_secret": bytes(payer).hex(), "wallet": str(wallet.pubkey()), "wallet_secret": bytes(wallet).hex(),
        "mint": str(m), "mint22": str(m22), "nft": str(nft), "vote1": str(v1), "vote2": str(v2),
        "stakes_v1": [str(s) for s in stakes_v1], "stake_v2": str(stake_v2),
    }))


def main():
    cmd, url = sys.argv[1], sys.argv[2]
    if cmd == "fixture":
        fixture(url)
    elif cmd == "transfer":
        node = Node(url)
        payer = Keypair.from_bytes(bytes.fromhex(sys.argv[3]))
        ix = transfer(TransferParams(from_pubkey=payer.pubkey(), to_pubkey=Pubkey.from_string(sys.argv[4]),
                                     lamports=int(sys.argv[5])))
        wire = bytearray(bytes(node.sign([ix], payer, [payer])))
        if "--corrupt" in sys.argv:
            wire[5] ^= 0xFF  # inside the first signature
        print(base64.b64encode(bytes(wire)).decode())
    elif cmd == "deactivate":
        node = Node(url)
        payer = Keypair.from_bytes(bytes.fromhex(sys.argv[3]))
        print(deactivate(node, payer, Pubkey.from_string(sys.argv[4])))
    else:
        raise SystemExit(f"unknown command {cmd}")


if __name__ == "__main__":
    main()
