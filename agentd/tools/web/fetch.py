"""`web_fetch` (issue 33, item 4): an HTTP(S) GET of a URL the model names, an HTML page
turned into markdown (markdownify), other text as it is.

Where it may go is `WebFetchPolicy`'s decision (agentd/tools/web/policy.py). The
connection is made by `_CheckedBackend`, under httpcore: it resolves the name itself, checks
every address, connects to a checked one and checks the connected socket again — so there
is no gap between the check and the connection for a rebinding name server, and every
redirect's connection goes through the same checks. TLS still verifies the URL's host name.

Bounded: the body (`max_bytes`, then cut), the whole fetch (`timeout_s`), redirects
(`MAX_REDIRECTS`), the HTML converted (`MAX_HTML_CHARS`) and the text the model gets
(`MAX_OUTPUT_CHARS`).
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urljoin, urlsplit

import httpcore
import httpx

from agentd.tools.errors import ToolError
from agentd.tools.shell import IpAddress
from agentd.tools.web.policy import REDIRECT_STATUSES, UrlRefusal, WebFetchPolicy
from agentd.tools.web.tool import FetchLimits as FetchLimits
from agentd.tools.web.tool import WebFetch as WebFetch

MAX_REDIRECTS = 5
MAX_OUTPUT_CHARS = 100_000
# HTML parsed and converted at most (pure Python: about a second per 100 kB on a loaded
# machine); the markdown of a bigger page would be cut at MAX_OUTPUT_CHARS anyway.
MAX_HTML_CHARS = 1_000_000
RESOLVE_TIMEOUT_S = 10.0
USER_AGENT = "agentd-web-fetch/1 (+https://github.com/agentd)"
_TEXT_TYPES = ("text/", "application/json", "application/xml", "application/xhtml", "+json", "+xml")


class Refused(Exception):
    """A destination the policy refuses (shown to the model as the tool's error)."""


class _CheckedBackend(httpcore.AsyncNetworkBackend):
    """httpcore's network layer with the policy in front of every TCP connection."""

    def __init__(self, policy: WebFetchPolicy) -> None:
        self._policy = policy
        self._inner = httpcore.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 - httpcore's interface
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(RESOLVE_TIMEOUT_S):
                infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except (OSError, TimeoutError, UnicodeError):  # UnicodeError: a label IDNA refuses
            raise httpcore.ConnectError(f"cannot resolve {host}") from None
        addresses = list(dict.fromkeys(_ip(str(info[4][0])) for info in infos))
        for ip in addresses:  # every address a name has must pass: no picking the harmless one
            if (why := self._policy.check_address(ip, port)) is not None:
                raise Refused(f"{host}:{port} ({ip}) is not allowed: {why.value}")
        last: Exception | None = None
        for ip in addresses:
            try:
                stream = await self._inner.connect_tcp(str(ip), port, timeout, local_address, socket_options)
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                last = exc
                continue
            sock = stream.get_extra_info("socket")
            peer, local = _ip(sock.getpeername()[0]), _ip(sock.getsockname()[0])
            if (why_connected := self._policy.egress.refusal_connected(peer, local, port)) is not None:
                await stream.aclose()  # nothing was sent
                raise Refused(f"{host}:{port} ({ip}) is not allowed: {why_connected.value}")
            return stream
        raise httpcore.ConnectError(f"cannot connect to {host}:{port}: {last}")

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,  # noqa: ASYNC109 - httpcore's interface
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        raise Refused("unix sockets are not fetched")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


def _ip(text: str) -> IpAddress:
    return ipaddress.ip_address(text.split("%", 1)[0])  # a v6 scope id is not part of the address


@dataclass
class Page:
    url: str  # after redirects
    status: int
    content_type: str
    body: bytes
    truncated: bool  # the body was longer than the limit


async def fetch(url: str, policy: WebFetchPolicy, limits: FetchLimits) -> Page:
    """GET `url`, following up to `MAX_REDIRECTS` redirects, each one checked anew.
    Raises `Refused` or `ToolError`."""
    try:
        async with asyncio.timeout(limits.timeout_s):
            async with httpcore.AsyncConnectionPool(network_backend=_CheckedBackend(policy)) as pool:
                for _ in range(MAX_REDIRECTS + 1):
                    url = _check_url(url, policy)  # the addresses: by the backend, at each connection
                    page, location = await _get(pool, url, limits.max_bytes)
                    if location is None:
                        return page
                    url = urljoin(url, location)
                raise ToolError(f"more than {MAX_REDIRECTS} redirects (last to {url})")
    except TimeoutError:
        raise ToolError(f"fetching {url} took longer than {limits.timeout_s:g} s") from None
    except httpcore.TimeoutException:
        raise ToolError(f"fetching {url} timed out") from None
    except (httpcore.NetworkError, httpcore.ProtocolError) as exc:
        raise ToolError(f"fetching {url} failed: {exc}") from None


def _check_url(url: str, policy: WebFetchPolicy) -> str:
    """The URL as it goes on the wire (IDNA host, percent-encoded path), once allowed."""
    try:
        wire = str(httpx.URL(url))
    except (httpx.InvalidURL, UnicodeError, ValueError):
        raise Refused(f"{url} is not fetched: {_URL_REFUSALS[UrlRefusal.MALFORMED]}") from None
    target = policy.check_url(wire)
    if isinstance(target, UrlRefusal):
        raise Refused(f"{url} is not fetched: {_URL_REFUSALS[target]}")
    return wire


_URL_REFUSALS = {
    UrlRefusal.SCHEME: "only http and https URLs are fetched",
    UrlRefusal.MALFORMED: "not a valid URL",
    UrlRefusal.CREDENTIALS: "URLs with a user name or password are not fetched",
    UrlRefusal.DENIED: "the operator's deny list names this host",
    UrlRefusal.NOT_ALLOWED: "the operator's allow list does not name this host",
}


async def _get(pool: httpcore.AsyncConnectionPool, url: str, max_bytes: int) -> tuple[Page, str | None]:
    """One request: the page, or (for a redirect) where it points."""
    netloc = urlsplit(url).netloc.rpartition("@")[2]
    headers = [
        ("Host", netloc),
        ("User-Agent", USER_AGENT),
        ("Accept", "text/html, text/markdown;q=0.9, text/plain;q=0.9, */*;q=0.5"),
        ("Accept-Encoding", "identity"),  # no decompression bomb: what is counted is what is read
    ]
    async with pool.stream("GET", url.split("#", 1)[0], headers=headers) as response:
        found = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in response.headers}
        if response.status in REDIRECT_STATUSES and "location" in found:
            return Page(url, response.status, "", b"", False), found["location"]
        encoding = found.get("content-encoding", "identity").strip().lower()
        if encoding not in ("", "identity"):  # not decompressed here: its size is unknown
            raise ToolError(f"{url} came {encoding}-compressed although asked not to be")
        chunks: list[bytes] = []
        size, truncated = 0, False
        async for chunk in response.aiter_stream():
            if size + len(chunk) > max_bytes:
                chunks.append(chunk[: max_bytes - size])
                truncated = True
                break
            chunks.append(chunk)
            size += len(chunk)
    return Page(url, response.status, found.get("content-type", ""), b"".join(chunks), truncated), None


def is_text(content_type: str) -> bool:
    media = content_type.split(";", 1)[0].strip().lower()
    return not media or any(media.startswith(t) or media.endswith(t) for t in _TEXT_TYPES)


def charset(content_type: str) -> str:
    for param in content_type.split(";")[1:]:
        name, _, value = param.partition("=")
        if name.strip().lower() == "charset" and value.strip():
            return value.strip().strip('"')
    return "utf-8"


def to_markdown(html: str) -> str:
    """The page's readable text: no scripts, styles or page furniture."""
    from bs4 import BeautifulSoup
    from markdownify import MarkdownConverter

    soup = BeautifulSoup(html, "html.parser")
    for tag in soup(["script", "style", "noscript", "template", "svg", "iframe", "head", "nav", "footer"]):
        tag.decompose()
    text = MarkdownConverter(heading_style="ATX", bullets="-").convert_soup(soup)
    lines = [line.rstrip() for line in text.splitlines()]
    out: list[str] = []
    for line in lines:  # runs of blank lines, left by the removed tags, become one
        if line or (out and out[-1]):
            out.append(line)
    return "\n".join(out).strip()


def render(page: Page, html_cap: int = MAX_HTML_CHARS) -> str:
    """What the model reads: a short header, then the text."""
    try:
        text = page.body.decode(charset(page.content_type), errors="replace")
    except LookupError:  # an unknown charset name
        text = page.body.decode("utf-8", errors="replace")
    media = page.content_type.split(";", 1)[0].strip().lower()
    notes = []
    if page.truncated:
        notes.append("the body was cut at the size limit")
    if media in ("text/html", "application/xhtml+xml") or (not media and "<html" in text[:1000].lower()):
        if len(text) > html_cap:
            text = text[:html_cap]
            notes.append(f"the page was cut at {html_cap} characters before conversion")
        text = to_markdown(text)
    header = f"URL: {page.url}\nStatus: {page.status}\nContent-Type: {page.content_type or 'unknown'}\n"
    if len(text) > MAX_OUTPUT_CHARS:
        text = text[:MAX_OUTPUT_CHARS]
        notes.append(f"the text was cut at {MAX_OUTPUT_CHARS} characters")
    if notes:
        header += f"Note: {'; '.join(notes)}\n"
    return f"{header}\n{text}"
