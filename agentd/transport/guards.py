"""Input limits (R-X3): each answers "may this go on?" and never acts — the dispatcher,
the handlers and the actor turn a refusal into a JSON-RPC error that leaves the
connection and the session intact.

Frame size is checked where frames arrive (connection.py, http.py); here are nesting
depth, request rate, prompt size, queue length and sessions per principal.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from agentd.core.input_limits import limit_exceeded, prompt_bytes  # re-exported from here too
from agentd.protocol.acp import ContentBlock
from agentd.protocol.jsonrpc import ErrorCode, RpcError


def json_depth(value: Any) -> int:
    """How deeply containers nest (a scalar is 0, `[]` is 1). Iterative: a hostile
    document cannot exhaust the stack."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        depth += 1
        deepest = max(deepest, depth)
        stack.extend((child, depth) for child in children)
    return deepest


def check_depth(raw: Any, maximum: int) -> RpcError | None:
    if maximum and json_depth(raw) > maximum:
        return RpcError(
            ErrorCode.INVALID_REQUEST,
            f"Invalid Request: JSON nested deeper than {maximum} levels",
            {"limit": "json_depth", "max": maximum},
        )
    return None


def check_prompt_size(blocks: Sequence[ContentBlock], maximum: int) -> None:
    size = prompt_bytes(blocks)
    if maximum and size > maximum:
        raise limit_exceeded(
            "prompt_bytes", maximum, f"prompt too large: {size} bytes (at most {maximum})", size=size
        )


def connection_key(conn_id: str) -> str:
    return f"conn:{conn_id}"


def rate_key(auth_on: bool, principal: str, conn_id: str | None, remote: str | None) -> str:
    """Whose bucket a request draws from. With auth, the principal's: a token holder
    cannot dodge the limit by opening more connections. Without auth every caller is the
    same local user, so one shared bucket would let one busy client (a script, a runaway
    tab) starve all the others: each connection (over HTTP, each remote address) gets its own."""
    if auth_on:
        return f"principal:{principal}"
    if conn_id is not None:
        return connection_key(conn_id)
    return f"addr:{remote or 'unknown'}"


@dataclass
class RateLimiter:
    """A token bucket per key (see `rate_key`): `rate` requests a second on average,
    bursts up to `burst`. `rate` 0 switches it off."""

    rate: float
    burst: int
    clock: Callable[[], float] = time.monotonic
    _buckets: dict[str, tuple[float, float]] = field(default_factory=dict)  # key → (tokens, at)

    def allow(self, key: str) -> float | None:
        """None when the request may go on, else the seconds until one would be allowed."""
        if self.rate <= 0:
            return None
        now = self.clock()
        tokens, at = self._buckets.get(key, (float(self.burst), now))
        tokens = min(float(self.burst), tokens + (now - at) * self.rate)
        if tokens < 1.0:
            self._buckets[key] = (tokens, now)
            return (1.0 - tokens) / self.rate
        self._buckets[key] = (tokens - 1.0, now)
        return None

    def forget(self, key: str) -> None:
        """Drop a bucket whose owner is gone (a closed connection)."""
        self._buckets.pop(key, None)
