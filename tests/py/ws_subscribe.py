"""web3.py's WebSocketProvider through chainedge with a free-plan key: what HTTP refuses
is refused over the WebSocket too (node-admin, mining and trace methods, the node's state
unchanged), then eth_subscribe("newHeads").
Usage: ws_subscribe.py WS_URL KEY COUNT -> prints "subscribed", then the block numbers of
COUNT new heads."""
import asyncio
import sys

from web3 import AsyncWeb3, WebSocketProvider
from web3.exceptions import Web3RPCError

url, key, count = sys.argv[1], sys.argv[2], int(sys.argv[3])


async def main():
    # Refusals are error answers; web3.py keeps an answered error in its cache and would
    # raise it again from its listener for later calls unless told not to.
    provider = WebSocketProvider(
        url,
        websocket_kwargs={"extra_headers": {"x-token": key}},
        silence_listener_task_exceptions=True,
    )
    async with AsyncWeb3(provider) as w3:
        assert await w3.eth.chain_id == 1
        target = "0x000000000000000000000000000000000000dEaD"
        before = await w3.eth.get_balance(target)
        head = await w3.eth.block_number
        for method, params, code in [
            ("anvil_setBalance", [target, hex(10**18)], "method_unknown"),
            ("evm_mine", [], "method_unknown"),
            ("debug_traceBlockByNumber", ["0x0", {}], "tier_insufficient"),
        ]:
            try:
                answer = {"result": await w3.manager.coro_request(method, params)}
            except Web3RPCError as e:
                answer = e.rpc_response or {}
            error = answer.get("error") or {}
            assert "result" not in answer, (method, answer)
            assert (error.get("data") or {}).get("error") == code, (method, answer)
        assert await w3.eth.get_balance(target) == before
        assert await w3.eth.block_number == head
        sub = await w3.eth.subscribe("newHeads")
        print("subscribed", flush=True)
        seen = 0
        async for msg in w3.socket.process_subscriptions():
            assert msg["subscription"] == sub
            print(int(msg["result"]["number"]), flush=True)
            seen += 1
            if seen == count:
                break
        await w3.eth.unsubscribe(sub)


asyncio.run(asyncio.wait_for(main(), timeout=20))
