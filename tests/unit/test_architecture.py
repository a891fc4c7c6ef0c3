"""One dependency direction (issue 11): every import inside `agentd/` goes down the layer map
below, and no two packages import each other.

The intended direction is

    composition root (cli, demo, embedded, app, serve, preflight, chat)
      → transport → session → agents → loop → (providers, tools)
      → infra (settings, auth, metrics, logs, overload, the memory trimmer)
      → store → core → protocol

`agentd/core/` holds the shared domain types (messages, error kinds, event kinds, the provider
protocol and its stream events, Lane, permission modes); `agentd/protocol/` (wire models)
imports nothing else of agentd, and the store imports only core and protocol.

Every import counts, wherever it is written: at module level, inside a function (a deferred
import is still a dependency), and under `if TYPE_CHECKING:` (a type-only import still couples
the packages and would hide a cycle), so each one must go down the map too. The few edges that
cannot go down yet are listed, with the reason, in `KNOWN_EXCEPTIONS`: the test fails on any
other upward import or cycle, and also when a listed exception has gone (so the list only shrinks).
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

from tests.support.module_graph import cycles, imports_of, modules_under

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("agentd",)

# Rank of each layer: a module may import from its own layer and from layers of a strictly lower
# rank; layers of equal rank (e.g. providers and tools) stay independent of each other. A layer is
# a sub-package of `agentd/` (`agentd/loop/…` → "loop") or a top-level module of it
# (`agentd/app.py` → "app").
LAYERS: dict[str, int] = {
    "protocol": 0,  # wire models: pydantic only
    "agentd": 0,  # agentd/__init__.py: just __version__
    "_faces": -1,  # below everything: the lazy package face every `__init__` uses (imports only the stdlib)
    "core": 1,  # shared domain types; may use protocol's wire models
    "store": 2,  # SQLAlchemy tables and the Store
    "infra": 3,  # settings (they build the store's pool limits), auth, logs, metrics, overload
    "providers": 5,
    "tools": 5,
    "loop": 6,
    "agents": 7,  # agent definitions: name loop's structured-output tool and the tool registry
    "session": 8,
    "transport": 9,
    # the composition root and the clients, at the top
    "app": 10,
    "serve": 10,
    "preflight": 10,
    "doctor": 11,  # `agentd doctor`, the start-up notes: uses preflight's store check
    "chat": 10,
    "embedded": 11,
    "demo": 12,
    "cli": 13,
}

# (importer module, imported module) edges allowed to go up, each with why it is still there.
KNOWN_EXCEPTIONS: frozenset[tuple[str, str]] = frozenset()  # none left: keep it empty


def _modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for package in PACKAGES:
        found.update(modules_under(ROOT, ROOT / package))
    return found


def layer_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "agentd"


def _imports(module: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """Every in-repo module `module` imports, anywhere in the file (a face's names count as
    the face itself here: it sits in the layer of what it re-exports)."""
    return imports_of(module, {**modules, module: path}, {})


def _edges() -> set[tuple[str, str]]:
    modules = _modules()
    return {(m, t) for m, path in modules.items() for t in _imports(m, path, modules)}


def test_every_module_has_a_layer() -> None:
    unplaced = sorted(m for m in _modules() if layer_of(m) not in LAYERS)
    assert not unplaced, f"place these in LAYERS (tests/unit/test_architecture.py): {unplaced}"


def test_imports_go_down_the_layers() -> None:
    upward = sorted(
        f"{src} ({layer_of(src)}) -> {dst} ({layer_of(dst)})"
        for src, dst in _edges()
        if layer_of(src) != layer_of(dst)
        and LAYERS.get(layer_of(dst), 99) >= LAYERS.get(layer_of(src), -1)
        and (src, dst) not in KNOWN_EXCEPTIONS
    )
    assert not upward, "imports that go up (or sideways) the layer map:\n" + "\n".join(upward)


def test_no_import_cycle_between_packages() -> None:
    graph: dict[str, set[str]] = defaultdict(set)
    witness: dict[tuple[str, str], str] = {}
    for src, dst in sorted(_edges() - KNOWN_EXCEPTIONS):
        a, b = layer_of(src), layer_of(dst)
        if a != b:
            graph[a].add(b)
            witness.setdefault((a, b), f"{src} -> {dst}")
    found = cycles(graph)
    described = [
        f"{' <-> '.join(c)}: " + "; ".join(witness[(a, b)] for a in c for b in c if (a, b) in witness)
        for c in found
    ]
    assert not found, "import cycles between packages:\n" + "\n".join(described)


def test_known_exceptions_still_exist() -> None:
    """A fixed exception must leave the list, so it cannot silently come back."""
    stale = sorted(KNOWN_EXCEPTIONS - _edges())
    assert not stale, f"no longer imported; remove from KNOWN_EXCEPTIONS: {stale}"


def test_the_check_sees_every_kind_of_import(tmp_path: Path) -> None:
    """The parser catches function-level, TYPE_CHECKING and relative imports (else the
    layering tests above would pass vacuously)."""
    modules = {
        "agentd.loop.x": tmp_path / "x.py",
        "agentd.app": tmp_path / "app.py",
        "agentd.core.events": tmp_path / "e.py",
        "agentd.loop.y": tmp_path / "y.py",
    }
    modules["agentd.loop.x"].write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from agentd.app import AppState\n"
        "def f():\n    import agentd.core.events\n"
        "from . import y\n"
    )
    assert _imports("agentd.loop.x", modules["agentd.loop.x"], modules) == {
        "agentd.app",
        "agentd.core.events",
        "agentd.loop.y",
    }


# ---------------------------------------------------------------- package faces (issue 27)


def _packages(modules: dict[str, Path]) -> set[str]:
    return {m for m, path in modules.items() if path.name == "__init__.py"}


def required_face(importer: str, target: str, packages: set[str]) -> str | None:
    """The package whose `__init__` an import of `target` from `importer` must go through:
    the outermost package holding `target` that does not hold `importer` (None: same package)."""
    parts = target.split(".")
    for i in range(2, len(parts) + 1):
        package = ".".join(parts[:i])
        if package in packages and not (importer == package or importer.startswith(package + ".")):
            return package
    return None


def declared_public(init: Path) -> set[str]:
    """The names a face's `__all__` lists (a module named there is public too)."""
    for node in ast.parse(init.read_text()).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            return {e.value for e in getattr(node.value, "elts", []) if isinstance(e, ast.Constant)}
    return set()


def face_violations(modules: dict[str, Path]) -> list[str]:
    """Imports that reach past a package's face: `from agentd.session.actor.session_actor
    import SessionActor` in the transport, or a module its face does not list, imported from
    outside its package."""
    packages = _packages(modules)
    public = {p: declared_public(modules[p]) for p in packages}
    found: list[str] = []
    for module, path in sorted(modules.items()):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            sources: list[tuple[str, str]] = []  # (what the import names, the module it reaches)
            if (
                isinstance(node, ast.ImportFrom)
                and not node.level
                and (node.module or "").startswith("agentd.")
            ):
                source = node.module or ""
                for alias in node.names:
                    whole = f"{source}.{alias.name}"
                    sources.append((source, whole) if whole in modules else (source, source))
            elif isinstance(node, ast.Import):
                sources = [(a.name, a.name) for a in node.names if a.name.startswith("agentd.")]
            for named, reached in sources:
                if module in packages and reached.startswith(module + "."):
                    continue  # a face re-exports what its package holds
                face = required_face(module, reached, packages)
                if face is not None and named == face and reached.rpartition(".")[0] == face:
                    if reached.rpartition(".")[2] in public[face]:
                        continue  # a module the face lists as public (`from agentd.core import tracing`)
                if face is not None and (named != face or reached != face):
                    found.append(f"{module}: imports {reached} (use the face {face})")
    return sorted(set(found))


def test_outsiders_import_only_a_package_face() -> None:
    """Code outside a package imports only the names its `__init__` exports."""
    violations = face_violations(_modules())
    assert not violations, "imports past a package's face:\n" + "\n".join(violations)


def test_the_face_check_sees_a_deep_import(tmp_path: Path) -> None:
    modules = {
        "agentd.session": tmp_path / "session" / "__init__.py",
        "agentd.session.actor": tmp_path / "session" / "actor" / "__init__.py",
        "agentd.session.actor.core": tmp_path / "session" / "actor" / "core.py",
        "agentd.session.hub": tmp_path / "session" / "hub.py",
        "agentd.transport": tmp_path / "transport" / "__init__.py",
        "agentd.transport.ws": tmp_path / "transport" / "ws.py",
    }
    for path in modules.values():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("")
    modules["agentd.transport.ws"].write_text(
        "from agentd.session import Hub\n"  # through the face: fine
        "from agentd.session.actor.core import Actor\n"  # past it
        "from agentd.session import hub\n"  # a module of the package, not its face
        "from agentd.session import log\n"  # a module its face lists: fine
    )
    modules["agentd.session.log"] = tmp_path / "session" / "log.py"
    modules["agentd.session.log"].write_text("")
    modules["agentd.session"].write_text('__all__ = ["Hub", "log"]\n')
    modules["agentd.session.hub"].write_text(
        "from agentd.session.actor import Actor\n"  # a sibling sub-package's face: fine
        "from agentd.session.actor.core import Other\n"  # past it
    )
    assert face_violations(modules) == [
        "agentd.session.hub: imports agentd.session.actor.core (use the face agentd.session.actor)",
        "agentd.transport.ws: imports agentd.session.actor.core (use the face agentd.session)",
        "agentd.transport.ws: imports agentd.session.hub (use the face agentd.session)",
    ]


def test_every_face_name_resolves() -> None:
    """Each lazy face's table names a module that defines the name (a renamed function
    would otherwise fail only when first used)."""
    import importlib

    broken = []
    for module, path in sorted(_modules().items()):
        if path.name != "__init__.py":
            continue
        package = importlib.import_module(module)
        for name in getattr(package, "__all__", ()):
            try:
                getattr(package, name)
            except AttributeError as exc:
                try:  # a public submodule
                    importlib.import_module(f"{module}.{name}")
                except ModuleNotFoundError:
                    broken.append(f"{module}.{name}: {exc}")
    assert not broken, "\n".join(broken)
