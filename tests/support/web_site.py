"""A small real web site on a free loopback port, for `web_fetch`: an HTML page, plain text,
redirects (to itself, to another address, in a loop), a large page, a binary file, a
compressed body nobody asked for and a page that never answers (held until the test ends)."""

from __future__ import annotations

import asyncio
import gzip
import threading
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route

from tests.support.fakes.threaded import ThreadedServer

PAGE = """<!doctype html><html><head><title>Docs</title><style>body{color:red}</style>
<script>window.secret = "not for the model";</script></head>
<body><nav>menu</nav><h1>Install</h1><p>Run <code>pip install agentd</code>, then read
<a href="/guide">the guide</a>.</p><ul><li>fast</li><li>durable</li></ul></body></html>"""
BIG_BYTES = 256 * 1024


class WebSite(ThreadedServer):
    thread_name = "web-site"

    def __init__(self) -> None:
        super().__init__()
        self.paths: list[str] = []  # every request's path, in order
        self.release = threading.Event()  # lets `/hang` end (set at stop)
        self.app = Starlette(
            routes=[
                Route("/page", self._page),
                Route("/text", self._text),
                Route("/redirect", self._redirect),
                Route("/loop", self._loop),
                Route("/big", self._big),
                Route("/binary", self._binary),
                Route("/hang", self._hang),
                Route("/missing", self._missing),
                Route("/gzip", self._gzip),
            ]
        )

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        self.release.set()
        super().stop()

    async def _page(self, request: Request) -> Response:
        self.paths.append(request.url.path)
        return Response(PAGE, media_type="text/html; charset=utf-8")

    async def _text(self, request: Request) -> Response:
        self.paths.append(request.url.path)
        return PlainTextResponse(f"plain text; host header {request.headers.get('host')}")

    async def _redirect(self, request: Request) -> Response:
        self.paths.append(request.url.path)
        return RedirectResponse(request.query_params["to"], status_code=302)

    async def _loop(self, request: Request) -> Response:
        self.paths.append(request.url.path)
        return RedirectResponse("/loop", status_code=307)

    async def _big(self, request: Request) -> Response:
        self.paths.append(request.url.path)
        return PlainTextResponse("x" * BIG_BYTES)

    async def _binary(self, request: Request) -> Response:
        self.paths.append(request.url.path)
        return Response(b"\x89PNG\r\n\x1a\n" + bytes(64), media_type="image/png")

    async def _missing(self, request: Request) -> Response:
        self.paths.append(request.url.path)
        return PlainTextResponse("no such page", status_code=404)

    async def _gzip(self, request: Request) -> Response:
        self.paths.append(request.url.path)  # compressed although the request said identity
        body = gzip.compress(b"x" * 100_000)
        return Response(body, media_type="text/plain", headers={"Content-Encoding": "gzip"})

    async def _hang(self, request: Request) -> Any:
        self.paths.append(request.url.path)
        await asyncio.to_thread(self.release.wait)  # until the site stops: the client gives up first
        return PlainTextResponse("too late")
