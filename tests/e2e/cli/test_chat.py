"""R-O: `agentd chat`, a terminal client over the WebSocket — run as a real process against
a real server, driven through its stdin like a user at a terminal."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Any

from agentd.infra.auth import create_token
from agentd.infra.config import AuthMode, PermissionMode
from tests.support.polling import until
from tests.support.server import scripted


class Terminal:
    """`agentd chat` in a subprocess: type lines, wait for text on its screen."""

    def __init__(self, proc: Any) -> None:
        self.proc = proc
        self.screen = ""

    @classmethod
    async def start(cls, *args: str) -> Terminal:
        env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTD_")}
        env.update(PYTHONUNBUFFERED="1", COLUMNS="200", TERM="dumb")
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "agentd.cli", "chat", *args, env=env,
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
        )  # fmt: skip
        return cls(proc)

    async def type(self, line: str) -> None:
        self.proc.stdin.write(line.encode() + b"\n")
        await self.proc.stdin.drain()

    async def wait_for(self, text: str, within: float = 30) -> None:
        async with asyncio.timeout(within):  # bounds a hang; not a timing assertion
            while text not in self.screen:
                chunk = await self.proc.stdout.read(4096)
                if not chunk:
                    raise AssertionError(f"chat exited before showing {text!r}:\n{self.screen}")
                self.screen += chunk.decode(errors="replace")

    async def exit_code(self) -> int:
        async with asyncio.timeout(30):
            rest = await self.proc.stdout.read()
            self.screen += rest.decode(errors="replace")
            return await self.proc.wait()


def ws_url(base: str) -> str:
    return base.replace("http://", "ws://") + "/acp"


async def test_chat_streams_the_answer_shows_tool_calls_and_asks_permission(
    server_factory, workspace: Path
) -> None:
    provider = scripted(
        {
            "text": "I will write the notes.",
            "tool_calls": [{"name": "write_file", "arguments": {"path": "notes.txt", "content": "hi\n"}}],
        },
        {"text": "Notes written."},
    )
    async with server_factory(provider) as server:
        term = await Terminal.start("--url", ws_url(server.base_url), "--cwd", str(workspace))
        await term.wait_for("/quit to leave")
        await term.type("please write notes")
        await term.wait_for("? allow")
        assert not (workspace / "notes.txt").exists()  # nothing written before the answer
        await term.type("y")
        await term.wait_for("stopReason: end_turn")
        await term.type("/quit")
        assert await term.exit_code() == 0
        # Coming back to the session replays it.
        sid = term.screen.split("session ", 1)[1].split()[0]
        back = await Terminal.start(
            "--url", ws_url(server.base_url), "--session", sid, "--cwd", str(workspace)
        )
        await back.wait_for(f"session {sid}")
        await back.type("/quit")
        assert await back.exit_code() == 0
        assert "I will write the notes." in back.screen and "Notes written." in back.screen
    assert (workspace / "notes.txt").read_text() == "hi\n"
    screen = term.screen
    assert "I will write the notes." in screen and "Notes written." in screen
    assert "▶" in screen and "✓" in screen  # the tool call started and finished
    assert "turn ended: completed" in screen


async def test_chat_cancels_a_running_turn_and_leaves_at_end_of_input(
    server_factory, workspace: Path
) -> None:
    provider = scripted({"text": "never shown", "delay": 30})
    async with server_factory(provider) as server:
        term = await Terminal.start("--url", ws_url(server.base_url), "--cwd", str(workspace))
        await term.wait_for("/quit to leave")
        await term.type("a long job")
        manager = server.app.state.agentd.manager
        await until(lambda: any(a.running_turn_id for a in manager.live()), what="the turn to start")
        await term.type("/cancel")
        await term.wait_for("stopReason: cancelled")
        term.proc.stdin.close()  # end of input: chat leaves
        assert await term.exit_code() == 0
        assert "never shown" not in term.screen


async def test_chat_with_a_token_and_without(server_factory, workspace: Path) -> None:
    grants = {"dana": [workspace]}  # outside dana's own root under AGENTD_HOME/workspaces
    async with server_factory(
        scripted({"text": "hello there"}), auth=AuthMode.TOKEN, workspace_grants=grants
    ) as server:
        refused = await Terminal.start("--url", ws_url(server.base_url), "--cwd", str(workspace))
        assert await refused.exit_code() == 2
        assert "cannot connect" in refused.screen and "401" in refused.screen
        token, _ = await create_token(server.app.state.agentd.store, "dana")
        term = await Terminal.start(
            "--url", ws_url(server.base_url), "--cwd", str(workspace), "--token", token
        )
        await term.wait_for("/quit to leave")
        await term.type("hi")
        await term.wait_for("stopReason: end_turn")
        await term.type("/quit")
        assert await term.exit_code() == 0
        assert "hello there" in term.screen
        assert len(await server.app.state.agentd.store.list_sessions(owner="dana")) == 1  # the token's


BRACKETS = "Use arr[i] and [/] or [red]this[/red] — [y]es."


async def test_chat_survives_bracketed_text_and_asks_clearly(server_factory, workspace: Path) -> None:
    """Issue 10 item 8: bracket-laden model text prints as typed and the chat goes on; the
    permission question shows its [y]/[a]/[n]; an unknown answer asks again."""
    provider = scripted(
        {
            "text": BRACKETS,
            "tool_calls": [{"name": "write_file", "arguments": {"path": "a[1].txt", "content": "x"}}],
        },
        {"text": "Second [/] answer."},
        {"text": "Third."},
    )
    async with server_factory(provider) as server:
        term = await Terminal.start("--url", ws_url(server.base_url), "--cwd", str(workspace))
        await term.wait_for("/quit to leave")
        await term.type("write it")
        await term.wait_for("[y]es once / [a]lways / [n]o:")
        assert BRACKETS in term.screen
        await term.type("maybe")
        await term.wait_for("please answer y, a or n (not 'maybe')")
        assert not (workspace / "a[1].txt").exists()
        await term.type("y")
        await term.wait_for("Second [/] answer.")
        await term.wait_for("stopReason: end_turn")
        await term.type("again")  # the chat still works after all that markup
        await term.wait_for("Third.")
        await term.wait_for("stopReason: end_turn", within=30)
        await term.type("/quit")
        assert await term.exit_code() == 0
    assert (workspace / "a[1].txt").read_text() == "x"


async def test_chat_cancel_without_a_turn_and_commands_during_a_turn(server_factory, workspace: Path) -> None:
    """`/cancel` with nothing running is not sent to the model; a local command typed during
    a turn is queued to run after it, not interjected as words for the model."""
    provider = scripted({"text": "slow answer", "delay": 30}, {"text": "after"})
    async with server_factory(provider) as server:
        term = await Terminal.start("--url", ws_url(server.base_url), "--cwd", str(workspace))
        await term.wait_for("/quit to leave")
        await term.type("/cancel")
        await term.wait_for("no turn is running")
        sid = term.screen.split("session ", 1)[1].split()[0]
        store = server.app.state.agentd.store
        assert not [e for e in await store.read_events(sid, after_seq=0) if e.kind == "turn_started"]
        await term.type("a long job")
        manager = server.app.state.agentd.manager
        await until(lambda: any(a.running_turn_id for a in manager.live()), what="the turn to start")
        await term.type("/usage")
        await term.wait_for("queued as #1")
        actor = manager.live_actor(sid)
        assert actor is not None and actor.queued == 1  # waiting behind the turn, not interjected
        await term.type("/cancel")
        await term.wait_for("stopReason: cancelled")
        term.proc.stdin.close()
        assert await term.exit_code() == 0
        interjected = [e for e in await store.read_events(sid, after_seq=0) if e.kind == "interjection"]
        assert not interjected


async def test_chat_session_replay_shows_the_users_own_messages(server_factory, workspace: Path) -> None:
    async with server_factory(scripted({"text": "An answer."})) as server:
        term = await Terminal.start("--url", ws_url(server.base_url), "--cwd", str(workspace))
        await term.wait_for("/quit to leave")
        await term.type("my [own] question")
        await term.wait_for("stopReason: end_turn")
        await term.type("/quit")
        assert await term.exit_code() == 0
        sid = term.screen.split("session ", 1)[1].split()[0]
        back = await Terminal.start(
            "--url", ws_url(server.base_url), "--session", sid, "--cwd", str(workspace)
        )
        await back.wait_for(f"session {sid}")
        await back.type("/quit")
        assert await back.exit_code() == 0
        assert "> my [own] question" in back.screen
        assert back.screen.index("> my [own] question") < back.screen.index("An answer.")


async def test_chat_diff_shows_what_the_session_changed(server_factory, workspace: Path) -> None:
    (workspace / "a.txt").write_text("zero\n")
    edit = {
        "name": "edit_file",
        "id": "c1",
        "arguments": {"path": "a.txt", "old_string": "zero", "new_string": "one"},
    }
    provider = scripted({"tool_calls": [edit]}, {"text": "Edited it."})
    async with server_factory(provider, permission_mode=PermissionMode.BYPASS) as server:
        term = await Terminal.start("--url", ws_url(server.base_url), "--cwd", str(workspace))
        await term.wait_for("/quit to leave")
        await term.type("change a")
        await term.wait_for("Edited it.")
        await term.type("/diff")
        await term.wait_for("a.txt (modified)")
        await term.wait_for("+one")
        assert "-zero" in term.screen
        term.proc.stdin.close()
        assert await term.exit_code() == 0
