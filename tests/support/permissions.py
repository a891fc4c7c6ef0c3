"""Permission requests as several clients see them: asks, answers, resolutions; scripted tool calls."""

from __future__ import annotations

import json
from typing import Any

from tests.support.client import WsClient
from tests.support.polling import until

ASK = "session/request_permission"


RESOLVED = "_agentd/permission/resolved"


def asks(client: WsClient) -> list[dict[str, Any]]:
    """The `session/request_permission` requests the server sent this client, in order."""
    return [r for r in client.server_requests if r["method"] == ASK]


async def asked(client: WsClient, n: int = 1) -> dict[str, Any]:
    """Wait until the client has been asked `n` times; the n-th request."""
    await until(lambda: len(asks(client)) >= n, within=30)
    return asks(client)[n - 1]


async def answer(client: WsClient, request: dict[str, Any], option_id: str) -> None:
    """The client's user picks `option_id` in the dialog of `request`."""
    result = {"outcome": {"outcome": "selected", "optionId": option_id}}
    await client.ws.send(json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": result}))


async def round_trip(client: WsClient) -> None:
    """A request/response on the client's connection: the server has read every frame the
    client sent before it (one socket, read in order)."""
    await client.call("session/list", {})


def resolutions(client: WsClient, session_id: str) -> list[dict[str, Any]]:
    return [
        f["params"]
        for f in client.frames
        if isinstance(f, dict) and f.get("method") == RESOLVED and f["params"]["sessionId"] == session_id
    ]


async def resolved(client: WsClient, session_id: str) -> dict[str, Any]:
    """Wait for the client's (single) `_agentd/permission/resolved` notification."""
    await until(lambda: bool(resolutions(client, session_id)), within=30)
    return resolutions(client, session_id)[0]


def write(call_id: str, path: str, content: str) -> dict[str, Any]:
    return {"name": "write_file", "arguments": {"path": path, "content": content}, "id": call_id}


def bash(call_id: str, command: str) -> dict[str, Any]:
    return {"name": "bash", "arguments": {"command": command}, "id": call_id}
