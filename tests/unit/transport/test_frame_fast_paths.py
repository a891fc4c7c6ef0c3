"""The per-frame paths written out for speed (issue 32 item 1) give what the general ones give:
a chunk's frame and its bytes, one encoding call for a frame, the learned `_agentd/event`
kinds, `for_client` handing back the very list, a connection's per-kind answers (which
follow `initialize`), and the outgoing queue's `take` (as many `get_nowait` calls)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any, cast

import orjson

from agentd.core import AgentTextChunk
from agentd.core.events import Event, EventKind
from agentd.protocol import ClientCapabilities
from agentd.protocol.agentd import OptIn
from agentd.transport.connection import Connection
from agentd.transport.outgoing import OutgoingQueue
from agentd.transport.render import (
    ACP_RENDERER,
    _acp_frames,
    encode_frame,
    encode_message,
    encode_notification,
    for_client,
    live_frames,
)

SID = "sess_1"


def chunk(text: str, *, thought: bool = False, seq: int | None = None) -> Event:
    return Event(SID, AgentTextChunk("msg_1", text, 0, thought=thought), seq=seq)


def test_a_chunks_frame_is_the_general_paths_frame_byte_for_byte() -> None:
    for event in (chunk("hé\n"), chunk("why", thought=True), chunk("x", seq=4)):
        fast = live_frames(event, 3)
        general = _acp_frames(event, 3, replay=False)
        assert general is not None and fast == general
        assert encode_frame(fast[0]) == encode_notification(*general[0])
    [(method, params)] = live_frames(chunk("0000001"), 7)
    assert encode_frame((method, params)) == (
        '{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess_1","update":'
        '{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"0000001"},'
        '"messageId":"msg_1"},"_meta":{"agentd":{"seq":7,"transient":true}}}}'
    )


def test_one_encoding_call_gives_what_the_notification_encoders_give() -> None:
    plan = {"sessionUpdate": "plan", "entries": []}
    notice = {"severity": "info", "title": "done"}
    events = [
        Event.stored(SID, EventKind.PLAN, orjson.dumps(plan), seq=1),  # a stored update
        Event.stored(SID, EventKind.NOTICE, orjson.dumps(notice), seq=2),
        Event.stored(SID, EventKind.TURN_STARTED, orjson.dumps({"turnId": "t1"}), seq=3),
    ]
    for event in events:
        for frame in live_frames(event, 0) + for_client(live_frames(event, 0), event, lambda _: False, 0):
            text = encode_frame(frame)
            assert text == ACP_RENDERER.encode(frame) == encode_notification(*frame)
            assert text.encode() == encode_message(*frame)


def test_an_event_without_an_acp_form_renders_alike_once_its_kind_is_learned() -> None:
    started = Event.stored(SID, EventKind.TURN_STARTED, orjson.dumps({"turnId": "t1"}), seq=5)
    first, again = live_frames(started, 5), live_frames(started, 5)
    assert first == again == [("_agentd/event", first[0][1])]
    assert first[0][1]["kind"] == "turn_started" and first[0][1]["event"] == {"turnId": "t1"}


def test_for_client_hands_back_the_list_when_the_client_may_have_it_all() -> None:
    frames = live_frames(chunk("a"), 1)
    assert for_client(frames, chunk("a"), lambda _: True, 1) is frames
    notice = Event.stored(SID, EventKind.NOTICE, orjson.dumps({"severity": "info", "title": "t"}), seq=2)
    gated = live_frames(notice, 2)
    # A client without the notice capability gets it as an `_agentd/event`, if it opted in...
    [(method, _)] = for_client(gated, notice, lambda u: u != "notice", 2)
    assert method == "_agentd/event"
    # ...and nothing if it did not.
    assert for_client(gated, notice, lambda _: False, 2) == []


def connection() -> Connection:
    state = SimpleNamespace(settings=SimpleNamespace(client_buffer_frames=10))
    return Connection(cast(Any, None), cast(Any, state), cast(Any, None), "alice")


def test_a_connections_answers_follow_what_initialize_sets() -> None:
    conn = connection()
    assert not conn.supports_update("notice") and conn.supports_update("agent_message_chunk")
    assert not conn.supports_update("_agentd/event")
    conn.client_capabilities = ClientCapabilities.model_validate({"session": {"notices": {}}})
    conn.opt_in = OptIn(notifications=["*"])
    assert conn.supports_update("notice") and conn.supports_update("_agentd/event")
    conn.client_capabilities = ClientCapabilities()
    assert not conn.supports_update("notice")


async def test_take_leaves_the_queue_as_as_many_get_nowait_calls_would() -> None:
    q = OutgoingQueue(2, replay_window=1)
    q.put_nowait("a")
    await q.put_replay("r")
    q.put_nowait("b")
    waiting = asyncio.ensure_future(q.put_replay("r2"))  # the replay window is full
    putter = asyncio.ensure_future(q.put("c"))  # the live bound too
    await asyncio.sleep(0)
    assert not waiting.done() and not putter.done()
    assert q.take(2) == ["a", "r"]  # room for a live frame and a replay frame
    await asyncio.wait_for(asyncio.gather(waiting, putter), 10)
    assert q.take(0) == [] and q.take(10) == ["b", "r2", "c"]
    assert q.empty() and not q.full() and q.take(1) == []
