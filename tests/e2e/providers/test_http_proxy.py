"""Model calls through the environment's proxy (issue 31, item 3), on both transports
(`AGENTD_HTTP_TRANSPORT=lean|httpx`): the real OpenAI provider against FakeOpenAI over https
(a self-signed certificate) and http, through a local forward proxy that counts what passed."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest

from agentd.core.conversation import Message
from agentd.core.errors import ErrorKind, HarnessError
from agentd.core.provider import ProviderRequest, TextDelta
from agentd.infra.config import HttpTransport
from agentd.providers.http import pool as http_pool
from agentd.providers.openai.chat import OpenAIProvider
from tests.support.cli import clean_env
from tests.support.client import WsClient, agent_text, text_prompt
from tests.support.fakes.openai_server import Completion, FakeOpenAI
from tests.support.proc import agentd_process, free_port, wait_healthy
from tests.support.proxy import ForwardProxy
from tests.support.tls import SelfSigned, self_signed

PROXY_VARIABLES = ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY", "NO_PROXY", "REQUEST_METHOD")


@pytest.fixture(params=[HttpTransport.LEAN, HttpTransport.HTTPX], ids=lambda t: t.value)
def transport(request: pytest.FixtureRequest) -> HttpTransport:
    return request.param  # type: ignore[no-any-return]


@pytest.fixture
def proxy_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[pytest.MonkeyPatch]:
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    yield monkeypatch


@pytest.fixture(scope="module")
def cert(tmp_path_factory: pytest.TempPathFactory) -> SelfSigned:
    return self_signed(tmp_path_factory.mktemp("tls"))


@pytest.fixture
async def proxy() -> AsyncIterator[ForwardProxy]:
    async with ForwardProxy() as server:
        yield server


def provider(base_url: str, cert: SelfSigned, transport: HttpTransport) -> OpenAIProvider:
    """A provider whose client was made as `make_provider` makes it (the environment read
    then), trusting the test certificate."""
    timeout = httpx.Timeout(30.0, connect=10.0)
    client = http_pool.client(timeout, cert.client_context(), transport)
    return OpenAIProvider(base_url=base_url, api_key="sk-test", model="m", client=client)


async def answer(provider: OpenAIProvider) -> str:
    request = ProviderRequest(model="m", system="", messages=[Message.user("hi")])
    try:
        events = [event async for event in provider.stream(request)]
    finally:
        await provider._client.aclose()
    return "".join(e.text for e in events if isinstance(e, TextDelta))


async def test_https_model_call_goes_through_a_connect_tunnel(
    proxy_env: pytest.MonkeyPatch, cert: SelfSigned, proxy: ForwardProxy, transport: HttpTransport
) -> None:
    proxy_env.setenv("HTTPS_PROXY", proxy.url)
    fake = FakeOpenAI([Completion.from_text("through the tunnel")])
    fake.tls = (cert.cert, cert.key)
    async with fake:
        assert fake.base_url.startswith("https://")
        text = await answer(provider(fake.base_url, cert, transport))
    assert text == "through the tunnel"
    assert proxy.tunnels == [f"127.0.0.1:{fake.port}"]
    assert proxy.requests == []
    assert len(fake.requests) == 1


async def test_http_model_call_goes_through_the_proxy_with_the_absolute_url(
    proxy_env: pytest.MonkeyPatch, cert: SelfSigned, proxy: ForwardProxy, transport: HttpTransport
) -> None:
    proxy_env.setenv("HTTP_PROXY", proxy.url)
    async with FakeOpenAI([Completion.from_text("plain"), Completion.from_text("again")]) as fake:
        assert await answer(provider(fake.base_url, cert, transport)) == "plain"
        assert await answer(provider(fake.base_url, cert, transport)) == "again"
    url = f"http://127.0.0.1:{fake.port}/v1/chat/completions"
    assert proxy.requests == [url, url]
    assert proxy.tunnels == []


async def test_a_no_proxy_host_is_reached_directly(
    proxy_env: pytest.MonkeyPatch, cert: SelfSigned, proxy: ForwardProxy, transport: HttpTransport
) -> None:
    proxy_env.setenv("HTTPS_PROXY", proxy.url)
    proxy_env.setenv("HTTP_PROXY", proxy.url)
    proxy_env.setenv("NO_PROXY", "example.org,127.0.0.1")
    fake = FakeOpenAI([Completion.from_text("direct")])
    fake.tls = (cert.cert, cert.key)
    async with fake:
        assert await answer(provider(fake.base_url, cert, transport)) == "direct"
    assert proxy.tunnels == [] and proxy.requests == []
    assert len(fake.requests) == 1


async def test_a_proxy_refusing_the_tunnel_fails_the_call_with_a_typed_error(
    proxy_env: pytest.MonkeyPatch, cert: SelfSigned, proxy: ForwardProxy, transport: HttpTransport
) -> None:
    """The fault: the proxy says 403 to CONNECT. The call fails as a typed, retryable
    provider error naming nothing secret; the origin never saw a request."""
    proxy_env.setenv("HTTPS_PROXY", proxy.url)
    proxy.refuse_connect = True
    fake = FakeOpenAI([Completion.from_text("unreachable")])
    fake.tls = (cert.cert, cert.key)
    async with fake:
        with pytest.raises(HarnessError) as caught:
            await answer(provider(fake.base_url, cert, transport))
    assert caught.value.kind in (ErrorKind.NETWORK, ErrorKind.PROVIDER_UNAVAILABLE)
    assert proxy.tunnels == [f"127.0.0.1:{fake.port}"]
    assert fake.requests == []


@pytest.mark.parametrize("setting", ["lean", "httpx"])
async def test_agentd_serve_sends_model_calls_through_https_proxy(
    tmp_path: Path, cert: SelfSigned, proxy: ForwardProxy, setting: str
) -> None:
    """The whole server as an operator runs it behind a corporate proxy: HTTPS_PROXY and
    AGENTD_HTTP_TRANSPORT in its environment, a model API over https (its certificate
    trusted through SSL_CERT_FILE). The prompt's answer came through the tunnel."""
    fake = FakeOpenAI([Completion.from_text("via the proxy")])
    fake.tls = (cert.cert, cert.key)
    port = free_port()
    async with fake:
        env = clean_env(
            tmp_path,
            AGENTD_HOME=str(tmp_path / "home"),
            AGENTD_PORT=str(port),
            AGENTD_PROVIDER="openai",
            AGENTD_OPENAI_BASE_URL=fake.base_url,
            AGENTD_OPENAI_API_KEY="sk-test",
            AGENTD_MODEL="m",
            AGENTD_HTTP_TRANSPORT=setting,
            HTTPS_PROXY=proxy.url,
            SSL_CERT_FILE=cert.cert,
        )
        log = tmp_path / "serve.log"
        async with agentd_process(["serve"], env=env, log=log) as proc:
            await wait_healthy(f"http://127.0.0.1:{port}", proc, log)
            client = await WsClient.connect(f"http://127.0.0.1:{port}")
            try:
                sid = (await client.call("session/new", {"cwd": str(tmp_path), "mcpServers": []}))[
                    "sessionId"
                ]
                done = await client.call("session/prompt", text_prompt(sid, "hi"))
                assert done["stopReason"] == "end_turn"
                assert agent_text(client.updates(sid)) == "via the proxy"
            finally:
                await client.close()
    assert proxy.tunnels == [f"127.0.0.1:{fake.port}"]
    assert len(fake.requests) == 1
