"""The tests follow the rules docs/architecture.md states for them: helpers live in
`tests/support/`, and no test module (nor a conftest, nor a helper) imports a test module —
one test file importing another runs or breaks the other's module-level code and ties
their fixtures together."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.support.paths import REPO_ROOT, TESTS_DIR

ALLOWED = "tests.support"
# A line that may import a test module: only a file with one is parsed (the suite stays fast).
_CANDIDATE = re.compile(r"^[ \t]*(?:from|import)[ \t]+(?:\.|tests\b(?!\.support\b))", re.M)


def package_of(path: Path) -> str:
    return ".".join(path.relative_to(TESTS_DIR.parent).parts[:-1])


def imported_test_modules(source: str, package: str) -> list[tuple[int, str]]:
    """(line, module) of every import of a `tests.` module outside `tests.support` in a
    module of `package`, at any depth (inside functions too), relative imports resolved."""
    if not _CANDIDATE.search(source):
        return []
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                names = [f"{base}.{node.module}" if node.module else base]
            else:
                names = [node.module or ""]
        else:
            continue
        for name in names:
            if name.split(".")[0] == "tests" and name != ALLOWED and not name.startswith(f"{ALLOWED}."):
                found.append((node.lineno, name))
    return found


def test_no_test_module_imports_another() -> None:
    offenders = [
        f"{path.relative_to(TESTS_DIR.parent)}:{line}: imports {module}"
        for path in sorted(TESTS_DIR.rglob("*.py"))
        for line, module in imported_test_modules(path.read_text(), package_of(path))
    ]
    assert not offenders, "move the shared helper into tests/support/:\n" + "\n".join(offenders)


def test_helpers_live_only_in_tests_support() -> None:
    stray = [
        str(path.relative_to(TESTS_DIR.parent))
        for folder in ("unit", "e2e")
        for path in sorted((TESTS_DIR / folder).rglob("*.py"))
        if not path.name.startswith("test_") and path.name not in ("conftest.py", "__init__.py")
    ]
    assert not stray, f"helper modules outside tests/support/: {stray}"


def test_the_check_sees_every_spelling() -> None:
    source = (
        "from tests.conftest import scripted\n"
        "import tests.e2e.loop.test_subagents\n"
        "from .test_attach import x\n"
        "def f():\n    from tests.unit.agents import test_agents\n"
        "from tests.support.polling import until\nfrom tests.support import clock\n"
        "from tests import conftest\n"
    )
    found = imported_test_modules(source, package_of(TESTS_DIR / "e2e" / "session" / "test_x.py"))
    assert [name for _, name in found] == [
        "tests.conftest",
        "tests.e2e.loop.test_subagents",
        "tests.e2e.session.test_attach",
        "tests",
        "tests.unit.agents",
    ]


def skips_by_database(source: str) -> list[int]:
    """Lines of a `pytest.skip(...)` under an `if` that asks which database a test got: such
    a case belongs to the database's parameter (`pg_url`, `db_url`), not to a skip."""
    if "pytest.skip(" not in source:
        return []
    lines = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.If):
            continue
        test = ast.unparse(node.test).lower()
        if not any(word in test for word in ("db_url", "postgres", "sqlite", "dialect")):
            continue
        for inner in ast.walk(ast.Module(body=node.body, type_ignores=[])):
            if isinstance(inner, ast.Call) and ast.unparse(inner.func) == "pytest.skip":
                lines.append(inner.lineno)
    return lines


def test_no_case_skips_itself_by_database() -> None:
    offenders = [
        f"{path.relative_to(TESTS_DIR.parent)}:{line}"
        for folder in ("unit", "e2e")
        for path in sorted((TESTS_DIR / folder).rglob("test_*.py"))
        for line in skips_by_database(path.read_text())
    ]
    assert not offenders, f"parametrise over the database (pg_url / db_url) instead of skipping: {offenders}"
    probe = "async def test_x(db_url):\n    if 'sqlite' in db_url:\n        pytest.skip('pg only')\n"
    assert skips_by_database(probe) == [3]


def unmirrored_folders(unit_dir: Path, code_dir: Path) -> list[str]:
    """Folders of `unit_dir` that mirror no package of `code_dir` (`support/` tests the
    helpers of tests/support/, which have no package of their own in the code; `bench/` the
    pure helpers of bench/, a folder of scripts)."""
    return sorted(
        str(folder.relative_to(unit_dir))
        for folder in unit_dir.rglob("*")
        if folder.is_dir()
        and folder.name != "__pycache__"
        and folder.relative_to(unit_dir).parts[0] not in ("support", "bench")
        and not (code_dir / folder.relative_to(unit_dir) / "__init__.py").is_file()
    )


def test_unit_test_folders_mirror_the_packages() -> None:
    """tests/unit/<path>/ holds the tests of agentd/<path>/: a renamed or moved package
    takes its tests along (docs/architecture.md: tests mirror the code)."""
    stray = unmirrored_folders(TESTS_DIR / "unit", REPO_ROOT / "agentd")
    assert not stray, f"no agentd package for these test folders: {stray}"


def test_the_mirror_check_sees_a_stray_folder(tmp_path: Path) -> None:
    (tmp_path / "agentd" / "loop" / "goals").mkdir(parents=True)
    for pkg in ("loop", "loop/goals"):
        (tmp_path / "agentd" / pkg / "__init__.py").write_text("")
    for folder in ("loop/goals", "loop/react", "support", "chaos"):
        (tmp_path / "unit" / folder).mkdir(parents=True)
    assert unmirrored_folders(tmp_path / "unit", tmp_path / "agentd") == ["chaos", "loop/react"]
