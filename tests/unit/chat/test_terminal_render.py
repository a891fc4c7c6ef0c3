"""The terminal renderer shared by `agentd chat` and `agentd demo` (issue 10, item 8):
model text is data, never markup; reasoning and answer are kept apart; a command that
exited non-zero is shown as a failure; the user's own messages are shown."""

from __future__ import annotations

import io

from rich.console import Console

from agentd.chat.terminal import Screen, tool_failed


def screen() -> tuple[Screen, io.StringIO]:
    out = io.StringIO()
    return Screen(Console(file=out, width=200, color_system=None, highlight=False)), out


def chunk(kind: str, text: str) -> dict[str, object]:
    return {"sessionUpdate": kind, "content": {"type": "text", "text": text}}


HOSTILE = "arr[i] = x[/] then [red]not red[/red] and [bold]"


def test_bracketed_model_text_prints_as_typed() -> None:
    s, out = screen()
    s.update(chunk("agent_message_chunk", HOSTILE))
    s.update(chunk("agent_message_chunk", " [/]"))
    assert out.getvalue() == HOSTILE + " [/]"


def test_bracketed_tool_titles_and_outputs_print_as_typed() -> None:
    s, out = screen()
    s.update({"sessionUpdate": "tool_call", "toolCallId": "c", "title": "Run `echo [/]`", "kind": "execute"})
    s.update(
        {
            "sessionUpdate": "tool_call_update",
            "toolCallId": "c",
            "status": "completed",
            "content": [{"type": "content", "content": {"type": "text", "text": "[/]\n[red]"}}],
            "rawOutput": {"exitCode": 0},
        }
    )
    text = out.getvalue()
    assert "▶ Run `echo [/]` (execute)" in text
    assert "✓ [/]\n    [red]" in text


def test_reasoning_and_answer_are_separated() -> None:
    s, out = screen()
    s.update(chunk("agent_thought_chunk", "let me think"))
    s.update(chunk("agent_thought_chunk", " more"))
    s.update(chunk("agent_message_chunk", "The answer."))
    assert out.getvalue() == "thinking: let me think more\nThe answer."


def test_a_non_zero_exit_is_shown_as_a_failure() -> None:
    update = {
        "sessionUpdate": "tool_call_update",
        "toolCallId": "c",
        "status": "completed",
        "content": [{"type": "content", "content": {"type": "text", "text": "boom\n[exit code 3]"}}],
        "rawOutput": {"exitCode": 3},
    }
    assert tool_failed(update) == 3
    assert tool_failed({**update, "rawOutput": {"exitCode": 0}}) is None
    assert tool_failed({**update, "rawOutput": None}) is None
    s, out = screen()
    s.update(update)
    assert "✗ exit 3 boom" in out.getvalue()
    assert "✓" not in out.getvalue()


def test_user_messages_are_shown_on_their_own_line() -> None:
    s, out = screen()
    s.update(chunk("agent_message_chunk", "Hi."))
    s.update(chunk("user_message_chunk", "do [b]this[/b]"))
    assert out.getvalue() == "Hi.\n> do [b]this[/b]\n"
