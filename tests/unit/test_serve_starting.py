"""`StartingApp` (agentd/serve.py, issue 32 item 2): while the real app loads, `/healthz`
answers 200 and `/readyz` 503 `starting`; every other request is held and then answered by
the real app — never refused; a failed start-up answers the held ones 503 and says so; a
shutdown during the start-up lets it finish and stops the app cleanly. Driven over ASGI."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from agentd.infra.config import Settings
from agentd.serve import StartingApp


class Loading:
    """A `load` that returns the real app only once `release` is set (or fails then)."""

    def __init__(self, fail: bool = False) -> None:
        self.release = asyncio.Event()
        self.fail = fail
        self.lifespan: list[str] = []

    async def __call__(self) -> Any:
        await self.release.wait()
        if self.fail:
            raise RuntimeError("the database is gone")

        @asynccontextmanager
        async def lifespan(app: Starlette) -> AsyncIterator[None]:
            self.lifespan.append("started")
            yield
            self.lifespan.append("stopped")

        async def rpc(request: Request) -> JSONResponse:
            return JSONResponse({"answered_by": "the real app", "body": (await request.json())})

        return Starlette(routes=[Route("/rpc", rpc, methods=["POST"])], lifespan=lifespan)


class Lifespan:
    """uvicorn's side of the ASGI lifespan protocol."""

    def __init__(self, app: StartingApp) -> None:
        self.inbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.outbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.task = asyncio.create_task(app({"type": "lifespan"}, self.inbox.get, self._send))

    async def _send(self, message: Any) -> None:
        await self.outbox.put(message)

    async def ask(self, what: str) -> str:
        await self.inbox.put({"type": f"lifespan.{what}"})
        return str((await self.outbox.get())["type"])


def client(app: StartingApp) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1")


def starting_app(loading: Loading, **settings: Any) -> StartingApp:
    return StartingApp(Settings(provider="scripted", **settings), loading)


async def test_healthz_at_once_readyz_starting_and_other_requests_held_until_ready() -> None:
    loading = Loading()
    app = starting_app(loading)
    lifespan = Lifespan(app)
    # uvicorn starts serving as soon as the start-up completes: that must not wait for the load.
    assert await lifespan.ask("startup") == "lifespan.startup.complete"
    async with client(app) as http:
        held = asyncio.create_task(http.post("/rpc", json={"method": "initialize"}))
        health = await http.get("/healthz")
        assert (health.status_code, health.json()) == (200, {"status": "ok"})
        ready = await http.get("/readyz")
        assert (ready.status_code, ready.json()["status"]) == (503, "starting")
        assert not held.done() and not app.ready  # held, not refused
        loading.release.set()
        answer = await held
        assert answer.status_code == 200
        assert answer.json() == {"answered_by": "the real app", "body": {"method": "initialize"}}
        assert app.ready and loading.lifespan == ["started"]
    assert await lifespan.ask("shutdown") == "lifespan.shutdown.complete"
    assert loading.lifespan == ["started", "stopped"]


async def test_a_failed_start_up_answers_the_held_requests_503_and_stops_the_server() -> None:
    loading = Loading(fail=True)
    app = starting_app(loading)
    stopped = asyncio.Event()
    app.on_failure = stopped.set
    lifespan = Lifespan(app)
    assert await lifespan.ask("startup") == "lifespan.startup.complete"
    async with client(app) as http:
        held = asyncio.create_task(http.post("/rpc", json={}))
        assert (await http.get("/healthz")).status_code == 200
        loading.release.set()
        answer = await held
        assert (answer.status_code, answer.json()["status"]) == (503, "unavailable")
        await stopped.wait()
        assert isinstance(app.failure, RuntimeError) and not app.ready
        # No longer alive either: the server is going down.
        assert (await http.get("/healthz")).status_code == 503
    assert await lifespan.ask("shutdown") == "lifespan.shutdown.complete"


async def test_a_shutdown_during_the_start_up_waits_for_it_then_stops_the_app() -> None:
    loading = Loading()
    app = starting_app(loading)
    lifespan = Lifespan(app)
    assert await lifespan.ask("startup") == "lifespan.startup.complete"
    shutdown = asyncio.create_task(lifespan.ask("shutdown"))
    loading.release.set()
    assert await shutdown == "lifespan.shutdown.complete"
    assert loading.lifespan == ["started", "stopped"]


@pytest.mark.parametrize(("settings", "status"), [({}, 400), ({"allowed_hosts": ["agentd.internal"]}, 200)])
async def test_the_early_healthz_keeps_the_apps_host_rule(settings: dict[str, Any], status: int) -> None:
    """Without auth only loopback names (and the allowed hosts) reach the server, as in the
    real app (agentd/app.py): a rebinding page gets no answer from the early /healthz either."""
    loading = Loading()
    app = starting_app(loading, **settings)
    lifespan = Lifespan(app)
    assert await lifespan.ask("startup") == "lifespan.startup.complete"
    async with client(app) as http:
        resp = await http.get("/healthz", headers={"Host": "agentd.internal"})
        assert resp.status_code == status
        assert not app.ready
    loading.release.set()
    assert await lifespan.ask("shutdown") == "lifespan.shutdown.complete"
