"""The transport's side of routing (R-C1, issue 15 item 2): which methods a replica forwards
to the owner of a session it does not own, how a forwarded call is made here and answered
there, and the permission answers of clients watching from a non-owner.

A routable method's handler runs as usual; when the session is owned elsewhere it raises
`owned_elsewhere` before changing anything, and `route` (the dispatcher's hook) forwards
the very request — method and params as the client sent them — to the owner through
`Router.forward`. The owner runs it through its own dispatcher (`execute`) as the caller's
principal and teams, with no connection (as over `POST /rpc`): the same authorisation as a
local call, and it is never routed on. A `session/prompt` caller on a connection is first
subscribed to the session's events here (agentd/session/replicas/remote.py): its turn's events
reach it from the log while the forward waits for the stop reason.

Carry-on (issue 26 item 5): when the owner dies with the command unstarted (withdrawn:
`OwnerGone.ran` False) — or with a prompt that carries a requestId, which joins its first
run instead of running twice — the request is made again here, as the client made it:
this replica takes the session if nobody holds it, else the new owner's `owned_elsewhere`
routes it there, within the request's first deadline (a `ContextVar` carries it). The
client sees latency, not `owner_lost`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from agentd.infra import overload_error
from agentd.protocol import ErrorCode, QueueOp, Request, RpcError, Served
from agentd.session import ROUTED_FROM, FrameSink, OwnerGone, SessionError, SessionErrorKind
from agentd.store import RoutedCommand
from agentd.transport.errors import rpc_error
from agentd.transport.revocation import TokenRevoked
from agentd.transport.sharing import holder

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from agentd.transport.state import AppState, CallContext

# Forwarded to the owner: every session-scoped method but attach, load and resume (served
# here from the log) and `_agentd/hooks/register` (CONNECTION_BOUND).
ROUTED: frozenset[str] = frozenset(
    {
        Served.SESSION_PROMPT,
        Served.SESSION_CLOSE,  # the owner cancels, clears the queue, unloads; this client detaches
        Served.SESSION_DELETE,  # the owner stops its actor and deletes; this client detaches
        Served.FORK,  # the history up to a seq is the owner's (its writer's barrier)
        Served.SHARE,  # the owner detaches its members who lost access
        Served.RENAME,
        Served.COMPACT,
        Served.REWIND,
        Served.REVERT_FILE,  # in the owner's actor step: no turn writes the file meanwhile
        Served.CHANGES,  # the files are the owner's (its workspace, its journal's flush)
        Served.EXPORT,  # its log up to now is the owner's (its writer's barrier)
        Served.SESSION_CANCEL,
        Served.INTERJECT,
        Served.ENQUEUE,
        Served.SEND_NOW,
        Served.PERMISSION_RESPOND,
        Served.SESSION_SET_MODE,
        Served.SESSION_SET_CONFIG_OPTION,
        Served.GOAL_SET,
        Served.GOAL_GET,
        Served.GOAL_CLEAR,
        Served.USAGE_GET,
        *(op.method for op in QueueOp),
    }
)
# Session-scoped methods that bind the session to *this* connection on the replica running
# it: a stop hook is a request the owner's actor sends to the client and waits on at each
# turn's end. Forwarding the registration would leave the owner holding no connection to
# call, so on a non-owner they answer `owned_elsewhere` with `retryable: false` and say why.
CONNECTION_BOUND: frozenset[str] = frozenset({Served.HOOKS_REGISTER})
# After these succeed on the owner, the caller's connection here stops watching the session.
_ENDS_WATCH: frozenset[str] = frozenset({Served.SESSION_CLOSE, Served.SESSION_DELETE})
MAX_HOPS = 3  # the owner moved while the command travelled: follow it this many times
MAX_CARRIES = 3  # the owner died before running it: made again here at most this many times
# The request being routed: (its deadline in loop time, None for a turn's; carries so far).
_CARRYING: ContextVar[tuple[float | None, int] | None] = ContextVar("agentd_carrying", default=None)


def routable(method: str, exc: SessionError, routed: bool) -> str | None:
    """The replica to forward to, or None when this call is not to be routed."""
    if routed or exc.kind is not SessionErrorKind.OWNED_ELSEWHERE or method not in ROUTED:
        return None
    owner = (exc.data or {}).get("owner")
    # Not a replica id when the lease row was busy ("a replica with a write in flight",
    # store/leases.py): then the caller gets the retryable `owned_elsewhere` itself.
    if not isinstance(owner, str) or not owner or any(c.isspace() for c in owner):
        return None
    return owner


def connection_bound(method: str, exc: SessionError) -> SessionError | None:
    """The clear refusal of a CONNECTION_BOUND method on a non-owner, else None."""
    if method not in CONNECTION_BOUND or exc.kind is not SessionErrorKind.OWNED_ELSEWHERE:
        return None
    data = dict(exc.data or {})
    owner = data.get("owner", "another replica")
    data.update(reason="connection_bound", retryable=False)
    return SessionError(
        SessionErrorKind.OWNED_ELSEWHERE,
        f"connection_bound: {method} binds the session to this connection, but the session runs on "
        f"replica {owner}, which cannot call back a client connected here; connect to the "
        "replica running the session (its stop hooks run there) or drive the turn from this "
        "client instead",
        data,
    )


_PROMPTS = frozenset({Served.SESSION_PROMPT, Served.ENQUEUE, Served.SEND_NOW})
# Answered when a turn ends (a compaction of an idle session is a turn of its own, a model
# call): no deadline, only the owner's liveness bounds the wait.
TURN_LONG: frozenset[str] = frozenset({Served.SESSION_PROMPT, Served.COMPACT})


def carryable(method: str, params: Any, gone: OwnerGone) -> bool:
    """Whether a command whose owner is gone may be made again elsewhere: it never ran, or
    it is a prompt with a requestId (a second run joins the first: never twice)."""
    if gone.ran is False:
        return True
    meta = params.get("_meta") if isinstance(params, dict) else None
    inner = meta.get("agentd") if isinstance(meta, dict) else None
    return method in _PROMPTS and isinstance(inner, dict) and isinstance(inner.get("requestId"), str)


def with_routed_from(params: dict[str, Any], origin: str) -> dict[str, Any]:
    """`params` with `_meta.agentd.routedFrom` set: the prompt's user message is then not
    sent back to the connection that sent it (as for a local client)."""
    raw = params.get("_meta")
    meta: dict[str, Any] = raw if isinstance(raw, dict) else {}
    raw_inner = meta.get("agentd")
    inner: dict[str, Any] = raw_inner if isinstance(raw_inner, dict) else {}
    return {**params, "_meta": {**meta, "agentd": {**inner, ROUTED_FROM: origin}}}


def session_id_of(params: Any) -> str | None:
    sid = params.get("sessionId") if isinstance(params, dict) else None
    return sid if isinstance(sid, str) else None


async def route(ctx: CallContext, request: Request, exc: SessionError) -> Any:
    """Forward `request` to the session's owner; its result, or its error raised here."""
    state = ctx.state
    refusal = None if ctx.routed else connection_bound(request.method, exc)
    sid = session_id_of(request.params)
    if refusal is not None:
        if sid is not None:  # a caller without the rights is told "not found", as anywhere (R-X2)
            from agentd.transport.handlers import stored_access
            from agentd.transport.sharing import Access

            await stored_access(ctx, sid, Access.DRIVE)
        raise refusal
    owner = routable(request.method, exc, ctx.routed)
    if state.router is None or owner is None or sid is None:
        raise exc
    params = request.params if isinstance(request.params, dict) else {}
    prompt = request.method == Served.SESSION_PROMPT
    conn = ctx.connection
    if conn is not None and request.method in _PROMPTS:
        params = with_routed_from(params, f"{state.router.replica_id}/{conn.id}")
    if prompt and conn is not None and sid not in conn.sessions and state.remote is not None:
        from agentd.transport.handlers import watch_from_here

        await watch_from_here(ctx, sid, owner)  # its turn's events come from the log
    loop = asyncio.get_running_loop()
    carrying = _CARRYING.get()
    if carrying is None:  # the request's first route: its deadline starts now
        turn = request.method in TURN_LONG
        carrying = (None if turn else loop.time() + state.router.timeout_s, 0)
    deadline, carries = carrying
    for _ in range(MAX_HOPS):
        forwarding = state.router.forward(
            session_id=sid,
            owner=owner,
            method=request.method,
            params=params,
            principal=ctx.principal,
            teams=tuple(sorted(ctx.teams)),
            wait_for_turn=deadline is None,
            deadline=deadline,
        )
        try:
            # A revoked token's forward ends within a recheck (its row withdrawn: an owner
            # that has not claimed it never runs it), as its streams do (issue 28 item 3).
            outcome = await state.live_tokens.until_revoked(ctx.token_hash, forwarding)
        except TokenRevoked:
            raise RpcError(
                ErrorCode.AUTH_REQUIRED,
                "token revoked: the forwarded request was withdrawn",
                {"reason": "token_revoked"},
            ) from None
        except OwnerGone as gone:
            in_time = deadline is None or loop.time() < deadline
            if carries >= MAX_CARRIES or not in_time or not carryable(request.method, request.params, gone):
                raise
            log.info(
                "session %s: replica %s is gone; carrying %s on (%s)",
                sid, owner, request.method, gone.holder or "to this replica",
            )  # fmt: skip
            state.manager.leases.forget_holder(sid)
            token = _CARRYING.set((deadline, carries + 1))
            try:  # as the client made it: taken here, or routed to whoever has the session now
                return await state.dispatcher.call(request, ctx)
            finally:
                _CARRYING.reset(token)
        if state.remote is not None and conn is not None and sid in conn.sessions:
            try:  # the answer does not overtake the events before it
                await state.remote.caught_up(sid)
            except Exception as caught:  # the command took effect: its answer is not withheld
                log.warning("session %s: publishing events before a routed answer failed (%s)", sid, caught)
        error = outcome.get("error")
        if not isinstance(error, dict):
            if conn is not None and request.method in _ENDS_WATCH and sid in conn.sessions:
                conn.sessions.discard(sid)  # as a local close/delete detaches its caller
                await state.detach(sid, conn.id)
            return outcome.get("result")
        moved = error.get("data") if error.get("code") == ErrorCode.SESSION_ELSEWHERE else None
        new_owner = moved.get("owner") if isinstance(moved, dict) else None
        if isinstance(new_owner, str) and new_owner not in (owner, state.router.replica_id):
            owner = new_owner  # taken over meanwhile: follow it
            continue
        raise RpcError(
            int(error.get("code", ErrorCode.INTERNAL_ERROR)), str(error.get("message", "")), error.get("data")
        )
    raise exc


async def execute(state: AppState, command: RoutedCommand) -> dict[str, Any]:
    """Run a command forwarded here, as its caller's principal: its outcome (an unexpected
    failure raises; the router answers it as an internal error)."""
    from agentd.transport.state import CallContext

    ctx = CallContext(state, command.principal, None, teams=frozenset(command.teams), routed=True)
    request = Request(jsonrpc="2.0", method=command.method, params=command.params, id=command.id)
    live = state.services.live
    if live is not None:  # its caller's client likely watches: live text from the first chunk
        live.watched.keep(command.session_id)
    try:
        result = await state.dispatcher.call(request, ctx)
    except (RpcError, SessionError) as exc:
        return {"error": _error(rpc_error(exc))}
    except Exception as exc:
        overloaded = overload_error(exc)
        if overloaded is None:
            raise
        return {"error": _error(overloaded)}
    return {"result": {} if result is None else result}


def _error(err: RpcError) -> dict[str, Any]:
    out: dict[str, Any] = {"code": err.code, "message": err.message}
    if err.data is not None:
        out["data"] = err.data
    return out


def permission_answerer(state: AppState) -> Any:
    """The `answer` of agentd/session/replicas/remote.py: a watching client's choice goes to the
    owner as that client's `_agentd/permission/respond` (its rights checked there)."""

    async def answer(sink: FrameSink, session_id: str, request_id: str, option_id: str | None) -> None:
        from agentd.transport.state import CallContext

        who = holder(sink)
        if who is None:
            return
        principal, teams = who
        ctx = CallContext(state, principal, None, teams=teams)
        params: dict[str, Any] = {"sessionId": session_id, "requestId": request_id}
        if option_id is None:
            params["outcome"] = "cancelled"
        else:
            params["optionId"] = option_id
        request = Request(jsonrpc="2.0", method=Served.PERMISSION_RESPOND, params=params, id=0)
        try:
            await state.dispatcher.call(request, ctx)  # routed by the dispatcher's hook
        except (RpcError, SessionError) as exc:  # answered elsewhere first, or the turn ended
            raise RuntimeError(rpc_error(exc).message) from None

    return answer


async def start_routing(
    state: AppState,
    database_url: str,
    replica_id: str,
    *,
    wake_takeover: Callable[[], None] | None = None,
) -> Callable[[], Awaitable[None]]:
    """Several replicas on one Postgres: this replica's router, its watches of sessions
    owned elsewhere and the one LISTEN connection waking both (and `wake_takeover`, the
    takeover sweep, when another replica announces it is claiming orphans). Returns the stop
    (after the actors have stopped: the outcomes of commands run here still go out)."""
    from agentd.session import LivePublisher, RemoteWatches, Router, WatchAnnouncer
    from agentd.store import (
        EVENTS_CHANNEL,
        MAX_SESSION_ID,
        SHARES_CHANNEL,
        TAKEOVER_CHANNEL,
        Broker,
        PgBroker,
        PgListener,
    )
    from agentd.transport.render import ACP_RENDERER

    settings = state.settings
    router = Router(
        state.store.engine,
        replica_id,
        timeout_s=settings.routed_command_timeout_s,
        check_interval_s=max(0.2, min(settings.lease_ttl_s / 2, 5.0)),
        observe=state.metrics.routed,
        lease_left=state.manager.leases.held_for,
        on_held=state.manager.leases.held_elsewhere,
    )
    # What is live only (streamed text): Redis pub/sub when configured, else NOTIFY (issue 26).
    pg_broker: PgBroker | None = None
    broker: Broker
    if settings.redis_url:
        from agentd.store import RedisBroker

        # Named in CLIENT LIST: which replica, which process.
        name = re.sub(r"[^A-Za-z0-9_.:-]", "_", f"agentd-{replica_id}-{os.getpid()}")
        redis_broker = RedisBroker(settings.redis_url, client_name=name)
        redis_broker.start()
        broker = redis_broker
    remote = RemoteWatches(
        state.store,
        ACP_RENDERER,
        permission_answerer(state),
        replica_id=replica_id,
        observe_lag=state.metrics.notify_lag,
        stuck_after_s=settings.lease_ttl_s,
    )

    async def execute_here(command: RoutedCommand) -> dict[str, Any]:
        return await execute(state, command)

    router.execute = execute_here
    await router.start()
    rechecks: set[asyncio.Task[None]] = set()

    async def recheck(*session_ids: str) -> None:
        from agentd.transport.handlers import recheck_remote_access

        try:
            await recheck_remote_access(state, session_ids)
        except Exception:  # the next change (or reconnect) checks again
            log.exception("re-checking the access of the watchers of %d session(s) failed", len(session_ids))

    def on_shares(raw: str) -> None:
        """A session's shares changed somewhere: hold this replica's watchers to them."""
        if 0 < len(raw) <= MAX_SESSION_ID and remote.get(raw) is not None:
            checking = asyncio.create_task(recheck(raw))
            rechecks.add(checking)
            checking.add_done_callback(rechecks.discard)

    async def on_connect() -> None:
        if pg_broker is not None:
            await pg_broker.reconnected()
        await remote.tails.on_connect()
        await router.on_connect()
        await recheck(*remote.session_ids())  # a change may have gone by meanwhile: one read for all

    def on_takeover(raw: str) -> None:
        """Another replica is claiming a dead one's sessions: sweep now, to share them."""
        if wake_takeover is not None and raw != replica_id:
            wake_takeover()

    listener = PgListener(
        database_url,
        {
            router.channel: router.on_notification,
            SHARES_CHANNEL: on_shares,
            TAKEOVER_CHANNEL: on_takeover,
        },
        on_connect=on_connect,
        # A silently dead LISTEN connection is found out well within a lease time.
        ping_interval_s=min(5.0, settings.lease_ttl_s / 2),
        ping_timeout_s=min(5.0, settings.lease_ttl_s / 2),
    )

    # The events channel only while this replica watches a session owned elsewhere (its own
    # commits' NOTIFYs wake nobody here: issue 32).
    def listen_events() -> Awaitable[None]:
        return listener.listen(EVENTS_CHANNEL, remote.tails.on_notification)

    def unlisten_events() -> Awaitable[None]:
        return listener.unlisten(EVENTS_CHANNEL)

    if not remote.tails.on_demand(listen_events, unlisten_events):
        await listen_events()  # (before the listener runs: listened to from its first connect)
    if not settings.redis_url:
        broker = pg_broker = PgBroker(database_url, listener)
    remote.broker = broker
    publisher = LivePublisher(broker, interval_s=settings.live_watch_interval_s)
    publisher.start()
    state.services.live = publisher
    state.metrics.track_live(publisher)
    # This replica's watches, announced to the owners: they publish live events only then.
    announcer = WatchAnnouncer(
        broker, replica_id, remote.live_session_ids, publisher.send, interval_s=settings.live_watch_interval_s
    )
    announcer.start()
    remote.announce = announcer.announce
    task = asyncio.create_task(listener.run(), name="pg-listen")
    rescans = asyncio.create_task(router.run(), name="routing-rescan")
    state.router, state.remote = router, remote
    state.dispatcher.route = route

    async def stop() -> None:
        for pending in list(rechecks):
            pending.cancel()
        rescans.cancel()
        await router.stop()
        await remote.stop()
        await announcer.stop()
        state.services.live = None
        await publisher.stop()
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await broker.close()

    return stop
