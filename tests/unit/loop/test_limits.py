"""`LoopLimits.to_dict`: the limits in force as plain JSON data."""

from __future__ import annotations

import json

from agentd.loop.limits import LoopLimits
from agentd.loop.retry import Bucket


def test_the_limits_in_force_render_as_json_with_overrides_applied() -> None:
    limits = LoopLimits().with_overrides(
        {"retry": {"bucket_limits": {"network": 7}}, "stationarity": {"stop_at": 20}}
    )
    data = limits.to_dict()
    assert json.loads(json.dumps(data)) == data  # plain JSON: no enums, proxies or tuples left
    assert data["retry"]["bucket_limits"][Bucket.NETWORK.value] == 7
    assert data["stationarity"]["stop_at"] == 20
    assert set(data) == {
        "budget",
        "stationarity",
        "loop_detector",
        "repair",
        "max_tokens",
        "structured",
        "todo_gate",
        "compaction",
        "retry",
        "goal",
        "stop_hooks",
        "drain",
    }
