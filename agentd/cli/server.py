"""`agentd serve` and `agentd migrate`: their options here, everything they run imported
when they run (the preflight checks, the app, uvicorn, the store)."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from agentd.cli.common import (
    LOG_LEVEL_ENV,
    ConfigOption,
    DbOption,
    app,
    choices,
    fail,
    help_for,
    load_settings,
    run,
    use_config,
)
from agentd.core import PermissionMode
from agentd.infra import AuthMode, LogLevel, ProviderName

if TYPE_CHECKING:
    from agentd.infra import Settings


@app.command()
def serve(
    host: Annotated[str | None, typer.Option(help=help_for("The address to listen on", "host"))] = None,
    port: Annotated[int | None, typer.Option(help=help_for("The port to listen on", "port"))] = None,
    database_url: DbOption = None,
    workspace_root: Annotated[
        Path | None,
        typer.Option(help=help_for("The folder sessions must work inside", "workspace_root", "anywhere")),
    ] = None,
    provider: Annotated[
        ProviderName | None,
        typer.Option(
            help=help_for(
                "The model API: " + choices([p.value for p in ProviderName]), "provider", "the scripted demo"
            ),
        ),
    ] = None,
    model: Annotated[str | None, typer.Option(help=help_for("The model to use", "model"))] = None,
    script: Annotated[
        Path | None,
        typer.Option(
            help=help_for("The scripted provider's script, a JSON file", "script", "the built-in demo")
        ),
    ] = None,
    permission_mode: Annotated[
        PermissionMode | None,
        typer.Option(
            help=help_for(
                "The permission mode sessions start in: " + choices([m.value for m in PermissionMode]),
                "permission_mode",
            )
        ),
    ] = None,
    auth: Annotated[
        AuthMode | None,
        typer.Option(help=help_for("Who may call: none (the local user) or token (bearer tokens)", "auth")),
    ] = None,
    log_level: Annotated[
        LogLevel | None,
        typer.Option(help=help_for("How much to log: " + choices([v.value for v in LogLevel]), "log_level")),
    ] = None,
    config: ConfigOption = None,
) -> None:
    """Run the server (WebSocket /acp, POST /rpc, /healthz, /readyz)."""
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
    settings = load_settings(
        host=host,
        port=port,
        database_url=database_url,
        workspace_root=workspace_root,
        provider=provider,
        model=model,
        script=script,
        permission_mode=permission_mode,
        auth=auth,
        log_level=log_level,
    )
    if settings.log_level is LogLevel.DEBUG:
        os.environ[LOG_LEVEL_ENV] = LogLevel.DEBUG.value  # tracebacks for --log-level debug too
    configure_logging(settings.log_level.value, settings.log_format)
    if problem := insecure_bind(settings.host, settings.auth):
        typer.echo(f"agentd: {problem}", err=True)
        raise typer.Exit(2)
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
            raise typer.Exit(3)  # logged by StartingApp (uvicorn's own code for a failed start-up)
    finally:
        sock.close()
        if db_lock is not None:
            db_lock.close()


def _make_app(settings: Settings) -> Any:
    from agentd.app import create_app

    return create_app(settings)


@app.command()
def migrate(database_url: DbOption = None, config: ConfigOption = None) -> None:
    """Create or upgrade the database schema to the newest migration."""
    from agentd.preflight import open_store

    use_config(config)
    settings = load_settings(database_url=database_url)

    async def job() -> tuple[str | None, str | None]:
        async with open_store(settings.resolved_database_url()) as store:
            return await store.migration_status()

    current, head = run(job)
    typer.echo(f"database at revision {current} (head {head})")
