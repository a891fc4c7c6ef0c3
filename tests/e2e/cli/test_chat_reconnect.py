"""Issue 17 item 7: `agentd chat` in a pseudo-terminal survives its server being killed and
restarted mid-answer — it reconnects, re-attaches from the last event it saw, and the screen
has every line once; `--session` then replays the whole session with the user's own messages.
Also the chat's command-line mistakes: one readable line, exit code 2."""

from __future__ import annotations

import contextlib
import os
import re
import signal
from pathlib import Path

import pytest

from tests.support.cli import Run, agentd, clean_env
from tests.support.proc import agentd_command, agentd_serve_on, free_port
from tests.support.pty_term import pty_run

WORDS = [f"w{i:03d}" for i in range(120)]  # ~600 characters, streamed over ~4 s
# Paragraphs of ten words: the chat prints an answer a markdown block at a time, so the
# first paragraph on its own screen is the sign that it has part of the answer.
TEXT = "\n\n".join(" ".join(WORDS[i : i + 10]) for i in range(0, len(WORDS), 10))
SCRIPT = {"loop": True, "steps": [{"text": TEXT, "chunk_size": 5, "chunk_delay": 0.03}]}
# The answer the first server is killed in: the same text, slower (~13 s), so it is still
# streaming when the chat has shown its first paragraph, however loaded the machine.
SLOW = {"loop": True, "steps": [{"text": TEXT, "chunk_size": 5, "chunk_delay": 0.1}]}


def words_on(screen: str) -> list[str]:
    return re.findall(r"\bw\d{3}\b", screen)


@pytest.mark.timeout(300)  # two server start-ups and three chat processes on a loaded machine
async def test_chat_reconnects_after_a_server_restart_without_losing_or_repeating_lines(
    tmp_path: Path, workspace: Path
) -> None:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTD_")}
    env.update(HOME=str(tmp_path), PYTHONUNBUFFERED="1")
    chat_cmd = [*agentd_command(), "chat", "--url", f"ws://127.0.0.1:{port}/acp"]
    async with contextlib.AsyncExitStack() as stack:
        first = await stack.enter_async_context(agentd_serve_on(tmp_path, port, SLOW))
        term = await stack.enter_async_context(pty_run(*chat_cmd, "--cwd", str(workspace), env=env))
        await term.wait_for("/quit to leave")
        sid = term.screen.split("session ", 1)[1].split()[0]
        asked = term.mark()
        await term.type("a long answer")
        # Killed once the chat itself shows part of the answer — not once another client got
        # a chunk: the server writes a chunk to its clients one socket after the other, and
        # a kill between the two writes left the chat with nothing of the answer (nothing of
        # it committed yet either: no line to show, lose or repeat).
        await term.wait_for(WORDS[9], since=asked)
        os.kill(first.pid, signal.SIGKILL)
        await first.wait()
        lost = await term.wait_for("lost the connection")

        await stack.enter_async_context(agentd_serve_on(tmp_path, port, SCRIPT))
        await term.wait_for("reconnected", since=lost)
        await term.wait_for("turn ended: interrupted", since=lost)  # learnt on re-attach
        await term.type("again")
        await term.wait_for("stopReason: end_turn")
        await term.type("/quit")
        assert await term.exit_code() == 0
        screen = term.screen

        # Every line once: what was shown of the first answer has no gap and no repeat, the
        # second answer is whole; the user's prompt was not echoed back after the reconnect.
        shown = words_on(screen)
        first_part = shown[: len(shown) - len(WORDS)]
        assert first_part and first_part == WORDS[: len(first_part)], shown
        assert shown[len(first_part) :] == WORDS
        assert screen.count("a long answer") == 1, screen

        async with pty_run(*chat_cmd, "--session", sid, env=env) as back:
            await back.wait_for(f"session {sid}")
            await back.type("/quit")
            assert await back.exit_code() == 0
    replay = back.screen
    assert replay.index("> a long answer") < replay.index("> again")
    assert words_on(replay[replay.index("> again") :]) == WORDS


def one_line_error(run: Run, *fragments: str) -> None:
    assert run.code == 2, run.text
    assert "Traceback" not in run.text
    lines = run.err.strip().splitlines()
    assert len(lines) == 1, run.err
    assert lines[0].startswith("agentd: error: "), lines[0]
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        pytest.param(["--url", "http//nowhere"], ["--url", "http//nowhere"], id="bad-url"),
        pytest.param(
            ["--url", "ws://127.0.0.1:{port}/acp"], ["cannot connect", "127.0.0.1"], id="nobody-there"
        ),
        pytest.param(["--cwd", "{missing}"], ["--cwd", "is not a directory"], id="no-such-cwd"),
    ],
)
async def test_chat_mistakes_are_one_line_and_exit_2(
    tmp_path: Path, args: list[str], fragments: list[str]
) -> None:
    values = {"port": str(free_port()), "missing": str(tmp_path / "missing")}
    args = [a.format(**values) for a in args]
    if "--url" not in args:
        args += ["--url", f"ws://127.0.0.1:{values['port']}/acp"]
    run = await agentd("chat", *args, env=clean_env(tmp_path), cwd=tmp_path)
    one_line_error(run, *[f.format(**values) for f in fragments])
