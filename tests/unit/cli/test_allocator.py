"""`agentd serve` re-runs itself under `PYTHONMALLOC=malloc` (agentd/cli/allocator.py):
when, with what command line and environment, and that the re-run drops the variable."""

from __future__ import annotations

import os
import sys
from typing import Any

import pytest

from agentd.cli import allocator


@pytest.fixture
def execs(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, list[str], dict[str, str]]]:
    seen: list[tuple[str, list[str], dict[str, str]]] = []
    monkeypatch.setattr(os, "execve", lambda path, argv, env: seen.append((path, list(argv), dict(env))))
    monkeypatch.setattr(sys, "platform", "linux")
    monkeypatch.delenv("PYTHONMALLOC", raising=False)
    monkeypatch.delenv(allocator.ENV, raising=False)
    monkeypatch.delenv("_AGENTD_MALLOC_RERUN", raising=False)
    return seen


def command_line(monkeypatch: pytest.MonkeyPatch, *args: str) -> list[str]:
    monkeypatch.setattr(sys, "orig_argv", [sys.executable, "/venv/bin/agentd", *args])
    return ["/venv/bin/agentd", *args]


def test_serve_reruns_the_same_command_under_malloc(execs: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    argv = command_line(monkeypatch, "serve", "--port", "9")
    allocator.rerun_under_malloc(argv)
    [(path, args, env)] = execs
    assert path == sys.executable
    assert args == [sys.executable, "/venv/bin/agentd", "serve", "--port", "9"]
    assert env["PYTHONMALLOC"] == "malloc" and env["_AGENTD_MALLOC_RERUN"] == "1"


@pytest.mark.parametrize(
    "variables",
    [{allocator.ENV: "pymalloc"}, {"PYTHONMALLOC": "pymalloc"}, {"PYTHONMALLOC": "malloc"}],
    ids=["switched-off", "caller-chose-pymalloc", "caller-chose-malloc"],
)
def test_no_rerun_when_switched_off_or_the_caller_chose(
    execs: Any, monkeypatch: pytest.MonkeyPatch, variables: dict[str, str]
) -> None:
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    allocator.rerun_under_malloc(command_line(monkeypatch, "serve"))
    assert execs == []


def test_no_rerun_off_linux_or_when_argv_is_not_the_process_command_line(
    execs: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    command_line(monkeypatch, "-x", "other")
    allocator.rerun_under_malloc(["agentd", "serve"])  # a test calling main() in its own process
    monkeypatch.setattr(sys, "platform", "darwin")
    allocator.rerun_under_malloc(command_line(monkeypatch, "serve"))
    assert execs == []


def test_the_rerun_drops_the_variable_for_the_servers_children(
    execs: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTHONMALLOC", "malloc")
    monkeypatch.setenv("_AGENTD_MALLOC_RERUN", "1")
    allocator.rerun_under_malloc(command_line(monkeypatch, "serve"))
    assert execs == []
    assert "PYTHONMALLOC" not in os.environ and "_AGENTD_MALLOC_RERUN" not in os.environ


def test_a_failed_exec_leaves_the_server_running_as_it_is(
    execs: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(*_: Any) -> None:
        raise OSError("no exec here")

    monkeypatch.setattr(os, "execve", refuse)
    allocator.rerun_under_malloc(command_line(monkeypatch, "serve"))  # returns


def test_active_tells_the_allocator_apart() -> None:
    assert allocator.active() == ("malloc" if os.environ.get("PYTHONMALLOC") == "malloc" else "pymalloc")
