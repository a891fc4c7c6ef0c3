"""Start-up checks of the `agentd` command: a configuration mistake becomes one readable
`StartupError` naming the setting (the CLI prints it and exits 2), not a traceback from
deep inside uvicorn or SQLAlchemy. The cheap checks (port, provider, script) run before
the slow ones (database, migrations)."""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import IO, TYPE_CHECKING

from agentd.infra import AuthMode, ProviderName, Settings, redact_url
from agentd.store import DatabaseInUse, lock_database, sqlite_at_head

if TYPE_CHECKING:
    from agentd.store import Store

log = logging.getLogger("agentd")

DATABASE_VAR = "AGENTD_DATABASE_URL"
# A database that neither answers nor refuses (a dropped packet) must not hang the command.
CONNECT_TIMEOUT_S = 30.0
OPENAI_DEFAULT_BASE = "https://api.openai.com"


class StartupError(Exception):
    """A mistake in the configuration or environment, in one line for the user."""


def _reason(exc: BaseException) -> str:
    """The cause of `exc` in one line (SQLAlchemy wraps the driver's error in `orig`)."""
    cause = getattr(exc, "orig", None) or exc
    kind = type(cause.__cause__ or cause).__name__  # the driver's own class, not the adapter's
    text = " ".join(str(cause).split())
    return f"{kind}: {text}" if text else kind


def check_home(settings: Settings) -> None:
    """AGENTD_HOME holds the default database, the replica id and the workspaces: a folder
    this user can create and write, said as such (not as a database or lock problem)."""
    home = settings.home
    try:
        home.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise StartupError(f"AGENTD_HOME={home}: not a folder") from None
    except OSError as exc:
        raise StartupError(f"AGENTD_HOME={home}: cannot create the folder ({exc.strerror})") from None
    if not home.is_dir():
        raise StartupError(f"AGENTD_HOME={home}: not a folder")
    if not os.access(home, os.W_OK | os.X_OK):
        import getpass  # (and termios) only for this message

        raise StartupError(f"AGENTD_HOME={home}: this user ({getpass.getuser()}) cannot write to it")


def local_ws_url(host: str, port: int) -> str:
    """Where a process on this machine reaches a server listening on `host`: a wildcard
    address is reached on loopback."""
    host = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}.get(host, host)
    return f"ws://[{host}]:{port}/acp" if ":" in host else f"ws://{host}:{port}/acp"


def claim_database(settings: Settings, serving: str | None = None) -> IO[str] | None:
    """A SQLite file is served by one process: hold its lock while this one runs (keep the
    returned file open); a second `agentd serve` on it stops here, naming the first.
    `serving`: this process's WebSocket address, recorded for a later `agentd acp`."""
    try:
        return lock_database(settings.resolved_database_url(), serving)
    except DatabaseInUse as exc:
        raise DatabaseHeld(f"{DATABASE_VAR}: {exc}", exc.url) from None
    except OSError as exc:
        raise StartupError(f"{DATABASE_VAR}: cannot lock the SQLite database ({exc.strerror})") from None


class DatabaseHeld(StartupError):
    """Another agentd process holds the SQLite file; `url` is where it serves, if it does."""

    def __init__(self, message: str, url: str | None) -> None:
        super().__init__(message)
        self.url = url


def listen_socket(host: str, port: int) -> socket.socket:
    """Bind the server's address now, before any slow start-up work, so a port in use is
    reported at once; uvicorn then serves on this very socket (no window for a race)."""
    # An ASCII name goes as bytes: a str is IDNA-encoded first, which loads the `idna` codec
    # and `unicodedata` (~0.4 MiB resident for good) for an address like 127.0.0.1.
    name: str | bytes = host.encode("ascii") if host.isascii() else host
    try:
        infos = socket.getaddrinfo(name, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise StartupError(f"AGENTD_HOST: cannot resolve {host!r} ({exc.strerror})") from None
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn does
        sock.bind(address)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise StartupError(
                f"AGENTD_PORT: port {port} on {host} is already in use "
                "(another agentd?); choose another with --port or AGENTD_PORT"
            ) from None
        raise StartupError(
            f"AGENTD_HOST/AGENTD_PORT: cannot listen on {host}:{port} ({exc.strerror})"
        ) from None
    sock.set_inheritable(True)
    return sock


def check_sandbox(settings: Settings) -> None:
    """The configured sandbox of `bash` can be had (AGENTD_SANDBOX), or a readable refusal
    (e.g. token auth off loopback and no bubblewrap, unless AGENTD_SANDBOX=none is set)."""
    import shutil

    from agentd.tools import SandboxError, parse_allowed, probe_bwrap, resolve_sandbox

    probe = probe_bwrap(shutil.which("bwrap"))
    try:
        resolve_sandbox(settings.sandbox, probe, settings.host, settings.auth)
    except SandboxError as exc:
        raise StartupError(f"AGENTD_SANDBOX: {exc}") from None
    try:
        parse_allowed(settings.sandbox_egress_allow)
    except ValueError as exc:
        raise StartupError(f"AGENTD_SANDBOX_EGRESS_ALLOW: {exc}") from None
    from agentd.tools import build_fetch_policy

    try:
        build_fetch_policy(settings.web_fetch_allow, settings.web_fetch_deny, ())
    except ValueError as exc:
        raise StartupError(f"AGENTD_WEB_FETCH_ALLOW / AGENTD_WEB_FETCH_DENY: {exc}") from None


def check_provider(settings: Settings) -> None:
    """A provider that cannot work is refused before start-up, naming the variable."""
    if settings.provider is ProviderName.ANTHROPIC and not settings.anthropic_api_key:
        raise StartupError("AGENTD_PROVIDER=anthropic needs a key: set AGENTD_ANTHROPIC_API_KEY")
    if (
        settings.provider in (ProviderName.OPENAI, ProviderName.OPENAI_RESPONSES)
        and not settings.openai_api_key
        and settings.openai_base_url.startswith(OPENAI_DEFAULT_BASE)
    ):
        # A self-hosted OpenAI-compatible server (AGENTD_OPENAI_BASE_URL) may take no key.
        raise StartupError(
            f"AGENTD_PROVIDER={settings.provider.value} needs a key: set AGENTD_OPENAI_API_KEY"
        )
    for i, lane in enumerate(settings.fallbacks):
        key = lane.api_key or (
            settings.anthropic_api_key if lane.provider is ProviderName.ANTHROPIC else settings.openai_api_key
        )
        base = lane.base_url or (
            settings.anthropic_base_url
            if lane.provider is ProviderName.ANTHROPIC
            else settings.openai_base_url
        )
        needs_key = lane.provider is ProviderName.ANTHROPIC or base.startswith(OPENAI_DEFAULT_BASE)
        if needs_key and not key:
            raise StartupError(f"AGENTD_FALLBACKS[{i}] ({lane.provider.value}) needs an api_key")
    if settings.provider in (None, ProviderName.SCRIPTED) and settings.script is not None:
        from agentd.providers import ScriptedProvider

        try:
            ScriptedProvider.from_file(settings.script)
        except FileNotFoundError:
            raise StartupError(f"AGENTD_SCRIPT: no such file {settings.script}") from None
        except (OSError, ValueError) as exc:
            raise StartupError(f"AGENTD_SCRIPT: {_reason(exc).removeprefix('ValueError: ')}") from None


@asynccontextmanager
async def open_store(url: str, *, migrate: bool = True) -> AsyncIterator[Store]:
    """The store at `url`, connected (and migrated); a bad or unreachable URL is a
    `StartupError` naming AGENTD_DATABASE_URL."""
    from agentd.store import Store  # SQLAlchemy's engine and ORM: not for the cheap checks

    shown = redact_url(url)
    try:
        store = await Store.open(url)
    except Exception as exc:  # an unparsable URL, an unknown driver, an unwritable SQLite folder
        raise StartupError(f"{DATABASE_VAR}: cannot use {shown!r} ({_reason(exc)})") from exc
    try:
        try:
            await asyncio.wait_for(store.ping(), CONNECT_TIMEOUT_S)
        except TimeoutError:
            raise StartupError(
                f"{DATABASE_VAR}: cannot connect to {shown} (no answer within {CONNECT_TIMEOUT_S:g} s)"
            ) from None
        except Exception as exc:
            raise StartupError(f"{DATABASE_VAR}: cannot connect to {shown} ({_reason(exc)})") from exc
        if migrate:
            try:
                await store.migrate()
            except Exception as exc:
                raise StartupError(f"{DATABASE_VAR}: cannot migrate {shown} ({_reason(exc)})") from exc
        yield store
    finally:
        await store.close()


def database_current(settings: Settings) -> bool:
    """Whether the database is a SQLite file already at the newest schema and nothing else
    needs saying (no AGENTD_AUTH=token hint): `agentd serve` then skips `check_database`,
    whose store (SQLAlchemy's engine and ORM) the app's start-up opens anyway."""
    return settings.auth is not AuthMode.TOKEN and sqlite_at_head(settings.resolved_database_url())


async def check_database(settings: Settings) -> None:
    """Connect and migrate before the server starts (the app's own migration is then a
    no-op); with AGENTD_AUTH=token and no token yet, say how to create one."""
    async with open_store(settings.resolved_database_url()) as store:
        if settings.auth is AuthMode.TOKEN:
            tokens = await store.list_tokens()
            if not any(t.revoked_at is None for t in tokens):
                log.warning(
                    "AGENTD_AUTH=token but no token exists yet: every request will be refused; "
                    "create one with `agentd token create --principal NAME`"
                )
