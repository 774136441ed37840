"""web3.py against chainedge's /rpc/eth over two anvil nodes (one lagging).
Usage: web3_rpc.py URL KEY checks        normal reads, a signed transaction, a batch, an unknown method
       web3_rpc.py URL KEY load SECONDS  steady reads; prints {"ok": n, "errors": n}"""
import json
import sys
import time

from eth_account import Account
from web3 import Web3
from web3.types import RPCEndpoint

url, key, mode = sys.argv[1], sys.argv[2], sys.argv[3]
w3 = Web3(Web3.HTTPProvider(url, request_kwargs={"headers": {"x-token": key}, "timeout": 10}))

# anvil's well-known dev account #0 and #1.
SENDER_KEY = "0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80"
RECIPIENT = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8"


def checks():
    assert w3.eth.chain_id == 1
    heads = {w3.eth.block_number for _ in range(12)}
    assert len(heads) == 1, f"a lagging node answered 'latest': {heads}"
    head = heads.pop()
    assert head >= 20, head
    # A block only the leading node has.
    assert w3.eth.get_block(15)["number"] == 15
    # A signed transaction through the gateway, mined.
    sender = Account.from_key(SENDER_KEY)
    before = w3.eth.get_balance(RECIPIENT)
    tx = {
        "to": RECIPIENT, "value": 12345, "gas": 21000, "nonce": w3.eth.get_transaction_count(sender.address),
        "maxFeePerGas": 2 * 10**9, "maxPriorityFeePerGas": 10**9, "chainId": 1, "type": 2,
    }
    signed = sender.sign_transaction(tx)
    raw = signed.raw_transaction if hasattr(signed, "raw_transaction") else signed.rawTransaction
    tx_hash = w3.eth.send_raw_transaction(raw)
    receipt = w3.eth.wait_for_transaction_receipt(tx_hash, timeout=10)
    assert receipt["status"] == 1, receipt
    # Resending the same bytes is safe: the hash comes back, not an error.
    assert w3.eth.send_raw_transaction(raw) == tx_hash
    assert w3.eth.get_balance(RECIPIENT) == before + 12345
    # A batch.
    with w3.batch_requests() as batch:
        batch.add(w3.eth.get_block_number())
        batch.add(w3.eth.get_balance(RECIPIENT))
        batch.add(w3.eth.get_block(1))
        results = batch.execute()
    assert results[0] >= head and results[1] == before + 12345 and results[2]["number"] == 1, results
    # A method that is not part of the product.
    try:
        resp = w3.provider.make_request(RPCEndpoint("admin_peers"), [])
        assert "error" in resp, resp
    except Exception as e:  # the gateway answers 403 method_unknown
        assert "403" in str(e), e
    print("web3 checks passed")


def load(seconds):
    ok = errors = 0
    end = time.time() + seconds
    while time.time() < end:
        try:
            assert w3.eth.block_number > 0
            w3.eth.get_balance(RECIPIENT)
            ok += 1
        except Exception as e:
            errors += 1
            print(f"error: {e}", file=sys.stderr)
        time.sleep(0.01)
    print(json.dumps({"ok": ok, "errors": errors}))


if mode == "checks":
    checks()
else:
    load(float(sys.argv[4]))
