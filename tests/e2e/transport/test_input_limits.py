"""R-X3: input limits — JSON depth, request rate, prompt size, queue length, sessions per
principal (frame size: tests/e2e/transport/test_protocol_errors.py). A violation gets a clear
JSON-RPC error (-32019 `limit_exceeded` with `data.limit`) and leaves the connection,
the session and the data intact."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx
import pytest

from agentd.protocol.acp import EmbeddedResource, EmbeddedResourceBody, ImageContent, TextContent
from agentd.transport.guards import RateLimiter, json_depth, prompt_bytes
from tests.support.client import RpcFailed, text_prompt
from tests.support.clock import FakeClock
from tests.support.server import scripted

LIMIT_EXCEEDED = -32019


def nested(depth: int) -> object:
    value: object = 1
    for _ in range(depth):
        value = {"a": [value]} if _ % 2 else [value]
    return value


def test_json_depth_counts_containers_without_recursion() -> None:
    assert json_depth(1) == 0
    assert json_depth([]) == 1
    assert json_depth({"a": [1, {"b": 2}]}) == 3
    assert json_depth(nested(100_000)) > 100_000  # no RecursionError


def test_rate_limiter_allows_a_burst_then_the_average_rate() -> None:
    now = [0.0]
    limiter = RateLimiter(rate=2.0, burst=3, clock=lambda: now[0])
    assert [limiter.allow("a") for _ in range(3)] == [None, None, None]
    wait = limiter.allow("a")
    assert wait == pytest.approx(0.5)
    assert limiter.allow("b") is None  # per principal
    now[0] += 0.5
    assert limiter.allow("a") is None
    assert limiter.allow("a") is not None
    assert RateLimiter(rate=0, burst=0).allow("a") is None  # off


def test_prompt_size_counts_text_and_embedded_resources() -> None:
    blocks = [
        TextContent(text="héllo"),
        EmbeddedResource(resource=EmbeddedResourceBody(uri="file:///a", text="x" * 10)),
        ImageContent(data="AAAA", mime_type="image/png"),
    ]
    assert prompt_bytes(blocks[:2]) == 6 + 10
    assert prompt_bytes(blocks) > 16


async def test_too_deep_json_is_refused_and_the_connection_goes_on(server_factory, workspace: Path) -> None:
    async with server_factory(scripted({"text": "hi"}), max_json_depth=20) as server:
        client = await server.client()
        deep = {"jsonrpc": "2.0", "id": 7, "method": "session/list", "params": {"_meta": nested(30)}}
        await client.send_raw(json.dumps(deep))
        answer = await client.next_unmatched()
        assert answer["id"] == 7 and answer["error"]["code"] == -32600
        assert "nested deeper than 20" in answer["error"]["message"]
        # Hostile depth far beyond any parser's recursion: still a readable error.
        await client.send_raw("[" * 200_000 + "]" * 200_000)
        hostile = await client.next_unmatched()
        assert hostile["error"]["code"] in (-32700, -32600)
        assert (await client.call("session/list", {}))["sessions"] == []
        async with httpx.AsyncClient(base_url=server.base_url, timeout=30) as http:
            resp = await http.post("/rpc", json=deep)
            assert resp.json()["error"]["code"] == -32600
        await client.close()


async def test_requests_beyond_the_rate_get_retry_after_and_later_succeed(server_factory) -> None:
    # The limiter's clock is the test's: it stands still while the burst is spent and moves
    # by exactly the retryAfter the refusal named, so the outcome does not depend on speed.
    clock = FakeClock()  # moved by powers of two: exact in floating point
    async with server_factory(
        scripted({"text": "hi"}), rate_limit_per_s=4.0, rate_limit_burst=4, clock=clock
    ) as server:
        client = await server.client()  # `initialize` took one token
        outcomes, waits = [], []
        for _ in range(5):
            try:
                await client.call("session/list", {})
                outcomes.append("ok")
            except RpcFailed as exc:
                assert exc.code == LIMIT_EXCEEDED and exc.error["data"]["limit"] == "rate"
                outcomes.append("limited")
                waits.append(exc.error["data"]["retryAfter"])
        assert outcomes == ["ok", "ok", "ok", "limited", "limited"]
        assert waits == [0.25, 0.25]  # one token at 4 a second
        # A cancel is never rate-limited (it is a notification: no answer either way).
        await client.notify("session/cancel", {"sessionId": "sess_x"})
        clock.advance(0.125)  # half a token: still refused, with the rest of the wait
        with pytest.raises(RpcFailed) as early:
            await client.call("session/list", {})
        assert early.value.error["data"]["retryAfter"] == 0.125
        clock.advance(0.125)  # the wait it named: one request more, not two
        assert (await client.call("session/list", {}))["sessions"] == []
        with pytest.raises(RpcFailed):
            await client.call("session/list", {})
        await client.close()


async def test_an_oversized_prompt_is_refused_and_the_session_is_untouched(
    server_factory, workspace: Path
) -> None:
    provider = scripted({"text": "small one answered"})
    async with server_factory(provider, max_prompt_bytes=1000) as server:
        client = await server.client()
        sid = (await client.call("session/new", {"cwd": str(workspace), "mcpServers": []}))["sessionId"]
        for method in ("session/prompt", "_agentd/prompt/enqueue", "_agentd/interject"):
            with pytest.raises(RpcFailed) as refused:
                await client.call(method, text_prompt(sid, "x" * 1001))
            assert refused.value.code == LIMIT_EXCEEDED
            assert refused.value.error["data"] == {"limit": "prompt_bytes", "max": 1000, "size": 1001}
        assert provider.requests == []
        result = await client.call("session/prompt", text_prompt(sid, "x" * 1000))
        assert result["stopReason"] == "end_turn"
        await client.close()


async def test_a_full_queue_refuses_more_prompts(server_factory, workspace: Path) -> None:
    provider = scripted({"text": "working", "delay": 30}, {"text": "a"}, {"text": "b"})
    async with server_factory(provider, max_queue_length=2) as server:
        client = await server.client()
        sid = (await client.call("session/new", {"cwd": str(workspace), "mcpServers": []}))["sessionId"]
        running = asyncio.create_task(client.request("session/prompt", text_prompt(sid, "long job")))
        await client.wait_notification(
            lambda m: m["method"] == "_agentd/event" and m["params"]["kind"] == "turn_started"
        )
        for text in ("a", "b"):
            await client.call("_agentd/prompt/enqueue", text_prompt(sid, text))
        with pytest.raises(RpcFailed) as refused:
            await client.call("_agentd/prompt/enqueue", text_prompt(sid, "c"))
        assert refused.value.code == LIMIT_EXCEEDED
        assert refused.value.error["data"] == {"limit": "queue_length", "max": 2}
        with pytest.raises(RpcFailed):
            await client.call("session/prompt", text_prompt(sid, "d"))
        listed = await client.call("_agentd/queue/list", {"sessionId": sid})
        assert [e["text"] for e in listed["queue"]] == ["a", "b"]  # nothing lost, nothing added
        await client.notify("session/cancel", {"sessionId": sid})
        await running
        await client.close()


async def test_sessions_per_principal_are_capped(server_factory, workspace: Path, db_url: str) -> None:
    async with server_factory(scripted(), database_url=db_url, max_sessions_per_principal=2) as server:
        client = await server.client()
        new = {"cwd": str(workspace), "mcpServers": []}
        first = (await client.call("session/new", new))["sessionId"]
        await client.call("session/new", new)
        with pytest.raises(RpcFailed) as refused:
            await client.call("session/new", new)
        assert refused.value.code == LIMIT_EXCEEDED
        assert refused.value.error["data"] == {"limit": "sessions", "max": 2}
        await client.call("session/delete", {"sessionId": first})
        assert (await client.call("session/new", new))["sessionId"]  # room again
        await client.close()
