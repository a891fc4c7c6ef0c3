"""Clients of this replica watching a session another replica owns (R-C1, issue 15 item 2).

The owner's actor fans its events out to its own clients only. Here, one `RemoteWatch`
per such session keeps a `LogTail` (woken by the NOTIFY each commit sends: "seq session")
publishing the log's new events into a hub of its own, which the clients attached here
subscribe to exactly as to an actor's hub — the same replay-then-live hand-over
(agentd/session/eventlog/replayer.py), so each durable event reaches them once, in seq order, with no
gap. Streaming deltas are not in the log: the owner sends them through the broker and the
watch forwards them in order with the durable events (agentd/session/replicas/live.py); without them
such a client gets each message's final text whole (the subscriber's "missed start" rule),
as a transient chunk before the message's end — for each seq exactly the frames a client of
the owner gets.

What the owner keeps live-only is made visible from the log too:
- permission questions: `permission_requested` / `permission_resolved` are durable events;
  the watch asks its clients that can answer (`session/request_permission`, as the owner
  asks its own) and routes the first answer to the owner (`answer`); a `resolved` event
  withdraws the question everywhere;
- the queue: every change is a durable `queue_update` event (a delta); the queue itself is
  in the store (its rows), which an attaching client's snapshot is built from
  (`remote_snapshot`), as are the rest of it (record, latest turn and goal events).

A watch ends when its last client detaches.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

from agentd.core import Event, EventKind, SessionModes
from agentd.protocol import RequestPermissionResult
from agentd.session.commands import ROUTED_FROM
from agentd.session.errors import ResyncReason
from agentd.session.eventlog import EventHub, ReplayAborted, ReplayMode, Subscriber
from agentd.session.eventlog import replay as replay_log
from agentd.session.replicas.live import LiveRelay, live_channel, run_relay
from agentd.session.replicas.log_reads import LogReads
from agentd.session.replicas.log_tail import STUCK_AFTER_S, LogTail, LogTails, Read
from agentd.session.sinks import FrameSink, Renderer, requesting
from agentd.store import Broker, Store

log = logging.getLogger(__name__)

# (the client's sink, session id, request id, option id — None: `cancelled`) → routed to the owner.
Answer = Callable[[FrameSink, str, str, str | None], Awaitable[None]]
RECENT_PERMISSIONS = 50  # questions looked at when a watch starts (only a turn's can be open)
_STATE_KINDS = [EventKind.TURN_STARTED, EventKind.TURN_ENDED, EventKind.GOAL]


class RemoteWatch:
    def __init__(
        self,
        store: Store,
        session_id: str,
        render: Renderer,
        answer: Answer,
        *,
        cursor: int,
        replica_id: str,
        observe_lag: Callable[[float], None] | None = None,
        on_stuck: Callable[[RemoteWatch], None] | None = None,
        stuck_after_s: float = STUCK_AFTER_S,
        read: Read | None = None,
    ) -> None:
        self.session_id = session_id
        self._replica_id = replica_id
        self.hub = EventHub(render=render)
        self.tail = LogTail(
            store,
            session_id,
            self._publish,
            after_seq=cursor,
            observe_lag=observe_lag,
            on_stuck=None if on_stuck is None else (lambda: on_stuck(self)),
            stuck_after_s=stuck_after_s,
            read=read,
        )
        self._render = render
        self._answer = answer
        self.pending: dict[str, dict[str, Any]] = {}  # request id → {toolCall, options}
        self._asked: dict[str, dict[str, asyncio.Task[None]]] = {}  # request id → sink id → ask
        self.attaching = 0  # attaches in progress (the watch must not end under them)
        self.task: asyncio.Task[None] | None = None
        # The owner's transient events (streamed text) from the broker (agentd/session/replicas/live.py).
        self.live: LiveRelay | None = None
        self._live_task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self.task = asyncio.create_task(self.tail.run(), name=f"tail-{self.session_id}")
        self.tail.wake()  # what committed since the cursor was read

    async def start_live(self, broker: Broker) -> None:
        """Forward the owner's transient events too; without them (the broker unreachable)
        clients here get each message's text with its final event."""
        relay = LiveRelay(self.session_id, self.hub.publish, cursor=self.tail.cursor, wake=self.tail.wake)
        try:
            subscription = await broker.subscribe(live_channel(self.session_id))
        except Exception as exc:
            log.warning("%s: no live events from the broker (%s)", self.session_id, exc)
            return
        self.live = relay
        self._live_task = asyncio.create_task(run_relay(subscription, relay), name=f"live-{self.session_id}")

    def track(self, event: Event) -> None:
        """Follow the permission questions open in the log."""
        rid = event.payload.get("requestId")
        if not isinstance(rid, str):
            return
        if event.kind is EventKind.PERMISSION_REQUESTED:
            self.pending[rid] = {
                "toolCall": event.payload.get("toolCall", {}),
                "options": event.payload.get("options", []),
            }
        elif event.kind is EventKind.PERMISSION_RESOLVED:
            self.pending.pop(rid, None)
            for task in self._asked.pop(rid, {}).values():
                task.cancel()

    def _publish(self, event: Event) -> None:
        self.track(event)
        if event.kind is EventKind.USER_MESSAGE:
            event = self._with_origin(event)
        live = self.live
        if live is not None:
            live.before(event)  # the owner's transient events that came before it
        self.hub.publish(event)
        if live is not None:
            live.after(event)
        if event.kind is EventKind.PERMISSION_REQUESTED:
            for sink in self.hub.sinks:
                sub = self.hub.get(sink.id)
                if sub is not None and not sub.replaying:
                    self.ask(sink)

    def _with_origin(self, event: Event) -> Event:
        """A prompt routed from a connection of this replica: that connection already has
        it (a local client is not sent its own prompt back either)."""
        tag = event.payload.get(ROUTED_FROM)
        replica, _, conn_id = tag.rpartition("/") if isinstance(tag, str) else ("", "", "")
        return replace(event, origin=conn_id) if replica and replica == self._replica_id else event

    def ask(self, sink: FrameSink) -> None:
        """Ask `sink` every open question it was not asked yet (if it can answer)."""
        client = requesting(sink)
        if client is None:
            return  # a watcher, an SSE viewer: never asked
        for rid, question in list(self.pending.items()):
            asked = self._asked.setdefault(rid, {})
            if sink.id in asked:
                continue
            method, params = self._render.permission_request(
                self.session_id, rid, question["toolCall"], question["options"]
            )

            async def ask_one(rid: str = rid, method: str = method, params: dict[str, Any] = params) -> None:
                try:
                    result = RequestPermissionResult.model_validate(await client.request(method, params))
                except Exception as exc:  # the client went away or answered nonsense
                    log.info("permission request to %s got no usable answer: %s", sink.id, exc)
                    return
                outcome = result.outcome
                option_id = None if outcome.outcome == "cancelled" else outcome.option_id
                try:  # `cancelled` refuses the tool call there, as a local client's would
                    await self._answer(sink, self.session_id, rid, option_id)
                except Exception as exc:
                    log.info("routing a permission answer of %s failed: %s", sink.id, exc)

            asked[sink.id] = asyncio.create_task(ask_one())

    def forget_sink(self, sink_id: str) -> None:
        for asked in self._asked.values():
            task = asked.pop(sink_id, None)
            if task is not None:
                task.cancel()

    async def stop(self) -> None:
        for asked in self._asked.values():
            for task in asked.values():
                task.cancel()
        for running in (self.task, self._live_task):
            if running is not None:
                running.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await running


class RemoteWatches:
    """This replica's watches of sessions owned elsewhere, woken through `tails`."""

    def __init__(
        self,
        store: Store,
        render: Renderer,
        answer: Answer,
        *,
        replica_id: str,
        observe_lag: Callable[[float], None] | None = None,
        stuck_after_s: float = STUCK_AFTER_S,  # the lease time: see `_stuck`
        broker: Broker | None = None,
    ) -> None:
        self._store = store
        self.broker = broker  # live events of the sessions watched (None: from the log only)
        # Tells the owners a watch with live events started (live_watch.py's announcer).
        self.announce: Callable[[str], None] | None = None
        self._replica_id = replica_id
        self._stuck_after = stuck_after_s
        self._ending: set[asyncio.Task[None]] = set()
        self._render = render
        self._answer = answer
        self._observe_lag = observe_lag
        self.tails = LogTails()
        # The tails' reads, one statement for all those asked together (log_reads.py).
        self.reads = LogReads(store)
        self._watches: dict[str, RemoteWatch] = {}
        # Watches being made, by session: one per session, while other sessions' are made
        # meanwhile (200 clients' first routed prompts at once must not queue on one lock).
        self._making: dict[str, asyncio.Future[None]] = {}

    def get(self, session_id: str) -> RemoteWatch | None:
        return self._watches.get(session_id)

    def __len__(self) -> int:
        return len(self._watches)

    def session_ids(self) -> list[str]:
        return list(self._watches)

    def live_session_ids(self) -> list[str]:
        """The sessions whose owner's live events this replica forwards (announced)."""
        return [sid for sid, watch in self._watches.items() if watch.live is not None]

    async def _watch(self, session_id: str) -> RemoteWatch:
        while (making := self._making.get(session_id)) is not None:
            await asyncio.shield(making)  # (made, or failed: then this caller tries)
        watch = self._watches.get(session_id)
        if watch is not None:
            return watch
        made: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._making[session_id] = made
        try:
            return await self._make(session_id)
        finally:
            del self._making[session_id]
            made.set_result(None)

    async def _make(self, session_id: str) -> RemoteWatch:
        await self.tails.follow()  # before the cursor is read: every later commit is announced
        try:
            watch = await self._made(session_id)
        except BaseException:
            self.tails.unfollow()
            raise
        self.tails.add(watch.tail)
        watch.start()
        if watch.live is not None and self.announce is not None:
            self.announce(session_id)  # subscribed first: what the owner sends once it hears arrives
        return watch

    async def _made(self, session_id: str) -> RemoteWatch:
        cursor = await self._store.last_seq(session_id)
        watch = RemoteWatch(
            self._store,
            session_id,
            self._render,
            self._answer,
            cursor=cursor,
            replica_id=self._replica_id,
            observe_lag=self._observe_lag,
            on_stuck=self._stuck,
            stuck_after_s=self._stuck_after,
            read=self.reads.read,
        )
        kinds = [EventKind.PERMISSION_REQUESTED.value, EventKind.PERMISSION_RESOLVED.value]
        for stored in await self._store.latest_events(session_id, kinds, limit=RECENT_PERMISSIONS):
            if stored.seq <= cursor:
                watch.track(Event.stored(session_id, stored.kind, stored.payload, stored.seq))
        if self.broker is not None:
            await watch.start_live(self.broker)
        self._watches[session_id] = watch
        return watch

    async def attach(
        self,
        session_id: str,
        sink: FrameSink,
        *,
        replay: ReplayMode | None,
        after_seq: int,
        buffer_limit: int,
        owner: str,
    ) -> Subscriber:
        """Subscribe `sink`: with `replay` None from now on, else the replay asked for
        (a snapshot first for `attach`), then live — as `session.attach.attach` does for a
        local actor. Raises ReplayAborted like it."""
        watch = await self._watch(session_id)
        watch.attaching += 1
        try:
            sub = watch.hub.subscribe(sink, session_id)
            sub.buffer_limit = buffer_limit
            sub.attached_seq = watch.tail.cursor
            if replay is None:
                sub.go_live(watch.tail.cursor)  # no await since subscribing: nothing in between
            else:
                if replay is ReplayMode.ATTACH:
                    sub.snapshot = await remote_snapshot(self._store, watch, owner)
                try:
                    await replay_log(self._store, sub, sink, mode=replay, after_seq=after_seq)
                except BaseException:
                    if watch.hub.get(sink.id) is sub:
                        watch.hub.unsubscribe(sink.id)
                    raise
            watch.ask(sink)
            return sub
        finally:
            watch.attaching -= 1
            await self._end_if_unused(watch)

    async def caught_up(self, session_id: str) -> None:
        """Publish everything the log holds now (a routed prompt's answer must not overtake
        the events of its turn, which were committed before it)."""
        watch = self._watches.get(session_id)
        if watch is None:
            return
        try:  # bounded: the answer is owed whatever the log does
            async with asyncio.timeout(self._stuck_after):
                await watch.tail.caught_up()
        except Exception as exc:  # the tail goes on retrying by itself (or resyncs its clients)
            log.warning("%s: catching up before an answer failed (%s)", session_id, exc)

    async def detach(self, session_id: str, sink_id: str) -> None:
        watch = self._watches.get(session_id)
        if watch is None:
            return
        watch.hub.unsubscribe(sink_id)
        watch.forget_sink(sink_id)
        await self._end_if_unused(watch)

    def _stuck(self, watch: RemoteWatch) -> None:
        """The watch's log could not be read for a lease time: its clients are not left
        waiting for events that will not come — they resync (a re-attach starts afresh)."""
        watch.hub.resync_all(ResyncReason.LOG_UNREACHABLE)
        if self._watches.get(watch.session_id) is watch:  # the next attach starts a new one
            del self._watches[watch.session_id]
            self.tails.remove(watch.session_id)
        ending = asyncio.get_running_loop().create_task(watch.stop())
        self._ending.add(ending)
        ending.add_done_callback(self._ending.discard)

    async def _end_if_unused(self, watch: RemoteWatch) -> None:
        if len(watch.hub) or watch.attaching or self._watches.get(watch.session_id) is not watch:
            return
        del self._watches[watch.session_id]
        self.tails.remove(watch.session_id)
        await watch.stop()

    async def stop(self) -> None:
        for watch in list(self._watches.values()):
            watch.hub.resync_all(ResyncReason.SERVER_SHUTTING_DOWN)
            await watch.stop()
        self._watches.clear()
        await self.reads.stop()
        await self.tails.stop()
        if self._ending:  # stuck watches still stopping
            await asyncio.wait(set(self._ending))


async def remote_snapshot(store: Store, watch: RemoteWatch, owner: str) -> dict[str, Any]:
    """The snapshot of a session owned elsewhere, from the store: what its record and its
    latest state events say (the owner's in-memory state is not reachable from here)."""
    record = await store.get_session(watch.session_id)
    state: dict[EventKind, dict[str, Any]] = {}
    for kind in _STATE_KINDS:  # the newest of each
        for stored in await store.latest_events(watch.session_id, [kind.value], limit=1):
            state[kind] = stored.payload
    started, ended = state.get(EventKind.TURN_STARTED), state.get(EventKind.TURN_ENDED)
    running = started is not None and (ended is None or ended.get("turnId") != started.get("turnId"))
    snap: dict[str, Any] = {
        "sessionId": watch.session_id,
        "status": "running" if running else "idle",
        "lastSeq": watch.tail.cursor,
        "queue": [_queued(row) for row in (record.queue or [])] if record is not None else [],
        "pendingPermissions": [{"requestId": rid, **q} for rid, q in watch.pending.items()],
        "ownedBy": owner,
    }
    if record is not None:
        mode = SessionModes.of(record.mode, record.plan).mode_id.value
        snap |= {"mode": mode, "model": record.model, "agent": record.agent}
        if record.title:
            snap["title"] = record.title
    if running and started is not None:
        snap["turnId"] = started.get("turnId")
        snap["promptId"] = started.get("promptId")
    if EventKind.GOAL in state:
        snap["goal"] = state[EventKind.GOAL]
    return snap


def _queued(row: dict[str, Any]) -> dict[str, Any]:
    """A stored queue row as the snapshot shows a queued prompt."""
    blocks = row.get("blocks") or []
    text = "\n".join(b["text"] for b in blocks if isinstance(b, dict) and isinstance(b.get("text"), str))
    return {"promptId": row.get("id"), "kind": row.get("kind"), "version": row.get("version"), "text": text}


__all__ = ["RemoteWatch", "RemoteWatches", "ReplayAborted", "remote_snapshot"]
