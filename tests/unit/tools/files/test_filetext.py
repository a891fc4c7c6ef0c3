"""Pure text shaping of the file tools (agentd/tools/files/text.py) and their argument helpers
(fileargs.py, walk.py), without a server or a file system."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from agentd.tools.errors import ToolError
from agentd.tools.files.args import opt_int_arg, str_arg
from agentd.tools.files.text import (
    READ_MAX_LINE_CHARS,
    find_all,
    line_of,
    no_match_hint,
    render_lines,
    replace_once,
    until_stopped,
)
from agentd.tools.search.walk import joined, pattern_arg


@pytest.mark.parametrize(
    ("lines", "offset", "limit", "user_limit", "text", "meta"),
    [
        ([], 1, 10, None, "(empty file)", {"lines": 0}),
        (["a\n", "b\n"], 1, 10, None, "     1\ta\n     2\tb", {"lines": 2, "truncated": False}),
        (["a\r\n", "b"], 2, 10, None, "     2\tb", {"lines": 1, "truncated": False}),
        (
            ["a\n", "b\n", "c\n"],
            1,
            2,
            2,
            "     1\ta\n     2\tb\n[showing lines 1-2; the file continues at line 3]",
            {"lines": 2, "truncated": True},
        ),
        (
            ["a\n", "b\n", "c\n"],
            1,
            2,
            None,
            "     1\ta\n     2\tb\n[output truncated at 2000 lines: showing lines 1-2; "
            "call read_file with offset=3 to read more]",
            {"lines": 2, "truncated": True},
        ),
    ],
)
def test_render_lines(
    lines: list[str], offset: int, limit: int, user_limit: int | None, text: str, meta: dict[str, Any]
) -> None:
    assert render_lines(lines, "f.txt", offset, limit, user_limit) == (text, meta)


def test_render_lines_shortens_a_long_line() -> None:
    text, _ = render_lines(["x" * (READ_MAX_LINE_CHARS + 5)], "f", 1, 10, None)
    assert text.endswith("[... line truncated, 5 more characters]")


def test_render_lines_past_the_end() -> None:
    with pytest.raises(ToolError, match=r"offset 5 is past the end of f\.txt, which has 2 lines"):
        render_lines(["a\n", "b\n"], "f.txt", 5, 10, None)


def test_until_stopped() -> None:
    stop = threading.Event()
    assert list(until_stopped(["a", "b"], stop, "f")) == ["a", "b"]
    stop.set()
    with pytest.raises(ToolError, match="reading f was stopped"):
        list(until_stopped(["a"], stop, "f"))


@pytest.mark.parametrize(
    ("text", "needle", "hits"), [("aaa", "aa", [0, 1]), ("abc", "x", []), ("a\nb\na", "a", [0, 4])]
)
def test_find_all(text: str, needle: str, hits: list[int]) -> None:
    assert find_all(text, needle) == hits


@pytest.mark.parametrize(("index", "line"), [(0, 1), (2, 2), (4, 3)])
def test_line_of(index: int, line: int) -> None:
    assert line_of("a\nb\nc", index) == line


@pytest.mark.parametrize(
    ("text", "old", "new", "result"),
    [
        ("one\ntwo\n", "two", "2", ("one\n2\n", 2)),
        ("x = 1\n", "x = 1", "x = 2", ("x = 2\n", 1)),
    ],
)
def test_replace_once(text: str, old: str, new: str, result: tuple[str, int]) -> None:
    assert replace_once(text, "f", old, new) == result


@pytest.mark.parametrize(
    ("text", "old", "error"),
    [
        ("a\na\n", "a", r"old_string matches 2 times in f \(lines 1, 2\)"),
        ("abc", "zzz", "no match for old_string in f"),
    ],
)
def test_replace_once_refuses(text: str, old: str, error: str) -> None:
    with pytest.raises(ToolError, match=error):
        replace_once(text, "f", old, "x")


@pytest.mark.parametrize(
    ("text", "old", "hint"),
    [
        ("def f():\n", "     1\tdef f():", "line-number prefixes"),
        ("a\r\nb\r\n", "a\nb", "CRLF"),
        ("    x = 1\n", "  x = 1  ", "different leading/trailing whitespace"),
        ("abc", "zzz", "read the file again with read_file"),
    ],
)
def test_no_match_hint(text: str, old: str, hint: str) -> None:
    assert hint in no_match_hint(text, old)


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ({"n": 3}, 3),
        ({}, None),
        ({"n": True}, "must be an integer"),
        ({"n": 0}, "must be >= 1"),
        ({"n": "3"}, "integer"),
    ],
)
def test_opt_int_arg(args: dict[str, Any], expected: Any) -> None:
    if isinstance(expected, str):
        with pytest.raises(ToolError, match=expected):
            opt_int_arg(args, "n")
    else:
        assert opt_int_arg(args, "n") == expected


@pytest.mark.parametrize(
    ("args", "kwargs", "expected"),
    [
        ({"p": "a"}, {}, "a"),
        ({}, {"default": "."}, "."),
        ({}, {}, "missing required argument 'p'"),
        ({"p": 1}, {}, "must be a string, got int"),
        ({"p": ""}, {"allow_empty": False}, "must not be empty"),
    ],
)
def test_str_arg(args: dict[str, Any], kwargs: dict[str, Any], expected: str) -> None:
    if " " in expected:
        with pytest.raises(ToolError, match=expected):
            str_arg(args, "p", **kwargs)
    else:
        assert str_arg(args, "p", **kwargs) == expected


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ({"pattern": "*.py"}, "*.py"),
        ({}, "missing"),
        ({"pattern": 3}, "must be a string"),
        ({"pattern": ""}, "empty"),
    ],
)
def test_pattern_arg(args: dict[str, Any], expected: str) -> None:
    if expected == "*.py":
        assert pattern_arg(args, "pattern") == expected
    else:
        with pytest.raises(ToolError, match=expected):
            pattern_arg(args, "pattern")


@pytest.mark.parametrize(("prefix", "rel", "out"), [(".", "a/b", "a/b"), ("src", "a", "src/a")])
def test_joined(prefix: str, rel: str, out: str) -> None:
    assert joined(prefix, rel) == out
