"""Ids that need only be unique (agentd/core/ids.py `FAST_IDS`: bits from a generator
seeded once per process, not a system call per id): the same format as `os.urandom(n).hex()`
both ways, no repeats, and a forked child does not repeat its parent's."""

from __future__ import annotations

import os
import re

import pytest

from agentd.core import ids
from agentd.loop.react.sampling import Sample
from agentd.session.queue.entry import new_id


@pytest.fixture(params=[True, False], ids=["fast", "urandom"])
def fast(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> bool:
    monkeypatch.setattr(ids, "FAST_IDS", request.param)
    return bool(request.param)


def test_the_formats_are_kept(fast: bool) -> None:
    for n in (1, 6, 8, 10, 16):
        drawn = [ids.random_hex(n) for _ in range(200)]
        assert all(re.fullmatch(f"[0-9a-f]{{{2 * n}}}", h) for h in drawn)
    assert re.fullmatch(r"q_[0-9a-f]{20}", new_id("q"))
    sample = Sample()
    assert re.fullmatch(r"msg_[0-9a-f]{16}", sample.message_id)
    assert re.fullmatch(r"thought_[0-9a-f]{16}", sample.thought_id)


def test_no_id_repeats(fast: bool) -> None:
    drawn = [new_id("q") for _ in range(20_000)] + [Sample().message_id for _ in range(20_000)]
    assert len(set(drawn)) == len(drawn)
    # Leading zeros are kept (a short number is padded, not a shorter id).
    assert {len(h) for h in (ids.random_hex(10) for _ in range(5000))} == {20}


def test_a_forked_child_draws_other_ids(fast: bool) -> None:
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its next ids, to the parent
        try:
            os.write(write, " ".join(new_id("q") for _ in range(50)).encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as f:
        child = set(f.read().split())
    os.waitpid(pid, 0)
    parent = {new_id("q") for _ in range(50)}
    assert len(child) == 50
    assert not child & parent
