"""The server's state as the transport sees it: one `AppState` per app, built by the composition
root (`agentd/app.py`) and handed to every connection and handler. It lives in the transport layer
so the transport names it without importing upward."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

from agentd.core import Provider
from agentd.infra import Authenticator, AuthMode, Metrics, Settings
from agentd.session import ActorServices, EventWriter, FrameSink, SessionManager
from agentd.store import Store
from agentd.transport.guards import RateLimiter, rate_key
from agentd.transport.revocation import LiveTokens

if TYPE_CHECKING:
    from agentd.agents import AgentDefinition
    from agentd.protocol import ClientCapabilities, OptIn, Request
    from agentd.session import RemoteWatches, Router, SessionActor, SessionError, Subscriber

Replay = Literal["none", "acp", "attach"]


class Peer(FrameSink, Protocol):
    """What a call sees of the client connection it came on (`Connection`, which runs the
    dispatcher, so it is named here by what calls use of it)."""

    id: str
    sessions: set[str]  # attached session ids
    initialized: bool
    client_capabilities: ClientCapabilities
    opt_in: OptIn

    async def request(self, method: str, params: dict[str, Any]) -> Any: ...

    def supports_update(self, session_update: str) -> bool: ...

    def send_encoded(self, text: bytes) -> bool: ...

    def send_urgent(self, method: str, params: dict[str, Any]) -> None: ...


class Dispatch(Protocol):
    """The one JSON-RPC path (`agentd.transport.rpc.Dispatcher`), as the state holds it."""

    route: RouteHook | None

    async def call(self, request: Request, ctx: CallContext) -> Any: ...

    async def answer(self, raw: Any, ctx: CallContext) -> dict[str, Any] | list[dict[str, Any]] | None: ...

    async def handle_batch(self, items: list[Any], ctx: CallContext) -> list[dict[str, Any]]: ...

    async def handle(self, raw: Any, ctx: CallContext, *, shallow: bool = False) -> dict[str, Any] | None: ...


@dataclass
class CallContext:
    state: AppState
    principal: str
    connection: Peer | None = None  # None over HTTP
    remote: str | None = None  # the client's address over HTTP (its rate-limit bucket without auth)
    teams: frozenset[str] = frozenset()  # the token's teams: sessions shared with them are open (R-X2)
    routed: bool = False  # forwarded here by another replica (R-C1): never forwarded again
    token_hash: str | None = None  # the caller's token (None without auth): revocation ends its waits

    # Asked per request: worked out once per context (a connection keeps one context for
    # all its requests; nothing it is made of changes).
    @functools.cached_property
    def rate_key(self) -> str:
        conn_id = self.connection.id if self.connection is not None else None
        return rate_key(self.state.auth.mode is not AuthMode.NONE, self.principal, conn_id, self.remote)


# Forwards a call whose session another replica owns (agentd/transport/routed.py).
RouteHook = Callable[["CallContext", "Request", "SessionError"], Awaitable[Any]]


@dataclass
class AppState:
    settings: Settings
    store: Store
    writer: EventWriter
    manager: SessionManager
    provider: Provider
    dispatcher: Dispatch
    services: ActorServices
    auth: Authenticator
    rate_limiter: RateLimiter
    metrics: Metrics
    live_tokens: LiveTokens = field(default_factory=LiveTokens)  # streams to end on revocation
    # Several replicas (R-C1, Postgres): commands forwarded to a session's owner, and the
    # sessions owned elsewhere that clients here watch from the log. None on SQLite.
    router: Router | None = None
    remote: RemoteWatches | None = None

    @property
    def agents(self) -> dict[str, AgentDefinition]:
        return self.services.agents  # the first call loads the turn machinery (services.py)

    async def drain(self) -> None:
        """Graceful shutdown (R-S5): stop the actors within the grace period, flush the log."""
        await self.manager.shutdown(self.settings.shutdown_grace_s)
        await self.writer.barrier()

    async def principal_for(self, headers: Mapping[str, str], query: Mapping[str, str]) -> str:
        """Who a request acts as (R-X1); raises AuthError when auth is on and fails."""
        return await self.auth.principal(headers, query)

    def check_cursor(self, actor: SessionActor, after_seq: int) -> None:
        """Raises when an attach cursor is beyond the log (agentd/session/eventlog/attach.py)."""
        # Here, not at the top: the attach and replay modules (and the wire models and
        # mailbox commands they use) load with the first client, not in an idle server.
        from agentd.session import check_cursor

        check_cursor(actor, after_seq)

    async def attach(
        self, actor: SessionActor, sink: FrameSink, *, replay: Replay = "none", after_seq: int = 0
    ) -> Subscriber:
        """Subscribe `sink` to the session, with the replay asked for (R-E3; see
        agentd/session/eventlog/attach.py)."""
        if self.remote is not None:  # it watched the session from the log while another replica ran it
            await self.remote.detach(actor.id, sink.id)
        from agentd.session import attach as attach_client  # as above

        return await attach_client(
            self.store,
            actor,
            sink,
            replay=replay,
            after_seq=after_seq,
            buffer_limit=self.settings.client_buffer_frames,
        )

    async def detach(self, session_id: str, conn_id: str) -> None:
        actor = self.manager.live_actor(session_id)  # an unloaded actor has no subscribers
        if actor is not None:
            from agentd.session import Detach  # as above

            actor.send(Detach(conn_id))
        if self.remote is not None:
            await self.remote.detach(session_id, conn_id)
