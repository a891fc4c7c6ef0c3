"""Calls that go to the database together (issue 26 item 5): `Batched(send)` coalesces
single calls into `send(items)` — one statement for every call made while the previous
statement was in flight, like a group commit. A call made while none is in flight goes
out at once, from the caller's own task (one client waits for nothing); those made
meanwhile wait for it to end and go out together as the next. At 200 concurrent routed
prompts this turns hundreds of statements (the log tails' reads, the owner's claims,
outcomes and replies) into a few.

`send` answers each item in order; when it fails, every call of that batch raises its
error and each caller retries (or gives up) by itself, as it would have alone. A call
cancelled before its batch went out is left out of it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, TypeVar

Item = TypeVar("Item")
Answer = TypeVar("Answer")
MAX_BATCH = 256  # items per statement (more wait for the next one)


class Batched(Generic[Item, Answer]):
    def __init__(
        self,
        send: Callable[[Sequence[Item]], Awaitable[Sequence[Answer]]],
        *,
        name: str,
        max_batch: int = MAX_BATCH,
    ) -> None:
        self._send_many = send
        self._name = name
        self._max = max_batch
        self._asked: list[tuple[Item, asyncio.Future[Answer]]] = []
        self._task: asyncio.Task[None] | None = None
        self._inline = False  # a call is sending its own item (nothing else was in flight)
        self.statements = 0  # batches sent so far (tests, benches)
        self.items = 0  # items they carried

    @property
    def waiting(self) -> int:
        """Calls made and not sent yet (waiting for the batch in flight)."""
        return len(self._asked)

    async def __call__(self, item: Item) -> Answer:
        if self._task is None and not self._inline:
            # Nothing in flight: sent at once from this task (no hand-over to another: a
            # lone call, the 1-client case, pays no more than the statement itself).
            self._inline = True
            try:
                self.statements += 1
                self.items += 1
                return (await self._send_many([item]))[0]
            finally:
                self._inline = False
                if self._asked and self._task is None:  # those that came meanwhile
                    self._task = asyncio.create_task(self._send(), name=self._name)
        future: asyncio.Future[Answer] = asyncio.get_running_loop().create_future()
        self._asked.append((item, future))
        return await future

    async def _send(self) -> None:
        batch: list[tuple[Item, asyncio.Future[Answer]]] = []
        try:
            while self._asked:
                batch, self._asked = self._asked[: self._max], self._asked[self._max :]
                batch = [(item, future) for item, future in batch if not future.done()]  # (cancelled)
                if not batch:
                    continue
                self.statements += 1
                self.items += len(batch)
                try:
                    answers = await self._send_many([item for item, _ in batch])
                except Exception as exc:  # each caller retries (or gives up) by itself
                    for _, future in batch:
                        if not future.done():
                            future.set_exception(exc)
                    continue
                for (_, future), answer in zip(batch, answers, strict=True):
                    if not future.done():
                        future.set_result(answer)
        finally:  # stopped: nobody is left waiting on a batch that will not be sent
            self._task = None
            for _, future in batch + self._asked:
                future.cancel()

    async def stop(self) -> None:
        task = self._task
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        for _, future in self._asked:  # (queued behind a call sending its own item)
            future.cancel()
        self._asked = []
