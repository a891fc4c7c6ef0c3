"""`cork.hold_writes()`/`release()` (agentd/core/cork.py): a flush deferred while held runs once, at
the outermost release; with nothing held it is not deferred; each thread has its own."""

from __future__ import annotations

import threading

from agentd.core import cork


def test_a_deferred_flush_runs_once_at_the_outermost_release() -> None:
    ran: list[str] = []

    def flush() -> None:
        ran.append("a")

    assert cork.defer_flush(flush) is False  # nothing held: the caller flushes now
    cork.hold_writes()
    cork.hold_writes()
    assert cork.defer_flush(flush) and cork.defer_flush(flush)
    cork.release_writes()
    assert ran == []  # still held by the outer stretch
    cork.release_writes()
    assert ran == ["a"]
    cork.hold_writes()
    cork.release_writes()
    assert ran == ["a"]  # nothing left over


def test_each_thread_holds_its_own() -> None:
    cork.hold_writes()
    try:
        seen: list[bool] = []
        t = threading.Thread(target=lambda: seen.append(cork.defer_flush(lambda: None)))
        t.start()
        t.join()
        assert seen == [False]  # another loop's thread is not held by this one
    finally:
        cork.release_writes()
