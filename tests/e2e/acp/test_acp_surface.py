"""The whole ACP surface of the pinned schema (issue 12, item 6): every method the schema
defines has a row in docs/protocol.md saying what agentd does with it, and the server
agrees — implemented agent-side methods are dispatched, unsupported ones are answered
`-32601` with the reason, client-side methods are sent or documented as never sent."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import pytest

from agentd.transport.handlers import METHODS, UNSUPPORTED
from tests.support.acp_schema import schema_path
from tests.support.paths import REPO_ROOT
from tests.support.server import scripted

DOC = REPO_ROOT / "docs" / "protocol.md"


def schema_methods() -> dict[str, str]:
    """method → side ("agent", "client", "protocol") from the pinned schema."""
    found: dict[str, str] = {}

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if "x-method" in node:
                found[node["x-method"]] = node["x-side"]
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(json.loads(schema_path().read_text()))
    return found


def doc_rows() -> dict[str, str]:
    """method → the row's "agentd" cell, from the method-by-method table."""
    text = DOC.read_text(encoding="utf-8")
    section = text.split("\n## The pinned ACP schema, method by method\n", 1)[1].split("\n## ", 1)[0]
    rows: dict[str, str] = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[0].startswith("`"):
            for method in re.findall(r"`([^`]+)`", cells[0]):
                rows[method] = cells[2]
    return rows


SCHEMA = schema_methods()
ROWS = doc_rows()


@pytest.mark.parametrize("method", sorted(SCHEMA))
def test_every_schema_method_has_a_documented_row(method: str) -> None:
    assert method in ROWS, f"{method} ({SCHEMA[method]}) has no row in docs/protocol.md"
    verdict = ROWS[method]
    if SCHEMA[method] == "agent":
        if method in METHODS:
            assert verdict.startswith("implemented"), verdict
        else:
            assert method in UNSUPPORTED and verdict.startswith("not supported"), verdict
    elif SCHEMA[method] == "client":
        assert verdict.startswith(("sent", "never sent")), verdict


def test_the_table_names_only_schema_methods() -> None:
    assert set(ROWS) <= set(SCHEMA), set(ROWS) - set(SCHEMA)


async def test_unsupported_methods_answer_method_not_found_with_the_reason(
    server_factory: Any, workspace: Path
) -> None:
    unsupported = [m for m, side in SCHEMA.items() if side == "agent" and m not in METHODS]
    assert unsupported == sorted(UNSUPPORTED)  # nothing falls through the cracks
    async with server_factory(scripted({"text": "x"})) as server:
        client = await server.client()
        try:
            for method in unsupported:
                answer = await client.request(method, {})
                assert answer["error"]["code"] == -32601, answer
                assert "not supported" in answer["error"]["message"]
                assert answer["error"]["data"] == {"reason": "unsupported"}
            # A method the schema does not have at all is a plain -32601.
            plain = await client.request("session/teleport", {})
            assert plain["error"] == {"code": -32601, "message": "Method not found: session/teleport"}
            # The connection is fine afterwards.
            assert "sessions" in await client.call("session/list", {})
            init = next(f for f in client.frames if f.get("id") == 1)["result"]
            assert "auth" not in init["agentCapabilities"]  # logout is not advertised
        finally:
            await client.close()


async def test_cancel_request_abandons_a_request_and_the_turn_goes_on(
    server_factory: Any, workspace: Path
) -> None:
    from tests.support.client import agent_text, text_prompt
    from tests.support.frames import has_turn_ended
    from tests.support.polling import until

    provider = scripted({"text": "slow but sure", "delay": 1.0, "chunk_size": 2, "chunk_delay": 0.05})
    async with server_factory(provider) as server:
        client = await server.client()
        try:
            sid = (await client.call("session/new", {"cwd": str(workspace), "mcpServers": []}))["sessionId"]
            pending = asyncio.ensure_future(client.request("session/prompt", text_prompt(sid, "go"), id=77))
            await until(lambda: any(a.running_turn_id for a in server.app.state.agentd.manager.live()))
            await client.notify("$/cancel_request", {"requestId": 77})
            answer = await asyncio.wait_for(pending, 30)
            assert answer["error"]["code"] == -32800, answer
            # The turn goes on for the session (and anyone watching it).
            await until(has_turn_ended(client, sid))
            assert agent_text(client.updates(sid)) == "slow but sure"
            # Cancelling something unknown or finished changes nothing.
            await client.notify("$/cancel_request", {"requestId": 12345})
            await client.notify("$/cancel_request", {"requestId": 77})
            assert "sessions" in await client.call("session/list", {})
        finally:
            await client.close()
