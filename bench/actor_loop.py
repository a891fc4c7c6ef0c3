"""What the actor's loop costs per command and per turn end, its two shapes side by side (issue
27 item 3; prints figures, no asserts):

    .venv/bin/python bench/actor_loop.py [--commands 50000] [--turns 20000] [--rounds 3]

- *before*: `await mailbox.get()`; a turn's end was one more command, `TurnFinished`, which
  the turn's task put in the mailbox as it finished;
- *now* (the loop of agentd/session/actor/session_actor.py, reproduced here): the next
  command or the running turn's task, whichever completes first — a turn's end is its task
  completing. With no turn running, or a command already waiting, it awaits the mailbox
  alone, as before; only while a turn runs and the mailbox is empty does it make a `get`
  task and `asyncio.wait` on both.

A driver sends one command at a time and waits for the actor to handle it (the actor is
suspended in between, as in a server), with no turn and with a turn running; then N turns,
each a task that finishes at once, are started and ended one after the other. Figures are
µs per command or per turn, the best of `--rounds`.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from asyncio import FIRST_COMPLETED
from dataclasses import dataclass, field


@dataclass
class Command:
    done: asyncio.Future[None] | None = None  # resolved when handled
    start_turn: bool = False  # starts a turn that finishes at once


class TurnFinished:
    pass


@dataclass
class Actor:
    mailbox: asyncio.Queue[object] = field(default_factory=asyncio.Queue)
    turn: asyncio.Task[None] | None = None
    turn_ended: asyncio.Future[None] | None = None
    stop: bool = False

    def handle(self, cmd: object, by_message: bool) -> None:
        if isinstance(cmd, TurnFinished):
            self.end_turn()
        elif isinstance(cmd, Command):
            if cmd.start_turn:
                self.turn = asyncio.create_task(self.run_turn(by_message))
            if cmd.done is not None:
                cmd.done.set_result(None)
        else:
            self.stop = True

    async def run_turn(self, by_message: bool) -> None:
        if by_message:
            self.mailbox.put_nowait(TurnFinished())

    def end_turn(self) -> None:
        self.turn = None
        if self.turn_ended is not None:
            self.turn_ended.set_result(None)

    async def before(self) -> None:
        while not self.stop:
            self.handle(await self.mailbox.get(), by_message=True)

    async def now(self) -> None:
        get: asyncio.Task[object] | None = None
        while not self.stop:
            turn = self.turn
            if turn is not None and turn.done():
                self.end_turn()
            elif get is not None and get.done():
                cmd, get = get.result(), None
                self.handle(cmd, by_message=False)
            elif get is None and (turn is None or not self.mailbox.empty()):
                self.handle(await self.mailbox.get(), by_message=False)
            else:
                if get is None:
                    get = asyncio.create_task(self.mailbox.get())
                await asyncio.wait({get} if turn is None else {get, turn}, return_when=FIRST_COMPLETED)


async def commands(shape: str, n: int, with_turn: bool) -> float:
    actor = Actor()
    loop = asyncio.get_running_loop()
    runner = asyncio.create_task(getattr(actor, shape)())
    never = asyncio.create_task(asyncio.Event().wait())
    if with_turn:
        actor.turn = never  # a turn that runs throughout
    start = time.perf_counter()
    for _ in range(n):
        done = loop.create_future()
        actor.mailbox.put_nowait(Command(done))
        await done
    elapsed = time.perf_counter() - start
    actor.turn = None
    actor.mailbox.put_nowait(object())
    await runner
    never.cancel()
    return elapsed


async def turns(shape: str, n: int) -> float:
    actor = Actor()
    loop = asyncio.get_running_loop()
    runner = asyncio.create_task(getattr(actor, shape)())
    start = time.perf_counter()
    for _ in range(n):
        actor.turn_ended = loop.create_future()
        actor.mailbox.put_nowait(Command(start_turn=True))
        await actor.turn_ended
    elapsed = time.perf_counter() - start
    actor.mailbox.put_nowait(object())
    await runner
    return elapsed


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--commands", type=int, default=50_000)
    parser.add_argument("--turns", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    rows = {"command, no turn": [], "command, a turn running": [], "turn (start and end)": []}
    for _ in range(args.rounds):  # the shapes alternate, so a noisy moment hits both
        for shape in ("before", "now"):
            rows["command, no turn"].append((shape, await commands(shape, args.commands, False)))
            rows["command, a turn running"].append((shape, await commands(shape, args.commands, True)))
            rows["turn (start and end)"].append((shape, await turns(shape, args.turns)))
    print(f"{'µs per':26} {'before':>8} {'now':>8} {'now/before':>11}")
    for name, runs in rows.items():
        n = args.turns if name.startswith("turn") else args.commands
        before = min(t for s, t in runs if s == "before") / n * 1e6
        now = min(t for s, t in runs if s == "now") / n * 1e6
        print(f"{name:26} {before:8.2f} {now:8.2f} {now / before:11.2f}")


if __name__ == "__main__":
    asyncio.run(main())
