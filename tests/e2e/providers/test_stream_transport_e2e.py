"""Stream transport through the whole server (issue 13 item 5): a stream that stalls after
its first token is retried by the loop as a `timeout`, and a session's consecutive model
calls share one HTTP connection."""

from __future__ import annotations

from pathlib import Path

from agentd.providers.openai.chat import OpenAIProvider
from tests.support.client import text_prompt
from tests.support.fakes import openai_server as oai
from tests.support.session import events as ext_events
from tests.support.session import new_session

MODEL = "test-model"
FAST_RETRY = {"retry": {"backoff_base_s": 0.01, "jitter": 0.0}}


async def test_stalled_mid_stream_is_retried_as_timeout(server_factory, workspace: Path) -> None:
    async with oai.FakeOpenAI(
        [oai.Completion(content=["par", "tial"], stall_after=2), oai.Completion.from_text("Complete answer.")]
    ) as fake:
        provider = oai_provider(fake, first_token_timeout=30, stream_idle_timeout=0.3)
        async with server_factory(provider, model=MODEL, limits=FAST_RETRY) as server:
            client = await server.client()
            sid = await new_session(client, workspace)
            result = await client.call("session/prompt", text_prompt(sid, "hello"))
            assert result["stopReason"] == "end_turn"
            [retry] = ext_events(client, sid, "retry")
            assert (retry["decision"], retry["bucket"]) == ("continue", "timeout")
            assert "stalled" in retry["error"]["message"]
            await client.close()
        assert len(fake.requests) == 2


def oai_provider(fake: oai.FakeOpenAI, **kwargs: float) -> OpenAIProvider:
    return OpenAIProvider(base_url=fake.base_url, api_key="k", model=MODEL, **kwargs)


async def test_a_session_of_twenty_turns_uses_one_connection(server_factory, workspace: Path) -> None:
    async with oai.FakeOpenAI(default=oai.Completion.from_text("ok")) as fake:
        async with server_factory(oai_provider(fake), model=MODEL) as server:
            client = await server.client()
            sid = await new_session(client, workspace)
            for n in range(20):
                result = await client.call("session/prompt", text_prompt(sid, f"turn {n}"))
                assert result["stopReason"] == "end_turn"
            await client.close()
        assert len(fake.requests) == 20
        assert fake.connections == 1
