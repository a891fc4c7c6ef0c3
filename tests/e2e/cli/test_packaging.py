"""A normal (non-editable) install works: the wheel carries the Alembic scripts, and the
installed package — not the checkout — migrates a database and runs the demo."""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.support.cli import clean_env
from tests.support.paths import REPO_ROOT

ROOT = REPO_ROOT
SOURCES = ["pyproject.toml", "setup.py", "README.md", "agentd", "migrations"]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The project's wheel, built from a copy of the sources (the checkout stays clean)."""
    src = tmp_path_factory.mktemp("src")
    for name in SOURCES:
        path = ROOT / name
        if path.is_dir():
            shutil.copytree(path, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(path, src / name)
    out = tmp_path_factory.mktemp("dist")
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out), str(src)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert build.returncode == 0, build.stdout + build.stderr
    (built,) = out.glob("agentd-*.whl")
    return built


def test_the_wheel_carries_every_migration(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    sources = (ROOT / "migrations" / "versions").glob("*.py")
    scripts = {f"agentd/store/migrations/versions/{p.name}" for p in sources}
    assert scripts, "no migration scripts in the checkout"
    assert scripts <= names, sorted(scripts - names)
    assert {"agentd/store/migrations/env.py", "agentd/store/migrations/script.py.mako"} <= names
    assert {"agentd/demo/demo_script.json", "agentd/web/index.html"} <= names  # other package data
    # Every file of the web page (ES modules, styles, vendored modules and their licences).
    web = {f"agentd/{p.relative_to(ROOT / 'agentd').as_posix()}" for p in (ROOT / "agentd/web").rglob("*.*")}
    assert web <= names, sorted(web - names)


def test_the_wheel_installs_one_import_root(wheel: Path) -> None:
    """Only `agentd` lands in site-packages: no generic `server` or `protocol` to collide with."""
    names = zipfile.ZipFile(wheel).namelist()
    top = {name.split("/")[0] for name in names if not name.split("/")[0].endswith(".dist-info")}
    assert top == {"agentd"}, sorted(top)
    (info,) = {name.split("/")[0] for name in names if name.split("/")[0].endswith(".dist-info")}
    top_level = f"{info}/top_level.txt"
    if top_level in names:
        assert zipfile.ZipFile(wheel).read(top_level).decode().split() == ["agentd"]


def test_the_installed_package_migrates_and_runs_the_demo(wheel: Path, tmp_path: Path) -> None:
    # The wheel's files alone (dependencies come from this environment), first on the path:
    # nothing may be found in the checkout.
    target = tmp_path / "site"
    install = subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target), str(wheel)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert install.returncode == 0, install.stdout + install.stderr
    home = tmp_path / "home"
    home.mkdir()
    env = clean_env(home, PYTHONPATH=str(target), PYTHONSAFEPATH="1")
    env.pop("PYTHONHOME", None)

    def agentd(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-c", "from agentd.cli import main; main()", *args],
            env=env, cwd=home, capture_output=True, text=True, timeout=120,
        )  # fmt: skip

    where = subprocess.run(
        [sys.executable, "-c", "import agentd.store.db as d; print(d.__file__); print(d.MIGRATIONS_DIR)"],
        env=env, cwd=home, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert where.returncode == 0, where.stderr
    module_file, migrations_dir = where.stdout.split()
    assert Path(module_file).is_relative_to(target)
    assert Path(migrations_dir) == target / "agentd" / "store" / "migrations"

    db = tmp_path / "installed.db"
    migrated = agentd("migrate", "--database-url", f"sqlite+aiosqlite:///{db}")
    assert migrated.returncode == 0, migrated.stdout + migrated.stderr
    assert "database at revision" in migrated.stdout
    with sqlite3.connect(db) as conn:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert {"sessions", "events", "messages", "alembic_version"} <= tables

    demo = agentd("demo")
    assert demo.returncode == 0, demo.stdout + demo.stderr
    assert "stopReason: end_turn" in demo.stdout
