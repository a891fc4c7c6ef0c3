"""The small methods the JSON-RPC path's unit tests dispatch to (tests/unit/transport:
test_rpc and test_hand_envelope): one with validated params, one that answers nothing, one
that refuses with a typed error, one that crashes, one that needs the connection."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from agentd.protocol.jsonrpc import ErrorCode, RpcError
from agentd.transport.rpc import CallContext, Method


class EchoParams(BaseModel):
    text: str


async def echo(ctx: CallContext, params: EchoParams) -> dict[str, Any]:
    return {"text": params.text}


async def nothing(ctx: CallContext, params: Any) -> None:
    return None


async def refuse(ctx: CallContext, params: Any) -> None:
    raise RpcError(ErrorCode.RESOURCE_NOT_FOUND, "Resource not found: x")


async def crash(ctx: CallContext, params: Any) -> None:
    raise ValueError("boom")


def rpc_methods() -> dict[str, Method]:
    """The five methods by name (a test adds its own on top)."""
    return {
        "echo": Method(EchoParams, echo),
        "nothing": Method(None, nothing),
        "refuse": Method(None, refuse),
        "crash": Method(None, crash),
        "live": Method(None, nothing, needs_connection=True),
    }
