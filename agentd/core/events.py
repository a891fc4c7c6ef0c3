"""Session events: what happened, in order.

Durable events get a per-session `seq` and are committed to the log before any client
sees them (R-E1/R-E2). Transient events (streaming deltas) have no seq of their own;
they ride the same ordered pipeline so they never overtake a durable event.

An event carries its typed update (`agentd/core/updates/`); its bytes (`data`) are encoded
once, by the codec, on first use — the writer stores them and the live paths and frames
embed them as they are.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import orjson

from agentd.core.codec import decode
from agentd.core.kinds import TRANSIENT_KINDS, EventKind
from agentd.core.updates import Update

__all__ = ["TRANSIENT_KINDS", "Event", "EventKind"]


@dataclass(frozen=True, init=False)
class Event:
    session_id: str
    update: Update
    seq: int | None = None  # None for transient events
    # The connection whose request caused it (its own user message is not echoed back).
    origin: str | None = None
    # Read on every hop (journal, writer, hub, render): plain attributes, set once here, not
    # properties recomputed per read.
    kind: EventKind = field(init=False, repr=False, compare=False)
    durable: bool = field(init=False, repr=False, compare=False)
    # The payload's bytes, as stored and sent, and the payload as a dict (for readers of a few
    # keys, never written back): each made once, on first read (`__getattr__` below).
    data: bytes = field(init=False, repr=False, compare=False)
    payload: dict[str, Any] = field(init=False, repr=False, compare=False)

    def __init__(
        self, session_id: str, update: Update, seq: int | None = None, origin: str | None = None
    ) -> None:
        put = self.__dict__
        put["session_id"] = session_id
        put["update"] = update
        put["seq"] = seq
        put["origin"] = origin
        put["kind"] = update.kind
        put["durable"] = seq is not None

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

    if not TYPE_CHECKING:  # mypy keeps checking every other attribute name

        def __getattr__(self, name: str) -> Any:
            # Only reached while `data` or `payload` is not yet in the instance's dict: one
            # call on first read (a `cached_property` costs two and takes a lock each time).
            put = self.__dict__
            if name == "payload":
                value = put["payload"] = self.update.payload()
                return value
            if name == "data":
                if "payload" in put:  # the dict, built once for both
                    payload = put["payload"]
                else:
                    payload = put["payload"] = self.update.payload()
                # `codec.encode(update, payload)` is this one orjson call: made here, one call less
                value = put["data"] = orjson.dumps(payload)
                return value
            raise AttributeError(name)
