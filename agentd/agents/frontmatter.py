"""The front matter of a Markdown agent definition: YAML between `---` fences, read by PyYAML.

The whole of YAML that describes data is accepted (block lists and maps, multi-line
strings, flow collections), so a file pasted from another agent tool reads as it does
there. Only safe loading: a tag that would build a Python object is an error. Every error
names the file's line: YAML's own (`problem_mark`), a duplicate key (YAML keeps the last one
silently; here it is a mistake to point at), and the line of each key is kept so the
validation problems found later can point at theirs.

agentd's older one-line spelling still reads the same: `completion.max_retries: 2` style
dotted keys fill the `completion` table, beside `completion: StructuredOutput`.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentd.agents.definition import AgentDefinitionError, Problem

if TYPE_CHECKING:
    import yaml

_FENCE = "---"


class _FrontMatterError(Exception):
    def __init__(self, message: str, line: int) -> None:
        super().__init__(message)
        self.message = message
        self.line = line


def parse_markdown(text: str, path: Path) -> tuple[dict[str, Any], dict[str, int]]:
    """The front matter's keys plus the body as `system_prompt`, and the line of each key
    (`completion.tool` style for nested ones)."""

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
    try:
        data, key_lines = load_yaml_mapping(lines[1:close], first_line=2)
        _fill_dotted(data, key_lines)
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


def load_yaml_mapping(lines: list[str], *, first_line: int) -> tuple[dict[str, Any], dict[str, int]]:
    """`lines` as one YAML mapping (empty → `{}`), with the line of each key counted from
    `first_line`. Raises `_FrontMatterError` with the line of the mistake."""
    import yaml  # at the first agent file: a server without any never loads PyYAML (~1 MiB)

    text = "\n".join(lines) + "\n"
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return {}, {}
        if not isinstance(node, yaml.MappingNode):
            kind = "list" if isinstance(node, yaml.SequenceNode) else "single value"
            raise _FrontMatterError(
                f"the front matter must be 'key: value' lines, got a {kind}",
                node.start_mark.line + first_line,
            )
        key_lines = _key_lines(node, first_line)
        data = loader.construct_document(node)
    except yaml.MarkedYAMLError as exc:
        raise _FrontMatterError(_yaml_message(exc), _yaml_line(exc, lines) + first_line) from None
    except yaml.YAMLError as exc:  # the reader's: a character YAML does not allow
        raise _FrontMatterError(f"invalid YAML: {exc}", first_line) from None
    finally:
        loader.dispose()
    return data, key_lines


def _key_lines(node: yaml.MappingNode, first_line: int, prefix: str = "") -> dict[str, int]:
    """Each key's line (one level of nesting: `completion.tool`); a duplicate key is an error."""
    import yaml  # (loaded by the caller already)

    found: dict[str, int] = {}
    for key_node, value_node in node.value:
        key = f"{prefix}{key_node.value}" if isinstance(key_node, yaml.ScalarNode) else None
        line = key_node.start_mark.line + first_line
        if key is None:
            raise _FrontMatterError("a key must be a plain name, not a list or a table", line)
        if key in found:
            raise _FrontMatterError(f"duplicate key {key!r} (first set on line {found[key]})", line)
        found[key] = line
        if not prefix and isinstance(value_node, yaml.MappingNode):
            found.update(_key_lines(value_node, first_line, prefix=f"{key}."))
    return found


def _yaml_message(exc: yaml.MarkedYAMLError) -> str:
    problem = exc.problem or "malformed"
    message = f"invalid YAML: {exc.context}, {problem}" if exc.context else f"invalid YAML: {problem}"
    if problem == "mapping values are not allowed here":
        # The usual cause in a pasted file: a description with ': ' in it.
        message += " (a value with ': ' in it needs quotes; an indented line continues the one above)"
    return message


def _yaml_line(exc: yaml.MarkedYAMLError, lines: list[str]) -> int:
    """The 0-based line of the mistake. An error at the end of the text (an unclosed quote,
    list or table) is reported where the unfinished thing began, else on the last line."""
    last = max((i for i, line in enumerate(lines) if line.strip()), default=0)
    mark = exc.problem_mark
    if mark is not None and mark.line <= last:
        return int(mark.line)
    context = exc.context_mark
    return int(context.line) if context is not None and context.line <= last else last


def _fill_dotted(data: dict[str, Any], key_lines: dict[str, int]) -> None:
    """`completion.max_retries: 2` → `data["completion"]["max_retries"] = 2`; a plain
    `completion: tool` beside dotted keys is the table's `tool`."""
    for key in [k for k in data if isinstance(k, str) and "." in k]:
        parent, child = key.split(".", 1)
        line = key_lines[key]
        key_lines[parent] = min(key_lines.get(parent, line), line)
        holder = data.get(parent)
        if holder is None:
            holder = data[parent] = {}
        elif isinstance(holder, str) and parent == "completion":
            holder = data[parent] = {"tool": holder}
        if not isinstance(holder, dict):
            raise _FrontMatterError(f"{parent!r} is already set to a plain value", line)
        if child in holder:
            raise _FrontMatterError(f"{parent}.{child} is set twice", line)
        holder[child] = data.pop(key)
