"""The ACP notification frames the renderer builds per event: plain dicts, apart from the wire
models (acp.py), so an idle server that has rendered nothing yet need not import the models
(issue 32 item 3: idle RSS)."""

from __future__ import annotations

from typing import Any


def text_block(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def chunk_update(kind: str, text: str, message_id: str | None = None) -> dict[str, Any]:
    """`user_message_chunk` / `agent_message_chunk` / `agent_thought_chunk`."""
    update: dict[str, Any] = {"sessionUpdate": kind, "content": text_block(text)}
    if message_id is not None:
        update["messageId"] = message_id
    return update


def session_notification(
    session_id: str, update: dict[str, Any], meta: dict[str, Any] | None
) -> dict[str, Any]:
    params: dict[str, Any] = {"sessionId": session_id, "update": update}
    if meta:
        params["_meta"] = meta
    return params
