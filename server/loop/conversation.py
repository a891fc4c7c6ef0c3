"""Re-exports messages and tool calls: they live in `server.core.conversation`
(the shared domain types, below every layer); this old path keeps working."""

from server.core.conversation import (  # re-export
    Image,
    Message,
    ToolCall,
)

__all__ = [
    "Image",
    "Message",
    "ToolCall",
]
