#!/usr/bin/env python3
"""Demo traffic: deploy the test tokens (tests/contracts/Tokens.json, source next to it)
on the demo chains and keep a small steady flow of transfers and mints, so the wallet
endpoints answer with real data within seconds.

    scripts/demo_flow.py ETH_PORT[,ETH_PORT...] POLYGON_PORT

Every transaction goes to each port of a chain (the demo's two Ethereum nodes are kept
as one chain: anvil signs deterministically, so both get the same transaction). Uses
anvil's unlocked first dev account; standard library only.
"""
import json
import os
import sys
import time
import urllib.request

DEV = "0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266"
# The wallets the demo's curl examples ask about.
ALICE = "0x00000000000000000000000000000000000a11ce"
BOB = "0x0000000000000000000000000000000000000b0b"
# Selectors (keccak-256 of the signatures, first 4 bytes).
MINT = "40c10f19"          # mint(address,uint256)
TRANSFER = "a9059cbb"      # transfer(address,uint256)
MINT_1155 = "156e29f6"     # mint(address,uint256,uint256)
MINT_BATCH = "d81d0a15"    # mintBatch(address,uint256[],uint256[])

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BYTECODE = json.load(open(os.path.join(ROOT, "tests/contracts/Tokens.json")))["bytecode"]


def rpc(port, method, params):
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}", body, {"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=5) as r:
        return json.load(r).get("result")


def word(v):
    return v[2:].rjust(64, "0") if isinstance(v, str) else format(v, "064x")


def string_tail(s):
    h = s.encode().hex()
    return format(len(s), "064x") + h.ljust(((len(h) + 63) // 64) * 64 or 64, "0")


def live(ports, method, params):
    """Ask every node that answers (one killed or frozen to try failover is passed
    over); the first answer, or None when no node answered."""
    answers = []
    for p in ports:
        try:
            answers.append(rpc(p, method, params))
        except (OSError, ValueError):
            pass
    return answers[0] if answers else None


def send(ports, to, data, value=0):
    tx = {"from": DEV, "data": "0x" + data.removeprefix("0x"), "value": hex(value), "gas": hex(8_000_000)}
    if to:
        tx["to"] = to
    return live(ports, "eth_sendTransaction", [tx])


def receipt(ports, tx_hash, within=30):
    until = time.time() + within
    while time.time() < until:
        r = live(ports, "eth_getTransactionReceipt", [tx_hash])
        if r:
            return r
        time.sleep(0.2)
    raise SystemExit(f"demo flow: {tx_hash} not mined")


def deploy(ports, contracts):
    """Send every deployment at once, then wait for them: {name: address}."""
    sent = {name: send(ports, None, BYTECODE[kind] + args) for name, (kind, args) in contracts.items()}
    return {name: receipt(ports, h)["contractAddress"] for name, h in sent.items()}


def main():
    chains = {"eth": [int(p) for p in sys.argv[1].split(",")], "polygon": [int(sys.argv[2])]}
    tokens = {}
    for chain, ports in chains.items():
        erc20_args = word(96) + word(160) + word(6) + string_tail("Demo USD") + string_tail("DUSD")
        t = deploy(ports, {
            "erc20": ("Erc20", erc20_args),
            "odd": ("OddToken", ""),
            "erc721": ("Erc721", ""),
            "erc1155": ("Erc1155", ""),
        })
        send(ports, t["erc20"], MINT + word(DEV) + word(10**15))
        tokens[chain] = t
        print(f"demo flow: {chain} tokens {json.dumps(t)}", flush=True)
    n = 0
    while True:
        n += 1
        for chain, ports in chains.items():
            t = tokens[chain]
            to = ALICE if n % 2 else BOB
            send(ports, t["erc20"], TRANSFER + word(to) + word(1000 * n))
            send(ports, to, "", 10**15 * n)
            send(ports, t["erc721"], MINT + word(to) + word(n))
            send(ports, t["erc1155"], MINT_1155 + word(to) + word(n % 3) + word(n))
            if n % 5 == 0:
                send(ports, t["odd"], MINT + word(to) + word(n))
                batch = word(to) + word(96) + word(192) + word(2) + word(10) + word(11) + word(2) + word(n) + word(n)
                send(ports, t["erc1155"], MINT_BATCH + batch)
        time.sleep(3)


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        pass
