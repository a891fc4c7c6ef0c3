"""The environment's proxies for the lean transport (`http_lean`): `HTTPS_PROXY`,
`HTTP_PROXY`, `ALL_PROXY` and `NO_PROXY` (either case), as curl and httpx read them.

httpx honours them only for the transports it builds itself; the providers' client brings
its own, so without this every model call behind a corporate proxy failed to connect. An
https origin is reached through a `CONNECT host:port` tunnel, TLS running end to end inside
it; a plain http one by sending the request to the proxy with the absolute URL as target.
"""

from __future__ import annotations

import base64
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit


@dataclass(frozen=True, slots=True)
class Proxy:
    host: str
    port: int
    authorization: bytes | None  # a Proxy-Authorization value, from the URL's user:password
    url: str  # for messages (without the password)


class ProxyConfigError(ValueError):
    """A proxy URL the lean transport cannot use (the message says what to do)."""


def parse_proxy(url: str) -> Proxy:
    """An `http://[user:password@]host[:port]` proxy URL (a bare `host:port` means http)."""
    parts = urlsplit(url if "://" in url else f"http://{url}")
    if parts.scheme != "http":
        raise ProxyConfigError(
            f"proxy {parts.scheme}://{parts.hostname} is not supported by the lean transport "
            "(only http:// proxies are): set AGENTD_HTTP_TRANSPORT=httpx"
        )
    if not parts.hostname:
        raise ProxyConfigError(f"proxy URL {url!r} names no host")
    auth = None
    if parts.username is not None:
        pair = f"{unquote(parts.username)}:{unquote(parts.password or '')}".encode()
        auth = b"Basic " + base64.b64encode(pair)
    port = parts.port or 80
    return Proxy(parts.hostname, port, auth, f"http://{parts.hostname}:{port}")


class Proxies:
    """Which proxy (if any) a connection to an origin goes through."""

    def __init__(self, settings: Mapping[str, str]) -> None:
        # urllib's shape: {"https": url, "http": url, "all": url, "no": "host,.domain"}
        self._settings = dict(settings)
        self._chosen: dict[tuple[str, str], Proxy | None] = {}

    @classmethod
    def from_environment(cls) -> Proxies:
        return cls(urllib.request.getproxies_environment())

    def __bool__(self) -> bool:
        return any(key != "no" for key in self._settings)

    def for_origin(self, scheme: str, host: str) -> Proxy | None:
        """The proxy for `scheme://host`, None to connect directly (no proxy set for the
        scheme, or the host matches NO_PROXY). Raises ProxyConfigError for an unusable URL."""
        key = (scheme, host)
        if key in self._chosen:
            return self._chosen[key]
        url = self._settings.get(scheme) or self._settings.get("all")
        chosen = None
        if url and not bypassed(host, self._settings.get("no", "")):
            chosen = parse_proxy(url)
        if len(self._chosen) < 1024:  # origins are few (the providers' base URLs)
            self._chosen[key] = chosen
        return chosen


def bypassed(host: str, no_proxy: str) -> bool:
    """Whether NO_PROXY (comma-separated: `*`, host names, `.domain` or `*.domain`
    suffixes, IP addresses; a `:port` is ignored) sends `host` direct, as curl reads it."""
    host = host.lower().strip("[]").rstrip(".")
    for entry in no_proxy.lower().replace(" ", ",").split(","):
        entry = entry.strip()
        if entry == "*":
            return True
        if entry.startswith("["):  # [::1]:8080
            entry = entry[1 : entry.find("]")] if "]" in entry else entry
        elif entry.count(":") == 1:
            entry = entry.split(":", 1)[0]
        entry = entry.removeprefix("*").lstrip(".").rstrip(".")
        if entry and (host == entry or host.endswith("." + entry)):
            return True
    return False
