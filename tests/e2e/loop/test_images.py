"""Prompts carry more than text (issue 12, item 3): an ACP image block reaches OpenAI and
Anthropic in their own formats (checked on the fake servers' recorded requests), is stored
with the session and comes back in replay; an MCP tool's image and resource link reach the
client as ACP content blocks, not `[image]` placeholders."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agentd.core import prompt_images, prompt_text
from agentd.core.conversation import Image, Message
from agentd.infra.config import PermissionMode
from agentd.protocol.acp import ImageContent, TextContent
from agentd.providers.anthropic.messages import content_blocks as _content_blocks
from agentd.providers.openai.chat import _translate_message
from tests.support.client import text_prompt
from tests.support.fakes.mcp_calc import PNG_1PX
from tests.support.mcp import calc_stdio
from tests.support.server import scripted
from tests.support.session import assert_valid_frames
from tests.support.session import tool_call as call

IMAGE = {"type": "image", "mimeType": "image/png", "data": PNG_1PX}


def test_images_become_native_parts_for_each_provider() -> None:
    blocks = [TextContent(text="what is this?"), ImageContent(data=PNG_1PX, mime_type="image/png")]
    message = Message.user(prompt_text(blocks), prompt_images(blocks))
    assert message.images == [Image(mime_type="image/png", data=PNG_1PX)]
    openai = _translate_message(message)
    assert openai["content"][1] == {
        "type": "image_url",
        "image_url": {"url": f"data:image/png;base64,{PNG_1PX}"},
    }
    assert openai["content"][0]["type"] == "text" and "what is this?" in openai["content"][0]["text"]
    role, anthropic = _content_blocks(message)
    assert role == "user"
    source = {"type": "base64", "media_type": "image/png", "data": PNG_1PX}
    assert anthropic[0] == {"type": "image", "source": source}
    assert anthropic[1]["type"] == "text"


def test_unsupported_image_types_stay_a_note() -> None:
    blocks = [ImageContent(data="AAAA", mime_type="image/x-icon")]
    assert prompt_images(blocks) == []
    assert "not a supported image type" in prompt_text(blocks)


async def test_an_image_prompt_is_sent_stored_and_replayed(server_factory: Any, workspace: Path) -> None:
    provider = scripted({"text": "A single pixel."}, {"text": "Still a pixel."})
    async with server_factory(provider) as server:
        client = await server.client()
        try:
            init = next(f for f in client.frames if f.get("id") == 1)["result"]
            assert init["agentCapabilities"]["promptCapabilities"]["image"] is True
            sid = (await client.call("session/new", {"cwd": str(workspace), "mcpServers": []}))["sessionId"]
            prompt = {"sessionId": sid, "prompt": [{"type": "text", "text": "what is this?"}, IMAGE]}
            assert (await client.call("session/prompt", prompt))["stopReason"] == "end_turn"
            sent = provider.requests[0].messages[-1]
            assert sent.images == [Image(mime_type="image/png", data=PNG_1PX)]
            # The image stays in the conversation: the next request still carries it.
            await client.call("session/prompt", text_prompt(sid, "and now?"))
            assert any(m.images for m in provider.requests[1].messages)
            # Stored with the conversation (a restarted server sends it again).
            stored = await server.app.state.agentd.store.load_messages(sid)
            assert any(m.get("images") == [{"mime_type": "image/png", "data": PNG_1PX}] for m in stored)
        finally:
            await client.close()
        # Replay to another client: the user's message comes back with its image.
        other = await server.client()
        try:
            await other.call("session/load", {"sessionId": sid, "cwd": str(workspace), "mcpServers": []})
            users = [u["content"] for u in other.updates(sid) if u["sessionUpdate"] == "user_message_chunk"]
            assert {"type": "image", "mimeType": "image/png", "data": PNG_1PX} in [
                {k: v for k, v in c.items() if k in ("type", "mimeType", "data")} for c in users
            ]
            assert_valid_frames(other)
        finally:
            await other.close()


async def test_mcp_images_and_links_reach_the_client_as_content_blocks(
    server_factory: Any, workspace: Path
) -> None:
    provider = scripted({"tool_calls": [call("mcp__calc__picture", "c_pic")]}, {"text": "Here it is."})
    async with server_factory(provider, permission_mode=PermissionMode.DEFAULT) as server:
        client = await server.client()
        try:
            new = {"cwd": str(workspace), "mcpServers": [calc_stdio()]}
            sid = (await client.call("session/new", new))["sessionId"]
            done = await client.call("session/prompt", text_prompt(sid, "show me"))
            assert done["stopReason"] == "end_turn"
            final = next(
                u
                for u in client.updates(sid)
                if u["sessionUpdate"] == "tool_call_update" and u.get("status") == "completed"
            )
            blocks = [c["content"] for c in final["content"] if c["type"] == "content"]
            assert {"type": "image", "data": PNG_1PX, "mimeType": "image/png"} in blocks
            link = next(b for b in blocks if b["type"] == "resource_link")
            assert link["uri"] == "file:///tmp/pixel.png" and link["name"] == "source"
            assert not any("[image]" in json.dumps(b) for b in blocks)
            # The model reads a description, not base64.
            result = next(m for m in provider.requests[1].messages if m.role == "tool")
            assert "[image 1: image/png]" in result.content and PNG_1PX not in result.content
            assert "one pixel" in result.content
            assert_valid_frames(client)
        finally:
            await client.close()


async def test_images_reach_the_real_provider_wire_formats(server_factory: Any, workspace: Path) -> None:
    """Through the whole server to local servers speaking the OpenAI and Anthropic wire
    formats (the Anthropic fake validates image blocks as the real API does)."""
    from agentd.providers.anthropic.provider import AnthropicProvider
    from agentd.providers.openai.chat import OpenAIProvider
    from tests.support.fakes.anthropic_server import FakeAnthropic, StreamedMessage
    from tests.support.fakes.openai_server import Completion, FakeOpenAI

    async with FakeOpenAI() as openai_fake, FakeAnthropic() as anthropic_fake:
        openai_fake.enqueue(Completion.from_text("An OpenAI pixel."))
        anthropic_fake.enqueue(StreamedMessage.from_text("An Anthropic pixel."))
        providers = {
            "openai": OpenAIProvider(base_url=openai_fake.base_url, api_key="sk-test", model="m"),
            "anthropic": AnthropicProvider(base_url=anthropic_fake.base_url, api_key="sk-ant", model="m"),
        }
        for name, provider in providers.items():
            async with server_factory(provider, model="m") as server:
                client = await server.client()
                try:
                    sid = (await client.call("session/new", {"cwd": str(workspace), "mcpServers": []}))[
                        "sessionId"
                    ]
                    prompt = {"sessionId": sid, "prompt": [{"type": "text", "text": "what is this?"}, IMAGE]}
                    assert (await client.call("session/prompt", prompt))["stopReason"] == "end_turn", name
                finally:
                    await client.close()
        user = openai_fake.requests[0].body["messages"][-1]
        assert user["role"] == "user"
        url = f"data:image/png;base64,{PNG_1PX}"
        assert {"type": "image_url", "image_url": {"url": url}} in user["content"]
        blocks = anthropic_fake.requests[0].body["messages"][-1]["content"]
        source = {"type": "base64", "media_type": "image/png", "data": PNG_1PX}
        assert {"type": "image", "source": source} in blocks
