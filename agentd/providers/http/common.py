"""What the HTTP providers share: one TLS context, httpx failures translated into the
typed errors (R-R1), and reading an error response's body. Wire formats stay in each
provider's own module; only the transport edge lives here."""

from __future__ import annotations

import asyncio
import functools
import json
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any, TypeVar, cast

import httpx
import orjson

from agentd.core import ErrorKind, HarnessError
from agentd.providers.http import pool as http_pool
from agentd.providers.http.answer import Answer, HttpxAnswer
from agentd.providers.http.lean_body import LeanBody

T = TypeVar("T")


@functools.cache
def default_ssl_context() -> ssl.SSLContext:
    # Loading the CA bundle is blocking file I/O: do it once per process, not per provider.
    return httpx.create_ssl_context()


async def guard(
    awaitable: Awaitable[T],
    deadline: float | None,
    *,
    base_url: str,
    first_token_timeout: float | None,
    idle_timeout: float | None = None,
) -> T:
    """Await one network step, translating httpx failures and the stream timeouts: the
    absolute first-token `deadline` (until real output arrived), `idle_timeout` for this one
    step (callers pass it once output is flowing). Both are `TIMEOUT` errors, so the loop's
    timeout bucket retries them."""
    try:
        if deadline is None and idle_timeout is None:
            return await awaitable
        scope = asyncio.timeout_at(deadline) if deadline is not None else asyncio.timeout(idle_timeout)
        try:
            async with scope:
                return await awaitable
        except TimeoutError as exc:
            if deadline is not None:
                raise no_first_token(first_token_timeout) from exc
            raise stalled(idle_timeout) from exc
    except httpx.RequestError as exc:
        raise transport_error(exc, base_url) from exc


def no_first_token(first_token_timeout: float | None) -> HarnessError:
    """The first-token deadline passed (the loop's timeout bucket retries it)."""
    return HarnessError(ErrorKind.TIMEOUT, f"no first token within {first_token_timeout}s")


def stalled(idle_timeout: float | None) -> HarnessError:
    """Nothing arrived for the idle timeout once output was flowing."""
    return HarnessError(ErrorKind.TIMEOUT, f"the stream stalled: nothing received for {idle_timeout}s")


def transport_error(exc: httpx.RequestError, base_url: str) -> HarnessError:
    """An httpx failure as the typed error (raise it `from exc`)."""
    if isinstance(exc, httpx.TimeoutException):
        return HarnessError(ErrorKind.TIMEOUT, f"{type(exc).__name__}: {exc}")
    if isinstance(exc, httpx.ConnectError):
        return HarnessError(ErrorKind.NETWORK, f"cannot connect to {base_url}: {exc}")
    # RemoteProtocolError (peer dropped the connection mid-body), ReadError, ...
    return HarnessError(ErrorKind.PROVIDER_UNAVAILABLE, f"{type(exc).__name__}: {exc}")


# After the end marker ([DONE], message_stop) only the body's terminator is left; a server
# that keeps talking past this much is not worth the wait (the connection is dropped instead).
_DRAIN_MAX_LINES = 256
_DRAIN_TIMEOUT_S = 5.0


async def drain(lines: AsyncIterator[Any], *, limit_s: float | None = None) -> None:
    """Read a stream body to its end after the end marker, so httpx hands the connection
    back to the pool: closing a half-read body closes the TCP connection, and every call
    would pay a new handshake. Bounded in items (lines or chunks) and time; a failure here costs only the
    connection, never the (already complete) answer."""
    limit = min(limit_s, _DRAIN_TIMEOUT_S) if limit_s is not None else _DRAIN_TIMEOUT_S
    try:
        async with asyncio.timeout(limit):
            for _ in range(_DRAIN_MAX_LINES):
                if await anext(lines, None) is None:
                    return
    except (TimeoutError, httpx.HTTPError, httpx.StreamError):
        return


async def drain_lean(body: LeanBody, *, limit_s: float | None = None) -> None:
    """`drain` for a body read straight from its connection: nothing to do when its end
    was read already (the usual case: the terminator comes with the end marker), else read
    under the same bounds, the time limit as the reads' own deadline (no timer)."""
    if body.done:
        return
    limit = min(limit_s, _DRAIN_TIMEOUT_S) if limit_s is not None else _DRAIN_TIMEOUT_S
    until = asyncio.get_running_loop().time() + limit
    try:
        for _ in range(_DRAIN_MAX_LINES):
            if await body.read(until, TimeoutError) is None:
                return
    except (TimeoutError, httpx.HTTPError, httpx.StreamError):
        return


async def error_body(response: httpx.Response, *, base_url: str) -> Any:
    """An error response's body: parsed JSON, else the text, else None."""
    try:
        raw = await guard(response.aread(), None, base_url=base_url, first_token_timeout=None)
        text = raw.decode(errors="replace")
    except HarnessError:
        text = ""
    try:
        return json.loads(text) if text else None
    except ValueError:
        return text


async def open_stream(
    client: httpx.AsyncClient,
    url: str,
    body: dict[str, Any] | bytes | list[bytes],
    headers: dict[str, str],
    http_timeout: httpx.Timeout,
    *,
    base_url: str,
    first_token_timeout: float | None,
    classify: Callable[[int, Any, Any], HarnessError],
) -> tuple[Answer, float | None]:
    """POST `body` for a streamed answer. Returns the open answer (the caller closes
    it) and the first-token deadline, which is absolute from the start of the call: it
    covers connecting, the response headers and every keep-alive until real output. An
    HTTP error status is read, classified and raised. `body` may come encoded already
    (the providers' `encode_pieces`, which reuse the conversation's bytes)."""
    deadline = None
    if first_token_timeout is not None:
        deadline = asyncio.get_running_loop().time() + first_token_timeout
    try:
        # orjson rather than httpx's `json=` (the stdlib encoder): the body carries the whole
        # conversation, encoded on every model call. Providers that keep per-message encodings
        # (wire_cache) pass bytes already, in pieces. The URL is parsed once per provider URL.
        content = (
            body if isinstance(body, bytes | list) else orjson.dumps(body, option=orjson.OPT_NON_STR_KEYS)
        )
        parsed = _parse_url(url)
        if "Content-Type" not in headers and "content-type" not in headers:  # (no scan for the usual two)
            headers = with_content_type(headers)
        # A lean client's kept head per endpoint; else an httpx request (the general way).
        head = http_pool.lean_head(client, parsed, headers)
        request = (
            None
            if head is not None
            else http_pool.post_request(client, parsed, content, headers, http_timeout)
        )
    except (httpx.InvalidURL, httpx.UnsupportedProtocol, TypeError, ValueError) as exc:
        # A bad base_url or a schema that is not JSON-serialisable: retrying cannot help.
        raise HarnessError(ErrorKind.INVALID_REQUEST, f"cannot build the request: {exc}") from exc
    except httpx.RequestError as exc:  # a header the transport refuses (as when it sends)
        raise transport_error(exc, base_url) from exc
    answer: Answer
    if head is not None:
        # The first-token deadline as the exchange's own (no timeout scope on the usual path).
        try:
            answer = await http_pool.send_head(
                client,
                head,
                content,
                http_timeout,
                deadline,
                (lambda: no_first_token(first_token_timeout)) if deadline is not None else None,
            )
        except httpx.RequestError as exc:
            raise transport_error(exc, base_url) from exc
    else:
        response = await guard(
            http_pool.send_streaming(client, cast(httpx.Request, request)),
            deadline,
            base_url=base_url,
            first_token_timeout=first_token_timeout,
        )
        answer = HttpxAnswer(response)
    if answer.status_code >= 400:
        response = answer.response()
        try:
            raise classify(
                response.status_code, await error_body(response, base_url=base_url), response.headers
            )
        finally:
            await response.aclose()
    return answer, deadline


def with_content_type(headers: dict[str, str]) -> dict[str, str]:
    """`headers` with a JSON Content-Type unless they name one (in any case)."""
    return headers if _has_content_type(headers) else {**headers, "Content-Type": "application/json"}


def _has_content_type(headers: Mapping[str, str]) -> bool:
    return any(name.lower() == "content-type" for name in headers)


@functools.lru_cache(maxsize=64)
def _parse_url(url: str) -> httpx.URL:
    return httpx.URL(url)


def parse_retry_after(headers: Mapping[str, str], *, now: datetime | None = None) -> float | None:
    """Seconds to wait from `retry-after-ms` or `Retry-After` (delta-seconds or an HTTP date)."""
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())
