"""agentd/store/export_rows.py on SQLite and Postgres: a session's rows read out and written
back whole, under a new id when its own is taken, and in one transaction — a row the
database refuses leaves nothing of the import behind."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from agentd.store import snapshots as snaps
from agentd.store.db import Batch, Store
from agentd.store.export_rows import ImportConflict, read_bundle, write_bundle
from agentd.store.queue_rows import QueueWrite
from agentd.store.snapshots import FileSnapshot
from tests.support.databases import event_write


@pytest.fixture
async def store(migrated_db_url: str) -> AsyncIterator[Store]:
    s = await Store.open(migrated_db_url)
    await s.migrate()
    try:
        yield s
    finally:
        await s.close()


def _prompt(prompt_id: str, owner: str) -> dict[str, object]:
    return {
        "id": prompt_id,
        "position": 1,
        "kind": "prompt",
        "version": 1,
        "owner": owner,
        "last_editor": owner,
        "send_now": False,
        "request_id": None,
        "blocks": [{"type": "text", "text": f"from {owner}"}],
        "meta": {},
    }


async def _seeded(store: Store, sid: str) -> None:
    await store.create_session(id=sid, owner="alice", cwd="/w", mode="default", model="m")
    events = [
        event_write(1, "user_message", {"messageId": "u1"}),
        event_write(2, "agent_message", {"text": "hi"}),
    ]
    queue = QueueWrite(upserts=[_prompt(f"{sid}_a", "alice"), _prompt(f"{sid}_b", "bob")])
    batch = Batch(sid, events=events, messages=[(0, {"role": "user", "content": "hi"})], queue=[queue])
    batch.session_fields = {"goal": {"objective": "o"}, "usage": {"calls": 1}}
    await store.commit([batch])
    await snaps.add_snapshot(store.engine, sid, FileSnapshot("t1", "a.txt", "present", b"old"), 3)


async def test_read_then_write_elsewhere_keeps_the_rows(store: Store) -> None:
    await _seeded(store, "sess_src")
    bundle = await read_bundle(store.engine, "sess_src")
    assert bundle is not None
    assert [q["id"] for q in bundle.queue] == ["sess_src_a"]  # bob's prompt is bob's: not exported
    assert bundle.session["goal"] == {"objective": "o"} and bundle.snapshots[0].content == b"old"

    copy = await write_bundle(store.engine, bundle, owner="carol", cwd="/elsewhere")

    assert copy != "sess_src"  # its id is taken here: a new one
    again = await read_bundle(store.engine, copy)
    assert again is not None
    assert (again.events, again.messages, again.snapshots) == (
        bundle.events,
        bundle.messages,
        bundle.snapshots,
    )
    record = await store.get_session(copy)
    assert record is not None and record.owner == "carol" and record.cwd == "/elsewhere"
    assert record.queue is not None and [q["owner"] for q in record.queue] == ["carol"]
    assert await read_bundle(store.engine, "sess_nope") is None


async def test_a_refused_row_leaves_nothing_of_the_import(store: Store) -> None:
    await _seeded(store, "sess_src")
    bundle = await read_bundle(store.engine, "sess_src")
    assert bundle is not None
    # Its id is free here, so its prompts keep their ids — which the original holds: the
    # queue rows fail after the session, its events and messages went in.
    bundle.session["id"] = "sess_new"

    with pytest.raises(ImportConflict, match="conflicts with one stored here"):
        await write_bundle(store.engine, bundle, owner="alice", cwd="/w")

    assert await store.get_session("sess_new") is None
    assert await store.read_events("sess_new") == []
    assert await store.load_messages("sess_new") == []
    assert await snaps.stored_bytes(store.engine, "sess_new") == 0
