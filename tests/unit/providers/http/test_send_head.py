"""`http_pool.send_head` hands the exchange the call's own timeouts, converted once per
timeout object (issue 32: `Timeout.as_dict()` per model call) and afresh when it changes."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from agentd.providers.http import pool as http_pool
from agentd.providers.http.common import default_ssl_context
from agentd.providers.http.lean import LeanTransport


class _Sent(Exception):
    pass


async def test_each_call_gets_its_own_timeouts_converted_once(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[dict[str, float | None]] = []

    async def exchange(self: LeanTransport, *args: Any, **kwargs: Any) -> Any:
        seen.append(args[4])
        raise _Sent

    monkeypatch.setattr(LeanTransport, "exchange", exchange)
    first, second = httpx.Timeout(30.0, connect=5.0), httpx.Timeout(1.0, read=0.25)
    client = http_pool.client(first, default_ssl_context())
    try:
        head = http_pool.lean_head(client, httpx.URL("http://127.0.0.1:9/v1/chat/completions"), {})
        assert head is not None
        for timeout in (first, first, second, first):
            with pytest.raises(_Sent):
                await http_pool.send_head(client, head, b"{}", timeout)
    finally:
        await client.aclose()
    assert seen == [first.as_dict(), first.as_dict(), second.as_dict(), first.as_dict()]
    assert seen[0] is seen[1]  # the same timeout: its dict kept, not made again
