"""Typed provider errors through the retry buckets in the running loop (R-R1, R-R2), with
the real OpenAI / Anthropic providers against the local fakes (real HTTP, real SSE).

- a 429 with `Retry-After: 0` then a success: one `retry` event (continue, rate_limited),
  the prompt ends `end_turn`;
- six 429s on one prompt: five continue, the sixth is `exhausted` and the prompt fails
  with -32012, `data.kind == "rate_limited"`;
- authentication (401/403, both wires) retries on its own schedule (000: "认证重试有独立
  schedule"): the same request again after the schedule's wait, once (003: "authentication
  1"); a second rejection ends the turn (000: "不可恢复错误（如认证重试耗尽）");
- the buckets are persisted in `sessions.retry_state`; a success does not reset them (seed
  003; their sliding window is tested in test_retry_buckets_window.py) — except the
  authentication bucket, whose episode an authenticated call ends;
- the persisted counters survive a restart and the restarted server keeps counting from
  them (on SQLite and Postgres).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from agentd.protocol.jsonrpc import ErrorCode
from agentd.providers.anthropic.provider import AnthropicProvider
from agentd.providers.openai.chat import OpenAIProvider
from agentd.store.db import Store
from tests.support.client import WsClient, agent_text, text_prompt
from tests.support.fakes import anthropic_server as anth
from tests.support.fakes import openai_server as oai
from tests.support.session import events as ext_events
from tests.support.session import new_session, served_session

MODEL = "test-model"

# ---------------------------------------------------------------------------- helpers


@pytest.fixture
async def fake() -> AsyncIterator[oai.FakeOpenAI]:
    async with oai.FakeOpenAI() as server:
        yield server


def openai_provider(fake: oai.FakeOpenAI) -> OpenAIProvider:
    return OpenAIProvider(base_url=fake.base_url, api_key="sk-test", model=MODEL)


def retries(client: WsClient, session_id: str) -> list[dict[str, Any]]:
    return ext_events(client, session_id, "retry")


def decisions(client: WsClient, session_id: str) -> list[tuple[str, str, int]]:
    return [(r["decision"], r["bucket"], r["attempt"]) for r in retries(client, session_id)]


async def persisted_retry_state(db_url: str, session_id: str) -> dict[str, Any] | None:
    store = await Store.open(db_url)
    try:
        record = await store.get_session(session_id)
    finally:
        await store.close()
    assert record is not None
    return record.retry_state


def counts(state: dict[str, Any] | None) -> dict[str, int]:
    """Failures per bucket (each keeps the times of its failures in the window)."""
    assert state is not None
    assert state["version"] == 2
    return {bucket: len(times) for bucket, times in state["failures"].items()}


# ---------------------------------------------------------------------------- 429 → success


@pytest.mark.parametrize("wire", ["openai", "anthropic"])
async def test_rate_limit_with_retry_after_then_success_retries_once(
    server_factory, workspace: Path, wire: str
) -> None:
    server_cm: Any
    if wire == "openai":
        server_cm = oai.FakeOpenAI(
            [oai.ErrorResponse.rate_limited(retry_after=0), oai.Completion.from_text("Hello after the wait.")]
        )
    else:
        server_cm = anth.FakeAnthropic(
            [
                anth.ErrorResponse.rate_limited(retry_after=0),
                anth.StreamedMessage.from_text("Hello after the wait."),
            ]
        )
    async with server_cm as upstream:
        provider: Any
        if wire == "openai":
            provider = OpenAIProvider(base_url=upstream.base_url, api_key="sk-test", model=MODEL)
        else:
            provider = AnthropicProvider(base_url=upstream.base_url, api_key="sk-ant-test", model=MODEL)
        async with served_session(server_factory, workspace, provider, model=MODEL) as (server, client, sid):
            result = await client.call("session/prompt", text_prompt(sid, "hello"))

            assert result["stopReason"] == "end_turn"
            assert agent_text(client.updates(sid)) == "Hello after the wait."
            [retry] = retries(client, sid)
            assert retry["decision"] == "continue"
            assert retry["bucket"] == "rate_limited"
            assert (retry["attempt"], retry["limit"]) == (1, 5)
            assert retry["delaySeconds"] == 0  # Retry-After honoured (0 s), no jittered guess
            assert "retry-after 0s" in retry["reason"]
            assert retry["error"]["kind"] == "rate_limited"
            assert retry["lane"] == "primary"
            turn = ext_events(client, sid, "turn_ended")[0]["turn"]
            assert turn["retries"] == [retry]
            db_url = server.settings.resolved_database_url()
        assert len(upstream.requests) == 2
        # The retry is the same request again: the failed attempt left no trace in it.
        assert upstream.requests[0].body == upstream.requests[1].body
    # The success does not reset the bucket: a storm spread over turns still exhausts it.
    assert counts(await persisted_retry_state(db_url, sid)) == {"rate_limited": 1}


# ---------------------------------------------------------------------------- exhaustion / escalation


async def test_sixth_rate_limit_in_a_row_is_exhausted_and_fails_the_prompt(
    server_factory, workspace: Path, fake: oai.FakeOpenAI
) -> None:
    fake.enqueue(*[oai.ErrorResponse.rate_limited(retry_after=0) for _ in range(6)])
    fake.enqueue(oai.Completion.from_text("never served"))
    async with served_session(server_factory, workspace, openai_provider(fake), model=MODEL) as (
        server,
        client,
        sid,
    ):
        resp = await client.request("session/prompt", text_prompt(sid, "hello"))

        assert "result" not in resp, resp
        err = resp["error"]
        assert err["code"] == ErrorCode.TURN_FAILED == -32012
        assert err["data"]["kind"] == "rate_limited"
        assert err["data"]["reason"] == "rate_limited"
        assert decisions(client, sid) == [
            *[("continue", "rate_limited", n) for n in range(1, 6)],
            ("exhausted", "rate_limited", 6),
        ]
        assert "6 failures exceed the limit of 5" in retries(client, sid)[-1]["reason"]
        ended = ext_events(client, sid, "turn_ended")[0]
        assert ended["outcome"] == "failed" and ended["error"]["kind"] == "rate_limited"
        assert len(ended["turn"]["retries"]) == 6
        db_url = server.settings.resolved_database_url()
    assert len(fake.requests) == 6 and fake.pending == 1  # no seventh attempt
    assert counts(await persisted_retry_state(db_url, sid)) == {"rate_limited": 6}


# The schedule's wait, short so the test does not idle; the events must carry exactly it.
AUTH_SCHEDULE = {"retry": {"auth_schedule_s": [0.05]}}

REJECTIONS: dict[str, Any] = {
    "openai-401": ("openai", oai.ErrorResponse.unauthorized),
    "openai-403": ("openai", oai.ErrorResponse.forbidden),
    "anthropic-401": ("anthropic", anth.ErrorResponse.unauthorized),
    "anthropic-403": ("anthropic", anth.ErrorResponse.permission_denied),
}


def rejecting_upstream(wire: str, *steps: Any) -> Any:
    return oai.FakeOpenAI(list(steps)) if wire == "openai" else anth.FakeAnthropic(list(steps))


def provider_for(wire: str, upstream: Any) -> Any:
    if wire == "openai":
        return OpenAIProvider(base_url=upstream.base_url, api_key="sk-test", model=MODEL)
    return AnthropicProvider(base_url=upstream.base_url, api_key="sk-ant-test", model=MODEL)


def success(wire: str, text: str) -> Any:
    return oai.Completion.from_text(text) if wire == "openai" else anth.StreamedMessage.from_text(text)


@pytest.mark.parametrize("case", list(REJECTIONS))
async def test_a_rejected_credential_is_retried_once_on_its_own_schedule(
    server_factory, workspace: Path, case: str
) -> None:
    """000: "认证重试有独立 schedule" — the 401/403 is sent again after the schedule's wait
    (not the shared backoff), the retry succeeds, and the authenticated call ends the episode:
    the authentication bucket starts over while the other buckets keep their counts."""
    wire, rejection = REJECTIONS[case]
    wires: Any = oai if wire == "openai" else anth
    limited = wires.ErrorResponse.rate_limited(retry_after=0)  # another bucket, counted apart
    async with rejecting_upstream(wire, limited, rejection(), success(wire, "Let in.")) as upstream:
        async with served_session(
            server_factory, workspace, provider_for(wire, upstream), model=MODEL, limits=AUTH_SCHEDULE
        ) as (server, client, sid):
            result = await client.call("session/prompt", text_prompt(sid, "hello"))

            assert result["stopReason"] == "end_turn"
            assert agent_text(client.updates(sid)) == "Let in."
            assert decisions(client, sid) == [
                ("continue", "rate_limited", 1),
                ("continue", "authentication", 1),
            ]
            auth = retries(client, sid)[-1]
            assert (auth["limit"], auth["delaySeconds"], auth["lane"]) == (1, 0.05, "primary")
            assert "auth schedule's 0.05s" in auth["reason"]
            assert auth["error"]["kind"] == "authentication"
            db_url = server.settings.resolved_database_url()
        assert len(upstream.requests) == 3
        assert upstream.requests[1].body == upstream.requests[2].body  # the same request again
    assert counts(await persisted_retry_state(db_url, sid)) == {"rate_limited": 1}


@pytest.mark.parametrize("case", list(REJECTIONS))
async def test_a_second_rejection_exhausts_the_schedule_and_fails_the_prompt(
    server_factory, workspace: Path, case: str
) -> None:
    """003 "authentication 1": one retry; the second rejection ends the turn (000:
    "不可恢复错误（如认证重试耗尽）") with -32012, kind authentication, and no third request."""
    wire, rejection = REJECTIONS[case]
    async with rejecting_upstream(wire, rejection(), rejection(), success(wire, "never served")) as upstream:
        async with served_session(
            server_factory, workspace, provider_for(wire, upstream), model=MODEL, limits=AUTH_SCHEDULE
        ) as (_, client, sid):
            resp = await client.request("session/prompt", text_prompt(sid, "hello"))

            err = resp["error"]
            assert err["code"] == ErrorCode.TURN_FAILED
            assert err["data"]["kind"] == "authentication"
            assert decisions(client, sid) == [
                ("continue", "authentication", 1),
                ("exhausted", "authentication", 2),
            ]
            assert "2 failures exceed the limit of 1" in retries(client, sid)[-1]["reason"]
            ended = ext_events(client, sid, "turn_ended")[0]
            assert ended["outcome"] == "failed" and ended["error"]["kind"] == "authentication"
        assert len(upstream.requests) == 2 and upstream.pending == 1


# ---------------------------------------------------------------------------- persistence and reset


async def test_buckets_are_persisted_and_a_success_does_not_reset_them(
    server_factory, workspace: Path, fake: oai.FakeOpenAI
) -> None:
    fake.enqueue(
        # Prompt 1: two rate limits, then a bad key (retried once on its schedule): the turn
        # fails with both buckets counted.
        oai.ErrorResponse.rate_limited(retry_after=0),
        oai.ErrorResponse.rate_limited(retry_after=0),
        oai.ErrorResponse.unauthorized(),
        oai.ErrorResponse.unauthorized(),
        # Prompt 2: a success.
        oai.Completion.from_text("Fine now."),
    )
    async with server_factory(openai_provider(fake), model=MODEL, limits=AUTH_SCHEDULE) as server:
        db_url = server.settings.resolved_database_url()
        client = await server.client()
        sid = await new_session(client, workspace)

        resp = await client.request("session/prompt", text_prompt(sid, "one"))
        assert resp["error"]["data"]["kind"] == "authentication"
        assert decisions(client, sid) == [
            ("continue", "rate_limited", 1),
            ("continue", "rate_limited", 2),
            ("continue", "authentication", 1),
            ("exhausted", "authentication", 2),
        ]
        # The prompt's response comes after its events were committed.
        assert counts(await persisted_retry_state(db_url, sid)) == {"rate_limited": 2, "authentication": 2}

        result = await client.call("session/prompt", text_prompt(sid, "two"))
        assert result["stopReason"] == "end_turn"
        # The rate limits still count; the authenticated call ended the authentication episode.
        assert counts(await persisted_retry_state(db_url, sid)) == {"rate_limited": 2}
        await client.close()
    assert len(fake.requests) == 5


async def test_persisted_buckets_survive_a_restart_and_keep_counting(
    server_factory, workspace: Path, fake: oai.FakeOpenAI, db_url: str
) -> None:
    # Server 1: three rate limits, then two 401s (the schedule's one retry) end the turn.
    fake.enqueue(*[oai.ErrorResponse.rate_limited(retry_after=0) for _ in range(3)])
    fake.enqueue(oai.ErrorResponse.unauthorized(), oai.ErrorResponse.unauthorized())
    async with served_session(
        server_factory,
        workspace,
        openai_provider(fake),
        model=MODEL,
        database_url=db_url,
        limits=AUTH_SCHEDULE,
    ) as (_, client, sid):
        resp = await client.request("session/prompt", text_prompt(sid, "one"))
        assert resp["error"]["data"]["kind"] == "authentication"
        assert decisions(client, sid)[-1] == ("exhausted", "authentication", 2)
    assert len(fake.requests) == 5
    before = counts(await persisted_retry_state(db_url, sid))
    assert before == {"rate_limited": 3, "authentication": 2}

    # Server 2 (a restart): the rate-limit bucket continues at 4, so the third 429 of this
    # prompt is already the sixth overall and exhausts the bucket. A fresh bucket would
    # have retried (continue, attempt 3) and reached the success queued behind.
    fake.enqueue(*[oai.ErrorResponse.rate_limited(retry_after=0) for _ in range(3)])
    fake.enqueue(oai.Completion.from_text("a fresh bucket would get here"))
    async with server_factory(openai_provider(fake), model=MODEL, database_url=db_url) as server:
        client = await server.client()
        await client.call("session/load", {"sessionId": sid, "cwd": str(workspace), "mcpServers": []})
        resp = await client.request("session/prompt", text_prompt(sid, "two"))
        assert resp["error"]["code"] == ErrorCode.TURN_FAILED
        assert resp["error"]["data"]["kind"] == "rate_limited"
        # Only this server's live retry events (the load replays the conversation in ACP form only).
        assert decisions(client, sid) == [
            ("continue", "rate_limited", 4),
            ("continue", "rate_limited", 5),
            ("exhausted", "rate_limited", 6),
        ]
        await client.close()
    assert len(fake.requests) == 8 and fake.pending == 1
    assert counts(await persisted_retry_state(db_url, sid)) == {"rate_limited": 6, "authentication": 2}
