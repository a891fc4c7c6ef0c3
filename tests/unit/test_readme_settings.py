"""The README's settings table tells the truth (issue 10): it lists every `Settings`
field as its `AGENTD_*` variable, nothing that is not one, and the defaults it spells out
as literals are the real ones."""

from __future__ import annotations

import json
import re
from enum import Enum
from pathlib import Path
from typing import Any

from agentd.infra.config import Settings
from tests.support.paths import REPO_ROOT

README = REPO_ROOT / "README.md"
HEADER = "| variable | default | meaning |"


def table_rows() -> list[list[str]]:
    lines = README.read_text(encoding="utf-8").splitlines()
    start = lines.index(HEADER)
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        # Split on cell borders, not on escaped pipes inside a cell.
        rows.append([cell.strip() for cell in re.split(r"(?<!\\)\|", line)[1:-1]])
    assert rows, "the settings table is empty"
    return rows


def variables(cell: str) -> list[str]:
    return re.findall(r"`(AGENTD_[A-Z0-9_]+)`", cell)


def shown(value: Any) -> str:
    """A default as the README writes it."""
    if isinstance(value, Enum):
        return str(value.value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, list | dict):
        return json.dumps(value)
    if isinstance(value, Path) and value.is_relative_to(Path.home()):
        return f"~/{value.relative_to(Path.home())}"
    return str(value)


def test_the_table_lists_exactly_the_settings() -> None:
    listed = [v for row in table_rows() for v in variables(row[0])]
    fields = {f"AGENTD_{name.upper()}" for name in Settings.model_fields}
    assert len(listed) == len(set(listed)), "a variable is listed twice"
    assert sorted(fields - set(listed)) == [], "settings missing from the README's table"
    assert sorted(set(listed) - fields) == [], "the README's table lists variables that are not settings"


def test_literal_defaults_match_the_settings() -> None:
    checked = 0
    for row in table_rows():
        names = variables(row[0])
        literals = re.findall(r"`([^`]*)`", row[1])
        # Only cells that are nothing but literals, one per variable ("none", prose: skipped).
        if not literals or re.sub(r"`[^`]*`|,|\s", "", row[1]) or len(literals) != len(names):
            continue
        if any("$" in literal for literal in literals):  # derived from another setting
            continue
        for name, literal in zip(names, literals, strict=True):
            field = Settings.model_fields[name.removeprefix("AGENTD_").lower()]
            default = field.get_default(call_default_factory=True)
            assert shown(default) == literal, f"{name}: README says {literal}, the default is {default!r}"
            checked += 1
    assert checked >= 20  # the check really ran over the table
