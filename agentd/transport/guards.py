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
from typing import TYPE_CHECKING, Any

from agentd.core import limit_exceeded, prompt_bytes
from agentd.protocol import ErrorCode, RpcError

if TYPE_CHECKING:
    from agentd.protocol import ContentBlock


def json_depth(value: Any, limit: int = 0) -> int:
    """How deeply containers nest (a scalar is 0, `[]` is 1), for a value decoded from JSON
    (its containers are exactly `dict` and `list`). With a `limit`, the walk stops one level
    past it (the answer is then `limit + 1`): a refusal needs no more.

    Level by level, not recursive (a hostile document cannot exhaust the stack), and one
    comprehension per level rather than calls per container (issue 32: a prompt's message
    is four levels, walked in a handful of calls; a thousand strings cost no call each)."""
    kind = type(value)
    if kind is not dict and kind is not list:
        return 0
    level: list[Any] = [value]
    depth = 0
    while level:
        depth += 1
        if limit and depth > limit:
            break
        level = [
            child
            for item in level
            for child in (item.values() if type(item) is dict else item)
            if type(child) is dict or type(child) is list
        ]
    return depth


def within_depth(text: str, maximum: int) -> bool:
    """Whether a JSON text surely nests no deeper than `maximum` without decoding or walking
    it: every level opens with a `[` or `{`, so fewer of those characters (counted in strings
    too: an upper bound) than the limit settles it in two C calls. False means "walk it"."""
    return text.count("[") + text.count("{") <= maximum


def check_depth(raw: Any, maximum: int) -> RpcError | None:
    if maximum and json_depth(raw, maximum) > maximum:
        return RpcError(
            ErrorCode.INVALID_REQUEST,
            f"Invalid Request: JSON nested deeper than {maximum} levels",
            {"limit": "json_depth", "max": maximum},
        )
    return None


# What a prompt costs the rate limiter beyond its 1 unit (issue 28 item 4): validating,
# storing and rendering it scale with its blocks and its bytes, not with the request count.
BLOCKS_PER_UNIT = 20
BYTES_PER_UNIT = 16 * 1024


def prompt_of(raw: Any) -> list[Any] | None:
    """The `prompt` array of a raw request's params, if it has one (read without walking it)."""
    # (decoded from JSON, so its containers are exactly `dict` and `list`: compared by type,
    # and keys tested with `in`, no call per request)
    if type(raw) is not dict or "params" not in raw:
        return None
    params = raw["params"]
    if type(params) is not dict or "prompt" not in params:
        return None
    prompt = params["prompt"]
    return prompt if type(prompt) is list else None


def check_prompt_blocks(prompt: list[Any] | None, maximum: int) -> RpcError | None:
    """Too many content blocks: refused before the request is validated or charged further
    (the count is the list's length: nothing of it is read)."""
    if prompt is None or not maximum or len(prompt) <= maximum:
        return None
    return limit_exceeded(
        "prompt_blocks",
        maximum,
        f"prompt has too many content blocks: {len(prompt)} (at most {maximum})",
        size=len(prompt),
    )


def request_cost(prompt: list[Any] | None) -> float:
    """The rate-limiter units a request costs: 1, plus a prompt's blocks and text bytes.
    Only called on a prompt within the block limit, so this walk is bounded."""
    if not prompt:
        return 1.0
    text_bytes = 0
    for block in prompt:
        if type(block) is dict:  # (decoded from JSON: exactly `dict`, `list`, `str`)
            text = block["text"] if "text" in block else None
            if type(text) is str:
                text_bytes += len(text)  # characters: close enough, and no encoding pass
            resource = block["resource"] if "resource" in block else None
            if type(resource) is dict:
                for key in ("text", "blob"):
                    value = resource.get(key)
                    if isinstance(value, str):
                        text_bytes += len(value)
    return 1.0 + len(prompt) / BLOCKS_PER_UNIT + text_bytes / BYTES_PER_UNIT


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
        return f"conn:{conn_id}"  # connection_key(conn_id), without the call per request
    return f"addr:{remote or 'unknown'}"


@dataclass
class RateLimiter:
    """A token bucket per key (see `rate_key`): `rate` units a second on average, bursts up
    to `burst`; a request costs its `cost` in units (`request_cost`: a plain request 1, a
    prompt by its size). `rate` 0 switches it off."""

    rate: float
    burst: int
    clock: Callable[[], float] = time.monotonic
    _buckets: dict[str, tuple[float, float]] = field(default_factory=dict)  # key → (tokens, at)

    def allow(self, key: str, cost: float = 1.0) -> float | None:
        """None when the request may go on (its cost is charged), else the seconds until it
        would be allowed. A cost above the burst is charged as the burst: the largest valid
        request must stay possible."""
        if self.rate <= 0:
            return None
        burst = float(self.burst)
        # (`min`/`max` written out: no builtin call per request)
        cost = burst if cost > burst else 1.0 if cost < 1.0 else cost
        now = self.clock()
        buckets = self._buckets
        if key in buckets:
            tokens, at = buckets[key]
            tokens += (now - at) * self.rate
            if tokens > burst:
                tokens = burst
        else:
            tokens = burst
        if tokens < cost:
            self._buckets[key] = (tokens, now)
            return (cost - tokens) / self.rate
        self._buckets[key] = (tokens - cost, now)
        return None

    def forget(self, key: str) -> None:
        """Drop a bucket whose owner is gone (a closed connection)."""
        self._buckets.pop(key, None)
