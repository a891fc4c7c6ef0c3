"""`LogTail.caught_up` (issue 26 item 5): before a routed command's answer goes to the
client, everything announced so far is published — with no read of the log when it
already is (the answer arrives on the listener after the notification of the events
committed before it), with one when a seq was announced beyond the cursor or a wake-up
without a seq (the listener reconnected) may have hidden one."""

from __future__ import annotations

import pytest

from agentd.core.events import Event
from agentd.session.replicas.log_tail import LogTail
from agentd.store.db import Batch, Store
from tests.support.databases import event_write

pytestmark = pytest.mark.timeout(60)
SID = "s-watched"


async def test_caught_up_reads_only_when_something_announced_may_be_unpublished(migrated_db_url: str) -> None:
    store = await Store.open(migrated_db_url)
    await store.migrate()
    await store.create_session(id=SID, owner="o", cwd="/w", mode="default", model="m")
    try:
        got: list[Event] = []
        tail = LogTail(store, SID, got.append, after_seq=0)
        events = [event_write(s, "agent_message", {"messageId": f"m{s}", "text": str(s)}) for s in (1, 2, 3)]
        await store.commit([Batch(SID, events=events)])
        await tail.caught_up()
        assert tail.reads == 0 and got == []  # nothing announced: nothing to wait for
        tail.wake(3)
        await tail.caught_up()
        assert [e.seq for e in got] == [1, 2, 3] and tail.reads == 1
        await tail.caught_up()
        assert tail.reads == 1  # published already: no read
        tail.wake()  # a reconnect: anything may have been missed
        await tail.caught_up()
        assert tail.reads == 2 and len(got) == 3
    finally:
        await store.close()
