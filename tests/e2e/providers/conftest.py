"""The provider e2e modules that mark themselves with `usefixtures("each_http_transport")`
run once per model-call transport (AGENTD_HTTP_TRANSPORT=lean|httpx)."""

from __future__ import annotations

import pytest

from agentd.infra.config import HttpTransport
from agentd.providers.http import pool as http_pool


@pytest.fixture(params=list(HttpTransport), ids=lambda t: f"http-{t.value}")
def each_http_transport(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> HttpTransport:
    transport: HttpTransport = request.param
    monkeypatch.setattr(http_pool, "DEFAULT_TRANSPORT", transport)  # providers built directly
    monkeypatch.setenv("AGENTD_HTTP_TRANSPORT", transport.value)  # and from `Settings`
    return transport
