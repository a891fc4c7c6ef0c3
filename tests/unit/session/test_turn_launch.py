"""What a queue entry runs as, the title a first prompt gives a session."""

from __future__ import annotations

import pytest

from agentd.session.command_syntax import Skill
from agentd.session.queue.ops import QueueKind, prompt_kind
from agentd.session.turn_launch import classify, title_from

SKILLS = {"review": Skill("review", "Review code", "Review this: $ARGUMENTS")}


@pytest.mark.parametrize(
    ("kind", "text", "expected_kind", "local", "bang", "expanded"),
    [
        (QueueKind.PROMPT, "hello", QueueKind.PROMPT, None, None, None),
        (QueueKind.PROMPT, "/help", QueueKind.LOCAL, ("help", ""), None, None),
        (QueueKind.PROMPT, "  /mode plan ", QueueKind.LOCAL, ("mode", "plan"), None, None),
        (QueueKind.PROMPT, "!ls -la", QueueKind.BANG, None, "ls -la", None),
        (QueueKind.PROMPT, "!", QueueKind.PROMPT, None, None, None),  # nothing to run: a prompt
        (QueueKind.PROMPT, "/review main.py", QueueKind.PROMPT, None, None, "Review this: main.py"),
        (QueueKind.PROMPT, "/nosuch x", QueueKind.PROMPT, None, None, None),  # unknown: plain text
        (QueueKind.COMPACT, "/help", QueueKind.COMPACT, None, None, None),  # a job is never parsed
    ],
)
def test_what_an_entry_runs_as(
    kind: QueueKind,
    text: str,
    expected_kind: QueueKind,
    local: tuple[str, str] | None,
    bang: str | None,
    expanded: str | None,
) -> None:
    launch = classify(kind, text, SKILLS)
    assert launch.kind is expected_kind
    assert (None if launch.local is None else (launch.local[0].name, launch.local[1])) == local
    assert launch.bang == bang
    assert launch.expanded == expanded
    assert launch.shown_to_clients is (expected_kind is not QueueKind.COMPACT)
    assert launch.joins_conversation is (expected_kind is QueueKind.PROMPT)


@pytest.mark.parametrize(
    ("text", "title"),
    [
        ("Fix the bug", "Fix the bug"),
        ("  many   spaces\nand lines ", "many spaces and lines"),
        ("nul\x00byte", "nul byte"),
        ("x" * 100, "x" * 80),
        ("\x00\x01", None),
        ("", None),
    ],
)
def test_title_from_the_first_prompt(text: str, title: str | None) -> None:
    assert title_from(text) == title


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("hello", QueueKind.PROMPT),
        ("/help", QueueKind.LOCAL),
        ("  /mode plan ", QueueKind.LOCAL),
        ("!echo hi", QueueKind.BANG),
        (" ! ls", QueueKind.BANG),
        ("!", QueueKind.PROMPT),  # nothing to run: plain text
        ("/review main.py", QueueKind.SKILL),
        ("/nosuch x", QueueKind.PROMPT),  # unknown command: plain text
        ("/usr/bin is odd", QueueKind.PROMPT),
    ],
)
def test_a_prompt_is_classified_when_queued(text: str, kind: QueueKind) -> None:
    assert prompt_kind(text, SKILLS) is kind


@pytest.mark.parametrize(
    "texts",
    [
        ["plain", "more plain"],
        ["   ", "after blanks"],  # a blank head: the merged text starts with the follower
        ["/nosuch", "tail"],  # appending a paragraph never makes a command name
        ["/usr/bin is odd", "a ! inside"],
    ],
)
def test_combining_plain_prompts_gives_a_plain_prompt(texts: list[str]) -> None:
    # The queue merges only entries classified plain; the merged text must still be plain
    # when it starts, or combine would have turned text into a command.
    assert all(prompt_kind(t, SKILLS) is QueueKind.PROMPT for t in texts)
    merged = "\n\n".join(texts)
    assert prompt_kind(merged, SKILLS) is QueueKind.PROMPT
    assert classify(QueueKind.PROMPT, merged, SKILLS).kind is QueueKind.PROMPT


@pytest.mark.parametrize(
    ("kind", "text", "expected_kind", "bang", "expanded"),
    [
        (QueueKind.BANG, "!echo hi", QueueKind.BANG, "echo hi", None),
        (QueueKind.LOCAL, "/usage", QueueKind.LOCAL, None, None),
        (QueueKind.SKILL, "/review x", QueueKind.PROMPT, None, "Review this: x"),
    ],
)
def test_a_classified_entry_starts_as_its_kind(
    kind: QueueKind, text: str, expected_kind: QueueKind, bang: str | None, expanded: str | None
) -> None:
    launch = classify(kind, text, SKILLS)
    assert (launch.kind, launch.bang, launch.expanded) == (expected_kind, bang, expanded)


@pytest.mark.parametrize("text", ["hello", "  say /help or !ls", "", "   "])
def test_plain_text_runs_none_of_the_parsers(text: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # (the common case, once per turn: the text cannot be a command, so nothing is parsed)
    from agentd.session import turn_launch

    def parsed(*_: object) -> None:
        raise AssertionError("parsed plain text")

    for name in ("parse_local", "parse_bang", "expand_skill"):
        monkeypatch.setattr(turn_launch, name, parsed)
    launch = classify(QueueKind.PROMPT, text, SKILLS)
    assert launch is turn_launch.PLAIN
    assert (launch.kind, launch.local, launch.bang, launch.expanded) == (QueueKind.PROMPT, None, None, None)
