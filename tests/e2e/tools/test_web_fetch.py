"""`web_fetch` in a running server over a real WebSocket (issue 33, item 4): the model fetches
a local page that the operator's allow list names, after asking with a permission request of
its own kind; a metadata address is refused; the tool is not there when the sandbox network
is off; the plan gate refuses it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from agentd.core.conversation import Message
from agentd.infra.config import PermissionMode, SandboxNetwork
from tests.support.client import allow, text_prompt
from tests.support.server import scripted
from tests.support.session import final_tool_updates, new_session, tool_call
from tests.support.web_site import WebSite


@pytest.fixture
async def site() -> AsyncIterator[WebSite]:
    async with WebSite() as server:
        yield server


def tool_results(messages: list[Message]) -> dict[str, str]:
    return {m.tool_call_id or "": m.content for m in messages if m.role == "tool"}


async def test_the_model_reads_an_allowed_page_after_asking_and_no_metadata_address(
    server_factory, workspace: Path, site: WebSite
) -> None:
    provider = scripted(
        {
            "tool_calls": [
                tool_call("web_fetch", "call_page", url=f"{site.base_url}/page"),
                tool_call("web_fetch", "call_meta", url="http://169.254.169.254/latest/meta-data/"),
            ]
        },
        {"text": "read it"},
    )
    async with server_factory(
        provider, permission_mode=PermissionMode.DEFAULT, web_fetch_allow=[f"127.0.0.1:{site.port}"]
    ) as server:
        client = await server.client()
        client.on_request = allow("allow_once")
        sid = await new_session(client, workspace)
        result = await client.call("session/prompt", text_prompt(sid, "read the docs"))

        assert result["stopReason"] == "end_turn"
        asked = [r["params"]["toolCall"] for r in client.server_requests]
        assert [(c["toolCallId"], c["kind"], c["title"]) for c in asked] == [
            ("call_page", "fetch", f"Fetch {site.base_url}/page"),
            ("call_meta", "fetch", "Fetch http://169.254.169.254/latest/meta-data/"),
        ]
        final = final_tool_updates(client, sid)
        assert final["call_page"]["status"] == "completed"
        assert final["call_meta"]["status"] == "failed"
        seen = tool_results(provider.requests[-1].messages)
        assert "# Install" in seen["call_page"] and "secret" not in seen["call_page"]
        assert "(169.254.169.254) is not allowed: link_local" in seen["call_meta"]
    assert site.paths == ["/page"]


async def test_without_the_sandbox_network_there_is_no_web_fetch(
    server_factory, workspace: Path, site: WebSite
) -> None:
    provider = scripted(
        {"tool_calls": [tool_call("web_fetch", "call_page", url=f"{site.base_url}/page")]}, {"text": "ok"}
    )
    async with server_factory(
        provider,
        permission_mode=PermissionMode.BYPASS,
        sandbox_network=SandboxNetwork.OFF,
        web_fetch_allow=[f"127.0.0.1:{site.port}"],
    ) as server:
        client = await server.client()
        sid = await new_session(client, workspace)
        await client.call("session/prompt", text_prompt(sid, "read the docs"))
        assert "web_fetch" not in [t.name for t in provider.requests[0].tools]
        assert final_tool_updates(client, sid)["call_page"]["status"] == "failed"
    assert site.paths == []


async def test_the_plan_gate_refuses_it(server_factory, workspace: Path, site: WebSite) -> None:
    provider = scripted(
        {"tool_calls": [tool_call("web_fetch", "call_page", url=f"{site.base_url}/page")]}, {"text": "ok"}
    )
    async with server_factory(
        provider, permission_mode=PermissionMode.PLAN, web_fetch_allow=[f"127.0.0.1:{site.port}"]
    ) as server:
        client = await server.client()
        sid = await new_session(client, workspace)
        await client.call("session/prompt", text_prompt(sid, "read the docs"))
        assert final_tool_updates(client, sid)["call_page"]["status"] == "failed"
        assert client.server_requests == []
    assert site.paths == []
