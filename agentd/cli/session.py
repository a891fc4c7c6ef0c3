"""`agentd session export|import` (issue 33 item 1): a session to a JSONL file and back, read
from and written to the database directly (as `agentd token` does). The format and the
rules are `agentd/session/portable.py`'s; this is only the command line around them."""

from __future__ import annotations

import sys
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from agentd.cli.common import app, load_settings, run, use_config
from agentd.infra import LOCAL_PRINCIPAL

if TYPE_CHECKING:
    from agentd.infra import Settings

session_app = typer.Typer(
    help="Move sessions between servers: export to JSONL, import it.", no_args_is_help=True
)

DbOpt = Annotated[
    str | None, typer.Option(help="The database URL (default: the settings' AGENTD_DATABASE_URL).")
]
ConfigOpt = Annotated[Path | None, typer.Option(help="A TOML file of settings (env AGENTD_CONFIG).")]


def _refuse(message: str, code: int = 2) -> typer.Exit:
    typer.echo(f"agentd: {message}", err=True)
    return typer.Exit(code)


@dataclass(frozen=True)
class _CliHooks:
    """The command line's settings checks and error handling, handed over by `agentd.cli`
    (`agentd.cli.common`; kept as a seam the tests can replace)."""

    use_config: Callable[[Path | None], None]
    settings: Callable[..., Settings]
    run: Callable[[Callable[[], Coroutine[Any, Any, Any]]], Any]


_hooks: list[_CliHooks] = []


def bind(
    use_config: Callable[[Path | None], None],
    settings: Callable[..., Settings],
    run: Callable[[Callable[[], Coroutine[Any, Any, Any]]], Any],
) -> typer.Typer:
    """The `session` sub-command, using the cli's own helpers."""
    _hooks[:] = [_CliHooks(use_config, settings, run)]
    return session_app


def _store_job(database_url: str | None, config: Path | None, job: Any) -> Any:
    """`job(store, settings)` on the configured database (one line and exit 2 on a mistake)."""
    from agentd.preflight import open_store

    hooks = _hooks[0]
    hooks.use_config(config)
    settings = hooks.settings(database_url=database_url)

    async def run() -> Any:
        async with open_store(settings.resolved_database_url()) as store:
            return await job(store, settings)

    return hooks.run(run)


@session_app.command("export")
def session_export(
    session_id: Annotated[str, typer.Argument(help="The session's id (session/list shows them).")],
    files: Annotated[bool, typer.Option("--files", help="Include the workspace's files.")] = False,
    output: Annotated[Path | None, typer.Option(help="Write here instead of standard output.")] = None,
    database_url: DbOpt = None,
    config: ConfigOpt = None,
) -> None:
    """Write a session (events, transcript, queue, goal, usage, file snapshots) as JSONL."""
    from agentd.session import PortabilityError, export_session

    try:
        data = _store_job(
            database_url,
            config,
            lambda store, settings: export_session(store, session_id, settings, with_files=files),
        )
    except PortabilityError as exc:
        raise _refuse(f"error: {exc}") from None
    if data is None:
        raise _refuse(f"no session {session_id}", 1)
    if output is not None:
        output.write_bytes(data)
    else:
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()


@session_app.command("import")
def session_import(
    file: Annotated[Path, typer.Argument(help="An `agentd session export` file (- for standard input).")],
    owner: Annotated[str, typer.Option(help="The principal who owns the session.")] = LOCAL_PRINCIPAL,
    cwd: Annotated[
        Path | None, typer.Option(help="The folder the session works in. Default: the exported one.")
    ] = None,
    database_url: DbOpt = None,
    config: ConfigOpt = None,
) -> None:
    """Import a session export; a corrupt or newer-version file changes nothing."""
    from agentd.session import PortabilityError, import_session, parse

    try:
        data = sys.stdin.buffer.read() if str(file) == "-" else file.read_bytes()
        bundle = parse(data)
    except OSError as exc:
        raise _refuse(f"error: cannot read {file}: {exc.strerror or exc}") from None
    except PortabilityError as exc:
        raise _refuse(f"error: {exc}") from None
    if not owner.strip():
        raise _refuse("error: --owner must not be empty")
    if cwd is not None and not cwd.is_dir():
        raise _refuse(f"error: --cwd: {cwd} is not an existing folder")
    where = str(cwd.resolve()) if cwd is not None else None
    try:
        done = _store_job(
            database_url, config, lambda store, _: import_session(store, bundle, owner=owner, cwd=where)
        )
    except PortabilityError as exc:
        raise _refuse(f"error: {exc}") from None
    typer.echo(
        f"imported {done.session_id} ({done.events} events, {done.messages} messages, {done.files} files) "
        f"working in {done.cwd}"
    )


app.add_typer(bind(use_config, load_settings, run), name="session")
