"""The official ACP Python SDK as a client of agentd: a recording client and transport."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from acp import RequestError, connect_to_agent
from acp.client.connection import ClientSideConnection
from acp.schema import (
    AgentMessageChunk,
    AllowedOutcome,
    PermissionOption,
    ReadTextFileResponse,
    RequestPermissionResponse,
    ToolCallUpdate,
    WriteTextFileResponse,
)
from acp.ws import create_websocket_stream

from tests.support.acp_schema import AcpValidator


class RecordingTransport:
    """A proxy around the SDK's transport: records what the server sent and our request ids."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.received: list[dict[str, Any]] = []  # every message from the server, in order
        self.request_methods: dict[Any, str] = {}  # our request id → method
        self.sent: list[dict[str, Any]] = []

    async def send(self, message: dict[str, Any]) -> None:
        if "method" in message and "id" in message:
            self.request_methods[message["id"]] = message["method"]
        self.sent.append(copy.deepcopy(message))
        await self.inner.send(message)

    async def receive(self) -> dict[str, Any] | None:
        message = await self.inner.receive()
        if message is not None:
            self.received.append(copy.deepcopy(message))
        return message

    async def close(self) -> None:
        await self.inner.close()

    def index_of_response(self, method: str) -> int:
        """Position (in `received`) of the last response to our last `method` request."""
        ids = [i for i, m in self.request_methods.items() if m == method]
        assert ids, f"no {method} request was sent"
        last = ids[-1]
        return next(
            i
            for i, f in enumerate(self.received)
            if "method" not in f and f.get("id") == last and ("result" in f or "error" in f)
        )

    def assert_all_frames_valid(self) -> None:
        validator = AcpValidator.default()
        assert self.received
        for frame in self.received:
            validator.assert_valid_agent_frame(frame, self.request_methods)


class RecordingClient:
    """An ACP `Client` (the SDK's interface) that records updates and allows once."""

    def __init__(self) -> None:
        self.updates: list[tuple[str, Any]] = []
        self.permission_requests: list[tuple[str, ToolCallUpdate, list[PermissionOption]]] = []
        self.ext_notifications: list[tuple[str, dict[str, Any]]] = []
        self.update_seen = asyncio.Event()
        self.conn: Any = None

    def on_connect(self, conn: Any) -> None:
        self.conn = conn

    async def request_permission(
        self, session_id: str, tool_call: ToolCallUpdate, options: list[PermissionOption], **kwargs: Any
    ) -> RequestPermissionResponse:
        self.permission_requests.append((session_id, tool_call, options))
        chosen = next(o for o in options if o.kind == "allow_once")
        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id=chosen.option_id)
        )

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append((session_id, update))
        if isinstance(update, AgentMessageChunk):
            self.update_seen.set()  # the turn is streaming (other updates may come first)

    async def write_text_file(
        self, session_id: str, path: str, content: str, **kwargs: Any
    ) -> WriteTextFileResponse | None:
        raise RequestError.method_not_found("fs/write_text_file")  # not advertised

    async def read_text_file(
        self, session_id: str, path: str, line: int | None = None, limit: int | None = None, **kwargs: Any
    ) -> ReadTextFileResponse:
        raise RequestError.method_not_found("fs/read_text_file")  # not advertised

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        raise RequestError.method_not_found(f"_{method}")

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        self.ext_notifications.append((method, params))

    # -- views

    def of(self, session_id: str, kind: type) -> list[Any]:
        return [u for sid, u in self.updates if sid == session_id and isinstance(u, kind)]

    def agent_text(self, session_id: str) -> str:
        return "".join(u.content.text for u in self.of(session_id, AgentMessageChunk))


class ErringClient(RecordingClient):
    """A client whose permission handler fails, as the SDK's own example client does
    (`-32601`): the question gets a JSON-RPC error instead of an answer."""

    async def request_permission(
        self, session_id: str, tool_call: ToolCallUpdate, options: list[PermissionOption], **kwargs: Any
    ) -> RequestPermissionResponse:
        self.permission_requests.append((session_id, tool_call, options))
        raise RequestError.method_not_found("session/request_permission")


@asynccontextmanager
async def sdk_connection(
    server: Any, client: RecordingClient | None = None, init_meta: dict[str, Any] | None = None
) -> AsyncIterator[tuple[ClientSideConnection, RecordingClient, RecordingTransport]]:
    """A connected, initialized SDK client on the server's `/acp` (`init_meta`: the
    `_meta` of its `initialize`, e.g. agentd's opt-in)."""
    ws_url = server.base_url.replace("http://", "ws://") + "/acp"
    transport = RecordingTransport(await create_websocket_stream(ws_url))
    client = client or RecordingClient()
    conn = connect_to_agent(client, transport)
    try:
        init = await conn.initialize(protocol_version=1, **(init_meta or {}))
        assert init.protocol_version == 1
        assert init.agent_capabilities is not None and init.agent_capabilities.load_session is True
        yield conn, client, transport
    finally:
        await conn.close()
