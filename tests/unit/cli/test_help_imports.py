"""`agentd --help` imports nothing it does not print (issue 32): the help is Typer over the
settings' enums, so neither the settings model (pydantic, pydantic-settings), nor the
store (SQLAlchemy), the app (FastAPI, uvicorn), the providers (httpx), the loop or even
asyncio load to show it (a command's own `--help` loads pydantic, which Typer uses to
convert parameters, and still none of the rest). Checked in a fresh interpreter, whose `sys.modules` this test
process cannot pollute; the counter-check runs a command that does need the settings, so
the watch list is shown to catch what it should."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from agentd.cli.common import HELP_DEFAULTS
from agentd.infra.config import Settings
from tests.support.paths import REPO_ROOT

# Top-level packages, and agentd modules by prefix, that the help must not load.
HEAVY = ("sqlalchemy", "fastapi", "starlette", "uvicorn", "pydantic", "pydantic_settings", "httpx", "asyncio")
HEAVY_AGENTD = ("agentd.infra.config", "agentd.store", "agentd.loop", "agentd.session", "agentd.app",
                "agentd.providers", "agentd.transport", "agentd.preflight")  # fmt: skip

RUN = """
import json, sys
sys.argv = ["agentd", *{args!r}]
from agentd.cli import main
try:
    main()
except SystemExit:
    pass
stand_in = getattr(sys.modules.get("httpx._main"), "__file__", None) is None  # agentd/__init__.py's
loaded = sorted(m for m in sys.modules
                if (m.split(".")[0] in {heavy!r} or m.startswith({heavy_agentd!r}))
                and not (m == "httpx._main" and stand_in))
print("LOADED " + json.dumps(loaded))
"""


def loaded_by(*args: str) -> list[str]:
    code = RUN.format(args=list(args), heavy=HEAVY, heavy_agentd=HEAVY_AGENTD)
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, timeout=60, check=True,
        env={"PATH": "/usr/bin:/bin", "HOME": str(REPO_ROOT / ".no-home")},
    )  # fmt: skip
    line = next(x for x in out.stdout.splitlines() if x.startswith("LOADED "))
    return list(json.loads(line.removeprefix("LOADED ")))


@pytest.mark.parametrize("args", [["--help"], []])
def test_the_help_loads_none_of_the_heavy_modules(args: list[str]) -> None:
    assert loaded_by(*args) == []


@pytest.mark.parametrize(
    "args", [["serve", "--help"], ["acp", "--help"], ["chat", "--help"], ["token", "create", "--help"]]
)
def test_a_commands_help_loads_only_what_typer_itself_needs(args: list[str]) -> None:
    """Typer converts a command's parameters with pydantic's `TypeAdapter` (typer/_adapters.py),
    so pydantic itself loads with any command; nothing of agentd's does, nor pydantic-settings."""
    assert [m for m in loaded_by(*args) if m.split(".")[0] != "pydantic"] == []


def test_a_command_that_reads_the_settings_loads_them() -> None:
    """The other half: the watch list sees the settings when a command really needs them
    (`agentd doctor --config` on a missing file stops, with exit 2, right after loading them)."""
    loaded = loaded_by("doctor", "--config", str(REPO_ROOT / "no-such-config.toml"))
    assert {"pydantic_settings", "agentd.infra.config"} <= set(loaded)


@pytest.mark.parametrize("name", sorted(HELP_DEFAULTS))
def test_the_help_shows_the_settings_own_defaults(name: str) -> None:
    assert HELP_DEFAULTS[name] == Settings.model_fields[name].get_default(call_default_factory=False)
