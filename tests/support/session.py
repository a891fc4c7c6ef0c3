"""The one session helper, plus the few things nearly every end-to-end test asks of a
session: a server with a client and a session on it (`served_session`), its
`_agentd/event` payloads, its turn's end, frame validation, scripted tool calls."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, NamedTuple, Protocol

from tests.support.acp_schema import AcpValidator
from tests.support.client import WsClient


class Caller(Protocol):
    async def call(self, method: str, params: dict[str, Any] | None = None, **kw: Any) -> Any: ...


async def open_session(
    client: Caller, cwd: Path | str, *, agent: str | None = None, **extra: Any
) -> dict[str, Any]:
    """`session/new` in `cwd` with no MCP servers; the whole result. `agent` picks an agent
    definition (`_meta.agentd.agent`); `extra` goes into the params as is."""
    params: dict[str, Any] = {"cwd": str(cwd), "mcpServers": [], **extra}
    if agent is not None:
        params["_meta"] = {"agentd": {"agent": agent}}
    result: dict[str, Any] = await client.call("session/new", params)
    return result


async def new_session(client: Caller, cwd: Path | str, *, agent: str | None = None, **extra: Any) -> str:
    """`session/new` in `cwd` with no MCP servers; the new session's id."""
    return str((await open_session(client, cwd, agent=agent, **extra))["sessionId"])


class Served(NamedTuple):
    """A running server, one initialized client on it, and that client's new session."""

    server: Any  # tests.support.server.Server
    client: WsClient
    sid: str


@contextlib.asynccontextmanager
async def served_session(
    server_factory: Callable[..., Any],
    cwd: Path | str,
    provider: Any,
    *,
    agent: str | None = None,
    **settings: Any,
) -> AsyncIterator[Served]:
    """`server_factory(provider, **settings)` (the conftest fixture), a client connected
    and initialized, and `session/new` in `cwd` (with the agent definition `agent`): the
    set-up of most end-to-end tests, as `async with served_session(...) as (server,
    client, sid):`. The client is closed on the way out."""
    async with server_factory(provider, **settings) as server:
        client = await server.client()
        try:
            yield Served(server, client, await new_session(client, cwd, agent=agent))
        finally:
            await client.close()


def events(client: WsClient, session_id: str, kind: str) -> list[dict[str, Any]]:
    """Payloads of every `_agentd/event` of `kind` for the session, in order."""
    return [
        f["params"]["event"]
        for f in client.frames
        if isinstance(f, dict)
        and f.get("method") == "_agentd/event"
        and f["params"]["sessionId"] == session_id
        and f["params"]["kind"] == kind
    ]


def resyncs(client: WsClient, session_id: str) -> list[dict[str, Any]]:
    """The params of every `_agentd/resync_required` the client got for the session."""
    return [
        f["params"]
        for f in client.frames
        if isinstance(f, dict)
        and f.get("method") == "_agentd/resync_required"
        and f["params"].get("sessionId") == session_id
    ]


def the_turn_end(client: WsClient, session_id: str) -> dict[str, Any]:
    """The payload of the session's one `turn_ended` event (asserts there is exactly one)."""
    ended = events(client, session_id, "turn_ended")
    assert len(ended) == 1, ended
    return ended[0]


def assert_valid_frames(client: WsClient) -> None:
    """Every frame the server sent is valid ACP (extension frames: envelope and camelCase)."""
    validator = AcpValidator.default()
    for frame in client.frames:
        validator.assert_valid_agent_frame(frame, client.sent_methods)


def tool_call(name: str, call_id: str, **arguments: Any) -> dict[str, Any]:
    """A scripted provider step's tool call."""
    return {"name": name, "arguments": arguments, "id": call_id}


async def cancel(client: WsClient, session_id: str) -> None:
    await client.notify("session/cancel", {"sessionId": session_id})


def is_update(session_id: str, kind: str, **fields: Any) -> Callable[[dict[str, Any]], bool]:
    """Matches the session's `session/update` of `kind` whose update has `fields`."""

    def predicate(msg: dict[str, Any]) -> bool:
        if msg.get("method") != "session/update" or msg["params"]["sessionId"] != session_id:
            return False
        update = msg["params"]["update"]
        return update["sessionUpdate"] == kind and all(update.get(k) == v for k, v in fields.items())

    return predicate


def is_event(session_id: str, kind: str, **fields: Any) -> Callable[[dict[str, Any]], bool]:
    """Matches the session's `_agentd/event` of `kind` whose event payload has `fields`."""

    def predicate(msg: dict[str, Any]) -> bool:
        return (
            msg.get("method") == "_agentd/event"
            and msg["params"]["sessionId"] == session_id
            and msg["params"]["kind"] == kind
            and all(msg["params"]["event"].get(k) == v for k, v in fields.items())
        )

    return predicate


def final_tool_updates(client: WsClient, session_id: str) -> dict[str, dict[str, Any]]:
    """The last status-carrying tool_call_update per tool call id."""
    out: dict[str, dict[str, Any]] = {}
    for u in client.updates(session_id):
        if u["sessionUpdate"] == "tool_call_update" and "status" in u:
            out[u["toolCallId"]] = u
    return out


def shown_text(update: dict[str, Any]) -> str:
    """The text content blocks of a tool call update, as a client shows them."""
    return " ".join(c["content"]["text"] for c in update.get("content") or [] if c["type"] == "content")


def queue_of_length(session_id: str, n: int) -> Callable[[dict[str, Any]], bool]:
    """Matches the session's `queue_update` event once the queue holds `n` entries."""

    def predicate(msg: dict[str, Any]) -> bool:
        return (
            msg.get("method") == "_agentd/event"
            and msg["params"]["sessionId"] == session_id
            and msg["params"]["kind"] == "queue_update"
            and msg["params"]["event"]["length"] == n
        )

    return predicate
