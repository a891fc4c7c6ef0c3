"""The `agentd` command line, run as a real subprocess: demo, migrate, help, bad options."""

from __future__ import annotations

import os
import shutil
import sqlite3
import sys
from pathlib import Path

import pytest
from alembic.script import ScriptDirectory

from agentd.store.db import alembic_config
from tests.support.cli import agentd, clean_env

# Variables that could send the demo to the network or change what it does.


def agentd_command() -> list[str]:
    """The `agentd` entry point of the running interpreter's environment (any venv)."""
    exe = shutil.which("agentd", path=os.path.dirname(sys.executable)) or shutil.which("agentd")
    return [exe] if exe else [sys.executable, "-m", "agentd.cli"]


def head_revision() -> str:
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert head
    return head


async def test_demo_runs_end_to_end_offline(tmp_path: Path) -> None:
    run = await agentd("demo", env=clean_env(tmp_path), cwd=tmp_path)
    assert run.code == 0, run.text
    out = run.out
    assert "hello.py" in out
    assert "Write hello.py" in out and "write" in out.lower()
    assert "stopReason: end_turn" in out
    assert "workspace now holds: hello.py" in out
    assert "Hello, world! Welcome to agentd." in out  # the script ran the program it wrote
    assert "Traceback" not in run.text
    # It worked in a temp dir: nothing written to the user's home.
    assert not (tmp_path / ".agentd").exists()


async def test_demo_with_custom_workspace_and_prompt(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    run = await agentd(
        "demo", "--workspace", str(ws), "--prompt", "Say hi in Python", env=clean_env(tmp_path), cwd=tmp_path
    )
    assert run.code == 0, run.text
    assert "> Say hi in Python" in run.out
    assert (ws / "hello.py").read_text().count("Welcome to agentd") == 1


async def test_demo_ignores_the_server_environment(tmp_path: Path) -> None:
    root = tmp_path / "workspaces"
    root.mkdir()
    prod_db = tmp_path / "prod.db"
    env = clean_env(
        tmp_path,
        AGENTD_DATABASE_URL=f"sqlite+aiosqlite:///{prod_db}",
        AGENTD_WORKSPACE_ROOT=str(root),  # as docker-compose.yml sets it
    )
    run = await agentd("demo", env=env, cwd=tmp_path)
    # The demo is self-contained ("SQLite in a temp dir"): it must work and leave the
    # configured server database alone.
    assert run.code == 0, run.text
    assert "stopReason: end_turn" in run.out
    assert not prod_db.exists()


async def test_migrate_creates_the_database_and_prints_the_head_revision(tmp_path: Path) -> None:
    db = tmp_path / "sub" / "m.db"
    url = f"sqlite+aiosqlite:///{db}"
    head = head_revision()
    run = await agentd("migrate", "--database-url", url, env=clean_env(tmp_path), cwd=tmp_path)
    assert run.code == 0, run.text
    assert head in run.out
    assert run.out.strip() == f"database at revision {head} (head {head})"
    with sqlite3.connect(db) as conn:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        (version,) = conn.execute("SELECT version_num FROM alembic_version").fetchone()
    assert {"sessions", "events", "messages"} <= tables
    assert version == head
    # Running it again is a no-op that reports the same revision.
    again = await agentd("migrate", "--database-url", url, env=clean_env(tmp_path), cwd=tmp_path)
    assert again.code == 0 and again.out == run.out


async def test_migrate_takes_the_url_from_the_environment(tmp_path: Path) -> None:
    db = tmp_path / "env.db"
    env = clean_env(tmp_path, AGENTD_DATABASE_URL=f"sqlite+aiosqlite:///{db}")
    run = await agentd("migrate", env=env, cwd=tmp_path)
    assert run.code == 0, run.text
    assert head_revision() in run.out
    assert db.exists()
    assert not (tmp_path / ".agentd").exists()


async def test_help_lists_the_commands(tmp_path: Path) -> None:
    run = await agentd("--help", env=clean_env(tmp_path), cwd=tmp_path)
    assert run.code == 0, run.text
    for command in ("serve", "migrate", "demo"):
        assert command in run.out
    serve_help = await agentd("serve", "--help", env=clean_env(tmp_path), cwd=tmp_path)
    assert serve_help.code == 0
    for option in ("--port", "--database-url", "--provider", "--script", "--permission-mode"):
        assert option in serve_help.out


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--port", "notaport"], ["Invalid value for '--port'"]),
        (["--permission-mode", "yolo"], ["Invalid value for '--permission-mode'", "yolo", "bypass"]),
        (["--provider", "nope"], ["Invalid value for '--provider'", "openai", "scripted"]),
        (["--no-such-option"], ["No such option", "--no-such-option"]),
    ],
)
async def test_serve_with_a_bad_option_fails_readably(
    tmp_path: Path, args: list[str], expected: list[str]
) -> None:
    run = await agentd("serve", *args, env=clean_env(tmp_path), cwd=tmp_path)
    assert run.code != 0
    assert "Traceback" not in run.text  # a usage error, not a crash
    for fragment in expected:
        assert fragment in run.err, run.err
    assert "agentd serve --help" in run.err
    assert not (tmp_path / ".agentd").exists()  # it never got as far as opening a database


async def test_serve_help_lists_every_provider_and_the_defaults(tmp_path: Path) -> None:
    """Issue 31 item 8: help texts read as sentences with the real defaults, no `<bool>`."""
    run = await agentd("serve", "--help", env=clean_env(tmp_path), cwd=tmp_path)
    assert run.code == 0, run.text
    text = " ".join(run.out.split())  # the help wraps
    assert "The model API: openai, openai-responses, anthropic or scripted." in text
    for shown in (
        "The address to listen on. Default: 127.0.0.1 (env AGENTD_HOST).",
        "The port to listen on. Default: 8765 (env AGENTD_PORT).",
        "Default: gpt-4o-mini (env AGENTD_MODEL).",
        'default, accept_edits, bypass or plan. Default: "default" (env AGENTD_PERMISSION_MODE).',
        'Default: "none" (env AGENTD_AUTH).',
        'Default: "info" (env AGENTD_LOG_LEVEL).',
        "env AGENTD_DATABASE_URL",
        "--config",
    ):
        assert shown in text, shown
    assert "<bool>" not in text and "default default" not in text


async def test_config_is_accepted_before_and_after_the_sub_command(tmp_path: Path) -> None:
    for i, placement in enumerate(("before", "after")):
        db = tmp_path / f"{placement}.db"
        config = tmp_path / f"{placement}.toml"
        config.write_text(f'database_url = "sqlite+aiosqlite:///{db}"\n')
        args = ["--config", str(config), "migrate"] if i == 0 else ["migrate", "--config", str(config)]
        run = await agentd(*args, env=clean_env(tmp_path), cwd=tmp_path)
        assert run.code == 0, run.text
        assert db.exists(), placement  # the file's database_url was used
    assert not (tmp_path / ".agentd").exists()
