"""agentd's `_agentd/` extension methods (R-P3): params models and method names."""

from __future__ import annotations

from pydantic import Field

from protocol.acp import ContentBlock, Wire

INTERJECT = "_agentd/interject"


class InterjectParams(Wire):
    session_id: str
    prompt: list[ContentBlock] = Field(min_length=1)
    # Fail with `turn_not_active` unless this turn is still running.
    expected_turn_id: str | None = None


COMPACT = "_agentd/session/compact"
USAGE_GET = "_agentd/usage/get"


class SessionParams(Wire):
    session_id: str
