"""The public names of `agentd.transport`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentd._faces import lazy_face

if TYPE_CHECKING:
    from agentd.transport.bridge import Bridge as Bridge
    from agentd.transport.bridge import check_url as check_url
    from agentd.transport.docs import docs_router as docs_router
    from agentd.transport.early import EarlyStart as EarlyStart
    from agentd.transport.early import LoadFailed as LoadFailed
    from agentd.transport.early import answer_initialize as answer_initialize
    from agentd.transport.early import one_line as one_line
    from agentd.transport.early import protocol_stdout as protocol_stdout
    from agentd.transport.early import refuse_pending as refuse_pending
    from agentd.transport.guards import RateLimiter as RateLimiter
    from agentd.transport.handlers import METHODS as METHODS
    from agentd.transport.handlers import UNSUPPORTED as UNSUPPORTED
    from agentd.transport.http import auth_unavailable as auth_unavailable
    from agentd.transport.http import http_router as http_router
    from agentd.transport.origin import OriginGuard as OriginGuard
    from agentd.transport.render import ACP_RENDERER as ACP_RENDERER
    from agentd.transport.revocation import LiveTokens as LiveTokens
    from agentd.transport.routed import start_routing as start_routing
    from agentd.transport.rpc import Dispatcher as Dispatcher
    from agentd.transport.rpc import Method as Method
    from agentd.transport.socket_write import KeepRawSend as KeepRawSend
    from agentd.transport.sse import sse_router as sse_router
    from agentd.transport.state import AppState as AppState
    from agentd.transport.stdio import bridge_stdio as bridge_stdio
    from agentd.transport.stdio import serve_stdio as serve_stdio
    from agentd.transport.streamable_http import close_all as close_all
    from agentd.transport.streamable_http import streamable_router as streamable_router
    from agentd.transport.websocket import acp_endpoint as acp_endpoint

# The public names, each loaded from its module on first use (PEP 562): importing the package
# costs nothing, so a started server loads only what it runs.
_WHERE = {
    "acp_endpoint": "agentd.transport.websocket",
    "answer_initialize": "agentd.transport.early",
    "EarlyStart": "agentd.transport.early",
    "LoadFailed": "agentd.transport.early",
    "one_line": "agentd.transport.early",
    "protocol_stdout": "agentd.transport.early",
    "refuse_pending": "agentd.transport.early",
    "ACP_RENDERER": "agentd.transport.render",
    "AppState": "agentd.transport.state",
    "auth_unavailable": "agentd.transport.http",
    "Bridge": "agentd.transport.bridge",
    "bridge_stdio": "agentd.transport.stdio",
    "check_url": "agentd.transport.bridge",
    "close_all": "agentd.transport.streamable_http",
    "Dispatcher": "agentd.transport.rpc",
    "Method": "agentd.transport.rpc",
    "docs_router": "agentd.transport.docs",
    "KeepRawSend": "agentd.transport.socket_write",
    "http_router": "agentd.transport.http",
    "LiveTokens": "agentd.transport.revocation",
    "METHODS": "agentd.transport.handlers",
    "OriginGuard": "agentd.transport.origin",
    "RateLimiter": "agentd.transport.guards",
    "serve_stdio": "agentd.transport.stdio",
    "sse_router": "agentd.transport.sse",
    "start_routing": "agentd.transport.routed",
    "streamable_router": "agentd.transport.streamable_http",
    "UNSUPPORTED": "agentd.transport.handlers",
}


__all__ = [
    "ACP_RENDERER",
    "METHODS",
    "UNSUPPORTED",
    "AppState",
    "Bridge",
    "Dispatcher",
    "EarlyStart",
    "KeepRawSend",
    "LiveTokens",
    "LoadFailed",
    "Method",
    "OriginGuard",
    "RateLimiter",
    "acp_endpoint",
    "answer_initialize",
    "auth_unavailable",
    "bridge_stdio",
    "check_url",
    "close_all",
    "docs_router",
    "http_router",
    "one_line",
    "protocol_stdout",
    "refuse_pending",
    "serve_stdio",
    "sse_router",
    "start_routing",
    "streamable_router",
]

__getattr__, __dir__ = lazy_face(globals(), _WHERE)
