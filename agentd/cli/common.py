"""What the sub-commands share: the Typer app, its global options, the help sentences, and
turning a user's mistake into one line on stderr and exit 2.

Importing this (and so `agentd --help`) loads Typer and the settings' enums only: the
settings model (pydantic-settings), asyncio and everything a command runs are imported when
the command runs (issue 32: the CLI answers `--help` in the time of Typer alone)."""

from __future__ import annotations

import os
import traceback
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn, TypeVar

import typer

from agentd.core import PermissionMode
from agentd.infra import (
    CONFIG_ENV,
    DEFAULT_HOST,
    DEFAULT_MODEL,
    DEFAULT_PORT,
    AuthMode,
    LogLevel,
)

if TYPE_CHECKING:
    from agentd.infra import Settings

app = typer.Typer(
    help="agentd — a self-hostable agent server (ACP over WebSocket/HTTP).",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,  # locals may hold API keys
    rich_markup_mode=None,  # plain help: sentences, no boxes, no `<bool>` beside --help
)
T = TypeVar("T")
LOG_LEVEL_ENV = "AGENTD_LOG_LEVEL"
STRICT_ENV = "AGENTD_STRICT"

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


def use_config(config: Path | None) -> None:
    if config is not None:
        os.environ[CONFIG_ENV] = str(config)  # read by Settings' TOML source


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


def strict() -> bool:
    return os.environ.get(STRICT_ENV, "").strip().lower() in ("1", "true", "yes", "on")


def debugging() -> bool:
    return os.environ.get(LOG_LEVEL_ENV, "").strip().lower() == LogLevel.DEBUG.value


def fail(exc: BaseException) -> NoReturn:
    """A mistake of the user's: one line on stderr and exit 2 (the traceback with --debug)."""
    if debugging():
        traceback.print_exception(exc)
    typer.echo(f"agentd: error: {exc}", err=True)
    raise typer.Exit(2)


def run(job: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """`asyncio.run(job())` where a `StartupError` is the user's mistake, not a crash."""
    import asyncio

    from agentd.preflight import StartupError

    try:
        return asyncio.run(job())
    except StartupError as exc:
        fail(exc)


def load_settings(**overrides: Any) -> Settings:
    """The settings, or one line per mistake and exit 2. An `AGENTD_*` variable that is no
    setting is named with the closest setting (a warning; refused with --strict)."""
    from pydantic import ValidationError

    from agentd.infra import Settings, explain, explain_unparsable, unknown_variables

    given: dict[str, Any] = {k: v for k, v in overrides.items() if v is not None}
    secret = [n for n, f in Settings.model_fields.items() if "Secret" in str(f.annotation)]
    try:
        settings = Settings(**given)
    except ValidationError as exc:  # a bad value: which setting, what was given, what it takes
        typer.echo(f"agentd: error: invalid setting: {explain(exc, secret)}", err=True)
        raise typer.Exit(2) from None
    except ValueError as exc:  # a list or table that is not JSON, or the config file
        line = explain_unparsable(exc, os.environ, secret)
        typer.echo(f"agentd: error: {f'invalid setting: {line}' if line else exc}", err=True)
        raise typer.Exit(2) from None
    unknown = unknown_variables(os.environ, Settings.model_fields)
    for mistake in unknown:
        typer.echo(f"agentd: {'error' if strict() else 'warning'}: {mistake.line()}", err=True)
    if unknown and strict():
        raise typer.Exit(2)
    return settings
