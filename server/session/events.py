"""Re-exports event kinds and events: they live in `server.core.events`
(the shared domain types, below every layer); this old path keeps working."""

from server.core.events import (  # re-export
    TRANSIENT_KINDS,
    Event,
    EventKind,
)

__all__ = [
    "TRANSIENT_KINDS",
    "Event",
    "EventKind",
]
