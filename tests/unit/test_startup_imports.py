"""Start-up (issue 14): the server app imports nothing a request may never need — the
`mcp` SDK loads when a session names an MCP server, Alembic when the schema is behind,
structlog (with rich and pygments) only for JSON logs, jsonschema at the first tool call or
structured output, pathspec and `regex` at the first file walk or grep, `pydantic.v1` never
(FastAPI imports it for typed route parameters: the routes take the request), `watchfiles`
never (uvicorn's `--reload` supervisor; agentd does not reload) (idle memory).

A started server that has created or loaded no session has not imported the turn machinery
either — the session actor, the loop, the tool implementations, the agent definitions
(`ActorServices` makes its `TurnKit` on first use, agentd/session/services.py), not even a
turn's outcome type or the MCP client — nor
`prometheus_client` (agentd/infra/metrics.py: it loads at the first scrape; what a turn counts
are plain numbers); the first session brings them in, and the first RPC call the method handlers.
`agentd serve` on a current SQLite database answers /healthz before it imports the app at all
(agentd/serve.py `StartingApp`, issue 32 item 2): FastAPI, SQLAlchemy's async engine,
the store, the transport and the session machinery load in the background, after the socket
serves — SQLAlchemy's ORM never does (issue 32 item 3: Core tables, agentd/store/aio.py);
`agentd acp` answers `initialize` before it imports them (agentd/transport/early.py: they
load in a worker thread meanwhile). Checked in a fresh interpreter, whose `sys.modules`
this test process cannot pollute."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

from agentd.infra.config import Settings
from agentd.preflight import open_store
from tests.support.paths import REPO_ROOT
from tests.support.proc import free_port, server_env

LAZY = (
    "mcp", "alembic", "structlog", "rich", "pygments", "jsonschema", "pathspec", "regex", "pydantic.v1",
    "watchfiles",
)  # fmt: skip
# Loaded with the first session (or metric), not by a started, idle server.
FIRST_SESSION = (
    "agentd.session.actor.session_actor", "agentd.session.turn_kit",
    "agentd.session.local_commands", "agentd.session.eventlog.journal", "agentd.loop.react.run",
    "agentd.loop.context", "agentd.loop.limits", "agentd.tools.registry", "agentd.tools.shell.bash",
    "agentd.tools.files.tools", "agentd.tools.search.grep", "agentd.agents", "agentd.core.outcome",
)  # fmt: skip
# Loaded with the first RPC call (the dispatcher's method table, agentd/app.py `LoadedOnUse`).
FIRST_CALL = ("agentd.transport.handlers",)
# Loaded at their first use, not by a started, idle server (issue 32 item 3: each a seam —
# the wire models with the first prompt or client, the client connection with the first
# client, the queue's module and the mailbox commands with the first session, crash repair
# with the first session loaded from the store, the store's rarer paths when taken, the
# standard library's difflib/tomllib/getpass only for an unknown setting, a config file, an
# unwritable home; `ctypes.util` never: the trimmer finds libc without it).
FIRST_USE = (
    "agentd.protocol.acp", "agentd.protocol.agentd", "agentd.transport.connection",
    "agentd.transport.outgoing", "agentd.transport.sharing", "agentd.session.queue.sync",
    "agentd.session.commands", "agentd.session.eventlog.recovery", "agentd.session.eventlog.attach",
    "agentd.session.eventlog.replayer", "agentd.store.shares", "agentd.store.snapshots",
    "agentd.store.session_list", "agentd.store.migrate_apart", "agentd.tools.shell.egress",
    "difflib", "tomllib", "getpass", "ctypes.util",
)  # fmt: skip
# Of those, what the first session brings in (the laziness is real: these are what it uses).
FIRST_SESSION_USES = (
    "agentd.protocol.acp", "agentd.session.queue.sync", "agentd.session.commands",
)  # fmt: skip


def among(watch: tuple[str, ...]) -> str:
    """Python source: the JSON list of the loaded modules that are in `watch` or below one."""
    return f"json.dumps(sorted(m for m in sys.modules if m in {watch!r} or m.split('.')[0] in {watch!r}))"


def printed(code: str) -> list[list[str]]:
    """The JSON lines `code` prints, run in a fresh interpreter."""
    out = subprocess.run(
        [sys.executable, "-c", "import json, sys\n" + code],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    return [json.loads(line) for line in out.stdout.splitlines()]


def test_importing_the_server_loads_none_of_the_lazy_packages() -> None:
    code = f"import agentd.app, agentd.cli, agentd.serve\nagentd.app.create_app()\nprint({among(LAZY)})\n"
    assert printed(code) == [[]]


# Start-up as `agentd serve` runs it on an existing database (the app's lifespan: store,
# sandbox check, event writer, provider, manager), then one session: the turn machinery
# arrives with it.
STARTED = """
import asyncio
from agentd.app import create_app
from agentd.infra.config import Settings

app = create_app(Settings(home={home!r}, provider="scripted"))

async def main() -> None:
    async with app.router.lifespan_context(app):
        print({idle})
        {then}

asyncio.run(main())
"""


def migrated_home(tmp_path: Path) -> Path:
    """An AGENTD_HOME whose database exists at the newest schema (Alembic: `agentd migrate`)."""
    home = tmp_path / "home"

    async def migrate() -> None:
        async with open_store(Settings(home=home).resolved_database_url()):
            pass

    asyncio.run(migrate())
    return home


def test_a_started_idle_server_has_not_loaded_the_turn_machinery_or_prometheus(tmp_path: Path) -> None:
    code = STARTED.format(
        home=str(migrated_home(tmp_path)),
        idle=among(LAZY + FIRST_SESSION + FIRST_CALL + FIRST_USE),
        then="pass",
    )
    assert printed(code) == [[]]


def test_the_first_session_loads_the_wire_models_queue_and_commands(tmp_path: Path) -> None:
    """The seams of FIRST_USE that a session goes through load when it does."""
    then = (
        f"await app.state.agentd.manager.create(cwd={str(tmp_path)!r}, owner='local')\n"
        f"        print(json.dumps(sorted(m for m in {FIRST_SESSION_USES!r} if m in sys.modules)))"
    )
    code = STARTED.format(home=str(migrated_home(tmp_path)), idle=among(FIRST_USE), then=then)
    assert printed(code) == [[], sorted(FIRST_SESSION_USES)]


# Not loaded by a first session either, though its kit offers `web_fetch` and reads agent
# definitions (issue 32 item 3: ~2.3 MiB that stayed after the first turn): the fetch itself
# (httpcore's connection pool, HTTP/2, its ~70 modules) loads when the tool first runs,
# PyYAML with the first agent file.
# `prometheus_client` comes with the first scrape: the instruments a turn counts with are
# plain numbers (agentd/infra/metrics.py). `difflib` comes with the first diff or a
# mistyped agent key, `tomllib` with the first TOML agent or hooks file, the MCP client with
# the first session that names an MCP server.
FIRST_SESSION_SKIPS = (
    "agentd.tools.web.fetch", "httpcore", "h2", "hpack", "yaml", "prometheus_client", "difflib", "tomllib",
    "agentd.tools.mcp.client",
)  # fmt: skip


def test_the_first_session_offers_web_fetch_without_loading_the_fetch_or_yaml(tmp_path: Path) -> None:
    then = (
        f"actor = await app.state.agentd.manager.create(cwd={str(tmp_path)!r}, owner='local')\n"
        "        print(json.dumps('web_fetch' in app.state.agentd.services.kit.tools))\n"
        f"        print({among(FIRST_SESSION_SKIPS)})"
    )
    code = STARTED.format(home=str(migrated_home(tmp_path)), idle=among(FIRST_SESSION_SKIPS), then=then)
    assert printed(code) == [[], True, []]


def test_counting_needs_no_prometheus_client_until_the_registry_is_made() -> None:
    """What a turn counts (events, outcomes, flushes, fan-out lag, resyncs) loads nothing;
    the first render loads `prometheus_client` and shows all of it."""
    code = (
        "from agentd.core import TurnEnded\n"
        "from agentd.infra.metrics import Metrics\n"
        "m = Metrics()\n"
        "m.observe_event(TurnEnded('turn_1', 'p1', 'completed', 'end_turn', 0))\n"
        "m.flush_seconds.observe(0.001); m.fanout_lag_seconds.observe(0.002); m.resyncs.inc()\n"
        f"print({among(('prometheus_client',))})\n"
        "text = m.render().decode()\n"
        "print(json.dumps([line for line in text.splitlines() if line.startswith(("
        "'agentd_client_resyncs_total', 'agentd_turns_total', 'agentd_db_flush_seconds_count'))]))\n"
    )
    assert printed(code) == [
        [],
        [
            "agentd_client_resyncs_total 1.0",
            'agentd_turns_total{outcome="completed"} 1.0',
            "agentd_db_flush_seconds_count 1.0",
        ],
    ]


def test_the_first_call_loads_the_method_handlers(tmp_path: Path) -> None:
    """The dispatcher's tables load at their first lookup, and are the real ones."""
    then = (
        "d = app.state.agentd.dispatcher\n"
        "        print(json.dumps([d.methods.get('session/new') is not None,"
        " d.unsupported.get('logout') is not None, d.methods.get('no/such') is None]))\n"
        f"        print({among(FIRST_CALL)})"
    )
    code = STARTED.format(home=str(migrated_home(tmp_path)), idle=among(FIRST_CALL), then=then)
    assert printed(code) == [[], [True, True, True], list(FIRST_CALL)]


def test_the_first_session_loads_the_turn_machinery(tmp_path: Path) -> None:
    """The other half: the laziness is real (these are the modules a session uses)."""
    then = (
        f"await app.state.agentd.manager.create(cwd={str(tmp_path)!r}, owner='local')\n"
        f"        print(json.dumps(sorted(m for m in {FIRST_SESSION!r} if m in sys.modules)))"
    )
    code = STARTED.format(home=str(tmp_path / "home"), idle=among(FIRST_SESSION), then=then)
    assert printed(code) == [[], sorted(FIRST_SESSION)]


# SQLAlchemy's ORM (`sqlalchemy.ext.asyncio`'s package imports it too): +5.8 MiB resident.
# The store declares Core tables and runs its own asyncio engine (agentd/store/aio.py).
ORM = ("sqlalchemy.orm", "sqlalchemy.ext.asyncio")


def test_a_started_server_and_its_first_session_never_load_the_orm(tmp_path: Path) -> None:
    then = (
        f"await app.state.agentd.manager.create(cwd={str(tmp_path)!r}, owner='local')\n"
        f"        print({among(ORM)})"
    )
    code = STARTED.format(home=str(migrated_home(tmp_path)), idle=among(ORM), then=then)
    assert printed(code) == [[], []]


def test_the_library_engine_path_still_serves_a_session(tmp_path: Path) -> None:
    """`store_async_engine="sqlalchemy"`: SQLAlchemy's own `AsyncEngine` (so its ORM loads)."""
    then = (
        f"await app.state.agentd.manager.create(cwd={str(tmp_path)!r}, owner='local')\n"
        "        print(json.dumps(type(app.state.agentd.store.engine).__module__))"
    )
    code = STARTED.format(home=str(migrated_home(tmp_path)), idle=among(ORM), then=then).replace(
        'provider="scripted"', 'provider="scripted", store_async_engine="sqlalchemy"'
    )
    assert printed(code) == [sorted(ORM), "sqlalchemy.ext.asyncio.engine"]


def test_importing_the_server_loads_no_database_dialect() -> None:
    """The models declare no dialect-specific options (a partial index's `postgresql_where`
    loads SQLAlchemy's Postgres and SQLite dialects at import: +2.4 MiB idle); a dialect
    loads when an engine for it is made."""
    dialects = "sorted(m for m in sys.modules if m.startswith('sqlalchemy.dialects.'))"
    code = f"import agentd.app, agentd.store.models\nprint(json.dumps({dialects}))\n"
    assert printed(code) == [[]]


# What `agentd serve` does not import before it serves /healthz: the app and what it runs.
BEFORE_SERVING = (
    "fastapi", "sqlalchemy.orm", "sqlalchemy.ext.asyncio", "aiosqlite", "alembic", "agentd.app",
    "agentd.store.db", "agentd.store.models", "agentd.transport.http", "agentd.transport.handlers",
    "agentd.session.manager", "agentd.session.eventlog.writer", "agentd.providers.factory",
)  # fmt: skip
# The real `agentd serve`, stopped where the app starts loading (uvicorn has started: the
# next thing it does is listen): what it has imported by then.
SERVE_UNTIL_LOADING = f"""
import agentd.cli.serving

def loading(settings):
    print({among(BEFORE_SERVING)}, flush=True)
    os._exit(0)

agentd.cli.serving._make_app = loading
sys.argv = ["agentd", "serve", "--log-level", "warning"]
from agentd.cli import main
main()
"""


def test_serve_listens_before_importing_the_app_store_or_orm(tmp_path: Path) -> None:
    env = server_env(tmp_path, port=str(free_port()), provider="scripted")
    env["AGENTD_HOME"] = str(migrated_home(tmp_path))
    out = subprocess.run(
        [sys.executable, "-c", "import json, os, sys\n" + SERVE_UNTIL_LOADING],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=60, env=env,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert [json.loads(line) for line in out.stdout.splitlines()] == [[]], out.stderr


# What `agentd acp` has not imported when it answers `initialize`: the app, the store, the
# real connection and the dispatcher (a worker thread loads them meanwhile).
BEFORE_ANSWERING = (
    *BEFORE_SERVING, "starlette", "uvicorn", "asyncpg", "agentd.serve", "agentd.transport.connection",
    "agentd.transport.rpc", "agentd.transport.stdio", "agentd.session.actor",
)  # fmt: skip
# The real `agentd acp`, its loader held until the answer is out: the answer, then (on the
# same stdout) what had been imported by then.
ACP_UNTIL_ANSWERED = f"""
import threading
import agentd.cli.acp
import agentd.transport.early as early

gate = threading.Event()
load = agentd.cli.acp._Loader.run
agentd.cli.acp._Loader.run = lambda self: (gate.wait(), load(self))[1]
answer = early.answer_initialize

def answered(*args, **kwargs):
    start = answer(*args, **kwargs)
    start.out.write(({among(BEFORE_ANSWERING)} + "\\n").encode())
    os._exit(0)

early.answer_initialize = answered
sys.argv = ["agentd", "acp"]
from agentd.cli import main
main()
"""
INITIALIZE = '{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}}\n'


def test_acp_answers_initialize_before_importing_the_app_store_or_connection(tmp_path: Path) -> None:
    env = server_env(tmp_path, provider="scripted")
    out = subprocess.run(
        [sys.executable, "-c", "import json, os, sys\n" + ACP_UNTIL_ANSWERED],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=60, env=env, input=INITIALIZE,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    answer, loaded = out.stdout.splitlines()
    assert json.loads(answer)["result"]["protocolVersion"] == 1, out.stderr
    assert json.loads(loaded) == [], out.stderr
