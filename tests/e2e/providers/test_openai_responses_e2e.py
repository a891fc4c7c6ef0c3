"""The whole server with `AGENTD_PROVIDER=openai-responses` against FakeResponses (a local
server speaking the Responses API's SSE wire format): a tool round where the model's
encrypted reasoning item goes back verbatim on the next call, thought chunks from its
summary, and a stalled first token retried as a `timeout`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentd.infra.config import ProviderName, Settings
from agentd.providers.factory import make_provider
from agentd.providers.openai.responses import OpenAIResponsesProvider
from tests.support.client import agent_text, text_prompt
from tests.support.fakes.openai_responses_server import (
    FakeResponses,
    FunctionCallItem,
    MessageItem,
    ReasoningItem,
    ResponseStream,
    ResponsesUsage,
)
from tests.support.session import assert_valid_frames, new_session
from tests.support.session import events as ext_events

# Each test once per model-call transport (lean, httpx): tests/e2e/providers/conftest.py.
pytestmark = pytest.mark.usefixtures("each_http_transport")

MODEL = "gpt-5-mini"
FAST_RETRY = {"retry": {"backoff_base_s": 0.01, "jitter": 0.0}}


async def test_tool_round_carries_the_reasoning_item_back(server_factory, workspace: Path) -> None:
    (workspace / "README.md").write_text("# Demo\n")
    reasoning = ReasoningItem(["I should read the README."], encrypted_content="gAAAA-secret-1", id="rs_a")
    async with FakeResponses(
        [
            ResponseStream(
                [reasoning, FunctionCallItem("call_r", "read_file", json.dumps({"path": "README.md"}))],
                usage=ResponsesUsage(input_tokens=300, output_tokens=40, cached_tokens=256),
            ),
            ResponseStream([MessageItem.from_text("The README is a demo heading.")]),
        ]
    ) as fake:
        settings = Settings(
            provider=ProviderName.OPENAI_RESPONSES,
            openai_base_url=fake.base_url,
            openai_api_key="sk-test",
            model=MODEL,
        )
        provider = make_provider(settings)
        assert isinstance(provider, OpenAIResponsesProvider)
        async with server_factory(provider, model=MODEL) as server:
            client = await server.client()
            sid = await new_session(client, workspace)
            result = await client.call("session/prompt", text_prompt(sid, "what is in the README?"))
            assert result["stopReason"] == "end_turn"

            updates = client.updates(sid)
            assert agent_text(updates) == "The README is a demo heading."
            thoughts = [u for u in updates if u["sessionUpdate"] == "agent_thought_chunk"]
            assert "".join(u["content"]["text"] for u in thoughts) == "I should read the README."
            finals = [u for u in updates if u["sessionUpdate"] == "tool_call_update" and u.get("status")]
            assert [(u["toolCallId"], u["status"]) for u in finals][-1] == ("call_r", "completed")
            assert_valid_frames(client)
            await client.close()

        assert len(fake.requests) == 2 and fake.pending == 0
        first, second = (r.body for r in fake.requests)
        assert first["store"] is False and first["include"] == ["reasoning.encrypted_content"]
        assert first["input"] == [{"role": "user", "content": "what is in the README?"}]
        assert {t["name"] for t in first["tools"]} >= {"read_file", "list_dir"}
        # The second call sends the reasoning item back verbatim, before the call it led to.
        items = second["input"]
        assert [i.get("type", i.get("role")) for i in items] == [
            "user", "reasoning", "function_call", "function_call_output",
        ]  # fmt: skip
        assert items[1] == {
            "id": "rs_a",
            "type": "reasoning",
            "summary": [{"type": "summary_text", "text": "I should read the README."}],
            "encrypted_content": "gAAAA-secret-1",
        }
        assert (items[2]["call_id"], items[2]["name"]) == ("call_r", "read_file")
        assert items[3]["call_id"] == "call_r" and "# Demo" in items[3]["output"]
        assert fake.connections == 1  # both calls on one connection


async def test_stalled_first_token_is_retried_as_timeout(server_factory, workspace: Path) -> None:
    async with FakeResponses(
        [
            ResponseStream([MessageItem.from_text("too late")], first_event_delay=30),
            ResponseStream([MessageItem.from_text("Here now.")]),
        ]
    ) as fake:
        provider = OpenAIResponsesProvider(
            base_url=fake.base_url, api_key="k", model=MODEL, first_token_timeout=0.3, stream_idle_timeout=5
        )
        async with server_factory(provider, model=MODEL, limits=FAST_RETRY) as server:
            client = await server.client()
            sid = await new_session(client, workspace)
            result = await client.call("session/prompt", text_prompt(sid, "hello"))
            assert result["stopReason"] == "end_turn"
            assert agent_text(client.updates(sid)) == "Here now."
            [retry] = ext_events(client, sid, "retry")
            assert (retry["decision"], retry["bucket"], retry["error"]["kind"]) == (
                "continue",
                "timeout",
                "timeout",
            )
            await client.close()
        assert len(fake.requests) == 2
