"""Where the sandbox's egress proxy may connect (issue 28, item 1): the pure decisions."""

from __future__ import annotations

import ipaddress

import pytest

from agentd.tools.shell.egress_policy import EgressPolicy, Refusal, parse_allowed, split_authority

POLICY = EgressPolicy(
    allowed=frozenset({("10.0.0.5", 3128), ("127.0.0.1", 9000)}), agentd_ports=frozenset({8765})
)


@pytest.mark.parametrize(
    ("address", "port", "refusal"),
    [
        ("127.0.0.1", 8765, Refusal.AGENTD),
        ("127.0.0.2", 80, Refusal.LOOPBACK),
        ("::1", 8765, Refusal.AGENTD),
        ("::ffff:127.0.0.1", 8765, Refusal.AGENTD),  # a v4-mapped spelling is the same address
        ("::ffff:127.0.0.1", 22, Refusal.LOOPBACK),
        ("0.0.0.0", 8765, Refusal.AGENTD),  # connecting to 0.0.0.0 reaches this host
        ("0.0.0.0", 80, Refusal.THIS_HOST),
        ("::", 80, Refusal.THIS_HOST),
        ("10.1.2.3", 80, Refusal.PRIVATE),
        ("192.168.1.1", 443, Refusal.PRIVATE),
        ("fd00::1", 443, Refusal.PRIVATE),
        ("169.254.169.254", 80, Refusal.LINK_LOCAL),  # cloud metadata
        ("fe80::1", 80, Refusal.LINK_LOCAL),
        ("100.64.0.1", 80, Refusal.NOT_GLOBAL),  # shared address space (CGNAT)
        ("224.0.0.1", 80, Refusal.NOT_GLOBAL),
        ("93.184.216.34", 0, Refusal.BAD_TARGET),
        ("93.184.216.34", 443, None),
        ("2606:4700::1111", 443, None),
        ("10.0.0.5", 3128, None),  # allowed by the operator
        ("10.0.0.5", 3129, Refusal.PRIVATE),  # only that port
        ("127.0.0.1", 9000, None),
    ],
)
def test_refusal_before_connecting(address: str, port: int, refusal: Refusal | None) -> None:
    assert POLICY.refusal(ipaddress.ip_address(address), port) is refusal


def test_agentds_own_port_is_refused_even_when_allowed() -> None:
    policy = EgressPolicy(allowed=frozenset({("127.0.0.1", 8765)}), agentd_ports=frozenset({8765}))
    assert policy.refusal(ipaddress.ip_address("127.0.0.1"), 8765) is Refusal.AGENTD


@pytest.mark.parametrize(
    ("peer", "local", "port", "refusal"),
    [
        ("93.184.216.34", "10.0.0.2", 443, None),
        ("203.0.113.9", "203.0.113.9", 443, Refusal.THIS_HOST),  # a public address of this host
        ("203.0.113.9", "203.0.113.9", 8765, Refusal.AGENTD),
        ("::ffff:203.0.113.9", "203.0.113.9", 80, Refusal.THIS_HOST),
        ("127.0.0.1", "127.0.0.1", 9000, None),  # explicitly allowed
    ],
)
def test_refusal_after_connecting_spots_this_host(
    peer: str, local: str, port: int, refusal: Refusal | None
) -> None:
    ip = ipaddress.ip_address
    assert POLICY.refusal_connected(ip(peer), ip(local), port) is refusal


def test_parse_allowed() -> None:
    assert parse_allowed(["10.0.0.5:3128", "[::1]:9000", " ::ffff:10.0.0.6:80 "]) == {
        ("10.0.0.5", 3128),
        ("::1", 9000),
        ("10.0.0.6", 80),
    }
    for bad in ("mirror.lan:80", "10.0.0.5", "10.0.0.5:http", ":80"):
        with pytest.raises(ValueError, match="ADDRESS:PORT"):
            parse_allowed([bad])


@pytest.mark.parametrize(
    ("authority", "default", "expected"),
    [
        ("example.com:443", None, ("example.com", 443)),
        ("example.com", 80, ("example.com", 80)),
        ("example.com", None, None),
        ("[::1]:8765", None, ("::1", 8765)),
        ("[::1]", 80, ("::1", 80)),
        ("[::1]x", 80, None),
        ("host:port", None, None),
        (":443", None, None),
    ],
)
def test_split_authority(authority: str, default: int | None, expected: tuple[str, int] | None) -> None:
    assert split_authority(authority, default) == expected
