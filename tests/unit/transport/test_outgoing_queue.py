"""agentd/transport/outgoing.py: a client's outgoing frames in order, live frames bounded
(refused when full), responses awaiting room, replay frames paced by their own window."""

from __future__ import annotations

import asyncio

import pytest

from agentd.transport.outgoing import OutgoingQueue


async def parked(q: OutgoingQueue, *, getters: int = 0, putters: int = 0, replay: bool = False) -> None:
    """Until that many tasks wait on `q` (a replay frame: for its window's room) — a state,
    not a time: one loop step each try."""
    for _ in range(1000):
        waiting_replay = not replay or not q._room.is_set()
        if len(q._getters) >= getters and len(q._putters) >= putters and waiting_replay:
            return
        await asyncio.sleep(0)
    raise AssertionError(f"never {getters} getters, {putters} putters, replay={replay} waiting")


async def test_frames_come_out_in_order_and_live_ones_are_refused_when_full() -> None:
    q = OutgoingQueue(2, replay_window=2)
    q.put_nowait("a")
    await q.put_replay("r1")  # replay frames do not count against the live bound
    q.put_nowait("b")
    assert q.full() and q.qsize() == 3
    with pytest.raises(asyncio.QueueFull):
        q.put_nowait("c")
    assert [q.get_nowait() for _ in range(3)] == ["a", "r1", "b"]
    assert q.empty() and not q.full()
    with pytest.raises(asyncio.QueueEmpty):
        q.get_nowait()


async def test_a_waiting_get_wakes_on_a_live_or_a_replay_frame() -> None:
    q = OutgoingQueue(4)
    for put in (lambda: q.put_nowait("live"), lambda: asyncio.ensure_future(q.put_replay("replay"))):
        getter = asyncio.ensure_future(q.get())
        await parked(q, getters=1)
        assert not getter.done()
        put()
        assert await asyncio.wait_for(getter, 5) in ("live", "replay")


async def test_a_response_awaits_room_and_is_never_dropped() -> None:
    q = OutgoingQueue(1)
    q.put_nowait("live")
    first = asyncio.ensure_future(q.put("response 1"))
    second = asyncio.ensure_future(q.put("response 2"))
    await parked(q, putters=2)
    assert not first.done() and not second.done()
    assert q.get_nowait() == "live"
    await asyncio.wait_for(first, 5)
    assert not second.done()  # one frame of room: one response in, the other still waits
    assert await q.get() == "response 1"
    await asyncio.wait_for(second, 5)
    assert q.get_nowait() == "response 2"


async def test_a_cancelled_put_passes_its_room_on() -> None:
    q = OutgoingQueue(1)
    q.put_nowait("live")
    cancelled = asyncio.ensure_future(q.put("gone"))
    waiting = asyncio.ensure_future(q.put("kept"))
    await parked(q, putters=2)
    assert q.get_nowait() == "live"  # wakes `cancelled`, which is cancelled before it runs
    cancelled.cancel()
    await asyncio.wait_for(waiting, 5)
    assert q.get_nowait() == "kept" and q.empty()


async def test_replay_frames_wait_for_room_in_their_window() -> None:
    q = OutgoingQueue(1, replay_window=2)
    await q.put_replay("r1")
    await q.put_replay("r2")
    third = asyncio.ensure_future(q.put_replay("r3"))
    await parked(q, replay=True)
    assert not third.done()
    q.put_nowait("live")  # the live bound is apart from the replay window
    assert q.get_nowait() == "r1"
    await asyncio.wait_for(third, 5)
    assert [q.get_nowait() for _ in range(3)] == ["r2", "live", "r3"]


async def test_a_waiter_is_done_once_a_frame_is_queued_and_takes_nothing() -> None:
    q = OutgoingQueue(4)
    cancelled, waiter = q.waiter(), q.waiter()
    cancelled.cancel()  # (a writer cancelled while it waited)
    assert not waiter.done()
    assert q.offer("a")
    assert waiter.done() and q.qsize() == 1  # woken past the cancelled one; the frame stays
    assert q.take(4) == ["a"]
    replay = q.waiter()
    await q.put_replay("r")
    assert replay.done() and q.take(4) == ["r"]


@pytest.mark.parametrize("take", [1, 2, 3, 100])
async def test_live_and_replay_frames_interleaved_keep_both_counts_however_they_are_taken(take: int) -> None:
    # Which frames are replay ones is kept by position (no flag per frame): taken in any
    # slices, one by one or all at once, each bound counts only its own frames.
    q = OutgoingQueue(3, replay_window=3)
    order = ["l1", "r1", "r2", "l2", "r3", "l3"]
    for item in order:
        if item[0] == "r":
            await q.put_replay(item)
        else:
            assert q.offer(item)
    assert q.full() and not q.offer("l4")  # 3 live frames queued; the replays do not count
    assert q._replayed == 3
    blocked = asyncio.ensure_future(q.put_replay("r4"))
    await parked(q, replay=True)
    out: list[str] = []
    while len(out) < 2:  # the first two out: one live frame and one replay frame
        out += q.take(min(take, 2 - len(out)))
    assert out == ["l1", "r1"] and q._replayed == 2 and not q.full()
    await asyncio.wait_for(blocked, 5)  # its window had room again
    assert q.offer("l4") and q.full()
    while q.qsize():
        out += q.take(take) if take > 1 else [q.get_nowait()]
    assert out == ["l1", "r1", "r2", "l2", "r3", "l3", "r4", "l4"]
    assert q._replayed == 0 and not q._replay_at and q._room.is_set()
    await q.put_replay("r5")  # positions keep counting after everything was taken
    assert q.offer("l5")
    assert q.take(1) == ["r5"] and q._replayed == 0 and q.take(1) == ["l5"]
