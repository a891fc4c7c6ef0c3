"""Snapshots before edits and rewind (R-T12, issue 16 item 14), through the public protocol.

Seed 003: "快照（snapshot_before_mutating_tools，变更类工具执行前留底）" — before a mutating
tool runs, the files it changes are kept; `_agentd/session/rewind` puts them back and cuts
the conversation to before the turn, and every attached client sees a `rewound` event.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from agentd.core.modes import PermissionMode
from tests.support.client import WsClient, text_prompt
from tests.support.gated import GatedProvider
from tests.support.server import scripted
from tests.support.session import events, served_session, tool_call

REWIND = "_agentd/session/rewind"


def _two_editing_turns() -> list[dict[str, Any]]:
    """Turn 1 creates a.txt; turn 2 edits it and creates new.txt; then a plain turn."""
    return [
        {"tool_calls": [tool_call("write_file", "c1", path="a.txt", content="one\n")]},
        {"text": "wrote a"},
        {
            "tool_calls": [
                tool_call("edit_file", "c2", path="a.txt", old_string="one", new_string="two"),
                tool_call("write_file", "c3", path="sub/new.txt", content="created\n"),
                tool_call("edit_file", "c4", path="a.txt", old_string="two", new_string="three"),
            ]
        },
        {"text": "edited a"},
        {"text": "third turn"},
    ]


def _turn_ids(client: WsClient, sid: str) -> list[str]:
    return [e["turnId"] for e in events(client, sid, "turn_started")]


def _said(provider: Any, text: str) -> bool:
    """Whether the last request the model got mentions `text` in a user message."""
    return any(m.role == "user" and text in str(m.content) for m in provider.requests[-1].messages)


async def _rewound_on(client: WsClient, sid: str) -> dict[str, Any]:
    frame = await client.wait_notification(
        lambda f: (
            f.get("method") == "_agentd/event"
            and f["params"]["sessionId"] == sid
            and f["params"]["kind"] == "rewound"
        )
    )
    event: dict[str, Any] = frame["params"]["event"]
    return event


async def test_rewind_restores_files_and_conversation_and_every_client_sees_it(
    server_factory, workspace: Path, db_url: str
):
    provider = scripted(*_two_editing_turns())
    async with served_session(
        server_factory, workspace, provider, permission_mode=PermissionMode.BYPASS, database_url=db_url
    ) as (server, alice, sid):
        await alice.call("session/prompt", text_prompt(sid, "first request"))
        await alice.call("session/prompt", text_prompt(sid, "second request"))
        assert (workspace / "a.txt").read_text() == "three\n"
        assert (workspace / "sub/new.txt").read_text() == "created\n"
        _, second = _turn_ids(alice, sid)
        bob = await server.client()
        await bob.call("_agentd/session/attach", {"sessionId": sid})

        done = await alice.call(REWIND, {"sessionId": sid, "toTurnId": second, "files": True})

        # The content before turn 2 (not after its first edit); the file it created is gone.
        assert (workspace / "a.txt").read_text() == "one\n"
        assert not (workspace / "sub/new.txt").exists()
        assert done["restored"] == ["a.txt"] and done["removed"] == ["sub/new.txt"]
        assert done["notRestored"] == [] and done["turnsUndone"] == [second]
        seen = await _rewound_on(bob, sid)
        assert seen["turnId"] == second and seen["restored"] == ["a.txt"]
        # The conversation lost turn 2 but kept turn 1.
        await alice.call("session/prompt", text_prompt(sid, "third request"))
        assert _said(provider, "first request") and not _said(provider, "second request")
        await alice.close()
        await bob.close()


async def test_rewind_of_the_first_turn_removes_the_file_it_created(server_factory, workspace: Path):
    provider = scripted(*_two_editing_turns())
    async with served_session(server_factory, workspace, provider, permission_mode=PermissionMode.BYPASS) as (
        _,
        client,
        sid,
    ):
        await client.call("session/prompt", text_prompt(sid, "first request"))
        await client.call("session/prompt", text_prompt(sid, "second request"))
        first, _ = _turn_ids(client, sid)

        done = await client.call(REWIND, {"sessionId": sid, "toTurnId": first})

        assert not (workspace / "a.txt").exists() and not (workspace / "sub/new.txt").exists()
        assert sorted(done["removed"]) == ["a.txt", "sub/new.txt"] and len(done["turnsUndone"]) == 2
        await client.call("session/prompt", text_prompt(sid, "third request"))
        assert not _said(provider, "first request") and not _said(provider, "second request")


async def test_files_false_rewinds_only_the_conversation(server_factory, workspace: Path):
    provider = scripted(*_two_editing_turns())
    async with served_session(server_factory, workspace, provider, permission_mode=PermissionMode.BYPASS) as (
        _,
        client,
        sid,
    ):
        await client.call("session/prompt", text_prompt(sid, "first request"))
        await client.call("session/prompt", text_prompt(sid, "second request"))
        _, second = _turn_ids(client, sid)

        done = await client.call(REWIND, {"sessionId": sid, "toTurnId": second, "files": False})

        assert done["restored"] == [] and done["removed"] == []
        assert (workspace / "a.txt").read_text() == "three\n"
        assert (workspace / "sub/new.txt").exists()
        await client.call("session/prompt", text_prompt(sid, "third request"))
        assert _said(provider, "first request") and not _said(provider, "second request")


async def test_unknown_turn_is_a_clear_error_and_changes_nothing(server_factory, workspace: Path):
    provider = scripted(*_two_editing_turns())
    async with served_session(server_factory, workspace, provider, permission_mode=PermissionMode.BYPASS) as (
        _,
        client,
        sid,
    ):
        await client.call("session/prompt", text_prompt(sid, "first request"))
        await client.call("session/prompt", text_prompt(sid, "second request"))
        first, second = _turn_ids(client, sid)

        resp = await client.request(REWIND, {"sessionId": sid, "toTurnId": "turn_nope"})

        assert resp["error"]["code"] == -32602
        assert "unknown turn 'turn_nope'" in resp["error"]["message"]
        assert resp["error"]["data"]["recentTurns"] == [first, second]
        assert (workspace / "a.txt").read_text() == "three\n" and (workspace / "sub/new.txt").exists()
        assert events(client, sid, "rewound") == []
        await client.call("session/prompt", text_prompt(sid, "third request"))
        assert _said(provider, "first request") and _said(provider, "second request")


async def test_rewind_while_a_turn_runs_is_refused_as_busy(server_factory, workspace: Path):
    provider = GatedProvider(scripted(*_two_editing_turns()), hold={2})
    async with served_session(server_factory, workspace, provider, permission_mode=PermissionMode.BYPASS) as (
        _,
        client,
        sid,
    ):
        await client.call("session/prompt", text_prompt(sid, "first request"))
        (first,) = _turn_ids(client, sid)
        running = asyncio.create_task(client.request("session/prompt", text_prompt(sid, "second request")))
        await provider.held(2)

        resp = await client.request(REWIND, {"sessionId": sid, "toTurnId": first})

        assert resp["error"]["code"] == -32011 and "session_busy" in resp["error"]["message"]
        provider.release(2)
        assert (await running)["result"]["stopReason"] == "end_turn"
        assert (workspace / "a.txt").read_text() == "three\n"
        _, second = _turn_ids(client, sid)
        # Idle again: a rewind now works.
        done = await client.call(REWIND, {"sessionId": sid, "toTurnId": second})
        assert (workspace / "a.txt").read_text() == "one\n" and done["turnsUndone"] == [second]


async def test_rewind_local_command_undoes_the_last_turn(server_factory, workspace: Path):
    provider = scripted(*_two_editing_turns())
    async with served_session(server_factory, workspace, provider, permission_mode=PermissionMode.BYPASS) as (
        _,
        client,
        sid,
    ):
        await client.call("session/prompt", text_prompt(sid, "first request"))
        await client.call("session/prompt", text_prompt(sid, "second request"))
        _, second = _turn_ids(client, sid)

        await client.call("session/prompt", text_prompt(sid, "/rewind"))

        assert (workspace / "a.txt").read_text() == "one\n"
        assert not (workspace / "sub/new.txt").exists()
        assert events(client, sid, "rewound")[-1]["turnsUndone"] == [second]


async def test_a_file_over_the_cap_is_reported_not_restorable(server_factory, workspace: Path):
    (workspace / "big.txt").write_text("x" * 64)
    provider = scripted(
        {"tool_calls": [tool_call("write_file", "c1", path="big.txt", content="small\n")]},
        {"text": "shrunk it"},
    )
    async with served_session(
        server_factory, workspace, provider, permission_mode=PermissionMode.BYPASS, snapshot_max_file_bytes=32
    ) as (_, client, sid):
        await client.call("session/prompt", text_prompt(sid, "shrink big.txt"))
        (turn,) = _turn_ids(client, sid)

        done = await client.call(REWIND, {"sessionId": sid, "toTurnId": turn})

        assert done["notRestored"] == ["big.txt"] and done["restored"] == []
        assert (workspace / "big.txt").read_text() == "small\n"  # said so, not silently skipped


async def test_rewind_never_follows_a_symlink_out_of_the_workspace(server_factory, workspace: Path):
    provider = scripted(*_two_editing_turns())
    async with served_session(server_factory, workspace, provider, permission_mode=PermissionMode.BYPASS) as (
        _,
        client,
        sid,
    ):
        await client.call("session/prompt", text_prompt(sid, "first request"))
        await client.call("session/prompt", text_prompt(sid, "second request"))
        _, second = _turn_ids(client, sid)
        # sub/ (where turn 2 created new.txt) becomes a link to a directory outside.
        outside = workspace.parent / "outside"
        outside.mkdir()
        (outside / "new.txt").write_text("not yours\n")
        for p in (workspace / "sub").iterdir():
            p.unlink()
        (workspace / "sub").rmdir()
        (workspace / "sub").symlink_to(outside)

        done = await client.call(REWIND, {"sessionId": sid, "toTurnId": second})

        assert (outside / "new.txt").read_text() == "not yours\n"
        assert done["notRestored"] == ["sub/new.txt"] and done["restored"] == ["a.txt"]


async def test_turn_marks_ride_turn_started_and_clear_and_rewind_cut_them(server_factory, workspace: Path):
    """A turn's mark is its `turn_started` event (`messageIndex`), no row of its own; `/clear`
    and a rewind are the only writes that change which turns a rewind reaches."""
    provider = scripted({"text": "r0"}, {"text": "r1"}, {"text": "r2"}, {"text": "r3"})
    async with served_session(server_factory, workspace, provider, permission_mode=PermissionMode.BYPASS) as (
        _,
        client,
        sid,
    ):
        for prompt in ("zero request", "first request", "/clear", "second request"):
            await client.call("session/prompt", text_prompt(sid, prompt))
        started = events(client, sid, "turn_started")
        assert [e.get("messageIndex") for e in started] == [0, 2, None, 0]  # /clear: no mark
        zero, first, _, _ = (e["turnId"] for e in started)

        done = await client.call(REWIND, {"sessionId": sid, "toTurnId": first, "files": False})

        # The first turn began at message 2, but /clear emptied the conversation since.
        assert done["messages"] == 0
        assert done["turnsUndone"] == [first, started[3]["turnId"]]
        again = await client.request(REWIND, {"sessionId": sid, "toTurnId": first})
        assert "unknown turn" in again["error"]["message"]  # already undone
        await client.call("session/prompt", text_prompt(sid, "third request"))
        assert _said(provider, "third request") and not _said(provider, "second request")
        third = events(client, sid, "turn_started")[-1]["turnId"]
        nope = await client.request(REWIND, {"sessionId": sid, "toTurnId": "turn_nope"})
        assert nope["error"]["data"]["recentTurns"] == [zero, third]
