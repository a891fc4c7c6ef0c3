"""The changes view and per-file revert (issue 33 item 2), through a real server.

`_agentd/session/changes` diffs every file the session's tools changed against its
snapshot before the session (or a turn); `_agentd/session/revert_file` puts one back,
refusing when the file changed outside the session since; `/diff` shows the same in chat.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

from agentd.core.modes import PermissionMode
from tests.support.client import WsClient, text_prompt
from tests.support.server import scripted
from tests.support.session import events, served_session, tool_call

CHANGES = "_agentd/session/changes"
REVERT = "_agentd/session/revert_file"


def _edits() -> list[dict[str, Any]]:
    """Turn 1 edits the existing a.txt; turn 2 edits it again and creates sub/new.txt."""
    return [
        {"tool_calls": [tool_call("edit_file", "c1", path="a.txt", old_string="zero", new_string="one")]},
        {"text": "edited a"},
        {
            "tool_calls": [
                tool_call("edit_file", "c2", path="a.txt", old_string="one", new_string="two"),
                tool_call("write_file", "c3", path="sub/new.txt", content="created\n"),
            ]
        },
        {"text": "edited a again"},
        {"text": "a third turn"},
    ]


def _by_path(result: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {f["path"]: f for f in result["files"]}


async def _two_turns(client: WsClient, sid: str) -> list[str]:
    await client.call("session/prompt", text_prompt(sid, "first"))
    await client.call("session/prompt", text_prompt(sid, "second"))
    return [e["turnId"] for e in events(client, sid, "turn_started")]


async def test_changes_is_the_cumulative_diff_since_the_session_or_a_turn(
    server_factory, workspace: Path, db_url: str
):
    (workspace / "a.txt").write_text("zero\n")
    async with served_session(
        server_factory,
        workspace,
        scripted(*_edits()),
        permission_mode=PermissionMode.BYPASS,
        database_url=db_url,
    ) as (_, client, sid):
        _, second = await _two_turns(client, sid)

        every = _by_path(await client.call(CHANGES, {"sessionId": sid}))
        from_second = _by_path(await client.call(CHANGES, {"sessionId": sid, "since": second}))

        a = every["a.txt"]
        # From before the session: zero → two (not one → two), in one diff.
        assert a["status"] == "modified" and a["source"] == "snapshot" and a["revertible"]
        assert "-zero\n" in a["diff"] and "+two\n" in a["diff"] and "one" not in a["diff"]
        new = every["sub/new.txt"]
        assert (
            new["status"] == "added"
            and "+created\n" in new["diff"]
            and new["diff"].startswith("--- /dev/null")
        )
        assert "-one\n" in from_second["a.txt"]["diff"] and "+two\n" in from_second["a.txt"]["diff"]
        assert set(every) == {"a.txt", "sub/new.txt"}


async def test_revert_file_restores_one_file_to_before_the_session(server_factory, workspace: Path):
    (workspace / "a.txt").write_text("zero\n")
    async with served_session(
        server_factory, workspace, scripted(*_edits()), permission_mode=PermissionMode.BYPASS
    ) as (_, client, sid):
        _, second = await _two_turns(client, sid)

        done = await client.call(REVERT, {"sessionId": sid, "path": "a.txt"})
        assert done == {"path": "a.txt", "reverted": "restored", "turnId": done["turnId"]}
        told = await client.wait_notification(  # every attached client is told
            lambda f: f.get("method") == "_agentd/event" and f["params"]["kind"] == "file_reverted"
        )
        assert told["params"]["event"] == done
        assert (workspace / "a.txt").read_text() == "zero\n"
        assert (workspace / "sub/new.txt").read_text() == "created\n"  # only the one file
        assert set(_by_path(await client.call(CHANGES, {"sessionId": sid}))) == {"sub/new.txt"}

        removed = await client.call(REVERT, {"sessionId": sid, "path": "sub/new.txt", "toTurnId": second})
        assert removed["reverted"] == "removed" and not (workspace / "sub/new.txt").exists()
        assert (await client.call(CHANGES, {"sessionId": sid}))["files"] == []


async def test_revert_to_before_a_turn(server_factory, workspace: Path):
    (workspace / "a.txt").write_text("zero\n")
    async with served_session(
        server_factory, workspace, scripted(*_edits()), permission_mode=PermissionMode.BYPASS
    ) as (_, client, sid):
        _, second = await _two_turns(client, sid)

        await client.call(REVERT, {"sessionId": sid, "path": "a.txt", "toTurnId": second})

        assert (workspace / "a.txt").read_text() == "one\n"


async def test_a_file_changed_outside_the_session_is_not_reverted_unless_forced(
    server_factory, workspace: Path
):
    (workspace / "a.txt").write_text("zero\n")
    async with served_session(
        server_factory, workspace, scripted(*_edits()), permission_mode=PermissionMode.BYPASS
    ) as (_, client, sid):
        await _two_turns(client, sid)
        (workspace / "a.txt").write_text("someone else's work\n")

        resp = await client.request(REVERT, {"sessionId": sid, "path": "a.txt"})

        assert resp["error"]["code"] == -32602 and "changed outside the session" in resp["error"]["message"]
        assert resp["error"]["data"]["reason"] == "changed_outside"
        assert (workspace / "a.txt").read_text() == "someone else's work\n"  # untouched
        await client.call(REVERT, {"sessionId": sid, "path": "a.txt", "force": True})
        assert (workspace / "a.txt").read_text() == "zero\n"


async def test_bad_revert_requests_are_clear_errors_and_change_nothing(server_factory, workspace: Path):
    (workspace / "a.txt").write_text("zero\n")
    (workspace / "other.txt").write_text("kept\n")
    async with served_session(
        server_factory, workspace, scripted(*_edits()), permission_mode=PermissionMode.BYPASS
    ) as (_, client, sid):
        await _two_turns(client, sid)
        cases = [
            ({"path": "other.txt"}, "did not change it"),
            ({"path": "../outside.txt"}, "not a path inside the session's workspace"),
            ({"path": "/etc/passwd"}, "not a path inside the session's workspace"),
            ({"path": "a.txt", "toTurnId": "turn_nope"}, "unknown turn 'turn_nope'"),
        ]
        for params, message in cases:
            resp = await client.request(REVERT, {"sessionId": sid, **params})
            assert resp["error"]["code"] == -32602 and message in resp["error"]["message"], params
        resp = await client.request(CHANGES, {"sessionId": sid, "since": "turn_nope"})
        assert resp["error"]["code"] == -32602
        assert (workspace / "a.txt").read_text() == "two\n" and (
            workspace / "other.txt"
        ).read_text() == "kept\n"


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(cwd), *args], check=True, capture_output=True)


async def test_changes_made_outside_the_file_tools_come_from_git(server_factory, workspace: Path):
    (workspace / "a.txt").write_text("zero\n")
    (workspace / "tracked.txt").write_text("before\n")
    _git(workspace, "init", "-q")
    _git(workspace, "add", ".")
    _git(workspace, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "base")
    steps = [
        {"tool_calls": [tool_call("edit_file", "c1", path="a.txt", old_string="zero", new_string="one")]},
        {"text": "edited"},
    ]
    async with served_session(
        server_factory, workspace, scripted(*steps), permission_mode=PermissionMode.BYPASS
    ) as (_, client, sid):
        await client.call("session/prompt", text_prompt(sid, "first"))
        # What a shell command would do: the file tools never saw these.
        (workspace / "tracked.txt").write_text("after\n")
        (workspace / "made.txt").write_text("by bash\n")

        result = await client.call(CHANGES, {"sessionId": sid})

        files = _by_path(result)
        assert result["git"] is True
        assert files["a.txt"]["source"] == "snapshot"
        tracked, made = files["tracked.txt"], files["made.txt"]
        assert tracked["source"] == "git" and not tracked["revertible"] and tracked["status"] == "modified"
        assert "-before" in tracked["diff"] and "+after" in tracked["diff"]
        assert made["status"] == "added" and "+by bash" in made["diff"]
        resp = await client.request(REVERT, {"sessionId": sid, "path": "tracked.txt"})
        assert "did not change it" in resp["error"]["message"]


async def test_diff_command_shows_the_changes(server_factory, workspace: Path):
    (workspace / "a.txt").write_text("zero\n")
    async with served_session(
        server_factory, workspace, scripted(*_edits()), permission_mode=PermissionMode.BYPASS
    ) as (_, client, sid):
        await _two_turns(client, sid)

        await client.call("session/prompt", text_prompt(sid, "/diff"))

        shown = "".join(
            f["params"]["update"]["content"]["text"]
            for f in client.frames
            if isinstance(f, dict)
            and f.get("method") == "session/update"
            and f["params"]["update"].get("sessionUpdate") == "agent_message_chunk"
        )
        assert "a.txt (modified)" in shown and "-zero" in shown and "+two" in shown
        assert "sub/new.txt (added)" in shown
