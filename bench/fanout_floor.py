"""The bare broadcast of bench/fanout.py: the floor of delivering a turn's chunks to N clients.

    python bench/fanout_floor.py PORT CHUNKS SESSION_ID   (bench/fanout.py starts it)

A `websockets` asyncio server under uvloop (the library agentd's uvicorn speaks WebSocket
with, no compression) that answers every request with an empty result (the clients' hello:
initialize, attach) and, on each "turn" line on stdin, sends every client the frames agentd
sends for a turn of CHUNKS numbered chunks — agent_message_chunk frames of agentd's own
shape, then a turn_ended event — all encoded before the first is sent (`websockets.broadcast`:
one write per frame per client, no task per client), then answers "done" on stdout. What it
leaves out is everything agentd does besides the writes: the model's stream, the turn, the
event log, each client's outgoing queue.
"""

from __future__ import annotations

import asyncio
import sys

import orjson
import uvloop
from websockets.asyncio.server import ServerConnection, broadcast, serve
from websockets.exceptions import ConnectionClosed

CHUNK_WIDTH = 7  # as bench/turnkit.py numbers chunks


def frames(chunks: int, sid: str) -> list[str]:
    """agentd's frames for one turn's answer (tests/e2e/transport/golden: the same shape)."""
    out = []
    for i in range(chunks):
        text = {"type": "text", "text": f"{i:0{CHUNK_WIDTH}d}"}
        update = {
            "sessionUpdate": "agent_message_chunk",
            "content": text,
            "messageId": "msg_0e026d6bc848426f",
        }
        params = {"sessionId": sid, "update": update, "_meta": {"agentd": {"seq": 8, "transient": True}}}
        out.append(orjson.dumps({"jsonrpc": "2.0", "method": "session/update", "params": params}).decode())
    event = {"outcome": "completed", "stopReason": "end_turn"}
    ended = {"sessionId": sid, "kind": "turn_ended", "event": event, "_meta": {"agentd": {"seq": 9}}}
    out.append(orjson.dumps({"jsonrpc": "2.0", "method": "_agentd/event", "params": ended}).decode())
    return out


async def main(port: int, chunks: int, sid: str) -> None:
    clients: set[ServerConnection] = set()

    async def handle(ws: ServerConnection) -> None:
        clients.add(ws)
        try:
            async for text in ws:
                rid = orjson.loads(text).get("id")
                await ws.send(orjson.dumps({"jsonrpc": "2.0", "id": rid, "result": {}}).decode())
        except ConnectionClosed:  # the bench's raw clients just drop the connection
            pass
        finally:
            clients.discard(ws)

    loop = asyncio.get_running_loop()
    encoded = frames(chunks, sid)  # before any turn: the floor sends, it does not encode
    async with serve(handle, "127.0.0.1", port, compression=None, max_size=None):
        print("ready", flush=True)
        while (await loop.run_in_executor(None, sys.stdin.readline)).strip() == "turn":
            for frame in encoded:
                broadcast(clients, frame)
                await asyncio.sleep(0)  # as agentd: the loop runs between two chunks
            print("done", flush=True)


if __name__ == "__main__":
    uvloop.run(main(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]))
