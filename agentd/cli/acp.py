"""`agentd acp`: ACP on stdin/stdout for an editor, in-process or relayed (--connect)."""

from __future__ import annotations

import threading
import traceback
from typing import TYPE_CHECKING, Annotated, Any

import typer

from agentd.cli.common import ConfigOption, app, debugging, fail, load_settings, run, use_config

if TYPE_CHECKING:
    from agentd.infra import Settings


def _host_port(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise typer.BadParameter(f"expected HOST:PORT, got {value!r}", param_hint="--listen")
    return host.strip("[]"), int(port)


@app.command()
def acp(
    listen: Annotated[
        str | None,
        typer.Option(
            help="Also serve HTTP and WebSocket on HOST:PORT, so the web page or `agentd chat` can watch."
        ),
    ] = None,
    connect: Annotated[
        str | None,
        typer.Option(help="Relay to a shared agentd server instead: ws://host:port/acp or wss://...."),
    ] = None,
    token: Annotated[
        str | None,
        typer.Option(help="The bearer token for --connect (env AGENTD_TOKEN).", envvar="AGENTD_TOKEN"),
    ] = None,
    log_level: Annotated[
        str, typer.Option(help="How much to log; logs go to stderr, never stdout.")
    ] = "warning",
    config: ConfigOption = None,
) -> None:
    """Speak ACP on stdin/stdout for an editor (Zed, JetBrains, Neovim): agentd in-process on
    its settings (SQLite under AGENTD_HOME by default), or with --connect a relay to a shared
    server that survives reconnects. One JSON-RPC message per line."""
    import asyncio

    from agentd.infra import configure_logging
    from agentd.preflight import (
        DatabaseHeld,
        StartupError,
        check_home,
        check_provider,
        claim_database,
        local_ws_url,
    )

    use_config(config)
    if connect is not None:
        from agentd.transport import bridge_stdio, check_url

        if listen is not None:
            raise typer.BadParameter("--listen serves a local agentd; it cannot go with --connect")
        if problem := check_url(connect):
            raise typer.BadParameter(problem, param_hint="--connect")
        configure_logging(log_level, load_settings().log_format)
        raise typer.Exit(asyncio.run(bridge_stdio(connect, token)))

    from agentd.infra import insecure_bind

    address = _host_port(listen) if listen else None
    settings = load_settings()
    configure_logging(log_level, settings.log_format)  # a StreamHandler on stderr
    if address is not None and (problem := insecure_bind(address[0], settings.auth)):
        typer.echo(f"agentd: {problem}", err=True)
        raise typer.Exit(2)
    try:
        check_home(settings)
    except StartupError as exc:
        fail(exc)
    # One process runs the sessions of a SQLite file: when a live server holds it, relay to
    # that server (as --connect would) instead of running a second owner beside it.
    try:
        db_lock = claim_database(settings, serving=local_ws_url(*address) if address else None)
    except DatabaseHeld as held:
        if held.url is None or address is not None:
            fail(StartupError(f"{held}; it serves no address to relay to: use `agentd serve` and --connect"))
        from agentd.transport import bridge_stdio

        typer.echo(f"agentd: the database is held by a running agentd; relaying to {held.url}", err=True)
        raise typer.Exit(asyncio.run(bridge_stdio(held.url, token))) from None
    try:
        check_provider(settings)  # a missing key is one line on stderr, not a dead editor pane
    except StartupError as exc:
        fail(exc)
    try:
        code = _serve_loading(settings, address)
    finally:
        if db_lock is not None:
            db_lock.close()
    raise typer.Exit(code)


class _Loader(threading.Thread):
    """Imports and builds the app (FastAPI, the ORM, the store, the session machinery) while
    the main thread answers the editor's `initialize` (issue 32 item 2)."""

    def __init__(self, settings: Settings, address: tuple[str, int] | None) -> None:
        super().__init__(name="agentd-load", daemon=True)
        self.settings, self.address = settings, address
        self.running: Any = None
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            from agentd.app import create_app
            from agentd.serve import running_app
            from agentd.transport import serve_stdio  # noqa: F401  (loaded here, off the answer's path)

            self.running = running_app(create_app(self.settings), self.address)
        except BaseException as exc:  # reported by the main thread, as one line
            self.error = exc


def _serve_loading(settings: Settings, address: tuple[str, int] | None) -> int:
    # Only the light early module here: the rest of the transport is the loader's to import.
    from agentd.transport import LoadFailed, answer_initialize, one_line, protocol_stdout, refuse_pending

    out = protocol_stdout()
    loader = _Loader(settings, address)
    loader.start()
    early = answer_initialize(
        out, settings.max_frame_bytes, settings.max_json_depth, answer=loader.error is None
    )
    loader.join()
    if loader.error is not None:
        refuse_pending(early, one_line(loader.error))
        return _could_not_start(loader.error)
    from agentd.transport import serve_stdio

    try:
        return run(lambda: serve_stdio(loader.running, early))
    except LoadFailed as exc:  # the app's start-up (its database, say) failed
        return _could_not_start(exc.__cause__ or exc)


def _could_not_start(exc: BaseException) -> int:
    """One line on stderr (the traceback with --debug); the editor has had its errors."""
    from agentd.transport import one_line

    if debugging():
        traceback.print_exception(exc)
    typer.echo(f"agentd: error: could not start: {one_line(exc)}", err=True)
    return 1
