"""The front matter of a Markdown agent definition: a small, strict YAML subset.

`key: value` lines between `---` fences; a value is a quoted or plain string, an int, a
`[a, b]` list or a JSON object; `completion.max_retries: 2` style dotted keys fill a table.
Anything else (nesting, multi-line strings, anchors) is refused with the line number.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from agentd.agents.definition import AgentDefinitionError, Problem

_KEY_LINE = re.compile(r"(?P<key>[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)?)[ \t]*:(?P<rest>.*)")
_INT = re.compile(r"[-+]?[0-9]+")
_FENCE = "---"


class _FrontMatterError(Exception):
    def __init__(self, message: str, line: int) -> None:
        super().__init__(message)
        self.message = message
        self.line = line


def parse_markdown(text: str, path: Path) -> tuple[dict[str, Any], dict[str, int]]:
    """Front matter (`key: value` lines between `---` fences) plus the body as system_prompt."""

    def fail(message: str, line: int) -> AgentDefinitionError:
        return AgentDefinitionError(Problem("front matter", message, line), source=path, line=line)

    lines = text.removeprefix("\ufeff").splitlines()
    if not lines or lines[0].rstrip() != _FENCE:
        raise fail(
            "a Markdown agent definition must start with a '---' line opening the front matter "
            "(key: value lines, closed by another '---' line)",
            1,
        )
    close = next((i for i in range(1, len(lines)) if lines[i].rstrip() == _FENCE), None)
    if close is None:
        raise fail(
            "the front matter opened on line 1 is never closed: add a '---' line after the last key",
            1,
        )

    data: dict[str, Any] = {}
    key_lines: dict[str, int] = {}  # key (and dotted key's parent) → line, for problem reports
    seen: dict[str, int] = {}  # keys as written → line, for duplicate detection
    try:
        for index in range(1, close):
            lineno = index + 1
            raw = lines[index]
            if not raw.strip() or raw.lstrip().startswith("#"):
                continue
            if raw[0] in " \t":
                raise _FrontMatterError(
                    "indented lines (nested values, multi-line strings) are not supported; "
                    "write each key on one line as 'key: value'",
                    lineno,
                )
            match = _KEY_LINE.fullmatch(raw.rstrip())
            if match is None or (match["rest"] and match["rest"][0] not in " \t"):
                raise _FrontMatterError(f"expected 'key: value', got {raw.strip()!r}", lineno)
            key = match["key"]
            if key in seen:
                raise _FrontMatterError(f"duplicate key {key!r} (first set on line {seen[key]})", lineno)
            value = _parse_value(match["rest"], lineno)
            seen[key] = key_lines[key] = lineno
            if "." in key:
                parent, child = key.split(".", 1)
                key_lines.setdefault(parent, lineno)
                holder = data.get(parent)
                if holder is None:
                    holder = data[parent] = {}
                elif isinstance(holder, str) and parent == "completion":
                    holder = data[parent] = {"tool": holder}
                if not isinstance(holder, dict):
                    raise _FrontMatterError(f"{parent!r} is already set to a plain value", lineno)
                holder[child] = value
            else:
                existing = data.get(key)
                if isinstance(existing, dict) and key == "completion" and isinstance(value, str):
                    existing.setdefault("tool", value)
                    if existing["tool"] != value:
                        raise _FrontMatterError("completion tool is set twice", lineno)
                elif existing is not None:
                    raise _FrontMatterError(f"{key!r} is already set by a dotted key", lineno)
                else:
                    data[key] = value
    except _FrontMatterError as exc:
        raise fail(exc.message, exc.line) from None

    body = "\n".join(lines[close + 1 :])
    body = re.sub(r"\A(?:[ \t]*\n)+", "", body).rstrip()
    if body:
        if "system_prompt" in data:
            raise fail(
                "system_prompt is set both in the front matter and as the body; keep one",
                key_lines["system_prompt"],
            )
        data["system_prompt"] = body
        key_lines["system_prompt"] = close + 2
    return data, key_lines


def _parse_value(rest: str, lineno: int) -> Any:
    """One front-matter value: a quoted or plain string, an int, a `[a, b]` list, or a JSON
    object (`{...}`, for output_schema). Plain values end at ` #` (a YAML comment)."""
    text = rest.strip()
    if not text or text[0] == "#":
        raise _FrontMatterError("missing value (nested blocks are not supported)", lineno)
    if text[0] == "{":
        try:
            value, end = json.JSONDecoder().raw_decode(text)
        except json.JSONDecodeError as exc:
            raise _FrontMatterError(f"invalid JSON object: {exc.msg} (column {exc.colno})", lineno) from None
        _expect_end(text[end:], lineno)
        return value
    if text[0] == "[":
        items: list[Any] = []
        pos = 1
        while True:
            while pos < len(text) and text[pos] in " \t":
                pos += 1
            if pos >= len(text):
                raise _FrontMatterError("unterminated list: missing ']'", lineno)
            if text[pos] == "]" and not items:
                pos += 1
                break
            if text[pos] in ",]":
                raise _FrontMatterError("empty list item", lineno)
            item, pos = _scalar(text, pos, lineno, stop=",]")
            items.append(item)
            while pos < len(text) and text[pos] in " \t":
                pos += 1
            if pos >= len(text):
                raise _FrontMatterError("unterminated list: missing ']'", lineno)
            if text[pos] == "]":
                pos += 1
                break
            pos += 1  # ","
        _expect_end(text[pos:], lineno)
        return items
    value, pos = _scalar(text, 0, lineno, stop="")
    _expect_end(text[pos:], lineno)
    return value


def _scalar(text: str, pos: int, lineno: int, *, stop: str) -> tuple[Any, int]:
    """A quoted string, an int or a plain string starting at `pos`; returns (value, end)."""
    first = text[pos]
    if first == '"':
        try:
            value, end = json.JSONDecoder().raw_decode(text, pos)
        except json.JSONDecodeError as exc:
            raise _FrontMatterError(f"invalid double-quoted string: {exc.msg}", lineno) from None
        return value, end
    if first == "'":
        out, i = [], pos + 1
        while i < len(text):
            if text[i] == "'":
                if text[i + 1 : i + 2] == "'":
                    out.append("'")
                    i += 2
                    continue
                return "".join(out), i + 1
            out.append(text[i])
            i += 1
        raise _FrontMatterError("unterminated single-quoted string", lineno)
    if first in "|>&*!%@`{[]," or (first == "-" and text[pos + 1 : pos + 2] in ("", " ")):
        raise _FrontMatterError(f"unsupported YAML syntax {first!r}; quote the value", lineno)
    end = pos
    while end < len(text) and text[end] not in stop:
        if text[end] == "#" and end > pos and text[end - 1] in " \t":
            break
        end += 1
    raw = text[pos:end].rstrip()
    if not raw:
        raise _FrontMatterError("empty value", lineno)
    return (int(raw) if _INT.fullmatch(raw) else raw), pos + len(raw)


def _expect_end(rest: str, lineno: int) -> None:
    rest = rest.strip()
    if rest and not rest.startswith("#"):
        raise _FrontMatterError(f"unexpected text after the value: {rest!r}", lineno)
