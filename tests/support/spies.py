"""Spies on server internals a test cannot observe otherwise."""

from __future__ import annotations

import asyncio
from typing import Any


class SubmitSpy:
    """Records what the session actors hand the event writer, in order, with the loop time."""

    def __init__(self, writer: Any) -> None:
        self.calls: list[tuple[float, dict[str, Any]]] = []
        self._submit = writer.submit
        self._submit_event = writer.submit_event
        writer.submit = self
        writer.submit_event = self.submit_event

    def __call__(self, session_id: str, **kw: Any) -> None:
        self.calls.append((asyncio.get_running_loop().time(), kw))
        self._submit(session_id, **kw)

    def submit_event(
        self, session_id: str, event: Any, publish: Any, session_fields: Any = None, messages: Any = None
    ) -> None:
        """The journal's events (with the session row's fields of their own commit) and its
        conversation rows (`event` None), recorded as the `submit(event=…, publish=…,
        session_fields=…)` or `submit(messages=…)` they stand for."""
        kw: dict[str, Any] = {"event": event, "publish": publish} if event is not None else {}
        if session_fields is not None:
            kw["session_fields"] = session_fields
        if messages is not None:
            kw["messages"] = messages
        self.calls.append((asyncio.get_running_loop().time(), kw))
        self._submit_event(session_id, event, publish, session_fields, messages)

    def checkpoints(self) -> list[tuple[float, dict[str, Any] | None]]:
        return [
            (t, kw["session_fields"]["partial"])
            for t, kw in self.calls
            if "partial" in (kw.get("session_fields") or {})
        ]
