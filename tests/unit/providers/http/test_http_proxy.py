"""Which proxy the environment names for an origin (agentd/providers/http/proxy.py)."""

from __future__ import annotations

import pytest

from agentd.providers.http.proxy import Proxies, ProxyConfigError, bypassed, parse_proxy

PROXY_VARIABLES = ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY", "NO_PROXY", "REQUEST_METHOD")


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    return monkeypatch


def test_the_environment_names_the_proxy_per_scheme(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("HTTPS_PROXY", "http://user:p%40ss@proxy.corp:3128")
    clean_env.setenv("NO_PROXY", ".internal,localhost")
    proxies = Proxies.from_environment()
    chosen = proxies.for_origin("https", "api.openai.com")
    assert chosen is not None and (chosen.host, chosen.port) == ("proxy.corp", 3128)
    assert chosen.authorization == b"Basic dXNlcjpwQHNz"  # user:p@ss
    assert proxies.for_origin("http", "api.openai.com") is None  # no HTTP_PROXY
    assert proxies.for_origin("https", "llm.internal") is None
    assert proxies.for_origin("https", "localhost") is None
    clean_env.setenv("HTTPS_PROXY", "socks5://proxy.corp:1080")
    with pytest.raises(ProxyConfigError, match="AGENTD_HTTP_TRANSPORT=httpx"):
        Proxies.from_environment().for_origin("https", "api.openai.com")


@pytest.mark.parametrize(
    ("url", "host", "port"),
    [("http://p:8080", "p", 8080), ("p:3128", "p", 3128), ("http://p", "p", 80)],
)
def test_proxy_urls(url: str, host: str, port: int) -> None:
    proxy = parse_proxy(url)
    assert (proxy.host, proxy.port, proxy.authorization) == (host, port, None)


def test_nothing_set_means_no_proxy(clean_env: pytest.MonkeyPatch) -> None:
    proxies = Proxies.from_environment()
    assert not proxies
    assert proxies.for_origin("https", "api.openai.com") is None


@pytest.mark.parametrize(
    ("host", "no_proxy", "direct"),
    [
        ("api.openai.com", "", False),
        ("api.openai.com", "*", True),
        ("api.openai.com", "openai.com", True),
        ("api.openai.com", ".openai.com", True),
        ("api.openai.com", "*.openai.com", True),
        ("notopenai.com", "openai.com", False),
        ("127.0.0.1", "localhost, 127.0.0.1:8080", True),
        ("::1", "[::1]", True),
        ("API.OpenAI.com", "openai.com", True),
        ("llm.internal", "example.org,internal", True),
    ],
)
def test_no_proxy_matching(host: str, no_proxy: str, direct: bool) -> None:
    assert bypassed(host, no_proxy) is direct
