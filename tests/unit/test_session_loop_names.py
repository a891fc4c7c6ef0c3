"""The session needs only a handful of loop names (issue 27, item 2): the data both share lives
in `agentd.core`, the loop's per-session state is one `SessionLoopState`, and the session starts
turns through a few entry points. Every `from agentd.loop… import` anywhere under
`agentd/session/` counts — type-only and deferred imports too."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SESSION = ROOT / "agentd" / "session"
LIMIT = 8


def loop_names(folder: Path) -> dict[str, set[str]]:
    """Each distinct name the modules under `folder` import from `agentd.loop` (or one of its
    modules), with the files that import it."""
    names: dict[str, set[str]] = {}
    for path in sorted(folder.rglob("*.py")):
        where = str(path.relative_to(folder))
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module is not None:
                if node.module == "agentd.loop" or node.module.startswith("agentd.loop."):
                    for alias in node.names:
                        names.setdefault(alias.name, set()).add(where)
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name == "agentd.loop" or alias.name.startswith("agentd.loop."):
                        names.setdefault(f"import {alias.name}", set()).add(where)
    return names


def test_the_session_imports_a_handful_of_loop_names() -> None:
    names = loop_names(SESSION)
    listing = "\n".join(f"{n}: {', '.join(sorted(files))}" for n, files in sorted(names.items()))
    assert len(names) <= LIMIT, (
        f"agentd/session imports {len(names)} loop names (at most {LIMIT}):\n{listing}"
    )


def test_the_count_sees_every_kind_of_import(tmp_path: Path) -> None:
    (tmp_path / "actor").mkdir()
    (tmp_path / "a.py").write_text(
        "from agentd.loop import run_turn, TurnContext\n"
        "from agentd.core import TurnOutcome\n"  # not the loop's
        "from agentd.loopy import Other\n"  # another package that merely starts alike
    )
    (tmp_path / "actor" / "b.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from agentd.loop import RetryState\n"  # type-only: counts
        "def f():\n"
        "    from agentd.loop.turn_reminders import PreviousEnd\n"  # deferred and deep: counts
        "    from agentd.loop import run_turn\n"  # already counted
        "import agentd.loop.turn\n"
    )
    assert loop_names(tmp_path) == {
        "run_turn": {"a.py", "actor/b.py"},
        "TurnContext": {"a.py"},
        "RetryState": {"actor/b.py"},
        "PreviousEnd": {"actor/b.py"},
        "import agentd.loop.turn": {"actor/b.py"},
    }
