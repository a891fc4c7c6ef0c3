"""The ACP SDK's client over the Streamable HTTP transport (POST /acp and its SSE stream),
initialized, every frame recorded."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import httpx
from acp import connect_to_agent
from acp.http import create_http_stream

from tests.support.acp_sdk import RecordingClient, RecordingTransport


@contextlib.asynccontextmanager
async def http_sdk(
    base_url: str, **headers: str
) -> AsyncIterator[tuple[Any, RecordingClient, RecordingTransport]]:
    http = httpx.AsyncClient(timeout=httpx.Timeout(None))
    transport = RecordingTransport(
        create_http_stream(base_url + "/acp", client=http, headers=headers or None)
    )
    client = RecordingClient()
    conn = connect_to_agent(client, transport)
    try:
        init = await asyncio.wait_for(conn.initialize(protocol_version=1), 30)
        assert init.protocol_version == 1
        yield conn, client, transport
    finally:
        await conn.close()
        await http.aclose()
