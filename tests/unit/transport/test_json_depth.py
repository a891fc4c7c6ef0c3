"""`json_depth` walks level by level with one comprehension per level (issue 32): the same
answers as a plain recursive count, and with a limit it stops one level past it."""

from __future__ import annotations

import random
from typing import Any

import orjson

from agentd.transport.guards import check_depth, json_depth


def reference_depth(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max((reference_depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((reference_depth(v) for v in value), default=0)
    return 0


def random_document(rng: random.Random, depth: int = 0) -> Any:
    roll = rng.random()
    if depth > 7 or roll < 0.3:
        return rng.choice([1, "x", None, 2.5, True, "[{"])
    if roll < 0.65:
        return [random_document(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    return {str(i): random_document(rng, depth + 1) for i in range(rng.randint(0, 4))}


def test_depth_matches_a_recursive_count_on_random_documents() -> None:
    rng = random.Random(32)
    for _ in range(3000):
        doc = orjson.loads(orjson.dumps(random_document(rng)))  # as the transport decodes it
        expected = reference_depth(doc)
        assert json_depth(doc) == expected
        for limit in (1, 2, 3, 5):
            assert (json_depth(doc, limit) > limit) == (expected > limit)


def test_a_limit_stops_the_walk_one_level_past_it() -> None:
    deep: Any = []
    for _ in range(10_000):
        deep = [deep]
    assert json_depth(deep) == 10_001
    assert json_depth(deep, 64) == 65
    assert check_depth(deep, 64) is not None
    assert check_depth(deep, 0) is None  # 0: no limit


def test_a_prompt_request_is_four_levels() -> None:
    raw = orjson.loads(
        b'{"jsonrpc":"2.0","id":1,"method":"session/prompt",'
        b'"params":{"sessionId":"s","prompt":[{"type":"text","text":"hi"}]}}'
    )
    assert json_depth(raw) == 4
    assert check_depth(raw, 4) is None
    assert check_depth(raw, 3) is not None
