"""The application factory: wires settings, store, event log, provider, tools and
session manager into a FastAPI app (routes in `agentd.transport`)."""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, TypeVar

from fastapi import FastAPI
from starlette.middleware.cors import CORSMiddleware
from starlette.middleware.trustedhost import TrustedHostMiddleware

from agentd import __version__
from agentd.core import Lane, Provider, tracing
from agentd.infra import (
    LOCAL_PRINCIPAL,
    Authenticator,
    AuthMode,
    AuthUnavailable,
    DefaultExecutor,
    Metrics,
    Settings,
    insecure_bind,
    limit_arenas,
    redact_tokens_in_server_logs,
    run_trimmer,
)
from agentd.providers import catalogue_for, close_providers, lazy_provider, make_lanes
from agentd.session import ActorServices, EventWriter, SessionManager, session_leases, start_takeover
from agentd.store import Store, use_sqlalchemy_engine
from agentd.tools import SandboxError, ShellLauncher
from agentd.transport import (
    ACP_RENDERER,
    AppState,
    Dispatcher,
    KeepRawSend,
    LiveTokens,
    OriginGuard,
    RateLimiter,
    acp_endpoint,
    auth_unavailable,
    docs_router,
    http_router,
    sse_router,
    streamable_router,
)
from agentd.transport import close_all as close_http_connections

if TYPE_CHECKING:
    from agentd.session import TurnKit
    from agentd.tools import Tool
    from agentd.transport import Method

log = logging.getLogger(__name__)
V = TypeVar("V")


class LoadedOnUse(Mapping[str, V]):
    """A table imported at its first lookup. The method handlers (agentd/transport/handlers:
    ~25 modules with what only they use, ~0.9 MiB resident) load with the first RPC call,
    not at start-up (issue 32 item 3: idle RSS; tests/unit/test_startup_imports.py)."""

    def __init__(self, load: Callable[[], Mapping[str, V]]) -> None:
        self._load = load
        self._table: Mapping[str, V] | None = None

    @property
    def table(self) -> Mapping[str, V]:
        if self._table is None:
            self._table = self._load()
        return self._table

    def __getitem__(self, key: str) -> V:
        return self.table[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.table)

    def __len__(self) -> int:
        return len(self.table)

    def __bool__(self) -> bool:  # `table or {}` must not load it (an empty one acts alike)
        return True


def _methods() -> Mapping[str, Method]:
    from agentd.transport import METHODS

    return METHODS


def _unsupported() -> Mapping[str, str]:
    from agentd.transport import UNSUPPORTED

    return UNSUPPORTED


# The turn machinery (loop, tools, agents) loads with the first session, not at start-up
# (issue 14: idle RSS; tests/unit/test_startup_imports.py): agentd/session/turn_kit.py.
def _build_kit(settings: Settings, shell: ShellLauncher, tools: dict[str, Tool] | None) -> TurnKit:
    from agentd.session import build_kit

    return build_kit(settings, shell, tools)


def _reads_files(settings: Settings) -> bool:
    """Whether making the kit reads configured files or overrides (which may be wrong)."""
    paths = (settings.hooks_file, settings.agents_dir, settings.skills_dir)
    return any(p is not None for p in paths) or bool(settings.limits)


def create_app(
    settings: Settings | None = None,
    *,
    provider: Provider | None = None,
    tools: dict[str, Tool] | None = None,
    fallbacks: list[Lane] | None = None,
    clock: Callable[[], float] | None = None,
) -> FastAPI:
    """`provider`, `tools` and `fallbacks` replace the configured ones (embedding, tests);
    `clock` the rate limiter's (monotonic seconds; a test's fake clock)."""
    settings = settings or Settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if problem := insecure_bind(settings.host, settings.auth):
            raise RuntimeError(problem)
        executor = None
        if settings.memory_trim_s > 0:
            limit_arenas()  # before the database driver's threads allocate
            # The loop's default executor, ours to renew when idle (left to the loop at the end:
            # it shuts its default executor down when it closes, and may serve on after us).
            executor = DefaultExecutor(asyncio.get_running_loop())
        traced = tracing.start()  # OpenTelemetry, when the OTEL_* variables ask for it
        use_sqlalchemy_engine(settings.store_async_engine == "sqlalchemy")
        store = await Store.open(
            settings.resolved_database_url(),
            settings.pool_limits(),
            sqlite_synchronous=settings.sqlite_synchronous,
            sqlite_inline_commit=settings.sqlite_inline_commit,
        )
        await store.migrate(settings.migration_lock_timeout_s)
        # After the database exists, so its files are among those the sandbox hides.
        try:
            shell = await asyncio.to_thread(ShellLauncher.from_settings, settings)
        except SandboxError as exc:
            await store.close()
            raise RuntimeError(str(exc)) from None
        metrics = Metrics()
        writer = EventWriter(store, flush_interval=settings.flush_interval_ms / 1000, metrics=metrics)
        prov = provider or lazy_provider(settings)
        services = ActorServices(
            settings=settings,
            writer=writer,
            provider=prov,
            render=ACP_RENDERER,
            make_kit=functools.partial(_build_kit, settings, shell, tools),
            fallbacks=fallbacks if fallbacks is not None else make_lanes(settings),
            metrics=metrics,
            store=store,
            shell=shell,
            models=catalogue_for(prov, settings.models_ttl_s, settings.models_allow),
        )
        if _reads_files(settings):  # a mistake in a configured file stops the server now
            try:
                await asyncio.to_thread(lambda: services.kit)
            except Exception:
                await store.close()
                raise
        writer.start()
        leases = session_leases(
            store.engine,
            postgres=store.engine.dialect.name == "postgresql",
            replica_id=settings.replica_id,
            ttl_s=settings.lease_ttl_s,
            home=settings.home,
        )
        manager = SessionManager(store, services, owner_default=LOCAL_PRINCIPAL, leases=leases)
        leases.start(manager.lease_lost)
        metrics.track_sessions(manager.live)
        metrics.track_leases(leases.health)
        sweeper = asyncio.create_task(manager.run_evictions(settings.idle_evict_s), name="evict-idle")

        async def release_when_idle() -> bool:
            if manager.live():
                return False
            await store.release_idle()  # the last session unloaded: nobody needs the pool warm
            if executor is not None:  # ... nor the threads the load started (infra/idle_release.py)
                executor.renew()
            return True

        trimmer = asyncio.create_task(
            run_trimmer(
                settings.memory_trim_s,
                lambda: manager.unloaded,
                manager.released,
                release_when_idle,
                activity=lambda: writer.commits,  # no trim (nor its collection) mid-load
            ),
            name="memory-trim",
        )
        live_tokens = LiveTokens()
        revoker = asyncio.create_task(live_tokens.watch(store, settings.token_recheck_s), name="revocation")
        # Sessions a dead replica left mid-turn or with queued prompts (R-C1, R-E6).
        takeover = start_takeover(manager, lease_ttl_s=settings.lease_ttl_s, queued=settings.auto_resume)
        if settings.auto_resume and takeover is None:  # (on Postgres the takeover's first sweep)
            resumed = await manager.resume_queued()
            if resumed:
                log.info("resumed the queues of %d session(s)", len(resumed))
        authenticator = Authenticator(store, settings.auth)
        limiter = RateLimiter(settings.rate_limit_per_s, settings.rate_limit_burst, clock or time.monotonic)
        app.state.agentd = AppState(
            settings,
            store,
            writer,
            manager,
            prov,
            Dispatcher(LoadedOnUse(_methods), LoadedOnUse(_unsupported)),
            services,
            authenticator,
            limiter,
            metrics,
            live_tokens,
        )
        stop_routing = None
        if store.engine.dialect.name == "postgresql":  # commands and events across replicas (R-C1)
            from agentd.transport import start_routing

            replica = getattr(leases, "replica_id", settings.replica_id)
            stop_routing = await start_routing(
                app.state.agentd,
                settings.resolved_database_url(),
                replica,
                wake_takeover=takeover.wake if takeover is not None else None,
            )
        try:
            yield
        finally:
            sweeper.cancel()
            trimmer.cancel()
            revoker.cancel()
            if takeover is not None and takeover.task is not None:
                takeover.task.cancel()
            close_http_connections(app.state.agentd)
            await manager.shutdown(settings.shutdown_grace_s)  # a no-op after drain()
            if stop_routing is not None:
                await stop_routing()
            await writer.stop()
            await leases.stop()
            if services.models is not None:
                await services.models.aclose()
            await close_providers([prov, *(lane.provider for lane in services.fallbacks)])
            await store.close()
            if traced:
                await asyncio.to_thread(tracing.stop)  # exports the spans still pending

    redact_tokens_in_server_logs()
    # The API description needs a token when auth is on: our own routes (agentd.transport.docs).
    app = FastAPI(
        title="agentd",
        version=__version__,
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
    )
    app.add_exception_handler(AuthUnavailable, auth_unavailable)  # 503 + Retry-After, never 500
    app.state.settings = settings  # read before start-up too (serve.py: the WebSocket size ceiling)
    # Innermost: the server's own WebSocket `send`, for the writer's batched socket writes.
    if settings.ws_direct_write:
        app.add_middleware(KeepRawSend)
    if settings.allowed_origins:  # listed pages may also call /rpc and the SSE stream
        app.add_middleware(
            CORSMiddleware,
            allow_origins=settings.allowed_origins,
            allow_methods=["GET", "POST"],
            allow_headers=["Authorization", "Content-Type", "Last-Event-ID"],
        )
    app.add_middleware(OriginGuard, allowed=settings.allowed_origins)
    if settings.allowed_hosts or settings.auth is AuthMode.NONE:
        # Without auth only the loopback names: a rebinding page gets no further (outermost).
        loopback = ["127.0.0.1", "localhost", "[::1]", "::1"] if settings.auth is AuthMode.NONE else []
        app.add_middleware(TrustedHostMiddleware, allowed_hosts=[*loopback, *settings.allowed_hosts])
    app.include_router(http_router)
    app.include_router(sse_router)
    app.include_router(streamable_router)
    app.include_router(docs_router)
    app.add_api_websocket_route("/acp", acp_endpoint)
    return app
