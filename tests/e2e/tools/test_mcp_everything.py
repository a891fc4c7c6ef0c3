"""Issue 29 item 5 against a server nobody here wrote: the MCP reference server from npm
(`@modelcontextprotocol/server-everything`, pinned) over stdio. Its embedded text and blob
resources reach the model inlined with their URIs, its resource links with theirs, its
image as an image in Anthropic's `tool_result` (the local fake validates the body against
the official `anthropic` types), and the client gets each as ACP content."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agentd.providers.anthropic import AnthropicProvider
from tests.support.client import text_prompt
from tests.support.fakes.anthropic_server import FakeAnthropic, StreamedMessage, ToolUseBlock
from tests.support.mcp_everything import everything_stdio, installed_everything
from tests.support.session import assert_valid_frames

CALLS = {
    "toolu_text": ("get-resource-reference", {"resourceType": "Text", "resourceId": 1}),
    "toolu_blob": ("get-resource-reference", {"resourceType": "Blob", "resourceId": 2}),
    "toolu_image": ("get-tiny-image", {}),
    "toolu_links": ("get-resource-links", {"count": 2}),
}


async def test_server_everything_content_reaches_the_model_and_the_client(
    server_factory: Any, workspace: Path
) -> None:
    command = await installed_everything()
    async with FakeAnthropic() as fake:
        uses = [ToolUseBlock(i, f"mcp__everything__{name}", json.dumps(a)) for i, (name, a) in CALLS.items()]
        fake.enqueue(StreamedMessage(uses))  # type: ignore[arg-type]
        fake.enqueue(StreamedMessage.from_text("Read them all."))
        provider = AnthropicProvider(base_url=fake.base_url, api_key="sk-ant", model="m")
        async with server_factory(provider, model="m") as server:
            client = await server.client()
            try:
                new = {"cwd": str(workspace), "mcpServers": [everything_stdio(command)]}
                sid = (await client.call("session/new", new))["sessionId"]
                done = await client.call("session/prompt", text_prompt(sid, "show me everything"))
                assert done["stopReason"] == "end_turn"
                assert_valid_frames(client)
                finals = {
                    u["toolCallId"]: u
                    for u in client.updates(sid)
                    if u["sessionUpdate"] == "tool_call_update" and u.get("status") == "completed"
                }
            finally:
                await client.close()
    sent = fake.requests[1].body["messages"][-1]["content"]
    results = {b["tool_use_id"]: b for b in sent if b["type"] == "tool_result"}
    assert set(results) == set(CALLS) and not any(r["is_error"] for r in results.values())
    text = results["toolu_text"]["content"]
    assert '<resource uri="demo://resource/dynamic/text/1" mimeType="text/plain">\nResource 1: ' in text
    blob = results["toolu_blob"]["content"]  # a text/plain blob: its text, decoded
    assert '<resource uri="demo://resource/dynamic/blob/2" mimeType="text/plain">\nResource 2: ' in blob
    said, image = results["toolu_image"]["content"]
    assert "[image 1: image/png]" in said["text"]
    assert image["type"] == "image" and image["source"]["media_type"] == "image/png"
    links = results["toolu_links"]["content"]
    assert links.count("[resource link: ") == 2 and "<demo://resource/dynamic/" in links
    # The client sees the real things (beside the result's text): resource, image, links.
    kinds = {call: [c["content"]["type"] for c in finals[call]["content"]][:-1] for call in CALLS}
    assert all(finals[call]["content"][-1]["content"]["type"] == "text" for call in CALLS)
    assert kinds == {
        "toolu_text": ["resource"],
        "toolu_blob": ["resource"],
        "toolu_image": ["image"],
        "toolu_links": ["resource_link", "resource_link"],
    }
