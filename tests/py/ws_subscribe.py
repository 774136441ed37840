"""eth_subscribe("newHeads") through chainedge with web3.py's WebSocketProvider.
Usage: ws_subscribe.py WS_URL KEY COUNT -> prints the block numbers of COUNT new heads."""
import asyncio
import sys

from web3 import AsyncWeb3, WebSocketProvider

url, key, count = sys.argv[1], sys.argv[2], int(sys.argv[3])


async def main():
    provider = WebSocketProvider(url, websocket_kwargs={"extra_headers": {"x-token": key}})
    async with AsyncWeb3(provider) as w3:
        assert await w3.eth.chain_id == 1
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
