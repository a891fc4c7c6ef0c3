"""The usage ledger (R-R4), end to end over a real WebSocket.

- per prompt: `turn_ended.turn.usage` holds only that prompt's provider calls (input,
  output, cache read, cache write, cost, calls, per lane);
- per session: `turn_ended.sessionUsage` and `_agentd/usage/get` accumulate across
  prompts, are persisted in the sessions table and survive a restart (SQLite and
  Postgres); a failed prompt's spend counts too;
- cost comes from the `prices` setting (USD per million tokens, cache tokens priced apart);
- the ACP `usage_update` session/update carries used/size (and cost when prices are set);
- a cancelled prompt whose stream never reported usage marks the ledger `dirty`.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from agentd.core import Price
from agentd.core.provider import Usage
from agentd.protocol.jsonrpc import ErrorCode
from agentd.providers.openai.chat import OpenAIProvider
from agentd.store.db import Store
from tests.support.client import WsClient, text_prompt
from tests.support.fakes import openai_server as oai
from tests.support.server import scripted
from tests.support.session import events as ext_events
from tests.support.session import is_update, served_session

MODEL = "test-model"
# $3 / $15 per million input / output tokens, cache reads at a tenth, cache writes at 1.25x.
PRICES = {MODEL: {"input": 3.0, "output": 15.0, "cache_read": 0.3, "cache_write": 3.75}}
PRICE = Price(3.0, 15.0, 0.3, 3.75)

# ---------------------------------------------------------------------------- helpers


def tokens(ledger: dict[str, Any]) -> tuple[int, int, int, int]:
    return (
        ledger["inputTokens"],
        ledger["outputTokens"],
        ledger["cacheReadTokens"],
        ledger["cacheWriteTokens"],
    )


def usage_of(**u: int) -> dict[str, int]:
    return {"input_tokens": 0, "output_tokens": 0, "cache_read_tokens": 0, "cache_write_tokens": 0, **u}


async def usage_get(client: WsClient, session_id: str) -> dict[str, Any]:
    result = await client.call("_agentd/usage/get", {"sessionId": session_id})
    assert result["sessionId"] == session_id
    return result["session"]


async def stored_usage(db_url: str, session_id: str) -> dict[str, Any] | None:
    store = await Store.open(db_url)
    try:
        record = await store.get_session(session_id)
    finally:
        await store.close()
    assert record is not None
    return record.usage


# Prompt 1: a tool call (1000 in, 200 out, 10 000 cache read, 800 cache write → $0.012),
# then the answer (500 in, 100 out). Prompt 2: one answer with a cache read.
# Prompt 3 (after the restart): one more answer.
CALL_1 = Usage(1000, 200, 10_000, 800)
CALL_2 = Usage(500, 100)
CALL_3 = Usage(40, 10, 2000, 0)
CALL_4 = Usage(7, 3)


def step_usage(u: Usage) -> dict[str, int]:
    return {
        "input_tokens": u.input_tokens,
        "output_tokens": u.output_tokens,
        "cache_read_tokens": u.cache_read_tokens,
        "cache_write_tokens": u.cache_write_tokens,
    }


def total(*calls: Usage) -> tuple[int, int, int, int]:
    return (
        sum(c.input_tokens for c in calls),
        sum(c.output_tokens for c in calls),
        sum(c.cache_read_tokens for c in calls),
        sum(c.cache_write_tokens for c in calls),
    )


# ---------------------------------------------------------------------------- per prompt / per session


async def test_prompt_and_session_ledgers_accumulate_and_survive_a_restart(
    server_factory, workspace: Path, db_url: str
) -> None:
    first = scripted(
        {
            "text": "Looking.",
            "tool_calls": [{"name": "list_dir", "arguments": {"path": "."}}],
            "usage": step_usage(CALL_1),
        },
        {"text": "There is nothing here.", "usage": step_usage(CALL_2)},
        {"expect": "again", "text": "Still nothing.", "usage": step_usage(CALL_3)},
    )
    async with served_session(
        server_factory, workspace, first, database_url=db_url, model=MODEL, prices=PRICES
    ) as (_, client, sid):
        assert await usage_get(client, sid) == {
            "inputTokens": 0,
            "outputTokens": 0,
            "cacheReadTokens": 0,
            "cacheWriteTokens": 0,
            "totalTokens": 0,
            "cost": 0,
            "calls": 0,
            "dirty": False,
            "byLane": {},
        }

        answer = await client.call("session/prompt", text_prompt(sid, "what is here?"))
        ended = ext_events(client, sid, "turn_ended")[0]
        prompt1 = ended["turn"]["usage"]
        assert answer["_meta"]["agentd"]["usage"] == prompt1  # the response carries it too
        assert tokens(prompt1) == total(CALL_1, CALL_2)
        assert prompt1["totalTokens"] == sum(total(CALL_1, CALL_2))  # cache tokens are tokens too
        assert prompt1["calls"] == 2 and prompt1["dirty"] is False
        assert PRICE.cost(CALL_1) == pytest.approx(0.012)
        assert prompt1["cost"] == pytest.approx(PRICE.cost(CALL_1) + PRICE.cost(CALL_2))
        assert set(prompt1["byLane"]) == {"primary"}
        assert tokens(prompt1["byLane"]["primary"]) == tokens(prompt1)
        assert ended["sessionUsage"] == prompt1  # the first prompt is the whole session so far
        assert await usage_get(client, sid) == prompt1

        await client.call("session/prompt", text_prompt(sid, "look again"))
        ended = ext_events(client, sid, "turn_ended")[1]
        prompt2 = ended["turn"]["usage"]
        assert tokens(prompt2) == total(CALL_3) and prompt2["calls"] == 1  # only this prompt
        assert prompt2["cost"] == pytest.approx(PRICE.cost(CALL_3))
        session = ended["sessionUsage"]
        assert tokens(session) == total(CALL_1, CALL_2, CALL_3)
        assert session["calls"] == 3
        assert session["cost"] == pytest.approx(PRICE.cost(CALL_1) + PRICE.cost(CALL_2) + PRICE.cost(CALL_3))
        assert tokens(session["byLane"]["primary"]) == tokens(session)
        assert await usage_get(client, sid) == session

    assert await stored_usage(db_url, sid) == session  # persisted with the session

    second = scripted({"expect": "once more", "text": "Nothing, still.", "usage": step_usage(CALL_4)})
    async with server_factory(second, database_url=db_url, model=MODEL, prices=PRICES) as server:
        client = await server.client()
        # Straight after the restart, without a session/load: the ledger comes from the store.
        assert await usage_get(client, sid) == session
        await client.call("session/load", {"sessionId": sid, "cwd": str(workspace), "mcpServers": []})
        await client.call("session/prompt", text_prompt(sid, "once more"))
        ended = ext_events(client, sid, "turn_ended")[-1]
        assert tokens(ended["turn"]["usage"]) == total(CALL_4)
        after = await usage_get(client, sid)
        assert tokens(after) == total(CALL_1, CALL_2, CALL_3, CALL_4)
        assert after["calls"] == 4
        assert after["cost"] == pytest.approx(sum(PRICE.cost(c) for c in (CALL_1, CALL_2, CALL_3, CALL_4)))
        assert ended["sessionUsage"] == after
        await client.close()
    assert await stored_usage(db_url, sid) == after


async def test_no_prices_means_zero_cost(server_factory, workspace: Path) -> None:
    provider = scripted({"text": "Hi.", "usage": step_usage(CALL_1)})
    async with served_session(server_factory, workspace, provider, model=MODEL) as (_, client, sid):
        await client.call("session/prompt", text_prompt(sid, "hi"))
        session = await usage_get(client, sid)
        assert tokens(session) == total(CALL_1)
        assert session["cost"] == 0


async def test_a_failed_prompt_still_counts_what_it_spent(server_factory, workspace: Path) -> None:
    provider = scripted(
        {
            "text": "Looking.",
            "tool_calls": [{"name": "list_dir", "arguments": {"path": "."}}],
            "usage": step_usage(CALL_2),
        },
        {"error": {"kind": "invalid_request", "message": "bad request", "status": 400}},
    )
    async with served_session(server_factory, workspace, provider, model=MODEL, prices=PRICES) as (
        _,
        client,
        sid,
    ):
        resp = await client.request("session/prompt", text_prompt(sid, "go"))

        assert resp["error"]["code"] == ErrorCode.TURN_FAILED
        ended = ext_events(client, sid, "turn_ended")[0]
        usage = ended["turn"]["usage"]
        assert tokens(usage) == total(CALL_2)
        assert usage["calls"] == 2
        # The failed call was refused (HTTP 400) before any output: it spent nothing.
        assert usage["dirty"] is False
        assert ended["sessionUsage"] == usage == await usage_get(client, sid)


# ---------------------------------------------------------------------------- usage_update


async def test_usage_update_carries_used_size_and_cost(server_factory, workspace: Path) -> None:
    provider = scripted(
        {
            "text": "Looking.",
            "tool_calls": [{"name": "list_dir", "arguments": {"path": "."}}],
            "usage": step_usage(CALL_1),
        },
        {"text": "Nothing here.", "usage": step_usage(CALL_2)},
    )
    async with served_session(
        server_factory, workspace, provider, model=MODEL, prices=PRICES, context_window=50_000
    ) as (_, client, sid):
        await client.call("session/prompt", text_prompt(sid, "what is here?"))

        updates = [u for u in client.updates(sid) if u["sessionUpdate"] == "usage_update"]
        assert updates, "no usage_update session/update was sent"
        last = updates[-1]
        # `used`: the size of the last request as the provider reported it (input incl. cache + output).
        assert last["used"] == sum(total(CALL_2))
        assert last["size"] == 50_000
        assert last["cost"]["currency"] == "USD"
        assert last["cost"]["amount"] == pytest.approx(PRICE.cost(CALL_1) + PRICE.cost(CALL_2))
        # The prompt's whole ledger rides on turn_ended (usage_update carries only the ACP fields).
        ended = ext_events(client, sid, "turn_ended")[-1]
        assert tokens(ended["turn"]["usage"]) == total(CALL_1, CALL_2)


async def test_usage_update_without_prices_has_no_cost(server_factory, workspace: Path) -> None:
    provider = scripted({"text": "Hi.", "usage": step_usage(CALL_2)})
    async with served_session(server_factory, workspace, provider, model=MODEL) as (_, client, sid):
        await client.call("session/prompt", text_prompt(sid, "hi"))

        updates = [u for u in client.updates(sid) if u["sessionUpdate"] == "usage_update"]
        assert updates, "no usage_update session/update was sent"
        assert updates[-1]["used"] == sum(total(CALL_2))
        assert updates[-1]["size"] == 128_000
        assert "cost" not in updates[-1]


# ---------------------------------------------------------------------------- dirty on cancel


async def cancel_after_first_chunk(client: WsClient, session_id: str) -> dict[str, Any]:
    prompt = asyncio.create_task(client.request("session/prompt", text_prompt(session_id, "think")))
    await client.wait_notification(is_update(session_id, "agent_message_chunk"))
    await client.notify("session/cancel", {"sessionId": session_id})
    resp = await prompt
    assert resp["result"]["stopReason"] == "cancelled", resp
    return resp


async def test_cancelled_scripted_stream_without_usage_marks_the_ledger_dirty(
    server_factory, workspace: Path
) -> None:
    provider = scripted(
        # The first chunk comes at once, the rest (and the usage report) 30 s later.
        {"text": "Let me think about this", "chunk_size": 8, "chunk_delay": 30, "usage": step_usage(CALL_1)},
        {"text": "Second answer.", "usage": step_usage(CALL_2)},
    )
    async with served_session(server_factory, workspace, provider, model=MODEL, prices=PRICES) as (
        _,
        client,
        sid,
    ):
        await cancel_after_first_chunk(client, sid)

        ended = ext_events(client, sid, "turn_ended")[0]
        usage = ended["turn"]["usage"]
        assert usage["dirty"] is True
        assert usage["byLane"]["primary"]["dirty"] is True
        assert usage["calls"] == 1
        assert tokens(usage) == (0, 0, 0, 0)  # nothing was made up
        assert ended["sessionUsage"]["dirty"] is True
        assert (await usage_get(client, sid))["dirty"] is True

        # A later clean prompt is clean on its own, but the session stays dirty.
        await client.call("session/prompt", text_prompt(sid, "again"))
        ended = ext_events(client, sid, "turn_ended")[1]
        assert ended["turn"]["usage"]["dirty"] is False
        assert tokens(ended["turn"]["usage"]) == total(CALL_2)
        session = await usage_get(client, sid)
        assert session["dirty"] is True
        assert tokens(session) == total(CALL_2)
        assert session["calls"] == 2


async def test_cancelled_openai_stream_before_its_usage_chunk_marks_the_ledger_dirty(
    server_factory, workspace: Path
) -> None:
    # The role chunk and the first text chunk go out at once; every later chunk — the
    # usage chunk comes last, after the finish_reason — 30 s apart.
    completion = oai.Completion.from_text(
        "Let me think about this carefully", chunk_size=8, usage=oai.UsageScript(prompt_tokens=900)
    )
    blocks = [oai.sse(json.dumps(c)).decode() for c in completion.chunks(include_usage=True)]
    blocks = [blocks[0] + blocks[1], *blocks[2:], oai.sse("[DONE]").decode()]
    async with oai.FakeOpenAI([oai.RawStream(blocks, chunk_delay=30)]) as fake:
        provider = OpenAIProvider(base_url=fake.base_url, api_key="sk-test", model=MODEL)
        async with served_session(server_factory, workspace, provider, model=MODEL, prices=PRICES) as (
            _,
            client,
            sid,
        ):
            await cancel_after_first_chunk(client, sid)

            usage = ext_events(client, sid, "turn_ended")[0]["turn"]["usage"]
            assert (usage["calls"], usage["dirty"]) == (1, True)
            assert tokens(usage) == (0, 0, 0, 0)
            session = await usage_get(client, sid)
            assert session["dirty"] is True and session["byLane"]["primary"]["dirty"] is True
        assert len(fake.requests) == 1
