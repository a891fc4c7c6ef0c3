"""Creates, finds and stops session actors (R-S5). Actors are created on demand from
the store; two concurrent requests for the same session get the same actor.

At most one actor per session exists, ever: an actor that is stopping (close, delete,
eviction, a failed write) stays registered until its task has really ended, and a
request for its session waits for that (bounded, then a retryable `session_stopping`) instead of
loading a second actor that would write the same seqs."""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import TYPE_CHECKING, Any

from agentd.core import Message, PermissionMode, SessionModes
from agentd.session.errors import (
    RETRY_SESSION_FAILED,
    ResyncReason,
    SessionError,
    SessionErrorKind,
    session_stopping,
    shutting_down,
)
from agentd.session.eviction import evictable
from agentd.session.replicas import SessionLeases
from agentd.session.services import ActorServices
from agentd.store import LoadedSession, SessionRecord, Store, is_stale_fence

if TYPE_CHECKING:
    from agentd.session.actor import SessionActor

log = logging.getLogger(__name__)


def _actor_class() -> type[SessionActor]:
    # The actor (with the loop and the tools) loads with the first session, not at start-up
    # (issue 14: idle RSS; tests/unit/test_startup_imports.py).
    from agentd.session.actor import SessionActor

    return SessionActor


class SessionManager:
    def __init__(
        self,
        store: Store,
        services: ActorServices,
        *,
        owner_default: str = "local",
        leases: SessionLeases | None = None,
    ) -> None:
        self._store = store
        self._services = services
        # Which sessions this replica owns (R-C1); a no-op on SQLite. The writer stamps
        # every write with the session's token from `leases.fences`.
        self.leases = leases or SessionLeases()
        services.writer.fences = self.leases.fences
        self._actors: dict[str, SessionActor] = {}
        self.unloaded = 0  # actors taken out of service so far (evicted, closed, deleted)
        # Set when an eviction sweep unloaded sessions: the memory trimmer asks at once.
        self.released = asyncio.Event()
        self._loading: dict[str, asyncio.Future[SessionActor | None]] = {}
        # Sessions whose actor was taken out of service and has not ended yet → resolved
        # when its task is done. No new actor is made for them meanwhile.
        self._stopping: dict[str, asyncio.Future[None]] = {}
        # Sessions being deleted: nothing loads them until the delete is through.
        self._holds: dict[str, asyncio.Future[None]] = {}
        self.owner_default = owner_default
        self.closing = False  # draining for a shutdown: no new actors
        self.stop_wait = services.settings.session_stop_wait_s
        services.writer.on_session_failed = self._session_failed

    @property
    def store(self) -> Store:
        return self._store

    def live(self) -> list[SessionActor]:
        return list(self._actors.values())

    async def create(
        self, *, cwd: str, owner: str, mode: PermissionMode | None = None, agent: str = "default"
    ) -> SessionActor:
        self._refuse_if_closing()
        settings = self._services.settings
        modes = SessionModes.of(mode or settings.permission_mode)  # `plan`: the gate over default
        record = await self._store.create_session(
            id=f"sess_{uuid.uuid4().hex}",
            owner=owner,
            cwd=cwd,
            mode=modes.permission.value,
            plan=modes.plan,
            model=settings.model,
            agent=agent,
        )
        await self.leases.acquire(record.id)  # new: nobody else holds it
        actor = _actor_class()(record, [], 0, self._services)
        actor.start()
        self._actors[record.id] = actor
        return actor

    async def warm_up(self) -> None:
        """Import the turn machinery and build the turn kit now, off the event loop: a
        replica among several may have to load many sessions of a dead peer at once, and
        the first load would otherwise pay seconds of imports (issue 26 item 6)."""

        def warm() -> None:
            _actor_class()
            _ = self._services.kit

        await asyncio.to_thread(warm)

    def live_actor(self, session_id: str) -> SessionActor | None:
        return self._actors.get(session_id)

    async def get(self, session_id: str) -> SessionActor | None:
        """The live actor, recreated from the store if needed; None if no such session.
        While the session's previous actor is still stopping this waits for it (at most
        `session_stop_wait_s`, then a retryable `session_stopping` error)."""
        while True:
            actor = self._actors.get(session_id)
            if actor is not None:
                return actor
            if session_id in self._stopping or session_id in self._holds:
                await self._wait_stopped(session_id, self.stop_wait, holds=True)
                continue
            if session_id in self._loading:
                return await asyncio.shield(self._loading[session_id])
            break
        self._refuse_if_closing()
        fut: asyncio.Future[SessionActor | None] = asyncio.get_running_loop().create_future()
        self._loading[session_id] = fut
        try:
            writer = self._services.writer
            if writer.failed(session_id):
                # The failed actor has ended; once its last writes are through (discarded),
                # the new actor continues from what the store really holds.
                await writer.barrier()
                writer.clear_failure(session_id)
            # The lease first (owned elsewhere: a typed error — the seam for routing the
            # request to the owner), so the read below sees all its last owner committed.
            await self.leases.acquire(session_id)
            try:
                # Crash repair loads with the first session (idle RSS, issue 32 item 3).
                from agentd.session.eventlog import RECENT_KINDS, RECENT_LIMIT

                loaded = await self._store.load_session(
                    session_id, recent_kinds=RECENT_KINDS, recent_limit=RECENT_LIMIT
                )
                if loaded is None:
                    self.leases.release(session_id)
                    fut.set_result(None)
                    return None
                actor = await self._load(loaded)
            except BaseException:
                self.leases.release(session_id)
                raise
            self._actors[session_id] = actor
            fut.set_result(actor)
            return actor
        except BaseException as exc:
            if not fut.done():
                fut.set_exception(exc)
                fut.exception()  # mark retrieved
            raise
        finally:
            self._loading.pop(session_id, None)

    def _refuse_if_closing(self) -> None:
        # An actor created now would outlive the drain that stops all the others.
        if self.closing:
            raise shutting_down("server_shutting_down: the server is stopping; retry shortly")

    async def record(self, session_id: str) -> SessionRecord | None:
        return await self._store.get_session(session_id)

    async def _load(self, loaded: LoadedSession) -> SessionActor:
        """The actor of a session read from the store (one read: `Store.load_session`)."""
        writer = self._services.writer
        record = loaded.record
        messages = [Message.model_validate(m) for m in loaded.messages]
        actor = _actor_class()(record, messages, loaded.last_seq, self._services)
        from agentd.session.eventlog import recover

        await recover(self._store, actor, record, loaded.recent)
        # Recovery is committed before anyone can attach: it replays like any history.
        await writer.barrier()
        if writer.failed(record.id):
            writer.clear_failure(record.id)
            raise SessionError(
                SessionErrorKind.INTERNAL,
                f"session {record.id}: the database refused its recovery writes; retry",
                {"reason": RETRY_SESSION_FAILED, "retryable": True},  # the next request loads it again
            )
        actor.start()
        if self._services.settings.auto_resume:
            # Prompts a previous owner left queued (it died, or another replica's lease on
            # the session ran out) start again here, once: this is the session's only actor.
            actor.resume_queue()
        return actor

    async def resume_queued(self) -> list[str]:
        """At start-up: load every session with queued prompts and let it run them."""
        resumed = []
        for session_id in await self._store.sessions_with_queued_prompts():
            try:
                actor = await self.get(session_id)
            except SessionError as exc:
                if exc.kind is not SessionErrorKind.OWNED_ELSEWHERE:
                    raise
                continue  # another replica runs it
            if actor is not None:  # (a load resumes the queue itself; a live actor runs it)
                actor.resume_queue()
                resumed.append(session_id)
        return resumed

    async def evict_idle(
        self, idle_for: float, detached_for: float | None = None, *, now: float | None = None
    ) -> list[str]:
        """Evict actors idle (no clients, no work) for at least `idle_for` seconds, or for
        `detached_for` (default: `idle_for`) when they keep no processes either
        (session/eviction.py). `now`: the loop's clock unless given (tests)."""
        loop = asyncio.get_running_loop()
        shorter = idle_for if detached_for is None else detached_for
        evicted = []
        for session_id, actor in list(self._actors.items()):
            since = actor.idle_since()  # (first seen idle now: a grace of 0 evicts it at once)
            at = loop.time() if now is None else now
            due = evictable(
                since,
                at,
                keeps_processes=actor.keeps_processes(),
                idle_evict_s=idle_for,
                detached_evict_s=shorter,
            )
            if due:
                fut: asyncio.Future[bool] = asyncio.get_running_loop().create_future()

                def forget(a: SessionActor = actor) -> None:
                    self._begin_stop(a)

                from agentd.session.commands import Shutdown  # loaded with the actors (idle RSS)

                actor.send(Shutdown(5.0, fut, only_if_idle=True, on_stop=forget))
                done, _ = await asyncio.wait({fut}, timeout=5.0 + self.stop_wait)
                if not done:
                    # A slow database: it goes on stopping and stays registered until it
                    # has; requests for it wait. The sweep moves on.
                    log.warning("session %s: eviction still waiting for the database", session_id)
                elif fut.result():
                    evicted.append(session_id)
        if evicted:
            self.released.set()
        return evicted

    async def run_evictions(self, idle_for: float) -> None:
        """Background sweep (R-S5): checks a few times per grace (the shorter one,
        `detached_evict_s`, for actors that keep no processes)."""
        detached_for = min(self._services.settings.detached_evict_s, idle_for)
        while True:
            await asyncio.sleep(max(0.05, detached_for / 4))
            try:
                await self.evict_idle(idle_for, detached_for)
            except Exception:
                log.exception("evicting idle sessions failed")

    async def evict(self, session_id: str, grace: float = 5.0) -> None:
        """Stop a session's actor (its state is in the store; it is recreated on demand).
        Returns once the actor has really ended; when that takes longer than `grace` +
        `session_stop_wait_s` a retryable `session_stopping` error — the actor goes on stopping, and the
        session is not loaded again before it has."""
        actor = self._actors.get(session_id)
        if actor is not None:
            self._begin_stop(actor)
            from agentd.session.commands import Shutdown  # loaded with the actors (idle RSS)

            actor.send(Shutdown(grace, asyncio.get_running_loop().create_future()))
        await self._wait_stopped(session_id, grace + self.stop_wait, holds=False)

    async def delete(self, session_id: str) -> bool:
        if session_id in self._holds:  # a delete of it is already running
            await self._wait_stopped(session_id, self.stop_wait, holds=True)
        hold: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._holds[session_id] = hold
        try:
            loading = self._loading.get(session_id)
            if loading is not None:  # let a load in flight finish, then stop what it made
                await asyncio.wait({loading}, timeout=self.stop_wait)
            await self.evict(session_id, grace=1.0)
            deleted = await self._store.delete_session(session_id)
            self._services.writer.clear_failure(session_id)  # its actor has ended: nothing left
            return deleted
        finally:
            del self._holds[session_id]
            hold.set_result(None)

    def _begin_stop(self, actor: SessionActor) -> asyncio.Future[None]:
        """Take the actor out of service: it stays registered as stopping until its task
        has ended (the returned future)."""
        if self._actors.get(actor.id) is actor:
            del self._actors[actor.id]
            self.unloaded += 1  # its state is freed once it ends (the memory trimmer asks)
        ended = self._stopping.get(actor.id)
        if ended is not None:
            return ended
        ended = asyncio.get_running_loop().create_future()
        self._stopping[actor.id] = ended

        def finished(_task: object = None) -> None:
            # Before anything can load the session again: its actor wrote its last.
            self.leases.release(actor.id)
            self._forget_in_providers(actor.id)
            if self._stopping.get(actor.id) is ended:
                del self._stopping[actor.id]
            if not ended.done():
                ended.set_result(None)

        task = actor.task
        if task is None or task.done():
            finished()
        else:
            task.add_done_callback(finished)
        return ended

    def _forget_in_providers(self, session_id: str) -> None:
        """The providers keep a session's conversation, encoded, for its next call (their
        wire cache, the last 64 sessions): an unloaded session's need not stay (issue 32
        item 3: measured ~5 MiB kept after 100 sessions were evicted)."""
        for provider in (self._services.provider, *(lane.provider for lane in self._services.fallbacks)):
            forget = getattr(provider, "forget_session", None)
            if forget is not None:
                forget(session_id)

    async def _wait_stopped(self, session_id: str, within: float, *, holds: bool) -> None:
        """Wait until the session has no stopping actor (and, with `holds`, no delete
        running); a retryable `session_stopping` error after `within` seconds."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + within
        while True:
            pending = self._stopping.get(session_id) or (self._holds.get(session_id) if holds else None)
            if pending is None:
                return
            left = deadline - loop.time()
            done = (await asyncio.wait({pending}, timeout=left))[0] if left > 0 else set()
            if not done:
                raise session_stopping(session_id, within)

    def _session_failed(self, session_id: str, exc: BaseException) -> None:
        """The database refused one of the session's batches (the writer discards its
        later writes): stop the actor; the next request reloads the session from the
        store and continues from its real last seq."""
        if is_stale_fence(exc):  # another replica holds the session now (R-C1)
            self.leases.fenced_out(session_id)
        actor = self._actors.get(session_id)
        if actor is None:
            return
        log.error(
            "session %s: its actor stops after a refused write (%s); it reloads on demand", session_id, exc
        )
        self._begin_stop(actor)
        # Its clients hear no more from this actor: they resync from what they have.
        actor.hub.resync_all(ResyncReason.LEASE_LOST if is_stale_fence(exc) else ResyncReason.SESSION_FAILED)
        from agentd.session.commands import Shutdown  # loaded with the actors (idle RSS)

        actor.send(Shutdown(1.0, asyncio.get_running_loop().create_future()))

    def lease_lost(self, session_id: str) -> None:
        """Another replica took the session over (or the lease ran out unrenewed): what
        this actor has not committed yet is dropped, and so is the actor; its clients are
        told to resync (re-attaching reaches whoever owns the session now)."""
        self._services.writer.discard(session_id)
        actor = self._actors.get(session_id)
        if actor is None:
            return
        self._begin_stop(actor)
        actor.hub.resync_all(ResyncReason.LEASE_LOST)
        from agentd.session.commands import Shutdown  # loaded with the actors (idle RSS)

        actor.send(Shutdown(1.0, asyncio.get_running_loop().create_future()))

    async def fork(self, record: SessionRecord, up_to_seq: int) -> SessionRecord | None:
        return await self._store.fork_session(record, f"sess_{uuid.uuid4().hex}", up_to_seq)

    async def shutdown(self, grace: float = 5.0) -> None:
        self.closing = True
        loop = asyncio.get_running_loop()
        # The actors stay findable while they drain: a late prompt reaches its actor and
        # is answered `server_shutting_down`; `closing` keeps any new actor from starting.
        waits: list[asyncio.Future[Any]] = list(self._stopping.values())
        for actor in list(self._actors.values()):
            from agentd.session.commands import Shutdown  # loaded with the actors (idle RSS)

            actor.send(Shutdown(grace, loop.create_future(), server_stopping=True))
            if actor.task is not None:
                waits.append(actor.task)
        if waits:
            await asyncio.wait(waits, timeout=grace + 5)
        for session_id in list(self._actors):  # another replica may take them over at once
            self.leases.release(session_id)
        self._actors.clear()
