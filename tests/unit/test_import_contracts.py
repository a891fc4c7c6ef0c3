"""The import contracts in pyproject's `[tool.importlinter]` (issue 27): layers, no cycle
between any package's sub-packages or modules, independent providers and tools, no HTTP
framework below the transport. Run by import-linter itself, on the tree and on a copy with
a planted violation (so the check cannot pass vacuously)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LINT = Path(sys.executable).with_name("lint-imports")


def lint(where: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(LINT), "--no-cache", "--config", str(where / "pyproject.toml")],
        cwd=where,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PYTHONPATH": str(where), "PATH": "/usr/bin:/bin"},
    )


def test_the_tree_keeps_every_contract() -> None:
    done = lint(ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 broken" in done.stdout


def test_a_planted_upward_import_and_cycle_are_caught(tmp_path: Path) -> None:
    copy = tmp_path / "tree"
    shutil.copytree(ROOT / "agentd", copy / "agentd", ignore=shutil.ignore_patterns("__pycache__", "web"))
    shutil.copy(ROOT / "pyproject.toml", copy / "pyproject.toml")
    # The store (a leaf) reaching up into the session, and two loop sub-packages in a loop.
    with (copy / "agentd" / "store" / "records.py").open("a") as f:
        f.write("\nfrom agentd.session import SessionManager  # noqa\n")
    with (copy / "agentd" / "loop" / "goals" / "decide.py").open("a") as f:
        f.write("\nimport agentd.loop.react.run  # noqa\n")
    with (copy / "agentd" / "loop" / "react" / "run.py").open("a") as f:
        f.write("\nimport agentd.loop.goals.decide  # noqa\n")
    done = lint(copy)
    assert done.returncode != 0
    assert "agentd.store.records -> agentd.session" in done.stdout
    assert "No cycles are allowed in agentd.loop" in done.stdout
