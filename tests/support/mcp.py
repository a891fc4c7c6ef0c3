"""The fake stdio MCP server (a calculator) as a session's `mcpServers` entry."""

from __future__ import annotations

import sys
from typing import Any

from tests.support.paths import SUPPORT_DIR

CALC = str(SUPPORT_DIR / "fakes" / "mcp_calc.py")


def calc_stdio(*extra: str, **env: str) -> dict[str, Any]:
    return {
        "name": "calc",
        "command": sys.executable,
        "args": [CALC, *extra],
        "env": [{"name": k, "value": v} for k, v in env.items()],
    }
