"""Typed builders for what agentd sends a client: its requests (permission, file system,
terminal, client stop hooks) and its `_agentd/` notifications.

Each returns the method (from `agentd/protocol/methods.py`) with camelCase params exactly as they go
on the wire, so transports, the session and the tools never spell a frame inline.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agentd.protocol.frames import session_notification
from agentd.protocol.methods import ClientRequest, Notification


@dataclass(frozen=True)
class Outgoing:
    """One request (`ClientRequest`) or notification (`Notification`) agentd sends."""

    method: ClientRequest | Notification
    params: dict[str, Any]


# ---------------------------------------------------------------------------- requests


def request_permission(
    session_id: str, tool_call: dict[str, Any], options: list[dict[str, Any]], request_id: str
) -> Outgoing:
    """`session/request_permission`. `_meta.agentd.requestId` matches the later
    `_agentd/permission/resolved`, so a client can dismiss its dialog when another answered."""
    return Outgoing(
        ClientRequest.REQUEST_PERMISSION,
        {
            "sessionId": session_id,
            "toolCall": tool_call,
            "options": options,
            "_meta": {"agentd": {"requestId": request_id}},
        },
    )


def read_text_file(session_id: str, path: str) -> Outgoing:
    return Outgoing(ClientRequest.FS_READ_TEXT_FILE, {"sessionId": session_id, "path": path})


def write_text_file(session_id: str, path: str, content: str) -> Outgoing:
    return Outgoing(
        ClientRequest.FS_WRITE_TEXT_FILE, {"sessionId": session_id, "path": path, "content": content}
    )


def create_terminal(
    session_id: str, command: str, args: list[str], cwd: str, output_byte_limit: int
) -> Outgoing:
    return Outgoing(
        ClientRequest.TERMINAL_CREATE,
        {
            "sessionId": session_id,
            "command": command,
            "args": args,
            "cwd": cwd,
            "outputByteLimit": output_byte_limit,
        },
    )


# The terminal calls that only name the terminal.
TERMINAL_CALLS = frozenset(
    {
        ClientRequest.TERMINAL_OUTPUT,
        ClientRequest.TERMINAL_WAIT_FOR_EXIT,
        ClientRequest.TERMINAL_KILL,
        ClientRequest.TERMINAL_RELEASE,
    }
)


def terminal_call(method: ClientRequest, session_id: str, terminal_id: str) -> Outgoing:
    """`terminal/output`, `terminal/wait_for_exit`, `terminal/kill` or `terminal/release`."""
    if method not in TERMINAL_CALLS:
        raise ValueError(f"{method} is not a call on an existing terminal")
    return Outgoing(method, {"sessionId": session_id, "terminalId": terminal_id})


def stop_hook(payload: dict[str, Any]) -> Outgoing:
    """`_agentd/hooks/stop`: the payload is the stop hook's input, as for command hooks."""
    return Outgoing(ClientRequest.HOOKS_STOP, payload)


# ---------------------------------------------------------------------------- notifications


def resync_required(session_id: str, last_seq: int, reason: str) -> Outgoing:
    """The client's live stream ended: re-attach after `lastSeq` (or start over)."""
    return Outgoing(
        Notification.RESYNC_REQUIRED, {"sessionId": session_id, "lastSeq": last_seq, "reason": reason}
    )


def token_revoked(reason: str) -> Outgoing:
    return Outgoing(Notification.TOKEN_REVOKED, {"reason": reason})


def agentd_event(session_id: str, kind: str, event: Any, meta: dict[str, Any]) -> Outgoing:
    """`_agentd/event`: a durable event with no ACP form."""
    return Outgoing(
        Notification.EVENT, {"sessionId": session_id, "kind": kind, "event": event, "_meta": meta}
    )


def session_update(session_id: str, update: dict[str, Any], meta: dict[str, Any] | None) -> Outgoing:
    return Outgoing(Notification.SESSION_UPDATE, session_notification(session_id, update, meta))
