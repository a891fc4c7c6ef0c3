"""Where `web_fetch` may go (issue 33, item 4): the pure decisions over URLs and addresses,
the operator's allow/deny lists, its permission kind and when the tool is offered at all."""

from __future__ import annotations

import ipaddress

import pytest

from agentd.core.modes import PermissionMode
from agentd.infra.config import SandboxNetwork, Settings
from agentd.session.turn_kit import web_tools
from agentd.tools.base import Access
from agentd.tools.permissions import Decision, decide, plan_gate_refuses
from agentd.tools.shell.egress_policy import Refusal
from agentd.tools.web.policy import Target, UrlRefusal, build_fetch_policy

POLICY = build_fetch_policy(["10.0.0.5:8080"], ["*.evil.example", "203.0.113.0/24"], [8765])


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("https://docs.python.org/3/", Target("https", "docs.python.org", 443)),
        ("http://Example.COM.:8080/x#frag", Target("http", "example.com", 8080)),
        ("http://[2606:4700::1111]/", Target("http", "2606:4700::1111", 80)),
        ("ftp://example.com/", UrlRefusal.SCHEME),
        ("file:///etc/passwd", UrlRefusal.SCHEME),
        ("gopher://127.0.0.1:6379/_FLUSHALL", UrlRefusal.SCHEME),
        ("example.com/page", UrlRefusal.SCHEME),  # no scheme: not guessed
        ("http:///nohost", UrlRefusal.MALFORMED),
        ("http://example.com:99999/", UrlRefusal.MALFORMED),
        ("http://example.com:0/", UrlRefusal.MALFORMED),
        ("http://user:pw@example.com/", UrlRefusal.CREDENTIALS),
        ("https://api.evil.example/", UrlRefusal.DENIED),
    ],
)
def test_urls(url: str, expected: Target | UrlRefusal) -> None:
    assert POLICY.check_url(url) == expected


@pytest.mark.parametrize(
    ("address", "port", "expected"),
    [
        ("127.0.0.1", 80, Refusal.LOOPBACK),
        ("127.0.0.1", 8765, Refusal.AGENTD),  # agentd's own port, whatever is allowed
        ("::1", 443, Refusal.LOOPBACK),
        ("::ffff:127.0.0.1", 80, Refusal.LOOPBACK),  # v4-mapped
        ("::ffff:10.0.0.1", 80, Refusal.PRIVATE),
        ("0.0.0.0", 80, Refusal.THIS_HOST),
        ("::", 80, Refusal.THIS_HOST),
        ("10.0.0.1", 80, Refusal.PRIVATE),
        ("172.16.0.1", 80, Refusal.PRIVATE),
        ("192.168.1.1", 80, Refusal.PRIVATE),
        ("fd00::1", 80, Refusal.PRIVATE),
        ("169.254.169.254", 80, Refusal.LINK_LOCAL),  # AWS/GCP/Azure metadata
        ("fd00:ec2::254", 80, Refusal.PRIVATE),  # AWS metadata over IPv6
        ("fe80::1", 80, Refusal.LINK_LOCAL),
        ("100.64.0.1", 80, Refusal.NOT_GLOBAL),  # shared (CGNAT); Alibaba's metadata is 100.100.100.200
        ("100.100.100.200", 80, Refusal.NOT_GLOBAL),
        ("224.0.0.1", 80, Refusal.NOT_GLOBAL),
        ("240.0.0.1", 80, Refusal.PRIVATE),  # reserved (Python counts it private)
        ("203.0.113.7", 443, UrlRefusal.DENIED),  # the operator's deny range (public otherwise)
        ("::ffff:203.0.113.7", 443, UrlRefusal.DENIED),
        ("10.0.0.5", 8080, None),  # the operator's allow entry
        ("10.0.0.5", 8081, Refusal.PRIVATE),  # that port only
        ("93.184.216.34", 443, None),
        ("2606:4700::1111", 443, None),
    ],
)
def test_addresses(address: str, port: int, expected: Refusal | UrlRefusal | None) -> None:
    assert POLICY.check_address(ipaddress.ip_address(address), port) == expected


def test_a_host_allow_list_lets_only_its_hosts_and_the_allowed_addresses_through() -> None:
    policy = build_fetch_policy(["docs.python.org", "*.example.com", "127.0.0.1:9000"], [], [8765])
    assert policy.check_url("https://docs.python.org/3/") == Target("https", "docs.python.org", 443)
    assert policy.check_url("https://api.example.com/") == Target("https", "api.example.com", 443)
    assert policy.check_url("https://example.org/") is UrlRefusal.NOT_ALLOWED
    assert policy.check_url("http://127.0.0.1:9000/") == Target("http", "127.0.0.1", 9000)
    assert policy.check_url("http://127.0.0.1:9001/") is UrlRefusal.NOT_ALLOWED
    # Without host patterns, any host is named (the address checks still apply).
    assert build_fetch_policy([], [], []).check_url("https://example.org/") == Target(
        "https", "example.org", 443
    )


@pytest.mark.parametrize(
    ("allow", "deny"),
    [(["10.0.0.5"], []), (["[::1]"], []), (["http://example.com"], []), ([], ["a b"]), ([], ["x/y/z"])],
)
def test_a_bad_entry_is_named(allow: list[str], deny: list[str]) -> None:
    with pytest.raises(ValueError, match="bad"):
        build_fetch_policy(allow, deny, [])


def test_fetching_asks_like_a_command_and_the_plan_gate_refuses_it() -> None:
    assert decide(PermissionMode.DEFAULT, Access.NETWORK, None) is Decision.ASK
    assert decide(PermissionMode.ACCEPT_EDITS, Access.NETWORK, None) is Decision.ASK  # not an edit
    assert decide(PermissionMode.BYPASS, Access.NETWORK, None) is Decision.ALLOW
    assert decide(PermissionMode.PLAN, Access.NETWORK, None) is Decision.DENY
    assert plan_gate_refuses(True, Access.NETWORK)


def test_the_tool_is_offered_unless_it_or_the_sandbox_network_is_off() -> None:
    assert list(web_tools(Settings())) == ["web_fetch"]
    assert web_tools(Settings(web_fetch=False)) == {}
    assert web_tools(Settings(sandbox_network=SandboxNetwork.OFF)) == {}


def test_the_settings_read_comma_separated_lists(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTD_WEB_FETCH_ALLOW", "docs.python.org, 10.0.0.5:8080")
    monkeypatch.setenv("AGENTD_WEB_FETCH_DENY", "*.internal")
    settings = Settings()
    assert settings.web_fetch_allow == ["docs.python.org", "10.0.0.5:8080"]
    assert settings.web_fetch_deny == ["*.internal"]
