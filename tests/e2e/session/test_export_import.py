"""Session export and import (issue 33 item 1) through real servers and the real command line.

A session run on SQLite is exported over the protocol, imported into Postgres with
`agentd session import`, exported back with `agentd session export` and imported into a
fresh SQLite over the protocol: each copy replays event for event what the original does,
and what it holds (transcript, queue, goal, usage, file snapshots) survives. The export
is the owner's alone, carries no server secret, and a refused import writes nothing.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

from agentd.core.modes import PermissionMode
from agentd.store.export_codec import REDACTED, decode
from tests.support.cli import agentd, clean_env
from tests.support.client import WsClient, text_prompt
from tests.support.databases import postgres_database
from tests.support.server import scripted
from tests.support.session import new_session, tool_call

EXPORT = "_agentd/session/export"
IMPORT = "_agentd/session/import"
SECRET = "sk-test-do-not-leak-4f2a9c"


def _steps() -> list[dict[str, Any]]:
    return [
        {"tool_calls": [tool_call("write_file", "c1", path="a.txt", content="one\n")]},
        {"text": "wrote a"},
        {"tool_calls": [tool_call("edit_file", "c2", path="a.txt", old_string="one", new_string="two")]},
        {"text": "edited a"},
        {"text": "more"},
    ]


async def _replay(client: WsClient, sid: str, cwd: Path) -> list[dict[str, Any]]:
    """The frames `session/load` replays for the session (everything before its answer)."""
    start = len(client.frames)
    await client.call("session/load", {"sessionId": sid, "cwd": str(cwd), "mcpServers": []})
    frames = [
        f
        for f in client.frames[start:]
        if isinstance(f, dict) and f.get("method") in ("session/update", "_agentd/event")
    ]
    kinds = {f["params"].get("update", {}).get("sessionUpdate") for f in frames}
    assert "tool_call" in kinds and "agent_message_chunk" in kinds  # a real history was replayed
    return frames


async def _replay_on(server: Any, sid: str, cwd: Path) -> list[dict[str, Any]]:
    client = await server.client()
    try:
        return await _replay(client, sid, cwd)
    finally:
        await client.close()


async def test_round_trip_sqlite_to_postgres_and_back_replays_event_for_event(
    server_factory, workspace: Path, tmp_path: Path
):
    home = tmp_path / "cli-home"
    home.mkdir()
    env = clean_env(home)
    async with postgres_database(migrated=True) as pg_url:
        sqlite_a = f"sqlite+aiosqlite:///{tmp_path / 'a.db'}"
        async with server_factory(
            scripted(*_steps()), database_url=sqlite_a, permission_mode=PermissionMode.BYPASS
        ) as server:
            client = await server.client()
            sid = await new_session(client, workspace)
            await client.call("session/prompt", text_prompt(sid, "first"))
            await client.call("session/prompt", text_prompt(sid, "second"))
            await client.call("_agentd/goal/set", {"sessionId": sid, "objective": "keep a.txt tidy"})
            exported = await client.call(EXPORT, {"sessionId": sid})
            original = await _replay(client, sid, workspace)
            await client.close()
        first = tmp_path / "s.jsonl"
        first.write_text(exported["jsonl"])

        run = await agentd("session", "import", str(first), "--database-url", pg_url, env=env, cwd=tmp_path)
        assert run.code == 0, run.text
        assert run.out.startswith(f"imported {sid} (")

        again = tmp_path / "s2.jsonl"
        run = await agentd(
            "session", "export", sid, "--database-url", pg_url, "--output", str(again), env=env, cwd=tmp_path
        )
        assert run.code == 0, run.text
        async with server_factory(scripted({"text": "unused"}), database_url=pg_url) as pg_server:
            assert await _replay_on(pg_server, sid, workspace) == original

        a, b = decode(first.read_bytes()), decode(again.read_bytes())
        assert (a.events, a.messages, a.queue, a.snapshots, a.cuts) == (
            b.events,
            b.messages,
            b.queue,
            b.snapshots,
            b.cuts,
        )
        assert a.session == b.session and a.session["goal"]["objective"] == "keep a.txt tidy"
        assert a.session["usage"] and len(a.snapshots) == 2

        sqlite_c = f"sqlite+aiosqlite:///{tmp_path / 'c.db'}"
        async with server_factory(
            scripted({"text": "unused"}), database_url=sqlite_c, home=tmp_path / "home-c"
        ) as server_c:
            client = await server_c.client()
            done = await client.call(IMPORT, {"jsonl": again.read_text()})
            assert done["sessionId"] == sid and done["events"] == len(a.events)
            await client.close()
            assert await _replay_on(server_c, sid, workspace) == original


async def test_an_imported_session_goes_on_and_rewinds_with_its_snapshots(server_factory, workspace: Path):
    async with server_factory(scripted(*_steps()), permission_mode=PermissionMode.BYPASS) as server:
        client = await server.client()
        sid = await new_session(client, workspace)
        await client.call("session/prompt", text_prompt(sid, "first"))
        await client.call("session/prompt", text_prompt(sid, "second"))
        jsonl = (await client.call(EXPORT, {"sessionId": sid}))["jsonl"]

        copy = (await client.call(IMPORT, {"jsonl": jsonl}))["sessionId"]  # beside its original: a new id

        assert copy != sid
        await client.call("session/load", {"sessionId": copy, "cwd": str(workspace), "mcpServers": []})
        changes = await client.call("_agentd/session/changes", {"sessionId": copy})
        assert [f["path"] for f in changes["files"]] == ["a.txt"]
        await client.call("_agentd/session/revert_file", {"sessionId": copy, "path": "a.txt"})
        assert not (workspace / "a.txt").exists()  # the copy's snapshot: a.txt did not exist
        await client.close()


async def test_export_carries_no_server_secret_and_workspace_files_on_request(
    server_factory, workspace: Path, tmp_path: Path
):
    (workspace / "notes.md").write_text("# notes\n")
    (workspace / ".gitignore").write_text("build/\n")
    (workspace / "build").mkdir()
    (workspace / "build" / "out.bin").write_bytes(b"\x00" * 10)
    steps = [{"text": f"the key you pasted, {SECRET}, is now in the log"}]
    async with server_factory(scripted(*steps), openai_api_key=SECRET) as server:
        client = await server.client()
        sid = await new_session(client, workspace)
        await client.call("session/prompt", text_prompt(sid, f"here is {SECRET}"))

        plain = (await client.call(EXPORT, {"sessionId": sid}))["jsonl"]
        with_files = (await client.call(EXPORT, {"sessionId": sid, "files": True}))["jsonl"]

        assert SECRET not in plain and SECRET not in with_files and REDACTED in plain
        assert decode(plain.encode()).files == []
        files = dict(decode(with_files.encode()).files)
        assert files == {".gitignore": b"build/\n", "notes.md": b"# notes\n"}  # what git ignores stays
        target = tmp_path / "elsewhere"
        target.mkdir()
        clash = tmp_path / "clash"
        clash.mkdir()
        (clash / "notes.md").write_text("mine\n")
        store = server.app.state.agentd.store
        before = await store.count_sessions("local")
        refused = await client.request(IMPORT, {"jsonl": with_files, "cwd": str(clash)})
        assert (
            "files in" in refused["error"]["message"]
            and "differ from the export's: notes.md" in (refused["error"]["message"])
        )
        assert (clash / "notes.md").read_text() == "mine\n" and not (clash / ".gitignore").exists()
        assert await store.count_sessions("local") == before  # nothing imported
        done = await client.call(IMPORT, {"jsonl": with_files, "cwd": str(target)})
        assert done["files"] == 2 and (target / "notes.md").read_text() == "# notes\n"
        await client.close()


async def test_only_the_owner_exports(server_factory, workspace: Path):
    from agentd.infra.auth import create_token
    from agentd.infra.config import AuthMode

    async with server_factory(
        scripted({"text": "ok"}, loop=True),
        auth=AuthMode.TOKEN,
        rate_limit_per_s=0,
        workspace_grants={"alice": [str(workspace)]},
    ) as server:
        store = server.app.state.agentd.store
        alice_token, _ = await create_token(store, "alice", teams=("core",))
        bob_token, _ = await create_token(store, "bob", teams=("core",))
        alice = await WsClient.connect(server.base_url, token=alice_token)
        bob = await WsClient.connect(server.base_url, token=bob_token)
        sid = await new_session(alice, workspace)
        await alice.call("_agentd/session/share", {"sessionId": sid, "team": "core", "access": "drive"})

        resp = await bob.request(EXPORT, {"sessionId": sid})
        missing = await bob.request(EXPORT, {"sessionId": f"sess_{uuid.uuid4().hex}"})

        assert resp["error"]["code"] == -32014  # a driver of the share is denied, not served
        assert missing["error"]["code"] == -32002
        assert "jsonl" in (await alice.call(EXPORT, {"sessionId": sid}))
        await alice.close()
        await bob.close()


async def test_a_refused_import_over_the_protocol_writes_nothing(server_factory, workspace: Path):
    async with server_factory(scripted({"text": "ok"})) as server:
        client = await server.client()
        sid = await new_session(client, workspace)
        await client.call("session/prompt", text_prompt(sid, "hi"))
        jsonl = (await client.call(EXPORT, {"sessionId": sid}))["jsonl"]
        store = server.app.state.agentd.store
        before = await store.count_sessions("local")
        cases = {
            jsonl[: len(jsonl) // 2]: "cannot import: line",
            jsonl.replace('"version":1', '"version":2', 1): "format version 2 is newer",
            "not json\n": "not a JSON object",
        }
        for text, message in cases.items():
            resp = await client.request(IMPORT, {"jsonl": text})
            assert resp["error"]["code"] == -32602 and message in resp["error"]["message"], message
            assert resp["error"]["data"] == {"kind": "import_refused"}
        assert await store.count_sessions("local") == before
        await client.close()
