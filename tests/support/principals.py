"""Helpers for the tests of several principals on one server: a token holder's connection,
valid params for every method, responses compared with their ids blanked."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any, get_args, get_origin

import websockets
from pydantic import BaseModel

from agentd.protocol.agentd import AGENTD_CLIENT
from agentd.transport.handlers import METHODS
from tests.support.client import WsClient

CALL_BOUND_S = 30.0  # a hang bound per call, not a timing assertion
NOT_FOUND = -32002


def _default_for(annotation: Any) -> Any:
    """A value of the field's type, for a required field no template names."""
    origin = get_origin(annotation)
    if origin is not None and type(None) in get_args(annotation):
        return None
    base = origin or annotation
    for kind, value in ((bool, False), (int, 0), (float, 0.0), (str, "x"), (list, []), (dict, {})):
        if isinstance(base, type) and issubclass(base, kind):
            return value
    return "x"


def params_for(method: str, session_id: str, workspace: Path) -> dict[str, Any]:
    """Params that are valid for `method` on a session the caller owns, built from the
    method's params model (so a new method needs no template)."""
    known: dict[str, Any] = {
        "session_id": session_id,
        "prompt": [{"type": "text", "text": "from bob"}],
        "cwd": str(workspace),
        "mcp_servers": [],
        "mode_id": "plan",
        "config_id": "mode",
        "value": "plan",
        "objective": "take over",
        "after_seq": 0,
        "id": "prompt_unknown",
        "expected_version": 1,
        "text": "edited by bob",
        "order": [],
        "events": ["stop"],
        "method_id": "none",
        "protocol_version": 1,
        "team": "core",
        "access": "drive",
        "option_id": "x",  # optional (`outcome: cancelled` needs none), yet the usual answer
    }
    model: type[BaseModel] | None = METHODS[method].params
    if model is None:
        return {"sessionId": session_id}
    out: dict[str, Any] = {}
    for name, info in model.model_fields.items():
        alias = info.alias or name
        if name in known:
            out[alias] = known[name]
        elif info.is_required():
            out[alias] = _default_for(info.annotation)
    return out


def targets_a_session(method: str) -> bool:
    model = METHODS[method].params
    return model is None or "session_id" in model.model_fields


def normalized(resp: dict[str, Any], *session_ids: str) -> str:
    """The response with the request id and the session id it named blanked out: what B
    learns from it."""
    text = json.dumps({k: v for k, v in resp.items() if k != "id"}, sort_keys=True)
    for sid in session_ids:
        text = text.replace(sid, "<session>")
    return text


async def bounded(coro: Any) -> Any:
    async with asyncio.timeout(CALL_BOUND_S):
        return await coro


async def ws_as(base: str, token: str) -> WsClient:
    ws = await websockets.connect(
        base.replace("http://", "ws://") + "/acp",
        additional_headers={"Authorization": f"Bearer {token}"},
        max_size=None,
    )
    client = WsClient(ws)
    await client.call("initialize", {"protocolVersion": 1, "clientCapabilities": {}, "_meta": AGENTD_CLIENT})
    return client


async def listed(client: WsClient, **params: Any) -> list[str]:
    ids: list[str] = []
    while True:
        page = await bounded(client.call("session/list", params))
        ids += [s["sessionId"] for s in page["sessions"]]
        if "nextCursor" not in page:
            return ids
        params = {**params, "cursor": page["nextCursor"]}
