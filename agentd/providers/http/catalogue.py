"""The models a provider serves (issue 33, item 3), for the session's model picker.

`GET {base}/models` (OpenAI and compatible servers: vLLM, Ollama, LM Studio, OpenRouter, …)
or `GET {base}/v1/models` (Anthropic, paged), asked by `ModelCatalogue` at most once per TTL
and kept in memory; a failed answer keeps what was known and is asked again after
`RETRY_AFTER_FAILURE_S` (or the TTL, if shorter) — a server without the endpoint costs one
request a minute, and the picker still offers the configured models. An operator's patterns
(`AGENTD_MODELS_ALLOW`) limit what is offered. Context windows come from the answer where
the server says (vLLM `max_model_len`, OpenRouter `context_length`, …).

The decisions — is it stale, what is offered, what a body says — are pure functions; the
class only keeps the state and makes the one request.
"""

from __future__ import annotations

import asyncio
import contextlib
import fnmatch
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Protocol, cast

import orjson

if TYPE_CHECKING:
    import httpx

log = logging.getLogger(__name__)

REQUEST_TIMEOUT_S = 15.0
MAX_BODY_BYTES = 4 * 1024 * 1024
MAX_PAGES = 10  # Anthropic pages of up to 1000: far more models than any provider serves
MAX_MODELS = 2000
RETRY_AFTER_FAILURE_S = 60.0
# Fields compatible servers use for a model's context window, in the order they are trusted.
WINDOW_FIELDS = (
    "context_window",  # Groq and others
    "context_length",  # OpenRouter, Together
    "max_model_len",  # vLLM
    "max_context_length",  # LM Studio
    "max_input_tokens",  # Anthropic's newer model objects
)


class ListFormat(StrEnum):
    OPENAI = "openai"  # {"data": [{"id", ...}]}
    ANTHROPIC = "anthropic"  # {"data": [{"id", "display_name"}], "has_more", "last_id"}: paged


@dataclass(frozen=True)
class ModelsEndpoint:
    """Where a provider lists its models: URL, the headers (its key), the answer's format."""

    url: str
    headers: dict[str, str]
    format: ListFormat


class ListsModels(Protocol):
    def models_endpoint(self) -> ModelsEndpoint: ...


@dataclass(frozen=True)
class ModelInfo:
    id: str
    name: str | None = None  # a display name, when the server gives one
    context_window: int | None = None


def catalogue_for(provider: object, ttl_s: float, allow: list[str]) -> ModelCatalogue:
    """The catalogue of the session's provider: empty for one that cannot list its models
    (the scripted one, or a provider an embedding program hands in without the method)."""
    source = cast("ListsModels", provider) if callable(getattr(provider, "models_endpoint", None)) else None
    return ModelCatalogue(source, ttl_s, list(allow))


class ModelListError(Exception):
    """The models endpoint did not answer with a list (shown in `_agentd/models/list`)."""


# -- pure decisions ---------------------------------------------------------------------


def parse_page(body: Any, fmt: ListFormat) -> tuple[list[ModelInfo], str | None]:
    """One answer's models, and the cursor of the next page (None: the last one)."""
    if isinstance(body, list):  # a few servers answer the bare list
        body = {"data": body}
    if not isinstance(body, dict) or not isinstance(body.get("data"), list):
        raise ModelListError("the answer has no `data` list of models")
    models = []
    for item in body["data"]:
        if not isinstance(item, dict) or not isinstance(item.get("id"), str) or not item["id"]:
            continue
        name = item.get("display_name") or item.get("name")
        models.append(ModelInfo(item["id"], name if isinstance(name, str) else None, _window(item)))
    cursor = None
    if fmt is ListFormat.ANTHROPIC and body.get("has_more") is True and isinstance(body.get("last_id"), str):
        cursor = body["last_id"]
    return models, cursor


def _window(item: dict[str, Any]) -> int | None:
    for key in WINDOW_FIELDS:
        value = item.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def offered(models: Iterable[ModelInfo], allow: Iterable[str]) -> list[ModelInfo]:
    """The served models the operator's patterns let through (no patterns: all), by id, once."""
    patterns = [p for p in allow if p]
    seen: dict[str, ModelInfo] = {}
    for m in models:
        if m.id not in seen and (not patterns or any(fnmatch.fnmatchcase(m.id, p) for p in patterns)):
            seen[m.id] = m
    return list(seen.values())


def is_stale(fetched_at: float | None, failed: bool, now: float, ttl_s: float) -> bool:
    """Whether to ask the provider again (never with a TTL of 0: listing is off)."""
    if ttl_s <= 0:
        return False
    if fetched_at is None:
        return True
    wait = min(ttl_s, RETRY_AFTER_FAILURE_S) if failed else ttl_s
    return now - fetched_at >= wait


# -- the state and the request ---------------------------------------------------------


@dataclass
class ModelCatalogue:
    """`source`: the provider, when it can list its models (the scripted one cannot)."""

    source: ListsModels | None
    ttl_s: float
    allow: list[str] = field(default_factory=list)
    clock: Callable[[], float] = time.monotonic
    fetched_at: float | None = None  # when the last attempt ended (monotonic)
    fetched_wall: float | None = None  # the same, as a Unix time (shown to clients)
    error: str | None = None  # the last attempt's failure
    _served: list[ModelInfo] = field(default_factory=list)
    _inflight: asyncio.Task[None] | None = None

    @property
    def enabled(self) -> bool:
        return self.source is not None and self.ttl_s > 0

    def models(self) -> list[ModelInfo]:
        """What the provider serves and the operator allows, as last known (no waiting)."""
        return offered(self._served, self.allow)

    def context_window(self, model: str) -> int | None:
        for served in self._served:  # (a loop: no generator and `next` per sampling)
            if served.id == model:
                return served.context_window
        return None

    def stale(self) -> bool:
        return self.enabled and is_stale(self.fetched_at, self.error is not None, self.clock(), self.ttl_s)

    def refresh_soon(self) -> asyncio.Task[None] | None:
        """Start asking the provider when the list is stale (one request at a time); the
        task to await, if one is running."""
        if self._inflight is None and self.stale():
            self._inflight = asyncio.get_running_loop().create_task(self._refresh())
            self._inflight.add_done_callback(self._done)
        return self._inflight

    async def fresh(self, wait_s: float) -> None:
        """Ask when stale and wait for the answer at most `wait_s` (it goes on after that)."""
        task = self.refresh_soon()
        if task is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(task), wait_s)

    async def refresh(self) -> None:
        """Ask now (a client's explicit refresh), or join the request already under way."""
        if not self.enabled:
            return
        if self._inflight is None:
            self._inflight = asyncio.get_running_loop().create_task(self._refresh())
            self._inflight.add_done_callback(self._done)
        await asyncio.shield(self._inflight)

    async def aclose(self) -> None:
        """At shutdown: a request still under way is abandoned."""
        task = self._inflight
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def _done(self, task: asyncio.Task[None]) -> None:
        self._inflight = None

    async def _refresh(self) -> None:
        import httpx  # here: a server whose provider cannot list models never loads it

        assert self.source is not None
        endpoint = self.source.models_endpoint()
        try:
            served = await fetch_models(endpoint)
        except (ModelListError, httpx.HTTPError, ValueError) as exc:
            self.error = str(exc) or type(exc).__name__
            log.warning("listing the provider's models failed (%s): %s", endpoint.url, self.error)
        else:
            self._served, self.error = served, None
        self.fetched_at, self.fetched_wall = self.clock(), time.time()


async def fetch_models(endpoint: ModelsEndpoint) -> list[ModelInfo]:
    """Every page of the list; `ModelListError` for an error status or an unreadable answer."""
    import httpx

    from agentd.providers.http import pool
    from agentd.providers.http.common import default_ssl_context

    models: list[ModelInfo] = []
    cursor: str | None = None
    # The providers' own client (the lean transport, the environment's proxies): httpx's
    # default one would import httpcore, h2, hpack and anyio's streams into every server
    # for this one GET (+1.6 MiB resident for the server's life: issue 32 item 3).
    async with pool.client(httpx.Timeout(REQUEST_TIMEOUT_S), default_ssl_context) as client:
        for _ in range(MAX_PAGES):
            params = {"limit": "1000", **({"after_id": cursor} if cursor else {})}
            if endpoint.format is not ListFormat.ANTHROPIC:
                params = {}
            body = await _get_json(client, endpoint, params)
            page, cursor = parse_page(body, endpoint.format)
            models += page
            if cursor is None or len(models) >= MAX_MODELS:
                break
    return models[:MAX_MODELS]


async def _get_json(client: httpx.AsyncClient, endpoint: ModelsEndpoint, params: dict[str, str]) -> Any:
    # The provider's headers ask for SSE and name a body type: not for this GET.
    headers = {k: v for k, v in endpoint.headers.items() if k.lower() not in ("accept", "content-type")}
    headers["accept"] = "application/json"
    async with client.stream("GET", endpoint.url, headers=headers, params=params) as response:
        if response.status_code != 200:
            raise ModelListError(f"HTTP {response.status_code}")
        data = bytearray()
        async for chunk in response.aiter_bytes():
            data += chunk
            if len(data) > MAX_BODY_BYTES:
                raise ModelListError(f"the answer is over {MAX_BODY_BYTES} bytes")
    try:
        return orjson.loads(bytes(data))
    except orjson.JSONDecodeError:
        raise ModelListError("the answer is not JSON") from None
