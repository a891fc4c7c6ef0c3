"""Long stored sessions for the replay tests (tests/e2e/session/test_replay_*.py)."""

from __future__ import annotations

import uuid
from pathlib import Path

from agentd.infra.auth import LOCAL_PRINCIPAL
from agentd.store import EventWrite
from agentd.store.db import Batch, Store
from tests.support.databases import event_write

BUFFER = 64  # the live buffer (client_buffer_frames) of every server here
LOAD = "session/load"


def history(session_id: str, n: int, pad: int) -> list[EventWrite]:
    """`n` durable events, each with exactly one frame in both replay forms; answers of
    `pad` characters."""
    out: list[EventWrite] = []
    for seq in range(1, n + 1):
        turn, step = divmod(seq - 1, 5)
        call = f"call_{turn}"
        kind, payload = [
            (
                "user_message",
                {"messageId": f"u{turn}", "content": [{"type": "text", "text": f"prompt {turn}"}]},
            ),
            ("agent_message", {"messageId": f"m{turn}", "text": f"answer {turn} " + "x" * pad}),
            ("tool_call", {"sessionUpdate": "tool_call", "toolCallId": call, "title": "ls", "kind": "read"}),
            (
                "tool_call_update",
                {"sessionUpdate": "tool_call_update", "toolCallId": call, "status": "completed"},
            ),
            ("usage", {"used": seq, "size": 128000}),
        ][step]
        out.append(event_write(seq, kind, payload))
    return out


async def seeded_session(store: Store, cwd: Path, n: int, pad: int = 100) -> str:
    """A session with `n` events, written straight through the store (as the event
    writer's group commits do) instead of running thousands of turns."""
    sid = f"sess_{uuid.uuid4().hex}"
    await store.create_session(id=sid, owner=LOCAL_PRINCIPAL, cwd=str(cwd), mode="default", model="scripted")
    events = history(sid, n, pad)
    for i in range(0, n, 5000):
        await store.commit([Batch(sid, events=events[i : i + 5000])])
    return sid
