"""Issue 29 item 5: a real stdio MCP server's embedded resources, links and images reach
the model through each provider's real wire format (the local fakes validate the bodies
against the official `openai` / `anthropic` request types) and the client as ACP content.

Anthropic's `tool_result` and the Responses API's `function_call_output` take the images;
Chat Completions' tool messages are text only, so the model is told it cannot see them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentd.providers.anthropic import AnthropicProvider
from agentd.providers.openai import OpenAIProvider
from agentd.providers.openai.responses import OpenAIResponsesProvider
from tests.support.client import text_prompt
from tests.support.fakes.anthropic_server import FakeAnthropic, StreamedMessage, ToolUseBlock
from tests.support.fakes.mcp_calc import CHART_URI, NOTES_TEXT, NOTES_URI, PNG_1PX
from tests.support.fakes.openai_responses_server import (
    FakeResponses,
    FunctionCallItem,
    MessageItem,
    ResponseStream,
)
from tests.support.fakes.openai_server import Completion, FakeOpenAI, ToolCallScript
from tests.support.mcp import calc_stdio
from tests.support.session import assert_valid_frames

TOOL = "mcp__calc__resources"
DATA_URL = f"data:image/png;base64,{PNG_1PX}"


def assert_model_text(text: str) -> None:
    """The model reads the embedded text with its URI, the link, and notes for the rest."""
    assert f'<resource uri="{NOTES_URI}" mimeType="text/markdown">\n{NOTES_TEXT}\n</resource>' in text
    assert f'<resource uri="{CHART_URI}">[image 1: image/png]</resource>' in text
    assert "[binary resource <memory://data.bin> (application/octet-stream, 3 B), shown to the user]" in text
    assert "[resource link: spec <https://example.com/spec>]\nThe spec." in text
    assert "[resource]" not in text and PNG_1PX not in text


async def run_turn(server_factory: Any, workspace: Path, provider: Any) -> dict[str, Any]:
    """One prompt whose first step calls the MCP tool; returns the tool call's final update."""
    async with server_factory(provider, model="m") as server:
        client = await server.client()
        try:
            new = {"cwd": str(workspace), "mcpServers": [calc_stdio()]}
            sid = (await client.call("session/new", new))["sessionId"]
            done = await client.call("session/prompt", text_prompt(sid, "read the notes"))
            assert done["stopReason"] == "end_turn"
            assert_valid_frames(client)
            return next(
                u
                for u in client.updates(sid)
                if u["sessionUpdate"] == "tool_call_update" and u.get("status") == "completed"
            )
        finally:
            await client.close()


async def test_anthropic_gets_the_resources_text_and_the_image_in_its_tool_result(
    server_factory: Any, workspace: Path
) -> None:
    async with FakeAnthropic() as fake:
        fake.enqueue(StreamedMessage([ToolUseBlock("toolu_res", TOOL, "{}")]))
        fake.enqueue(StreamedMessage.from_text("Rotates on Fridays."))
        provider = AnthropicProvider(base_url=fake.base_url, api_key="sk-ant", model="m")
        final = await run_turn(server_factory, workspace, provider)
    [result] = [b for b in fake.requests[1].body["messages"][-1]["content"] if b["type"] == "tool_result"]
    text, image = result["content"]
    assert text["type"] == "text"
    assert_model_text(text["text"])
    assert image == {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": PNG_1PX},
    }
    # The client gets the real things as ACP content blocks.
    blocks = [c["content"] for c in final["content"] if c["type"] == "content"]
    notes = {"uri": NOTES_URI, "mimeType": "text/markdown", "text": NOTES_TEXT}
    assert {"type": "resource", "resource": notes} in blocks
    chart = {"uri": CHART_URI, "mimeType": "image/png", "blob": PNG_1PX}
    assert {"type": "resource", "resource": chart} in blocks
    assert any(b["type"] == "resource_link" and b["uri"] == "https://example.com/spec" for b in blocks)


async def test_responses_api_gets_the_image_in_its_function_call_output(
    server_factory: Any, workspace: Path
) -> None:
    async with FakeResponses(
        [
            ResponseStream([FunctionCallItem("call_res", TOOL, "{}")]),
            ResponseStream([MessageItem.from_text("ok")]),
        ]
    ) as fake:
        provider = OpenAIResponsesProvider(base_url=fake.base_url, api_key="sk-test", model="m")
        await run_turn(server_factory, workspace, provider)
    [output] = [i for i in fake.requests[1].body["input"] if i.get("type") == "function_call_output"]
    text, image = output["output"]
    assert text["type"] == "input_text"
    assert_model_text(text["text"])
    assert image == {"type": "input_image", "image_url": DATA_URL, "detail": "auto"}


async def test_chat_completions_gets_the_text_and_a_note_that_it_cannot_see_the_image(
    server_factory: Any, workspace: Path
) -> None:
    async with FakeOpenAI() as fake:
        fake.enqueue(Completion(tool_calls=[ToolCallScript("call_res", TOOL, "{}")]))
        fake.enqueue(Completion.from_text("ok"))
        provider = OpenAIProvider(base_url=fake.base_url, api_key="sk-test", model="m")
        await run_turn(server_factory, workspace, provider)
    [tool] = [m for m in fake.requests[1].body["messages"] if m["role"] == "tool"]
    assert isinstance(tool["content"], str)
    assert_model_text(tool["content"])
    note = "[The images above are not shown to you: tool results carry text only on this API. "
    assert tool["content"].endswith(note + "The user sees them.]")
