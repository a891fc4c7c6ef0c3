"""What `agentd serve` runs, without Typer (idle memory, issue 32 item 3: Typer and the
other commands' modules stay resident in a server that imported them, ~1 MiB).

`agentd serve` with only its own options, each `--name value` or `--name=value` with a
value Typer would take as it is, runs `serve_now` straight from `agentd.cli.main`
(`serve_args`); anything else — `--help`, a global option, an unknown option, a value
Typer would convert or refuse — goes through Typer, whose messages and exit codes stay
the reference (tests/unit/cli/test_serve_args.py pins the two paths' agreement)."""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Callable
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentd.cli.plain import LOG_LEVEL_ENV, err, fail, load_settings, run, use_config
from agentd.core import PermissionMode
from agentd.infra import AuthMode, LogLevel, ProviderName

if TYPE_CHECKING:
    from agentd.infra import Settings


def _choice(kind: type[Enum]) -> Callable[[str], Any]:
    def parse(value: str) -> Any:
        return kind(value)  # ValueError: not one of the choices (Typer says which)

    return parse


def _int(value: str) -> int:
    if not re.fullmatch(r"[0-9]{1,9}", value):
        raise ValueError(value)
    return int(value)


# `agentd serve`'s options (agentd/cli/server.py), by flag: the parameter and its type.
OPTIONS: dict[str, tuple[str, Callable[[str], Any]]] = {
    "--host": ("host", str),
    "--port": ("port", _int),
    "--database-url": ("database_url", str),
    "--workspace-root": ("workspace_root", Path),
    "--provider": ("provider", _choice(ProviderName)),
    "--model": ("model", str),
    "--script": ("script", Path),
    "--permission-mode": ("permission_mode", _choice(PermissionMode)),
    "--auth": ("auth", _choice(AuthMode)),
    "--log-level": ("log_level", _choice(LogLevel)),
    "--config": ("config", Path),
}


def serve_args(argv: list[str]) -> dict[str, Any] | None:
    """`serve_now`'s arguments for the command line `argv` (without the program name), or
    None when it is not a plain `serve [options]` (Typer handles it)."""
    if not argv or argv[0] != "serve":
        return None
    given: dict[str, Any] = {}
    rest = argv[1:]
    while rest:
        flag, value = rest[0], None
        if "=" in flag:
            flag, value = flag.split("=", 1)
            rest = rest[1:]
        elif len(rest) >= 2:
            value, rest = rest[1], rest[2:]
        if flag not in OPTIONS or not value or value.startswith("-"):
            return None
        name, parse = OPTIONS[flag]
        try:
            given[name] = parse(value)
        except ValueError:
            return None
    return given


def serve_now(*, config: Path | None = None, **options: Any) -> None:
    """Run the server (the body of `agentd serve`): exits 2 on a user's mistake, 3 when the
    app fails to start."""
    from agentd.infra import configure_logging, insecure_bind, redact_url
    from agentd.preflight import (
        StartupError,
        check_database,
        check_home,
        check_provider,
        check_sandbox,
        claim_database,
        database_current,
        listen_socket,
        local_ws_url,
    )

    use_config(config)
    settings = load_settings(**options)
    if settings.log_level is LogLevel.DEBUG:
        os.environ[LOG_LEVEL_ENV] = LogLevel.DEBUG.value  # tracebacks for --log-level debug too
    configure_logging(settings.log_level.value, settings.log_format)
    if problem := insecure_bind(settings.host, settings.auth):
        err(f"agentd: {problem}")
        raise SystemExit(2)
    # The cheap checks first: a port in use is reported before migrations and imports.
    try:
        check_provider(settings)
        check_sandbox(settings)
        from agentd.doctor import log_startup_notes

        log_startup_notes()
        sock = listen_socket(settings.host, settings.port)
    except StartupError as exc:
        fail(exc)
    try:
        check_home(settings)  # after the cheap checks, which create nothing
    except StartupError as exc:
        sock.close()
        fail(exc)
    try:
        # Held (open) until the process ends; a local `agentd acp` on this file relays here.
        db_lock = claim_database(settings, serving=local_ws_url(settings.host, settings.port))
    except StartupError as exc:
        sock.close()
        fail(exc)
    try:
        if not database_current(settings):  # else the app's start-up connects (in the background)
            run(lambda: check_database(settings))
        logging.getLogger("agentd").info("database: %s", redact_url(settings.resolved_database_url()))

        import asyncio

        from agentd.serve import StartingApp, server_for

        # /healthz answers as soon as the socket listens; the app (most of agentd's imports)
        # loads meanwhile and other requests wait for it (agentd/serve.py, StartingApp).
        starting = StartingApp(settings, lambda: asyncio.to_thread(_make_app, settings))
        server = server_for(
            starting,
            host=settings.host,
            port=settings.port,
            log_level=settings.log_level.value,
            max_frame_bytes=settings.max_frame_bytes,
            freeze_heap=True,
        )
        starting.on_failure = server.request_exit
        server.run(sockets=[sock])
        if starting.failure is not None:
            raise SystemExit(3)  # logged by StartingApp (uvicorn's own code for a failed start-up)
    finally:
        sock.close()
        if db_lock is not None:
            db_lock.close()


def _make_app(settings: Settings) -> Any:
    from agentd.app import create_app

    return create_app(settings)
