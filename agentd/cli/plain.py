"""The sub-commands' helpers that need no Typer: settings from flags and environment, a
user's mistake as one line on stderr and exit 2. `agentd serve [options]` runs on these
alone, without importing Typer (agentd/cli/serving.py: idle memory, issue 32 item 3)."""

from __future__ import annotations

import os
import sys
import traceback
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

from agentd.infra import CONFIG_ENV, LogLevel

if TYPE_CHECKING:
    from agentd.infra import Settings

T = TypeVar("T")
LOG_LEVEL_ENV = "AGENTD_LOG_LEVEL"
STRICT_ENV = "AGENTD_STRICT"


def err(line: str) -> None:
    """One line on stderr (what `typer.echo(line, err=True)` writes)."""
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


def use_config(config: Path | None) -> None:
    if config is not None:
        os.environ[CONFIG_ENV] = str(config)  # read by Settings' TOML source


def strict() -> bool:
    return os.environ.get(STRICT_ENV, "").strip().lower() in ("1", "true", "yes", "on")


def debugging() -> bool:
    return os.environ.get(LOG_LEVEL_ENV, "").strip().lower() == LogLevel.DEBUG.value


def fail(exc: BaseException) -> NoReturn:
    """A mistake of the user's: one line on stderr and exit 2 (the traceback with --debug)."""
    if debugging():
        traceback.print_exception(exc)
    err(f"agentd: error: {exc}")
    raise SystemExit(2)


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
        err(f"agentd: error: invalid setting: {explain(exc, secret)}")
        raise SystemExit(2) from None
    except ValueError as exc:  # a list or table that is not JSON, or the config file
        line = explain_unparsable(exc, os.environ, secret)
        err(f"agentd: error: {f'invalid setting: {line}' if line else exc}")
        raise SystemExit(2) from None
    unknown = unknown_variables(os.environ, Settings.model_fields)
    for mistake in unknown:
        err(f"agentd: {'error' if strict() else 'warning'}: {mistake.line()}")
    if unknown and strict():
        raise SystemExit(2)
    return settings
