"""What the sub-commands share: the Typer app, its global options, the help sentences, and
turning a user's mistake into one line on stderr and exit 2 (agentd/cli/plain.py).

Importing this (and so `agentd --help`) loads Typer and the settings' enums only: the
settings model (pydantic-settings), asyncio and everything a command runs are imported when
the command runs (issue 32: the CLI answers `--help` in the time of Typer alone)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from agentd.cli.plain import (
    LOG_LEVEL_ENV,
    STRICT_ENV,
    debugging,
    fail,
    load_settings,
    run,
    strict,
    use_config,
)
from agentd.core import PermissionMode
from agentd.infra import DEFAULT_HOST, DEFAULT_MODEL, DEFAULT_PORT, AuthMode, LogLevel

__all__ = [
    "HELP_DEFAULTS", "LOG_LEVEL_ENV", "STRICT_ENV", "ConfigOption", "DbOption", "StrictOption", "app",
    "choices", "debugging", "fail", "help_for", "load_settings", "run", "shown", "strict", "use_config",
]  # fmt: skip

app = typer.Typer(
    help="agentd — a self-hostable agent server (ACP over WebSocket/HTTP).",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,  # locals may hold API keys
    rich_markup_mode=None,  # plain help: sentences, no boxes, no `<bool>` beside --help
)

# The defaults the help shows, by setting name; tests/unit/cli pins them to `Settings`'.
HELP_DEFAULTS: dict[str, object] = {
    "host": DEFAULT_HOST,
    "port": DEFAULT_PORT,
    "model": DEFAULT_MODEL,
    "auth": AuthMode.NONE,
    "log_level": LogLevel.INFO,
    "permission_mode": PermissionMode.DEFAULT,
}


def shown(value: object) -> str:
    """A default as the help shows it (a word of a choice in quotes: `"default"`)."""
    if value is None:
        return "none"
    return f'"{value.value}"' if hasattr(value, "value") else str(value)


def help_for(text: str, name: str, default: str | None = None) -> str:
    """A setting's flag, said as a sentence: what it is, its default, its variable."""
    return f"{text}. Default: {default or shown(HELP_DEFAULTS.get(name))} (env AGENTD_{name.upper()})."


def choices(values: list[str]) -> str:
    return ", ".join(values[:-1]) + f" or {values[-1]}"


ConfigOption = Annotated[
    Path | None,
    typer.Option(help="A TOML file of settings, named without AGENTD_ (env AGENTD_CONFIG)."),
]
StrictOption = Annotated[
    bool,
    typer.Option(
        "--strict", help="Refuse to start on an AGENTD_* variable that is no setting (env AGENTD_STRICT)."
    ),
]
DbOption = Annotated[
    str | None,
    typer.Option(
        help=help_for("The database, as a SQLAlchemy URL", "database_url", "a SQLite file in AGENTD_HOME")
    ),
]


@app.callback()
def _options(
    config: ConfigOption = None,
    debug: Annotated[
        bool, typer.Option("--debug", help="Log at debug level, and show the traceback behind every error.")
    ] = False,
    strict: StrictOption = False,
) -> None:
    use_config(config)
    if debug:
        os.environ[LOG_LEVEL_ENV] = LogLevel.DEBUG.value
    if strict:
        os.environ[STRICT_ENV] = "1"
