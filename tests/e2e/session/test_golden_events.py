"""The stored events do not change unnoticed (issue 27 item 4): a fixed session on a real
server with the scripted model — a turn with reasoning, a plan, a permission asked and
granted, a file written; a retried model error; mode, goal, title and queue changes; a
forced compaction; a file reverted and a rewind — and every event's stored payload, byte
for byte as the events table holds it, is compared with the golden file recorded from the
code before events were typed (golden/session_events.txt). Only what differs by nature
between runs is normalised: generated ids (numbered by first appearance), the temporary
paths and the clock.

A deliberate change of what is stored re-records the file: AGENTD_GOLDEN_UPDATE=1 pytest this_file.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import sqlite3
from pathlib import Path
from typing import Any

from agentd.core import EventKind, Unparsed, decode, encode
from agentd.core.modes import PermissionMode
from tests.support.client import allow, text_prompt
from tests.support.server import scripted
from tests.support.session import queue_of_length, served_session, tool_call

GOLDEN = Path(__file__).parent / "golden" / "session_events.txt"

_ID = re.compile(
    r"\b(sess|turn|prompt|msg|user|thought|compact|compaction_turn|perm|req|sub|task|q)_[0-9a-f]{8,}(?![0-9a-f])"
)
_TIME = re.compile(r'"(\w*(?:At|Ms|_at|_ms|Seconds|time|Time))":\s*(?:"[^"]*"|-?[\d.eE+-]+)')
# Token counts: the scripted model estimates them from the request, which holds the
# temporary workspace's path (its length varies between runs).
_TOKENS = re.compile(r'"(\w*Tokens|used)":\d+')
_ISO = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)?")


def normalise(rows: list[tuple[int, str, str]], paths: dict[str, str]) -> str:
    """One line per event (`seq kind payload`), ids numbered in order of appearance, paths
    and times replaced."""
    seen: dict[str, str] = {}

    def number(m: re.Match[str]) -> str:
        return seen.setdefault(m[0], f"{m[1]}_<{len(seen)}>")

    out = []
    for seq, kind, payload in rows:
        text = payload
        for path, name in paths.items():
            text = text.replace(json.dumps(path)[1:-1], name).replace(path, name)
        text = _ID.sub(number, text)
        text = _TIME.sub(lambda m: f'"{m[1]}":"<time>"', text)
        text = _TOKENS.sub(lambda m: f'"{m[1]}":"<n>"', text)
        out.append(f"{seq} {kind} {_ISO.sub('<time>', text)}")
    return "\n".join(out) + "\n"


def stored_rows(db: Path, sid: str) -> list[tuple[int, str, str]]:
    """(seq, kind, payload text) of the session's events as the events table holds them."""
    with sqlite3.connect(db) as conn:
        rows = conn.execute(
            "SELECT seq, kind, payload FROM events WHERE session_id = ? ORDER BY seq", (sid,)
        ).fetchall()
    return [(int(s), str(k), p.decode() if isinstance(p, bytes) else str(p)) for s, k, p in rows]


def the_script() -> list[dict[str, Any]]:
    todos = [{"content": c, "status": "completed"} for c in ("write a.txt", "check it")]
    return [
        {  # turn 1: reasoning, text, a plan and a write that asks permission
            "reasoning": "Plan first, then write.",
            "text": "I will write a.txt.",
            "tool_calls": [
                tool_call("todo_write", "call_plan0001", todos=todos),
                tool_call("write_file", "call_write001", path="a.txt", content="one\n"),
            ],
        },
        {"text": "Wrote a.txt."},
        # turn 2: the model fails once with a retryable error, then answers
        {"error": {"kind": "rate_limited", "message": "slow down", "retry_after": 0}},
        {"text": "Second answer."},
        # turn 3 asks to write again and waits for its answer while turn 4 is queued
        {"tool_calls": [tool_call("write_file", "call_write002", path="b.txt", content="two\n")]},
        {"text": "Wrote b.txt."},
        {"text": "Queued answer."},  # turn 4, from the queue
        {"text": "SUMMARY of the session so far."},  # the forced compaction's summariser
        {"text": "Last answer."},  # turn 5, the one rewound
    ]


async def test_a_fixed_session_stores_the_golden_payloads_byte_for_byte(
    server_factory: Any, workspace: Path, tmp_path: Path
) -> None:
    db = tmp_path / "golden.db"
    (workspace / "a.txt").write_text("zero\n")
    async with served_session(
        server_factory,
        workspace,
        scripted(*the_script()),
        permission_mode=PermissionMode.DEFAULT,
        database_url=f"sqlite+aiosqlite:///{db}",
    ) as (_, client, sid):
        # The second write's permission waits until the next prompt is queued behind its turn.
        asking, queued = asyncio.Event(), asyncio.Event()
        allowing = allow()

        async def permission(msg: dict[str, Any]) -> dict[str, Any]:
            if msg["params"]["toolCall"]["toolCallId"] == "call_write002":
                asking.set()
                await queued.wait()
            return await allowing(msg)

        client.on_request = permission
        await client.call("session/prompt", text_prompt(sid, "write a.txt"))
        await client.call("session/prompt", text_prompt(sid, "again"))
        await client.call("_agentd/prompt/enqueue", text_prompt(sid, "write b.txt"))
        await asyncio.wait_for(asking.wait(), 30)
        behind = asyncio.create_task(client.call("session/prompt", text_prompt(sid, "after the queue")))
        await client.wait_notification(queue_of_length(sid, 1), within=30)
        queued.set()
        await asyncio.wait_for(behind, 60)
        await client.call("_agentd/session/compact", {"sessionId": sid})
        await client.call("session/prompt", text_prompt(sid, "last"))
        await client.call("_agentd/goal/set", {"sessionId": sid, "objective": "keep a.txt tidy"})
        await client.call("_agentd/goal/clear", {"sessionId": sid})
        await client.call("_agentd/session/rename", {"sessionId": sid, "title": "golden"})
        await client.call("_agentd/session/revert_file", {"sessionId": sid, "path": "a.txt"})
        await client.call("session/set_mode", {"sessionId": sid, "modeId": "plan"})
        await client.call("session/set_mode", {"sessionId": sid, "modeId": "accept_edits"})
        # The last turn (those before the compaction cannot be rewound).
        last_turn = [r[2] for r in stored_rows(db, sid) if r[1] == "turn_started"][-1]
        turn_id = json.loads(last_turn)["turnId"]
        await client.call("_agentd/session/rewind", {"sessionId": sid, "toTurnId": turn_id, "files": False})
    rows = stored_rows(db, sid)
    got = normalise(rows, {str(workspace): "<ws>", str(tmp_path): "<tmp>"})
    if os.environ.get("AGENTD_GOLDEN_UPDATE") == "1":
        GOLDEN.write_text(got)
    assert got == GOLDEN.read_text()
    # Every stored payload reads back as a typed update (none left unparsed) that encodes
    # to the very bytes stored: old rows replay as they are.
    for _, kind, payload in rows:
        update = decode(EventKind(kind), payload.encode())
        assert not isinstance(update, Unparsed), (kind, payload)
        assert encode(update) == payload.encode()


def test_the_golden_payloads_round_trip_through_the_codec() -> None:
    """The recorded rows (normalised, as the file holds them) decode and encode back to
    the same bytes too."""
    for line in GOLDEN.read_text().splitlines():
        _, kind, payload = line.split(" ", 2)
        assert encode(decode(EventKind(kind), payload.encode())) == payload.encode(), line
