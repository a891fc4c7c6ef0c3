"""The per-frame paths written out for speed (issue 32 item 1) give what the general ones give:
a chunk's frame and its bytes, one encoding call for a frame, the learned `_agentd/event`
kinds, `for_client` handing back the very list, a connection's per-kind answers (which
follow `initialize`), the outgoing queue's `take` (as many `get_nowait` calls), a live
frame's capability gate (what `for_client` would ask) and the queue's one-call `offer`."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any, cast

import orjson

from agentd.core import (
    AgentTextChunk,
    CompactionProgress,
    CompactionStatus,
    PlanUpdated,
    ToolCallAnnounced,
    ToolCallFinished,
    ToolCallProgress,
    ToolCallStarted,
)
from agentd.core.events import Event, EventKind
from agentd.protocol import ClientCapabilities
from agentd.protocol.agentd import OptIn
from agentd.session import Gated
from agentd.session.eventlog.hub import EventHub
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
        assert encode_frame(fast[0]) == encode_message(*general[0])
    [(method, params)] = live_frames(chunk("0000001"), 7)
    assert encode_frame((method, params)) == (
        b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess_1","update":'
        b'{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"0000001"},'
        b'"messageId":"msg_1"},"_meta":{"agentd":{"seq":7,"transient":true}}}}'
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
            assert text == ACP_RENDERER.encode(frame) == encode_message(*frame)
            assert text.decode() == encode_notification(*frame)


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


def gated_events() -> list[Event]:
    user = {"messageId": "u1", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}
    return [
        chunk("a"),
        chunk("t", thought=True),
        Event.stored(SID, EventKind.PLAN, orjson.dumps({"sessionUpdate": "plan", "entries": []}), seq=1),
        Event.stored(SID, EventKind.NOTICE, orjson.dumps({"severity": "info", "title": "t"}), seq=2),
        Event.stored(SID, EventKind.TURN_STARTED, orjson.dumps({"turnId": "t1"}), seq=3),
        Event.stored(SID, EventKind.USER_MESSAGE, orjson.dumps(user), seq=4),  # two frames
    ]


def test_a_live_frames_gate_is_the_one_question_for_client_asks_of_it() -> None:
    # The hub answers the gate instead of calling `for_client`: the two must agree.
    for event in gated_events():
        frames = live_frames(event, 0)
        assert type(frames) is Gated
        asked: list[str] = []

        def supports(kind: str, asked: list[str] = asked) -> bool:
            asked.append(kind)
            return True

        for_client(frames, event, supports, 0)
        if len(frames) == 1:
            assert frames.gate is not None and asked == ([frames.gate] if frames.gate else [])
        else:
            assert frames.gate is None  # several frames: `for_client` decides


async def test_offer_queues_in_one_call_and_refuses_when_full_or_closed() -> None:
    q = OutgoingQueue(2)
    getter = asyncio.ensure_future(q.get())
    await asyncio.sleep(0)
    assert q.offer("a")  # wakes the waiting writer
    assert await asyncio.wait_for(getter, 10) == "a"
    assert q.offer("b") and q.offer("c") and not q.offer("d")  # the live bound
    assert q.take(10) == ["b", "c"]
    q.close()
    assert not q.offer("e") and q.empty()


async def test_a_connection_sends_encoded_text_through_its_queue_until_closed() -> None:
    conn = connection()
    assert conn.send_encoded("x") and conn._out.take(5) == ["x"]
    for i in range(10):
        assert conn.send_encoded(str(i))
    assert not conn.send_encoded("full")
    conn._out.take(10)
    writer = asyncio.ensure_future(asyncio.sleep(0))
    await conn._close(cast(Any, writer))
    assert not conn.send_encoded("late") and conn._out.empty()


def test_the_hub_follows_a_connections_capabilities_changed_after_it_subscribed() -> None:
    # The hub reads the connection's own per-kind answers (`supports_cache`), which a new
    # `initialize` clears: the next notice takes the new answer.
    conn = connection()
    conn.opt_in = OptIn(notifications=["*"])
    hub = EventHub(render=ACP_RENDERER)
    hub.subscribe(conn, SID).go_live(0)

    def notice(seq: int) -> Event:
        return Event.stored(SID, EventKind.NOTICE, orjson.dumps({"severity": "info", "title": "t"}), seq=seq)

    hub.publish(notice(1))
    conn.client_capabilities = ClientCapabilities.model_validate({"session": {"notices": {}}})
    hub.publish(notice(2))
    first, second = (orjson.loads(t) for t in conn._out.take(5))
    assert first["method"] == "_agentd/event"  # not advertised: agentd's own form
    assert second["method"] == "session/update" and second["params"]["update"]["sessionUpdate"] == "notice"


def general_live_frame(event: Event, last_seq: int) -> tuple[str, dict[str, Any]]:
    """What `live_frames` made before the written-out paths: `_acp_frames`' frame, else the
    permission resolution's, else `_ext`'s (the general functions, still used by replay)."""
    from agentd.transport.render import _ext, _meta

    frames = _acp_frames(event, last_seq, replay=False)
    if frames is not None:
        [frame] = frames
        return frame
    if event.kind is EventKind.PERMISSION_RESOLVED:
        return "_agentd/permission/resolved", {
            "sessionId": event.session_id,
            **event.payload,
            "_meta": _meta(event, last_seq),
        }
    return _ext(event, last_seq)


def test_the_written_out_live_frames_are_the_general_paths_frames_byte_for_byte() -> None:
    # `_agentd/event` kinds (once learned), a permission's resolution and the usage update
    # are built inline by `live_frames`: same frame, same gate, same bytes as the general
    # functions, durable and transient, first call and later ones.
    ledger = {"inputTokens": 3, "totalTokens": 4, "byLane": {"main": {}}, "cost": 0.1}
    usage = {"used": 4, "size": 100, "prompt": ledger, "cost": {"amount": 0.1, "currency": "USD"}}
    resolved = {"requestId": "r1", "outcome": "selected", "optionId": "allow"}
    for seq in (7, None):
        events = [
            Event.stored(SID, EventKind.TURN_STARTED, orjson.dumps({"turnId": "t1"}), seq=seq),
            Event.stored(SID, EventKind.PERMISSION_RESOLVED, orjson.dumps(resolved), seq=seq),
            Event.stored(SID, EventKind.USAGE, orjson.dumps(usage), seq=seq),
            Event.stored(SID, EventKind.USAGE, orjson.dumps({**usage, "cost": None}), seq=seq),
            Event(SID, ToolCallAnnounced("c1", "Read a.py", "read", {"path": "a.py"}), seq=seq),
            Event(SID, ToolCallStarted("c1"), seq=seq),
            Event(SID, ToolCallFinished("c1", False, [{"type": "text", "text": "ok"}], "ok"), seq=seq),
            Event(SID, ToolCallProgress("c1", [{"type": "text", "text": "partial"}]), seq=seq),
            Event(SID, PlanUpdated([{"content": "a", "status": "pending", "priority": "low"}]), seq=seq),
            Event(SID, CompactionProgress("k1", CompactionStatus.IN_PROGRESS), seq=seq),
        ]
        for event in events:
            for _ in range(3):  # the first call learns a kind; the later ones take the inline path
                frames = live_frames(event, 5)
                [frame] = frames
                want = general_live_frame(event, 5)
                assert frame == want
                assert encode_frame(frame) == encode_message(*want)
                assert type(frames) is Gated and frames.gate == (
                    want[1]["update"]["sessionUpdate"] if want[0] == "session/update" else want[0]
                )
    [(_, params)] = live_frames(events[2], 5)
    assert "byLane" not in params["_meta"]["agentd"]["turnUsage"] and "byLane" in ledger
