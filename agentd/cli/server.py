"""`agentd serve` and `agentd migrate`: their options here, everything they run imported
when they run (the preflight checks, the app, uvicorn, the store). What `serve` runs is
agentd/cli/serving.py (which `agentd serve [options]` also reaches without Typer)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from agentd.cli.common import ConfigOption, DbOption, app, choices, help_for, load_settings, run, use_config
from agentd.core import PermissionMode
from agentd.infra import AuthMode, LogLevel, ProviderName


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
    from agentd.cli.serving import serve_now

    serve_now(
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
        config=config,
    )


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
