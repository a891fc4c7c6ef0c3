"""The fake stdio MCP server (a calculator) as a session's `mcpServers` entry."""

from __future__ import annotations

import sys
from typing import Any

from tests.support.paths import SUPPORT_DIR

CALC = str(SUPPORT_DIR / "fakes" / "mcp_calc.py")


def calc_stdio(
    *extra: str, name: str = "calc", start_timeout: float | None = None, **env: str
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "name": name,
        "command": sys.executable,
        "args": [CALC, *extra],
        "env": [{"name": k, "value": v} for k, v in env.items()],
    }
    if start_timeout is not None:  # agentd's per-server start timeout
        spec["_meta"] = {"agentd": {"startTimeoutSeconds": start_timeout}}
    return spec
