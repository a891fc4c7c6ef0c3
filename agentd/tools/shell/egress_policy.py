"""Where a sandboxed command's network traffic may go (issue 28, item 1): pure decisions.

A sandboxed command has a network namespace of its own: its loopback is its own, and
the host's addresses — agentd's API among them — are out of reach. With
`AGENTD_SANDBOX_NETWORK=on` its only way out is agentd's egress proxy
(`agentd.tools.shell.egress`), which asks `refusal` about every destination, after name
resolution, and connects only to the address it checked (no DNS rebinding in between).

Refused: anything on this host (loopback, the unspecified address, and — checked by the
proxy after connecting — any address the host itself owns), private, link-local (cloud
metadata services), shared, multicast and reserved ranges. An operator may allow a few
`host:port` destinations on such ranges (a package mirror on the LAN), never agentd's own
port on this host.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

IpAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


class Refusal(StrEnum):
    """Why the proxy did not connect (shown to the command in the 403's body)."""

    LOOPBACK = "loopback"
    THIS_HOST = "this_host"  # an address of the host running agentd
    AGENTD = "agentd"  # agentd's own port on this host: never, whatever is allowed
    PRIVATE = "private"
    LINK_LOCAL = "link_local"
    NOT_GLOBAL = "not_global"  # unspecified, multicast, reserved, shared (CGNAT), documentation…
    BAD_TARGET = "bad_target"  # no host, no port, a port out of range


@dataclass(frozen=True)
class EgressPolicy:
    """`allowed`: exact (address, port) pairs let through although not global.
    `agentd_ports`: the ports agentd listens on, refused on every local address."""

    allowed: frozenset[tuple[str, int]] = frozenset()
    agentd_ports: frozenset[int] = frozenset()

    def refusal(self, ip: IpAddress, port: int) -> Refusal | None:
        """Before connecting: None when `ip:port` may be connected to."""
        ip = _unmapped(ip)
        if not 0 < port < 65536:
            return Refusal.BAD_TARGET
        local = ip.is_loopback or ip.is_unspecified  # 0.0.0.0 reaches this host too
        if local and port in self.agentd_ports:
            return Refusal.AGENTD
        if (str(ip), port) in self.allowed:
            return None
        if ip.is_loopback:
            return Refusal.LOOPBACK
        if ip.is_unspecified:
            return Refusal.THIS_HOST
        if ip.is_link_local:
            return Refusal.LINK_LOCAL
        if ip.is_private:
            return Refusal.PRIVATE
        if not ip.is_global or ip.is_multicast or ip.is_reserved:  # multicast counts as global
            return Refusal.NOT_GLOBAL
        return None

    def refusal_connected(self, peer: IpAddress, local: IpAddress, port: int) -> Refusal | None:
        """After connecting: a connection whose source address is its destination went to
        this very host (Linux picks the destination itself as the source of a local route),
        whatever address of the host it named."""
        peer, local = _unmapped(peer), _unmapped(local)
        if peer != local:
            return None
        if port in self.agentd_ports:
            return Refusal.AGENTD
        return None if (str(peer), port) in self.allowed else Refusal.THIS_HOST


def _unmapped(ip: IpAddress) -> IpAddress:
    """`::ffff:127.0.0.1` is 127.0.0.1."""
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    return ip


def parse_allowed(entries: Iterable[str]) -> frozenset[tuple[str, int]]:
    """`AGENTD_SANDBOX_EGRESS_ALLOW` entries, `addr:port` or `[v6addr]:port`; ValueError
    names a bad one (addresses, not names: what is checked is what is connected to)."""
    out = set()
    for entry in entries:
        host, sep, port = entry.strip().rpartition(":")
        try:
            if not sep or not port.isdigit():
                raise ValueError
            ip = _unmapped(ipaddress.ip_address(host.removeprefix("[").removesuffix("]")))
        except ValueError:
            raise ValueError(
                f"bad egress destination {entry!r}: expected ADDRESS:PORT (e.g. 10.0.0.5:3128)"
            ) from None
        out.add((str(ip), int(port)))
    return frozenset(out)


def split_authority(authority: str, default_port: int | None) -> tuple[str, int] | None:
    """`host:port`, `[v6]:port` or a bare host (with `default_port`) → (host, port), or
    None when it is not one."""
    authority = authority.strip()
    if authority.startswith("["):
        host, _, rest = authority[1:].partition("]")
        port_text = rest.removeprefix(":") if rest.startswith(":") else ""
        if rest and not rest.startswith(":"):
            return None
    elif authority.count(":") == 1:
        host, _, port_text = authority.partition(":")
    else:
        host, port_text = authority, ""
    if not host:
        return None
    if not port_text:
        return (host, default_port) if default_port is not None else None
    if not port_text.isdigit():
        return None
    return host, int(port_text)
