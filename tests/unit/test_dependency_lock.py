"""Reproducible dependencies (issue 27 item 6): CI and the image install from locks made from
pyproject.toml, whose `>=` ranges stay for people embedding agentd; a stale lock fails CI."""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

from tests.support.paths import REPO_ROOT

LOCKS = ("requirements.lock", "requirements-dev.lock")
SCRIPT = REPO_ROOT / ".ci" / "lock.py"


def lock_script() -> Any:
    """.ci/lock.py as a module: its check runs in-process (no interpreter start per case)."""
    spec = importlib.util.spec_from_file_location("ci_lock", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def stale(root: Path) -> str:
    """What `.ci/lock.py --check` would print for `root`."""
    return "\n".join(lock_script().check(root))


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """What the check reads, copied: pyproject.toml and the locks."""
    for name in ("pyproject.toml", *LOCKS):
        shutil.copy(REPO_ROOT / name, tmp_path / name)
    return tmp_path


def run_check(root: Path) -> subprocess.CompletedProcess[str]:
    """`.ci/lock.py --check` as CI runs it: a command and its exit status."""
    command = [sys.executable, str(SCRIPT), "--check", "--root", str(root)]
    return subprocess.run(command, capture_output=True, text=True, check=False, timeout=60)


def test_the_locks_are_current() -> None:
    result = run_check(REPO_ROOT)
    assert result.returncode == 0, result.stderr


def test_a_dependency_added_to_pyproject_makes_the_check_fail(checkout: Path) -> None:
    pyproject = checkout / "pyproject.toml"
    text = pyproject.read_text()
    pyproject.write_text(
        text.replace('    "sniffio>=1.3",\n', '    "sniffio>=1.3",\n    "left-pad>=1",\n', 1)
    )
    result = run_check(checkout)
    assert result.returncode == 1
    assert "requirements.lock was made from other dependencies" in result.stderr
    assert "requirements-dev.lock was made from other dependencies" in result.stderr
    assert "left-pad is not pinned" in result.stderr and "python .ci/lock.py" in result.stderr


def test_a_dev_only_change_leaves_the_servers_lock_current(checkout: Path) -> None:
    pyproject = checkout / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace('"pytest>=8"', '"pytest>=8.1"', 1))
    problems = stale(checkout)
    assert "requirements-dev.lock was made from other" in problems
    assert "requirements.lock was made from other" not in problems


def test_a_pin_edited_by_hand_outside_its_range_fails(checkout: Path) -> None:
    lock = checkout / "requirements.lock"
    lock.write_text(re.sub(r"^fastapi==\S+", "fastapi==0.100.0", lock.read_text(), flags=re.M))
    assert "fastapi==0.100.0 is outside >=0.110" in stale(checkout)


def test_every_pin_has_hashes_and_pyproject_keeps_ranges() -> None:
    for name in LOCKS:
        entries = re.findall(
            r"^(\S+==\S+)((?:\s*\\\n\s+--hash=sha256:[0-9a-f]{64})*)", (REPO_ROOT / name).read_text(), re.M
        )
        assert entries and all(hashes for _, hashes in entries), name
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    declared = [*project["dependencies"], *project["optional-dependencies"]["dev"]]
    assert all(">=" in req and "==" not in req for req in declared)  # for embedding: floors only


def test_ci_installs_from_the_lock_and_checks_it() -> None:
    ci = (REPO_ROOT / ".ci" / "run").read_text()
    install = ci.index("pip install -q --require-hashes -r requirements-dev.lock")
    assert install < ci.index("pip install -q --no-deps -e .") < ci.index(".ci/lock.py --check")
    assert "pip install -q -e '.[dev]'" not in ci
