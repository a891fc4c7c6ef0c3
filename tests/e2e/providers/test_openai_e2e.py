"""The whole server with the real OpenAI-compatible provider against FakeOpenAI, a local
server speaking the Chat Completions streaming wire format: real sockets end to end
(ACP client ⇄ agentd ⇄ HTTP/SSE ⇄ fake)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from agentd.protocol.jsonrpc import ErrorCode
from agentd.providers.openai.chat import OpenAIProvider
from tests.support.acp_schema import AcpValidator
from tests.support.client import RpcFailed, agent_text, text_prompt
from tests.support.fakes.openai_server import Completion, ErrorResponse, FakeOpenAI, ToolCallScript

# Each test once per model-call transport (lean, httpx): tests/e2e/providers/conftest.py.
pytestmark = pytest.mark.usefixtures("each_http_transport")

README = "# Demo project\n\nIt prints a greeting.\n"


@pytest.fixture
async def fake() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI() as server:
        yield server


def openai_provider(fake: FakeOpenAI) -> OpenAIProvider:
    return OpenAIProvider(base_url=fake.base_url, api_key="sk-test", model="test-model")


# The session's model (Settings.model, stored per session) is what requests name; the
# provider's own `model` is only the fallback. Keep both the same, as `make_provider` does.
MODEL = {"model": "test-model"}


async def test_streamed_text_then_parallel_tool_calls_then_final_text(
    server_factory, workspace: Path, fake: FakeOpenAI
) -> None:
    (workspace / "README.md").write_text(README)
    (workspace / "src").mkdir()
    fake.enqueue(
        # Prompt 1: plain streamed text.
        Completion.from_text("Hello! I can look at your project.", chunk_size=4),
        # Prompt 2, call 1: two parallel tool calls, ids/names/arguments split across chunks.
        Completion(
            tool_calls=[
                ToolCallScript(
                    id="call_ls", name="list_dir", arguments=json.dumps({"path": "."}), fragment_size=3
                ),
                ToolCallScript(
                    id="call_read",
                    name="read_file",
                    arguments=json.dumps({"path": "README.md"}),
                    fragment_size=4,
                ),
            ],
        ),
        # Prompt 2, call 2: the final answer.
        Completion.from_text("The project has a README and a src folder.", chunk_size=5),
    )
    async with server_factory(openai_provider(fake), **MODEL) as server:
        client = await server.client()
        sid = (await client.call("session/new", {"cwd": str(workspace), "mcpServers": []}))["sessionId"]

        first = await client.call("session/prompt", text_prompt(sid, "hi"))
        assert first["stopReason"] == "end_turn"
        updates = client.updates(sid)
        chunks = [u for u in updates if u["sessionUpdate"] == "agent_message_chunk"]
        assert len(chunks) > 2  # streamed through, chunk by chunk
        assert agent_text(updates) == "Hello! I can look at your project."

        second = await client.call("session/prompt", text_prompt(sid, "what is in my project?"))
        assert second["stopReason"] == "end_turn"
        updates = client.updates(sid)
        assert agent_text(updates) == (
            "Hello! I can look at your project.The project has a README and a src folder."
        )
        calls = {u["toolCallId"]: u for u in updates if u["sessionUpdate"] == "tool_call"}
        assert list(calls) == ["call_ls", "call_read"]  # announced in the model's order
        assert calls["call_ls"]["rawInput"] == {"path": "."} and calls["call_ls"]["kind"] == "read"
        assert calls["call_read"]["rawInput"] == {"path": "README.md"}
        finals = {
            u["toolCallId"]: u
            for u in updates
            if u["sessionUpdate"] == "tool_call_update" and u.get("status") in ("completed", "failed")
        }
        assert {k: v["status"] for k, v in finals.items()} == {
            "call_ls": "completed",
            "call_read": "completed",
        }
        shown = {
            k: "".join(c["content"]["text"] for c in v["content"] if c["type"] == "content")
            for k, v in finals.items()
        }
        assert "README.md" in shown["call_ls"] and "src/" in shown["call_ls"]
        assert "It prints a greeting." in shown["call_read"]
        assert client.server_requests == []  # reads need no permission

        # What went over the wire to the "model".
        assert len(fake.requests) == 3 and fake.pending == 0
        for req in fake.requests:
            assert req.path == "/v1/chat/completions"
            assert req.headers["authorization"] == "Bearer sk-test"
            assert req.body["model"] == "test-model" and req.body["stream"] is True
            assert {t["function"]["name"] for t in req.body["tools"]} >= {"list_dir", "read_file"}
        msgs = fake.requests[2].body["messages"]
        assert [m["role"] for m in msgs] == [
            "system",
            "user",
            "assistant",
            "user",
            "assistant",
            "tool",
            "tool",
        ]
        assert msgs[1]["content"] == "hi"
        assert msgs[2] == {"role": "assistant", "content": "Hello! I can look at your project."}
        assert msgs[3]["content"] == "what is in my project?"
        asked = msgs[4]
        assert asked["content"] is None
        assert [(c["id"], c["type"], c["function"]["name"], json.loads(c["function"]["arguments"]))
                for c in asked["tool_calls"]] == [
            ("call_ls", "function", "list_dir", {"path": "."}),
            ("call_read", "function", "read_file", {"path": "README.md"}),
        ]  # fmt: skip
        results = {m["tool_call_id"]: m["content"] for m in msgs[5:]}
        assert list(results) == ["call_ls", "call_read"]  # results in call order
        assert results["call_ls"] == shown["call_ls"]
        assert results["call_read"] == shown["call_read"]
        # The second prompt's first request had no tool traffic yet.
        assert [m["role"] for m in fake.requests[1].body["messages"]] == [
            "system", "user", "assistant", "user",
        ]  # fmt: skip

        validator = AcpValidator.default()
        for frame in client.frames:
            validator.assert_valid_agent_frame(frame, client.sent_methods)
        await client.close()


async def test_unauthorized_fails_the_prompt_with_kind_authentication_and_session_recovers(
    server_factory, workspace: Path, fake: FakeOpenAI
) -> None:
    fake.enqueue(
        ErrorResponse.unauthorized(),
        ErrorResponse.unauthorized(),
        Completion.from_text("Working again.", chunk_size=3),
    )
    fast = {"retry": {"auth_schedule_s": [0.01]}}
    async with server_factory(openai_provider(fake), limits=fast, **MODEL) as server:
        client = await server.client()
        sid = (await client.call("session/new", {"cwd": str(workspace), "mcpServers": []}))["sessionId"]

        with pytest.raises(RpcFailed) as failed:
            await client.call("session/prompt", text_prompt(sid, "hello?"))
        error = failed.value.error
        assert error["code"] == ErrorCode.TURN_FAILED
        assert error["data"]["kind"] == "authentication"
        assert error["data"]["outcome"] == "failed"
        assert "401" in error["message"] and "Incorrect API key" in error["message"]
        assert len(fake.requests) == 2  # retried once on the authentication schedule, then failed

        # The session is still usable: the next prompt streams and ends normally.
        result = await client.call("session/prompt", text_prompt(sid, "try again"))
        assert result["stopReason"] == "end_turn"
        assert agent_text(client.updates(sid)) == "Working again."
        assert len(fake.requests) == 3
        roles = [m["role"] for m in fake.requests[2].body["messages"]]
        assert roles[0] == "system" and roles[-1] == "user"
        assert fake.requests[2].body["messages"][-1]["content"] == "try again"

        # The failed turn was recorded with its error kind.
        ended = [
            f["params"]["event"]
            for f in client.frames
            if isinstance(f, dict)
            and f.get("method") == "_agentd/event"
            and f["params"]["kind"] == "turn_ended"
        ]
        assert [(e["outcome"], e.get("error", {}).get("kind")) for e in ended] == [
            ("failed", "authentication"),
            ("completed", None),
        ]
        await client.close()
