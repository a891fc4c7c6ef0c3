"""The request path's shortcuts (issue 32 item 1): a frame classified by type and `in` goes
where the general checks sent it; `within_depth` only ever spares a walk that would have
passed; one call context per connection, its rate key worked out once."""

from __future__ import annotations

import asyncio
import random
from types import SimpleNamespace
from typing import Any, cast

import orjson

from agentd.infra import AuthMode
from agentd.transport.connection import Connection
from agentd.transport.guards import json_depth, within_depth


def random_document(rng: random.Random, depth: int = 0) -> Any:
    roll = rng.random()
    if depth > 9 or roll < 0.3:
        return rng.choice([1, "x", None, 2.5, True, "[{", "}]"])
    if roll < 0.65:
        return [random_document(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    return {str(i): random_document(rng, depth + 1) for i in range(rng.randint(0, 3))}


def test_within_depth_never_spares_a_walk_that_would_refuse() -> None:
    rng = random.Random(32)
    spared = 0
    for _ in range(3000):
        text = orjson.dumps(random_document(rng)).decode()
        for limit in (1, 3, 6, 64):
            if within_depth(text, limit):
                spared += 1
                assert json_depth(orjson.loads(text)) <= limit
    assert spared > 1000  # it does spare walks
    deep = "[" * 65 + "]" * 65
    assert not within_depth(deep, 64) and within_depth("[" * 64 + "]" * 64, 64)


class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[Any, bool]] = []

    async def handle(self, raw: Any, ctx: Any, *, shallow: bool = False) -> dict[str, Any] | None:
        self.calls.append((raw, shallow))
        await asyncio.Event().wait()  # stays in flight
        return None


def connection(recorder: Recorder) -> Connection:
    settings = SimpleNamespace(client_buffer_frames=100, max_frame_bytes=1 << 20, max_json_depth=8)
    state = SimpleNamespace(settings=settings)
    return Connection(cast(Any, None), cast(Any, state), cast(Any, recorder), "alice")


async def test_frames_go_where_the_general_checks_sent_them() -> None:
    recorder = Recorder()
    conn = connection(recorder)
    deep: Any = 1
    for _ in range(9):
        deep = [deep]
    frames: list[Any] = [
        {"jsonrpc": "2.0", "id": 1, "method": "session/prompt", "params": {"prompt": []}},
        {"jsonrpc": "2.0", "id": "a", "method": "x", "params": deep},  # past the limit: walked
        {"jsonrpc": "2.0", "id": True, "method": "x"},  # handled, never registered by id
        {"jsonrpc": "2.0", "id": 2.5, "method": "x"},
        {"jsonrpc": "2.0", "method": "note"},  # a notification
        {"jsonrpc": "2.0", "id": 9, "result": {}},  # a response: not a request
        {"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": 7}},  # unknown
        {"jsonrpc": "2.0", "id": 3},  # no method, no result: the dispatcher refuses it
        None,
        5,
    ]
    for frame in frames:
        conn._on_frame(orjson.dumps(frame).decode())
    conn._on_frame("not json")
    conn._on_frame("[]")
    await asyncio.sleep(0)  # the spawned handlers start
    handled = [raw for raw, _ in recorder.calls]
    assert handled == [frames[i] for i in (0, 1, 2, 3, 4, 7, 8, 9)]
    assert [shallow for _, shallow in recorder.calls] == [True, False, True, True, True, True, False, False]
    assert set(conn._requests) == {1, "a"} and not conn._cancelled
    cancel = {"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": 1}}
    conn._on_frame(orjson.dumps(cancel).decode())
    assert conn._cancelled == {1} and len(recorder.calls) == 8  # a notification: not handled
    answered = [orjson.loads(f) for f in conn._out.take(10)]
    assert [a["error"]["code"] for a in answered] == [-32700, -32600]
    assert answered[1]["error"]["message"] == "empty batch"
    for task in list(conn._tasks):
        task.cancel()
    await asyncio.gather(*conn._tasks, return_exceptions=True)


def test_a_connection_keeps_one_call_context_with_its_rate_key() -> None:
    conn = connection(Recorder())
    conn.state.auth = cast(Any, SimpleNamespace(mode=AuthMode.NONE))
    ctx = conn._context()
    assert conn._context() is ctx and ctx.connection is conn
    assert ctx.rate_key == "conn:" + conn.id and ctx.rate_key is ctx.rate_key


class Immediate:
    async def handle(self, raw: Any, ctx: Any, *, shallow: bool = False) -> dict[str, Any] | None:
        return None  # answered without a suspension


async def test_a_request_task_leaves_the_set_in_its_own_last_step() -> None:
    """No done-callback (one loop pass after every reply, issue 32): the task is out of
    `_tasks` when the pass that ran it ends — and a task cancelled before its first step,
    which never runs `_handle_one`'s `finally`, still leaves it."""
    conn = connection(cast(Any, Immediate()))
    conn._on_frame(orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": "x"}).decode())
    (task,) = conn._tasks
    await asyncio.sleep(0)  # the handler's step runs before this task's resumption, nothing after
    assert task.done() and not conn._tasks and not conn._requests
    conn._on_frame(orjson.dumps({"jsonrpc": "2.0", "id": 2, "method": "x"}).decode())
    (task,) = conn._tasks
    cancel = {"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": 2}}
    conn._on_frame(orjson.dumps(cancel).decode())  # before the handler ever ran
    await asyncio.gather(task, return_exceptions=True)
    await asyncio.sleep(0)  # (its done-callback's pass)
    assert task.cancelled() and not conn._tasks
