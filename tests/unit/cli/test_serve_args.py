"""`agentd serve [options]` without Typer (agentd/cli/serving.py, issue 32 item 3: Typer
stays resident in a server that imported it): the plain command lines run `serve_now`
with exactly the arguments Typer's `serve` gives it; every other command line goes
through Typer (its help, its messages, its exit codes), and AGENTD_CLI_TYPER=1 sends
every one through Typer (the library path)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import agentd.cli.serving
from agentd.cli import app, main
from agentd.cli.serving import serve_args
from tests.support.paths import REPO_ROOT

PLAIN = [
    ["serve"],
    ["serve", "--log-level", "warning"],
    ["serve", "--port=8123", "--host", "0.0.0.0", "--auth", "token"],
    ["serve", "--provider", "openai", "--model", "gpt-x", "--permission-mode", "plan"],
    ["serve", "--database-url", "sqlite+aiosqlite:///x.db", "--workspace-root", "/w", "--script", "s.json"],
    ["serve", "--config=/etc/agentd.toml", "--port", "1", "--port", "2"],  # the last one counts
]
TYPERS = [
    [],
    ["serve", "--help"],
    ["serve", "--port", "eighty"],
    ["serve", "--port", "+80"],  # Typer converts it; left to Typer
    ["serve", "--provider", "nope"],
    ["serve", "--log-level"],
    ["serve", "--host", "--port", "1"],
    ["serve", "--unknown", "1"],
    ["serve", "extra"],
    ["serve", "--host="],
    ["--debug", "serve"],
    ["migrate"],
]


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    seen: list[dict[str, Any]] = []
    monkeypatch.setattr(agentd.cli.serving, "serve_now", lambda **kw: seen.append(kw))
    return seen


@pytest.mark.parametrize("argv", PLAIN, ids=" ".join)
def test_a_plain_serve_line_gets_the_arguments_typer_gives(
    argv: list[str], calls: list[dict[str, Any]]
) -> None:
    result = CliRunner().invoke(app, argv)
    assert result.exit_code == 0, result.output
    given = serve_args(argv)
    assert given is not None
    assert {k: v for k, v in calls[0].items() if v is not None} == given
    assert [type(v) for v in given.values()] == [type(calls[0][k]) for k in given]


@pytest.mark.parametrize("argv", TYPERS, ids=lambda a: " ".join(a) or "(none)")
def test_any_other_line_is_left_to_typer(argv: list[str]) -> None:
    assert serve_args(argv) is None


def test_main_runs_a_plain_line_without_typer_and_the_switch_sends_it_through_typer(
    calls: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "argv", ["agentd", "serve", "--port", "9"])
    monkeypatch.delenv("AGENTD_CLI_TYPER", raising=False)
    main()
    monkeypatch.setenv("AGENTD_CLI_TYPER", "1")
    with pytest.raises(SystemExit) as typer_exit:  # Typer's standalone mode exits
        main()
    assert typer_exit.value.code == 0
    assert calls == [{"port": 9}, {**dict.fromkeys(calls[1], None), "port": 9}]


def test_a_plain_serve_never_imports_typer_or_the_other_commands(tmp_path: Path) -> None:
    """(In a fresh interpreter: what `main()` imported for `agentd serve --port 9`.)"""
    code = (
        "import json, sys\nimport agentd.cli.serving as s\n"
        "s.serve_now = lambda **kw: None\nsys.argv = ['agentd', 'serve', '--port', '9']\n"
        "from agentd.cli import main\nmain()\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in ('typer', 'click')"
        " or m.startswith('agentd.cli.') and m not in ('agentd.cli.plain', 'agentd.cli.serving'))))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == []
