"""What the stdio bridge (`agentd acp --connect`) remembers so that an editor sees one
unbroken session across reconnections — pure bookkeeping over messages, no I/O.

- Durable frames carry `_meta.agentd.seq`; a session's frames at or below the last seq
  forwarded are duplicates of what the editor already has (re-attach replays from there).
- Streamed text is transient: after a reconnect the server re-sends a message's text from
  its start (the partial of a message still streaming, or the whole text of one that ended
  meanwhile). The editor already holds the first `n` characters: only the rest is forwarded
  — an empty rest too when the frame is a durable final event (its seq and `interrupted`
  mark are news even when its text is not).
- Server→editor requests get ids of the bridge's own (each server connection counts from 1
  again); a permission request the server re-sends after a reconnect is the same question
  (same `_meta.agentd.requestId`): it joins the dialog the editor already has open, or is
  answered at once with the answer the editor already gave.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from agentd.protocol import ClientRequest, Notification

CHUNKS = ("agent_message_chunk", "agent_thought_chunk")
PERMISSION = ClientRequest.REQUEST_PERMISSION
# Frames the bridge consumes itself: they describe its own subscription, not the session.
INTERNAL = frozenset({Notification.SESSION_SNAPSHOT, Notification.RESYNC_REQUIRED})


class Verdict(Enum):
    FORWARD = "forward"
    DROP = "drop"


def agentd_meta(params: Any) -> dict[str, Any]:
    meta = params.get("_meta") if isinstance(params, dict) else None
    inner = meta.get("agentd") if isinstance(meta, dict) else None
    return inner if isinstance(inner, dict) else {}


@dataclass
class ServerRequest:
    generation: int
    server_id: Any
    permission_id: str | None


@dataclass
class RelayState:
    last_seq: dict[str, int] = field(default_factory=dict)  # session → last durable seq forwarded
    chars: dict[tuple[str, str], int] = field(default_factory=dict)  # (session, messageId) → forwarded
    resyncing: set[tuple[str, str]] = field(default_factory=set)  # text restarts from 0
    generation: int = 0  # which server connection
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    to_server: dict[str, ServerRequest] = field(default_factory=dict)  # editor-facing id →
    open_permissions: dict[str, str] = field(default_factory=dict)  # requestId → editor-facing id
    permission_answers: dict[str, dict[str, Any]] = field(default_factory=dict)  # requestId → result

    def track(self, session_id: str) -> None:
        self.last_seq.setdefault(session_id, 0)

    def reload(self, session_id: str) -> None:
        """The editor asked for the whole history again (`session/load`): let it all through."""
        self.last_seq[session_id] = 0
        for key in [k for k in self.chars if k[0] == session_id]:
            del self.chars[key]
            self.resyncing.discard(key)

    def reconnected(self) -> None:
        """A new server connection: every partly forwarded message restarts from 0."""
        self.generation += 1
        self.resyncing = {key for key, n in self.chars.items() if n > 0}

    def notification(self, method: str, params: dict[str, Any]) -> tuple[Verdict, dict[str, Any]]:
        """Whether (and in what form) a server notification goes on to the editor."""
        if method in INTERNAL:
            return Verdict.DROP, params
        meta = agentd_meta(params)
        session_id = params.get("sessionId")
        seq = meta.get("seq")
        if isinstance(session_id, str) and isinstance(seq, int) and not meta.get("transient"):
            if seq <= self.last_seq.get(session_id, 0):
                return Verdict.DROP, params
            self.last_seq[session_id] = seq
        update = params.get("update") if method == Notification.SESSION_UPDATE else None
        if not isinstance(update, dict) or update.get("sessionUpdate") not in CHUNKS:
            return Verdict.FORWARD, params
        return self._chunk(str(session_id), params, update, meta)

    def _chunk(
        self, session_id: str, params: dict[str, Any], update: dict[str, Any], meta: dict[str, Any]
    ) -> tuple[Verdict, dict[str, Any]]:
        mid = update.get("messageId")
        content = update.get("content")
        if not isinstance(mid, str) or not isinstance(content, dict) or content.get("type") != "text":
            return Verdict.FORWARD, params
        key = (session_id, mid)
        text = str(content.get("text", ""))
        have = self.chars.get(key, 0)
        if meta.get("final") or key in self.resyncing:
            # The text from the message's start: the editor has `have` characters of it.
            self.resyncing.discard(key)
            rest = text[have:]
            self.chars[key] = max(have, len(text))
            if not rest and (not isinstance(meta.get("seq"), int) or meta.get("transient")):
                return Verdict.DROP, params
            # A durable final event goes on even when the editor has all its text (or more:
            # streamed past the last checkpoint), as an empty chunk: its seq and its
            # `interrupted` mark still reach an editor that counts seqs.
            return Verdict.FORWARD, {**params, "update": {**update, "content": {**content, "text": rest}}}
        self.chars[key] = have + len(text)
        return Verdict.FORWARD, params

    # ------------------------------------------------------------ server → editor requests

    def server_request(self, server_id: Any, method: str, params: Any) -> tuple[str, dict[str, Any] | None]:
        """An editor-facing id for a server request, and — for a permission question the
        editor already answered — that answer (then nothing goes to the editor)."""
        permission_id = agentd_meta(params).get("requestId") if method == PERMISSION else None
        permission_id = permission_id if isinstance(permission_id, str) else None
        if permission_id is not None:
            if permission_id in self.permission_answers:
                return "", self.permission_answers[permission_id]
            open_id = self.open_permissions.get(permission_id)
            if open_id is not None:  # the same dialog is already open: this joins it
                self.to_server[open_id] = ServerRequest(self.generation, server_id, permission_id)
                return "", None
        editor_id = f"agentd-bridge-{next(self._ids)}"
        self.to_server[editor_id] = ServerRequest(self.generation, server_id, permission_id)
        if permission_id is not None:
            self.open_permissions[permission_id] = editor_id
        return editor_id, None

    def editor_answer(self, editor_id: Any, result: dict[str, Any] | None) -> ServerRequest | None:
        """The server request an editor's response answers (None: unknown id). A permission
        answer is remembered in case the server asks again after a reconnect."""
        request = self.to_server.pop(str(editor_id), None)
        if request is not None and request.permission_id is not None:
            self.open_permissions.pop(request.permission_id, None)
            if result is not None:
                self.permission_answers[request.permission_id] = result
        return request
