"""Spies on server internals a test cannot observe otherwise."""

from __future__ import annotations

import asyncio
from typing import Any


class SubmitSpy:
    """Records what the session actors hand the event writer, in order, with the loop time."""

    def __init__(self, writer: Any) -> None:
        self.calls: list[tuple[float, dict[str, Any]]] = []
        self._submit = writer.submit
        writer.submit = self

    def __call__(self, session_id: str, **kw: Any) -> None:
        self.calls.append((asyncio.get_running_loop().time(), kw))
        self._submit(session_id, **kw)

    def checkpoints(self) -> list[tuple[float, dict[str, Any] | None]]:
        return [
            (t, kw["session_fields"]["partial"])
            for t, kw in self.calls
            if "partial" in (kw.get("session_fields") or {})
        ]
