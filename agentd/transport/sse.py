"""`GET /sessions/{id}/events`: the session's event stream as Server-Sent Events (R-P1,
R-E3), for web frontends.

The same payloads as the WebSocket notifications. A durable event's frame carries
`id: <seq>`, so a browser's EventSource resumes by itself (`Last-Event-ID`); `?after=SEQ`
does the same by hand. Transient deltas carry no id and heartbeats are comment frames,
so neither ever moves the cursor. The first frame is the snapshot of the live state.
The replay runs alongside the response, paced by it (agentd/session/eventlog/replayer.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import AsyncIterator
from typing import Any

import anyio
import orjson
from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import StreamingResponse

from agentd.infra import CHALLENGE, AuthError, Identity
from agentd.protocol import Notification, RpcError, outgoing
from agentd.session import SessionError, SessionErrorKind
from agentd.transport.render import wire_params
from agentd.transport.revocation import CloseReason

sse_router = APIRouter()
log = logging.getLogger(__name__)

_END = object()
RESYNC_REQUIRED = Notification.RESYNC_REQUIRED
TOKEN_REVOKED = Notification.TOKEN_REVOKED  # the last frame of a stream whose token was revoked
_REVOKED_FRAME = f"event: {TOKEN_REVOKED}\n".encode()
REPLAY_STOP_S = 5.0  # a cancelled replay's cleanup (a store read's connection) ends within this


class SseSink:
    """A FrameSink that feeds one SSE response. Cannot answer permission requests."""

    def __init__(self, capacity: int) -> None:
        # The queue, sharing and replay modules load with the first stream, not in an idle
        # server (issue 32 item 3).
        from agentd.transport.outgoing import OutgoingQueue

        self.id = f"sse_{uuid.uuid4().hex[:12]}"
        self._queue = OutgoingQueue(capacity)
        self._urgent: list[tuple[str, dict[str, Any]]] = []
        self._wake = asyncio.Event()
        self.closed = False  # the response ended: a replay stops
        self.principal: str | None = None  # who the stream is for (a share lowered ends it)
        self.teams: frozenset[str] = frozenset()
        self._ended = False  # the replay failed: end the response

    def send_notification(self, method: str, params: dict[str, Any]) -> bool:
        try:
            self._queue.put_nowait((method, params))
        except asyncio.QueueFull:
            return False
        self._wake.set()
        return True

    def send_urgent(self, method: str, params: dict[str, Any]) -> None:
        self._urgent.append((method, params))
        self._wake.set()

    async def send_replay(self, method: str, params: dict[str, Any]) -> bool:
        """Awaits room in the replay window, so the replay is paced by the response."""
        if self.closed:
            return False
        await self._queue.put_replay((method, params))
        self._wake.set()
        return True

    def replay_done(self, task: asyncio.Task[Any]) -> None:
        """A replay that failed ends the stream; the client resumes from its last id."""
        if task.cancelled() or task.exception() is not None:
            if not task.cancelled():
                log.warning("%s: replay failed: %s", self.id, task.exception())
            self._ended = True
            self._wake.set()

    async def frames(self, heartbeat_s: float) -> AsyncIterator[bytes]:
        while True:
            if self._urgent:
                method, params = self._urgent.pop(0)
                yield _frame(method, params)
                if method == RESYNC_REQUIRED:
                    return  # this stream is over; the client resumes from its last id
                continue
            if self._queue.empty():
                if self._ended:
                    return
                self._wake.clear()
                try:
                    await asyncio.wait_for(self._wake.wait(), heartbeat_s)
                except TimeoutError:
                    yield b": keepalive\n\n"
                continue
            method, params = self._queue.get_nowait()
            yield _frame(method, params)
            if method == RESYNC_REQUIRED:
                return  # queued in order (after what was queued before it): the stream is over


async def stop_replay(replay: asyncio.Task[Any]) -> None:
    """Cancel the replay (it detaches) and wait until it has ended, even while the
    response's own scope is being cancelled (the client went away: Starlette cancels the
    response, and anyio cancels again at every await). A replay cut mid-read is still
    closing its store connection: left behind, it outlived the server, and the event
    loop's close cancelled it a second time, which leaves aiosqlite's close awaiting its
    stopped thread for ever (a test's teardown hung so)."""
    replay.cancel()
    with anyio.CancelScope(shield=True):
        await asyncio.wait({replay}, timeout=REPLAY_STOP_S)


def _frame(method: str, params: dict[str, Any]) -> bytes:
    meta = (params.get("_meta") or {}).get("agentd") or {}
    lines = []
    if "seq" in meta and not meta.get("transient") and method != RESYNC_REQUIRED:
        lines.append(f"id: {meta['seq']}")
    lines.append(f"event: {method}")
    lines.append("data: " + orjson.dumps(wire_params(params)).decode())
    return ("\n".join(lines) + "\n\n").encode()


# The parameters are read from the request and described here by hand: a typed parameter
# makes FastAPI import `pydantic.v1` (1.3 MiB resident for good) to rule out a v1 model.
_PARAMETERS = [
    {"name": "session_id", "in": "path", "required": True, "schema": {"type": "string"}},
    {
        "name": "after",
        "in": "query",
        "required": False,
        "description": "resume after this seq",
        "schema": {"type": "integer", "minimum": 0},
    },
]


def _after(request: Request) -> int | None:
    raw = request.query_params.get("after")
    if raw is None:
        return None
    try:
        after = int(raw)
    except ValueError:
        raise HTTPException(status_code=422, detail="after must be a seq (integer)") from None
    if after < 0:
        raise HTTPException(status_code=422, detail="after must be ≥ 0")
    return after


def _elsewhere(state: Any, err: RpcError | SessionError) -> str | None:
    """The replica owning the session, when this one can serve its events from the log."""
    if not isinstance(err, SessionError) or err.kind is not SessionErrorKind.OWNED_ELSEWHERE:
        return None
    owner = (err.data or {}).get("owner")
    return owner if state.remote is not None and isinstance(owner, str) else None


async def _may_watch(state: Any, identity: Identity, session_id: str, owner: str) -> bool:
    """The owner, or a member of a team the session is shared with (R-X2): SSE only reads."""
    if owner == identity.principal:
        return True
    if not identity.teams:
        return False
    from agentd.transport.sharing import Access, access_of  # as in SseSink

    shares = (await state.store.session_shares([session_id])).get(session_id, {})
    return access_of(identity.principal, identity.teams, owner, shares) is not Access.NONE


@sse_router.get(
    "/sessions/{session_id}/events",
    summary="The session's events as Server-Sent Events",
    openapi_extra={"parameters": _PARAMETERS},
)
async def session_events(request: Request) -> StreamingResponse:
    session_id: str = request.path_params["session_id"]
    after = _after(request)
    state = request.app.state.agentd
    try:
        identity = await state.auth.identify(request.headers, request.query_params)
    except AuthError as err:
        raise HTTPException(status_code=401, detail=str(err), headers=CHALLENGE) from None
    elsewhere: str | None = None  # the replica running it, when served here from the log (R-C1)
    try:
        actor = await state.manager.get(session_id)
        principal = actor.owner if actor is not None else None
    except (RpcError, SessionError) as err:  # draining for a shutdown
        elsewhere = _elsewhere(state, err)
        if elsewhere is None:
            raise HTTPException(status_code=503, detail=err.message) from None
        actor, record = None, await state.store.get_session(session_id)
        principal = record.owner if record is not None else None
    if principal is None or not await _may_watch(state, identity, session_id, principal):
        raise HTTPException(status_code=404, detail=f"no session {session_id}")
    cursor = after
    if cursor is None:
        last_id = request.headers.get("last-event-id")
        if last_id is not None:
            try:
                cursor = int(last_id)
            except ValueError:
                raise HTTPException(status_code=400, detail="Last-Event-ID must be a seq (integer)") from None
    try:
        if actor is not None:
            state.check_cursor(actor, cursor or 0)
        elif (cursor or 0) > await state.store.last_seq(session_id):
            raise HTTPException(status_code=409, detail=f"resync_required: cursor {cursor} cannot be served")
    except (RpcError, SessionError) as err:
        raise HTTPException(status_code=409, detail=err.message) from None
    sink = SseSink(state.settings.client_buffer_frames)
    sink.principal, sink.teams = identity.principal, identity.teams  # who watches (R-X2)

    revoked = asyncio.Event()

    async def end_revoked() -> None:  # the last frame says why the stream ends
        revoked.set()
        frame = outgoing.token_revoked(CloseReason.TOKEN_REVOKED.value)
        sink.send_urgent(frame.method, frame.params)

    forget = state.live_tokens.register(identity.token_hash, end_revoked)

    async def stream() -> AsyncIterator[bytes]:
        # The replay feeds the response as it is written: it must run alongside it.
        if actor is not None:
            attaching = state.attach(actor, sink, replay="attach", after_seq=cursor or 0)
        else:
            assert state.remote is not None and elsewhere is not None
            from agentd.session import ReplayMode  # as in SseSink

            attaching = state.remote.attach(
                session_id,
                sink,
                replay=ReplayMode.ATTACH,
                after_seq=cursor or 0,
                buffer_limit=state.settings.client_buffer_frames,
                owner=elsewhere,
            )
        replay = asyncio.create_task(attaching, name=f"replay-{sink.id}")
        replay.add_done_callback(sink.replay_done)
        try:
            async for chunk in sink.frames(state.settings.sse_heartbeat_s):
                yield chunk
                if revoked.is_set() and chunk.startswith(_REVOKED_FRAME):
                    return
        finally:
            forget()
            sink.closed = True
            await stop_replay(replay)
            with contextlib.suppress(Exception):
                await state.detach(session_id, sink.id)

    return StreamingResponse(
        stream(),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )
