"""http_common.open_stream: the body as compact JSON (orjson) with one Content-Type,
whether or not the provider names it (Anthropic does, lowercase)."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from agentd.core.errors import HarnessError
from agentd.providers.http.common import open_stream

BODY: dict[str, Any] = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "héllo ✓"}]}


async def sent_request(headers: dict[str, str], body: dict[str, Any] = BODY) -> httpx.Request:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=b"data: [DONE]\n\n")

    async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
        response, _ = await open_stream(
            client, "http://model.test/v1/chat/completions", body, headers, httpx.Timeout(5),
            base_url="http://model.test/v1", first_token_timeout=None,
            classify=lambda status, body, headers: HarnessError("http_error", str(status)),  # type: ignore[arg-type]
        )  # fmt: skip
        await response.aclose()
    return seen[0]


@pytest.mark.parametrize(
    "headers",
    [{"Accept": "text/event-stream"}, {"content-type": "application/json", "x-api-key": "k"}],
)
async def test_one_content_type_and_the_same_json(headers: dict[str, str]) -> None:
    request = await sent_request(headers)
    assert request.headers.get_list("content-type") == ["application/json"]
    assert json.loads(request.content) == BODY
    for name, value in headers.items():
        assert request.headers[name] == value


async def test_a_body_that_is_not_json_is_an_invalid_request() -> None:
    with pytest.raises(HarnessError) as err:
        await sent_request({}, {"model": object()})
    assert err.value.kind == "invalid_request"
