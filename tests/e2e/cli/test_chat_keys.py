"""Issue 31 item 4: `agentd chat` never loses a line — Ctrl-C at a question or during a
turn cancels the turn (a second one quits), a queued prompt is echoed when it starts, a
line typed while the answer streams does not split it, and `/now N` says what happens to
words interjected into the turn it stops. In a real pseudo-terminal (its Ctrl-C is the
line discipline's SIGINT)."""

from __future__ import annotations

from pathlib import Path

from tests.support.chat_pty import chat_in_pty, chat_in_tmux
from tests.support.gated import GatedProvider
from tests.support.pty_term import PtyTerminal
from tests.support.server import scripted


def session_of(term: PtyTerminal) -> str:
    return term.screen.split("session ", 1)[1].split()[0]


async def kinds(server: object, sid: str) -> list[str]:
    store = server.app.state.agentd.store  # type: ignore[attr-defined]
    return [e.kind for e in await store.read_events(sid, after_seq=0)]


async def user_texts(server: object, sid: str) -> list[str]:
    store = server.app.state.agentd.store  # type: ignore[attr-defined]
    events = await store.read_events(sid, after_seq=0)
    return [b["text"] for e in events if e.kind == "user_message" for b in e.payload["content"]]


async def test_ctrl_c_at_a_question_cancels_the_turn_and_a_second_one_quits(
    server_factory, workspace: Path, tmp_path: Path
) -> None:
    provider = GatedProvider(
        scripted(
            {"tool_calls": [{"name": "bash", "arguments": {"command": "echo never"}}]},
            {"text": "Still here."},
            {"text": "A long answer."},
        ),
        hold={2},
    )
    async with (
        server_factory(provider) as server,
        chat_in_pty(server.base_url, tmp_path, "--cwd", str(workspace)) as term,
    ):
        await term.wait_for("/quit to leave")
        sid = session_of(term)
        await term.type("run it")
        at = await term.wait_for("[n]o:")
        assert f"in {workspace}" in term.screen[term.screen.rfind("? allow", 0, at) :]  # the folder
        await term.ctrl_c()
        await term.wait_for("stopReason: cancelled", since=at)
        # The turn ended on the server (not left blocked on the question); the chat goes on.
        assert (await kinds(server, sid)).count("turn_ended") == 1
        await term.type("are you there")
        await term.wait_for("Still here.")
        at = await term.wait_for("stopReason: end_turn")
        await term.type("a long one")
        await provider.held(2)
        await term.ctrl_c()
        await term.wait_for("Ctrl-C again quits", since=at)
        await term.ctrl_c()
        assert await term.exit_code() == 130
    assert "echo never" not in " ".join(
        str(m.content) for r in provider.requests for m in r.messages if m.role == "tool"
    )


async def test_a_queued_prompt_is_echoed_when_it_starts_and_the_answer_stays_whole(
    server_factory, workspace: Path, tmp_path: Path
) -> None:
    answer = "See [the docs](https://example.com/docs) for it.\n\nSecond paragraph."
    provider = GatedProvider(
        scripted({"text": answer, "chunk_size": 12}, {"text": "Queued one answered."}), hold={0}
    )
    async with (
        server_factory(provider) as server,
        chat_in_pty(server.base_url, tmp_path, "--cwd", str(workspace)) as term,
    ):
        await term.wait_for("/quit to leave")
        await term.type("first job")
        await provider.held(0)  # paused after "See [the doc": a line typed now must not cut it
        await term.type("second job")
        await term.wait_for("queued as #1")
        provider.release(0)
        at = await term.wait_for("stopReason: end_turn")
        await term.wait_for("> second job  (from the queue)", since=at)
        await term.wait_for("Queued one answered.", since=at)
        await term.type("/quit")
        assert await term.exit_code() == 0
    screen = term.screen
    assert "See the docs for it." in screen and "[the doc" not in screen
    assert screen.index("queued as #1") < screen.index("See the docs")


async def test_now_says_an_unread_interjection_runs_first(
    server_factory, workspace: Path, tmp_path: Path
) -> None:
    provider = GatedProvider(
        scripted({"text": "Working."}, {"text": "Read the words."}, {"text": "Ran the queued one."}),
        hold={0},
    )
    async with (
        server_factory(provider) as server,
        chat_in_pty(server.base_url, tmp_path, "--cwd", str(workspace)) as term,
    ):
        await term.wait_for("/quit to leave")
        sid = session_of(term)
        await term.type("first job")
        await provider.held(0)
        await term.type("/interject use tabs")
        await term.wait_for("sent into the running turn")
        await term.type("later job")
        await term.wait_for("queued as #1")
        await term.type("/now 1")
        await term.wait_for("#1 runs next (after your interjection, if the stopped turn had not read it yet)")
        at = await term.wait_for("> later job  (from the queue)")
        await term.wait_for("Ran the queued one.", since=at)
        await term.type("/quit")
        assert await term.exit_code() == 0
        # As said: the unread words ran first, as a prompt of their own, then #1.
        assert await user_texts(server, sid) == ["first job", "use tabs", "later job"]


async def test_typed_input_stays_below_the_streamed_answer(
    server_factory, workspace: Path, tmp_path: Path
) -> None:
    """In tmux (a real terminal emulator): keys typed while the answer streams are drawn
    under it and move down as it grows; the answer's lines stay whole."""
    first = "First paragraph here.\n\n"
    provider = GatedProvider(
        scripted({"text": first + "Second paragraph, whole.\n\nThird one.", "chunk_size": len(first)},
                 {"text": "Hi back."}),
        hold={0},
    )  # fmt: skip
    async with (
        server_factory(provider) as server,
        chat_in_tmux(server.base_url, tmp_path, "--cwd", str(workspace)) as term,
    ):
        await term.wait_for("/quit to leave")
        await term.keys("explain", enter=True)
        await provider.held(0)
        await term.wait_for("First paragraph here.")
        await term.keys("hel")  # half a line, no Enter yet: drawn on its own line below
        await term.wait_until(lambda rows: rows[-1] == "hel" and "First paragraph here." in rows)
        provider.release(0)
        # The answer grew above the input line; each of its lines is whole.
        rows = await term.wait_until(
            lambda rows: "stopReason: end_turn" in " ".join(rows) and rows[-1] == "hel"
        )
        assert "Second paragraph, whole." in rows and "Third one." in rows
        assert [r for r in rows if r.startswith("hel") or r.endswith("hel")] == ["hel"]
        await term.keys("lo", enter=True)
        rows = await term.wait_for("Hi back.")
        assert "hello" in rows  # the line entered stays on the screen as typed
        await term.keys("/quit", enter=True)
