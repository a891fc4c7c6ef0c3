"""Issue 28 item 4: fairness by cost. A prompt's content blocks are capped (`-32019`
`prompt_blocks`, decided before the prompt is read further, the connection intact), and the
per-principal limiter charges a prompt by its size: while principal A floods with the
largest valid prompts, A is refused (`-32019` `rate`) most of the time and B's trivial turns
are all served. No timing is asserted here: bench/fairness.py prints B's and /healthz's p99
with and without the flood."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from agentd.infra.auth import create_token
from agentd.infra.config import AuthMode
from tests.support.client import WsClient
from tests.support.server import scripted
from tests.support.session import new_session

LIMIT_EXCEEDED = -32019
MAX_BLOCKS = 1000


def blocks(n: int, size: int) -> list[dict[str, str]]:
    return [{"type": "text", "text": "x" * size} for _ in range(n)]


def prompt(sid: str, content: list[dict[str, str]]) -> dict[str, Any]:
    return {"sessionId": sid, "prompt": content}


async def test_a_prompt_over_the_block_cap_is_refused_and_nothing_else_changes(
    server_factory, workspace: Path
) -> None:
    async with server_factory(scripted({"text": "ok"}, loop=True)) as server:
        client = await server.client()
        sid = await new_session(client, workspace)
        # The shape: 50,000 one-character blocks, far under the byte limit.
        for n in (MAX_BLOCKS + 1, 50_000):
            answer = await client.request("session/prompt", prompt(sid, blocks(n, 1)))
            error = answer["error"]
            assert error["code"] == LIMIT_EXCEEDED, error
            assert error["data"] == {"limit": "prompt_blocks", "max": MAX_BLOCKS, "size": n}
            queued = await client.request("_agentd/prompt/enqueue", prompt(sid, blocks(n, 1)))
            assert queued["error"]["data"]["limit"] == "prompt_blocks"
        # At the cap it is a prompt like any other; the connection and session are intact.
        ok = await client.call("session/prompt", prompt(sid, blocks(MAX_BLOCKS, 1)))
        assert ok["stopReason"] == "end_turn"
        assert (await client.call("_agentd/queue/list", {"sessionId": sid}))["queue"] == []
        await client.close()


async def test_a_principal_flooding_with_the_largest_valid_prompts_is_limited_and_another_is_served(
    server_factory, workspace: Path
) -> None:
    async with server_factory(
        scripted({"text": "ok"}, loop=True),
        auth=AuthMode.TOKEN,
        workspace_grants={"a": [workspace], "b": [workspace]},
    ) as server:
        store = server.app.state.agentd.store
        token_a, _ = await create_token(store, "a")
        token_b, _ = await create_token(store, "b")
        flooders = [await WsClient.connect(server.base_url, token=token_a) for _ in range(3)]
        canary = await WsClient.connect(server.base_url, token=token_b)
        sid_a = await new_session(flooders[0], workspace)
        sid_b = await new_session(canary, workspace)
        # The largest valid prompt: the block cap, just under the byte limit.
        worst = prompt(sid_a, blocks(MAX_BLOCKS, 1000))
        outcomes: list[str] = []
        stop = asyncio.Event()

        async def flood(client: WsClient) -> None:
            while not stop.is_set():
                answer = await client.request("_agentd/prompt/enqueue", worst)
                if "error" not in answer:
                    outcomes.append("accepted")
                    continue
                error = answer["error"]
                assert error["code"] == LIMIT_EXCEEDED, error
                outcomes.append(error["data"]["limit"])  # rate (or a queue limit)

        flooding = [asyncio.create_task(flood(c)) for c in flooders]
        try:
            served = []
            for i in range(8):  # B's trivial turns, each answered while A floods
                result = await canary.call(
                    "session/prompt", prompt(sid_b, [{"type": "text", "text": f"hi {i}"}])
                )
                served.append(result["stopReason"])
        finally:
            stop.set()
            await asyncio.gather(*flooding)
        assert served == ["end_turn"] * 8  # B was never refused
        # A's flood was charged by its size: most of it refused by the rate limit.
        assert outcomes.count("rate") > outcomes.count("accepted") >= 1, outcomes
        for client in (*flooders, canary):
            await client.close()
