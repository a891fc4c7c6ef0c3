"""The sandboxed shell against real bubblewrap (issue 13, item 2): escapes fail, ordinary
commands work.

Commands run through the real `bash` tool with the launcher the server builds from its
settings (real bwrap, real rlimits, the real pids cgroup when the server is root); the
last tests go through a whole server. CI installs bubblewrap (.ci/run): these tests skip
only when it is not installed at all.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import socket
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

from agentd.infra.config import PermissionMode, SandboxNetwork, SandboxSetting, Settings
from agentd.tools.base import ToolContext, ToolResult
from agentd.tools.shell.background import BackgroundTasks
from agentd.tools.shell.bash import Bash
from agentd.tools.shell.launch import ShellLauncher
from agentd.tools.shell.proctrack import TAG_VAR
from agentd.tools.shell.sandbox import SandboxMode
from tests.support.client import text_prompt
from tests.support.polling import until
from tests.support.server import scripted
from tests.support.session import cancel, final_tool_updates, is_update, new_session, shown_text

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")

SECRET = "top-secret-4242"


@dataclass
class World:
    home: Path  # $AGENTD_HOME with the database in it
    db: Path
    root: Path  # AGENTD_WORKSPACE_ROOT
    ws: Path  # this session's workspace
    other: Path  # another session's workspace
    outside: Path  # any other directory


@pytest.fixture
def world(tmp_path: Path) -> World:
    home, root, outside = tmp_path / "home", tmp_path / "workspaces", tmp_path / "outside"
    for d in (home, root / "alice", root / "bob", outside):
        d.mkdir(parents=True)
    db = home / "agentd.db"
    db.write_text(SECRET)
    (root / "bob" / "notes.txt").write_text(SECRET)
    (outside / "file.txt").write_text(SECRET)
    return World(home, db, root, root / "alice", root / "bob", outside)


def launcher(world: World, **settings: Any) -> ShellLauncher:
    return ShellLauncher.from_settings(
        Settings(home=world.home, workspace_root=world.root, sandbox=SandboxSetting.BWRAP, **settings)
    )


async def run(shell: ShellLauncher, ws: Path, command: str, limit_s: float = 60) -> ToolResult:
    ctx = ToolContext(cwd=ws, session_id="s")
    return await asyncio.wait_for(Bash(shell).run({"command": command, "timeout": limit_s}, ctx), 110)


async def test_writes_outside_the_workspace_fail(world: World) -> None:
    shell = launcher(world)
    targets = [world.outside / "x", world.home / "x", Path("/etc/agentd-escape"), Path("/usr/agentd-escape")]
    command = "; ".join(f"echo pwned > {t}" for t in targets) + "; echo ok > inside.txt; cat inside.txt"
    res = await run(shell, world.ws, command)
    for t in targets:
        assert not t.exists(), t
    assert res.output.count("Read-only file system") + res.output.count("No such file") >= len(targets)
    assert (world.ws / "inside.txt").read_text() == "ok\n"  # the workspace itself is writable


async def test_the_home_and_the_database_file_are_hidden(world: World) -> None:
    res = await run(launcher(world), world.ws, f"cat {world.db}; ls -A {world.home}; echo end")
    assert SECRET not in res.output
    assert "No such file" in res.output
    assert world.db.read_text() == SECRET  # hidden, not harmed


async def test_a_database_file_outside_the_home_cannot_be_opened(world: World) -> None:
    # Outside /tmp (a private tmpfs in the sandbox already), so the file needs its own mask.
    with tempfile.TemporaryDirectory(dir="/var/tmp") as d:
        db = Path(d) / "agentd.db"
        db.write_text(SECRET)
        shell = launcher(world, database_url=f"sqlite+aiosqlite:///{db}")
        res = await run(shell, world.ws, f"cat {db}; echo > {db}")
        assert SECRET not in res.output
        # /dev/null is bound over it on a nodev mount: neither read nor written.
        assert res.output.count("Permission denied") == 2, res.output
        assert db.read_text() == SECRET


async def test_another_sessions_workspace_is_hidden(world: World) -> None:
    res = await run(launcher(world), world.ws, f"cat {world.other}/notes.txt; ls -A {world.root}")
    assert SECRET not in res.output
    assert "No such file" in res.output
    assert res.output.splitlines()[-1] == "alice"  # the workspaces root shows only our own


async def test_a_fork_bomb_is_bounded_by_the_process_limit(world: World) -> None:
    shell = launcher(world, sandbox_procs=32)
    # Counting: forks that succeed stop well short of 200.
    counter = (
        "python3 -c 'import os, time\n"
        "n = 0\n"
        "for _ in range(200):\n"
        "    try:\n"
        "        pid = os.fork()\n"
        "    except OSError:\n"
        "        break\n"
        "    if pid == 0:\n"
        "        time.sleep(20); os._exit(0)\n"
        "    n += 1\n"
        'print("forked", n)\''
    )
    res = await run(shell, world.ws, counter)
    forked = int(res.output.split("forked ")[1].split()[0])
    assert 0 < forked < 32
    # The real thing: it hits the limit (the shell that started it keeps forking `sleep`,
    # which then fails), and the whole of it is ended at the tool's timeout.
    res = await run(shell, world.ws, ":(){ :|:& };:; while :; do sleep 0.2; done", limit_s=3)
    assert "Resource temporarily unavailable" in res.output
    assert res.is_error and "the command and its processes were killed" in res.output


async def test_yes_is_bounded_by_the_output_cap(world: World) -> None:
    res = await run(launcher(world, bash_output_mb=2), world.ws, "yes")
    assert res.is_error and res.raw_output is not None and res.raw_output["outputLimit"] is True
    assert "bytes of output and was stopped" in res.output
    assert (world.ws / res.raw_output["outputFile"]).stat().st_size == 2 * 1024 * 1024


async def test_cpu_memory_and_file_size_limits_hold(world: World) -> None:
    res = await run(launcher(world, sandbox_cpu_s=1), world.ws, "python3 -c 'while True: pass'; echo rc=$?")
    # Soft and hard limit are one: SIGXCPU (152) or, reaching the hard limit, SIGKILL (137).
    assert "rc=137" in res.output or "rc=152" in res.output, res.output
    shell = launcher(world, sandbox_memory_mb=256, sandbox_file_mb=1)
    res = await run(shell, world.ws, "python3 -c 'bytearray(1024 ** 3)'")
    assert "MemoryError" in res.output
    res = await run(shell, world.ws, "head -c 3000000 /dev/zero > big.bin; echo rc=$?")
    assert "rc=0" not in res.output
    assert (world.ws / "big.bin").stat().st_size <= 1024 * 1024


@pytest.fixture
def listener() -> Iterator[int]:
    sock = socket.create_server(("127.0.0.1", 0))
    try:
        yield sock.getsockname()[1]
    finally:
        sock.close()


def connect_probe(port: int, via_proxy: bool) -> str:
    """Python run in the sandbox: connect to the host's 127.0.0.1:`port` directly, or ask
    the egress proxy for it (CONNECT); prints what happened."""
    if via_proxy:
        body = (
            'import os, socket; s = socket.create_connection(("127.0.0.1", int(os.environ["HTTP_PROXY"]'
            '.rsplit(":", 1)[1])), 5); '
            f's.sendall(b"CONNECT 127.0.0.1:{port} HTTP/1.1\\r\\n\\r\\n"); '
            "print(s.recv(200).decode().splitlines()[0])"
        )
    else:
        body = f'import socket; socket.create_connection(("127.0.0.1", {port}), 5); print("connected")'
    return f"python3 -c '{body}'"


async def test_the_hosts_loopback_is_out_of_reach_network_on_or_off(world: World, listener: int) -> None:
    # Issue 28: the sandbox has its own network namespace either way: the host's loopback
    # (agentd's API, databases) cannot be reached directly, nor through the proxy.
    for network in (SandboxNetwork.ON, SandboxNetwork.OFF):
        res = await run(launcher(world, sandbox_network=network), world.ws, connect_probe(listener, False))
        assert "connected" not in res.output and "Connection refused" in res.output, network
    on = await run(launcher(world), world.ws, connect_probe(listener, True))
    assert on.output.startswith("HTTP/1.1 403"), on.output
    offline = launcher(world, sandbox_network=SandboxNetwork.OFF)
    off = await run(offline, world.ws, connect_probe(listener, True))
    assert "403" not in off.output and "KeyError" in off.output  # no proxy at all
    # Nor through a daemon's Unix socket: /run holds only the proxy's socket (network on).
    for network, expected in ((SandboxNetwork.OFF, "end"), (SandboxNetwork.ON, "./agentd/egress.sock\nend")):
        command = "cd /run && find . -mindepth 1 ! -type d; echo end"
        res = await run(launcher(world, sandbox_network=network), world.ws, command)
        assert res.output == expected, network


async def test_network_on_goes_out_through_the_proxy_to_an_allowed_destination(
    world: World, listener: int
) -> None:
    # No internet in the test: the operator's allow-list opens the listener, which shows
    # the proxy path works end to end (bridge, socket, CONNECT).
    shell = launcher(world, sandbox_egress_allow=[f"127.0.0.1:{listener}"])
    res = await run(shell, world.ws, connect_probe(listener, True))
    assert res.output.startswith("HTTP/1.1 200"), res.output


async def test_a_bridge_that_cannot_start_fails_the_command_readably(world: World) -> None:
    # Fault: the interpreter the bridge needs is gone. The command must not run as if it
    # had a network; it fails with one clear line and exit 126, and nothing is left behind.
    shell = launcher(world)
    shell.policy = replace(shell.policy, python=str(world.outside / "no-python"))
    res = await run(shell, world.ws, "echo ran > ran.txt")
    assert "network bridge did not start" in res.output and res.raw_output == {
        "exitCode": 126,
        "truncated": False,
    }
    assert not (world.ws / "ran.txt").exists()


async def test_the_servers_secrets_and_processes_are_out_of_sight(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENTD_OPENAI_API_KEY", SECRET)
    me = os.getpid()
    res = await run(
        launcher(world),
        world.ws,
        f"env | grep AGENTD_ | cut -d= -f1; cat /proc/{me}/environ; kill -0 {me}; echo end",
    )
    assert SECRET not in res.output
    assert res.output.splitlines()[0] == TAG_VAR  # only the process tag (proctrack) is left
    assert "No such" in res.output  # neither /proc/<server>/ nor the pid exists in there


async def test_ordinary_work_git_python_and_builds(world: World) -> None:
    shell = launcher(world)
    res = await run(
        shell,
        world.ws,
        "git init -q . && echo 'print(6 * 7)' > app.py && git add app.py "
        "&& git -c user.name=t -c user.email=t@example.com commit -qm first && git log --oneline | wc -l "
        "&& python3 app.py && python3 -m compileall -q . && ls __pycache__ | grep -c app",
    )
    assert res.output.splitlines() == ["1", "42", "1"], res.output
    if shutil.which("make"):
        (world.ws / "Makefile").write_text("out.txt: app.py\n\tpython3 app.py > out.txt\n")
        res = await run(shell, world.ws, "make && cat out.txt")
        assert "42" in res.output and not res.is_error
    # A private /tmp works, and tools' caches go there ($HOME is read-only).
    res = await run(shell, world.ws, 'echo scratch > /tmp/t && cat /tmp/t && mkdir -p "$XDG_CACHE_HOME/x"')
    assert res.output == "scratch"


async def test_background_tasks_run_in_the_sandbox(world: World) -> None:
    bg = BackgroundTasks()
    shell = launcher(world)
    task = bg.start(
        f"cat {world.db}; echo pwned > {world.outside}/bg; echo done > bg.txt", world.ws, shell=shell
    )
    result = await bg.wait(task, 60)
    assert result.reason == "done"
    text, done, _ = bg.output(task)
    assert done and SECRET not in text
    assert not (world.outside / "bg").exists()
    assert (world.ws / "bg.txt").read_text() == "done\n"
    await bg.close()


# ---------------------------------------------------------------------------- a whole server


async def test_through_the_server_a_hostile_call_sees_no_database(
    server_factory, workspace: Path, tmp_path: Path
):
    home = tmp_path / "home"
    command = (
        f"cat {home}/agentd.db | head -c 100 | od -c | head -3; ls -A {home}; echo x > {tmp_path}/escaped"
    )
    provider = scripted(
        {"tool_calls": [{"name": "bash", "arguments": {"command": command}, "id": "call_peek"}]},
        {"text": "done"},
    )
    async with server_factory(
        provider, permission_mode=PermissionMode.BYPASS, sandbox=SandboxSetting.BWRAP
    ) as server:
        assert (home / "agentd.db").exists()  # the server's database is really there
        client = await server.client()
        sid = await new_session(client, workspace)
        await client.call("session/prompt", text_prompt(sid, "peek"))
        text = shown_text(final_tool_updates(client, sid)["call_peek"])
        await client.close()
    assert "SQLite format" not in text and "S   Q   L" not in text
    assert "No such file" in text
    assert not (tmp_path / "escaped").exists()


def marked(marker: str) -> list[int]:
    """Host pids whose command line holds `marker`."""
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                cmdline = Path(f"/proc/{name}/cmdline").read_bytes()
            except OSError:
                continue
            if marker.encode() in cmdline:
                found.append(int(name))
    return found


async def test_cancel_kills_every_process_in_the_sandbox(server_factory, workspace: Path):
    # Pids inside are not host pids (own pid namespace): the processes are found by a marker.
    marker = "1000.24681357"
    command = f"sleep {marker} & setsid sleep {marker} & echo started; wait"
    provider = scripted(
        {"tool_calls": [{"name": "bash", "arguments": {"command": command}, "id": "call_sleep"}]},
        {"text": "stopped"},
    )
    async with server_factory(
        provider, permission_mode=PermissionMode.BYPASS, sandbox=SandboxSetting.BWRAP
    ) as server:
        client = await server.client()
        sid = await new_session(client, workspace)
        prompt = asyncio.create_task(client.request("session/prompt", text_prompt(sid, "go")))
        await client.wait_notification(is_update(sid, "tool_call_update", status="in_progress"))
        await until(lambda: len(marked(marker)) >= 2 or None, what="both sleeps to start")
        await cancel(client, sid)
        resp = await asyncio.wait_for(prompt, 60)
        assert resp["result"]["stopReason"] == "cancelled"
        await until(lambda: not marked(marker) or None, what="every sandboxed process to die")
        await client.close()


def test_start_up_says_in_one_line_what_commands_run_under(
    world: World, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="agentd.tools.shell.launch")
    shell = ShellLauncher.from_settings(Settings(home=world.home, sandbox_procs=50))
    assert shell.mode is SandboxMode.BWRAP
    [line] = [r for r in caplog.records if r.getMessage().startswith("sandbox:")]
    assert line.levelno == logging.INFO
    assert "run under" in line.getMessage() and "50 processes" in line.getMessage()
    caplog.clear()
    missing = str(tmp_path / "no-bwrap")  # auto on loopback: unconfined, with a warning
    shell = ShellLauncher.from_settings(Settings(home=world.home), bwrap=missing)
    assert shell.mode is SandboxMode.NONE
    [line] = [r for r in caplog.records if r.getMessage().startswith("sandbox:")]
    assert line.levelno == logging.WARNING and "unconfined" in line.getMessage()
