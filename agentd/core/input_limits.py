"""The two input-limit helpers both the transport and the session's queue use (R-X3): the
error a refused input gets, and the size a prompt brings in. Kept here, below both, so the
session never imports the transport."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from agentd import protocol
from agentd.protocol import ErrorCode, RpcError

if TYPE_CHECKING:
    from agentd.protocol import ContentBlock


def limit_exceeded(what: str, maximum: float, message: str, **extra: Any) -> RpcError:
    return RpcError(ErrorCode.LIMIT_EXCEEDED, message, {"limit": what, "max": maximum, **extra})


def prompt_bytes(blocks: Sequence[ContentBlock]) -> int:
    """The size a prompt brings into the conversation: its text and embedded resources.
    The wire models are the package face's (`protocol.TextContent`): they load with the
    first prompt, not in an idle server (issue 32 item 3)."""
    total = 0
    for block in blocks:
        if isinstance(block, protocol.TextContent):
            total += len(block.text.encode())
        elif isinstance(block, protocol.EmbeddedResource):
            total += len((block.resource.text or block.resource.blob or "").encode())
        else:
            total += len(block.model_dump_json().encode())
    return total
