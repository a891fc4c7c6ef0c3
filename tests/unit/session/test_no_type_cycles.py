"""No import cycle inside `agentd/session/`, type-only imports included (issue 27 item 3).

The actor used to be the hub: a dozen modules took the whole `SessionActor` under
`TYPE_CHECKING`, and the actor imports them, so one type-only cycle ran through most of the
package. Each of them now names the few attributes it uses in a small `Protocol` (`WakeHost`,
`TurnHost`, `DeskHost`, …), which the actor satisfies structurally (checked by mypy in
`agentd/session/actor/session_actor.py`).

Imports through a lazy package face are resolved to the module that defines the name (the
face's `_WHERE` table), so a cycle cannot hide behind `from agentd.session.actor import
SessionActor`.
"""

from __future__ import annotations

from pathlib import Path

from tests.support.module_graph import cycles, import_graph, modules_under

ROOT = Path(__file__).resolve().parents[3]
SESSION = ROOT / "agentd" / "session"
ACTOR = "agentd.session.actor.session_actor"

# Cycles still there, each with why (sorted module names): the list may only shrink.
KNOWN_CYCLES: dict[tuple[str, ...], str] = {}

# Modules outside the actor's own package that may still name the whole `SessionActor`: the
# manager builds, registers and hands out actors (the transport needs the whole actor).
WHOLE_ACTOR_USERS = frozenset({"agentd.session.manager"})


def _graph() -> dict[str, set[str]]:
    return import_graph(modules_under(ROOT, SESSION))


def test_no_import_cycle_inside_session() -> None:
    found = {tuple(c): c for c in cycles(_graph())}
    unexpected = sorted(" <-> ".join(c) for key, c in found.items() if key not in KNOWN_CYCLES)
    assert not unexpected, "import cycles inside agentd/session (type-only ones count):\n" + "\n".join(
        unexpected
    )


def test_known_cycles_still_exist() -> None:
    """A broken cycle must leave the list, so it cannot silently come back."""
    found = {tuple(c) for c in cycles(_graph())}
    stale = sorted(set(KNOWN_CYCLES) - found)
    assert not stale, f"gone: remove from KNOWN_CYCLES: {stale}"


def test_only_the_manager_takes_the_whole_actor() -> None:
    graph = _graph()
    outside = {m: targets for m, targets in graph.items() if not m.startswith("agentd.session.actor.")}
    takers = {m for m, targets in outside.items() if ACTOR in targets}
    assert takers == WHOLE_ACTOR_USERS, "name a small Protocol of what you use instead of SessionActor"


_FACE = '_WHERE = {"SessionActor": "agentd.session.actor.session_actor"}\n__all__ = ["SessionActor"]\n'


def _write(tmp_path: Path, files: dict[str, str]) -> dict[str, Path]:
    for rel, text in files.items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return modules_under(tmp_path, tmp_path / "agentd" / "session")


def test_a_type_only_cycle_through_a_face_is_found(tmp_path: Path) -> None:
    """The planted cycle of the old layout: the actor imports `wake` at run time, `wake`
    names the actor under TYPE_CHECKING through the actor package's lazy face."""
    modules = _write(
        tmp_path,
        {
            "agentd/session/__init__.py": "",
            "agentd/session/actor/__init__.py": _FACE,
            "agentd/session/actor/session_actor.py": "from agentd.session.wake import WakeStreak\n",
            "agentd/session/wake.py": (
                "from typing import TYPE_CHECKING\n"
                "if TYPE_CHECKING:\n"
                "    from agentd.session.actor import SessionActor\n"
            ),
            "agentd/session/rewind.py": "from agentd.session.wake import WakeStreak\n",
        },
    )
    graph = import_graph(modules)
    assert graph["agentd.session.wake"] == {"agentd.session.actor.session_actor"}  # not the face
    assert "agentd.session.actor" not in graph  # a face only re-exports: not a node
    assert cycles(graph) == [["agentd.session.actor.session_actor", "agentd.session.wake"]]


def test_function_level_and_relative_imports_count(tmp_path: Path) -> None:
    modules = _write(
        tmp_path,
        {
            "agentd/session/__init__.py": "",
            "agentd/session/a.py": "def f():\n    from agentd.session import b\n",
            "agentd/session/b.py": "from . import c\n",
            "agentd/session/c.py": "import agentd.session.a\n",
        },
    )
    assert cycles(import_graph(modules)) == [["agentd.session.a", "agentd.session.b", "agentd.session.c"]]


def test_narrow_views_break_the_cycle(tmp_path: Path) -> None:
    """The same layout with `wake` naming a Protocol of its own has no cycle."""
    modules = _write(
        tmp_path,
        {
            "agentd/session/__init__.py": "",
            "agentd/session/actor/__init__.py": _FACE,
            "agentd/session/actor/session_actor.py": "from agentd.session.wake import WakeHost, WakeStreak\n",
            "agentd/session/wake.py": "from typing import Protocol\nclass WakeHost(Protocol): ...\n",
        },
    )
    assert cycles(import_graph(modules)) == []
