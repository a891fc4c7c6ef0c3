"""The `agentd` command: serve, migrate, demo."""

from __future__ import annotations

import asyncio
import logging
import os
import traceback
from collections.abc import Callable, Coroutine
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, NoReturn, TypeVar

import typer
from pydantic import ValidationError

from agentd.core import PermissionMode
from agentd.infra import CONFIG_ENV, AuthMode, LogLevel, ProviderName, Settings, redact_url

app = typer.Typer(
    help="agentd — a self-hostable agent server (ACP over WebSocket/HTTP).",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,  # locals may hold API keys
    rich_markup_mode=None,  # plain help: sentences, no boxes, no `<bool>` beside --help
)
T = TypeVar("T")
LOG_LEVEL_ENV = "AGENTD_LOG_LEVEL"


def _default(name: str) -> str:
    """A setting's default as the help shows it (a word of a choice in quotes: `"default"`)."""
    field = Settings.model_fields[name]
    value = field.get_default(call_default_factory=False)
    if value is None:
        return "none"
    return f'"{value.value}"' if hasattr(value, "value") else str(value)


def _help(text: str, name: str, default: str | None = None) -> str:
    """A setting's flag, said as a sentence: what it is, its default, its variable."""
    return f"{text}. Default: {default or _default(name)} (env AGENTD_{name.upper()})."


def _choices(values: list[str]) -> str:
    return ", ".join(values[:-1]) + f" or {values[-1]}"


def _use_config(config: Path | None) -> None:
    if config is not None:
        os.environ[CONFIG_ENV] = str(config)  # read by Settings' TOML source


ConfigOption = Annotated[
    Path | None,
    typer.Option(help="A TOML file of settings, named without AGENTD_ (env AGENTD_CONFIG)."),
]


STRICT_ENV = "AGENTD_STRICT"
StrictOption = Annotated[
    bool,
    typer.Option(
        "--strict", help="Refuse to start on an AGENTD_* variable that is no setting (env AGENTD_STRICT)."
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
    _use_config(config)
    if debug:
        os.environ[LOG_LEVEL_ENV] = LogLevel.DEBUG.value
    _use_strict(strict)


def _use_strict(strict: bool) -> None:
    if strict:
        os.environ[STRICT_ENV] = "1"


def _strict() -> bool:
    return os.environ.get(STRICT_ENV, "").strip().lower() in ("1", "true", "yes", "on")


def _debugging() -> bool:
    return os.environ.get(LOG_LEVEL_ENV, "").strip().lower() == LogLevel.DEBUG.value


def _fail(exc: BaseException) -> NoReturn:
    """A mistake of the user's: one line on stderr and exit 2 (the traceback with --debug)."""
    if _debugging():
        traceback.print_exception(exc)
    typer.echo(f"agentd: error: {exc}", err=True)
    raise typer.Exit(2)


def _run(job: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """`asyncio.run(job())` where a `StartupError` is the user's mistake, not a crash."""
    from agentd.preflight import StartupError

    try:
        return asyncio.run(job())
    except StartupError as exc:
        _fail(exc)


def _settings(**overrides: Any) -> Settings:
    """The settings, or one line per mistake and exit 2. An `AGENTD_*` variable that is no
    setting is named with the closest setting (a warning; refused with --strict)."""
    from agentd.infra import explain, explain_unparsable, unknown_variables

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
        typer.echo(f"agentd: {'error' if _strict() else 'warning'}: {mistake.line()}", err=True)
    if unknown and _strict():
        raise typer.Exit(2)
    return settings


DbOption = Annotated[
    str | None,
    typer.Option(
        help=_help("The database, as a SQLAlchemy URL", "database_url", "a SQLite file in AGENTD_HOME")
    ),
]


@app.command()
def serve(
    host: Annotated[str | None, typer.Option(help=_help("The address to listen on", "host"))] = None,
    port: Annotated[int | None, typer.Option(help=_help("The port to listen on", "port"))] = None,
    database_url: DbOption = None,
    workspace_root: Annotated[
        Path | None,
        typer.Option(help=_help("The folder sessions must work inside", "workspace_root", "anywhere")),
    ] = None,
    provider: Annotated[
        ProviderName | None,
        typer.Option(
            help=_help(
                "The model API: " + _choices([p.value for p in ProviderName]), "provider", "the scripted demo"
            ),
        ),
    ] = None,
    model: Annotated[str | None, typer.Option(help=_help("The model to use", "model"))] = None,
    script: Annotated[
        Path | None,
        typer.Option(
            help=_help("The scripted provider's script, a JSON file", "script", "the built-in demo")
        ),
    ] = None,
    permission_mode: Annotated[
        PermissionMode | None,
        typer.Option(
            help=_help(
                "The permission mode sessions start in: " + _choices([m.value for m in PermissionMode]),
                "permission_mode",
            )
        ),
    ] = None,
    auth: Annotated[
        AuthMode | None,
        typer.Option(help=_help("Who may call: none (the local user) or token (bearer tokens)", "auth")),
    ] = None,
    log_level: Annotated[
        LogLevel | None,
        typer.Option(help=_help("How much to log: " + _choices([v.value for v in LogLevel]), "log_level")),
    ] = None,
    config: ConfigOption = None,
) -> None:
    """Run the server (WebSocket /acp, POST /rpc, /healthz, /readyz)."""
    from agentd.infra import configure_logging, insecure_bind
    from agentd.preflight import (
        StartupError,
        check_database,
        check_home,
        check_provider,
        check_sandbox,
        claim_database,
        listen_socket,
        local_ws_url,
    )

    _use_config(config)
    settings = _settings(
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
        _fail(exc)
    try:
        check_home(settings)  # after the cheap checks, which create nothing
    except StartupError as exc:
        sock.close()
        _fail(exc)
    try:
        # Held (open) until the process ends; a local `agentd acp` on this file relays here.
        db_lock = claim_database(settings, serving=local_ws_url(settings.host, settings.port))
    except StartupError as exc:
        sock.close()
        _fail(exc)
    try:
        _run(lambda: check_database(settings))
        logging.getLogger("agentd").info("database: %s", redact_url(settings.resolved_database_url()))

        from agentd.app import create_app
        from agentd.serve import server_for

        server = server_for(
            create_app(settings),
            host=settings.host,
            port=settings.port,
            log_level=settings.log_level.value,
            max_frame_bytes=settings.max_frame_bytes,
        )
        server.run(sockets=[sock])
    finally:
        sock.close()
        if db_lock is not None:
            db_lock.close()


@app.command()
def migrate(database_url: DbOption = None, config: ConfigOption = None) -> None:
    """Create or upgrade the database schema to the newest migration."""
    from agentd.preflight import open_store

    _use_config(config)
    settings = _settings(database_url=database_url)

    async def run() -> tuple[str | None, str | None]:
        async with open_store(settings.resolved_database_url()) as store:
            return await store.migration_status()

    current, head = _run(run)
    typer.echo(f"database at revision {current} (head {head})")


token_app = typer.Typer(help="Bearer tokens for AGENTD_AUTH=token (stored hashed).", no_args_is_help=True)
app.add_typer(token_app, name="token")


def _with_store(database_url: str | None, job: Any) -> Any:
    from agentd.preflight import open_store

    settings = _settings(database_url=database_url)

    async def run() -> Any:
        async with open_store(settings.resolved_database_url()) as store:
            return await job(store)

    return _run(run)


@token_app.command("create")
def token_create(
    principal: Annotated[str, typer.Option(help="Who the token acts as; that principal owns its sessions.")],
    name: Annotated[
        str | None, typer.Option(help="A label for the token, e.g. the device it is for.")
    ] = None,
    team: Annotated[
        list[str] | None,
        typer.Option(
            help="A team the principal acts in with this token (repeatable); sessions "
            "shared with the team are open to it"
        ),
    ] = None,
    expires_in: Annotated[
        str | None,
        typer.Option(
            help="Stop accepting it after this long (90s, 30m, 12h, 7d); its open streams then end. "
            "Default: until revoked"
        ),
    ] = None,
    database_url: DbOption = None,
    config: ConfigOption = None,
) -> None:
    """Create a token and print it — the only time it is shown."""
    from agentd.infra import create_token, parse_duration, team_names

    _use_config(config)
    if not principal.strip():
        raise typer.BadParameter("must not be empty", param_hint="--principal")
    try:
        teams = team_names(t.strip() for t in team or [])
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--team") from None
    try:
        lifetime = parse_duration(expires_in) if expires_in is not None else None
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--expires-in") from None
    token, record = _with_store(
        database_url, lambda store: create_token(store, principal.strip(), name, teams, lifetime)
    )
    typer.echo(token)
    in_teams = f" in teams {', '.join(record.teams)}" if record.teams else ""
    until = f", expiring {record.expires_at.isoformat()}" if record.expires_at else ""
    typer.echo(
        f"created {record.id} for principal {record.principal!r}{in_teams}{until}; "
        "store it now, it is not kept",
        err=True,
    )


@token_app.command("list")
def token_list(database_url: DbOption = None, config: ConfigOption = None) -> None:
    """List tokens (ids, principals, names, states, teams; never the tokens themselves)."""
    _use_config(config)
    records = _with_store(database_url, lambda store: store.list_tokens())
    for r in records:
        if r.revoked_at:
            state = f"revoked {r.revoked_at.isoformat()}"
        elif r.expires_at and r.expires_at <= datetime.now(UTC):
            state = f"expired {r.expires_at.isoformat()}"
        else:
            state = f"active until {r.expires_at.isoformat()}" if r.expires_at else "active"
        teams = ",".join(r.teams) or "-"
        typer.echo(f"{r.id}\t{r.principal}\t{r.name or ''}\t{r.created_at.isoformat()}\t{state}\t{teams}")


@token_app.command("revoke")
def token_revoke(
    token_id: Annotated[str, typer.Argument(help="The token's id, as `agentd token list` shows it.")],
    database_url: DbOption = None,
    config: ConfigOption = None,
) -> None:
    """Revoke a token: requests presenting it are refused from now on."""
    _use_config(config)
    if not _with_store(database_url, lambda store: store.revoke_token(token_id)):
        typer.echo(f"agentd: no active token {token_id}", err=True)
        raise typer.Exit(1)
    typer.echo(f"revoked {token_id}")


@app.command()
def chat(
    url: Annotated[
        str | None,
        typer.Option(help="The server's WebSocket URL. Default: ws://HOST:PORT/acp from the settings."),
    ] = None,
    token: Annotated[
        str | None,
        typer.Option(
            help="The bearer token, when the server wants one (env AGENTD_TOKEN).", envvar="AGENTD_TOKEN"
        ),
    ] = None,
    session: Annotated[
        str | None, typer.Option(help="Go back to this session: it is replayed, then goes on live.")
    ] = None,
    cwd: Annotated[
        Path, typer.Option(help="The folder a new session works in. Default: the current folder.")
    ] = Path("."),
    config: ConfigOption = None,
) -> None:
    """A terminal client: prompts, streamed answers as markdown, tool calls, permission
    questions with their diffs, the prompt queue (/queue, /edit N, /drop N, /now N),
    /interject; it reconnects by itself."""
    from agentd.chat import run_chat
    from agentd.transport import check_url

    _use_config(config)
    if url is None:
        settings = _settings()
        url = f"ws://{settings.host}:{settings.port}/acp"
    if problem := check_url(url):
        _fail(ValueError(problem.replace("--connect", "--url", 1)))
    if not cwd.is_dir():
        _fail(ValueError(f"--cwd: {cwd} is not a directory"))
    if session is not None and not session.strip():
        _fail(ValueError("--session: give a session id (agentd chat prints it when it starts)"))
    try:
        code = asyncio.run(run_chat(url, token=token, cwd=cwd.resolve(), session_id=session))
    except KeyboardInterrupt:  # Ctrl-C: leave at once (the session stays on the server)
        code = 130
    raise typer.Exit(code)


@app.command()
def demo(
    workspace: Annotated[
        Path | None, typer.Option(help="The folder the demo works in. Default: a new temporary folder.")
    ] = None,
    prompt: Annotated[
        str, typer.Option(help="What to ask the demo agent.")
    ] = "Write me a hello-world script.",
) -> None:
    """Run a scripted session end to end, in-process, over a real WebSocket: no key, no network."""
    from agentd.demo import run_demo

    raise typer.Exit(asyncio.run(run_demo(workspace, prompt)))


@app.command()
def doctor(config: ConfigOption = None) -> None:
    """List the optional parts this machine has (ripgrep, bubblewrap, git, node, the
    database, Redis, a proxy) and what each one changes."""
    from agentd.doctor import gather, report

    _use_config(config)
    settings = _settings()
    for line in report(_run(lambda: gather(settings))):
        typer.echo(line.render())


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
    from agentd.infra import configure_logging
    from agentd.preflight import (
        DatabaseHeld,
        StartupError,
        check_home,
        check_provider,
        claim_database,
        local_ws_url,
    )

    _use_config(config)
    if connect is not None:
        from agentd.transport import bridge_stdio, check_url

        if listen is not None:
            raise typer.BadParameter("--listen serves a local agentd; it cannot go with --connect")
        if problem := check_url(connect):
            raise typer.BadParameter(problem, param_hint="--connect")
        configure_logging(log_level, _settings().log_format)
        raise typer.Exit(asyncio.run(bridge_stdio(connect, token)))

    from agentd.app import create_app
    from agentd.infra import insecure_bind
    from agentd.serve import running_app
    from agentd.transport import serve_stdio

    address = _host_port(listen) if listen else None
    settings = _settings()
    configure_logging(log_level, settings.log_format)  # a StreamHandler on stderr
    if address is not None and (problem := insecure_bind(address[0], settings.auth)):
        typer.echo(f"agentd: {problem}", err=True)
        raise typer.Exit(2)
    try:
        check_home(settings)
    except StartupError as exc:
        _fail(exc)
    # One process runs the sessions of a SQLite file: when a live server holds it, relay to
    # that server (as --connect would) instead of running a second owner beside it.
    try:
        db_lock = claim_database(settings, serving=local_ws_url(*address) if address else None)
    except DatabaseHeld as held:
        if held.url is None or address is not None:
            _fail(StartupError(f"{held}; it serves no address to relay to: use `agentd serve` and --connect"))
        from agentd.transport import bridge_stdio

        typer.echo(f"agentd: the database is held by a running agentd; relaying to {held.url}", err=True)
        raise typer.Exit(asyncio.run(bridge_stdio(held.url, token))) from None
    try:
        check_provider(settings)  # a missing key is one line on stderr, not a dead editor pane
    except StartupError as exc:
        _fail(exc)
    try:
        code = _run(lambda: serve_stdio(running_app(create_app(settings), address)))
    finally:
        if db_lock is not None:
            db_lock.close()
    raise typer.Exit(code)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
