"""Issue 28 item 4: what a request costs the rate limiter, the block cap, and a bucket
charged by cost — pure, with a fake clock."""

from __future__ import annotations

from typing import Any

from agentd.transport.guards import (
    BLOCKS_PER_UNIT,
    BYTES_PER_UNIT,
    RateLimiter,
    check_prompt_blocks,
    prompt_of,
    request_cost,
)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def request(prompt: Any) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "session/prompt",
        "params": {"sessionId": "s", "prompt": prompt},
    }


def test_the_prompt_is_found_without_reading_it() -> None:
    blocks = [{"type": "text", "text": "a"}]
    assert prompt_of(request(blocks)) is blocks
    assert prompt_of(request("not a list")) is None
    assert prompt_of({"jsonrpc": "2.0", "method": "session/list"}) is None
    assert prompt_of([request(blocks)]) is None  # a batch: each item is looked at on its own


def test_the_block_cap() -> None:
    assert check_prompt_blocks([{}] * 1000, 1000) is None
    refused = check_prompt_blocks([{}] * 1001, 1000)
    assert refused is not None and refused.code == -32019
    assert refused.data == {"limit": "prompt_blocks", "max": 1000, "size": 1001}
    assert check_prompt_blocks([{}] * 50_000, 0) is None  # 0 switches it off
    assert check_prompt_blocks(None, 1000) is None


def test_a_request_costs_one_unit_and_a_prompt_its_blocks_and_bytes() -> None:
    assert request_cost(None) == 1.0
    assert request_cost([]) == 1.0
    one_block = request_cost([{"type": "text", "text": "hi"}])
    assert 1.0 < one_block < 1.1
    many_small = request_cost([{"type": "text", "text": "x"}] * 1000)
    assert many_small > 1.0 + 1000 / BLOCKS_PER_UNIT - 0.01
    big = request_cost([{"type": "text", "text": "x" * BYTES_PER_UNIT * 4}])
    assert big > 5.0
    embedded = [{"type": "resource", "resource": {"uri": "file:///a", "text": "y" * BYTES_PER_UNIT}}]
    assert request_cost(embedded) > 2.0


def test_a_bucket_is_charged_by_cost() -> None:
    clock = Clock()
    limiter = RateLimiter(rate=10, burst=100, clock=clock)
    assert limiter.allow("a", cost=60) is None
    wait = limiter.allow("a", cost=60)  # 40 left: refused, and told when it would pass
    assert wait is not None and abs(wait - 2.0) < 1e-9
    assert limiter.allow("b", cost=1) is None  # another principal's bucket is untouched
    assert limiter.allow("a", cost=1) is None  # a cheap request still fits
    clock.now += 2.1
    assert limiter.allow("a", cost=60) is None


def test_a_cost_above_the_burst_is_charged_as_the_burst() -> None:
    clock = Clock()
    limiter = RateLimiter(rate=10, burst=100, clock=clock)
    assert limiter.allow("a", cost=1000) is None  # the largest valid request stays possible
    assert limiter.allow("a", cost=1) is not None  # ...and emptied the bucket
    clock.now += 10
    assert limiter.allow("a", cost=1000) is None
