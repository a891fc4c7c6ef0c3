"""The import graph of a package's modules, type-only imports included, for cycle checks.

Every import counts wherever it is written (module level, inside a function, under
`if TYPE_CHECKING:`): a type-only import still couples two modules. A name imported from a lazy
package face (`from agentd.session.actor import SessionActor`) is resolved, through the face's
`_WHERE` table, to the module that defines it, so a cycle cannot hide behind a face. Faces
themselves are not nodes: they only re-export.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from pathlib import Path


def modules_under(root: Path, package_dir: Path) -> dict[str, Path]:
    """Dotted module name → file, for every module below `package_dir` (`root` holds the top
    package)."""
    found: dict[str, Path] = {}
    for path in sorted(package_dir.rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def face_table(init: Path) -> dict[str, str]:
    """A lazy face's `_WHERE = {"Name": "module", …}` (empty when the package has none)."""
    for node in ast.parse(init.read_text(), filename=str(init)).body:
        if (
            isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == "_WHERE" for t in node.targets)
            and isinstance(node.value, ast.Dict)
        ):
            return {
                k.value: v.value
                for k, v in zip(node.value.keys, node.value.values, strict=True)
                if isinstance(k, ast.Constant)
                and isinstance(k.value, str)
                and isinstance(v, ast.Constant)
                and isinstance(v.value, str)
            }
    return {}


def _deepest(name: str, modules: Mapping[str, Path]) -> str:
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name


def imports_of(module: str, modules: Mapping[str, Path], faces: Mapping[str, Mapping[str, str]]) -> set[str]:
    """The in-graph modules `module` imports, names from faces resolved to their defining module."""
    path = modules[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    targets: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        reached: list[str] = []
        if isinstance(node, ast.Import):
            reached = [_deepest(alias.name, modules) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                source = ".".join([*base, node.module] if node.module else base)
            else:
                source = node.module or ""
            for alias in node.names:
                whole = f"{source}.{alias.name}"
                if whole in modules:  # `from agentd.session.queue import ops`: the module
                    reached.append(whole)
                elif source in faces and alias.name in faces[source]:
                    reached.append(_deepest(faces[source][alias.name], modules))
                else:
                    reached.append(_deepest(source, modules))
        targets.update(t for t in reached if t and t != module and t not in faces)
    return targets


def import_graph(modules: Mapping[str, Path]) -> dict[str, set[str]]:
    """Module → the modules it imports, for every module that is not a face."""
    faces = {m: face_table(p) for m, p in modules.items() if p.name == "__init__.py"}
    return {m: imports_of(m, modules, faces) for m in modules if m not in faces}


def cycles(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """Strongly connected components with more than one node (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component: list[str] = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)
