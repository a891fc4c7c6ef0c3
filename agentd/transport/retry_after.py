"""When agentd's own clients send a refused request again (issue 32, item 4: bursts queue,
never fail). A refusal that names `retryAfter` — the database overloaded, the rate limit, a
session stopping or owned by another replica — is tried again after that wait, a bounded
number of times; any other error, or one marked `retryable: false`, goes to the user.
A pure function: the stdio bridge and `agentd chat` (agentd/transport/bridge.py) and the
web page (agentd/web/static) follow the same rule."""

from __future__ import annotations

from typing import Any

MAX_RETRIES = 8  # then the refusal is the answer (a server that stays overloaded)
MAX_WAIT_S = 10.0  # a wait named longer than this is shortened to it


def retry_wait(error: Any, retries: int) -> float | None:
    """Seconds to wait before sending the refused request again, or None to pass `error` on.
    `retries`: how many times this request was already sent again."""
    if retries >= MAX_RETRIES or not isinstance(error, dict):
        return None
    data = error.get("data")
    if not isinstance(data, dict) or data.get("retryable") is False:
        return None
    wait = data.get("retryAfter")
    if isinstance(wait, bool) or not isinstance(wait, int | float) or wait != wait:  # NaN
        return None
    return min(max(float(wait), 0.0), MAX_WAIT_S)
