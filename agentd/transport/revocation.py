"""Revoking a token ends the streams it opened (R-X1, issue 28 item 3).

A token is checked when a WebSocket, an SSE stream or a Streamable HTTP connection opens;
those then live for hours, and a command forwarded to another replica may wait as long as a
turn. Each registers here under its token's hash, and a watcher re-checks the hashes of
all of them against the store every `AGENTD_TOKEN_RECHECK_S` seconds (one query), ending
those of any token gone or revoked. Polling the store rather than hooking the revoke call is
what catches `agentd token revoke`, another process writing the database — and every
replica polls the one database, so each ends its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from collections.abc import Awaitable, Callable
from enum import IntEnum, StrEnum
from typing import TypeVar

from agentd.store import Store

log = logging.getLogger(__name__)

T = TypeVar("T")

CLOSE_TIMEOUT_S = 5.0


class CloseCode(IntEnum):
    """WebSocket close codes of our own (4000-4999 is the application range)."""

    TOKEN_REVOKED = 4401  # like HTTP 401: reconnecting needs another token


class CloseReason(StrEnum):
    TOKEN_REVOKED = "token revoked"


Closer = Callable[[], Awaitable[None]]


class TokenRevoked(Exception):
    """The work was ended because the token it was done for was revoked."""


class LiveTokens:
    """Open streams by the hash of the token that authenticated them."""

    def __init__(self) -> None:
        self._streams: dict[str, dict[int, Closer]] = {}
        self._ids = itertools.count()

    def register(self, token_hash: str | None, closer: Closer) -> Callable[[], None]:
        """Track a stream; returns the function that forgets it (call it when the stream
        ends). Without a token (no auth) there is nothing to revoke."""
        if token_hash is None:
            return lambda: None
        key = next(self._ids)
        self._streams.setdefault(token_hash, {})[key] = closer

        def forget() -> None:
            streams = self._streams.get(token_hash)
            if streams is not None:
                streams.pop(key, None)
                if not streams:
                    del self._streams[token_hash]

        return forget

    def count(self) -> int:
        return sum(len(s) for s in self._streams.values())

    async def recheck(self, store: Store) -> int:
        """Close the streams of tokens no longer live; returns how many were closed."""
        hashes = list(self._streams)
        if not hashes:
            return 0
        live = await store.live_token_hashes(hashes)
        closers = [c for h in hashes if h not in live for c in self._streams.pop(h, {}).values()]
        if closers:
            log.info("closing %d stream(s) of revoked token(s)", len(closers))
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(CLOSE_TIMEOUT_S):
                    await asyncio.gather(*(c() for c in closers), return_exceptions=True)
        return len(closers)

    async def until_revoked(self, token_hash: str | None, work: Awaitable[T]) -> T:
        """`work`'s result — or TokenRevoked once its token is revoked (the work is then
        cancelled). For a request that may wait long, such as a command forwarded to the
        replica owning a session, waiting for its turn's end."""
        task = asyncio.ensure_future(work)
        if token_hash is None:
            return await task
        revoked = False

        async def end() -> None:
            nonlocal revoked
            revoked = True
            task.cancel()

        forget = self.register(token_hash, end)
        try:
            return await task
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if revoked and (current is None or not current.cancelling()):
                raise TokenRevoked(CloseReason.TOKEN_REVOKED.value) from None
            raise
        finally:
            forget()
            task.cancel()  # a no-op when it is done

    async def watch(self, store: Store, interval_s: float) -> None:
        """Run until cancelled (the app's lifespan owns the task)."""
        while True:
            await asyncio.sleep(interval_s)
            try:
                await self.recheck(store)
            except Exception:  # a database hiccup must not end revocation for good
                log.warning("re-checking live tokens failed; trying again", exc_info=True)
