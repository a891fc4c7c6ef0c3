"""Issue 17 item 7: `agentd chat` in a pseudo-terminal against a real server — permission
questions with their diffs and commands, the answer rendered as markdown, the queue commands,
interjecting into a running turn."""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator
from pathlib import Path

from tests.support.gated import GatedProvider
from tests.support.proc import agentd_command
from tests.support.pty_term import PtyTerminal, pty_run
from tests.support.server import scripted


def chat_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTD_")}
    env.update(HOME=str(home), PYTHONUNBUFFERED="1")
    return env


@contextlib.asynccontextmanager
async def chat(base_url: str, home: Path, *args: str) -> AsyncIterator[PtyTerminal]:
    url = base_url.replace("http://", "ws://") + "/acp"
    async with pty_run(*agentd_command(), "chat", "--url", url, *args, env=chat_env(home)) as term:
        yield term


def session_of(term: PtyTerminal) -> str:
    return term.screen.split("session ", 1)[1].split()[0]


async def user_texts(server: object, sid: str) -> list[str]:
    store = server.app.state.agentd.store  # type: ignore[attr-defined]
    events = await store.read_events(sid, after_seq=0)
    return [b["text"] for e in events if e.kind == "user_message" for b in e.payload["content"]]


async def test_permission_questions_show_the_diff_and_the_command(
    server_factory, workspace: Path, tmp_path: Path
) -> None:
    (workspace / "old.txt").write_text("one\nbeta\nthree\n")
    edit = {"path": "old.txt", "old_string": "beta", "new_string": "gamma"}
    provider = scripted(
        {
            "tool_calls": [
                {"name": "write_file", "arguments": {"path": "new.txt", "content": "alpha\nbravo\n"}}
            ]
        },
        {"tool_calls": [{"name": "edit_file", "arguments": edit}]},
        {"tool_calls": [{"name": "bash", "arguments": {"command": "echo from-the-shell"}}]},
        {"text": "All done."},
    )
    async with (
        server_factory(provider) as server,
        chat(server.base_url, tmp_path, "--cwd", str(workspace)) as term,
    ):
        await term.wait_for("/quit to leave")
        await term.type("change things")
        at = await term.wait_for("? allow")
        await term.wait_for("[n]o:", since=at)
        write = term.screen[at:]
        assert "+alpha" in write and "+bravo" in write  # the new file's whole content
        assert not (workspace / "new.txt").exists()
        await term.type("y")
        at = await term.wait_for("? allow", since=at + 1)
        await term.wait_for("[n]o:", since=at)
        edit = term.screen[at:]
        assert "-beta" in edit and "+gamma" in edit and "old.txt" in edit
        await term.type("y")
        at = await term.wait_for("? allow", since=at + 1)
        await term.wait_for("[n]o:", since=at)
        shell = term.screen[at:]
        assert "$ echo from-the-shell" in shell
        await term.type("y")
        await term.wait_for("stopReason: end_turn")
        await term.type("/quit")
        assert await term.exit_code() == 0
    assert (workspace / "new.txt").read_text() == "alpha\nbravo\n"
    assert (workspace / "old.txt").read_text() == "one\ngamma\nthree\n"


MARKDOWN = (
    "# The Plan\n\nFirst **bold** words and `some code`.\n\n"
    "```python\nprint('fenced')\n```\n\n- item one\n- item two\n"
)


async def test_the_answer_is_rendered_as_markdown(server_factory, workspace: Path, tmp_path: Path) -> None:
    provider = scripted({"text": MARKDOWN, "chunk_size": 7})
    async with (
        server_factory(provider) as server,
        chat(server.base_url, tmp_path, "--cwd", str(workspace)) as term,
    ):
        await term.wait_for("/quit to leave")
        await term.type("plan it")
        await term.wait_for("stopReason: end_turn")
        await term.type("/quit")
        assert await term.exit_code() == 0
    screen = term.screen
    assert "The Plan" in screen and "# The Plan" not in screen
    assert "First bold words and some code." in screen and "**" not in screen
    assert "print('fenced')" in screen and "```" not in screen
    assert "• item one" in screen and "• item two" in screen


async def test_queue_commands_list_edit_drop_and_send_now(
    server_factory, workspace: Path, tmp_path: Path
) -> None:
    provider = GatedProvider(
        scripted({"text": "Working on the first."}, {"text": "The edited one ran."}), hold={0}
    )
    async with (
        server_factory(provider) as server,
        chat(server.base_url, tmp_path, "--cwd", str(workspace)) as term,
    ):
        await term.wait_for("/quit to leave")
        sid = session_of(term)
        await term.type("first job")
        await provider.held(0)  # the first turn is running, paused mid-answer
        await term.type("second job")
        await term.wait_for("queued as #1")
        await term.type("third job")
        await term.wait_for("queued as #2")
        at = term.mark()
        await term.type("/queue")
        await term.wait_for("2. third job", since=at)
        assert "1. second job" in term.screen[at:]
        await term.type("/edit 2")
        await term.wait_for("editing #2 (held): third job")
        other = await server.client()  # another client sees the entry held while it is edited
        try:
            listed = await other.call("_agentd/queue/list", {"sessionId": sid})
        finally:
            await other.close()
        assert [(e["text"], bool(e.get("held"))) for e in listed["queue"]] == [
            ("second job", False),
            ("third job", True),
        ]
        await term.type("third job, edited")
        await term.wait_for("#2 is now: third job, edited")
        await term.type("/drop 1")
        await term.wait_for("dropped #1: second job")
        at = term.mark()
        await term.type("/queue")
        await term.wait_for("1. third job, edited", since=at)
        assert "second job" not in term.screen[at:] and "2." not in term.screen[at:]
        await term.type("/now 1")  # stops the running turn; the edited prompt runs next
        await term.wait_for("stopReason: cancelled")
        await term.wait_for("The edited one ran.")
        await term.wait_for("stopReason: end_turn")
        await term.type("/quit")
        assert await term.exit_code() == 0
        assert await user_texts(server, sid) == ["first job", "third job, edited"]


async def test_interject_goes_into_the_running_turn_and_a_typed_line_waits(
    server_factory, workspace: Path, tmp_path: Path
) -> None:
    inner = scripted(
        {"text": "Looking around."},
        {"text": "Using tabs then."},
        {"text": "Queued one answered."},
    )
    provider = GatedProvider(inner, hold={0})
    async with (
        server_factory(provider) as server,
        chat(server.base_url, tmp_path, "--cwd", str(workspace)) as term,
    ):
        await term.wait_for("/quit to leave")
        sid = session_of(term)
        await term.type("tidy up")
        await provider.held(0)
        await term.type("/interject use tabs")
        await term.wait_for("sent into the running turn")
        await term.type("and then this")
        await term.wait_for("queued as #1")
        await term.type("keep the tests green")
        await term.wait_for("queued as #2")
        await term.type("/interject 2")  # a queued prompt into the running turn
        await term.wait_for("#2 went into the running turn")
        provider.release(0)
        await term.wait_for("Using tabs then.")
        await term.wait_for("Queued one answered.")
        await term.type("/quit")
        assert await term.exit_code() == 0
        # Both went into the first turn's next request; the queued line was a turn of its own.
        second = " ".join(str(m.content) for m in inner.requests[1].messages)
        assert "use tabs" in second and "keep the tests green" in second and "and then this" not in second
        assert await user_texts(server, sid) == [
            "tidy up",
            "use tabs",
            "keep the tests green",
            "and then this",
        ]
        events = await server.app.state.agentd.store.read_events(sid, after_seq=0)
        assert len([e for e in events if e.kind == "turn_started"]) == 2


async def test_interject_with_no_turn_running_queues_and_end_of_input_waits(
    server_factory, workspace: Path, tmp_path: Path
) -> None:
    """`/interject` with nothing running queues the words as a prompt, which runs; end of
    input (Ctrl-D) leaves once it has."""
    async with (
        # One chunk: the "queued" line races the turn's first chunk and may come after
        # it; the answer must still read whole.
        server_factory(scripted({"text": "Ran it."})) as server,
        chat(server.base_url, tmp_path, "--cwd", str(workspace)) as term,
    ):
        await term.wait_for("/quit to leave")
        sid = session_of(term)
        await term.type("/interject hello")
        await term.end_input()
        assert await term.exit_code() == 0
        assert "no turn is running: queued as a prompt" in term.screen
        assert "Ran it." in term.screen and "stopReason: end_turn" in term.screen
        assert await user_texts(server, sid) == ["hello"]
