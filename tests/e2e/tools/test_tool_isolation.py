"""One session's hostile tool call must not stall anyone else (issue 9, items 6 and 9).

Each test starts a real server; session A runs a hostile call (a catastrophic regex, a
glob on long names, reads of named pipes, a command whose child leaves its process
group, files hard-linked to outside ones) and, while that call is announced running, a
second client checks the canary: `/healthz` answers, `session/new` works and another
session's trivial turn ends. The canary is bounded by `CANARY_BOUND`, far above the
issue's "under 1 s" figure: it catches a frozen event loop or an exhausted pool, it is
not a timing assertion.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from agentd.infra.config import PermissionMode, SandboxSetting
from agentd.tools.search import grep as search
from tests.support.client import WsClient, text_prompt
from tests.support.polling import until, value_of
from tests.support.proc import process_alive, read_pid
from tests.support.server import Server, scripted
from tests.support.session import cancel, final_tool_updates, is_update, new_session, shown_text

CANARY_BOUND = 10.0  # seconds; a frozen server needs far longer (the issue measured 22.7 s)
TURN_BOUND = 60.0  # a hang guard for A's own turn


async def canary(server: Server, workspace: Path) -> None:
    """Another user's requests complete while A's hostile call runs."""
    b = await server.client()
    try:
        async with asyncio.timeout(CANARY_BOUND):
            async with httpx.AsyncClient(base_url=server.base_url) as http:
                health = await http.get("/healthz")
            assert health.status_code == 200
            sid_b = await new_session(b, workspace)  # needs the server's default thread pool
            result = await b.call("session/prompt", text_prompt(sid_b, "hello"))
            assert result["stopReason"] == "end_turn"
    finally:
        await b.close()


def hostile_provider(*calls: dict[str, Any]) -> Any:
    # Shared by both sessions: A takes the tool step; the two text steps end B's turn and
    # A's, in whichever order they ask.
    return scripted({"tool_calls": list(calls)}, {"text": "done"}, {"text": "done"})


async def start_hostile_turn(server: Server, workspace: Path) -> tuple[WsClient, str, asyncio.Task[Any]]:
    a = await server.client()
    sid_a = await new_session(a, workspace)
    prompt = asyncio.create_task(a.request("session/prompt", text_prompt(sid_a, "go")))
    await a.wait_notification(is_update(sid_a, "tool_call_update", status="in_progress"))
    return a, sid_a, prompt


async def run_with_canary(server: Server, workspace: Path) -> dict[str, dict[str, Any]]:
    """A's hostile turn with the canary checked while it runs; A's final tool updates."""
    a, sid_a, prompt = await start_hostile_turn(server, workspace)
    await canary(server, workspace)
    resp = await asyncio.wait_for(prompt, TURN_BOUND)
    assert "error" not in resp, resp
    assert resp["result"]["stopReason"] == "end_turn"
    finals = final_tool_updates(a, sid_a)
    await a.close()
    return finals


# ---------------------------------------------------------------------------- search


@pytest.mark.parametrize(
    "engine",
    ["python", pytest.param("rg", marks=pytest.mark.skipif(shutil.which("rg") is None, reason="no ripgrep"))],
)
async def test_catastrophic_grep_pattern_leaves_the_server_responsive(
    server_factory, workspace: Path, monkeypatch: pytest.MonkeyPatch, engine: str
):
    monkeypatch.setenv("AGENTD_GREP_ENGINE", "python" if engine == "python" else "auto")
    # The case: `(a*)*b` on a 27-character line took 22.7 s of a frozen server.
    (workspace / "line.txt").write_text("a" * 27 + "\n")
    call = {"name": "grep", "arguments": {"pattern": "(a*)*b"}, "id": "call_grep"}
    async with server_factory(hostile_provider(call), permission_mode=PermissionMode.BYPASS) as server:
        finals = await run_with_canary(server, workspace)
    final = finals["call_grep"]
    assert final["status"] == "completed"
    assert "No matches for /(a*)*b/" in shown_text(final)
    assert final["rawOutput"]["engine"] == engine


async def test_glob_on_long_names_leaves_the_server_responsive(server_factory, workspace: Path):
    # Polynomial in the name length per star for a backtracking regex: minutes here.
    for ch in "abd":
        (workspace / ("a" * 120 + ch)).write_text("x")
    call = {"name": "glob", "arguments": {"pattern": "**/*a*a*a*a*a*c"}, "id": "call_glob"}
    async with server_factory(hostile_provider(call), permission_mode=PermissionMode.BYPASS) as server:
        finals = await run_with_canary(server, workspace)
    final = finals["call_glob"]
    assert final["status"] == "completed"
    assert "No files match" in shown_text(final)


async def test_a_long_search_runs_beside_other_sessions_and_cancel_frees_its_worker(
    server_factory, workspace: Path, monkeypatch: pytest.MonkeyPatch
):
    # Each line costs the matcher a little (no single line near the per-line budget), the
    # file many of them: a search that runs for minutes unless stopped.
    (workspace / "many.txt").write_text(("a" * 20 + "\n") * 5000)
    monkeypatch.setenv("AGENTD_GREP_ENGINE", "python")  # ripgrep would be done at once
    monkeypatch.setattr(search, "SEARCH_DEADLINE", 600.0)
    worker_done = threading.Event()
    real_grep = search._grep

    def observed_grep(*args: Any) -> Any:
        try:
            return real_grep(*args)
        finally:
            worker_done.set()

    monkeypatch.setattr(search, "_grep", observed_grep)
    call = {"name": "grep", "arguments": {"pattern": "(a|aa)+$b"}, "id": "call_slow"}
    async with server_factory(hostile_provider(call), permission_mode=PermissionMode.BYPASS) as server:
        a, sid_a, prompt = await start_hostile_turn(server, workspace)
        await canary(server, workspace)
        # Ordering, not timing: the other session finished while A's search still runs.
        assert not prompt.done()
        assert final_tool_updates(a, sid_a)["call_slow"]["status"] == "in_progress"
        assert not worker_done.is_set()

        await cancel(a, sid_a)
        resp = await asyncio.wait_for(prompt, TURN_BOUND)
        assert resp["result"]["stopReason"] == "cancelled"
        # The worker thread itself stops (it checks between lines), not just the call.
        await until(lambda: worker_done.is_set(), what="the grep worker to stop")
        await a.close()


# ---------------------------------------------------------------------------- files


@contextlib.contextmanager
def fifos(workspace: Path, names: list[str]) -> Iterator[None]:
    for name in names:
        os.mkfifo(workspace / name)
    try:
        yield
    finally:
        # Should readers be blocked in open() (the bug), release them for good: an O_RDWR
        # end lets every open of the pipe return, a regular file then takes its name (so
        # later opens cannot block), and closing the end gives the readers EOF.
        for name in names:
            with contextlib.suppress(OSError):
                end = os.open(workspace / name, os.O_RDWR | os.O_NONBLOCK)
                (workspace / f"{name}.tmp").write_text("")
                os.replace(workspace / f"{name}.tmp", workspace / name)
                os.close(end)


async def test_read_file_on_named_pipes_is_refused_and_nothing_hangs(server_factory, workspace: Path):
    # More pipes than the default pool has threads: each blocked one used to hold a thread.
    names = [f"pipe{i}" for i in range(12)]
    calls = [{"name": "read_file", "arguments": {"path": name}, "id": f"call_{name}"} for name in names]
    calls.append({"name": "grep", "arguments": {"pattern": "x", "path": names[0]}, "id": "call_grep"})
    calls.append({"name": "write_file", "arguments": {"path": names[1], "content": "x"}, "id": "call_write"})
    async with server_factory(hostile_provider(*calls), permission_mode=PermissionMode.BYPASS) as server:
        # Inside the server's lifetime, so a reader blocked by the bug is released before
        # the server shuts down (or the failure would hang instead of failing).
        with fifos(workspace, names):
            finals = await run_with_canary(server, workspace)
            # And after them, file tools and new sessions keep working.
            await canary(server, workspace)
    for name in names:
        final = finals[f"call_{name}"]
        assert final["status"] == "failed"
        assert f"{name} is a named pipe (FIFO)" in shown_text(final)
    assert finals["call_grep"]["status"] == "failed"
    assert "named pipe" in shown_text(finals["call_grep"])
    assert finals["call_write"]["status"] == "failed"
    assert "named pipe" in shown_text(finals["call_write"])


async def test_hard_links_to_outside_files_are_neither_read_nor_written(
    server_factory, workspace: Path, tmp_path: Path
):
    outside = tmp_path / "outside-secret.txt"
    outside.write_text("outside secret\n")
    os.link(outside, workspace / "alias.txt")
    calls = [
        {"name": "read_file", "arguments": {"path": "alias.txt"}, "id": "call_read"},
        {
            "name": "edit_file",
            "arguments": {"path": "alias.txt", "old_string": "outside", "new_string": "x"},
            "id": "call_edit",
        },
        {"name": "grep", "arguments": {"pattern": "secret"}, "id": "call_grep"},
    ]
    provider = scripted(
        {"tool_calls": calls},
        {
            "tool_calls": [
                {
                    "name": "write_file",
                    "arguments": {"path": "alias.txt", "content": "pwned\n"},
                    "id": "call_write",
                }
            ]
        },
        {"text": "done"},
    )
    async with server_factory(provider, permission_mode=PermissionMode.BYPASS) as server:
        a = await server.client()
        sid = await new_session(a, workspace)
        result = await a.call("session/prompt", text_prompt(sid, "go"))
        assert result["stopReason"] == "end_turn"
        finals = final_tool_updates(a, sid)
        await a.close()
    for call_id in ("call_read", "call_edit", "call_write"):
        assert finals[call_id]["status"] == "failed", call_id
        assert "alias.txt has 2 hard links" in shown_text(finals[call_id])
    grep_text = shown_text(finals["call_grep"])
    assert "outside secret" not in grep_text and "skipped 1 hard-linked" in grep_text
    assert outside.read_text() == "outside secret\n"
    assert os.stat(outside).st_nlink == 2  # the link itself is left alone


# ---------------------------------------------------------------------------- bash


async def test_cancel_kills_a_child_that_left_the_process_group(server_factory, workspace: Path):
    command = "setsid sh -c 'echo $$ > child.pid; exec sleep 1000' & wait"
    call = {"name": "bash", "arguments": {"command": command}, "id": "call_setsid"}
    # Unconfined: the pid the command writes is a host pid only outside the sandbox's pid
    # namespace (the sandboxed case: tests/e2e/tools/test_sandbox_escapes.py).
    async with server_factory(
        hostile_provider(call), permission_mode=PermissionMode.BYPASS, sandbox=SandboxSetting.NONE
    ) as server:
        a, sid_a, prompt = await start_hostile_turn(server, workspace)
        pid = await value_of(lambda: read_pid(workspace / "child.pid"), what="child.pid")
        assert os.getsid(pid) == pid  # really in a session (and group) of its own
        await canary(server, workspace)
        assert process_alive(pid)
        await cancel(a, sid_a)
        resp = await asyncio.wait_for(prompt, TURN_BOUND)
        assert resp["result"]["stopReason"] == "cancelled"
        await until(lambda: not process_alive(pid), what=f"process {pid} to die")
        await a.close()
