"""A client that fell behind gets its queued text chunks of one message as one chunk
(agentd/transport/outgoing.py `merge_chunks`): the text a client assembles is the same, the
other bytes of the frame are those of its chunks, and nothing else is ever merged."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from agentd.transport.outgoing import MERGE_FRAME_MAX, MERGED_TEXT_MAX, merge_chunks

pytestmark = pytest.mark.timeout(30)

TEXTS = ['a "quoted" word', "back\\slash\\", "é ünïcode 🎉", "ctl\n\t\x01", "</script>", "", "plain"]


def chunk(
    text: str, *, mid: str | None = "msg_1", seq: int = 3, transient: bool = True, **extra: Any
) -> bytes:
    """A chunk as the live renderer encodes it (agentd/transport/render.py `live_frames`)."""
    kind = extra.pop("kind", "agent_message_chunk")
    body: dict[str, Any] = {"sessionUpdate": kind, "content": {"type": "text", "text": text}}
    if mid is not None:
        body["messageId"] = mid
    agentd: dict[str, Any] = {"seq": seq, "transient": True} if transient else {"seq": seq}
    agentd.update(extra)
    params = {"sessionId": "sess_1", "update": body, "_meta": {"agentd": agentd}}
    return orjson.dumps({"jsonrpc": "2.0", "method": "session/update", "params": params})


def text_of(frame: bytes) -> str:
    return str(orjson.loads(frame)["params"]["update"]["content"]["text"])


def test_a_run_of_chunks_is_one_chunk_of_their_joined_text_byte_for_byte() -> None:
    for kind in ("agent_message_chunk", "agent_thought_chunk"):
        for mid in ("msg_1", None):
            frames = [chunk(t, mid=mid, kind=kind) for t in TEXTS]
            assert merge_chunks(frames) == [chunk("".join(TEXTS), mid=mid, kind=kind)]


def test_only_chunks_alike_but_for_their_text_are_merged_and_the_order_is_kept() -> None:
    other = orjson.dumps({"jsonrpc": "2.0", "method": "_agentd/event", "params": {}})
    frames = [
        chunk("a"),
        chunk("b"),
        chunk("c", mid="msg_2"),  # another message
        chunk("d", mid="msg_2", kind="agent_thought_chunk"),  # another kind
        chunk("e", mid="msg_2", kind="agent_thought_chunk", seq=4),  # another seq
        chunk("f", mid="msg_2", kind="agent_thought_chunk", seq=4, transient=False),  # durable
        chunk("g", mid="msg_2", kind="agent_thought_chunk", seq=4, transient=False),
        chunk("h", seq=4, final=True),  # the final chunk replaces a partial copy
        chunk("i", seq=4, final=True),
        other,  # anything else ends a run
        chunk("j"),
        chunk("k"),
    ]
    merged = merge_chunks(frames)
    assert merged == [chunk("ab"), *frames[2:10], chunk("jk")]
    assert all(a is b for a, b in zip(merged[1:9], frames[2:10], strict=True))  # untouched objects
    assert merge_chunks([frames[0]])[0] is frames[0]


def test_the_writers_markers_and_escaped_ids_pass_through() -> None:
    marker = object()
    odd = chunk("x", mid='msg_"1"')  # an escape in an id: not merged
    assert merge_chunks([chunk("a"), marker, chunk("b"), odd, odd]) == [
        chunk("a"),
        marker,
        chunk("b"),
        odd,
        odd,
    ]


def test_merged_frames_stay_small() -> None:
    piece = "x" * 1000
    frames = [chunk(piece) for _ in range(40)]
    merged = merge_chunks(frames)
    assert "".join(map(text_of, merged)) == piece * 40
    assert all(len(text_of(f)) <= MERGED_TEXT_MAX for f in merged) and len(merged) == 3
    big = chunk("y" * MERGE_FRAME_MAX)  # a frame that long is never looked at
    assert merge_chunks([big, big]) == [big, big]
