"""Where `web_fetch` may go (issue 33, item 4): pure decisions over a URL and an address.

The address rules are the sandbox egress proxy's (`EgressPolicy`): public addresses only —
no loopback, private, link-local (cloud metadata services), shared, multicast or reserved
ranges, and never agentd's own port on this host. `web_fetch` checks every address a name
resolves to and connects only to an address it checked (agentd/tools/web/fetch.py), on the
first request and on every redirect.

The operator's lists (`AGENTD_WEB_FETCH_ALLOW` / `AGENTD_WEB_FETCH_DENY`):
- an `ADDRESS:PORT` allow entry lets that one non-public destination through (a wiki on the
  LAN), exactly as `AGENTD_SANDBOX_EGRESS_ALLOW` does for commands;
- a host pattern allow entry (`docs.python.org`, `*.example.com`) turns the allow list on:
  then only matching hosts (and the allowed addresses) are fetched;
- a deny entry is a host pattern or an address range (`203.0.113.0/24`): refused whatever
  the allow list says.
"""

from __future__ import annotations

import fnmatch
import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from urllib.parse import urlsplit

from agentd.tools.shell import EgressPolicy, IpAddress, Refusal, parse_allowed

SCHEMES = {"http": 80, "https": 443}
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})


class UrlRefusal(StrEnum):
    """Why a URL is not fetched, before any name is resolved."""

    SCHEME = "scheme"  # not http(s)
    MALFORMED = "malformed"  # no host, a bad port, …
    CREDENTIALS = "credentials"  # user:password@ in the URL: never sent anywhere by the model
    DENIED = "denied"  # an operator's deny entry
    NOT_ALLOWED = "not_allowed"  # the operator's allow list is on and does not name the host


@dataclass(frozen=True)
class Target:
    """A URL's parts the checks and the connection need; `host` lower-case, no brackets."""

    scheme: str
    host: str
    port: int


@dataclass(frozen=True)
class WebFetchPolicy:
    egress: EgressPolicy = field(default_factory=EgressPolicy)
    allowed_hosts: tuple[str, ...] = ()  # patterns; empty: any host
    denied_hosts: tuple[str, ...] = ()  # patterns
    denied_networks: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...] = ()

    def check_url(self, url: str) -> Target | UrlRefusal:
        """The URL's target, or why it is refused (scheme, shape and the operator's lists)."""
        try:
            parts = urlsplit(url.strip())
            port = parts.port
        except ValueError:
            return UrlRefusal.MALFORMED
        scheme = parts.scheme.lower()
        if scheme not in SCHEMES:
            return UrlRefusal.SCHEME
        host = (parts.hostname or "").rstrip(".").lower()
        if not host:
            return UrlRefusal.MALFORMED
        if parts.username is not None or parts.password is not None:
            return UrlRefusal.CREDENTIALS
        target = Target(scheme, host, port if port is not None else SCHEMES[scheme])
        if not 0 < target.port < 65536:
            return UrlRefusal.MALFORMED
        if _matches(host, self.denied_hosts):
            return UrlRefusal.DENIED
        if self.allowed_hosts and not (
            _matches(host, self.allowed_hosts) or _is_allowed_address(host, target.port, self.egress)
        ):
            return UrlRefusal.NOT_ALLOWED
        return target

    def check_address(self, ip: IpAddress, port: int) -> Refusal | UrlRefusal | None:
        """Before connecting to one resolved address: None when it may be connected to."""
        plain = ip.ipv4_mapped if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped else ip
        if any(plain in net for net in self.denied_networks):
            return UrlRefusal.DENIED
        return self.egress.refusal(ip, port)


def _matches(host: str, patterns: Iterable[str]) -> bool:
    return any(fnmatch.fnmatchcase(host, p) for p in patterns)


def _is_allowed_address(host: str, port: int, egress: EgressPolicy) -> bool:
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return False
    return egress.refusal(ip, port) is None


def build_fetch_policy(
    allow: Iterable[str], deny: Iterable[str], agentd_ports: Iterable[int]
) -> WebFetchPolicy:
    """From the settings' entries; ValueError names a bad one."""
    addresses: list[str] = []
    hosts: list[str] = []
    for entry in (e.strip() for e in allow):
        if not entry:
            continue
        if _looks_like_address(entry):
            addresses.append(entry)
        else:
            hosts.append(_host_pattern(entry))
    denied_hosts: list[str] = []
    denied_networks: list[ipaddress.IPv4Network | ipaddress.IPv6Network] = []
    for entry in (e.strip() for e in deny):
        if not entry:
            continue
        try:
            denied_networks.append(ipaddress.ip_network(entry.strip("[]"), strict=False))
        except ValueError:
            denied_hosts.append(_host_pattern(entry))
    egress = EgressPolicy(parse_allowed(addresses), frozenset(agentd_ports))
    return WebFetchPolicy(egress, tuple(hosts), tuple(denied_hosts), tuple(denied_networks))


def _looks_like_address(entry: str) -> bool:
    """`1.2.3.4:80`, `[::1]:8080`: an address exception (a bad one is then reported as such)."""
    for host in (entry, entry.rpartition(":")[0].removeprefix("[").removesuffix("]")):
        try:
            ipaddress.ip_address(host)  # a bare address too: then refused for its missing port
        except ValueError:
            continue
        return True
    return entry.startswith("[")


def _host_pattern(entry: str) -> str:
    pattern = entry.lower().rstrip(".")
    if not pattern or any(c in pattern for c in "/:@ "):
        raise ValueError(
            f"bad web_fetch host {entry!r}: expected a host name or pattern (e.g. *.example.com)"
        )
    return pattern
