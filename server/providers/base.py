"""Re-exports the provider protocol and stream events: they live in `server.core.provider`
(the shared domain types, below every layer); this old path keeps working."""

from server.core.provider import (  # re-export
    Provider,
    ProviderRequest,
    ReasoningDelta,
    Stop,
    StopReason,
    StreamEvent,
    TextDelta,
    ToolCallComplete,
    ToolCallDelta,
    ToolSpec,
    Usage,
)

__all__ = [
    "Provider",
    "ProviderRequest",
    "ReasoningDelta",
    "Stop",
    "StopReason",
    "StreamEvent",
    "TextDelta",
    "ToolCallComplete",
    "ToolCallDelta",
    "ToolSpec",
    "Usage",
]
