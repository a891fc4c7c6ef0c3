"""The `agentd` command: serve, migrate, demo."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Annotated

import typer

from server.config import PermissionMode, ProviderName, Settings

app = typer.Typer(
    help="agentd — a self-hostable agent server (ACP over WebSocket/HTTP).", no_args_is_help=True
)


def _settings(**overrides: object) -> Settings:
    return Settings(**{k: v for k, v in overrides.items() if v is not None})


def _logging(level: str) -> None:
    logging.basicConfig(level=level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")


@app.command()
def serve(
    host: Annotated[
        str | None, typer.Option(help="Bind address [env AGENTD_HOST, default 127.0.0.1]")
    ] = None,
    port: Annotated[int | None, typer.Option(help="Port [env AGENTD_PORT, default 8765]")] = None,
    database_url: Annotated[str | None, typer.Option(help="SQLAlchemy URL [env AGENTD_DATABASE_URL]")] = None,
    workspace_root: Annotated[Path | None, typer.Option(help="Sessions' cwd must lie inside it")] = None,
    provider: Annotated[ProviderName | None, typer.Option(help="openai | scripted")] = None,
    model: Annotated[str | None, typer.Option(help="Model name")] = None,
    script: Annotated[Path | None, typer.Option(help="Scripted-provider script (JSON)")] = None,
    permission_mode: Annotated[PermissionMode | None, typer.Option(help="Default permission mode")] = None,
    log_level: Annotated[str, typer.Option(help="Log level")] = "info",
) -> None:
    """Run the server (WebSocket /acp, POST /rpc, /healthz, /readyz)."""
    from server.app import create_app
    from server.serve import server_for

    _logging(log_level)
    settings = _settings(
        host=host,
        port=port,
        database_url=database_url,
        workspace_root=workspace_root,
        provider=provider,
        model=model,
        script=script,
        permission_mode=permission_mode,
    )
    logging.getLogger("agentd").info("database: %s", settings.resolved_database_url())
    server = server_for(
        create_app(settings),
        host=settings.host,
        port=settings.port,
        log_level=log_level.lower(),
        max_frame_bytes=settings.max_frame_bytes,
    )
    server.run()


@app.command()
def migrate(
    database_url: Annotated[str | None, typer.Option(help="SQLAlchemy URL [env AGENTD_DATABASE_URL]")] = None,
) -> None:
    """Create or upgrade the database schema to the newest migration."""
    from server.store.db import Store

    settings = _settings(database_url=database_url)

    async def run() -> tuple[str | None, str | None]:
        store = await Store.open(settings.resolved_database_url())
        try:
            await store.migrate()
            return await store.migration_status()
        finally:
            await store.close()

    current, head = asyncio.run(run())
    typer.echo(f"database at revision {current} (head {head})")


@app.command()
def demo(
    workspace: Annotated[Path | None, typer.Option(help="Workspace folder (default: a new temp dir)")] = None,
    prompt: Annotated[
        str, typer.Option(help="What to ask the demo agent")
    ] = "Write me a hello-world script.",
) -> None:
    """Run a scripted session end to end, in-process, over a real WebSocket: no key, no network."""
    from server.demo.run import run_demo

    raise typer.Exit(asyncio.run(run_demo(workspace, prompt)))


def main() -> None:
    app()


if __name__ == "__main__":
    main()
