"""`cork.hold()`/`release()` (agentd/core/cork.py): a flush deferred while held runs once, at
the outermost release; with nothing held it is not deferred; each thread has its own."""

from __future__ import annotations

import threading

from agentd.core import cork


def test_a_deferred_flush_runs_once_at_the_outermost_release() -> None:
    ran: list[str] = []

    def flush() -> None:
        ran.append("a")

    assert cork.defer(flush) is False  # nothing held: the caller flushes now
    cork.hold()
    cork.hold()
    assert cork.defer(flush) and cork.defer(flush)
    cork.release()
    assert ran == []  # still held by the outer stretch
    cork.release()
    assert ran == ["a"]
    cork.hold()
    cork.release()
    assert ran == ["a"]  # nothing left over


def test_each_thread_holds_its_own() -> None:
    cork.hold()
    try:
        seen: list[bool] = []
        t = threading.Thread(target=lambda: seen.append(cork.defer(lambda: None)))
        t.start()
        t.join()
        assert seen == [False]  # another loop's thread is not held by this one
    finally:
        cork.release()
