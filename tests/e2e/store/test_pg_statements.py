"""What a turn sends to Postgres (issue 32 item 1): a real `agentd serve` reaches its database
through a proxy that reads the protocol (tests/support/pg_wire.py). With no other replica
watching, a warm turn is its group commits — one statement each, two for a trivial turn,
at most four for a one-tool turn — and nothing else per turn: no query of its own, and no
notification read back (the server LISTENs on the events channel only while it watches a
session another replica owns, agentd/session/replicas/log_tail.py `LogTails`). Work driven
by the clock (the lease renewal, the listener's ping) may fall inside the turns, but far
less than once per turn."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from tests.support.client import WsClient, text_prompt
from tests.support.databases import postgres_database
from tests.support.pg_wire import COMMIT_MARK, PgConn, PgWire
from tests.support.proc import agentd_serve, write_script
from tests.support.session import new_session

pytestmark = pytest.mark.timeout(120)

TURNS = 8
TOOL_MARK = "READ_IT"


def _commits(conns: list[PgConn]) -> int:
    return sum(n for c in conns for sql, n in c.statements.items() if COMMIT_MARK in sql)


def _others(conns: list[PgConn]) -> Counter[str]:
    out: Counter[str] = Counter()
    for c in conns:
        out.update({sql: n for sql, n in c.statements.items() if COMMIT_MARK not in sql})
    return out


async def test_a_warm_turn_sends_its_commits_and_reads_no_notification(
    tmp_path: Path, workspace: Path
) -> None:
    (workspace / "README.md").write_text("# a small file\n")
    script = write_script(
        tmp_path / "script.json",
        [
            {"tool_calls": [{"name": "read_file", "arguments": {"path": "README.md"}}]},
            {"text": "Read it."},
        ],
    )
    trivial = write_script(tmp_path / "trivial.json", [{"text": "Hello."}])
    async with postgres_database() as url, PgWire() as wire:
        for kind, steps, most in (("trivial", trivial, 2), ("one-tool", script, 4)):
            home = tmp_path / kind
            settings = {"database_url": wire.url_of(url), "script": str(steps), "permission_mode": "bypass"}
            async with agentd_serve(home, **settings) as server:
                client = await WsClient.connect(server.base_url)
                sid = await new_session(client, workspace)
                for _ in range(2):  # warm: the session loaded, its statements prepared
                    await client.call("session/prompt", text_prompt(sid, "warm up"))
                before = wire.snapshot()
                for _ in range(TURNS):
                    result = await client.call("session/prompt", text_prompt(sid, "go"))
                    assert result["stopReason"] == "end_turn"
                during = wire.since(before)
                await client.close()
            # Each turn's events are committed (at least once a turn), grouped as they come.
            assert TURNS <= _commits(during) <= most * TURNS, kind
            # Nothing else once per turn: no query of the turn's own on any connection.
            assert all(n < TURNS for n in _others(during).values()), (kind, _others(during))
            # No notification read back: nobody here watches a session owned elsewhere.
            assert sum(sum(c.notified.values()) for c in during) == 0, (kind, [c.notified for c in during])
            # (the listener is there: it is what would have read them)
            assert any(c.role() == "listen" for c in wire.conns), kind
