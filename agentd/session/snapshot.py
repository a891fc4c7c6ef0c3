"""The live state a (re)attaching client renders at once (R-E3): taken by the actor in the
same step as the subscription, so nothing falls between them."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from agentd.core import GoalState
from agentd.session.permission_gate import PendingPermission
from agentd.session.queue import QueuedPrompt


@dataclass(frozen=True)
class Running:
    turn_id: str
    prompt_id: str


def build_snapshot(
    *,
    session_id: str,
    last_seq: int,
    mode: str,
    model: str,
    agent: str,
    queue: Iterable[QueuedPrompt],
    pending: Iterable[PendingPermission],
    running: Running | None,
    goal: GoalState | None,
    title: str | None,
) -> dict[str, Any]:
    snap: dict[str, Any] = {
        "sessionId": session_id,
        "status": "running" if running else "idle",
        "lastSeq": last_seq,
        "mode": mode,
        "model": model,
        "agent": agent,
        "queue": [
            {"promptId": q.id, "kind": q.kind.value, "version": q.version, "text": q.text} for q in queue
        ],
        "pendingPermissions": [
            {"requestId": p.id, "toolCall": p.tool_call, "options": p.options} for p in pending
        ],
    }
    if running is not None:
        snap["turnId"] = running.turn_id
        snap["promptId"] = running.prompt_id
    if goal is not None:
        snap["goal"] = goal.to_dict()
    if title:
        snap["title"] = title
    return snap
