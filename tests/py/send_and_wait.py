"""web3.py's send-and-wait flow through chainedge while every node loses the transaction.
Usage: send_and_wait.py EDGE_URL KEY NODE_URL...

Sends a signed transaction through the edge's /rpc/eth, removes it from every node's
pool (anvil_dropTransaction: what a restart or an eviction does), keeps the nodes
mining, and waits for its receipt through the edge with web3.py's own
wait_for_transaction_receipt. Only the edge sending it again can make it land.
Prints {"tx_hash", "block"}."""
import json
import sys
import threading
import time

from eth_account import Account
from web3 import Web3
from web3.exceptions import TransactionNotFound
from web3.types import RPCEndpoint

edge_url, key, node_urls = sys.argv[1], sys.argv[2], sys.argv[3:]
w3 = Web3(Web3.HTTPProvider(edge_url, request_kwargs={"headers": {"x-token": key}, "timeout": 10}))
nodes = [Web3(Web3.HTTPProvider(u, request_kwargs={"timeout": 10})) for u in node_urls]

# anvil's well-known dev account #0, and #1 as the recipient.
SENDER_KEY = "0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80"
RECIPIENT = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8"

sender = Account.from_key(SENDER_KEY)
tx = {
    "to": RECIPIENT, "value": 4242, "gas": 21000,
    "nonce": w3.eth.get_transaction_count(sender.address),
    "maxFeePerGas": 2 * 10**9, "maxPriorityFeePerGas": 10**9, "chainId": 1, "type": 2,
}
signed = sender.sign_transaction(tx)
raw = signed.raw_transaction if hasattr(signed, "raw_transaction") else signed.rawTransaction
tx_hash = w3.eth.send_raw_transaction(raw)

for node in nodes:
    node.eth.get_transaction(tx_hash)  # the broadcast reached every node
    node.provider.make_request(RPCEndpoint("anvil_dropTransaction"), [tx_hash.to_0x_hex()])
    try:
        node.eth.get_transaction(tx_hash)
        raise AssertionError(f"{node.provider.endpoint_uri} still holds it")
    except TransactionNotFound:
        pass

stop = threading.Event()


def mine():
    while not stop.is_set():
        for node in nodes:
            node.provider.make_request(RPCEndpoint("evm_mine"), [])
        time.sleep(0.3)


miner = threading.Thread(target=mine, daemon=True)
miner.start()
try:
    receipt = w3.eth.wait_for_transaction_receipt(tx_hash, timeout=30, poll_latency=0.2)
finally:
    stop.set()
    miner.join()
assert receipt["status"] == 1, receipt
assert receipt["transactionHash"] == tx_hash
print(json.dumps({"tx_hash": tx_hash.to_0x_hex(), "block": receipt["blockNumber"]}))
