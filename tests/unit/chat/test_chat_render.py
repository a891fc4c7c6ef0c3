"""`agentd chat`'s pure parts (issue 17 item 7): markdown rendered a block at a time while it
streams, what a permission question shows (the server's diff preview, else rawInput), and the
queue mirror kept by `queue_update` changes."""

from __future__ import annotations

import io
from typing import Any

from rich.console import Console

from agentd.chat.queue import QueueMirror
from agentd.chat.render import ChatScreen, MarkdownStream, complete_blocks, permission_preview, unified_diff


def console() -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, width=100, color_system=None, highlight=False), out


def shown(renderables: list[Any]) -> str:
    c, out = console()
    for r in renderables:
        c.print(r)
    return "\n".join(line.rstrip() for line in out.getvalue().splitlines())


def test_complete_blocks_end_at_blank_lines_outside_code_fences() -> None:
    assert complete_blocks("a paragraph still") == 0
    assert complete_blocks("para one\n\npara") == len("para one\n\n")
    fenced = "```\ncode\n\nmore code\n"
    assert complete_blocks(fenced) == 0  # the blank line is inside the fence
    assert complete_blocks(fenced + "```\n") == len(fenced + "```\n")
    assert complete_blocks("text\n\n") == len("text\n\n")


class Counting(Console):
    def __init__(self) -> None:
        super().__init__(file=io.StringIO(), width=100, color_system=None)
        self.prints = 0

    def print(self, *args: Any, **kwargs: Any) -> None:
        self.prints += 1
        super().print(*args, **kwargs)


def test_streamed_markdown_prints_each_block_once() -> None:
    c = Counting()
    md = MarkdownStream(c)
    text = "# Title\n\nSome **bold** text\n\n```py\nx = [1]\n\ny = 2\n```\n\nthe end"
    for i in range(0, len(text), 3):  # many small chunks
        md.feed(text[i : i + 3])
    assert c.prints == 3  # the heading, the paragraph, the code block: no re-render per chunk
    md.flush()
    assert c.prints == 4
    assert isinstance(c.file, io.StringIO)
    out = c.file.getvalue()
    assert "Title" in out and "# Title" not in out
    assert "Some bold text" in out and "**" not in out
    assert "x = [1]" in out and "y = 2" in out and "```" not in out
    assert "the end" in out


def test_the_chat_screen_flushes_the_answer_before_anything_else() -> None:
    c, out = console()
    screen = ChatScreen(c)
    screen.update(
        {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "Half a para"}}
    )
    assert out.getvalue() == ""
    screen.update({"sessionUpdate": "tool_call", "toolCallId": "c", "title": "Run `ls`", "kind": "execute"})
    lines = [line.rstrip() for line in out.getvalue().splitlines()]
    assert lines == ["Half a para", "▶ Run `ls` (execute)"]


def test_bracketed_text_stays_as_typed_in_markdown() -> None:
    c, out = console()
    md = MarkdownStream(c)
    md.feed("Use arr[i] and [/] or [red]this[/red].")
    md.flush()
    assert "Use arr[i] and [/] or [red]this[/red]." in out.getvalue()


def test_a_server_diff_preview_is_shown_first() -> None:
    call = {
        "content": [
            {"type": "diff", "path": "a.py", "oldText": "x = 1\ny = 2\n", "newText": "x = 1\ny = 3\n"}
        ],
        "rawInput": {"path": "a.py", "old_string": "NOT SHOWN", "new_string": "NOT SHOWN"},
    }
    text = shown(permission_preview(call))
    assert "--- a/a.py" in text and "+++ b/a.py" in text
    assert "-y = 2" in text and "+y = 3" in text and " x = 1" in text
    assert "NOT SHOWN" not in text


def test_a_new_file_preview_diffs_from_nothing() -> None:
    call = {"content": [{"type": "diff", "path": "new.txt", "newText": "hello\n"}]}
    text = shown(permission_preview(call))
    assert "--- /dev/null" in text and "+hello" in text


def test_raw_input_fallbacks_write_edit_and_shell() -> None:
    write = shown(permission_preview({"rawInput": {"path": "n.txt", "content": "one\ntwo"}}))
    assert "+one" in write and "+two" in write and "whole new content" in write
    edit = shown(permission_preview({"rawInput": {"path": "e.py", "old_string": "a()", "new_string": "b()"}}))
    assert "-a()" in edit and "+b()" in edit and "e.py" in edit
    shell = shown(permission_preview({"rawInput": {"command": "rm -rf build [x]", "cwd": "/work/p"}}))
    assert "$ rm -rf build [x]" in shell and "in /work/p" in shell
    assert permission_preview({"rawInput": {"pattern": "*.py"}}) == []


def test_a_huge_diff_is_cut() -> None:
    diff = unified_diff("big.txt", None, "".join(f"line {i}\n" for i in range(5000)))
    assert len(diff.splitlines()) <= 401 and "more diff lines" in diff


def test_the_queue_mirror_follows_queue_updates() -> None:
    q = QueueMirror()
    q.replace([{"promptId": "p1", "version": 1, "kind": "prompt", "text": "first"}])
    entry = {"id": "p2", "version": 1, "kind": "local", "text": "/usage"}
    gone = q.apply([{"change": "added", "index": 1, "entry": entry}])
    assert gone == [] and [e.id for e in q.entries] == ["p1", "p2"]
    q.apply([{"change": "updated", "entry": {"id": "p1", "version": 2, "held": True}}])
    assert q.entries[0].text == "first" and q.entries[0].held and q.entries[0].version == 2
    q.apply([{"change": "updated", "entry": {"id": "p1", "version": 3, "text": "edited"}}])
    assert q.entries[0].text == "edited" and not q.entries[0].held
    q.apply([{"change": "moved", "order": ["p2", "p1"]}])
    assert q.lines() == ["  1. /usage (local)", "  2. edited"]
    assert q.apply([{"change": "removed", "id": "p2", "reason": "started"}]) == ["p2"]
    at = q.at(1)
    assert at is not None and at.id == "p1" and q.at(2) is None and q.at(0) is None


def test_absolute_paths_are_shown_relative_to_the_session_or_whole() -> None:
    inside = unified_diff("/work/p/src/a.py", "x\n", "y\n", "/work/p")
    assert "--- a/src/a.py" in inside and "+++ b/src/a.py" in inside
    outside = unified_diff("/etc/hosts", "x\n", "y\n", "/work/p")
    assert "--- /etc/hosts" in outside and "+++ /etc/hosts" in outside and "//" not in outside
    assert "+++ /work/p/a.py" in unified_diff("/work/p/a.py", None, "y\n")  # no folder known


def test_a_shell_question_names_its_folder() -> None:
    shell = shown(permission_preview({"rawInput": {"command": "make"}}, "/work/p"))
    assert "$ make" in shell and "in /work/p" in shell
    sub = shown(permission_preview({"rawInput": {"command": "make", "cwd": "sub"}}, "/work/p"))
    assert "in /work/p/sub" in sub


def test_a_note_while_the_answer_streams_does_not_split_its_block() -> None:
    c, out = console()
    screen = ChatScreen(c)
    chunk = {
        "sessionUpdate": "agent_message_chunk",
        "content": {"type": "text", "text": "See [the docs](https://exam"},
    }
    screen.update(chunk)
    screen.note("queued as #1")
    rest = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "ple.com) now.\n\n"}}
    screen.update(rest)
    lines = [line.rstrip() for line in out.getvalue().splitlines() if line.strip()]
    assert lines[0] == "queued as #1"
    assert "See the docs" in lines[1] and "[the docs]" not in out.getvalue()
