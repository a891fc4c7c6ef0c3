"""Session events: what happened, in order.

Durable events get a per-session `seq` and are committed to the log before any client
sees them (R-E1/R-E2). Transient events (streaming deltas) have no seq of their own;
they ride the same ordered pipeline so they never overtake a durable event.

An event carries its typed update (`agentd/core/updates/`); its bytes (`data`) are encoded
once, by the codec, on first use — the writer stores them and the live paths and frames
embed them as they are.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

from agentd.core.codec import decode, encode
from agentd.core.kinds import TRANSIENT_KINDS, EventKind
from agentd.core.updates import Update

__all__ = ["TRANSIENT_KINDS", "Event", "EventKind"]


@dataclass(frozen=True)
class Event:
    session_id: str
    update: Update
    seq: int | None = None  # None for transient events
    # The connection whose request caused it (its own user message is not echoed back).
    origin: str | None = None

    @classmethod
    def stored(
        cls,
        session_id: str,
        kind: EventKind | str,
        data: bytes | str | dict[str, Any],
        seq: int | None = None,
    ) -> Event:
        """An event read back from the log (its payload's bytes or the JSON column's value)."""
        event = cls(session_id, decode(EventKind(kind), data), seq=seq)
        if isinstance(data, bytes):
            event.__dict__["data"] = data  # the stored bytes are the encoding: not again
        return event

    @property
    def kind(self) -> EventKind:
        return self.update.kind

    @property
    def durable(self) -> bool:
        return self.seq is not None

    @cached_property
    def data(self) -> bytes:
        """The payload's bytes, as stored and sent (encoded once, on first use)."""
        return encode(self.update, self.payload)  # the payload dict, built once for both

    @cached_property
    def payload(self) -> dict[str, Any]:
        """The payload as a dict, for readers of a few keys (never written back)."""
        return self.update.payload()
