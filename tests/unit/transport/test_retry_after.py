"""The rule agentd's own clients follow for a refused request (agentd/transport/retry_after.py):
wait what `retryAfter` names (capped), a bounded number of times; anything else is the answer."""

from __future__ import annotations

from typing import Any

import pytest

from agentd.transport.retry_after import MAX_RETRIES, MAX_WAIT_S, retry_wait


def refusal(**data: Any) -> dict[str, Any]:
    return {"code": -32019, "message": "server overloaded", "data": data}


def test_an_overload_refusal_is_retried_after_the_wait_it_names() -> None:
    assert retry_wait(refusal(limit="db_pool", retryable=True, retryAfter=1.0), 0) == 1.0
    assert retry_wait(refusal(limit="rate", retryAfter=0.25), 3) == 0.25  # the rate limit says no `retryable`


def test_the_wait_is_capped_and_the_retries_bounded() -> None:
    assert retry_wait(refusal(retryAfter=3600), 0) == MAX_WAIT_S
    assert retry_wait(refusal(retryAfter=-5), 0) == 0.0
    assert retry_wait(refusal(retryAfter=1.0), MAX_RETRIES - 1) == 1.0
    assert retry_wait(refusal(retryAfter=1.0), MAX_RETRIES) is None


@pytest.mark.parametrize(
    "error",
    [
        refusal(retryable=False, retryAfter=1.0),  # said not to retry
        refusal(limit="prompt_bytes", max=10),  # an input limit: the same request fails again
        refusal(retryAfter="soon"),
        refusal(retryAfter=True),
        refusal(retryAfter=float("nan")),
        {"code": -32603, "message": "Internal error"},
        {"code": -32019, "message": "x", "data": [1]},
        "not an error object",
    ],
)
def test_anything_else_is_the_answer(error: Any) -> None:
    assert retry_wait(error, 0) is None
