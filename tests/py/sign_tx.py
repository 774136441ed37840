"""Sign transfers with eth-account, as a wallet would: one raw transaction per line.

usage: sign_tx.py <chain_id> <first_nonce> <count>
Signed by anvil's second dev key (funded on every anvil), to anvil's third account;
type-2 (EIP-1559) except every third, which is a legacy EIP-155 transaction.
"""
import sys

from eth_account import Account

KEY = "0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d"
TO = "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC"

chain_id, first, count = (int(a) for a in sys.argv[1:4])
for nonce in range(first, first + count):
    tx = {"nonce": nonce, "gas": 21000, "to": TO, "value": 1000 + nonce, "chainId": chain_id}
    if nonce % 3 == 2:
        tx["gasPrice"] = 3_000_000_000
    else:
        tx.update(type=2, maxFeePerGas=3_000_000_000, maxPriorityFeePerGas=1_000_000_000)
    signed = Account.from_key(KEY).sign_transaction(tx)
    print("0x" + signed.raw_transaction.hex().removeprefix("0x"))
