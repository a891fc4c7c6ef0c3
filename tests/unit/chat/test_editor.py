"""`agentd chat`'s input line (agentd/chat/editor.py): kept under the output, erased before
it is written to and drawn again only at a line start; keys edited into lines."""

from __future__ import annotations

import asyncio
import io

from agentd.chat.editor import ERASE, EditorOutput, LineEditor


def test_the_input_line_is_erased_before_output_and_redrawn_at_a_line_start() -> None:
    real = io.StringIO()
    out = EditorOutput(real)
    out.buffer = "hel"
    out.flush()
    assert real.getvalue() == ERASE + "hel"
    out.write("half a ")
    out.flush()  # the output's line is not finished: the input waits unseen
    assert real.getvalue() == ERASE + "hel" + ERASE + "half a "
    out.write("line\n")
    out.flush()
    assert real.getvalue().endswith("half a line\n" + ERASE + "hel")


async def test_keys_make_lines_with_backspace_kill_and_end_of_input() -> None:
    lines: asyncio.Queue[str | None] = asyncio.Queue()
    out = EditorOutput(io.StringIO())
    editor = LineEditor(lines, out, fd=-1)
    editor.keys("helx\x7flo\r")
    editor.keys("junk\x15\x1b[Aok\n")
    assert out.buffer == ""
    editor.keys("\x04")
    assert [lines.get_nowait() for _ in range(3)] == ["hello", "ok", None]
    assert "hello\n" in out.real.getvalue()  # type: ignore[attr-defined]
