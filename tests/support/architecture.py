"""The layer picture in docs/architecture.md, drawn from pyproject's import contracts (so the
map cannot drift from what CI enforces). `python -m tests.support.architecture --write`
redraws it in place."""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "architecture.md"
START, END = "<!-- layers: drawn from pyproject's [tool.importlinter] -->", "<!-- /layers -->"


def contracts(pyproject: Path = ROOT / "pyproject.toml") -> list[dict[str, Any]]:
    config = tomllib.loads(pyproject.read_text())
    found: list[dict[str, Any]] = config["tool"]["importlinter"]["contracts"]
    return found


def layer_picture(pyproject: Path = ROOT / "pyproject.toml") -> str:
    rules = contracts(pyproject)
    [layers] = [c for c in rules if c["type"] == "layers"]
    apart = [c for c in rules if c["type"] == "independence"]
    lines = ["```text"]
    for i, layer in enumerate(layers["layers"]):
        names = [n.strip() for n in layer.split("|")]
        row = "  ".join(f"{n}/" if (ROOT / "agentd" / n).is_dir() else f"{n}.py" for n in names)
        notes = [
            " ⟂ ".join(m.rpartition(".")[2] for m in c["modules"])
            for c in apart
            if any(m.split(".")[1] in names for m in c["modules"])
        ]
        lines.append(f"{row:<38}{'  independent: ' + '; '.join(notes) if notes else ''}".rstrip())
        if i < len(layers["layers"]) - 1:
            lines.append("   ↓")
    lines.append("```")
    return "\n".join(lines)


def drawn(doc: str) -> str:
    match = re.search(re.escape(START) + r"\n(.*?)\n" + re.escape(END), doc, re.S)
    return match.group(1) if match else ""


if __name__ == "__main__":
    text = DOC.read_text()
    new = text.replace(drawn(text), layer_picture()) if drawn(text) else text
    if "--write" in sys.argv:
        DOC.write_text(new)
    else:
        print(layer_picture())
