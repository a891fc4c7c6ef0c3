"""The provider chain (R-R3): rotation to a fallback lane and per-lane usage attribution,
with the real providers against the local fakes.

- the primary lane answers 503 (provider_unavailable) or "insufficient quota" (quota):
  the loop decides `rotate_and_retry`, the fallback lane answers, the turn completes and
  stays on the fallback for the rest of the turn; the next prompt starts on the primary;
- usage is attributed to the lane that spent it (`turn.usage.byLane`,
  `_agentd/usage/get`): a discarded attempt whose usage was reported is counted on its
  lane; a request refused before any output costs nothing; one whose usage was never
  reported marks the lane (and the ledger) `dirty`;
- authentication (401) retries the primary on its own schedule, then fails: the fallback
  is never tried (a bad key fails on every lane);
- quota on every lane: rotation, then the quota bucket is exhausted;
- Anthropic as the fallback lane works too (cache read/write tokens included).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from agentd.core import Price
from agentd.core.errors import ErrorKind, HarnessError
from agentd.core.provider import ProviderRequest, StreamEvent, TextDelta, Usage
from agentd.loop.context import Lane
from agentd.protocol.jsonrpc import ErrorCode
from agentd.providers.anthropic.provider import AnthropicProvider
from agentd.providers.openai.chat import OpenAIProvider
from tests.support.client import agent_text, text_prompt
from tests.support.fakes import anthropic_server as anth
from tests.support.fakes import openai_server as oai
from tests.support.session import events as ext_events
from tests.support.session import new_session

PRIMARY = "test-model"
FALLBACK = "model-b"
PRICES = {
    PRIMARY: {"input": 2.0, "output": 8.0, "cache_read": 0.5, "cache_write": 2.5},
    FALLBACK: {"input": 1.0, "output": 4.0, "cache_read": 0.1, "cache_write": 1.25},
}


def price(model: str) -> Price:
    p = PRICES[model]
    return Price(p["input"], p["output"], p["cache_read"], p["cache_write"])


# ---------------------------------------------------------------------------- helpers


@pytest.fixture
async def primary() -> AsyncIterator[oai.FakeOpenAI]:
    async with oai.FakeOpenAI() as server:
        yield server


@pytest.fixture
async def secondary() -> AsyncIterator[oai.FakeOpenAI]:
    async with oai.FakeOpenAI() as server:
        yield server


def openai_provider(fake: oai.FakeOpenAI, model: str) -> OpenAIProvider:
    return OpenAIProvider(base_url=fake.base_url, api_key="sk-test", model=model)


def fallback_lane(provider: Any, model: str = FALLBACK) -> Lane:
    return Lane(provider, model, "fallback1")


def lane_tokens(lane: dict[str, Any]) -> tuple[int, int, int, int]:
    return lane["inputTokens"], lane["outputTokens"], lane["cacheReadTokens"], lane["cacheWriteTokens"]


def list_dir_completion(**usage: int) -> oai.Completion:
    return oai.Completion(
        content=["Let me look."],
        tool_calls=[oai.ToolCallScript(id="call_ls", name="list_dir", arguments='{"path": "."}')],
        usage=oai.UsageScript(**usage),
    )


# ---------------------------------------------------------------------------- rotation


@pytest.mark.parametrize(
    ("fault", "bucket"),
    [
        (oai.ErrorResponse.server_error(503), "provider_unavailable"),
        (oai.ErrorResponse.insufficient_quota(), "quota"),
    ],
)
async def test_sick_primary_rotates_to_the_fallback_lane_and_usage_is_attributed_per_lane(
    server_factory,
    workspace: Path,
    primary: oai.FakeOpenAI,
    secondary: oai.FakeOpenAI,
    fault: oai.ErrorResponse,
    bucket: str,
) -> None:
    primary.enqueue(fault)
    secondary.enqueue(
        list_dir_completion(prompt_tokens=100, completion_tokens=20),
        oai.Completion.from_text(
            "Served by the fallback.",
            usage=oai.UsageScript(prompt_tokens=150, completion_tokens=30, cached_tokens=50),
        ),
    )
    lanes = [fallback_lane(openai_provider(secondary, FALLBACK))]
    async with server_factory(
        openai_provider(primary, PRIMARY), fallbacks=lanes, model=PRIMARY, prices=PRICES
    ) as server:
        client = await server.client()
        sid = await new_session(client, workspace)

        result = await client.call("session/prompt", text_prompt(sid, "look around"))

        assert result["stopReason"] == "end_turn"
        assert agent_text(client.updates(sid)) == "Let me look.Served by the fallback."
        [retry] = ext_events(client, sid, "retry")
        assert (retry["decision"], retry["bucket"], retry["attempt"]) == ("rotate_and_retry", bucket, 1)
        assert retry["lane"] == "primary"  # the lane that failed
        assert retry["delaySeconds"] == 0
        assert retry["error"]["kind"] == bucket

        # One attempt on the primary; the whole rest of the turn ran on the fallback's model.
        assert len(primary.requests) == 1
        assert primary.requests[0].body["model"] == PRIMARY
        assert [r.body["model"] for r in secondary.requests] == [FALLBACK, FALLBACK]
        assert [m["role"] for m in secondary.requests[1].body["messages"]] == [
            "system",
            "user",
            "assistant",
            "tool",
        ]

        usage = ext_events(client, sid, "turn_ended")[0]["turn"]["usage"]
        by_lane = usage["byLane"]
        assert set(by_lane) == {"primary", "fallback1"}
        # The request was refused with an HTTP error before any output: it spent nothing,
        # so it counts as a call with zero tokens and does not make the ledger dirty.
        assert by_lane["primary"]["calls"] == 1
        assert by_lane["primary"]["dirty"] is False
        assert lane_tokens(by_lane["primary"]) == (0, 0, 0, 0)
        assert by_lane["primary"]["cost"] == 0
        # OpenAI's prompt_tokens include the cached part; the ledger keeps them apart.
        fb = by_lane["fallback1"]
        assert (fb["calls"], fb["dirty"]) == (2, False)
        assert lane_tokens(fb) == (100 + 100, 20 + 30, 50, 0)
        expected_cost = price(FALLBACK).cost(Usage(100, 20)) + price(FALLBACK).cost(Usage(100, 30, 50))
        assert fb["cost"] == pytest.approx(expected_cost)
        assert usage["dirty"] is False
        assert usage["calls"] == 3
        assert usage["totalTokens"] == fb["totalTokens"] == 300
        assert usage["cost"] == pytest.approx(expected_cost)

        session = (await client.call("_agentd/usage/get", {"sessionId": sid}))["session"]
        assert session == usage

        # Rotation is per turn: the next prompt starts on the (recovered) primary again.
        primary.enqueue(
            oai.Completion.from_text(
                "Primary again.", usage=oai.UsageScript(prompt_tokens=40, completion_tokens=4)
            )
        )
        result = await client.call("session/prompt", text_prompt(sid, "and now?"))
        assert result["stopReason"] == "end_turn"
        assert len(primary.requests) == 2 and len(secondary.requests) == 2
        second = ext_events(client, sid, "turn_ended")[1]["turn"]["usage"]
        assert set(second["byLane"]) == {"primary"}
        assert lane_tokens(second["byLane"]["primary"]) == (40, 4, 0, 0)
        assert second["dirty"] is False
        session = (await client.call("_agentd/usage/get", {"sessionId": sid}))["session"]
        assert session["byLane"]["primary"]["calls"] == 2
        assert lane_tokens(session["byLane"]["primary"]) == (40, 4, 0, 0)
        assert session["byLane"]["primary"]["cost"] == pytest.approx(price(PRIMARY).cost(Usage(40, 4)))
        assert session["byLane"]["fallback1"] == fb
        assert session["dirty"] is False  # refused requests are known to have cost nothing
        await client.close()


class UsageThenCut:
    """A provider whose stream reports its usage and then fails: a discarded attempt that
    did spend (known) tokens."""

    name = "usage-then-cut"
    supports_native_schema = False

    def __init__(self) -> None:
        self.requests: list[ProviderRequest] = []

    async def stream(self, request: ProviderRequest) -> AsyncIterator[StreamEvent]:
        self.requests.append(request)
        yield TextDelta("I was about to")
        yield Usage(input_tokens=70, output_tokens=5, cache_read_tokens=30, cache_write_tokens=10)
        raise HarnessError(ErrorKind.PROVIDER_UNAVAILABLE, "stream cut after the usage report")


async def test_a_discarded_attempt_with_reported_usage_is_counted_on_its_lane(
    server_factory, workspace: Path, secondary: oai.FakeOpenAI
) -> None:
    secondary.enqueue(
        oai.Completion.from_text(
            "Done on the fallback.", usage=oai.UsageScript(prompt_tokens=60, completion_tokens=6)
        )
    )
    first = UsageThenCut()
    lanes = [fallback_lane(openai_provider(secondary, FALLBACK))]
    async with server_factory(first, fallbacks=lanes, model=PRIMARY, prices=PRICES) as server:
        client = await server.client()
        sid = await new_session(client, workspace)

        result = await client.call("session/prompt", text_prompt(sid, "go"))

        assert result["stopReason"] == "end_turn"
        assert len(first.requests) == 1 and len(secondary.requests) == 1
        # The discarded text was shown live and marked discarded; the model never sees it.
        discarded = ext_events(client, sid, "agent_message")
        assert [(m["text"], m.get("discarded")) for m in discarded] == [
            ("I was about to", True),
            ("Done on the fallback.", None),
        ]
        assert all(m["content"] != "I was about to" for m in secondary.requests[0].body["messages"])

        usage = ext_events(client, sid, "turn_ended")[0]["turn"]["usage"]
        p = usage["byLane"]["primary"]
        assert (p["calls"], p["dirty"]) == (1, False)
        assert lane_tokens(p) == (70, 5, 30, 10)
        assert p["cost"] == pytest.approx(price(PRIMARY).cost(Usage(70, 5, 30, 10)))
        f = usage["byLane"]["fallback1"]
        assert lane_tokens(f) == (60, 6, 0, 0)
        assert f["cost"] == pytest.approx(price(FALLBACK).cost(Usage(60, 6)))
        assert usage["dirty"] is False
        assert usage["totalTokens"] == 115 + 66
        assert (await client.call("_agentd/usage/get", {"sessionId": sid}))["session"] == usage
        await client.close()


# ---------------------------------------------------------------------------- fail fast / exhaustion


async def test_authentication_never_tries_the_fallback(
    server_factory, workspace: Path, primary: oai.FakeOpenAI, secondary: oai.FakeOpenAI
) -> None:
    """000: "认证重试有独立 schedule" — the primary is asked again on that schedule; 003: "错误密钥
    在每条 lane 上都会失败" — never the fallback."""
    primary.enqueue(oai.ErrorResponse.unauthorized(), oai.ErrorResponse.unauthorized())
    secondary.enqueue(oai.Completion.from_text("never served"))
    lanes = [fallback_lane(openai_provider(secondary, FALLBACK))]
    fast = {"retry": {"auth_schedule_s": [0.01]}}
    async with server_factory(
        openai_provider(primary, PRIMARY), fallbacks=lanes, model=PRIMARY, limits=fast
    ) as server:
        client = await server.client()
        sid = await new_session(client, workspace)

        resp = await client.request("session/prompt", text_prompt(sid, "hello"))

        assert resp["error"]["code"] == ErrorCode.TURN_FAILED
        assert resp["error"]["data"]["kind"] == "authentication"
        retries = ext_events(client, sid, "retry")
        assert [(r["decision"], r["bucket"], r["lane"]) for r in retries] == [
            ("continue", "authentication", "primary"),
            ("exhausted", "authentication", "primary"),
        ]
        usage = ext_events(client, sid, "turn_ended")[0]["turn"]["usage"]
        assert set(usage["byLane"]) == {"primary"}
        await client.close()
    assert len(primary.requests) == 2
    assert secondary.requests == []  # a bad key fails on every lane: never rotated


async def test_quota_on_every_lane_rotates_once_then_is_exhausted(
    server_factory, workspace: Path, primary: oai.FakeOpenAI, secondary: oai.FakeOpenAI
) -> None:
    primary.enqueue(oai.ErrorResponse.insufficient_quota())
    secondary.enqueue(oai.ErrorResponse.insufficient_quota(), oai.Completion.from_text("never served"))
    lanes = [fallback_lane(openai_provider(secondary, FALLBACK))]
    async with server_factory(openai_provider(primary, PRIMARY), fallbacks=lanes, model=PRIMARY) as server:
        client = await server.client()
        sid = await new_session(client, workspace)

        resp = await client.request("session/prompt", text_prompt(sid, "hello"))

        assert resp["error"]["data"]["kind"] == "quota"
        assert [
            (r["decision"], r["bucket"], r["attempt"], r["lane"]) for r in ext_events(client, sid, "retry")
        ] == [
            ("rotate_and_retry", "quota", 1, "primary"),
            ("exhausted", "quota", 2, "fallback1"),
        ]
        usage = ext_events(client, sid, "turn_ended")[0]["turn"]["usage"]
        assert {k: (v["calls"], v["dirty"]) for k, v in usage["byLane"].items()} == {
            "primary": (1, False),
            "fallback1": (1, False),
        }
        await client.close()
    assert len(primary.requests) == 1 and len(secondary.requests) == 1


# ---------------------------------------------------------------------------- Anthropic fallback


async def test_anthropic_as_the_fallback_lane(
    server_factory, workspace: Path, primary: oai.FakeOpenAI
) -> None:
    (workspace / "notes.txt").write_text("remember the milk\n")
    primary.enqueue(oai.ErrorResponse.server_error(503))
    async with anth.FakeAnthropic(
        [
            anth.StreamedMessage(
                [
                    anth.TextBlock.from_text("Reading the notes."),
                    anth.ToolUseBlock("toolu_01", "read_file", '{"path": "notes.txt"}'),
                ],
                usage=anth.UsageScript(
                    input_tokens=12,
                    output_tokens=20,
                    cache_creation_input_tokens=400,
                    cache_read_input_tokens=0,
                ),
            ),
            anth.StreamedMessage.from_text(
                "The notes say: remember the milk.",
                usage=anth.UsageScript(
                    input_tokens=30,
                    output_tokens=9,
                    cache_creation_input_tokens=0,
                    cache_read_input_tokens=400,
                ),
            ),
        ]
    ) as claude:
        lane = fallback_lane(
            AnthropicProvider(base_url=claude.base_url, api_key="sk-ant-test", model=FALLBACK)
        )
        async with server_factory(
            openai_provider(primary, PRIMARY), fallbacks=[lane], model=PRIMARY, prices=PRICES
        ) as server:
            client = await server.client()
            sid = await new_session(client, workspace)

            result = await client.call("session/prompt", text_prompt(sid, "what do my notes say?"))

            assert result["stopReason"] == "end_turn"
            assert agent_text(client.updates(sid)) == "Reading the notes.The notes say: remember the milk."
            [retry] = ext_events(client, sid, "retry")
            assert (retry["decision"], retry["bucket"]) == ("rotate_and_retry", "provider_unavailable")
            usage = ext_events(client, sid, "turn_ended")[0]["turn"]["usage"]
            fb = usage["byLane"]["fallback1"]
            assert (fb["calls"], fb["dirty"]) == (2, False)
            assert lane_tokens(fb) == (42, 29, 400, 400)
            expected = price(FALLBACK).cost(Usage(12, 20, 0, 400)) + price(FALLBACK).cost(
                Usage(30, 9, 400, 0)
            )
            assert fb["cost"] == pytest.approx(expected)
            assert usage["byLane"]["primary"]["dirty"] is False
            assert (await client.call("_agentd/usage/get", {"sessionId": sid}))["session"] == usage
            await client.close()
    assert len(primary.requests) == 1
    # The Anthropic lane got the lane's model and a valid tool_use → tool_result exchange
    # (the strict fake rejects malformed bodies with a 400, which would have failed the turn).
    assert [r.body["model"] for r in claude.requests] == [FALLBACK, FALLBACK]
    second = claude.requests[1].body["messages"]
    assert [m["role"] for m in second] == ["user", "assistant", "user"]
    [tool_result] = [b for b in second[2]["content"] if b["type"] == "tool_result"]
    assert tool_result["tool_use_id"] == "toolu_01"
